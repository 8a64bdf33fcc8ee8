//! The media relay: one forwarding thread that owns every media socket and asks the media
//! table ([`sbc_proto::media::MediaTable`]) where each packet goes. RTP never crosses a worker
//! queue or a SIP lock: the engines only open, update and close sessions in the shared table.
//!
//! Every port of every `steering-pool` (RTP and RTCP) is bound when the relay starts, so a port
//! another process holds is a clear error at start (or at a takeover, which then retries as
//! the SIP interfaces do), never a silent call without media; a planned switchover's release
//! closes them all. One `epoll` (mio) watches them; a readable socket is drained up to
//! [`BATCH`] datagrams at a time into one stack buffer, each forwarded with one `send_to` from
//! the other leg's socket: no allocation per packet.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token, Waker};
use tracing::{debug, warn};

use sbc_proto::engine::SharedMediaTable;
use sbc_proto::media::MediaEvent;

use crate::workers::lock;

/// Datagrams read from one socket before the others get their turn.
const BATCH: usize = 64;
/// The longest a datagram may be (larger ones are truncated by the kernel and dropped here).
const MAX_DATAGRAM: usize = 2048;
/// The token of the waker (ports are below 65,536).
const WAKE: Token = Token(usize::MAX);
/// The longest the thread sleeps without looking at the inactivity clock.
const TICK: Duration = Duration::from_millis(250);

/// One steering pool as the relay binds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PoolBinding {
    /// The realm (for messages).
    pub realm: String,
    /// The media address.
    pub address: IpAddr,
    /// The ports (RTP and RTCP).
    pub ports: RangeInclusive<u16>,
}

/// What the relay does with the table's events (the node routes them to the engines).
pub(crate) type EventSink = Arc<dyn Fn(MediaEvent) + Send + Sync>;

/// Counters of the relay itself (the table counts what it decides).
#[derive(Debug, Default)]
pub(crate) struct RelayCounters {
    /// Datagrams received.
    pub received: AtomicU64,
    /// Datagrams the kernel would not take (send buffer full, unreachable): dropped.
    pub send_errors: AtomicU64,
}

/// A running relay: its sockets are bound until [`MediaRelay::stop`].
pub(crate) struct MediaRelay {
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    thread: Option<thread::JoinHandle<()>>,
}

impl MediaRelay {
    /// Binds every port of `pools`, then starts the forwarding thread.
    ///
    /// # Errors
    /// A port cannot be bound (in use, or the address is not local): nothing stays bound.
    pub(crate) fn start(
        pools: &[PoolBinding],
        table: SharedMediaTable,
        events: EventSink,
        counters: Arc<RelayCounters>,
    ) -> anyhow::Result<Self> {
        let base = pools.iter().map(|p| *p.ports.start()).min().unwrap_or(0);
        let top = pools.iter().map(|p| *p.ports.end()).max().unwrap_or(0);
        let span = if pools.is_empty() {
            0
        } else {
            usize::from(top - base) + 1
        };
        let poll = Poll::new().context("creating the media relay's poller")?;
        let mut sockets: Vec<Option<UdpSocket>> = (0..span).map(|_| None).collect();
        for pool in pools {
            for port in pool.ports.clone() {
                let addr = SocketAddr::new(pool.address, port);
                let std = std::net::UdpSocket::bind(addr).with_context(|| {
                    format!(
                        "binding media port {addr} of realm {}'s steering-pool",
                        pool.realm
                    )
                })?;
                std.set_nonblocking(true)?;
                let mut sock = UdpSocket::from_std(std);
                poll.registry().register(
                    &mut sock,
                    Token(usize::from(port)),
                    Interest::READABLE,
                )?;
                sockets[usize::from(port - base)] = Some(sock);
            }
        }
        let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            let mut relay = Forwarder {
                poll,
                sockets,
                base,
                table,
                events,
                counters,
                stop,
            };
            thread::Builder::new()
                .name("media-relay".into())
                .spawn(move || relay.run())?
        };
        Ok(Self {
            stop,
            waker,
            thread: Some(thread),
        })
    }

    /// Stops the thread and closes every media socket (the ports are free when this returns).
    pub(crate) fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MediaRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
    }
}

/// The forwarding thread's state.
struct Forwarder {
    poll: Poll,
    /// By port - `base`.
    sockets: Vec<Option<UdpSocket>>,
    base: u16,
    table: SharedMediaTable,
    events: EventSink,
    counters: Arc<RelayCounters>,
    stop: Arc<AtomicBool>,
}

impl Forwarder {
    fn run(&mut self) {
        let mut events = Events::with_capacity(1024);
        // Sockets left readable after a full batch, served again before sleeping.
        let mut again: Vec<u16> = Vec::with_capacity(1024);
        let mut ready: Vec<u16> = Vec::with_capacity(1024);
        let mut table_events: Vec<MediaEvent> = Vec::with_capacity(64);
        let mut buf = [0u8; MAX_DATAGRAM];
        while !self.stop.load(Ordering::Acquire) {
            let now = Instant::now();
            let timeout = if again.is_empty() {
                let due = lock(&self.table).poll_timeout();
                due.map_or(TICK, |d| d.saturating_duration_since(now).min(TICK))
            } else {
                Duration::ZERO
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    warn!(error = %e, "media relay poll failed");
                    thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            ready.clear();
            ready.append(&mut again);
            ready.extend(
                events
                    .iter()
                    .filter(|e| e.token() != WAKE)
                    .filter_map(|e| u16::try_from(e.token().0).ok()),
            );
            for &port in &ready {
                if self.drain(port, &mut buf) {
                    again.push(port);
                }
            }
            let now = Instant::now();
            {
                let mut t = lock(&self.table);
                if t.poll_timeout().is_some_and(|d| d <= now) {
                    t.handle_timeout(now);
                }
                while let Some(e) = t.poll_event() {
                    table_events.push(e);
                }
            }
            // Outside the table's lock: the engines take it while they handle the event.
            for e in table_events.drain(..) {
                (self.events)(e);
            }
        }
    }

    /// Reads and forwards up to [`BATCH`] datagrams from `port`; returns whether more may be
    /// waiting.
    fn drain(&self, port: u16, buf: &mut [u8; MAX_DATAGRAM]) -> bool {
        let Some(sock) = self.socket(port) else {
            return false;
        };
        let now = Instant::now();
        let mut table = lock(&self.table);
        for _ in 0..BATCH {
            let (n, source) = match sock.recv_from(buf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // ICMP errors of earlier sends surface here (port unreachable): go on.
                    debug!(port, error = %e, "media receive error");
                    continue;
                }
            };
            self.counters.received.fetch_add(1, Ordering::Relaxed);
            let packet = &buf[..n];
            let Ok(fwd) = table.handle_packet(now, port, source, packet) else {
                continue;
            };
            if let Some(out) = self.socket(fwd.from_port) {
                if out.send_to(packet, fwd.to).is_err() {
                    self.counters.send_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        true
    }

    fn socket(&self, port: u16) -> Option<&UdpSocket> {
        let i = usize::from(port.checked_sub(self.base)?);
        self.sockets.get(i).and_then(Option::as_ref)
    }
}
