//! What `show workers` prints of a group: its workers, its load and its scaling decisions.

use std::time::Instant;

use sbc_proto::overload::autoscale::{ScaleDecision, ScaleReason, ScaleRecord};

/// What `show workers` reports of one worker.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkerReport {
    /// Worker number, unique within its group.
    pub id: usize,
    /// Busy time over the last cycle, percent.
    pub load_percent: f64,
    /// Busy time plus the work refused or left queued over the last cycle, percent (what the
    /// autoscaler decides on; above 100 when saturated).
    pub demand_percent: f64,
    /// Messages waiting in its primary queue.
    pub queued_primary: usize,
    /// Messages waiting in its secondary queue.
    pub queued_secondary: usize,
    /// Shards it serves.
    pub shards: usize,
}

/// One decision of a group's autoscaler, for `show workers`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DecisionReport {
    /// The deciding cycle (the first cycle is 1).
    pub cycle: u64,
    /// Seconds ago.
    pub seconds_ago: f64,
    /// Workers before.
    pub from: usize,
    /// Workers after.
    pub to: usize,
    /// What and why, in words.
    pub text: String,
}

/// What `show workers` reports of one group.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GroupReport {
    /// `udp:<realm>`, `tcp` or `timer`.
    pub name: String,
    /// The profile, in OpenSIPS's words, or `None` for a fixed count.
    pub profile: Option<String>,
    /// Running workers.
    pub workers: usize,
    /// Mean load of the last cycle, percent.
    pub load_percent: f64,
    /// Mean demand of the last cycle, percent (see [`WorkerReport::demand_percent`]).
    pub demand_percent: f64,
    /// Messages waiting in its queues.
    pub queued: usize,
    /// `prsm` or `fifo` (`-` for the timer group).
    pub scheduling: &'static str,
    /// Cycles the guard window still forbids a scale-down.
    pub guard_cycles: u64,
    /// Redundant retransmissions removed from or never put in the queues.
    pub removed_retransmissions: u64,
    /// Retransmissions of answered transactions passed to the engine to re-send the answer.
    pub answered_from_state: u64,
    /// Retransmissions served from the secondary queue.
    pub secondary_served: u64,
    /// New requests answered 503 because the primary queue was full.
    pub rejected_queue_full: u64,
    /// New requests answered 503 because they waited longer than `max-queue-delay-ms`.
    pub rejected_queue_delay: u64,
    /// Other messages dropped because their queue was full.
    pub dropped_queue_full: u64,
    /// The workers.
    pub members: Vec<WorkerReport>,
    /// The last decisions, oldest first.
    pub decisions: Vec<DecisionReport>,
}

pub(super) fn describe_reason(r: &ScaleReason) -> String {
    match *r {
        ScaleReason::LoadAbove {
            load,
            cycles_over,
            window,
        } => format!("load {load:.0}%, above threshold in {cycles_over} of {window} cycles"),
        ScaleReason::LoadFarAbove { load, desired } => {
            format!("load {load:.0}% far above threshold: ceil(n x load / up) = {desired}")
        }
        ScaleReason::QueueDepth { queued } => format!("{queued} messages queued (more than 7)"),
        ScaleReason::LoadBelow { load, estimated } => {
            format!("load {load:.0}% below threshold; {estimated:.0}% expected after removal")
        }
    }
}

pub(super) fn describe_record(r: &ScaleRecord, now: Instant) -> DecisionReport {
    let (verb, reason) = match &r.decision {
        ScaleDecision::Up { reason, .. } => ("up", reason),
        ScaleDecision::Down { reason, .. } => ("down", reason),
    };
    DecisionReport {
        cycle: r.cycle,
        seconds_ago: now.saturating_duration_since(r.at).as_secs_f64(),
        from: r.from,
        to: r.to,
        text: format!("{verb} {} -> {}: {}", r.from, r.to, describe_reason(reason)),
    }
}
