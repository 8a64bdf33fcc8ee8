//! `show tls`: each tls-profile's certificate with its expiry, and the TLS connection counters.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::status::TlsReport;

/// The text view.
pub(crate) fn text(t: &TlsReport) -> String {
    let mut out = String::new();
    if t.certificates.is_empty() {
        out.push_str("no tls-profile with a certificate\n");
    }
    for c in &t.certificates {
        let _ = writeln!(
            out,
            "{:<16} expires {} ({} days){}  {}",
            c.profile,
            c.expires,
            c.days_left,
            if c.expiring { "  EXPIRING" } else { "" },
            c.file
        );
    }
    let s = &t.connections;
    let _ = writeln!(
        out,
        "connections open {}, accepted {}, dialled {}; handshakes {}, refused {}, timed out {}",
        s.open, s.accepted, s.dialled, s.handshakes, s.handshake_failed, s.handshake_timeout
    );
    out
}

/// The JSON view.
pub(crate) fn json(t: &TlsReport) -> Value {
    json!({"certificates": t.certificates, "connections": t.connections})
}
