//! The accounting spool's alarm and trap (issue 31: "a full spool raises a critical alarm and
//! a trap"): when the spool fills, the node raises the critical condition alarm
//! `accounting-spool` (id [`SPOOL_ALARM_ID`], task [`SPOOL_ALARM_TASK`]) in its alarm table and
//! sends `sbcAccountingSpoolTrap` (full); when it has room again, it clears the alarm (by
//! itself) and sends the trap again (has room).
//!
//! The decision is [`SpoolWatch`], sans IO: the node's once-a-second watcher hands it what
//! the accounting report says and carries out the [`SpoolChange`] it returns. There is no
//! timer in it: the hysteresis is in bytes, as the spool's own. The spool's `spool_full` flag
//! goes down as soon as one record fits again (a small record after a large one refused), so
//! the flag alone would make the alarm flap while a RADIUS server is down and calls go on.
//! The watch takes the spool as full on the first report that says so, and as having room
//! again only once the flag is down **and** a record of the largest size
//! ([`spool::MAX_ENTRY`], 64 KiB) fits below the bound, which takes a delivered segment being
//! deleted: a server that came back.
//!
//! The alarm takes no health points ([`SPOOL_ALARM_HEALTH_PENALTY`]), as an `alarm-threshold`
//! without `health-penalty`: the peer's RADIUS servers are the same, so a switchover would not
//! deliver the records.

use sbc_accounting::spool;
use sbc_alarms::threshold::ALARM_ID_BASE;
use sbc_alarms::{AlarmId, AlarmKind, ConditionAlarm, Severity};
use sbc_snmp::Trap;

use super::AccountingReport;

/// The alarm id of a full accounting spool: 131078, after the threshold alarms' type codes.
pub const SPOOL_ALARM_ID: AlarmId = ALARM_ID_BASE + AlarmKind::AccountingSpool.code();

/// The task that owns the alarm (`clear-alarm 131078 accounting`).
pub const SPOOL_ALARM_TASK: &str = "accounting";

/// Health points the alarm takes while raised: none (see the module's docs).
pub const SPOOL_ALARM_HEALTH_PENALTY: u8 = 0;

/// A change of the spool the node acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpoolChange {
    /// The spool filled: raise the alarm, send the trap (full).
    Filled,
    /// The spool has room again: clear the alarm, send the trap (has room).
    HasRoom,
}

/// Whether the spool is taken as full, from one report to the next.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpoolWatch {
    full: bool,
}

impl SpoolWatch {
    /// A watch of a spool that has room (as every spool at start: a node that starts with a
    /// full spool reports it at its first observation).
    #[must_use]
    pub const fn new() -> Self {
        Self { full: false }
    }

    /// True while the spool is taken as full.
    #[must_use]
    pub const fn is_full(&self) -> bool {
        self.full
    }

    /// Takes the report in; returns the change to act on, if any.
    pub fn observe(&mut self, report: &AccountingReport) -> Option<SpoolChange> {
        if !self.full && report.spool_full {
            self.full = true;
            return Some(SpoolChange::Filled);
        }
        if self.full && has_room(report) {
            self.full = false;
            return Some(SpoolChange::HasRoom);
        }
        None
    }
}

/// True when the spool is not full and a record of the largest size fits below its bound.
#[must_use]
pub fn has_room(report: &AccountingReport) -> bool {
    !report.spool_full
        && report.spool_bytes.saturating_add(spool::MAX_ENTRY as u64) <= report.spool_max_bytes
}

/// The spool's fill, in percent of its bound (100 when the bound is 0).
#[must_use]
pub fn fill_percent(report: &AccountingReport) -> f64 {
    if report.spool_max_bytes == 0 {
        return 100.0;
    }
    // Precision is not at stake: a percentage for display.
    #[allow(clippy::cast_precision_loss)]
    let percent = report.spool_bytes as f64 * 100.0 / report.spool_max_bytes as f64;
    percent.min(100.0)
}

/// The alarm's row for the spool as `report` says it is.
#[must_use]
pub fn spool_alarm(report: &AccountingReport) -> ConditionAlarm {
    ConditionAlarm {
        id: SPOOL_ALARM_ID,
        task: SPOOL_ALARM_TASK.to_owned(),
        kind: AlarmKind::AccountingSpool,
        severity: Severity::Critical,
        value: fill_percent(report),
        threshold: 100,
        description: format!(
            "accounting spool full ({} of {} bytes): {} records refused",
            report.spool_bytes, report.spool_max_bytes, report.records_refused
        ),
        health_penalty: SPOOL_ALARM_HEALTH_PENALTY,
    }
}

/// `sbcAccountingSpoolTrap` for the spool as `report` says it is, `full` or having room, sent
/// by `node`.
#[must_use]
pub fn spool_trap(report: &AccountingReport, full: bool, node: &str) -> Trap {
    Trap::AccountingSpool {
        full,
        spool_bytes: report.spool_bytes,
        spool_max_bytes: report.spool_max_bytes,
        records_refused: report.records_refused,
        node: node.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn report(full: bool, bytes: u64) -> AccountingReport {
        AccountingReport {
            enabled: true,
            spool_full: full,
            spool_bytes: bytes,
            spool_max_bytes: MIB,
            records_refused: 7,
            ..AccountingReport::default()
        }
    }

    #[test]
    fn fills_at_once_and_has_room_only_with_a_largest_record_of_room() {
        let mut watch = SpoolWatch::new();
        assert_eq!(watch.observe(&report(false, 0)), None);
        assert_eq!(watch.observe(&report(false, MIB - 400)), None);
        assert_eq!(
            watch.observe(&report(true, MIB - 300)),
            Some(SpoolChange::Filled)
        );
        assert!(watch.is_full());
        // The flag goes down when a smaller record fits: still full for the alarm.
        assert_eq!(watch.observe(&report(false, MIB - 100)), None);
        assert_eq!(watch.observe(&report(true, MIB - 100)), None);
        assert_eq!(
            watch.observe(&report(false, MIB - spool::MAX_ENTRY as u64 + 1)),
            None
        );
        // A delivered segment deleted: room for the largest record.
        assert_eq!(
            watch.observe(&report(false, MIB - spool::MAX_ENTRY as u64)),
            Some(SpoolChange::HasRoom)
        );
        assert_eq!(watch.observe(&report(false, 0)), None);
        // And it may fill again.
        assert_eq!(
            watch.observe(&report(true, MIB - 10)),
            Some(SpoolChange::Filled)
        );
    }

    /// The smallest spool (`spool-max-size 1`, 1 MiB) has room again once its records are
    /// delivered: it is cut into segments small enough that delivered ones are deleted.
    #[test]
    fn the_smallest_spool_has_room_again_after_its_deliveries() {
        let mut ledger = spool::SpoolLedger::new(MIB, super::super::segment_bytes(MIB));
        let mut seqs = Vec::new();
        loop {
            let seq = ledger.take_seq();
            if ledger.append_record(seq, 330) == spool::Append::Full {
                break;
            }
            seqs.push(seq);
        }
        let mut watch = SpoolWatch::new();
        let at = |ledger: &spool::SpoolLedger, full: bool| report(full, ledger.bytes());
        assert_eq!(watch.observe(&at(&ledger, true)), Some(SpoolChange::Filled));
        for seq in seqs {
            ledger.delivered(seq);
            ledger.append_mark(12);
        }
        assert!(!ledger.take_deletable().is_empty());
        assert_eq!(
            watch.observe(&at(&ledger, false)),
            Some(SpoolChange::HasRoom)
        );
        assert_eq!(super::super::segment_bytes(8 << 30), 4 << 20);
    }

    #[test]
    fn the_alarm_and_the_trap_say_what_the_report_says() {
        let r = report(true, 3 * MIB / 4);
        let alarm = spool_alarm(&r);
        assert_eq!(alarm.id, 131_078);
        assert_eq!(alarm.task, "accounting");
        assert_eq!(alarm.kind, AlarmKind::AccountingSpool);
        assert_eq!(alarm.severity, Severity::Critical);
        assert!((alarm.value - 75.0).abs() < 1e-9);
        assert_eq!(alarm.health_penalty, 0);
        assert_eq!(
            alarm.description,
            "accounting spool full (786432 of 1048576 bytes): 7 records refused"
        );
        assert_eq!(
            spool_trap(&r, true, "sbc-a"),
            Trap::AccountingSpool {
                full: true,
                spool_bytes: 786_432,
                spool_max_bytes: MIB,
                records_refused: 7,
                node: "sbc-a".into()
            }
        );
        let unbounded = AccountingReport::default();
        assert!((fill_percent(&unbounded) - 100.0).abs() < f64::EPSILON);
    }
}
