//! The node side of the ACLI: one [`ConsoleSession`] per management connection, executing what
//! the pure interpreter ([`sbc_config::acli`]) hands back: `show` commands, alarms, the
//! configuration lifecycle (save, activate, verify) and node control (reboot, switchover).
//!
//! Configuration lives in three copies, as on an Oracle SBC:
//! - **editing**: what `configure terminal` changes, shared by all sessions;
//! - **saved**: the file, written atomically by `save-config`;
//! - **running**: what the node runs, replaced by `activate-config` (which loads the saved
//!   file), with changes applied live where they can be and the rest named as needing a
//!   restart.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sbc_config::acli::{render_config, LifecycleCommand, Reply, Session};
use sbc_config::diff::{on_bound_interfaces, restart_needed};
use sbc_config::Config;
use serde_json::json;
use tokio::sync::mpsc;
use tracing::info;

use crate::control::mgmt::{self, Request, Response};
use crate::control::subsystems::Subsystems;
use crate::runtime::Node;
use crate::settings;

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

/// The metrics listener's and the SNMP agent's sockets between `activate-config` and their
/// tasks. An activation binds a new `metrics-address` or `snmp-agent-address` itself (so a
/// taken address refuses it) unless that address is the one served now; each activation
/// replaces both slots, so a socket for an address given up again is closed, never left
/// bound.
#[derive(Debug, Default)]
pub struct ManagementSockets {
    /// Where the metrics listener serves now (its task says).
    pub metrics_served: Option<SocketAddr>,
    /// Where the SNMP agent serves now (its task says).
    pub snmp_agent_served: Option<SocketAddr>,
    /// Bound for the new `metrics-address`, not yet taken.
    pub metrics: Option<std::net::TcpListener>,
    /// Bound for the new `snmp-agent-address`, not yet taken.
    pub snmp_agent: Option<std::net::UdpSocket>,
}

impl ManagementSockets {
    /// Binds the addresses of `cfg` that are not served now.
    ///
    /// # Errors
    /// An address that cannot be bound, named with the key and the reason.
    fn bind_new(
        &self,
        cfg: &Config,
    ) -> Result<(Option<std::net::TcpListener>, Option<std::net::UdpSocket>), String> {
        let system = &cfg.system;
        let metrics = match system.metrics_address {
            Some(a) if Some(a) != self.metrics_served => Some(
                std::net::TcpListener::bind(a)
                    .map_err(|e| format!("cannot bind metrics-address {a}: {e}"))?,
            ),
            _ => None,
        };
        let snmp_agent = match system.snmp_agent_address {
            Some(a) if Some(a) != self.snmp_agent_served => Some(
                std::net::UdpSocket::bind(a)
                    .map_err(|e| format!("cannot bind snmp-agent-address {a}: {e}"))?,
            ),
            _ => None,
        };
        Ok((metrics, snmp_agent))
    }
}

impl mgmt::SessionFactory for Console {
    type Session = ConsoleSession;

    fn session(self: Arc<Self>) -> ConsoleSession {
        ConsoleSession {
            acli: Session::new(),
            console: self,
        }
    }
}

/// One management connection's session.
pub struct ConsoleSession {
    acli: Session,
    console: Arc<Console>,
}

impl Console {
    fn hostname(&self) -> String {
        self.config
            .lock()
            .map(|c| c.running.system.hostname.clone())
            .unwrap_or_else(|_| "sbc".into())
    }
}

fn ok(output: String, prompt: String, data: Option<serde_json::Value>) -> Response {
    Response {
        ok: true,
        output,
        prompt,
        data,
        ..Response::default()
    }
}

impl mgmt::Session for ConsoleSession {
    async fn handle(&mut self, req: Request) -> Response {
        let console = self.console.clone();
        let host = console.hostname();
        match req {
            Request::Prompt => ok(String::new(), self.acli.prompt(&host), None),
            Request::Help => {
                let mut out = String::new();
                for (cmd, what) in self.acli.help() {
                    let _ = writeln!(out, "  {cmd:<28} {what}");
                }
                ok(out, self.acli.prompt(&host), None)
            }
            Request::Complete { line } => {
                let candidates = match console.config.lock() {
                    Ok(c) => self.acli.complete(&line, &c.editing),
                    Err(_) => Vec::new(),
                };
                Response {
                    ok: true,
                    prompt: self.acli.prompt(&host),
                    candidates,
                    ..Response::default()
                }
            }
            Request::Exec { line, json } => {
                let reply = match console.config.lock() {
                    Ok(mut c) => self.acli.execute(&line, &mut c.editing),
                    Err(_) => Reply::Error("configuration lock poisoned".into()),
                };
                let prompt_after = |s: &Session| s.prompt(&host);
                match reply {
                    Reply::Text(t) => ok(t, prompt_after(&self.acli), None),
                    Reply::Error(e) => Response::error(e, prompt_after(&self.acli)),
                    Reply::Exit => Response {
                        ok: true,
                        exit: true,
                        ..Response::default()
                    },
                    Reply::Lifecycle(cmd) => {
                        let r = console.lifecycle(cmd, json).await;
                        finish(r, prompt_after(&self.acli))
                    }
                    Reply::Operational(cmd) => {
                        let r = console.operational(cmd, json).await;
                        finish(r, prompt_after(&self.acli))
                    }
                }
            }
        }
    }
}

use crate::control::show::Outcome;

fn finish(r: Outcome, prompt: String) -> Response {
    match r {
        Ok((text, data)) => ok(text, prompt, data),
        Err(e) => Response::error(e, prompt),
    }
}

impl Console {
    async fn lifecycle(&self, cmd: LifecycleCommand, json: bool) -> Outcome {
        match cmd {
            LifecycleCommand::ShowRunningConfig => {
                let c = self.snapshot()?;
                Ok((
                    render_config(&c.running),
                    json.then(|| c.running.to_masked_json()),
                ))
            }
            LifecycleCommand::ShowConfiguration => {
                let c = self.snapshot()?;
                Ok((
                    render_config(&c.editing),
                    json.then(|| c.editing.to_masked_json()),
                ))
            }
            LifecycleCommand::VerifyConfig => {
                let c = self.snapshot()?;
                c.editing.validate().map_err(|e| e.to_string())?;
                Ok((
                    "configuration is valid\n".into(),
                    json.then(|| json!({"valid": true})),
                ))
            }
            LifecycleCommand::SaveConfig => {
                let c = self.snapshot()?;
                let path = c.path.ok_or(
                    "no configuration file: start the node with --config FILE to save (the file \
                     may not exist yet)",
                )?;
                c.editing.save_atomic(&path).map_err(|e| e.to_string())?;
                info!(path = %path.display(), "configuration saved");
                Ok((
                    format!(
                        "saved to {} (previous version kept as {})\n",
                        path.display(),
                        Config::backup_path(&path).display()
                    ),
                    json.then(|| json!({"saved": path})),
                ))
            }
            LifecycleCommand::ActivateConfig => self.activate(json).await,
        }
    }

    fn snapshot(&self) -> Result<ConfigState, String> {
        self.config
            .lock()
            .map(|c| c.clone())
            .map_err(|_| "configuration lock poisoned".to_owned())
    }

    /// A configuration pushed by the pair's active: its pushable part over this node's own
    /// node-local settings (`redundancy-config`, hostname, lab mode; a push naming one is
    /// refused whole), saved (when the node has a file) and activated.
    ///
    /// # Errors
    /// Why the push was refused; nothing was changed.
    pub async fn apply_pushed(&self, toml: &str) -> Result<(), String> {
        // Read, merged, saved and applied under the lock: an operator's activation on this
        // node in the meantime is neither undone nor overwritten in the file.
        let _one_at_a_time = self.one_activation_at_a_time();
        let c = self.snapshot()?;
        let cfg = c.running.with_push(toml).map_err(|e| e.to_string())?;
        if let Some(path) = &c.path {
            cfg.save_atomic(path).map_err(|e| e.to_string())?;
        }
        if let Ok(mut st) = self.config.lock() {
            st.editing = cfg.clone();
        }
        self.apply_locked(cfg).map(|restart| {
            info!(
                ?restart,
                "configuration from the active saved and activated"
            );
        })
    }

    /// Holds [`Console::activation`].
    fn one_activation_at_a_time(&self) -> std::sync::MutexGuard<'_, ()> {
        self.activation
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `activate-config`: the saved file becomes the running configuration.
    async fn activate(&self, json: bool) -> Outcome {
        let _one_at_a_time = self.one_activation_at_a_time();
        let c = self.snapshot()?;
        let path = c
            .path
            .ok_or("no configuration file: nothing saved to activate (start with --config FILE)")?;
        let saved = Config::load(&path).map_err(|e| e.to_string())?;
        let restart = self.apply_locked(saved)?;
        info!(restart_needed = ?restart, "configuration activated");
        let mut out = String::from("configuration activated\n");
        if restart.is_empty() {
            out.push_str("all changes are in effect\n");
        } else {
            out.push_str("these changes take effect after a restart (reboot):\n");
            for r in &restart {
                let _ = writeln!(out, "  {r}");
            }
        }
        Ok((
            out,
            json.then(|| json!({"activated": true, "restart_needed": restart})),
        ))
    }

    /// Makes `cfg` the running configuration; returns the changes that need a restart.
    ///
    /// What is bound at start stays as it is: the engine keeps addressing the SIP interfaces
    /// it listens on (its Via, Contact and Record-Route ports), so a changed `sip-interface`
    /// waits for a restart instead of being advertised while nothing listens there.
    /// The caller holds [`Console::activation`].
    fn apply_locked(&self, cfg: Config) -> Result<Vec<String>, String> {
        let restart = restart_needed(&self.started_config, &cfg);
        let effective = on_bound_interfaces(&self.started_config, &cfg)?;
        let ecfg = settings::engine_config(&effective).map_err(|e| e.to_string())?;
        // New management addresses are bound before anything changes: one that is taken
        // refuses the activation.
        let (metrics, snmp_agent) = self
            .management
            .lock()
            .map_err(|_| "management sockets lock poisoned")?
            .bind_new(&cfg)?;
        // Certificates first: files that do not load refuse the whole activation, unchanged.
        let rotated = self
            .node
            .tls()
            .load(&effective)
            .map_err(|e| e.to_string())?;
        if !rotated.is_empty() {
            info!(profiles = ?rotated, "TLS certificates rotated: new handshakes present them");
        }
        self.node.reconfigure(&ecfg);
        self.node.reconfigure_edge(&effective);
        self.subsystems.reconfigure(&effective, &cfg);
        if let Ok(mut m) = self.management.lock() {
            // Both replaced, None included: a socket bound for an address given up since is
            // closed here.
            m.metrics = metrics;
            m.snmp_agent = snmp_agent;
        }
        if let Ok(mut st) = self.config.lock() {
            st.running = cfg;
        }
        Ok(restart)
    }

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

    /// The running configuration.
    pub fn running(&self) -> Config {
        self.config
            .lock()
            .map(|c| c.running.clone())
            .unwrap_or_default()
    }
}
