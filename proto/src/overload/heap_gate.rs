//! The heap gate's decision: a hysteresis on heap usage.
//!
//! It closes when heap usage exceeds `sip-config heap-reject-threshold` (percent of
//! `system-config heap-limit-mb`) and opens again only below `heap-resume-threshold`, so a heap
//! hovering at the threshold does not flap. The shell (`sbc`'s overload task) feeds it readings
//! of jemalloc's statistics and applies its changes to the node's admission.

/// The hysteresis gate on heap usage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeapGate {
    reject_at: f64,
    resume_at: f64,
    closed: bool,
}

/// A change of the gate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GateChange {
    /// Heap above the reject threshold: refuse new requests.
    Closed {
        /// Heap usage in percent.
        percent: f64,
    },
    /// Heap back below the resume threshold: accept new requests.
    Opened {
        /// Heap usage in percent.
        percent: f64,
    },
}

impl HeapGate {
    /// A gate closing above `reject_at` percent and opening below `resume_at` percent.
    pub fn new(reject_at: f64, resume_at: f64) -> Self {
        Self {
            reject_at,
            resume_at: resume_at.min(reject_at),
            closed: false,
        }
    }

    /// Whether new requests are refused.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Feeds one heap reading; returns the change, if any.
    pub fn handle_reading(&mut self, percent: f64) -> Option<GateChange> {
        if !self.closed && percent > self.reject_at {
            self.closed = true;
            return Some(GateChange::Closed { percent });
        }
        if self.closed && percent < self.resume_at {
            self.closed = false;
            return Some(GateChange::Opened { percent });
        }
        None
    }

    /// New thresholds (an activated configuration); the gate keeps its state, and the next
    /// reading decides against the new thresholds.
    pub fn set_thresholds(&mut self, reject_at: f64, resume_at: f64) {
        self.reject_at = reject_at;
        self.resume_at = resume_at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closes_above_reject_and_opens_only_below_resume() {
        let mut g = HeapGate::new(90.0, 80.0);
        assert_eq!(g.handle_reading(89.0), None);
        assert_eq!(
            g.handle_reading(90.5),
            Some(GateChange::Closed { percent: 90.5 })
        );
        assert!(g.is_closed());
        assert_eq!(g.handle_reading(85.0), None, "hysteresis: still closed");
        assert_eq!(g.handle_reading(95.0), None);
        assert_eq!(
            g.handle_reading(79.0),
            Some(GateChange::Opened { percent: 79.0 })
        );
        assert!(!g.is_closed());
        assert_eq!(g.handle_reading(85.0), None, "hysteresis: still open");
        // An activated configuration lowers the thresholds: the next reading decides.
        g.set_thresholds(50.0, 40.0);
        assert_eq!(
            g.handle_reading(60.0),
            Some(GateChange::Closed { percent: 60.0 })
        );
        g.set_thresholds(90.0, 80.0);
        assert_eq!(
            g.handle_reading(60.0),
            Some(GateChange::Opened { percent: 60.0 })
        );
    }
}
