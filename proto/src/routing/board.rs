//! The node's live view of its session-agents, shared by every engine: each agent's health
//! and admission ([`AgentHealth`]) and each group's position ([`GroupCursor`]), behind one
//! lock held for microseconds per new session.
//!
//! Engines pass the time in; nothing here reads a clock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::agent::{AgentHealth, AgentPolicy, AgentSnapshot, AgentState, Transition};
use super::group::{self, AgentLoad, GroupCursor, Strategy};

/// Every agent's health and every group's cursor, indexed as the router's agents and groups.
#[derive(Debug, Default)]
pub struct AgentBoard {
    state: Mutex<BoardState>,
    /// Whether this node pings (the active of a pair, or a single node): a standby never
    /// pings, so it never marks an agent down by itself (kamailio#473).
    pinging: AtomicBool,
}

#[derive(Debug, Default)]
struct BoardState {
    agents: Vec<AgentHealth>,
    cursors: Vec<GroupCursor>,
}

/// Sessions the SBC sends to an agent are outbound ones (`max-outbound-sessions`).
const OUTBOUND: bool = true;

impl AgentBoard {
    /// A board for agents of `policies` (all in service) and `groups` groups.
    #[must_use]
    pub fn new(policies: Vec<AgentPolicy>, groups: usize, now: Instant) -> Self {
        Self {
            state: Mutex::new(BoardState {
                agents: policies
                    .into_iter()
                    .map(|p| AgentHealth::new(p, now))
                    .collect(),
                cursors: vec![GroupCursor::new(); groups],
            }),
            pinging: AtomicBool::new(false),
        }
    }

    /// Starts or stops the pings (the node became active, or standby). Started again, every
    /// agent whose ping came due meanwhile is pinged at once: a new active corrects the
    /// states it starts from within one ping interval.
    pub fn set_pinging(&self, on: bool) {
        self.pinging.store(on, Ordering::Release);
    }

    /// Whether this node pings.
    #[must_use]
    pub fn is_pinging(&self) -> bool {
        self.pinging.load(Ordering::Acquire)
    }

    /// The agents to ping now (each then has its ping outstanding until
    /// [`AgentBoard::ping_answered`] or its ping timeout); none while not pinging.
    #[must_use]
    pub fn take_due_pings(&self, now: Instant) -> Vec<usize> {
        if !self.is_pinging() {
            return Vec::new();
        }
        let mut state = self.lock();
        state
            .agents
            .iter_mut()
            .enumerate()
            .filter_map(|(i, h)| h.poll_ping(now).then_some(i))
            .collect()
    }

    /// `agent` answered its ping with `code`.
    pub fn ping_answered(&self, agent: usize, now: Instant, code: u16) {
        if let Some(h) = self.lock().agents.get_mut(agent) {
            h.on_ping_answer(now, code);
        }
    }

    /// A request to `agent` could not be sent (a refused connect or TLS handshake): out of
    /// service at once.
    pub fn transport_failed(&self, agent: usize, now: Instant) {
        if let Some(h) = self.lock().agents.get_mut(agent) {
            h.on_transport_failure(now);
        }
    }

    /// `agent` is named by DNS and has no address yet: out of service, not pinged.
    pub fn unresolved(&self, agent: usize, now: Instant) {
        if let Some(h) = self.lock().agents.get_mut(agent) {
            h.unresolved(now);
        }
    }

    /// `agent`'s DNS name resolved: in service if it waited for that, pinged at once.
    pub fn resolved(&self, agent: usize, now: Instant) {
        if let Some(h) = self.lock().agents.get_mut(agent) {
            h.resolved(now);
        }
    }

    /// Adopts `state` for `agent`, replicated from the previous active after a takeover
    /// ([`AgentHealth::restore_state`]: no transition, pings correct it within an interval).
    pub fn restore(&self, agent: usize, state: AgentState, now: Instant) {
        if let Some(h) = self.lock().agents.get_mut(agent) {
            h.restore_state(state, now);
        }
    }

    /// Forgets `agent`'s state changes not yet polled.
    pub fn drop_transitions(&self, agent: usize) {
        if let Some(h) = self.lock().agents.get_mut(agent) {
            while h.poll_transition().is_some() {}
        }
    }

    fn lock(&self) -> MutexGuard<'_, BoardState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The agents of group `group` (its `dests`, by router index) in the order its `strategy`
    /// tries them for a new session: those able to take one first, then the others (which
    /// admission will refuse, so that a table whose agents are all out is told from no
    /// route at all).
    #[must_use]
    pub fn order_group(
        &self,
        group: usize,
        strategy: Strategy,
        dests: &[usize],
        now: Instant,
    ) -> Vec<usize> {
        let mut state = self.lock();
        let loads: Vec<AgentLoad> = dests
            .iter()
            .map(|a| {
                state.agents.get(*a).map_or(
                    AgentLoad {
                        in_service: false,
                        sessions: 0,
                        max_sessions: 0,
                        burst_ok: false,
                    },
                    |h| h.load(now, OUTBOUND),
                )
            })
            .collect();
        let picked = match state.cursors.get_mut(group) {
            Some(cursor) => group::order(strategy, &loads, cursor),
            None => group::order(strategy, &loads, &mut GroupCursor::new()),
        };
        let mut order: Vec<usize> = picked
            .iter()
            .filter_map(|i| dests.get(*i))
            .copied()
            .collect();
        for (i, agent) in dests.iter().enumerate() {
            if !picked.contains(&i) {
                order.push(*agent);
            }
        }
        order
    }

    /// Takes a new session for `agent` if it is in service and within its limits (counted
    /// from now on, until [`AgentBoard::session_ended`]).
    pub fn admit(&self, agent: usize, now: Instant) -> bool {
        let mut state = self.lock();
        let Some(health) = state.agents.get_mut(agent) else {
            return false;
        };
        if health.admit(now, OUTBOUND).is_ok() {
            health.session_started(OUTBOUND);
            true
        } else {
            false
        }
    }

    /// Whether `agent` is in service (an out-of-dialog request, which is no session, only
    /// needs that).
    #[must_use]
    pub fn in_service(&self, agent: usize) -> bool {
        self.lock()
            .agents
            .get(agent)
            .is_some_and(|h| h.state().is_in_service())
    }

    /// A session of `agent` ended (or its attempt failed).
    pub fn session_ended(&self, agent: usize) {
        if let Some(h) = self.lock().agents.get_mut(agent) {
            h.session_ended(OUTBOUND);
        }
    }

    /// `agent` answered a new request with a final `code`.
    pub fn answered(&self, agent: usize, now: Instant, code: u16) {
        if let Some(h) = self.lock().agents.get_mut(agent) {
            h.on_request_answered(now, code);
        }
    }

    /// A new request to `agent` got no answer (its attempt expiry, timer B or F).
    pub fn timed_out(&self, agent: usize, now: Instant) {
        if let Some(h) = self.lock().agents.get_mut(agent) {
            h.on_request_timeout(now);
        }
    }

    /// Runs every agent's deadlines due at `now` (`time-to-resume`); returns the state
    /// changes since the last call, by agent.
    pub fn poll_transitions(&self, now: Instant) -> Vec<(usize, Transition)> {
        let mut state = self.lock();
        let mut out = Vec::new();
        for (i, h) in state.agents.iter_mut().enumerate() {
            h.on_timeout(now);
            while let Some(t) = h.poll_transition() {
                out.push((i, t));
            }
        }
        out
    }

    /// Every agent's figures, by router index.
    #[must_use]
    pub fn snapshots(&self, now: Instant) -> Vec<AgentSnapshot> {
        self.lock().agents.iter().map(|h| h.snapshot(now)).collect()
    }

    /// Every agent's state, by router index.
    #[must_use]
    pub fn states(&self) -> Vec<AgentState> {
        self.lock().agents.iter().map(AgentHealth::state).collect()
    }
}

/// One agent of a board, as a transaction or a call remembers it (the board outlives a
/// reload for the calls that still use it).
#[derive(Debug, Clone)]
pub struct AgentHandle {
    /// The board.
    pub board: Arc<AgentBoard>,
    /// The agent's index on it.
    pub index: usize,
}

impl AgentHandle {
    /// Takes a new session on the agent (see [`AgentBoard::admit`]).
    #[must_use]
    pub fn admit(&self, now: Instant) -> Option<AgentSession> {
        self.board
            .admit(self.index, now)
            .then(|| AgentSession(self.clone()))
    }

    /// The agent answered a new request with a final `code`.
    pub fn answered(&self, now: Instant, code: u16) {
        self.board.answered(self.index, now, code);
    }

    /// A new request to the agent got no answer.
    pub fn timed_out(&self, now: Instant) {
        self.board.timed_out(self.index, now);
    }

    /// The agent answered its ping with `code`.
    pub fn ping_answered(&self, now: Instant, code: u16) {
        self.board.ping_answered(self.index, now, code);
    }

    /// A request to the agent could not be sent.
    pub fn transport_failed(&self, now: Instant) {
        self.board.transport_failed(self.index, now);
    }
}

/// A session counted on its agent until this is dropped (the call ended, or its attempt
/// failed): counting cannot leak whichever way a call goes.
#[derive(Debug)]
pub struct AgentSession(AgentHandle);

impl Drop for AgentSession {
    fn drop(&mut self) {
        self.0.board.session_ended(self.0.index);
    }
}
