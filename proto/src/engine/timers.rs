//! The timer heap and what happens when a transaction's timer fires (retransmissions, timer
//! C, timeouts).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Instant;

use tracing::debug;

use super::hunt::AfterFailure;
use super::transactions::{
    ClientEntry, ClientKey, ClientTxn, ServerKey, ServerTxn, TimerTarget, TxKind,
};
use super::transmit::Transmit;
use super::Engine;
use crate::sip::message::Method;
use crate::sip::transaction::TimerAction;

/// Deadlines of transactions, earliest first. A transaction re-armed for a new deadline gets
/// a new entry and its old one is cancelled: the target (the transaction's key) is dropped at
/// once, and the bare deadline left in the heap is skipped when it comes, or swept by
/// [`TimerHeap::compact`] (see `armed` in the entries).
#[derive(Debug, Default)]
pub(super) struct TimerHeap {
    pub(super) heap: BinaryHeap<Reverse<(Instant, u64)>>,
    pub(super) targets: HashMap<u64, TimerTarget>,
    next: u64,
}

impl TimerHeap {
    /// Gives back the room a burst left (see [`crate::compact`]).
    pub(super) fn compact(&mut self) {
        use crate::compact::Compact as _;
        if self.heap.len() > 2 * self.targets.len() + 16 {
            // Mostly cancelled deadlines (a timer C of 180 s outlives its call's set-up).
            let targets = &self.targets;
            self.heap
                .retain(|Reverse((_, id))| targets.contains_key(id));
        }
        self.heap.compact();
        self.targets.compact();
    }

    /// Arms a deadline for `target`; returns its id (to cancel it).
    pub(super) fn push(&mut self, at: Instant, target: TimerTarget) -> u64 {
        let id = self.next;
        self.next += 1;
        self.targets.insert(id, target);
        self.heap.push(Reverse((at, id)));
        id
    }

    /// Cancels the deadline `id` (nothing if it fired already).
    pub(super) fn cancel(&mut self, id: u64) {
        self.targets.remove(&id);
    }

    /// The earliest deadline.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((t, _))| *t)
    }

    /// The next target whose deadline is at or before `now`, removed.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<TimerTarget> {
        while let Some(Reverse((at, id))) = self.heap.peek().copied() {
            if at > now {
                return None;
            }
            self.heap.pop();
            if let Some(target) = self.targets.remove(&id) {
                return Some(target);
            }
        }
        None
    }
}

/// The deadline a transaction has in the heap, and its id there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Armed {
    pub(super) at: Instant,
    pub(super) id: u64,
}

/// Arms `next` (a transaction's earliest deadline) if it is not the one `armed` already,
/// cancelling that one: returns the new arming, or `None` if nothing changed.
fn rearm(
    timers: &mut TimerHeap,
    next: Option<Instant>,
    armed: Option<Armed>,
    target: impl FnOnce() -> TimerTarget,
) -> Option<Armed> {
    let at = next?;
    if armed.is_some_and(|a| a.at == at) {
        return None;
    }
    if let Some(old) = armed {
        timers.cancel(old.id);
    }
    Some(Armed {
        at,
        id: timers.push(at, target()),
    })
}

/// Arms `at` for a call's `target` in place of `armed` (`None`: cancels it): the arming to
/// keep.
pub(super) fn rearm_call(
    timers: &mut TimerHeap,
    at: Option<Instant>,
    armed: Option<Armed>,
    target: TimerTarget,
) -> Option<Armed> {
    match at {
        None => {
            if let Some(old) = armed {
                timers.cancel(old.id);
            }
            None
        }
        Some(_) => rearm(timers, at, armed, || target).or(armed),
    }
}

impl Engine {
    pub(super) fn arm_server(&mut self, key: &ServerKey) {
        let Some(entry) = self.server.get_mut(key) else {
            return;
        };
        if let Some(armed) = rearm(
            &mut self.timers,
            entry.txn.poll_timeout(),
            entry.armed,
            || TimerTarget::Server(key.clone()),
        ) {
            entry.armed = Some(armed);
        }
    }

    pub(super) fn arm_client(&mut self, key: &ClientKey) {
        let Some(entry) = self.client.get_mut(key) else {
            return;
        };
        if let Some(armed) = rearm(&mut self.timers, entry.next_deadline(), entry.armed, || {
            TimerTarget::Client(key.clone())
        }) {
            entry.armed = Some(armed);
        }
    }

    pub(super) fn server_timeout(&mut self, now: Instant, key: ServerKey) {
        self.trace_server(&key);
        let Some(entry) = self.server.get_mut(&key) else {
            return;
        };
        if entry.armed.is_some_and(|a| a.at <= now) {
            entry.armed = None;
        }
        let (action, acked) = match &mut entry.txn {
            ServerTxn::Invite(t) => (t.handle_timeout(now), t.acked()),
            ServerTxn::NonInvite(t) => (t.handle_timeout(now), true),
        };
        match action {
            TimerAction::None => self.arm_server(&key),
            TimerAction::Retransmit => {
                if let Some(last) = entry.last_response.clone() {
                    self.stats.retransmissions_sent += 1;
                    self.out.push_back(entry.reply.transmit(last));
                }
                self.arm_server(&key);
            }
            TimerAction::TimedOut | TimerAction::Terminated => {
                let call = entry.call;
                self.server.remove(&key);
                self.forget_register(&key);
                // A 2xx that the caller never ACKed (timer L): end the call on both legs.
                if key.kind == TxKind::Invite && !acked {
                    if let Some(id) = call {
                        let confirmed = self.calls.get(&id).is_some_and(|c| c.awaits_ack_on(&key));
                        if confirmed {
                            debug!("caller never ACKed the 2xx: hanging up");
                            self.trace_note(
                                "the caller never ACKed the 2xx (timer H): BYE on both legs",
                            );
                            self.tear_down(now, id, sbc_accounting::EndedBy::Sbc);
                        }
                    }
                }
            }
        }
    }

    pub(super) fn client_timeout(&mut self, now: Instant, key: ClientKey) {
        self.trace_client(&key);
        let Some(entry) = self.client.get_mut(&key) else {
            return;
        };
        if entry.armed.is_some_and(|a| a.at <= now) {
            entry.armed = None;
        }
        if entry.attempt_expires.is_some_and(|at| at <= now) {
            // Not even a 100 from the agent: the attempt is abandoned (nothing to CANCEL
            // before a provisional response, RFC 3261 §9.1) and the next candidate tried.
            if let Some(entry) = self.client.remove(&key) {
                if let Some(armed) = entry.armed {
                    self.timers.cancel(armed.id);
                }
                self.stats.attempts_expired += 1;
                debug!(method = %entry.method, "no response within the attempt expiry");
                if entry.method == Method::Invite
                    && entry.purpose == super::transactions::Purpose::Relay
                {
                    if let Some(call) = entry.call.and_then(|id| self.calls.get(&id)) {
                        let leg = call.dialog.callee.clone();
                        self.remember_abandoned(now, leg);
                    }
                }
                self.client_timed_out(now, &key, entry, true);
            }
            return;
        }
        // Timer C: the callee rang too long.
        let timer_c_fired = match &mut entry.txn {
            ClientTxn::Invite(_, progress) if progress.timer_c.is_some_and(|c| c <= now) => {
                progress.timer_c = None;
                true
            }
            _ => false,
        };
        if timer_c_fired {
            let (server, call) = (entry.server.clone(), entry.call);
            self.cancel_client(now, &key);
            if let Some(id) = call {
                if let Some(c) = self.calls.get_mut(&id) {
                    c.cancel();
                }
            }
            if let Some(skey) = server {
                self.stats.timeouts += 1;
                self.stats.calls_failed += 1;
                self.trace_note("answered 408: rang longer than timer C (CANCEL sent)");
                self.respond_local(now, &skey, 408);
            }
            self.arm_client(&key);
            return;
        }
        let action = match &mut entry.txn {
            ClientTxn::Invite(t, _) => t.handle_timeout(now),
            ClientTxn::NonInvite(t) => t.handle_timeout(now),
        };
        match action {
            TimerAction::None => self.arm_client(&key),
            TimerAction::Retransmit => {
                self.stats.retransmissions_sent += 1;
                let tx = Transmit {
                    payload: entry.request.clone(),
                    ..entry.to.clone()
                };
                self.out.push_back(tx);
                self.arm_client(&key);
            }
            TimerAction::Terminated => {
                self.client.remove(&key);
            }
            TimerAction::TimedOut => {
                if let Some(entry) = self.client.remove(&key) {
                    debug!(method = %entry.method, "next hop did not answer");
                    self.client_timed_out(now, &key, entry, false);
                }
            }
        }
    }

    /// Our request of client transaction `key` got no final response: timer B or F fired, or
    /// (`expired`) no response at all came within the agent's attempt expiry. A new request
    /// goes to its next candidate; otherwise the caller gets 408 (or the hunt's best
    /// failure) and a call in set-up ends.
    fn client_timed_out(
        &mut self,
        now: Instant,
        key: &ClientKey,
        entry: ClientEntry,
        expired: bool,
    ) {
        if matches!(
            entry.purpose,
            super::transactions::Purpose::TransferInvite
                | super::transactions::Purpose::TransferReoffer
        ) {
            if let Some(agent) = &entry.agent {
                agent.timed_out(now);
            }
            self.transfer_timed_out(now, key, entry.call);
            return;
        }
        if entry.purpose == super::transactions::Purpose::RefreshOffer {
            let timeout = super::build::empty_message();
            self.refresh_offer_settled(now, key, entry.call, entry.side, 408, &timeout);
            return;
        }
        if entry.purpose == super::transactions::Purpose::SessionRefresh {
            if let Some(id) = entry.call {
                self.session_refresh_answered(now, id, entry.side, &entry.method, 408);
            }
            return;
        }
        let initial = entry
            .call
            .and_then(|id| self.calls.get(&id))
            .is_some_and(|c| c.is_initial_invite(key));
        if let Some(agent) = &entry.agent {
            agent.timed_out(now);
        }
        let mut best = None;
        if let Some(skey) = &entry.server {
            if initial || entry.call.is_none() {
                match self.attempt_failed(now, skey, entry.call, 408) {
                    AfterFailure::Rerouted => return,
                    AfterFailure::Answer(code) => best = Some(code),
                    AfterFailure::Relay => {}
                }
            }
        }
        if let Some(id) = entry.call {
            self.offer_settled(id, key, false);
            let cancelled = self.calls.get(&id).is_some_and(|c| c.is_cancelled());
            if initial {
                if !cancelled {
                    self.stats.calls_failed += 1;
                }
                self.remove_call(id);
            } else if entry.method == Method::Bye {
                self.remove_call(id);
            }
        }
        if let Some(skey) = entry.server {
            self.stats.timeouts += 1;
            let code = match best {
                Some(code) => {
                    self.trace_note_with(|| {
                        format!("answered {code}: every candidate failed (best response)")
                    });
                    code
                }
                None if expired => {
                    self.trace_note(
                        "answered 408: no response within the session-agent's attempt expiry",
                    );
                    408
                }
                None => {
                    self.trace_note("answered 408: the next hop did not answer (timer B or F)");
                    408
                }
            };
            self.respond_local(now, &skey, code);
        }
    }
}
