//! The state-sync channel over TCP: a Noise session ([`crate::channel`]) carrying
//! [`SyncFrame`]s (see [`crate::sync`] for the conversation), closed to everyone but the peer.
//!
//! On the active, a [`SyncPublisher`] owns the table: the engine calls `upsert`/`delete` on
//! it, which changes the table and broadcasts the change; [`serve_sync`] accepts the standby
//! and gives it a snapshot then the stream, taken under one lock so no change falls between
//! them. A standby that falls behind the broadcast buffer gets a fresh snapshot.
//!
//! On the standby, [`run_sync_client`] applies the snapshot and the stream to a shared
//! [`SyncTable`] and reports [`SyncEvent::Synchronized`] once the snapshot is complete (feed
//! it to the heartbeat task as [`super::Command::SyncComplete`]). It returns when the
//! connection ends, reporting [`SyncEvent::LinkLost`] when the active's side ended it (feed
//! it to the heartbeat task as [`super::Command::PeerLinkLost`]); the owner reconnects while
//! it is standby.
//!
//! # What a stranger gets
//!
//! Nothing but a closed connection, and it is counted ([`SyncCounters`]) and logged once per
//! source per interval ([`crate::refusals`]):
//!
//! 1. A connection from an address that is not one of the peer's (`redundancy-config` peer
//!    `destinations`, IPv4 or IPv6, compared canonical: an IPv4-mapped source is its IPv4
//!    address) is closed at once (`refused_address`).
//! 2. At most [`MAX_PENDING`] handshakes run at a time (`refused_busy` beyond), each with
//!    [`HANDSHAKE_TIMEOUT`] to complete the Noise handshake and open the first frame
//!    (`refused_timeout`); a handshake message is at most 128 bytes, so a connection can make
//!    the active reserve nothing more.
//! 3. A handshake that does not prove the shared key is refused (`refused_handshake`); so is a
//!    peer whose first frame, a `Hello`, names another node than the configured peer
//!    (`refused_node`).
//! 4. Only then is the session established (key confirmation: the initiator's first transport
//!    message opened). There is one per peer: a newer one replaces the older, which a replayed
//!    handshake cannot do since it never gets that far.
//! 5. In a session, a message that does not open, a frame beyond the cap or one out of the
//!    conversation closes it (`refused_frame`); each entry a snapshot or an update would
//!    install is checked by the owner's [`EntryCheck`] first, and refused ones are dropped and
//!    counted (`invalid_entries`).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use rand::RngCore as _;
use serde::Serialize;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{broadcast, mpsc, watch, Semaphore};
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use tracing::{debug, info, warn};

use crate::channel::{
    ChannelError, Initiator, Responder, Session, MAX_HANDSHAKE_MESSAGE, MAX_MESSAGE,
};
use crate::crypto::PairKeys;
use crate::refusals::{LogLine, RefusalLog};
use crate::settings::{RedundancySettings, SettingsError};
use crate::sync::{snapshot_chunks, SyncEntry, SyncError, SyncFrame, SyncTable};
use crate::wire::NodeId;

/// How long a connection may take to complete the handshake and its first frame.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3);
/// Handshakes in progress at a time, at most.
pub const MAX_PENDING: usize = 4;
/// How long the standby waits for its TCP connection to be accepted.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Checks an entry (key, value) before it is installed from the peer: `Err` says why it is
/// refused. The `sbc` checks that a dialog decodes and names interfaces, realms and peers of
/// its configuration.
pub type EntryCheck = Arc<dyn Fn(&[u8], &[u8]) -> Result<(), String> + Send + Sync>;

/// Counters of the sync channel, on both sides (see the module docs for what each counts).
#[derive(Debug, Default)]
pub struct SyncCounters {
    sessions: AtomicU64,
    replaced: AtomicU64,
    refused_address: AtomicU64,
    refused_busy: AtomicU64,
    refused_handshake: AtomicU64,
    refused_timeout: AtomicU64,
    refused_node: AtomicU64,
    refused_frame: AtomicU64,
    invalid_entries: AtomicU64,
    streamed_revision: AtomicU64,
    resyncs: AtomicU64,
}

/// A copy of [`SyncCounters`] (for `show redundancy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SyncCountersSnapshot {
    /// Sessions established (the peer proved the key and named itself).
    pub sessions: u64,
    /// Sessions closed because a newer one with the peer was established.
    pub replaced: u64,
    /// Connections from an address that is not the peer's, closed at once.
    pub refused_address: u64,
    /// Connections closed because [`MAX_PENDING`] handshakes were already running.
    pub refused_busy: u64,
    /// Handshakes that did not prove the shared key (or were not a v2 sync peer).
    pub refused_handshake: u64,
    /// Connections that did not finish the handshake and first frame in time.
    pub refused_timeout: u64,
    /// Authentic peers naming another node than the configured peer.
    pub refused_node: u64,
    /// Sessions closed on a message that did not open, a frame too large or out of turn.
    pub refused_frame: u64,
    /// Entries from the peer refused by the owner's check, not installed.
    pub invalid_entries: u64,
    /// On the active: the largest table revision written to a standby's connection (a
    /// snapshot counts for the table's revision when it was taken).
    pub streamed_revision: u64,
    /// On the active: fresh snapshots sent because a standby fell more than the buffer behind.
    pub resyncs: u64,
}

impl SyncCounters {
    /// A copy of the counters.
    #[must_use]
    pub fn snapshot(&self) -> SyncCountersSnapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SyncCountersSnapshot {
            sessions: g(&self.sessions),
            replaced: g(&self.replaced),
            refused_address: g(&self.refused_address),
            refused_busy: g(&self.refused_busy),
            refused_handshake: g(&self.refused_handshake),
            refused_timeout: g(&self.refused_timeout),
            refused_node: g(&self.refused_node),
            refused_frame: g(&self.refused_frame),
            invalid_entries: g(&self.invalid_entries),
            streamed_revision: g(&self.streamed_revision),
            resyncs: g(&self.resyncs),
        }
    }
}

/// Why a connection or session was refused, for the counters and the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    Address,
    Busy,
    Handshake,
    Timeout,
    Node,
    Frame,
}

impl Refusal {
    /// The refusal an error is, before the session was established (`handshake`) or in it.
    fn of(e: &SyncError, handshake: bool) -> Self {
        match e {
            SyncError::Channel(ChannelError::Handshake | ChannelError::HandshakeTooLong(_)) => {
                Self::Handshake
            }
            SyncError::Timeout(_) => Self::Timeout,
            SyncError::WrongNode(_) => Self::Node,
            // A connection reset or a bad first frame before the session is up is a handshake
            // that did not complete.
            _ if handshake => Self::Handshake,
            _ => Self::Frame,
        }
    }

    fn counter(self, c: &SyncCounters) -> &AtomicU64 {
        match self {
            Self::Address => &c.refused_address,
            Self::Busy => &c.refused_busy,
            Self::Handshake => &c.refused_handshake,
            Self::Timeout => &c.refused_timeout,
            Self::Node => &c.refused_node,
            Self::Frame => &c.refused_frame,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Address => "not a peer address",
            Self::Busy => "too many handshakes at once",
            Self::Handshake => "handshake refused (not the shared key, or not a v2 sync peer)",
            Self::Timeout => "no handshake in time",
            Self::Node => "authentic but not the configured peer",
            Self::Frame => "session closed on a bad frame",
        }
    }
}

/// Who this node is on the sync channel and whom it accepts: everything the channel needs from
/// `redundancy-config`, plus the owner's entry check and the shared counters.
pub struct SyncContext {
    /// This node.
    pub node: NodeId,
    /// The only node accepted at the other end.
    pub peer: NodeId,
    /// The addresses the peer may connect from: the IPs of its heartbeat `destinations`,
    /// canonical ([`crate::addr`]), IPv4 or IPv6.
    pub peer_ips: Vec<IpAddr>,
    /// The address this node connects from (its first heartbeat IP, canonical), so the active
    /// sees one of its peer's addresses.
    pub local_ip: IpAddr,
    psk: [u8; 32],
    check: EntryCheck,
    counters: SyncCounters,
    log: Mutex<RefusalLog>,
}

impl std::fmt::Debug for SyncContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncContext")
            .field("node", &self.node)
            .field("peer", &self.peer)
            .field("peer_ips", &self.peer_ips)
            .field("local_ip", &self.local_ip)
            .finish_non_exhaustive()
    }
}

impl SyncContext {
    /// The context of the node named `local` in `config`, checking entries with `check`.
    ///
    /// # Errors
    /// The configuration does not validate for `local`.
    pub fn new(
        config: &RedundancySettings,
        local: &str,
        check: EntryCheck,
    ) -> Result<Self, SettingsError> {
        let (me, mate) = config.validated_pair(local)?;
        let mut peer_ips: Vec<IpAddr> = Vec::with_capacity(mate.destinations.len());
        for d in &mate.destinations {
            let ip = d.ip().to_canonical();
            if !peer_ips.contains(&ip) {
                peer_ips.push(ip);
            }
        }
        Ok(Self {
            node: NodeId::from_name(&me.name),
            peer: NodeId::from_name(&mate.name),
            peer_ips,
            local_ip: me.destinations[0].ip().to_canonical(),
            psk: PairKeys::derive(config.shared_key.as_bytes()).sync_psk,
            check,
            counters: SyncCounters::default(),
            log: Mutex::new(RefusalLog::default()),
        })
    }

    /// The counters.
    #[must_use]
    pub fn counters(&self) -> SyncCountersSnapshot {
        self.counters.snapshot()
    }

    /// Whether a connection from `ip` may be the peer's: `ip` is one of [`Self::peer_ips`]
    /// once canonical (a listener on an IPv6 socket may see an IPv4 peer as
    /// `::ffff:a.b.c.d`). Anyone else is refused at once (`refused_address`).
    #[must_use]
    pub fn is_peer_ip(&self, ip: IpAddr) -> bool {
        self.peer_ips.contains(&ip.to_canonical())
    }

    /// Where the standby connects to reach the active's sync server at `addr`, and the local
    /// address it binds first: `addr` canonical, bound to [`Self::local_ip`] (port chosen by
    /// the system) when that is of the same family, as the validated configuration makes it
    /// (both ends of a path are of one family), else not bound.
    #[must_use]
    pub fn connect_plan(&self, addr: SocketAddr) -> (SocketAddr, Option<SocketAddr>) {
        let addr = crate::addr::canonical(addr);
        let bind = crate::addr::same_family(self.local_ip, addr.ip())
            .then(|| SocketAddr::new(self.local_ip, 0));
        (addr, bind)
    }

    /// Notes a refusal from `from` in the rate-limited log: the line to write, if it is time.
    fn log_line(&self, from: SocketAddr) -> Option<LogLine> {
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .note(Instant::now(), from.ip().to_canonical())
    }

    fn refuse(&self, from: SocketAddr, why: Refusal, detail: &dyn std::fmt::Display) {
        why.counter(&self.counters).fetch_add(1, Ordering::Relaxed);
        if let Some(line) = self.log_line(from) {
            warn!(
                source = %line.source_text(),
                refused = line.count,
                reason = why.as_str(),
                detail = %detail,
                "state sync: connection refused (logged once per source per 10 s)"
            );
        }
    }

    /// Checks every entry, counting and dropping those refused.
    fn checked(&self, from: SocketAddr, items: Vec<SyncEntry>) -> Vec<SyncEntry> {
        items
            .into_iter()
            .filter(|e| match &e.value {
                None => true,
                Some(v) => match (self.check)(&e.key, v) {
                    Ok(()) => true,
                    Err(why) => {
                        self.invalid(from, &why);
                        false
                    }
                },
            })
            .collect()
    }

    fn invalid(&self, from: SocketAddr, why: &str) {
        self.counters
            .invalid_entries
            .fetch_add(1, Ordering::Relaxed);
        if let Some(line) = self.log_line(from) {
            warn!(source = %line.source_text(), refused = line.count, reason = why, "state sync: entry refused, not installed");
        }
    }
}

fn os_seed() -> [u8; 32] {
    let mut seed = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut seed);
    seed
}

type Conn = Framed<TcpStream, LengthDelimitedCodec>;

fn framed(stream: TcpStream) -> Conn {
    let _ = stream.set_nodelay(true);
    Framed::new(
        stream,
        LengthDelimitedCodec::builder()
            .length_field_length(2)
            .max_frame_length(MAX_HANDSHAKE_MESSAGE)
            .new_codec(),
    )
}

/// Most queued changes the active writes to the standby in one flush.
const STREAM_BATCH: usize = 256;

/// A connection whose handshake is done: frames in and out through the session.
struct Channel {
    conn: Conn,
    session: Session,
    peer: SocketAddr,
}

impl Channel {
    fn new(mut conn: Conn, session: Session, peer: SocketAddr) -> Self {
        conn.codec_mut().set_max_frame_length(MAX_MESSAGE);
        Self {
            conn,
            session,
            peer,
        }
    }

    async fn send(&mut self, frame: &SyncFrame) -> Result<(), SyncError> {
        self.feed(frame).await?;
        SinkExt::<Bytes>::flush(&mut self.conn).await?;
        Ok(())
    }

    /// Seals `frame` into the connection's write buffer, without flushing it.
    async fn feed(&mut self, frame: &SyncFrame) -> Result<(), SyncError> {
        for m in self.session.seal(&frame.encode()?)? {
            self.conn.feed(Bytes::from(m)).await?;
        }
        Ok(())
    }

    async fn recv(&mut self) -> Result<Option<SyncFrame>, SyncError> {
        loop {
            match self.conn.next().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(e.into()),
                Some(Ok(m)) => {
                    if let Some(frame) = self.session.open(&m)? {
                        return SyncFrame::decode(&frame).map(Some);
                    }
                }
            }
        }
    }

    async fn send_snapshot(&mut self, items: Vec<SyncEntry>) -> Result<(), SyncError> {
        let (chunks, oversized) = snapshot_chunks(items);
        if oversized > 0 {
            warn!(
                oversized,
                "state sync: entries too large to replicate left out"
            );
        }
        let n = chunks.len();
        for (i, items) in chunks.into_iter().enumerate() {
            self.send(&SyncFrame::Snapshot {
                items,
                last: i + 1 == n,
            })
            .await?;
        }
        Ok(())
    }
}

async fn read_handshake(conn: &mut Conn) -> Result<Bytes, SyncError> {
    match conn.next().await {
        // Closed mid-handshake: on the active, a stranger gave up; on the standby, whoever
        // answered could not read our first message (not the shared key).
        None => Err(ChannelError::Handshake.into()),
        // The codec refuses a length beyond the handshake cap before buffering it.
        Some(Err(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
            Err(ChannelError::HandshakeTooLong(MAX_HANDSHAKE_MESSAGE + 1).into())
        }
        Some(Err(e)) => Err(e.into()),
        Some(Ok(m)) => Ok(m.freeze()),
    }
}

#[derive(Debug)]
struct Inner {
    table: SyncTable,
    config: Option<(u64, String)>,
}

/// A copy of the active's table for a standby, with the revision it is at.
struct Snapshot {
    items: Vec<SyncEntry>,
    revision: u64,
}

/// The active's replicated table and the broadcast of its changes. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SyncPublisher {
    inner: Arc<Mutex<Inner>>,
    tx: broadcast::Sender<SyncFrame>,
}

impl SyncPublisher {
    /// A publisher over `table` (the standby's table when it takes over); `buffer` changes may
    /// be in flight per standby before it is resynchronized with a snapshot.
    #[must_use]
    pub fn new(table: SyncTable, buffer: usize) -> Self {
        let (tx, _) = broadcast::channel(buffer.max(16));
        Self {
            inner: Arc::new(Mutex::new(Inner {
                table,
                config: None,
            })),
            tx,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Creates or changes `key` and streams it to the standby.
    pub fn upsert(&self, key: Vec<u8>, value: Vec<u8>) {
        let mut g = self.lock();
        let e = g.table.upsert(key, value);
        let _ = self.tx.send(SyncFrame::Upsert {
            key: e.key,
            rev: e.rev,
            value: e.value.unwrap_or_default(),
        });
    }

    /// Deletes `key` and streams the delete to the standby.
    pub fn delete(&self, key: Vec<u8>) {
        let mut g = self.lock();
        let e = g.table.delete(key);
        let _ = self.tx.send(SyncFrame::Delete {
            key: e.key,
            rev: e.rev,
        });
    }

    /// Pushes an activated configuration to the standby (and to any that joins later).
    pub fn push_config(&self, version: u64, toml: String) {
        let mut g = self.lock();
        g.config = Some((version, toml.clone()));
        let _ = self.tx.send(SyncFrame::ConfigPush { version, toml });
    }

    /// Merges entries received from a peer (split-brain exchange) into the table.
    pub fn merge(&self, entries: Vec<SyncEntry>) -> usize {
        self.lock().table.merge(entries)
    }

    /// A copy of the table.
    #[must_use]
    pub fn table(&self) -> SyncTable {
        self.lock().table.clone()
    }

    /// Dialogs (live keys) in the table.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().table.len()
    }

    /// Whether `key` is live in the table.
    #[must_use]
    pub fn contains(&self, key: &[u8]) -> bool {
        self.lock().table.get(key).is_some()
    }

    /// The value of `key`, if live in the table.
    #[must_use]
    pub fn value(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.lock().table.get(key).map(<[u8]>::to_vec)
    }

    /// Whether the table holds no live key.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The table's revision (see [`SyncTable::revision`]).
    #[must_use]
    pub fn revision(&self) -> u64 {
        self.lock().table.revision()
    }

    /// The table (with its revision), the configuration and a receiver of the changes after
    /// them, taken together.
    fn subscribe(
        &self,
    ) -> (
        Snapshot,
        Option<(u64, String)>,
        broadcast::Receiver<SyncFrame>,
    ) {
        let g = self.lock();
        (
            Snapshot {
                items: g.table.snapshot(),
                revision: g.table.revision(),
            },
            g.config.clone(),
            self.tx.subscribe(),
        )
    }
}

/// Accepts the standby on `listener` forever, serving it from `publisher`; everyone else is
/// refused (see the module docs). `epoch` goes in the Hello.
///
/// # Errors
/// Only if accepting fails for good; a failing connection is counted, logged and dropped.
pub async fn serve_sync(
    listener: TcpListener,
    publisher: SyncPublisher,
    ctx: Arc<SyncContext>,
    epoch: u64,
) -> std::io::Result<()> {
    let pending = Arc::new(Semaphore::new(MAX_PENDING));
    // The id of the established session; a newer one replaces it.
    let (current, _) = watch::channel(0u64);
    let current = Arc::new(current);
    let mut next_id = 0u64;
    loop {
        let (stream, from) = listener.accept().await?;
        if !ctx.is_peer_ip(from.ip()) {
            ctx.refuse(from, Refusal::Address, &"closed at once");
            drop(stream);
            continue;
        }
        let Ok(permit) = pending.clone().try_acquire_owned() else {
            ctx.refuse(from, Refusal::Busy, &"closed at once");
            drop(stream);
            continue;
        };
        next_id += 1;
        let id = next_id;
        let (p, ctx, current) = (publisher.clone(), ctx.clone(), current.clone());
        tokio::spawn(async move {
            let opened =
                tokio::time::timeout(HANDSHAKE_TIMEOUT, accept(framed(stream), from, &ctx))
                    .await
                    .unwrap_or(Err(SyncError::Timeout("handshake")));
            drop(permit);
            let (channel, exchange) = match opened {
                Ok(x) => x,
                Err(e) => {
                    ctx.refuse(from, Refusal::of(&e, true), &e);
                    return;
                }
            };
            ctx.counters.sessions.fetch_add(1, Ordering::Relaxed);
            if *current.borrow() != 0 {
                ctx.counters.replaced.fetch_add(1, Ordering::Relaxed);
                info!(%from, "standby reconnected: the older sync session is closed");
            }
            current.send_replace(id);
            let mut replaced = current.subscribe();
            let served = tokio::select! {
                r = serve_session(channel, exchange, p, &ctx, epoch) => r,
                _ = replaced.wait_for(|cur| *cur != id) => Ok(()),
            };
            current.send_if_modified(|cur| {
                let ended = *cur == id;
                if ended {
                    *cur = 0;
                }
                ended
            });
            match served {
                Ok(()) => debug!(%from, "sync session closed"),
                // The connection failed (the standby died, the network broke): not a refusal.
                Err(e @ SyncError::Io(_)) => warn!(%from, error = %e, "sync session failed"),
                Err(e) => ctx.refuse(from, Refusal::of(&e, false), &e),
            }
        });
    }
}

/// The active's side of the handshake, then the standby's Hello: a session with the
/// configured peer, and whether it asks for a table exchange.
async fn accept(
    mut conn: Conn,
    from: SocketAddr,
    ctx: &SyncContext,
) -> Result<(Channel, bool), SyncError> {
    let first = read_handshake(&mut conn).await?;
    let (session, answer) = Responder::respond(&ctx.psk, os_seed(), &first)?;
    conn.send(Bytes::from(answer)).await?;
    let mut channel = Channel::new(conn, session, from);
    match channel.recv().await? {
        Some(SyncFrame::Hello { node, exchange, .. }) if node == ctx.peer => {
            Ok((channel, exchange))
        }
        Some(SyncFrame::Hello { node, .. }) => Err(SyncError::WrongNode(node)),
        Some(_) => Err(SyncError::Protocol("first frame is not Hello")),
        None => Err(SyncError::Protocol("closed before Hello")),
    }
}

async fn serve_session(
    mut ch: Channel,
    exchange: bool,
    publisher: SyncPublisher,
    ctx: &SyncContext,
    epoch: u64,
) -> Result<(), SyncError> {
    info!(peer = %ctx.peer, from = %ch.peer, exchange, "standby joined the sync channel");
    if exchange {
        let mut merged = 0;
        loop {
            match ch.recv().await? {
                Some(SyncFrame::Snapshot { items, last }) => {
                    merged += publisher.merge(ctx.checked(ch.peer, items));
                    if last {
                        break;
                    }
                }
                _ => {
                    return Err(SyncError::Protocol(
                        "expected the peer's Snapshot after an exchange Hello",
                    ))
                }
            }
        }
        info!(merged, "merged the peer's table (split-brain exchange)");
    }
    let (snapshot, config, mut rx) = publisher.subscribe();
    let config_version = config.as_ref().map_or(0, |c| c.0);
    ch.send(&SyncFrame::Hello {
        node: ctx.node,
        epoch,
        config_version,
        exchange: false,
    })
    .await?;
    let streamed = &ctx.counters.streamed_revision;
    ch.send_snapshot(snapshot.items).await?;
    streamed.fetch_max(snapshot.revision, Ordering::Relaxed);
    if let Some((version, toml)) = config {
        ch.send(&SyncFrame::ConfigPush { version, toml }).await?;
    }
    let resync = |rx: &mut broadcast::Receiver<SyncFrame>| {
        ctx.counters.resyncs.fetch_add(1, Ordering::Relaxed);
        let (snapshot, _, fresh) = publisher.subscribe();
        *rx = fresh;
        snapshot
    };
    loop {
        tokio::select! {
            change = rx.recv() => match change {
                Ok(frame) => {
                    // The changes already queued go in the same write (one flush, one
                    // syscall, one wake-up of the standby for a burst of them), bounded.
                    let mut fed = frame_revision(&frame);
                    ch.feed(&frame).await?;
                    let mut lagged = false;
                    for _ in 0..STREAM_BATCH {
                        match rx.try_recv() {
                            Ok(frame) => {
                                fed = fed.max(frame_revision(&frame));
                                ch.feed(&frame).await?;
                            }
                            Err(broadcast::error::TryRecvError::Lagged(_)) => {
                                lagged = true;
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    SinkExt::<Bytes>::flush(&mut ch.conn).await?;
                    streamed.fetch_max(fed, Ordering::Relaxed);
                    if lagged {
                        warn!("standby fell behind: sending a fresh snapshot");
                        let snapshot = resync(&mut rx);
                        ch.send_snapshot(snapshot.items).await?;
                        streamed.fetch_max(snapshot.revision, Ordering::Relaxed);
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    warn!(lost = n, "standby fell behind: sending a fresh snapshot");
                    let snapshot = resync(&mut rx);
                    ch.send_snapshot(snapshot.items).await?;
                    streamed.fetch_max(snapshot.revision, Ordering::Relaxed);
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            },
            frame = ch.recv() => match frame? {
                Some(SyncFrame::Ack { received }) => debug!(received, "standby ack"),
                Some(_) => return Err(SyncError::Protocol("unexpected frame from the standby")),
                None => return Ok(()),
            },
        }
    }
}

/// The table revision a streamed frame carries (0 for frames that carry none).
fn frame_revision(frame: &SyncFrame) -> u64 {
    match frame {
        SyncFrame::Upsert { rev, .. } | SyncFrame::Delete { rev, .. } => *rev,
        _ => 0,
    }
}

/// What the sync client reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncEvent {
    /// A complete snapshot was applied: the table is synchronized (also after a resync).
    Synchronized {
        /// Live keys in the table.
        entries: usize,
    },
    /// An established session ended because the active closed it or its kernel reset it
    /// (end of stream, or a connection error): what a peer whose process died looks like
    /// from here, at once. Not sent when this side closes the session (a bad frame, a timeout)
    /// nor when a connection cannot be made. Feed it to the heartbeat task as
    /// [`super::Command::PeerLinkLost`]: the machine decides what it means.
    LinkLost,
    /// A session with the active was established (it proved the key and named itself): its
    /// process runs. Feed it to the heartbeat task as [`super::Command::PeerLinkUp`].
    LinkUp,
    /// The active pushed a configuration.
    Config {
        /// Its version.
        version: u64,
        /// Its text.
        toml: String,
    },
}

/// Connects to the active's sync server at `addr` (from `ctx.local_ip`) and keeps `table` a
/// replica of the active's until the connection ends. With `exchange` (after a split brain)
/// it first sends its own table, which the active merges, so the replica received back is the
/// union. Whoever answers at `addr` must prove the shared key and be the configured peer, or
/// nothing is sent but the handshake's first message, and nothing is applied.
///
/// # Errors
/// Connection or protocol failures; the owner retries while it is standby.
pub async fn run_sync_client(
    addr: SocketAddr,
    table: Arc<Mutex<SyncTable>>,
    ctx: Arc<SyncContext>,
    epoch: u64,
    exchange: bool,
    events: mpsc::UnboundedSender<SyncEvent>,
) -> Result<(), SyncError> {
    let (addr, bind) = ctx.connect_plan(addr);
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(local) = bind {
        socket.bind(local)?;
    }
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(addr))
        .await
        .map_err(|_| SyncError::Timeout("connect"))??;
    let opened = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        connect(framed(stream), addr, &ctx, epoch, exchange),
    )
    .await
    .unwrap_or(Err(SyncError::Timeout("handshake")));
    let mut ch = match opened {
        Ok(ch) => ch,
        Err(e) => {
            if !matches!(e, SyncError::Io(_)) {
                ctx.refuse(addr, Refusal::of(&e, true), &e);
            }
            return Err(e);
        }
    };
    ctx.counters.sessions.fetch_add(1, Ordering::Relaxed);
    if exchange {
        let mine = table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .snapshot();
        ch.send_snapshot(mine).await?;
    }
    let hello = tokio::time::timeout(HANDSHAKE_TIMEOUT, ch.recv())
        .await
        .map_err(|_| SyncError::Timeout("the active's Hello"))??;
    match hello {
        Some(SyncFrame::Hello { node, epoch, .. }) if node == ctx.peer => {
            debug!(active = %node, active_epoch = epoch, "connected to the active's sync server");
            let _ = events.send(SyncEvent::LinkUp);
        }
        Some(SyncFrame::Hello { node, .. }) => {
            let e = SyncError::WrongNode(node);
            ctx.refuse(addr, Refusal::Node, &e);
            return Err(e);
        }
        _ => {
            let e = SyncError::Protocol("first frame is not Hello");
            ctx.refuse(addr, Refusal::Frame, &e);
            return Err(e);
        }
    }
    let result = apply_stream(&mut ch, &table, &ctx, &events).await;
    match &result {
        Ok(()) | Err(SyncError::Io(_)) => {
            let _ = events.send(SyncEvent::LinkLost);
        }
        Err(e) => ctx.refuse(addr, Refusal::of(e, false), e),
    }
    result
}

/// The standby's side of the handshake, then its Hello.
async fn connect(
    mut conn: Conn,
    addr: SocketAddr,
    ctx: &SyncContext,
    epoch: u64,
    exchange: bool,
) -> Result<Channel, SyncError> {
    let (initiator, first) = Initiator::start(&ctx.psk, os_seed())?;
    conn.send(Bytes::from(first)).await?;
    let answer = read_handshake(&mut conn).await?;
    let session = initiator.finish(&answer)?;
    let mut ch = Channel::new(conn, session, addr);
    ch.send(&SyncFrame::Hello {
        node: ctx.node,
        epoch,
        config_version: 0,
        exchange,
    })
    .await?;
    Ok(ch)
}

async fn apply_stream(
    ch: &mut Channel,
    table: &Arc<Mutex<SyncTable>>,
    ctx: &SyncContext,
    events: &mpsc::UnboundedSender<SyncEvent>,
) -> Result<(), SyncError> {
    let mut staging: Vec<SyncEntry> = Vec::new();
    let mut received: u64 = 1;
    while let Some(frame) = ch.recv().await? {
        received += 1;
        let ack = match frame {
            SyncFrame::Snapshot { items, last } => {
                staging.extend(ctx.checked(ch.peer, items));
                if last {
                    let mut t = table
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    t.replace(std::mem::take(&mut staging));
                    let entries = t.len();
                    info!(entries, "synchronized");
                    let _ = events.send(SyncEvent::Synchronized { entries });
                }
                last
            }
            SyncFrame::Upsert { key, rev, value } => {
                match (ctx.check)(&key, &value) {
                    Ok(()) => {
                        table
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .apply(SyncEntry {
                                key,
                                rev,
                                value: Some(value),
                            });
                    }
                    Err(why) => ctx.invalid(ch.peer, &why),
                }
                false
            }
            SyncFrame::Delete { key, rev } => {
                table
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .apply(SyncEntry {
                        key,
                        rev,
                        value: None,
                    });
                false
            }
            SyncFrame::ConfigPush { version, toml } => {
                let _ = events.send(SyncEvent::Config { version, toml });
                true
            }
            SyncFrame::Hello { .. } | SyncFrame::Ack { .. } => {
                return Err(SyncError::Protocol("unexpected frame from the active"));
            }
        };
        if ack {
            ch.send(&SyncFrame::Ack { received }).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{PeerSettings, PeerType};

    fn settings(a: &[&str], b: &[&str]) -> RedundancySettings {
        let peer = |name: &str, t, d: &[&str]| PeerSettings {
            name: name.into(),
            peer_type: t,
            destinations: d.iter().map(|s| s.parse().expect("address")).collect(),
        };
        RedundancySettings {
            shared_key: "sync-unit-test-key-0123456789".into(),
            peers: vec![
                peer("a", PeerType::Primary, a),
                peer("b", PeerType::Secondary, b),
            ],
            ..RedundancySettings::default()
        }
    }

    fn context(config: &RedundancySettings, local: &str) -> SyncContext {
        SyncContext::new(config, local, Arc::new(|_: &[u8], _: &[u8]| Ok(()))).expect("valid")
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn the_peer_is_known_by_its_addresses_of_either_family() {
        let c = settings(
            &["[fd00::1]:9090", "10.0.0.1:9090"],
            &["[fd00::2]:9090", "[::ffff:10.0.0.2]:9090"],
        );
        let active = context(&c, "a");
        assert_eq!(active.peer_ips, vec![ip("fd00::2"), ip("10.0.0.2")]);
        assert_eq!(active.local_ip, ip("fd00::1"));
        for peer in ["fd00::2", "10.0.0.2", "::ffff:10.0.0.2"] {
            assert!(active.is_peer_ip(ip(peer)), "{peer}");
        }
        for stranger in ["fd00::9", "fd00::1", "10.0.0.9", "::ffff:10.0.0.9", "::1"] {
            assert!(!active.is_peer_ip(ip(stranger)), "{stranger}");
        }
        // Two paths on one IP: listed once.
        let c = settings(
            &["[fd00::1]:9090", "[fd00::1]:9091"],
            &["[fd00::2]:9090", "[fd00::2]:9091"],
        );
        assert_eq!(context(&c, "a").peer_ips, vec![ip("fd00::2")]);
    }

    #[test]
    fn the_standby_connects_from_its_own_address_of_the_same_family() {
        let standby = SyncContext {
            local_ip: ip("fd00::2"),
            ..context(&settings(&["[fd00::1]:9090"], &["[fd00::2]:9090"]), "b")
        };
        let sa = |s: &str| -> SocketAddr { s.parse().expect("address") };
        assert_eq!(
            standby.connect_plan(sa("[fd00::1]:1988")),
            (sa("[fd00::1]:1988"), Some(sa("[fd00::2]:0")))
        );
        assert_eq!(
            standby.connect_plan(sa("10.0.0.1:1988")),
            (sa("10.0.0.1:1988"), None),
            "no address of that family to bind"
        );
        let v4 = context(&settings(&["10.0.0.1:9090"], &["10.0.0.2:9090"]), "b");
        assert_eq!(
            v4.connect_plan(sa("[::ffff:10.0.0.1]:1988")),
            (sa("10.0.0.1:1988"), Some(sa("10.0.0.2:0"))),
            "a mapped address is reached over IPv4"
        );
    }
}
