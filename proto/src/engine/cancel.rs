//! The CANCEL path: a CANCEL received for a pending INVITE, and ours sent toward the callee.

use std::time::Instant;

use tracing::debug;

use super::transactions::Purpose;
use super::transactions::{CancelState, ClientEntry, ClientKey, ClientTxn, ServerKey, TxKind};
use super::transmit::{Inbound, Transmit};
use super::Engine;
use crate::sip::dialog::Side;
use crate::sip::message::{MessageWriter, Method, SipMessage};
use crate::sip::transaction::ClientNonInvite;

impl Engine {
    pub(super) fn on_cancel(
        &mut self,
        now: Instant,
        inbound: &Inbound,
        msg: &SipMessage,
        key: ServerKey,
    ) {
        if let Some(entry) = self.server.get(&key) {
            self.stats.retransmissions_absorbed += 1;
            if let Some(last) = entry.last_response.clone() {
                self.out.push_back(entry.reply.transmit(last));
            }
            self.trace_note("retransmission absorbed (answered from the transaction)");
            return;
        }
        let invite_key = ServerKey {
            kind: TxKind::Invite,
            ..key.clone()
        };
        self.trace_server(&invite_key);
        let Some(invite) = self.server.get(&invite_key) else {
            self.trace_note("refused 481: CANCEL of no pending INVITE");
            self.answer(inbound, msg, 481, None);
            return;
        };
        let r = &invite.reply;
        if inbound.interface != r.interface
            || inbound.transport != r.transport
            || !self.cfg.source_matches(r.transport, inbound.source, r.dest)
        {
            // Only the INVITE's sender may cancel it.
            self.stats.leg_mismatch += 1;
            self.trace_note("refused 481: CANCEL not from the INVITE's source");
            debug!(source = %inbound.source, "CANCEL not from the INVITE's source: 481");
            self.answer(inbound, msg, 481, None);
            return;
        }
        let call = invite.call;
        let already_final = invite.txn.is_final();
        self.new_server(&key, inbound, msg, false, None, call);
        self.respond_local(now, &key, 200);
        if already_final {
            return;
        }
        self.respond_local(now, &invite_key, 487);
        self.stats.calls_failed += 1;
        let Some(id) = call else { return };
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        debug!(call_id = %call.dialog.caller.call_id, "cancelled by the caller");
        if let Some(ckey) = call.cancel() {
            self.cancel_client(now, &ckey);
        }
    }

    /// Sends CANCEL for our INVITE `ckey`, or marks it to be sent on the first provisional.
    pub(super) fn cancel_client(&mut self, now: Instant, ckey: &ClientKey) {
        let Some(entry) = self.client.get_mut(ckey) else {
            return;
        };
        let ClientTxn::Invite(_, progress) = &mut entry.txn else {
            return;
        };
        match progress.cancel {
            CancelState::Sent | CancelState::CancelOnProvisional => return,
            CancelState::Calling => {
                progress.cancel = CancelState::CancelOnProvisional;
                return;
            }
            CancelState::Proceeding => progress.cancel = CancelState::Sent,
        }
        let ids = entry.ids.clone();
        let to = entry.to.clone();
        let mut w = MessageWriter::request(&Method::Cancel, &ids.uri);
        w.header("Via", &ids.via);
        for r in &ids.routes {
            w.header("Route", r);
        }
        w.header("Max-Forwards", 70)
            .header("From", &ids.from)
            .header("To", &ids.to)
            .header("Call-ID", &ids.call_id)
            .header("CSeq", format_args!("{} CANCEL", ids.cseq));
        let payload = w.finish(b"");
        let tx = Transmit {
            payload: payload.clone(),
            ..to
        };
        let reliable = tx.transport.reliable();
        self.client.insert(
            ckey.cancel_of(),
            ClientEntry {
                txn: ClientTxn::NonInvite(ClientNonInvite::new(now, self.cfg.timers, reliable)),
                method: Method::Cancel,
                request: payload,
                to: tx.clone(),
                ids,
                server: None,
                call: None,
                side: Side::Callee,
                armed: None,
                attempt_expires: None,
                agent: None,
                purpose: Purpose::Relay,
            },
        );
        self.arm_client(&ckey.cancel_of());
        self.out.push_back(tx);
    }
}
