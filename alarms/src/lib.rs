//! sbc-alarms: the alarm subsystem of an SBC node: memory, heap and CPU samplers, threshold
//! evaluation with a spike filter, the alarm table, the health score, and SNMP traps.
//!
//! # What it owns
//!
//! - [`sample`]: the samplers, the only code here that reads the system ([`MemorySampler`]
//!   with its [`MemorySource`]: host, cgroup or process; [`HeapSampler`] from jemalloc's
//!   statistics; [`CpuSampler`]).
//! - [`eval`]: the [`Evaluator`], a sans-IO state machine (time passed in, events polled out)
//!   holding the `alarm-threshold`s, the 15 s alarm iteration and its sub-samples, the spike
//!   rule, the critical-memory-abort trigger, the [`AlarmTable`] and the [`Health`] score. Its
//!   module docs state the spike rule and the trigger rule.
//! - [`table`]: the raised alarms, as `display-alarms` lists them and `clear-alarm` clears
//!   them; serialisable for the ACLI's JSON.
//! - [`health`]: the health score, 0..=100, with the ledger of what took points off.
//! - [`threshold`]: the `alarm-threshold` elements and the alarm id scheme.
//! - [`agent`]: the SNMP agent's logic (the MIB view of a status snapshot, GET, GETNEXT,
//!   GETBULK; v2c communities and v3 USM users), sans IO.
//! - [`usm`]: the SNMPv3 User-based Security Model (RFC 3414: keys, HMAC-SHA-96, the engine's
//!   boots and time window, reports) with AES-128-CFB privacy (RFC 3826), sans IO.
//! - [`trap`]: the SNMPv2c and SNMPv3 traps of our MIB (`alarms/mib/SBC-PAIR-MIB.txt`, under the
//!   experimental arc `1.3.6.1.3.3261` until the project has an IANA enterprise number), their
//!   encoder and decoder, and the [`TrapSink`] that sends them without blocking.
//!
//! It does not know SIP, does not decide what `critical-memory-abort` does (nothing, the 503
//! gate, or a health drop: the `sbc` binary's policy), and does not run the redundancy
//! machine (the `ha` crate, which reads the health score and sends its redundancy trap
//! through the same [`TrapSink`]).
//!
//! # Data path
//!
//! ```text
//!  samplers ──percent──▶ Evaluator::handle_sample(now, kind, %)      (sub-samples, e.g. 1 s)
//!                        Evaluator::handle_timeout(now)              (iteration end, e.g. 15 s)
//!                          reading = min of last K sub-samples  (spike rule)
//!                          thresholds ─▶ AlarmTable ─▶ Health
//!                          two critical memory readings ─▶ CriticalMemoryAbort
//!                        Evaluator::poll() ─▶ AlarmEvent ─┬─▶ Trap::from_event ─▶ TrapSink ─UDP─▶ receivers
//!                                                         └─▶ sbc: 503 gate, deduct_critical_memory
//! ```
#![warn(missing_docs)]

pub mod agent;
pub mod eval;
pub mod health;
pub mod sample;
pub mod table;
pub mod threshold;
pub mod trap;
pub mod usm;

pub use eval::{AlarmEvent, Evaluator, EvaluatorConfig, EvaluatorError};
pub use health::{Deduction, Health};
pub use sample::{
    enable_background_purge, release_thread_cache, ByteUsage, CpuSampler, HeapSampler, HeapStats,
    MemorySampler, MemorySource, Reading, SampleError,
};
pub use table::{AlarmRow, AlarmTable, ClearError, ClearedBy};
pub use threshold::{
    AlarmId, AlarmKey, AlarmKind, Severity, Threshold, ThresholdError, Thresholds,
};
pub use trap::{
    decode_trap, encode_trap, AlarmInfo, DecodedTrap, DecodedVarBind, FilterLevel, RedundancyRole,
    TransitionState, Trap, TrapError, TrapReceiver, TrapSink, TrapSinkConfig, TrapStats,
};

/// The lib's unit tests run on jemalloc so that [`HeapSampler`] sees their allocations, as
/// the `sbc` binary must (`#[global_allocator]` with `tikv-jemallocator`).
#[cfg(test)]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
