//! One worker's queue: the PRSM [`Scheduler`] and the rules that need the clock and the
//! worker's speed.
//!
//! The scheduler decides by queue lengths and marks. Two more rules keep an admitted INVITE's
//! 100 Trying within about `max-queue-delay-ms` (well before its caller retransmits at T1),
//! both in PRSM mode and only for new requests:
//!
//! - **Expected wait at the door** ([`WorkerQueue::offer`]): a new request whose wait, the
//!   messages ahead of it in the primary queue times the worker's recent service time, would
//!   exceed `max-queue-delay` is refused at once, rather than after the wait.
//! - **Waited too long at the head** ([`WorkerQueue::take`]): one that still waited longer
//!   (the estimate was low, or the worker stalled) is refused when it reaches the head instead
//!   of being routed: its caller is retransmitting and a routed answer would come later still.
//!
//! A refused request is marked, so its copies are refused again, never routed. A new request
//! that is taken is marked answered at once (the engine answers it, 100 Trying for an INVITE,
//! before its routing lookup): its queued copies are removed and later ones are queued for the
//! engine to re-send the answer from transaction state (RFC 3261 section 17.2.1).
//!
//! The service time is an exponential moving average (weight 1/8) of what the shell measures
//! and reports with [`WorkerQueue::record_service`]; the one of admitted new requests
//! (routing included) feeds the autoscaler's demand. Time is passed in: every rule here is
//! tested on a virtual clock.

use std::time::{Duration, Instant};

use super::prsm::{Kind, Mode, PrsmConfig, Push, Scheduler, TxState};

/// What a group's queues did, summed over its workers (`show workers`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueCounters {
    /// Redundant retransmissions removed from or never put in the queues.
    pub removed_retransmissions: u64,
    /// Retransmissions of answered transactions passed to the engine to re-send the answer.
    pub answered_from_state: u64,
    /// Retransmissions served from the secondary queue.
    pub secondary_served: u64,
    /// New requests refused because the primary queue was full (or copies of refused ones).
    pub rejected_full: u64,
    /// New requests refused because of `max-queue-delay` (expected or actual wait).
    pub rejected_delay: u64,
    /// Other messages dropped because their queue was full.
    pub dropped_full: u64,
}

impl std::ops::AddAssign<&Self> for QueueCounters {
    fn add_assign(&mut self, b: &Self) {
        let Self {
            removed_retransmissions,
            answered_from_state,
            secondary_served,
            rejected_full,
            rejected_delay,
            dropped_full,
        } = self;
        // Destructured, so a new counter that is not summed here does not compile.
        *removed_retransmissions += b.removed_retransmissions;
        *answered_from_state += b.answered_from_state;
        *secondary_served += b.secondary_served;
        *rejected_full += b.rejected_full;
        *rejected_delay += b.rejected_delay;
        *dropped_full += b.dropped_full;
    }
}

/// What the shell does with an offered message.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub enum Offered<T> {
    /// Queued: wake the worker.
    Queued,
    /// Not queued and nothing to send: a redundant retransmission, or a message lost to a
    /// full queue (its sender retransmits).
    NotQueued,
    /// A new request refused: answer it `503` (statelessly, it never reaches an engine).
    Refuse(T),
}

/// What the worker does next.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub enum Next<T> {
    /// Process the message (of this refined kind).
    Process(T, Kind),
    /// Refuse it with `503`: a new request that waited longer than `max-queue-delay`.
    Refuse(T),
}

/// How long the worker spent on one message, for the service-time averages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    /// Time spent (processing or refusing).
    pub busy: Duration,
    /// Its kind, as [`Next::Process`] gave it.
    pub kind: Kind,
    /// Whether it was processed (not refused).
    pub processed: bool,
}

/// Messages taken out of one queue to go to another (a hand-over of shards), in order.
#[derive(Debug)]
pub struct Moved<T>(Vec<(u64, Kind, Waiting<T>)>);

impl<T> Moved<T> {
    /// How many messages move.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none does.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A queued message and when it was offered.
#[derive(Debug)]
pub struct Waiting<T> {
    item: T,
    since: Instant,
}

/// One worker's queue.
#[derive(Debug)]
pub struct WorkerQueue<T> {
    sched: Scheduler<Waiting<T>>,
    max_queue_delay: Duration,
    service_ns: u64,
    new_service_ns: u64,
    refused: u64,
    counters: QueueCounters,
}

impl<T> WorkerQueue<T> {
    /// A queue scheduling by `prsm`, refusing new requests that would wait (or waited) longer
    /// than `max_queue_delay` (PRSM mode; zero: never).
    #[must_use]
    pub fn new(prsm: PrsmConfig, max_queue_delay: Duration) -> Self {
        Self {
            sched: Scheduler::new(prsm),
            max_queue_delay,
            service_ns: 0,
            new_service_ns: 0,
            refused: 0,
            counters: QueueCounters::default(),
        }
    }

    fn delay_rules(&self) -> bool {
        self.sched.mode() == Mode::Prsm && !self.max_queue_delay.is_zero()
    }

    /// Offers a message with transaction `key`, as the receive path classified it, at `now`.
    pub fn offer(&mut self, now: Instant, key: u64, kind: Kind, item: T) -> Offered<T> {
        if kind == Kind::NewRequest && self.delay_rules() && !self.sched.is_known(key) {
            let ahead = self.sched.primary_len() as u128;
            let wait = ahead * u128::from(self.service_ns);
            if wait > self.max_queue_delay.as_nanos() {
                let _ = self.sched.mark_rejected(now, key);
                self.refused += 1;
                self.counters.rejected_delay += 1;
                return Offered::Refuse(item);
            }
        }
        let copy_of_refused = self.sched.state(key) == Some(TxState::Rejected);
        let waiting = Waiting { item, since: now };
        let pushed = match self.sched.push(now, key, kind, waiting) {
            Push::AnswerFromState(w) => {
                // The engine re-sends the answer from transaction state when no new request
                // waits: the secondary queue.
                self.counters.answered_from_state += 1;
                self.sched.queue_answer(key, w)
            }
            Push::RejectNew(w) => {
                if !copy_of_refused {
                    let _ = self.sched.mark_rejected(now, key);
                    self.refused += 1;
                }
                Push::RejectNew(w)
            }
            p => p,
        };
        match pushed {
            Push::Queued => Offered::Queued,
            Push::Dropped(reason) => {
                if reason.is_redundant() {
                    self.counters.removed_retransmissions += 1;
                } else {
                    self.counters.dropped_full += 1;
                }
                Offered::NotQueued
            }
            Push::RejectNew(w) | Push::AnswerFromState(w) => {
                self.counters.rejected_full += 1;
                Offered::Refuse(w.item)
            }
        }
    }

    /// The next message at `now`: the primary queue first, the secondary only when it is
    /// empty.
    pub fn take(&mut self, now: Instant) -> Option<Next<T>> {
        let (key, kind, w) = self.sched.pop_entry()?;
        if kind == Kind::Retransmission {
            self.counters.secondary_served += 1;
        }
        if kind == Kind::NewRequest
            && self.delay_rules()
            && now.saturating_duration_since(w.since) > self.max_queue_delay
        {
            let _ = self.sched.mark_rejected(now, key);
            self.refused += 1;
            self.counters.rejected_delay += 1;
            return Some(Next::Refuse(w.item));
        }
        if kind == Kind::NewRequest {
            let removed = self.sched.mark_answered(now, key);
            self.counters.removed_retransmissions += removed as u64;
        }
        Some(Next::Process(w.item, kind))
    }

    /// Time passed with nothing to do: the marks expired by `now` are purged and the room a
    /// burst left is given back, so an idle worker's memory returns without new traffic.
    pub fn handle_idle(&mut self, now: Instant) {
        self.sched.handle_timeout(now);
        self.sched.compact();
    }

    /// Records the time the worker spent on the message it took last.
    pub fn record_service(&mut self, s: Served) {
        let busy = u64::try_from(s.busy.as_nanos()).unwrap_or(u64::MAX);
        self.service_ns = ewma(self.service_ns, busy);
        if s.processed && s.kind == Kind::NewRequest {
            self.new_service_ns = ewma(self.new_service_ns, busy);
        }
    }

    /// Starts the averages of a new worker from its group's (so its expected-wait estimate is
    /// not zero, which would admit everything).
    pub fn seed_service(&mut self, service: Duration, new_service: Duration) {
        self.service_ns = u64::try_from(service.as_nanos()).unwrap_or(u64::MAX);
        self.new_service_ns = u64::try_from(new_service.as_nanos()).unwrap_or(u64::MAX);
    }

    /// Recent processing time per message.
    #[must_use]
    pub fn service_time(&self) -> Duration {
        Duration::from_nanos(self.service_ns)
    }

    /// Recent processing time per processed new request (routing included).
    #[must_use]
    pub fn new_request_service_time(&self) -> Duration {
        Duration::from_nanos(self.new_service_ns)
    }

    /// New requests refused on this worker's behalf so far (work it was offered and could not
    /// take; copies of refused requests are not counted again).
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// What this queue did so far.
    #[must_use]
    pub fn counters(&self) -> QueueCounters {
        self.counters
    }

    /// Messages waiting.
    #[must_use]
    pub fn len(&self) -> usize {
        self.sched.len()
    }

    /// Whether none waits.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.sched.is_empty()
    }

    /// Messages waiting in the primary queue.
    #[must_use]
    pub fn primary_len(&self) -> usize {
        self.sched.primary_len()
    }

    /// Messages waiting in the secondary queue.
    #[must_use]
    pub fn secondary_len(&self) -> usize {
        self.sched.secondary_len()
    }

    /// Takes the queued messages for which `pred` holds, each queue in order (the shards a
    /// worker hands over take their messages with them).
    pub fn extract(&mut self, mut pred: impl FnMut(&T) -> bool) -> Moved<T> {
        Moved(self.sched.extract(|w| pred(&w.item)))
    }

    /// Queues messages taken from another queue, whatever the lengths (they were admitted
    /// once already), keeping when they were first offered; and takes over that queue's marks,
    /// so retransmissions of what it answered or refused stay recognised (the marks are per
    /// transaction, not per shard: all go, a few spare ones expire on their own).
    pub fn take_over(&mut self, moved: Moved<T>, from: &Self) {
        for (key, kind, w) in moved.0 {
            self.sched.push_moved(key, kind, w);
        }
        for (key, state, expires) in from.sched.marks() {
            self.sched.import_mark(key, state, expires);
        }
    }
}

/// An exponential moving average with weight 1/8.
fn ewma(avg: u64, sample: u64) -> u64 {
    avg - avg / 8 + sample / 8
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn queue(max_delay: Duration) -> WorkerQueue<&'static str> {
        WorkerQueue::new(PrsmConfig::default(), max_delay)
    }

    fn served(q: &mut WorkerQueue<&'static str>, busy: Duration) {
        q.record_service(Served {
            busy,
            kind: Kind::NewRequest,
            processed: true,
        });
    }

    #[test]
    fn a_new_request_whose_expected_wait_is_too_long_is_refused_at_the_door() {
        let t0 = Instant::now();
        let mut q = queue(10 * MS);
        q.seed_service(2 * MS, 2 * MS);
        // 5 ahead x 2 ms = 10 ms: still admitted; the sixth would wait 12 ms.
        for key in 0..6 {
            assert_eq!(q.offer(t0, key, Kind::NewRequest, "new"), Offered::Queued);
        }
        assert_eq!(
            q.offer(t0, 99, Kind::NewRequest, "late"),
            Offered::Refuse("late")
        );
        // Its retransmission is refused again, never queued.
        assert_eq!(
            q.offer(t0 + MS, 99, Kind::NewRequest, "copy"),
            Offered::Refuse("copy")
        );
        assert_eq!(q.refused(), 1, "a copy is not counted again");
        assert_eq!(q.counters().rejected_delay, 1);
        assert_eq!(q.counters().rejected_full, 1);
        // In-dialog traffic and responses are never refused for the wait.
        assert_eq!(q.offer(t0, 500, Kind::InDialog, "bye"), Offered::Queued);
        assert_eq!(q.offer(t0, 501, Kind::Response, "200"), Offered::Queued);
        assert_eq!(q.len(), 8);
    }

    #[test]
    fn a_new_request_that_waited_too_long_is_refused_at_the_head() {
        let t0 = Instant::now();
        let mut q = queue(10 * MS);
        assert_eq!(q.offer(t0, 1, Kind::NewRequest, "slow"), Offered::Queued);
        assert_eq!(q.offer(t0, 2, Kind::InDialog, "bye"), Offered::Queued);
        // The worker stalled for 11 ms.
        assert_eq!(q.take(t0 + 11 * MS), Some(Next::Refuse("slow")));
        assert_eq!(
            q.take(t0 + 11 * MS),
            Some(Next::Process("bye", Kind::InDialog)),
            "an in-dialog request is served whatever its wait"
        );
        assert_eq!(
            q.offer(t0 + 12 * MS, 1, Kind::NewRequest, "copy"),
            Offered::Refuse("copy"),
            "its copies are refused, never routed"
        );
        assert_eq!(q.counters().rejected_delay, 1);
        assert_eq!(q.refused(), 1);
    }

    #[test]
    fn exactly_the_limit_is_still_served() {
        let t0 = Instant::now();
        let mut q = queue(10 * MS);
        assert_eq!(q.offer(t0, 1, Kind::NewRequest, "n"), Offered::Queued);
        assert_eq!(
            q.take(t0 + 10 * MS),
            Some(Next::Process("n", Kind::NewRequest))
        );
    }

    #[test]
    fn a_taken_request_is_answered_and_its_copies_go_to_the_engine_from_state() {
        let t0 = Instant::now();
        let mut q = queue(Duration::ZERO);
        assert_eq!(q.offer(t0, 1, Kind::NewRequest, "invite"), Offered::Queued);
        assert_eq!(
            q.offer(t0, 1, Kind::NewRequest, "copy"),
            Offered::NotQueued,
            "its original still waits: redundant"
        );
        assert_eq!(q.take(t0), Some(Next::Process("invite", Kind::NewRequest)));
        assert_eq!(q.offer(t0, 2, Kind::NewRequest, "other"), Offered::Queued);
        assert_eq!(q.offer(t0, 1, Kind::NewRequest, "retx"), Offered::Queued);
        assert_eq!(
            q.offer(t0, 1, Kind::NewRequest, "retx2"),
            Offered::NotQueued,
            "one copy per transaction waits"
        );
        // New requests first; the copy is served from the secondary queue after.
        assert_eq!(q.take(t0), Some(Next::Process("other", Kind::NewRequest)));
        assert_eq!(
            q.take(t0),
            Some(Next::Process("retx", Kind::Retransmission))
        );
        assert_eq!(q.take(t0), None);
        let c = q.counters();
        assert_eq!(
            (
                c.answered_from_state,
                c.secondary_served,
                c.removed_retransmissions
            ),
            (2, 1, 2)
        );
    }

    #[test]
    fn fifo_mode_has_no_delay_rules() {
        let t0 = Instant::now();
        let mut q: WorkerQueue<&str> = WorkerQueue::new(PrsmConfig::fifo(), 10 * MS);
        q.seed_service(Duration::from_secs(1), Duration::from_secs(1));
        assert_eq!(q.offer(t0, 1, Kind::NewRequest, "a"), Offered::Queued);
        assert_eq!(q.offer(t0, 2, Kind::NewRequest, "b"), Offered::Queued);
        assert_eq!(
            q.take(t0 + Duration::from_secs(5)),
            Some(Next::Process("a", Kind::NewRequest))
        );
        assert_eq!(q.counters().rejected_delay, 0);
    }

    #[test]
    fn the_service_time_is_a_moving_average_of_what_the_shell_measures() {
        let mut q = queue(10 * MS);
        assert_eq!(q.service_time(), Duration::ZERO);
        served(&mut q, 8 * MS);
        assert_eq!(q.service_time(), MS, "1/8 of the first sample");
        for _ in 0..100 {
            served(&mut q, 8 * MS);
        }
        let t = q.service_time();
        assert!(t > 7 * MS && t <= 8 * MS, "{t:?}");
        // A refused message counts for the service time, not for the new-request one.
        let before = q.new_request_service_time();
        q.record_service(Served {
            busy: Duration::from_micros(1),
            kind: Kind::NewRequest,
            processed: false,
        });
        assert_eq!(q.new_request_service_time(), before);
        assert!(q.service_time() < t);
    }

    #[test]
    fn handed_over_messages_keep_their_order_their_age_and_their_marks() {
        let t0 = Instant::now();
        let mut from = queue(10 * MS);
        let mut to = queue(10 * MS);
        // Shard of a message: its first letter.
        for (key, item) in [(1, "a1"), (2, "b1"), (3, "a2"), (4, "b2")] {
            assert_eq!(from.offer(t0, key, Kind::NewRequest, item), Offered::Queued);
        }
        // A refused transaction of shard a: its mark goes along.
        let _ = from.sched.mark_rejected(t0, 7);
        let moved = from.extract(|i| i.starts_with('a'));
        assert_eq!(moved.len(), 2);
        to.take_over(moved, &from);
        assert_eq!(from.len(), 2);
        assert_eq!(to.take(t0), Some(Next::Process("a1", Kind::NewRequest)));
        // The age moved too: a2 was offered at t0 and is now late.
        assert_eq!(to.take(t0 + 11 * MS), Some(Next::Refuse("a2")));
        assert_eq!(
            to.offer(t0, 7, Kind::NewRequest, "copy-of-refused"),
            Offered::Refuse("copy-of-refused")
        );
    }
}
