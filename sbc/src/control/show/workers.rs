//! `show workers`: worker groups, their loads, queues and autoscaling decisions.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::workers::GroupReport;

/// The text view.
pub(crate) fn text(groups: &[GroupReport]) -> String {
    let mut out = format!(
        "{:<14} {:<6} {:>7} {:>7} {:>7} {:>7}  profile\n",
        "group", "sched", "workers", "load", "demand", "queued"
    );
    for g in groups {
        let _ = writeln!(
            out,
            "{:<14} {:<6} {:>7} {:>6.1}% {:>6.1}% {:>7}  {}",
            g.name,
            g.scheduling,
            g.workers,
            g.load_percent,
            g.demand_percent,
            g.queued,
            g.profile.as_deref().unwrap_or("fixed count")
        );
        for m in &g.members {
            let _ = writeln!(
                out,
                "  worker {:<4} load {:>5.1}%  demand {:>5.1}%  queued {}+{}  shards {}",
                m.id,
                m.load_percent,
                m.demand_percent,
                m.queued_primary,
                m.queued_secondary,
                m.shards
            );
        }
        if g.scheduling != "-" {
            let _ = writeln!(
                out,
                "  queues: {} retransmissions removed, {} answered from state, {} served from secondary, 503 {} queue full + {} queue delay, {} dropped",
                g.removed_retransmissions,
                g.answered_from_state,
                g.secondary_served,
                g.rejected_queue_full,
                g.rejected_queue_delay,
                g.dropped_queue_full
            );
        }
        if g.guard_cycles > 0 {
            let _ = writeln!(out, "  no scale-down for {} more cycles", g.guard_cycles);
        }
        for d in &g.decisions {
            let _ = writeln!(
                out,
                "  cycle {} ({:.0} s ago): {}",
                d.cycle, d.seconds_ago, d.text
            );
        }
    }
    out
}

/// The JSON view.
pub(crate) fn json(groups: &[GroupReport]) -> Value {
    json!({ "groups": groups })
}
