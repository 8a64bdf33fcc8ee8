//! The media session table (sans-IO): the ports the SBC anchors each call's media on, where
//! each leg's media goes (signalled, then latched), per-stream counters, and the inactivity
//! clock. A thin shell of forwarding threads owns the sockets and asks
//! [`MediaTable::handle_packet`] where each packet goes; time is passed in.
//!
//! A call's media is a [`MediaSession`] of one or more streams (one per `m=` line); a stream
//! has two legs, [`Side::Caller`] and [`Side::Callee`], each with a port pair of its own (RTP
//! even, RTCP the next port) from the pool of its realm (`steering-pool`). A packet received
//! on one leg's port is sent out of the other leg's port of the same stream to that leg's
//! remote address. Pools never overlap, so a port alone names its leg.
//!
//! **Latching** (symmetric RTP, for phones behind NAT): a leg's remote is first what its SDP
//! signalled; the first packet from another source moves it there, but only within
//! [`MediaSettings::latch_window`] of the stream's start or of the leg's latest SDP, and, with
//! [`MediaSettings::latch_signalled_ip_only`], only from the signalled IP address. Outside the
//! window a packet from any other source is dropped and counted: a stranger cannot hijack a
//! call's media by sending to its port. A packet from the expected address closes the window
//! for its channel; one from the signalled address is never a stranger and takes back a leg
//! an earlier source latched (a transferred party's late RTP). A leg whose remote moves
//! raises [`MediaEvent::Latched`] so that its owner replicates the new address.
//!
//! **RTCP** goes from port + 1 to port + 1; a leg that multiplexes (`a=rtcp-mux`, RFC 5761)
//! sends and receives it on its RTP port, told apart from RTP by its packet type, so a muxing
//! leg and a non-muxing one interwork.
//!
//! **Inactivity**: with [`MediaSettings::inactivity`] set, a session from which no RTP arrived
//! on any leg for that long raises [`MediaEvent::Inactive`] once (Oracle's `rtp-inactivity`);
//! the owner ends the call.
//!
//! **The port pools** hand out even ports from their range, reusing a released pair last (a
//! late packet of an ended call does not reach the next one), and raise
//! [`MediaEvent::PoolLow`] when a pool's free pairs fall below a tenth of it.
//!
//! **High availability**: [`MediaTable::record`] is a session as plain data (ports, signalled
//! and latched addresses, SSRCs, counters), replicated with its dialog;
//! [`MediaTable::restore`] claims the same ports on the standby, and
//! [`MediaTable::reopen_latching`] lets the legs latch again after a takeover.
//!
//! The per-packet path ([`MediaTable::handle_packet`]) does not allocate.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use crate::sip::dialog::Side;

/// What the media table needs from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaSettings {
    /// The port range of each pool (RTP on the even ports, RTCP on the next), by pool index;
    /// the ranges do not overlap.
    pub pools: Vec<RangeInclusive<u16>>,
    /// How long after a stream starts (or a new SDP for a leg) its remote may be latched; zero:
    /// never (media goes where the SDP said).
    pub latch_window: Duration,
    /// Latch only to the IP address the leg's SDP signalled (any port).
    pub latch_signalled_ip_only: bool,
    /// No RTP on any leg for this long ends the call (`None`: never).
    pub inactivity: Option<Duration>,
}

/// The caller's identifier of a call's media (the engine's call id).
pub type SessionId = u64;

fn side_index(side: Side) -> usize {
    match side {
        Side::Caller => 0,
        Side::Callee => 1,
    }
}

/// Why the table refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediaError {
    /// Not enough free port pairs in a pool for the streams asked for.
    PoolExhausted {
        /// The pool.
        pool: usize,
        /// Pairs asked for.
        wanted: usize,
        /// Pairs free.
        free: usize,
    },
    /// The session already exists.
    Exists(SessionId),
    /// No such session or stream.
    Unknown(SessionId),
    /// No such pool, or a port outside its pool, or already taken (a restored record).
    BadPort(u16),
}

impl fmt::Display for MediaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PoolExhausted { pool, wanted, free } => write!(
                f,
                "media ports exhausted in pool {pool}: {wanted} pairs wanted, {free} free"
            ),
            Self::Exists(id) => write!(f, "media session {id} exists"),
            Self::Unknown(id) => write!(f, "no media session {id} (or no such stream)"),
            Self::BadPort(p) => write!(f, "media port {p} is not free in any pool"),
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
    /// The other leg has no remote yet (its SDP has not arrived), or holds by address.
    NoDestination,
}

/// What the table tells its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaEvent {
    /// No RTP on any leg of the session for the inactivity time.
    Inactive {
        /// The session.
        id: SessionId,
        /// Its owner (given to [`MediaTable::open`]).
        owner: usize,
    },
    /// A leg of the session latched to a new remote address.
    Latched {
        /// The session.
        id: SessionId,
        /// Its owner.
        owner: usize,
    },
    /// A pool's free port pairs fell below a tenth of it.
    PoolLow {
        /// The pool.
        pool: usize,
        /// Pairs free.
        free: usize,
        /// Pairs in the pool.
        total: usize,
    },
}

/// Counters of one direction of one stream (what a leg sent to the SBC).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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

/// One leg of one stream as plain data: what is replicated to the standby.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegRecord {
    /// The SBC's RTP port for this leg (RTCP: + 1, or the same port when the leg muxes).
    pub port: u16,
    /// Where the leg's SDP said it receives RTP and RTCP.
    pub signalled: Option<(SocketAddr, SocketAddr)>,
    /// Where its media goes now (latched or signalled): RTP and RTCP.
    pub remote: Option<(SocketAddr, SocketAddr)>,
    /// Whether the leg multiplexes RTCP on its RTP port.
    pub mux: bool,
    /// Whether `remote` was latched from the leg's packets.
    pub latched: bool,
    /// What the leg sent so far.
    pub counters: LegCounters,
}

/// A call's media as plain data (see [`MediaTable::record`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaRecord {
    /// The pools of the caller's and the callee's legs.
    pub pools: [usize; 2],
    /// Per stream, the caller's and the callee's leg.
    pub streams: Vec<[LegRecord; 2]>,
}

/// One leg of one stream.
#[derive(Debug, Clone)]
struct Leg {
    /// The SBC's RTP port for this leg (RTCP: + 1, or the same under mux); 0: none (the
    /// stream is rejected, no pair allocated).
    port: u16,
    /// Signalled by the leg's SDP: RTP, and RTCP when not multiplexed (`a=rtcp` or port + 1).
    signalled: Option<SocketAddr>,
    signalled_rtcp: Option<SocketAddr>,
    /// Where media to this leg goes now (RTP and RTCP).
    rtp_to: Option<SocketAddr>,
    rtcp_to: Option<SocketAddr>,
    /// The leg's SDP offered or accepted `a=rtcp-mux`.
    mux_signalled: bool,
    /// RTCP multiplexed on this leg: both legs' SDP said so (RFC 5761: the answer decides).
    mux: bool,
    latch_until: Instant,
    /// One latch per window and channel (RTP, RTCP): the first new source within the window
    /// wins; a later one is a stranger.
    may_latch: [bool; 2],
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
    /// Media to this leg goes to `source` from now on: RTCP's address when `rtcp`, else RTP's,
    /// RTCP following unless the leg's own RTCP packets said otherwise.
    fn move_remote(&mut self, rtcp: bool, source: SocketAddr) {
        if rtcp {
            self.rtcp_to = Some(source);
            return;
        }
        let follows = self.rtcp_to.is_none_or(|r| {
            Some(r) == self.signalled_rtcp
                || Some(r) == self.rtp_to.and_then(|t| self.rtcp_beside(t))
        });
        self.rtp_to = Some(source);
        if follows {
            self.rtcp_to = if Some(source) == self.signalled && !self.mux {
                self.signalled_rtcp
            } else {
                self.rtcp_beside(source)
            };
        }
    }

    /// Where RTCP goes when RTP goes to `rtp`: the same address under mux, else the next port.
    fn rtcp_beside(&self, rtp: SocketAddr) -> Option<SocketAddr> {
        if self.mux {
            Some(rtp)
        } else {
            rtp.port()
                .checked_add(1)
                .map(|p| SocketAddr::new(rtp.ip(), p))
        }
    }

    fn new(port: u16, now: Instant, window: Duration) -> Self {
        Self {
            port,
            signalled: None,
            signalled_rtcp: None,
            rtp_to: None,
            rtcp_to: None,
            mux_signalled: false,
            mux: false,
            latch_until: now + window,
            may_latch: [true, true],
            latched: false,
            last_rtp: None,
            base_seq: 0,
            max_seq: 0,
            received: 0,
            lost_before: 0,
            counters: LegCounters::default(),
        }
    }

    fn record(&self) -> LegRecord {
        LegRecord {
            port: self.port,
            signalled: self.signalled.zip(self.signalled_rtcp),
            remote: self.rtp_to.zip(self.rtcp_to),
            mux: self.mux,
            latched: self.latched,
            counters: self.counters,
        }
    }

    fn restored(r: &LegRecord, now: Instant, window: Duration) -> Self {
        let mut leg = Self::new(r.port, now, window);
        leg.signalled = r.signalled.map(|s| s.0);
        leg.signalled_rtcp = r.signalled.map(|s| s.1);
        leg.rtp_to = r.remote.map(|s| s.0);
        leg.rtcp_to = r.remote.map(|s| s.1);
        leg.mux = r.mux;
        leg.mux_signalled = r.mux;
        leg.latched = r.latched;
        leg.counters = r.counters;
        leg.lost_before = r.counters.lost;
        leg
    }

    /// The SBC's port this leg's RTCP is sent from and received on.
    fn rtcp_port(&self) -> u16 {
        if self.mux {
            self.port
        } else {
            self.port + 1
        }
    }
}

/// A call's media: its streams, each with two legs.
#[derive(Debug, Clone)]
pub struct MediaSession {
    streams: Vec<[Leg; 2]>,
    pools: [usize; 2],
    owner: usize,
    started: Instant,
    inactive_reported: bool,
    /// What ties the call's RTCP to its SIP in a capture (the caller leg's Call-ID), set by
    /// the engine while the trace is on.
    label: Option<Arc<str>>,
}

impl MediaSession {
    /// The SBC's RTP port of `side` for each stream.
    #[must_use]
    pub fn ports(&self, side: Side) -> Vec<u16> {
        self.streams
            .iter()
            .map(|s| s[side_index(side)].port)
            .collect()
    }

    /// Number of streams.
    #[must_use]
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    /// What `side` sent on stream `stream`.
    #[must_use]
    pub fn counters(&self, stream: usize, side: Side) -> Option<LegCounters> {
        self.streams
            .get(stream)
            .map(|s| s[side_index(side)].counters)
    }

    /// Where media to `side` of stream `stream` goes now (after latching).
    #[must_use]
    pub fn destination(&self, stream: usize, side: Side) -> Option<SocketAddr> {
        self.streams
            .get(stream)
            .and_then(|s| s[side_index(side)].rtp_to)
    }

    /// Whether `side`'s remote of stream `stream` was latched (moved by its packets).
    #[must_use]
    pub fn is_latched(&self, stream: usize, side: Side) -> bool {
        self.streams
            .get(stream)
            .is_some_and(|s| s[side_index(side)].latched)
    }

    /// What both legs of every stream sent, summed: `(caller, callee)`.
    #[must_use]
    pub fn totals(&self) -> (LegCounters, LegCounters) {
        let mut t = (LegCounters::default(), LegCounters::default());
        for s in &self.streams {
            for (acc, leg) in [(&mut t.0, &s[0]), (&mut t.1, &s[1])] {
                acc.packets += leg.counters.packets;
                acc.bytes += leg.counters.bytes;
                acc.rtcp_packets += leg.counters.rtcp_packets;
                acc.lost += leg.counters.lost;
                acc.dropped += leg.counters.dropped;
                acc.ssrc = acc.ssrc.or(leg.counters.ssrc);
            }
        }
        t
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

/// One port pool.
#[derive(Debug)]
struct Pool {
    range: RangeInclusive<u16>,
    /// Even ports handed out from the front, returned to the back; may hold ports taken by a
    /// restored session (skipped when reached).
    free: VecDeque<u16>,
    total: usize,
    used: usize,
    low: bool,
}

/// Node-wide media counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MediaStats {
    /// Packets forwarded (RTP and RTCP).
    pub forwarded: u64,
    /// Bytes forwarded.
    pub forwarded_bytes: u64,
    /// Packets to a port no session holds.
    pub unknown_port: u64,
    /// Packets from a stranger after the latch window.
    pub stranger: u64,
    /// Packets for a leg without a destination yet.
    pub no_destination: u64,
    /// Latches (a leg's remote moved by its packets).
    pub latched: u64,
    /// Sessions opened.
    pub opened: u64,
    /// Sessions refused for want of ports.
    pub exhausted: u64,
}

/// Every call's media on one node.
#[derive(Debug)]
pub struct MediaTable {
    settings: MediaSettings,
    pools: Vec<Pool>,
    /// By port - `base`.
    slots: Vec<Option<Slot>>,
    /// By port - `base`: whether the port is in its pool's free list (so it is never there
    /// twice).
    in_free: Vec<bool>,
    base: u16,
    sessions: HashMap<SessionId, MediaSession>,
    events: VecDeque<MediaEvent>,
    stats: MediaStats,
}

/// RFC 5761 §4: on a multiplexed port, a second byte of 192..=223 is RTCP (packet types
/// 192-223, which RTP payload types avoid).
fn is_rtcp(packet: &[u8]) -> bool {
    packet.len() >= 2 && (192..=223).contains(&packet[1])
}

impl MediaTable {
    /// An empty table over `settings.pools`.
    #[must_use]
    pub fn new(settings: MediaSettings) -> Self {
        let base = settings.pools.iter().map(|r| *r.start()).min().unwrap_or(0);
        let top = settings.pools.iter().map(|r| *r.end()).max().unwrap_or(0);
        let pools: Vec<Pool> = settings
            .pools
            .iter()
            .map(|r| {
                let (lo, hi) = (*r.start(), *r.end());
                let first = lo.saturating_add(lo % 2);
                let free: VecDeque<u16> = (first..hi)
                    .step_by(2)
                    .filter(|p| p.checked_add(1).is_some_and(|r| r <= hi))
                    .collect();
                Pool {
                    range: r.clone(),
                    total: free.len(),
                    free,
                    used: 0,
                    low: false,
                }
            })
            .collect();
        let span = if settings.pools.is_empty() {
            0
        } else {
            usize::from(top - base) + 1
        };
        let mut in_free = vec![false; span];
        for p in pools.iter().flat_map(|p: &Pool| p.free.iter()) {
            if let Some(f) = in_free.get_mut(usize::from(p - base)) {
                *f = true;
            }
        }
        Self {
            pools,
            slots: vec![None; span],
            in_free,
            base,
            sessions: HashMap::new(),
            events: VecDeque::new(),
            stats: MediaStats::default(),
            settings,
        }
    }

    /// The settings in force.
    #[must_use]
    pub fn settings(&self) -> &MediaSettings {
        &self.settings
    }

    /// Changes the latching and inactivity settings (`activate-config`); the pools stay (new
    /// pools need a restart, which the caller checks). Latch windows already open keep their
    /// end.
    pub fn set_timing(
        &mut self,
        latch_window: Duration,
        signalled_ip_only: bool,
        inactivity: Option<Duration>,
    ) {
        self.settings.latch_window = latch_window;
        self.settings.latch_signalled_ip_only = signalled_ip_only;
        self.settings.inactivity = inactivity;
    }

    /// Opens the media of call `id`, owned by `owner` (named in its events), with one stream
    /// per entry of `accepted` (one per `m=` line): a port pair per leg for each accepted
    /// stream (none for a rejected one), the caller's from pool `pools[0]` and the callee's
    /// from `pools[1]`.
    ///
    /// # Errors
    /// The session exists, a pool does not exist, or has too few free pairs (nothing is taken
    /// then).
    pub fn open(
        &mut self,
        now: Instant,
        id: SessionId,
        owner: usize,
        pools: [usize; 2],
        accepted: &[bool],
    ) -> Result<&MediaSession, MediaError> {
        if self.sessions.contains_key(&id) {
            return Err(MediaError::Exists(id));
        }
        let wanted = accepted.iter().filter(|a| **a).count();
        self.check_free(pools, wanted)?;
        let session = MediaSession {
            streams: Vec::with_capacity(accepted.len()),
            pools,
            owner,
            started: now,
            inactive_reported: false,
            label: None,
        };
        self.sessions.insert(id, session);
        self.stats.opened += 1;
        self.allocate(now, id, accepted);
        self.sessions.get(&id).ok_or(MediaError::Unknown(id))
    }

    /// Gives call `id`'s media a stream per entry of `accepted` (a re-offer that adds a media
    /// line, or accepts one it had rejected): pairs for the accepted streams that have none;
    /// streams already there keep their ports.
    ///
    /// # Errors
    /// No such session, or too few free pairs (nothing is taken then).
    pub fn extend(
        &mut self,
        now: Instant,
        id: SessionId,
        accepted: &[bool],
    ) -> Result<(), MediaError> {
        let s = self.sessions.get(&id).ok_or(MediaError::Unknown(id))?;
        let wanted = accepted
            .iter()
            .enumerate()
            .filter(|(i, a)| **a && s.streams.get(*i).is_none_or(|l| l[0].port == 0))
            .count();
        let pools = s.pools;
        if wanted > 0 {
            self.check_free(pools, wanted)?;
        }
        self.allocate(now, id, accepted);
        Ok(())
    }

    fn check_free(&mut self, pools: [usize; 2], streams: usize) -> Result<(), MediaError> {
        // Both legs from one pool need twice as many pairs.
        let wanted = if pools[0] == pools[1] {
            streams * 2
        } else {
            streams
        };
        for p in pools {
            let pool = self.pools.get(p).ok_or(MediaError::BadPort(0))?;
            let free = pool.total - pool.used;
            if free < wanted {
                self.stats.exhausted += 1;
                return Err(MediaError::PoolExhausted {
                    pool: p,
                    wanted,
                    free,
                });
            }
        }
        Ok(())
    }

    /// Gives session `id` a stream per entry of `accepted`, with pairs for the accepted ones
    /// that have none (the pools were checked to have them).
    fn allocate(&mut self, now: Instant, id: SessionId, accepted: &[bool]) {
        let window = self.settings.latch_window;
        let Some(pools) = self.sessions.get(&id).map(|s| s.pools) else {
            return;
        };
        for (stream, &wanted) in accepted.iter().enumerate() {
            let have = self.sessions.get(&id).map_or(0, |s| s.streams.len());
            if stream >= have {
                if let Some(s) = self.sessions.get_mut(&id) {
                    s.streams
                        .push([Leg::new(0, now, window), Leg::new(0, now, window)]);
                }
            }
            let unallocated = self
                .sessions
                .get(&id)
                .and_then(|s| s.streams.get(stream))
                .is_some_and(|l| l[0].port == 0);
            if !wanted || !unallocated {
                continue;
            }
            for side in [Side::Caller, Side::Callee] {
                let Some(port) = self.take_free(pools[side_index(side)]) else {
                    continue;
                };
                self.claim(port, id, stream, side);
                if let Some(leg) = self
                    .sessions
                    .get_mut(&id)
                    .and_then(|s| s.streams.get_mut(stream))
                {
                    leg[side_index(side)] = Leg::new(port, now, window);
                }
            }
        }
        for p in pools {
            self.check_pool(p);
        }
    }

    fn take_free(&mut self, pool: usize) -> Option<u16> {
        loop {
            let port = self.pools.get_mut(pool)?.free.pop_front()?;
            if let Some(f) = self.in_free_mut(port) {
                *f = false;
            }
            if self.slot(port).is_none() {
                if let Some(p) = self.pools.get_mut(pool) {
                    p.used += 1;
                }
                return Some(port);
            }
            // Taken by a restored session: skipped.
        }
    }

    /// A leg's SDP said where it receives stream `stream`: RTP at `rtp`, RTCP at `rtcp` when
    /// not multiplexed (`None`: RTP's port + 1), and whether it offers or accepts `rtcp-mux`.
    /// A new address opens a new latch window for that leg; the same SDP again (a 200 after
    /// its 183, a session refresh) changes nothing, so a latched remote stays. RTCP is
    /// multiplexed on a leg only when both legs' SDP say so (RFC 5761: an answer without it
    /// declines the offer's).
    ///
    /// # Errors
    /// No such session or stream.
    #[allow(clippy::too_many_arguments)] // where the stream's media goes, all needed
    pub fn signal(
        &mut self,
        now: Instant,
        id: SessionId,
        stream: usize,
        side: Side,
        rtp: SocketAddr,
        rtcp: Option<SocketAddr>,
        mux: bool,
    ) -> Result<(), MediaError> {
        let window = self.settings.latch_window;
        let session = self.sessions.get_mut(&id).ok_or(MediaError::Unknown(id))?;
        let legs = session
            .streams
            .get_mut(stream)
            .ok_or(MediaError::Unknown(id))?;
        let plain_rtcp = rtcp.or_else(|| {
            rtp.port()
                .checked_add(1)
                .map(|p| SocketAddr::new(rtp.ip(), p))
        });
        let k = side_index(side);
        let leg = &mut legs[k];
        let changed = leg.signalled != Some(rtp)
            || leg.signalled_rtcp != plain_rtcp
            || leg.mux_signalled != mux;
        if changed {
            leg.signalled = Some(rtp);
            leg.signalled_rtcp = plain_rtcp;
            leg.mux_signalled = mux;
            leg.rtp_to = Some(rtp);
            leg.rtcp_to = None;
            leg.latched = false;
            leg.latch_until = now + window;
            leg.may_latch = [true, true];
            session.started = now;
            session.inactive_reported = false;
        }
        for k in 0..2 {
            let other_declines = legs[1 - k].signalled.is_some() && !legs[1 - k].mux_signalled;
            let mux = legs[k].mux_signalled && !other_declines;
            let leg = &mut legs[k];
            if leg.mux != mux || leg.rtcp_to.is_none() {
                leg.mux = mux;
                leg.rtcp_to = if mux { leg.rtp_to } else { leg.signalled_rtcp };
            }
        }
        Ok(())
    }

    /// Starts call `id`'s inactivity clock again from `now` (its owner ignored an
    /// [`MediaEvent::Inactive`]: the call is on hold, or not answered yet).
    pub fn rearm(&mut self, now: Instant, id: SessionId) {
        if let Some(s) = self.sessions.get_mut(&id) {
            s.started = now;
            s.inactive_reported = false;
        }
    }

    /// Ends call `id`'s media: its ports go back to their pools (to be reused last).
    pub fn close(&mut self, id: SessionId) -> Option<MediaSession> {
        let session = self.sessions.remove(&id)?;
        for legs in &session.streams {
            for (i, leg) in legs.iter().enumerate() {
                if leg.port == 0 {
                    continue; // a rejected stream: no pair
                }
                for p in [leg.port, leg.port + 1] {
                    if let Some(s) = self.slot_mut(p) {
                        *s = None;
                    }
                }
                let listed = self
                    .in_free_mut(leg.port)
                    .map(|f| std::mem::replace(f, true));
                if let Some(pool) = self.pools.get_mut(session.pools[i]) {
                    if listed == Some(false) {
                        pool.free.push_back(leg.port);
                    }
                    pool.used = pool.used.saturating_sub(1);
                }
            }
        }
        for p in session.pools {
            self.check_pool(p);
        }
        Some(session)
    }

    /// Ends every session (the node released its media address: the calls go on at the new
    /// active, which claims their ports from their replicas).
    pub fn clear(&mut self) {
        let ids: Vec<SessionId> = self.sessions.keys().copied().collect();
        for id in ids {
            self.close(id);
        }
    }

    /// Call `id`'s media as plain data, for the standby.
    #[must_use]
    pub fn record(&self, id: SessionId) -> Option<MediaRecord> {
        let s = self.sessions.get(&id)?;
        Some(MediaRecord {
            pools: s.pools,
            streams: s
                .streams
                .iter()
                .map(|[a, b]| [a.record(), b.record()])
                .collect(),
        })
    }

    /// Installs call `id`'s media from a replicated record, on the same ports, owned by
    /// `owner`; its legs may latch again for a latch window from `now`. A session already held
    /// is replaced.
    ///
    /// # Errors
    /// A port outside its pool or held by another session (nothing is taken then).
    pub fn restore(
        &mut self,
        now: Instant,
        id: SessionId,
        owner: usize,
        record: &MediaRecord,
    ) -> Result<(), MediaError> {
        let mut seen = Vec::with_capacity(record.streams.len() * 2);
        for legs in &record.streams {
            if legs[0].port == 0 && legs[1].port == 0 {
                continue; // a rejected stream
            }
            for (i, leg) in legs.iter().enumerate() {
                let pool = self
                    .pools
                    .get(record.pools[i])
                    .ok_or(MediaError::BadPort(leg.port))?;
                // Free, or held by the session this record replaces.
                let free = |p: u16| self.slot(p).is_none_or(|s| s.id == id);
                let ok = leg.port % 2 == 0
                    && leg.port < u16::MAX
                    && pool.range.contains(&leg.port)
                    && pool.range.contains(&(leg.port + 1))
                    && free(leg.port)
                    && free(leg.port + 1)
                    && !seen.contains(&leg.port);
                if !ok {
                    return Err(MediaError::BadPort(leg.port));
                }
                seen.push(leg.port);
            }
        }
        self.close(id);
        let window = self.settings.latch_window;
        let mut streams = Vec::with_capacity(record.streams.len());
        for (stream, legs) in record.streams.iter().enumerate() {
            for (i, side) in [Side::Caller, Side::Callee].into_iter().enumerate() {
                let port = legs[i].port;
                if port == 0 {
                    continue;
                }
                self.claim(port, id, stream, side);
                if let Some(p) = self.pools.get_mut(record.pools[i]) {
                    p.used += 1;
                }
            }
            streams.push([
                Leg::restored(&legs[0], now, window),
                Leg::restored(&legs[1], now, window),
            ]);
        }
        self.sessions.insert(
            id,
            MediaSession {
                streams,
                pools: record.pools,
                owner,
                started: now,
                inactive_reported: false,
                label: None,
            },
        );
        for p in record.pools {
            self.check_pool(p);
        }
        Ok(())
    }

    /// Opens a new latch window on every leg of every session (after a takeover: a leg's
    /// address may have changed while no node relayed it).
    pub fn reopen_latching(&mut self, now: Instant) {
        let until = now + self.settings.latch_window;
        for s in self.sessions.values_mut() {
            for leg in s.streams.iter_mut().flatten() {
                leg.latch_until = until;
                leg.may_latch = [true, true];
            }
        }
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
        let r = self.route(now, port, source, packet);
        match r {
            Ok(_) => {
                self.stats.forwarded += 1;
                self.stats.forwarded_bytes += packet.len() as u64;
            }
            Err(Dropped::UnknownPort) => self.stats.unknown_port += 1,
            Err(Dropped::Stranger) => self.stats.stranger += 1,
            Err(Dropped::NoDestination) => self.stats.no_destination += 1,
        }
        r
    }

    fn route(
        &mut self,
        now: Instant,
        port: u16,
        source: SocketAddr,
        packet: &[u8],
    ) -> Result<Forward, Dropped> {
        let slot = self.slot(port).ok_or(Dropped::UnknownPort)?;
        let only_signalled_ip = self.settings.latch_signalled_ip_only;
        let session = self
            .sessions
            .get_mut(&slot.id)
            .ok_or(Dropped::UnknownPort)?;
        let legs = session
            .streams
            .get_mut(slot.stream)
            .ok_or(Dropped::UnknownPort)?;
        let (a, b) = legs.split_at_mut(1);
        let (from, to) = if slot.side == Side::Caller {
            (&mut a[0], &mut b[0])
        } else {
            (&mut b[0], &mut a[0])
        };
        let rtcp = slot.rtcp || (from.mux && is_rtcp(packet));
        let expected = if rtcp { from.rtcp_to } else { from.rtp_to };
        let channel = usize::from(rtcp);
        let signalled = if rtcp && !from.mux {
            from.signalled_rtcp
        } else {
            from.signalled
        };
        if expected == Some(source) {
            // The leg's source is known: nothing else may latch it in this window.
            from.may_latch[channel] = false;
        } else {
            // The leg's own SDP names this source, so it is never a stranger: a leg that
            // latched elsewhere (an earlier remote's late packets, say the transferred party's
            // before its BYE, won the window) returns to it.
            let back_to_signalled = signalled == Some(source);
            if !back_to_signalled {
                let may_latch = from.may_latch[channel]
                    && now < from.latch_until
                    && (!only_signalled_ip || from.signalled.is_none_or(|s| s.ip() == source.ip()));
                if !may_latch {
                    from.counters.dropped += 1;
                    return Err(Dropped::Stranger);
                }
                self.stats.latched += 1;
            }
            from.may_latch[channel] = false;
            from.move_remote(rtcp, source);
            from.latched = !back_to_signalled || from.rtp_to != from.signalled;
            // Every move of a remote is replicated by the owner.
            self.events.push_back(MediaEvent::Latched {
                id: slot.id,
                owner: session.owner,
            });
        }
        if rtcp {
            from.counters.rtcp_packets += 1;
        } else {
            count_rtp(from, now, packet);
            session.inactive_reported = false;
        }
        let dest = if rtcp { to.rtcp_to } else { to.rtp_to };
        match dest {
            Some(to_addr) if !to_addr.ip().is_unspecified() && to_addr.port() != 0 => Ok(Forward {
                from_port: if rtcp { to.rtcp_port() } else { to.port },
                to: to_addr,
            }),
            _ => Err(Dropped::NoDestination),
        }
    }

    /// Labels call `id`'s media with what ties its RTCP to its SIP in a capture.
    pub fn set_label(&mut self, id: SessionId, label: Arc<str>) {
        if let Some(s) = self.sessions.get_mut(&id) {
            s.label = Some(label);
        }
    }

    /// Whether `packet`, received on the SBC's port `port`, is RTCP of a session, and that
    /// session's label: `None` for RTP or a port no session holds.
    #[must_use]
    pub fn rtcp_label(&self, port: u16, packet: &[u8]) -> Option<Option<Arc<str>>> {
        let slot = self.slot(port)?;
        let session = self.sessions.get(&slot.id)?;
        let leg = &session.streams.get(slot.stream)?[side_index(slot.side)];
        (slot.rtcp || (leg.mux && is_rtcp(packet))).then(|| session.label.clone())
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
        let mut silent: Vec<(SessionId, usize)> = self
            .sessions
            .iter_mut()
            .filter(|(_, s)| !s.inactive_reported && now >= last_rtp(s) + limit)
            .map(|(id, s)| {
                s.inactive_reported = true;
                (*id, s.owner)
            })
            .collect();
        silent.sort_unstable();
        self.events.extend(
            silent
                .into_iter()
                .map(|(id, owner)| MediaEvent::Inactive { id, owner }),
        );
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

    /// Every session, by id.
    pub fn sessions(&self) -> impl Iterator<Item = (SessionId, &MediaSession)> {
        self.sessions.iter().map(|(id, s)| (*id, s))
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

    /// Free and total port pairs of pool `pool`.
    #[must_use]
    pub fn pool(&self, pool: usize) -> (usize, usize) {
        self.pools
            .get(pool)
            .map_or((0, 0), |p| (p.total - p.used, p.total))
    }

    /// The table's memory, estimated from what it holds: `(fixed, sessions)` in bytes, the
    /// part sized by the pools (the port index and the free lists) and the part its sessions
    /// take (hash table entries and their streams).
    #[must_use]
    pub fn memory(&self) -> (usize, usize) {
        let fixed = self.slots.capacity() * size_of::<Option<Slot>>()
            + self
                .pools
                .iter()
                .map(|p| p.free.capacity() * size_of::<u16>())
                .sum::<usize>();
        // A hashbrown entry: key, value and one control byte.
        let entry = size_of::<(SessionId, MediaSession)>() + 1;
        let sessions = self.sessions.capacity() * entry
            + self
                .sessions
                .values()
                .map(|s| s.streams.capacity() * size_of::<[Leg; 2]>())
                .sum::<usize>();
        (fixed, sessions)
    }

    /// Node-wide counters.
    #[must_use]
    pub fn stats(&self) -> MediaStats {
        self.stats
    }

    fn slot(&self, port: u16) -> Option<Slot> {
        let i = usize::from(port.checked_sub(self.base)?);
        self.slots.get(i).copied().flatten()
    }

    /// Points RTP port `port` and RTCP port `port + 1` at `side` of stream `stream` of `id`.
    fn claim(&mut self, port: u16, id: SessionId, stream: usize, side: Side) {
        for rtcp in [false, true] {
            if let Some(s) = self.slot_mut(port + u16::from(rtcp)) {
                *s = Some(Slot {
                    id,
                    stream,
                    side,
                    rtcp,
                });
            }
        }
    }

    fn in_free_mut(&mut self, port: u16) -> Option<&mut bool> {
        let i = usize::from(port.checked_sub(self.base)?);
        self.in_free.get_mut(i)
    }

    fn slot_mut(&mut self, port: u16) -> Option<&mut Option<Slot>> {
        let i = usize::from(port.checked_sub(self.base)?);
        self.slots.get_mut(i)
    }

    fn check_pool(&mut self, pool: usize) {
        let Some(p) = self.pools.get_mut(pool) else {
            return;
        };
        let free = p.total - p.used;
        let low = free * 10 < p.total;
        if low && !p.low {
            self.events.push_back(MediaEvent::PoolLow {
                pool,
                free,
                total: p.total,
            });
        }
        p.low = low;
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
            pools: vec![20_000..=20_019],
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
        let s = m.open(t0, 1, 0, [0, 0], &[true; 1]).expect("open");
        let (a, b) = (s.ports(Side::Caller)[0], s.ports(Side::Callee)[0]);
        m.signal(t0, 1, 0, Side::Caller, addr("10.0.0.1:4000"), None, false)
            .expect("caller sdp");
        m.signal(t0, 1, 0, Side::Callee, addr("10.0.0.2:5000"), None, false)
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
    fn rtcp_is_told_from_rtp_with_the_session_s_label() {
        let (mut m, _, a, b) = call();
        assert_eq!(m.rtcp_label(a + 1, &[0x80, 200, 0, 1]), Some(None));
        m.set_label(1, Arc::from("call-1@example.test"));
        assert_eq!(
            m.rtcp_label(b + 1, &[0x80, 201, 0, 1]),
            Some(Some(Arc::from("call-1@example.test")))
        );
        assert_eq!(m.rtcp_label(a, &rtp(1, 7)), None, "RTP is not RTCP");
        assert_eq!(
            m.rtcp_label(1, &[0x80, 200, 0, 1]),
            None,
            "no session's port"
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
        m.signal(late, 1, 0, Side::Caller, addr("10.0.0.9:4000"), None, false)
            .expect("re-offer");
        let moved = addr("203.0.113.9:62000");
        assert!(m.handle_packet(late, a, moved, &rtp(3, 7)).is_ok());
        assert_eq!(
            m.session(1).and_then(|s| s.destination(0, Side::Caller)),
            Some(moved)
        );
    }

    #[test]
    fn the_signalled_remote_wins_back_a_leg_an_earlier_remote_s_late_packets_latched() {
        // A transfer: the callee's SDP moves the leg from bob (10.0.0.2:5000) to carol
        // (10.0.0.3:6000), and bob's RTP goes on until his BYE.
        let (mut m, t0, a, b) = call();
        let (bob, carol) = (addr("10.0.0.2:5000"), addr("10.0.0.3:6000"));
        let later = t0 + Duration::from_secs(20);
        m.signal(later, 1, 0, Side::Callee, carol, None, false)
            .expect("re-signalled");
        while m.poll_event().is_some() {}
        // bob's late packet is first in the new window and latches the leg.
        assert!(m.handle_packet(later, b, bob, &rtp(100, 9)).is_ok());
        // carol's first packet, from the signalled address, moves it back, for RTP and RTCP.
        let f = m
            .handle_packet(later, b, carol, &rtp(1, 11))
            .expect("the signalled source is no stranger");
        assert_eq!(f.to, addr("10.0.0.1:4000"));
        let s = m.session(1).expect("session");
        assert_eq!(s.destination(0, Side::Callee), Some(carol));
        assert!(!s.is_latched(0, Side::Callee));
        assert_eq!(
            m.handle_packet(later, a, addr("10.0.0.1:4000"), &rtp(2, 7))
                .map(|f| f.to),
            Ok(carol)
        );
        assert_eq!(
            m.handle_packet(later, a + 1, addr("10.0.0.1:4001"), &[0x80, 200, 0, 1])
                .map(|f| f.to),
            Ok(addr("10.0.0.3:6001"))
        );
        let moves = std::iter::from_fn(|| m.poll_event())
            .filter(|e| matches!(e, MediaEvent::Latched { .. }))
            .count();
        assert_eq!(moves, 2, "both moves are replicated");
        // bob is a stranger from now on, inside the window as after it.
        for at in [later, later + Duration::from_secs(11)] {
            assert_eq!(
                m.handle_packet(at, b, bob, &rtp(101, 9)),
                Err(Dropped::Stranger)
            );
        }
        assert_eq!(
            m.handle_packet(later, b, carol, &rtp(2, 11)).map(|f| f.to),
            Ok(addr("10.0.0.1:4000"))
        );
    }

    #[test]
    fn a_source_seen_at_the_expected_address_closes_the_latch_window() {
        let (mut m, t0, a, _) = call();
        assert!(m
            .handle_packet(t0, a, addr("10.0.0.1:4000"), &rtp(1, 7))
            .is_ok());
        assert_eq!(
            m.handle_packet(t0, a, addr("203.0.113.66:4000"), &rtp(2, 7)),
            Err(Dropped::Stranger),
            "a stranger inside the window cannot take a leg whose source is known"
        );
    }

    #[test]
    fn latching_can_be_held_to_the_signalled_ip() {
        let t0 = Instant::now();
        let mut m = MediaTable::new(MediaSettings {
            latch_signalled_ip_only: true,
            ..settings()
        });
        let a = m
            .open(t0, 1, 0, [0, 0], &[true; 1])
            .expect("open")
            .ports(Side::Caller)[0];
        m.signal(t0, 1, 0, Side::Caller, addr("10.0.0.1:4000"), None, false)
            .expect("sdp");
        m.signal(t0, 1, 0, Side::Callee, addr("10.0.0.2:5000"), None, false)
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
        assert_eq!(
            m.poll_event(),
            Some(MediaEvent::Inactive { id: 1, owner: 0 })
        );
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
        assert_eq!(
            m.poll_event(),
            Some(MediaEvent::Inactive { id: 1, owner: 0 })
        );
    }

    #[test]
    fn the_pool_hands_out_even_pairs_refuses_whole_reuses_last_and_warns_when_low() {
        let t0 = Instant::now();
        // 20000..=20019: ten pairs.
        let mut m = MediaTable::new(settings());
        assert_eq!(m.pool(0), (10, 10));
        m.open(t0, 1, 0, [0, 0], &[true; 2])
            .expect("two streams: four pairs");
        m.open(t0, 2, 0, [0, 0], &[true; 2]).expect("four more");
        assert_eq!(
            m.open(t0, 3, 0, [0, 0], &[true; 2]).map(|_| ()),
            Err(MediaError::PoolExhausted {
                pool: 0,
                wanted: 4,
                free: 2
            })
        );
        assert_eq!(m.pool(0), (2, 10), "a refused open takes nothing");
        assert_eq!(
            m.open(t0, 1, 0, [0, 0], &[true; 1]).map(|_| ()),
            Err(MediaError::Exists(1))
        );
        m.open(t0, 3, 0, [0, 0], &[true; 1]).expect("the last two");
        assert_eq!(
            m.poll_event(),
            Some(MediaEvent::PoolLow {
                pool: 0,
                free: 0,
                total: 10
            })
        );
        assert_eq!(m.poll_event(), None);
        let first = m.session(1).map(|s| s.ports(Side::Caller)).expect("ports");
        m.close(1).expect("closed");
        // Packets to a closed call's ports are dropped, not sent anywhere.
        assert_eq!(
            m.handle_packet(t0, first[0], addr("10.0.0.1:4000"), &rtp(1, 7)),
            Err(Dropped::UnknownPort)
        );
        assert_eq!(m.stats().unknown_port, 1);

        // A released pair is reused after every other free one.
        let mut m = MediaTable::new(settings());
        let first = m
            .open(t0, 1, 0, [0, 0], &[true; 1])
            .expect("open")
            .ports(Side::Caller);
        m.close(1).expect("closed");
        for id in 2..=5 {
            let ports = m
                .open(t0, id, 0, [0, 0], &[true; 1])
                .expect("open")
                .ports(Side::Caller);
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
        let a = m
            .open(t0, 1, 0, [0, 0], &[true; 1])
            .expect("open")
            .ports(Side::Caller)[0];
        m.signal(t0, 1, 0, Side::Caller, addr("10.0.0.1:4000"), None, false)
            .expect("offer");
        assert_eq!(
            m.handle_packet(t0, a, addr("10.0.0.1:4000"), &rtp(1, 7)),
            Err(Dropped::NoDestination)
        );
        assert_eq!(
            m.signal(t0, 9, 0, Side::Callee, addr("10.0.0.2:5000"), None, false),
            Err(MediaError::Unknown(9))
        );
    }

    #[test]
    fn two_pools_one_per_realm_and_rtcp_mux_only_when_both_legs_say_so() {
        let t0 = Instant::now();
        let mut m = MediaTable::new(MediaSettings {
            pools: vec![20_000..=20_009, 30_000..=30_009],
            ..settings()
        });
        let s = m.open(t0, 1, 3, [0, 1], &[true; 1]).expect("open");
        let (a, b) = (s.ports(Side::Caller)[0], s.ports(Side::Callee)[0]);
        assert!((20_000..=20_009).contains(&a) && (30_000..=30_009).contains(&b));
        assert_eq!((m.pool(0), m.pool(1)), ((4, 5), (4, 5)));
        let sr = [0x80, 200, 0, 6, 0, 0, 0, 7];
        // The caller offers rtcp-mux, the callee accepts it: RTCP on the RTP ports both ways.
        m.signal(t0, 1, 0, Side::Caller, addr("10.0.0.1:4000"), None, true)
            .expect("offer");
        m.signal(t0, 1, 0, Side::Callee, addr("10.0.0.2:5000"), None, true)
            .expect("answer");
        let f = m
            .handle_packet(t0, a, addr("10.0.0.1:4000"), &sr)
            .expect("muxed rtcp");
        assert_eq!((f.from_port, f.to), (b, addr("10.0.0.2:5000")));
        let c = m.session(1).and_then(|s| s.counters(0, Side::Caller));
        assert_eq!(c.map(|c| (c.packets, c.rtcp_packets)), Some((0, 1)));
        // A re-answer without it declines the offer's (RFC 5761): port + 1 on both legs, and
        // the caller's RTCP goes to its own port + 1 (not its RTP port).
        m.signal(t0, 1, 0, Side::Callee, addr("10.0.0.2:5000"), None, false)
            .expect("answer without mux");
        let f = m
            .handle_packet(t0, b + 1, addr("10.0.0.2:5001"), &sr)
            .expect("rtcp on port + 1");
        assert_eq!((f.from_port, f.to), (a + 1, addr("10.0.0.1:4001")));
        assert_eq!(m.stats().forwarded, 2);
    }

    #[test]
    fn a_latch_is_reported_once_and_survives_the_same_sdp_again() {
        let (mut m, t0, a, _) = call();
        let nat = addr("203.0.113.5:61000");
        m.handle_packet(t0, a, nat, &rtp(1, 7)).expect("latched");
        m.handle_packet(t0, a, nat, &rtp(2, 7)).expect("again");
        assert_eq!(
            m.poll_event(),
            Some(MediaEvent::Latched { id: 1, owner: 0 })
        );
        assert_eq!(m.poll_event(), None);
        // The 200 repeats the 183's SDP: the NAT address stays.
        m.signal(t0, 1, 0, Side::Caller, addr("10.0.0.1:4000"), None, false)
            .expect("same sdp");
        assert_eq!(
            m.session(1).and_then(|s| s.destination(0, Side::Caller)),
            Some(nat)
        );
    }

    #[test]
    fn a_record_restores_the_same_ports_and_addresses_on_another_table() {
        let (mut m, t0, a, b) = call();
        let nat = addr("203.0.113.5:61000");
        m.handle_packet(t0, a, nat, &rtp(1, 7)).expect("latched");
        let record = m.record(1).expect("record");
        let mut standby = MediaTable::new(settings());
        let later = t0 + Duration::from_secs(60);
        standby.restore(later, 1, 5, &record).expect("restored");
        assert_eq!(standby.pool(0), (8, 10));
        let f = standby
            .handle_packet(later, b, addr("10.0.0.2:5000"), &rtp(9, 9))
            .expect("forwarded at once");
        assert_eq!((f.from_port, f.to), (a, nat));
        // The restored ports are not handed out again.
        let s = standby.open(later, 2, 5, [0, 0], &[true; 1]).expect("open");
        assert!(!s.ports(Side::Caller).contains(&a) && !s.ports(Side::Callee).contains(&a));
        assert!(!s.ports(Side::Caller).contains(&b) && !s.ports(Side::Callee).contains(&b));
        // A record whose ports are taken is refused whole.
        assert!(matches!(
            standby.restore(later, 3, 5, &record),
            Err(MediaError::BadPort(_))
        ));
        // After the takeover window a caller that moved may latch again.
        standby.reopen_latching(later);
        assert!(standby
            .handle_packet(later, a, addr("203.0.113.9:7000"), &rtp(2, 7))
            .is_ok());
    }

    #[test]
    fn the_first_new_source_in_a_window_wins_and_a_second_is_a_stranger() {
        let (mut m, t0, a, _) = call();
        let nat = addr("203.0.113.5:61000");
        m.handle_packet(t0, a, nat, &rtp(1, 7)).expect("latched");
        // Still inside the window: another source cannot take the leg over.
        assert_eq!(
            m.handle_packet(t0, a, addr("198.51.100.66:1234"), &rtp(2, 7)),
            Err(Dropped::Stranger)
        );
        assert_eq!(
            m.session(1).and_then(|s| s.destination(0, Side::Caller)),
            Some(nat)
        );
        // The same SDP again (a session refresh) opens no new window.
        m.signal(t0, 1, 0, Side::Caller, addr("10.0.0.1:4000"), None, false)
            .expect("same sdp");
        assert_eq!(
            m.handle_packet(t0, a, addr("198.51.100.66:1234"), &rtp(3, 7)),
            Err(Dropped::Stranger)
        );
    }

    #[test]
    fn rejected_streams_take_no_ports_and_a_later_offer_can_accept_them() {
        let t0 = Instant::now();
        let mut m = MediaTable::new(settings());
        let s = m.open(t0, 1, 0, [0, 0], &[false; 16]).expect("open");
        assert_eq!(s.ports(Side::Caller), vec![0; 16]);
        assert_eq!(m.pool(0), (10, 10), "sixteen rejected streams hold nothing");
        m.extend(t0, 1, &[false, true])
            .expect("the second stream accepted");
        assert_eq!(m.pool(0), (8, 10));
        let ports = m.session(1).map(|s| s.ports(Side::Caller)).expect("ports");
        assert_eq!(ports[0], 0);
        assert_ne!(ports[1], 0);
        m.close(1).expect("closed");
        assert_eq!(m.pool(0), (10, 10));
    }

    #[test]
    fn restores_and_closes_never_list_a_port_twice() {
        let (m, t0, _, _) = call();
        let record = m.record(1).expect("record");
        let mut standby = MediaTable::new(settings());
        for _ in 0..100 {
            standby.restore(t0, 1, 0, &record).expect("restored");
            standby.close(1).expect("closed");
        }
        assert_eq!(
            standby.pools[0].free.len(),
            10,
            "{:?}",
            standby.pools[0].free
        );
        assert_eq!(standby.pool(0), (10, 10));
    }

    #[test]
    fn an_ignored_inactivity_report_is_rearmed() {
        let (mut m, t0, _, _) = call();
        m.handle_timeout(t0 + Duration::from_secs(30));
        assert!(matches!(m.poll_event(), Some(MediaEvent::Inactive { .. })));
        // The owner ignored it (the call was ringing): the clock starts again from there.
        m.rearm(t0 + Duration::from_secs(30), 1);
        assert_eq!(m.poll_timeout(), Some(t0 + Duration::from_secs(60)));
        m.handle_timeout(t0 + Duration::from_secs(60));
        assert!(matches!(m.poll_event(), Some(MediaEvent::Inactive { .. })));
    }
}
