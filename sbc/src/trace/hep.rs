//! HEPv3 to the capture server (`capture-agent`): over UDP, one datagram per message sent at
//! once from the trace thread; over TCP, a bounded queue to a sender thread that connects,
//! writes with a deadline, and reconnects at most once a second. Either way a server that is
//! down, slow or silent costs counted drops, never a wait on the trace thread.

use std::io::Write as _;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use sbc_proto::engine::TraceEvent;
use sbc_proto::trace::hep::{encode_event, encode_into, HepPacket, PayloadType, Transport};

use super::RtcpCapture;
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
}

enum Out {
    Udp(UdpSocket),
    Tcp(SyncSender<Vec<u8>>),
}

/// A TCP write not done within this drops the connection.
const TCP_WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// A connection attempt not done within this fails.
const TCP_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// After a failed connection or write, the next attempt waits this long.
const TCP_RETRY: Duration = Duration::from_secs(1);

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
                socket.set_nonblocking(true)?;
                Out::Udp(socket)
            }
            HepTransport::Tcp => {
                let (tx, rx) = mpsc::sync_channel(settings.queue_size.max(1));
                let (server, c) = (settings.server, counters.clone());
                thread::Builder::new()
                    .name("hep-tcp".into())
                    .spawn(move || tcp_sender(server, &rx, &c))?;
                Out::Tcp(tx)
            }
        };
        Ok(Self {
            settings: settings.clone(),
            out,
            counters,
        })
    }

    /// Encodes and sends one traced message.
    pub(super) fn send(&self, event: &TraceEvent) {
        let s = &self.settings;
        let auth = (!s.password.is_empty()).then_some(s.password.as_bytes());
        let mut packet = Vec::with_capacity(event.bytes.len() + 160);
        if encode_event(event, s.capture_id, auth, &mut packet).is_err() {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.out(packet);
    }

    /// Encodes and sends one RTCP report the relay forwarded.
    pub(super) fn send_rtcp(&self, r: &RtcpCapture) {
        let s = &self.settings;
        if !s.rtcp {
            return;
        }
        let mut packet = Vec::with_capacity(r.bytes.len() + 160);
        let encoded = encode_into(
            &HepPacket {
                src: r.src,
                dst: r.dst,
                transport: Transport::Udp,
                time_secs: u32::try_from(r.at_unix_us / 1_000_000).unwrap_or(u32::MAX),
                time_micros: u32::try_from(r.at_unix_us % 1_000_000).unwrap_or(0),
                payload_type: PayloadType::Rtcp,
                capture_id: s.capture_id,
                auth_key: (!s.password.is_empty()).then_some(s.password.as_bytes()),
                correlation_id: r.correlation.as_deref().map(str::as_bytes),
                payload: &r.bytes,
            },
            &mut packet,
        );
        if encoded.is_err() {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.out(packet);
    }

    fn out(&self, packet: Vec<u8>) {
        let s = &self.settings;
        match &self.out {
            Out::Udp(socket) => match socket.send_to(&packet, s.server) {
                Ok(_) => {
                    self.counters.sent.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    debug!(error = %e, "HEP datagram not sent");
                    self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                }
            },
            Out::Tcp(tx) => match tx.try_send(packet) {
                Ok(()) => {}
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                    self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                }
            },
        }
    }
}

/// The TCP sender: one connection, re-made at most once per [`TCP_RETRY`]; packets that come
/// while there is none are dropped and counted. Ends when its sink is replaced or dropped.
fn tcp_sender(server: SocketAddr, rx: &Receiver<Vec<u8>>, counters: &HepCounters) {
    let mut conn: Option<TcpStream> = None;
    let mut retry_at = Instant::now();
    while let Ok(packet) = rx.recv() {
        if conn.is_none() && Instant::now() >= retry_at {
            match TcpStream::connect_timeout(&server, TCP_CONNECT_TIMEOUT) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    let _ = s.set_write_timeout(Some(TCP_WRITE_TIMEOUT));
                    conn = Some(s);
                }
                Err(e) => {
                    debug!(%server, error = %e, "HEP capture server not reached");
                    retry_at = Instant::now() + TCP_RETRY;
                }
            }
        }
        let Some(stream) = conn.as_mut() else {
            counters.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        match stream.write_all(&packet) {
            Ok(()) => {
                counters.sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                debug!(%server, error = %e, "HEP connection lost");
                conn = None;
                retry_at = Instant::now() + TCP_RETRY;
                counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
