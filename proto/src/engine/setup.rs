//! Replication: what the standby is sent of each call, and how the new active rebuilds a call
//! that was still being set up when the former active died.
//!
//! A call is streamed when its INVITE is forwarded (`Trying`, with our INVITE so that the new
//! active can re-send it if the callee never got it), when the 2xx is relayed to the caller
//! (`Answered`, with that 2xx so that the new active can repeat it), when the caller's ACK
//! confirms it, and whenever its dialog or media changes after that. A set-up that fails is
//! deleted from the standby at once; a confirmed call's end lingers first (see
//! [`super::call::Lingering`]).
//!
//! ```text
//!  replica state   server txn (caller's INVITE)     client txn (our INVITE)     call
//!  Trying          Proceeding, 100 to repeat        Calling: re-sent every T1   Inviting
//!  Early           Proceeding, 100 to repeat        Proceeding                  Inviting
//!  Answered        Accepted (timer L)               Accepted (timer M)          Answered
//! ```
//! Timer C starts again at the takeover: at worst a call rings a little longer than it might.

use std::time::Instant;

use bytes::Bytes;

use super::build::ResponseContext;
use super::call::Call;
use super::transactions::Purpose;
use super::transactions::{
    ClientEntry, ClientKey, ClientTxn, InviteProgress, ServerEntry, ServerKey, ServerTxn, TxKind,
};
use super::transmit::{ReplyTo, Transmit};
use super::Engine;
use crate::sip::dialog::{CallSetup, Dialog, DialogState};
use crate::sip::message::Method;
use crate::sip::transaction::{ClientInvite, ClientInviteState, ServerInvite};

impl Engine {
    /// Streams call `id`'s dialog, with its media and (while it is being set up) its set-up, to
    /// the standby.
    pub(super) fn replicate(&mut self, id: u64) {
        if !self.cfg.replicate_dialogs {
            return;
        }
        let record = self.media_record(id);
        let setup = self.setup_record(id);
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        let settled = matches!(
            call.dialog.state,
            DialogState::Confirmed | DialogState::Terminating
        );
        if !settled && (setup.is_none() || call.dialog.subscription.is_some()) {
            // Cancelled, or not forwarded yet: nothing the standby could finish. A
            // subscription goes once accepted: before, the subscriber's retransmission or
            // its next try reaches the new active as a new request.
            return;
        }
        call.replicated = true;
        call.dialog.media = record.map(Box::new);
        let mut dialog = call.dialog.clone();
        dialog.setup = setup;
        self.changes
            .push_back(super::DialogChange::Upsert(Box::new(dialog)));
    }

    /// What the standby needs of call `id`'s set-up: `None` once it is confirmed (or
    /// cancelled, or its transactions are gone).
    fn setup_record(&self, id: u64) -> Option<Box<CallSetup>> {
        let call = self.calls.get(&id)?;
        if !matches!(
            call.dialog.state,
            DialogState::Trying | DialogState::Early | DialogState::Answered
        ) {
            return None;
        }
        let (skey, ckey) = call.setup_transactions()?;
        let ckey = ckey?;
        let server = self.server.get(skey)?;
        let client = self.client.get(ckey);
        if client.is_none() && call.dialog.state != DialogState::Answered {
            return None;
        }
        let awaiting_first_response = client.is_some_and(|c| {
            matches!(&c.txn, ClientTxn::Invite(t, _) if t.state() == ClientInviteState::Calling)
        });
        Some(Box::new(CallSetup {
            caller_branch: skey.branch.clone(),
            caller_sent_by: skey.sent_by.clone(),
            caller_echo: server.ctx.clone(),
            callee_branch: ckey.branch.clone(),
            callee_echo: client.map(|c| c.ids.clone()),
            invite: match client {
                Some(c) if awaiting_first_response => c.request.to_vec(),
                _ => Vec::new(),
            },
            caller_2xx: call
                .caller_2xx()
                .map(|t| t.payload.to_vec())
                .unwrap_or_default(),
        }))
    }

    /// Rebuilds a call in set-up replicated from the former active: its two INVITE
    /// transactions and the call. `None` if the record cannot be finished here: older than
    /// timer C (its caller has given up), or missing what its state needs.
    pub(super) fn restore_setup(
        &mut self,
        now: Instant,
        dialog: Dialog,
        setup: CallSetup,
    ) -> Option<Call> {
        let age = self
            .wall_clock
            .unix_secs_at(now)
            .saturating_sub(dialog.created_unix);
        if age > self.cfg.timer_c.as_secs() {
            return None;
        }
        let answered = dialog.state == DialogState::Answered;
        let echo = match (&setup.callee_echo, answered) {
            (Some(e), _) => Some(e.clone()),
            (None, true) => None,
            (None, false) => return None,
        };
        let timers = self.cfg.timers;
        let (caller, callee) = (&dialog.caller, &dialog.callee);

        // The caller's INVITE transaction.
        let skey = ServerKey {
            branch: setup.caller_branch,
            sent_by: setup.caller_sent_by,
            kind: TxKind::Invite,
        };
        let mut txn = ServerInvite::new(timers, caller.transport.reliable());
        let last_response = if answered {
            // The 2xx went out (timer L runs); the caller's ACK is awaited in the dialog.
            txn.send_response(now, 200);
            None
        } else {
            txn.send_response(now, 100);
            Some(ResponseContext::write(&setup.caller_echo, 100, "Trying", None).finish(b""))
        };
        self.server.insert(
            skey.clone(),
            ServerEntry {
                txn: ServerTxn::Invite(txn),
                reply: ReplyTo {
                    interface: caller.interface,
                    transport: caller.transport,
                    dest: caller.peer,
                },
                ctx: setup.caller_echo,
                to_tag: Some(caller.local_tag.clone()),
                contact: true,
                last_response,
                call: Some(dialog.id),
                armed: None,
                end_anyway: false,
            },
        );
        self.arm_server(&skey);

        // Ours toward the callee.
        let ckey = ClientKey::request(setup.callee_branch);
        if let Some(ids) = echo {
            let mut txn = ClientInvite::new(now, timers, callee.transport.reliable());
            let mut progress = InviteProgress::new(now + self.cfg.timer_c);
            let trying = dialog.state == DialogState::Trying && !setup.invite.is_empty();
            if answered {
                let _ = txn.handle_response(now, 200);
                progress.timer_c = None;
            } else if !trying {
                let _ = txn.handle_response(now, 180);
            }
            if !trying {
                progress.on_provisional();
            }
            self.client.insert(
                ckey.clone(),
                ClientEntry {
                    txn: ClientTxn::Invite(txn, progress),
                    method: Method::Invite,
                    request: Bytes::from(setup.invite),
                    to: Transmit {
                        interface: callee.interface,
                        transport: callee.transport,
                        dest: callee.peer,
                        payload: Bytes::new(),
                    },
                    ids,
                    server: Some(skey.clone()),
                    call: Some(dialog.id),
                    side: crate::sip::dialog::Side::Callee,
                    armed: None,
                    attempt_expires: None,
                    agent: None,
                    purpose: Purpose::Relay,
                },
            );
            self.arm_client(&ckey);
        }
        let caller_2xx = (!setup.caller_2xx.is_empty()).then(|| Transmit {
            interface: caller.interface,
            transport: caller.transport,
            dest: caller.peer,
            payload: Bytes::from(setup.caller_2xx),
        });
        Some(Call::restored(dialog, skey, ckey, caller_2xx))
    }
}
