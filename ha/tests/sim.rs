//! `HaPair`: two redundancy machines on a virtual clock and a simulated network with per-path,
//! per-direction latency, jitter (hence reordering), loss and partitions, a witness (the
//! crate's own lease arbiter, `WitnessArbiter`) behind a link per node that can be cut
//! separately, or down itself, and a seeded PRNG. Scenario tests, then a property run over
//! many random seeds.
#![allow(
    clippy::unwrap_used,
    clippy::missing_panics_doc,
    missing_docs,
    unreachable_pub
)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sbc_ha::crypto::PairKeys;
use sbc_ha::wire::{Heartbeat, FLAG_PEER_ALIVE, FLAG_SYNCED, FLAG_WITNESS_OK};
use sbc_ha::{
    HaEvent, Health, PathId, PeerSettings, PeerType, Reason, Redundancy, RedundancySettings,
    Refused, State, WitnessArbiter,
};

const KEY: &str = "simulation-shared-key-0123456789";
const NAMES: [&str; 2] = ["sbc-a", "sbc-b"];
/// The packet destination index of the witness.
const WITNESS: usize = 2;
/// The "path" of a packet from the witness to a node.
const FROM_WITNESS: u8 = u8::MAX;

/// SplitMix64: small, seedable, good enough for schedules.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

#[derive(Clone, Copy, Debug)]
struct Link {
    up: bool,
    lat_min: Duration,
    lat_max: Duration,
    loss: f64,
}
impl Link {
    fn clean(&self) -> bool {
        self.up && self.loss == 0.0
    }
}

struct Node {
    m: Option<Redundancy>,
    incarnation: u64,
    health: Health,
    /// The link between this node and the witness is up (both ways).
    witness: bool,
    up_since: Instant,
    sync_at: Option<Instant>,
    holds_address: bool,
}

type Packet = Reverse<(Instant, u64, usize, u8, Vec<u8>)>;

pub struct HaPair {
    cfg: RedundancySettings,
    t0: Instant,
    now: Instant,
    rng: Rng,
    seed: u64,
    nodes: [Node; 2],
    /// links[from][path]
    links: [Vec<Link>; 2],
    inflight: BinaryHeap<Packet>,
    pkt: u64,
    /// The witness (`None`: down) and since when it runs.
    arbiter: Option<WitnessArbiter>,
    witness_since: Instant,
    /// Steps in a row that did not advance the clock (a livelock guard).
    spins: u32,
    /// (time since t0, node, event)
    log: Vec<(Duration, usize, HaEvent)>,
    sync_enabled: bool,
    max_latency: Duration,
    // monitor
    dual_since: Option<Instant>,
    zero_since: Option<Instant>,
    max_dual: Duration,
    max_zero: Duration,
    /// Two actives, hearing each other or not (checked against the detection time when a
    /// witness is configured).
    dual_any_since: Option<Instant>,
    max_dual_any: Duration,
    violations: Vec<String>,
    check: bool,
    /// Check that no node takes the address while the other holds it (off when partitions
    /// are simulated: two actives there are the split brain the epochs resolve).
    check_release: bool,
}

fn config(paths: usize, witness: bool) -> RedundancySettings {
    let dest = |node: u8, path: usize| -> SocketAddr {
        format!("10.0.{path}.{}:9090", node + 1).parse().unwrap()
    };
    RedundancySettings {
        peers: vec![
            PeerSettings {
                name: NAMES[0].into(),
                peer_type: PeerType::Primary,
                destinations: (0..paths).map(|p| dest(0, p)).collect(),
            },
            PeerSettings {
                name: NAMES[1].into(),
                peer_type: PeerType::Secondary,
                destinations: (0..paths).map(|p| dest(1, p)).collect(),
            },
        ],
        witness: witness.then(|| "10.9.9.9:9999".parse().unwrap()),
        shared_key: KEY.into(),
        ..RedundancySettings::default()
    }
}

impl HaPair {
    pub fn new(seed: u64, paths: usize, witness: bool) -> Self {
        let t0 = Instant::now();
        let cfg = config(paths, witness);
        let link = Link {
            up: true,
            lat_min: Duration::from_millis(1),
            lat_max: Duration::from_millis(1),
            loss: 0.0,
        };
        let node = || Node {
            m: None,
            incarnation: 0,
            health: Health::FULL,
            witness: true,
            up_since: t0,
            sync_at: None,
            holds_address: false,
        };
        Self {
            cfg,
            t0,
            now: t0,
            rng: Rng(seed),
            seed,
            nodes: [node(), node()],
            links: [vec![link; paths], vec![link; paths]],
            inflight: BinaryHeap::new(),
            pkt: 0,
            arbiter: witness
                .then(|| WitnessArbiter::new(KEY.as_bytes(), 1, t0 - Duration::from_secs(60))),
            witness_since: t0 - Duration::from_secs(60),
            spins: 0,
            log: Vec::new(),
            sync_enabled: true,
            max_latency: Duration::from_millis(1),
            dual_since: None,
            zero_since: None,
            max_dual: Duration::ZERO,
            max_zero: Duration::ZERO,
            dual_any_since: None,
            max_dual_any: Duration::ZERO,
            violations: Vec::new(),
            check: true,
            check_release: true,
        }
    }

    fn adv(&self) -> Duration {
        self.cfg.advertisement_time
    }
    fn dual_bound(&self) -> Duration {
        self.adv() + self.max_latency + Duration::from_millis(1)
    }
    fn zero_bound(&self) -> Duration {
        let lease = if self.cfg.witness.is_some() {
            // A lease request round trip to the witness, and one fast retry.
            2 * self.max_latency + self.adv() / 10
        } else {
            Duration::ZERO
        };
        self.cfg.dead_time()
            + self.cfg.becoming_active_time
            + self.max_latency
            + lease
            + Duration::from_millis(1)
    }
    /// With a witness: never two actives (hearing each other or not) for longer than the
    /// detection time.
    fn dual_any_bound(&self) -> Duration {
        self.cfg.dead_time()
    }

    pub fn elapsed(&self) -> Duration {
        self.now - self.t0
    }

    pub fn boot(&mut self, i: usize) {
        let n = &mut self.nodes[i];
        n.incarnation += 1;
        let mut m = Redundancy::new(&self.cfg, NAMES[i], n.incarnation, self.now).unwrap();
        n.health = Health {
            ineligible_until_restart: false,
            ..n.health
        };
        if n.health != Health::FULL {
            m.handle_health(self.now, n.health);
        }
        n.m = Some(m);
        n.up_since = self.now;
        n.sync_at = None;
        n.holds_address = false;
        self.flush();
    }

    pub fn crash(&mut self, i: usize) {
        self.nodes[i].m = None;
        self.nodes[i].holds_address = false;
        self.monitor();
    }

    /// Node `i`'s sync connection with its peer breaks (the peer's kernel closed it): what the
    /// shell reports as `SyncEvent::LinkLost`.
    pub fn link_lost(&mut self, i: usize) {
        if let Some(m) = self.nodes[i].m.as_mut() {
            m.handle_peer_link_lost(self.now);
        }
        self.flush();
    }

    /// `kill -9` of node `i`: it stops, and its kernel resets the peer's sync connection.
    pub fn kill9(&mut self, i: usize) {
        self.crash(i);
        self.link_lost(1 - i);
    }

    pub fn state(&self, i: usize) -> Option<State> {
        self.nodes[i].m.as_ref().map(Redundancy::state)
    }
    pub fn m(&self, i: usize) -> &Redundancy {
        self.nodes[i].m.as_ref().unwrap()
    }

    pub fn set_health(&mut self, i: usize, h: Health) {
        self.nodes[i].health = h;
        if let Some(m) = self.nodes[i].m.as_mut() {
            m.handle_health(self.now, h);
        }
        self.flush();
    }

    /// Cuts or restores the link between node `i` and the witness.
    pub fn set_witness(&mut self, i: usize, reachable: bool) {
        self.nodes[i].witness = reachable;
        self.flush();
    }

    /// Stops the witness (it forgets every lease) or starts it again.
    pub fn set_witness_up(&mut self, up: bool) {
        if up && self.arbiter.is_none() {
            // A new incarnation at every start, as the shell's start time in µs.
            let incarnation = 2 + self.now.duration_since(self.t0).as_micros() as u64;
            self.arbiter = Some(WitnessArbiter::new(KEY.as_bytes(), incarnation, self.now));
            self.witness_since = self.now;
        } else if !up {
            self.arbiter = None;
        }
        self.flush();
    }

    fn latency(&mut self, l: Link) -> Duration {
        let span = (l.lat_max - l.lat_min).as_millis() as u64;
        l.lat_min + Duration::from_millis(self.rng.below(span + 1))
    }

    /// `notify berpd force` on node `i`: the machine's answer (`None`: the node is down).
    pub fn force(&mut self, i: usize) -> Option<Result<(), &'static str>> {
        let answer = self.nodes[i]
            .m
            .as_mut()
            .map(|m| m.force_switchover(self.now));
        self.flush();
        answer
    }

    pub fn set_link(&mut self, from: usize, path: usize, up: bool) {
        self.links[from][path].up = up;
        self.monitor();
    }
    pub fn partition(&mut self) {
        for l in self.links.iter_mut().flatten() {
            l.up = false;
        }
        self.monitor();
    }
    pub fn heal(&mut self) {
        for l in self.links.iter_mut().flatten() {
            l.up = true;
            l.loss = 0.0;
        }
        self.monitor();
    }

    /// Injects a raw datagram to node `to` on `path` now.
    pub fn inject(&mut self, to: usize, path: u8, bytes: Vec<u8>) {
        self.pkt += 1;
        self.inflight
            .push(Reverse((self.now, self.pkt, to, path, bytes)));
    }

    fn connected(&self, from: usize) -> bool {
        self.links[from].iter().any(|l| l.up)
    }

    /// Moves transmits into the network and events into the log; handles sync requests.
    fn flush(&mut self) {
        for i in 0..2 {
            let now = self.now;
            let Some(m) = self.nodes[i].m.as_mut() else {
                continue;
            };
            let mut out = Vec::new();
            while let Some(t) = m.poll_transmit(now) {
                out.push(t);
            }
            let mut probes = Vec::new();
            while let Some(t) = m.poll_witness(now) {
                probes.push(t.payload);
            }
            let mut evs = Vec::new();
            while let Some(e) = m.poll() {
                evs.push(e);
            }
            for payload in probes {
                if !self.nodes[i].witness {
                    continue;
                }
                let lat = self.latency(self.links[i][0]);
                self.pkt += 1;
                self.inflight
                    .push(Reverse((now + lat, self.pkt, WITNESS, i as u8, payload)));
            }
            for t in out {
                let l = self.links[i][usize::from(t.path.0)];
                if !l.up || (l.loss > 0.0 && self.rng.chance(l.loss)) {
                    continue;
                }
                let lat = self.latency(l);
                self.pkt += 1;
                self.inflight
                    .push(Reverse((now + lat, self.pkt, 1 - i, t.path.0, t.payload)));
            }
            for e in evs {
                match &e {
                    HaEvent::RequestSnapshot => {
                        self.nodes[i].sync_at = Some(now + Duration::from_millis(50))
                    }
                    HaEvent::TakeServiceAddress => {
                        if self.nodes[1 - i].holds_address && self.check_release {
                            self.violations.push(format!(
                                "seed {}: node {i} took the address at {:?} while the peer held it",
                                self.seed,
                                now - self.t0
                            ));
                        }
                        self.nodes[i].holds_address = true;
                    }
                    HaEvent::ReleaseServiceAddress => self.nodes[i].holds_address = false,
                    _ => {}
                }
                self.log.push((now - self.t0, i, e));
            }
        }
        self.monitor();
    }

    /// Up, eligible, past its initial time, and (with a witness) reaching a witness that would
    /// grant it the lease: past its start-up quiet period, and nobody else holds the lease.
    fn eligible(&self, i: usize) -> bool {
        let n = &self.nodes[i];
        let Some(m) = n.m.as_ref() else {
            return false;
        };
        let grants = |w: &WitnessArbiter| {
            self.now - self.witness_since >= self.cfg.dead_time()
                && w.holder(self.now).is_none_or(|l| l.node == m.node_id())
        };
        !m.ineligible()
            && (self.cfg.witness.is_none()
                || (n.witness && self.arbiter.as_ref().is_some_and(grants)))
            && self.now - n.up_since >= self.cfg.initial_time
    }

    fn monitor(&mut self) {
        if !self.check {
            return;
        }
        let actives = (0..2)
            .filter(|&i| self.state(i) == Some(State::Active))
            .count();
        let both_up = self.nodes.iter().all(|n| n.m.is_some());
        let hearing = both_up && (0..2).all(|i| self.links[i].iter().any(Link::clean));
        if actives == 2 && hearing {
            let since = *self.dual_since.get_or_insert(self.now);
            let d = self.now - since;
            self.max_dual = self.max_dual.max(d);
            if d > self.dual_bound() {
                let msg = format!(
                    "seed {}: two actives hearing each other for {d:?} at {:?}",
                    self.seed,
                    self.elapsed()
                );
                if !self.violations.contains(&msg) {
                    self.violations.push(msg);
                }
            }
        } else {
            self.dual_since = None;
        }
        if actives == 2 {
            let since = *self.dual_any_since.get_or_insert(self.now);
            let d = self.now - since;
            self.max_dual_any = self.max_dual_any.max(d);
            if self.cfg.witness.is_some() && d > self.dual_any_bound() {
                let msg = format!(
                    "seed {}: two actives with a witness for {d:?} at {:?}",
                    self.seed,
                    self.elapsed()
                );
                if !self.violations.contains(&msg) {
                    self.violations.push(msg);
                }
            }
        } else {
            self.dual_any_since = None;
        }
        if actives == 0 && (0..2).any(|i| self.eligible(i)) {
            let since = *self.zero_since.get_or_insert(self.now);
            let d = self.now - since;
            self.max_zero = self.max_zero.max(d);
            if d > self.zero_bound() {
                self.violations.push(format!(
                    "seed {}: no active for {d:?} at {:?} with an eligible node up (states {:?} {:?})",
                    self.seed,
                    self.elapsed(),
                    self.state(0),
                    self.state(1)
                ));
                self.zero_since = Some(self.now);
            }
        } else {
            self.zero_since = None;
        }
    }

    fn next_wake(&self) -> Option<Instant> {
        let mut t = self.inflight.peek().map(|Reverse(p)| p.0);
        for n in &self.nodes {
            let Some(m) = &n.m else { continue };
            for x in [m.poll_timeout(), n.sync_at].into_iter().flatten() {
                t = Some(t.map_or(x, |t: Instant| t.min(x)));
            }
        }
        t
    }

    fn step_to(&mut self, limit: Instant) -> bool {
        let Some(t) = self.next_wake().filter(|t| *t <= limit) else {
            self.now = limit;
            self.monitor();
            return false;
        };
        if t <= self.now {
            self.spins += 1;
            assert!(
                self.spins < 10_000,
                "seed {}: livelock at {:?}: wake {:?} not after now; timeouts {:?}",
                self.seed,
                self.elapsed(),
                t - self.t0,
                self.nodes
                    .iter()
                    .map(|n| n
                        .m
                        .as_ref()
                        .map(|m| (m.state(), m.poll_timeout().map(|x| x - self.t0))))
                    .collect::<Vec<_>>()
            );
        } else {
            self.spins = 0;
        }
        self.now = self.now.max(t);
        let now = self.now;
        while self.inflight.peek().is_some_and(|Reverse(p)| p.0 <= now) {
            let Some(Reverse((_, _, to, path, bytes))) = self.inflight.pop() else {
                break;
            };
            if to == WITNESS {
                let from = usize::from(path);
                let answer = self
                    .arbiter
                    .as_mut()
                    .and_then(|w| w.handle_datagram(now, &bytes).ok().flatten());
                if let Some(answer) = answer.filter(|_| self.nodes[from].witness) {
                    let lat = self.latency(self.links[from][0]);
                    self.pkt += 1;
                    self.inflight
                        .push(Reverse((now + lat, self.pkt, from, FROM_WITNESS, answer)));
                }
            } else if let Some(m) = self.nodes[to].m.as_mut() {
                if path == FROM_WITNESS {
                    let _ = m.handle_witness_datagram(now, &bytes);
                } else {
                    let _ = m.handle_datagram(now, PathId(path), &bytes);
                }
            }
        }
        for i in 0..2 {
            let connected = self.connected(1 - i) && self.connected(i);
            let peer_active = self.state(1 - i) == Some(State::Active);
            let n = &mut self.nodes[i];
            let Some(m) = n.m.as_mut() else { continue };
            if m.poll_timeout().is_some_and(|x| x <= now) {
                m.handle_timeout(now);
            }
            if n.sync_at.is_some_and(|x| x <= now) {
                n.sync_at = None;
                if matches!(m.state(), State::BecomingStandby | State::OutOfService) {
                    if self.sync_enabled && connected && peer_active {
                        m.handle_sync_complete(now);
                    } else {
                        n.sync_at = Some(now + Duration::from_millis(200));
                    }
                }
            }
        }
        self.flush();
        true
    }

    pub fn run_for(&mut self, d: Duration) {
        let limit = self.now + d;
        while self.step_to(limit) {}
    }

    /// Events of node `i` since `from` (time since start).
    pub fn events(&self, i: usize, from: Duration) -> Vec<(Duration, HaEvent)> {
        self.log
            .iter()
            .filter(|(t, n, _)| *n == i && *t >= from)
            .map(|(t, _, e)| (*t, e.clone()))
            .collect()
    }

    pub fn transitions(&self, i: usize, from: Duration) -> Vec<(State, State, Reason)> {
        self.events(i, from)
            .into_iter()
            .filter_map(|(_, e)| match e {
                HaEvent::Transition { from, to, reason } => Some((from, to, reason)),
                _ => None,
            })
            .collect()
    }

    fn first(&self, i: usize, from: Duration, pred: impl Fn(&HaEvent) -> bool) -> Option<Duration> {
        self.log
            .iter()
            .find(|(t, n, e)| *n == i && *t >= from && pred(e))
            .map(|(t, _, _)| *t)
    }

    fn actives(&self) -> usize {
        (0..2)
            .filter(|&i| self.state(i) == Some(State::Active))
            .count()
    }

    fn assert_clean(&self) {
        assert!(self.violations.is_empty(), "{}", self.violations.join("\n"));
    }
}

fn booted(paths: usize, witness: bool) -> HaPair {
    let mut p = HaPair::new(1, paths, witness);
    p.boot(0);
    p.boot(1);
    p.run_for(Duration::from_secs(3));
    assert_eq!(p.state(0), Some(State::Active));
    assert_eq!(p.state(1), Some(State::Standby));
    p
}

fn health(score: u8) -> Health {
    Health {
        score,
        ineligible_until_restart: false,
    }
}

#[test]
fn boot_election_equal_health_lower_address_wins() {
    let mut p = HaPair::new(1, 2, false);
    p.boot(1);
    p.boot(0);
    p.run_for(Duration::from_secs(3));
    assert_eq!(
        p.state(0),
        Some(State::Active),
        "sbc-a has the lower address"
    );
    assert_eq!(p.state(1), Some(State::Standby));
    assert_eq!(
        p.transitions(0, Duration::ZERO)[0],
        (State::Initial, State::BecomingActive, Reason::ElectionWon)
    );
    assert_eq!(
        p.transitions(1, Duration::ZERO)[0],
        (State::Initial, State::BecomingStandby, Reason::ElectionLost)
    );
    assert_eq!(p.m(0).epoch(), 1);
    assert_eq!(p.m(1).epoch(), 1, "the standby follows the active's epoch");
    // Active after initial-time + becoming-active-time, not before.
    let t = p
        .first(0, Duration::ZERO, |e| *e == HaEvent::BecomeActive)
        .unwrap();
    let at = p.cfg.initial_time + p.cfg.becoming_active_time;
    assert!(t >= at && t < at + Duration::from_millis(50), "{t:?}");
    p.assert_clean();
}

#[test]
fn boot_election_higher_health_wins() {
    let mut p = HaPair::new(1, 1, false);
    p.nodes[0].health = health(90);
    p.boot(0);
    p.boot(1);
    p.run_for(Duration::from_secs(3));
    assert_eq!(p.state(1), Some(State::Active));
    assert_eq!(p.state(0), Some(State::Standby));
}

#[test]
fn late_booter_joins_as_standby_and_a_lone_node_becomes_active() {
    let mut p = HaPair::new(1, 2, false);
    p.boot(1);
    p.run_for(Duration::from_secs(2));
    assert_eq!(p.state(1), Some(State::Active));
    assert_eq!(p.transitions(1, Duration::ZERO)[0].2, Reason::NoPeer);
    p.boot(0);
    p.run_for(Duration::from_secs(1));
    assert_eq!(
        p.state(0),
        Some(State::Standby),
        "a booting node does not grab the role from an active"
    );
    assert_eq!(p.state(1), Some(State::Active));
}

#[test]
fn active_killed_standby_takes_over_within_drift_time() {
    let mut p = booted(2, false);
    let t = p.elapsed();
    p.crash(0);
    p.run_for(Duration::from_secs(3));
    assert_eq!(p.state(1), Some(State::Active));
    let took = p
        .first(1, t, |e| *e == HaEvent::TakeServiceAddress)
        .unwrap()
        - t;
    let bound = p.cfg.dead_time() + p.cfg.becoming_active_time + Duration::from_millis(2);
    assert!(took <= bound, "takeover after {took:?} (bound {bound:?})");
    assert!(p.transitions(1, t).contains(&(
        State::Standby,
        State::BecomingActive,
        Reason::PeerDead
    )));
    assert_eq!(p.m(1).epoch(), 2);
    p.assert_clean();
}

/// The time node `i` last accepted a heartbeat of its peer (since start).
fn last_heard(p: &HaPair, i: usize) -> Duration {
    p.m(i).peer().unwrap().at - p.t0
}

#[test]
fn kill9_sync_link_lost_and_silence_takeover_after_the_grace() {
    // Over many kill instants spread across a heartbeat interval: the peer is declared dead
    // exactly the grace after its last heartbeat (not the dead time), and the standby serves
    // within grace + becoming-active-time of the kill.
    let mut p = booted(2, false);
    let grace = p.cfg.link_lost_grace();
    assert!(grace < p.cfg.dead_time());
    let mut worst = Duration::ZERO;
    for k in 0..20u64 {
        let mut p = booted(2, false);
        p.run_for(Duration::from_millis(k * 11));
        let t = p.elapsed();
        p.kill9(0);
        assert!(p.m(1).peer_suspected());
        let heard = last_heard(&p, 1);
        p.run_for(Duration::from_secs(2));
        assert_eq!(p.state(1), Some(State::Active));
        let dead = p.first(1, t, |e| *e == HaEvent::PeerDead).unwrap();
        assert_eq!(
            dead - heard,
            grace,
            "declared dead at the grace after the last heartbeat"
        );
        let took = p
            .first(1, t, |e| *e == HaEvent::TakeServiceAddress)
            .unwrap()
            - t;
        let bound = grace + p.cfg.becoming_active_time;
        assert!(took <= bound, "takeover after {took:?} (bound {bound:?})");
        worst = worst.max(took);
        assert!(p.transitions(1, t).contains(&(
            State::Standby,
            State::BecomingActive,
            Reason::PeerDead
        )));
        assert!(
            !p.m(1).peer_suspected(),
            "the suspicion ends with the death"
        );
        p.assert_clean();
    }
    // At the defaults (200 ms heartbeats, 300 ms grace, 50 ms becoming-active): under 0.5 s.
    assert!(worst < Duration::from_millis(400), "{worst:?}");
    p.run_for(Duration::from_millis(1));
}

#[test]
fn sync_link_lost_while_heartbeats_continue_no_failover() {
    // The sync link breaks (and keeps breaking at every reconnection, every 200 ms, for 5 s)
    // while the active lives, with 1..80 ms of jitter on every path: no takeover, and the
    // suspicion is lifted once heartbeats keep arriving.
    let mut p = booted(2, false);
    for l in p.links.iter_mut().flatten() {
        l.lat_min = Duration::from_millis(1);
        l.lat_max = Duration::from_millis(80);
    }
    p.max_latency = Duration::from_millis(80);
    let t = p.elapsed();
    for _ in 0..25 {
        p.link_lost(1);
        p.run_for(Duration::from_millis(200));
    }
    p.link_lost(1);
    p.run_for(Duration::from_secs(5));
    assert!(p.transitions(0, t).is_empty(), "{:?}", p.transitions(0, t));
    assert!(p.transitions(1, t).is_empty(), "{:?}", p.transitions(1, t));
    assert!(p.events(1, t).iter().all(|(_, e)| *e != HaEvent::PeerDead));
    assert!(!p.m(1).peer_suspected(), "heartbeats lifted the suspicion");
    let gap = p.m(1).counters().max_gap_ms;
    assert!(gap <= 200 + 80, "longest gap between heartbeats {gap} ms");
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::Active), Some(State::Standby))
    );
    p.assert_clean();
}

#[test]
fn sync_link_back_lifts_the_suspicion_at_once() {
    // The sync link breaks and the standby's immediate reconnection is answered: the peer
    // runs. Its heartbeats then come late (more than the grace, less than the dead time): no
    // takeover.
    let mut p = booted(1, false);
    for l in p.links.iter_mut().flatten() {
        l.lat_min = Duration::from_millis(1);
        l.lat_max = Duration::from_millis(1);
    }
    let t = p.elapsed();
    p.link_lost(1);
    assert!(p.m(1).peer_suspected());
    p.run_for(Duration::from_millis(5));
    let m = p.nodes[1].m.as_mut().unwrap();
    m.handle_peer_link_up(p.now);
    assert!(!p.m(1).peer_suspected());
    // Heartbeats held back for 450 ms (> grace 300, < dead 600), then flowing again.
    p.set_link(0, 0, false);
    p.run_for(Duration::from_millis(450));
    p.set_link(0, 0, true);
    p.run_for(Duration::from_secs(2));
    assert!(p.transitions(1, t).is_empty(), "{:?}", p.transitions(1, t));
    assert!(p.m(1).peer_alive());
    p.assert_clean();
}

#[test]
fn a_heartbeat_in_flight_at_the_link_loss_does_not_lift_the_suspicion() {
    // The active sends a heartbeat and dies at once; the kernel's reset is handled before the
    // heartbeat (on another path, say): that heartbeat must not cancel the suspicion, so the
    // peer is dead the grace after it, not the dead time.
    let mut p = booted(1, false);
    for l in p.links.iter_mut().flatten() {
        l.lat_min = Duration::from_millis(30);
        l.lat_max = Duration::from_millis(30);
    }
    p.run_for(Duration::from_secs(1));
    // Step until a heartbeat of node 0 is in flight to node 1.
    let mut steps = 0;
    while !p.inflight.iter().any(|Reverse(x)| x.2 == 1) {
        p.run_for(Duration::from_millis(1));
        steps += 1;
        assert!(steps < 1000, "no heartbeat in flight");
    }
    let t = p.elapsed();
    p.kill9(0);
    p.run_for(Duration::from_secs(2));
    let heard = last_heard(&p, 1);
    assert!(heard > t, "the heartbeat in flight arrived after the loss");
    let dead = p.first(1, t, |e| *e == HaEvent::PeerDead).unwrap();
    assert_eq!(dead - heard, p.cfg.link_lost_grace());
    assert_eq!(p.state(1), Some(State::Active));
}

#[test]
fn sync_link_lost_after_the_grace_already_passed_is_dead_at_once() {
    // The heartbeats stopped (a cut path) for longer than the grace but less than the dead
    // time; then the sync link breaks: dead at once.
    let mut p = booted(1, false);
    p.set_link(0, 0, false);
    let grace = p.cfg.link_lost_grace();
    p.run_for(grace + Duration::from_millis(10));
    assert!(p.m(1).peer_alive(), "within the dead time");
    let t = p.elapsed();
    p.link_lost(1);
    assert!(!p.m(1).peer_alive());
    assert_eq!(p.first(1, t, |e| *e == HaEvent::PeerDead), Some(t));
    assert_eq!(p.state(1), Some(State::BecomingActive));
}

#[test]
fn silence_without_link_loss_takes_over_after_the_drift_window() {
    // SIGSTOP of the active (or a hang): it sends nothing, but its sockets stay open, so no
    // link loss: the peer is dead only after the dead time, as before.
    for k in 0..10u64 {
        let mut p = booted(2, false);
        p.run_for(Duration::from_millis(k * 23));
        let t = p.elapsed();
        p.crash(0);
        let heard = last_heard(&p, 1);
        p.run_for(Duration::from_secs(3));
        let dead = p.first(1, t, |e| *e == HaEvent::PeerDead).unwrap();
        assert_eq!(dead - heard, p.cfg.dead_time());
        let took = p
            .first(1, t, |e| *e == HaEvent::TakeServiceAddress)
            .unwrap();
        assert_eq!(took - dead, p.cfg.becoming_active_time);
        assert_eq!(p.state(1), Some(State::Active));
        p.assert_clean();
    }
}

#[test]
fn health_below_threshold_switches_over_release_before_takeover() {
    let mut p = booted(2, false);
    let t = p.elapsed();
    p.set_health(0, health(70));
    p.run_for(Duration::from_secs(2));
    assert_eq!(p.state(0), Some(State::Standby));
    assert_eq!(p.state(1), Some(State::Active));
    let released = p
        .first(0, t, |e| *e == HaEvent::ReleaseServiceAddress)
        .unwrap();
    let taken = p
        .first(1, t, |e| *e == HaEvent::TakeServiceAddress)
        .unwrap();
    assert!(
        released < taken,
        "release at {released:?}, take at {taken:?}"
    );
    assert!(
        taken - released <= Duration::from_millis(110),
        "{:?}",
        taken - released
    );
    assert_eq!(
        p.transitions(0, t),
        vec![
            (
                State::Active,
                State::RelinquishingActive,
                Reason::HealthBelowThreshold
            ),
            (
                State::RelinquishingActive,
                State::Standby,
                Reason::PeerTookOver
            ),
        ]
    );
    // The new active at 100 does not hand back to a standby at 70.
    p.run_for(Duration::from_secs(5));
    assert_eq!(p.state(1), Some(State::Active));
    p.assert_clean();
}

#[test]
fn no_switchover_to_an_unhealthy_standby() {
    let mut p = booted(1, false);
    p.set_health(1, health(74));
    p.run_for(Duration::from_secs(1));
    p.set_health(0, health(60));
    p.run_for(Duration::from_secs(5));
    assert_eq!(
        p.state(0),
        Some(State::Active),
        "the standby is below health-threshold too"
    );
}

#[test]
fn force_switchover_from_either_side() {
    let mut p = booted(2, false);
    let t = p.elapsed();
    assert_eq!(p.force(0), Some(Ok(())));
    p.run_for(Duration::from_secs(2));
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::Standby), Some(State::Active))
    );
    assert_eq!(
        p.transitions(0, t)[0],
        (State::Active, State::RelinquishingActive, Reason::Forced)
    );
    let t = p.elapsed();
    assert_eq!(p.force(0), Some(Ok(()))); // now the standby asks
    p.run_for(Duration::from_secs(2));
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::Active), Some(State::Standby))
    );
    assert_eq!(
        p.transitions(1, t)[0],
        (State::Active, State::RelinquishingActive, Reason::Forced)
    );
    // Refused without a peer.
    p.crash(1);
    p.run_for(Duration::from_secs(2));
    let t = p.elapsed();
    assert_eq!(p.force(0), Some(Err("the peer is not heard")));
    assert!(matches!(
        p.events(0, t).last(),
        Some((_, HaEvent::SwitchoverRefused { .. }))
    ));
    assert_eq!(p.state(0), Some(State::Active));
    p.assert_clean();
}

#[test]
fn critical_memory_node_stays_ineligible_until_restart() {
    let mut p = booted(2, false);
    p.set_health(
        0,
        Health {
            score: 0,
            ineligible_until_restart: true,
        },
    );
    p.run_for(Duration::from_secs(2));
    assert_eq!(p.state(1), Some(State::Active));
    assert_eq!(p.state(0), Some(State::OutOfService));
    // Health given back does not make it eligible; the new active dies: nobody takes over.
    p.set_health(0, Health::FULL);
    p.crash(1);
    p.run_for(Duration::from_secs(5));
    assert_eq!(p.state(0), Some(State::OutOfService));
    assert!(!p
        .transitions(0, Duration::ZERO)
        .iter()
        .any(|t| t.1 == State::BecomingActive && t.0 != State::Initial));
    // The peer comes back: it becomes active, the ineligible node stays out.
    p.boot(1);
    p.run_for(Duration::from_secs(3));
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::OutOfService), Some(State::Active))
    );
    // Restarting clears it.
    p.crash(0);
    p.boot(0);
    p.run_for(Duration::from_secs(3));
    assert_eq!(p.state(0), Some(State::Standby));
    p.set_health(1, health(10));
    p.run_for(Duration::from_secs(1));
    assert_eq!(p.state(0), Some(State::Active));
}

#[test]
fn ineligible_active_keeps_role_without_a_capable_peer() {
    let mut p = booted(1, false);
    p.crash(1);
    p.run_for(Duration::from_secs(2));
    p.set_health(
        0,
        Health {
            score: 0,
            ineligible_until_restart: true,
        },
    );
    p.run_for(Duration::from_secs(2));
    assert_eq!(
        p.state(0),
        Some(State::Active),
        "no peer: keep serving (switchover acts as enabled)"
    );
    // A restarted peer, still syncing: the emergency rule hands over at once.
    p.boot(1);
    p.sync_enabled = false;
    p.run_for(Duration::from_secs(3));
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::OutOfService), Some(State::Active))
    );
    assert!(p.transitions(0, Duration::ZERO).contains(&(
        State::Active,
        State::RelinquishingActive,
        Reason::EmergencyThreshold
    )));
}

#[test]
fn emergency_threshold_rules() {
    // Both below emergency: the active keeps the role.
    let mut p = booted(1, false);
    p.set_health(1, health(40));
    p.run_for(Duration::from_secs(1));
    p.set_health(0, health(30));
    p.run_for(Duration::from_secs(5));
    assert_eq!(p.state(0), Some(State::Active));
    // Standby at 60 (between the thresholds), active at 30 (below emergency): switch over.
    p.set_health(1, health(60));
    p.run_for(Duration::from_secs(2));
    assert_eq!(p.state(1), Some(State::Active));
    assert!(p.transitions(0, Duration::ZERO).contains(&(
        State::Active,
        State::RelinquishingActive,
        Reason::EmergencyThreshold
    )));

    // A starting (unsynchronized) standby: taken at once below emergency, not merely below health-threshold.
    let mut p = HaPair::new(3, 1, false);
    p.sync_enabled = false;
    p.boot(0);
    p.boot(1);
    p.run_for(Duration::from_secs(3));
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::Active), Some(State::BecomingStandby))
    );
    p.set_health(0, health(60));
    p.run_for(Duration::from_secs(3));
    assert_eq!(
        p.state(0),
        Some(State::Active),
        "60 < 75 but the standby is not synchronized"
    );
    p.set_health(0, health(40));
    p.run_for(Duration::from_secs(1));
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::Standby), Some(State::Active))
    );
}

#[test]
fn becoming_standby_times_out_to_out_of_service() {
    let mut p = HaPair::new(1, 1, false);
    p.cfg.becoming_standby_time = Duration::from_secs(5);
    p.sync_enabled = false;
    p.boot(0);
    p.boot(1);
    p.run_for(Duration::from_secs(8));
    assert_eq!(p.state(1), Some(State::OutOfService));
    assert!(p.events(1, Duration::ZERO).iter().any(|(_, e)| *e
        == HaEvent::OutOfService {
            reason: Reason::SyncTimeout
        }));
    p.sync_enabled = true;
    p.run_for(Duration::from_secs(1));
    assert_eq!(
        p.state(1),
        Some(State::Standby),
        "a late sync brings it back"
    );
}

#[test]
fn one_of_two_paths_lost_no_switchover() {
    let mut p = booted(2, false);
    let t = p.elapsed();
    p.set_link(0, 0, false);
    p.set_link(1, 0, false);
    p.run_for(Duration::from_secs(10));
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::Active), Some(State::Standby))
    );
    assert!(p.transitions(0, t).is_empty() && p.transitions(1, t).is_empty());
    assert!(p
        .events(1, t)
        .iter()
        .any(|(_, e)| *e == HaEvent::PathDown(PathId(0))));
    assert!(!p.events(1, t).iter().any(|(_, e)| *e == HaEvent::PeerDead));
    p.assert_clean();
}

#[test]
fn total_partition_with_witness_only_one_side_active() {
    let mut p = booted(2, true);
    // The active ends up on the wrong side: it loses its peer and the witness.
    let t = p.elapsed();
    p.partition();
    p.set_witness(0, false);
    p.run_for(Duration::from_secs(5));
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::Standby), Some(State::Active))
    );
    assert!(p
        .transitions(0, t)
        .contains(&(State::Active, State::Standby, Reason::Isolated)));
    let released = p
        .first(0, t, |e| *e == HaEvent::ReleaseServiceAddress)
        .unwrap();
    let taken = p
        .first(1, t, |e| *e == HaEvent::TakeServiceAddress)
        .unwrap();
    assert!(
        taken + Duration::from_millis(600) >= released,
        "dual actives at most half an interval"
    );
    // The standby on the witness-less side does not take over.
    let mut p = booted(2, true);
    p.partition();
    p.set_witness(1, false);
    p.run_for(Duration::from_secs(5));
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::Active), Some(State::Standby))
    );
    p.heal();
    p.set_witness(1, true);
    p.run_for(Duration::from_secs(2));
    assert_eq!(p.actives(), 1);
}

#[test]
fn heartbeat_paths_black_holed_witness_reachable_exactly_one_active() {
    let mut p = booted(2, true);
    let t = p.elapsed();
    // Every heartbeat path cut, both nodes still reach the witness: each thinks the other is
    // dead, but only the lease holder (the active) may serve.
    p.partition();
    for _ in 0..20 {
        p.run_for(Duration::from_millis(500));
        assert_eq!(
            p.state(0),
            Some(State::Active),
            "the lease holder keeps serving"
        );
        assert_ne!(p.state(1), Some(State::Active));
    }
    assert!(p.m(0).holds_lease(p.now));
    assert!(!p.m(1).holds_lease(p.now));
    assert_eq!(p.max_dual_any, Duration::ZERO, "never two actives");
    assert!(!p.transitions(1, t).iter().any(|tr| tr.1 == State::Active));
    // Healed: still exactly one active.
    p.heal();
    p.run_for(Duration::from_secs(3));
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::Active), Some(State::Standby))
    );
    p.assert_clean();
}

#[test]
fn active_killed_while_paths_cut_standby_takes_over_after_lease_expiry() {
    let mut p = booted(2, true);
    p.partition();
    p.run_for(Duration::from_secs(5));
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::Active), Some(State::Standby))
    );
    let t = p.elapsed();
    let lease_end = p.arbiter.as_ref().unwrap().holder(p.now).unwrap().until - p.t0;
    p.crash(0);
    p.run_for(Duration::from_secs(3));
    assert_eq!(p.state(1), Some(State::Active));
    let took = p
        .first(1, t, |e| *e == HaEvent::TakeServiceAddress)
        .unwrap();
    assert!(
        took >= lease_end,
        "took at {took:?}, lease ran to {lease_end:?}"
    );
    // The lease ran at most dead time past the crash, then becoming-active-time and a round
    // trip to the witness.
    let bound = p.cfg.dead_time() + p.cfg.becoming_active_time + Duration::from_millis(20);
    assert!(
        took - t <= bound,
        "takeover after {:?} (bound {bound:?})",
        took - t
    );
    assert!(p.m(1).holds_lease(p.now));
    p.assert_clean();
}

#[test]
fn witness_down_no_new_takeover_active_keeps_serving_while_heard() {
    let mut p = booted(2, true);
    let t = p.elapsed();
    p.set_witness_up(false);
    p.run_for(Duration::from_secs(3));
    assert!(p.transitions(0, t).is_empty() && p.transitions(1, t).is_empty());
    // The active lost its lease, but its peer hears it (and cannot take over either): it
    // keeps serving.
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::Active), Some(State::Standby))
    );
    assert!(!p.m(0).holds_lease(p.now));
    assert_eq!(p.m(0).status().witness, Some(false));
    // The active dies: no takeover without a witness.
    let t = p.elapsed();
    p.crash(0);
    p.run_for(Duration::from_secs(5));
    assert_eq!(p.state(1), Some(State::Standby));
    assert!(p.transitions(1, t).iter().all(|tr| tr.1 != State::Active));
    // The witness comes back: after its quiet period (one lease time) it grants the lease.
    let t = p.elapsed();
    p.set_witness_up(true);
    p.run_for(Duration::from_secs(3));
    assert_eq!(p.state(1), Some(State::Active));
    let took = p
        .first(1, t, |e| *e == HaEvent::TakeServiceAddress)
        .unwrap()
        - t;
    assert!(took >= p.cfg.dead_time(), "{took:?}");
    p.assert_clean();

    // Witness down, then every heartbeat path cut: the active is isolated and steps down;
    // nobody serves until the witness returns.
    let mut p = booted(2, true);
    p.set_witness_up(false);
    p.run_for(Duration::from_secs(2));
    let t = p.elapsed();
    p.partition();
    p.run_for(Duration::from_secs(4));
    assert_eq!(p.actives(), 0);
    assert!(p
        .transitions(0, t)
        .contains(&(State::Active, State::Standby, Reason::Isolated)));
    p.set_witness_up(true);
    p.run_for(Duration::from_secs(3));
    assert_eq!(p.actives(), 1);
    p.heal();
    p.run_for(Duration::from_secs(3));
    assert_eq!(p.actives(), 1);
    p.assert_clean();
}

#[test]
fn active_losing_its_witness_link_hands_over_to_a_standby_that_reaches_it() {
    let mut p = booted(2, true);
    let t = p.elapsed();
    p.set_witness(0, false);
    p.run_for(Duration::from_secs(3));
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::Standby), Some(State::Active))
    );
    assert_eq!(
        p.transitions(0, t)[0],
        (
            State::Active,
            State::RelinquishingActive,
            Reason::WitnessLost
        )
    );
    let released = p
        .first(0, t, |e| *e == HaEvent::ReleaseServiceAddress)
        .unwrap();
    let taken = p
        .first(1, t, |e| *e == HaEvent::TakeServiceAddress)
        .unwrap();
    assert!(
        released < taken && taken - released <= Duration::from_millis(150),
        "{released:?} {taken:?}"
    );
    p.assert_clean();
}

#[test]
fn partition_healed_lower_epoch_yields_and_snapshots_are_exchanged() {
    let mut p = booted(2, false);
    p.check = false; // two actives during the partition are expected without a witness
    p.check_release = false;
    p.partition();
    p.run_for(Duration::from_secs(3));
    assert_eq!(p.actives(), 2);
    assert_eq!((p.m(0).epoch(), p.m(1).epoch()), (1, 2));
    let t = p.elapsed();
    p.heal();
    p.check = true;
    p.run_for(Duration::from_secs(2));
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::Standby), Some(State::Active)),
        "epoch 1 yields to epoch 2"
    );
    assert!(p.transitions(0, t).contains(&(
        State::Active,
        State::Standby,
        Reason::SplitBrainYield
    )));
    let yielded = p
        .first(0, t, |e| *e == HaEvent::ReleaseServiceAddress)
        .unwrap()
        - t;
    assert!(yielded <= p.adv() + Duration::from_millis(2), "{yielded:?}");
    assert!(p.first(0, t, |e| *e == HaEvent::ExchangeSnapshot).is_some());
    p.assert_clean();
}

#[test]
fn equal_epochs_higher_address_yields() {
    let mut p = HaPair::new(1, 1, false);
    p.check = false;
    p.partition();
    p.boot(0);
    p.boot(1);
    p.run_for(Duration::from_secs(3));
    assert_eq!(p.actives(), 2);
    p.heal();
    p.run_for(Duration::from_secs(1));
    assert_eq!(
        (p.state(0), p.state(1)),
        (Some(State::Active), Some(State::Standby))
    );
}

#[test]
fn forged_and_replayed_heartbeats_change_nothing() {
    let mut p = booted(1, false);
    let t = p.elapsed();
    let mut forged = Vec::new();
    let hb = Heartbeat {
        node: p.m(1).node_id(),
        incarnation: u64::MAX,
        echo: 1,
        state: State::Active,
        health: 100,
        flags: FLAG_WITNESS_OK,
        seq: u64::MAX,
        config_version: 0,
        epoch: u64::MAX,
        path: PathId(0),
        timestamp_ms: 0,
    };
    hb.encode(&PairKeys::derive(b"the-wrong-key-0123456789"), &mut forged)
        .unwrap();
    for _ in 0..10 {
        p.inject(0, 0, forged.clone());
        p.inject(0, 0, b"garbage".to_vec());
    }
    // A genuine heartbeat replayed (it echoes node 0's incarnation, 1: recorded in this life of
    // node 0, so only its sequence number gives it away).
    let mut genuine = Vec::new();
    Heartbeat {
        incarnation: 1,
        seq: 1,
        epoch: 0,
        state: State::Initial,
        ..hb.clone()
    }
    .encode(&PairKeys::derive(KEY.as_bytes()), &mut genuine)
    .unwrap();
    p.inject(0, 0, genuine);
    p.run_for(Duration::from_secs(3));
    assert!(p.transitions(0, t).is_empty());
    let c = *p.m(0).counters();
    assert_eq!(c.bad_mac, 10);
    assert_eq!(c.bad_length, 10);
    assert_eq!(c.stale, 1);
    assert_eq!(p.state(0), Some(State::Active));
}

/// A node that restarted remembers no sequence numbers: an authentic heartbeat recorded before
/// its restart (an active peer with a huge epoch) must not keep it from taking over. It does
/// not echo the restarted node's new incarnation, so it is counted unverified and ignored.
#[test]
fn a_heartbeat_recorded_before_a_restart_is_refused_after_it() {
    let mut p = booted(1, false);
    let standby = if p.state(0) == Some(State::Active) {
        1
    } else {
        0
    };
    let active = 1 - standby;
    // What a recorder on the link saw: the active's heartbeats to the standby, which echo the
    // standby's incarnation of that life (1).
    let recorded: Vec<Vec<u8>> = (0..60u64)
        .map(|k| {
            let mut d = Vec::new();
            Heartbeat {
                node: p.m(active).node_id(),
                incarnation: 1,
                echo: 1,
                state: State::Active,
                health: 100,
                flags: FLAG_WITNESS_OK | FLAG_SYNCED | FLAG_PEER_ALIVE,
                seq: 1_000_000 + k,
                config_version: 0,
                epoch: 1_000,
                path: PathId(0),
                timestamp_ms: 0,
            }
            .encode(&PairKeys::derive(KEY.as_bytes()), &mut d)
            .unwrap();
            d
        })
        .collect();
    // The active dies; the standby restarts (a new incarnation) and hears only the replays.
    p.crash(active);
    p.crash(standby);
    p.boot(standby);
    let t = p.elapsed();
    for d in recorded {
        p.inject(standby, 0, d);
        p.run_for(Duration::from_millis(50));
    }
    assert_eq!(
        p.state(standby),
        Some(State::Active),
        "{:?}",
        p.transitions(standby, t)
    );
    let c = *p.m(standby).counters();
    assert_eq!(c.accepted, 0);
    assert_eq!(c.unverified, 60);
    assert!(!p.m(standby).peer_alive());
}

#[test]
fn duplicate_is_counted_as_replay() {
    let cfg = config(1, false);
    let now = Instant::now();
    let mut a = Redundancy::new(&cfg, NAMES[0], 1, now).unwrap();
    let mut b = Redundancy::new(&cfg, NAMES[1], 1, now).unwrap();
    // b hears a first, so that its heartbeats echo a's incarnation (the freshness proof).
    let from_a = a.poll_transmit(now).unwrap();
    assert_eq!(
        b.handle_datagram(now, from_a.path, &from_a.payload),
        Err(Refused::Introduction),
        "a has not heard b yet: its first heartbeat proves nothing to b"
    );
    let t = b.poll_transmit(now).unwrap();
    assert_eq!(a.handle_datagram(now, t.path, &t.payload), Ok(()));
    assert_eq!(
        a.handle_datagram(now, t.path, &t.payload),
        Err(Refused::Replayed)
    );
    assert_eq!(a.counters().accepted, 1);
    assert_eq!(a.counters().replayed, 1);
    assert_eq!(
        a.handle_datagram(now, PathId(3), &t.payload),
        Err(Refused::PathMismatch)
    );
    assert_eq!(a.counters().path_mismatch, 1);
}

/// One random schedule of crashes, restarts, partitions (one-way too), loss, jitter, health
/// changes, forced switchovers and witness changes; then everything heals.
fn random_run(seed: u64) -> HaPair {
    let mut rng = Rng(seed ^ 0x5eed);
    let paths = 1 + rng.below(2) as usize;
    let witness = rng.chance(0.5);
    let mut p = HaPair::new(seed, paths, witness);
    p.check_release = false;
    p.max_latency = Duration::from_millis(40);
    for l in p.links.iter_mut().flatten() {
        l.lat_min = Duration::from_millis(1);
        l.lat_max = Duration::from_millis(40);
    }
    p.boot(0);
    p.run_for(rng.ms(0, 1500));
    p.boot(1);
    let end = p.now + Duration::from_secs(40);
    while p.now < end {
        p.run_for(rng.ms(200, 4000));
        match rng.below(12) {
            0 => {
                let i = rng.below(2) as usize;
                if p.nodes[1 - i].m.is_some() {
                    if rng.chance(0.5) {
                        p.kill9(i);
                    } else {
                        p.crash(i);
                    }
                }
            }
            1 | 2 => {
                for i in 0..2 {
                    if p.nodes[i].m.is_none() {
                        p.boot(i);
                    }
                }
            }
            3 => {
                for from in 0..2 {
                    for path in 0..paths {
                        let up = rng.chance(0.4);
                        p.set_link(from, path, up);
                    }
                }
            }
            4 => p.partition(),
            5 | 6 => p.heal(),
            7 => {
                for from in 0..2 {
                    for path in 0..paths {
                        if rng.chance(0.5) {
                            p.links[from][path].loss = 0.3;
                        }
                    }
                }
            }
            8 => {
                let i = rng.below(2) as usize;
                let h = match rng.below(10) {
                    0 => Health {
                        score: 0,
                        ineligible_until_restart: true,
                    },
                    1 | 2 => health(30),
                    3 => health(45),
                    4 | 5 => health(70),
                    6 => health(90),
                    _ => Health::FULL,
                };
                p.set_health(i, h);
            }
            9 => {
                let i = rng.below(2) as usize;
                if rng.chance(0.5) {
                    p.force(i);
                } else {
                    // The sync link breaks while both live.
                    p.link_lost(i);
                }
            }
            _ => {
                if witness {
                    if rng.chance(0.15) {
                        let up = p.arbiter.is_none();
                        p.set_witness_up(up);
                    } else {
                        let i = rng.below(2) as usize;
                        let r = rng.chance(0.6);
                        p.set_witness(i, r);
                    }
                }
            }
        }
    }
    // Heal everything, restart what is down, let it settle.
    p.heal();
    p.set_witness_up(true);
    for i in 0..2 {
        p.set_witness(i, true);
        if p.nodes[i].m.is_none() {
            p.boot(i);
        }
    }
    p.run_for(Duration::from_secs(5));
    if (0..2).any(|i| p.eligible(i)) {
        assert_eq!(
            p.actives(),
            1,
            "seed {seed}: not exactly one active after healing: {:?} {:?}",
            p.state(0),
            p.state(1)
        );
    }
    p
}

#[test]
fn property_random_schedules() {
    let seeds: u64 = std::env::var("HA_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let base: u64 = std::env::var("HA_SIM_BASE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut failures = Vec::new();
    let (mut max_dual, mut max_zero) = (Duration::ZERO, Duration::ZERO);
    let (mut max_dual_witness, mut max_dual_witness_seed) = (Duration::ZERO, 0);
    for seed in base..base + seeds {
        let r = std::panic::catch_unwind(|| random_run(seed));
        match r {
            Ok(p) => {
                if seeds == 1 {
                    for (t, n, e) in &p.log {
                        if !matches!(e, HaEvent::PathUp(_) | HaEvent::PathDown(_)) {
                            println!("{t:?} {} {e:?}", NAMES[*n]);
                        }
                    }
                }
                max_dual = max_dual.max(p.max_dual);
                if p.cfg.witness.is_some() && p.max_dual_any > max_dual_witness {
                    max_dual_witness = p.max_dual_any;
                    max_dual_witness_seed = seed;
                }
                max_zero = max_zero.max(p.max_zero);
                failures.extend(p.violations);
            }
            Err(e) => failures.push(format!(
                "seed {seed}: panicked: {:?}",
                e.downcast_ref::<String>()
            )),
        }
    }
    println!("{seeds} seeds: longest dual active while hearing {max_dual:?}, with a witness (hearing or not) {max_dual_witness:?} (seed {max_dual_witness_seed}), longest zero active with an eligible node {max_zero:?}");
    assert!(
        failures.is_empty(),
        "{} failures (rerun one with HA_SIM_BASE=<seed> HA_SIM_SEEDS=1):\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// A pair's settings with node `i`'s single heartbeat destination `dest[i]` and a witness.
fn config_on(dest: [&str; 2], witness: Option<&str>) -> RedundancySettings {
    let mut c = config(1, false);
    for (p, d) in c.peers.iter_mut().zip(dest) {
        p.destinations = vec![d.parse().unwrap()];
    }
    c.witness = witness.map(|w| w.parse().unwrap());
    c
}

/// Drives two machines for `span` of virtual time in 5 ms steps with instant, lossless
/// delivery of heartbeats (no witness answers), telling a node its sync is complete once it
/// is becoming standby. Returns the final states; panics if both are ever active.
fn drive_two(a: &mut Redundancy, b: &mut Redundancy, t0: Instant, span: Duration) -> [State; 2] {
    let mut now = t0;
    while now < t0 + span {
        now += Duration::from_millis(5);
        for m in [&mut *a, &mut *b] {
            if m.poll_timeout().is_some_and(|t| t <= now) {
                m.handle_timeout(now);
            }
        }
        let mut to_b = Vec::new();
        while let Some(t) = a.poll_transmit(now) {
            to_b.push(t);
        }
        let mut to_a = Vec::new();
        while let Some(t) = b.poll_transmit(now) {
            to_a.push(t);
        }
        for t in to_b {
            let _ = b.handle_datagram(now, t.path, &t.payload);
        }
        for t in to_a {
            let _ = a.handle_datagram(now, t.path, &t.payload);
        }
        for m in [&mut *a, &mut *b] {
            while m.poll_witness(now).is_some() {}
            while m.poll().is_some() {}
            if m.state() == State::BecomingStandby {
                m.handle_sync_complete(now);
            }
        }
        assert!(
            !(a.state() == State::Active && b.state() == State::Active),
            "two actives at {:?}",
            now - t0
        );
    }
    [a.state(), b.state()]
}

/// An IPv6 pair elects the lower address and sends its heartbeats and probes over IPv6.
#[test]
fn ipv6_pair_elects_the_lower_address() {
    let cfg = config_on(["[fd00::1]:9090", "[fd00::2]:9090"], Some("[fd00::3]:7000"));
    let t0 = Instant::now();
    let mut a = Redundancy::new(&cfg, NAMES[0], 1, t0).unwrap();
    let first = a.poll_transmit(t0).unwrap();
    assert_eq!(first.destination, "[fd00::2]:9090".parse().unwrap());
    assert_eq!(
        a.poll_witness(t0).unwrap().destination,
        "[fd00::3]:7000".parse().unwrap()
    );
    let mut cfg = cfg;
    cfg.witness = None;
    let mut a = Redundancy::new(&cfg, NAMES[0], 2, t0).unwrap();
    let mut b = Redundancy::new(&cfg, NAMES[1], 2, t0).unwrap();
    assert_eq!(
        drive_two(&mut a, &mut b, t0, Duration::from_secs(5)),
        [State::Active, State::Standby]
    );
}

/// Each node may spell an IPv4 address as itself or IPv4-mapped (`::ffff:a.b.c.d`): both
/// order the pair by the canonical address, so they agree on the lower one (an IPv4 address
/// sorts before every IPv6 one: comparing the spellings, both nodes were "lower" and both went
/// active), and heartbeats go to the plain IPv4 address.
#[test]
fn mapped_spellings_agree_on_the_election() {
    // sbc-b has the lower address, 10.0.0.1.
    let cfg_a = config_on(["10.0.0.2:9090", "[::ffff:10.0.0.1]:9090"], None);
    let cfg_b = config_on(["10.0.0.2:9090", "10.0.0.1:9090"], None);
    let t0 = Instant::now();
    let mut a = Redundancy::new(&cfg_a, NAMES[0], 1, t0).unwrap();
    let mut b = Redundancy::new(&cfg_b, NAMES[1], 1, t0).unwrap();
    assert_eq!(
        a.poll_transmit(t0).unwrap().destination,
        "10.0.0.1:9090".parse().unwrap(),
        "to the canonical address"
    );
    assert_eq!(
        drive_two(&mut a, &mut b, t0, Duration::from_secs(5)),
        [State::Standby, State::Active]
    );
}
