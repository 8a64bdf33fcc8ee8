//! A node's SIP runtime: its sockets, binding and releasing the service address, and shutdown.
//! What to do with a message is the engines' ([`sbc_proto::engine`]); which thread does it is
//! the worker groups' ([`crate::workers`]).
//!
//! - One receive thread per UDP interface (`udp.rs`) reads datagrams and queues each on its
//!   interface's worker group, on the worker that serves the message's shard.
//! - TLS is TCP with a handshake first ([`tls`]): its own edge with the same limits, an
//!   acceptor per TLS interface and a verified connector per next hop; TLS messages also go to
//!   the TCP worker group.
//! - TCP runs on tokio ([`tcp`]): an accept loop per interface, a reader and a writer task per
//!   connection, and an outbound connector for next hops reached over TCP; every TCP message
//!   goes to the TCP worker group.
//! - The engines (one per shard) are driven by the group workers (messages) and the timer
//!   thread (timers); a control thread runs the autoscalers once per cycle.
//!
//! Shutdown (SIGINT/SIGTERM) follows mini-redis: every engine is told to drain (new requests get
//! 503, transactions in progress finish), the node waits until all are idle or the grace period
//! ends, then stops the threads.

pub mod media;
pub mod plan;
pub mod tcp;
pub mod tls;
mod udp;

use std::net::{IpAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::mpsc as tmpsc;
use tracing::{debug, info, warn};

use sbc_proto::access::{AccessControl, AccessCounters, AccessEvent, DeniedSource, Verdict};
use sbc_proto::engine::{
    Admission, DialogChange, EngineConfig, Inbound, MediaAnchoring, SharedMediaTable,
    SharedRegistrations, Stats, TraceEvent, Transmit,
};
use sbc_proto::media::{MediaEvent, MediaTable};
use sbc_proto::overload::prsm::Kind;
use sbc_proto::registration::cache::{CacheSettings, RegistrationCache};
use sbc_proto::shard;
use sbc_proto::sip::classify::classify;
use sbc_proto::sip::dialog::LegTransport;

use self::media::{MediaRelay, PoolBinding, RelayCounters};
pub use self::plan::{Listener, LiveSettings, MediaPlan, MediaTiming, RuntimeSettings};
use self::tcp::{TcpEdge, TcpStatsSnapshot};
use crate::trace::TraceHub;
use crate::workers::{
    add_free_shards, lock, sum_shards, total_stats, totals, Ctx, Group, GroupReport, Outlet,
    Shards, TimerThread, SHARDS,
};

/// What one shard (engine) reports for `show sip-stats` and `show dialogs`, and the HA
/// hand-over.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ShardSnapshot {
    /// Shard number.
    pub index: usize,
    /// Its counters.
    pub stats: Stats,
    /// Calls in progress (set up or being set up; not those lingering after their BYE).
    pub calls: usize,
    /// Live transactions.
    pub transactions: usize,
    /// Transactions waiting for a final response.
    pub pending: usize,
    /// Its dialogs, when asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dialogs: Vec<sbc_proto::sip::dialog::Dialog>,
}

/// Where the engines' output goes: UDP sockets, TCP connections, the HA state sync.
struct Wire {
    udp: RwLock<Vec<Option<Arc<UdpSocket>>>>,
    /// Whether each interface's UDP socket is IPv6 (IPv4 peers then get mapped addresses).
    udp_v6: Vec<bool>,
    tcp_out: tmpsc::UnboundedSender<Transmit>,
    tls_out: tmpsc::UnboundedSender<Transmit>,
    /// Where confirmed-dialog changes go (the HA state sync), if anywhere.
    dialog_sync: Mutex<Option<tmpsc::UnboundedSender<DialogChange>>>,
    /// The node's trace.
    trace: Arc<TraceHub>,
    /// The node's accounting.
    accounting: Arc<crate::accounting::AccountingHub>,
}

impl Outlet for Wire {
    fn send(&self, t: Transmit) {
        match t.transport {
            LegTransport::Udp => {
                let sock = self
                    .udp
                    .read()
                    .ok()
                    .and_then(|u| u.get(t.interface).cloned().flatten());
                if let Some(sock) = sock {
                    let v6 = self.udp_v6.get(t.interface).copied().unwrap_or(false);
                    if let Err(e) = sock.send_to(&t.payload, udp::dest_for(v6, t.dest)) {
                        debug!(dest = %t.dest, error = %e, "UDP send failed");
                    }
                }
            }
            LegTransport::Tcp => {
                let _ = self.tcp_out.send(t);
            }
            LegTransport::Tls => {
                let _ = self.tls_out.send(t);
            }
        }
    }

    fn dialog_change(&self, change: DialogChange) {
        if let Some(tx) = lock(&self.dialog_sync).as_ref() {
            let _ = tx.send(change);
        }
    }

    fn trace(&self, next: &mut dyn FnMut() -> Option<TraceEvent>) {
        self.trace.offer_all(next);
    }

    fn refused(&self, inbound: &Inbound, note: &'static str, answer: Option<&Transmit>) {
        self.trace.refused(inbound, note, answer);
    }

    fn accounting(&self, record: sbc_accounting::CallRecord) {
        self.accounting.offer(record);
    }
}

/// How the TCP edge hands messages to the TCP worker group.
fn dispatcher(shared: &Arc<Shared>) -> tcp::Dispatch {
    let shared = shared.clone();
    Arc::new(move |inbound| shared.dispatch(inbound))
}

/// Handles shared by the receive paths, the worker groups and the control thread.
struct Shared {
    wire: Arc<Wire>,
    ctx: Arc<Ctx>,
    /// The UDP group of each interface (by interface index), if it offers UDP.
    udp_groups: Vec<Option<Arc<Group>>>,
    tcp_group: Arc<Group>,
    timers: TimerThread,
    stopping: AtomicBool,
    /// Per-source protection, asked before anything is queued.
    access: Mutex<AccessControl>,
    /// The registration cache: STUN keep-alives are answered to its phones only.
    registrations: SharedRegistrations,
}

impl Shared {
    fn dispatch(&self, inbound: Inbound) {
        if inbound.data.iter().all(|b| *b == b'\r' || *b == b'\n') {
            return; // a keep-alive: nothing to process
        }
        let c = classify(&inbound.data);
        let verdict = lock(&self.access).check(
            Instant::now(),
            inbound.source.ip(),
            c.kind == Kind::NewRequest,
        );
        if verdict != Verdict::Pass {
            // Dropped unanswered: an answer would feed the flood.
            self.wire.trace.refused(
                &inbound,
                match verdict {
                    Verdict::RateLimited => "dropped: the source is over its rate (source-rate)",
                    _ => "dropped: the source is denied (access-control or a rate deny)",
                },
                None,
            );
            return;
        }
        let group = match inbound.transport {
            LegTransport::Udp => self
                .udp_groups
                .get(inbound.interface)
                .and_then(Option::as_ref)
                .unwrap_or(&self.tcp_group),
            LegTransport::Tcp | LegTransport::Tls => &self.tcp_group,
        };
        group.dispatch(inbound, c, self.wire.as_ref());
    }

    fn groups(&self) -> impl Iterator<Item = &Arc<Group>> + '_ {
        self.udp_groups
            .iter()
            .flatten()
            .chain(std::iter::once(&self.tcp_group))
    }
}

/// The node's media anchoring: the table every engine shares, what the relay binds, and the
/// relay while the node serves.
struct NodeMedia {
    table: SharedMediaTable,
    realms: Vec<Option<(usize, IpAddr)>>,
    bindings: Vec<PoolBinding>,
    relay: Mutex<Option<MediaRelay>>,
    counters: Arc<RelayCounters>,
    /// Port-pool warnings not yet reported (trapped once a second by the node's reporter).
    alerts: Arc<Mutex<Vec<MediaEvent>>>,
}

impl NodeMedia {
    fn anchoring(&self) -> MediaAnchoring {
        MediaAnchoring {
            table: self.table.clone(),
            realms: self.realms.clone(),
        }
    }
}

/// Rounds of [`Node::totals_nonblocking`] on the I/O thread before the shards still held are
/// read on a blocking thread.
pub const TOTALS_TRIES: usize = 8;

/// A running node, as returned by [`start`].
pub struct Node {
    shared: Arc<Shared>,
    control: Mutex<Option<thread::JoinHandle<()>>>,
    grace: Duration,
    interfaces: Vec<Listener>,
    max: usize,
    tcp: Arc<TcpEdge>,
    /// The TLS edge.
    tls: Arc<TcpEdge>,
    /// Its profiles, loaded at start and at every activation.
    tls_ctx: Arc<tls::TlsContext>,
    bound: tokio::sync::Mutex<Option<Bound>>,
    admission: Mutex<AdmissionState>,
    media: Option<NodeMedia>,
    /// The registration cache, node-wide and kept across activations.
    registrations: SharedRegistrations,
    /// Subscriptions held per source, node-wide and kept across activations.
    subscription_counts: Arc<Mutex<std::collections::HashMap<IpAddr, u32>>>,
    /// What the engines generate for accounting, as at start (its thread is the node's).
    accounting_at_start: Option<sbc_proto::engine::AccountingPolicy>,
}

/// The reasons new requests are refused, and the Retry-After range of the 503.
#[derive(Debug)]
struct AdmissionState {
    reasons: std::collections::BTreeSet<&'static str>,
    retry_after: (u32, u32),
}

/// The sockets of the SIP interfaces while they are bound (the active of a pair holds them; the
/// standby does not).
struct Bound {
    stop: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<()>>,
    accept_tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Starts the worker groups; binds every interface at once when `bind` is true (a single node,
/// or the active of a pair), else later with [`Node::bind_interfaces`]. Must be called inside
/// a tokio runtime.
pub async fn start(settings: &RuntimeSettings, bind: bool) -> anyhow::Result<Node> {
    let mut ecfg = settings.engine.clone();
    let media = settings.media.clone().map(|plan| NodeMedia {
        table: Arc::new(Mutex::new(MediaTable::new(plan.table))),
        realms: plan.realms,
        bindings: plan.bindings,
        relay: Mutex::new(None),
        counters: Arc::new(RelayCounters::default()),
        alerts: Arc::new(Mutex::new(Vec::new())),
    });
    ecfg.media = media.as_ref().map(NodeMedia::anchoring);
    let registrations: SharedRegistrations =
        Arc::new(Mutex::new(RegistrationCache::new(settings.registration.0)));
    configure_cache(&registrations, &settings.registration);
    ecfg.registration.cache = Some(Arc::clone(&registrations));
    let subscription_counts = Arc::clone(&ecfg.subscription_sources.counts);
    let tls_ctx = Arc::new(tls::TlsContext::default());
    tls_ctx.load(&settings.tls)?;
    let (tcp_tx, tcp_rx) = tmpsc::unbounded_channel();
    let (tls_tx, tls_rx) = tmpsc::unbounded_channel();
    let listeners = &settings.listeners;
    let trace = TraceHub::start(
        &settings.live.trace,
        listeners.iter().map(|l| (l.address, l.tls)).collect(),
    )?;
    ecfg.trace_switch = Some(trace.switch());
    let wire = Arc::new(Wire {
        udp: RwLock::new(vec![None; listeners.len()]),
        udp_v6: listeners.iter().map(|l| l.address.is_ipv6()).collect(),
        tcp_out: tcp_tx,
        tls_out: tls_tx,
        dialog_sync: Mutex::new(None),
        trace,
        accounting: Arc::new(match settings.accounting.clone() {
            Some(a) => crate::accounting::AccountingHub::start(a, &tls_ctx)?,
            None => crate::accounting::AccountingHub::off(),
        }),
    });
    ecfg.router.board().set_pinging(bind);
    let ctx = Arc::new(Ctx {
        shards: Arc::new(Shards::new(&ecfg)),
        out: wire.clone(),
        router: RwLock::new(Arc::clone(&ecfg.router)),
    });
    let cycle = settings.autoscale_cycle;
    let mut udp_groups = Vec::new();
    for (listener, profile) in listeners.iter().zip(&settings.udp_profiles) {
        if !listener.udp {
            udp_groups.push(None);
            continue;
        }
        udp_groups.push(Some(Group::start(
            format!("udp:{}", listener.realm),
            settings.udp_workers,
            *profile,
            cycle,
            settings.work,
            &ctx,
        )?));
    }
    let tcp_group = Group::start(
        "tcp".into(),
        settings.tcp_workers,
        settings.tcp_profile,
        cycle,
        settings.work,
        &ctx,
    )?;
    let timers = TimerThread::start(&ctx)?;
    let shared = Arc::new(Shared {
        wire,
        ctx,
        udp_groups,
        tcp_group,
        timers,
        stopping: AtomicBool::new(false),
        access: Mutex::new(AccessControl::new(settings.live.access.clone())),
        registrations: Arc::clone(&registrations),
    });
    let control = {
        let shared = shared.clone();
        thread::Builder::new()
            .name("autoscaler".into())
            .spawn(move || control_loop(&shared, cycle))?
    };
    let interface_ips: Vec<IpAddr> = listeners.iter().map(Listener::ip).collect();
    let tcp = Arc::new(TcpEdge::new(&settings.live.edge, &interface_ips));
    tokio::spawn(tcp::sender(tcp_rx, tcp.clone(), dispatcher(&shared)));
    let tls = Arc::new(TcpEdge::new_tls(
        &settings.live.edge,
        &interface_ips,
        tls_ctx.clone(),
    ));
    tokio::spawn(tcp::sender(tls_rx, tls.clone(), dispatcher(&shared)));
    let node = Node {
        shared,
        control: Mutex::new(Some(control)),
        grace: settings.shutdown_grace,
        interfaces: listeners.clone(),
        max: settings.max_message_size,
        tcp,
        tls,
        tls_ctx,
        bound: tokio::sync::Mutex::new(None),
        media,
        registrations,
        subscription_counts,
        accounting_at_start: settings.engine.accounting.clone(),
        admission: Mutex::new(AdmissionState {
            reasons: std::collections::BTreeSet::new(),
            retry_after: settings.retry_after,
        }),
    };
    if bind {
        node.bind_interfaces().await?;
    }
    Ok(node)
}

/// The control thread: every cycle, each group's autoscaler gets the loads and decides; the
/// timer thread's load is measured on the same cycle.
fn control_loop(shared: &Shared, cycle: Duration) {
    let mut last = Instant::now();
    let mut timer_busy = 0;
    while !shared.stopping.load(Ordering::Acquire) {
        let next = last + cycle;
        while Instant::now() < next {
            if shared.stopping.load(Ordering::Acquire) {
                return;
            }
            thread::sleep(
                next.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(50)),
            );
        }
        let now = Instant::now();
        timer_busy = shared.timers.measure(now - last, timer_busy);
        for g in shared.groups() {
            g.run_cycle(now, &shared.ctx);
        }
        // A cycle's reports were freed here: the allocator cache goes back each cycle.
        sbc_alarms::release_thread_cache();
        last = now;
    }
}

impl Node {
    /// The interfaces as `realm udp+tcp addr`, for the ready line and `show` commands.
    pub fn describe_interfaces(&self) -> Vec<String> {
        self.interfaces.iter().map(Listener::describe).collect()
    }

    /// Whether the SIP interfaces are bound (this node serves SIP).
    pub async fn is_bound(&self) -> bool {
        self.bound.lock().await.is_some()
    }

    /// Binds every SIP interface and starts receiving (the node becomes the one that serves the
    /// service address). Binding nothing is refused: all or none.
    pub async fn bind_interfaces(&self) -> anyhow::Result<()> {
        let mut guard = self.bound.lock().await;
        if guard.is_some() {
            return Ok(());
        }
        let mut udp = vec![None; self.interfaces.len()];
        let mut listeners = Vec::new();
        for (idx, iface) in self.interfaces.iter().enumerate() {
            let addr = iface.address;
            if iface.udp {
                let sock = udp::bind(addr)
                    .with_context(|| format!("binding UDP {addr} for realm {}", iface.realm))?;
                udp[idx] = Some(Arc::new(sock));
            }
            if iface.tcp {
                let l = TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("binding TCP {addr} for realm {}", iface.realm))?;
                listeners.push((idx, l, self.tcp.clone()));
            }
            if let Some(tls_addr) = iface.tls {
                let l = TcpListener::bind(tls_addr)
                    .await
                    .with_context(|| format!("binding TLS {tls_addr} for realm {}", iface.realm))?;
                listeners.push((idx, l, self.tls.clone()));
            }
        }
        // The media ports are bound with the SIP ones, all or none.
        if let Some(m) = &self.media {
            let mut relay = lock(&m.relay);
            if relay.is_none() {
                *relay = Some(MediaRelay::start(
                    &m.bindings,
                    m.table.clone(),
                    self.media_sink(m),
                    m.counters.clone(),
                    self.shared.wire.trace.clone(),
                )?);
                // A takeover may have waited for the ports: the legs may latch again from now.
                lock(&m.table).reopen_latching(Instant::now());
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for (idx, sock) in udp.iter().enumerate() {
            let Some(sock) = sock.clone() else { continue };
            let (shared, stop, max) = (self.shared.clone(), stop.clone(), self.max);
            threads.push(
                thread::Builder::new()
                    .name(format!("udp-recv-{idx}"))
                    .spawn(move || udp::receive_loop(idx, &sock, max, &shared, &stop))?,
            );
        }
        if let Ok(mut u) = self.shared.wire.udp.write() {
            *u = udp;
        }
        let accept_tasks = listeners
            .into_iter()
            .map(|(idx, l, edge)| {
                tokio::spawn(tcp::accept_loop(idx, l, edge, dispatcher(&self.shared)))
            })
            .collect();
        self.set_pinging(true);
        *guard = Some(Bound {
            stop,
            threads,
            accept_tasks,
        });
        info!(interfaces = ?self.describe_interfaces(), "SIP interfaces bound");
        Ok(())
    }

    /// Releases every SIP interface (the ports are free when this returns), keeping dialogs and
    /// transactions: a demoted active, or a planned switchover's release before takeover.
    pub async fn release_interfaces(&self) {
        let Some(bound) = self.bound.lock().await.take() else {
            return;
        };
        self.set_pinging(false);
        bound.stop.store(true, Ordering::Release);
        for t in &bound.accept_tasks {
            t.abort();
        }
        for t in bound.accept_tasks {
            let _ = t.await;
        }
        if let Ok(mut u) = self.shared.wire.udp.write() {
            u.iter_mut().for_each(|s| *s = None);
        }
        let threads = bound.threads;
        let relay = self.media.as_ref().and_then(|m| lock(&m.relay).take());
        if let Some(m) = &self.media {
            // The calls' media goes on at the new active; this node keeps no port of theirs.
            lock(&m.table).clear();
        }
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(r) = relay {
                r.stop();
            }
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
        info!("SIP interfaces released");
    }

    /// A snapshot of every shard (engine); with their dialogs when `dialogs` is true.
    pub async fn snapshots(&self, dialogs: bool) -> Vec<ShardSnapshot> {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::with_capacity(SHARDS);
            shared.ctx.shards.each(shared.wire.as_ref(), |index, e| {
                out.push(ShardSnapshot {
                    index,
                    stats: e.stats().clone(),
                    calls: e.active_call_count(),
                    transactions: e.transaction_count(),
                    pending: e.pending_count(),
                    dialogs: if dialogs {
                        e.dialogs().cloned().collect()
                    } else {
                        Vec::new()
                    },
                });
            });
            out
        })
        .await
        .unwrap_or_default()
    }

    /// The worker groups (UDP per interface, TCP, timer), for `show workers`.
    pub fn worker_groups(&self) -> Vec<GroupReport> {
        let now = Instant::now();
        let mut out: Vec<GroupReport> = self.shared.groups().map(|g| g.report(now)).collect();
        out.push(self.shared.timers.report());
        out
    }

    /// Streams every confirmed-dialog change of this node to `tx` from now on (HA state sync).
    pub fn set_dialog_sync(&self, tx: Option<tmpsc::UnboundedSender<DialogChange>>) {
        *lock(&self.shared.wire.dialog_sync) = tx;
    }

    /// Forgets every call and transaction of every engine (this node is no longer the active:
    /// see [`sbc_proto::engine::Engine::forget_calls`]).
    pub fn forget_calls(&self) {
        let out = self.shared.wire.as_ref();
        self.shared.ctx.shards.each(out, |_, e| e.forget_calls());
    }

    /// Applies a dialog change replicated from the active to the shard that owns the call.
    pub fn apply_replica(&self, change: DialogChange) {
        let shards = &self.shared.ctx.shards;
        let out = self.shared.wire.as_ref();
        match change {
            DialogChange::Upsert(d) => {
                let s = Shards::of_key(shard::call_id_key(d.caller.call_id.as_bytes()));
                shards.with(s, out, |e| e.install_dialog(Instant::now(), *d));
            }
            DialogChange::Delete(id) => shards.each(out, |_, e| e.remove_dialog(id)),
        }
    }

    /// Sets what every engine does with new requests (the overload and critical-memory gate).
    pub fn set_admission(&self, admission: Admission) {
        self.shared
            .ctx
            .shards
            .each(self.shared.wire.as_ref(), |_, e| e.set_admission(admission));
    }
    /// Closes (or reopens) admission for one reason (`heap`, `critical-memory`, ...): new
    /// requests are refused while any reason holds.
    pub fn set_admission_reason(&self, reason: &'static str, closed: bool) {
        let admission = {
            let Ok(mut g) = self.admission.lock() else {
                return;
            };
            let changed = if closed {
                g.reasons.insert(reason)
            } else {
                g.reasons.remove(reason)
            };
            if !changed {
                return;
            }
            if g.reasons.is_empty() {
                Admission::Accept
            } else {
                Admission::Reject {
                    retry_after_min: g.retry_after.0,
                    retry_after_max: g.retry_after.1,
                }
            }
        };
        self.set_admission(admission);
    }

    /// Prepares a handover of the service address: new requests are dropped unanswered (their
    /// retransmissions reach the next active) while the transactions in progress finish, for at
    /// most `bound`. Returns how many were still pending at the end.
    pub async fn drain_for_handover(&self, bound: Duration) -> usize {
        self.set_admission(Admission::Drop);
        let deadline = Instant::now() + bound;
        loop {
            let pending: usize = self.snapshots(false).await.iter().map(|s| s.pending).sum();
            if pending == 0 || Instant::now() >= deadline {
                return pending;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Ends a handover drain: new requests are admitted again (or refused, if a reason holds).
    pub fn end_handover_drain(&self) {
        let admission = match self.admission.lock() {
            Ok(g) if !g.reasons.is_empty() => Admission::Reject {
                retry_after_min: g.retry_after.0,
                retry_after_max: g.retry_after.1,
            },
            _ => Admission::Accept,
        };
        self.set_admission(admission);
    }

    /// Why new requests are refused now (empty: they are accepted).
    pub fn admission_reasons(&self) -> Vec<&'static str> {
        self.admission
            .lock()
            .map(|g| g.reasons.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Applies a new engine configuration to every shard (media anchoring stays as it was
    /// at start: its pools are bound; so does accounting: its thread and spool are the
    /// node's from start).
    pub fn reconfigure(&self, cfg: &EngineConfig) {
        let mut cfg = cfg.clone();
        cfg.media = self.media.as_ref().map(NodeMedia::anchoring);
        cfg.accounting.clone_from(&self.accounting_at_start);
        cfg.trace_switch = Some(self.shared.wire.trace.switch());
        cfg.registration.cache = Some(Arc::clone(&self.registrations));
        cfg.subscription_sources.counts = Arc::clone(&self.subscription_counts);
        {
            let mut router = self.router_slot();
            carry_agent_states(&router, &cfg.router, Instant::now());
            cfg.router.board().set_pinging(router.board().is_pinging());
            router.board().set_pinging(false);
            *router = Arc::clone(&cfg.router);
        }
        self.shared
            .ctx
            .shards
            .each(self.shared.wire.as_ref(), |_, e| e.set_config(cfg.clone()));
    }

    /// Applies an activation's registration-cache settings (bindings are kept).
    pub fn reconfigure_registrations(&self, settings: &(CacheSettings, Vec<CacheSettings>)) {
        configure_cache(&self.registrations, settings);
    }

    /// The node's registration cache.
    #[must_use]
    pub fn registrations(&self) -> &SharedRegistrations {
        &self.registrations
    }

    /// Purges the bindings whose phones stopped refreshing; returns how many.
    pub fn purge_registrations(&self, now: Instant) -> usize {
        let gone = lock(&self.registrations).purge_expired(now);
        for b in &gone {
            debug!(aor = %b.aor, source = %b.flow.source, "registration expired: binding purged");
        }
        gone.len()
    }

    /// The router's slot, write-locked (a poisoned lock is taken over: the router is
    /// replaced whole).
    fn router_slot(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, Arc<sbc_proto::routing::router::Router>> {
        self.shared
            .ctx
            .router
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The router the engines use now.
    #[must_use]
    pub fn router(&self) -> Arc<sbc_proto::routing::router::Router> {
        match self.shared.ctx.router.read() {
            Ok(r) => Arc::clone(&r),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Installs `next` as the router if `current` is still the one in use, in the engines
    /// too (a DNS answer applied to a router that an activation replaced meanwhile is not
    /// installed: the resolver applies it to the new one). Returns whether it was installed.
    pub fn swap_router(
        &self,
        current: &Arc<sbc_proto::routing::router::Router>,
        next: sbc_proto::routing::router::Router,
    ) -> bool {
        let next = Arc::new(next);
        {
            let mut router = self.router_slot();
            if !Arc::ptr_eq(&router, current) {
                return false;
            }
            *router = Arc::clone(&next);
        }
        self.shared
            .ctx
            .shards
            .each(self.shared.wire.as_ref(), |_, e| {
                e.set_router(Arc::clone(&next))
            });
        true
    }

    /// Starts or stops the session-agents' health pings (the node became active, or
    /// standby: a standby never pings).
    fn set_pinging(&self, on: bool) {
        if let Ok(router) = self.shared.ctx.router.read() {
            router.board().set_pinging(on);
        }
    }

    /// Applies an activation's live settings: TCP limits (for new connections and writes),
    /// source rates and the access-control lists, the media manager's timing.
    pub fn reconfigure_edge(&self, live: &LiveSettings) {
        self.shared.wire.trace.reconfigure(&live.trace);
        self.tcp.reconfigure(&live.edge);
        self.tls.reconfigure(&live.edge);
        lock(&self.shared.access).set_settings(live.access.clone());
        if let Some(m) = &self.media {
            let t = live.media_timing;
            lock(&m.table).set_timing(t.latch_window, t.latch_signalled_ip_only, t.inactivity);
        }
    }

    /// Where the media table's events go: an inactive or latched call to the engine that owns
    /// it, a pool running low to the reporter (a trap).
    fn media_sink(&self, m: &NodeMedia) -> media::EventSink {
        let (shared, alerts) = (self.shared.clone(), m.alerts.clone());
        Arc::new(move |event| match event {
            MediaEvent::Inactive { owner, .. } | MediaEvent::Latched { owner, .. } => {
                if owner < SHARDS {
                    let now = Instant::now();
                    shared.ctx.shards.with(owner, shared.wire.as_ref(), |e| {
                        e.handle_media_event(now, event)
                    });
                }
            }
            MediaEvent::PoolLow { .. } => lock(&alerts).push(event),
        })
    }

    /// Port-pool warnings since the last call, as (realm, free pairs, total pairs).
    pub fn media_alerts(&self) -> Vec<(String, usize, usize)> {
        let Some(m) = &self.media else {
            return Vec::new();
        };
        let events = std::mem::take(&mut *lock(&m.alerts));
        events
            .into_iter()
            .filter_map(|e| match e {
                MediaEvent::PoolLow { pool, free, total } => {
                    m.bindings.get(pool).map(|b| (b.realm.clone(), free, total))
                }
                _ => None,
            })
            .collect()
    }

    /// The media relay's state for `show media`, `show sip-stats` and `show dialogs`
    /// (`None`: media is not anchored).
    pub fn media_report(&self) -> Option<MediaReport> {
        self.media_report_of(true)
    }

    /// The media relay's counters and pools without the per-call list and the table's memory
    /// (`calls` empty, `memory_*` zero): what the node's status reads at every scrape, in one
    /// pass over the pools and the counters, never over the sessions, under the media table's
    /// lock that the relay thread takes for every packet.
    pub fn media_summary(&self) -> Option<MediaReport> {
        self.media_report_of(false)
    }

    fn media_report_of(&self, with_calls: bool) -> Option<MediaReport> {
        let m = self.media.as_ref()?;
        let t = lock(&m.table);
        let pools = m
            .bindings
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let (free, total) = t.pool(i);
                PoolReport {
                    realm: b.realm.clone(),
                    address: b.address,
                    ports: format!("{}-{}", b.ports.start(), b.ports.end()),
                    free_pairs: free,
                    total_pairs: total,
                }
            })
            .collect();
        let session_count = t.len();
        let mut sessions: Vec<SessionReport> = t
            .sessions()
            .take(if with_calls { usize::MAX } else { 0 })
            .map(|(id, s)| {
                let (caller, callee) = s.totals();
                let streams = (0..s.stream_count())
                    .map(|i| StreamReport {
                        caller_port: s.ports(sbc_proto::media::Side::Caller)[i],
                        callee_port: s.ports(sbc_proto::media::Side::Callee)[i],
                        caller_remote: s
                            .destination(i, sbc_proto::media::Side::Caller)
                            .map(|a| a.to_string()),
                        callee_remote: s
                            .destination(i, sbc_proto::media::Side::Callee)
                            .map(|a| a.to_string()),
                        caller_latched: s.is_latched(i, sbc_proto::media::Side::Caller),
                        callee_latched: s.is_latched(i, sbc_proto::media::Side::Callee),
                    })
                    .collect();
                SessionReport {
                    call: id,
                    streams,
                    from_caller: counters_report(&caller),
                    from_callee: counters_report(&callee),
                }
            })
            .collect();
        sessions.sort_by_key(|s| s.call);
        let st = t.stats();
        // The table's memory is summed over its sessions: `show media` reads it, a scrape not.
        let (memory_fixed, memory_sessions) = if with_calls { t.memory() } else { (0, 0) };
        Some(MediaReport {
            memory_fixed,
            memory_sessions,
            relaying: lock(&m.relay).is_some(),
            sessions: session_count,
            pools,
            forwarded: st.forwarded,
            forwarded_bytes: st.forwarded_bytes,
            received: m.counters.received.load(Ordering::Relaxed),
            dropped_unknown_port: st.unknown_port,
            dropped_stranger: st.stranger,
            dropped_no_destination: st.no_destination,
            send_errors: m.counters.send_errors.load(Ordering::Relaxed),
            latched: st.latched,
            opened: st.opened,
            refused_no_ports: st.exhausted,
            calls: sessions,
        })
    }

    /// Ends expired source denies and returns the deny events since the last call (for the
    /// log and the traps).
    pub fn access_events(&self) -> Vec<AccessEvent> {
        let mut a = lock(&self.shared.access);
        a.handle_timeout(Instant::now());
        std::iter::from_fn(|| a.poll_event()).collect()
    }

    /// The sources denied now and the per-source counters (`show access-control`).
    pub fn access_report(&self) -> (Vec<DeniedSource>, AccessCounters) {
        lock(&self.shared.access).report(Instant::now())
    }

    /// `clear-deny`: lifts the dynamic denies of the sources `net` is in or holds (an address,
    /// or a prefix as `show access-control` lists it); how many were lifted.
    pub fn clear_deny(&self, net: ipnet::IpNet) -> usize {
        lock(&self.shared.access).clear_deny(net)
    }

    /// The TCP counters (connections open, refused, closed and why), for `show sip-stats`.
    pub fn tcp_stats(&self) -> TcpStatsSnapshot {
        self.tcp.stats()
    }

    /// TLS connection counters (the TCP ones, over TLS, with the handshakes).
    pub fn tls_stats(&self) -> TcpStatsSnapshot {
        self.tls.stats()
    }

    /// The TLS profiles.
    pub fn tls(&self) -> &Arc<tls::TlsContext> {
        &self.tls_ctx
    }

    /// Sum of the counters of every shard and the calls they hold: one short lock per shard
    /// (it may wait for a worker that holds one: for threads that may block).
    pub fn totals(&self) -> (Stats, usize) {
        totals(&self.shared.ctx.shards)
    }

    /// [`Node::totals`] for the I/O thread, which must never wait on an engine's lock: the
    /// shards whose lock is free are read at once, the others after yielding to the other
    /// tasks (a worker holds one for one message). After [`TOTALS_TRIES`] rounds the rest are
    /// read on a blocking thread.
    pub async fn totals_nonblocking(&self) -> (Stats, usize) {
        let shards = &self.shared.ctx.shards;
        let (mut total, mut calls) = (Stats::default(), 0);
        let mut pending: Vec<usize> = (0..SHARDS).collect();
        for _ in 0..TOTALS_TRIES {
            add_free_shards(shards, &mut pending, &mut total, &mut calls);
            if pending.is_empty() {
                return (total, calls);
            }
            tokio::task::yield_now().await;
        }
        let shards = shards.clone();
        let (rest, rest_calls) = tokio::task::spawn_blocking(move || sum_shards(&shards, &pending))
            .await
            .unwrap_or_default();
        total += &rest;
        (total, calls + rest_calls)
    }

    /// The node's trace (`show sip-trace`, `capture start|stop`).
    pub fn trace(&self) -> &TraceHub {
        &self.shared.wire.trace
    }

    /// The node's accounting (`show accounting`).
    pub fn accounting(&self) -> &crate::accounting::AccountingHub {
        &self.shared.wire.accounting
    }

    /// Sum of the counters of every shard.
    pub fn stats(&self) -> Stats {
        total_stats(&self.shared.ctx.shards)
    }

    /// Drains and stops the node: new requests get 503, transactions in progress get up to the
    /// grace period to finish, then every thread is stopped and joined.
    pub async fn shutdown(&self) {
        let shared = self.shared.clone();
        shared
            .ctx
            .shards
            .each(shared.wire.as_ref(), |_, e| e.start_draining());
        let deadline = Instant::now() + self.grace;
        let busy = loop {
            let s = shared.clone();
            let busy = tokio::task::spawn_blocking(move || {
                let mut busy = 0;
                s.ctx.shards.each(s.wire.as_ref(), |_, e| {
                    if !e.is_idle() {
                        busy += 1;
                    }
                });
                busy
            })
            .await
            .unwrap_or(0);
            if busy == 0 || Instant::now() >= deadline {
                break busy;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if busy > 0 {
            warn!(
                busy_shards = busy,
                "grace period over; stopping with transactions open"
            );
        }
        self.release_interfaces().await;
        shared.stopping.store(true, Ordering::Release);
        let control = lock(&self.control).take();
        let s = shared.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(c) = control {
                let _ = c.join();
            }
            for g in s.groups() {
                g.stop();
            }
            s.timers.stop();
            // After the workers: nothing is traced any more.
            s.wire.trace.stop();
        })
        .await;
        let s = total_stats(&shared.ctx.shards);
        info!(
            calls_attempted = s.calls_attempted,
            calls_answered = s.calls_answered,
            calls_failed = s.calls_failed,
            retransmissions_absorbed = s.retransmissions_absorbed,
            malformed_answered = s.malformed_answered,
            malformed_dropped = s.malformed_dropped,
            "node stopped"
        );
    }
}

/// `show media`: the relay, its pools and its sessions.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MediaReport {
    /// Whether the relay runs (its ports are bound: a single node, or the active).
    pub relaying: bool,
    /// Sessions open.
    pub sessions: usize,
    /// Each steering pool.
    pub pools: Vec<PoolReport>,
    /// Packets forwarded (RTP and RTCP), and their bytes.
    pub forwarded: u64,
    /// Bytes forwarded.
    pub forwarded_bytes: u64,
    /// Datagrams received on media ports.
    pub received: u64,
    /// Dropped: to a port no call holds.
    pub dropped_unknown_port: u64,
    /// Dropped: from a stranger after the latch window.
    pub dropped_stranger: u64,
    /// Dropped: the other leg has no address yet.
    pub dropped_no_destination: u64,
    /// Dropped: the kernel would not send them.
    pub send_errors: u64,
    /// Legs latched to the address their packets came from.
    pub latched: u64,
    /// Sessions opened since start.
    pub opened: u64,
    /// Sessions refused for want of ports.
    pub refused_no_ports: u64,
    /// The media table's memory sized by the pools (port index, free lists), bytes.
    pub memory_fixed: usize,
    /// The media table's memory held by its sessions, bytes.
    pub memory_sessions: usize,
    /// Every call's media, by call id.
    pub calls: Vec<SessionReport>,
}

/// One steering pool in `show media`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PoolReport {
    /// Its realm.
    pub realm: String,
    /// Its media address.
    pub address: IpAddr,
    /// Its port range.
    pub ports: String,
    /// RTP/RTCP pairs free.
    pub free_pairs: usize,
    /// RTP/RTCP pairs in all.
    pub total_pairs: usize,
}

/// One call's media in `show media` and `show dialogs`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SessionReport {
    /// The call id (as `show dialogs` lists it).
    pub call: u64,
    /// Its streams.
    pub streams: Vec<StreamReport>,
    /// What the caller sent (all streams).
    pub from_caller: CountersReport,
    /// What the callee sent.
    pub from_callee: CountersReport,
}

/// One stream of a call.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StreamReport {
    /// The SBC's RTP port facing the caller.
    pub caller_port: u16,
    /// The SBC's RTP port facing the callee.
    pub callee_port: u16,
    /// Where the caller's media goes.
    pub caller_remote: Option<String>,
    /// Where the callee's media goes.
    pub callee_remote: Option<String>,
    /// Whether the caller's address was latched.
    pub caller_latched: bool,
    /// Whether the callee's address was latched.
    pub callee_latched: bool,
}

/// What one leg sent.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct CountersReport {
    /// RTP packets.
    pub packets: u64,
    /// RTP bytes.
    pub bytes: u64,
    /// RTCP packets.
    pub rtcp: u64,
    /// Lost by sequence gaps.
    pub lost: u64,
    /// Dropped from strangers.
    pub dropped: u64,
    /// The latest SSRC.
    pub ssrc: Option<u32>,
}

fn counters_report(c: &sbc_proto::media::LegCounters) -> CountersReport {
    CountersReport {
        packets: c.packets,
        bytes: c.bytes,
        rtcp: c.rtcp_packets,
        lost: c.lost,
        dropped: c.dropped,
        ssrc: c.ssrc,
    }
}

/// An activation's new router keeps what the old one learnt: an agent kept with the same
/// name and address that was out of service (pings, traffic) stays out, as restored after a
/// takeover (its next ping corrects it). A new or moved agent, or one named by DNS (its
/// resolver installs its address again at once), starts afresh; session counts start from
/// the new board (calls set up before hold their sessions on the old one).
fn carry_agent_states(
    old: &sbc_proto::routing::router::Router,
    new: &sbc_proto::routing::router::Router,
    now: Instant,
) {
    use sbc_proto::routing::agent::{AgentState, OutReason};
    let states = old.board().states();
    for (i, agent) in new.agents().iter().enumerate() {
        if agent.dns.is_some() {
            continue;
        }
        let Some(j) = old
            .agents()
            .iter()
            .position(|a| a.hop.name == agent.hop.name && a.hop.addr == agent.hop.addr)
        else {
            continue;
        };
        match states.get(j).copied() {
            Some(AgentState::OutOfService(OutReason::Disabled | OutReason::Unresolved))
            | Some(AgentState::InService)
            | None => {}
            Some(state) => new.board().restore(i, state, now),
        }
    }
}

/// Applies `settings` (the node's, then each interface's) to `cache`.
fn configure_cache(cache: &SharedRegistrations, settings: &(CacheSettings, Vec<CacheSettings>)) {
    let mut c = lock(cache);
    c.set_settings(settings.0);
    for (i, s) in settings.1.iter().enumerate() {
        c.set_interface_settings(i, *s);
    }
}

#[cfg(test)]
mod carry_tests {
    use std::time::{Duration, Instant};

    use sbc_proto::routing::agent::{AgentState, OutReason};
    use sbc_proto::routing::router::{NextHop, RouteAgent, Router, DEFAULT_ATTEMPT_EXPIRY};
    use sbc_proto::sip::dialog::LegTransport;

    fn router(agents: &[(&str, &str)], now: Instant) -> Router {
        let agents = agents
            .iter()
            .map(|(name, addr)| {
                let mut agent = RouteAgent::at(
                    NextHop {
                        name: (*name).into(),
                        addr: addr.parse().expect("addr"),
                        transport: LegTransport::Udp,
                        interface: 0,
                        max_udp_length: 0,
                    },
                    DEFAULT_ATTEMPT_EXPIRY,
                );
                // Pinged: traffic may take it out (something brings it back).
                agent.health.ping_interval = Some(Duration::from_secs(5));
                agent
            })
            .collect();
        Router::new(agents, Vec::new(), Vec::new(), now).expect("router")
    }

    #[test]
    fn an_activation_keeps_what_the_old_board_learnt_of_kept_agents() {
        let t0 = Instant::now();
        let old = router(
            &[
                ("a", "192.0.2.1:5060"),
                ("b", "192.0.2.2:5060"),
                ("c", "192.0.2.3:5060"),
            ],
            t0,
        );
        // a and b went out (a by transport failure), c stays in.
        old.board().transport_failed(0, t0);
        old.board().transport_failed(1, t0);
        // The new configuration keeps a, moves b, keeps c, adds d.
        let new = router(
            &[
                ("d", "192.0.2.4:5060"),
                ("c", "192.0.2.3:5060"),
                ("b", "192.0.2.9:5060"),
                ("a", "192.0.2.1:5060"),
            ],
            t0 + Duration::from_secs(1),
        );
        super::carry_agent_states(&old, &new, t0 + Duration::from_secs(1));
        assert_eq!(
            new.board().states(),
            [
                AgentState::InService,
                AgentState::InService,
                AgentState::InService,
                AgentState::OutOfService(OutReason::TransportFailure),
            ]
        );
        assert!(
            new.board().poll_transitions(t0).is_empty(),
            "carried over, not decided again"
        );
    }
}
