//! The node side of the ACLI: the session protocol. One [`ConsoleSession`] per management
//! connection runs the pure interpreter ([`sbc_config::acli`]) and hands what it returns to the
//! rooms that carry it out: the operational commands ([`crate::control::show`]), the
//! configuration lifecycle ([`crate::control::lifecycle`]) and the management listeners'
//! sockets ([`crate::control::management`]).
//!
//! Configuration lives in three copies, as on an Oracle SBC:
//! - **editing**: what `configure terminal` changes, shared by all sessions;
//! - **saved**: the file, written atomically by `save-config`;
//! - **running**: what the node runs, replaced by `activate-config` (which loads the saved
//!   file), with changes applied live where they can be and the rest named as needing a
//!   restart.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sbc_config::acli::{Reply, Session};
use sbc_config::Config;
use tokio::sync::mpsc;

use crate::control::management::ManagementSockets;
use crate::control::mgmt::{self, Request, Response};
use crate::control::oper::{OperCommand, OPERATIONS};
use crate::control::show::Outcome;
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

impl mgmt::SessionFactory for Console {
    type Session = ConsoleSession;

    fn session(self: Arc<Self>) -> ConsoleSession {
        ConsoleSession {
            acli: Session::new(&OPERATIONS),
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
                    Reply::Operational(line) => {
                        let lab_mode = console
                            .config
                            .lock()
                            .is_ok_and(|c| c.editing.system.lab_mode);
                        match OperCommand::parse(&line, lab_mode) {
                            Ok(cmd) => {
                                let r = console.operational(cmd, json).await;
                                finish(r, prompt_after(&self.acli))
                            }
                            Err(e) => Response::error(e, prompt_after(&self.acli)),
                        }
                    }
                }
            }
        }
    }
}

fn finish(r: Outcome, prompt: String) -> Response {
    match r {
        Ok((text, data)) => ok(text, prompt, data),
        Err(e) => Response::error(e, prompt),
    }
}

impl Console {
    /// `system-config metrics-address` of the running configuration.
    pub fn metrics_address(&self) -> Option<std::net::SocketAddr> {
        self.running().system.metrics_address
    }

    /// `system-config snmp-agent-address` of the running configuration.
    pub fn snmp_agent_address(&self) -> Option<std::net::SocketAddr> {
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
