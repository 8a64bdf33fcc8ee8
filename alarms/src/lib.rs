//! sbc-alarms: the alarm subsystem of an SBC node: memory, heap and CPU samplers, threshold
//! evaluation with a spike filter, the alarm table and the health score.
//!
//! # What it owns
//!
//! - [`sample`]: the samplers, the only code here that reads the system ([`MemorySampler`]
//!   with its [`MemorySource`]: host, cgroup or process; [`HeapSampler`] from jemalloc's
//!   statistics; [`CpuSampler`]).
//! - [`eval`]: the [`Evaluator`], a sans-IO state machine (time passed in, events polled out)
//!   holding the `alarm-threshold`s, the 15 s alarm iteration and its sub-samples, the spike
//!   rule, the critical-memory-abort trigger, the [`AlarmTable`] and the [`Health`] score. Its
//!   module docs state the spike rule and the trigger rule. It also holds the condition
//!   alarms the node raises and clears itself ([`ConditionAlarm`]: the accounting spool full).
//! - [`table`]: the raised alarms, as `display-alarms` lists them and `clear-alarm` clears
//!   them; serialisable for the ACLI's JSON.
//! - [`health`]: the health score, 0..=100, with the ledger of what took points off.
//! - [`threshold`]: the `alarm-threshold` elements and the alarm id scheme.
//!
//! It does not know SIP or SNMP: the traps its events become, the MIB and the agent are
//! `sbc-snmp`'s (which reads this crate's types, never the other way round), and the sockets
//! that send them are the `sbc` shell's. It does not decide what `critical-memory-abort` does
//! (nothing, the 503 gate, or a health drop: the `sbc` binary's policy), and does not run the
//! redundancy machine (the `ha` crate, which reads the health score). It runs no tasks and
//! opens no sockets: no tokio in its tree.
//!
//! # Data path
//!
//! ```text
//!  samplers ──percent──▶ Evaluator::handle_sample(now, kind, %)      (sub-samples, e.g. 1 s)
//!                        Evaluator::handle_timeout(now)              (iteration end, e.g. 15 s)
//!                          reading = min of last K sub-samples  (spike rule)
//!                          thresholds ─▶ AlarmTable ─▶ Health
//!                          two critical memory readings ─▶ CriticalMemoryAbort
//!                        Evaluator::poll() ─▶ AlarmEvent ─┬─▶ sbc_snmp::Trap::from_event ─▶ sbc's trap sink ─UDP─▶ receivers
//!                                                         └─▶ sbc: 503 gate, deduct_critical_memory
//! ```
#![warn(missing_docs)]

pub mod eval;
pub mod health;
pub mod sample;
pub mod table;
pub mod threshold;

pub use eval::{AlarmEvent, ConditionAlarm, Evaluator, EvaluatorConfig, EvaluatorError};
pub use health::{Deduction, Health};
pub use sample::{
    enable_background_purge, release_thread_cache, ByteUsage, CpuSampler, HeapSampler, HeapStats,
    MemorySampler, MemorySource, Reading, SampleError,
};
pub use table::{AlarmRow, AlarmTable, ClearError, ClearedBy};
pub use threshold::{
    AlarmId, AlarmKey, AlarmKind, Severity, Threshold, ThresholdError, Thresholds,
};

/// The lib's unit tests run on jemalloc so that [`HeapSampler`] sees their allocations, as
/// the `sbc` binary must (`#[global_allocator]` with `tikv-jemallocator`).
#[cfg(test)]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
