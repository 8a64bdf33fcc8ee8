//! Delivery of records to the accounting servers, sans IO: which server each record goes to
//! (`strategy`), how long an answer is waited for, when a record is sent again, when a server
//! is taken as failed and when it is tried again. Time is passed in; the node sends the
//! packets ([`Delivery::poll_send`]) and hands back each answer
//! ([`Delivery::handle_answer`]).
//!
//! ```text
//!   Up ──no answer to one record after `tries` sends──▶ Down ──restart-delay──▶ Probing
//!    ▲                                                                          │
//!    └─────────────────────── an answer ◀──────── one record at a time ─────────┘
//! ```
//! A server that answers nothing for `max-inactivity` while it has requests in flight fails
//! too, whatever sends are left (a long `min-round-trip` would otherwise keep records on it
//! for minutes). A failed server's records go back to the head of the queue for the next server. Records
//! of one call are sent one at a time, in the order they were generated (a Stop never
//! overtakes its Start); records of different calls go side by side, up to
//! `max-wait-failover` unanswered per server.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use crate::hashing::IdHash;

/// Oracle's `strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Every record to the first server that is up.
    Hunt,
    /// The current server until it fails, then the next one, which stays current.
    Failover,
    /// Records spread over the servers that are up, in turn.
    RoundRobin,
}

/// One server's timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerTimings {
    /// How long an answer is waited for before the record is sent again (doubling each
    /// time).
    pub retry_after: Duration,
    /// How long a failed server is left alone.
    pub restart_delay: Duration,
    /// How long a server may leave every request unanswered before it is taken as failed,
    /// whatever the sends left (`max-inactivity`).
    pub max_inactivity: Duration,
}

/// What delivery is configured with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliverySettings {
    /// How records are spread.
    pub strategy: Strategy,
    /// Records sent to one server and not answered yet, at most (`max-wait-failover`).
    pub max_wait_failover: u32,
    /// Sends of one record to one server before the server is taken as failed.
    pub tries: u32,
    /// The servers, in their configured order.
    pub servers: Vec<ServerTimings>,
}

/// A server's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// Answering.
    Up,
    /// Failed: not tried until the instant given.
    Down(Instant),
    /// Tried again after its restart delay: one record at a time until it answers.
    Probing,
}

impl ServerState {
    /// The word the console uses.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down(_) => "down",
            Self::Probing => "probing",
        }
    }
}

/// A server's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounters {
    /// Requests sent, first sends and resends.
    pub sent: u64,
    /// Requests sent again after no answer.
    pub resent: u64,
    /// Records it acknowledged.
    pub acknowledged: u64,
    /// Times it was taken as failed.
    pub failures: u64,
}

/// A packet to send: record `seq` to server `server` with RADIUS Identifier `identifier`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Send {
    /// The record's spool number.
    pub seq: u64,
    /// The server's index in the settings.
    pub server: usize,
    /// The Identifier to put in the packet (unique among this server's requests in flight).
    pub identifier: u8,
    /// Whether the record was sent before (to this server or another).
    pub resend: bool,
}

#[derive(Debug)]
struct Server {
    timings: ServerTimings,
    state: ServerState,
    in_flight: [Option<u64>; 256],
    outstanding: usize,
    next_id: u8,
    counters: ServerCounters,
    /// Since when it has had requests in flight and answered none.
    silent_since: Option<Instant>,
}

#[derive(Debug, Clone, Copy)]
struct Flight {
    server: usize,
    identifier: u8,
    deadline: Instant,
    sends_here: u32,
    session: u64,
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    seq: u64,
    session: u64,
    sent_before: bool,
}

/// The delivery machine (see the module).
#[derive(Debug)]
pub struct Delivery {
    strategy: Strategy,
    window: usize,
    tries: u32,
    servers: Vec<Server>,
    queue: VecDeque<Queued>,
    flights: BTreeMap<u64, Flight>,
    busy_sessions: HashSet<u64, IdHash>,
    current: usize,
    turn: usize,
    out: VecDeque<Send>,
    delivered: VecDeque<u64>,
}

/// How far into the queue a send looks for a record whose call has none in flight.
const SCAN: usize = 1024;

impl Delivery {
    /// A machine for `settings`.
    #[must_use]
    pub fn new(settings: &DeliverySettings) -> Self {
        Self {
            strategy: settings.strategy,
            window: usize::try_from(settings.max_wait_failover)
                .unwrap_or(255)
                .clamp(1, 255),
            tries: settings.tries.max(1),
            servers: settings
                .servers
                .iter()
                .map(|t| Server {
                    timings: *t,
                    state: ServerState::Up,
                    in_flight: [None; 256],
                    outstanding: 0,
                    next_id: 0,
                    counters: ServerCounters::default(),
                    silent_since: None,
                })
                .collect(),
            queue: VecDeque::new(),
            flights: BTreeMap::new(),
            busy_sessions: HashSet::default(),
            current: 0,
            turn: 0,
            out: VecDeque::new(),
            delivered: VecDeque::new(),
        }
    }

    /// Record `seq`, of the call whose session hashes to `session`, is to be delivered.
    pub fn enqueue(&mut self, now: Instant, seq: u64, session: u64) {
        self.queue.push_back(Queued {
            seq,
            session,
            sent_before: false,
        });
        self.pump(now);
    }

    /// Server `server` answered the request with `identifier`: the record it carried, if it
    /// was still waiting (a late answer to a request sent again is not).
    pub fn handle_answer(&mut self, now: Instant, server: usize, identifier: u8) -> Option<u64> {
        let s = self.servers.get_mut(server)?;
        let seq = s.in_flight[usize::from(identifier)].take()?;
        s.outstanding = s.outstanding.saturating_sub(1);
        s.counters.acknowledged += 1;
        s.state = ServerState::Up;
        s.silent_since = (s.outstanding > 0).then_some(now);
        if let Some(f) = self.flights.remove(&seq) {
            self.busy_sessions.remove(&f.session);
        }
        self.delivered.push_back(seq);
        self.pump(now);
        Some(seq)
    }

    /// The record server `server` awaits an answer to with `identifier` now, if any (an
    /// answer is taken for it only if it answers the request written for that record: an
    /// identifier freed by a resend or a failure may have been given to a record not sent
    /// yet).
    #[must_use]
    pub fn awaits(&self, server: usize, identifier: u8) -> Option<u64> {
        self.servers
            .get(server)
            .and_then(|s| s.in_flight[usize::from(identifier)])
    }

    /// Sends again what waited too long, fails servers that do not answer, brings failed
    /// servers back after their restart delay.
    pub fn handle_timeout(&mut self, now: Instant) {
        for s in &mut self.servers {
            if matches!(s.state, ServerState::Down(until) if until <= now) {
                s.state = ServerState::Probing;
            }
        }
        for i in 0..self.servers.len() {
            if self.servers[i]
                .inactive_until()
                .is_some_and(|until| until <= now)
            {
                self.fail_server(now, i);
            }
        }
        let due: Vec<u64> = self
            .flights
            .iter()
            .filter(|(_, f)| f.deadline <= now)
            .map(|(seq, _)| *seq)
            .collect();
        for seq in due {
            let Some(f) = self.flights.get(&seq).copied() else {
                continue;
            };
            if f.sends_here >= self.tries {
                self.fail_server(now, f.server);
                continue;
            }
            let Some(s) = self.servers.get_mut(f.server) else {
                continue;
            };
            s.in_flight[usize::from(f.identifier)] = None;
            let Some(identifier) = s.free_identifier() else {
                continue;
            };
            s.in_flight[usize::from(identifier)] = Some(seq);
            s.counters.sent += 1;
            s.counters.resent += 1;
            let backoff = s.timings.retry_after * 2u32.saturating_pow(f.sends_here);
            self.flights.insert(
                seq,
                Flight {
                    identifier,
                    deadline: now + backoff,
                    sends_here: f.sends_here + 1,
                    ..f
                },
            );
            self.out.push_back(Send {
                seq,
                server: f.server,
                identifier,
                resend: true,
            });
        }
        self.pump(now);
    }

    /// Stops delivering record `seq` (queued or in flight): another node delivers it, or it
    /// cannot be encoded. Returns whether it was held.
    pub fn forget(&mut self, seq: u64) -> bool {
        if let Some(i) = self.queue.iter().position(|q| q.seq == seq) {
            self.queue.remove(i);
            return true;
        }
        let Some(f) = self.flights.remove(&seq) else {
            return false;
        };
        self.busy_sessions.remove(&f.session);
        if let Some(s) = self.servers.get_mut(f.server) {
            if s.in_flight[usize::from(f.identifier)] == Some(seq) {
                s.in_flight[usize::from(f.identifier)] = None;
                s.outstanding = s.outstanding.saturating_sub(1);
            }
            if s.outstanding == 0 {
                // Nothing in flight: not silent (a stale instant would fail the server as
                // soon as it is sent the next record).
                s.silent_since = None;
            }
        }
        true
    }

    /// When [`Self::handle_timeout`] is next due.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let flights = self.flights.values().map(|f| f.deadline);
        let downs = self.servers.iter().filter_map(|s| match s.state {
            ServerState::Down(until) => Some(until),
            _ => s.inactive_until(),
        });
        flights.chain(downs).min()
    }

    /// The next packet to send.
    pub fn poll_send(&mut self) -> Option<Send> {
        self.out.pop_front()
    }

    /// The next record acknowledged.
    pub fn poll_delivered(&mut self) -> Option<u64> {
        self.delivered.pop_front()
    }

    /// Records waiting for a server (not sent, or taken back from a failed one).
    #[must_use]
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Records sent and not answered yet.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.flights.len()
    }

    /// Each server's state and counters, in the configured order.
    pub fn servers(&self) -> impl Iterator<Item = (ServerState, ServerCounters, usize)> + '_ {
        self.servers
            .iter()
            .map(|s| (s.state, s.counters, s.outstanding))
    }

    fn fail_server(&mut self, now: Instant, server: usize) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        s.state = ServerState::Down(now + s.timings.restart_delay);
        s.counters.failures += 1;
        s.in_flight = [None; 256];
        s.outstanding = 0;
        s.silent_since = None;
        // Its records go back to the head of the queue, in their order.
        let taken: Vec<(u64, Flight)> = self
            .flights
            .iter()
            .filter(|(_, f)| f.server == server)
            .map(|(seq, f)| (*seq, *f))
            .collect();
        for (seq, f) in taken.into_iter().rev() {
            self.flights.remove(&seq);
            self.busy_sessions.remove(&f.session);
            self.queue.push_front(Queued {
                seq,
                session: f.session,
                sent_before: true,
            });
        }
        if self.strategy == Strategy::Failover && self.current == server {
            self.current = (server + 1) % self.servers.len().max(1);
        }
    }

    fn has_room(&self, i: usize) -> bool {
        self.servers.get(i).is_some_and(|s| match s.state {
            ServerState::Up => s.outstanding < self.window,
            ServerState::Probing => s.outstanding == 0,
            ServerState::Down(_) => false,
        })
    }

    fn usable(&self, i: usize) -> bool {
        self.servers
            .get(i)
            .is_some_and(|s| !matches!(s.state, ServerState::Down(_)))
    }

    fn pick(&mut self) -> Option<usize> {
        let n = self.servers.len();
        // A server being probed takes one record at a time; the others go on to the next one
        // up meanwhile (without that, delivery would wait on every probe).
        let probing_busy = |d: &Self, i: usize| {
            d.servers
                .get(i)
                .is_some_and(|s| s.state == ServerState::Probing && s.outstanding > 0)
        };
        match self.strategy {
            Strategy::Hunt => (0..n)
                .find(|&i| self.usable(i) && !probing_busy(self, i))
                .filter(|&i| self.has_room(i)),
            Strategy::Failover => {
                let current = (0..n)
                    .map(|k| (self.current + k) % n)
                    .find(|&i| self.usable(i))?;
                self.current = current;
                if probing_busy(self, current) {
                    return (0..n)
                        .map(|k| (current + k) % n)
                        .find(|&i| self.usable(i) && !probing_busy(self, i))
                        .filter(|&i| self.has_room(i));
                }
                self.has_room(current).then_some(current)
            }
            Strategy::RoundRobin => {
                let i = (0..n)
                    .map(|k| (self.turn + k) % n)
                    .find(|&i| self.has_room(i))?;
                self.turn = (i + 1) % n;
                Some(i)
            }
        }
    }

    fn pump(&mut self, now: Instant) {
        while !self.queue.is_empty() {
            // No server has room: nothing to look for (the queue is not scanned for each
            // record handed in or answered while the window is full).
            if !(0..self.servers.len()).any(|i| self.has_room(i)) {
                return;
            }
            let Some(at) = self
                .queue
                .iter()
                .take(SCAN)
                .position(|q| !self.busy_sessions.contains(&q.session))
            else {
                return;
            };
            let Some(server) = self.pick() else {
                return;
            };
            let Some(q) = self.queue.remove(at) else {
                return;
            };
            let Some(s) = self.servers.get_mut(server) else {
                return;
            };
            let Some(identifier) = s.free_identifier() else {
                self.queue.insert(at, q);
                return;
            };
            s.in_flight[usize::from(identifier)] = Some(q.seq);
            s.outstanding += 1;
            s.silent_since.get_or_insert(now);
            s.counters.sent += 1;
            if q.sent_before {
                s.counters.resent += 1;
            }
            self.busy_sessions.insert(q.session);
            self.flights.insert(
                q.seq,
                Flight {
                    server,
                    identifier,
                    deadline: now + s.timings.retry_after,
                    sends_here: 1,
                    session: q.session,
                },
            );
            self.out.push_back(Send {
                seq: q.seq,
                server,
                identifier,
                resend: q.sent_before,
            });
        }
    }
}

impl Server {
    /// When it is taken as failed for `max-inactivity` if nothing is answered before.
    fn inactive_until(&self) -> Option<Instant> {
        self.silent_since
            .filter(|_| self.outstanding > 0)
            .map(|t| t + self.timings.max_inactivity)
    }

    fn free_identifier(&mut self) -> Option<u8> {
        for _ in 0..256 {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1);
            if self.in_flight[usize::from(id)].is_none() {
                return Some(id);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(strategy: Strategy, n: usize) -> DeliverySettings {
        DeliverySettings {
            strategy,
            max_wait_failover: 100,
            tries: 3,
            servers: vec![
                ServerTimings {
                    retry_after: Duration::from_secs(1),
                    restart_delay: Duration::from_secs(30),
                    max_inactivity: Duration::from_secs(60),
                };
                n
            ],
        }
    }

    fn drain(d: &mut Delivery) -> Vec<Send> {
        std::iter::from_fn(|| d.poll_send()).collect()
    }

    #[test]
    fn a_call_s_stop_waits_for_its_start_and_other_calls_go_side_by_side() {
        let t0 = Instant::now();
        let mut d = Delivery::new(&settings(Strategy::Hunt, 1));
        d.enqueue(t0, 1, 100); // call A start
        d.enqueue(t0, 2, 100); // call A stop
        d.enqueue(t0, 3, 200); // call B start
        let sent = drain(&mut d);
        assert_eq!(sent.iter().map(|s| s.seq).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(d.handle_answer(t0, 0, sent[0].identifier), Some(1));
        assert_eq!(
            drain(&mut d).iter().map(|s| s.seq).collect::<Vec<_>>(),
            vec![2]
        );
        assert_eq!(d.poll_delivered(), Some(1));
    }

    #[test]
    fn no_answer_sends_again_then_fails_over_and_the_first_comes_back_after_its_delay() {
        let t0 = Instant::now();
        let mut d = Delivery::new(&settings(Strategy::Hunt, 2));
        d.enqueue(t0, 1, 1);
        let first = drain(&mut d);
        assert_eq!(first[0].server, 0);
        // Resends after 1 s, then 2 s more; then 4 s more without an answer: failed.
        assert_eq!(d.poll_timeout(), Some(t0 + Duration::from_secs(1)));
        d.handle_timeout(t0 + Duration::from_secs(1));
        let again = drain(&mut d);
        assert!(again[0].resend && again[0].identifier != first[0].identifier);
        d.handle_timeout(t0 + Duration::from_secs(3));
        assert_eq!(drain(&mut d).len(), 1);
        let t_fail = t0 + Duration::from_secs(7);
        d.handle_timeout(t_fail);
        let moved = drain(&mut d);
        assert_eq!(
            (moved[0].server, moved[0].seq, moved[0].resend),
            (1, 1, true)
        );
        assert_eq!(d.servers().next().map(|s| s.0.as_str()), Some("down"));
        // A late answer from the failed server to an old request changes nothing.
        assert_eq!(d.handle_answer(t_fail, 0, first[0].identifier), None);
        assert_eq!(d.handle_answer(t_fail, 1, moved[0].identifier), Some(1));
        // After the restart delay, hunt tries the first server again, one record at a time.
        d.handle_timeout(t_fail + Duration::from_secs(30));
        d.enqueue(t_fail + Duration::from_secs(30), 2, 2);
        d.enqueue(t_fail + Duration::from_secs(30), 3, 3);
        let probe = drain(&mut d);
        assert_eq!(probe.len(), 2, "{probe:?}");
        assert_eq!(
            probe[0].server, 0,
            "the first server probed with one record"
        );
        assert_eq!(
            probe[1].server, 1,
            "the other goes to the server up meanwhile"
        );
        assert!(d.forget(3), "a record forgotten leaves the machine");
        assert!(!d.forget(3));
        d.handle_answer(t_fail + Duration::from_secs(31), 0, probe[0].identifier);
        d.enqueue(t_fail + Duration::from_secs(31), 4, 4);
        assert_eq!(drain(&mut d)[0].server, 0, "up again: hunt's first choice");
    }

    #[test]
    fn failover_stays_on_the_next_server_and_round_robin_takes_turns() {
        let t0 = Instant::now();
        let mut d = Delivery::new(&settings(Strategy::Failover, 2));
        d.enqueue(t0, 1, 1);
        drain(&mut d);
        for s in [1, 3, 7] {
            d.handle_timeout(t0 + Duration::from_secs(s));
        }
        let moved = drain(&mut d);
        assert_eq!(moved.last().map(|s| s.server), Some(1));
        d.handle_answer(t0, 1, moved[moved.len() - 1].identifier);
        d.handle_timeout(t0 + Duration::from_secs(60)); // server 0 probing again
        d.enqueue(t0 + Duration::from_secs(60), 2, 2);
        assert_eq!(drain(&mut d)[0].server, 1, "failover does not go back");

        let mut r = Delivery::new(&settings(Strategy::RoundRobin, 3));
        for seq in 1..=6 {
            r.enqueue(t0, seq, seq);
        }
        let servers: Vec<usize> = drain(&mut r).iter().map(|s| s.server).collect();
        assert_eq!(servers, vec![0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn at_most_max_wait_failover_records_wait_on_a_server() {
        let t0 = Instant::now();
        let mut s = settings(Strategy::Hunt, 1);
        s.max_wait_failover = 2;
        let mut d = Delivery::new(&s);
        for seq in 1..=5 {
            d.enqueue(t0, seq, seq);
        }
        assert_eq!(drain(&mut d).len(), 2);
        assert_eq!(d.queued(), 3);
        assert_eq!(d.in_flight(), 2);
    }

    #[test]
    fn a_server_left_with_nothing_in_flight_by_a_forget_is_not_failed_on_its_next_send() {
        // Review: `forget` (a hand-over, an undeliverable record) took the last request in
        // flight but left `silent_since` set; the next send, any time later, kept that old
        // instant and the server was failed for max-inactivity at once.
        let mut d = Delivery::new(&settings(Strategy::Hunt, 1));
        let t0 = Instant::now();
        d.enqueue(t0, 1, 11);
        assert_eq!(drain(&mut d).len(), 1);
        assert!(d.forget(1));
        let t1 = t0 + Duration::from_secs(120);
        d.enqueue(t1, 2, 22);
        assert_eq!(drain(&mut d).len(), 1);
        assert_eq!(d.poll_timeout(), Some(t1 + Duration::from_secs(1)));
        d.handle_timeout(t1 + Duration::from_millis(20));
        assert_eq!(d.servers().next().map(|s| s.0), Some(ServerState::Up));
        assert!(drain(&mut d).is_empty(), "nothing moved or resent");
    }

    #[test]
    fn a_server_silent_for_max_inactivity_fails_before_its_sends_run_out() {
        let mut st = settings(Strategy::Hunt, 2);
        for t in &mut st.servers {
            t.retry_after = Duration::from_secs(100);
            t.max_inactivity = Duration::from_secs(60);
        }
        let mut d = Delivery::new(&st);
        let t0 = Instant::now();
        d.enqueue(t0, 1, 11);
        assert_eq!(drain(&mut d)[0].server, 0);
        assert_eq!(d.poll_timeout(), Some(t0 + Duration::from_secs(60)));
        d.handle_timeout(t0 + Duration::from_secs(59));
        assert!(drain(&mut d).is_empty(), "no resend before 100 s");
        assert_eq!(d.servers().next().map(|s| s.0), Some(ServerState::Up));
        d.handle_timeout(t0 + Duration::from_secs(60));
        assert!(matches!(
            d.servers().next().map(|s| s.0),
            Some(ServerState::Down(_))
        ));
        let moved = drain(&mut d);
        assert_eq!(
            (moved[0].seq, moved[0].server, moved[0].resend),
            (1, 1, true)
        );
        // An answer resets the silence: the second server answers at 50 s, then is silent.
        let t1 = t0 + Duration::from_secs(110);
        assert!(d.handle_answer(t1, 1, moved[0].identifier).is_some());
        d.enqueue(t1, 2, 22);
        d.enqueue(t1, 3, 33);
        let sent = drain(&mut d);
        assert_eq!(sent.len(), 2);
        let t2 = t1 + Duration::from_secs(50);
        assert!(d.handle_answer(t2, 1, sent[0].identifier).is_some());
        d.handle_timeout(t1 + Duration::from_secs(60));
        assert_eq!(d.servers().nth(1).map(|s| s.0), Some(ServerState::Up));
        d.handle_timeout(t2 + Duration::from_secs(60));
        assert!(matches!(
            d.servers().nth(1).map(|s| s.0),
            Some(ServerState::Down(_))
        ));
    }
}
