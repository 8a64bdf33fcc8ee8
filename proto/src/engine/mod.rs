//! The B2BUA engine: one per shard, sans-IO.
//!
//! An [`Engine`] owns the transactions and calls of the Call-IDs hashed to its shard (see
//! [`crate::shard`]). It is fed received bytes and the current time, and it produces
//! [`Transmit`]s and a deadline for its next timer; it never touches a socket, a clock or a
//! thread, so the whole SIP behaviour is tested with a virtual clock.
//!
//! ```text
//!  caller ──INVITE──▶ [server INVITE txn]──┐        ┌──[client INVITE txn] ──INVITE──▶ callee
//!         ◀─100/18x/2xx── (caller leg)     │ Call   │     (callee leg)    ◀─18x/2xx──
//!                                          └─Dialog─┘
//! ```
//! Each call has two legs with their own Call-ID, tags, CSeq space, Via and Contact, so nothing
//! of one side's topology reaches the other (topology hiding by construction). Requests inside
//! the dialog are matched by (Call-ID, our tag) and re-issued on the other leg; responses are
//! matched by our Via branch and relayed to the paired server transaction.
//!
//! An engine has four kinds of methods, as quinn-proto's `Connection` does:
//! - **input**: [`Engine::handle_inbound`] (bytes received) and [`Engine::handle_timeout`]
//!   (time passed), both given the current [`Instant`];
//! - **output**: [`Engine::poll_transmit`] (bytes to send), [`Engine::poll_timeout`] (when to
//!   call `handle_timeout` next), [`Engine::poll_dialog_change`] (what to replicate);
//! - **control**: [`Engine::set_admission`] (overload control's verdict on new requests),
//!   [`Engine::start_draining`], [`Engine::set_config`], [`Engine::install_dialog`] and
//!   [`Engine::remove_dialog`] (state sync);
//! - **queries**: counters, the dialog table, and how much is pending.
//!
//! Rooms: `config` (what the engine is told), `transmit` (in and out), `transactions` and
//! `timers` (the transaction table and its deadlines), `call` (calls, their setup phase and how
//! they end), the `request`, `cancel` and `response` paths, `build` (messages), `refusal` (400,
//! 503, Retry-After), `ids` (tags, branches and Call-IDs from the seeded stream), `reach` (where
//! a new active reaches the peers of the TCP calls it takes over) and `stats`.

mod accounting;
mod build;
mod call;
mod cancel;
mod challenge;
mod config;
mod hunt;
mod ids;
mod media;
mod ping;
mod reach;
mod refer_call;
mod refusal;
mod register;
mod reinvite_refresh;
mod request;
mod response;
mod session_timer;
mod setup;
mod stats;
mod subscription;
#[cfg(test)]
mod tests;
mod timers;
mod trace;
mod transactions;
mod transfer;
mod translate;
mod transmit;

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use accounting::{AccountingPolicy, StartAt, MAX_PENDING_RECORDS};
pub use call::DialogChange;
use call::{Call, DialogIndex, Lingering};
pub use config::{
    EngineConfig, Interface, MediaAnchoring, NextHop, SharedMediaTable, SourcePolicy,
};
use ids::Ids;
pub use ids::BRANCH_PREFIX;
pub use reach::uri_addr;
pub use refusal::{stateless_503, Admission};
pub use register::{AllowAnonymous, InterfaceRegistration, Registrations, SharedRegistrations};
pub use session_timer::{SessionPolicy, TimerProfile};
pub use stats::Stats;
pub use subscription::SubscriptionSources;
use timers::TimerHeap;
pub use trace::{TraceEvent, TracedCall, MAX_PENDING_TRACE_EVENTS};
use transactions::{ClientEntry, ClientKey, ServerEntry, ServerKey, TimerTarget};
pub use transfer::{named_call_id, NamedCall};
pub use transmit::{Inbound, Transmit};

use crate::sip::dialog::{Dialog, DialogState};
use crate::sip::message::{ParseError, SipMessage};

/// Sources remembered as verified (they completed a transaction with us), per engine, at most;
/// the set starts over when full.
pub const MAX_VERIFIED_SOURCES: usize = 4096;

/// Locks a mutex shared with other threads (the media table), recovering the data if a thread
/// panicked while holding it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The sans-IO B2BUA of one shard.
#[derive(Debug)]
pub struct Engine {
    cfg: EngineConfig,
    via_sent_by: Vec<String>,
    /// Calls by id, boxed: a table of pointers grows and shrinks cheaply, and its slack costs
    /// 16 bytes a slot rather than a whole call.
    calls: HashMap<u64, Box<Call>>,
    changes: VecDeque<DialogChange>,
    /// Dialog ends not replicated yet, and replicated dialogs in `Terminating` to forget, in time
    /// order (both after 64·T1; see [`Lingering`]).
    lingering: VecDeque<(Instant, Lingering)>,
    /// Callee legs of INVITE attempts abandoned at their expiry, until when a late 2xx on
    /// them is still hung up (bounded: [`call::MAX_ABANDONED`]).
    abandoned: VecDeque<(Instant, crate::sip::dialog::Leg)>,
    /// The time last passed in (the engine has no clock of its own).
    now: Option<Instant>,
    dialogs: DialogIndex,
    server: HashMap<ServerKey, ServerEntry>,
    client: HashMap<ClientKey, ClientEntry>,
    /// New requests with candidates left to try, by the caller's transaction.
    hunts: HashMap<ServerKey, hunt::Hunt>,
    /// REGISTERs forwarded to the registrar through the registration cache, by the phone's
    /// transaction.
    registering: HashMap<ServerKey, register::Registering>,
    /// Callee legs a next hop challenged (401/407), by caller, for its authenticated INVITE.
    challenged: challenge::Challenged,
    /// The far leg the message being handled names (a transfer's `Replaces`), when another
    /// shard's engine found it ([`Engine::handle_inbound_with_named`]), or the dialogs a busy
    /// lamp's NOTIFY names.
    named_hint: Option<NamedCall>,
    timers: TimerHeap,
    /// Each call's session deadline armed on `timers` (session timers, the life limit): only
    /// calls that have one.
    session_armed: HashMap<u64, timers::Armed>,
    /// Transfers the SBC performs itself (`refer-call-transfer`), by call (at most one each).
    transfers: HashMap<u64, Box<refer_call::SbcTransfer>>,
    /// Calls whose peer answered the SBC's offerless refresh re-INVITE with an offer now on the
    /// other leg: the side of that peer and the CSeq its ACK (with the answer) must carry.
    refresh_acks_owed: HashMap<u64, (crate::sip::dialog::Side, u32)>,
    out: VecDeque<Transmit>,
    admission: Admission,
    draining: bool,
    /// Sources that completed a transaction with us (an ACK, or an in-dialog request of one of
    /// our dialogs): they receive what we send, so our own final responses to them are
    /// retransmitted as RFC 3261 says. To any other source (possibly forged) they are sent
    /// once: no amplification.
    verified: HashSet<SocketAddr>,
    stats: Stats,
    ids: Ids,
    wall_clock: WallClock,
    /// Traced messages waiting for the shell (see [`trace`]).
    tap: trace::Tap,
    /// Call detail records waiting for the shell (see [`accounting`]).
    acct_out: VecDeque<sbc_accounting::CallRecord>,
    /// Records dropped from a full `acct_out`.
    acct_dropped: u64,
    /// The caller's and the callee's addresses of the record being made (reused).
    acct_addresses: String,
}

/// A reading of the wall clock paired with the monotonic instant it was taken at: the engine
/// dates dialogs (`created_unix`) by the monotonic time passed in, counted from this reading,
/// so it never reads a clock itself and a step of the system clock does not move its dates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallClock {
    /// The monotonic instant of the reading.
    pub at: Instant,
    /// Time since the Unix epoch at `at`.
    pub unix: Duration,
}

impl WallClock {
    /// Seconds since the Unix epoch at `now` (saturating before the reading).
    #[must_use]
    pub fn unix_secs_at(&self, now: Instant) -> u64 {
        (self.unix + now.saturating_duration_since(self.at)).as_secs()
    }

    /// Microseconds since the Unix epoch at `now` (saturating before the reading).
    #[must_use]
    pub fn unix_micros_at(&self, now: Instant) -> u64 {
        u64::try_from((self.unix + now.saturating_duration_since(self.at)).as_micros())
            .unwrap_or(u64::MAX)
    }
}

/// What an engine starts from besides its configuration.
#[derive(Debug, Clone, Copy)]
pub struct EngineSeed {
    /// The shard this engine serves (folded into generated Call-IDs).
    pub shard: u64,
    /// Seed of the engine's ChaCha20 stream, from which every tag, branch, call id and
    /// Retry-After is drawn: from the operating system in production (unguessable), a constant
    /// in tests (a failing case replays).
    pub rng: [u8; 32],
    /// A reading of the wall clock.
    pub wall_clock: WallClock,
}

impl Engine {
    /// A new engine with configuration `cfg`, for the shard, randomness and wall clock of
    /// `seed`.
    #[must_use]
    pub fn new(cfg: EngineConfig, seed: EngineSeed) -> Self {
        let via_sent_by = cfg
            .interfaces
            .iter()
            .flat_map(Interface::sent_bys)
            .collect();
        Self {
            cfg,
            via_sent_by,
            calls: HashMap::new(),
            changes: VecDeque::new(),
            lingering: VecDeque::new(),
            abandoned: VecDeque::new(),
            now: None,
            dialogs: DialogIndex::default(),
            server: HashMap::new(),
            client: HashMap::new(),
            hunts: HashMap::new(),
            registering: HashMap::new(),
            challenged: challenge::Challenged::default(),
            named_hint: None,
            timers: TimerHeap::default(),
            session_armed: HashMap::new(),
            transfers: HashMap::new(),
            refresh_acks_owed: HashMap::new(),
            out: VecDeque::new(),
            admission: Admission::Accept,
            draining: false,
            verified: HashSet::new(),
            stats: Stats::default(),
            ids: Ids::new(seed.rng, seed.shard),
            wall_clock: seed.wall_clock,
            tap: trace::Tap::default(),
            acct_out: VecDeque::new(),
            acct_dropped: 0,
            acct_addresses: String::new(),
        }
    }

    /// Applies a new configuration to this engine (`activate-config`): timers, routes and limits
    /// change for new transactions; the interfaces must be the same (binding them again needs a
    /// restart), which the caller checks.
    pub fn set_config(&mut self, cfg: EngineConfig) {
        self.via_sent_by = cfg
            .interfaces
            .iter()
            .flat_map(Interface::sent_bys)
            .collect();
        self.cfg = cfg;
    }

    /// The router this engine routes new requests with.
    #[must_use]
    pub fn router(&self) -> &std::sync::Arc<crate::routing::router::Router> {
        &self.cfg.router
    }

    /// Replaces the router alone (a DNS-named session-agent resolved to a new address; see
    /// [`crate::routing::router::Router::with_agent_addr`]).
    pub fn set_router(&mut self, router: std::sync::Arc<crate::routing::router::Router>) {
        self.cfg.router = router;
    }

    /// Next change of the dialog table (confirmed calls, and calls in set-up once their INVITE
    /// is forwarded), for state sync to the standby.
    #[must_use]
    pub fn poll_dialog_change(&mut self) -> Option<DialogChange> {
        self.changes.pop_front()
    }

    /// Installs a dialog replicated from the former active, so that its in-dialog requests
    /// (BYE, re-INVITE, ...) are served here after a switchover, and claims its media ports (a
    /// media session on the same ports, whose legs may latch again from `now`). A call still
    /// being set up (with its [`crate::sip::dialog::CallSetup`]) gets its INVITE transactions
    /// back, so that the callee's responses, the caller's ACK or CANCEL finish it here; one
    /// older than timer C, or without its set-up, is not installed. A TCP caller leg is
    /// redirected to the caller's Contact (see `reach`): the former active's connections died
    /// with it.
    pub fn install_dialog(&mut self, now: Instant, dialog: Dialog) {
        self.now = Some(now);
        let mut dialog = reach::after_takeover(dialog);
        let id = dialog.id;
        if self.calls.contains_key(&id) {
            // This engine already serves the call: its own state is the newest. Its media
            // may have been released with the media address (a demoted active): claimed again.
            if self
                .cfg
                .media
                .as_ref()
                .is_some_and(|m| lock(&m.table).session(id).is_none())
            {
                self.restore_media(now, id, dialog.media.as_deref());
            }
            return;
        }
        let record = dialog.media.clone();
        let call = match (dialog.state, dialog.setup.take()) {
            (DialogState::Confirmed | DialogState::Terminating, _) => Call::replicated(dialog),
            (_, Some(setup)) => match self.restore_setup(now, dialog, *setup) {
                Some(call) => call,
                None => return,
            },
            (_, None) => return,
        };
        if call.dialog.state == DialogState::Terminating {
            self.lingering
                .push_back((now + self.cfg.timers.t64(), Lingering::Forget(id)));
        }
        let subscription = call.dialog.subscription.is_some();
        if subscription {
            // A place for it, whatever the bound: the former active admitted it.
            self.cfg
                .subscription_sources
                .take_replicated(call.dialog.caller.peer.ip());
        }
        self.dialogs.insert_call(&call.dialog);
        self.calls.insert(id, Box::new(call));
        if subscription {
            self.arm_replicated_subscription(now, id);
        }
        self.arm_session(now, id);
        self.restore_media(now, id, record.as_deref());
    }

    /// Forgets a replicated dialog (deleted on the active).
    pub fn remove_dialog(&mut self, id: u64) {
        self.remove_call_quietly(id);
    }

    /// Forgets every call and transaction, quietly (nothing sent, nothing replicated): this
    /// node was the active and is no more. Its calls go on at the new active; copies kept here
    /// would go stale (the deletes of a standby go to its sync table, not to its engines), be
    /// counted as calls, and be taken for the newest state if it became active again, when it
    /// installs them afresh from the replicas instead. Counters are kept.
    pub fn forget_calls(&mut self) {
        let ids: Vec<u64> = self.calls.keys().copied().collect();
        for id in ids {
            self.remove_call_quietly(id);
        }
        self.server.clear();
        self.client.clear();
        self.hunts.clear();
        self.timers = TimerHeap::default();
        self.lingering.clear();
        self.changes.clear();
        self.out.clear();
        self.compact();
    }

    /// Gives back the room a burst of calls left in the engine's tables (calls, dialogs,
    /// transactions, timers, queues): Rust's collections keep their capacity when emptied, so
    /// without this a node's heap stays at its peak for good. Cheap; call it now and then.
    pub fn compact(&mut self) {
        use crate::compact::Compact as _;
        self.calls.compact();
        self.changes.compact();
        self.lingering.compact();
        self.dialogs.compact();
        self.server.compact();
        self.client.compact();
        self.hunts.compact();
        self.timers.compact();
        self.session_armed.compact();
        self.out.compact();
        self.verified.compact();
    }

    /// Counters so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The dialog table: every call this engine holds, as plain data.
    pub fn dialogs(&self) -> impl Iterator<Item = &Dialog> {
        self.calls.values().map(|c| &c.dialog)
    }

    /// Number of calls held (any state).
    pub fn call_count(&self) -> usize {
        self.calls.len()
    }

    /// Number of calls in progress: set up or being set up, not ending (a call whose BYE was
    /// answered lingers for 64·T1 in `Terminating` after a switchover, for a retransmitted BYE).
    /// Subscriptions are counted apart ([`Engine::subscription_count`]).
    pub fn active_call_count(&self) -> usize {
        self.calls
            .values()
            .filter(|c| {
                c.dialog.state != DialogState::Terminating && c.dialog.subscription.is_none()
            })
            .count()
    }

    /// Transactions still waiting for a final response, plus calls not yet confirmed by the
    /// caller's ACK (only confirmed dialogs are replicated, so a handover waits for them).
    pub fn pending_count(&self) -> usize {
        self.calls
            .values()
            .filter(|c| {
                matches!(
                    c.dialog.state,
                    DialogState::Trying | DialogState::Early | DialogState::Answered
                )
            })
            .count()
            + self.server.values().filter(|e| !e.txn.is_final()).count()
            + self.client.values().filter(|e| e.txn.is_pending()).count()
    }

    /// Number of live transactions.
    pub fn transaction_count(&self) -> usize {
        self.server.len() + self.client.len()
    }

    /// Sets the admission decision for new requests (overload control).
    pub fn set_admission(&mut self, admission: Admission) {
        self.admission = admission;
    }

    /// Refuse new requests with 503 from now on (graceful shutdown); transactions and dialogs
    /// in progress go on.
    pub fn start_draining(&mut self) {
        self.draining = true;
    }

    /// Whether no transaction is waiting for a final response (a draining engine may stop;
    /// transactions that only absorb retransmissions after their final response do not count).
    pub fn is_idle(&self) -> bool {
        self.server.values().all(|e| e.txn.is_final())
            && self.client.values().all(|e| !e.txn.is_pending())
    }

    /// Next message to send.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// When [`Engine::handle_timeout`] should be called next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let timer = self.timers.next_deadline();
        let linger = self.lingering.front().map(|(t, _)| *t);
        match (timer, linger) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Processes one received message.
    pub fn handle_inbound(&mut self, now: Instant, inbound: Inbound) {
        self.now = Some(now);
        if inbound.data.iter().all(|b| *b == b'\r' || *b == b'\n') {
            return; // keep-alive
        }
        self.trace_begin();
        self.inbound(now, &inbound);
        self.trace_end(now, Some(&inbound));
    }

    fn inbound(&mut self, now: Instant, inbound: &Inbound) {
        if inbound.data.len() > self.cfg.max_message_size {
            self.refuse_unparsable(
                inbound,
                &ParseError::TooLarge {
                    size: inbound.data.len(),
                    max: self.cfg.max_message_size,
                },
            );
            return;
        }
        match SipMessage::parse(&inbound.data) {
            Ok(msg) => match msg.status() {
                None => self.on_request(now, inbound, msg),
                Some(code) => self.on_response(now, inbound, code, msg),
            },
            Err(e) => self.refuse_unparsable(inbound, &e),
        }
    }

    /// Fires every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = Some(now);
        while let Some((at, what)) = self.lingering.front().copied() {
            if at > now {
                break;
            }
            self.lingering.pop_front();
            match what {
                Lingering::ReplicateDelete(id) => {
                    self.changes.push_back(DialogChange::Delete(id));
                }
                Lingering::Forget(id) => {
                    // Its end was never replicated (the former active died or was demoted
                    // while it lingered): this node's replica table, and its standby's, would
                    // keep it for good. Found by the soak: 8,300 such entries after 12
                    // switchovers.
                    self.remove_call_quietly(id);
                    self.changes.push_back(DialogChange::Delete(id));
                }
                Lingering::ForgetAcks(id) => {
                    if let Some(call) = self.calls.get_mut(&id) {
                        call.forget_acks();
                    }
                }
            }
        }
        while let Some(target) = self.timers.pop_due(now) {
            self.trace_begin();
            match target {
                TimerTarget::Server(key) => self.server_timeout(now, key),
                TimerTarget::Client(key) => self.client_timeout(now, key),
                TimerTarget::Subscription(id) => self.subscription_timeout(now, id),
                TimerTarget::SessionTimer(id) => self.session_timer_timeout(now, id),
            }
            self.trace_end(now, None);
        }
    }
}
