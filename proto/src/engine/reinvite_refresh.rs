//! The SBC's session refresh by re-INVITE (a peer that does not allow UPDATE, or a profile's
//! `force-reinvite`), without keeping any leg's last SDP: the re-INVITE carries no offer
//! (RFC 3725's third-party call control, as [`super::refer_call`] does for a transfer), the
//! peer offers its session again in its 2xx, the offer goes to the other leg in a re-INVITE,
//! and that leg's answer comes back to the peer in the ACK.
//!
//! ```text
//!  peer (leg refreshed)        SBC                     other leg
//!     │ ◀── re-INVITE (no SDP) │                          │
//!     │ 200 (its offer) ─────▶ │ re-INVITE (the offer) ─▶ │
//!     │                        │ ◀──────── 200 (answer)   │
//!     │ ◀── ACK (the answer)   │ ACK ───────────────────▶ │
//! ```
//! Anchored, both descriptions name the SBC's ports as before (the same `o=` version when
//! nothing changed). A 481 or 408 from either leg ends the call (the peer is gone); another
//! refusal from the other leg leaves the media as it was, and the peer's offer is ACKed
//! without an answer (it keeps its previous session).

use std::time::Instant;

use tracing::debug;

use super::build::empty_message;
use super::transactions::{ClientKey, Purpose};
use super::transmit::Transmit;
use super::Engine;
use crate::sip::dialog::Side;
use crate::sip::message::{Header, HeaderName, Method, SipMessage};

impl Engine {
    /// The 2xx to the SBC's offerless re-INVITE refreshing leg `side` of call `id`: its offer
    /// goes to the other leg (or, without one, the 2xx is simply ACKed).
    pub(super) fn refresh_offer_answered(
        &mut self,
        now: Instant,
        id: u64,
        side: Side,
        msg: &SipMessage,
    ) {
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        if let Some(target) = msg.contact_uri() {
            call.dialog.leg_mut(side).remote_target = target.to_owned();
        }
        let cseq = msg
            .cseq()
            .map_or(call.dialog.leg(side).last_invite_cseq, |c| c.seq);
        if !super::media::carries_sdp(msg) {
            self.ack_leg(now, id, side, None, cseq);
            self.bounce_over(now, id, side.other(), false);
            return;
        }
        let before = self.media_record(id);
        let body = match self.anchor_body(now, id, side, msg) {
            Ok(Some(body)) => body,
            Ok(None) => msg.body.clone(),
            Err(refusal) => {
                debug!(call = id, ?refusal, "a refreshed peer's offer not anchored");
                self.stats.media_sdp_refused += 1;
                self.ack_leg(now, id, side, None, cseq);
                self.bounce_over(now, id, side.other(), false);
                return;
            }
        };
        self.trace_note("the refreshed peer's offer goes to the other leg in a re-INVITE");
        if self
            .offer_on_leg(now, id, side.other(), body, before, Purpose::RefreshOffer)
            .is_some()
        {
            self.refresh_acks_owed.insert(id, (side, cseq));
        }
        self.replicate(id);
    }

    /// The re-INVITE of ours on leg `side` of call `id` that carried a refreshed peer's offer
    /// is over (or never went): that leg, refreshed by it when `refreshed`, is refreshed by the
    /// SBC again from here.
    pub(super) fn bounce_over(&mut self, now: Instant, id: u64, side: Side, refreshed: bool) {
        let unix_ms = self.wall_clock.unix_micros_at(now) / 1000;
        if let Some(t) = self
            .calls
            .get_mut(&id)
            .and_then(|c| c.dialog.leg_timers.as_deref_mut())
            .and_then(|l| l[super::call::side_index(side)].as_mut())
        {
            t.refreshing = false;
            if refreshed {
                t.refreshed_unix_ms = unix_ms;
            }
        }
        self.arm_session(now, id);
    }

    /// Sends `offer` (an SDP body) on leg `side` of call `id` in a re-INVITE of the SBC's own
    /// (for `purpose`); `before` is the media to put back if it is refused.
    pub(super) fn offer_on_leg(
        &mut self,
        now: Instant,
        id: u64,
        side: Side,
        offer: bytes::Bytes,
        before: Option<crate::media::MediaRecord>,
        purpose: Purpose,
    ) -> Option<ClientKey> {
        let leg = self.calls.get_mut(&id)?.dialog.leg_mut(side);
        leg.local_cseq += 1;
        leg.last_invite_cseq = leg.local_cseq;
        let cseq = leg.local_cseq;
        let mut orig = sdp_message(offer);
        // A peer that negotiated the leg's timer keeps it (RFC 4028: a re-INVITE without
        // Session-Expires would turn it off).
        self.leg_timer_headers(id, side, &mut orig, true);
        let key = self.send_on_leg(now, id, side, &Method::Invite, cseq, &orig, 70, None)?;
        if let Some(entry) = self.client.get_mut(&key) {
            entry.purpose = purpose;
        }
        if let (Some(before), Some(call)) = (before, self.calls.get_mut(&id)) {
            call.offer_undo = Some(Box::new((key.clone(), before)));
        }
        Some(key)
    }

    /// The other leg answered (`code`; 408 when nothing came) the re-INVITE carrying a
    /// refreshed peer's offer: on `side` (that other leg) a 2xx is ACKed and its answer goes
    /// to the peer in the ACK of its own 2xx.
    pub(super) fn refresh_offer_settled(
        &mut self,
        now: Instant,
        ckey: &ClientKey,
        id: Option<u64>,
        side: Side,
        code: u16,
        msg: &SipMessage,
    ) {
        let Some(id) = id.filter(|id| self.calls.contains_key(id)) else {
            return;
        };
        if code < 200 {
            return;
        }
        let accepted = (200..300).contains(&code);
        self.offer_settled(id, ckey, accepted);
        let Some((peer, peer_cseq)) = self.refresh_acks_owed.remove(&id) else {
            return; // the peer's ACK went already
        };
        self.bounce_over(now, id, side, accepted);
        if !accepted {
            // The peer keeps its previous session: its offer is ACKed without an answer.
            self.ack_leg(now, id, peer, None, peer_cseq);
            if matches!(code, 408 | 481) {
                self.stats.session_refresh_failed += 1;
                self.trace_note("a leg is gone (481 or 408 to a refresh's re-INVITE): BYE");
                self.tear_down_because(
                    now,
                    id,
                    format!("SIP;cause={code};text=\"session refresh failed\""),
                    sbc_accounting::EndedBy::SessionTimer,
                );
            }
            return;
        }
        if let Some(target) = msg.contact_uri() {
            if let Some(call) = self.calls.get_mut(&id) {
                call.dialog.leg_mut(side).remote_target = target.to_owned();
            }
        }
        let cseq = msg.cseq().map_or(0, |c| c.seq);
        self.ack_leg(now, id, side, None, cseq);
        let answer = match self.anchor_body(now, id, side, msg) {
            Ok(Some(body)) => Some(body),
            Ok(None) => super::media::carries_sdp(msg).then(|| msg.body.clone()),
            Err(refusal) => {
                debug!(call = id, ?refusal, "the other leg's answer not anchored");
                self.stats.media_sdp_refused += 1;
                None
            }
        };
        self.ack_leg(now, id, peer, answer, peer_cseq);
        self.replicate(id);
    }

    /// ACKs the 2xx of our INVITE `cseq` on leg `side` of call `id`, with `answer` (an SDP
    /// body), and keeps the ACK for the 2xx's retransmissions.
    pub(super) fn ack_leg(
        &mut self,
        now: Instant,
        id: u64,
        side: Side,
        answer: Option<bytes::Bytes>,
        cseq: u32,
    ) {
        let Some(call) = self.calls.get(&id) else {
            return;
        };
        let leg = call.dialog.leg(side).clone();
        let with = match answer.filter(|b| !b.is_empty()) {
            Some(body) => sdp_message(body),
            None => empty_message(),
        };
        let branch = self.ids.branch();
        let tx = Transmit {
            interface: leg.interface,
            transport: leg.transport,
            dest: leg.peer,
            payload: self.build_request(&leg, &Method::Ack, cseq, &branch, &with, 70),
        };
        if let Some(call) = self.calls.get_mut(&id) {
            call.set_ack(side, tx.clone());
        }
        self.lingering.push_back((
            now + self.cfg.timers.t64(),
            super::call::Lingering::ForgetAcks(id),
        ));
        self.out.push_back(tx);
    }
}

/// A message carrying `body` as `application/sdp` (what [`Engine::build_request`] copies).
fn sdp_message(body: bytes::Bytes) -> SipMessage {
    let mut m = empty_message();
    m.headers.push(Header {
        name: HeaderName::Other("Content-Type".into()),
        value: "application/sdp".into(),
    });
    m.body = body;
    m
}
