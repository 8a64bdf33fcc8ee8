//! SIP over TCP at the edge: accept loops, one reader and one writer task per connection, the
//! outbound connector, and the limits that keep a client from exhausting the node.
//!
//! # Limits (all `sip-config` keys, see [`TcpSettings`])
//!
//! - **Connections**: at most `tcp-max-connections` accepted per interface, and at most
//!   `tcp-max-connections-per-source` from one source (session-agents are exempt: a carrier
//!   trunk or a PBX may open many). A source is an IPv4 address or an IPv6 prefix of
//!   `source-ipv6-prefix-length` bits ([`SourceKey`]), so a host holding a /64 cannot open the
//!   cap from each of its addresses. A connection beyond either cap is closed at once, counted.
//!   An IPv4 peer of a dual-stack listener (`::ffff:a.b.c.d`) is its IPv4 address from the
//!   accept on: its connection, its messages and its cap.
//! - **Deadlines**: a message must be complete (header block and body) within
//!   `tcp-message-timeout-ms` of its first byte, so a client that trickles a header block is cut
//!   off however active it looks; a connection with no traffic at all for
//!   `tcp-idle-timeout-ms` is closed (CRLF keep-alives count as traffic).
//! - **Writes**: every connection has a write queue bounded to `tcp-write-queue-bytes` (each
//!   item counted as at least 64 bytes); a send that would overflow it closes the connection, as
//!   does a write that does not complete within `tcp-write-timeout-ms`. Keep-alive pings get at
//!   most one answer in flight (RFC 5626 asks only for liveness), so a ping flood cannot fill
//!   the queue, and more than 16 pings while an answer is still unwritten close the
//!   connection. A client that sends but never reads is therefore closed instead of growing
//!   the node's memory.
//! - **Dialling**: a request (never a response) to a destination with no open connection opens
//!   one: to a session-agent for a new call, and after a takeover to the peers of the calls the
//!   former active's connections carried (their connections died with it; the engine sends a
//!   TCP caller's requests to its Contact, see `sbc_proto::engine` `reach`). At most one
//!   connect is in flight per destination, with the messages behind it queued within the
//!   connection's write-queue bound; at most [`MAX_CONNECTS_IN_FLIGHT`] connects at once; a
//!   connect gives up after [`CONNECT_TIMEOUT`]; dialled connections count against
//!   `tcp-max-connections` per interface (separately from accepted ones, so a flood of accepted
//!   connections cannot cut the node off from its session-agents), and their source address is
//!   the interface's IP (the service address a peer knows, on whichever node is active). What
//!   does not fit is dropped and counted; the transaction's timer then answers 408. A connect
//!   (or TLS handshake) that fails answers each request waiting for it 503 at once (RFC 3261
//!   §8.1.3.1), and the destination is not dialled again for [`sbc_proto::dialling::DIAL_BACKOFF`] (its requests
//!   meanwhile answered 503 at once too); the ACK the engine sends for such a 503 to an INVITE
//!   is not dialled (a transport error needs no ACK).
//! - **Reads**: the read buffer starts at 4 KiB and grows only as bytes arrive, never beyond the
//!   largest message (`max-message-size`); the framer remembers how far it scanned, so a
//!   trickled header block is not rescanned from its start at every read; an emptied buffer that
//!   grew is given back.
//!
//! Defaults follow Kamailio's core: `tcp_max_connections` 2048, `tcp_connection_lifetime`
//! 120 s, `tcp_send_timeout` 10 s, `tcp_msg_read_timeout` 20 s. The write queue holds 256 KiB,
//! four messages of the largest size: Kamailio's `tcp_conn_wq_max` (32 KiB) counts only what
//! the kernel did not take, ours everything not yet written, so a burst toward a busy trunk
//! must not close it. 64 connections per source leave room for an office of phones behind one
//! NAT address while keeping one host to 1/32 of an interface (and to 16 MiB of write queues).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc as tmpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use sbc_proto::access::{canonical, SourceKey};
use sbc_proto::dialling::{Dialling, Local503s, Queued, MIN_ITEM_COST};
use sbc_proto::engine::{Inbound, Transmit};
use sbc_proto::sip::dialog::LegTransport;
use sbc_proto::sip::framer::{Frame, FrameError, TcpFramer};
use sbc_proto::sip::message::{transport_failure_response, SipMessage};

use super::tls::TlsContext;

/// The TCP limits, from `sip-config` (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSettings {
    /// Largest message.
    pub max_message: usize,
    /// Connections accepted per interface at most.
    pub max_connections: usize,
    /// Connections from one source at most (session-agents exempt).
    pub max_per_source: usize,
    /// The prefix length IPv6 peers are counted per by `max_per_source`.
    pub source_ipv6_prefix: u8,
    /// A message must be complete this long after its first byte.
    pub message_timeout: Duration,
    /// A connection without traffic is closed after this.
    pub idle_timeout: Duration,
    /// Bytes a connection's write queue may hold.
    pub write_queue_bytes: usize,
    /// A write must complete within this.
    pub write_timeout: Duration,
    /// A TLS handshake must complete within this.
    pub handshake_timeout: Duration,
}

/// What a TCP (or TLS) edge follows live: its limits and the addresses exempt from the
/// per-source cap (the session agents').
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeSettings {
    /// The limits.
    pub limits: TcpSettings,
    /// Session-agent addresses: exempt from the per-source cap.
    pub trusted: HashSet<IpAddr>,
}

/// How long opening a connection to a peer may take (Kamailio's `tcp_connect_timeout` is 10 s;
/// a next hop that does not accept within 5 s is down for a SIP transaction, whose timer B or F
/// fires at 32 s anyway).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Connects in flight at once, at most (each with its queue of messages waiting for it).
pub const MAX_CONNECTS_IN_FLIGHT: usize = 256;
/// The read buffer's first size, and how much it grows at a time.
const READ_CHUNK: usize = 4096;
/// An emptied read buffer larger than this is replaced by a small one.
const KEEP_CAPACITY: usize = 16 * 1024;

/// TCP counters, for `show sip-stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TcpStatsSnapshot {
    /// Connections open now (accepted and dialled).
    pub open: u64,
    /// Connections accepted since start.
    pub accepted: u64,
    /// Connections dialled to next hops since start.
    pub dialled: u64,
    /// Connects that failed or timed out (their queued messages dropped).
    pub dial_failed: u64,
    /// Connects not attempted: the interface had `tcp-max-connections` dialled connections.
    pub refused_dial_cap: u64,
    /// Messages dropped while waiting for a connect: its queue was full, or
    /// [`MAX_CONNECTS_IN_FLIGHT`] connects were in flight.
    pub dial_dropped: u64,
    /// Accepted connections closed at once: the interface had `tcp-max-connections`.
    pub refused_interface_cap: u64,
    /// Accepted connections closed at once: the source had `tcp-max-connections-per-source`.
    pub refused_source_cap: u64,
    /// Closed after `tcp-idle-timeout-ms` without traffic.
    pub closed_idle: u64,
    /// Closed because a message was not complete within `tcp-message-timeout-ms`.
    pub closed_message_timeout: u64,
    /// Closed because the write queue would have exceeded `tcp-write-queue-bytes`.
    pub closed_write_queue_full: u64,
    /// Closed because a write did not complete within `tcp-write-timeout-ms`.
    pub closed_write_timeout: u64,
    /// Closed on a flood of keep-alive pings whose answers the client does not read.
    pub closed_ping_flood: u64,
    /// Closed on a message that cannot be framed (too large, bad Content-Length).
    pub closed_bad_framing: u64,
    /// TLS only: handshakes completed (accepted and dialled).
    pub handshakes: u64,
    /// TLS only: handshakes refused or failed (bad certificate, wrong name, protocol error).
    pub handshake_failed: u64,
    /// TLS only: handshakes not complete within `tls-handshake-timeout-ms`.
    pub handshake_timeout: u64,
    /// Requests whose next hop could not be reached (connect or handshake failed): each was
    /// answered 503 locally, as RFC 3261 §8.1.3.1 has a transport error treated.
    pub unreachable_503: u64,
    /// Messages not dialled for: their destination's last connect failed less than
    /// [`sbc_proto::dialling::DIAL_BACKOFF`] ago (requests answered 503, ACKs dropped).
    pub dial_backoff: u64,
    /// ACKs of those 503s, not dialled: the engine ACKs the 503 as if the next hop had sent
    /// it, but a transport error ends the transaction without an ACK (RFC 3261 §17.1.1.2), and
    /// dialling the next hop that just failed again would only fail again.
    pub unreachable_ack_dropped: u64,
}

impl TcpStatsSnapshot {
    /// Every counter with its name (the serialised field name), sorted by name: what
    /// `show sip-stats` lists and `/metrics` exports.
    #[must_use]
    pub fn fields(&self) -> [(&'static str, u64); 20] {
        let Self {
            open,
            accepted,
            dialled,
            dial_failed,
            refused_dial_cap,
            dial_dropped,
            refused_interface_cap,
            refused_source_cap,
            closed_idle,
            closed_message_timeout,
            closed_write_queue_full,
            closed_write_timeout,
            closed_ping_flood,
            closed_bad_framing,
            handshakes,
            handshake_failed,
            handshake_timeout,
            unreachable_503,
            dial_backoff,
            unreachable_ack_dropped,
        } = *self;
        // Destructured, so a new counter that is not listed here does not compile.
        let mut all = [
            ("open", open),
            ("accepted", accepted),
            ("dialled", dialled),
            ("dial_failed", dial_failed),
            ("refused_dial_cap", refused_dial_cap),
            ("dial_dropped", dial_dropped),
            ("refused_interface_cap", refused_interface_cap),
            ("refused_source_cap", refused_source_cap),
            ("closed_idle", closed_idle),
            ("closed_message_timeout", closed_message_timeout),
            ("closed_write_queue_full", closed_write_queue_full),
            ("closed_write_timeout", closed_write_timeout),
            ("closed_ping_flood", closed_ping_flood),
            ("closed_bad_framing", closed_bad_framing),
            ("handshakes", handshakes),
            ("handshake_failed", handshake_failed),
            ("handshake_timeout", handshake_timeout),
            ("unreachable_503", unreachable_503),
            ("dial_backoff", dial_backoff),
            ("unreachable_ack_dropped", unreachable_ack_dropped),
        ];
        all.sort_unstable_by_key(|(name, _)| *name);
        all
    }
}

#[derive(Debug, Default)]
struct TcpStats {
    open: AtomicU64,
    accepted: AtomicU64,
    dialled: AtomicU64,
    dial_failed: AtomicU64,
    refused_dial_cap: AtomicU64,
    dial_dropped: AtomicU64,
    refused_interface_cap: AtomicU64,
    refused_source_cap: AtomicU64,
    closed_idle: AtomicU64,
    closed_message_timeout: AtomicU64,
    closed_write_queue_full: AtomicU64,
    closed_write_timeout: AtomicU64,
    closed_ping_flood: AtomicU64,
    closed_bad_framing: AtomicU64,
    handshakes: AtomicU64,
    handshake_failed: AtomicU64,
    handshake_timeout: AtomicU64,
    unreachable_503: AtomicU64,
    dial_backoff: AtomicU64,
    unreachable_ack_dropped: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// One connection's sending side: a byte-bounded queue and the token that closes it.
#[derive(Debug, Clone)]
struct Conn {
    tx: tmpsc::UnboundedSender<Bytes>,
    queued: Arc<AtomicUsize>,
    /// A keep-alive answer is queued and not written yet: further pings get none (RFC 5626
    /// only asks for liveness), so a ping flood cannot fill the queue with answers.
    pong_pending: Arc<AtomicBool>,
    /// Pings received while the answer to an earlier one was still not written.
    unanswered: Arc<AtomicUsize>,
    close: CancellationToken,
}

/// The answer to a CRLFCRLF keep-alive ping.
const PONG: &[u8] = b"\r\n";
/// Pings received while an answer is still unwritten, at most: RFC 5626 clients send one ping
/// and wait for its pong (at intervals of tens of seconds), so more is a flood from a client
/// that does not read, and the connection is closed.
const MAX_UNANSWERED_PINGS: usize = 16;

impl Conn {
    /// Queues `b`; closes the connection (and returns false) if that would overflow `limit`.
    fn send(&self, b: Bytes, limit: usize, stats: &TcpStats) -> bool {
        if self.close.is_cancelled() {
            return false;
        }
        let cost = b.len().max(MIN_ITEM_COST);
        if self.queued.fetch_add(cost, Ordering::AcqRel) + cost > limit {
            self.queued.fetch_sub(cost, Ordering::AcqRel);
            bump(&stats.closed_write_queue_full);
            self.close.cancel();
            return false;
        }
        if self.tx.send(b).is_err() {
            self.queued.fetch_sub(cost, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Answers a keep-alive ping, unless an answer is already on its way; closes the connection
    /// on a flood of pings that are not read.
    fn pong(&self, limit: usize, stats: &TcpStats) {
        if !self.pong_pending.swap(true, Ordering::AcqRel) {
            self.send(Bytes::from_static(PONG), limit, stats);
        } else if self.unanswered.fetch_add(1, Ordering::AcqRel) == MAX_UNANSWERED_PINGS {
            bump(&stats.closed_ping_flood);
            self.close.cancel();
        }
    }
}

/// The TCP side of a node (or its TLS side, the same over TLS): its settings, connection
/// table, per-interface and per-source counts, and counters.
#[derive(Debug)]
pub struct TcpEdge {
    /// TCP, or TLS (then `tls` holds the profiles).
    transport: LegTransport,
    tls: Option<Arc<TlsContext>>,
    settings: RwLock<TcpSettings>,
    /// Session-agent addresses: exempt from the per-source cap.
    trusted: RwLock<HashSet<IpAddr>>,
    conns: Mutex<HashMap<SocketAddr, Conn>>,
    per_interface: Vec<AtomicUsize>,
    /// Dialled connections (and connects in flight) per interface.
    dialled_per_interface: Vec<AtomicUsize>,
    /// Each interface's IP: the source address of the connections dialled from it.
    interface_ips: Vec<IpAddr>,
    per_source: Mutex<HashMap<SourceKey, usize>>,
    stats: TcpStats,
}

impl TcpEdge {
    /// The TCP edge of the interfaces whose IPs are `interface_ips` (in the engine's order).
    #[must_use]
    pub fn new(settings: &EdgeSettings, interface_ips: &[IpAddr]) -> Self {
        Self::with_transport(settings, interface_ips, LegTransport::Tcp, None)
    }

    /// The TLS edge of the interfaces whose IPs are `interface_ips`, with the profiles of
    /// `tls`.
    #[must_use]
    pub fn new_tls(
        settings: &EdgeSettings,
        interface_ips: &[IpAddr],
        tls: Arc<TlsContext>,
    ) -> Self {
        Self::with_transport(settings, interface_ips, LegTransport::Tls, Some(tls))
    }

    fn with_transport(
        settings: &EdgeSettings,
        interface_ips: &[IpAddr],
        transport: LegTransport,
        tls: Option<Arc<TlsContext>>,
    ) -> Self {
        Self {
            transport,
            tls,
            settings: RwLock::new(settings.limits),
            trusted: RwLock::new(settings.trusted.clone()),
            conns: Mutex::new(HashMap::new()),
            per_interface: interface_ips.iter().map(|_| AtomicUsize::new(0)).collect(),
            dialled_per_interface: interface_ips.iter().map(|_| AtomicUsize::new(0)).collect(),
            interface_ips: interface_ips.to_vec(),
            per_source: Mutex::new(HashMap::new()),
            stats: TcpStats::default(),
        }
    }

    /// Applies activated settings: new limits hold for new connections and new writes;
    /// existing connections keep their deadlines until their next message.
    pub fn reconfigure(&self, settings: &EdgeSettings) {
        if let Ok(mut s) = self.settings.write() {
            *s = settings.limits;
        }
        if let Ok(mut t) = self.trusted.write() {
            t.clone_from(&settings.trusted);
        }
    }

    /// The current settings.
    #[must_use]
    pub fn settings(&self) -> TcpSettings {
        self.settings
            .read()
            .map(|s| *s)
            .unwrap_or_else(|p| *p.into_inner())
    }

    /// The counters.
    #[must_use]
    pub fn stats(&self) -> TcpStatsSnapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let s = &self.stats;
        TcpStatsSnapshot {
            open: g(&s.open),
            accepted: g(&s.accepted),
            dialled: g(&s.dialled),
            dial_failed: g(&s.dial_failed),
            refused_dial_cap: g(&s.refused_dial_cap),
            dial_dropped: g(&s.dial_dropped),
            refused_interface_cap: g(&s.refused_interface_cap),
            refused_source_cap: g(&s.refused_source_cap),
            closed_idle: g(&s.closed_idle),
            closed_message_timeout: g(&s.closed_message_timeout),
            closed_write_queue_full: g(&s.closed_write_queue_full),
            closed_write_timeout: g(&s.closed_write_timeout),
            closed_ping_flood: g(&s.closed_ping_flood),
            closed_bad_framing: g(&s.closed_bad_framing),
            handshakes: g(&s.handshakes),
            handshake_failed: g(&s.handshake_failed),
            handshake_timeout: g(&s.handshake_timeout),
            unreachable_503: g(&s.unreachable_503),
            dial_backoff: g(&s.dial_backoff),
            unreachable_ack_dropped: g(&s.unreachable_ack_dropped),
        }
    }

    fn conn(&self, to: SocketAddr) -> Option<Conn> {
        self.conns.lock().ok().and_then(|c| c.get(&to).cloned())
    }

    /// Admits an accepted connection from `peer` on `interface`, or says why not.
    fn admit(self: &Arc<Self>, interface: usize, peer: SocketAddr) -> Option<Admitted> {
        let s = self.settings();
        let count = self.per_interface.get(interface)?;
        if count.fetch_add(1, Ordering::AcqRel) >= s.max_connections {
            count.fetch_sub(1, Ordering::AcqRel);
            bump(&self.stats.refused_interface_cap);
            return None;
        }
        let trusted = self.trusted.read().is_ok_and(|t| t.contains(&peer.ip()));
        let source = SourceKey::of(peer.ip(), s.source_ipv6_prefix);
        if !trusted {
            let mut per = self.per_source.lock().ok()?;
            let n = per.entry(source).or_insert(0);
            if *n >= s.max_per_source {
                drop(per);
                count.fetch_sub(1, Ordering::AcqRel);
                bump(&self.stats.refused_source_cap);
                return None;
            }
            *n += 1;
        }
        Some(Admitted {
            edge: self.clone(),
            interface,
            source: (!trusted).then_some(source),
            dialled: false,
        })
    }

    /// Takes a place for a connection dialled from `interface`, or says why not (counted).
    fn admit_dial(self: &Arc<Self>, interface: usize) -> Option<Admitted> {
        let cap = self.settings().max_connections;
        let count = self.dialled_per_interface.get(interface)?;
        if count.fetch_add(1, Ordering::AcqRel) >= cap {
            count.fetch_sub(1, Ordering::AcqRel);
            bump(&self.stats.refused_dial_cap);
            return None;
        }
        Some(Admitted {
            edge: self.clone(),
            interface,
            source: None,
            dialled: true,
        })
    }
}

/// A connection's place in the counts (accepted, or dialled); given back when dropped.
#[derive(Debug)]
struct Admitted {
    edge: Arc<TcpEdge>,
    interface: usize,
    /// The source whose per-source count it holds (none if trusted or dialled).
    source: Option<SourceKey>,
    dialled: bool,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let counts = if self.dialled {
            &self.edge.dialled_per_interface
        } else {
            &self.edge.per_interface
        };
        if let Some(c) = counts.get(self.interface) {
            c.fetch_sub(1, Ordering::AcqRel);
        }
        if let Some(source) = self.source {
            if let Ok(mut per) = self.edge.per_source.lock() {
                if let Some(n) = per.get_mut(&source) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        per.remove(&source);
                    }
                }
            }
        }
    }
}

/// Where a connection's messages go (the node's dispatch to the TCP worker group).
pub type Dispatch = Arc<dyn Fn(Inbound) + Send + Sync>;

/// Accepts connections on `listener` for `interface` forever, within the limits.
pub async fn accept_loop(
    interface: usize,
    listener: TcpListener,
    edge: Arc<TcpEdge>,
    dispatch: Dispatch,
) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                // Once, here: the connection is registered, capped and dispatched under it.
                let peer = canonical(peer);
                let Some(admitted) = edge.admit(interface, peer) else {
                    debug!(%peer, "TCP connection refused: connection cap");
                    drop(stream);
                    continue;
                };
                bump(&edge.stats.accepted);
                let _ = stream.set_nodelay(true);
                let Some(tls) = &edge.tls else {
                    serve(
                        interface,
                        stream,
                        peer,
                        Some(admitted),
                        &edge,
                        dispatch.clone(),
                    );
                    continue;
                };
                let Some(acceptor) = tls.acceptor(interface) else {
                    drop(stream);
                    continue;
                };
                // The handshake runs on its own task, holding its place in the caps.
                let (edge, dispatch) = (edge.clone(), dispatch.clone());
                tokio::spawn(async move {
                    let limit = edge.settings().handshake_timeout;
                    match tokio::time::timeout(limit, acceptor.accept(stream)).await {
                        Ok(Ok(tls_stream)) => {
                            bump(&edge.stats.handshakes);
                            serve(interface, tls_stream, peer, Some(admitted), &edge, dispatch);
                        }
                        Ok(Err(e)) => {
                            bump(&edge.stats.handshake_failed);
                            debug!(%peer, error = %e, "TLS handshake refused");
                        }
                        Err(_) => {
                            bump(&edge.stats.handshake_timeout);
                            debug!(%peer, "TLS handshake timed out");
                        }
                    }
                });
            }
            Err(e) => {
                warn!(error = %e, "TCP accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Starts the reader and writer tasks of one connection (TCP, or TLS over it) and registers it
/// under `peer`.
fn serve<S: SplitStream>(
    interface: usize,
    stream: S,
    peer: SocketAddr,
    admitted: Option<Admitted>,
    edge: &Arc<TcpEdge>,
    dispatch: Dispatch,
) -> Conn {
    let settings = edge.settings();
    let (read, mut write) = stream.halves();
    let (tx, mut rx) = tmpsc::unbounded_channel::<Bytes>();
    let conn = Conn {
        tx,
        queued: Arc::new(AtomicUsize::new(0)),
        pong_pending: Arc::new(AtomicBool::new(false)),
        unanswered: Arc::new(AtomicUsize::new(0)),
        close: CancellationToken::new(),
    };
    if let Ok(mut c) = edge.conns.lock() {
        c.insert(peer, conn.clone());
    }
    bump(&edge.stats.open);
    {
        let (conn, edge) = (conn.clone(), edge.clone());
        tokio::spawn(async move {
            let mut batch: Vec<Bytes> = Vec::new();
            loop {
                let b = tokio::select! {
                    () = conn.close.cancelled() => break,
                    b = rx.recv() => match b {
                        Some(b) => b,
                        None => break,
                    },
                };
                // What else is queued goes in the same write (one TLS flush for all of it).
                let mut bytes = b.len();
                batch.push(b);
                while bytes < WRITE_BATCH {
                    match rx.try_recv() {
                        Ok(b) => {
                            bytes += b.len();
                            batch.push(b);
                        }
                        Err(_) => break,
                    }
                }
                let written = tokio::time::timeout(settings.write_timeout, async {
                    for b in &batch {
                        write.write_all(b).await?;
                    }
                    write.flush().await
                })
                .await;
                for b in batch.drain(..) {
                    conn.queued
                        .fetch_sub(b.len().max(MIN_ITEM_COST), Ordering::AcqRel);
                    if b.as_ref() == PONG {
                        conn.unanswered.store(0, Ordering::Release);
                        conn.pong_pending.store(false, Ordering::Release);
                    }
                }
                match written {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => break,
                    Err(_) => {
                        bump(&edge.stats.closed_write_timeout);
                        break;
                    }
                }
            }
            conn.close.cancel();
        });
    }
    let (reader_conn, edge) = (conn.clone(), edge.clone());
    tokio::spawn(async move {
        let _admitted = admitted;
        read_loop(
            interface,
            read,
            peer,
            &reader_conn,
            &edge,
            &dispatch,
            settings,
        )
        .await;
        reader_conn.close.cancel();
        if let Ok(mut c) = edge.conns.lock() {
            // Only our own entry: a newer connection to the same peer may have replaced it.
            if c.get(&peer).is_some_and(|x| x.close.is_cancelled()) {
                c.remove(&peer);
            }
        }
        edge.stats.open.fetch_sub(1, Ordering::Relaxed);
    });
    conn
}

/// Bytes gathered from a write queue into one write (and, over TLS, one flush).
const WRITE_BATCH: usize = 64 * 1024;

/// A connection's stream split into its reading and writing halves: a TCP stream's own
/// halves (no lock between them), a TLS stream's through `tokio::io::split`.
trait SplitStream: Send + 'static {
    /// The reading half.
    type Read: AsyncRead + Unpin + Send + 'static;
    /// The writing half.
    type Write: AsyncWrite + Unpin + Send + 'static;
    /// Splits the stream.
    fn halves(self) -> (Self::Read, Self::Write);
}

impl SplitStream for TcpStream {
    type Read = tokio::net::tcp::OwnedReadHalf;
    type Write = tokio::net::tcp::OwnedWriteHalf;
    fn halves(self) -> (Self::Read, Self::Write) {
        self.into_split()
    }
}

impl SplitStream for tokio_rustls::server::TlsStream<TcpStream> {
    type Read = tokio::io::ReadHalf<Self>;
    type Write = tokio::io::WriteHalf<Self>;
    fn halves(self) -> (Self::Read, Self::Write) {
        tokio::io::split(self)
    }
}

impl SplitStream for tokio_rustls::client::TlsStream<TcpStream> {
    type Read = tokio::io::ReadHalf<Self>;
    type Write = tokio::io::WriteHalf<Self>;
    fn halves(self) -> (Self::Read, Self::Write) {
        tokio::io::split(self)
    }
}

/// Why a reader stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closed {
    Eof,
    Idle,
    MessageTimeout,
    Cancelled,
}

async fn read_loop(
    interface: usize,
    mut read: impl AsyncRead + Unpin,
    peer: SocketAddr,
    conn: &Conn,
    edge: &TcpEdge,
    dispatch: &Dispatch,
    settings: TcpSettings,
) {
    let mut codec = TcpFramer::new(settings.max_message);
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let mut last_activity = Instant::now();
    let mut message_since: Option<Instant> = None;
    let why = loop {
        // Everything complete in the buffer first (unless the connection is being closed).
        while !conn.close.is_cancelled() {
            match codec.next_frame(&mut buf) {
                Ok(Some(Frame::Message(data))) => dispatch(Inbound {
                    interface,
                    transport: edge.transport,
                    source: peer,
                    data,
                }),
                Ok(Some(Frame::Ping)) => conn.pong(settings.write_queue_bytes, &edge.stats),
                Ok(None) => break,
                Err(e) => {
                    debug!(%peer, error = %e, "closing TCP connection");
                    bump(&edge.stats.closed_bad_framing);
                    if let FrameError::Poisoned = e {
                        // The header block before it was handed over: leave the writer a moment
                        // so its answer (a 400) can still go out.
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    return;
                }
            }
        }
        if buf.is_empty() {
            message_since = None;
            if buf.capacity() > KEEP_CAPACITY {
                buf = BytesMut::with_capacity(READ_CHUNK);
            }
        } else if message_since.is_none() {
            message_since = Some(last_activity);
        }
        let idle_at = last_activity + settings.idle_timeout;
        let (deadline, on_timeout) = match message_since {
            Some(t) if t + settings.message_timeout < idle_at => {
                (t + settings.message_timeout, Closed::MessageTimeout)
            }
            _ => (idle_at, Closed::Idle),
        };
        if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            buf.reserve(READ_CHUNK);
        }
        let read_more = tokio::select! {
            () = conn.close.cancelled() => break Closed::Cancelled,
            r = tokio::time::timeout_at(deadline, read.read_buf(&mut buf)) => r,
        };
        match read_more {
            Err(_) => break on_timeout,
            Ok(Ok(0) | Err(_)) => break Closed::Eof,
            Ok(Ok(_)) => last_activity = Instant::now(),
        }
    };
    match why {
        Closed::Idle => bump(&edge.stats.closed_idle),
        Closed::MessageTimeout => bump(&edge.stats.closed_message_timeout),
        Closed::Eof | Closed::Cancelled => {}
    }
    debug!(%peer, reason = ?why, "TCP connection closed");
}

/// Opens a connection from `interface`'s IP (any port) to `dest`, within [`CONNECT_TIMEOUT`].
async fn connect(local: Option<IpAddr>, dest: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = match dest {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    if let Some(ip) = local.filter(|ip| !ip.is_unspecified() && ip.is_ipv4() == dest.is_ipv4()) {
        socket.bind(SocketAddr::new(ip, 0))?;
    }
    tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(dest))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "TCP connect timed out"))?
}

/// A request that could not be sent to `dest` gets its 503 at once (RFC 3261 §8.1.3.1: a
/// transport error is a 503), handed to the engine as the next hop's answer, instead of its
/// transaction's timeout; an ACK is dropped (it has no answer).
fn unreachable(
    edge: &TcpEdge,
    dispatch: &Dispatch,
    local_503s: &mut Local503s,
    interface: usize,
    dest: SocketAddr,
    b: &[u8],
) {
    if let Some(data) = transport_failure_response(b) {
        if b.starts_with(b"INVITE ") {
            if let Some(branch) = SipMessage::parse(b)
                .ok()
                .as_ref()
                .and_then(SipMessage::top_via_branch)
            {
                local_503s.note(branch, Instant::now().into_std());
            }
        }
        bump(&edge.stats.unreachable_503);
        dispatch(Inbound {
            interface,
            transport: edge.transport,
            source: dest,
            data,
        });
    }
}

/// Opens a connection to `dest` from `interface` (`local` its IP) and, on a TLS edge, its
/// handshake (verifying the peer as [`TlsContext::connector`] says), within the timeouts; on
/// success the connection is served and returned.
async fn dial(
    edge: &Arc<TcpEdge>,
    interface: usize,
    local: Option<IpAddr>,
    dest: SocketAddr,
    place: Admitted,
    dispatch: &Dispatch,
) -> Option<Conn> {
    let stream = match connect(local, dest).await {
        Ok(stream) => stream,
        Err(e) => {
            bump(&edge.stats.dial_failed);
            debug!(%dest, error = %e, "TCP connect failed");
            return None;
        }
    };
    let _ = stream.set_nodelay(true);
    let Some(tls) = &edge.tls else {
        bump(&edge.stats.dialled);
        return Some(serve(
            interface,
            stream,
            dest,
            Some(place),
            edge,
            dispatch.clone(),
        ));
    };
    let Some((connector, name)) = tls.connector(interface, dest) else {
        bump(&edge.stats.dial_failed);
        warn!(%dest, "no tls-profile with trusted CAs to verify this TLS peer: not dialled");
        return None;
    };
    let limit = edge.settings().handshake_timeout;
    match tokio::time::timeout(limit, connector.connect(name, stream)).await {
        Ok(Ok(tls_stream)) => {
            bump(&edge.stats.dialled);
            bump(&edge.stats.handshakes);
            Some(serve(
                interface,
                tls_stream,
                dest,
                Some(place),
                edge,
                dispatch.clone(),
            ))
        }
        Ok(Err(e)) => {
            bump(&edge.stats.dial_failed);
            bump(&edge.stats.handshake_failed);
            warn!(%dest, error = %e, "TLS handshake with the next hop failed");
            None
        }
        Err(_) => {
            bump(&edge.stats.dial_failed);
            bump(&edge.stats.handshake_timeout);
            warn!(%dest, "TLS handshake with the next hop timed out");
            None
        }
    }
}

/// Sends TCP transmits, opening a connection to the destination when none exists (a response
/// whose connection is gone is dropped: the peer's ephemeral port is not dialled). See the
/// module docs for the bounds on dialling.
pub async fn sender(
    mut rx: tmpsc::UnboundedReceiver<Transmit>,
    edge: Arc<TcpEdge>,
    dispatch: Dispatch,
) {
    let mut dialling = Dialling::new(MAX_CONNECTS_IN_FLIGHT);
    let mut local_503s = Local503s::default();
    let (done_tx, mut done_rx) = tmpsc::unbounded_channel::<(SocketAddr, usize, Option<Conn>)>();
    loop {
        tokio::select! {
            t = rx.recv() => {
                let Some(t) = t else { break };
                let limit = edge.settings().write_queue_bytes;
                if let Some(conn) = edge.conn(t.dest) {
                    if conn.send(t.payload.clone(), limit, &edge.stats) {
                        continue;
                    }
                }
                if t.payload.starts_with(b"SIP/2.0 ") {
                    debug!(dest = %t.dest, "TCP connection gone; response dropped");
                    continue;
                }
                if local_503s.is_ack_of_one(&t.payload, Instant::now().into_std()) {
                    bump(&edge.stats.unreachable_ack_dropped);
                    debug!(dest = %t.dest, "ACK of a 503 answered for an unreachable next hop: not dialled");
                    continue;
                }
                if dialling.backing_off(t.dest, Instant::now().into_std()) {
                    bump(&edge.stats.dial_backoff);
                    unreachable(&edge, &dispatch, &mut local_503s, t.interface, t.dest, &t.payload);
                    continue;
                }
                match dialling.push(t.dest, t.payload, limit) {
                    Queued::Behind => continue,
                    Queued::QueueFull | Queued::TooManyConnects => {
                        bump(&edge.stats.dial_dropped);
                        debug!(dest = %t.dest, "TCP connect pending; message dropped");
                        continue;
                    }
                    Queued::Connect => {}
                }
                let (dest, interface) = (t.dest, t.interface);
                let Some(place) = edge.admit_dial(interface) else {
                    debug!(%dest, "TCP connect refused: dialled connection cap");
                    drop(dialling.finish(dest));
                    continue;
                };
                let local = edge.interface_ips.get(interface).copied();
                let (edge, dispatch, done) = (edge.clone(), dispatch.clone(), done_tx.clone());
                tokio::spawn(async move {
                    let conn = dial(&edge, interface, local, dest, place, &dispatch).await;
                    let _ = done.send((dest, interface, conn));
                });
            }
            d = done_rx.recv() => {
                let Some((dest, interface, conn)) = d else { continue };
                let queued = dialling.finish(dest);
                if let Some(conn) = conn {
                    let limit = edge.settings().write_queue_bytes;
                    for b in queued {
                        if !conn.send(b, limit, &edge.stats) {
                            break;
                        }
                    }
                } else {
                    let now = Instant::now();
                    dialling.failed(dest, now.into_std());
                    for b in queued {
                        unreachable(&edge, &dispatch, &mut local_503s, interface, dest, &b);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(max_per_source: usize, prefix: u8) -> Arc<TcpEdge> {
        let settings = EdgeSettings {
            limits: TcpSettings {
                max_message: 65_535,
                max_connections: 1000,
                max_per_source,
                source_ipv6_prefix: prefix,
                message_timeout: Duration::from_secs(20),
                idle_timeout: Duration::from_secs(120),
                write_queue_bytes: 262_144,
                write_timeout: Duration::from_secs(10),
                handshake_timeout: Duration::from_secs(5),
            },
            trusted: HashSet::from(["fd00:5::5".parse().expect("address")]),
        };
        Arc::new(TcpEdge::new(&settings, &["::".parse().expect("address")]))
    }

    fn peer(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    #[test]
    fn the_per_source_cap_counts_an_ipv6_prefix_as_one_source() {
        let e = edge(4, 64);
        // Four addresses of one /64 take its four places; a fifth address of it is refused.
        let held: Vec<Admitted> = (1..=4)
            .filter_map(|i| e.admit(0, peer(&format!("[fd00:64::{i}]:5060"))))
            .collect();
        assert_eq!(held.len(), 4);
        assert!(e.admit(0, peer("[fd00:64::ffff:1]:5060")).is_none());
        assert_eq!(e.stats().refused_source_cap, 1);
        // Another /64, an IPv4 address, a session-agent: their own counts.
        let other = e.admit(0, peer("[fd00:65::1]:5060"));
        assert!(other.is_some());
        let v4: Vec<Admitted> = (0..4)
            .filter_map(|_| e.admit(0, peer("192.0.2.7:5060")))
            .collect();
        assert_eq!(v4.len(), 4);
        assert!(e.admit(0, peer("192.0.2.8:5060")).is_some());
        let agent: Vec<Admitted> = (0..10)
            .filter_map(|_| e.admit(0, peer("[fd00:5::5]:5060")))
            .collect();
        assert_eq!(agent.len(), 10, "exempt");
        // A closed connection gives its place back to the /64.
        drop(held);
        let again = e.admit(0, peer("[fd00:64::ffff:1]:5060"));
        assert!(again.is_some());
        let per = e.per_source.lock().map(|p| p.len()).unwrap_or(0);
        assert_eq!(
            per, 3,
            "the two /64s and 192.0.2.7 (192.0.2.8's one is closed)"
        );
        drop((again, other, v4, agent));
        let per = e.per_source.lock().map(|p| p.len()).unwrap_or(0);
        assert_eq!(per, 0, "every count given back");
    }

    #[test]
    fn the_per_source_cap_follows_the_prefix_length() {
        // Per address (/128): each address its own cap.
        let e = edge(1, 128);
        let all: Vec<Admitted> = (1..=8)
            .filter_map(|i| e.admit(0, peer(&format!("[fd00:64::{i}]:5060"))))
            .collect();
        assert_eq!(all.len(), 8);
        // A /48: two /64s of it share one.
        let e = edge(1, 48);
        let first = e.admit(0, peer("[fd00:1:2:3::1]:5060"));
        assert!(first.is_some());
        assert!(e.admit(0, peer("[fd00:1:2:4::1]:5060")).is_none());
    }
}
