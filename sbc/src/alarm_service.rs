//! The alarm subsystem of a running node: the thin async shell around `sbc-alarms`.
//!
//! A task sleeps until the evaluator's next sub-sample or iteration, samples what the
//! thresholds name (memory from the configured source, jemalloc heap, CPU, sessions), feeds the
//! evaluator, sends a trap for every event, and carries out `critical-memory-abort`:
//! - `disabled`: alarm and trap only;
//! - `enabled`: on two consecutive critical readings, refuse new requests with 503 +
//!   Retry-After (in-dialog requests, ACK, CANCEL and BYE still flow);
//! - `switchover`: on two consecutive critical readings, take 100 off the health score (which
//!   the HA pair turns into a switchover); without a peer it behaves as `enabled`.
//!
//! The health score and the "ineligible until restart" flag are published on a watch channel
//! for the redundancy machinery.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use sbc_alarms::{
    AlarmEvent, AlarmId, AlarmKind, AlarmRow, ClearedBy, ConditionAlarm, CpuSampler, Deduction,
    Evaluator, EvaluatorConfig, HeapSampler, MemorySampler, MemorySource, Reading, Thresholds,
};
use sbc_snmp::Trap;
use serde::Serialize;
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::runtime::Node;
use crate::snmp_v3::{SnmpSettings, SnmpV3};
use crate::tasks::Tasks;
use crate::trap_sink::{TrapSink, TrapSinkConfig};

/// What the redundancy machinery needs to know about this node's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HealthStatus {
    /// 0..=100.
    pub score: u8,
    /// The critical-memory rule took its 100 points: not eligible to become active until the
    /// process restarts.
    pub ineligible_until_restart: bool,
}

/// Latest readings, for `show memory`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Readings {
    /// Memory utilisation in percent of the configured source.
    pub memory_percent: Option<f64>,
    /// Bytes used and limit of the memory source, when known.
    pub memory_bytes: Option<(u64, u64)>,
    /// jemalloc allocated bytes.
    pub heap_allocated: Option<u64>,
    /// jemalloc resident bytes.
    pub heap_resident: Option<u64>,
    /// Heap utilisation in percent of `heap-limit-mb`.
    pub heap_percent: Option<f64>,
    /// CPU utilisation in percent.
    pub cpu_percent: Option<f64>,
    /// Where the memory figure comes from.
    pub memory_source: String,
}

/// What `critical-memory-abort` does on two consecutive critical memory readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortPolicy {
    /// Alarm and trap only.
    Disabled,
    /// Refuse new requests with 503 + Retry-After.
    Enabled,
    /// Take 100 off the health score (the pair switches over); alone, as `Enabled`.
    Switchover,
}

impl std::fmt::Display for AbortPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Disabled => "disabled",
            Self::Enabled => "enabled",
            Self::Switchover => "switchover",
        })
    }
}

/// What the evaluator and the samplers are built from: a change rebuilds them.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluationSettings {
    /// The alarm iteration, its sub-samples and the spike rule.
    pub evaluator: EvaluatorConfig,
    /// The `alarm-threshold`s.
    pub thresholds: Thresholds,
    /// Where memory is read.
    pub memory_source: MemorySource,
    /// How `show memory` names the source.
    pub memory_source_text: String,
    /// The heap size heap percentages refer to, bytes.
    pub heap_limit_bytes: u64,
}

/// Everything the alarm service runs with; an activation hands it a new one.
#[derive(Debug, Clone)]
pub struct AlarmServiceSettings {
    /// The evaluator and samplers.
    pub evaluation: EvaluationSettings,
    /// `critical-memory-abort`.
    pub policy: AbortPolicy,
    /// The node's name in traps.
    pub hostname: String,
    /// The Retry-After range of the 503s of a closed admission.
    pub retry_after: (u32, u32),
    /// SNMPv3 users and the trap receivers.
    pub snmp: SnmpSettings,
}

/// The evaluator and samplers for `s`.
fn build(
    s: &EvaluationSettings,
) -> anyhow::Result<(Evaluator, Option<MemorySampler>, Option<HeapSampler>)> {
    let evaluator = Evaluator::new(
        s.evaluator.clone(),
        s.thresholds.clone(),
        Instant::now(),
        SystemTime::now(),
    )?;
    let memory = match MemorySampler::new(s.memory_source.clone()) {
        Ok(m) => Some(m),
        Err(e) => {
            warn!(error = %e, "memory sampler unavailable; memory alarms cannot be raised");
            None
        }
    };
    let heap = HeapSampler::new(s.heap_limit_bytes).ok();
    Ok((evaluator, memory, heap))
}

struct Inner {
    settings: EvaluationSettings,
    evaluator: Evaluator,
    memory: Option<MemorySampler>,
    heap: Option<HeapSampler>,
    cpu: Option<CpuSampler>,
    readings: Readings,
    policy: AbortPolicy,
    has_peer: bool,
    hostname: String,
    admission_closed: bool,
    retry_after: (u32, u32),
}

/// The alarm subsystem of one node.
pub struct AlarmService {
    inner: Mutex<Inner>,
    sink: TrapSink,
    snmp: Arc<SnmpV3>,
    health_tx: watch::Sender<HealthStatus>,
    node: Arc<Node>,
}

impl AlarmService {
    /// Starts the subsystem with `settings` on the node's `tasks`; `has_peer` says whether a
    /// redundancy peer exists (it decides what `critical-memory-abort=switchover` does). Must
    /// run inside tokio.
    ///
    /// `snmp` is the node's SNMPv3 engine: v3 trap receivers get its engine ID, boots and
    /// time, and their user's keys (computed here, once, before the first trap).
    ///
    /// # Errors
    /// The evaluator refuses the thresholds.
    pub fn spawn(
        settings: AlarmServiceSettings,
        node: Arc<Node>,
        has_peer: bool,
        snmp: Arc<SnmpV3>,
        tasks: &Tasks,
    ) -> anyhow::Result<Arc<Self>> {
        let (evaluator, memory, heap) = build(&settings.evaluation)?;
        let cpu = CpuSampler::new().ok();
        let users = snmp.users_now(&settings.snmp);
        let mut sink_config = TrapSinkConfig::new(snmp.trap_receivers(&settings.snmp, &users));
        sink_config.started = snmp.started();
        let sink = TrapSink::start(sink_config, tasks);
        let (health_tx, _) = watch::channel(HealthStatus {
            score: 100,
            ineligible_until_restart: false,
        });
        let service = Arc::new(Self {
            inner: Mutex::new(Inner {
                readings: Readings {
                    memory_source: settings.evaluation.memory_source_text.clone(),
                    ..Readings::default()
                },
                settings: settings.evaluation,
                evaluator,
                memory,
                heap,
                cpu,
                policy: settings.policy,
                has_peer,
                hostname: settings.hostname,
                admission_closed: false,
                retry_after: settings.retry_after,
            }),
            sink,
            snmp,
            health_tx,
            node,
        });
        tasks.spawn(service.clone().run());
        Ok(service)
    }

    /// Health changes, for the redundancy machinery.
    pub fn health(&self) -> watch::Receiver<HealthStatus> {
        self.health_tx.subscribe()
    }

    /// The node's SNMPv3 engine (the agent answers v3 with it).
    pub fn snmp_v3(&self) -> &Arc<SnmpV3> {
        &self.snmp
    }

    /// The trap sink (the HA machinery sends its redundancy traps through it).
    pub fn sink(&self) -> &TrapSink {
        &self.sink
    }

    /// The node's name in traps.
    pub fn hostname(&self) -> String {
        self.inner
            .lock()
            .map(|i| i.hostname.clone())
            .unwrap_or_default()
    }

    /// Applies an activated configuration: trap receivers, hostname, the abort policy, and,
    /// when thresholds, the iteration or the memory source changed, a new evaluator and new
    /// samplers. Raised threshold alarms are then forgotten (an alarm whose condition still
    /// holds is raised again, with its trap, at the next reading); the condition alarms (the
    /// accounting spool full), the critical-memory deduction and the "ineligible until
    /// restart" flag carry over: only a restart gives the last two back.
    ///
    /// New SNMPv3 users' keys are computed on a blocking thread: the receivers change once
    /// they are ready (at once when the users did not change).
    pub fn reconfigure(&self, settings: AlarmServiceSettings) {
        let snmp_settings = &settings.snmp;
        if let Some(users) = self.snmp.users_if_ready(snmp_settings) {
            self.sink
                .set_receivers(self.snmp.trap_receivers(snmp_settings, &users));
        } else if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (snmp, sink, s) = (self.snmp.clone(), self.sink.clone(), snmp_settings.clone());
            runtime.spawn(async move {
                let users = snmp.users(&s).await;
                sink.set_receivers(snmp.trap_receivers(&s, &users));
            });
        } else {
            let users = self.snmp.users_now(snmp_settings);
            self.sink
                .set_receivers(self.snmp.trap_receivers(snmp_settings, &users));
        }
        let Ok(mut i) = self.inner.lock() else {
            return;
        };
        i.policy = settings.policy;
        i.hostname = settings.hostname;
        i.retry_after = settings.retry_after;
        let settings = settings.evaluation;
        if settings == i.settings {
            return;
        }
        match build(&settings) {
            Ok((mut evaluator, memory, heap)) => {
                if i.evaluator.health().ineligible_until_restart() {
                    evaluator.deduct_critical_memory();
                }
                evaluator.carry_conditions(&i.evaluator);
                i.evaluator = evaluator;
                i.memory = memory;
                i.heap = heap;
                i.readings.memory_source = settings.memory_source_text.clone();
                i.settings = settings;
                info!("alarm thresholds and samplers reconfigured");
                self.drain(&mut i);
            }
            Err(e) => warn!(error = %e, "alarm configuration not applied"),
        }
    }

    /// The alarm table (`display-alarms`).
    pub fn rows(&self) -> Vec<AlarmRow> {
        self.inner
            .lock()
            .map(|i| i.evaluator.table().rows())
            .unwrap_or_default()
    }

    /// Health score, its deductions, and whether the node is ineligible until restart.
    pub fn health_report(&self) -> (u8, Vec<Deduction>, bool) {
        self.inner
            .lock()
            .map(|i| {
                let h = i.evaluator.health();
                (
                    h.score(),
                    h.deductions().to_vec(),
                    h.ineligible_until_restart(),
                )
            })
            .unwrap_or((0, Vec::new(), false))
    }

    /// Whether new requests are refused because of critical memory.
    pub fn admission_closed(&self) -> bool {
        self.inner
            .lock()
            .map(|i| i.admission_closed)
            .unwrap_or(false)
    }

    /// The latest readings (`show memory`).
    pub fn readings(&self) -> Readings {
        self.inner
            .lock()
            .map(|i| i.readings.clone())
            .unwrap_or_default()
    }

    /// `clear-alarm <id> <task>`: clears the alarm (a clear trap marked operator-cleared goes
    /// out). The health deduction of the critical-memory rule stays until restart.
    pub fn clear_alarm(&self, id: u32, task: &str) -> Result<AlarmRow, String> {
        let row = {
            let mut i = self.inner.lock().map_err(|_| "alarm lock poisoned")?;
            let row = i
                .evaluator
                .clear_alarm(id, task)
                .map_err(|e| e.to_string())?;
            self.drain(&mut i);
            row
        };
        info!(id, task, "alarm cleared by the operator");
        Ok(row)
    }

    /// Raises (or refreshes) a condition alarm the node watches itself, such as the accounting
    /// spool full: a new one goes into the table with its `sbcAlarmTrap` (and its health
    /// penalty). An alarm an operator cleared while its condition held stays cleared until
    /// [`clear_condition`](Self::clear_condition). Returns true when this call raised it.
    pub fn raise_condition(&self, alarm: ConditionAlarm) -> bool {
        let Ok(mut i) = self.inner.lock() else {
            return false;
        };
        let raised = i.evaluator.raise_condition(Instant::now(), alarm);
        self.drain(&mut i);
        raised
    }

    /// The condition of alarm `id` has ended: clears it, if raised, with its
    /// `sbcAlarmClearTrap` (cleared by the node itself). Returns the cleared row.
    pub fn clear_condition(&self, id: AlarmId) -> Option<AlarmRow> {
        let mut i = self.inner.lock().ok()?;
        let row = i.evaluator.clear_condition(id);
        self.drain(&mut i);
        row
    }

    /// Takes (or gives back) health points for a reason outside the alarm table, such as a
    /// lost heartbeat path.
    pub fn deduct_health(&self, source: &str, reason: &str, points: u8) {
        if let Ok(mut i) = self.inner.lock() {
            if points == 0 {
                i.evaluator.give_back_health(source);
            } else {
                i.evaluator.deduct_health(source, reason, points);
            }
            self.drain(&mut i);
        }
    }

    async fn run(self: Arc<Self>) {
        loop {
            let next = self
                .inner
                .lock()
                .ok()
                .and_then(|i| i.evaluator.poll_timeout())
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
            tokio::time::sleep_until(next.into()).await;
            let calls = if self.wants_sessions() {
                Some(
                    self.node
                        .snapshots(false)
                        .await
                        .iter()
                        .map(|s| s.calls)
                        .sum::<usize>(),
                )
            } else {
                None
            };
            let Ok(mut i) = self.inner.lock() else {
                error!("alarm lock poisoned; alarm subsystem stops");
                return;
            };
            let now = Instant::now();
            if i.evaluator.poll_sample(now) {
                self.sample(&mut i, now, calls);
            }
            i.evaluator.handle_timeout(now);
            self.drain(&mut i);
        }
    }

    fn wants_sessions(&self) -> bool {
        self.inner
            .lock()
            .map(|i| i.evaluator.kinds().contains(&AlarmKind::Sessions))
            .unwrap_or(false)
    }

    fn sample(&self, i: &mut Inner, now: Instant, calls: Option<usize>) {
        let kinds = i.evaluator.kinds();
        let mut memory = None;
        if let Some(m) = i.memory.as_mut() {
            match m.sample() {
                Ok(r) => memory = Some(r),
                Err(e) => warn!(error = %e, "memory sample failed"),
            }
        }
        if let Some(r) = &memory {
            i.readings.memory_percent = Some(r.percent);
            i.readings.memory_bytes = r.bytes.map(|b| (b.used, b.limit));
        }
        let heap: Option<Reading> = i.heap.as_ref().and_then(|h| {
            let stats = h.stats().ok();
            if let Some(s) = stats {
                i.readings.heap_allocated = Some(s.allocated);
                i.readings.heap_resident = Some(s.resident);
            }
            h.sample().ok()
        });
        if let Some(r) = &heap {
            i.readings.heap_percent = Some(r.percent);
        }
        let cpu = i.cpu.as_mut().and_then(|c| c.sample().ok());
        if let Some(r) = &cpu {
            i.readings.cpu_percent = Some(r.percent);
        }
        for kind in kinds {
            let percent = match kind {
                AlarmKind::Memory => memory.as_ref().map(|r| r.percent),
                AlarmKind::Heap => heap.as_ref().map(|r| r.percent),
                AlarmKind::Cpu => cpu.as_ref().map(|r| r.percent),
                // Sessions against a nominal 10,000-call capacity until a licence limit exists.
                AlarmKind::Sessions => calls.map(|c| c as f64 / 100.0),
                AlarmKind::Space | AlarmKind::AccountingSpool => None,
            };
            if let Some(p) = percent {
                i.evaluator.handle_sample(now, kind, p);
            }
        }
    }

    /// Handles every pending evaluator event: traps, logs, the abort policy, health.
    fn drain(&self, i: &mut Inner) {
        while let Some(event) = i.evaluator.poll() {
            match &event {
                AlarmEvent::Raised(row) => warn!(
                    id = row.id, severity = %row.severity, value = row.value,
                    threshold = row.threshold, "alarm raised: {}", row.description
                ),
                AlarmEvent::SeverityChanged { row, previous } => warn!(
                    id = row.id, severity = %row.severity, %previous, value = row.value,
                    "alarm severity changed"
                ),
                AlarmEvent::Cleared { row, by } => {
                    info!(id = row.id, by = ?by, "alarm cleared");
                }
                AlarmEvent::CriticalMemoryAbort { first, second } => {
                    warn!(first, second, policy = %i.policy, "two consecutive critical memory readings");
                    match i.policy {
                        AbortPolicy::Disabled => {}
                        AbortPolicy::Enabled => self.close_admission(i),
                        AbortPolicy::Switchover => {
                            i.evaluator.deduct_critical_memory();
                            if !i.has_peer {
                                warn!("critical-memory-abort=switchover without a peer: refusing new calls");
                                self.close_admission(i);
                            }
                        }
                    }
                }
                AlarmEvent::HealthChanged {
                    score,
                    previous,
                    reason,
                } => {
                    warn!(score, previous, reason = %reason, "health score changed");
                }
                AlarmEvent::StillCritical(_) => {}
            }
            if let Some(trap) = Trap::from_event(&event, &i.hostname) {
                if !self.sink.send(trap) {
                    warn!("trap queue full: trap dropped");
                }
            }
        }
        let h = i.evaluator.health();
        let status = HealthStatus {
            score: h.score(),
            ineligible_until_restart: h.ineligible_until_restart(),
        };
        self.health_tx.send_if_modified(|s| {
            let changed = *s != status;
            *s = status;
            changed
        });
    }

    fn close_admission(&self, i: &mut Inner) {
        if !i.admission_closed {
            i.admission_closed = true;
            self.node.set_admission_reason("critical-memory", true);
            warn!("critical memory: new requests are refused with 503 until restart");
        }
    }

    /// At orderly shutdown: clear every alarm with a clear trap marked "restart".
    pub fn clear_for_restart(&self) {
        if let Ok(mut i) = self.inner.lock() {
            i.evaluator.clear_all(ClearedBy::Restart);
            self.drain(&mut i);
        }
    }
}
