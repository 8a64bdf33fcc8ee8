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

use sbc_config::acli::{render_config, LifecycleCommand, OperCommand, Reply, Session};
use sbc_config::Config;
use serde_json::json;
use tokio::sync::mpsc;
use tracing::{info, warn};

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

use crate::control::subsystems::Outcome;

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

    /// Executes an operational command (`show ...`), as a session does; the metrics
    /// listener reads the same JSON at scrape time.
    pub async fn operational(&self, cmd: OperCommand, json: bool) -> Outcome {
        match cmd {
            OperCommand::ShowSipStats => {
                let snaps = self.node.snapshots(false).await;
                let mut total = sbc_proto::engine::Stats::default();
                for s in &snaps {
                    total += &s.stats;
                }
                let calls: usize = snaps.iter().map(|s| s.calls).sum();
                let v = serde_json::to_value(&total).unwrap_or_default();
                let reasons = self.node.admission_reasons();
                let mut out = String::new();
                let _ = writeln!(
                    out,
                    "{:<28} {:>12}",
                    "admission",
                    if reasons.is_empty() {
                        "accepting".to_owned()
                    } else {
                        format!("503 ({})", reasons.join(", "))
                    }
                );
                let _ = writeln!(out, "{:<28} {:>12}", "calls-active", calls);
                if let serde_json::Value::Object(m) = &v {
                    for (k, val) in m {
                        let _ = writeln!(out, "{:<28} {:>12}", k.replace('_', "-"), val);
                    }
                }
                let media = self.node.media_report();
                if let Some(m) = &media {
                    let free: usize = m.pools.iter().map(|p| p.free_pairs).sum();
                    let total: usize = m.pools.iter().map(|p| p.total_pairs).sum();
                    for (k, val) in [
                        ("media-sessions", m.sessions.to_string()),
                        ("media-port-pairs-free", format!("{free}/{total}")),
                        ("media-packets-forwarded", m.forwarded.to_string()),
                        ("media-bytes-forwarded", m.forwarded_bytes.to_string()),
                        (
                            "media-packets-dropped",
                            (m.dropped_unknown_port
                                + m.dropped_stranger
                                + m.dropped_no_destination
                                + m.send_errors)
                                .to_string(),
                        ),
                        ("media-latched", m.latched.to_string()),
                    ] {
                        let _ = writeln!(out, "{k:<28} {val:>12}");
                    }
                }
                let tcp = serde_json::to_value(self.node.tcp_stats()).unwrap_or_default();
                let tls = serde_json::to_value(self.node.tls_stats()).unwrap_or_default();
                for (prefix, counters) in [("tcp", &tcp), ("tls", &tls)] {
                    let serde_json::Value::Object(m) = counters else {
                        continue;
                    };
                    for (k, val) in m {
                        let tls_only = k.starts_with("handshake");
                        if tls_only && prefix == "tcp" {
                            continue;
                        }
                        let _ = writeln!(
                            out,
                            "{:<28} {:>12}",
                            format!("{prefix}-{}", k.replace('_', "-")),
                            val
                        );
                    }
                }
                Ok((
                    out,
                    json.then(|| {
                        json!({
                            "admission": if reasons.is_empty() { "accepting" } else { "503" },
                            "admission_reasons": reasons,
                            "calls_active": calls,
                            "counters": v,
                            "tcp": tcp,
                            "tls": tls,
                            "media": media.as_ref().map(|m| json!({
                                "sessions": m.sessions,
                                "pools": m.pools,
                                "forwarded": m.forwarded,
                                "forwarded_bytes": m.forwarded_bytes,
                                "dropped_unknown_port": m.dropped_unknown_port,
                                "dropped_stranger": m.dropped_stranger,
                                "dropped_no_destination": m.dropped_no_destination,
                                "send_errors": m.send_errors,
                                "latched": m.latched,
                            })),
                        })
                    }),
                ))
            }
            OperCommand::ShowWorkers => {
                let groups = self.node.worker_groups();
                let mut out = format!(
                    "{:<14} {:<6} {:>7} {:>7} {:>7} {:>7}  profile\n",
                    "group", "sched", "workers", "load", "demand", "queued"
                );
                for g in &groups {
                    let _ = writeln!(
                        out,
                        "{:<14} {:<6} {:>7} {:>6.1}% {:>6.1}% {:>7}  {}",
                        g.name,
                        g.scheduling,
                        g.workers,
                        g.load_percent,
                        g.demand_percent,
                        g.queued,
                        g.profile.as_deref().unwrap_or("fixed count")
                    );
                    for m in &g.members {
                        let _ = writeln!(
                            out,
                            "  worker {:<4} load {:>5.1}%  demand {:>5.1}%  queued {}+{}  shards {}",
                            m.id,
                            m.load_percent,
                            m.demand_percent,
                            m.queued_primary,
                            m.queued_secondary,
                            m.shards
                        );
                    }
                    if g.scheduling != "-" {
                        let _ = writeln!(
                            out,
                            "  queues: {} retransmissions removed, {} answered from state, {} served from secondary, 503 {} queue full + {} queue delay, {} dropped",
                            g.removed_retransmissions,
                            g.answered_from_state,
                            g.secondary_served,
                            g.rejected_queue_full,
                            g.rejected_queue_delay,
                            g.dropped_queue_full
                        );
                    }
                    if g.guard_cycles > 0 {
                        let _ = writeln!(out, "  no scale-down for {} more cycles", g.guard_cycles);
                    }
                    for d in &g.decisions {
                        let _ = writeln!(
                            out,
                            "  cycle {} ({:.0} s ago): {}",
                            d.cycle, d.seconds_ago, d.text
                        );
                    }
                }
                Ok((out, json.then(|| json!({"groups": groups}))))
            }
            OperCommand::ShowDialogs => {
                let snaps = self.node.snapshots(true).await;
                let mut dialogs: Vec<_> = snaps.into_iter().flat_map(|s| s.dialogs).collect();
                // Live media counters (the dialog's own copy is what was last replicated).
                let live: std::collections::HashMap<u64, crate::runtime::SessionReport> = self
                    .node
                    .media_report()
                    .map(|m| m.calls.into_iter().map(|s| (s.call, s)).collect())
                    .unwrap_or_default();
                for d in &mut dialogs {
                    d.media = None;
                }
                let mut out = format!("{} dialogs\n", dialogs.len());
                for d in dialogs.iter().take(200) {
                    let media = live.get(&d.id).map_or(String::new(), |s| {
                        format!(
                            "  media {}/{} packets, {}/{} lost",
                            s.from_caller.packets,
                            s.from_callee.packets,
                            s.from_caller.lost,
                            s.from_callee.lost
                        )
                    });
                    let _ = writeln!(
                        out,
                        "{:016x} {:<10} caller {} {}  callee {} {}{media}",
                        d.id,
                        format!("{:?}", d.state).to_lowercase(),
                        d.caller.peer,
                        d.caller.call_id,
                        d.callee.peer,
                        d.callee.call_id
                    );
                }
                if dialogs.len() > 200 {
                    out.push_str("... (first 200 shown; --json gives all)\n");
                }
                let media: Vec<_> = dialogs.iter().map(|d| live.get(&d.id)).collect();
                Ok((
                    out,
                    json.then(|| json!({"dialogs": dialogs, "media": media})),
                ))
            }
            OperCommand::ShowMedia => {
                let Some(m) = self.node.media_report() else {
                    return Ok((
                        "media is not anchored (media-manager disabled or no steering-pool): SDP passes unchanged\n".into(),
                        json.then(|| json!({"anchored": false})),
                    ));
                };
                Ok((
                    show_media(&m),
                    json.then(|| json!({"anchored": true, "media": m})),
                ))
            }
            OperCommand::ShowTls => {
                let certs = self.node.tls().certificates();
                let stats = self.node.tls_stats();
                let mut out = String::new();
                if certs.is_empty() {
                    out.push_str("no tls-profile with a certificate\n");
                }
                for c in &certs {
                    let _ = writeln!(
                        out,
                        "{:<16} expires {} ({} days){}  {}",
                        c.profile,
                        c.expires,
                        c.days_left,
                        if c.expiring { "  EXPIRING" } else { "" },
                        c.file
                    );
                }
                let _ = writeln!(
                    out,
                    "connections open {}, accepted {}, dialled {}; handshakes {}, refused {}, timed out {}",
                    stats.open,
                    stats.accepted,
                    stats.dialled,
                    stats.handshakes,
                    stats.handshake_failed,
                    stats.handshake_timeout
                );
                Ok((
                    out,
                    json.then(|| json!({"certificates": certs, "connections": stats})),
                ))
            }
            OperCommand::ShowAccessControl => {
                let (denied, counters) = self.node.access_report();
                let running = self.snapshot()?.running;
                let s = &running.sip_config;
                let mut out = format!(
                    "rate per source {} new requests/s, burst {}, deny {} s (session-agents and allow entries exempt)\n",
                    s.source_rate, s.source_burst, s.source_deny_seconds
                );
                for e in &running.access_control {
                    let _ = writeln!(out, "  {:<6} {}", e.action, e.source_address);
                }
                let _ = writeln!(out, "{} sources denied now", denied.len());
                for d in &denied {
                    let _ = writeln!(out, "  {:<40} {} s left", d.source, d.remaining_s);
                }
                let _ = writeln!(
                    out,
                    "new requests dropped for rate {}, messages dropped from denied sources {}, denies {}, untracked {}",
                    counters.rate_limited, counters.denied, counters.denies, counters.untracked
                );
                Ok((
                    out,
                    json.then(|| {
                        json!({
                            "denied": denied,
                            "counters": counters,
                            "lists": running.access_control,
                        })
                    }),
                ))
            }
            OperCommand::ClearDeny { address } => {
                if self.node.clear_deny(address) {
                    info!(%address, "source deny cleared by an operator");
                    Ok((
                        format!("{address} is no longer denied\n"),
                        json.then(|| json!({"cleared": address})),
                    ))
                } else {
                    Err(format!(
                        "{address} is not denied (show access-control lists the denied sources)"
                    ))
                }
            }
            OperCommand::Reboot => {
                warn!("reboot requested from the ACLI");
                let _ = self.control.send(Control::Reboot);
                Ok((
                    "rebooting: the node restarts now (alarms and health are cleared)\n".into(),
                    json.then(|| json!({"rebooting": true})),
                ))
            }
            OperCommand::ShowHealth => {
                let running = self.running();
                let (mut text, mut data) = self
                    .subsystems
                    .operational(OperCommand::ShowHealth, json, &running)
                    .await?;
                // What was activated but waits for a reboot: easy to forget after a change.
                let pending = restart_needed(&self.started_config, &running);
                if pending.is_empty() {
                    let _ = writeln!(text, "{:<24} none", "restart-needed");
                } else {
                    let _ = writeln!(
                        text,
                        "{:<24} {} activated change(s) wait for a reboot:",
                        "restart-needed",
                        pending.len()
                    );
                    for p in &pending {
                        let _ = writeln!(text, "  {p}");
                    }
                }
                if let Some(serde_json::Value::Object(o)) = data.as_mut() {
                    o.insert("restart_needed".into(), json!(pending));
                }
                Ok((text, data))
            }
            other => {
                self.subsystems
                    .operational(other, json, &self.running())
                    .await
            }
        }
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

/// `cfg` as this node can run it before a restart: with the SIP interfaces it bound at start
/// (`started`'s), and their steering pools. An interface that is still configured with the
/// same realm, address, transports and ports takes its live attribute (`tls-profile`) from
/// `cfg`.
///
/// # Errors
/// `cfg` does not hold together with the bound interfaces (a session agent in a realm that
/// is not bound yet, a TLS listener whose profile was removed): the activation is refused
/// whole, naming why.
pub fn on_bound_interfaces(started: &Config, cfg: &Config) -> Result<Config, String> {
    if started.sip_interfaces == cfg.sip_interfaces {
        return Ok(cfg.clone());
    }
    let same_binding = |a: &sbc_config::SipInterface, b: &sbc_config::SipInterface| {
        a.realm == b.realm
            && a.address == b.address
            && a.port == b.port
            && a.transports == b.transports
            && a.tls_port == b.tls_port
    };
    let mut effective = cfg.clone();
    effective.sip_interfaces = started
        .sip_interfaces
        .iter()
        .map(|bound| {
            let mut i = bound.clone();
            if let Some(new) = cfg.sip_interfaces.iter().find(|n| same_binding(bound, n)) {
                i.tls_profile.clone_from(&new.tls_profile);
            }
            // The worker groups keep the profiles they started with whatever this says; the
            // reference is only checked, so it is the new one (or none).
            i.auto_scaling_profile = cfg
                .sip_interfaces
                .iter()
                .find(|n| n.realm == bound.realm)
                .and_then(|n| n.auto_scaling_profile.clone());
            i
        })
        .collect();
    // Media anchoring stays as it was set up at start: its pools, for the bound realms.
    effective.steering_pools.clone_from(&started.steering_pools);
    effective.media_manager.state = started.media_manager.state;
    effective.validate().map_err(|e| {
        format!(
            "this configuration changes the sip-interfaces, which are bound at start, and cannot \
             run on the bound ones until a restart: {e}; it is saved: reboot to run it"
        )
    })?;
    Ok(effective)
}

/// The changes between `started` (the configuration the node started on) and `saved` that
/// only a restart applies; compared with the start, not the running configuration, so a
/// pending change stays reported until the restart, and one undone is no longer reported.
pub fn restart_needed(started: &Config, saved: &Config) -> Vec<String> {
    let running = started;
    let mut out = Vec::new();
    out.extend(interface_changes(
        &running.sip_interfaces,
        &saved.sip_interfaces,
    ));
    if running.steering_pools != saved.steering_pools {
        out.push("steering-pool: media addresses and ports are bound at start".to_owned());
    }
    if running.media_manager.state != saved.media_manager.state {
        out.push(format!(
            "media-manager state {} -> {}: media anchoring is set up at start",
            running.media_manager.state, saved.media_manager.state
        ));
    }
    if running.sip_config.workers != saved.sip_config.workers {
        out.push(format!(
            "sip-config workers {} -> {}: the worker count is fixed at start",
            running.sip_config.workers, saved.sip_config.workers
        ));
    }
    let (r, n) = (&running.sip_config, &saved.sip_config);
    let groups = [
        (
            "tcp-workers",
            r.tcp_workers.to_string(),
            n.tcp_workers.to_string(),
        ),
        (
            "tcp-auto-scaling-profile",
            format!("{:?}", r.tcp_auto_scaling_profile),
            format!("{:?}", n.tcp_auto_scaling_profile),
        ),
        ("prsm", r.prsm.to_string(), n.prsm.to_string()),
        (
            "queue-size",
            r.queue_size.to_string(),
            n.queue_size.to_string(),
        ),
        (
            "max-queue-delay-ms",
            r.max_queue_delay_ms.to_string(),
            n.max_queue_delay_ms.to_string(),
        ),
        (
            "routing-cost-us",
            r.routing_cost_us.to_string(),
            n.routing_cost_us.to_string(),
        ),
        (
            "auto-scaling-cycle-ms",
            r.auto_scaling_cycle_ms.to_string(),
            n.auto_scaling_cycle_ms.to_string(),
        ),
    ];
    for (key, old, new) in groups {
        if old != new {
            out.push(format!(
                "sip-config {key} {old} -> {new}: worker groups are set up at start"
            ));
        }
    }
    if running.auto_scaling_profiles != saved.auto_scaling_profiles {
        out.push("auto-scaling-profile: worker groups take their profiles at start".to_owned());
    }
    if running.redundancy != saved.redundancy {
        out.push("redundancy-config: the pair's channels are set up at start".to_owned());
    }
    out
}

/// Each `sip-interface` change a restart applies, by realm: added, removed, or what of its
/// binding (address, port, transports, tls-port, auto-scaling-profile) changed.
fn interface_changes(
    bound: &[sbc_config::SipInterface],
    saved: &[sbc_config::SipInterface],
) -> Vec<String> {
    let mut out = Vec::new();
    for b in bound {
        let Some(n) = saved.iter().find(|n| n.realm == b.realm) else {
            out.push(format!(
                "sip-interface {}: removed; it listens until a restart",
                b.realm
            ));
            continue;
        };
        let mut what = Vec::new();
        if n.address != b.address {
            what.push(format!("address {} -> {}", b.address, n.address));
        }
        if n.port != b.port {
            what.push(format!("port {} -> {}", b.port, n.port));
        }
        if n.transports != b.transports {
            let list = |t: &[sbc_config::Transport]| {
                t.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            };
            what.push(format!(
                "transports {} -> {}",
                list(&b.transports),
                list(&n.transports)
            ));
        }
        if n.tls_port != b.tls_port
            && (n.has(sbc_config::Transport::Tls) || b.has(sbc_config::Transport::Tls))
        {
            what.push(format!("tls-port {} -> {}", b.tls_port, n.tls_port));
        }
        if n.auto_scaling_profile != b.auto_scaling_profile {
            what.push(format!(
                "auto-scaling-profile {} -> {}",
                b.auto_scaling_profile.as_deref().unwrap_or("none"),
                n.auto_scaling_profile.as_deref().unwrap_or("none")
            ));
        }
        if !what.is_empty() {
            out.push(format!(
                "sip-interface {}: {}: listeners are bound at start",
                b.realm,
                what.join(", ")
            ));
        }
    }
    for n in saved {
        if !bound.iter().any(|b| b.realm == n.realm) {
            out.push(format!(
                "sip-interface {}: added; it listens after a restart",
                n.realm
            ));
        }
    }
    let realms =
        |l: &[sbc_config::SipInterface]| l.iter().map(|i| i.realm.clone()).collect::<Vec<_>>();
    if out.is_empty() && realms(bound) != realms(saved) {
        // Same interfaces in another order: the engine numbers them by position.
        out.push("sip-interface: reordered; the order is fixed at start".to_owned());
    }
    out
}

/// `show media` as text: the relay, each pool, the counters, then each call (up to 200).
fn show_media(m: &crate::runtime::MediaReport) -> String {
    let mut out = format!(
        "relay {}, {} sessions\n",
        if m.relaying {
            "running"
        } else {
            "stopped (standby)"
        },
        m.sessions
    );
    for p in &m.pools {
        let _ = writeln!(
            out,
            "  steering-pool {:<10} {} ports {}: {}/{} pairs free",
            p.realm, p.address, p.ports, p.free_pairs, p.total_pairs
        );
    }
    let _ = writeln!(
        out,
        "packets forwarded {} ({} bytes), received {}; dropped: {} unknown port, {} strangers, {} no destination, {} send errors; {} latched; sessions opened {}, refused for ports {}",
        m.forwarded,
        m.forwarded_bytes,
        m.received,
        m.dropped_unknown_port,
        m.dropped_stranger,
        m.dropped_no_destination,
        m.send_errors,
        m.latched,
        m.opened,
        m.refused_no_ports
    );
    let per_call = m
        .memory_sessions
        .checked_div(m.sessions)
        .map_or(String::new(), |b| format!(", {b} bytes per anchored call"));
    let _ = writeln!(
        out,
        "media table memory: {} bytes for the pools' ports, {} bytes for {} sessions{per_call}",
        m.memory_fixed, m.memory_sessions, m.sessions
    );
    for s in m.calls.iter().take(200) {
        let _ = writeln!(
            out,
            "{:016x} caller sent {} packets ({} lost, {} rtcp, {} dropped)  callee sent {} packets ({} lost, {} rtcp, {} dropped)",
            s.call,
            s.from_caller.packets,
            s.from_caller.lost,
            s.from_caller.rtcp,
            s.from_caller.dropped,
            s.from_callee.packets,
            s.from_callee.lost,
            s.from_callee.rtcp,
            s.from_callee.dropped
        );
        for (i, st) in s.streams.iter().enumerate() {
            let remote = |r: &Option<String>, latched: bool| {
                format!(
                    "{}{}",
                    r.as_deref().unwrap_or("-"),
                    if latched { " (latched)" } else { "" }
                )
            };
            let _ = writeln!(
                out,
                "  stream {i}: caller {} <-> :{}  |  :{} <-> callee {}",
                remote(&st.caller_remote, st.caller_latched),
                st.caller_port,
                st.callee_port,
                remote(&st.callee_remote, st.callee_latched)
            );
        }
    }
    if m.calls.len() > 200 {
        out.push_str("... (first 200 shown; --json gives all)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{on_bound_interfaces, restart_needed};
    use sbc_config::{Config, SessionAgent};

    fn with_access_port(port: u16) -> Config {
        let mut c = Config::embedded_default();
        if let Some(i) = c.sip_interfaces.iter_mut().find(|i| i.realm == "access") {
            i.port = port;
        }
        c
    }

    /// Adds an interface in realm `peering` (port 5090) beside the default two.
    fn add_peering_interface(cfg: &mut Config) {
        let mut extra = cfg.sip_interfaces[0].clone();
        extra.realm = "peering".into();
        extra.port = 5090;
        cfg.sip_interfaces.push(extra);
    }

    #[test]
    fn a_changed_port_is_reported_and_the_engine_keeps_the_bound_one() {
        let started = Config::embedded_default();
        let saved = with_access_port(5070);
        let restart = restart_needed(&started, &saved);
        assert_eq!(
            restart,
            ["sip-interface access: port 5060 -> 5070: listeners are bound at start"]
        );
        let effective = on_bound_interfaces(&started, &saved).expect("runs on the bound ones");
        assert_eq!(effective.sip_interfaces, started.sip_interfaces);
    }

    #[test]
    fn a_pending_change_stays_reported_and_an_undone_one_is_not() {
        let started = Config::embedded_default();
        let once = with_access_port(5070);
        let mut twice = once.clone();
        twice.sip_config.timer_c_ms += 1000;
        // A second activation of another (live) change still reports the port.
        assert_eq!(restart_needed(&started, &twice).len(), 1);
        // The port set back: nothing waits for a restart.
        assert!(restart_needed(&started, &with_access_port(5060)).is_empty());
    }

    #[test]
    fn added_and_removed_interfaces_are_named() {
        let started = Config::embedded_default();
        let mut saved = started.clone();
        add_peering_interface(&mut saved);
        assert_eq!(
            restart_needed(&started, &saved),
            ["sip-interface peering: added; it listens after a restart"]
        );
        assert_eq!(
            restart_needed(&saved, &started),
            ["sip-interface peering: removed; it listens until a restart"]
        );
        // Until then the engine knows only the bound two.
        let effective = on_bound_interfaces(&started, &saved).expect("runs");
        assert_eq!(effective.sip_interfaces.len(), 2);
    }

    #[test]
    fn a_configuration_that_needs_an_unbound_interface_is_refused() {
        let started = Config::embedded_default();
        let mut saved = started.clone();
        add_peering_interface(&mut saved);
        let mut agent: SessionAgent = saved.session_agents[0].clone();
        agent.name = "carrier".into();
        agent.realm = "peering".into();
        agent.port = 5098;
        saved.session_agents.push(agent);
        saved.validate().expect("valid after a restart");
        let err = on_bound_interfaces(&started, &saved).expect_err("refused before one");
        assert!(err.contains("reboot to run it"), "{err}");
        assert!(err.contains("peering"), "{err}");
    }

    #[test]
    fn a_profile_detached_and_deleted_waits_for_the_restart() {
        let mut started = Config::embedded_default();
        started
            .auto_scaling_profiles
            .push(sbc_config::AutoScalingProfile {
                name: "burst".into(),
                ..Default::default()
            });
        started.sip_interfaces[0].auto_scaling_profile = Some("burst".into());
        started.validate().expect("valid start");
        let mut saved = started.clone();
        saved.sip_interfaces[0].auto_scaling_profile = None;
        saved.sip_interfaces[0].port = 5070;
        saved.auto_scaling_profiles.clear();
        saved.validate().expect("valid after a restart");
        let effective = on_bound_interfaces(&started, &saved).expect("not refused");
        assert_eq!(
            effective.sip_interfaces[0].port,
            started.sip_interfaces[0].port
        );
        let restart = restart_needed(&started, &saved);
        assert!(
            restart
                .iter()
                .any(|r| r.contains("auto-scaling-profile burst -> none")),
            "{restart:?}"
        );
    }

    #[test]
    fn a_pool_for_an_added_realm_waits_for_the_restart() {
        let started = Config::embedded_default();
        let mut saved = started.clone();
        add_peering_interface(&mut saved);
        let mut pool = saved.steering_pools[0].clone();
        pool.realm_id = "peering".into();
        pool.start_port = 30_000;
        pool.end_port = 30_999;
        saved.steering_pools.push(pool);
        saved.validate().expect("valid after a restart");
        let effective = on_bound_interfaces(&started, &saved).expect("not refused");
        assert_eq!(effective.steering_pools, started.steering_pools);
    }

    #[test]
    fn unchanged_interfaces_pass_through() {
        let started = Config::embedded_default();
        let mut saved = started.clone();
        saved.sip_config.timer_c_ms += 1000;
        assert!(restart_needed(&started, &saved).is_empty());
        assert_eq!(on_bound_interfaces(&started, &saved).expect("runs"), saved);
    }
}
