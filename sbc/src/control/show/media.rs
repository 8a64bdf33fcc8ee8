//! `show media`: the relay, the steering pools, the counters and each anchored call.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::runtime::MediaReport;

/// What `show media` says when media is not anchored.
pub(crate) const NOT_ANCHORED: &str =
    "media is not anchored (media-manager disabled or no steering-pool): SDP passes unchanged\n";

/// The JSON view (`None`: media not anchored).
pub(crate) fn json(m: Option<&MediaReport>) -> Value {
    match m {
        None => json!({"anchored": false}),
        Some(m) => json!({"anchored": true, "media": m}),
    }
}

/// The text view: the relay, each pool, the counters, then each call (up to 200).
pub(crate) fn text(m: &MediaReport) -> String {
    let mut out = format!(
        "relay {}, {} sessions\n",
        if m.relaying {
            "running"
        } else {
            "stopped (standby)"
        },
        m.sessions
    );
    for p in &m.pools {
        let _ = writeln!(
            out,
            "  steering-pool {:<10} {} ports {}: {}/{} pairs free",
            p.realm, p.address, p.ports, p.free_pairs, p.total_pairs
        );
    }
    let _ = writeln!(
        out,
        "packets forwarded {} ({} bytes), received {}; dropped: {} unknown port, {} strangers, {} no destination, {} send errors; {} latched; sessions opened {}, refused for ports {}",
        m.forwarded,
        m.forwarded_bytes,
        m.received,
        m.dropped_unknown_port,
        m.dropped_stranger,
        m.dropped_no_destination,
        m.send_errors,
        m.latched,
        m.opened,
        m.refused_no_ports
    );
    let per_call = m
        .memory_sessions
        .checked_div(m.sessions)
        .map_or(String::new(), |b| format!(", {b} bytes per anchored call"));
    let _ = writeln!(
        out,
        "media table memory: {} bytes for the pools' ports, {} bytes for {} sessions{per_call}",
        m.memory_fixed, m.memory_sessions, m.sessions
    );
    for s in m.calls.iter().take(200) {
        let _ = writeln!(
            out,
            "{:016x} caller sent {} packets ({} lost, {} rtcp, {} dropped)  callee sent {} packets ({} lost, {} rtcp, {} dropped)",
            s.call,
            s.from_caller.packets,
            s.from_caller.lost,
            s.from_caller.rtcp,
            s.from_caller.dropped,
            s.from_callee.packets,
            s.from_callee.lost,
            s.from_callee.rtcp,
            s.from_callee.dropped
        );
        for (i, st) in s.streams.iter().enumerate() {
            let remote = |r: &Option<String>, latched: bool| {
                format!(
                    "{}{}",
                    r.as_deref().unwrap_or("-"),
                    if latched { " (latched)" } else { "" }
                )
            };
            let _ = writeln!(
                out,
                "  stream {i}: caller {} <-> :{}  |  :{} <-> callee {}",
                remote(&st.caller_remote, st.caller_latched),
                st.caller_port,
                st.callee_port,
                remote(&st.callee_remote, st.callee_latched)
            );
        }
    }
    if m.calls.len() > 200 {
        out.push_str("... (first 200 shown; --json gives all)\n");
    }
    out
}
