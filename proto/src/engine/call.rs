//! Calls: the dialog both legs share, the table that finds a call by (Call-ID, our tag), the
//! changes streamed to the standby, and how a call ends.

use std::time::Instant;

use sbc_accounting::EndedBy;

use super::build::empty_message;
use super::transactions::{ClientKey, ServerKey};
use super::transmit::Transmit;
use super::Engine;
use crate::sip::dialog::{Dialog, DialogState, Leg, Side};
use crate::sip::message::{HeaderName, Method, SipMessage};
use tracing::debug;

/// Abandoned attempts' callee legs an engine keeps at most (each for 64·T1).
pub(super) const MAX_ABANDONED: usize = 256;

/// The route set a 2xx to an initial INVITE gives the UAC: its Record-Route, reversed
/// (RFC 3261 §12.1.2).
pub(super) fn route_set_of_answer(msg: &SipMessage) -> Vec<String> {
    let mut set: Vec<String> = msg
        .header_values(&HeaderName::RecordRoute)
        .map(str::to_owned)
        .collect();
    set.reverse();
    set
}

/// A change of the dialog table, streamed to the standby: confirmed calls, and calls in
/// set-up from the moment their INVITE is forwarded (with their [`crate::sip::dialog::CallSetup`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum DialogChange {
    /// A dialog was created or changed (set-up progress, CSeq, target, state, media).
    Upsert(Box<Dialog>),
    /// The dialog with this id ended.
    Delete(u64),
}

/// Something the engine does 64·T1 after a dialog ended.
///
/// A dialog's end is replicated to the standby only after it lingered, so that a BYE whose
/// answer was lost in a switchover (the former active relayed it, then released the address
/// before the 200 reached the caller) finds the dialog, in `Terminating`, on the new active:
/// the retransmitted BYE is then answered 200 there instead of 481.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lingering {
    /// Stream the dialog's deletion to the standby.
    ReplicateDelete(u64),
    /// Forget a replicated dialog that arrived in `Terminating`, and replicate its end.
    Forget(u64),
    /// Drop the ACKs kept for a call's 2xx retransmissions: after 64·T1 none comes (the far
    /// side's INVITE transaction has ended, RFC 6026), and an established call keeps no
    /// message copies.
    ForgetAcks(u64),
}

/// A call: the dialog both legs share (what state sync replicates), where its setup stands,
/// and the ACKs to repeat.
#[derive(Debug)]
pub(super) struct Call {
    pub(super) dialog: Dialog,
    /// Where the set-up stands; `None` once established (most calls, most of the time: the
    /// state of a set-up is boxed so that an established call stays small).
    setup: Option<Box<Setup>>,
    /// The last ACK sent on each leg (index: [`side_index`]), re-sent when that leg
    /// retransmits its 2xx (the initial INVITE's or a re-INVITE's), for 64·T1.
    acks: Option<Box<[Option<Transmit>; 2]>>,
    /// Whether the latest SDP put every stream on hold (`rtp-inactivity` does not end it).
    pub(super) on_hold: bool,
    /// A re-offer in flight (re-INVITE, UPDATE): our request carrying it, and the media as it
    /// was before, put back if the offer is refused (RFC 3264 §8: the old description stays).
    pub(super) offer_undo: Option<Box<(ClientKey, crate::media::MediaRecord)>>,
    /// Whether the call was streamed to the standby (its end must be, too).
    pub(super) replicated: bool,
    /// The session it holds on its session-agent (ends with the call; `None` for a call
    /// replicated from the former active, whose agent's count starts afresh).
    pub(super) agent_session: Option<crate::routing::board::AgentSession>,
}

/// Where a call's initial INVITE stands, and what it still needs.
///
/// ```text
///  Inviting ──CANCEL / timer C──▶ Cancelled     (a 2xx is then ACKed and hung up)
///     │
///     └──2xx──▶ Answered ──caller's ACK──▶ Established ◀── replicated from the former active
/// ```
/// A final non-2xx, or a 2xx after `Cancelled`, ends the call instead. Established (the
/// caller ACKed, or the call came from the former active: in-dialog requests only from here
/// on) is no set-up at all.
#[derive(Debug)]
enum Setup {
    /// Relayed, no final answer yet (the dialog is `Trying` or `Early`).
    Inviting {
        /// The caller's INVITE transaction.
        server: ServerKey,
        /// Ours toward the callee (set once sent).
        client: Option<ClientKey>,
    },
    /// The caller cancelled, or timer C fired, before any final answer.
    Cancelled {
        /// Ours toward the callee, still waiting for its final answer.
        client: Option<ClientKey>,
    },
    /// The callee answered and the 2xx went to the caller, whose ACK has not come yet.
    Answered {
        /// The caller's INVITE transaction (timer L ends the call if it never ACKs).
        server: ServerKey,
        /// Ours toward the callee.
        client: Option<ClientKey>,
        /// The 2xx relayed to the caller, re-sent when the callee retransmits its own.
        caller_2xx: Option<Transmit>,
    },
}

impl Call {
    /// A new call whose INVITE from the caller is server transaction `server`.
    pub(super) fn inviting(dialog: Dialog, server: ServerKey) -> Self {
        Self {
            dialog,
            setup: Some(Box::new(Setup::Inviting {
                server,
                client: None,
            })),
            acks: None,
            on_hold: false,
            offer_undo: None,
            replicated: false,
            agent_session: None,
        }
    }

    /// A confirmed call replicated from the former active.
    pub(super) fn replicated(dialog: Dialog) -> Self {
        Self {
            dialog,
            setup: None,
            acks: None,
            on_hold: false,
            offer_undo: None,
            replicated: true,
            agent_session: None,
        }
    }

    /// A call in set-up replicated from the former active, whose INVITE transactions were
    /// rebuilt as `server` (the caller's) and `client` (ours): inviting, or answered (the 2xx
    /// relayed to the caller is `caller_2xx`) when the dialog is `Answered`.
    pub(super) fn restored(
        dialog: Dialog,
        server: ServerKey,
        client: ClientKey,
        caller_2xx: Option<Transmit>,
    ) -> Self {
        let setup = if dialog.state == DialogState::Answered {
            Setup::Answered {
                server,
                client: Some(client),
                caller_2xx,
            }
        } else {
            Setup::Inviting {
                server,
                client: Some(client),
            }
        };
        Self {
            dialog,
            setup: Some(Box::new(setup)),
            acks: None,
            on_hold: false,
            offer_undo: None,
            replicated: true,
            agent_session: None,
        }
    }

    /// The caller's INVITE transaction and ours, while the call is being set up (inviting or
    /// answered, not cancelled).
    pub(super) fn setup_transactions(&self) -> Option<(&ServerKey, Option<&ClientKey>)> {
        match self.setup.as_deref()? {
            Setup::Inviting { server, client } | Setup::Answered { server, client, .. } => {
                Some((server, client.as_ref()))
            }
            Setup::Cancelled { .. } => None,
        }
    }

    /// Records our INVITE toward the callee.
    pub(super) fn invite_sent(&mut self, key: Option<ClientKey>) {
        if let Some(Setup::Inviting { client, .. }) = self.setup.as_deref_mut() {
            *client = key;
        }
    }

    /// Whether `key` is our initial INVITE of this call, during its setup.
    pub(super) fn is_initial_invite(&self, key: &ClientKey) -> bool {
        match self.setup.as_deref() {
            Some(
                Setup::Inviting { client, .. }
                | Setup::Cancelled { client }
                | Setup::Answered { client, .. },
            ) => client.as_ref() == Some(key),
            None => false,
        }
    }

    /// The caller cancelled or timer C fired: returns our INVITE to cancel, if the call was
    /// still inviting (once answered there is nothing to cancel).
    pub(super) fn cancel(&mut self) -> Option<ClientKey> {
        if let Some(Setup::Inviting { client, .. }) = self.setup.as_deref_mut() {
            let client = client.take();
            self.setup = Some(Box::new(Setup::Cancelled {
                client: client.clone(),
            }));
            return client;
        }
        None
    }

    /// Whether the call was cancelled before an answer.
    pub(super) fn is_cancelled(&self) -> bool {
        matches!(self.setup.as_deref(), Some(Setup::Cancelled { .. }))
    }

    /// The callee answered the initial INVITE (the dialog becomes `Answered`).
    pub(super) fn answer(&mut self) {
        if let Some(Setup::Inviting { server, client }) = self.setup.as_deref_mut() {
            self.setup = Some(Box::new(Setup::Answered {
                server: server.clone(),
                client: client.take(),
                caller_2xx: None,
            }));
            self.dialog.state = DialogState::Answered;
        }
    }

    /// Records the 2xx relayed to the caller.
    pub(super) fn relayed_2xx(&mut self, tx: Transmit) {
        if let Some(Setup::Answered { caller_2xx, .. }) = self.setup.as_deref_mut() {
            *caller_2xx = Some(tx);
        }
    }

    /// The 2xx relayed to the caller, while its ACK has not come.
    pub(super) fn caller_2xx(&self) -> Option<&Transmit> {
        match self.setup.as_deref() {
            Some(Setup::Answered { caller_2xx, .. }) => caller_2xx.as_ref(),
            _ => None,
        }
    }

    /// Whether the callee's 2xx has not been ACKed yet (the caller's ACK has not come).
    pub(super) fn callee_awaits_ack(&self) -> bool {
        matches!(self.setup.as_deref(), Some(Setup::Answered { .. }))
    }

    /// The ACK last sent on leg `side`, while a retransmitted 2xx may still ask for it.
    pub(super) fn ack(&self, side: Side) -> Option<&Transmit> {
        self.acks.as_ref()?[side_index(side)].as_ref()
    }

    /// Records the ACK sent on leg `side`.
    pub(super) fn set_ack(&mut self, side: Side, ack: Transmit) {
        self.acks.get_or_insert_with(Box::default)[side_index(side)] = Some(ack);
    }

    /// Forgets the ACK sent on leg `side` (another leg took its place).
    pub(super) fn clear_ack(&mut self, side: Side) {
        if let Some(acks) = self.acks.as_deref_mut() {
            acks[side_index(side)] = None;
        }
    }

    /// Drops the ACKs kept (no 2xx retransmission can come any more).
    pub(super) fn forget_acks(&mut self) {
        self.acks = None;
    }

    /// Whether the caller's ACK is awaited on server transaction `key`.
    pub(super) fn awaits_ack_on(&self, key: &ServerKey) -> bool {
        matches!(self.setup.as_deref(), Some(Setup::Answered { server, .. }) if server == key)
    }

    /// A subscription's notifier accepted it (2xx): no ACK follows, the dialog is
    /// `Confirmed` at once.
    pub(super) fn establish(&mut self) {
        self.setup = None;
        self.dialog.state = DialogState::Confirmed;
    }

    /// The caller ACKed the 2xx: the call is established and its dialog `Confirmed`.
    /// Returns whether this ACK was the one that confirmed it.
    pub(super) fn confirm(&mut self) -> bool {
        if matches!(self.setup.as_deref(), Some(Setup::Answered { .. })) {
            self.setup = None;
            self.dialog.state = DialogState::Confirmed;
            return true;
        }
        false
    }
}

/// The calls by the dialog of each leg, (Call-ID, our tag), kept as a keyed 64-bit hash of
/// both: a slot is 24 bytes and holds no copy of either string, and a lookup allocates nothing.
/// The keys are secret (std's `RandomState`), so nobody can aim at a collision; and a lookup
/// is checked against the call it finds ([`Engine::find_dialog`]), so even a collision finds
/// nothing rather than another call.
#[derive(Debug, Default)]
pub(super) struct DialogIndex {
    map: std::collections::HashMap<u64, (u64, Side)>,
    keys: std::collections::hash_map::RandomState,
}

impl DialogIndex {
    fn key(&self, call_id: &str, tag: &str) -> u64 {
        use std::hash::BuildHasher as _;
        self.keys.hash_one((call_id, tag))
    }

    /// Indexes both legs of `dialog`.
    pub(super) fn insert_call(&mut self, dialog: &Dialog) {
        for side in [Side::Caller, Side::Callee] {
            let leg = dialog.leg(side);
            let key = self.key(&leg.call_id, &leg.local_tag);
            self.map.insert(key, (dialog.id, side));
        }
    }

    /// Forgets both legs of `dialog` (unless another call took a slot since).
    pub(super) fn remove_call(&mut self, dialog: &Dialog) {
        for side in [Side::Caller, Side::Callee] {
            self.remove_leg(dialog.id, dialog.leg(side));
        }
    }

    /// Indexes `leg` as side `side` of call `id` (a leg that took another's place).
    pub(super) fn insert_leg(&mut self, id: u64, side: Side, leg: &Leg) {
        let key = self.key(&leg.call_id, &leg.local_tag);
        self.map.insert(key, (id, side));
    }

    /// Forgets `leg` of call `id` (unless another call took its slot since).
    pub(super) fn remove_leg(&mut self, id: u64, leg: &Leg) {
        let key = self.key(&leg.call_id, &leg.local_tag);
        if self.map.get(&key).is_some_and(|(call, _)| *call == id) {
            self.map.remove(&key);
        }
    }

    /// The call and side a leg's (Call-ID, our tag) may name (check it: see the type).
    fn candidate(&self, call_id: &str, tag: &str) -> Option<(u64, Side)> {
        self.map.get(&self.key(call_id, tag)).copied()
    }

    /// Legs indexed.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// Room for legs.
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.map.capacity()
    }

    /// Gives back the room a burst left (see [`crate::compact`]).
    pub(super) fn compact(&mut self) {
        use crate::compact::Compact as _;
        self.map.compact();
    }
}

pub(super) fn side_index(side: Side) -> usize {
    match side {
        Side::Caller => 0,
        Side::Callee => 1,
    }
}

impl Engine {
    /// The call and side whose leg has Call-ID `call_id` and our tag `tag`.
    pub(super) fn find_dialog(&self, call_id: &str, tag: &str) -> Option<(u64, Side)> {
        let (id, side) = self.dialogs.candidate(call_id, tag)?;
        let leg = self.calls.get(&id)?.dialog.leg(side);
        (leg.call_id == call_id && leg.local_tag == tag).then_some((id, side))
    }

    /// A subscription's end gives its subscriber's place back.
    fn release_subscription_place(&self, d: &Dialog) {
        if d.subscription.is_some() {
            self.cfg.subscription_sources.release(d.caller.peer.ip());
        }
    }

    pub(super) fn remove_call_quietly(&mut self, id: u64) {
        self.abandon_transfer(id);
        self.refresh_acks_owed.remove(&id);
        self.close_media(id);
        self.disarm_session(id);
        if let Some(call) = self.calls.remove(&id) {
            let d = &call.dialog;
            self.release_subscription_place(d);
            self.dialogs.remove_call(d);
        }
    }

    pub(super) fn remove_call(&mut self, id: u64) {
        if let Some(now) = self.now {
            self.account_end_unsaid(now, id);
        }
        self.abandon_transfer(id);
        self.refresh_acks_owed.remove(&id);
        self.close_media(id);
        self.disarm_session(id);
        if let Some(call) = self.calls.remove(&id) {
            let d = &call.dialog;
            self.release_subscription_place(d);
            if !self.cfg.replicate_dialogs {
                // No standby: nothing to delete there.
            } else if matches!(d.state, DialogState::Confirmed | DialogState::Terminating) {
                match self.now {
                    Some(now) => self
                        .lingering
                        .push_back((now + self.cfg.timers.t64(), Lingering::ReplicateDelete(id))),
                    None => self.changes.push_back(DialogChange::Delete(id)),
                }
            } else if call.replicated {
                // A set-up that failed or was cancelled: nothing to linger for (no BYE can
                // come), and the standby must not finish it.
                self.changes.push_back(DialogChange::Delete(id));
            }
            self.dialogs.remove_call(d);
        }
    }

    /// Keeps the callee leg of an INVITE attempt abandoned at its expiry for 64·T1, so that
    /// a 2xx it sends late is ACKed and hung up ([`Self::take_abandoned`]); at most
    /// [`MAX_ABANDONED`] are kept (the oldest goes first).
    pub(super) fn remember_abandoned(&mut self, now: Instant, leg: Leg) {
        while self
            .abandoned
            .front()
            .is_some_and(|(until, _)| *until <= now)
            || self.abandoned.len() >= MAX_ABANDONED
        {
            self.abandoned.pop_front();
        }
        self.abandoned.push_back((now + self.cfg.timers.t64(), leg));
    }

    /// The abandoned attempt's leg a 2xx answers (its Call-ID and our tag), taken out.
    pub(super) fn take_abandoned(&mut self, now: Instant, msg: &SipMessage) -> Option<Leg> {
        while self
            .abandoned
            .front()
            .is_some_and(|(until, _)| *until <= now)
        {
            self.abandoned.pop_front();
        }
        let (call_id, tag) = (msg.call_id()?, msg.from_tag()?);
        let i = self
            .abandoned
            .iter()
            .position(|(_, l)| l.call_id == call_id && l.local_tag == tag)?;
        self.abandoned.remove(i).map(|(_, leg)| leg)
    }

    /// A late 2xx to an abandoned attempt: the dialog it makes is ACKed and ended with BYE
    /// (RFC 3261 §13.2.2.4 gives a UAC no other way out), on that leg alone.
    pub(super) fn release_abandoned_answer(
        &mut self,
        now: Instant,
        mut leg: Leg,
        msg: &SipMessage,
    ) {
        leg.remote_tag = msg.to_tag().map(str::to_owned);
        if let Some(target) = msg.contact_uri() {
            leg.remote_target = target.to_owned();
        }
        leg.route_set = route_set_of_answer(msg);
        self.stats.abandoned_answers_released += 1;
        self.trace_note("a late 2xx to an abandoned attempt: ACKed and hung up with BYE");
        debug!(call_id = %leg.call_id, "late answer to an abandoned attempt released");
        self.ack_then_bye(now, leg);
    }

    /// ACKs the 2xx that made `leg`'s dialog, then ends it with BYE (a call no longer
    /// holds it).
    pub(super) fn ack_then_bye(&mut self, now: Instant, mut leg: Leg) {
        let branch = self.ids.branch();
        let ack = self.build_request(
            &leg,
            &Method::Ack,
            leg.last_invite_cseq,
            &branch,
            &empty_message(),
            70,
        );
        self.out.push_back(Transmit {
            interface: leg.interface,
            transport: leg.transport,
            dest: leg.peer,
            payload: ack,
        });
        self.send_next_on(now, &mut leg, &Method::Bye, &empty_message());
    }

    /// Sends `orig` as a `method` of ours on `leg` with its next CSeq, outside any call (a
    /// leg no call holds, or a request whose answer the call does not wait for).
    pub(super) fn send_next_on(
        &mut self,
        now: Instant,
        leg: &mut Leg,
        method: &Method,
        orig: &SipMessage,
    ) {
        leg.local_cseq += 1;
        let cseq = leg.local_cseq;
        self.send_request(now, leg, None, Side::Callee, method, cseq, orig, 70, None);
    }

    /// Answered after a CANCEL or timer C: ACK the 2xx and send BYE to the callee.
    pub(super) fn hang_up_callee(&mut self, now: Instant, id: u64) {
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        let leg = call.dialog.callee.clone();
        self.remove_call(id);
        self.ack_then_bye(now, leg);
    }

    /// Ends a call on both legs with BYE (no caller ACK, or a fatal condition).
    pub(super) fn tear_down(&mut self, now: Instant, id: u64, ended_by: EndedBy) {
        self.tear_down_with(now, id, &empty_message(), ended_by);
    }

    /// [`Self::tear_down`], the BYEs carrying `orig`'s end-to-end headers (a `Reason`).
    pub(super) fn tear_down_with(
        &mut self,
        now: Instant,
        id: u64,
        orig: &SipMessage,
        ended_by: EndedBy,
    ) {
        self.account_end(now, id, 200, ended_by);
        let Some(call) = self.calls.get(&id) else {
            return;
        };
        let mut callee = call.dialog.callee.clone();
        let mut caller = call.dialog.caller.clone();
        if call.callee_awaits_ack() {
            let branch = self.ids.branch();
            let ack = self.build_request(
                &callee,
                &Method::Ack,
                callee.last_invite_cseq,
                &branch,
                &empty_message(),
                70,
            );
            self.out.push_back(Transmit {
                interface: callee.interface,
                transport: callee.transport,
                dest: callee.peer,
                payload: ack,
            });
        }
        self.remove_call(id);
        for leg in [&mut callee, &mut caller] {
            self.send_next_on(now, leg, &Method::Bye, orig);
        }
    }
}
