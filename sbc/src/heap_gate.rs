//! Heap-gated admission: before the heap runs out, new requests are refused with 503 +
//! Retry-After while in-dialog traffic still flows (Oracle's `heap-threshold`, made precise).
//!
//! [`HeapGate`] (in `sbc-proto`) is the pure decision: it closes when heap usage exceeds
//! `sip-config heap-reject-threshold` (percent of `system-config heap-limit-mb`) and opens again
//! only below `heap-resume-threshold`, so a heap hovering at the threshold does not flap. A thin
//! task refreshes jemalloc's own statistics every [`REFRESH`] and applies the gate's changes to
//! the node, so the per-request check costs nothing (the workers only read their admission
//! state).

use std::sync::Arc;
use std::time::Duration;

use sbc_alarms::{AlarmKind, ClearedBy, HeapSampler, Severity};
use sbc_snmp::{AlarmInfo, Trap};
use tokio::sync::watch;
use tracing::{info, warn};

use sbc_proto::overload::heap_gate::{GateChange, HeapGate};

use crate::alarm_service::AlarmService;
use crate::runtime::Node;

/// How often heap statistics are refreshed.
pub const REFRESH: Duration = Duration::from_millis(100);

/// What the heap gate needs from the configuration: `system-config heap-limit-mb` and
/// `sip-config heap-reject-threshold` / `heap-resume-threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapGateSettings {
    /// The heap size percentages refer to, in bytes.
    pub limit_bytes: u64,
    /// Close above this percent.
    pub reject_at: u8,
    /// Reopen below this percent.
    pub resume_at: u8,
}

/// The alarm id of the heap gate's traps: the heap alarm's id (131074), owned by task `sipd`
/// (the SIP process, as Oracle names it) rather than `sbcd`, whose heap `alarm-threshold` rows
/// share the id.
pub const HEAP_GATE_ALARM_ID: u32 = 131_072 + AlarmKind::Heap.code();

/// The task named in the heap gate's traps.
pub const HEAP_GATE_TASK: &str = "sipd";

/// The `sbcAlarmTrap` (closed) or `sbcAlarmClearTrap` (reopened, cleared by the node itself)
/// of a gate change, as sent by node `node`.
pub fn gate_trap(change: GateChange, settings: HeapGateSettings, node: &str) -> Trap {
    let (percent, threshold) = match change {
        GateChange::Closed { percent } => (percent, settings.reject_at),
        GateChange::Opened { percent } => (percent, settings.resume_at),
    };
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let value = percent.round().clamp(0.0, f64::from(u32::MAX)) as u32;
    let alarm = AlarmInfo {
        kind: AlarmKind::Heap,
        value,
        severity: Severity::Major,
        threshold,
        alarm_id: HEAP_GATE_ALARM_ID,
        task: HEAP_GATE_TASK.to_owned(),
        node: node.to_owned(),
    };
    match change {
        GateChange::Closed { .. } => Trap::Alarm(alarm),
        GateChange::Opened { .. } => Trap::AlarmClear {
            alarm,
            cleared_by: ClearedBy::Auto,
        },
    }
}

/// Runs the gate against jemalloc's statistics until the task is dropped, following the
/// settings of every activated configuration sent on `settings`; every change of state is
/// logged and trapped through `alarms`.
pub async fn run_heap_gate(
    node: Arc<Node>,
    alarms: Arc<AlarmService>,
    mut settings: watch::Receiver<HeapGateSettings>,
) {
    let mut current = *settings.borrow_and_update();
    let mut sampler = match HeapSampler::new(current.limit_bytes) {
        Ok(s) => s,
        Err(e) => {
            warn!(error = %e, "heap statistics unavailable: heap-gated admission is off");
            return;
        }
    };
    let mut gate = HeapGate::new(f64::from(current.reject_at), f64::from(current.resume_at));
    let mut tick = tokio::time::interval(REFRESH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if settings.has_changed().unwrap_or(false) {
            let next = *settings.borrow_and_update();
            if next != current {
                match HeapSampler::new(next.limit_bytes) {
                    Ok(s) => sampler = s,
                    Err(e) => warn!(error = %e, "heap limit not applied"),
                }
                gate.set_thresholds(f64::from(next.reject_at), f64::from(next.resume_at));
                info!(
                    heap_limit_mb = next.limit_bytes >> 20,
                    reject_at = next.reject_at,
                    resume_at = next.resume_at,
                    "heap gate settings activated"
                );
                current = next;
            }
        }
        let Ok(reading) = sampler.sample() else {
            continue;
        };
        let change = gate.handle_reading(reading.percent);
        if let Some(change) = change {
            alarms
                .sink()
                .send(gate_trap(change, current, &alarms.hostname()));
        }
        match change {
            Some(GateChange::Closed { percent }) => {
                warn!(
                    heap_percent = percent,
                    threshold = current.reject_at,
                    "heap above heap-reject-threshold: new requests get 503"
                );
                node.set_admission_reason("heap", true);
            }
            Some(GateChange::Opened { percent }) => {
                info!(
                    heap_percent = percent,
                    threshold = current.resume_at,
                    "heap below heap-resume-threshold: accepting new requests"
                );
                node.set_admission_reason("heap", false);
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_changes_become_alarm_and_clear_traps() {
        let settings = HeapGateSettings {
            limit_bytes: 1 << 30,
            reject_at: 90,
            resume_at: 80,
        };
        let Trap::Alarm(a) = gate_trap(GateChange::Closed { percent: 91.4 }, settings, "sbc-a")
        else {
            panic!("a closed gate raises an alarm trap");
        };
        assert_eq!((a.value, a.threshold, a.alarm_id), (91, 90, 131_074));
        assert_eq!((a.task.as_str(), a.node.as_str()), ("sipd", "sbc-a"));
        assert_eq!(a.kind, AlarmKind::Heap);
        let Trap::AlarmClear { alarm, cleared_by } =
            gate_trap(GateChange::Opened { percent: 79.6 }, settings, "sbc-a")
        else {
            panic!("a reopened gate clears it");
        };
        assert_eq!((alarm.value, alarm.threshold), (80, 80));
        assert_eq!(cleared_by, ClearedBy::Auto);
    }
}
