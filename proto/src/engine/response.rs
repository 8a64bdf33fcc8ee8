//! The response path: a response received, matched to our client transaction and relayed to
//! the paired server transaction; responses we make ourselves.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;

use tracing::{debug, trace};

use super::build::{build_ack, contact, copy_end_to_end, is_sips};
use super::call::route_set_of_answer;
use super::hunt::AfterFailure;
use super::transactions::{ClientKey, ClientTxn, Purpose, ServerKey, ServerTxn};
use super::transmit::{Inbound, Transmit};
use super::{Engine, MAX_VERIFIED_SOURCES};
use crate::sip::dialog::{DialogState, Side};
use crate::sip::message::{reason_for, HeaderName, Method, SipMessage, TRANSPORT_FAILURE_WARNING};
use crate::sip::transaction::{ClientInviteState, ClientResponse};

impl Engine {
    pub(super) fn on_response(
        &mut self,
        now: Instant,
        inbound: &Inbound,
        code: u16,
        msg: SipMessage,
    ) {
        self.stats.responses_in += 1;
        if let Err(refusal) = crate::sip::strict::check_headers(&msg, self.cfg.max_header_size) {
            // A response cannot be answered: dropped (its sender retransmits or times out).
            self.stats.malformed_dropped += 1;
            self.trace_note_with(|| format!("dropped: {}", refusal.reason));
            debug!(reason = %refusal.reason, "malformed response dropped");
            return;
        }
        let (Some(branch), Some(cseq)) = (msg.top_via_branch(), msg.cseq()) else {
            self.stats.malformed_dropped += 1;
            self.trace_note("dropped: a response without a Via branch or CSeq");
            return;
        };
        let ckey = ClientKey {
            branch: branch.to_owned(),
            cancel: cseq.method == Method::Cancel,
        };
        self.trace_client(&ckey);
        let Some(entry) = self.client.get_mut(&ckey) else {
            self.stray_response(now, code, &msg);
            return;
        };
        let sent = &entry.to;
        if inbound.interface != sent.interface
            || inbound.transport != sent.transport
            || !self
                .cfg
                .source_matches(sent.transport, inbound.source, sent.dest)
        {
            // Only the next hop the request went to may answer it.
            self.stats.response_source_mismatch += 1;
            debug!(source = %inbound.source, expected = %sent.dest, code, "response from elsewhere dropped");
            self.trace_note("dropped: a response not from the next hop its request went to");
            return;
        }
        if let ClientTxn::Invite(t, _) = &entry.txn {
            if t.state() == ClientInviteState::Accepted && (200..300).contains(&code) {
                // A retransmitted 2xx (RFC 6026 Accepted state): answer it from dialog state.
                let (call, side) = (entry.call, entry.side);
                if let Some(id) = call {
                    self.retransmitted_2xx(id, side);
                }
                return;
            }
        }
        entry.attempt_expires = None;
        let mut cancel_due = false;
        let action = match &mut entry.txn {
            ClientTxn::Invite(t, progress) => {
                if (100..200).contains(&code) {
                    cancel_due = progress.on_provisional();
                }
                if code >= 200 {
                    progress.timer_c = None;
                } else if code > 100 && progress.timer_c.is_some() {
                    progress.timer_c = Some(now + self.cfg.timer_c);
                }
                t.handle_response(now, code)
            }
            ClientTxn::NonInvite(t) => t.handle_response(now, code),
        };
        match action {
            ClientResponse::Absorb => {}
            ClientResponse::ResendAck => {
                let ack = match &entry.txn {
                    ClientTxn::Invite(_, progress) => progress.ack.clone(),
                    ClientTxn::NonInvite(_) => None,
                };
                if let Some(ack) = ack {
                    self.out.push_back(Transmit {
                        payload: ack,
                        ..entry.to.clone()
                    });
                }
            }
            ClientResponse::PassUp | ClientResponse::PassUpAndAck => {
                if action == ClientResponse::PassUpAndAck {
                    let ack = build_ack(&entry.ids, &msg);
                    if let ClientTxn::Invite(_, progress) = &mut entry.txn {
                        progress.ack = Some(ack.clone());
                    }
                    self.out.push_back(Transmit {
                        payload: ack,
                        ..entry.to.clone()
                    });
                }
                self.arm_client(&ckey);
                if cancel_due {
                    self.cancel_client(now, &ckey);
                }
                if !ckey.cancel {
                    self.response_to_user(now, &ckey, code, &msg);
                }
            }
        }
        self.arm_client(&ckey);
    }

    /// A response that matched no client transaction: a retransmitted 2xx after our INVITE
    /// transaction ended, or junk.
    pub(super) fn stray_response(&mut self, now: Instant, code: u16, msg: &SipMessage) {
        let is_invite_2xx =
            (200..300).contains(&code) && msg.cseq().is_some_and(|c| c.method == Method::Invite);
        if is_invite_2xx {
            let found = match (msg.call_id(), msg.from_tag()) {
                (Some(c), Some(t)) => self.find_dialog(c, t),
                _ => None,
            };
            if let Some((id, side)) = found {
                self.trace_call(id);
                self.retransmitted_2xx(id, side);
                return;
            }
            if let Some(leg) = self.take_abandoned(now, msg) {
                self.release_abandoned_answer(now, leg, msg);
                return;
            }
        }
        self.stats.stray_responses += 1;
        self.trace_note("dropped: a response to no transaction of ours");
        trace!(code, "stray response dropped");
    }

    /// A 2xx to an INVITE came again from leg `side`: re-send the ACK we sent on that leg, or,
    /// while the caller has not ACKed yet, the 2xx we relayed to the caller.
    pub(super) fn retransmitted_2xx(&mut self, id: u64, side: Side) {
        let Some(call) = self.calls.get(&id) else {
            return;
        };
        let resend = call
            .ack(side)
            .or_else(|| (side == Side::Callee).then(|| call.caller_2xx()).flatten())
            .cloned();
        if let Some(tx) = resend {
            self.out.push_back(tx);
        }
    }

    /// The transaction user's handling of a response to one of our requests.
    pub(super) fn response_to_user(
        &mut self,
        now: Instant,
        ckey: &ClientKey,
        code: u16,
        msg: &SipMessage,
    ) {
        let Some(entry) = self.client.get(ckey) else {
            return;
        };
        let (method, server, call_id, side) = (
            entry.method.clone(),
            entry.server.clone(),
            entry.call,
            entry.side,
        );
        if code >= 200 {
            if let Some(agent) = &entry.agent {
                if code == 503 && is_transport_failure(msg) {
                    agent.transport_failed(now);
                } else if entry.purpose == Purpose::Ping {
                    agent.ping_answered(now, code);
                } else {
                    agent.answered(now, code);
                }
            }
        }
        if matches!(
            entry.purpose,
            Purpose::TransferInvite | Purpose::TransferReoffer
        ) {
            // The SBC's own transfer: its answers end here.
            self.transfer_answered(now, ckey, call_id, code, msg);
            return;
        }
        if entry.purpose == Purpose::RefreshOffer {
            self.refresh_offer_settled(now, ckey, call_id, side, code, msg);
            return;
        }
        if entry.purpose == Purpose::SessionRefresh {
            // The SBC's own refresh: its answer ends here (a re-INVITE's 2xx offers the
            // peer's session, which goes to the other leg).
            if let (Some(id), true) = (call_id, code >= 200) {
                if method == Method::Invite && (200..300).contains(&code) {
                    self.refresh_offer_answered(now, id, side, msg);
                } else if method == Method::Invite {
                    self.bounce_over(now, id, side.other(), false);
                }
                self.session_refresh_answered(now, id, side, &method, code);
            }
            return;
        }
        let subscription = call_id
            .and_then(|id| self.calls.get(&id))
            .is_some_and(|c| c.dialog.subscription.is_some());
        let initial = call_id
            .and_then(|id| self.calls.get(&id))
            .is_some_and(|c| c.is_initial_invite(ckey));
        let initial_invite = initial && !subscription;
        let initial_subscribe = initial && subscription;
        // A new request to a registered phone (no agent) that could not be sent: its flow is
        // gone (the TCP connection it registered over closed, and it has not registered
        // again): 480 Temporarily Unavailable, not the transport failure's 503.
        let phone_gone = code == 503
            && entry.agent.is_none()
            && entry.purpose != Purpose::Ping
            && (initial || call_id.is_none())
            && is_transport_failure(msg);
        let unavailable;
        let (code, msg) = if phone_gone {
            self.stats.registered_phone_gone += 1;
            self.trace_note("answered 480: the registered phone's flow is gone");
            let mut m = msg.clone();
            m.start = crate::sip::message::StartLine::Response {
                code: 480,
                reason: reason_for(480).to_owned(),
            };
            unavailable = m;
            (480, &unavailable)
        } else {
            (code, msg)
        };
        let mut rang = false;
        if code == 422 && initial_invite {
            if let Some(id) = call_id {
                if self.retry_after_422(now, ckey, id, msg) {
                    return;
                }
            }
        }

        if let (Some(skey), true) = (&server, initial || call_id.is_none()) {
            if code >= 300 {
                match self.attempt_failed(now, skey, call_id, code) {
                    AfterFailure::Rerouted => return,
                    AfterFailure::Answer(best) => {
                        self.forget_register(skey);
                        if let Some(id) = call_id {
                            if subscription {
                                self.stats.subscriptions_refused += 1;
                            } else if self.calls.get(&id).is_some_and(|c| !c.is_cancelled()) {
                                self.stats.calls_failed += 1;
                            }
                            let by = self.failed_by(id);
                            self.account_end(now, id, best, by);
                            self.remove_call(id);
                        }
                        self.trace_note_with(|| {
                            format!("answered {best}: every candidate failed (best response)")
                        });
                        self.respond_local(now, skey, best);
                        return;
                    }
                    AfterFailure::Relay => {}
                }
            } else if code >= 200 {
                self.end_hunt(skey);
            }
        }

        match call_id {
            Some(id) if initial_subscribe && code >= 200 => {
                self.subscription_answered(now, id, code, msg);
            }
            Some(id) if subscription => {
                self.subscription_request_answered(now, id, &method, code, msg);
            }
            _ => {}
        }
        if let Some(id) = call_id.filter(|_| !subscription) {
            if let Some(call) = self.calls.get_mut(&id) {
                let leg = call.dialog.leg_mut(side);
                if method == Method::Invite && (101..300).contains(&code) {
                    if let Some(tag) = msg.to_tag() {
                        leg.remote_tag = Some(tag.to_owned());
                    }
                    if let Some(target) = msg.contact_uri() {
                        leg.remote_target = target.to_owned();
                    }
                    if initial_invite && (200..300).contains(&code) {
                        leg.route_set = route_set_of_answer(msg);
                    }
                }
                if initial_invite {
                    match code {
                        101..=199 if call.dialog.state == DialogState::Trying => {
                            call.dialog.state = DialogState::Early;
                            rang = true;
                        }
                        200..=299 => {
                            if call.is_cancelled() {
                                // Answered after the caller gave up: ACK and hang up the callee.
                                self.hang_up_callee(now, id);
                                return;
                            }
                            call.answer();
                            self.stats.calls_answered += 1;
                            debug!(call_id = %call.dialog.caller.call_id, "call answered");
                            self.account_answered(now, id);
                        }
                        300.. => {
                            if !call.is_cancelled() {
                                self.stats.calls_failed += 1;
                            }
                            debug!(call_id = %call.dialog.caller.call_id, code, "call failed");
                            if matches!(code, 401 | 407) && side == Side::Callee {
                                self.remember_challenge(now, id);
                            }
                            let by = self.failed_by(id);
                            self.account_end(now, id, code, by);
                            self.remove_call(id);
                        }
                        _ => {}
                    }
                } else if method == Method::Bye && code >= 200 {
                    debug!(call_id = %call.dialog.caller.call_id, "call ended");
                    self.remove_call(id);
                } else if method == Method::Invite && (200..300).contains(&code) {
                    let cseq = msg.cseq().map_or(0, |c| c.seq);
                    self.account_reinvite_answered(now, id, side, cseq);
                }
            }
        }
        if code == 100 && method == Method::Invite {
            return; // we sent our own 100 already
        }
        // The SBC's leg timers start with the answer: the caller's 2xx names the caller's; a
        // refresh's 2xx names the timer of the leg it goes back on.
        let timed = match call_id {
            Some(id) if initial_invite && (200..300).contains(&code) => {
                self.leg_timers_answered(now, id, msg)
            }
            Some(id)
                if (200..300).contains(&code)
                    && matches!(method, Method::Invite | Method::Update)
                    && self
                        .calls
                        .get(&id)
                        .is_some_and(|c| c.dialog.leg_timers.is_some()) =>
            {
                // Copied only for a call whose leg timers the SBC runs.
                let mut relayed = msg.clone();
                self.leg_timer_headers(id, side.other(), &mut relayed, false)
                    .then_some(relayed)
            }
            _ => None,
        };
        let msg = timed.as_ref().unwrap_or(msg);
        let Some(skey) = server else { return };
        let anchored = match call_id {
            Some(id) if (101..300).contains(&code) && self.calls.contains_key(&id) => {
                match self.anchor_body(now, id, side, msg) {
                    Ok(body) => body,
                    Err(refusal) => {
                        // A response cannot be refused: relayed without the description
                        // rather than with the far side's addresses in it.
                        self.stats.media_sdp_refused += 1;
                        debug!(
                            code,
                            ?refusal,
                            "SDP of a response not anchored: relayed without it"
                        );
                        Some(Bytes::new())
                    }
                }
            }
            _ => None,
        };
        if let Some(id) = call_id {
            if code >= 200 && !initial_invite && matches!(method, Method::Invite | Method::Update) {
                self.offer_settled(id, ckey, (200..300).contains(&code));
            }
        }
        let replicate_answer = anchored.as_ref().is_some_and(|b| !b.is_empty());
        let tx = match anchored {
            Some(body) => {
                let mut with = msg.clone();
                with.body = body;
                if with.body.is_empty() {
                    with.headers.retain(|h| !super::request::is_content_type(h));
                }
                self.relay_response(now, &skey, code, &with)
            }
            None if method == Method::Register && code >= 200 => {
                match self.registrar_answered(now, &skey, code, msg) {
                    Some(relayed) => self.relay_response(now, &skey, code, &relayed),
                    None => self.relay_response(now, &skey, code, msg),
                }
            }
            None => self.relay_response(now, &skey, code, msg),
        };
        // A session timer the endpoints negotiated starts, moves or stops with each 2xx to an
        // INVITE or UPDATE (RFC 4028).
        let session_refresh = call_id.filter(|_| {
            !subscription
                && (200..300).contains(&code)
                && matches!(method, Method::Invite | Method::Update)
        });
        let timed_call = |engine: &Self, id: u64| {
            engine
                .calls
                .get(&id)
                .is_some_and(|c| c.dialog.session_timer.is_some() || c.dialog.leg_timers.is_some())
        };
        let had_timer = session_refresh.is_some_and(|id| timed_call(self, id));
        if let Some(id) = session_refresh {
            self.session_refreshed(now, id, msg);
        }
        let initial_2xx = initial_invite && (200..300).contains(&code);
        if initial_2xx {
            if let (Some(id), Some(tx)) = (call_id, tx) {
                if let Some(call) = self.calls.get_mut(&id) {
                    call.relayed_2xx(tx);
                }
            }
        }
        // Started, refreshed or stopped: the standby must end the call at the same date.
        let timer_moved = had_timer || session_refresh.is_some_and(|id| timed_call(self, id));
        if let (true, Some(id)) = (
            replicate_answer || initial_2xx || rang || timer_moved,
            call_id,
        ) {
            // An answer moved the media, the callee rings (the new active must not re-send
            // the INVITE: a callee may take that for a new request), or the call was answered
            // (with the 2xx relayed to the caller, until its ACK comes): the standby needs it.
            self.replicate(id);
        }
    }

    /// Relays a response from the far leg to the server transaction `skey`.
    pub(super) fn relay_response(
        &mut self,
        now: Instant,
        skey: &ServerKey,
        code: u16,
        msg: &SipMessage,
    ) -> Option<Transmit> {
        let contact = {
            let entry = self.server.get(skey)?;
            if entry.txn.is_final() {
                return None;
            }
            let leg = entry
                .call
                .and_then(|id| self.calls.get(&id))
                .map(|c| c.dialog.leg(Side::Caller).clone());
            (entry.contact && (101..300).contains(&code)).then(|| {
                let transport = leg.as_ref().map_or(entry.reply.transport, |l| l.transport);
                let iface = self.cfg.interfaces[entry.reply.interface].addr_for(transport);
                let sips = leg.as_ref().is_some_and(|l| is_sips(&l.remote_target));
                // The caller's Record-Route, echoed in a dialog-creating response (RFC 3261
                // section 12.1.1): a proxy before us (a registrar hairpinning a call to a
                // phone behind us) stays on the dialog's path.
                let record_route = match (&leg, entry.to_tag.is_some()) {
                    (Some(l), true) => l.route_set.clone(),
                    _ => Vec::new(),
                };
                (contact(iface, transport, sips), record_route)
            })
        };
        let entry = self.server.get_mut(skey)?;
        if entry.end_anyway && code >= 300 {
            self.respond_local(now, skey, 200);
            return None;
        }
        let reason = match &msg.start {
            crate::sip::message::StartLine::Response { reason, .. } if !reason.is_empty() => {
                reason.as_str()
            }
            _ => reason_for(code),
        };
        let mut w = entry.ctx.write(code, reason, entry.to_tag.as_deref());
        if let Some((c, record_route)) = contact {
            for r in &record_route {
                w.header("Record-Route", r);
            }
            w.header("Contact", c);
        }
        copy_end_to_end(&mut w, &msg.headers);
        let payload = w.finish(&msg.body);
        entry.last_response = Some(payload.clone());
        entry.txn.send_response(now, code);
        let tx = entry.reply.transmit(payload);
        self.out.push_back(tx.clone());
        self.arm_server(skey);
        Some(tx)
    }

    /// Sends a locally generated response on server transaction `skey`.
    pub(super) fn respond_local(&mut self, now: Instant, skey: &ServerKey, code: u16) {
        self.respond_local_with(now, skey, code, None);
    }

    /// Sends a locally generated response on server transaction `skey`, with one extra header.
    pub(super) fn respond_local_with(
        &mut self,
        now: Instant,
        skey: &ServerKey,
        code: u16,
        extra: Option<(&str, String)>,
    ) {
        self.respond_local_headers(now, skey, code, extra.as_slice());
    }

    /// Sends a locally generated response on server transaction `skey`, with these headers.
    pub(super) fn respond_local_headers(
        &mut self,
        now: Instant,
        skey: &ServerKey,
        code: u16,
        extra: &[(&str, String)],
    ) {
        let Some(entry) = self.server.get_mut(skey) else {
            return;
        };
        if entry.txn.is_final() {
            return;
        }
        let code = if entry.end_anyway && code >= 300 {
            200
        } else {
            code
        };
        let mut w = entry
            .ctx
            .write(code, reason_for(code), entry.to_tag.as_deref());
        for (name, value) in extra {
            w.header(name, value);
        }
        let payload = w.finish(b"");
        entry.last_response = Some(payload.clone());
        entry.txn.send_response(now, code);
        if let ServerTxn::Invite(t) = &mut entry.txn {
            if code >= 300 && !self.verified.contains(&entry.reply.dest) {
                // Our own final to a source that never completed a transaction (forged,
                // maybe): sent once, not every T2 until timer H (no amplification).
                t.cap_retransmissions(0);
            }
        }
        self.out.push_back(entry.reply.transmit(payload));
        self.arm_server(skey);
    }

    /// Remembers `source` as one that completed a transaction with us.
    pub(super) fn verify(&mut self, source: SocketAddr) {
        if self.verified.len() >= MAX_VERIFIED_SOURCES && !self.verified.contains(&source) {
            self.verified.clear();
        }
        self.verified.insert(source);
    }
}

/// Whether `msg` is the 503 the runtime makes for a request it could not send
/// ([`crate::sip::message::transport_failure_response`]).
fn is_transport_failure(msg: &SipMessage) -> bool {
    msg.headers.iter().any(|h| {
        matches!(&h.name, HeaderName::Other(n) if n.eq_ignore_ascii_case("warning"))
            && h.value.trim() == TRANSPORT_FAILURE_WARNING
    })
}
