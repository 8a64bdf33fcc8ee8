//! The thin I/O shell around the engines: sockets, TCP connections, worker threads, shutdown.
//!
//! - One receive thread per UDP interface reads datagrams and hands each to the worker that
//!   owns its Call-ID ([`crate::shard`]).
//! - TCP runs on tokio: an accept loop per interface, a reader and a writer task per
//!   connection, and an outbound connector for next hops reached over TCP.
//! - A worker is an OS thread that owns one [`Engine`]: it waits for input or for the engine's
//!   next timer, feeds the engine with real time, and sends what the engine asks to send.
//!
//! Shutdown (SIGINT/SIGTERM) follows mini-redis: every worker is told to drain (new requests get
//! 503, transactions in progress finish), the node waits until all are idle or the grace period
//! ends, then stops the threads.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use futures_util::StreamExt as _;
use sbc_config::{Config, Transport};
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc as tmpsc;
use tokio_util::codec::FramedRead;
use tracing::{debug, info, info_span, warn};

use crate::engine::{
    Admission, DialogChange, Engine, EngineConfig, Inbound, Interface, NextHop, Stats, Transmit,
};
use crate::shard;
use crate::sip::dialog::LegTransport;
use crate::sip::transaction::Timers;
use crate::tcp_codec::{Frame, SipCodec};

/// Builds the engine's view of a validated configuration.
pub fn engine_config(cfg: &Config) -> anyhow::Result<EngineConfig> {
    let interfaces: Vec<Interface> = cfg
        .sip_interfaces
        .iter()
        .map(|i| Interface {
            realm: i.realm.clone(),
            addr: i.socket_addr(),
        })
        .collect();
    let mut routes = Vec::new();
    for iface in &cfg.sip_interfaces {
        let hop = match cfg.route_for(&iface.realm) {
            None => None,
            Some(agent) => {
                let out = cfg
                    .sip_interfaces
                    .iter()
                    .position(|i| i.realm == agent.realm)
                    .with_context(|| format!("session-agent {} has no interface", agent.name))?;
                if !cfg.sip_interfaces[out]
                    .transports
                    .contains(&agent.transport)
                {
                    anyhow::bail!(
                        "session-agent {} uses {} but sip-interface {} does not offer it",
                        agent.name,
                        agent.transport,
                        agent.realm
                    );
                }
                Some(NextHop {
                    name: agent.name.clone(),
                    addr: agent.socket_addr(),
                    transport: leg_transport(agent.transport),
                    interface: out,
                })
            }
        };
        routes.push(hop);
    }
    let s = &cfg.sip_config;
    Ok(EngineConfig {
        interfaces,
        routes,
        timers: Timers {
            t1: Duration::from_millis(s.t1_ms),
            t2: Duration::from_millis(s.t2_ms),
            t4: Duration::from_millis(s.t4_ms),
        },
        timer_c: Duration::from_millis(s.timer_c_ms),
        max_message_size: s.max_message_size,
    })
}

fn leg_transport(t: Transport) -> LegTransport {
    match t {
        Transport::Udp => LegTransport::Udp,
        Transport::Tcp => LegTransport::Tcp,
    }
}

/// Socket buffer size asked for on UDP sockets (the kernel caps it at `net.core.rmem_max`).
const UDP_BUFFER_BYTES: usize = 4 << 20;

enum WorkerMsg {
    Inbound(Inbound),
    Drain,
    Stop,
    Reconfigure(Box<EngineConfig>),
    Admission(Admission),
    Replica(DialogChange),
    Snapshot {
        dialogs: bool,
        reply: mpsc::Sender<WorkerSnapshot>,
    },
}

/// What one worker reports for `show workers`, `show sip-stats` and `show dialogs`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkerSnapshot {
    /// Worker number.
    pub index: usize,
    /// Its counters.
    pub stats: Stats,
    /// Calls it holds (any state).
    pub calls: usize,
    /// Live transactions.
    pub transactions: usize,
    /// Messages waiting in its queue.
    pub queued: usize,
    /// Transactions waiting for a final response.
    pub pending: usize,
    /// Busy time over the last cycle of about a second, in percent (OpenSIPS's load).
    pub load_percent: f64,
    /// Its dialogs, when asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dialogs: Vec<crate::sip::dialog::Dialog>,
}

/// Handles shared by the receive paths and the workers.
struct Shared {
    udp: RwLock<Vec<Option<Arc<UdpSocket>>>>,
    tcp_out: tmpsc::UnboundedSender<Transmit>,
    workers: Vec<mpsc::Sender<WorkerMsg>>,
    queued: Vec<AtomicUsize>,
    /// Each worker's load over its last cycle, in per mille.
    load_permille: Vec<std::sync::atomic::AtomicU32>,
    stopping: AtomicBool,
    idle_workers: AtomicUsize,
    /// Where confirmed-dialog changes go (the HA state sync), if anywhere.
    dialog_sync: Mutex<Option<tmpsc::UnboundedSender<DialogChange>>>,
    stats: Mutex<Vec<Stats>>,
}

impl Shared {
    fn dispatch(&self, inbound: Inbound) {
        let n = self.workers.len();
        let w = shard::worker_for(&inbound.data, n);
        self.queued[w].fetch_add(1, Ordering::Relaxed);
        if self.workers[w].send(WorkerMsg::Inbound(inbound)).is_err() {
            self.queued[w].fetch_sub(1, Ordering::Relaxed);
            debug!("worker gone; message dropped");
        }
    }

    fn send(&self, t: Transmit) {
        match t.transport {
            LegTransport::Udp => {
                let sock = self
                    .udp
                    .read()
                    .ok()
                    .and_then(|u| u.get(t.interface).cloned().flatten());
                if let Some(sock) = sock {
                    if let Err(e) = sock.send_to(&t.payload, t.dest) {
                        debug!(dest = %t.dest, error = %e, "UDP send failed");
                    }
                }
            }
            LegTransport::Tcp => {
                let _ = self.tcp_out.send(t);
            }
        }
    }
}

/// A running node, as returned by [`start`].
pub struct Node {
    shared: Arc<Shared>,
    threads: Mutex<Vec<thread::JoinHandle<()>>>,
    grace: Duration,
    interfaces: Vec<sbc_config::SipInterface>,
    max: usize,
    conns: Connections,
    bound: tokio::sync::Mutex<Option<Bound>>,
    admission: Mutex<AdmissionState>,
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

/// Starts the workers; binds every interface of `cfg` at once when `bind` is true (a single node,
/// or the active of a pair), else later with [`Node::bind_interfaces`]. Must be called inside a
/// tokio runtime.
pub async fn start(cfg: &Config, bind: bool) -> anyhow::Result<Node> {
    let ecfg = engine_config(cfg)?;
    let (tcp_tx, tcp_rx) = tmpsc::unbounded_channel();
    let n = cfg.sip_config.workers.max(1);
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..n {
        let (tx, rx) = mpsc::channel();
        senders.push(tx);
        receivers.push(rx);
    }
    let shared = Arc::new(Shared {
        udp: RwLock::new(vec![None; cfg.sip_interfaces.len()]),
        tcp_out: tcp_tx,
        queued: (0..n).map(|_| AtomicUsize::new(0)).collect(),
        load_permille: (0..n)
            .map(|_| std::sync::atomic::AtomicU32::new(0))
            .collect(),
        workers: senders,
        stopping: AtomicBool::new(false),
        idle_workers: AtomicUsize::new(0),
        dialog_sync: Mutex::new(None),
        stats: Mutex::new(vec![Stats::default(); n]),
    });

    let mut threads = Vec::new();
    for (i, rx) in receivers.into_iter().enumerate() {
        let shared = shared.clone();
        let engine = Engine::new(ecfg.clone(), i as u64);
        threads.push(
            thread::Builder::new()
                .name(format!("sip-worker-{i}"))
                .spawn(move || worker_loop(i, engine, rx, &shared))?,
        );
    }
    let conns: Connections = Arc::new(Mutex::new(HashMap::new()));
    tokio::spawn(tcp_sender(
        tcp_rx,
        cfg.sip_config.max_message_size,
        shared.clone(),
        conns.clone(),
    ));
    let node = Node {
        shared,
        threads: Mutex::new(threads),
        grace: Duration::from_millis(cfg.sip_config.shutdown_grace_ms),
        interfaces: cfg.sip_interfaces.clone(),
        max: cfg.sip_config.max_message_size,
        conns,
        bound: tokio::sync::Mutex::new(None),
        admission: Mutex::new(AdmissionState {
            reasons: std::collections::BTreeSet::new(),
            retry_after: (
                cfg.sip_config.retry_after_min,
                cfg.sip_config.retry_after_max,
            ),
        }),
    };
    if bind {
        node.bind_interfaces().await?;
    }
    Ok(node)
}

impl Node {
    /// The interfaces as `realm udp+tcp addr`, for the ready line and `show` commands.
    pub fn describe_interfaces(&self) -> Vec<String> {
        self.interfaces
            .iter()
            .map(|i| {
                let kinds: Vec<&str> = i.transports.iter().map(|t| t.as_str()).collect();
                format!("{} {} {}", i.realm, kinds.join("+"), i.socket_addr())
            })
            .collect()
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
            let addr = iface.socket_addr();
            if iface.transports.contains(&Transport::Udp) {
                let sock = UdpSocket::bind(addr)
                    .with_context(|| format!("binding UDP {addr} for realm {}", iface.realm))?;
                sock.set_read_timeout(Some(Duration::from_millis(100)))?;
                // Bursts of retransmissions must not overflow the kernel's default buffer.
                let sref = socket2::SockRef::from(&sock);
                let _ = sref.set_recv_buffer_size(UDP_BUFFER_BYTES);
                let _ = sref.set_send_buffer_size(UDP_BUFFER_BYTES);
                udp[idx] = Some(Arc::new(sock));
            }
            if iface.transports.contains(&Transport::Tcp) {
                let l = TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("binding TCP {addr} for realm {}", iface.realm))?;
                listeners.push((idx, l));
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
                    .spawn(move || udp_receive_loop(idx, &sock, max, &shared, &stop))?,
            );
        }
        if let Ok(mut u) = self.shared.udp.write() {
            *u = udp;
        }
        let accept_tasks = listeners
            .into_iter()
            .map(|(idx, l)| {
                tokio::spawn(accept_loop(
                    idx,
                    l,
                    self.max,
                    self.shared.clone(),
                    self.conns.clone(),
                ))
            })
            .collect();
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
        bound.stop.store(true, Ordering::Release);
        for t in &bound.accept_tasks {
            t.abort();
        }
        for t in bound.accept_tasks {
            let _ = t.await;
        }
        if let Ok(mut u) = self.shared.udp.write() {
            u.iter_mut().for_each(|s| *s = None);
        }
        let threads = bound.threads;
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
        info!("SIP interfaces released");
    }

    /// Asks every worker for a snapshot (waits at most 1 s per worker).
    pub async fn snapshots(&self, dialogs: bool) -> Vec<WorkerSnapshot> {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            for w in &shared.workers {
                let (tx, rx) = mpsc::channel();
                if w.send(WorkerMsg::Snapshot { dialogs, reply: tx }).is_ok() {
                    if let Ok(s) = rx.recv_timeout(Duration::from_secs(1)) {
                        out.push(s);
                    }
                }
            }
            out
        })
        .await
        .unwrap_or_default()
    }

    /// Streams every confirmed-dialog change of this node to `tx` from now on (HA state sync).
    pub fn set_dialog_sync(&self, tx: Option<tmpsc::UnboundedSender<DialogChange>>) {
        if let Ok(mut s) = self.shared.dialog_sync.lock() {
            *s = tx;
        }
    }

    /// Applies a dialog change replicated from the active to the worker that owns the call.
    pub fn apply_replica(&self, change: DialogChange) {
        match &change {
            DialogChange::Upsert(d) => {
                let n = self.shared.workers.len().max(1) as u64;
                let w = (shard::call_id_key(d.caller.call_id.as_bytes()) % n) as usize;
                let _ = self.shared.workers[w].send(WorkerMsg::Replica(change));
            }
            DialogChange::Delete(_) => {
                for w in &self.shared.workers {
                    let _ = w.send(WorkerMsg::Replica(change.clone()));
                }
            }
        }
    }

    /// Sets what every worker does with new requests (the overload and critical-memory gate).
    pub fn set_admission(&self, admission: Admission) {
        for w in &self.shared.workers {
            let _ = w.send(WorkerMsg::Admission(admission));
        }
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

    /// Applies a new engine configuration to every worker.
    pub fn reconfigure(&self, cfg: &EngineConfig) {
        for w in &self.shared.workers {
            let _ = w.send(WorkerMsg::Reconfigure(Box::new(cfg.clone())));
        }
    }

    /// Sum of the counters of all workers (refreshed by each worker about once a second).
    pub fn stats(&self) -> Stats {
        let all = self
            .shared
            .stats
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        sum_stats(&all)
    }

    /// Drains and stops the node: new requests get 503, transactions in progress get up to the
    /// grace period to finish, then every thread is stopped and joined.
    pub async fn shutdown(&self) {
        let n = self.shared.workers.len();
        for w in &self.shared.workers {
            let _ = w.send(WorkerMsg::Drain);
        }
        let deadline = Instant::now() + self.grace;
        while self.shared.idle_workers.load(Ordering::Acquire) < n && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let idle = self.shared.idle_workers.load(Ordering::Acquire);
        if idle < n {
            warn!(
                busy_workers = n - idle,
                "grace period over; stopping with transactions open"
            );
        }
        self.release_interfaces().await;
        self.shared.stopping.store(true, Ordering::Release);
        for w in &self.shared.workers {
            let _ = w.send(WorkerMsg::Stop);
        }
        let shared = self.shared.clone();
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
        let all = shared.stats.lock().map(|s| s.clone()).unwrap_or_default();
        let s = sum_stats(&all);
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

fn sum_stats(all: &[Stats]) -> Stats {
    all.iter()
        .fold(Stats::default(), |acc, s| add_stats(&acc, s))
}

/// The field-wise sum of two sets of counters.
pub fn add_stats(a: &Stats, b: &Stats) -> Stats {
    Stats {
        requests_in: a.requests_in + b.requests_in,
        responses_in: a.responses_in + b.responses_in,
        calls_attempted: a.calls_attempted + b.calls_attempted,
        calls_answered: a.calls_answered + b.calls_answered,
        calls_failed: a.calls_failed + b.calls_failed,
        retransmissions_absorbed: a.retransmissions_absorbed + b.retransmissions_absorbed,
        retransmissions_sent: a.retransmissions_sent + b.retransmissions_sent,
        malformed_answered: a.malformed_answered + b.malformed_answered,
        malformed_dropped: a.malformed_dropped + b.malformed_dropped,
        stray_responses: a.stray_responses + b.stray_responses,
        rejected_503: a.rejected_503 + b.rejected_503,
        timeouts: a.timeouts + b.timeouts,
        handover_dropped: a.handover_dropped + b.handover_dropped,
    }
}

fn worker_loop(index: usize, mut engine: Engine, rx: mpsc::Receiver<WorkerMsg>, shared: &Shared) {
    let span = info_span!("worker", index);
    let _enter = span.enter();
    let mut draining = false;
    let mut reported_idle = false;
    let mut last_stats = Instant::now();
    let mut busy = Duration::ZERO;
    loop {
        let now = Instant::now();
        let wait = engine
            .poll_timeout()
            .map_or(Duration::from_millis(200), |t| {
                t.saturating_duration_since(now)
            })
            .min(Duration::from_millis(200));
        let first = rx.recv_timeout(wait);
        let busy_from = Instant::now();
        let mut msg = match first {
            Ok(m) => Some(m),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        // Take what is queued in one go (bounded), then run timers and flush.
        let mut budget = 64;
        while let Some(m) = msg.take() {
            match m {
                WorkerMsg::Inbound(i) => {
                    shared.queued[index].fetch_sub(1, Ordering::Relaxed);
                    engine.handle_inbound(Instant::now(), i);
                }
                WorkerMsg::Reconfigure(cfg) => engine.set_config(*cfg),
                WorkerMsg::Admission(a) => engine.set_admission(a),
                WorkerMsg::Replica(DialogChange::Upsert(d)) => engine.install_dialog(*d),
                WorkerMsg::Replica(DialogChange::Delete(id)) => engine.remove_dialog(id),
                WorkerMsg::Snapshot { dialogs, reply } => {
                    let _ = reply.send(WorkerSnapshot {
                        index,
                        stats: engine.stats().clone(),
                        calls: engine.call_count(),
                        transactions: engine.transaction_count(),
                        queued: shared.queued[index].load(Ordering::Relaxed),
                        pending: engine.pending_count(),
                        load_percent: f64::from(
                            shared.load_permille[index].load(Ordering::Relaxed),
                        ) / 10.0,
                        dialogs: if dialogs {
                            engine.dialogs().cloned().collect()
                        } else {
                            Vec::new()
                        },
                    });
                }
                WorkerMsg::Drain => {
                    draining = true;
                    engine.start_draining();
                }
                WorkerMsg::Stop => {
                    if let Ok(mut s) = shared.stats.lock() {
                        s[index] = engine.stats().clone();
                    }
                    return;
                }
            }
            budget -= 1;
            if budget > 0 {
                msg = rx.try_recv().ok();
            }
        }
        engine.handle_timeout(Instant::now());
        while let Some(t) = engine.poll_transmit() {
            shared.send(t);
        }
        let mut sync = None;
        while let Some(change) = engine.poll_dialog_change() {
            let tx =
                sync.get_or_insert_with(|| shared.dialog_sync.lock().ok().and_then(|s| s.clone()));
            if let Some(tx) = tx {
                let _ = tx.send(change);
            }
        }
        busy += busy_from.elapsed();
        if draining && !reported_idle && engine.is_idle() {
            reported_idle = true;
            shared.idle_workers.fetch_add(1, Ordering::AcqRel);
        }
        if last_stats.elapsed() >= Duration::from_secs(1) {
            // Load = busy time / cycle (OpenSIPS's definition): the autoscaler's input.
            let permille = (busy.as_secs_f64() / last_stats.elapsed().as_secs_f64() * 1000.0)
                .round()
                .min(1000.0) as u32;
            shared.load_permille[index].store(permille, Ordering::Relaxed);
            busy = Duration::ZERO;
            last_stats = Instant::now();
            if let Ok(mut s) = shared.stats.lock() {
                s[index] = engine.stats().clone();
            }
        }
    }
}

fn udp_receive_loop(
    interface: usize,
    sock: &UdpSocket,
    max: usize,
    shared: &Shared,
    stop: &AtomicBool,
) {
    // One byte more than the maximum, so an oversized datagram is seen as such.
    let mut buf = vec![0u8; max.max(65_535) + 1];
    while !shared.stopping.load(Ordering::Acquire) && !stop.load(Ordering::Acquire) {
        match sock.recv_from(&mut buf) {
            Ok((len, source)) => {
                shared.dispatch(Inbound {
                    interface,
                    transport: LegTransport::Udp,
                    source,
                    data: Bytes::copy_from_slice(&buf[..len]),
                });
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => {
                // ICMP port unreachable from a previous send shows up here on Linux; go on.
                debug!(error = %e, "UDP receive error");
            }
        }
    }
}

type Connections = Arc<Mutex<HashMap<SocketAddr, tmpsc::UnboundedSender<Bytes>>>>;

async fn accept_loop(
    interface: usize,
    l: TcpListener,
    max: usize,
    shared: Arc<Shared>,
    conns: Connections,
) {
    loop {
        match l.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                serve_connection(interface, stream, peer, max, shared.clone(), conns.clone());
            }
            Err(e) => {
                warn!(error = %e, "TCP accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Starts the reader and writer tasks of one TCP connection and registers it under `peer`.
fn serve_connection(
    interface: usize,
    stream: TcpStream,
    peer: SocketAddr,
    max: usize,
    shared: Arc<Shared>,
    conns: Connections,
) -> tmpsc::UnboundedSender<Bytes> {
    let (read, mut write) = stream.into_split();
    let (tx, mut rx) = tmpsc::unbounded_channel::<Bytes>();
    if let Ok(mut c) = conns.lock() {
        c.insert(peer, tx.clone());
    }
    tokio::spawn(async move {
        while let Some(b) = rx.recv().await {
            if write.write_all(&b).await.is_err() {
                break;
            }
        }
    });
    let pong = tx.clone();
    tokio::spawn(async move {
        let mut frames = FramedRead::new(read, SipCodec::new(max));
        while let Some(item) = frames.next().await {
            match item {
                Ok(Frame::Message(data)) => shared.dispatch(Inbound {
                    interface,
                    transport: LegTransport::Tcp,
                    source: peer,
                    data,
                }),
                Ok(Frame::Ping) => {
                    let _ = pong.send(Bytes::from_static(b"\r\n"));
                }
                Err(e) => {
                    debug!(%peer, error = %e, "closing TCP connection");
                    // Leave the writer a moment so an answer to the last frame (a 400) can
                    // still go out before the connection is dropped.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    break;
                }
            }
        }
        if let Ok(mut c) = conns.lock() {
            c.remove(&peer);
        }
    });
    tx
}

/// Sends TCP transmits, opening a connection to the destination when none exists.
async fn tcp_sender(
    mut rx: tmpsc::UnboundedReceiver<Transmit>,
    max: usize,
    shared: Arc<Shared>,
    conns: Connections,
) {
    let mut connecting: HashMap<SocketAddr, Vec<Bytes>> = HashMap::new();
    let (done_tx, mut done_rx) =
        tmpsc::unbounded_channel::<(SocketAddr, Option<tmpsc::UnboundedSender<Bytes>>)>();
    loop {
        tokio::select! {
            t = rx.recv() => {
                let Some(t) = t else { break };
                let existing = conns.lock().ok().and_then(|c| c.get(&t.dest).cloned());
                if let Some(conn) = existing {
                    if conn.send(t.payload.clone()).is_ok() {
                        continue;
                    }
                }
                if t.payload.starts_with(b"SIP/2.0 ") {
                    // A response whose connection is gone: the peer opened it and closed it;
                    // do not dial its ephemeral port.
                    debug!(dest = %t.dest, "TCP connection gone; response dropped");
                    continue;
                }
                if let Some(q) = connecting.get_mut(&t.dest) {
                    q.push(t.payload);
                    continue;
                }
                connecting.insert(t.dest, vec![t.payload]);
                let (shared, conns, done) = (shared.clone(), conns.clone(), done_tx.clone());
                let (dest, interface) = (t.dest, t.interface);
                tokio::spawn(async move {
                    let r = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(dest)).await;
                    let conn = match r {
                        Ok(Ok(stream)) => {
                            let _ = stream.set_nodelay(true);
                            Some(serve_connection(interface, stream, dest, max, shared, conns))
                        }
                        _ => {
                            debug!(%dest, "TCP connect failed");
                            None
                        }
                    };
                    let _ = done.send((dest, conn));
                });
            }
            d = done_rx.recv() => {
                let Some((dest, conn)) = d else { continue };
                let queued = connecting.remove(&dest).unwrap_or_default();
                if let Some(conn) = conn {
                    for b in queued {
                        let _ = conn.send(b);
                    }
                }
            }
        }
    }
}
