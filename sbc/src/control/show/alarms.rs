//! `display-alarms` (also `show alarms`): the alarm table.

use std::fmt::Write as _;

use sbc_alarms::AlarmRow;
use serde_json::{json, Value};

/// The text view.
pub(crate) fn text(rows: &[AlarmRow]) -> String {
    let mut out = if rows.is_empty() {
        "no alarms\n".to_owned()
    } else {
        format!(
            "{:<8} {:<10} {:<9} {:>5} {:<22} {:<22} {}\n",
            "id", "task", "severity", "count", "first", "last", "description"
        )
    };
    for row in rows {
        let _ = writeln!(
            out,
            "{:<8} {:<10} {:<9} {:>5} {:<22} {:<22} {}",
            row.id,
            row.task,
            row.severity.to_string(),
            row.count,
            fmt_time(row.first_seen),
            fmt_time(row.last_seen),
            row.description
        );
    }
    out
}

/// The JSON view.
pub(crate) fn json(rows: &[AlarmRow]) -> Value {
    json!({ "alarms": rows })
}

/// `HH:MM:SS UTC` of a wall-clock time (the day is implied: alarms are recent).
fn fmt_time(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    format!("{h:02}:{m:02}:{s:02} UTC")
}
