//! A `session-agent`'s health and admission, sans IO (issue 28's groundwork: not wired into the
//! engine or the configuration yet): one state machine per agent, driven by the time passed in.
//!
//! # Health
//!
//! An agent starts **in service**, as Oracle's do: a new agent (or a node just started) is
//! given traffic at once, and the first ping, due one `ping-interval` later, corrects a wrong
//! guess. It goes **out of service**:
//! - after `ping-misses` consecutive pings without an answer within `ping-timeout` (so with
//!   no answers at all, at exactly `ping-misses × ping-interval + ping-timeout` after start);
//! - when a ping is answered with a code that does not count as up: a code in
//!   `out-service-response-codes`; or, when `ping-in-service-response-codes` is set, a code
//!   that is neither 2xx nor listed. With both lists empty any answer keeps it in service
//!   (Oracle's default: the agent is alive). A code in both lists counts as down;
//! - after `trans-timeouts` consecutive requests of real traffic without an answer (0: off);
//! - when real traffic is answered with a code in `out-service-response-codes`;
//! - at once on a transport failure (a TCP connection refused or reset, an ICMP error:
//!   OpenSIPS#3257);
//! - when an operator disables it ([`AgentHealth::disable`]).
//!
//! It comes **back** on one ping answered with a code that counts as up, or, for an agent
//! without pings, `time-to-resume` after it went out (with neither, it stays out until an
//! operator enables it again: the settings layer should warn of that configuration). Real
//! traffic does not bring it back: no new sessions are sent to an agent out of service, and
//! answers within its existing dialogs say nothing of its new-session path.
//!
//! # Pings
//!
//! The caller sends an `OPTIONS` whenever [`AgentHealth::poll_ping`] says so and reports the
//! outcome ([`AgentHealth::on_ping_answer`], or [`AgentHealth::on_ping_timeout`] when its own
//! transaction gives up); [`AgentHealth::next_deadline`] says when to call again, the ping's
//! answer deadline included, so the machine also times the ping out itself. At most one ping
//! is outstanding. Pings are `ping-interval` apart, counted from the previous ping's sending.
//! In `keep-alive` mode an agent in service whose real traffic was answered within the last
//! interval is not pinged (the answer counts as liveness; the next ping is one interval after
//! that answer); `continuous` pings regardless. While out of service the gap grows 1×, 2×, 4×
//! the interval and stays at 4× (Oracle's back-off), so a dead agent is not hammered; it is
//! back to 1× once in service. Any answer, to a ping or to real traffic, resets the count of
//! missed pings (they must be consecutive, with no sign of life between them).
//!
//! # Admission
//!
//! [`AgentHealth::admit`] decides whether a new session may go to (or come from) the agent:
//! in service, under `max-sessions` (both directions), under `max-outbound-sessions` (sessions
//! sent to the agent) and under `max-burst-rate`: new sessions admitted in the current
//! one-second window, a window starting with the first session admitted after the previous
//! one ended. (Oracle measures the burst rate over `burst-rate-window`; a window of one
//! second is what this models, so the count is per second.) The caller counts sessions with
//! [`AgentHealth::session_started`] and [`AgentHealth::session_ended`]: started when the
//! INVITE is sent, ended when the session or the attempt ends, so pending INVITEs count
//! against the limits.
//!
//! # State changes and takeover
//!
//! Every change of state is queued as a [`Transition`] for [`AgentHealth::poll_transition`],
//! for a trap and a log line each (at most [`TRANSITION_QUEUE`] are kept: the oldest are
//! dropped and counted). After an HA takeover the new active adopts the replicated state with
//! [`AgentHealth::restore_state`] and pings within one interval to correct it; a standby does
//! not run these machines (kamailio#473: a standby pinging and marking peers down).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use thiserror::Error;

use super::group::AgentLoad;

/// How many state changes are kept for [`AgentHealth::poll_transition`].
pub const TRANSITION_QUEUE: usize = 16;

/// Back-off cap while out of service: the gap between pings is at most 2^2 = 4 intervals.
const MAX_BACKOFF_STEP: u32 = 2;

/// The burst-rate window.
const BURST_WINDOW: Duration = Duration::from_secs(1);

/// `ping-send-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PingSendMode {
    /// `keep-alive` (Oracle's default): ping only when real traffic got no answer within the
    /// interval.
    #[default]
    KeepAlive,
    /// `continuous`: ping every interval regardless of traffic.
    Continuous,
}

/// A session agent's health and constraint settings (typed from its configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPolicy {
    /// `ping-interval`; `None` (Oracle's 0): no pings.
    pub ping_interval: Option<Duration>,
    /// How long a ping waits for its answer.
    pub ping_timeout: Duration,
    /// Consecutive unanswered pings that take the agent out of service (0 is read as 1).
    pub ping_misses: u32,
    /// `ping-send-mode`.
    pub send_mode: PingSendMode,
    /// `ping-in-service-response-codes`: codes (beside 2xx) that count as up; empty: any code
    /// not listed as out counts as up.
    pub in_service_codes: Vec<u16>,
    /// `out-service-response-codes`: codes that take the agent out of service.
    pub out_service_codes: Vec<u16>,
    /// `trans-timeouts`: consecutive unanswered requests that take it out (0: off).
    pub trans_timeouts: u32,
    /// `time-to-resume`: back in service this long after going out, for an agent without
    /// pings.
    pub time_to_resume: Option<Duration>,
    /// `max-sessions` (both directions; 0: unlimited).
    pub max_sessions: u32,
    /// `max-outbound-sessions` (sessions sent to the agent; 0: unlimited).
    pub max_outbound_sessions: u32,
    /// `max-burst-rate`: new sessions per second (0: unlimited).
    pub max_burst_rate: u32,
}

impl Default for AgentPolicy {
    /// Oracle's defaults: no pings (a 32 s answer timeout, Timer F, when they are turned on),
    /// one miss, keep-alive, no code lists, no limits.
    fn default() -> Self {
        Self {
            ping_interval: None,
            ping_timeout: Duration::from_secs(32),
            ping_misses: 1,
            send_mode: PingSendMode::KeepAlive,
            in_service_codes: Vec::new(),
            out_service_codes: Vec::new(),
            trans_timeouts: 0,
            time_to_resume: None,
            max_sessions: 0,
            max_outbound_sessions: 0,
            max_burst_rate: 0,
        }
    }
}

impl AgentPolicy {
    /// Whether a ping answered with `code` counts as up (see the module docs).
    #[must_use]
    pub fn ping_code_is_up(&self, code: u16) -> bool {
        if self.out_service_codes.contains(&code) {
            return false;
        }
        self.in_service_codes.is_empty()
            || (200..300).contains(&code)
            || self.in_service_codes.contains(&code)
    }
}

/// Why an agent is out of service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutReason {
    /// `ping-misses` consecutive pings went unanswered.
    PingTimeout,
    /// A ping was answered with this code, which does not count as up.
    PingResponse(u16),
    /// Real traffic was answered with this code from `out-service-response-codes`.
    RequestResponse(u16),
    /// `trans-timeouts` consecutive requests went unanswered.
    TransactionTimeouts,
    /// The transport to it failed.
    TransportFailure,
    /// An operator disabled it.
    Disabled,
    /// It is named by a DNS name that has not resolved yet (no pings until it has).
    Unresolved,
}

/// An agent's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentState {
    /// New sessions may go to it.
    InService,
    /// No new sessions go to it, for this reason.
    OutOfService(OutReason),
}

impl AgentState {
    /// Whether it is in service.
    #[must_use]
    pub fn is_in_service(self) -> bool {
        self == Self::InService
    }

    /// Its form on the pair's sync channel: a tag and a status code (0 when none).
    #[must_use]
    pub fn to_wire(self) -> [u8; 3] {
        let (tag, code) = match self {
            Self::InService => (0, 0),
            Self::OutOfService(OutReason::PingTimeout) => (1, 0),
            Self::OutOfService(OutReason::PingResponse(c)) => (2, c),
            Self::OutOfService(OutReason::RequestResponse(c)) => (3, c),
            Self::OutOfService(OutReason::TransactionTimeouts) => (4, 0),
            Self::OutOfService(OutReason::TransportFailure) => (5, 0),
            Self::OutOfService(OutReason::Disabled) => (6, 0),
            Self::OutOfService(OutReason::Unresolved) => (7, 0),
        };
        let [hi, lo] = u16::to_be_bytes(code);
        [tag, hi, lo]
    }

    /// The state [`Self::to_wire`] wrote; `None` for anything else (a status code outside
    /// 100..=699 included).
    #[must_use]
    pub fn from_wire(bytes: &[u8]) -> Option<Self> {
        let &[tag, hi, lo] = bytes else {
            return None;
        };
        let code = u16::from_be_bytes([hi, lo]);
        let sip = (100..=699).contains(&code).then_some(code);
        let out = |r| Some(Self::OutOfService(r));
        match (tag, code) {
            (0, 0) => Some(Self::InService),
            (1, 0) => out(OutReason::PingTimeout),
            (2, _) => out(OutReason::PingResponse(sip?)),
            (3, _) => out(OutReason::RequestResponse(sip?)),
            (4, 0) => out(OutReason::TransactionTimeouts),
            (5, 0) => out(OutReason::TransportFailure),
            (6, 0) => out(OutReason::Disabled),
            (7, 0) => out(OutReason::Unresolved),
            _ => None,
        }
    }
}

/// A change of an agent's state, for a trap and a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The state before.
    pub from: AgentState,
    /// The state after.
    pub to: AgentState,
    /// When it changed.
    pub at: Instant,
}

/// Why a new session may not go to (or come from) the agent now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Refusal {
    /// The agent is out of service.
    #[error("session agent out of service")]
    OutOfService,
    /// It has `max-sessions` sessions.
    #[error("session agent at max-sessions")]
    MaxSessions,
    /// It has `max-outbound-sessions` outbound sessions.
    #[error("session agent at max-outbound-sessions")]
    MaxOutboundSessions,
    /// It took `max-burst-rate` new sessions in the current second.
    #[error("session agent over max-burst-rate")]
    BurstRate,
}

/// An agent's status for `show session-agents` (and its JSON, metrics and SNMP views).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentSnapshot {
    /// Its state.
    pub state: AgentState,
    /// Since when (its last change, its start, or its restore).
    pub since: Instant,
    /// Sessions, both directions.
    pub sessions: u32,
    /// Sessions sent to it.
    pub outbound_sessions: u32,
    /// New sessions admitted in the current burst window.
    pub burst_sessions: u32,
    /// The last answered ping's round trip.
    pub last_ping_rtt: Option<Duration>,
    /// When the last ping was sent.
    pub last_ping_at: Option<Instant>,
    /// The code the last answered ping got.
    pub last_ping_code: Option<u16>,
    /// A ping is waiting for its answer.
    pub ping_outstanding: bool,
    /// When the next ping is due (`None`: no pings, or one is outstanding).
    pub next_ping: Option<Instant>,
    /// Pings sent since start.
    pub pings_sent: u64,
    /// Pings unanswered since start.
    pub pings_missed: u64,
    /// Unanswered pings in a row now.
    pub consecutive_ping_misses: u32,
    /// Unanswered requests in a row now.
    pub consecutive_trans_timeouts: u32,
    /// New sessions refused since start.
    pub refusals: u64,
    /// State changes dropped because nobody polled them.
    pub transitions_dropped: u64,
}

/// One session agent's health and admission state machine.
#[derive(Debug, Clone)]
pub struct AgentHealth {
    /// Its settings.
    policy: AgentPolicy,
    /// Its state and since when.
    state: AgentState,
    /// When the state last changed.
    since: Instant,
    /// When the next ping is due (`None`: no pings, disabled, or one outstanding).
    next_ping: Option<Instant>,
    /// When the outstanding ping was sent.
    outstanding: Option<Instant>,
    /// Back-off step while out of service (gap = interval × 2^step).
    backoff: u32,
    /// Consecutive unanswered pings.
    misses: u32,
    /// When real traffic was last answered (keep-alive's liveness).
    last_answer: Option<Instant>,
    /// When an agent without pings comes back (`time-to-resume`).
    resume_at: Option<Instant>,
    /// Consecutive unanswered requests.
    trans_timeouts: u32,
    /// Sessions, both directions.
    sessions: u32,
    /// Sessions sent to it.
    outbound_sessions: u32,
    /// Start of the current burst window.
    window_start: Instant,
    /// Sessions admitted in it.
    window_count: u32,
    /// Counters for the snapshot.
    pings_sent: u64,
    pings_missed: u64,
    last_ping_rtt: Option<Duration>,
    last_ping_at: Option<Instant>,
    last_ping_code: Option<u16>,
    refusals: u64,
    /// State changes not yet polled.
    transitions: VecDeque<Transition>,
    transitions_dropped: u64,
}

impl AgentHealth {
    /// An agent in service at `now`, its first ping (if any) due one interval later.
    #[must_use]
    pub fn new(mut policy: AgentPolicy, now: Instant) -> Self {
        policy.ping_misses = policy.ping_misses.max(1);
        let next_ping = policy.ping_interval.and_then(|i| now.checked_add(i));
        Self {
            policy,
            state: AgentState::InService,
            since: now,
            next_ping,
            outstanding: None,
            backoff: 0,
            misses: 0,
            last_answer: None,
            resume_at: None,
            trans_timeouts: 0,
            sessions: 0,
            outbound_sessions: 0,
            window_start: now,
            window_count: 0,
            pings_sent: 0,
            pings_missed: 0,
            last_ping_rtt: None,
            last_ping_at: None,
            last_ping_code: None,
            refusals: 0,
            transitions: VecDeque::new(),
            transitions_dropped: 0,
        }
    }

    /// Its settings.
    #[must_use]
    pub fn policy(&self) -> &AgentPolicy {
        &self.policy
    }

    /// Its state.
    #[must_use]
    pub fn state(&self) -> AgentState {
        self.state
    }

    /// Whether to send a ping now (then the caller sends `OPTIONS` and reports its outcome);
    /// also handles any deadline that has passed, as [`Self::on_timeout`].
    #[must_use]
    pub fn poll_ping(&mut self, now: Instant) -> bool {
        self.on_timeout(now);
        let Some(interval) = self.policy.ping_interval else {
            return false;
        };
        if self.outstanding.is_some() || self.is_disabled() {
            return false;
        }
        match self.next_ping {
            Some(due) if due <= now => {}
            _ => return false,
        }
        if self.policy.send_mode == PingSendMode::KeepAlive && self.state.is_in_service() {
            if let Some(until) = self.last_answer.and_then(|t| t.checked_add(interval)) {
                if now < until {
                    self.next_ping = Some(until);
                    return false;
                }
            }
        }
        self.outstanding = Some(now);
        self.next_ping = None;
        self.pings_sent += 1;
        self.last_ping_at = Some(now);
        true
    }

    /// The outstanding ping was answered with `code` (a late answer, with no ping
    /// outstanding, is ignored).
    pub fn on_ping_answer(&mut self, now: Instant, code: u16) {
        let Some(sent) = self.outstanding.take() else {
            return;
        };
        self.last_ping_rtt = Some(now.saturating_duration_since(sent));
        self.last_ping_code = Some(code);
        self.misses = 0;
        let was_out = !self.state.is_in_service();
        let up = self.policy.ping_code_is_up(code);
        if up && was_out {
            self.go_in(now);
        } else if !up && !was_out {
            self.go_out(now, OutReason::PingResponse(code));
        }
        self.schedule_after_ping(sent, was_out && !up);
    }

    /// The outstanding ping got no answer (the caller's transaction gave up; the machine
    /// also notices by itself at the ping's deadline).
    pub fn on_ping_timeout(&mut self, now: Instant) {
        let Some(sent) = self.outstanding.take() else {
            return;
        };
        self.pings_missed += 1;
        self.misses = self.misses.saturating_add(1);
        let was_out = !self.state.is_in_service();
        if !was_out && self.misses >= self.policy.ping_misses {
            self.go_out(now, OutReason::PingTimeout);
        }
        self.schedule_after_ping(sent, was_out);
    }

    /// A request of real traffic to the agent was answered with `code`: liveness, and the
    /// count of unanswered requests starts again; a code in `out-service-response-codes`
    /// takes it out of service.
    pub fn on_request_answered(&mut self, now: Instant, code: u16) {
        if self.is_disabled() {
            return;
        }
        self.last_answer = Some(now);
        self.trans_timeouts = 0;
        self.misses = 0;
        if self.state.is_in_service()
            && self.policy.out_service_codes.contains(&code)
            && self.can_come_back()
        {
            self.go_out(now, OutReason::RequestResponse(code));
        }
    }

    /// A request of real traffic to the agent got no answer (its transaction timed out).
    pub fn on_request_timeout(&mut self, now: Instant) {
        if !self.state.is_in_service() || self.policy.trans_timeouts == 0 || !self.can_come_back() {
            return;
        }
        self.trans_timeouts = self.trans_timeouts.saturating_add(1);
        if self.trans_timeouts >= self.policy.trans_timeouts {
            self.go_out(now, OutReason::TransactionTimeouts);
        }
    }

    /// The transport to the agent failed: out of service at once.
    pub fn on_transport_failure(&mut self, now: Instant) {
        if self.state.is_in_service() && self.can_come_back() {
            self.go_out(now, OutReason::TransportFailure);
        }
    }

    /// Whether something would bring the agent back into service if real traffic took it
    /// out: pings, or `time-to-resume`. Without either, traffic never takes it out (it would
    /// stay out for good on one failure; the request itself still hunts on); only pings do.
    fn can_come_back(&self) -> bool {
        self.policy.ping_interval.is_some() || self.policy.time_to_resume.is_some()
    }

    /// Handles the deadlines that have passed: the outstanding ping's answer deadline and
    /// `time-to-resume`.
    pub fn on_timeout(&mut self, now: Instant) {
        if let Some(deadline) = self.ping_deadline() {
            if deadline <= now {
                self.on_ping_timeout(now);
            }
        }
        if let Some(at) = self.resume_at {
            if at <= now && !self.state.is_in_service() && !self.is_disabled() {
                self.go_in(now);
            }
        }
    }

    /// An operator disables the agent: out of service, no pings, until [`Self::enable`].
    pub fn disable(&mut self, now: Instant) {
        if self.is_disabled() {
            return;
        }
        self.go_out(now, OutReason::Disabled);
        self.outstanding = None;
        self.next_ping = None;
        self.resume_at = None;
    }

    /// An agent named by DNS has no address (yet): out of service, no pings, until
    /// [`Self::resolved`].
    pub fn unresolved(&mut self, now: Instant) {
        if self.is_disabled() || self.state == AgentState::OutOfService(OutReason::Unresolved) {
            return;
        }
        self.go_out(now, OutReason::Unresolved);
        self.outstanding = None;
        self.next_ping = None;
        self.resume_at = None;
    }

    /// Its DNS name resolved to a new address: an agent that waited for it is in service; one
    /// out of service (its old address stopped answering) stays out. Either way the new
    /// address is pinged at once (a ping outstanding to the old one is forgotten), so that it
    /// is found up or down within one ping timeout.
    pub fn resolved(&mut self, now: Instant) {
        if self.is_disabled() {
            return;
        }
        if self.state == AgentState::OutOfService(OutReason::Unresolved) {
            self.go_in(now);
        } else if self.state.is_in_service() {
            return;
        }
        self.backoff = 0;
        self.outstanding = None;
        self.next_ping = self.policy.ping_interval.map(|_| now);
    }

    /// An operator enables a disabled agent: in service, its first ping one interval later.
    pub fn enable(&mut self, now: Instant) {
        if !self.is_disabled() {
            return;
        }
        self.go_in(now);
        self.next_ping = self.policy.ping_interval.and_then(|i| now.checked_add(i));
    }

    /// When to call [`Self::poll_ping`] (or [`Self::on_timeout`]) next: the next ping, the
    /// outstanding ping's answer deadline, or `time-to-resume`; `None`: nothing timed.
    #[must_use]
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.is_disabled() {
            return None;
        }
        let ping = if self.outstanding.is_some() {
            self.ping_deadline()
        } else {
            self.next_ping
                .filter(|_| self.policy.ping_interval.is_some())
        };
        let resume = self.resume_at.filter(|_| !self.state.is_in_service());
        match (ping, resume) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next state change not yet taken, oldest first.
    #[must_use]
    pub fn poll_transition(&mut self) -> Option<Transition> {
        self.transitions.pop_front()
    }

    /// Whether a new session may go to the agent (`outbound`) or come from it now; counts it
    /// in the burst window when it may (the caller then calls [`Self::session_started`]).
    pub fn admit(&mut self, now: Instant, outbound: bool) -> Result<(), Refusal> {
        if let Err(refusal) = self.check(now, outbound) {
            self.refusals += 1;
            return Err(refusal);
        }
        if !self.in_window(now) {
            self.window_start = now;
            self.window_count = 0;
        }
        self.window_count = self.window_count.saturating_add(1);
        Ok(())
    }

    /// Whether [`Self::admit`] would let a new session through now, without counting it.
    #[must_use]
    pub fn can_admit(&self, now: Instant, outbound: bool) -> bool {
        self.check(now, outbound).is_ok()
    }

    /// A session with the agent started (`outbound`: sent to it).
    pub fn session_started(&mut self, outbound: bool) {
        self.sessions = self.sessions.saturating_add(1);
        if outbound {
            self.outbound_sessions = self.outbound_sessions.saturating_add(1);
        }
    }

    /// A session with the agent ended, or its attempt failed.
    pub fn session_ended(&mut self, outbound: bool) {
        self.sessions = self.sessions.saturating_sub(1);
        if outbound {
            self.outbound_sessions = self.outbound_sessions.saturating_sub(1);
        }
    }

    /// What a `session-agent-group` needs to order this agent for a new session: its
    /// outbound sessions against `max-outbound-sessions` when that is set and the session is
    /// outbound, else all sessions against `max-sessions`; the other limit and the burst rate
    /// folded into `burst_ok`.
    #[must_use]
    pub fn load(&self, now: Instant, outbound: bool) -> AgentLoad {
        let p = &self.policy;
        let by_outbound = outbound && p.max_outbound_sessions > 0;
        let (sessions, max_sessions, other_ok) = if by_outbound {
            let total_ok = p.max_sessions == 0 || self.sessions < p.max_sessions;
            (self.outbound_sessions, p.max_outbound_sessions, total_ok)
        } else {
            (self.sessions, p.max_sessions, true)
        };
        AgentLoad {
            in_service: self.state.is_in_service(),
            sessions,
            max_sessions,
            burst_ok: other_ok && !self.burst_full(now),
        }
    }

    /// Its status now.
    #[must_use]
    pub fn snapshot(&self, now: Instant) -> AgentSnapshot {
        AgentSnapshot {
            state: self.state,
            since: self.since,
            sessions: self.sessions,
            outbound_sessions: self.outbound_sessions,
            burst_sessions: if self.in_window(now) {
                self.window_count
            } else {
                0
            },
            last_ping_rtt: self.last_ping_rtt,
            last_ping_at: self.last_ping_at,
            last_ping_code: self.last_ping_code,
            ping_outstanding: self.outstanding.is_some(),
            next_ping: self
                .next_ping
                .filter(|_| self.policy.ping_interval.is_some()),
            pings_sent: self.pings_sent,
            pings_missed: self.pings_missed,
            consecutive_ping_misses: self.misses,
            consecutive_trans_timeouts: self.trans_timeouts,
            refusals: self.refusals,
            transitions_dropped: self.transitions_dropped,
        }
    }

    /// Adopts the state replicated from the previous active after a takeover (no
    /// [`Transition`]: the old active reported it): counts of misses start again, and the
    /// first ping is due one interval later to correct it (`time-to-resume` runs from now for
    /// an agent without pings).
    pub fn restore_state(&mut self, state: AgentState, now: Instant) {
        self.state = state;
        self.since = now;
        self.outstanding = None;
        self.backoff = 0;
        self.misses = 0;
        self.trans_timeouts = 0;
        self.last_answer = None;
        self.resume_at = None;
        self.next_ping = None;
        if self.is_disabled() {
            return;
        }
        self.next_ping = self.policy.ping_interval.and_then(|i| now.checked_add(i));
        if !state.is_in_service() {
            self.resume_at = self.resume_after(now);
        }
    }

    /// Whether an operator disabled it.
    fn is_disabled(&self) -> bool {
        self.state == AgentState::OutOfService(OutReason::Disabled)
    }

    /// The outstanding ping's answer deadline.
    fn ping_deadline(&self) -> Option<Instant> {
        self.outstanding
            .and_then(|sent| sent.checked_add(self.policy.ping_timeout))
    }

    /// When an agent going out now comes back by itself (only without pings).
    fn resume_after(&self, now: Instant) -> Option<Instant> {
        if self.policy.ping_interval.is_some() {
            return None;
        }
        self.policy.time_to_resume.and_then(|d| now.checked_add(d))
    }

    /// Schedules the ping after the one sent at `sent`, backing off further if the agent
    /// was already out of service and this ping failed too.
    fn schedule_after_ping(&mut self, sent: Instant, failed_while_out: bool) {
        if failed_while_out {
            self.backoff = (self.backoff + 1).min(MAX_BACKOFF_STEP);
        }
        let Some(interval) = self.policy.ping_interval else {
            self.next_ping = None;
            return;
        };
        let gap = if self.state.is_in_service() {
            interval
        } else {
            interval.saturating_mul(1 << self.backoff)
        };
        self.next_ping = sent.checked_add(gap);
    }

    /// Out of service for `reason`.
    fn go_out(&mut self, now: Instant, reason: OutReason) {
        self.backoff = 0;
        self.trans_timeouts = 0;
        self.resume_at = if matches!(reason, OutReason::Disabled | OutReason::Unresolved) {
            None
        } else {
            self.resume_after(now)
        };
        self.change(now, AgentState::OutOfService(reason));
    }

    /// Back in service.
    fn go_in(&mut self, now: Instant) {
        self.backoff = 0;
        self.misses = 0;
        self.trans_timeouts = 0;
        self.resume_at = None;
        self.change(now, AgentState::InService);
    }

    /// Records a change of state.
    fn change(&mut self, now: Instant, to: AgentState) {
        let from = self.state;
        if from == to {
            return;
        }
        self.state = to;
        self.since = now;
        if self.transitions.len() == TRANSITION_QUEUE {
            self.transitions.pop_front();
            self.transitions_dropped += 1;
        }
        self.transitions.push_back(Transition { from, to, at: now });
    }

    /// Whether `now` is in the current burst window.
    fn in_window(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.window_start) < BURST_WINDOW
    }

    /// Whether the burst window is full now.
    fn burst_full(&self, now: Instant) -> bool {
        self.policy.max_burst_rate > 0
            && self.in_window(now)
            && self.window_count >= self.policy.max_burst_rate
    }

    /// Admission's checks, in Oracle's order of causes.
    fn check(&self, now: Instant, outbound: bool) -> Result<(), Refusal> {
        let p = &self.policy;
        if !self.state.is_in_service() {
            return Err(Refusal::OutOfService);
        }
        if p.max_sessions > 0 && self.sessions >= p.max_sessions {
            return Err(Refusal::MaxSessions);
        }
        if outbound
            && p.max_outbound_sessions > 0
            && self.outbound_sessions >= p.max_outbound_sessions
        {
            return Err(Refusal::MaxOutboundSessions);
        }
        if self.burst_full(now) {
            return Err(Refusal::BurstRate);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: Duration = Duration::from_secs(10);
    const T: Duration = Duration::from_secs(2);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn pinging(misses: u32, mode: PingSendMode) -> AgentPolicy {
        AgentPolicy {
            ping_interval: Some(I),
            ping_timeout: T,
            ping_misses: misses,
            send_mode: mode,
            ..AgentPolicy::default()
        }
    }

    /// Drives the agent on its own deadlines until `until`, answering each ping with
    /// `answer(sent)` (after 100 ms) or not at all; returns the send times of the pings.
    fn drive(
        a: &mut AgentHealth,
        until: Instant,
        mut answer: impl FnMut(Instant) -> Option<u16>,
    ) -> Vec<Instant> {
        let mut sent = Vec::new();
        while let Some(t) = a.next_deadline() {
            if t > until {
                break;
            }
            if a.poll_ping(t) {
                sent.push(t);
                if let Some(code) = answer(t) {
                    a.on_ping_answer(t + Duration::from_millis(100), code);
                }
            }
        }
        sent
    }

    fn transitions(a: &mut AgentHealth) -> Vec<Transition> {
        std::iter::from_fn(|| a.poll_transition()).collect()
    }

    #[test]
    fn starts_in_service_first_ping_one_interval_later() {
        let t0 = Instant::now();
        let mut a = AgentHealth::new(pinging(1, PingSendMode::Continuous), t0);
        assert_eq!(a.state(), AgentState::InService);
        assert_eq!(a.next_deadline(), Some(t0 + I));
        assert!(!a.poll_ping(t0 + I - Duration::from_nanos(1)));
        assert!(a.poll_ping(t0 + I));
        // At most one outstanding; its answer deadline is the next one.
        assert!(!a.poll_ping(t0 + I));
        assert!(!a.poll_ping(t0 + I + Duration::from_secs(1)));
        assert_eq!(a.next_deadline(), Some(t0 + I + T));
        a.on_ping_answer(t0 + I + secs(1), 200);
        assert_eq!(a.next_deadline(), Some(t0 + 2 * I));
        let snap = a.snapshot(t0 + I + secs(1));
        assert_eq!(snap.last_ping_rtt, Some(secs(1)));
        assert_eq!(snap.last_ping_at, Some(t0 + I));
        assert_eq!(snap.last_ping_code, Some(200));
        assert_eq!(snap.pings_sent, 1);
        assert!(transitions(&mut a).is_empty());
    }

    #[test]
    fn out_after_exactly_misses_times_interval_plus_timeout() {
        for misses in [1u32, 2, 3, 5] {
            let t0 = Instant::now();
            let mut a = AgentHealth::new(pinging(misses, PingSendMode::Continuous), t0);
            let out_at = t0 + I * misses + T;
            let sent = drive(&mut a, out_at - Duration::from_nanos(1), |_| None);
            assert_eq!(sent.len(), misses as usize);
            assert!(a.state().is_in_service(), "{misses}");
            assert!(transitions(&mut a).is_empty());
            a.on_timeout(out_at);
            assert_eq!(
                transitions(&mut a),
                [Transition {
                    from: AgentState::InService,
                    to: AgentState::OutOfService(OutReason::PingTimeout),
                    at: out_at,
                }]
            );
            assert_eq!(a.snapshot(out_at).pings_missed, u64::from(misses));
            assert!(!a.can_admit(out_at, true));
        }
    }

    #[test]
    fn back_after_one_answered_ping() {
        let t0 = Instant::now();
        let mut a = AgentHealth::new(pinging(2, PingSendMode::Continuous), t0);
        drive(&mut a, t0 + 2 * I + T, |_| None);
        assert!(!a.state().is_in_service());
        let _ = transitions(&mut a);
        // The next ping (one interval after the last one's sending) is answered.
        assert_eq!(a.next_deadline(), Some(t0 + 3 * I));
        assert!(a.poll_ping(t0 + 3 * I));
        a.on_ping_answer(t0 + 3 * I + secs(1), 200);
        assert_eq!(
            transitions(&mut a),
            [Transition {
                from: AgentState::OutOfService(OutReason::PingTimeout),
                to: AgentState::InService,
                at: t0 + 3 * I + secs(1),
            }]
        );
        assert_eq!(a.admit(t0 + 3 * I + secs(1), true), Ok(()));
    }

    #[test]
    fn misses_must_be_consecutive() {
        let t0 = Instant::now();
        let mut a = AgentHealth::new(pinging(2, PingSendMode::Continuous), t0);
        let mut n = 0;
        // Every other ping answered: never two misses in a row.
        drive(&mut a, t0 + 100 * I, |_| {
            n += 1;
            (n % 2 == 0).then_some(200)
        });
        assert!(a.state().is_in_service());
        assert_eq!(a.snapshot(t0).pings_missed, 50);
    }

    #[test]
    fn backoff_while_out_is_1x_2x_4x_capped() {
        let t0 = Instant::now();
        let mut a = AgentHealth::new(pinging(1, PingSendMode::Continuous), t0);
        let sent = drive(&mut a, t0 + 100 * I, |_| None);
        let gaps: Vec<Duration> = sent.windows(2).map(|w| w[1] - w[0]).collect();
        // The first ping took it out; then the gaps grow 1x, 2x, 4x and stay at 4x.
        assert_eq!(gaps[..4], [I, 2 * I, 4 * I, 4 * I]);
        assert!(gaps[2..].iter().all(|&g| g == 4 * I));
        // Back in service: 1x again.
        let last = *sent.last().expect("pings");
        a.on_timeout(last + T);
        let next = a.next_deadline().expect("next ping");
        assert_eq!(next, last + 4 * I);
        assert!(a.poll_ping(next));
        a.on_ping_answer(next, 200);
        assert!(a.state().is_in_service());
        assert_eq!(a.next_deadline(), Some(next + I));
    }

    #[test]
    fn down_answers_back_off_too() {
        let t0 = Instant::now();
        let policy = AgentPolicy {
            out_service_codes: vec![503],
            ..pinging(1, PingSendMode::Continuous)
        };
        let mut a = AgentHealth::new(policy, t0);
        let sent = drive(&mut a, t0 + 30 * I, |_| Some(503));
        let gaps: Vec<Duration> = sent.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps[..4], [I, 2 * I, 4 * I, 4 * I]);
        assert_eq!(
            a.state(),
            AgentState::OutOfService(OutReason::PingResponse(503))
        );
        assert_eq!(transitions(&mut a).len(), 1);
    }

    #[test]
    fn keep_alive_traffic_suppresses_pings() {
        let t0 = Instant::now();
        let mut a = AgentHealth::new(pinging(1, PingSendMode::KeepAlive), t0);
        // Traffic answered every 5 s for 100 s: no ping.
        let mut sent = 0;
        for k in 0..=20u32 {
            let t = t0 + secs(5) * k;
            a.on_request_answered(t, 200);
            while let Some(d) = a.next_deadline().filter(|&d| d <= t + secs(5)) {
                sent += usize::from(a.poll_ping(d));
            }
        }
        assert_eq!(sent, 0);
        // Traffic stops at 100 s: the ping is due one interval after its last answer.
        let last = t0 + secs(100);
        assert_eq!(a.next_deadline(), Some(last + I));
        assert!(a.poll_ping(last + I));
        assert_eq!(a.snapshot(last + I).pings_sent, 1);
    }

    #[test]
    fn continuous_pings_despite_traffic() {
        let t0 = Instant::now();
        let mut a = AgentHealth::new(pinging(1, PingSendMode::Continuous), t0);
        let mut sent = 0;
        for k in 0..=20u32 {
            let t = t0 + secs(5) * k;
            a.on_request_answered(t, 200);
            while let Some(d) = a.next_deadline().filter(|&d| d <= t + secs(5)) {
                if a.poll_ping(d) {
                    sent += 1;
                    a.on_ping_answer(d, 200);
                }
            }
        }
        assert_eq!(sent, 10);
    }

    #[test]
    fn keep_alive_pings_while_out_of_service() {
        let t0 = Instant::now();
        let mut a = AgentHealth::new(pinging(1, PingSendMode::KeepAlive), t0);
        a.on_transport_failure(t0 + secs(1));
        // An answer within an existing dialog does not suppress the ping of an agent out.
        a.on_request_answered(t0 + secs(9), 200);
        assert!(!a.state().is_in_service());
        assert!(a.poll_ping(t0 + I));
        a.on_ping_answer(t0 + I, 200);
        assert!(a.state().is_in_service());
    }

    #[test]
    fn trans_timeouts_take_it_out_consecutively() {
        let t0 = Instant::now();
        let policy = AgentPolicy {
            trans_timeouts: 3,
            ..pinging(1, PingSendMode::KeepAlive)
        };
        let mut a = AgentHealth::new(policy, t0);
        a.on_request_timeout(t0);
        a.on_request_timeout(t0);
        a.on_request_answered(t0, 180); // resets the count
        a.on_request_timeout(t0 + secs(1));
        a.on_request_timeout(t0 + secs(2));
        assert!(a.state().is_in_service());
        assert_eq!(a.snapshot(t0).consecutive_trans_timeouts, 2);
        a.on_request_timeout(t0 + secs(3));
        assert_eq!(
            a.state(),
            AgentState::OutOfService(OutReason::TransactionTimeouts)
        );
        assert_eq!(transitions(&mut a)[0].at, t0 + secs(3));
        // The ping brings it back.
        let due = a.next_deadline().expect("ping");
        assert!(due <= t0 + secs(3) + I);
        assert!(a.poll_ping(due));
        a.on_ping_answer(due, 200);
        assert!(a.state().is_in_service());
    }

    #[test]
    fn trans_timeouts_off_by_default() {
        let t0 = Instant::now();
        let mut a = AgentHealth::new(AgentPolicy::default(), t0);
        for _ in 0..100 {
            a.on_request_timeout(t0);
        }
        assert!(a.state().is_in_service());
    }

    #[test]
    fn response_codes() {
        let any = AgentPolicy::default();
        // Both lists empty: any answer keeps it in service.
        assert!([100, 200, 404, 500, 503, 603]
            .iter()
            .all(|&c| any.ping_code_is_up(c)));
        let out = AgentPolicy {
            out_service_codes: vec![503, 480],
            ..AgentPolicy::default()
        };
        assert!(!out.ping_code_is_up(503));
        assert!(!out.ping_code_is_up(480));
        assert!(out.ping_code_is_up(404));
        let ins = AgentPolicy {
            in_service_codes: vec![405, 404],
            out_service_codes: vec![404],
            ..AgentPolicy::default()
        };
        assert!(ins.ping_code_is_up(200));
        assert!(ins.ping_code_is_up(202));
        assert!(ins.ping_code_is_up(405));
        assert!(!ins.ping_code_is_up(404)); // in both lists: down
        assert!(!ins.ping_code_is_up(500));
        assert!(!ins.ping_code_is_up(100));
    }

    #[test]
    fn ping_answers_by_code() {
        let t0 = Instant::now();
        let policy = AgentPolicy {
            in_service_codes: vec![405],
            ..pinging(3, PingSendMode::Continuous)
        };
        let mut a = AgentHealth::new(policy, t0);
        assert!(a.poll_ping(t0 + I));
        a.on_ping_answer(t0 + I, 405);
        assert!(a.state().is_in_service());
        assert!(a.poll_ping(t0 + 2 * I));
        a.on_ping_answer(t0 + 2 * I, 500);
        assert_eq!(
            a.state(),
            AgentState::OutOfService(OutReason::PingResponse(500))
        );
        // Back on one up code.
        assert!(a.poll_ping(t0 + 3 * I));
        a.on_ping_answer(t0 + 3 * I, 200);
        assert!(a.state().is_in_service());
        assert_eq!(transitions(&mut a).len(), 2);
    }

    #[test]
    fn traffic_out_service_codes() {
        let t0 = Instant::now();
        let policy = AgentPolicy {
            out_service_codes: vec![503],
            ..pinging(1, PingSendMode::KeepAlive)
        };
        let mut a = AgentHealth::new(policy, t0);
        a.on_request_answered(t0, 486);
        a.on_request_answered(t0, 500);
        assert!(a.state().is_in_service());
        a.on_request_answered(t0 + secs(1), 503);
        assert_eq!(
            a.state(),
            AgentState::OutOfService(OutReason::RequestResponse(503))
        );
        // Traffic answers do not bring it back; a ping does.
        a.on_request_answered(t0 + secs(2), 200);
        assert!(!a.state().is_in_service());
        assert!(a.poll_ping(t0 + I));
        a.on_ping_answer(t0 + I, 200);
        assert!(a.state().is_in_service());
    }

    #[test]
    fn transport_failure_and_time_to_resume_without_pings() {
        let t0 = Instant::now();
        let policy = AgentPolicy {
            time_to_resume: Some(secs(30)),
            ..AgentPolicy::default()
        };
        let mut a = AgentHealth::new(policy, t0);
        assert_eq!(a.next_deadline(), None);
        assert!(!a.poll_ping(t0 + secs(1000)));
        a.on_transport_failure(t0 + secs(5));
        assert_eq!(
            a.state(),
            AgentState::OutOfService(OutReason::TransportFailure)
        );
        assert_eq!(a.next_deadline(), Some(t0 + secs(35)));
        a.on_timeout(t0 + secs(34));
        assert!(!a.state().is_in_service());
        a.on_timeout(t0 + secs(35));
        assert!(a.state().is_in_service());
        assert_eq!(a.next_deadline(), None);
        let ts = transitions(&mut a);
        assert_eq!(ts.len(), 2);
        assert_eq!(ts[1].at, t0 + secs(35));
    }

    #[test]
    fn without_pings_or_resume_traffic_never_takes_it_out() {
        // Nothing would bring it back: one failure must not take it out for good (the
        // request itself still hunts on); only the operator's disable does.
        let t0 = Instant::now();
        let mut a = AgentHealth::new(
            AgentPolicy {
                trans_timeouts: 1,
                out_service_codes: vec![480],
                ..AgentPolicy::default()
            },
            t0,
        );
        a.on_transport_failure(t0);
        a.on_request_timeout(t0);
        a.on_request_answered(t0, 480);
        assert!(a.state().is_in_service());
        a.disable(t0);
        a.on_timeout(t0 + secs(1_000_000));
        assert!(!a.state().is_in_service());
        assert_eq!(a.next_deadline(), None);
    }

    #[test]
    fn time_to_resume_ignored_with_pings() {
        let t0 = Instant::now();
        let policy = AgentPolicy {
            time_to_resume: Some(secs(1)),
            ..pinging(1, PingSendMode::Continuous)
        };
        let mut a = AgentHealth::new(policy, t0);
        a.on_transport_failure(t0);
        a.on_timeout(t0 + secs(5));
        assert!(!a.state().is_in_service());
    }

    #[test]
    fn burst_window() {
        let t0 = Instant::now();
        let policy = AgentPolicy {
            max_burst_rate: 2,
            ..AgentPolicy::default()
        };
        let mut a = AgentHealth::new(policy, t0);
        let t = t0 + secs(10);
        assert_eq!(a.admit(t, true), Ok(()));
        assert_eq!(a.admit(t + Duration::from_millis(500), false), Ok(()));
        assert!(!a.can_admit(t + Duration::from_millis(999), true));
        assert_eq!(
            a.admit(t + Duration::from_millis(999), true),
            Err(Refusal::BurstRate)
        );
        // can_admit counts nothing.
        let mut b = AgentHealth::new(a.policy().clone(), t0);
        for _ in 0..10 {
            assert!(b.can_admit(t, true));
        }
        assert_eq!(b.admit(t, true), Ok(()));
        // A new window one second after the first admitted session.
        assert_eq!(a.admit(t + secs(1), true), Ok(()));
        assert_eq!(a.snapshot(t + secs(1)).burst_sessions, 1);
        assert_eq!(a.snapshot(t + secs(1)).refusals, 1);
        let t2 = t + secs(1) + Duration::from_millis(1);
        assert_eq!(a.admit(t2, true), Ok(()));
        assert!(!a.load(t2, true).burst_ok);
        assert!(!a.load(t2, true).eligible());
    }

    #[test]
    fn max_sessions_and_outbound() {
        let t0 = Instant::now();
        let policy = AgentPolicy {
            max_sessions: 3,
            max_outbound_sessions: 2,
            ..AgentPolicy::default()
        };
        let mut a = AgentHealth::new(policy, t0);
        for _ in 0..2 {
            assert_eq!(a.admit(t0, true), Ok(()));
            a.session_started(true);
        }
        assert_eq!(a.admit(t0, true), Err(Refusal::MaxOutboundSessions));
        // Inbound still fits under max-sessions.
        assert_eq!(a.admit(t0, false), Ok(()));
        a.session_started(false);
        assert_eq!(a.admit(t0, false), Err(Refusal::MaxSessions));
        assert_eq!(a.admit(t0, true), Err(Refusal::MaxSessions));
        a.session_ended(true);
        assert_eq!(a.admit(t0, false), Ok(()));
        let snap = a.snapshot(t0);
        assert_eq!((snap.sessions, snap.outbound_sessions), (2, 1));
        // Ending more than started never wraps.
        for _ in 0..5 {
            a.session_ended(true);
        }
        assert_eq!(a.snapshot(t0).sessions, 0);
        // Out of service refuses first.
        a.disable(t0);
        assert_eq!(a.admit(t0, true), Err(Refusal::OutOfService));
    }

    #[test]
    fn load_for_the_group() {
        let t0 = Instant::now();
        let policy = AgentPolicy {
            max_sessions: 2,
            max_outbound_sessions: 5,
            ..AgentPolicy::default()
        };
        let mut a = AgentHealth::new(policy, t0);
        a.session_started(true);
        let l = a.load(t0, true);
        assert_eq!((l.sessions, l.max_sessions, l.burst_ok), (1, 5, true));
        assert!(l.eligible());
        a.session_started(false);
        // Outbound has room under its own limit, but max-sessions is reached.
        assert!(!a.load(t0, true).eligible());
        assert!(!a.load(t0, false).eligible());
        assert_eq!(a.load(t0, true).eligible(), a.can_admit(t0, true));
    }

    #[test]
    fn restore_state_after_takeover() {
        let t0 = Instant::now();
        let mut a = AgentHealth::new(pinging(1, PingSendMode::Continuous), t0);
        let tk = t0 + secs(123);
        a.restore_state(AgentState::OutOfService(OutReason::PingTimeout), tk);
        assert!(transitions(&mut a).is_empty());
        assert_eq!(a.snapshot(tk).since, tk);
        assert_eq!(a.admit(tk, true), Err(Refusal::OutOfService));
        // Its first ping, within one interval, corrects it.
        let due = a.next_deadline().expect("ping");
        assert_eq!(due, tk + I);
        assert!(a.poll_ping(due));
        a.on_ping_answer(due, 200);
        assert!(a.state().is_in_service());
        assert_eq!(transitions(&mut a).len(), 1);
        // Restored in service, a dead agent goes out after the usual time.
        let mut b = AgentHealth::new(pinging(2, PingSendMode::Continuous), t0);
        b.restore_state(AgentState::InService, tk);
        drive(&mut b, tk + 2 * I + T, |_| None);
        assert_eq!(transitions(&mut b)[0].at, tk + 2 * I + T);
    }

    #[test]
    fn restore_without_pings_resumes_from_now() {
        let t0 = Instant::now();
        let policy = AgentPolicy {
            time_to_resume: Some(secs(30)),
            ..AgentPolicy::default()
        };
        let mut a = AgentHealth::new(policy, t0);
        a.restore_state(
            AgentState::OutOfService(OutReason::TransportFailure),
            t0 + secs(7),
        );
        assert_eq!(a.next_deadline(), Some(t0 + secs(37)));
    }

    #[test]
    fn disable_and_enable() {
        let t0 = Instant::now();
        let mut a = AgentHealth::new(pinging(1, PingSendMode::Continuous), t0);
        assert!(a.poll_ping(t0 + I));
        a.disable(t0 + I);
        // The outstanding ping's answer is ignored; nothing is timed; traffic changes nothing.
        a.on_ping_answer(t0 + I, 200);
        a.on_request_answered(t0 + I, 200);
        assert_eq!(a.state(), AgentState::OutOfService(OutReason::Disabled));
        assert_eq!(a.next_deadline(), None);
        assert!(!a.poll_ping(t0 + 100 * I));
        a.enable(t0 + 100 * I);
        assert!(a.state().is_in_service());
        assert_eq!(a.next_deadline(), Some(t0 + 101 * I));
        assert_eq!(transitions(&mut a).len(), 2);
    }

    #[test]
    fn states_cross_the_sync_channel_unchanged_and_garbage_is_refused() {
        let all = [
            AgentState::InService,
            AgentState::OutOfService(OutReason::PingTimeout),
            AgentState::OutOfService(OutReason::PingResponse(503)),
            AgentState::OutOfService(OutReason::RequestResponse(480)),
            AgentState::OutOfService(OutReason::TransactionTimeouts),
            AgentState::OutOfService(OutReason::TransportFailure),
            AgentState::OutOfService(OutReason::Disabled),
            AgentState::OutOfService(OutReason::Unresolved),
        ];
        for s in all {
            assert_eq!(AgentState::from_wire(&s.to_wire()), Some(s));
        }
        for bad in [
            &[][..],
            &[0, 0],
            &[0, 0, 1],
            &[2, 0, 0],
            &[2, 3, 0xE8],
            &[8, 0, 0],
            &[0; 4],
        ] {
            assert_eq!(AgentState::from_wire(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_unresolved_agent_waits_then_is_pinged_at_once() {
        let t0 = Instant::now();
        let mut a = AgentHealth::new(pinging(1, PingSendMode::Continuous), t0);
        a.unresolved(t0);
        assert_eq!(a.state(), AgentState::OutOfService(OutReason::Unresolved));
        assert_eq!(a.next_deadline(), None, "no pings to no address");
        assert!(!a.poll_ping(t0 + 100 * I));
        assert!(!a.can_admit(t0 + 100 * I, true));
        a.resolved(t0 + 100 * I);
        assert!(a.state().is_in_service());
        assert!(
            a.poll_ping(t0 + 100 * I),
            "the new address is pinged at once"
        );
        // Resolving again later changes nothing; a disabled agent stays disabled.
        a.resolved(t0 + 101 * I);
        assert_eq!(transitions(&mut a).len(), 2);
        // Out of service on its address, then moved to another: pinged at once, still out.
        a.on_ping_timeout(t0 + 100 * I + T);
        assert!(!a.state().is_in_service());
        a.resolved(t0 + 101 * I);
        assert!(!a.state().is_in_service());
        assert!(a.poll_ping(t0 + 101 * I));
        a.disable(t0 + 102 * I);
        a.unresolved(t0 + 102 * I);
        assert_eq!(a.state(), AgentState::OutOfService(OutReason::Disabled));
    }

    #[test]
    fn late_ping_answer_is_ignored() {
        let t0 = Instant::now();
        let mut a = AgentHealth::new(pinging(1, PingSendMode::Continuous), t0);
        assert!(a.poll_ping(t0 + I));
        a.on_timeout(t0 + I + T);
        assert!(!a.state().is_in_service());
        a.on_ping_answer(t0 + I + T + secs(1), 200);
        assert!(!a.state().is_in_service());
        // The caller reporting the same timeout again changes nothing.
        a.on_ping_timeout(t0 + I + T + secs(1));
        assert_eq!(a.snapshot(t0).pings_missed, 1);
    }

    #[test]
    fn ping_misses_zero_reads_as_one() {
        let t0 = Instant::now();
        let mut a = AgentHealth::new(pinging(0, PingSendMode::Continuous), t0);
        drive(&mut a, t0 + I + T, |_| None);
        assert!(!a.state().is_in_service());
        assert_eq!(a.policy().ping_misses, 1);
    }

    #[test]
    fn transitions_are_bounded() {
        let t0 = Instant::now();
        let mut a = AgentHealth::new(AgentPolicy::default(), t0);
        for k in 0..100u32 {
            let t = t0 + secs(1) * k;
            a.disable(t);
            a.enable(t);
        }
        assert_eq!(transitions(&mut a).len(), TRANSITION_QUEUE);
        assert_eq!(
            a.snapshot(t0).transitions_dropped,
            200 - TRANSITION_QUEUE as u64
        );
    }

    #[test]
    fn timeout_longer_than_interval() {
        // The next ping waits for the outstanding one to resolve, then is due at once.
        let t0 = Instant::now();
        let policy = AgentPolicy {
            ping_timeout: secs(25),
            ..pinging(2, PingSendMode::Continuous)
        };
        let mut a = AgentHealth::new(policy, t0);
        let sent = drive(&mut a, t0 + secs(100), |_| None);
        assert_eq!(sent[..2], [t0 + I, t0 + I + secs(25)]);
        assert_eq!(transitions(&mut a)[0].at, t0 + I + secs(50));
    }
}
