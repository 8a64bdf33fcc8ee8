//! Transfers the SBC performs itself (`realm-config refer-call-transfer enabled`, as Oracle's
//! SBC does): an in-dialog REFER from the transferor is answered 202 here, not relayed; the SBC
//! calls the `Refer-To` target, joins it to the transferee and releases the transferor.
//!
//! The SBC keeps no copy of either leg's last description, so it calls the target without an
//! offer (RFC 3725's third-party call control):
//!
//! ```text
//!  transferor        SBC                 target           transferee
//!     │ REFER ──────▶ │                     │                  │
//!     │ ◀── 202       │ INVITE (no SDP) ──▶ │                  │
//!     │ ◀── NOTIFY 100│ ◀── 200 (offer) ─── │                  │
//!     │               │ (target's leg takes the transferor's place)
//!     │               │ re-INVITE (the target's offer, anchored) ──────────▶ │
//!     │               │ ◀───────────────────────────────────── 200 (answer) │
//!     │               │ ACK (the answer, anchored) ─▶ │  ACK ───────────────▶ │
//!     │ ◀── NOTIFY 200│                     │                  │
//!     │ ◀── BYE       │                     │                  │
//! ```
//! A `Refer-To` with `Replaces` (attended transfer) names the transferor's other call: the
//! INVITE goes to that call's far end, naming the leg it replaces there ([`Replaces`]).
//! A target that refuses, or a transferee that refuses the target's offer, leaves the call as
//! it was; the transferor is told the status in the final NOTIFY (`message/sipfrag`). A
//! transferor that hangs up first (BYE after the 202) is answered 200 and the transfer goes on.
//!
//! A transfer in progress is not replicated: the standby holds the call as it was before the
//! REFER, and holds it with the target's leg once the transfer is done.

use std::time::Instant;

use bytes::Bytes;
use tracing::debug;

use super::build::empty_message;
use super::call::{route_set_of_answer, side_index};
use super::request::{NewLeg, Target};
use super::transactions::{ClientKey, Purpose, ServerKey};
use super::transfer::{refer_to_target, Replaces};
use super::transmit::Inbound;
use super::Engine;
use crate::routing::board::AgentSession;
use crate::sip::dialog::{DialogState, Leg, LegTimer, LegTransport, SessionTimer, Side};
use crate::sip::message::{reason_for, Header, HeaderName, Method, SipMessage, StartLine};

/// How long the transferor's implicit subscription is said to last (RFC 3515 section 2.4.4:
/// the notifier chooses), seconds.
const REFER_SUBSCRIPTION_SECS: u32 = 60;

/// A transfer the SBC performs for one call (at most one at a time).
#[derive(Debug)]
pub(super) struct SbcTransfer {
    /// The transferor's side of the call: the leg the target's replaces.
    side: Side,
    /// The `Event` of the transferor's implicit subscription (`refer;id=<REFER's CSeq>`).
    event: String,
    /// Our INVITE to the target.
    invite: ClientKey,
    /// The target's leg, until it answered (then it is the call's leg on `side`).
    target: Option<Leg>,
    /// Our re-INVITE to the transferee with the target's offer, once the target answered.
    reoffer: Option<ClientKey>,
    /// The transferor's leg, once the target's took its place (NOTIFY and BYE go on it).
    transferor: Option<Leg>,
    /// The `o=` session id and version of `side` before the target's leg took it.
    sdp_before: (u64, (u64, u64)),
    /// The transferor hung up after the 202: no NOTIFY, no BYE to it.
    transferor_left: bool,
    /// The call's session timers before the target's leg took the transferor's place (put
    /// back if the transfer fails).
    timers_before: TimersBefore,
    /// The session the target's agent holds for the transfer's INVITE.
    agent_session: Option<AgentSession>,
}

/// A call's session timers as they were on the transferor's leg.
#[derive(Debug, Default)]
struct TimersBefore {
    /// The endpoints' own timer.
    session: Option<Box<SessionTimer>>,
    /// The SBC's timer on the transferor's leg.
    leg: Option<LegTimer>,
}

/// A bodyless message with these headers (what [`Engine::build_request`] copies end to end).
fn with_headers(headers: &[(&str, String)]) -> SipMessage {
    let mut m = empty_message();
    for (name, value) in headers {
        m.headers.push(Header {
            name: HeaderName::Other((*name).to_owned()),
            value: value.clone(),
        });
    }
    m
}

impl Engine {
    /// Whether an in-dialog REFER from `inbound` is performed by the SBC: `refer-call-transfer
    /// enabled` on its realm, or on the session-agent it comes from.
    pub(super) fn performs_transfers(&self, inbound: &Inbound) -> bool {
        self.session_policy(inbound.interface).refer_call_transfer
            || self
                .cfg
                .router
                .agent_at(inbound.source)
                .is_some_and(|a| a.refer_call_transfer)
    }

    /// An in-dialog REFER from leg `side` of call `id`, in a realm where the SBC performs
    /// transfers: answered here and performed (see the module's text). False when the call is
    /// not one the SBC can transfer (not established, a subscription): the REFER is relayed.
    #[allow(clippy::too_many_arguments)] // the request and the leg it came on
    pub(super) fn perform_transfer(
        &mut self,
        now: Instant,
        inbound: &Inbound,
        msg: &SipMessage,
        key: ServerKey,
        id: u64,
        side: Side,
        mf: u32,
    ) -> bool {
        let Some(call) = self.calls.get(&id) else {
            return false;
        };
        if call.dialog.state != DialogState::Confirmed || call.dialog.subscription.is_some() {
            return false;
        }
        if self.transfers.contains_key(&id)
            || self.refresh_acks_owed.contains_key(&id)
            || call.offer_undo.is_some()
        {
            self.trace_note("refused 491: a transfer or an offer of this call is in progress");
            self.answer(inbound, msg, 491, None);
            return true;
        }
        let Some((uri, replaces)) = refer_to_target(msg) else {
            self.trace_note("refused 400: Refer-To names no SIP URI");
            self.answer(
                inbound,
                msg,
                400,
                Some(("Warning", "399 sbc \"Refer-To names no SIP URI\"".into())),
            );
            return true;
        };
        let transferor = call.dialog.leg(side).clone();
        let shard_call_id = call.dialog.caller.call_id.clone();
        let event = format!("refer;id={}", msg.cseq().map_or(0, |c| c.seq));
        self.new_server(&key, inbound, msg, false, None, Some(id));
        let contact = self.our_contact(&transferor);
        self.respond_local_headers(now, &key, 202, &[("Contact", contact)]);
        self.trace_note("REFER answered 202: the SBC performs the transfer (refer-call-transfer)");

        // The INVITE the transferee would have sent: from the transferee as the transferor
        // knows it, to the Refer-To target, on a Call-ID of this call's shard.
        let mut invite = SipMessage {
            start: StartLine::Request {
                method: Method::Invite,
                uri: uri.clone(),
            },
            headers: vec![
                Header {
                    name: HeaderName::From,
                    value: transferor.local_party.clone(),
                },
                Header {
                    name: HeaderName::To,
                    value: format!("<{uri}>"),
                },
                Header {
                    name: HeaderName::CallId,
                    value: shard_call_id,
                },
            ],
            body: Bytes::new(),
        };
        if let Some(by) = msg.headers.iter().find(|h| {
            matches!(&h.name, HeaderName::Other(n)
                if n.eq_ignore_ascii_case("referred-by") || n.eq_ignore_ascii_case("b"))
        }) {
            invite.headers.push(Header {
                name: HeaderName::Other("Referred-By".into()),
                value: by.value.clone(),
            });
        }
        let pseudo = Inbound {
            interface: transferor.interface,
            transport: transferor.transport,
            source: transferor.peer,
            data: Bytes::new(),
        };
        let (target, session) = if let Some(named) = replaces {
            // Attended: the far end of the transferor's other call, told which leg it replaces.
            let Some(far) = self.far_party_of(msg) else {
                self.stats.replaces_unmatched += 1;
                self.transfer_refused(now, id, side, &event, 481);
                return true;
            };
            if self
                .find_dialog(&far.call_id, &far.local_tag)
                .is_some_and(|(named, _)| named == id)
            {
                // The call being transferred cannot replace itself.
                self.transfer_refused(now, id, side, &event, 403);
                return true;
            }
            let Some(value) = Replaces::of_far_end(&far, named.early_only) else {
                self.transfer_refused(now, id, side, &event, 481);
                return true;
            };
            self.stats.replaces_matched += 1;
            invite.headers.push(Header {
                name: HeaderName::Other("Replaces".into()),
                value: value.value(),
            });
            (Target::Party(Box::new(far)), None)
        } else {
            let translated = self.translate_inbound(&pseudo, &invite);
            if let Some(t) = translated {
                invite = t;
            }
            let mut plan = self.plan_route(now, &pseudo, &invite);
            let mut admitted = None;
            for (i, attempt) in plan.iter().enumerate() {
                if let Some(s) = self.admit_attempt(now, attempt, true) {
                    admitted = Some((i, s));
                    break;
                }
            }
            let Some((start, session)) = admitted else {
                let code = if plan.is_empty() { 404 } else { 503 };
                self.trace_note_with(|| format!("transfer target not routed: {code}"));
                self.transfer_refused(now, id, side, &event, code);
                return true;
            };
            plan.drain(..start);
            plan.truncate(1); // one attempt: a transfer does not hunt
            (Target::Agents(plan, None), session)
        };
        let router = std::sync::Arc::clone(&self.cfg.router);
        let Some(NewLeg {
            mut leg,
            sent,
            agent,
            ..
        }) = self.new_request_leg(&router, &invite, target, &Method::Invite, mf)
        else {
            self.transfer_refused(now, id, side, &event, 404);
            return true;
        };
        leg.last_invite_cseq = 1;
        if crate::engine::build::is_sips(&uri) && leg.transport != LegTransport::Tls {
            // RFC 3261 section 26.2.2: a sips: request travels over TLS on every hop.
            self.stats.sips_refused += 1;
            self.transfer_refused(now, id, side, &event, 480);
            return true;
        }
        if !self.same_media_address(id, transferor.interface, leg.interface) {
            // The target's leg keeps the transferor realm's ports, which the target realm's
            // media address does not have (no re-anchoring into another pool).
            self.trace_note("transfer target in a realm of another media address: 488");
            self.transfer_refused(now, id, side, &event, 488);
            return true;
        }
        let ckey = self.send_request(
            now,
            &leg,
            Some(id),
            side,
            &Method::Invite,
            1,
            &sent,
            mf,
            None,
        );
        if let Some((index, agent)) = agent {
            self.start_attempt(now, &ckey, agent, router.handle(index));
        }
        if let Some(entry) = self.client.get_mut(&ckey) {
            entry.purpose = Purpose::TransferInvite;
        }
        debug!(call = id, target = %uri, "the SBC performs a transfer");
        let sdp_before = self.calls.get(&id).map_or((0, (0, 0)), |c| {
            (
                c.dialog.sdp_origin[side_index(side)],
                c.dialog.sdp_version[side_index(side)],
            )
        });
        self.transfers.insert(
            id,
            Box::new(SbcTransfer {
                side,
                event,
                invite: ckey,
                target: Some(leg),
                reoffer: None,
                transferor: None,
                sdp_before,
                transferor_left: false,
                timers_before: TimersBefore::default(),
                agent_session: session,
            }),
        );
        self.notify_transferor(now, id, "SIP/2.0 100 Trying", false);
        // The NOTIFY's CSeq: a new active continues from it.
        self.replicate(id);
        true
    }

    /// Whether a leg of call `id` may move from interface `a` to `b` keeping its media ports:
    /// the call's media is not anchored, or both realms anchor it at one address (the ports
    /// stay in `a`'s pool; the description names `b`'s address).
    fn same_media_address(&self, id: u64, a: usize, b: usize) -> bool {
        let Some(media) = &self.cfg.media else {
            return true;
        };
        if a == b || self.media_record(id).is_none() {
            return true;
        }
        let realm = |i: usize| media.realms.get(i).copied().flatten();
        match (realm(a), realm(b)) {
            (Some((pa, xa)), Some((pb, xb))) => pa == pb || xa == xb,
            _ => false,
        }
    }

    /// The transfer asked on leg `side` of call `id` cannot start: the transferor's implicit
    /// subscription ends at once with `code`.
    fn transfer_refused(&mut self, now: Instant, id: u64, side: Side, event: &str, code: u16) {
        self.stats.sbc_transfers_failed += 1;
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        let mut leg = call.dialog.leg(side).clone();
        self.send_next_on(
            now,
            &mut leg,
            &Method::Notify,
            &sipfrag_notify(event, code, true),
        );
        if let Some(call) = self.calls.get_mut(&id) {
            call.dialog.leg_mut(side).local_cseq = leg.local_cseq;
        }
        self.replicate(id);
    }

    /// A NOTIFY of call `id`'s transfer to its transferor, with `status` as the sipfrag;
    /// `last` ends the implicit subscription.
    fn notify_transferor(&mut self, now: Instant, id: u64, status: &str, last: bool) {
        let Some(t) = self.transfers.get_mut(&id) else {
            return;
        };
        if t.transferor_left {
            return;
        }
        let side = t.side;
        let event = t.event.clone();
        let swapped_out = t.transferor.is_some();
        let mut leg = match t.transferor.clone() {
            Some(leg) => leg,
            None => match self.calls.get(&id) {
                Some(call) => call.dialog.leg(side).clone(),
                None => return,
            },
        };
        let notify = sipfrag_notify_with(&event, status, last);
        self.send_next_on(now, &mut leg, &Method::Notify, &notify);
        let cseq = leg.local_cseq;
        if swapped_out {
            if let Some(old) = self
                .transfers
                .get_mut(&id)
                .and_then(|t| t.transferor.as_mut())
            {
                old.local_cseq = cseq;
            }
        } else if let Some(call) = self.calls.get_mut(&id) {
            call.dialog.leg_mut(side).local_cseq = cseq;
        }
    }

    /// A BYE from the transferor of call `id` while the SBC performs its transfer: answered
    /// 200 here, and the transfer goes on without it (true). False when no transfer of the
    /// call waits on that leg.
    pub(super) fn transferor_hangs_up(
        &mut self,
        now: Instant,
        inbound: &Inbound,
        msg: &SipMessage,
        key: &ServerKey,
        id: u64,
        side: Side,
    ) -> bool {
        let Some(t) = self.transfers.get_mut(&id) else {
            return false;
        };
        if t.side != side || t.transferor.is_some() {
            return false;
        }
        t.transferor_left = true;
        self.trace_note("the transferor hung up after its REFER: 200, the transfer goes on");
        self.new_server(key, inbound, msg, false, None, Some(id));
        self.respond_local(now, key, 200);
        true
    }

    /// A response to our INVITE to a transfer's target, or to our re-INVITE carrying its
    /// offer to the transferee.
    pub(super) fn transfer_answered(
        &mut self,
        now: Instant,
        ckey: &ClientKey,
        id: Option<u64>,
        code: u16,
        msg: &SipMessage,
    ) {
        let ours = id
            .and_then(|id| Some((id, self.transfers.get(&id)?)))
            .filter(|(_, t)| t.invite == *ckey || t.reoffer.as_ref() == Some(ckey));
        let Some((id, t)) = ours else {
            // The call ended meanwhile: a late 2xx from the target is ACKed and hung up.
            if (200..300).contains(&code) {
                if let Some(leg) = self.take_abandoned(now, msg) {
                    self.release_abandoned_answer(now, leg, msg);
                }
            }
            return;
        };
        let reoffer = t.reoffer.as_ref() == Some(ckey);
        match (reoffer, code) {
            (_, 100..=199) => {}
            (false, 200..=299) if t.target.is_some() => self.target_answered(now, id, msg),
            (false, 200..=299) => {} // another branch's 2xx: ours has the call already
            (false, _) => self.transfer_failed(now, id, code),
            (true, 200..=299) => self.transferee_answered(now, id, ckey, msg),
            (true, _) => {
                self.offer_settled(id, ckey, false);
                self.put_transferor_back(now, id);
                self.transfer_failed(now, id, code);
            }
        }
    }

    /// The target answered our offerless INVITE with its offer: its leg takes the
    /// transferor's place, and the offer goes to the transferee in a re-INVITE.
    fn target_answered(&mut self, now: Instant, id: u64, msg: &SipMessage) {
        let Some(t) = self.transfers.get_mut(&id) else {
            return;
        };
        let side = t.side;
        let Some(mut leg) = t.target.take() else {
            return;
        };
        leg.remote_tag = msg.to_tag().map(str::to_owned);
        if let Some(target) = msg.contact_uri() {
            leg.remote_target = target.to_owned();
        }
        leg.route_set = route_set_of_answer(msg);
        let ending = self
            .calls
            .get(&id)
            .is_none_or(|c| c.dialog.state != DialogState::Confirmed);
        if ending {
            self.trace_note("the transfer target answered a call that is ending: released");
            self.release_abandoned_answer(now, leg, msg);
            self.transfer_failed(now, id, 487);
            return;
        }
        if !super::media::carries_sdp(msg) {
            // Nothing to offer the transferee: the target is released.
            self.trace_note("the transfer target answered without an offer: released");
            self.release_abandoned_answer(now, leg, msg);
            self.transfer_failed(now, id, 488);
            return;
        }
        let new_origin = self.ids.sdp_session_id();
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        let old = std::mem::replace(call.dialog.leg_mut(side), leg);
        call.clear_ack(side);
        call.dialog.sdp_origin[side_index(side)] = new_origin;
        call.dialog.sdp_version[side_index(side)] = (0, 0);
        // Timers negotiated with the transferor are not the target's (kept to put back).
        let timers_before = TimersBefore {
            session: call.dialog.session_timer.take(),
            leg: call
                .dialog
                .leg_timers
                .as_deref_mut()
                .and_then(|l| l[side_index(side)].take()),
        };
        let new = call.dialog.leg(side).clone();
        self.dialogs.remove_leg(id, &old);
        self.dialogs.insert_leg(id, side, &new);
        if let Some(t) = self.transfers.get_mut(&id) {
            t.transferor = Some(old);
            t.timers_before = timers_before;
        }
        let before = self.media_record(id);
        let body = match self.anchor_body(now, id, side, msg) {
            Ok(Some(body)) => body,
            Ok(None) => msg.body.clone(),
            Err(refusal) => {
                debug!(call = id, ?refusal, "transfer target's offer not anchored");
                self.put_transferor_back(now, id);
                self.transfer_failed(now, id, 488);
                return;
            }
        };
        self.trace_note("the transfer target answered: its offer goes to the transferee");
        let rkey = self.offer_on_leg(
            now,
            id,
            side.other(),
            body,
            before,
            Purpose::TransferReoffer,
        );
        if let Some(t) = self.transfers.get_mut(&id) {
            t.reoffer = rkey;
        }
    }

    /// The transferee accepted the target's offer: both legs get their ACK (the target's
    /// with the transferee's answer), the transferor its last NOTIFY and a BYE.
    fn transferee_answered(&mut self, now: Instant, id: u64, ckey: &ClientKey, msg: &SipMessage) {
        self.offer_settled(id, ckey, true);
        let Some(t) = self.transfers.remove(&id) else {
            return;
        };
        let side = t.side;
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        if let Some(target) = msg.contact_uri() {
            call.dialog.leg_mut(side.other()).remote_target = target.to_owned();
        }
        let answer = match self.anchor_body(now, id, side.other(), msg) {
            Ok(Some(body)) => body,
            Ok(None) => msg.body.clone(),
            Err(refusal) => {
                // An ACK cannot refuse: the target gets no answer rather than an unanchored one.
                self.stats.media_sdp_refused += 1;
                debug!(call = id, ?refusal, "transferee's answer not anchored");
                Bytes::new()
            }
        };
        let transferee_cseq = msg.cseq().map_or(0, |c| c.seq);
        let target_cseq = self
            .calls
            .get(&id)
            .map_or(1, |c| c.dialog.leg(side).last_invite_cseq);
        self.ack_leg(now, id, side.other(), None, transferee_cseq);
        self.ack_leg(now, id, side, Some(answer), target_cseq);
        if let (Some(call), Some(session), Side::Callee) =
            (self.calls.get_mut(&id), t.agent_session, side)
        {
            call.agent_session = Some(session);
        }
        self.stats.sbc_transfers_performed += 1;
        self.account_transferred(now, id);
        self.trace_note("transfer done: the target and the transferee talk; the transferor goes");
        debug!(call = id, "transfer performed by the SBC");
        if let Some(mut transferor) = t.transferor.filter(|_| !t.transferor_left) {
            let notify = sipfrag_notify_with(&t.event, "SIP/2.0 200 OK", true);
            self.send_next_on(now, &mut transferor, &Method::Notify, &notify);
            self.send_next_on(now, &mut transferor, &Method::Bye, &empty_message());
        }
        self.replicate(id);
        self.arm_session(now, id);
    }

    /// The transferee refused the target's offer: the transferor's leg goes back in the
    /// call, the target's is ACKed and hung up.
    fn put_transferor_back(&mut self, now: Instant, id: u64) {
        let Some(t) = self.transfers.get_mut(&id) else {
            return;
        };
        let (side, sdp_before) = (t.side, t.sdp_before);
        let Some(mut old) = t.transferor.take() else {
            return;
        };
        let timers = std::mem::take(&mut t.timers_before);
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        if call.dialog.state != DialogState::Confirmed {
            // The call is ending (the target's BYE crossed): the transferor goes too.
            self.send_next_on(now, &mut old, &Method::Bye, &empty_message());
            return;
        }
        let target = std::mem::replace(call.dialog.leg_mut(side), old);
        call.dialog.sdp_origin[side_index(side)] = sdp_before.0;
        call.dialog.sdp_version[side_index(side)] = sdp_before.1;
        call.dialog.session_timer = timers.session;
        if let Some(l) = call.dialog.leg_timers.as_deref_mut() {
            l[side_index(side)] = timers.leg;
        }
        let old = call.dialog.leg(side).clone();
        self.dialogs.remove_leg(id, &target);
        self.dialogs.insert_leg(id, side, &old);
        self.trace_note("the transferee refused the target's offer: the target is hung up");
        self.ack_then_bye(now, target);
    }

    /// Call `id`'s transfer failed with `code`: the transferor is told, and the call goes on
    /// as it was (ended, when the transferor has hung up already).
    fn transfer_failed(&mut self, now: Instant, id: u64, code: u16) {
        self.stats.sbc_transfers_failed += 1;
        debug!(call = id, code, "transfer performed by the SBC failed");
        self.trace_note_with(|| format!("transfer failed: {code}"));
        let status = format!("SIP/2.0 {code} {}", reason_for(code));
        self.notify_transferor(now, id, &status, true);
        let Some(t) = self.transfers.remove(&id) else {
            return;
        };
        if let Some(leg) = t.target {
            // No final answer from it (a timeout): a late 2xx is ACKed and hung up.
            self.remember_abandoned(now, leg);
        }
        let left = t.transferor_left;
        if left {
            self.tear_down(now, id, sbc_accounting::EndedBy::Transfer);
        } else {
            self.replicate(id);
        }
    }

    /// Our transfer request `key` of call `id` got no final response.
    pub(super) fn transfer_timed_out(&mut self, now: Instant, key: &ClientKey, id: Option<u64>) {
        let timeout = empty_message();
        self.transfer_answered(now, key, id, 408, &timeout);
    }

    /// Call `id` ends while the SBC transfers it: the target's INVITE is cancelled (a late
    /// 2xx is hung up) and a swapped-out transferor gets its BYE.
    pub(super) fn abandon_transfer(&mut self, id: u64) {
        let Some(t) = self.transfers.remove(&id) else {
            return;
        };
        let Some(now) = self.now else {
            return;
        };
        if let Some(leg) = t.target {
            self.cancel_client(now, &t.invite);
            self.remember_abandoned(now, leg);
        }
        if let Some(mut transferor) = t.transferor.filter(|_| !t.transferor_left) {
            self.send_next_on(now, &mut transferor, &Method::Bye, &empty_message());
        }
    }
}

/// A NOTIFY of the implicit `refer` subscription carrying `code` as its sipfrag.
fn sipfrag_notify(event: &str, code: u16, last: bool) -> SipMessage {
    sipfrag_notify_with(event, &format!("SIP/2.0 {code} {}", reason_for(code)), last)
}

/// A NOTIFY of the implicit `refer` subscription carrying `status` (a status line) as its
/// sipfrag (RFC 3515 section 2.4.5); `last` terminates the subscription.
fn sipfrag_notify_with(event: &str, status: &str, last: bool) -> SipMessage {
    let state = if last {
        "terminated;reason=noresource".to_owned()
    } else {
        format!("active;expires={REFER_SUBSCRIPTION_SECS}")
    };
    let mut m = with_headers(&[
        ("Event", event.to_owned()),
        ("Subscription-State", state),
        ("Content-Type", "message/sipfrag;version=2.0".to_owned()),
    ]);
    m.body = Bytes::from(format!("{status}\r\n"));
    m
}
