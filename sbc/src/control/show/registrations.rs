//! `show registrations`: the registration cache's bindings (address of record, the phone's
//! Contact, its flow, our Contact's token toward the registrar, both expiries, the last
//! refresh; the Call-ID and CSeq in the JSON view) and counters.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::status::RegistrationsReport;

/// The text view.
pub(crate) fn text(r: &RegistrationsReport) -> String {
    let limit = if r.limit == 0 {
        format!(
            "no limit but the hard cap, {}",
            sbc_proto::registration::cache::MAX_BINDINGS
        )
    } else {
        format!("limit {}", r.limit)
    };
    let mut out = format!("{} bindings ({limit})\n", r.bindings);
    if !r.rows.is_empty() {
        let _ = writeln!(
            out,
            "  {:<32} {:<40} {:<28} {:<18} {:>8} {:>11} {:>7}",
            "aor", "contact", "flow", "ours", "phone-s", "registrar-s", "last-s"
        );
    }
    for b in &r.rows {
        let _ = writeln!(
            out,
            "  {:<32} {:<40} {:<28} {:<18} {:>8} {:>11} {:>7}",
            b.aor,
            b.contact,
            b.flow,
            b.token,
            b.phone_expires_s,
            b.registrar_expires_s,
            b.refreshed_s_ago
        );
    }
    if r.rows.len() < r.bindings {
        let _ = writeln!(out, "  ... {} more", r.bindings - r.rows.len());
    }
    let c = &r.counters;
    let _ = writeln!(
        out,
        "REGISTERs forwarded {}, answered from the cache {}, refused (full) {}; bindings created {}, removed {}, expired {}; STUN keep-alives answered {}, ignored {}",
        c.forwarded, c.absorbed, c.refused_full, c.created, c.removed, c.expired,
        c.keepalives_answered, c.keepalives_ignored
    );
    out
}

/// The JSON view.
pub(crate) fn json(r: &RegistrationsReport) -> Value {
    json!(r)
}
