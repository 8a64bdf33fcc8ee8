//! PRSM: the request scheduler of one worker group, new requests before retransmissions.
//!
//! Under overload a SIP server over UDP drowns in its own success: requests wait in its queue
//! longer than `T1`, their clients retransmit them, the copies join the queue behind the
//! originals, and the server spends its capacity on messages it has already handled, so that
//! even admitted calls time out. The priority-based request scheduling mechanism of Yavaş,
//! Hökelek and Günsel (PRSM, seed 001) breaks that loop with two rules implemented here:
//!
//! - **Strict priority**: a bounded *primary* FIFO for new requests and a bounded *secondary*
//!   FIFO for retransmissions; [`Scheduler::pop`] serves the secondary only when the primary is
//!   empty.
//! - **Redundant retransmission removal**: once the caller reports a transaction as being
//!   processed ([`Scheduler::mark_in_progress`]) or answered ([`Scheduler::mark_answered`]),
//!   its queued retransmissions are removed from the secondary queue and later ones are never
//!   queued. A retransmission of an *answered* transaction is handed back as
//!   [`Push::AnswerFromState`], so the caller re-sends the last response from transaction state
//!   (what RFC 3261 asks of a server transaction) without queueing or routing it again. A
//!   retransmission whose original still waits in the primary queue, or of which a copy already
//!   waits in the secondary queue, is redundant too and is not queued.
//!
//! Classification is the caller's: it passes a [`Kind`] and a transaction key (a hash of the
//! top Via branch and the method, say). The scheduler refines it with what it knows: a
//! [`Kind::NewRequest`] whose key is already queued, in progress or answered *is* a
//! retransmission and is treated as one. In-dialog requests (including ACK and CANCEL, which
//! belong to transactions already admitted) and responses go to the **primary** queue: they
//! complete calls that were already admitted, cost little, and starving them would turn
//! admitted calls into failed ones, the very outcome PRSM exists to prevent.
//!
//! **Admission**: when the primary queue holds `primary_capacity − in_dialog_reserve`
//! messages, a new request is refused with [`Push::RejectNew`] and the caller answers
//! `503 Service Unavailable` at once, instead of letting the request rot in a queue until its
//! client gives up. The reserve (1/8 of the queue by default) keeps room for in-dialog requests
//! and responses, which are only dropped when the primary queue is completely full (the peer's
//! retransmission then recovers them); they never get a 503, as in the heap gate, where BYE and
//! in-dialog requests always pass. The 503 is part of the mechanism, not an extra: under
//! sustained overload the secondary queue is never served, so a new request that was silently
//! dropped instead would have its retransmissions starve there until its client times out.
//!
//! **Bounded memory**: the queues are bounded by their capacities, and so are the indexes of
//! queued keys. The marks (in progress / answered) expire after `mark_ttl` (default 32 s, the
//! `64 × T1` lifetime of a transaction) and are capped at `max_marks`, the oldest evicted first.
//!
//! **FIFO mode** ([`Mode::Fifo`], PRSM off) is the conventional server to compare with: one queue
//! holding the capacity of both, served in arrival order, no priority, no removal; only the
//! same 503 admission rule remains, applied as a careful stateful server does (Kamailio's
//! `t_check_trans` before a rate limit): never to a copy of a request it already holds or
//! answered (a copy arriving at a full queue is dropped), and a copy of a refused request is
//! refused again. Without that a 503 sent to a retransmission while its original still waits
//! ends the call at the caller while the original is later routed: a half-open call.
//!
//! The unit tests simulate a server offered 2× and 5× its capacity (one message served per
//! tick, `T1` = 500 ticks, default queues): PRSM completes 100 % of capacity with no failed
//! transaction, no processing spent on retransmissions and every answer within `2 × T1`; the
//! FIFO completes about 44 %, spending more than half its capacity on retransmissions.
//!
//! Sans-IO: time is passed in, nothing here blocks or reads the clock; the shell wraps one
//! scheduler per worker group.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Default capacity of each queue.
pub const DEFAULT_CAPACITY: usize = 1024;

/// Default room of the primary queue kept for in-dialog requests and responses (1/8).
pub const DEFAULT_IN_DIALOG_RESERVE: usize = DEFAULT_CAPACITY / 8;

/// Default lifetime of a mark: `64 × T1`, the lifetime of a transaction.
pub const DEFAULT_MARK_TTL: Duration = Duration::from_secs(32);

/// Default cap on the number of marks kept.
pub const DEFAULT_MAX_MARKS: usize = 65_536;

/// Whether PRSM is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Two queues, strict priority, redundant retransmission removal.
    #[default]
    Prsm,
    /// One queue in arrival order (PRSM off), for comparison.
    Fifo,
}

/// The settings of a scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrsmConfig {
    /// PRSM or plain FIFO.
    pub mode: Mode,
    /// Capacity of the primary queue (new requests, in-dialog requests, responses).
    pub primary_capacity: usize,
    /// Capacity of the secondary queue (retransmissions).
    pub secondary_capacity: usize,
    /// Room of the primary queue that new requests may not take.
    pub in_dialog_reserve: usize,
    /// How long a transaction stays marked in progress or answered.
    pub mark_ttl: Duration,
    /// The most marks kept (at least 1).
    pub max_marks: usize,
}

impl Default for PrsmConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Prsm,
            primary_capacity: DEFAULT_CAPACITY,
            secondary_capacity: DEFAULT_CAPACITY,
            in_dialog_reserve: DEFAULT_IN_DIALOG_RESERVE,
            mark_ttl: DEFAULT_MARK_TTL,
            max_marks: DEFAULT_MAX_MARKS,
        }
    }
}

impl PrsmConfig {
    /// The default settings with PRSM off.
    pub fn fifo() -> Self {
        Self {
            mode: Mode::Fifo,
            ..Self::default()
        }
    }
}

/// What the caller knows of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// An out-of-dialog request not seen before (primary queue; 503 when it is full).
    NewRequest,
    /// A retransmission of a request (secondary queue, or removed as redundant).
    Retransmission,
    /// An in-dialog request, ACK or CANCEL (primary queue, never a 503).
    InDialog,
    /// A response (primary queue, never a 503).
    Response,
}

/// Why a message was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// A retransmission of a transaction being processed: redundant.
    InProgress,
    /// A retransmission whose original waits in the primary queue: redundant.
    OriginalQueued,
    /// A retransmission of which a copy already waits in the secondary queue: redundant.
    DuplicateQueued,
    /// The secondary queue is full; the client will retransmit again.
    SecondaryFull,
    /// The primary queue (the only one in FIFO mode) is full, reserve included.
    PrimaryFull,
}

impl DropReason {
    /// Whether the message was a redundant retransmission (rather than one lost to a full
    /// queue).
    pub fn is_redundant(self) -> bool {
        matches!(
            self,
            Self::InProgress | Self::OriginalQueued | Self::DuplicateQueued
        )
    }
}

/// The outcome of [`Scheduler::push`].
#[must_use]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Push<T> {
    /// Queued; [`Scheduler::pop`] will return it.
    Queued,
    /// Not queued, and not to be processed.
    Dropped(DropReason),
    /// A new request refused because the primary queue is full: the caller answers 503.
    RejectNew(T),
    /// A retransmission of an answered transaction: the caller re-sends the last response from
    /// transaction state.
    AnswerFromState(T),
}

/// How far a marked transaction has got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxState {
    /// Being processed.
    InProgress,
    /// Answered: a response was sent.
    Answered,
    /// Refused with a stateless 503 (queue full, or too long a wait): later copies get the
    /// same answer, never a route.
    Rejected,
}

/// The counters of a scheduler, for `show sip-stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrsmStats {
    /// Messages waiting in the primary queue (the only one in FIFO mode).
    pub primary_len: usize,
    /// Messages waiting in the secondary queue.
    pub secondary_len: usize,
    /// The most messages the primary queue has held.
    pub primary_high_water: usize,
    /// The most messages the secondary queue has held.
    pub secondary_high_water: usize,
    /// Messages ever queued in the primary queue.
    pub queued_primary: u64,
    /// Messages ever queued in the secondary queue.
    pub queued_secondary: u64,
    /// Redundant retransmissions not queued or removed from the queue.
    pub removed_retransmissions: u64,
    /// Retransmissions handed back to be answered from transaction state.
    pub answered_from_state: u64,
    /// New requests refused (503) because the primary queue was full.
    pub rejected_new: u64,
    /// Messages dropped because their queue was full.
    pub dropped: u64,
    /// Transactions currently marked in progress or answered.
    pub tracked: usize,
}

#[derive(Debug)]
struct Entry<T> {
    key: u64,
    kind: Kind,
    item: T,
}

#[derive(Debug, Clone, Copy)]
struct Mark {
    state: TxState,
    expires: Instant,
}

/// The PRSM scheduler of one worker group, holding messages of type `T`.
#[derive(Debug)]
pub struct Scheduler<T> {
    config: PrsmConfig,
    primary: VecDeque<Entry<T>>,
    secondary: VecDeque<Entry<T>>,
    /// Keys of the new requests in the primary queue, with their count (PRSM mode).
    queued_new: HashMap<u64, u32>,
    /// Keys of the retransmissions in the secondary queue, with their count.
    queued_retx: HashMap<u64, u32>,
    marks: HashMap<u64, Mark>,
    /// Mark expiries in the order they were set (so in time order); stale entries are skipped.
    expiry: VecDeque<(Instant, u64)>,
    counters: PrsmStats,
}

fn add_key(index: &mut HashMap<u64, u32>, key: u64) {
    *index.entry(key).or_insert(0) += 1;
}

fn remove_key(index: &mut HashMap<u64, u32>, key: u64) {
    if let Some(n) = index.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            index.remove(&key);
        }
    }
}

impl<T> Scheduler<T> {
    /// An empty scheduler.
    pub fn new(config: PrsmConfig) -> Self {
        Self {
            config,
            primary: VecDeque::new(),
            secondary: VecDeque::new(),
            queued_new: HashMap::new(),
            queued_retx: HashMap::new(),
            marks: HashMap::new(),
            expiry: VecDeque::new(),
            counters: PrsmStats::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &PrsmConfig {
        &self.config
    }

    /// PRSM or FIFO.
    pub fn mode(&self) -> Mode {
        self.config.mode
    }

    /// Messages waiting in both queues.
    pub fn len(&self) -> usize {
        self.primary.len() + self.secondary.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Messages waiting in the primary queue (the only one in FIFO mode).
    pub fn primary_len(&self) -> usize {
        self.primary.len()
    }

    /// Messages waiting in the secondary queue.
    pub fn secondary_len(&self) -> usize {
        self.secondary.len()
    }

    /// The mark of a transaction, if it is marked and the mark has not been purged.
    pub fn state(&self, key: u64) -> Option<TxState> {
        self.marks.get(&key).map(|m| m.state)
    }

    /// The counters.
    pub fn stats(&self) -> PrsmStats {
        PrsmStats {
            primary_len: self.primary.len(),
            secondary_len: self.secondary.len(),
            tracked: self.marks.len(),
            ..self.counters
        }
    }

    /// The capacity of the primary queue: in FIFO mode that of both queues.
    fn primary_capacity(&self) -> usize {
        match self.config.mode {
            Mode::Prsm => self.config.primary_capacity,
            Mode::Fifo => self.config.primary_capacity + self.config.secondary_capacity,
        }
    }

    /// How many messages the primary queue may hold for a new request to be queued.
    fn new_request_limit(&self) -> usize {
        self.primary_capacity()
            .saturating_sub(self.config.in_dialog_reserve)
    }

    /// Offers a message with transaction `key`, as classified by the caller, at `now`.
    pub fn push(&mut self, now: Instant, key: u64, kind: Kind, item: T) -> Push<T> {
        self.handle_timeout(now);
        let kind = match (self.config.mode, kind) {
            (Mode::Prsm, Kind::NewRequest) if self.is_known(key) => Kind::Retransmission,
            (_, k) => k,
        };
        match (self.config.mode, kind) {
            (Mode::Prsm, Kind::Retransmission) => self.push_retransmission(key, item),
            (Mode::Fifo, Kind::NewRequest) if self.state(key) == Some(TxState::Rejected) => {
                self.counters.rejected_new += 1;
                Push::RejectNew(item)
            }
            (Mode::Fifo, Kind::NewRequest)
                if self.primary.len() >= self.new_request_limit() && self.is_known(key) =>
            {
                self.counters.dropped += 1;
                Push::Dropped(DropReason::PrimaryFull)
            }
            (_, Kind::NewRequest) if self.primary.len() >= self.new_request_limit() => {
                self.counters.rejected_new += 1;
                Push::RejectNew(item)
            }
            _ if self.primary.len() >= self.primary_capacity() => {
                self.counters.dropped += 1;
                Push::Dropped(DropReason::PrimaryFull)
            }
            (_, kind) => {
                if kind == Kind::NewRequest {
                    add_key(&mut self.queued_new, key);
                }
                self.primary.push_back(Entry { key, kind, item });
                self.counters.queued_primary += 1;
                self.counters.primary_high_water =
                    self.counters.primary_high_water.max(self.primary.len());
                Push::Queued
            }
        }
    }

    /// Whether transaction `key` is queued, in progress, answered or refused here (so that a
    /// new request with this key is a retransmission).
    pub fn is_known(&self, key: u64) -> bool {
        self.marks.contains_key(&key)
            || self.queued_new.contains_key(&key)
            || self.queued_retx.contains_key(&key)
    }

    fn push_retransmission(&mut self, key: u64, item: T) -> Push<T> {
        let redundant = match self.marks.get(&key).map(|m| m.state) {
            Some(TxState::Answered) => {
                self.counters.answered_from_state += 1;
                return Push::AnswerFromState(item);
            }
            Some(TxState::Rejected) => {
                self.counters.rejected_new += 1;
                return Push::RejectNew(item);
            }
            Some(TxState::InProgress) => Some(DropReason::InProgress),
            None if self.queued_new.contains_key(&key) => Some(DropReason::OriginalQueued),
            None if self.queued_retx.contains_key(&key) => Some(DropReason::DuplicateQueued),
            None => None,
        };
        if let Some(reason) = redundant {
            self.counters.removed_retransmissions += 1;
            return Push::Dropped(reason);
        }
        self.enqueue_secondary(key, item)
    }

    /// Queues a retransmission in the secondary queue, unless it is full.
    fn enqueue_secondary(&mut self, key: u64, item: T) -> Push<T> {
        if self.secondary.len() >= self.config.secondary_capacity {
            self.counters.dropped += 1;
            return Push::Dropped(DropReason::SecondaryFull);
        }
        add_key(&mut self.queued_retx, key);
        self.secondary.push_back(Entry {
            key,
            kind: Kind::Retransmission,
            item,
        });
        self.counters.queued_secondary += 1;
        self.counters.secondary_high_water =
            self.counters.secondary_high_water.max(self.secondary.len());
        Push::Queued
    }

    /// The next message to process: the primary queue first, the secondary only when the
    /// primary is empty. The caller then marks its transaction in progress.
    pub fn pop(&mut self) -> Option<T> {
        self.pop_entry().map(|(_, _, item)| item)
    }

    /// Like [`Self::pop`], with the message's key and (refined) kind.
    pub fn pop_entry(&mut self) -> Option<(u64, Kind, T)> {
        if let Some(e) = self.primary.pop_front() {
            if e.kind == Kind::NewRequest {
                remove_key(&mut self.queued_new, e.key);
            }
            return Some((e.key, e.kind, e.item));
        }
        let e = self.secondary.pop_front()?;
        remove_key(&mut self.queued_retx, e.key);
        Some((e.key, e.kind, e.item))
    }

    /// Takes every queued message for which `pred` holds, primary queue first, each queue in
    /// order: a worker handing some of its calls to another worker moves their messages with
    /// them, so their order is kept.
    pub fn extract(&mut self, mut pred: impl FnMut(&T) -> bool) -> Vec<(u64, Kind, T)> {
        let mut out = Vec::new();
        for (queue, is_primary) in [(&mut self.primary, true), (&mut self.secondary, false)] {
            let mut keep = VecDeque::with_capacity(queue.len());
            for e in queue.drain(..) {
                if !pred(&e.item) {
                    keep.push_back(e);
                    continue;
                }
                if !is_primary {
                    remove_key(&mut self.queued_retx, e.key);
                } else if e.kind == Kind::NewRequest {
                    remove_key(&mut self.queued_new, e.key);
                }
                out.push((e.key, e.kind, e.item));
            }
            *queue = keep;
        }
        out
    }

    /// Queues a message taken from another scheduler with [`Self::extract`], whatever the
    /// queue lengths (it was admitted once already): a retransmission to the secondary queue,
    /// anything else to the primary.
    pub fn push_moved(&mut self, key: u64, kind: Kind, item: T) {
        let prsm = self.config.mode == Mode::Prsm;
        if prsm && kind == Kind::Retransmission {
            add_key(&mut self.queued_retx, key);
            self.secondary.push_back(Entry { key, kind, item });
            return;
        }
        if kind == Kind::NewRequest {
            add_key(&mut self.queued_new, key);
        }
        self.primary.push_back(Entry { key, kind, item });
    }

    /// Queues a retransmission handed back as [`Push::AnswerFromState`] in the secondary queue,
    /// so that its answer is re-sent from transaction state when no new request waits (at most
    /// one copy per transaction; dropped when the secondary queue is full, the client
    /// retransmits again).
    pub fn queue_answer(&mut self, key: u64, item: T) -> Push<T> {
        if self.queued_retx.contains_key(&key) {
            self.counters.removed_retransmissions += 1;
            return Push::Dropped(DropReason::DuplicateQueued);
        }
        self.enqueue_secondary(key, item)
    }

    /// The transaction `key` was refused with a 503 that was not routed: its later copies are
    /// refused the same way ([`Push::RejectNew`]) instead of being queued or routed.
    pub fn mark_rejected(&mut self, now: Instant, key: u64) -> usize {
        self.mark(now, key, TxState::Rejected)
    }

    /// Every mark, as `(key, state, expiry)`: a worker handing calls to another passes them
    /// on, so that retransmissions of transactions it handled stay recognised.
    pub fn marks(&self) -> Vec<(u64, TxState, Instant)> {
        self.marks
            .iter()
            .map(|(&k, m)| (k, m.state, m.expires))
            .collect()
    }

    /// Takes over a mark of another scheduler (a final state, answered or rejected, is kept).
    pub fn import_mark(&mut self, key: u64, state: TxState, expires: Instant) {
        let state = match self.marks.get(&key) {
            Some(m) if m.state != TxState::InProgress => m.state,
            _ => state,
        };
        self.marks.insert(key, Mark { state, expires });
        self.expiry.push_back((expires, key));
        while self.expiry.len() > self.config.max_marks.max(1) {
            self.evict_oldest();
        }
    }

    /// The transaction `key` is being processed: its queued retransmissions are removed and
    /// later ones are not queued. Returns how many were removed (always 0 in FIFO mode).
    pub fn mark_in_progress(&mut self, now: Instant, key: u64) -> usize {
        self.mark(now, key, TxState::InProgress)
    }

    /// The transaction `key` has been answered: its queued retransmissions are removed and
    /// later ones are handed back as [`Push::AnswerFromState`]. Returns how many were removed
    /// (always 0 in FIFO mode).
    pub fn mark_answered(&mut self, now: Instant, key: u64) -> usize {
        self.mark(now, key, TxState::Answered)
    }

    fn mark(&mut self, now: Instant, key: u64, state: TxState) -> usize {
        self.handle_timeout(now);
        // Answered and rejected are final: a late "in progress" keeps them.
        let state = match self.marks.get(&key) {
            Some(m) if m.state != TxState::InProgress => m.state,
            _ => state,
        };
        let expires = now + self.config.mark_ttl;
        self.marks.insert(key, Mark { state, expires });
        self.expiry.push_back((expires, key));
        while self.expiry.len() > self.config.max_marks.max(1) {
            self.evict_oldest();
        }
        if self.config.mode == Mode::Fifo {
            return 0; // FIFO keeps the mark (for admission) but removes nothing
        }
        if self.queued_retx.remove(&key).is_none() {
            return 0;
        }
        let before = self.secondary.len();
        self.secondary.retain(|e| e.key != key);
        let removed = before - self.secondary.len();
        self.counters.removed_retransmissions += removed as u64;
        removed
    }

    fn evict_oldest(&mut self) {
        if let Some((expires, key)) = self.expiry.pop_front() {
            if self.marks.get(&key).is_some_and(|m| m.expires == expires) {
                self.marks.remove(&key);
            }
        }
    }

    /// Purges the marks expired at `now` (also done by every push and mark).
    pub fn handle_timeout(&mut self, now: Instant) {
        while self.expiry.front().is_some_and(|&(e, _)| e <= now) {
            self.evict_oldest();
        }
    }

    /// Gives back the room a burst left in the queues and the marks (see
    /// `crate::compact`); call it now and then, with [`Self::handle_timeout`].
    pub fn compact(&mut self) {
        use crate::compact::Compact as _;
        self.primary.compact();
        self.secondary.compact();
        self.queued_new.compact();
        self.queued_retx.compact();
        self.marks.compact();
        self.expiry.compact();
    }

    /// When the oldest mark expires, if any is kept.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.expiry.front().map(|&(e, _)| e)
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    use super::*;

    fn drain<T>(s: &mut Scheduler<T>) -> Vec<T> {
        std::iter::from_fn(|| s.pop()).collect()
    }

    #[test]
    fn primary_strictly_before_secondary() {
        let now = Instant::now();
        let mut s = Scheduler::new(PrsmConfig::default());
        assert_eq!(s.push(now, 100, Kind::Retransmission, "r100"), Push::Queued);
        assert_eq!(s.push(now, 1, Kind::NewRequest, "n1"), Push::Queued);
        assert_eq!(s.push(now, 101, Kind::Retransmission, "r101"), Push::Queued);
        assert_eq!(s.push(now, 2, Kind::Response, "resp2"), Push::Queued);
        assert_eq!(s.push(now, 3, Kind::InDialog, "bye3"), Push::Queued);
        assert_eq!(s.pop(), Some("n1"));
        // A new arrival still goes before the waiting retransmissions.
        assert_eq!(s.push(now, 4, Kind::NewRequest, "n4"), Push::Queued);
        assert_eq!((s.primary_len(), s.secondary_len()), (3, 2));
        assert_eq!(drain(&mut s), vec!["resp2", "bye3", "n4", "r100", "r101"]);
        assert!(s.is_empty());
    }

    #[test]
    fn extract_and_push_moved_keep_order_and_indexes() {
        let now = Instant::now();
        let mut a = Scheduler::new(PrsmConfig::default());
        let mut b = Scheduler::new(PrsmConfig::default());
        assert_eq!(a.push(now, 1, Kind::NewRequest, (1, "n1")), Push::Queued);
        assert_eq!(a.push(now, 2, Kind::NewRequest, (2, "n2")), Push::Queued);
        assert_eq!(a.push(now, 3, Kind::InDialog, (1, "bye1")), Push::Queued);
        assert_eq!(
            a.push(now, 4, Kind::Retransmission, (1, "r4")),
            Push::Queued
        );
        assert_eq!(b.push(now, 9, Kind::NewRequest, (9, "n9")), Push::Queued);
        // Move everything of "shard" 1 from a to b.
        for (key, kind, item) in a.extract(|&(shard, _)| shard == 1) {
            b.push_moved(key, kind, item);
        }
        assert_eq!(a.len(), 1);
        // The moved new request is known to b: its retransmission is redundant there ...
        assert_eq!(
            b.push(now, 1, Kind::Retransmission, (1, "r1")),
            Push::Dropped(DropReason::OriginalQueued)
        );
        // ... and no longer to a.
        assert_eq!(
            a.push(now, 1, Kind::NewRequest, (1, "n1-again")),
            Push::Queued
        );
        let order: Vec<_> = drain(&mut b).into_iter().map(|(_, n)| n).collect();
        assert_eq!(order, vec!["n9", "n1", "bye1", "r4"]);
        assert!(b.is_empty());
        assert_eq!(
            b.push(now, 4, Kind::Retransmission, (1, "r4b")),
            Push::Queued
        );
    }

    #[test]
    fn rejected_stays_rejected_and_answers_wait_in_the_secondary_queue() {
        let now = Instant::now();
        let mut s = Scheduler::new(PrsmConfig::default());
        // A refused request: its copies are refused again, never queued.
        assert_eq!(s.mark_rejected(now, 5), 0);
        assert_eq!(
            s.push(now, 5, Kind::NewRequest, "n5"),
            Push::RejectNew("n5")
        );
        assert_eq!(s.mark_in_progress(now, 5), 0);
        assert_eq!(s.state(5), Some(TxState::Rejected));
        // An answered one: the copy goes to the secondary queue, once, behind new requests.
        let _ = s.mark_answered(now, 6);
        let Push::AnswerFromState(item) = s.push(now, 6, Kind::NewRequest, "r6") else {
            panic!("an answered transaction's copy is handed back");
        };
        assert_eq!(s.queue_answer(6, item), Push::Queued);
        assert_eq!(
            s.queue_answer(6, "r6b"),
            Push::Dropped(DropReason::DuplicateQueued)
        );
        assert_eq!(s.push(now, 7, Kind::NewRequest, "n7"), Push::Queued);
        assert_eq!(drain(&mut s), vec!["n7", "r6"]);
        // Marks move with the calls; a final state wins over "in progress".
        let mut t = Scheduler::<&str>::new(PrsmConfig::default());
        let _ = t.mark_in_progress(now, 6);
        for (key, state, expires) in s.marks() {
            t.import_mark(key, state, expires);
        }
        assert_eq!(t.state(5), Some(TxState::Rejected));
        assert_eq!(t.state(6), Some(TxState::Answered));
    }

    #[test]
    fn redundant_retransmissions_are_removed() {
        let now = Instant::now();
        let mut s = Scheduler::new(PrsmConfig::default());
        // The original waits in the primary queue: its retransmission is redundant, and so is
        // a second "new" request with the same key.
        assert_eq!(s.push(now, 1, Kind::NewRequest, 10), Push::Queued);
        assert_eq!(
            s.push(now, 1, Kind::Retransmission, 11),
            Push::Dropped(DropReason::OriginalQueued)
        );
        assert_eq!(
            s.push(now, 1, Kind::NewRequest, 12),
            Push::Dropped(DropReason::OriginalQueued)
        );
        // Being processed: no further copy is queued.
        assert_eq!(s.pop_entry(), Some((1, Kind::NewRequest, 10)));
        assert_eq!(s.mark_in_progress(now, 1), 0);
        assert_eq!(
            s.push(now, 1, Kind::Retransmission, 13),
            Push::Dropped(DropReason::InProgress)
        );
        // Retransmissions whose original we never saw wait in the secondary queue (one copy),
        // until their transaction is being processed.
        assert_eq!(s.push(now, 2, Kind::Retransmission, 20), Push::Queued);
        assert_eq!(
            s.push(now, 2, Kind::Retransmission, 21),
            Push::Dropped(DropReason::DuplicateQueued)
        );
        assert_eq!(s.push(now, 3, Kind::Retransmission, 30), Push::Queued);
        assert_eq!(s.mark_in_progress(now, 2), 1);
        assert_eq!(s.secondary_len(), 1);
        assert_eq!(s.stats().removed_retransmissions, 5);
        assert_eq!(drain(&mut s), vec![30]);
    }

    #[test]
    fn retransmission_of_answered_is_answered_from_state() {
        let now = Instant::now();
        let mut s = Scheduler::new(PrsmConfig::default());
        assert_eq!(s.push(now, 7, Kind::Retransmission, "r1"), Push::Queued);
        assert_eq!(s.mark_answered(now, 7), 1, "the queued copy is removed");
        assert_eq!(
            s.push(now, 7, Kind::Retransmission, "r2"),
            Push::AnswerFromState("r2")
        );
        // A "new" request matching an answered transaction is a retransmission too.
        assert_eq!(
            s.push(now, 7, Kind::NewRequest, "r3"),
            Push::AnswerFromState("r3")
        );
        // A late "in progress" does not undo the answer.
        s.mark_in_progress(now, 7);
        assert_eq!(s.state(7), Some(TxState::Answered));
        let st = s.stats();
        assert_eq!((st.answered_from_state, st.removed_retransmissions), (2, 1));
        assert!(s.is_empty());
    }

    #[test]
    fn full_queues_reject_new_and_drop_the_rest() {
        let now = Instant::now();
        let mut s = Scheduler::new(PrsmConfig {
            primary_capacity: 8,
            secondary_capacity: 2,
            in_dialog_reserve: 2,
            ..PrsmConfig::default()
        });
        for k in 0..6 {
            assert_eq!(s.push(now, k, Kind::NewRequest, k), Push::Queued);
        }
        // 6 of 8 taken: new requests get a 503...
        assert_eq!(s.push(now, 6, Kind::NewRequest, 6), Push::RejectNew(6));
        // ...in-dialog requests and responses still fit in the reserve...
        assert_eq!(s.push(now, 100, Kind::InDialog, 100), Push::Queued);
        assert_eq!(s.push(now, 101, Kind::Response, 101), Push::Queued);
        // ...until the queue is completely full.
        assert_eq!(
            s.push(now, 102, Kind::InDialog, 102),
            Push::Dropped(DropReason::PrimaryFull)
        );
        assert_eq!(s.push(now, 200, Kind::Retransmission, 200), Push::Queued);
        assert_eq!(s.push(now, 201, Kind::Retransmission, 201), Push::Queued);
        assert_eq!(
            s.push(now, 202, Kind::Retransmission, 202),
            Push::Dropped(DropReason::SecondaryFull)
        );
        // Room again after a pop.
        assert_eq!(s.pop(), Some(0));
        assert_eq!(s.push(now, 7, Kind::InDialog, 7), Push::Queued);
        let st = s.stats();
        assert_eq!(
            (
                st.rejected_new,
                st.dropped,
                st.queued_primary,
                st.queued_secondary
            ),
            (1, 2, 9, 2)
        );
        assert_eq!((st.primary_high_water, st.secondary_high_water), (8, 2));
        assert_eq!((st.primary_len, st.secondary_len), (8, 2));
        assert!(!DropReason::SecondaryFull.is_redundant());
        assert!(DropReason::InProgress.is_redundant());
    }

    #[test]
    fn fifo_mode_keeps_arrival_order() {
        let now = Instant::now();
        let mut s = Scheduler::new(PrsmConfig {
            primary_capacity: 4,
            secondary_capacity: 4,
            in_dialog_reserve: 1,
            ..PrsmConfig::fifo()
        });
        assert_eq!(s.mode(), Mode::Fifo);
        assert_eq!(s.push(now, 1, Kind::Retransmission, "r1"), Push::Queued);
        assert_eq!(s.push(now, 2, Kind::NewRequest, "n2"), Push::Queued);
        // No removal: a mark only informs admission.
        assert_eq!(s.mark_in_progress(now, 1), 0);
        assert_eq!(s.push(now, 1, Kind::Retransmission, "r1b"), Push::Queued);
        assert_eq!(s.push(now, 2, Kind::Retransmission, "r2"), Push::Queued);
        assert_eq!(s.push(now, 3, Kind::Response, "resp3"), Push::Queued);
        assert_eq!(s.state(1), Some(TxState::InProgress));
        // One queue of 8, new requests up to 7.
        assert_eq!(s.push(now, 4, Kind::NewRequest, "n4"), Push::Queued);
        assert_eq!(s.push(now, 5, Kind::NewRequest, "n5"), Push::Queued);
        assert_eq!(
            s.push(now, 6, Kind::NewRequest, "n6"),
            Push::RejectNew("n6")
        );
        // A copy of a request it holds is dropped at a full queue, never refused with a 503
        // (its original is still to be routed); a copy of a refused one is refused again.
        assert_eq!(
            s.push(now, 4, Kind::NewRequest, "n4-copy"),
            Push::Dropped(DropReason::PrimaryFull)
        );
        let _ = s.mark_rejected(now, 6);
        assert_eq!(
            s.push(now, 6, Kind::NewRequest, "n6-copy"),
            Push::RejectNew("n6-copy")
        );
        assert_eq!(s.push(now, 6, Kind::Retransmission, "r6"), Push::Queued);
        assert_eq!(
            s.push(now, 7, Kind::Retransmission, "r7"),
            Push::Dropped(DropReason::PrimaryFull)
        );
        assert_eq!(s.secondary_len(), 0);
        assert_eq!(
            drain(&mut s),
            vec!["r1", "n2", "r1b", "r2", "resp3", "n4", "n5", "r6"]
        );
    }

    #[test]
    fn marks_are_bounded_and_expire() {
        let t0 = Instant::now();
        let ttl = Duration::from_secs(32);
        let mut s: Scheduler<()> = Scheduler::new(PrsmConfig {
            max_marks: 100,
            ..PrsmConfig::default()
        });
        for k in 0..10_000 {
            s.mark_answered(t0 + Duration::from_millis(k), k);
            assert!(s.stats().tracked <= 100);
        }
        assert_eq!(s.state(9_999), Some(TxState::Answered));
        assert_eq!(s.state(0), None, "the oldest evicted");
        // Re-marking one key many times does not grow the set either.
        for i in 0..1_000 {
            s.mark_in_progress(t0 + Duration::from_secs(20) + Duration::from_millis(i), 42);
        }
        assert!(s.stats().tracked <= 100);
        assert_eq!(s.state(42), Some(TxState::InProgress));
        // Everything expires after the TTL.
        let last = t0 + Duration::from_secs(20) + Duration::from_millis(999);
        assert_eq!(s.poll_timeout().map(|t| t > last), Some(true));
        s.handle_timeout(last + ttl);
        assert_eq!(s.stats().tracked, 0);
        assert_eq!(s.poll_timeout(), None);
        // An expired answer is forgotten: the retransmission is queued again.
        assert_eq!(
            s.push(last + ttl, 9_999, Kind::Retransmission, ()),
            Push::Queued
        );
    }

    /// Outcome of one client transaction in the simulation.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Outcome {
        Pending,
        Completed,
        Rejected,
        Failed,
    }

    #[derive(Debug, Default)]
    struct SimResult {
        offered: usize,
        completed: usize,
        /// Completed while new transactions were still arriving (goodput under overload).
        completed_in_window: usize,
        rejected: usize,
        failed: usize,
        /// Processing slots spent on messages whose client was done (answered or gone).
        wasted: usize,
        mean_delay: f64,
        max_delay: u64,
        retransmissions_sent: usize,
        stats: PrsmStats,
    }

    /// An overloaded server, one tick per service time: each tick it processes one message,
    /// while `arrivals` new INVITE transactions arrive during the first `ticks` ticks. Each
    /// client retransmits its request after `t1`, `2 × t1`, `4 × t1`… ticks until it gets an
    /// answer (processing a request answers it at once: 100 Trying), and fails after `64 × t1`
    /// (Timer B). With `answer_503`, a refused new request is answered 503 at once (the
    /// client stops); without, it is silently dropped, as a server without admission control
    /// would lose it, and the client keeps retransmitting.
    fn simulate(
        config: PrsmConfig,
        answer_503: bool,
        arrivals: usize,
        ticks: u64,
        t1: u64,
    ) -> SimResult {
        let t0 = Instant::now();
        let at = |tick: u64| t0 + Duration::from_millis(tick);
        let timer_b = 64 * t1;
        let mut s: Scheduler<usize> = Scheduler::new(config);
        let mut outcome: Vec<Outcome> = Vec::new();
        let mut sent_at: Vec<u64> = Vec::new();
        let mut retransmitted: Vec<u32> = Vec::new();
        // (tick, client): the next retransmission or Timer B of a pending client.
        let mut timers: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
        let mut r = SimResult::default();
        let mut delays = 0u64;
        let mut tick = 0;
        while tick < ticks || timers.peek().is_some() || !s.is_empty() {
            let now = at(tick);
            // Client timers.
            while let Some(&Reverse((t, c))) = timers.peek() {
                if t > tick {
                    break;
                }
                timers.pop();
                if outcome[c] != Outcome::Pending {
                    continue;
                }
                if t >= sent_at[c] + timer_b {
                    outcome[c] = Outcome::Failed;
                    continue;
                }
                r.retransmissions_sent += 1;
                retransmitted[c] += 1;
                match s.push(now, c as u64, Kind::Retransmission, c) {
                    Push::AnswerFromState(_) | Push::Queued | Push::Dropped(_) => {}
                    Push::RejectNew(_) => unreachable!("not a new request"),
                }
                let next = sent_at[c] + t1 * ((1 << (retransmitted[c] + 1)) - 1);
                timers.push(Reverse((next.min(sent_at[c] + timer_b), c)));
            }
            // New transactions.
            if tick < ticks {
                for _ in 0..arrivals {
                    let c = outcome.len();
                    outcome.push(Outcome::Pending);
                    sent_at.push(tick);
                    retransmitted.push(0);
                    r.offered += 1;
                    match s.push(now, c as u64, Kind::NewRequest, c) {
                        Push::RejectNew(_) if answer_503 => outcome[c] = Outcome::Rejected,
                        _ => timers.push(Reverse((tick + t1, c))),
                    }
                }
            }
            // One message processed per tick.
            if let Some(c) = s.pop() {
                s.mark_in_progress(now, c as u64);
                if outcome[c] == Outcome::Pending {
                    outcome[c] = Outcome::Completed;
                    if tick < ticks {
                        r.completed_in_window += 1;
                    }
                    let d = tick - sent_at[c];
                    delays += d;
                    r.max_delay = r.max_delay.max(d);
                } else {
                    r.wasted += 1;
                }
                s.mark_answered(now, c as u64);
            }
            tick += 1;
        }
        for o in &outcome {
            match o {
                Outcome::Completed => r.completed += 1,
                Outcome::Rejected => r.rejected += 1,
                Outcome::Failed => r.failed += 1,
                Outcome::Pending => unreachable!("every client ends"),
            }
        }
        r.mean_delay = delays as f64 / r.completed.max(1) as f64;
        r.stats = s.stats();
        r
    }

    fn print_row(label: &str, r: &SimResult, ticks: u64) {
        println!(
            "{label} | {} {} {:.1}% {} {} {} {} {} {:.0} {} {} {}",
            r.offered,
            r.completed,
            100.0 * r.completed_in_window as f64 / ticks as f64,
            r.failed,
            r.rejected,
            r.wasted,
            r.retransmissions_sent,
            r.stats.removed_retransmissions,
            r.mean_delay,
            r.max_delay,
            r.stats.primary_high_water,
            r.stats.secondary_high_water,
        );
    }

    /// PRSM against a plain FIFO on a server offered 2× and 5× its capacity for 40 000 ticks
    /// (longer than Timer B); one tick is one service time (1 ms, say: a 1000 messages/s
    /// server), T1 = 500 ticks, default queues (1024 each, 128 reserved for in-dialog).
    #[test]
    fn overload_simulation_prsm_completes_more_than_fifo() {
        let ticks = 40_000;
        println!(
            "load sched 503 | offered completed goodput failed rejected wasted retx-sent \
             removed mean-delay max-delay hw-primary hw-secondary"
        );
        for arrivals in [2, 5] {
            let prsm = simulate(PrsmConfig::default(), true, arrivals, ticks, 500);
            let fifo = simulate(PrsmConfig::fifo(), true, arrivals, ticks, 500);
            print_row(&format!("{arrivals}x PRSM yes"), &prsm, ticks);
            print_row(&format!("{arrivals}x FIFO yes"), &fifo, ticks);
            assert!(prsm.completed > fifo.completed);
            assert!(prsm.completed_in_window > fifo.completed_in_window);
            assert!(prsm.failed <= fifo.failed);
            assert!(prsm.wasted < fifo.wasted);
            assert!(
                prsm.completed_in_window as f64 >= 0.95 * ticks as f64,
                "PRSM keeps goodput near capacity"
            );
            assert_eq!(prsm.failed, 0, "no admitted transaction fails");
            assert!(prsm.max_delay < 2 * 500, "answered within 2 × T1");
        }
        // Without the 503 (refused new requests silently dropped) PRSM still holds goodput,
        // but a dropped request's retransmissions wait in a secondary queue that an overloaded
        // server never serves, so its client fails: the 503 is part of the mechanism.
        let prsm = simulate(PrsmConfig::default(), false, 2, ticks, 500);
        let fifo = simulate(PrsmConfig::fifo(), false, 2, ticks, 500);
        print_row("2x PRSM no ", &prsm, ticks);
        print_row("2x FIFO no ", &fifo, ticks);
        assert!(prsm.completed_in_window > fifo.completed_in_window);
        assert!(prsm.mean_delay < fifo.mean_delay);
    }
}
