//! Routing a new request and hunting: the router's plan for it, and, when an attempt fails
//! (503, a timeout, a transport failure, an agent's `out-service-response-codes`), the next
//! candidate tried within the caller's transaction with a fresh leg, so that the caller sees
//! one call; when every candidate failed, the best response (RFC 3261 §16.7).
//!
//! ```text
//!  caller ─INVITE─▶ plan [a, b, c]
//!                     a ─INVITE─▶ 503 ──▶ b ─INVITE─▶ (nothing within the attempt expiry)
//!                                          ──▶ c ─INVITE─▶ 180, 200 ──▶ relayed to the caller
//! ```
//! A hunt is kept only for a request with more than one candidate (one keyed by its server
//! transaction, so bounded as transactions are); it holds the request as it was first relayed
//! (its offer anchored), to be sent again.

use std::sync::Arc;
use std::time::Instant;

use tracing::debug;

use super::transactions::{ClientKey, ServerKey};
use super::transmit::Inbound;
use super::Engine;
use crate::routing::board::{AgentHandle, AgentSession};
use crate::routing::local_policy::RouteQuery;
use crate::routing::router::{best_failure, Attempt, RouteAgent};
use crate::sip::dialog::{LegTransport, Side};
use crate::sip::message::{name_addr_uri, HeaderName, Method, SipMessage};
use crate::sip::uri::UriParts;

/// The candidates left for a new request, and what the tried ones answered.
#[derive(Debug)]
pub(super) struct Hunt {
    /// The request as relayed to the first candidate (its offer anchored).
    orig: SipMessage,
    /// Its Max-Forwards as relayed.
    mf: u32,
    /// Every candidate, in order.
    plan: Vec<Attempt>,
    /// The index in `plan` of the attempt in flight.
    current: usize,
    /// The final responses of the failed attempts (a timeout as 408).
    failures: Vec<u16>,
}

/// What the hunt does with a failed attempt.
pub(super) enum AfterFailure {
    /// The request went to another candidate: the failure is not relayed.
    Rerouted,
    /// No candidate is left: the caller gets this code (the best failure), not the one
    /// received.
    Answer(u16),
    /// The failure ends the hunt and goes to the caller as received.
    Relay,
}

/// Minutes since midnight and the weekday (0 = Sunday) of a Unix time, UTC.
fn minute_and_weekday(unix_secs: u64) -> (u16, u8) {
    let minute = u16::try_from((unix_secs % 86_400) / 60).unwrap_or(0);
    // 1970-01-01 was a Thursday (4).
    let weekday = u8::try_from((unix_secs / 86_400 + 4) % 7).unwrap_or(0);
    (minute, weekday)
}

impl Engine {
    /// The agents a new request is offered to, in order (empty: no route).
    pub(super) fn plan_route(
        &self,
        now: Instant,
        inbound: &Inbound,
        msg: &SipMessage,
    ) -> Vec<Attempt> {
        let router = &self.cfg.router;
        let to_user = msg
            .request_uri()
            .and_then(UriParts::parse)
            .and_then(|p| p.user)
            .unwrap_or("");
        let from_user = msg
            .header(&HeaderName::From)
            .map(name_addr_uri)
            .and_then(UriParts::parse)
            .and_then(|p| p.user)
            .unwrap_or("");
        let (minute, weekday) = minute_and_weekday(self.wall_clock.unix_secs_at(now));
        let source_realm = self
            .cfg
            .interfaces
            .get(inbound.interface)
            .map_or("", |i| i.realm.as_str());
        let query = RouteQuery {
            from_user,
            to_user,
            source_realm,
            minute,
            weekday,
        };
        router.plan(&query, now)
    }

    /// Admits `attempt` on its agent: an INVITE takes a session (counted until the call or
    /// the attempt ends), another request needs the agent in service. `None`: refused (out
    /// of service, or at `max-sessions`, `max-outbound-sessions` or `max-burst-rate`).
    pub(super) fn admit_attempt(
        &mut self,
        now: Instant,
        attempt: &Attempt,
        invite: bool,
    ) -> Option<Option<AgentSession>> {
        let handle = self.cfg.router.handle(attempt.agent);
        let admitted = if invite {
            handle.admit(now).map(Some)
        } else {
            handle.board.in_service(attempt.agent).then_some(None)
        };
        if admitted.is_none() {
            self.stats.agent_refused += 1;
        }
        admitted
    }

    /// Keeps the candidates after the first of a request relayed on server transaction
    /// `key`, when there are any.
    pub(super) fn start_hunt(
        &mut self,
        key: &ServerKey,
        plan: Vec<Attempt>,
        orig: &SipMessage,
        mf: u32,
    ) {
        if plan.len() > 1 {
            self.hunts.insert(
                key.clone(),
                Hunt {
                    orig: orig.clone(),
                    mf,
                    plan,
                    current: 0,
                    failures: Vec::new(),
                },
            );
        }
    }

    /// Forgets the hunt of server transaction `key` (its request got its final answer).
    pub(super) fn end_hunt(&mut self, key: &ServerKey) {
        self.hunts.remove(key);
    }

    /// The attempt on server transaction `skey` failed with `code` (a timeout: 408): sends
    /// the request to the next candidate that may take it, or says what the caller gets.
    /// `call` is the call of an INVITE (a cancelled call does not hunt).
    pub(super) fn attempt_failed(
        &mut self,
        now: Instant,
        skey: &ServerKey,
        call: Option<u64>,
        code: u16,
    ) -> AfterFailure {
        if call.is_some_and(|id| self.calls.get(&id).is_none_or(|c| c.is_cancelled())) {
            self.end_hunt(skey);
            return AfterFailure::Relay;
        }
        let Some(mut hunt) = self.hunts.remove(skey) else {
            // One candidate: a 503 from the next hop is not relayed as 503 (RFC 3261 §16.7).
            return if code == 503 {
                AfterFailure::Answer(best_failure(&[code]))
            } else {
                AfterFailure::Relay
            };
        };
        let router = Arc::clone(&self.cfg.router);
        let Some(current) = hunt.plan.get(hunt.current).copied() else {
            return AfterFailure::Relay;
        };
        if !router.reroutes(&current, code) {
            return AfterFailure::Relay;
        }
        hunt.failures.push(code);
        if current.terminate {
            return AfterFailure::Answer(best_failure(&hunt.failures));
        }
        if let Some(call) = call.and_then(|id| self.calls.get_mut(&id)) {
            // The failed attempt's session ends.
            call.agent_session = None;
        }
        while hunt.current + 1 < hunt.plan.len() {
            hunt.current += 1;
            let attempt = hunt.plan[hunt.current];
            let Some(agent) = router.agent(attempt.agent) else {
                continue;
            };
            // A call holds a session on its agent; a subscription does not.
            let is_call = call
                .and_then(|id| self.calls.get(&id))
                .is_some_and(|c| c.dialog.subscription.is_none());
            let Some(session) = self.admit_attempt(now, &attempt, is_call) else {
                continue;
            };
            self.stats.rerouted += 1;
            debug!(next_hop = %agent.hop.name, code, "attempt failed: next candidate");
            self.trace_note_with(|| {
                format!(
                    "attempt failed with {code}: re-routed to session-agent {}",
                    agent.hop.name
                )
            });
            let handle = router.handle(attempt.agent);
            let sent = match call {
                Some(id) => {
                    let sent = self.reroute_call(now, id, skey, agent, handle, &hunt.orig, hunt.mf);
                    if let Some(call) = self.calls.get_mut(&id) {
                        call.agent_session = session;
                    }
                    sent
                }
                None => {
                    self.reroute_exchange(now, skey, agent, handle, &hunt.orig, hunt.mf);
                    true
                }
            };
            if sent {
                self.hunts.insert(skey.clone(), hunt);
                return AfterFailure::Rerouted;
            }
        }
        self.stats.hunts_exhausted += 1;
        AfterFailure::Answer(best_failure(&hunt.failures))
    }

    /// Sends call `id`'s INVITE (or subscription `id`'s SUBSCRIBE or REFER) to `agent` on a
    /// fresh callee leg (its Call-ID, tag and CSeq
    /// new); returns false when the call is gone.
    #[allow(clippy::too_many_arguments)] // the call, the request and where it goes
    fn reroute_call(
        &mut self,
        now: Instant,
        id: u64,
        skey: &ServerKey,
        agent: &RouteAgent,
        handle: AgentHandle,
        orig: &SipMessage,
        mf: u32,
    ) -> bool {
        let out = self.cfg.router.outbound_translation(agent);
        let sent = self.translate_outbound(out.as_deref(), orig);
        let orig = &*sent;
        // An INVITE, or a subscription's SUBSCRIBE or REFER.
        let method = orig.method().cloned().unwrap_or(Method::Invite);
        let invite_cseq = u32::from(method == Method::Invite);
        let mut callee = self.outbound_leg(orig, agent, invite_cseq);
        if self.over_udp_length(&agent.hop, &callee, &method, orig, mf) {
            self.stats.udp_to_tcp += 1;
            callee.transport = LegTransport::Tcp;
        }
        let Some(call) = self.calls.get_mut(&id) else {
            return false;
        };
        self.dialogs.remove_call(&call.dialog);
        call.dialog.callee = callee;
        self.dialogs.insert_call(&call.dialog);
        self.trace_call(id);
        self.account_reroute(id, &agent.hop.name);
        let ckey = self.send_on_leg(
            now,
            id,
            Side::Callee,
            &method,
            1,
            orig,
            mf,
            Some(skey.clone()),
        );
        if let Some(call) = self.calls.get_mut(&id) {
            call.invite_sent(ckey.clone());
        }
        if let Some(ckey) = &ckey {
            self.start_attempt(now, ckey, agent, handle);
        }
        self.replicate(id);
        true
    }

    /// Sends an out-of-dialog request again, to `agent`, as a new exchange.
    fn reroute_exchange(
        &mut self,
        now: Instant,
        skey: &ServerKey,
        agent: &RouteAgent,
        handle: AgentHandle,
        orig: &SipMessage,
        mf: u32,
    ) {
        let method = orig.method().cloned().unwrap_or(Method::Options);
        let out = self.cfg.router.outbound_translation(agent);
        let sent = self.translate_outbound(out.as_deref(), orig);
        let orig = &*sent;
        let mut leg = self.outbound_leg(orig, agent, 0);
        if self.over_udp_length(&agent.hop, &leg, &method, orig, mf) {
            self.stats.udp_to_tcp += 1;
            leg.transport = LegTransport::Tcp;
        }
        let (orig, cseq) = self.register_view(skey, &mut leg, orig.clone());
        self.trace_exchange(orig.call_id().unwrap_or_default(), &leg.call_id);
        let ckey = self.send_request(
            now,
            &leg,
            None,
            Side::Callee,
            &method,
            cseq,
            &orig,
            mf,
            Some(skey.clone()),
        );
        self.start_attempt(now, &ckey, agent, handle);
    }

    /// Marks client transaction `ckey` as a new request's attempt on `agent`: it has until
    /// the agent's attempt expiry to get a first response, and its outcome feeds the agent's
    /// health (`handle`).
    pub(super) fn start_attempt(
        &mut self,
        now: Instant,
        ckey: &ClientKey,
        agent: &RouteAgent,
        handle: AgentHandle,
    ) {
        if let Some(entry) = self.client.get_mut(ckey) {
            entry.attempt_expires = Some(now + agent.attempt_expiry);
            entry.agent = Some(handle);
        }
        self.arm_client(ckey);
    }
}

#[cfg(test)]
mod tests {
    use super::minute_and_weekday;

    #[test]
    fn unix_times_give_minutes_and_weekdays() {
        assert_eq!(minute_and_weekday(0), (0, 4)); // Thursday 1970-01-01 00:00
                                                   // 2026-12-02 16:30 UTC was a Wednesday.
        assert_eq!(minute_and_weekday(1_796_229_000), (16 * 60 + 30, 3));
    }
}
