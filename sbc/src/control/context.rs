//! What a console session can reach: the node, its subsystems, the three copies of the
//! configuration and the management listeners' sockets ([`Console`]). The rooms that act on it
//! (the session protocol in [`crate::control::console`], the operational commands in
//! [`crate::control::show`], the lifecycle in [`crate::control::lifecycle`]) import it from
//! here, so none imports another in a circle.
//!
//! Configuration lives in three copies, as on an Oracle SBC:
//! - **editing**: what `configure terminal` changes, shared by all sessions;
//! - **saved**: the file, written atomically by `save-config`;
//! - **running**: what the node runs, replaced by `activate-config` (which loads the saved
//!   file), with changes applied live where they can be and the rest named as needing a
//!   restart.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sbc_config::Config;
use tokio::sync::mpsc;

use crate::control::management::ManagementSockets;
use crate::control::subsystems::Subsystems;
use crate::runtime::Node;
use crate::settings;
use crate::snmp_v3::SnmpSettings;

/// The three copies of the configuration.
#[derive(Debug, Clone)]
pub struct ConfigState {
    /// What the node runs.
    pub running: Config,
    /// What sessions edit.
    pub editing: Config,
    /// The configuration file (`save-config` writes it, `activate-config` reads it). `None`
    /// when the node runs on the embedded default without `--config`.
    pub path: Option<PathBuf>,
}

/// Requests from the console to the node's main task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Restart the process cleanly (`reboot`).
    Reboot,
}

/// Everything a console session can reach.
pub struct Console {
    /// Configuration copies.
    pub config: Mutex<ConfigState>,
    /// The SIP node.
    pub node: Arc<Node>,
    /// Alarms, health, memory, redundancy.
    pub subsystems: Arc<Subsystems>,
    /// When the node started.
    pub started: Instant,
    /// Where control requests go.
    pub control: mpsc::UnboundedSender<Control>,
    /// Held while a configuration is made the running one: two activations (two operators, or
    /// one and a push from the active) apply one after the other, never interleaved.
    pub activation: Mutex<()>,
    /// The configuration the node started on: what is bound (interfaces, pools, the pair's
    /// channels, the worker groups) until a restart.
    pub started_config: Config,
    /// The management listeners' sockets: where each is served, and those an activation
    /// bound for a new address until the listener's task takes them.
    pub management: Mutex<ManagementSockets>,
}

impl Console {
    /// The running configuration's hostname (the prompt's).
    pub fn hostname(&self) -> String {
        self.config
            .lock()
            .map(|c| c.running.system.hostname.clone())
            .unwrap_or_else(|_| "sbc".into())
    }
}

impl Console {
    /// The metrics listener an activation bound for `addr`, if that is the one waiting (a
    /// socket for another address stays for its own turn).
    #[must_use]
    pub fn take_prebound_metrics(&self, addr: SocketAddr) -> Option<std::net::TcpListener> {
        let mut m = self.management.lock().ok()?;
        let waiting = m.metrics.as_ref().and_then(|l| l.local_addr().ok());
        (waiting == Some(addr)).then(|| m.metrics.take()).flatten()
    }

    /// The SNMP agent's socket an activation bound for `addr`, if that is the one waiting.
    #[must_use]
    pub fn take_prebound_snmp_agent(&self, addr: SocketAddr) -> Option<std::net::UdpSocket> {
        let mut m = self.management.lock().ok()?;
        let waiting = m.snmp_agent.as_ref().and_then(|s| s.local_addr().ok());
        (waiting == Some(addr))
            .then(|| m.snmp_agent.take())
            .flatten()
    }

    /// The metrics listener's task serves at `addr` now (`None`: nowhere).
    pub fn metrics_served_at(&self, addr: Option<SocketAddr>) {
        if let Ok(mut m) = self.management.lock() {
            m.metrics_served = addr;
        }
    }

    /// The SNMP agent's task serves at `addr` now (`None`: nowhere).
    pub fn snmp_agent_served_at(&self, addr: Option<SocketAddr>) {
        if let Ok(mut m) = self.management.lock() {
            m.snmp_agent_served = addr;
        }
    }
}

impl Console {
    /// `system-config metrics-address` of the running configuration.
    pub fn metrics_address(&self) -> Option<SocketAddr> {
        self.running().system.metrics_address
    }

    /// `system-config snmp-agent-address` of the running configuration.
    pub fn snmp_agent_address(&self) -> Option<SocketAddr> {
        self.running().system.snmp_agent_address
    }

    /// The SNMP agent's communities and the node's SNMP settings, from the running
    /// configuration (read at each request: an activation changes them at once).
    pub fn snmp_agent_settings(&self) -> (Vec<sbc_snmp::agent::Community>, SnmpSettings) {
        let running = self.running();
        (
            settings::snmp_communities(&running),
            settings::snmp(&running),
        )
    }

    /// The running configuration.
    pub fn running(&self) -> Config {
        self.config
            .lock()
            .map(|c| c.running.clone())
            .unwrap_or_default()
    }
}
