//! `show health`: the health score and what took points off it, the dialog and configuration
//! sync, and what an activation left waiting for a reboot.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::status::HealthReport;

/// The text view.
pub(crate) fn text(h: &HealthReport) -> String {
    let mut out = format!("{:<24} {}\n", "health-score", h.score);
    if h.deductions.is_empty() {
        out.push_str("no deductions\n");
    }
    for d in &h.deductions {
        let _ = writeln!(
            out,
            "  -{:<3} {:<16} {}{}",
            d.points,
            d.source,
            d.reason,
            if d.until_restart {
                " (until restart)"
            } else {
                ""
            }
        );
    }
    if h.ineligible_until_restart {
        out.push_str(
            "NOT AVAILABLE for an ensuing switchover until restarted (critical memory took 100)\n",
        );
    }
    if h.admission_closed {
        out.push_str("new requests are refused with 503 (critical memory)\n");
    }
    let _ = writeln!(out, "{:<24} {}", "sip-sync", h.sip_sync);
    let _ = writeln!(out, "{:<24} {}", "config-sync", h.config_sync);
    if let Some(why) = &h.last_config_push_refusal {
        let _ = writeln!(
            out,
            "{:<24} {} refused; last: {why}",
            "config-pushes", h.config_pushes_refused
        );
    }
    // What was activated but waits for a reboot: easy to forget after a change.
    if h.restart_needed.is_empty() {
        let _ = writeln!(out, "{:<24} none", "restart-needed");
    } else {
        let _ = writeln!(
            out,
            "{:<24} {} activated change(s) wait for a reboot:",
            "restart-needed",
            h.restart_needed.len()
        );
        for p in &h.restart_needed {
            let _ = writeln!(out, "  {p}");
        }
    }
    out
}

/// The JSON view.
pub(crate) fn json(h: &HealthReport) -> Value {
    json!({
        "score": h.score,
        "deductions": h.deductions,
        "ineligible_until_restart": h.ineligible_until_restart,
        "admission_closed": h.admission_closed,
        "sip_sync": h.sip_sync,
        "synced": h.synced,
        "config_sync": h.config_sync,
        "config_pushes_refused": h.config_pushes_refused,
        "last_config_push_refusal": h.last_config_push_refusal,
        "restart_needed": h.restart_needed,
    })
}
