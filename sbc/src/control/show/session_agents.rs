//! `show session-agents`: each session-agent's state, sessions and pings on this node.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::status::SessionAgentRow;

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
