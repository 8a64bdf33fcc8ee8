//! `show session-agents`: each session-agent's state, sessions and pings on this node; `show
//! local-routing`: the route files this node loaded, with their checksums.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::status::{RouteFileRow, SessionAgentRow};

/// The text view.
pub(crate) fn text(rows: &[SessionAgentRow]) -> String {
    if rows.is_empty() {
        return "no session-agent\n".to_owned();
    }
    let mut out = format!(
        "{:<16} {:<28} {:<30} {:>8} {:>6} {:>10} {:>10}\n",
        "name", "address", "state", "sessions", "cps", "ping rtt", "pings/miss"
    );
    for r in rows {
        let rtt = r
            .last_ping_rtt_ms
            .map_or("-".to_owned(), |ms| format!("{ms:.1} ms"));
        let _ = writeln!(
            out,
            "{:<16} {:<28} {:<30} {:>8} {:>6} {:>10} {:>10}",
            r.name,
            r.address,
            format!("{} {}s", r.state, r.state_for_s),
            r.sessions,
            r.burst_sessions,
            rtt,
            format!("{}/{}", r.pings_sent, r.pings_missed),
        );
    }
    if let Some(r) = rows.first() {
        if !r.pinging {
            out.push_str(
                "this node does not ping (standby): the active's states are authoritative\n",
            );
        }
    }
    out
}

/// The JSON view.
pub(crate) fn json(rows: &[SessionAgentRow]) -> Value {
    json!({ "session_agents": rows })
}

/// The text view of `show local-routing`.
pub(crate) fn route_files_text(rows: &[RouteFileRow]) -> String {
    if rows.is_empty() {
        return "no local-routing-config file loaded\n".to_owned();
    }
    let mut out = format!(
        "{:<16} {:>10} {:>10} {:>12}  sha256\n",
        "name", "rows", "prefixes", "heap bytes"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<16} {:>10} {:>10} {:>12}  {}",
            r.name, r.rows, r.prefixes, r.heap_bytes, r.sha256
        );
        match (&r.active_sha256, r.matches_active) {
            (Some(_), Some(true)) => out.push_str("  the active's copy is the same\n"),
            (Some(a), _) => {
                let _ = writeln!(out, "  DIFFERS from the active's copy: {a}");
            }
            _ => {}
        }
    }
    out.push_str(
        "each node loads its own copy: the checksums of both nodes must match (a standby \
         compares its copies with the active's)\n",
    );
    out
}

/// The JSON view of `show local-routing`.
pub(crate) fn route_files_json(rows: &[RouteFileRow]) -> Value {
    json!({ "route_files": rows })
}
