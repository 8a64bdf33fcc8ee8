//! The node's non-SIP subsystems as the console sees them: health, memory, alarms, redundancy
//! and the lab's memory ballast.

use std::fmt::Write as _;
use std::sync::Mutex;

use sbc_config::acli::OperCommand;
use sbc_config::Config;
use serde_json::json;
use tracing::info;

/// The outcome of a command: text and optional JSON, or an error.
pub type Outcome = Result<(String, Option<serde_json::Value>), String>;

/// Health, alarms, redundancy and the lab ballast of one node.
#[derive(Debug, Default)]
pub struct Subsystems {
    ballast: Mutex<Vec<Vec<u8>>>,
}

impl Subsystems {
    /// Subsystems for a node starting with `cfg`.
    pub fn new(_cfg: &Config) -> Self {
        Self::default()
    }

    /// Applies an activated configuration.
    pub fn reconfigure(&self, _cfg: &Config) {}

    /// Megabytes of lab ballast held.
    pub fn ballast_mb(&self) -> u64 {
        self.ballast.lock().map(|b| b.len() as u64).unwrap_or(0)
    }

    /// Sets the lab ballast to `mb` megabytes of touched memory (grows or shrinks).
    pub fn set_ballast(&self, mb: u64) {
        if let Ok(mut b) = self.ballast.lock() {
            let mb = mb as usize;
            b.truncate(mb);
            while b.len() < mb {
                // Written, not just reserved, so the pages are resident.
                b.push(vec![0x5a; 1 << 20]);
            }
            b.shrink_to_fit();
        }
    }

    /// Executes an operational command that is not about SIP.
    pub async fn operational(&self, cmd: OperCommand, json: bool, running: &Config) -> Outcome {
        match cmd {
            OperCommand::ShowHealth => {
                let out = "health-score        100\nno deductions\n".to_owned();
                Ok((out, json.then(|| json!({"score": 100, "deductions": []}))))
            }
            OperCommand::ShowRedundancy => {
                let r = &running.redundancy;
                let out = format!(
                    "redundancy-config state {}: this node runs alone and serves SIP\n",
                    r.state
                );
                Ok((out, json.then(|| json!({"state": "standalone"}))))
            }
            OperCommand::ShowMemory => {
                let rss = process_rss_bytes().unwrap_or(0);
                let mut out = String::new();
                let _ = writeln!(out, "{:<22} {:>10} MB", "process-resident", rss >> 20);
                let _ = writeln!(out, "{:<22} {:>10} MB", "lab-ballast", self.ballast_mb());
                Ok((
                    out,
                    json.then(
                        || json!({"process_resident_bytes": rss, "ballast_mb": self.ballast_mb()}),
                    ),
                ))
            }
            OperCommand::DisplayAlarms => {
                Ok(("no alarms\n".into(), json.then(|| json!({"alarms": []}))))
            }
            OperCommand::ClearAlarm { id, task } => {
                Err(format!("no alarm {id} for task {task}: no alarm is raised"))
            }
            OperCommand::NotifyBerpdForce => Err(
                "redundancy-config state is disabled: this node has no peer to switch over to"
                    .into(),
            ),
            OperCommand::LabBallast { mb } => {
                if !running.system.lab_mode {
                    return Err(
                        "lab ballast needs system-config lab-mode enabled in the running configuration"
                            .into(),
                    );
                }
                self.set_ballast(mb);
                info!(mb, "lab ballast set");
                Ok((
                    format!("lab ballast now {mb} MB\n"),
                    json.then(|| json!({"ballast_mb": mb})),
                ))
            }
            other => Err(format!("{other:?} is handled by the SIP node")),
        }
    }
}

/// Resident memory of this process, from /proc/self/statm.
pub fn process_rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}
