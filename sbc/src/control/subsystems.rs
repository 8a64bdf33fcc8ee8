//! The node's non-SIP subsystems as the console reaches them: the alarm service, the pair, the
//! heap gate's settings and the lab's memory ballast.

use std::sync::{Arc, Mutex};

use sbc_config::Config;

use crate::alarm_service::AlarmService;
use crate::heap_gate::HeapGateSettings;
use crate::pair::Pair;

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
        match crate::settings::alarm_service(running) {
            Ok(s) => self.alarms.reconfigure(s),
            Err(e) => tracing::warn!(error = %e, "alarm configuration not applied"),
        }
        let _ = self.heap_gate.send(crate::settings::heap_gate(running));
        if let Some(p) = &self.pair {
            p.set_config(
                crate::settings::replica_rules(running),
                crate::settings::activated(activated),
            );
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
}
