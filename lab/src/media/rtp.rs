//! The RTP load generator: for each call two endpoints on UDP sockets, A (the caller) and
//! B (the callee), each sending RTP to the relay address it was given for its leg and
//! receiving what the relay forwards from the other one.
//!
//! Every stream is G.711 µ-law shaped: version 2, payload type 0, 160 bytes of payload
//! (172-byte packets), one every 20 ms (50 packets/s per direction), its own random SSRC,
//! sequence number and timestamp start, both increasing by 1 and by 160 a packet. The first
//! 8 bytes of the payload are the send time (ns since the run's start, big-endian): sender
//! and receiver share the process clock, so the receiver measures one-way delay.
//!
//! A few threads (by default one per 250 calls, at most 4) each own some calls' sockets,
//! non-blocking, polled with mio; each thread sends its streams on one evenly staggered
//! schedule (stream `j` of `K` at `j × ptime / K` into each period) and reads whatever is
//! ready in between. Nothing is allocated per packet: the packet buffer, the receive buffer,
//! the per-stream duplicate bitmaps and delay histograms are all allocated before the first
//! packet.
//!
//! Per call and direction the [`RtpReport`] says: packets sent and received, lost (sent but
//! never received, each packet told by its sequence number), duplicates, reordered, packets
//! that were not the expected sender's (another SSRC: media crossed between calls), one-way
//! delay p50/p99/max, the start gap (first packet sent to first received), and the longest
//! interval without a received packet, with whether media was flowing again at the end
//! (`resumed`): what a failover test reads after the relay was replaced mid-run.
//!
//! ```no_run
//! # fn demo() -> std::io::Result<()> {
//! use std::time::Duration;
//! use sbc_lab::media::rtp::{self, CallEndpoints, MediaCall, RtpConfig};
//!
//! let eps = CallEndpoints::bind_many(10, "127.0.0.1".parse().unwrap())?;
//! // ... signal each call with eps[i].a_addr() and eps[i].b_addr() in the SDPs, learn the
//! // relay's address for each leg from the SDP each side got back ...
//! let relay_a = "127.0.0.1:30000".parse().unwrap();
//! let relay_b = "127.0.0.1:30002".parse().unwrap();
//! let calls: Vec<MediaCall> = eps
//!     .into_iter()
//!     .map(|endpoints| MediaCall { endpoints, a_relay: relay_a, b_relay: relay_b })
//!     .collect();
//! let cfg = RtpConfig { duration: Duration::from_secs(10), ..RtpConfig::default() };
//! let report = rtp::run(calls, &cfg)?;
//! eprint!("{}", report.summary());
//! # Ok(()) }
//! ```

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};
use serde::{Deserialize, Serialize};

/// RTP header without CSRCs or extension.
const HEADER: usize = 12;
/// The send time at the start of the payload.
const STAMP: usize = 8;
/// Payload type 0: PCMU.
const PT_PCMU: u8 = 0;
/// Largest datagram read.
const RECV_BUF: usize = 2048;
/// Datagrams read from one socket per readiness event before moving on (fairness).
const READ_BURST: usize = 256;
/// "Flowing at the end": the last packet sent arrived within this many packet times.
const RESUMED_PTIMES: u64 = 3;

/// The two endpoints of one call, bound and not yet sending.
#[derive(Debug)]
pub struct CallEndpoints {
    a: UdpSocket,
    b: UdpSocket,
    a_addr: SocketAddr,
    b_addr: SocketAddr,
}

impl CallEndpoints {
    /// Binds A and B on `ip`, each on an ephemeral port.
    ///
    /// # Errors
    /// If a socket cannot be bound (e.g. out of file descriptors: two per call).
    pub fn bind(ip: IpAddr) -> io::Result<Self> {
        let a = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        let b = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        Ok(Self {
            a_addr: a.local_addr()?,
            b_addr: b.local_addr()?,
            a,
            b,
        })
    }

    /// `n` calls' endpoints on `ip`.
    ///
    /// # Errors
    /// As [`CallEndpoints::bind`].
    pub fn bind_many(n: usize, ip: IpAddr) -> io::Result<Vec<Self>> {
        (0..n).map(|_| Self::bind(ip)).collect()
    }

    /// The caller's address (what its SDP names).
    #[must_use]
    pub fn a_addr(&self) -> SocketAddr {
        self.a_addr
    }

    /// The callee's address (what its SDP names).
    #[must_use]
    pub fn b_addr(&self) -> SocketAddr {
        self.b_addr
    }
}

/// One call ready for media: its endpoints and where each sends.
#[derive(Debug)]
pub struct MediaCall {
    /// A and B.
    pub endpoints: CallEndpoints,
    /// Where A sends: the relay's address for the caller's leg (from the SDP A received: the
    /// 200's, or rtpengine's `answer` reply).
    pub a_relay: SocketAddr,
    /// Where B sends: the relay's address for the callee's leg (from the INVITE's SDP, or
    /// rtpengine's `offer` reply).
    pub b_relay: SocketAddr,
}

/// How the generator runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RtpConfig {
    /// How long every stream sends: `duration / ptime` packets each.
    pub duration: Duration,
    /// Packet interval (20 ms).
    pub ptime: Duration,
    /// Payload bytes (160: 20 ms of PCMU); at least 8 (the send time).
    pub payload: usize,
    /// Threads; 0 picks one per 250 calls, at most 4.
    pub threads: usize,
    /// How long to keep reading after the last packet was sent.
    pub drain: Duration,
}

impl Default for RtpConfig {
    /// 10 s of 20 ms PCMU packets, threads picked by the number of calls, 500 ms drain.
    fn default() -> Self {
        Self {
            duration: Duration::from_secs(10),
            ptime: Duration::from_millis(20),
            payload: 160,
            threads: 0,
            drain: Duration::from_millis(500),
        }
    }
}

impl RtpConfig {
    /// Packets each stream sends.
    #[must_use]
    pub fn packets_per_stream(&self) -> u64 {
        let p = self.ptime.as_nanos().max(1);
        u64::try_from(self.duration.as_nanos() / p).unwrap_or(u64::MAX)
    }

    fn thread_count(&self, calls: usize) -> usize {
        let t = if self.threads == 0 {
            calls.div_ceil(250).clamp(1, 4)
        } else {
            self.threads
        };
        t.clamp(1, calls.max(1))
    }
}

/// One-way delay percentiles in milliseconds (0 when `count` is 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Delay {
    /// Samples (unique packets received).
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

/// One direction of one call (A→B or B→A).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionReport {
    /// Packets the sender sent.
    pub sent: u64,
    /// Distinct packets the receiver got from the sender (by sequence number).
    pub received: u64,
    /// Sent and never received.
    pub lost: u64,
    /// Packets received again.
    pub duplicates: u64,
    /// Packets received after a later one.
    pub reordered: u64,
    /// Packets that were not the sender's: another SSRC, not RTP, or a sequence number it
    /// never sent (media crossed between calls or a stranger's packets).
    pub foreign: u64,
    /// Sends that failed (socket buffer full, ICMP error).
    pub send_errors: u64,
    /// One-way delay.
    pub delay: Delay,
    /// From the sender's first packet to the receiver's first packet (none: nothing came).
    pub start_gap_ms: Option<f64>,
    /// The longest interval without a received packet after the first one, the end included
    /// (from the last packet received to the sender's last packet, when media stopped).
    pub max_gap_ms: f64,
    /// Media was flowing at the end: the last packet received came within 3 packet times of
    /// the sender's last packet.
    pub resumed: bool,
}

/// One call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallReport {
    /// The call's index in the list given to [`run`].
    pub call: usize,
    /// Caller to callee.
    pub a_to_b: DirectionReport,
    /// Callee to caller.
    pub b_to_a: DirectionReport,
}

impl CallReport {
    /// The longer of the two directions' longest gaps.
    #[must_use]
    pub fn max_gap_ms(&self) -> f64 {
        self.a_to_b.max_gap_ms.max(self.b_to_a.max_gap_ms)
    }

    /// Packets lost both ways.
    #[must_use]
    pub fn lost(&self) -> u64 {
        self.a_to_b.lost + self.b_to_a.lost
    }

    /// Media flowing both ways at the end.
    #[must_use]
    pub fn resumed(&self) -> bool {
        self.a_to_b.resumed && self.b_to_a.resumed
    }
}

/// The whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RtpTotals {
    /// Calls.
    pub calls: u64,
    /// Packets sent, both directions of every call.
    pub sent: u64,
    /// Distinct packets received.
    pub received: u64,
    /// Sent and never received.
    pub lost: u64,
    /// `lost / sent`, in %.
    pub loss_percent: f64,
    /// Duplicates.
    pub duplicates: u64,
    /// Reordered.
    pub reordered: u64,
    /// Foreign packets (see [`DirectionReport::foreign`]).
    pub foreign: u64,
    /// Failed sends.
    pub send_errors: u64,
    /// One-way delay over every packet received.
    pub delay: Delay,
    /// Median start gap over the directions that received something.
    pub start_gap_p50_ms: f64,
    /// Largest start gap.
    pub start_gap_max_ms: f64,
    /// Largest gap of any direction.
    pub max_gap_ms: f64,
    /// Directions that received nothing.
    pub silent_directions: u64,
    /// Calls whose media was not flowing both ways at the end.
    pub calls_not_resumed: u64,
    /// Wall time from the first packet sent to the end of the drain, in s.
    pub elapsed_s: f64,
    /// Received packets per second of the sending period (the relay's forwarding rate).
    pub received_per_s: f64,
}

/// What [`run`] measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RtpReport {
    /// The configuration.
    pub ptime_ms: f64,
    /// Sending period, in s.
    pub duration_s: f64,
    /// Threads used.
    pub threads: usize,
    /// Per call, in the order given.
    pub calls: Vec<CallReport>,
    /// Sums.
    pub total: RtpTotals,
}

impl RtpReport {
    /// A few lines for a person.
    #[must_use]
    pub fn summary(&self) -> String {
        let t = &self.total;
        format!(
            "rtp: {} calls, {:.1} s, {} threads: sent {}, received {} ({:.0}/s), lost {} ({:.3} %), \
             dup {}, reordered {}, foreign {}, send errors {}\n\
             rtp: one-way delay p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms; start gap p50 {:.1} ms, \
             max {:.1} ms; longest gap {:.1} ms; silent directions {}, calls not flowing at the end {}\n",
            t.calls,
            self.duration_s,
            self.threads,
            t.sent,
            t.received,
            t.received_per_s,
            t.lost,
            t.loss_percent,
            t.duplicates,
            t.reordered,
            t.foreign,
            t.send_errors,
            t.delay.p50_ms,
            t.delay.p99_ms,
            t.delay.max_ms,
            t.start_gap_p50_ms,
            t.start_gap_max_ms,
            t.max_gap_ms,
            t.silent_directions,
            t.calls_not_resumed,
        )
    }

    /// The calls with a gap of at least `min_ms` in either direction, longest first.
    #[must_use]
    pub fn gaps(&self, min_ms: f64) -> Vec<&CallReport> {
        let mut v: Vec<&CallReport> = self
            .calls
            .iter()
            .filter(|c| c.max_gap_ms() >= min_ms)
            .collect();
        v.sort_by(|a, b| b.max_gap_ms().total_cmp(&a.max_gap_ms()));
        v
    }

    /// A Markdown table of the calls with a gap of at least `min_ms`: gap and loss per
    /// direction, and whether media resumed.
    #[must_use]
    pub fn gap_table(&self, min_ms: f64) -> String {
        use std::fmt::Write as _;
        let mut s = String::from(
            "| call | A→B gap (ms) | A→B lost | B→A gap (ms) | B→A lost | resumed |\n|---:|---:|---:|---:|---:|---|\n",
        );
        for c in self.gaps(min_ms) {
            let _ = writeln!(
                s,
                "| {} | {:.1} | {} | {:.1} | {} | {} |",
                c.call,
                c.a_to_b.max_gap_ms,
                c.a_to_b.lost,
                c.b_to_a.max_gap_ms,
                c.b_to_a.lost,
                if c.resumed() { "yes" } else { "no" }
            );
        }
        s
    }
}

/// A run in the background (see [`spawn`]).
pub struct RtpRun {
    stop: Arc<AtomicBool>,
    arrived: Arc<AtomicU64>,
    threads: Vec<JoinHandle<io::Result<Vec<StreamPair>>>>,
    cfg: RtpConfig,
    calls: usize,
}

impl RtpRun {
    /// Datagrams received so far by all endpoints (RTP or not): lets a test wait until media
    /// flows before it breaks something.
    #[must_use]
    pub fn arrived(&self) -> u64 {
        self.arrived.load(Ordering::Relaxed)
    }

    /// Stops sending now (the drain still runs); [`RtpRun::join`] then returns soon.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Waits for the end of the run (`duration` + `drain` after the start, or a
    /// [`RtpRun::stop`]) and returns the report.
    ///
    /// # Errors
    /// A socket error in a thread (registration with the poller, or a poll failure), or a
    /// thread that panicked.
    pub fn join(self) -> io::Result<RtpReport> {
        let mut pairs = Vec::with_capacity(self.calls);
        for t in self.threads {
            let got = t
                .join()
                .map_err(|_| io::Error::other("an RTP thread panicked"))??;
            pairs.extend(got);
        }
        pairs.sort_by_key(|p| p.call);
        Ok(report(&self.cfg, pairs))
    }
}

/// Runs `calls` for `cfg.duration` (plus the drain) and returns the report.
///
/// # Errors
/// As [`spawn`] and [`RtpRun::join`].
pub fn run(calls: Vec<MediaCall>, cfg: &RtpConfig) -> io::Result<RtpReport> {
    spawn(calls, cfg)?.join()
}

/// Starts `calls` in background threads; the first packets go out about 20 ms later.
///
/// # Errors
/// A bad configuration (ptime 0, payload under 8 bytes or over 1400) or a socket that cannot
/// be made non-blocking, or a thread that cannot be started.
pub fn spawn(calls: Vec<MediaCall>, cfg: &RtpConfig) -> io::Result<RtpRun> {
    if cfg.ptime.is_zero() || cfg.payload < STAMP || cfg.payload > 1400 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "ptime must be > 0 and payload 8..=1400 bytes",
        ));
    }
    let n = calls.len();
    let threads = cfg.thread_count(n);
    let stop = Arc::new(AtomicBool::new(false));
    let arrived = Arc::new(AtomicU64::new(0));
    let epoch = Instant::now();
    // Every thread starts on the same clock, a little after all are spawned.
    let start_ns = 20_000_000u64;
    let mut groups: Vec<Vec<(usize, MediaCall)>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, c) in calls.into_iter().enumerate() {
        c.endpoints.a.set_nonblocking(true)?;
        c.endpoints.b.set_nonblocking(true)?;
        groups[i % threads].push((i, c));
    }
    let mut handles = Vec::with_capacity(threads);
    for (t, group) in groups.into_iter().enumerate() {
        let (cfg2, stop2, arrived2) = (cfg.clone(), stop.clone(), arrived.clone());
        let h = std::thread::Builder::new()
            .name(format!("rtp-{t}"))
            .spawn(move || Worker::new(group, &cfg2, epoch, start_ns, arrived2)?.run(&stop2))?;
        handles.push(h);
    }
    Ok(RtpRun {
        stop,
        arrived,
        threads: handles,
        cfg: cfg.clone(),
        calls: n,
    })
}

/// Log-linear histogram of microseconds: exact below 32 µs, then 32 buckets per power of two
/// (under 3.2 % error), up to about 2^26 µs (67 s); larger values land in the last bucket.
/// The maximum is exact.
#[derive(Debug, Clone)]
pub(crate) struct Histogram {
    buckets: Vec<u32>,
    count: u64,
    max_us: u64,
}

const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
const OCTAVES: usize = 22;

impl Histogram {
    pub(crate) fn new() -> Self {
        Self {
            buckets: vec![0; (OCTAVES + 1) * SUB as usize],
            count: 0,
            max_us: 0,
        }
    }

    fn index(us: u64) -> usize {
        if us < SUB {
            return us as usize;
        }
        let exp = 63 - u64::from(us.leading_zeros()); // >= SUB_BITS
        let shift = exp - u64::from(SUB_BITS);
        let mantissa = (us >> shift) - SUB;
        ((shift + 1) * SUB + mantissa) as usize
    }

    /// The upper end of bucket `i`, in µs.
    fn value(i: usize) -> u64 {
        let i = i as u64;
        if i < SUB {
            return i;
        }
        let shift = i / SUB - 1;
        let mantissa = i % SUB + SUB;
        ((mantissa + 1) << shift) - 1
    }

    pub(crate) fn record(&mut self, us: u64) {
        let i = Self::index(us).min(self.buckets.len() - 1);
        self.buckets[i] = self.buckets[i].saturating_add(1);
        self.count += 1;
        self.max_us = self.max_us.max(us);
    }

    pub(crate) fn merge(&mut self, other: &Self) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a = a.saturating_add(*b);
        }
        self.count += other.count;
        self.max_us = self.max_us.max(other.max_us);
    }

    /// Nearest-rank percentile, in µs (the bucket's upper end, at most the maximum).
    pub(crate) fn percentile(&self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((p / 100.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += u64::from(*n);
            if seen >= rank {
                return Self::value(i).min(self.max_us);
            }
        }
        self.max_us
    }

    fn delay(&self) -> Delay {
        let ms = |us: u64| us as f64 / 1000.0;
        Delay {
            count: self.count,
            p50_ms: ms(self.percentile(50.0)),
            p99_ms: ms(self.percentile(99.0)),
            max_ms: ms(self.max_us),
        }
    }
}

/// The extended index of a packet from its 16-bit sequence offset, relative to the highest
/// index seen so far (RFC 3550 A.1 style: the nearest candidate, across wraps both ways).
pub(crate) fn extend_index(offset: u16, max: Option<u64>) -> u64 {
    let Some(max) = max else {
        return u64::from(offset);
    };
    let cand = (max & !0xffff) | u64::from(offset);
    if cand + 0x8000 < max {
        cand + 0x1_0000
    } else if cand > max + 0x8000 && cand >= 0x1_0000 {
        cand - 0x1_0000
    } else {
        cand
    }
}

/// What a datagram says, if it is RTP: (SSRC, sequence number, payload offset).
pub(crate) fn parse_rtp(p: &[u8]) -> Option<(u32, u16, usize)> {
    if p.len() < HEADER || p[0] >> 6 != 2 {
        return None;
    }
    let cc = usize::from(p[0] & 0x0f);
    let mut off = HEADER + 4 * cc;
    if p[0] & 0x10 != 0 {
        let ext = p.get(off + 2..off + 4)?;
        off += 4 + 4 * usize::from(u16::from_be_bytes([ext[0], ext[1]]));
    }
    if p.len() < off {
        return None;
    }
    let seq = u16::from_be_bytes([p[2], p[3]]);
    let ssrc = u32::from_be_bytes([p[8], p[9], p[10], p[11]]);
    Some((ssrc, seq, off))
}

/// One direction: its sender's state and its receiver's counters.
#[derive(Debug)]
struct Stream {
    ssrc: u32,
    seq0: u16,
    ts0: u32,
    /// Where the sender sends.
    to: SocketAddr,
    sent: u64,
    send_errors: u64,
    first_tx_ns: Option<u64>,
    last_tx_ns: u64,
    received: u64,
    duplicates: u64,
    reordered: u64,
    foreign: u64,
    max_index: Option<u64>,
    seen: Vec<u64>,
    delay: Histogram,
    first_rx_ns: Option<u64>,
    last_rx_ns: u64,
    max_gap_ns: u64,
}

impl Stream {
    fn new(to: SocketAddr, packets: u64) -> Self {
        let words = usize::try_from(packets.div_ceil(64)).unwrap_or(usize::MAX);
        Self {
            ssrc: rand::random(),
            seq0: rand::random(),
            ts0: rand::random(),
            to,
            sent: 0,
            send_errors: 0,
            first_tx_ns: None,
            last_tx_ns: 0,
            received: 0,
            duplicates: 0,
            reordered: 0,
            foreign: 0,
            max_index: None,
            seen: vec![0; words],
            delay: Histogram::new(),
            first_rx_ns: None,
            last_rx_ns: 0,
            max_gap_ns: 0,
        }
    }

    /// A datagram that arrived at this stream's receiver at `now_ns`.
    fn receive(&mut self, p: &[u8], now_ns: u64) {
        let Some((ssrc, seq, off)) = parse_rtp(p) else {
            self.foreign += 1;
            return;
        };
        if ssrc != self.ssrc || p.len() < off + STAMP {
            self.foreign += 1;
            return;
        }
        let index = extend_index(seq.wrapping_sub(self.seq0), self.max_index);
        let (word, bit) = ((index / 64) as usize, index % 64);
        let Some(w) = self.seen.get_mut(word).filter(|_| index < self.sent) else {
            // Never sent (a relay inventing packets, or a wrap we cannot place).
            self.foreign += 1;
            return;
        };
        if self.first_rx_ns.is_some() {
            self.max_gap_ns = self.max_gap_ns.max(now_ns.saturating_sub(self.last_rx_ns));
        } else {
            self.first_rx_ns = Some(now_ns);
        }
        self.last_rx_ns = now_ns;
        if *w & (1 << bit) != 0 {
            self.duplicates += 1;
            return;
        }
        *w |= 1 << bit;
        self.received += 1;
        if self.max_index.is_some_and(|m| index < m) {
            self.reordered += 1;
        } else {
            self.max_index = Some(index);
        }
        let mut stamp = [0u8; STAMP];
        stamp.copy_from_slice(&p[off..off + STAMP]);
        let sent_ns = u64::from_be_bytes(stamp);
        self.delay.record(now_ns.saturating_sub(sent_ns) / 1000);
    }

    fn report(&self, ptime_ns: u64) -> DirectionReport {
        let ms = |ns: u64| ns as f64 / 1e6;
        let tail = if self.received == 0 {
            0
        } else {
            self.last_tx_ns.saturating_sub(self.last_rx_ns)
        };
        let max_gap_ns = if self.received == 0 {
            self.last_tx_ns
                .saturating_sub(self.first_tx_ns.unwrap_or(self.last_tx_ns))
        } else {
            self.max_gap_ns.max(tail)
        };
        DirectionReport {
            sent: self.sent,
            received: self.received,
            lost: self.sent.saturating_sub(self.received),
            duplicates: self.duplicates,
            reordered: self.reordered,
            foreign: self.foreign,
            send_errors: self.send_errors,
            delay: self.delay.delay(),
            start_gap_ms: match (self.first_tx_ns, self.first_rx_ns) {
                (Some(tx), Some(rx)) => Some(ms(rx.saturating_sub(tx))),
                _ => None,
            },
            max_gap_ms: ms(max_gap_ns),
            resumed: self.received > 0 && tail <= RESUMED_PTIMES * ptime_ns,
        }
    }
}

/// The two streams of one call, as a worker thread hands them back.
struct StreamPair {
    call: usize,
    a_to_b: Stream,
    b_to_a: Stream,
}

struct Worker {
    poll: Poll,
    /// Per call: A's and B's sockets.
    sockets: Vec<(mio::net::UdpSocket, mio::net::UdpSocket)>,
    pairs: Vec<StreamPair>,
    epoch: Instant,
    start_ns: u64,
    ptime_ns: u64,
    packets: u64,
    drain_ns: u64,
    packet: Vec<u8>,
    buf: Vec<u8>,
    arrived: Arc<AtomicU64>,
}

impl Worker {
    fn new(
        group: Vec<(usize, MediaCall)>,
        cfg: &RtpConfig,
        epoch: Instant,
        start_ns: u64,
        arrived: Arc<AtomicU64>,
    ) -> io::Result<Self> {
        let poll = Poll::new()?;
        let packets = cfg.packets_per_stream();
        let mut sockets = Vec::with_capacity(group.len());
        let mut pairs = Vec::with_capacity(group.len());
        for (k, (call, c)) in group.into_iter().enumerate() {
            let mut a = mio::net::UdpSocket::from_std(c.endpoints.a);
            let mut b = mio::net::UdpSocket::from_std(c.endpoints.b);
            poll.registry()
                .register(&mut a, Token(2 * k), Interest::READABLE)?;
            poll.registry()
                .register(&mut b, Token(2 * k + 1), Interest::READABLE)?;
            sockets.push((a, b));
            pairs.push(StreamPair {
                call,
                a_to_b: Stream::new(c.a_relay, packets),
                b_to_a: Stream::new(c.b_relay, packets),
            });
        }
        let mut packet = vec![0xffu8; HEADER + cfg.payload];
        packet[0] = 0x80;
        packet[1] = PT_PCMU;
        Ok(Self {
            poll,
            sockets,
            pairs,
            epoch,
            start_ns,
            ptime_ns: u64::try_from(cfg.ptime.as_nanos()).unwrap_or(u64::MAX),
            packets,
            drain_ns: u64::try_from(cfg.drain.as_nanos()).unwrap_or(u64::MAX),
            packet,
            buf: vec![0u8; RECV_BUF],
            arrived,
        })
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// When packet `n` of stream `j` (of `k`) is due.
    fn due(&self, n: u64, j: usize, k: usize) -> u64 {
        let phase = self.ptime_ns * j as u64 / k.max(1) as u64;
        self.start_ns + n * self.ptime_ns + phase
    }

    /// Sends packet `n` of stream `j` (even: A→B from A, odd: B→A from B).
    fn send(&mut self, n: u64, j: usize) {
        let now = self.now_ns();
        let (call, from_b) = (j / 2, j % 2 == 1);
        let pair = &mut self.pairs[call];
        let s = if from_b {
            &mut pair.b_to_a
        } else {
            &mut pair.a_to_b
        };
        let seq = s.seq0.wrapping_add(n as u16);
        let ts = s.ts0.wrapping_add((n as u32).wrapping_mul(160));
        self.packet[2..4].copy_from_slice(&seq.to_be_bytes());
        self.packet[4..8].copy_from_slice(&ts.to_be_bytes());
        self.packet[8..12].copy_from_slice(&s.ssrc.to_be_bytes());
        self.packet[HEADER..HEADER + STAMP].copy_from_slice(&now.to_be_bytes());
        let (a, b) = &self.sockets[call];
        let sock = if from_b { b } else { a };
        // Counted as sent either way: a packet the kernel refused is lost like any other.
        s.sent += 1;
        if s.first_tx_ns.is_none() {
            s.first_tx_ns = Some(now);
        }
        s.last_tx_ns = now;
        if sock.send_to(&self.packet, s.to).is_err() {
            s.send_errors += 1;
        }
    }

    /// Reads everything ready on socket `token`.
    fn read(&mut self, token: usize) {
        let (call, at_b) = (token / 2, token % 2 == 1);
        for _ in 0..READ_BURST {
            let (a, b) = &self.sockets[call];
            let sock = if at_b { b } else { a };
            match sock.recv_from(&mut self.buf) {
                Ok((len, _)) => {
                    let now = self.now_ns();
                    self.arrived.fetch_add(1, Ordering::Relaxed);
                    let pair = &mut self.pairs[call];
                    // B receives what A sent, A what B sent.
                    let s = if at_b {
                        &mut pair.a_to_b
                    } else {
                        &mut pair.b_to_a
                    };
                    s.receive(&self.buf[..len], now);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                // An ICMP error for an earlier send (the relay's port closed): keep reading.
                Err(_) => {}
            }
        }
    }

    fn run(mut self, stop: &AtomicBool) -> io::Result<Vec<StreamPair>> {
        let k = self.pairs.len() * 2;
        let mut events = Events::with_capacity(1024);
        // The next packet to send: packet `n` of stream `j`.
        let (mut n, mut j) = (0u64, 0usize);
        let mut sending = k > 0 && self.packets > 0;
        let mut drain_end = self.start_ns + self.drain_ns;
        loop {
            let now = self.now_ns();
            if sending && stop.load(Ordering::Relaxed) {
                sending = false;
                drain_end = now + self.drain_ns;
            }
            while sending && self.due(n, j, k) <= now {
                self.send(n, j);
                j += 1;
                if j == k {
                    j = 0;
                    n += 1;
                    if n == self.packets {
                        sending = false;
                        drain_end = self.now_ns() + self.drain_ns;
                    }
                }
            }
            let now = self.now_ns();
            if !sending && now >= drain_end {
                break;
            }
            let wake = if sending {
                self.due(n, j, k)
            } else {
                drain_end
            };
            // Wake at least every 50 ms to see a stop.
            let timeout = Duration::from_nanos(wake.saturating_sub(now).min(50_000_000));
            match self.poll.poll(&mut events, Some(timeout)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for ev in &events {
                self.read(ev.token().0);
            }
        }
        Ok(self.pairs)
    }
}

fn report(cfg: &RtpConfig, pairs: Vec<StreamPair>) -> RtpReport {
    let ptime_ns = u64::try_from(cfg.ptime.as_nanos()).unwrap_or(u64::MAX);
    let mut total = RtpTotals {
        calls: pairs.len() as u64,
        ..RtpTotals::default()
    };
    let mut all = Histogram::new();
    let mut start_gaps = Histogram::new();
    let (mut first_tx, mut last_end) = (u64::MAX, 0u64);
    let mut calls = Vec::with_capacity(pairs.len());
    for p in &pairs {
        let c = CallReport {
            call: p.call,
            a_to_b: p.a_to_b.report(ptime_ns),
            b_to_a: p.b_to_a.report(ptime_ns),
        };
        for (s, d) in [(&p.a_to_b, &c.a_to_b), (&p.b_to_a, &c.b_to_a)] {
            all.merge(&s.delay);
            total.sent += d.sent;
            total.received += d.received;
            total.lost += d.lost;
            total.duplicates += d.duplicates;
            total.reordered += d.reordered;
            total.foreign += d.foreign;
            total.send_errors += d.send_errors;
            total.max_gap_ms = total.max_gap_ms.max(d.max_gap_ms);
            match (s.first_tx_ns, s.first_rx_ns) {
                (Some(tx), Some(rx)) => start_gaps.record(rx.saturating_sub(tx) / 1000),
                _ => total.silent_directions += 1,
            }
            if let Some(tx) = s.first_tx_ns {
                first_tx = first_tx.min(tx);
            }
            last_end = last_end.max(s.last_tx_ns).max(s.last_rx_ns);
        }
        if !c.resumed() {
            total.calls_not_resumed += 1;
        }
        calls.push(c);
    }
    total.loss_percent = if total.sent == 0 {
        0.0
    } else {
        total.lost as f64 * 100.0 / total.sent as f64
    };
    total.delay = all.delay();
    total.start_gap_p50_ms = start_gaps.percentile(50.0) as f64 / 1000.0;
    total.start_gap_max_ms = start_gaps.max_us as f64 / 1000.0;
    if first_tx != u64::MAX {
        total.elapsed_s = last_end.saturating_sub(first_tx) as f64 / 1e9;
    }
    let period = cfg.duration.as_secs_f64();
    total.received_per_s = if period > 0.0 {
        total.received as f64 / period
    } else {
        0.0
    };
    RtpReport {
        ptime_ms: cfg.ptime.as_secs_f64() * 1000.0,
        duration_s: period,
        threads: cfg.thread_count(pairs.len()),
        calls,
        total,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn histogram_buckets_round_trip() {
        for us in [
            0u64,
            1,
            31,
            32,
            33,
            63,
            64,
            100,
            1000,
            12_345,
            1 << 20,
            60_000_000,
        ] {
            let i = Histogram::index(us);
            assert!(Histogram::value(i) >= us, "{us}");
            // Under 3.2 % above the value, and the previous bucket ends below it.
            assert!(
                Histogram::value(i) as f64 <= us as f64 * 1.032 + 1.0,
                "{us}"
            );
            if i > 0 {
                assert!(Histogram::value(i - 1) < us, "{us}");
            }
        }
        let mut h = Histogram::new();
        for us in 1..=100 {
            h.record(us);
        }
        assert_eq!(h.percentile(50.0), 50);
        assert!((99..=101).contains(&h.percentile(99.0)));
        assert_eq!(h.percentile(100.0), 100);
        let mut g = Histogram::new();
        g.record(5000);
        g.merge(&h);
        assert_eq!((g.count, g.max_us), (101, 5000));
    }

    #[test]
    fn extends_sequence_numbers_across_wraps() {
        assert_eq!(extend_index(5, None), 5);
        assert_eq!(extend_index(6, Some(5)), 6);
        assert_eq!(extend_index(3, Some(5)), 3);
        // Past 65535 the offset wraps to 0: the next cycle.
        assert_eq!(extend_index(2, Some(65_534)), 65_538);
        // A late packet from before the wrap.
        assert_eq!(extend_index(65_530, Some(65_538)), 65_530);
        assert_eq!(extend_index(10, Some(3 * 65_536 + 5)), 3 * 65_536 + 10);
    }

    fn packet(ssrc: u32, seq: u16, stamp_ns: u64) -> Vec<u8> {
        let mut p = vec![0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        p[2..4].copy_from_slice(&seq.to_be_bytes());
        p[8..12].copy_from_slice(&ssrc.to_be_bytes());
        p.extend_from_slice(&stamp_ns.to_be_bytes());
        p.extend_from_slice(&[0xff; 152]);
        p
    }

    #[test]
    fn parses_rtp_headers() {
        let p = packet(7, 9, 1);
        assert_eq!(parse_rtp(&p), Some((7, 9, 12)));
        // Two CSRCs and a one-word extension move the payload.
        let mut q = p.clone();
        q[0] = 0x80 | 0x10 | 2;
        q.splice(12..12, [0u8; 8]);
        q.splice(20..20, [0xbe, 0xde, 0, 1, 1, 2, 3, 4]);
        assert_eq!(parse_rtp(&q), Some((7, 9, 28)));
        assert_eq!(parse_rtp(&p[..11]), None);
        let mut v1 = p;
        v1[0] = 0x40;
        assert_eq!(parse_rtp(&v1), None);
    }

    #[test]
    fn counts_loss_duplicates_reordering_and_strangers() {
        let mut s = Stream::new("127.0.0.1:9".parse().unwrap(), 10);
        s.seq0 = 65_533; // wraps after 3 packets
        s.sent = 10;
        s.first_tx_ns = Some(0);
        s.last_tx_ns = 9 * 20_000_000;
        let ms = 1_000_000u64;
        let seq = |n: u16| 65_533u16.wrapping_add(n);
        // (packet, arrival in ms); packet n was sent at n × 20 ms.
        for (n, at) in [
            (0u16, 1u64),
            (1, 21),
            (2, 41),
            (4, 81),
            (3, 82),
            (3, 83),
            (9, 181),
        ] {
            s.receive(&packet(s.ssrc, seq(n), u64::from(n) * 20 * ms), at * ms);
        }
        s.receive(&packet(s.ssrc ^ 1, seq(5), 0), 190 * ms); // another SSRC
        s.receive(&packet(s.ssrc, seq(10), 0), 190 * ms); // never sent
        s.receive(b"not rtp", 190 * ms);
        let r = s.report(20 * ms);
        assert_eq!((r.sent, r.received, r.lost), (10, 6, 4));
        assert_eq!((r.duplicates, r.reordered, r.foreign), (1, 1, 3));
        assert_eq!(r.delay.count, 6);
        // Packet 3: sent at 60 ms, arrived at 82 ms.
        assert_eq!(r.delay.max_ms, 22.0);
        // The median is 1 ms, as its histogram bucket holds it (under 3.2 % above).
        assert!((1.0..1.032).contains(&r.delay.p50_ms), "{r:?}");
        assert_eq!(r.start_gap_ms, Some(1.0));
        // 83 → 181 ms is the longest silence.
        assert_eq!(r.max_gap_ms, 98.0);
        assert!(r.resumed);
    }

    #[test]
    fn media_that_stopped_has_not_resumed() {
        let mut s = Stream::new("127.0.0.1:9".parse().unwrap(), 100);
        s.sent = 100;
        s.first_tx_ns = Some(0);
        s.last_tx_ns = 99 * 20_000_000;
        for n in 0..10u16 {
            let t = u64::from(n) * 20_000_000;
            s.receive(&packet(s.ssrc, s.seq0.wrapping_add(n), t), t);
        }
        let r = s.report(20_000_000);
        assert!(!r.resumed);
        assert_eq!(r.lost, 90);
        assert_eq!(r.max_gap_ms, 90.0 * 20.0);
        let silent = Stream::new("127.0.0.1:9".parse().unwrap(), 1).report(20_000_000);
        assert!(!silent.resumed);
        assert_eq!(silent.start_gap_ms, None);
    }

    #[test]
    fn direct_loopback_calls_lose_nothing() {
        // No relay: each endpoint sends straight to the other.
        let eps = CallEndpoints::bind_many(3, "127.0.0.1".parse().unwrap()).unwrap();
        let calls = eps
            .into_iter()
            .map(|e| {
                let (a, b) = (e.a_addr(), e.b_addr());
                MediaCall {
                    endpoints: e,
                    a_relay: b,
                    b_relay: a,
                }
            })
            .collect();
        let cfg = RtpConfig {
            duration: Duration::from_millis(200),
            drain: Duration::from_millis(200),
            threads: 2,
            ..RtpConfig::default()
        };
        let r = run(calls, &cfg).unwrap();
        assert_eq!(r.calls.len(), 3);
        assert_eq!(r.total.sent, 3 * 2 * 10);
        assert_eq!(r.total.received, r.total.sent, "{}", r.summary());
        assert_eq!(
            (r.total.lost, r.total.duplicates, r.total.foreign),
            (0, 0, 0)
        );
        assert_eq!(r.total.silent_directions, 0);
        assert!(r.calls.iter().all(CallReport::resumed));
        assert_eq!(r.threads, 2);
    }
}
