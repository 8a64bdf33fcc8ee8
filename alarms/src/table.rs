//! The alarm table: the raised alarms, as `display-alarms` lists them.
//!
//! One row per alarm (per measured kind, and per volume for `space`; see
//! [`threshold`](crate::threshold) for the ids). A row is created when a reading first
//! exceeds one of the alarm's thresholds, refreshed at every alarm iteration whose reading
//! still exceeds one (`last_seen`, `value`, `count`), changes severity with the highest
//! threshold crossed, and is removed when it clears. A condition alarm (the accounting spool
//! full) has a row from [`Evaluator::raise_condition`](crate::Evaluator::raise_condition) to
//! [`Evaluator::clear_condition`](crate::Evaluator::clear_condition) or `clear-alarm`.
//! The [`Evaluator`](crate::Evaluator) owns
//! the table and decides when rows change; the table itself only keeps them and checks an
//! operator's `clear-alarm <id> <task>`.
//!
//! Times are kept twice: [`SystemTime`] in the row for display, [`Instant`] beside it for
//! logic (both come from the evaluator's caller, never from a clock read here).

use std::fmt;
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::threshold::{AlarmId, AlarmKind, Severity};

/// Who cleared an alarm; carried by the clear trap (`sbcAlarmClearedBy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClearedBy {
    /// An operator, with `clear-alarm <id> <task>`.
    Operator,
    /// A restart of the node (alarms cleared at an orderly shutdown).
    Restart,
    /// The node itself: the reading fell below the alarm's lowest threshold. Never for a
    /// critical memory alarm.
    Auto,
}

impl ClearedBy {
    /// The value of `sbcAlarmClearedBy`: operator 1, restart 2, auto 3.
    #[must_use]
    pub const fn code(self) -> u32 {
        match self {
            Self::Operator => 1,
            Self::Restart => 2,
            Self::Auto => 3,
        }
    }

    /// The MIB name: `operator`, `restart`, `auto`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Operator => "operator",
            Self::Restart => "restart",
            Self::Auto => "auto",
        }
    }
}

impl fmt::Display for ClearedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One raised alarm, as `display-alarms` shows it and the ACLI serialises it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct AlarmRow {
    /// The alarm id (`clear-alarm <id> <task>`).
    pub id: AlarmId,
    /// The task that owns the alarm (`clear-alarm <id> <task>`), e.g. `sbcd`.
    pub task: String,
    /// What the alarm measures.
    #[serde(rename = "type")]
    pub kind: AlarmKind,
    /// The volume, for `space` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    /// The severity: that of the highest threshold crossed (a critical memory alarm stays
    /// critical until cleared).
    pub severity: Severity,
    /// The reading, in percent, of the last iteration that held the alarm.
    pub value: f64,
    /// The value of the threshold that gives the alarm its severity.
    pub threshold: u8,
    /// When the alarm was raised (milliseconds since the Unix epoch in JSON).
    #[serde(with = "unix_ms")]
    pub first_seen: SystemTime,
    /// The last iteration that held the alarm (milliseconds since the Unix epoch in JSON).
    #[serde(with = "unix_ms")]
    pub last_seen: SystemTime,
    /// How many alarm iterations held the alarm, the raising one included.
    pub count: u32,
    /// What is wrong, in words.
    pub description: String,
}

impl AlarmRow {
    /// The description of an alarm of `kind` at `value` over a `severity` threshold.
    #[must_use]
    pub fn describe(
        kind: AlarmKind,
        volume: Option<&str>,
        value: f64,
        severity: Severity,
        threshold: u8,
    ) -> String {
        let what = match (kind, volume) {
            (AlarmKind::Space, Some(v)) => format!("space utilisation of {v}"),
            (k, _) => format!("{k} utilisation"),
        };
        format!("{what} {value:.1}% exceeds {severity} threshold {threshold}%")
    }
}

/// `SystemTime` as milliseconds since the Unix epoch.
mod unix_ms {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        let ms = t
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        s.serialize_u64(ms)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        Ok(UNIX_EPOCH + Duration::from_millis(u64::deserialize(d)?))
    }
}

/// Why `clear-alarm` was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClearError {
    /// No raised alarm has this id.
    #[error("no raised alarm {id} (valid: {})", list(.raised))]
    UnknownId {
        /// The id given.
        id: AlarmId,
        /// The raised alarms, id and task.
        raised: Vec<(AlarmId, String)>,
    },
    /// The alarm exists but belongs to another task.
    #[error("alarm {id} belongs to task {task}, not {given} (valid: {})", list(.raised))]
    WrongTask {
        /// The id given.
        id: AlarmId,
        /// The alarm's task.
        task: String,
        /// The task given.
        given: String,
        /// The raised alarms, id and task.
        raised: Vec<(AlarmId, String)>,
    },
}

fn list(raised: &[(AlarmId, String)]) -> String {
    if raised.is_empty() {
        return "none raised".to_owned();
    }
    raised
        .iter()
        .map(|(id, task)| format!("{id} {task}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Debug, Clone)]
struct Entry {
    row: AlarmRow,
    first_at: Instant,
    last_at: Instant,
}

/// The raised alarms, ordered by id.
#[derive(Debug, Clone, Default)]
pub struct AlarmTable {
    entries: Vec<Entry>,
}

impl AlarmTable {
    /// An empty table.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// The rows, ordered by id: what `display-alarms` lists.
    #[must_use]
    pub fn rows(&self) -> Vec<AlarmRow> {
        self.entries.iter().map(|e| e.row.clone()).collect()
    }

    /// The row of a raised alarm.
    #[must_use]
    pub fn get(&self, id: AlarmId) -> Option<&AlarmRow> {
        self.entries.iter().find(|e| e.row.id == id).map(|e| &e.row)
    }

    /// When the alarm was raised and last held, on the caller's monotonic clock.
    #[must_use]
    pub fn instants(&self, id: AlarmId) -> Option<(Instant, Instant)> {
        self.entries
            .iter()
            .find(|e| e.row.id == id)
            .map(|e| (e.first_at, e.last_at))
    }

    /// Number of raised alarms.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no alarm is raised.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Inserts a new row, or replaces the row with the same id keeping its first-seen times.
    pub(crate) fn upsert(&mut self, row: AlarmRow, now: Instant) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.row.id == row.id) {
            let first_seen = e.row.first_seen;
            e.row = AlarmRow { first_seen, ..row };
            e.last_at = now;
        } else {
            let at = self.entries.partition_point(|e| e.row.id < row.id);
            self.entries.insert(
                at,
                Entry {
                    row,
                    first_at: now,
                    last_at: now,
                },
            );
        }
    }

    /// Removes a row whatever its task.
    pub(crate) fn remove(&mut self, id: AlarmId) -> Option<AlarmRow> {
        let at = self.entries.iter().position(|e| e.row.id == id)?;
        Some(self.entries.remove(at).row)
    }

    fn raised(&self) -> Vec<(AlarmId, String)> {
        self.entries
            .iter()
            .map(|e| (e.row.id, e.row.task.clone()))
            .collect()
    }

    /// Checks an operator's `clear-alarm <id> <task>` and removes the row. Errors name the
    /// valid ids and tasks. Through the [`Evaluator`](crate::Evaluator), use
    /// [`Evaluator::clear_alarm`](crate::Evaluator::clear_alarm), which also gives back the
    /// alarm's health penalty and emits the clear event.
    pub fn clear(&mut self, id: AlarmId, task: &str) -> Result<AlarmRow, ClearError> {
        let Some(entry) = self.entries.iter().find(|e| e.row.id == id) else {
            return Err(ClearError::UnknownId {
                id,
                raised: self.raised(),
            });
        };
        if entry.row.task != task {
            return Err(ClearError::WrongTask {
                id,
                task: entry.row.task.clone(),
                given: task.to_owned(),
                raised: self.raised(),
            });
        }
        self.remove(id).ok_or(ClearError::UnknownId {
            id,
            raised: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn row(id: AlarmId, severity: Severity, at: SystemTime) -> AlarmRow {
        AlarmRow {
            id,
            task: "sbcd".into(),
            kind: AlarmKind::Memory,
            volume: None,
            severity,
            value: 85.0,
            threshold: 80,
            first_seen: at,
            last_seen: at,
            count: 1,
            description: AlarmRow::describe(AlarmKind::Memory, None, 85.0, severity, 80),
        }
    }

    #[test]
    fn upsert_keeps_first_seen_and_clear_checks_task() {
        let t0 = Instant::now();
        let w0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let mut table = AlarmTable::new();
        table.upsert(row(131_075, Severity::Minor, w0), t0);
        table.upsert(row(131_073, Severity::Major, w0), t0);
        let later = w0 + Duration::from_secs(15);
        table.upsert(
            row(131_073, Severity::Critical, later),
            t0 + Duration::from_secs(15),
        );
        let rows = table.rows();
        assert_eq!(
            rows.iter().map(|r| r.id).collect::<Vec<_>>(),
            [131_073, 131_075]
        );
        assert_eq!(rows[0].first_seen, w0);
        assert_eq!(rows[0].severity, Severity::Critical);

        let e = table.clear(131_099, "sbcd").expect_err("unknown");
        assert_eq!(
            e.to_string(),
            "no raised alarm 131099 (valid: 131073 sbcd, 131075 sbcd)"
        );
        let e = table.clear(131_073, "other").expect_err("task");
        assert!(e
            .to_string()
            .starts_with("alarm 131073 belongs to task sbcd, not other"));
        assert_eq!(table.clear(131_073, "sbcd").map(|r| r.id), Ok(131_073));
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn row_serialises_for_the_acli() {
        let w0 = SystemTime::UNIX_EPOCH + Duration::from_millis(1_234_567);
        let json = serde_json::to_string(&row(131_073, Severity::Critical, w0)).expect("json");
        assert!(json.contains("\"type\":\"memory\""), "{json}");
        assert!(json.contains("\"severity\":\"critical\""), "{json}");
        assert!(json.contains("\"first-seen\":1234567"), "{json}");
        let back: AlarmRow = serde_json::from_str(&json).expect("back");
        assert_eq!(back.first_seen, w0);
    }
}
