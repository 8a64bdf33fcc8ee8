//! The node's non-SIP subsystems as the console sees them: health, memory, alarms, redundancy
//! and the lab's memory ballast.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use sbc_config::acli::OperCommand;
use sbc_config::Config;
use serde_json::json;
use tracing::info;

use crate::alarm_service::AlarmService;
use crate::heap_gate::HeapGateSettings;
use crate::pair::Pair;

/// The outcome of a command: text and optional JSON, or an error.
pub type Outcome = Result<(String, Option<serde_json::Value>), String>;

/// Health, alarms, redundancy and the lab ballast of one node.
pub struct Subsystems {
    /// The lab ballast: anonymous memory maps, so that shrinking it returns the memory to the
    /// system at once (an allocator would keep freed pages for a while).
    ballast: Mutex<Vec<memmap2::MmapMut>>,
    /// The alarm subsystem.
    pub alarms: Arc<AlarmService>,
    /// The HA pair, when redundancy is enabled.
    pub pair: Option<Arc<Pair>>,
    /// The heap gate's settings (it follows activated configurations).
    heap_gate: tokio::sync::watch::Sender<HeapGateSettings>,
}

impl Subsystems {
    /// Subsystems around a running alarm service; `heap_gate` feeds the heap gate's task.
    pub fn new(
        alarms: Arc<AlarmService>,
        pair: Option<Arc<Pair>>,
        heap_gate: tokio::sync::watch::Sender<HeapGateSettings>,
    ) -> Self {
        Self {
            ballast: Mutex::new(Vec::new()),
            alarms,
            pair,
            heap_gate,
        }
    }

    /// Applies an activated configuration: `running` as this node runs it (on the interfaces
    /// bound at start), `activated` as it was activated (what the pair pushes to the standby).
    pub fn reconfigure(&self, running: &Config, activated: &Config) {
        self.alarms.reconfigure(running);
        let _ = self.heap_gate.send(crate::settings::heap_gate(running));
        if let Some(p) = &self.pair {
            p.set_config(running, activated);
        }
    }

    /// Megabytes of lab ballast held.
    pub fn ballast_mb(&self) -> u64 {
        self.ballast.lock().map(|b| b.len() as u64).unwrap_or(0)
    }

    /// Sets the lab ballast to `mb` megabytes of touched memory (grows or shrinks).
    pub fn set_ballast(&self, mb: u64) -> Result<(), String> {
        let mut b = self.ballast.lock().map_err(|_| "ballast lock poisoned")?;
        let mb = mb as usize;
        b.truncate(mb);
        while b.len() < mb {
            let mut m = memmap2::MmapMut::map_anon(1 << 20)
                .map_err(|e| format!("cannot map 1 MB of ballast: {e}"))?;
            // Written, not just reserved, so the pages are resident.
            m.fill(0x5a);
            b.push(m);
        }
        b.shrink_to_fit();
        Ok(())
    }

    /// Executes an operational command that is not about SIP.
    pub async fn operational(&self, cmd: OperCommand, json: bool, running: &Config) -> Outcome {
        match cmd {
            OperCommand::ShowHealth => Ok(self.show_health(json)),
            OperCommand::ShowRedundancy => Ok(self.show_redundancy(json, running)),
            OperCommand::ShowMemory => Ok(self.show_memory(json)),
            OperCommand::DisplayAlarms => Ok(self.display_alarms(json)),
            OperCommand::ClearAlarm { id, task } => {
                let row = self.alarms.clear_alarm(id, &task)?;
                Ok((
                    format!(
                        "alarm {id} ({}) cleared; clear trap sent\n",
                        row.description
                    ),
                    json.then(|| json!({ "cleared": row })),
                ))
            }
            OperCommand::NotifyBerpdForce => match &self.pair {
                None => Err(
                    "redundancy-config state is disabled: this node has no peer to switch over to"
                        .into(),
                ),
                Some(p) => {
                    p.force_switchover().await?;
                    Ok((
                        "switchover requested\n".into(),
                        json.then(|| json!({"switchover": "requested"})),
                    ))
                }
            },
            OperCommand::LabBallast { mb } => {
                if !running.system.lab_mode {
                    return Err("lab ballast needs system-config lab-mode enabled in the \
                                running configuration"
                        .into());
                }
                self.set_ballast(mb)?;
                info!(mb, "lab ballast set");
                Ok((
                    format!("lab ballast now {mb} MB\n"),
                    json.then(|| json!({"ballast_mb": mb})),
                ))
            }
            other => Err(format!("{other:?} is handled by the SIP node")),
        }
    }

    fn show_health(&self, json: bool) -> (String, Option<serde_json::Value>) {
        let (score, deductions, ineligible) = self.alarms.health_report();
        let closed = self.alarms.admission_closed();
        let mut out = format!("{:<24} {score}\n", "health-score");
        if deductions.is_empty() {
            out.push_str("no deductions\n");
        }
        for d in &deductions {
            let _ = writeln!(
                out,
                "  -{:<3} {:<16} {}{}",
                d.points,
                d.source,
                d.reason,
                if d.until_restart {
                    " (until restart)"
                } else {
                    ""
                }
            );
        }
        if ineligible {
            out.push_str(
                "NOT AVAILABLE for an ensuing switchover until restarted (critical memory took 100)\n",
            );
        }
        if closed {
            out.push_str("new requests are refused with 503 (critical memory)\n");
        }
        let (sip_sync, synced) = match &self.pair {
            None => ("not applicable (redundancy disabled)".to_owned(), None),
            Some(p) => {
                let s = p.status();
                let text = match s.state {
                    sbc_ha::State::Active => format!(
                        "active: streaming {} dialogs to the standby",
                        p.replicated_dialogs()
                    ),
                    _ if s.synced => format!("synchronized ({} dialogs)", p.replicated_dialogs()),
                    _ => "not synchronized".to_owned(),
                };
                (text, Some(s.synced))
            }
        };
        let _ = writeln!(out, "{:<24} {sip_sync}", "sip-sync");
        let config_sync = match self.pair.as_ref().map(|p| p.config_synchronized()) {
            None => "not applicable (redundancy disabled)",
            Some(None) => "unknown (no peer heard)",
            Some(Some(true)) => "synchronized",
            Some(Some(false)) => "not synchronized (the peer runs another configuration)",
        };
        let _ = writeln!(out, "{:<24} {config_sync}", "config-sync");
        let (pushes_refused, last_refusal) =
            self.pair.as_ref().map_or((0, None), |p| p.push_refusals());
        if let Some(why) = &last_refusal {
            let _ = writeln!(
                out,
                "{:<24} {pushes_refused} refused; last: {why}",
                "config-pushes"
            );
        }
        let data = json.then(|| {
            json!({
                "score": score,
                "deductions": deductions,
                "ineligible_until_restart": ineligible,
                "admission_closed": closed,
                "sip_sync": sip_sync,
                "synced": synced,
                "config_sync": config_sync,
                "config_pushes_refused": pushes_refused,
                "last_config_push_refusal": last_refusal,
            })
        });
        (out, data)
    }

    fn show_redundancy(&self, json: bool, running: &Config) -> (String, Option<serde_json::Value>) {
        let Some(pair) = &self.pair else {
            let out = format!(
                "redundancy-config state {}: this node runs alone and serves SIP\n",
                running.redundancy.state
            );
            return (out, json.then(|| json!({"state": "standalone"})));
        };
        let s = pair.status();
        let mut out = String::new();
        let _ = writeln!(out, "{:<22} {}", "node", s.name);
        let _ = writeln!(
            out,
            "{:<22} {} (for {:.1} s)",
            "state",
            s.state.as_str(),
            s.since.elapsed().as_secs_f64()
        );
        let _ = writeln!(out, "{:<22} {}", "epoch", s.epoch);
        let ineligible = if s.health.ineligible_until_restart {
            " (ineligible until restart)"
        } else {
            ""
        };
        let _ = writeln!(out, "{:<22} {}{ineligible}", "health", s.health.score);
        let _ = writeln!(out, "{:<22} {}", "synchronized", s.synced);
        let _ = writeln!(out, "{:<22} {}", "peer-alive", s.peer_alive);
        if s.peer_suspected {
            let _ = writeln!(
                out,
                "{:<22} yes: the sync link broke; dead without a heartbeat within the grace",
                "peer-suspected"
            );
        }
        if let Some(p) = &s.peer {
            let _ = writeln!(out, "{:<22} {:?}", "peer", p);
        }
        let paths: Vec<&str> = s
            .paths_up
            .iter()
            .map(|up| if *up { "up" } else { "down" })
            .collect();
        let _ = writeln!(out, "{:<22} {}", "heartbeat-paths", paths.join(", "));
        let witness = match s.witness {
            None => "none configured",
            Some(true) => "reachable",
            Some(false) => "unreachable",
        };
        let _ = writeln!(out, "{:<22} {witness}", "witness");
        if let Some(lease) = s.lease {
            let held = if lease { "held" } else { "not held" };
            let _ = writeln!(out, "{:<22} {held}", "witness-lease");
        }
        if let Some((from, to, reason)) = s.last_transition {
            let _ = writeln!(
                out,
                "{:<22} {} -> {} ({})",
                "last-transition",
                from.as_str(),
                to.as_str(),
                reason.as_str()
            );
        }
        let _ = writeln!(out, "{:<22} {:?}", "counters", s.counters);
        let sync = pair.sync_counters();
        let (revision, lag) = (pair.sync_revision(), pair.sync_lag());
        let _ = match lag {
            Some(lag) => writeln!(
                out,
                "{:<22} revision {revision}, {lag} changes not yet sent to the standby; \
                 resyncs {}",
                "sync-lag", sync.resyncs
            ),
            None => writeln!(out, "{:<22} revision {revision}", "sync-lag"),
        };
        let _ = writeln!(
            out,
            "{:<22} sessions {}, replaced {}; refused: address {}, busy {}, handshake {}, \
             timeout {}, node {}, frame {}; entries refused {}",
            "sync-channel",
            sync.sessions,
            sync.replaced,
            sync.refused_address,
            sync.refused_busy,
            sync.refused_handshake,
            sync.refused_timeout,
            sync.refused_node,
            sync.refused_frame,
            sync.invalid_entries
        );
        let (pushes_refused, last_refusal) = pair.push_refusals();
        let _ = writeln!(
            out,
            "{:<22} {pushes_refused} refused{}",
            "config-pushes",
            last_refusal
                .as_ref()
                .map_or(String::new(), |w| format!("; last: {w}"))
        );
        let data = json.then(|| {
            json!({
                "node": s.name,
                "state": s.state.as_str(),
                "epoch": s.epoch,
                "health": s.health.score,
                "ineligible_until_restart": s.health.ineligible_until_restart,
                "synchronized": s.synced,
                "peer_alive": s.peer_alive,
                "peer_suspected": s.peer_suspected,
                "peer": s.peer.as_ref().map(|p| format!("{p:?}")),
                "paths_up": s.paths_up,
                "replicated_dialogs": pair.replicated_dialogs(),
                "witness": s.witness,
                "witness_lease": s.lease,
                "counters": {
                    "received": s.counters.received,
                    "accepted": s.counters.accepted,
                    "bad_mac": s.counters.bad_mac,
                    "bad_magic": s.counters.bad_magic,
                    "bad_length": s.counters.bad_length,
                    "bad_version": s.counters.bad_version,
                    "malformed": s.counters.malformed,
                    "stale": s.counters.stale,
                    "replayed": s.counters.replayed,
                    "unverified": s.counters.unverified,
                    "unknown_node": s.counters.unknown_node,
                    "own_node": s.counters.own_node,
                    "path_mismatch": s.counters.path_mismatch,
                    "sent": s.counters.sent,
                    "witness_probes": s.counters.witness_probes,
                    "witness_answers": s.counters.witness_answers,
                    "witness_dropped": s.counters.witness_dropped,
                    "witness_challenges": s.counters.witness_challenges,
                },
                "sync": sync,
                "sync_revision": revision,
                "sync_lag_changes": lag,
                "config_pushes_refused": pushes_refused,
                "last_config_push_refusal": last_refusal,
                "last_transition": s.last_transition.map(|(f, t, r)| json!({
                    "from": f.as_str(), "to": t.as_str(), "reason": r.as_str()
                })),
            })
        });
        (out, data)
    }

    fn show_memory(&self, json: bool) -> (String, Option<serde_json::Value>) {
        let rss = process_rss_bytes().unwrap_or(0);
        let r = self.alarms.readings();
        let pct = |p: Option<f64>| p.map_or("-".to_owned(), |p| format!("{p:.1} %"));
        let mb = |b: Option<u64>| b.map_or("-".to_owned(), |b| format!("{} MB", b >> 20));
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<22} {:>12}   (source: {})",
            "memory-utilisation",
            pct(r.memory_percent),
            r.memory_source
        );
        if let Some((used, limit)) = r.memory_bytes {
            let _ = writeln!(
                out,
                "{:<22} {:>12} of {} MB",
                "memory-used",
                format!("{} MB", used >> 20),
                limit >> 20
            );
        }
        let rows = [
            ("process-resident", format!("{} MB", rss >> 20)),
            ("heap-allocated", mb(r.heap_allocated)),
            ("heap-resident", mb(r.heap_resident)),
            ("heap-utilisation", pct(r.heap_percent)),
            ("cpu-utilisation", pct(r.cpu_percent)),
            ("lab-ballast", format!("{} MB", self.ballast_mb())),
        ];
        for (name, value) in rows {
            let _ = writeln!(out, "{name:<22} {value:>12}");
        }
        let data = json.then(|| {
            json!({
                "readings": r,
                "process_resident_bytes": rss,
                "ballast_mb": self.ballast_mb(),
            })
        });
        (out, data)
    }

    fn display_alarms(&self, json: bool) -> (String, Option<serde_json::Value>) {
        let rows = self.alarms.rows();
        let mut out = if rows.is_empty() {
            "no alarms\n".to_owned()
        } else {
            format!(
                "{:<8} {:<6} {:<9} {:>5} {:<22} {:<22} {}\n",
                "id", "task", "severity", "count", "first", "last", "description"
            )
        };
        for row in &rows {
            let _ = writeln!(
                out,
                "{:<8} {:<6} {:<9} {:>5} {:<22} {:<22} {}",
                row.id,
                row.task,
                row.severity.to_string(),
                row.count,
                fmt_time(row.first_seen),
                fmt_time(row.last_seen),
                row.description
            );
        }
        (out, json.then(|| json!({ "alarms": rows })))
    }
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

/// Resident memory of this process, from /proc/self/statm.
pub fn process_rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}
