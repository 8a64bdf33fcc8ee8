//! The media session table (sans-IO): the ports the SBC anchors each call's media on, where
//! each leg's media goes (signalled, then latched), per-stream counters, and the inactivity
//! clock. A thin shell of forwarding threads owns the sockets and asks
//! [`MediaTable::handle_packet`] where each packet goes; time is passed in.
//!
//! A call's media is a [`MediaSession`] of one or more streams (one per `m=` line); a stream
//! has two legs, [`Side::Caller`] and [`Side::Callee`], each with a port pair of its own (RTP
//! even, RTCP the next port) on the SBC. A packet received on one leg's port is sent out of the
//! other leg's port of the same stream to that leg's remote address.
//!
//! **Latching** (symmetric RTP, for phones behind NAT): a leg's remote is first what its SDP
//! signalled; the first packet from another source moves it there, but only within
//! [`MediaSettings::latch_window`] of the stream's start or of the leg's latest SDP, and, with
//! [`MediaSettings::latch_signalled_ip_only`], only from the signalled IP address. Outside the
//! window a packet from any other source is dropped and counted: a stranger cannot hijack a
//! call's media by sending to its port.
//!
//! **Inactivity**: with [`MediaSettings::inactivity`] set, a session from which no RTP arrived
//! on any leg for that long raises [`MediaEvent::Inactive`] once (Oracle's `rtp-inactivity`);
//! the caller ends the call.
//!
//! **The port pool** hands out even ports from the configured range, reusing a released pair
//! last (a late packet of an ended call does not reach the next one), and raises
//! [`MediaEvent::PoolLow`] when the free pairs fall below a tenth of the pool.
//!
//! The per-packet path ([`MediaTable::handle_packet`]) does not allocate.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::{Duration, Instant};

/// What the media table needs from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaSettings {
    /// The SBC's media ports (RTP on the even ones, RTCP on the next).
    pub ports: RangeInclusive<u16>,
    /// How long after a stream starts (or a new SDP for a leg) its remote may be latched.
    pub latch_window: Duration,
    /// Latch only to the IP address the leg's SDP signalled (any port).
    pub latch_signalled_ip_only: bool,
    /// No RTP on any leg for this long ends the call (`None`: never).
    pub inactivity: Option<Duration>,
}

/// The caller's identifier of a call's media (the engine's call id).
pub type SessionId = u64;

/// One leg of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The leg toward the caller (the access side, for a call from there).
    Caller,
    /// The leg toward the callee.
    Callee,
}

impl Side {
    fn index(self) -> usize {
        match self {
            Self::Caller => 0,
            Self::Callee => 1,
        }
    }
}

/// Why the table refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediaError {
    /// Not enough free port pairs for the streams asked for.
    PoolExhausted {
        /// Pairs asked for.
        wanted: usize,
        /// Pairs free.
        free: usize,
    },
    /// The session already exists.
    Exists(SessionId),
    /// No such session or stream.
    Unknown(SessionId),
}

impl fmt::Display for MediaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PoolExhausted { wanted, free } => {
                write!(
                    f,
                    "media ports exhausted: {wanted} pairs wanted, {free} free"
                )
            }
            Self::Exists(id) => write!(f, "media session {id} exists"),
            Self::Unknown(id) => write!(f, "no media session {id} (or no such stream)"),
        }
    }
}

impl std::error::Error for MediaError {}

/// Where to send a packet: out of `from_port` (the SBC's port of the other leg) to `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forward {
    /// The SBC's port to send from.
    pub from_port: u16,
    /// The destination.
    pub to: SocketAddr,
}

/// Why a packet is not forwarded (each is counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// No session holds the port.
    UnknownPort,
    /// From a source other than the leg's remote, after the latch window.
    Stranger,
    /// The other leg has no remote yet (its SDP has not arrived).
    NoDestination,
}

/// What the table tells its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaEvent {
    /// No RTP on any leg of the session for the inactivity time.
    Inactive(SessionId),
    /// Free port pairs fell below a tenth of the pool.
    PoolLow {
        /// Pairs free.
        free: usize,
        /// Pairs in the pool.
        total: usize,
    },
}

/// Counters of one direction of one stream (what a leg sent to the SBC).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LegCounters {
    /// RTP packets received.
    pub packets: u64,
    /// RTP bytes received.
    pub bytes: u64,
    /// RTCP packets received.
    pub rtcp_packets: u64,
    /// Packets missing by RTP sequence number (gaps; a reordered packet is not a loss).
    pub lost: u64,
    /// Packets from strangers, dropped.
    pub dropped: u64,
    /// The latest RTP SSRC.
    pub ssrc: Option<u32>,
}

/// One leg of one stream.
#[derive(Debug, Clone)]
struct Leg {
    /// The SBC's RTP port for this leg (RTCP: + 1).
    port: u16,
    /// Signalled by the leg's SDP.
    signalled: Option<SocketAddr>,
    signalled_rtcp: Option<SocketAddr>,
    /// Where media to this leg goes now (RTP and RTCP).
    rtp_to: Option<SocketAddr>,
    rtcp_to: Option<SocketAddr>,
    latch_until: Instant,
    latched: bool,
    last_rtp: Option<Instant>,
    /// RFC 3550 A.3 for the current SSRC: first and highest extended sequence numbers, and
    /// packets received; losses of earlier SSRCs in `lost_before`.
    base_seq: u64,
    max_seq: u64,
    received: u64,
    lost_before: u64,
    counters: LegCounters,
}

impl Leg {
    fn new(port: u16, now: Instant, window: Duration) -> Self {
        Self {
            port,
            signalled: None,
            signalled_rtcp: None,
            rtp_to: None,
            rtcp_to: None,
            latch_until: now + window,
            latched: false,
            last_rtp: None,
            base_seq: 0,
            max_seq: 0,
            received: 0,
            lost_before: 0,
            counters: LegCounters::default(),
        }
    }
}

/// A call's media: its streams, each with two legs.
#[derive(Debug, Clone)]
pub struct MediaSession {
    streams: Vec<[Leg; 2]>,
    started: Instant,
    inactive_reported: bool,
}

impl MediaSession {
    /// The SBC's RTP port of `side` for each stream.
    #[must_use]
    pub fn ports(&self, side: Side) -> Vec<u16> {
        self.streams.iter().map(|s| s[side.index()].port).collect()
    }

    /// What `side` sent on stream `stream`.
    #[must_use]
    pub fn counters(&self, stream: usize, side: Side) -> Option<LegCounters> {
        self.streams.get(stream).map(|s| s[side.index()].counters)
    }

    /// Where media to `side` of stream `stream` goes now (after latching).
    #[must_use]
    pub fn destination(&self, stream: usize, side: Side) -> Option<SocketAddr> {
        self.streams
            .get(stream)
            .and_then(|s| s[side.index()].rtp_to)
    }

    /// Whether `side`'s remote of stream `stream` was latched (moved by its packets).
    #[must_use]
    pub fn is_latched(&self, stream: usize, side: Side) -> bool {
        self.streams
            .get(stream)
            .is_some_and(|s| s[side.index()].latched)
    }
}

/// Which leg, stream and channel a port belongs to.
#[derive(Debug, Clone, Copy)]
struct Slot {
    id: SessionId,
    stream: usize,
    side: Side,
    rtcp: bool,
}

/// Every call's media on one node.
#[derive(Debug)]
pub struct MediaTable {
    settings: MediaSettings,
    /// Free even ports, handed out from the front, returned to the back.
    free: VecDeque<u16>,
    total_pairs: usize,
    /// By port - the range's first even port.
    slots: Vec<Option<Slot>>,
    base: u16,
    sessions: HashMap<SessionId, MediaSession>,
    events: VecDeque<MediaEvent>,
    pool_low: bool,
    unknown_port_drops: u64,
}

impl MediaTable {
    /// An empty table over `settings.ports`.
    #[must_use]
    pub fn new(settings: MediaSettings) -> Self {
        let (lo, hi) = (*settings.ports.start(), *settings.ports.end());
        let base = lo + lo % 2;
        let free: VecDeque<u16> = (base..hi)
            .step_by(2)
            .filter(|p| p.checked_add(1).is_some_and(|r| r <= hi))
            .collect();
        let span = usize::from(hi.saturating_sub(base)) + 1;
        Self {
            total_pairs: free.len(),
            free,
            slots: vec![None; span],
            base,
            sessions: HashMap::new(),
            events: VecDeque::new(),
            pool_low: false,
            unknown_port_drops: 0,
            settings,
        }
    }

    /// Opens the media of call `id` with `streams` streams: a port pair per stream and leg.
    ///
    /// # Errors
    /// The session exists, or the pool has too few free pairs (nothing is taken then).
    pub fn open(
        &mut self,
        now: Instant,
        id: SessionId,
        streams: usize,
    ) -> Result<&MediaSession, MediaError> {
        if self.sessions.contains_key(&id) {
            return Err(MediaError::Exists(id));
        }
        let wanted = streams * 2;
        if self.free.len() < wanted {
            return Err(MediaError::PoolExhausted {
                wanted,
                free: self.free.len(),
            });
        }
        let window = self.settings.latch_window;
        let mut legs = Vec::with_capacity(streams);
        for stream in 0..streams {
            let mut pair = [0u16; 2];
            for side in [Side::Caller, Side::Callee] {
                // Checked above: enough free pairs.
                let port = self.free.pop_front().unwrap_or_default();
                pair[side.index()] = port;
                for rtcp in [false, true] {
                    let slot = Slot {
                        id,
                        stream,
                        side,
                        rtcp,
                    };
                    if let Some(s) = self.slot_mut(port + u16::from(rtcp)) {
                        *s = Some(slot);
                    }
                }
            }
            legs.push([
                Leg::new(pair[0], now, window),
                Leg::new(pair[1], now, window),
            ]);
        }
        self.check_pool();
        let session = MediaSession {
            streams: legs,
            started: now,
            inactive_reported: false,
        };
        Ok(self.sessions.entry(id).or_insert(session))
    }

    /// A leg's SDP said where it receives stream `stream`: RTP at `rtp`, RTCP at `rtcp`
    /// (`None`: RTP's port + 1). Opens a new latch window for that leg.
    ///
    /// # Errors
    /// No such session or stream.
    pub fn signal(
        &mut self,
        now: Instant,
        id: SessionId,
        stream: usize,
        side: Side,
        rtp: SocketAddr,
        rtcp: Option<SocketAddr>,
    ) -> Result<(), MediaError> {
        let window = self.settings.latch_window;
        let leg = self
            .sessions
            .get_mut(&id)
            .and_then(|s| s.streams.get_mut(stream))
            .map(|s| &mut s[side.index()])
            .ok_or(MediaError::Unknown(id))?;
        let rtcp = rtcp.or_else(|| {
            rtp.port()
                .checked_add(1)
                .map(|p| SocketAddr::new(rtp.ip(), p))
        });
        leg.signalled = Some(rtp);
        leg.signalled_rtcp = rtcp;
        leg.rtp_to = Some(rtp);
        leg.rtcp_to = rtcp;
        leg.latched = false;
        leg.latch_until = now + window;
        Ok(())
    }

    /// Ends call `id`'s media: its ports go back to the pool (to be reused last).
    pub fn close(&mut self, id: SessionId) -> Option<MediaSession> {
        let session = self.sessions.remove(&id)?;
        for legs in &session.streams {
            for leg in legs {
                for p in [leg.port, leg.port + 1] {
                    if let Some(s) = self.slot_mut(p) {
                        *s = None;
                    }
                }
                self.free.push_back(leg.port);
            }
        }
        self.check_pool();
        Some(session)
    }

    /// Where a packet received on the SBC's port `port` from `source` goes.
    ///
    /// # Errors
    /// Why it is dropped (each reason is counted).
    pub fn handle_packet(
        &mut self,
        now: Instant,
        port: u16,
        source: SocketAddr,
        packet: &[u8],
    ) -> Result<Forward, Dropped> {
        let Some(slot) = self.slot(port) else {
            self.unknown_port_drops += 1;
            return Err(Dropped::UnknownPort);
        };
        let only_signalled_ip = self.settings.latch_signalled_ip_only;
        let Some(session) = self.sessions.get_mut(&slot.id) else {
            self.unknown_port_drops += 1;
            return Err(Dropped::UnknownPort);
        };
        let Some(legs) = session.streams.get_mut(slot.stream) else {
            return Err(Dropped::UnknownPort);
        };
        let (from, to) = if slot.side == Side::Caller {
            let (a, b) = legs.split_at_mut(1);
            (&mut a[0], &mut b[0])
        } else {
            let (a, b) = legs.split_at_mut(1);
            (&mut b[0], &mut a[0])
        };
        let expected = if slot.rtcp { from.rtcp_to } else { from.rtp_to };
        if expected != Some(source) {
            let may_latch = now < from.latch_until
                && (!only_signalled_ip || from.signalled.is_none_or(|s| s.ip() == source.ip()));
            if !may_latch {
                from.counters.dropped += 1;
                return Err(Dropped::Stranger);
            }
            if slot.rtcp {
                from.rtcp_to = Some(source);
            } else {
                from.rtp_to = Some(source);
                // RTCP follows RTP's address unless the leg's own RTCP packets say otherwise.
                if from.rtcp_to.is_none_or(|r| Some(r) == from.signalled_rtcp) {
                    from.rtcp_to = source
                        .port()
                        .checked_add(1)
                        .map(|p| SocketAddr::new(source.ip(), p));
                }
            }
            from.latched = true;
        }
        if slot.rtcp {
            from.counters.rtcp_packets += 1;
        } else {
            count_rtp(from, now, packet);
            session.inactive_reported = false;
        }
        let dest = if slot.rtcp { to.rtcp_to } else { to.rtp_to };
        match dest {
            Some(to_addr) => Ok(Forward {
                from_port: to.port + u16::from(slot.rtcp),
                to: to_addr,
            }),
            None => Err(Dropped::NoDestination),
        }
    }

    /// The next instant [`Self::handle_timeout`] has work (an inactivity deadline).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let limit = self.settings.inactivity?;
        self.sessions
            .values()
            .filter(|s| !s.inactive_reported)
            .map(|s| last_rtp(s) + limit)
            .min()
    }

    /// Raises [`MediaEvent::Inactive`] for every session silent for the inactivity time.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(limit) = self.settings.inactivity else {
            return;
        };
        let mut silent: Vec<SessionId> = self
            .sessions
            .iter_mut()
            .filter(|(_, s)| !s.inactive_reported && now >= last_rtp(s) + limit)
            .map(|(id, s)| {
                s.inactive_reported = true;
                *id
            })
            .collect();
        silent.sort_unstable();
        self.events
            .extend(silent.into_iter().map(MediaEvent::Inactive));
    }

    /// The next event for the owner.
    pub fn poll_event(&mut self) -> Option<MediaEvent> {
        self.events.pop_front()
    }

    /// Call `id`'s media.
    #[must_use]
    pub fn session(&self, id: SessionId) -> Option<&MediaSession> {
        self.sessions.get(&id)
    }

    /// Sessions open.
    #[must_use]
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no session is open.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Free and total port pairs.
    #[must_use]
    pub fn pool(&self) -> (usize, usize) {
        (self.free.len(), self.total_pairs)
    }

    /// Packets dropped because no session holds their port.
    #[must_use]
    pub fn unknown_port_drops(&self) -> u64 {
        self.unknown_port_drops
    }

    fn slot(&self, port: u16) -> Option<Slot> {
        let i = usize::from(port.checked_sub(self.base)?);
        self.slots.get(i).copied().flatten()
    }

    fn slot_mut(&mut self, port: u16) -> Option<&mut Option<Slot>> {
        let i = usize::from(port.checked_sub(self.base)?);
        self.slots.get_mut(i)
    }

    fn check_pool(&mut self) {
        let low = self.free.len() * 10 < self.total_pairs;
        if low && !self.pool_low {
            self.events.push_back(MediaEvent::PoolLow {
                free: self.free.len(),
                total: self.total_pairs,
            });
        }
        self.pool_low = low;
    }
}

/// The latest RTP on any leg of `s`, or its start.
fn last_rtp(s: &MediaSession) -> Instant {
    s.streams
        .iter()
        .flatten()
        .filter_map(|l| l.last_rtp)
        .max()
        .unwrap_or(s.started)
        .max(s.started)
}

/// Counts an RTP packet: bytes, SSRC, and losses as RFC 3550 (A.3) counts them, packets
/// expected by sequence number minus packets received, so a reordered packet is not a loss.
fn count_rtp(leg: &mut Leg, now: Instant, packet: &[u8]) {
    leg.counters.packets += 1;
    leg.counters.bytes += packet.len() as u64;
    leg.last_rtp = Some(now);
    if packet.len() < 12 || packet[0] >> 6 != 2 {
        return;
    }
    let seq = u16::from_be_bytes([packet[2], packet[3]]);
    let ssrc = u32::from_be_bytes([packet[8], packet[9], packet[10], packet[11]]);
    if leg.counters.ssrc != Some(ssrc) {
        // A new source (or the first packet): its numbering starts here, in the middle of the
        // extended space so that packets just before it still count.
        leg.lost_before = leg.counters.lost;
        leg.counters.ssrc = Some(ssrc);
        leg.base_seq = (1 << 32) + u64::from(seq);
        leg.max_seq = leg.base_seq;
        leg.received = 1;
        return;
    }
    // The extended number nearest the highest seen (a jump of at most half the space).
    let delta = i64::from(seq.wrapping_sub(leg.max_seq as u16) as i16);
    let ext = leg.max_seq.saturating_add_signed(delta);
    leg.max_seq = leg.max_seq.max(ext);
    leg.base_seq = leg.base_seq.min(ext);
    leg.received += 1;
    let expected = leg.max_seq - leg.base_seq + 1;
    leg.counters.lost = leg.lost_before + expected.saturating_sub(leg.received);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> MediaSettings {
        MediaSettings {
            ports: 20_000..=20_019,
            latch_window: Duration::from_secs(10),
            latch_signalled_ip_only: false,
            inactivity: Some(Duration::from_secs(30)),
        }
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    fn rtp(seq: u16, ssrc: u32) -> Vec<u8> {
        let mut p = vec![0u8; 172];
        p[0] = 0x80;
        p[2..4].copy_from_slice(&seq.to_be_bytes());
        p[8..12].copy_from_slice(&ssrc.to_be_bytes());
        p
    }

    /// A call with one stream, both legs signalled: caller at 10.0.0.1:4000, callee at
    /// 10.0.0.2:5000. Returns the table, the start and (caller port, callee port).
    fn call() -> (MediaTable, Instant, u16, u16) {
        let t0 = Instant::now();
        let mut m = MediaTable::new(settings());
        let s = m.open(t0, 1, 1).expect("open");
        let (a, b) = (s.ports(Side::Caller)[0], s.ports(Side::Callee)[0]);
        m.signal(t0, 1, 0, Side::Caller, addr("10.0.0.1:4000"), None)
            .expect("caller sdp");
        m.signal(t0, 1, 0, Side::Callee, addr("10.0.0.2:5000"), None)
            .expect("callee sdp");
        (m, t0, a, b)
    }

    #[test]
    fn media_crosses_from_one_leg_s_port_to_the_other_leg_s_remote() {
        let (mut m, t0, a, b) = call();
        assert_eq!(a % 2, 0);
        assert_ne!(a, b);
        let f = m
            .handle_packet(t0, a, addr("10.0.0.1:4000"), &rtp(1, 7))
            .expect("forwarded");
        assert_eq!(
            f,
            Forward {
                from_port: b,
                to: addr("10.0.0.2:5000")
            }
        );
        let f = m
            .handle_packet(t0, b, addr("10.0.0.2:5000"), &rtp(1, 9))
            .expect("forwarded");
        assert_eq!(
            f,
            Forward {
                from_port: a,
                to: addr("10.0.0.1:4000")
            }
        );
        // RTCP on the next ports.
        let f = m
            .handle_packet(t0, a + 1, addr("10.0.0.1:4001"), &[0x80, 200, 0, 1])
            .expect("rtcp");
        assert_eq!(
            f,
            Forward {
                from_port: b + 1,
                to: addr("10.0.0.2:5001")
            }
        );
        let c = m
            .session(1)
            .and_then(|s| s.counters(0, Side::Caller))
            .expect("counters");
        assert_eq!(
            (c.packets, c.bytes, c.rtcp_packets, c.ssrc),
            (1, 172, 1, Some(7))
        );
    }

    #[test]
    fn a_phone_behind_nat_is_latched_within_the_window_and_a_stranger_after_it_is_dropped() {
        let (mut m, t0, a, b) = call();
        // The caller's packets come from its NAT's address, not the signalled one.
        let nat = addr("203.0.113.5:61000");
        m.handle_packet(t0 + Duration::from_secs(1), a, nat, &rtp(1, 7))
            .expect("latched");
        let s = m.session(1).expect("session");
        assert!(s.is_latched(0, Side::Caller));
        assert_eq!(s.destination(0, Side::Caller), Some(nat));
        // The callee's media now goes to the NAT address (symmetric RTP).
        let f = m
            .handle_packet(
                t0 + Duration::from_secs(1),
                b,
                addr("10.0.0.2:5000"),
                &rtp(1, 9),
            )
            .expect("to the caller");
        assert_eq!(f.to, nat);
        // After the window, another source cannot take the stream over.
        let late = t0 + Duration::from_secs(11);
        assert_eq!(
            m.handle_packet(late, a, addr("198.51.100.66:1234"), &rtp(2, 7)),
            Err(Dropped::Stranger)
        );
        assert_eq!(
            m.session(1).and_then(|s| s.destination(0, Side::Caller)),
            Some(nat)
        );
        assert_eq!(
            m.session(1)
                .and_then(|s| s.counters(0, Side::Caller))
                .map(|c| c.dropped),
            Some(1)
        );
        // A new SDP from the caller (say, a re-INVITE after moving) opens a new window.
        m.signal(late, 1, 0, Side::Caller, addr("10.0.0.9:4000"), None)
            .expect("re-offer");
        let moved = addr("203.0.113.9:62000");
        assert!(m.handle_packet(late, a, moved, &rtp(3, 7)).is_ok());
        assert_eq!(
            m.session(1).and_then(|s| s.destination(0, Side::Caller)),
            Some(moved)
        );
    }

    #[test]
    fn latching_can_be_held_to_the_signalled_ip() {
        let t0 = Instant::now();
        let mut m = MediaTable::new(MediaSettings {
            latch_signalled_ip_only: true,
            ..settings()
        });
        let a = m.open(t0, 1, 1).expect("open").ports(Side::Caller)[0];
        m.signal(t0, 1, 0, Side::Caller, addr("10.0.0.1:4000"), None)
            .expect("sdp");
        m.signal(t0, 1, 0, Side::Callee, addr("10.0.0.2:5000"), None)
            .expect("sdp");
        assert_eq!(
            m.handle_packet(t0, a, addr("203.0.113.5:4000"), &rtp(1, 7)),
            Err(Dropped::Stranger)
        );
        // The signalled IP from another port (a NAT keeping the address) is latched.
        assert!(m
            .handle_packet(t0, a, addr("10.0.0.1:4100"), &rtp(1, 7))
            .is_ok());
    }

    #[test]
    fn losses_are_counted_by_sequence_gaps_across_wrap_and_not_for_reordering() {
        let (mut m, t0, a, _) = call();
        let src = addr("10.0.0.1:4000");
        for seq in [65_533u16, 65_534, 1, 0, 2, 5] {
            let _ = m.handle_packet(t0, a, src, &rtp(seq, 7));
        }
        // 65,535 is missing (0 came late, reordered), then 3 and 4.
        let c = m
            .session(1)
            .and_then(|s| s.counters(0, Side::Caller))
            .expect("counters");
        assert_eq!((c.packets, c.lost), (6, 3));
        // A new SSRC restarts the numbering.
        let _ = m.handle_packet(t0, a, src, &rtp(100, 8));
        let c = m
            .session(1)
            .and_then(|s| s.counters(0, Side::Caller))
            .expect("counters");
        assert_eq!((c.lost, c.ssrc), (3, Some(8)));
    }

    #[test]
    fn silence_on_every_leg_for_the_inactivity_time_is_reported_once() {
        let (mut m, t0, a, b) = call();
        assert_eq!(m.poll_timeout(), Some(t0 + Duration::from_secs(30)));
        let _ = m.handle_packet(
            t0 + Duration::from_secs(20),
            a,
            addr("10.0.0.1:4000"),
            &rtp(1, 7),
        );
        // One leg talking keeps the call alive.
        m.handle_timeout(t0 + Duration::from_secs(40));
        assert_eq!(m.poll_event(), None);
        assert_eq!(m.poll_timeout(), Some(t0 + Duration::from_secs(50)));
        m.handle_timeout(t0 + Duration::from_secs(50));
        assert_eq!(m.poll_event(), Some(MediaEvent::Inactive(1)));
        m.handle_timeout(t0 + Duration::from_secs(90));
        assert_eq!(m.poll_event(), None, "reported once");
        // Media again re-arms it.
        let _ = m.handle_packet(
            t0 + Duration::from_secs(91),
            b,
            addr("10.0.0.2:5000"),
            &rtp(1, 9),
        );
        m.handle_timeout(t0 + Duration::from_secs(121));
        assert_eq!(m.poll_event(), Some(MediaEvent::Inactive(1)));
    }

    #[test]
    fn the_pool_hands_out_even_pairs_refuses_whole_reuses_last_and_warns_when_low() {
        let t0 = Instant::now();
        // 20000..=20019: ten pairs.
        let mut m = MediaTable::new(settings());
        assert_eq!(m.pool(), (10, 10));
        m.open(t0, 1, 2).expect("two streams: four pairs");
        m.open(t0, 2, 2).expect("four more");
        assert_eq!(
            m.open(t0, 3, 2).map(|_| ()),
            Err(MediaError::PoolExhausted { wanted: 4, free: 2 })
        );
        assert_eq!(m.pool(), (2, 10), "a refused open takes nothing");
        assert_eq!(m.open(t0, 1, 1).map(|_| ()), Err(MediaError::Exists(1)));
        m.open(t0, 3, 1).expect("the last two");
        assert_eq!(
            m.poll_event(),
            Some(MediaEvent::PoolLow { free: 0, total: 10 })
        );
        assert_eq!(m.poll_event(), None);
        let first = m.session(1).map(|s| s.ports(Side::Caller)).expect("ports");
        m.close(1).expect("closed");
        // Packets to a closed call's ports are dropped, not sent anywhere.
        assert_eq!(
            m.handle_packet(t0, first[0], addr("10.0.0.1:4000"), &rtp(1, 7)),
            Err(Dropped::UnknownPort)
        );
        assert_eq!(m.unknown_port_drops(), 1);

        // A released pair is reused after every other free one.
        let mut m = MediaTable::new(settings());
        let first = m.open(t0, 1, 1).expect("open").ports(Side::Caller);
        m.close(1).expect("closed");
        for id in 2..=5 {
            let ports = m.open(t0, id, 1).expect("open").ports(Side::Caller);
            assert!(
                !ports.contains(&first[0]),
                "call {id} got the released pair"
            );
        }
    }

    #[test]
    fn a_stream_without_the_other_leg_s_sdp_drops_until_it_arrives() {
        let t0 = Instant::now();
        let mut m = MediaTable::new(settings());
        let a = m.open(t0, 1, 1).expect("open").ports(Side::Caller)[0];
        m.signal(t0, 1, 0, Side::Caller, addr("10.0.0.1:4000"), None)
            .expect("offer");
        assert_eq!(
            m.handle_packet(t0, a, addr("10.0.0.1:4000"), &rtp(1, 7)),
            Err(Dropped::NoDestination)
        );
        assert_eq!(
            m.signal(t0, 9, 0, Side::Callee, addr("10.0.0.2:5000"), None),
            Err(MediaError::Unknown(9))
        );
    }
}
