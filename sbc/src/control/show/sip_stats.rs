//! `show sip-stats`: admission, calls, the engines' counters, media, TCP and TLS.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::status::SipStatus;

/// The admission state as `show sip-stats` names it.
fn admission(s: &SipStatus) -> &'static str {
    if s.admission_open() {
        "accepting"
    } else {
        "503"
    }
}

/// The text view.
pub(crate) fn text(s: &SipStatus) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:>12}",
        "admission",
        if s.admission_open() {
            "accepting".to_owned()
        } else {
            format!("503 ({})", s.admission_reasons.join(", "))
        }
    );
    let _ = writeln!(out, "{:<28} {:>12}", "calls-active", s.calls_active);
    // The counters are printed unpadded (as the first releases printed them).
    for (k, val) in s.counters.fields() {
        let _ = writeln!(out, "{:<28} {val}", k.replace('_', "-"));
    }
    if let Some(m) = &s.media {
        let free: usize = m.pools.iter().map(|p| p.free_pairs).sum();
        let total: usize = m.pools.iter().map(|p| p.total_pairs).sum();
        for (k, val) in [
            ("media-sessions", m.sessions.to_string()),
            ("media-port-pairs-free", format!("{free}/{total}")),
            ("media-packets-forwarded", m.forwarded.to_string()),
            ("media-bytes-forwarded", m.forwarded_bytes.to_string()),
            (
                "media-packets-dropped",
                (m.dropped_unknown_port
                    + m.dropped_stranger
                    + m.dropped_no_destination
                    + m.send_errors)
                    .to_string(),
            ),
            ("media-latched", m.latched.to_string()),
        ] {
            let _ = writeln!(out, "{k:<28} {val:>12}");
        }
    }
    for (prefix, counters) in [("tcp", &s.tcp), ("tls", &s.tls)] {
        for (k, val) in counters.fields() {
            let tls_only = k.starts_with("handshake");
            if tls_only && prefix == "tcp" {
                continue;
            }
            let _ = writeln!(
                out,
                "{:<28} {val}",
                format!("{prefix}-{}", k.replace('_', "-"))
            );
        }
    }
    out
}

/// The JSON view.
pub(crate) fn json(s: &SipStatus) -> Value {
    json!({
        "admission": admission(s),
        "admission_reasons": s.admission_reasons,
        "calls_active": s.calls_active,
        "counters": s.counters,
        "tcp": s.tcp,
        "tls": s.tls,
        "media": s.media.as_ref().map(|m| json!({
            "sessions": m.sessions,
            "pools": m.pools,
            "forwarded": m.forwarded,
            "forwarded_bytes": m.forwarded_bytes,
            "dropped_unknown_port": m.dropped_unknown_port,
            "dropped_stranger": m.dropped_stranger,
            "dropped_no_destination": m.dropped_no_destination,
            "send_errors": m.send_errors,
            "latched": m.latched,
        })),
    })
}
