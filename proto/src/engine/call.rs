//! Calls: the dialog both legs share, the table that finds a call by (Call-ID, our tag), the
//! changes streamed to the standby, and how a call ends.

use std::time::Instant;

use super::build::empty_message;
use super::transactions::{ClientKey, ServerKey};
use super::transmit::Transmit;
use super::Engine;
use crate::sip::dialog::{Dialog, DialogState, Side};
use crate::sip::message::Method;

/// A change of the confirmed-dialog table, streamed to the standby.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum DialogChange {
    /// A confirmed dialog was created or changed (CSeq, target, state).
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
    /// Forget a replicated dialog that arrived in `Terminating`.
    Forget(u64),
}

#[derive(Debug)]
pub(super) struct Call {
    pub(super) dialog: Dialog,
    /// The caller's initial INVITE transaction.
    pub(super) invite_server: Option<ServerKey>,
    /// Our initial INVITE toward the callee.
    pub(super) invite_client: Option<ClientKey>,
    /// The last 2xx sent to the caller for the initial INVITE (re-sent when the callee
    /// retransmits its 2xx before the caller's ACK arrives).
    pub(super) caller_2xx: Option<Transmit>,
    /// The last ACK sent on each leg (index: [`side_index`]), re-sent when that leg
    /// retransmits its 2xx.
    pub(super) acks: [Option<Transmit>; 2],
    /// The caller cancelled, or timer C fired: any 2xx from the callee is ACKed and hung up.
    pub(super) cancelled: bool,
}

pub(super) fn side_index(side: Side) -> usize {
    match side {
        Side::Caller => 0,
        Side::Callee => 1,
    }
}

impl Engine {
    pub(super) fn remove_call_quietly(&mut self, id: u64) {
        if let Some(call) = self.calls.remove(&id) {
            let d = &call.dialog;
            self.dialogs
                .remove(&(d.caller.call_id.clone(), d.caller.local_tag.clone()));
            self.dialogs
                .remove(&(d.callee.call_id.clone(), d.callee.local_tag.clone()));
        }
    }

    pub(super) fn remove_call(&mut self, id: u64) {
        if let Some(call) = self.calls.remove(&id) {
            let d = &call.dialog;
            if matches!(d.state, DialogState::Confirmed | DialogState::Terminating) {
                match self.now {
                    Some(now) => self
                        .lingering
                        .push_back((now + self.cfg.timers.t64(), Lingering::ReplicateDelete(id))),
                    None => self.changes.push_back(DialogChange::Delete(id)),
                }
            }
            self.dialogs
                .remove(&(d.caller.call_id.clone(), d.caller.local_tag.clone()));
            self.dialogs
                .remove(&(d.callee.call_id.clone(), d.callee.local_tag.clone()));
        }
    }

    /// Answered after a CANCEL or timer C: ACK the 2xx and send BYE to the callee.
    pub(super) fn hang_up_callee(&mut self, now: Instant, id: u64) {
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        let leg = call.dialog.callee.clone();
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
        let mut leg = leg;
        leg.local_cseq += 1;
        let cseq = leg.local_cseq;
        self.remove_call(id);
        self.send_request(
            now,
            &leg,
            None,
            Side::Callee,
            &Method::Bye,
            cseq,
            &empty_message(),
            70,
            None,
        );
    }

    /// Ends a call on both legs with BYE (no caller ACK, or a fatal condition).
    pub(super) fn tear_down(&mut self, now: Instant, id: u64) {
        let Some(call) = self.calls.get(&id) else {
            return;
        };
        let mut callee = call.dialog.callee.clone();
        let mut caller = call.dialog.caller.clone();
        if call.acks[side_index(Side::Callee)].is_none() {
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
            leg.local_cseq += 1;
            let cseq = leg.local_cseq;
            let l = leg.clone();
            self.send_request(
                now,
                &l,
                None,
                Side::Callee,
                &Method::Bye,
                cseq,
                &empty_message(),
                70,
                None,
            );
        }
    }
}
