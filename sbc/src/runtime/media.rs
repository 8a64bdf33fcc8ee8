//! The media relay: one forwarding thread that owns every media socket and asks the media
//! table ([`sbc_proto::media::MediaTable`]) where each packet goes. RTP never crosses a worker
//! queue or a SIP lock: the engines only open, update and close sessions in the shared table.
//!
//! Every port of every `steering-pool` (RTP and RTCP) is bound when the relay starts, so a port
//! another process holds is a clear error at start (or at a takeover, which then retries as
//! the SIP interfaces do), never a silent call without media; a planned switchover's release
//! closes them all. One `epoll` (mio) watches them. A readable socket is read with one
//! `recvmmsg` of up to [`RECV_BATCH`] datagrams (`quinn-udp`, with UDP GRO where the kernel
//! offers it): fewer than that means it is drained, so no extra read ends in `EAGAIN`. Each
//! datagram goes out of the other leg's socket with one `sendmsg`; consecutive datagrams of one
//! GRO buffer that go to the same place leave in one GSO `sendmsg`. The buffers are allocated
//! once per thread: nothing is allocated per packet.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use std::io::IoSliceMut;

use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token, Waker};
use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use tracing::{debug, warn};

use sbc_proto::engine::SharedMediaTable;
use sbc_proto::media::{Forward, MediaEvent, MediaTable};

use crate::trace::{RtcpCapture, TraceHub};
use crate::workers::lock;

/// Datagrams read from one socket with one `recvmmsg` (quinn-udp's batch on Linux); after a
/// full batch the socket waits for the others' turn.
const RECV_BATCH: usize = quinn_udp::BATCH_SIZE;
/// Room for one datagram in a receive buffer (more with GRO: see `slot_size`).
const MAX_DATAGRAM: usize = 2048;
/// The token of the waker (ports are below 65,536).
const WAKE: Token = Token(usize::MAX);
/// The longest the thread sleeps without looking at the inactivity clock.
const TICK: Duration = Duration::from_millis(250);

/// One steering pool as the relay binds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolBinding {
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
        trace: Arc<TraceHub>,
    ) -> anyhow::Result<Self> {
        let base = pools.iter().map(|p| *p.ports.start()).min().unwrap_or(0);
        let top = pools.iter().map(|p| *p.ports.end()).max().unwrap_or(0);
        let span = if pools.is_empty() {
            0
        } else {
            usize::from(top - base) + 1
        };
        let poll = Poll::new().context("creating the media relay's poller")?;
        let mut sockets: Vec<Option<(UdpSocket, UdpSocketState)>> =
            (0..span).map(|_| None).collect();
        let mut addresses = vec![IpAddr::from([0, 0, 0, 0]); span];
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
                let state = UdpSocketState::new(UdpSockRef::from(&std))?;
                let mut sock = UdpSocket::from_std(std);
                poll.registry().register(
                    &mut sock,
                    Token(usize::from(port)),
                    Interest::READABLE,
                )?;
                sockets[usize::from(port - base)] = Some((sock, state));
                addresses[usize::from(port - base)] = pool.address;
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
                trace,
                addresses,
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
    sockets: Vec<Option<(UdpSocket, UdpSocketState)>>,
    base: u16,
    table: SharedMediaTable,
    events: EventSink,
    counters: Arc<RelayCounters>,
    stop: Arc<AtomicBool>,
    /// Where forwarded RTCP goes while HEP capture wants it.
    trace: Arc<TraceHub>,
    /// Each port's media address, by port - `base`.
    addresses: Vec<IpAddr>,
}

impl Forwarder {
    fn run(&mut self) {
        let mut events = Events::with_capacity(1024);
        // Sockets left readable after a full batch, served again before sleeping.
        let mut again: Vec<u16> = Vec::with_capacity(1024);
        let mut ready: Vec<u16> = Vec::with_capacity(1024);
        let mut table_events: Vec<MediaEvent> = Vec::with_capacity(64);
        // RECV_BATCH receive slots in one buffer, each large enough for a GRO batch.
        let slot = self.slot_size();
        let mut buf = vec![0u8; slot * RECV_BATCH];
        let mut meta = vec![RecvMeta::default(); RECV_BATCH];
        // The inactivity clock is looked at once per TICK (it scans every session), not at
        // every wakeup.
        let mut next_check = Instant::now();
        while !self.stop.load(Ordering::Acquire) {
            let now = Instant::now();
            let timeout = if again.is_empty() {
                next_check.saturating_duration_since(now)
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
                if self.drain(port, &mut buf, slot, &mut meta) {
                    again.push(port);
                }
            }
            let now = Instant::now();
            {
                let mut t = lock(&self.table);
                if now >= next_check {
                    if t.poll_timeout().is_some_and(|d| d <= now) {
                        t.handle_timeout(now);
                    }
                    next_check = now + TICK;
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

    /// The size of one receive slot: a datagram, or the most GRO puts in one buffer.
    fn slot_size(&self) -> usize {
        let gro = self
            .sockets
            .iter()
            .flatten()
            .map(|(_, st)| st.gro_segments())
            .max()
            .unwrap_or(1);
        MAX_DATAGRAM * gro.max(1)
    }

    /// Reads what one `recvmmsg` gives from `port` and forwards it; returns whether more may
    /// be waiting (the batch was full).
    fn drain(&self, port: u16, buf: &mut [u8], slot: usize, meta: &mut [RecvMeta]) -> bool {
        let Some((sock, state)) = self.entry(port) else {
            return false;
        };
        let n = {
            let mut chunks = buf.chunks_mut(slot);
            let mut iovs: [IoSliceMut<'_>; RECV_BATCH] =
                std::array::from_fn(|_| IoSliceMut::new(chunks.next().unwrap_or_default()));
            match state.recv(UdpSockRef::from(sock), &mut iovs, meta) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => return true,
                Err(e) => {
                    // ICMP errors of earlier sends surface here (port unreachable): go on.
                    debug!(port, error = %e, "media receive error");
                    return true;
                }
            }
        };
        let now = Instant::now();
        let capture_rtcp = self.trace.wants_rtcp();
        let mut table = lock(&self.table);
        for (i, m) in meta.iter().enumerate().take(n) {
            let start = i * slot;
            let data = &buf[start..start + m.len.min(slot)];
            let stride = if m.stride == 0 { data.len() } else { m.stride }.max(1);
            // A run of consecutive datagrams (more than one only with GRO) that go to the same
            // place: sent together when the run ends.
            let mut run: Option<(Forward, usize, usize)> = None; // (where, first byte, count)
            for (k, d) in data.chunks(stride).enumerate() {
                self.counters.received.fetch_add(1, Ordering::Relaxed);
                let at = k * stride;
                let routed = table.handle_packet(now, port, m.addr, d);
                if capture_rtcp && routed.is_ok() {
                    self.capture_rtcp(&table, port, m.addr, d);
                }
                match (routed, run) {
                    (Ok(f), Some((g, first, count))) if f == g && d.len() == stride => {
                        run = Some((g, first, count + 1));
                    }
                    (Ok(f), _) => {
                        self.flush(run.take(), data, stride);
                        run = Some((f, at, 1));
                    }
                    (Err(_), _) => self.flush(run.take(), data, stride),
                }
            }
            self.flush(run, data, stride);
        }
        n == RECV_BATCH
    }

    /// Hands a forwarded RTCP report (only RTCP: RTP is never copied) to the trace.
    fn capture_rtcp(&self, table: &MediaTable, port: u16, source: SocketAddr, packet: &[u8]) {
        let Some(correlation) = table.rtcp_label(port, packet) else {
            return;
        };
        let local = port
            .checked_sub(self.base)
            .and_then(|i| self.addresses.get(usize::from(i)))
            .copied()
            .unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let at_unix_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        self.trace.offer_rtcp(RtcpCapture {
            at_unix_us,
            src: source,
            dst: SocketAddr::new(local, port),
            correlation,
            bytes: packet.to_vec(),
        });
    }

    /// Sends a run of `count` datagrams of `stride` bytes from `first` in `data` (one GSO send
    /// when there are several and the socket can).
    fn flush(&self, run: Option<(Forward, usize, usize)>, data: &[u8], stride: usize) {
        let Some((f, first, count)) = run else {
            return;
        };
        let Some((out, state)) = self.entry(f.from_port) else {
            return;
        };
        let end = (first + count * stride).min(data.len());
        let gso = count > 1 && state.max_gso_segments() >= count;
        let sent = if gso || count == 1 {
            state.try_send(
                UdpSockRef::from(out),
                &Transmit {
                    destination: f.to,
                    ecn: None,
                    contents: &data[first..end],
                    segment_size: gso.then_some(stride),
                    src_ip: None,
                },
            )
        } else {
            data[first..end].chunks(stride).try_for_each(|d| {
                state.try_send(
                    UdpSockRef::from(out),
                    &Transmit {
                        destination: f.to,
                        ecn: None,
                        contents: d,
                        segment_size: None,
                        src_ip: None,
                    },
                )
            })
        };
        if sent.is_err() {
            self.counters.send_errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn entry(&self, port: u16) -> Option<&(UdpSocket, UdpSocketState)> {
        let i = usize::from(port.checked_sub(self.base)?);
        self.sockets.get(i).and_then(Option::as_ref)
    }
}
