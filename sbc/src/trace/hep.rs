//! HEPv3 to the capture server (`capture-agent`): over UDP, one datagram per message sent by
//! the trace thread; over TCP, each drain of the trace queue as one buffer of packets, through
//! a bounded queue, to a sender thread that connects, writes with a deadline, and reconnects at
//! most once a second. Either way a server that is down, slow or silent costs counted drops,
//! never a wait on the trace thread; while the TCP server is down nothing is even encoded.

use std::collections::VecDeque;
use std::io::Write as _;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use sbc_proto::trace::hep::{encode_event, encode_into, HepPacket, PayloadType, Transport};

use super::Item;
use tracing::debug;

/// How HEP travels to the capture server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HepTransport {
    /// One datagram per message.
    Udp,
    /// A stream of packets over one connection.
    Tcp,
}

/// Where HEP goes and how it is stamped.
#[derive(Clone, PartialEq, Eq)]
pub struct HepSettings {
    /// The capture server.
    pub server: SocketAddr,
    /// UDP or TCP.
    pub transport: HepTransport,
    /// The capture agent id.
    pub capture_id: u32,
    /// The HEP password (sent in clear by the protocol: an identifier); empty: none.
    pub password: String,
    /// Packets waiting for the TCP connection at most.
    pub queue_size: usize,
    /// Whether the media relay's RTCP reports are sent too.
    pub rtcp: bool,
}

impl std::fmt::Debug for HepSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HepSettings")
            .field("server", &self.server)
            .field("transport", &self.transport)
            .field("capture_id", &self.capture_id)
            .field(
                "password",
                &if self.password.is_empty() {
                    ""
                } else {
                    "********"
                },
            )
            .field("queue_size", &self.queue_size)
            .field("rtcp", &self.rtcp)
            .finish()
    }
}

/// Packets sent and dropped.
#[derive(Debug, Default)]
pub(super) struct HepCounters {
    pub(super) sent: AtomicU64,
    pub(super) dropped: AtomicU64,
}

/// Where the trace thread sends HEP.
pub(super) struct HepSink {
    settings: HepSettings,
    out: Out,
    counters: Arc<HepCounters>,
    /// One packet's encoding, reused.
    buf: Vec<u8>,
    /// Over UDP, when the server last answered "port unreachable" (ICMP, seen as a send error
    /// on the connected socket).
    refused_at: Option<Instant>,
    /// Where each packet of `buf` ends (UDP).
    ends: Vec<usize>,
}

/// What the TCP sender shares with the trace thread.
#[derive(Debug, Default)]
struct TcpState {
    /// No connection now (refused, lost, or not made yet after one was): the trace thread
    /// counts packets as dropped without encoding them.
    down: AtomicBool,
    /// Packets handed to the sender and not yet written or dropped.
    pending: AtomicUsize,
}

enum Out {
    Udp(UdpSocket),
    Tcp {
        /// Batches of packets, each one buffer of concatenated HEP packets and its count.
        tx: SyncSender<(Vec<u8>, usize)>,
        state: Arc<TcpState>,
    },
}

/// A TCP write not done within this drops the connection.
const TCP_WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// A connection attempt not done within this fails.
const TCP_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// After a failed connection or write, the next attempt waits this long.
const TCP_RETRY: Duration = Duration::from_secs(1);
/// Batches waiting for the TCP sender at most (each holds one drain of the trace queue).
const TCP_BATCHES: usize = 64;

impl HepSink {
    /// A sink for `settings`: a UDP socket of the server's family, or the TCP sender thread.
    pub(super) fn new(settings: &HepSettings, counters: Arc<HepCounters>) -> std::io::Result<Self> {
        let out = match settings.transport {
            HepTransport::Udp => {
                let any: SocketAddr = if settings.server.is_ipv4() {
                    ([0, 0, 0, 0], 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                let socket = UdpSocket::bind(any)?;
                // Connected: no route lookup per datagram, and a server that is down says so
                // (ICMP port unreachable comes back as an error of a later send: a counted drop).
                socket.connect(settings.server)?;
                socket.set_nonblocking(true)?;
                Out::Udp(socket)
            }
            HepTransport::Tcp => {
                let (tx, rx) = mpsc::sync_channel(TCP_BATCHES);
                let state = Arc::new(TcpState::default());
                let (server, c, st) = (settings.server, counters.clone(), state.clone());
                thread::Builder::new()
                    .name("hep-tcp".into())
                    .spawn(move || tcp_sender(server, &rx, &c, &st))?;
                Out::Tcp { tx, state }
            }
        };
        Ok(Self {
            settings: settings.clone(),
            out,
            counters,
            buf: Vec::with_capacity(4096),
            refused_at: None,
            ends: Vec::new(),
        })
    }

    /// Encodes and sends what one drain of the trace queue took: SIP messages, and RTCP
    /// reports when `rtcp` is on.
    pub(super) fn send_batch(&mut self, items: &VecDeque<Item>) {
        let wanted = items
            .iter()
            .filter(|i| self.settings.rtcp || matches!(i, Item::Sip(_)))
            .count();
        match &self.out {
            Out::Udp(socket) => {
                // Every packet into one buffer, then out in groups of many per system
                // call.
                self.buf.clear();
                self.ends.clear();
                for item in items {
                    if encode(&self.settings, item, &mut self.buf) {
                        self.ends.push(self.buf.len());
                    }
                }
                let sent = send_datagrams(socket, &self.buf, &self.ends, &mut self.refused_at);
                self.counters.sent.fetch_add(sent as u64, Ordering::Relaxed);
                self.counters
                    .dropped
                    .fetch_add((wanted - sent) as u64, Ordering::Relaxed);
            }
            Out::Tcp { tx, state } => {
                let pending = state.pending.load(Ordering::Relaxed);
                if state.down.load(Ordering::Relaxed) || pending + wanted > self.settings.queue_size
                {
                    self.counters
                        .dropped
                        .fetch_add(wanted as u64, Ordering::Relaxed);
                    return;
                }
                let mut stream = Vec::with_capacity(items.len() * 1024);
                let mut count = 0;
                for item in items {
                    if encode(&self.settings, item, &mut stream) {
                        count += 1;
                    }
                }
                self.counters
                    .dropped
                    .fetch_add((wanted - count) as u64, Ordering::Relaxed);
                if count == 0 {
                    return;
                }
                state.pending.fetch_add(count, Ordering::Relaxed);
                if let Err(TrySendError::Full((_, n)) | TrySendError::Disconnected((_, n))) =
                    tx.try_send((stream, count))
                {
                    state.pending.fetch_sub(n, Ordering::Relaxed);
                    self.counters.dropped.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
        }
    }
}

impl HepSink {
    /// Whether the capture server takes packets now: over TCP, a connection (or none tried
    /// yet); over UDP, no "port unreachable" in the last [`TCP_RETRY`].
    pub(super) fn is_up(&self) -> bool {
        match &self.out {
            Out::Udp(_) => self.refused_at.is_none_or(|at| at.elapsed() >= TCP_RETRY),
            Out::Tcp { state, .. } => !state.down.load(Ordering::Relaxed),
        }
    }
}

/// Sends the datagrams of `buf` (each ending at the next of `ends`) on the connected `socket`,
/// many per system call; returns how many were sent. A "port unreachable" marks
/// `refused_at`; what is not sent is not retried (the caller counts it as dropped).
fn send_datagrams(
    socket: &UdpSocket,
    buf: &[u8],
    ends: &[usize],
    refused_at: &mut Option<Instant>,
) -> usize {
    let (sent, error) = crate::udp_batch::send_datagrams(socket, buf, ends);
    if let Some(e) = error {
        debug!(error = %e, "HEP datagrams not sent");
        if e == nix::errno::Errno::ECONNREFUSED {
            *refused_at = Some(Instant::now());
        }
    }
    sent
}

/// Appends `item` as one HEP packet to `out`; `false` when it is not sent (RTCP while `rtcp`
/// is off, or a message too long for HEP; `out` is then as it was).
fn encode(s: &HepSettings, item: &Item, out: &mut Vec<u8>) -> bool {
    let auth = (!s.password.is_empty()).then_some(s.password.as_bytes());
    match item {
        Item::Sip(event) => encode_event(event, s.capture_id, auth, out).is_ok(),
        Item::Rtcp(r) if s.rtcp => encode_into(
            &HepPacket {
                src: r.src,
                dst: r.dst,
                transport: Transport::Udp,
                time_secs: u32::try_from(r.at_unix_us / 1_000_000).unwrap_or(u32::MAX),
                time_micros: u32::try_from(r.at_unix_us % 1_000_000).unwrap_or(0),
                payload_type: PayloadType::Rtcp,
                capture_id: s.capture_id,
                auth_key: auth,
                correlation_id: r.correlation.as_deref().map(str::as_bytes),
                payload: &r.bytes,
            },
            out,
        )
        .is_ok(),
        Item::Rtcp(_) => false,
    }
}

/// The TCP sender: one connection, made again at most once per [`TCP_RETRY`] (on its own
/// clock, so it comes back without traffic); while there is none the trace thread drops
/// packets before encoding them. Ends when its sink is replaced or dropped.
fn tcp_sender(
    server: SocketAddr,
    rx: &Receiver<(Vec<u8>, usize)>,
    counters: &HepCounters,
    state: &TcpState,
) {
    let mut conn: Option<TcpStream> = None;
    let mut retry_at = Instant::now();
    loop {
        if conn.is_none() && Instant::now() >= retry_at {
            match TcpStream::connect_timeout(&server, TCP_CONNECT_TIMEOUT) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    let _ = s.set_write_timeout(Some(TCP_WRITE_TIMEOUT));
                    conn = Some(s);
                    state.down.store(false, Ordering::Relaxed);
                }
                Err(e) => {
                    debug!(%server, error = %e, "HEP capture server not reached");
                    state.down.store(true, Ordering::Relaxed);
                    retry_at = Instant::now() + TCP_RETRY;
                }
            }
        }
        let (stream, count) = match rx.recv_timeout(TCP_RETRY) {
            Ok(batch) => batch,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        state.pending.fetch_sub(count, Ordering::Relaxed);
        let Some(c) = conn.as_mut() else {
            counters.dropped.fetch_add(count as u64, Ordering::Relaxed);
            continue;
        };
        match c.write_all(&stream) {
            Ok(()) => {
                counters.sent.fetch_add(count as u64, Ordering::Relaxed);
            }
            Err(e) => {
                debug!(%server, error = %e, "HEP connection lost");
                conn = None;
                state.down.store(true, Ordering::Relaxed);
                retry_at = Instant::now() + TCP_RETRY;
                counters.dropped.fetch_add(count as u64, Ordering::Relaxed);
            }
        }
    }
}
