//! The node's health score: 100 minus a ledger of deductions.
//!
//! The score is what the heartbeat carries to the peer and what the redundancy machine
//! compares with `health-threshold`. Every deduction is an entry with a source (a stable key
//! such as `alarm 131073` or `heartbeat-path rear`), a reason in words and a number of
//! points, so `show health` can say what took points off. A deduction is given back by its
//! source (an alarm clearing, a heartbeat path coming back), except the critical-memory one:
//! [`Health::deduct_critical_memory`] takes 100 and nothing gives it back but a new process.
//! That is Oracle's rule: after a critical-memory switchover the former active is not
//! available for an ensuing switchover until it is rebooted, which clears memory and resets
//! the score.
//!
//! The score is `100 − Σ points`, saturating at 0.

use serde::{Deserialize, Serialize};

/// The source of the critical-memory deduction.
pub const CRITICAL_MEMORY_SOURCE: &str = "critical-memory-abort";

/// One entry of the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deduction {
    /// Stable key of what deducted, used to give the points back.
    pub source: String,
    /// What took the points off, in words.
    pub reason: String,
    /// Points taken off.
    pub points: u8,
    /// True when only a restart gives the points back.
    pub until_restart: bool,
}

/// The health score and its ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    deductions: Vec<Deduction>,
}

impl Health {
    /// A healthy node: score 100, no deduction.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            deductions: Vec::new(),
        }
    }

    /// The score, 0..=100.
    #[must_use]
    pub fn score(&self) -> u8 {
        let taken: u32 = self.deductions.iter().map(|d| u32::from(d.points)).sum();
        u8::try_from(100u32.saturating_sub(taken)).unwrap_or(0)
    }

    /// The ledger, oldest first.
    #[must_use]
    pub fn deductions(&self) -> &[Deduction] {
        &self.deductions
    }

    /// True after [`deduct_critical_memory`](Self::deduct_critical_memory): the node must not
    /// become active in an ensuing switchover until it is restarted.
    #[must_use]
    pub fn ineligible_until_restart(&self) -> bool {
        self.deductions.iter().any(|d| d.until_restart)
    }

    /// Takes `points` off for `source`, replacing what that source had taken before (so an
    /// alarm that changes severity swaps its penalty). Zero points removes the entry. A
    /// source of [`CRITICAL_MEMORY_SOURCE`] is refused (use
    /// [`deduct_critical_memory`](Self::deduct_critical_memory)). Returns the score before.
    pub fn deduct(&mut self, source: &str, reason: impl Into<String>, points: u8) -> u8 {
        let before = self.score();
        if source == CRITICAL_MEMORY_SOURCE {
            return before;
        }
        self.deductions.retain(|d| d.source != source);
        if points > 0 {
            self.deductions.push(Deduction {
                source: source.to_owned(),
                reason: reason.into(),
                points,
                until_restart: false,
            });
        }
        before
    }

    /// Gives back what `source` took, if anything; the critical-memory deduction is never
    /// given back. Returns the removed entry.
    pub fn give_back(&mut self, source: &str) -> Option<Deduction> {
        let at = self
            .deductions
            .iter()
            .position(|d| d.source == source && !d.until_restart)?;
        Some(self.deductions.remove(at))
    }

    /// Takes 100 off, for good: the critical-memory-abort rule fired with
    /// `critical-memory-abort=switchover`. Idempotent. Returns the score before.
    pub fn deduct_critical_memory(&mut self, reason: impl Into<String>) -> u8 {
        let before = self.score();
        if !self.ineligible_until_restart() {
            self.deductions.push(Deduction {
                source: CRITICAL_MEMORY_SOURCE.to_owned(),
                reason: reason.into(),
                points: 100,
                until_restart: true,
            });
        }
        before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_arithmetic() {
        let mut h = Health::new();
        assert_eq!(h.score(), 100);
        assert_eq!(h.deduct("alarm 131075", "cpu major", 10), 100);
        h.deduct("heartbeat-path rear", "rear path lost", 15);
        assert_eq!(h.score(), 75);
        // A severity change replaces, it does not add.
        h.deduct("alarm 131075", "cpu critical", 20);
        assert_eq!(h.score(), 65);
        assert_eq!(h.deductions().len(), 2);
        assert_eq!(h.give_back("alarm 131075").map(|d| d.points), Some(20));
        assert_eq!(h.give_back("alarm 131075"), None);
        assert_eq!(h.score(), 85);
        h.deduct("x", "zero removes", 0);
        assert_eq!(h.deductions().len(), 1);
    }

    #[test]
    fn critical_memory_stays_until_restart() {
        let mut h = Health::new();
        h.deduct("alarm 131073", "memory critical", 10);
        assert!(!h.ineligible_until_restart());
        assert_eq!(h.deduct_critical_memory("two critical readings"), 90);
        assert_eq!(h.score(), 0, "saturates at 0");
        assert!(h.ineligible_until_restart());
        // Idempotent, and nothing gives it back.
        h.deduct_critical_memory("again");
        assert_eq!(h.deductions().len(), 2);
        assert_eq!(h.give_back(CRITICAL_MEMORY_SOURCE), None);
        h.deduct(CRITICAL_MEMORY_SOURCE, "overwrite attempt", 0);
        h.give_back("alarm 131073");
        assert_eq!(h.score(), 0);
        assert!(h.ineligible_until_restart());
    }
}
