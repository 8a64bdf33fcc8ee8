//! The redundancy state machine: sans-IO, time passed in (the shape of `quinn-proto`).
//!
//! Inputs are `handle_*` calls, outputs are drained with `poll_transmit` (heartbeats),
//! `poll` ([`HaEvent`]s) and `poll_timeout` (when to call `handle_timeout` next). Nothing here
//! reads a clock or touches a socket, so the simulation in `tests/sim.rs` drives two machines
//! through thousands of failure schedules on a virtual clock.
//!
//! # Rules
//!
//! * **Liveness.** A path is up while a valid heartbeat arrived on it within the dead time
//!   (advertisement-time × percent-drift / 100); the peer is alive while any path is up.
//! * **Link lost.** When the state-sync connection to the peer breaks (the shell saw EOF or a
//!   reset: [`Redundancy::handle_peer_link_lost`]), the peer is *suspected*: while it is, a
//!   path is up only while a valid heartbeat arrived on it within the **grace**
//!   (advertisement-time × 3/2, at most the dead time), so a peer whose process died (its
//!   kernel closed the connection at once) is declared dead about one advertisement-time after
//!   its last heartbeat instead of after the whole dead time. A living peer keeps sending every
//!   advertisement-time, so the grace keeps it alive, and a valid heartbeat received at least
//!   half an advertisement-time after the loss lifts the suspicion (the connection may break
//!   for other reasons while the peer lives; a heartbeat sent just before the loss may still
//!   be in flight, which is why it takes a later one), and so does a new sync session with the
//!   peer ([`Redundancy::handle_peer_link_up`]: the shell reconnects at once, and a peer that
//!   completes the handshake runs). A peer that stops without its
//!   connection breaking (a hung or stopped process, a cut link) is still declared dead after
//!   the dead time.
//! * **Boot.** `initial` listens for initial-time. A peer already active (or becoming so) makes
//!   it `becoming-standby` at once. Otherwise the election compares, in order: may take over
//!   (eligible and the witness answers it), past its initial state (a node still listening
//!   never outranks one that is ready: it would cost initial-time), health ≥
//!   health-threshold, holds a synchronized
//!   replica, health, lower address. The winner goes `becoming-active`, the loser
//!   `becoming-standby`. A node that hears a peer which has finished its own initial time
//!   (standby-like) elects at once instead of waiting.
//! * **Takeover** by a standby (`standby`, `becoming-standby`, or an eligible
//!   `out-of-service`): when the peer is dead, when the peer relinquishes, or when the peer is
//!   alive but nobody is active and this node wins the comparison above. It goes
//!   `becoming-active` and, after becoming-active-time, `active` with a new epoch
//!   (max of both epochs + 1). A `becoming-active` node that hears an active peer (or a
//!   becoming-active peer that wins the comparison) aborts.
//! * **Planned switchover** is started by the active, never by the standby, so the address is
//!   released before it is taken: the active goes `relinquishing-active` (emitting
//!   [`HaEvent::ReleaseServiceAddress`]) when forced, when asked by the standby's forced
//!   switchover, when its health < health-threshold ≤ a synchronized standby's, or when its
//!   health < emergency-threshold ≤ a standby's that is still starting (`initial` or
//!   `becoming-standby`), and only to a peer that hears it (`FLAG_PEER_ALIVE` in the peer's
//!   heartbeat). It goes `standby` once the peer is becoming active, or back to
//!   `active` as soon as the peer is dead or can no longer take over (ineligible, no witness),
//!   and at the latest if it does not take over within dead time + becoming-active-time.
//!   An unhealthy active whose peer is below the emergency threshold too keeps the role. After
//!   any takeover and after an aborted switchover a node holds the role for dead time +
//!   becoming-active-time before a health rule may hand it over again (so the role never
//!   bounces on at once: a node that takes over and hands back in the same instant leaves the
//!   pair without an active if its peer then fails).
//! * **Ineligible** (`ineligible_until_restart` in [`Health`], sticky): never becomes active;
//!   an active keeps the role only while no peer can take it; otherwise `out-of-service`.
//! * **Sync.** `becoming-standby` must see [`Redundancy::handle_sync_complete`] within
//!   becoming-standby-time, else `out-of-service`.
//!
//! # Why epochs
//!
//! Heartbeat paths fail and heal. While they are cut, each side may believe the other is dead;
//! with a witness only the lease holder serves (see below), but without one a partition leaves
//! two actives for as long as it lasts. When they hear each other again,
//! both must agree at once, without a further exchange, on which one stays. Every takeover
//! increments the epoch (max of both plus one) and heartbeats carry it, so the node that took
//! over last, the one the network most recently moved to, has the higher epoch: the lower
//! epoch yields (equal epochs: the higher address yields). Both sides compute the same answer
//! from the same two numbers. The yielding node keeps its dialogs and both emit
//! [`HaEvent::ExchangeSnapshot`], so the survivor ends up with the union of both tables.
//!
//! # Witness: the active lease
//!
//! With a witness configured ([`crate::witness`] is the arbiter), serving requires the
//! witness's **active lease**, granted to at most one node at a time for the dead time. The
//! machine emits probes ([`Redundancy::poll_witness`]: node, incarnation, epoch, and whether it
//! holds or wants the active role, sealed with a key derived from the shared key) with every heartbeat round, at
//! once when it starts or stops wanting the role, and while it wants the lease without holding
//! it, every advertisement-time / 10 or when the holder's lease should end. It counts a granted
//! lease from when it *sent* the probe, so its lease ends before the witness's does.
//!
//! * **Taking over** (any takeover rule above) needs the lease to be obtainable: held, or no
//!   other holder beyond becoming-active-time, or the peer is heard not holding it (it
//!   relinquished: its release is on its way). The node goes `becoming-active`, keeps asking,
//!   and enters `active` only once it holds the lease (it waits past becoming-active-time for
//!   it if need be). A node told that a live holder renewed goes back (`witness-denied`) and
//!   keeps asking from `standby`, taking over as soon as it is granted. A `relinquishing-active`
//!   node releases its lease; taking the role back needs it again.
//! * **An active that holds the lease** renews it every advertisement-time.
//! * **An active without the lease** (not renewed in time, denied, or the witness down):
//!   - steps down at once (`witness-denied`) if the witness named another holder or the peer
//!     says it holds the lease;
//!   - steps down (`isolated`) if the peer is dead or does not hear it (its heartbeat lacks
//!     "peer alive"): that peer may take over;
//!   - otherwise **keeps serving while the peer hears it**: a peer that hears an active never
//!     takes over, so there is no second active, and an outage of the witness alone does not
//!     stop the service. If the peer is a synchronized standby that still reaches the witness
//!     two advertisement-times after the lease was lost (so the witness is up, only this
//!     node's link to it is not), it hands the role over (planned switchover, `witness-lost`).
//! * **The witness down**: the active keeps serving while heard (above); nobody takes over
//!   (no lease can be granted), so if the active also dies or is cut off, the pair has no
//!   active until the witness returns (it then grants nothing for one lease time: its start-up
//!   quiet period).
//!
//! So, with a witness, two actives can only coexist when one of them serves without a lease
//! while the other heard it a moment ago, and that lasts at most until the lease-less one sees
//! the other's lease or its own peer-dead timer runs out: less than the detection time; the
//! simulation measures none over 20,000 random schedules. A cut of every heartbeat path while
//! both nodes reach the witness leaves the lease holder active and the other in standby.

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tracing::{debug, info};

use crate::crypto::PairKeys;
use crate::settings::{AdminState, RedundancySettings, SettingsError};
use crate::wire::{
    DecodeError, Heartbeat, NodeId, PathId, WitnessAnswer, WitnessProbe, FLAG_INELIGIBLE,
    FLAG_LEASE, FLAG_PEER_ALIVE, FLAG_SWITCHOVER_REQUEST, FLAG_SYNCED, FLAG_WITNESS_OK,
};

/// A redundancy state, named as Oracle names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum State {
    /// Booting: listening for the peer during initial-time.
    Initial,
    /// Decided to take over; waits becoming-active-time, watching for a conflicting active.
    BecomingActive,
    /// Holds the service address and serves.
    Active,
    /// Released the service address in a planned switchover; waits for the peer to take it.
    RelinquishingActive,
    /// Receiving the initial state sync from the active.
    BecomingStandby,
    /// Synchronized (or holding its own replica) and ready to take over.
    Standby,
    /// Cannot take part: sync did not finish in time, or ineligible until restart.
    OutOfService,
}

impl State {
    /// The Oracle name, e.g. `becoming-standby`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Initial => "initial",
            Self::BecomingActive => "becoming-active",
            Self::Active => "active",
            Self::RelinquishingActive => "relinquishing-active",
            Self::BecomingStandby => "becoming-standby",
            Self::Standby => "standby",
            Self::OutOfService => "out-of-service",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a transition happened (logs, `show redundancy`, the redundancy trap).
///
/// `becoming-active` → `active` carries the reason the takeover was decided for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Reason {
    /// Initial-time passed and no peer was heard.
    NoPeer,
    /// The peer is active or becoming active.
    PeerIsActive,
    /// Boot election won (health, then lower address).
    ElectionWon,
    /// Boot election lost.
    ElectionLost,
    /// The peer was declared dead (no valid heartbeat on any path for the dead time).
    PeerDead,
    /// The peer relinquished the active role to us.
    PeerRelinquished,
    /// The peer is alive but not active, and this node is the better candidate.
    NoActive,
    /// Our health fell below health-threshold and the standby's is at or above it.
    HealthBelowThreshold,
    /// Our health fell below emergency-threshold and the standby's is at or above it.
    EmergencyThreshold,
    /// Operator command (`notify berpd force`), here or on the peer.
    Forced,
    /// The peer took the active role after we relinquished it.
    PeerTookOver,
    /// The peer did not take over in time after we relinquished: we took the role back.
    SwitchoverAborted,
    /// Heard an active peer (or a better becoming-active one) while becoming active.
    ConflictingActive,
    /// Two actives heard each other; this one had the lower epoch (or the higher address).
    SplitBrainYield,
    /// Active without the witness lease and without a live peer.
    Isolated,
    /// The witness became unreachable while becoming active (or while a relinquishing node
    /// wanted the role back), or an active lost its lease and hands over to a standby that
    /// reaches the witness.
    WitnessLost,
    /// The witness holds the active lease for the peer: an active without the lease steps
    /// down, a becoming-active node whose lease request met a live holder gives up.
    WitnessDenied,
    /// The initial state sync finished.
    SyncComplete,
    /// The initial state sync did not finish within becoming-standby-time.
    SyncTimeout,
    /// Ineligible until restart (critical-memory rule).
    Ineligible,
}

impl Reason {
    /// A short kebab-case name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoPeer => "no-peer",
            Self::PeerIsActive => "peer-is-active",
            Self::ElectionWon => "election-won",
            Self::ElectionLost => "election-lost",
            Self::PeerDead => "peer-dead",
            Self::PeerRelinquished => "peer-relinquished",
            Self::NoActive => "no-active",
            Self::HealthBelowThreshold => "health-below-threshold",
            Self::EmergencyThreshold => "emergency-threshold",
            Self::Forced => "forced",
            Self::PeerTookOver => "peer-took-over",
            Self::SwitchoverAborted => "switchover-aborted",
            Self::ConflictingActive => "conflicting-active",
            Self::SplitBrainYield => "split-brain-yield",
            Self::Isolated => "isolated",
            Self::WitnessLost => "witness-lost",
            Self::WitnessDenied => "witness-denied",
            Self::SyncComplete => "sync-complete",
            Self::SyncTimeout => "sync-timeout",
            Self::Ineligible => "ineligible",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The node's health as the health module computes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// 0..=100; 100 is healthy (larger values are taken as 100).
    pub score: u8,
    /// Set by the critical-memory rule: never become active again until restarted. Sticky:
    /// once seen, later `false` values do not clear it.
    pub ineligible_until_restart: bool,
}

impl Health {
    /// Full health, eligible.
    pub const FULL: Self = Self {
        score: 100,
        ineligible_until_restart: false,
    };
}

/// What the owner of the machine must do or may want to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HaEvent {
    /// Every state change, with its reason (log it, show it, send the redundancy trap).
    Transition {
        /// The state left.
        from: State,
        /// The state entered.
        to: State,
        /// Why.
        reason: Reason,
    },
    /// Entered `active`: serve, and run the sync server for the standby.
    BecomeActive,
    /// Entered `standby`: do not serve; keep (or start) the sync client toward the active.
    BecomeStandby,
    /// Bind the service address (or run `notify-active`). Always after `BecomeActive`'s
    /// transition and after the peer released it in a planned switchover.
    TakeServiceAddress,
    /// Unbind the service address (or run `notify-standby`) now, before anything else.
    ReleaseServiceAddress,
    /// Entered `becoming-standby`: fetch a full snapshot from the active, then call
    /// [`Redundancy::handle_sync_complete`].
    RequestSnapshot,
    /// Two actives met (healed partition) and this node yielded: run the sync client with
    /// `exchange` set (send our whole table to the active, which merges it, and receive the
    /// union back). The node that stays gets it too when it saw the other active first
    /// (informational: the merge reaches it through its sync server).
    ExchangeSnapshot,
    /// Entered `out-of-service` (run `notify-fault`).
    OutOfService {
        /// Why.
        reason: Reason,
    },
    /// The peer became alive (a valid heartbeat after none).
    PeerAlive,
    /// The peer was declared dead.
    PeerDead,
    /// A heartbeat path came up.
    PathUp(PathId),
    /// A heartbeat path went down (the health module may take points for it).
    PathDown(PathId),
    /// `force_switchover` could not be carried out.
    SwitchoverRefused {
        /// Why not.
        reason: &'static str,
    },
    /// The peer announced a configuration version different from the last one heard.
    PeerConfigVersion(u64),
}

/// A heartbeat to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// The path (socket) to send it from.
    pub path: PathId,
    /// The peer's address on that path.
    pub destination: SocketAddr,
    /// The authenticated datagram.
    pub payload: Vec<u8>,
}

/// A witness probe to send (from any socket: the answer comes back to its source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WitnessTransmit {
    /// The witness's address.
    pub destination: SocketAddr,
    /// The authenticated probe.
    pub payload: Vec<u8>,
}

/// How many recent probes an answer may answer.
const PROBES_KEPT: usize = 16;

/// Counters of received heartbeats, by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Datagrams given to `handle_datagram`.
    pub received: u64,
    /// Heartbeats accepted.
    pub accepted: u64,
    /// Wrong length.
    pub bad_length: u64,
    /// Wrong magic.
    pub bad_magic: u64,
    /// Unsupported version.
    pub bad_version: u64,
    /// MAC mismatch (wrong key or forged).
    pub bad_mac: u64,
    /// Authentic but undecodable.
    pub malformed: u64,
    /// From a node that is not our peer.
    pub unknown_node: u64,
    /// Carrying our own node id (a loop).
    pub own_node: u64,
    /// Received on another path than it claims, or on a path we do not have.
    pub path_mismatch: u64,
    /// Older than the newest seen on that path (or from an older incarnation).
    pub stale: u64,
    /// The same sequence number again on that path.
    pub replayed: u64,
    /// Authentic but not proven fresh: it does not echo this node's current incarnation (sent
    /// before the peer heard this node's restart, or recorded and replayed). A few right after
    /// either node starts are normal; they are not taken as evidence of anything.
    pub unverified: u64,
    /// Heartbeats sent.
    pub sent: u64,
    /// The longest time between two accepted heartbeats of the peer (any path) while it was
    /// alive, in ms: how close the peer came to being declared dead (compare with the dead
    /// time, and with the grace after a sync link loss).
    pub max_gap_ms: u64,
    /// Witness probes sent.
    pub witness_probes: u64,
    /// Witness answers accepted.
    pub witness_answers: u64,
    /// Witness answers dropped: not authentic, not for us, or not answering a recent probe.
    pub witness_dropped: u64,
    /// Witness answers that were challenges: the witness (restarted since) asked this node to
    /// echo its new incarnation before it grants anything.
    pub witness_challenges: u64,
}

/// Why a datagram was not taken as a heartbeat of the peer (each is also counted in
/// [`Counters`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not an authentic heartbeat of this pair.
    #[error("{0}")]
    Decode(DecodeError),
    /// Carries this node's own id (a loop).
    #[error("carries this node's own id")]
    OwnNode,
    /// Authentic, from a node that is not the peer.
    #[error("from a node that is not the peer")]
    UnknownNode,
    /// Received on another path than it claims, or on a path this node does not have.
    #[error("on the wrong path")]
    PathMismatch,
    /// Does not echo this node's current incarnation: sent before the peer heard this node
    /// (re)start, or recorded earlier and replayed.
    #[error("not proven fresh (does not echo this node's incarnation)")]
    Unverified,
    /// The first heartbeat heard of a new incarnation of the peer, not yet echoing ours: the
    /// normal start of an exchange (counted as unverified; this node answers at once).
    #[error("first heartbeat of a new incarnation of the peer (answered)")]
    Introduction,
    /// Older than one already accepted.
    #[error("stale")]
    Stale,
    /// The same one again.
    #[error("replayed")]
    Replayed,
}

/// What we last heard from the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerView {
    /// The peer's id.
    pub node: NodeId,
    /// Its incarnation.
    pub incarnation: u64,
    /// Its state.
    pub state: State,
    /// Its health score.
    pub health: u8,
    /// Its `FLAG_*` bits.
    pub flags: u8,
    /// Its epoch.
    pub epoch: u64,
    /// Its configuration version.
    pub config_version: u64,
    /// Its last sequence number.
    pub seq: u64,
    /// When we accepted that heartbeat.
    pub at: Instant,
}

impl PeerView {
    fn can_take_over(&self) -> bool {
        self.flags & FLAG_INELIGIBLE == 0 && self.flags & FLAG_WITNESS_OK != 0
    }
    /// Able to take over *and* hearing us, so that it will see us relinquish.
    fn can_receive_role(&self) -> bool {
        self.can_take_over() && self.flags & FLAG_PEER_ALIVE != 0
    }
    fn synced(&self) -> bool {
        self.flags & FLAG_SYNCED != 0
    }
    /// The peer holds the witness lease.
    fn holds_lease(&self) -> bool {
        self.flags & FLAG_LEASE != 0
    }
}

/// A snapshot of the machine for `show redundancy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// This node's name.
    pub name: String,
    /// This node's state.
    pub state: State,
    /// Since when.
    pub since: Instant,
    /// This node's epoch.
    pub epoch: u64,
    /// This node's health as given.
    pub health: Health,
    /// Whether it holds a complete replica.
    pub synced: bool,
    /// The witness: `None` if none is configured, else whether it answered within the dead
    /// time.
    pub witness: Option<bool>,
    /// The witness lease: `None` if no witness is configured, else whether this node holds it.
    pub lease: Option<bool>,
    /// Whether the peer is alive.
    pub peer_alive: bool,
    /// Whether the peer is suspected: its sync link broke and no heartbeat lifted it since
    /// (see the module docs' "Link lost").
    pub peer_suspected: bool,
    /// What was last heard from the peer.
    pub peer: Option<PeerView>,
    /// Per path: up or down.
    pub paths_up: Vec<bool>,
    /// The last transition.
    pub last_transition: Option<(State, State, Reason)>,
    /// Heartbeat counters.
    pub counters: Counters,
}

#[derive(Debug, Clone, Default)]
struct PathState {
    last_rx: Option<Instant>,
    up: bool,
    /// Newest (incarnation, seq) accepted on this path.
    newest: Option<(u64, u64)>,
}

/// The redundancy state machine of one node. See the module docs for the rules.
#[derive(Debug)]
pub struct Redundancy {
    name: String,
    local: NodeId,
    peer: NodeId,
    local_lower: bool,
    destinations: Vec<SocketAddr>,
    keys: PairKeys,
    enabled: bool,
    adv: Duration,
    dead: Duration,
    /// Liveness window while the peer is suspected (its sync link broke).
    grace: Duration,
    initial: Duration,
    becoming_active: Duration,
    becoming_standby: Duration,
    health_threshold: u8,
    emergency_threshold: u8,
    witness_configured: bool,
    witness_addr: Option<SocketAddr>,

    incarnation: u64,
    start: Instant,
    state: State,
    since: Instant,
    deadline: Option<Instant>,
    takeover_why: Reason,
    epoch: u64,
    health: Health,
    ineligible: bool,
    /// The witness answered within the dead time (refreshed at every evaluation).
    witness_ok: bool,
    /// When the last accepted witness answer arrived.
    witness_heard: Option<Instant>,
    /// Our lease ends (by our clock: from when the granted probe was sent).
    lease_until: Option<Instant>,
    /// The witness said another node holds the lease, until about then.
    other_lease_until: Option<Instant>,
    /// Since when this node is active without the lease.
    lease_lost_at: Option<Instant>,
    /// Recent probes: (seq, sent at, want).
    probes: VecDeque<(u64, Instant, bool)>,
    probe_seq: u64,
    /// Newest probe seq answered.
    answered_seq: u64,
    next_probe: Instant,
    /// Set by `step`: not active, but would take over if the witness granted the lease.
    want_role: bool,
    /// What the probes say: holds or wants the active role.
    wants_lease: bool,
    synced: bool,
    config_version: u64,

    seq: u64,
    next_heartbeat: Instant,
    round: Option<usize>,
    buf: Vec<u8>,

    paths: Vec<PathState>,
    /// Newest (incarnation, seq) of any authentic heartbeat from the peer, proven fresh or not:
    /// where `peer_incarnation` is learnt from.
    peer_newest: Option<(u64, u64)>,
    /// The peer's incarnation as last heard: echoed in our heartbeats (0: not heard yet).
    peer_incarnation: u64,
    /// The witness's incarnation as last heard: echoed in our probes (0: not heard yet).
    witness_incarnation: u64,
    peer_view: Option<PeerView>,
    peer_alive: bool,
    /// Since when the peer is suspected (its sync link broke and no heartbeat lifted it).
    link_lost_at: Option<Instant>,
    /// When the last heartbeat of the living peer was accepted (for `max_gap_ms`).
    last_accepted: Option<Instant>,
    request_until: Option<Instant>,
    split_notified: bool,
    hold_role_until: Option<Instant>,
    last_transition: Option<(State, State, Reason)>,
    events: VecDeque<HaEvent>,
    counters: Counters,
}

impl Redundancy {
    /// A machine for the node named `local` in `config`, booting at `now` in `initial`.
    ///
    /// `incarnation` must grow across restarts of this node (the shell uses the boot time in
    /// microseconds since the Unix epoch) so that the peer does not take the restarted
    /// sequence numbers for replays.
    ///
    /// # Errors
    /// The configuration does not validate for `local`.
    pub fn new(
        config: &RedundancySettings,
        local: &str,
        incarnation: u64,
        now: Instant,
    ) -> Result<Self, SettingsError> {
        let (me, mate) = config.validated_pair(local)?;
        // Canonical addresses (crate::addr): both nodes order the same pair the same way
        // however each spells an address, and heartbeats go to the plain IPv4 address.
        let first = |p: &crate::PeerSettings| crate::addr::canonical(p.destinations[0]);
        let local_lower = (first(me), &me.name) < (first(mate), &mate.name);
        let n = me.destinations.len();
        Ok(Self {
            name: local.to_owned(),
            local: NodeId::from_name(&me.name),
            peer: NodeId::from_name(&mate.name),
            local_lower,
            destinations: mate
                .destinations
                .iter()
                .copied()
                .map(crate::addr::canonical)
                .collect(),
            keys: PairKeys::derive(config.shared_key.as_bytes()),
            enabled: config.state == AdminState::Enabled,
            adv: config.advertisement_time,
            dead: config.dead_time(),
            grace: config.link_lost_grace(),
            initial: config.initial_time,
            becoming_active: config.becoming_active_time,
            becoming_standby: config.becoming_standby_time,
            health_threshold: config.health_threshold,
            emergency_threshold: config.emergency_threshold,
            witness_configured: config.witness.is_some(),
            witness_addr: config.witness.map(crate::addr::canonical),
            // 0 is what an echo says before anything was heard: never an incarnation.
            incarnation: incarnation.max(1),
            start: now,
            state: State::Initial,
            since: now,
            deadline: Some(now + config.initial_time),
            takeover_why: Reason::NoPeer,
            epoch: 0,
            health: Health::FULL,
            ineligible: false,
            witness_ok: false,
            witness_heard: None,
            lease_until: None,
            other_lease_until: None,
            lease_lost_at: None,
            probes: VecDeque::with_capacity(PROBES_KEPT),
            probe_seq: 0,
            answered_seq: 0,
            next_probe: now,
            want_role: false,
            wants_lease: false,
            synced: false,
            config_version: 0,
            seq: 0,
            next_heartbeat: now,
            round: None,
            buf: Vec::with_capacity(128),
            paths: vec![PathState::default(); n],
            peer_newest: None,
            peer_incarnation: 0,
            witness_incarnation: 0,
            peer_view: None,
            peer_alive: false,
            link_lost_at: None,
            last_accepted: None,
            request_until: None,
            split_notified: false,
            hold_role_until: None,
            last_transition: None,
            events: VecDeque::new(),
            counters: Counters::default(),
        })
    }

    // ---- getters ----

    /// The current state.
    #[must_use]
    pub fn state(&self) -> State {
        self.state
    }

    /// The current epoch.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// This node's id on the wire.
    #[must_use]
    pub fn node_id(&self) -> NodeId {
        self.local
    }

    /// The peer's id on the wire.
    #[must_use]
    pub fn peer_id(&self) -> NodeId {
        self.peer
    }

    /// Whether the peer is alive.
    #[must_use]
    pub fn peer_alive(&self) -> bool {
        self.peer_alive
    }

    /// What was last heard from the peer.
    #[must_use]
    pub fn peer(&self) -> Option<&PeerView> {
        self.peer_view.as_ref()
    }

    /// Whether this node is ineligible until restart.
    #[must_use]
    pub fn ineligible(&self) -> bool {
        self.ineligible
    }

    /// Heartbeat counters.
    #[must_use]
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The number of heartbeat paths.
    #[must_use]
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }

    /// A snapshot for `show redundancy`.
    #[must_use]
    pub fn status(&self) -> Status {
        Status {
            name: self.name.clone(),
            state: self.state,
            since: self.since,
            epoch: self.epoch,
            health: Health {
                score: self.health.score,
                ineligible_until_restart: self.ineligible,
            },
            synced: self.synced,
            witness: self.witness_configured.then_some(self.witness_ok),
            lease: self
                .witness_configured
                .then_some(self.lease_until.is_some()),
            peer_alive: self.peer_alive,
            peer_suspected: self.link_lost_at.is_some(),
            peer: self.peer_view,
            paths_up: self.paths.iter().map(|p| p.up).collect(),
            last_transition: self.last_transition,
            counters: self.counters,
        }
    }

    // ---- input ----

    /// Decodes a datagram received on `path` with the shared key and handles it; bad
    /// datagrams are counted and dropped. Returns the decode error, if any, for logging.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        path: PathId,
        datagram: &[u8],
    ) -> Result<(), Refused> {
        self.counters.received += 1;
        match Heartbeat::decode(&self.keys, datagram) {
            Ok(hb) => self.handle_heartbeat(now, path, hb),
            Err(e) => {
                match e {
                    DecodeError::BadLength => self.counters.bad_length += 1,
                    DecodeError::BadMagic => self.counters.bad_magic += 1,
                    DecodeError::BadVersion(_) => self.counters.bad_version += 1,
                    DecodeError::BadMac => self.counters.bad_mac += 1,
                    DecodeError::Malformed => self.counters.malformed += 1,
                }
                Err(Refused::Decode(e))
            }
        }
    }

    /// Handles an authenticated heartbeat received on `path`. Heartbeats from another node,
    /// on the wrong path, not proven fresh, stale or replayed are counted and dropped.
    ///
    /// # Errors
    /// Why the heartbeat was dropped (for the shell's log; it is counted here).
    pub fn handle_heartbeat(
        &mut self,
        now: Instant,
        path: PathId,
        hb: Heartbeat,
    ) -> Result<(), Refused> {
        if hb.node == self.local {
            self.counters.own_node += 1;
            return Err(Refused::OwnNode);
        }
        if hb.node != self.peer {
            self.counters.unknown_node += 1;
            return Err(Refused::UnknownNode);
        }
        let idx = usize::from(path.0);
        if hb.path != path || idx >= self.paths.len() {
            self.counters.path_mismatch += 1;
            return Err(Refused::PathMismatch);
        }
        let key = (hb.incarnation, hb.seq);
        // Learn the peer's incarnation from any authentic heartbeat newer than all before (a
        // replay of an older one teaches nothing), and answer a new one at once so the peer
        // sees its echo without waiting for the next round.
        let mut introduced = false;
        if self.peer_newest.is_none_or(|n| key > n) {
            self.peer_newest = Some(key);
            if hb.incarnation != self.peer_incarnation {
                self.peer_incarnation = hb.incarnation;
                self.next_heartbeat = self.next_heartbeat.min(now);
                introduced = true;
            }
        }
        if hb.echo != self.incarnation {
            self.counters.unverified += 1;
            return Err(if introduced {
                Refused::Introduction
            } else {
                Refused::Unverified
            });
        }
        if self
            .peer_view
            .is_some_and(|v| hb.incarnation < v.incarnation)
        {
            self.counters.stale += 1;
            return Err(Refused::Stale);
        }
        let ps = &mut self.paths[idx];
        match ps.newest {
            Some(n) if key == n => {
                self.counters.replayed += 1;
                return Err(Refused::Replayed);
            }
            Some(n) if key < n => {
                self.counters.stale += 1;
                return Err(Refused::Stale);
            }
            _ => {}
        }
        ps.newest = Some(key);
        ps.last_rx = Some(now);
        self.counters.accepted += 1;
        if let Some(t) = self.last_accepted.filter(|_| self.peer_alive) {
            let gap =
                u64::try_from(now.saturating_duration_since(t).as_millis()).unwrap_or(u64::MAX);
            self.counters.max_gap_ms = self.counters.max_gap_ms.max(gap);
        }
        self.last_accepted = Some(now);
        if self.link_lost_at.is_some_and(|t| now >= t + self.adv / 2) {
            info!(node = %self.name, "sync link lost but the peer's heartbeats go on: suspicion lifted");
            self.link_lost_at = None;
        }
        if !ps.up {
            ps.up = true;
            self.events.push_back(HaEvent::PathUp(path));
        }
        if !self.peer_alive {
            self.peer_alive = true;
            debug!(node = %self.name, "peer alive");
            self.events.push_back(HaEvent::PeerAlive);
        }
        let newer = self.peer_view.is_none_or(|v| key > (v.incarnation, v.seq));
        if newer {
            if self
                .peer_view
                .is_none_or(|v| v.config_version != hb.config_version)
            {
                self.events
                    .push_back(HaEvent::PeerConfigVersion(hb.config_version));
            }
            self.peer_view = Some(PeerView {
                node: hb.node,
                incarnation: hb.incarnation,
                state: hb.state,
                health: hb.health.min(100),
                flags: hb.flags,
                epoch: hb.epoch,
                config_version: hb.config_version,
                seq: hb.seq,
                at: now,
            });
            if !matches!(
                self.state,
                State::Active | State::RelinquishingActive | State::BecomingActive
            ) {
                self.epoch = self.epoch.max(hb.epoch);
            }
        }
        self.evaluate(now);
        Ok(())
    }

    /// The health module's new score.
    pub fn handle_health(&mut self, now: Instant, health: Health) {
        let before = (self.health.score, self.ineligible);
        self.health = Health {
            score: health.score.min(100),
            ..health
        };
        if health.ineligible_until_restart && !self.ineligible {
            info!(node = %self.name, "ineligible to become active until restart");
            self.ineligible = true;
        }
        if before != (self.health.score, self.ineligible) {
            // Tell the peer at once: its decisions depend on our score.
            self.next_heartbeat = now;
        }
        self.evaluate(now);
    }

    /// Decodes a datagram from the witness with the shared key and handles it as an answer;
    /// bad datagrams are counted and dropped.
    ///
    /// # Errors
    /// The datagram is not an authentic witness answer.
    pub fn handle_witness_datagram(
        &mut self,
        now: Instant,
        datagram: &[u8],
    ) -> Result<(), DecodeError> {
        match WitnessAnswer::decode(&self.keys, datagram) {
            Ok(a) => {
                self.handle_witness(now, &a);
                Ok(())
            }
            Err(e) => {
                self.counters.witness_dropped += 1;
                Err(e)
            }
        }
    }

    /// Handles an authenticated witness answer (ignored when no witness is configured). It must
    /// answer one of our recent probes, newer than any answer seen: a granted answer gives us
    /// the lease until the probe's *send* time plus the dead time; a denied one takes it away
    /// and tells who holds it and for how long.
    pub fn handle_witness(&mut self, now: Instant, answer: &WitnessAnswer) {
        if !self.witness_configured
            || answer.node != self.local
            || answer.incarnation != self.incarnation
            || answer.seq <= self.answered_seq
        {
            self.counters.witness_dropped += 1;
            return;
        }
        let Some(&(_, sent, _)) = self.probes.iter().find(|p| p.0 == answer.seq) else {
            self.counters.witness_dropped += 1;
            return;
        };
        self.counters.witness_answers += 1;
        self.answered_seq = answer.seq;
        self.probes.retain(|p| p.0 > answer.seq);
        self.witness_heard = Some(now);
        if answer.witness != self.witness_incarnation {
            // A witness we had not heard (or one that restarted): its answer to a probe that did
            // not echo it is a challenge. Echo it at once.
            self.witness_incarnation = answer.witness;
            self.counters.witness_challenges += 1;
            self.next_probe = now;
        }
        let remaining = Duration::from_millis(u64::from(answer.remaining_ms));
        if answer.granted {
            let until = sent + self.dead;
            if self.lease_until.is_none() {
                debug!(node = %self.name, "witness lease granted");
            }
            self.lease_until = Some(self.lease_until.map_or(until, |t| t.max(until)));
            self.other_lease_until = None;
        } else {
            if self.lease_until.take().is_some() {
                info!(node = %self.name, holder = ?answer.holder, "witness lease lost");
            }
            self.other_lease_until = answer
                .holder
                .filter(|h| *h != self.local)
                .map(|_| now + remaining);
        }
        self.evaluate(now);
    }

    /// The owner knows the witness is gone: forget its answers now (no lease, unreachable)
    /// instead of waiting for the lease to run out. Ignored when no witness is configured.
    pub fn handle_witness_lost(&mut self, now: Instant) {
        if self.witness_configured {
            self.witness_heard = None;
            self.lease_until = None;
            self.other_lease_until = None;
            self.evaluate(now);
        }
    }

    /// Whether this node holds the witness lease at `now` (false when no witness is configured).
    #[must_use]
    pub fn holds_lease(&self, now: Instant) -> bool {
        self.lease_until.is_some_and(|t| now < t)
    }

    /// The initial state sync finished: `becoming-standby` (or an eligible `out-of-service`)
    /// becomes `standby`.
    pub fn handle_sync_complete(&mut self, now: Instant) {
        match self.state {
            State::BecomingStandby => {
                self.synced = true;
                self.go(now, State::Standby, Reason::SyncComplete);
            }
            State::OutOfService if !self.ineligible => {
                self.synced = true;
                self.go(now, State::Standby, Reason::SyncComplete);
            }
            State::Standby => self.synced = true,
            _ => {}
        }
        self.evaluate(now);
    }

    /// Sets the configuration version announced in heartbeats.
    pub fn set_config_version(&mut self, version: u64) {
        self.config_version = version;
    }

    /// `notify berpd force`: on the active, relinquish to a synchronized standby; on a
    /// standby, ask the active (through the heartbeat) to do so. A refusal is returned with
    /// its reason and reported as [`HaEvent::SwitchoverRefused`]; these are the only
    /// preconditions (the shell does not check its own).
    ///
    /// # Errors
    /// Why the switchover is refused: the peer is not heard or not a synchronized standby,
    /// may not take over, or this node is neither active nor standby.
    pub fn force_switchover(&mut self, now: Instant) -> Result<(), &'static str> {
        let refusal = match self.state {
            State::Active => match self.peer_alive.then_some(self.peer_view).flatten() {
                None => Some("the peer is not heard"),
                Some(p) if p.state != State::Standby || !p.synced() => {
                    Some("the peer is not a synchronized standby")
                }
                Some(p) if !p.can_receive_role() => {
                    Some("the peer may not take over (ineligible, no witness, or does not hear us)")
                }
                Some(_) => {
                    self.relinquish(now, Reason::Forced);
                    None
                }
            },
            State::Standby if self.can_take_over() && self.peer_alive => {
                self.request_until = Some(now + self.dead);
                self.next_heartbeat = now;
                None
            }
            State::Standby => Some("this node may not take over or the peer is not heard"),
            _ => Some("this node is neither active nor standby"),
        };
        match refusal {
            None => Ok(()),
            Some(reason) => {
                self.refuse(reason);
                Err(reason)
            }
        }
    }

    /// The state-sync connection with the peer broke: the peer closed it or its kernel reset
    /// it (a process that dies has its sockets closed at once). The peer is suspected: it is
    /// declared dead if no valid heartbeat arrives within the grace (advertisement-time × 3/2,
    /// at most the dead time) of the last one, at once if that is already past; a valid
    /// heartbeat received half an advertisement-time or more after now lifts the suspicion.
    /// Ignored while the peer is not alive. Only a connection that was established counts: a
    /// refused or failed connect says nothing about a process that was never heard on it.
    pub fn handle_peer_link_lost(&mut self, now: Instant) {
        if !self.peer_alive {
            return;
        }
        if self.link_lost_at.is_none() {
            info!(node = %self.name, grace_ms = u64::try_from(self.grace.as_millis()).unwrap_or(u64::MAX), "sync link with the peer lost: peer suspected");
        }
        self.link_lost_at = Some(now);
        self.handle_timeout(now);
    }

    /// A state-sync session with the peer was established again (it answered the handshake,
    /// so its process runs): the suspicion of [`Self::handle_peer_link_lost`] is lifted at once,
    /// and the dead time applies again.
    pub fn handle_peer_link_up(&mut self, now: Instant) {
        if self.link_lost_at.take().is_some() {
            info!(node = %self.name, "sync link with the peer back: suspicion lifted");
        }
        self.evaluate(now);
    }

    /// Whether the peer is suspected (its sync link broke and no heartbeat since lifted it).
    #[must_use]
    pub fn peer_suspected(&self) -> bool {
        self.link_lost_at.is_some()
    }

    /// How long a path stays up after its last valid heartbeat: the grace while the peer is
    /// suspected, else the dead time.
    fn liveness_window(&self) -> Duration {
        if self.link_lost_at.is_some() {
            self.grace
        } else {
            self.dead
        }
    }

    /// Paths whose last heartbeat is older than the liveness window go down; the peer is dead
    /// when every path is.
    fn check_liveness(&mut self, now: Instant) {
        let window = self.liveness_window();
        for (i, ps) in self.paths.iter_mut().enumerate() {
            if ps.up && ps.last_rx.is_some_and(|t| now >= t + window) {
                ps.up = false;
                self.events.push_back(HaEvent::PathDown(PathId(
                    u8::try_from(i).unwrap_or(u8::MAX),
                )));
            }
        }
        if self.peer_alive && self.paths.iter().all(|p| !p.up) {
            self.peer_alive = false;
            self.split_notified = false;
            if self.link_lost_at.take().is_some() {
                info!(node = %self.name, "peer dead (sync link lost, no heartbeat within the grace)");
            } else {
                info!(node = %self.name, "peer dead");
            }
            self.events.push_back(HaEvent::PeerDead);
        }
    }

    /// Processes expired timers: path and peer liveness, state deadlines.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.check_liveness(now);
        if self.request_until.is_some_and(|t| now >= t) {
            self.request_until = None;
        }
        if self.hold_role_until.is_some_and(|t| now >= t) {
            self.hold_role_until = None;
        }
        self.evaluate(now);
    }

    // ---- output ----

    /// The next heartbeat to send, if one is due: one per path every advertisement-time, and
    /// at once after a state change. Call until `None`.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if !self.enabled {
            return None;
        }
        let i = match self.round {
            Some(i) => i,
            None if now >= self.next_heartbeat => {
                self.next_heartbeat = now + self.adv;
                // Probe the witness with every heartbeat round, so that the lease and the
                // peer's liveness run out together when the node dies.
                self.next_probe = self.next_probe.min(now);
                0
            }
            None => return None,
        };
        self.round = (i + 1 < self.paths.len()).then_some(i + 1);
        self.seq += 1;
        let mut flags = 0;
        if self.ineligible {
            flags |= FLAG_INELIGIBLE;
        }
        if self.witness_allows() {
            flags |= FLAG_WITNESS_OK;
        }
        if self.holds_lease(now) {
            flags |= FLAG_LEASE;
        }
        if self.request_until.is_some() && self.state == State::Standby {
            flags |= FLAG_SWITCHOVER_REQUEST;
        }
        if self.synced {
            flags |= FLAG_SYNCED;
        }
        if self.peer_alive {
            flags |= FLAG_PEER_ALIVE;
        }
        let path = PathId(u8::try_from(i).unwrap_or(u8::MAX));
        let hb = Heartbeat {
            node: self.local,
            incarnation: self.incarnation,
            echo: self.peer_incarnation,
            state: self.state,
            health: self.effective_health(),
            flags,
            seq: self.seq,
            config_version: self.config_version,
            epoch: self.epoch,
            path,
            timestamp_ms: u64::try_from(now.saturating_duration_since(self.start).as_millis())
                .unwrap_or(u64::MAX),
        };
        hb.encode(&self.keys, &mut self.buf).ok()?;
        self.counters.sent += 1;
        Some(Transmit {
            path,
            destination: self.destinations[i],
            payload: self.buf.clone(),
        })
    }

    /// The next witness probe to send, if one is due (none when no witness is configured):
    /// with every heartbeat round, at once when this node starts or stops wanting the active
    /// role, and while it wants the lease but does not hold it (or its renewal is overdue)
    /// every advertisement-time / 10, or when the holder's lease should run out.
    #[must_use]
    pub fn poll_witness(&mut self, now: Instant) -> Option<WitnessTransmit> {
        let destination = self.witness_addr?;
        if !self.enabled || now < self.next_probe {
            return None;
        }
        self.probe_seq += 1;
        let want = self.wants_lease;
        let probe = WitnessProbe {
            node: self.local,
            incarnation: self.incarnation,
            echo: self.witness_incarnation,
            seq: self.probe_seq,
            epoch: self.epoch,
            want,
            lease_ms: u32::try_from(self.dead.as_millis()).unwrap_or(u32::MAX),
        };
        let mut payload = Vec::with_capacity(96);
        probe.encode(&self.keys, &mut payload).ok()?;
        if self.probes.len() == PROBES_KEPT {
            self.probes.pop_front();
        }
        self.probes.push_back((self.probe_seq, now, want));
        self.counters.witness_probes += 1;
        self.next_probe = now + self.probe_interval(now);
        Some(WitnessTransmit {
            destination,
            payload,
        })
    }

    fn probe_interval(&self, now: Instant) -> Duration {
        let fast = (self.adv / 10).max(Duration::from_millis(5));
        if !self.wants_lease {
            return self.adv;
        }
        match self.lease_until {
            Some(t) if t > now + self.adv => self.adv,
            Some(_) => fast,
            None => {
                let releasing = self.alive_peer().is_some_and(|p| !p.holds_lease());
                match self.other_lease_until {
                    Some(t) if t > now && !releasing => {
                        (t - now + Duration::from_millis(1)).min(self.adv)
                    }
                    _ => fast,
                }
            }
        }
    }

    /// When `handle_timeout` must be called next (at the latest).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = if self.round.is_some() {
            self.start.max(self.since)
        } else {
            self.next_heartbeat
        };
        if !self.enabled {
            t = self.start + Duration::from_secs(3600);
        }
        let mut consider = |x: Option<Instant>| {
            if let Some(x) = x {
                t = t.min(x);
            }
        };
        consider(self.deadline);
        consider(self.request_until);
        consider(self.hold_role_until);
        if self.witness_configured && self.enabled {
            consider(Some(self.next_probe));
            consider(self.lease_until);
            consider(self.other_lease_until);
            if self.witness_ok {
                consider(self.witness_heard.map(|t| t + self.dead));
            }
        }
        let window = self.liveness_window();
        for p in &self.paths {
            if p.up {
                consider(p.last_rx.map(|r| r + window));
            }
        }
        Some(t)
    }

    /// The next event, if any.
    #[must_use]
    pub fn poll(&mut self) -> Option<HaEvent> {
        self.events.pop_front()
    }

    // ---- rules ----

    fn effective_health(&self) -> u8 {
        if self.ineligible {
            0
        } else {
            self.health.score
        }
    }

    /// Reachable as far as the witness is concerned (answered within the dead time, or none
    /// configured): what `FLAG_WITNESS_OK` says.
    fn witness_allows(&self) -> bool {
        !self.witness_configured || self.witness_ok
    }

    fn can_take_over(&self) -> bool {
        !self.ineligible && self.witness_allows()
    }

    /// No witness, or we hold the lease.
    fn lease_ok(&self, now: Instant) -> bool {
        !self.witness_configured || self.holds_lease(now)
    }

    /// May enter `becoming-active` as far as the lease goes: we hold it, or nobody else does
    /// beyond becoming-active-time, or the peer that held it is heard no longer holding it
    /// (it relinquished: its release is on its way to the witness).
    fn lease_obtainable(&self, now: Instant) -> bool {
        self.lease_ok(now)
            || (self.witness_ok
                && (self
                    .other_lease_until
                    .is_none_or(|t| t <= now + self.becoming_active)
                    || self.alive_peer().is_some_and(|p| !p.holds_lease())))
    }

    /// Another node holds the lease for more than becoming-active-time: the peer says it holds
    /// it, or the witness named another holder and the peer is not heard releasing it.
    fn lease_taken(&self, now: Instant) -> bool {
        if !self.witness_configured || self.holds_lease(now) {
            return false;
        }
        match self.alive_peer() {
            Some(p) if p.holds_lease() => true,
            Some(_) => false,
            None => self
                .other_lease_until
                .is_some_and(|t| t > now + self.becoming_active),
        }
    }

    fn alive_peer(&self) -> Option<PeerView> {
        if self.peer_alive {
            self.peer_view
        } else {
            None
        }
    }

    /// The election and no-active comparison: true if this node is the better candidate.
    fn prefer_local(&self, p: &PeerView) -> bool {
        let ht = self.health_threshold;
        let class = |synced: bool, state: State| -> u8 {
            if state == State::OutOfService {
                0
            } else if synced {
                2
            } else {
                1
            }
        };
        let me = self.effective_health();
        let mine = (
            self.can_take_over(),
            self.state != State::Initial,
            me >= ht,
            class(self.synced, self.state),
            me,
            self.local_lower,
        );
        let theirs = (
            p.can_take_over(),
            p.state != State::Initial,
            p.health >= ht,
            class(p.synced(), p.state),
            p.health,
            !self.local_lower,
        );
        mine > theirs
    }

    fn refuse(&mut self, reason: &'static str) {
        info!(node = %self.name, reason, "switchover refused");
        self.events.push_back(HaEvent::SwitchoverRefused { reason });
    }

    fn evaluate(&mut self, now: Instant) {
        if self.witness_configured {
            self.witness_ok = self.witness_heard.is_some_and(|t| now < t + self.dead);
            if self.lease_until.is_some_and(|t| now >= t) {
                info!(node = %self.name, "witness lease expired");
                self.lease_until = None;
            }
            if self.other_lease_until.is_some_and(|t| now >= t) {
                self.other_lease_until = None;
            }
            if self.state == State::Active && self.lease_until.is_none() {
                self.lease_lost_at.get_or_insert(now);
            } else {
                self.lease_lost_at = None;
            }
        }
        for _ in 0..4 {
            let before = self.state;
            self.want_role = false;
            self.step(now);
            if self.state == before {
                break;
            }
        }
        let want = matches!(self.state, State::Active | State::BecomingActive) || self.want_role;
        if want != self.wants_lease {
            self.wants_lease = want;
            if !want && self.witness_configured {
                // Release: forget the lease now, and ignore grants to earlier requests.
                self.lease_until = None;
                self.probes.retain(|p| !p.2);
            }
            self.next_probe = now;
        }
    }

    /// Decided to take over for `why`: goes `becoming-active` if the lease allows it, else
    /// keeps asking the witness for the lease (`want_role`).
    fn try_take_over(&mut self, now: Instant, why: Reason) -> bool {
        self.want_role = true;
        if self.lease_obtainable(now) {
            self.take_over(now, why);
            true
        } else {
            false
        }
    }

    fn step(&mut self, now: Instant) {
        let peer = self.alive_peer();
        let due = self.deadline.is_some_and(|d| now >= d);
        match self.state {
            State::Initial => {
                // Past initial-time the deadline is spent: later inputs re-run the election.
                let due = now >= self.start + self.initial;
                if due {
                    self.deadline = None;
                }
                if let Some(p) = peer {
                    match p.state {
                        State::Active | State::BecomingActive => {
                            return self.go(now, State::BecomingStandby, Reason::PeerIsActive);
                        }
                        State::RelinquishingActive if self.can_take_over() => {
                            self.try_take_over(now, Reason::PeerRelinquished);
                            return;
                        }
                        State::RelinquishingActive => {
                            return self.go(now, State::BecomingStandby, Reason::PeerIsActive);
                        }
                        State::Initial if !due => return,
                        _ => {}
                    }
                } else if !due {
                    return;
                }
                if self.ineligible {
                    return self.go(now, State::OutOfService, Reason::Ineligible);
                }
                match peer {
                    None if self.can_take_over() => {
                        self.try_take_over(now, Reason::NoPeer);
                    }
                    None => {}
                    Some(p) if self.prefer_local(&p) && self.can_take_over() => {
                        self.try_take_over(now, Reason::ElectionWon);
                    }
                    Some(p) if self.prefer_local(&p) => {}
                    Some(_) => self.go(now, State::BecomingStandby, Reason::ElectionLost),
                }
            }
            State::BecomingActive => {
                // A spent deadline (`None`) while waiting for the lease counts as due.
                let due = self.deadline.is_none_or(|d| now >= d);
                let back = if self.synced {
                    State::Standby
                } else {
                    State::BecomingStandby
                };
                if self.ineligible {
                    return self.go(now, back, Reason::Ineligible);
                }
                if !self.can_take_over() && !self.lease_ok(now) {
                    return self.go(now, back, Reason::WitnessLost);
                }
                if let Some(p) = peer {
                    if p.state == State::Active
                        || (p.state == State::BecomingActive && !self.prefer_local(&p))
                    {
                        return self.go(now, back, Reason::ConflictingActive);
                    }
                }
                if self.lease_taken(now) {
                    return self.go(now, back, Reason::WitnessDenied);
                }
                if due && !self.lease_ok(now) {
                    // Wait for the witness's answer (probes are on their way).
                    self.deadline = None;
                    return;
                }
                if due {
                    let peer_epoch = self.peer_view.map_or(0, |v| v.epoch);
                    self.epoch = self.epoch.max(peer_epoch) + 1;
                    self.synced = true;
                    // A fresh active does not hand the role back on health at once.
                    self.hold_role_until = Some(now + self.dead + self.becoming_active);
                    self.go(now, State::Active, self.takeover_why);
                }
            }
            State::Active => {
                if self.witness_configured && !self.holds_lease(now) {
                    // Without the lease: step down if another node holds it, or if the peer
                    // does not hear us (it may take over); a peer that hears us active does
                    // not take over, so keep serving while it does.
                    if self.lease_taken(now) {
                        self.events.push_back(HaEvent::ReleaseServiceAddress);
                        return self.go(now, State::Standby, Reason::WitnessDenied);
                    }
                    if peer.is_none_or(|p| p.flags & FLAG_PEER_ALIVE == 0) {
                        self.events.push_back(HaEvent::ReleaseServiceAddress);
                        return self.go(now, State::Standby, Reason::Isolated);
                    }
                }
                let Some(p) = peer else {
                    return;
                };
                if p.state == State::Active {
                    let (mine, theirs) = (self.holds_lease(now), p.holds_lease());
                    let local_wins = if self.witness_configured && mine != theirs {
                        mine
                    } else {
                        (self.epoch, self.local_lower) > (p.epoch, !self.local_lower)
                    };
                    if !local_wins {
                        self.epoch = self.epoch.max(p.epoch);
                        self.events.push_back(HaEvent::ReleaseServiceAddress);
                        self.go(now, State::Standby, Reason::SplitBrainYield);
                        self.events.push_back(HaEvent::ExchangeSnapshot);
                        return;
                    }
                    if !self.split_notified {
                        self.split_notified = true;
                        info!(node = %self.name, epoch = self.epoch, peer_epoch = p.epoch, "two actives: this one stays");
                        self.events.push_back(HaEvent::ExchangeSnapshot);
                    }
                    return;
                }
                self.split_notified = false;
                if !p.can_receive_role() {
                    return;
                }
                if p.state == State::Standby && p.synced() && p.flags & FLAG_SWITCHOVER_REQUEST != 0
                {
                    return self.relinquish(now, Reason::Forced);
                }
                if self.hold_role_until.is_some_and(|t| now < t) {
                    return;
                }
                let (me, them) = (self.effective_health(), p.health);
                let (ht, et) = (self.health_threshold, self.emergency_threshold);
                let lost_long = self.lease_lost_at.is_some_and(|t| {
                    let settled = t + 2 * self.adv;
                    now >= settled && p.at >= settled
                });
                if lost_long && p.state == State::Standby && p.synced() {
                    // Lost the lease two advertisement-times ago, and a synchronized standby
                    // that hears us still reaches the witness (so it is not the witness that
                    // is down): hand over rather than serve on without a lease.
                    self.relinquish(now, Reason::WitnessLost);
                } else if me < ht && them >= ht && p.state == State::Standby && p.synced() {
                    self.relinquish(now, Reason::HealthBelowThreshold);
                } else if me < et
                    && them >= et
                    && matches!(
                        p.state,
                        State::Standby | State::BecomingStandby | State::Initial
                    )
                {
                    self.relinquish(now, Reason::EmergencyThreshold);
                }
            }
            State::RelinquishingActive => {
                if let Some(p) = peer {
                    if matches!(p.state, State::BecomingActive | State::Active) {
                        return self.go(now, State::Standby, Reason::PeerTookOver);
                    }
                }
                // Take the role back when the peer will not take it: dead, unable (ineligible,
                // no witness), or too slow. A spent deadline (`None`) counts as due.
                let due = self.deadline.is_none_or(|d| now >= d);
                let revert = due || peer.is_none_or(|p| !p.can_take_over());
                if !revert {
                    return;
                }
                if !self.lease_ok(now) {
                    self.want_role = true;
                    if self.lease_taken(now) {
                        return self.go(now, State::Standby, Reason::PeerTookOver);
                    }
                    if !self.witness_ok {
                        let why = if peer.is_none() {
                            Reason::Isolated
                        } else {
                            Reason::WitnessLost
                        };
                        return self.go(now, State::Standby, why);
                    }
                    // Asking the witness for the lease back.
                    self.deadline = None;
                    return;
                }
                // Do not hand over again on health at once: the peer did not follow.
                self.hold_role_until = Some(now + self.dead + self.becoming_active);
                self.go(now, State::Active, Reason::SwitchoverAborted);
            }
            State::BecomingStandby | State::Standby | State::OutOfService => {
                if self.ineligible {
                    if self.state != State::OutOfService {
                        self.go(now, State::OutOfService, Reason::Ineligible);
                    }
                    return;
                }
                match peer {
                    None if self.can_take_over() && self.try_take_over(now, Reason::PeerDead) => {
                        return;
                    }
                    None => {}
                    Some(p) => match p.state {
                        State::RelinquishingActive
                            if self.can_take_over()
                                && self.try_take_over(now, Reason::PeerRelinquished) =>
                        {
                            return;
                        }
                        State::Active | State::BecomingActive | State::RelinquishingActive => {}
                        _ if self.can_take_over()
                            && self.prefer_local(&p)
                            && self.try_take_over(now, Reason::NoActive) =>
                        {
                            return;
                        }
                        _ => {}
                    },
                }
                if self.state == State::BecomingStandby && due {
                    self.go(now, State::OutOfService, Reason::SyncTimeout);
                }
            }
        }
    }

    fn take_over(&mut self, now: Instant, why: Reason) {
        self.takeover_why = why;
        self.go(now, State::BecomingActive, why);
    }

    fn relinquish(&mut self, now: Instant, why: Reason) {
        self.events.push_back(HaEvent::ReleaseServiceAddress);
        self.go(now, State::RelinquishingActive, why);
    }

    fn go(&mut self, now: Instant, to: State, reason: Reason) {
        let from = self.state;
        info!(node = %self.name, %from, %to, %reason, epoch = self.epoch, "redundancy transition");
        self.state = to;
        self.since = now;
        self.last_transition = Some((from, to, reason));
        self.next_heartbeat = now;
        self.request_until = None;
        self.deadline = match to {
            State::Initial => Some(self.start + self.initial),
            State::BecomingActive => Some(now + self.becoming_active),
            State::RelinquishingActive => Some(now + self.dead + self.becoming_active),
            State::BecomingStandby => Some(now + self.becoming_standby),
            State::Active | State::Standby | State::OutOfService => None,
        };
        self.events
            .push_back(HaEvent::Transition { from, to, reason });
        match to {
            State::Active => {
                self.events.push_back(HaEvent::TakeServiceAddress);
                self.events.push_back(HaEvent::BecomeActive);
            }
            State::Standby => self.events.push_back(HaEvent::BecomeStandby),
            State::BecomingStandby => {
                self.synced = false;
                self.events.push_back(HaEvent::RequestSnapshot);
            }
            State::OutOfService => self.events.push_back(HaEvent::OutOfService { reason }),
            _ => {}
        }
    }
}
