//! `show access-control`: the per-source rate limit, the operator's lists, the sources denied
//! now and the counters.

use std::fmt::Write as _;

use sbc_config::Config;
use serde_json::{json, Value};

use sbc_proto::access::{AccessCounters, DeniedSource};

/// What `show access-control` reads: the edge's report and the running lists.
pub(crate) struct AccessView<'a> {
    /// Sources denied now.
    pub(crate) denied: &'a [DeniedSource],
    /// The edge's counters.
    pub(crate) counters: &'a AccessCounters,
    /// The running configuration (rate settings, lists).
    pub(crate) running: &'a Config,
}

/// The text view.
pub(crate) fn text(v: &AccessView<'_>) -> String {
    let s = &v.running.sip_config;
    let mut out = format!(
        "rate per source {} new requests/s, burst {}, deny {} s (session-agents and allow entries exempt)\n",
        s.source_rate, s.source_burst, s.source_deny_seconds
    );
    for e in &v.running.access_control {
        let _ = writeln!(out, "  {:<6} {}", e.action, e.source_address);
    }
    let _ = writeln!(out, "{} sources denied now", v.denied.len());
    for d in v.denied {
        let _ = writeln!(out, "  {:<40} {} s left", d.source, d.remaining_s);
    }
    let c = v.counters;
    let _ = writeln!(
        out,
        "new requests dropped for rate {}, messages dropped from denied sources {}, denies {}, untracked {}",
        c.rate_limited, c.denied, c.denies, c.untracked
    );
    out
}

/// The JSON view.
pub(crate) fn json(v: &AccessView<'_>) -> Value {
    json!({
        "denied": v.denied,
        "counters": v.counters,
        "lists": v.running.access_control,
    })
}
