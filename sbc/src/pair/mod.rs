//! The HA pair as a running node sees it: the glue between `sbc-ha`'s redundancy machine (which
//! decides) and the SIP runtime, the alarm subsystem and the console (which carry it out).
//!
//! - **Health in**: every change of the alarm subsystem's health score (and the
//!   critical-memory "ineligible until restart" flag) goes to the redundancy machine.
//! - **Service address**: `TakeServiceAddress` installs every replicated dialog into the
//!   workers, then binds the SIP interfaces (retrying while the former active releases them);
//!   `ReleaseServiceAddress` unbinds them first thing, so a planned switchover releases before
//!   the peer takes over. On loopback the two nodes of a pair share the same SIP addresses and
//!   only the active holds them; on real hosts, `notify-active`/`notify-standby` hooks would move
//!   a virtual IP the same way.
//! - **State sync**: the active streams every confirmed-dialog change (a bincode-2 encoded
//!   [`Dialog`] keyed by its id) to the standby over the sync channel (a Noise session that only
//!   the peer, holding the shared key and connecting from its own address, can open), with a
//!   snapshot when the standby (re)joins; the standby checks every dialog against its own
//!   configuration ([`ReplicaRules`]) before keeping it, and reports "synchronized".
//! - **Configuration pushes**: the active pushes what is pushable of each activated
//!   configuration (`sbc_config::Config::pushable_toml`: never `redundancy-config`, hooks, hostname
//!   or lab mode; its version is [`ActivatedConfig::version`]); the standby applies it keeping its own node-local settings, refuses one that
//!   names them, and says so in `show health` and `show redundancy`.
//! - **Peer death, fast**: when the standby's sync connection is closed or reset by the
//!   active's side ([`SyncEvent::LinkLost`]: a process that dies has its sockets closed by its
//!   kernel at once), the machine is told ([`Command::PeerLinkLost`]) and declares the peer
//!   dead one advertisement-time and a half after its last heartbeat unless a heartbeat
//!   comes, instead of after the whole dead time. The client reconnects at once: a session
//!   established again ([`SyncEvent::LinkUp`]) lifts the suspicion.
//! - **Traps**: every transition is logged and sent as `sbcRedundancyTrap`.

pub mod replica;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sbc_ha::shell::sync::{EntryCheck, SyncContext, SyncCountersSnapshot};
use sbc_ha::shell::{Command, HaHandle, SyncEvent, SyncPublisher};
use sbc_ha::{HaEvent, Redundancy, State, Status, SyncTable};
use sbc_snmp::{RedundancyRole, TransitionState, Trap};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use sbc_proto::engine::DialogChange;
use sbc_proto::registration::cache::Binding;
use sbc_proto::routing::agent::{AgentState, OutReason};
use sbc_proto::sip::dialog::Dialog;

use crate::alarm_service::AlarmService;
use crate::pair::replica::ReplicaRules;
use crate::runtime::Node;
use crate::tasks::Tasks;

/// How long a node handing the service address over waits for its calls in setup to finish
/// (INVITE transactions answered) before it releases the address. The peer retries binding
/// meanwhile; in-dialog traffic is still served here.
const HANDOVER_DRAIN: Duration = Duration::from_millis(1500);

/// The running pair machinery of one node.
pub struct Pair {
    commands: mpsc::UnboundedSender<Command>,
    status: tokio::sync::watch::Receiver<Status>,
    table: Arc<Mutex<SyncTable>>,
    publisher: Mutex<Option<SyncPublisher>>,
    tasks: Mutex<SyncTasks>,
    node: Arc<Node>,
    alarms: Arc<AlarmService>,
    name: String,
    peer_name: String,
    /// The sync channel's identities, key, entry check and counters.
    sync: Arc<SyncContext>,
    /// What a replicated dialog may name (follows activated configurations).
    rules: Arc<RwLock<ReplicaRules>>,
    /// Configuration pushes refused, and why the last one was.
    pushes_refused: AtomicU64,
    last_push_refusal: Mutex<Option<String>>,
    my_sync: SocketAddr,
    mate_sync: SocketAddr,
    sync_events: mpsc::UnboundedSender<SyncEvent>,
    took_over_at: Mutex<Option<Instant>>,
    /// The running configuration's version and text (pushed to the standby when active).
    config: Mutex<(u64, String)>,
    /// Configurations pushed by the active, for the node to save and activate.
    pushed: mpsc::UnboundedSender<String>,
    /// The keepalived-style hooks.
    hooks: Hooks,
}

/// Runs a hook command with `sh -c`, bounded to 10 s; its failure is logged, not fatal.
async fn run_hook(which: &str, command: &str) {
    if command.trim().is_empty() {
        return;
    }
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(10), child).await {
        Ok(Ok(out)) if out.status.success() => info!(hook = which, "hook ran"),
        Ok(Ok(out)) => warn!(
            hook = which,
            status = %out.status,
            stderr = %String::from_utf8_lossy(&out.stderr).trim(),
            "hook failed"
        ),
        Ok(Err(e)) => warn!(hook = which, error = %e, "hook could not run"),
        Err(_) => warn!(hook = which, "hook timed out after 10 s"),
    }
}

/// What the pair knows of an activated configuration: the part the active pushes (node-local
/// settings such as the hostname and `redundancy-config` left out, as TOML) and its version, a
/// hash of that text, so two nodes that run the same pushable configuration agree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivatedConfig {
    /// The version (FNV-1a 64 of `toml`).
    pub version: u64,
    /// The pushable part, as the standby saves it.
    pub toml: String,
}

impl ActivatedConfig {
    /// The activated configuration whose pushable part is `toml`.
    #[must_use]
    pub fn new(toml: String) -> Self {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in toml.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        Self { version: h, toml }
    }
}

/// The commands run on the pair's transitions (`notify-active`, `notify-standby`,
/// `notify-fault`; empty: none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hooks {
    /// Run on becoming active.
    pub active: String,
    /// Run on becoming standby.
    pub standby: String,
    /// Run on a fault.
    pub fault: String,
}

/// Everything [`Pair::spawn`] needs.
#[derive(Debug, Clone)]
pub struct PairSettings {
    /// The redundancy machine's settings.
    pub ha: sbc_ha::RedundancySettings,
    /// This node's name (`system-config hostname`), one of the peers.
    pub name: String,
    /// What a replicated dialog may name on this node.
    pub rules: ReplicaRules,
    /// The configuration the node starts on.
    pub config: ActivatedConfig,
    /// The transition hooks.
    pub hooks: Hooks,
}

/// The sync channel's tasks of the current role.
#[derive(Default)]
struct SyncTasks {
    server: Option<JoinHandle<()>>,
    client: Option<JoinHandle<()>>,
    reconcile: Option<JoinHandle<()>>,
}

impl Pair {
    /// Starts the pair machinery for `cfg` (redundancy enabled). The node starts unbound; the
    /// machine decides who takes the service address.
    /// Configurations pushed by the active arrive on `pushed` (as TOML) for the node to save
    /// and activate.
    pub async fn spawn(
        settings: PairSettings,
        node: Arc<Node>,
        alarms: Arc<AlarmService>,
        pushed: mpsc::UnboundedSender<String>,
        tasks: &Tasks,
    ) -> anyhow::Result<Arc<Self>> {
        let PairSettings {
            ha,
            name,
            rules,
            config,
            hooks,
        } = settings;
        let me = ha.peer(&name).ok_or_else(|| {
            anyhow::anyhow!(
                "system-config hostname {name:?} is not one of the redundancy-config peers ({})",
                ha.peers
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        let mate = ha
            .mate(&name)
            .ok_or_else(|| anyhow::anyhow!("redundancy-config has no peer besides {name:?}"))?;
        // The sync channel runs on each node's first heartbeat IP (IPv4 or IPv6, canonical:
        // an IPv4-mapped address is its IPv4 address).
        let first = |p: &sbc_ha::PeerSettings| {
            p.destinations
                .first()
                .map(|d| SocketAddr::new(d.ip().to_canonical(), ha.sip_sync_port))
        };
        let my_sync = first(me).ok_or_else(|| anyhow::anyhow!("peer {name} has no destination"))?;
        let mate_sync =
            first(mate).ok_or_else(|| anyhow::anyhow!("peer {} has no destination", mate.name))?;
        let incarnation = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(1);
        let machine = Redundancy::new(&ha, &name, incarnation, Instant::now())?;
        let rules = Arc::new(RwLock::new(rules));
        let check: EntryCheck = {
            let rules = rules.clone();
            Arc::new(move |key: &[u8], value: &[u8]| {
                if let Some(name) = agent_of_key(key) {
                    return check_agent_entry(name, value);
                }
                if let Some(name) = route_file_of_key(key) {
                    return check_route_file_entry(name, value);
                }
                if let Some(token) = registration_of_key(key) {
                    return check_registration_entry(token, value);
                }
                if let Some(record_key) = sbc_accounting::key_of_replication(key) {
                    return check_accounting_entry(record_key, value);
                }
                rules
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .check(key, value)
                    .map(|_| ())
            })
        };
        let sync = Arc::new(SyncContext::new(&ha, &name, check)?);
        let sockets = sbc_ha::shell::bind_paths(&ha, &name).await?;
        let mut handle: HaHandle = sbc_ha::shell::spawn(&ha, machine, sockets)?;
        let events = std::mem::replace(&mut handle.events, mpsc::unbounded_channel().1);
        let status = handle.status.clone();
        let (cmd_tx, mut cmd_rx) = mpsc::unbounded_channel::<Command>();
        // The handle lives in this task: commands go through it, dropping it stops the machine.
        // Not on `tasks`: dropping the handle joins the heartbeat thread, which the node does
        // once its runtime is gone (cancelled with the other tasks, the join would block the
        // I/O thread while the trap sink sends the last traps).
        tokio::spawn(async move {
            while let Some(c) = cmd_rx.recv().await {
                if !handle.send(c) {
                    break;
                }
            }
        });
        let (sync_tx, sync_rx) = mpsc::unbounded_channel();
        let pair = Arc::new(Self {
            commands: cmd_tx,
            status,
            table: Arc::new(Mutex::new(SyncTable::new())),
            publisher: Mutex::new(None),
            tasks: Mutex::new(SyncTasks::default()),
            node: node.clone(),
            alarms: alarms.clone(),
            name,
            peer_name: mate.name.clone(),
            sync,
            rules,
            pushes_refused: AtomicU64::new(0),
            last_push_refusal: Mutex::new(None),
            my_sync,
            mate_sync,
            sync_events: sync_tx,
            took_over_at: Mutex::new(None),
            config: Mutex::new((config.version, config.toml.clone())),
            pushed,
            hooks,
        });
        let _ = pair.commands.send(Command::ConfigVersion(config.version));

        // Health in.
        let mut health = alarms.health();
        let p = pair.clone();
        tasks.spawn(async move {
            loop {
                let h = *health.borrow_and_update();
                let _ = p.commands.send(Command::Health(sbc_ha::Health {
                    score: h.score,
                    ineligible_until_restart: h.ineligible_until_restart,
                }));
                if health.changed().await.is_err() {
                    break;
                }
            }
        });
        // Dialog changes out.
        let (dtx, mut drx) = mpsc::unbounded_channel::<DialogChange>();
        node.set_dialog_sync(Some(dtx));
        let p = pair.clone();
        tasks.spawn(async move {
            while let Some(first) = drx.recv().await {
                // What is queued already is published together, a call's successive changes
                // (its INVITE forwarded, ringing, answered, confirmed) as its latest only.
                let mut batch = vec![first];
                while batch.len() < PUBLISH_BATCH {
                    match drx.try_recv() {
                        Ok(c) => batch.push(c),
                        Err(_) => break,
                    }
                }
                for change in latest_per_dialog(batch) {
                    p.publish(change);
                }
            }
        });
        tasks.spawn(pair.clone().run_events(events, sync_rx));
        Ok(pair)
    }

    /// The redundancy status (`show redundancy`).
    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// Dialogs replicated: on the active those its publisher streams (its table changes with
    /// every call), on the standby those its replica holds.
    pub fn replicated_dialogs(&self) -> usize {
        self.replicated().0
    }

    /// Registration bindings replicated: on the active those its cache holds (each change is
    /// streamed), on the standby those its replica holds (installed when it takes over).
    pub fn replicated_bindings(&self) -> usize {
        self.replicated().1
    }

    /// (dialogs, bindings) replicated: the sync table less the session-agents' and route
    /// files' entries.
    fn replicated(&self) -> (usize, usize) {
        let router = self.node.router();
        let keys: Vec<Vec<u8>> = router
            .agents()
            .iter()
            .map(|a| agent_key(&a.hop.name))
            .chain(router.route_files().map(|(name, _)| route_file_key(name)))
            .collect();
        if let Some(p) = self.publisher.lock().ok().and_then(|p| p.clone()) {
            let agents = keys.iter().filter(|k| p.contains(k)).count();
            let bindings = self
                .node
                .registrations()
                .lock()
                .map(|c| c.len())
                .unwrap_or(0);
            return (p.len().saturating_sub(agents + bindings), bindings);
        }
        self.table
            .lock()
            .map(|t| {
                let agents = keys.iter().filter(|k| t.get(k).is_some()).count();
                let bindings = t
                    .iter()
                    .filter(|(k, _)| registration_of_key(k).is_some())
                    .count();
                (t.len().saturating_sub(agents + bindings), bindings)
            })
            .unwrap_or((0, 0))
    }

    /// Publishes the checksums of the route files this node loaded (on the active; only what
    /// changed is sent), so that the standby can tell whether its own copies are the same.
    pub fn publish_route_files(&self, files: &[(String, String)]) {
        let Ok(guard) = self.publisher.lock() else {
            return;
        };
        let Some(publisher) = guard.as_ref() else {
            return;
        };
        for (name, sha256) in files {
            let key = route_file_key(name);
            if publisher.value(&key).as_deref() != Some(sha256.as_bytes()) {
                publisher.upsert(key, sha256.as_bytes().to_vec());
            }
        }
    }

    /// The SHA-256 the active published for route file `name` (on the standby, from its
    /// replica); `None` on the active, or when none came.
    #[must_use]
    pub fn active_route_file_checksum(&self, name: &str) -> Option<String> {
        if self.publisher.lock().is_ok_and(|p| p.is_some()) {
            return None;
        }
        let value = self.table.lock().ok()?.get(&route_file_key(name))?.to_vec();
        String::from_utf8(value).ok()
    }

    /// Replicates registration bindings that changed (created, refreshed, moved, removed),
    /// refreshes coalesced by the cache, deletes replicated as deletes (kamailio#265, #1445).
    /// Nothing while this node has no publisher (it is not active).
    pub fn publish_registrations(&self, changes: Vec<(u64, Option<Binding>)>) {
        if changes.is_empty() {
            return;
        }
        let Ok(guard) = self.publisher.lock() else {
            return;
        };
        let Some(publisher) = guard.as_ref() else {
            return;
        };
        let (now, unix_ms) = (Instant::now(), unix_ms_now());
        for (token, binding) in changes {
            let key = registration_key(token);
            match binding {
                Some(b) => publisher.upsert(key, b.to_wire(now, unix_ms)),
                None => {
                    if publisher.contains(&key) {
                        publisher.delete(key);
                    }
                }
            }
        }
    }

    /// Installs the replicated bindings into the node's cache (a new active), replacing
    /// what it held (a former active's cache is stale); returns how many.
    fn install_registrations(&self, entries: &[(Vec<u8>, Vec<u8>)]) -> usize {
        let (now, unix_ms) = (Instant::now(), unix_ms_now());
        let mut cache = self
            .node
            .registrations()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.clear();
        let mut installed = 0;
        for (key, value) in entries {
            let Some(token) = registration_of_key(key) else {
                continue;
            };
            match Binding::from_wire(value, now, unix_ms) {
                Some(b) if b.token == token && b.phone_expires_at > now => {
                    cache.install(b);
                    installed += 1;
                }
                Some(_) => {}
                None => warn!(token, "replicated registration binding not installed"),
            }
        }
        installed
    }

    /// Replicates a session-agent's new state (the active's pings and traffic decided it), so
    /// that a new active starts from it (kamailio#473: a standby that never learnt them marks
    /// agents by itself). Nothing while this node has no publisher (it is not active).
    pub fn publish_agent_state(&self, name: &str, state: AgentState) {
        let Ok(guard) = self.publisher.lock() else {
            return;
        };
        if let Some(publisher) = guard.as_ref() {
            publisher.upsert(agent_key(name), state.to_wire().to_vec());
        }
    }

    /// The replicated table's revision (its Lamport clock): on the active its publisher's, on
    /// the standby its replica's. The active's minus the standby's is how many changes the
    /// standby lacks.
    pub fn sync_revision(&self) -> u64 {
        if let Some(p) = self.publisher.lock().ok().and_then(|p| p.clone()) {
            return p.revision();
        }
        self.table.lock().map(|t| t.revision()).unwrap_or(0)
    }

    /// On the active: changes made but not yet written to a standby's connection (all of them
    /// while no standby is connected); `None` on the standby.
    pub fn sync_lag(&self) -> Option<u64> {
        let p = self.publisher.lock().ok().and_then(|p| p.clone())?;
        Some(
            p.revision()
                .saturating_sub(self.sync.counters().streamed_revision),
        )
    }

    /// A configuration was activated on this node: announce its version and, when active,
    /// push its pushable part to the standby. `rules` are those of what this node runs of it
    /// (the SIP interfaces it bound at start, which the replica's rules index); `activated` is
    /// what was activated, whole, and what the standby saves.
    pub fn set_config(&self, rules: ReplicaRules, activated: ActivatedConfig) {
        if let Ok(mut r) = self.rules.write() {
            *r = rules;
        }
        let ActivatedConfig {
            version: v,
            toml: text,
        } = activated;
        if let Ok(mut c) = self.config.lock() {
            *c = (v, text.clone());
        }
        let _ = self.commands.send(Command::ConfigVersion(v));
        if let Ok(p) = self.publisher.lock() {
            if let Some(p) = p.as_ref() {
                p.push_config(v, text);
            }
        }
    }

    /// The standby refused a configuration pushed by the active (`why`, for `show health`).
    pub fn note_push_refused(&self, why: String) {
        self.pushes_refused.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut l) = self.last_push_refusal.lock() {
            *l = Some(why);
        }
    }

    /// Pushes refused so far, and why the last one was.
    pub fn push_refusals(&self) -> (u64, Option<String>) {
        (
            self.pushes_refused.load(Ordering::Relaxed),
            self.last_push_refusal.lock().ok().and_then(|l| l.clone()),
        )
    }

    /// The sync channel's counters (refused connections, handshakes, frames, entries).
    pub fn sync_counters(&self) -> SyncCountersSnapshot {
        self.sync.counters()
    }

    /// Whether the peer runs the same configuration (same version), when it is known.
    pub fn config_synchronized(&self) -> Option<bool> {
        let ours = self.config.lock().map(|c| c.0).ok()?;
        self.status().peer.map(|p| p.config_version == ours)
    }

    /// `notify berpd force`, decided by the redundancy machine
    /// ([`Redundancy::force_switchover`]), whose refusal comes back as the error.
    pub async fn force_switchover(&self) -> Result<(), String> {
        let (answer, decided) = oneshot::channel();
        self.commands
            .send(Command::ForceSwitchover(answer))
            .map_err(|_| "the redundancy task has stopped".to_owned())?;
        match decided.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(format!("switchover refused: {reason}")),
            Err(_) => Err("the redundancy task has stopped".to_owned()),
        }
    }

    fn publish(&self, change: DialogChange) {
        let Ok(guard) = self.publisher.lock() else {
            return;
        };
        let Some(publisher) = guard.as_ref() else {
            return;
        };
        match change {
            DialogChange::Upsert(d) => match encode_dialog(&d) {
                Ok(bytes) => publisher.upsert(d.id.to_be_bytes().to_vec(), bytes),
                Err(e) => warn!(error = %e, "dialog not replicated"),
            },
            DialogChange::Delete(id) => publisher.delete(id.to_be_bytes().to_vec()),
        }
    }

    async fn run_events(
        self: Arc<Self>,
        mut events: mpsc::UnboundedReceiver<HaEvent>,
        mut sync: mpsc::UnboundedReceiver<SyncEvent>,
    ) {
        loop {
            tokio::select! {
                e = events.recv() => {
                    let Some(e) = e else { break };
                    self.on_event(e).await;
                }
                s = sync.recv() => {
                    let Some(s) = s else { break };
                    match s {
                        SyncEvent::Synchronized { entries } => {
                            info!(dialogs = entries, "state sync complete");
                            let _ = self.commands.send(Command::SyncComplete);
                        }
                        SyncEvent::LinkLost => {
                            info!("state sync connection closed by the peer");
                            let _ = self.commands.send(Command::PeerLinkLost);
                        }
                        SyncEvent::LinkUp => {
                            let _ = self.commands.send(Command::PeerLinkUp);
                        }
                        SyncEvent::Config { version, toml } => {
                            let ours = self.config.lock().map(|c| c.0).unwrap_or(0);
                            if version != ours {
                                info!(version, "configuration pushed by the active");
                                let _ = self.pushed.send(toml);
                            }
                        }
                    }
                }
            }
        }
    }

    async fn on_event(self: &Arc<Self>, event: HaEvent) {
        match event {
            HaEvent::Transition { from, to, reason } => {
                warn!(
                    from = from.as_str(),
                    to = to.as_str(),
                    reason = reason.as_str(),
                    "redundancy transition"
                );
                let trap = Trap::Redundancy {
                    role: match to {
                        State::Active | State::BecomingActive => RedundancyRole::Active,
                        State::OutOfService => RedundancyRole::OutOfService,
                        _ => RedundancyRole::Standby,
                    },
                    state: transition_state(to),
                    reason: reason.as_str().to_owned(),
                    peer: self.peer_name.clone(),
                    node: self.name.clone(),
                };
                self.alarms.sink().send(trap);
            }
            HaEvent::ReleaseServiceAddress => {
                // Let calls being set up finish here (their 200s come back to this node); new
                // INVITEs are dropped so that their retransmissions reach the new active.
                let left = self.node.drain_for_handover(HANDOVER_DRAIN).await;
                if left > 0 {
                    warn!(
                        pending = left,
                        "handover: transactions still pending at release"
                    );
                }
                self.node.release_interfaces().await;
                // The calls are the new active's now; this node holds them again only as
                // replicas (installed afresh if it takes over again).
                self.node.forget_calls();
                run_hook("notify-standby", &self.hooks.standby).await;
            }
            HaEvent::TakeServiceAddress => self.take_service_address().await,
            HaEvent::BecomeActive => self.become_active(),
            // Standby: keep the sync client that fetched the snapshot (a second session would
            // send the whole table again); a snapshot request starts a fresh one.
            HaEvent::BecomeStandby => self.become_standby(false, false),
            HaEvent::RequestSnapshot => self.become_standby(false, true),
            HaEvent::ExchangeSnapshot => {
                // After a partition heals, only the node that yields exchanges its table (as a
                // sync client of the survivor, which merges it): the survivor keeps serving.
                if matches!(self.status().state, State::Active | State::BecomingActive) {
                    info!("partition healed: the peer yields and sends its dialogs to merge");
                } else {
                    self.become_standby(true, true);
                }
            }
            HaEvent::OutOfService { reason } => {
                warn!(reason = reason.as_str(), "out of service");
                run_hook("notify-fault", &self.hooks.fault).await;
            }
            HaEvent::PeerDead => warn!(peer = %self.peer_name, "peer declared dead"),
            HaEvent::PeerAlive => info!(peer = %self.peer_name, "peer alive"),
            HaEvent::PathDown(p) => warn!(path = ?p, "heartbeat path down"),
            HaEvent::PathUp(p) => info!(path = ?p, "heartbeat path up"),
            HaEvent::SwitchoverRefused { reason } => warn!(reason, "switchover refused"),
            HaEvent::PeerConfigVersion(v) => debug!(version = v, "peer config version"),
        }
    }

    /// Installs every replicated dialog into the workers, then binds the service address.
    async fn take_service_address(&self) {
        let t0 = Instant::now();
        let entries: Vec<(Vec<u8>, Vec<u8>)> = self
            .table
            .lock()
            .map(|t| t.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect())
            .unwrap_or_default();
        let mut installed = 0usize;
        let rules = self.rules.read().map(|r| r.clone()).unwrap_or_default();
        let router = self.node.router();
        let now = Instant::now();
        for (key, bytes) in &entries {
            let Some(name) = agent_of_key(key) else {
                continue;
            };
            let state = AgentState::from_wire(bytes);
            let index = router.agents().iter().position(|a| a.hop.name == name);
            // Disabled and unresolved are this node's own configuration's and DNS's to say.
            if let (
                Some(index),
                Some(state @ (AgentState::InService | AgentState::OutOfService(_))),
            ) = (index, state)
            {
                if !matches!(
                    state,
                    AgentState::OutOfService(OutReason::Disabled | OutReason::Unresolved)
                ) {
                    router.board().restore(index, state, now);
                    info!(
                        session_agent = name,
                        ?state,
                        "session-agent state replicated from the former active"
                    );
                }
            }
        }
        let records: Vec<sbc_accounting::CallRecord> = entries
            .iter()
            .filter(|(k, _)| sbc_accounting::key_of_replication(k).is_some())
            .filter_map(|(_, v)| sbc_accounting::CallRecord::from_wire(v))
            .collect();
        // A record the former active generated may have reached this table before its
        // dialog's change did (the two travel apart): the dialog is installed knowing the
        // records it already has (started with its connect time, its Interims, stopped), so a
        // retransmitted 2xx or BYE to this node does not generate one again.
        let mut generated: std::collections::HashMap<String, (u64, u32, bool)> =
            std::collections::HashMap::new();
        for r in &records {
            let g = generated.entry(r.session_id().to_owned()).or_default();
            match r.kind {
                sbc_accounting::RecordKind::Start => g.0 = r.connect_ms.max(g.0),
                sbc_accounting::RecordKind::Interim => g.1 = g.1.max(r.interim),
                sbc_accounting::RecordKind::Stop => g.2 = true,
            }
            g.0 = g.0.max(r.connect_ms);
        }
        if !records.is_empty() {
            let n = self.node.accounting().adopt(records);
            warn!(
                records = n,
                "accounting records the former active had not delivered: adopted"
            );
        }
        let bindings = self.install_registrations(&entries);
        if bindings > 0 {
            info!(
                bindings,
                "registration bindings replicated from the former active"
            );
        }
        for (key, bytes) in entries {
            if agent_of_key(&key).is_some()
                || route_file_of_key(&key).is_some()
                || registration_of_key(&key).is_some()
                || sbc_accounting::key_of_replication(&key).is_some()
            {
                continue;
            }
            match rules.check(&key, &bytes) {
                Ok(mut d) => {
                    if let Some(a) = d.accounting.as_deref_mut() {
                        if let Some(&(connect_ms, interims, stopped)) = generated.get(&a.session_id)
                        {
                            if connect_ms > 0 {
                                a.connect_ms = a.connect_ms.max(connect_ms);
                                a.started = true;
                            }
                            a.interims = a.interims.max(interims);
                            a.stopped |= stopped;
                        }
                    }
                    self.node.apply_replica(DialogChange::Upsert(Box::new(d)));
                    installed += 1;
                }
                Err(e) => warn!(error = %e, "replicated dialog not installed"),
            }
        }
        self.node.end_handover_drain();
        let installed_in = t0.elapsed();
        // A virtual IP moves here first, then the ports are bound on it.
        run_hook("notify-active", &self.hooks.active).await;
        let hook_in = t0.elapsed() - installed_in;
        // The former active may still hold the ports for a moment (or, after a partition, until
        // it yields): retry for as long as this node is the one that should serve.
        let started = Instant::now();
        let mut delay = Duration::from_millis(10);
        let mut warned = false;
        loop {
            match self.node.bind_interfaces().await {
                Ok(()) => break,
                Err(e) => {
                    if !matches!(self.status().state, State::Active | State::BecomingActive) {
                        info!("no longer taking over: service address left to the peer");
                        return;
                    }
                    if !warned && started.elapsed() > Duration::from_secs(2) {
                        warn!(error = %e, "service address still held by another process; retrying");
                        warned = true;
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_millis(250));
                }
            }
        }
        if let Ok(mut t) = self.took_over_at.lock() {
            *t = Some(Instant::now());
        }
        warn!(
            dialogs = installed,
            install_ms = installed_in.as_secs_f64() * 1e3,
            hook_ms = hook_in.as_secs_f64() * 1e3,
            total_ms = t0.elapsed().as_secs_f64() * 1e3,
            "took the service address: serving SIP"
        );
    }

    fn become_active(self: &Arc<Self>) {
        let Ok(mut tasks) = self.tasks.lock() else {
            return;
        };
        if let Some(c) = tasks.client.take() {
            c.abort();
        }
        if tasks.server.is_some() {
            return;
        }
        let table = self.table.lock().map(|t| t.clone()).unwrap_or_default();
        let publisher = SyncPublisher::new(table, SYNC_BUFFER);
        if let Ok(c) = self.config.lock() {
            publisher.push_config(c.0, c.1.clone());
        }
        if let Ok(mut p) = self.publisher.lock() {
            *p = Some(publisher.clone());
        }
        // Records not yet delivered go to the standby as they are generated, and leave its
        // table once a server acknowledged them.
        let records = publisher.clone();
        self.node
            .accounting()
            .set_replicator(Some(Arc::new(move |key, value| match value {
                Some(v) => records.upsert(key, v),
                None => {
                    if records.contains(&key) {
                        records.delete(key);
                    }
                }
            })));
        let me = self.clone();
        let watched = publisher.clone();
        tasks.reconcile = Some(tokio::spawn(async move {
            // Dialogs merged from the peer after a partition reach the table, not the workers:
            // install every entry the workers have not seen (bounded work: only when the table
            // grew).
            let mut known = std::collections::HashSet::new();
            let mut seen_len = 0usize;
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                let table = watched.table();
                if table.len() == seen_len {
                    continue;
                }
                seen_len = table.len();
                let mut installed = 0usize;
                let rules = me.rules.read().map(|r| r.clone()).unwrap_or_default();
                for (key, value) in table.iter() {
                    if agent_of_key(key).is_none()
                        && route_file_of_key(key).is_none()
                        && registration_of_key(key).is_none()
                        && sbc_accounting::key_of_replication(key).is_none()
                        && known.insert(key.to_vec())
                    {
                        if let Ok(d) = rules.check(key, value) {
                            me.node.apply_replica(DialogChange::Upsert(Box::new(d)));
                            installed += 1;
                        }
                    }
                }
                if installed > 0 {
                    debug!(installed, "dialogs from the sync table installed");
                }
            }
        }));
        let (addr, ctx, epoch) = (self.my_sync, self.sync.clone(), self.status().epoch);
        tasks.server = Some(tokio::spawn(async move {
            // The previous server may be releasing the port: retry, bounded.
            for _ in 0..100 {
                match tokio::net::TcpListener::bind(addr).await {
                    Ok(l) => {
                        info!(%addr, "state sync server listening");
                        if let Err(e) = sbc_ha::shell::serve_sync(l, publisher, ctx, epoch).await {
                            warn!(error = %e, "state sync server stopped");
                        }
                        return;
                    }
                    Err(e) => {
                        debug!(%addr, error = %e, "state sync port busy; retrying");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            warn!(%addr, "could not listen for the state sync");
        }));
    }

    /// Stops serving the sync channel and runs the sync client toward the active: a fresh one
    /// when `restart` (or none runs), else the running one is kept.
    fn become_standby(self: &Arc<Self>, exchange: bool, restart: bool) {
        let Ok(mut tasks) = self.tasks.lock() else {
            return;
        };
        if let Some(s) = tasks.server.take() {
            s.abort();
        }
        if let Some(r) = tasks.reconcile.take() {
            r.abort();
        }
        self.node.accounting().set_replicator(None);
        if let Ok(mut p) = self.publisher.lock() {
            if let Some(publisher) = p.take() {
                // Keep what we published as our replica: the union survives a split brain.
                if let Ok(mut t) = self.table.lock() {
                    *t = publisher.table();
                }
            }
        }
        if !restart && tasks.client.as_ref().is_some_and(|c| !c.is_finished()) {
            return;
        }
        if let Some(c) = tasks.client.take() {
            c.abort();
        }
        let me = self.clone();
        tasks.client = Some(tokio::spawn(async move {
            let mut exchange = exchange;
            loop {
                let epoch = me.status().epoch;
                let sessions = me.sync.counters().sessions;
                let attempt = Instant::now();
                match sbc_ha::shell::run_sync_client(
                    me.mate_sync,
                    me.table.clone(),
                    me.sync.clone(),
                    epoch,
                    exchange,
                    me.sync_events.clone(),
                )
                .await
                {
                    Ok(()) => debug!("state sync connection closed"),
                    Err(e) => debug!(error = %e, "state sync connection failed; retrying"),
                }
                exchange = false;
                // After a session that was established and lasted, reconnect at once: a peer
                // that answers is alive (that lifts the suspicion its closed connection
                // raised), one whose process died refuses at once. Otherwise (and so at most
                // once a second at once) retry every 200 ms.
                let lasted = me.sync.counters().sessions != sessions
                    && attempt.elapsed() >= Duration::from_secs(1);
                if !lasted {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }));
    }
}

fn transition_state(s: State) -> TransitionState {
    match s {
        State::Initial => TransitionState::Initial,
        State::BecomingActive => TransitionState::BecomingActive,
        State::Active => TransitionState::Active,
        State::RelinquishingActive => TransitionState::RelinquishingActive,
        State::BecomingStandby => TransitionState::BecomingStandby,
        State::Standby => TransitionState::Standby,
        State::OutOfService => TransitionState::OutOfService,
    }
}

/// Changes in flight to the standby before it is resynchronized with a snapshot. The buffer is
/// allocated whole when a node becomes active (about 100 bytes a slot): 65,536 slots were
/// 6.3 MB of every active's heap (the soak: 6.67 MB idle against the standby's 1.46). 16,384
/// are 2-4 s of changes at 2,000 calls/s, and a snapshot of 10,000 dialogs takes 30 ms.
/// The sync-table keys of session-agent states: this prefix and the agent's name (never 8
/// bytes long, as a dialog's key is).
const AGENT_KEY_PREFIX: &[u8] = b"session-agent:";
/// The longest session-agent or route-file name a replicated entry may carry.
const MAX_STATE_NAME: usize = 128;

/// The sync-table key of agent `name`'s state.
fn agent_key(name: &str) -> Vec<u8> {
    [AGENT_KEY_PREFIX, name.as_bytes()].concat()
}

/// The agent name of a session-agent state key; `None` for a dialog's key (or garbage).
fn agent_of_key(key: &[u8]) -> Option<&str> {
    key.strip_prefix(AGENT_KEY_PREFIX)
        .and_then(|n| std::str::from_utf8(n).ok())
}

/// The sync-table keys of registration bindings: this prefix and the binding's token in 16
/// hex digits.
const REGISTRATION_KEY_PREFIX: &[u8] = b"registration:";

/// The sync-table key of the binding of `token`.
fn registration_key(token: u64) -> Vec<u8> {
    [REGISTRATION_KEY_PREFIX, format!("{token:016x}").as_bytes()].concat()
}

/// The token of a registration key; `None` for any other key.
fn registration_of_key(key: &[u8]) -> Option<u64> {
    let hex = key.strip_prefix(REGISTRATION_KEY_PREFIX)?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
}

/// A replicated binding must decode, for the token its key names.
fn check_registration_entry(token: u64, value: &[u8]) -> Result<(), String> {
    match Binding::from_wire(value, Instant::now(), unix_ms_now()) {
        Some(b) if b.token == token => Ok(()),
        Some(_) => Err(format!("registration {token:016x}: another token inside")),
        None => Err(format!("registration {token:016x}: not a binding")),
    }
}

/// A replicated accounting record must decode, for the record its key names.
fn check_accounting_entry(record_key: &str, value: &[u8]) -> Result<(), String> {
    match sbc_accounting::CallRecord::from_wire(value) {
        Some(r) if r.key() == record_key => Ok(()),
        Some(_) => Err(format!(
            "accounting record {record_key}: another record inside"
        )),
        None => Err(format!("accounting record {record_key}: not a record")),
    }
}

/// The wall clock in Unix milliseconds.
fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The sync-table keys of the active's route-file checksums: this prefix and the file's
/// `local-routing-config` name.
const ROUTE_FILE_KEY_PREFIX: &[u8] = b"route-file:";

/// The sync-table key of route file `name`'s checksum.
fn route_file_key(name: &str) -> Vec<u8> {
    [ROUTE_FILE_KEY_PREFIX, name.as_bytes()].concat()
}

/// The route-file name of a checksum key; `None` for any other key.
fn route_file_of_key(key: &[u8]) -> Option<&str> {
    key.strip_prefix(ROUTE_FILE_KEY_PREFIX)
        .and_then(|n| std::str::from_utf8(n).ok())
}

/// A replicated route-file checksum: a bounded name and 64 hex digits.
fn check_route_file_entry(name: &str, value: &[u8]) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_STATE_NAME {
        return Err(format!(
            "a route-file checksum for a name of {} bytes",
            name.len()
        ));
    }
    if value.len() != 64 || !value.iter().all(u8::is_ascii_hexdigit) {
        return Err(format!("route file {name:?}: not a SHA-256"));
    }
    Ok(())
}

/// A replicated agent state must name an agent in a bounded name and decode.
fn check_agent_entry(name: &str, value: &[u8]) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_STATE_NAME {
        return Err(format!(
            "a session-agent state for a name of {} bytes",
            name.len()
        ));
    }
    AgentState::from_wire(value)
        .map(|_| ())
        .ok_or_else(|| format!("session-agent {name:?}: not a state"))
}

const SYNC_BUFFER: usize = 16_384;

/// Most dialog changes published in one batch.
const PUBLISH_BATCH: usize = 1024;

/// The last change of each dialog in `batch`, in the order of those last changes: a dialog
/// upserted three times and deleted is published as its deletion only.
fn latest_per_dialog(batch: Vec<DialogChange>) -> Vec<DialogChange> {
    let id = |c: &DialogChange| match c {
        DialogChange::Upsert(d) => d.id,
        DialogChange::Delete(id) => *id,
    };
    let mut last = std::collections::HashMap::with_capacity(batch.len());
    for (i, c) in batch.iter().enumerate() {
        last.insert(id(c), i);
    }
    batch
        .into_iter()
        .enumerate()
        .filter(|(i, c)| last.get(&id(c)) == Some(i))
        .map(|(_, c)| c)
        .collect()
}

/// The bytes of a dialog on the sync channel.
pub fn encode_dialog(d: &Dialog) -> Result<Vec<u8>, bincode::error::EncodeError> {
    bincode::serde::encode_to_vec(d, bincode::config::standard())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sbc_proto::sip::dialog::{DialogState, Leg, LegTransport};

    fn dialog(id: u64, state: DialogState) -> DialogChange {
        let leg = Leg {
            interface: 0,
            transport: LegTransport::Udp,
            peer: "127.0.0.1:5090".parse().expect("addr"),
            call_id: "c".into(),
            local_tag: "t".into(),
            remote_tag: None,
            local_party: String::new(),
            remote_party: String::new(),
            remote_target: String::new(),
            route_set: Vec::new(),
            local_cseq: 1,
            last_invite_cseq: 1,
        };
        DialogChange::Upsert(Box::new(Dialog {
            id,
            caller: leg.clone(),
            callee: leg,
            state,
            created_unix: 0,
            sdp_origin: [0; 2],
            sdp_version: [(0, 0); 2],
            media: None,
            setup: None,
            subscription: None,
            session_timer: None,
            leg_timers: None,
            accounting: None,
        }))
    }

    #[test]
    fn a_batch_publishes_each_dialogs_latest_change_in_order() {
        let batch = vec![
            dialog(1, DialogState::Trying),
            dialog(2, DialogState::Trying),
            dialog(1, DialogState::Early),
            DialogChange::Delete(2),
            dialog(3, DialogState::Confirmed),
            dialog(1, DialogState::Confirmed),
        ];
        let out = latest_per_dialog(batch);
        assert_eq!(
            out,
            vec![
                DialogChange::Delete(2),
                dialog(3, DialogState::Confirmed),
                dialog(1, DialogState::Confirmed),
            ]
        );
        assert!(latest_per_dialog(Vec::new()).is_empty());
    }
}
