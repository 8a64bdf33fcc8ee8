//! The transaction table: server and client transaction keys and entries (RFC 3261 section
//! 17), with what the B2BUA keeps beside each state machine.

use std::time::Instant;

use bytes::Bytes;

use super::build::{via_sent_by, ResponseContext};
use super::transmit::{Inbound, ReplyTo, Transmit};
use super::Engine;
use crate::sip::dialog::Side;
use crate::sip::message::{param, Method, SipMessage};
use crate::sip::transaction::{
    ClientInvite, ClientInviteState, ClientNonInvite, ClientNonInviteState, ServerInvite,
    ServerNonInvite,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum TxKind {
    Invite,
    Cancel,
    NonInvite,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct ServerKey {
    pub(super) branch: String,
    pub(super) sent_by: String,
    pub(super) kind: TxKind,
}

/// A client transaction: our Via branch, and whether it is the CANCEL of the INVITE with the
/// same branch (a CANCEL repeats its INVITE's Via, RFC 3261 section 9.1, so the branch alone
/// does not tell them apart; the CSeq method of a response does).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct ClientKey {
    /// The branch of the Via we sent.
    pub(super) branch: String,
    /// Whether this is a CANCEL.
    pub(super) cancel: bool,
}

impl ClientKey {
    /// The key of a request we sent with `branch` (not a CANCEL).
    pub(super) fn request(branch: String) -> Self {
        Self {
            branch,
            cancel: false,
        }
    }

    /// The key of the CANCEL of this (INVITE) transaction.
    pub(super) fn cancel_of(&self) -> Self {
        Self {
            branch: self.branch.clone(),
            cancel: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum TimerTarget {
    Server(ServerKey),
    Client(ClientKey),
    /// A subscription's expiry (its call id).
    Subscription(u64),
    /// A call's session-timer deadline (its call id).
    SessionTimer(u64),
}

#[derive(Debug)]
pub(super) enum ServerTxn {
    Invite(ServerInvite),
    NonInvite(ServerNonInvite),
}

impl ServerTxn {
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Self::Invite(t) => t.poll_timeout(),
            Self::NonInvite(t) => t.poll_timeout(),
        }
    }
    pub(super) fn send_response(&mut self, now: Instant, code: u16) {
        match self {
            Self::Invite(t) => t.send_response(now, code),
            Self::NonInvite(t) => t.send_response(now, code),
        }
    }
    pub(super) fn is_final(&self) -> bool {
        match self {
            Self::Invite(t) => t.is_final(),
            Self::NonInvite(t) => t.is_final(),
        }
    }
}

#[derive(Debug)]
pub(super) struct ServerEntry {
    pub(super) txn: ServerTxn,
    pub(super) reply: ReplyTo,
    pub(super) ctx: ResponseContext,
    /// Tag we add to the To of our responses (new dialogs only).
    pub(super) to_tag: Option<String>,
    /// Whether responses to this request carry our Contact (INVITE, UPDATE).
    pub(super) contact: bool,
    pub(super) last_response: Option<Bytes>,
    pub(super) call: Option<u64>,
    pub(super) armed: Option<super::timers::Armed>,
    /// A BYE on a dialog that is already ending: whatever the far end answers (481 if it has
    /// already hung up), the sender gets 200, because the call is over either way.
    pub(super) end_anyway: bool,
}

/// A client transaction: its RFC 3261 state machine, and for an INVITE what the B2BUA
/// tracks beside it.
#[derive(Debug)]
pub(super) enum ClientTxn {
    /// Our INVITE (initial or re-INVITE).
    Invite(ClientInvite, InviteProgress),
    /// Any other request, CANCEL included.
    NonInvite(ClientNonInvite),
}

impl ClientTxn {
    /// The earliest deadline: the state machine's timers or timer C.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Self::Invite(t, p) => match (t.poll_timeout(), p.timer_c) {
                (Some(a), Some(c)) => Some(a.min(c)),
                (a, c) => a.or(c),
            },
            Self::NonInvite(t) => t.poll_timeout(),
        }
    }

    /// Whether a final response is still awaited.
    pub(super) fn is_pending(&self) -> bool {
        match self {
            Self::Invite(t, _) => matches!(
                t.state(),
                ClientInviteState::Calling | ClientInviteState::Proceeding
            ),
            Self::NonInvite(t) => matches!(
                t.state(),
                ClientNonInviteState::Trying | ClientNonInviteState::Proceeding
            ),
        }
    }
}

/// What our INVITE needs beyond its state machine.
#[derive(Debug)]
pub(super) struct InviteProgress {
    /// Where it stands with respect to CANCEL.
    pub(super) cancel: CancelState,
    /// Timer C (RFC 3261 section 16.6): how long it may ring, restarted by each provisional
    /// response above 100, gone with the final response.
    pub(super) timer_c: Option<Instant>,
    /// The ACK we sent for a final non-2xx, re-sent when that response is retransmitted.
    pub(super) ack: Option<Bytes>,
}

impl InviteProgress {
    /// A new INVITE whose timer C ends at `timer_c`.
    pub(super) fn new(timer_c: Instant) -> Self {
        Self {
            cancel: CancelState::Calling,
            timer_c: Some(timer_c),
            ack: None,
        }
    }

    /// A provisional response arrived; returns whether a CANCEL asked for before it is due now.
    pub(super) fn on_provisional(&mut self) -> bool {
        match self.cancel {
            CancelState::Calling => {
                self.cancel = CancelState::Proceeding;
                false
            }
            CancelState::CancelOnProvisional => {
                self.cancel = CancelState::Proceeding;
                true
            }
            CancelState::Proceeding | CancelState::Sent => false,
        }
    }
}

/// The parts of a sent request that an ACK (for a non-2xx) or a CANCEL must repeat (a plain
/// type, replicated with a call in set-up).
pub(super) use crate::sip::dialog::RequestEcho as RequestIds;

/// Our INVITE and CANCEL: a CANCEL may only be sent once a provisional response has arrived
/// (RFC 3261 section 9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CancelState {
    /// No provisional response yet, and nobody asked to cancel.
    Calling,
    /// Asked to cancel before any provisional response: the CANCEL goes when one arrives.
    CancelOnProvisional,
    /// A provisional response arrived: a CANCEL may go at once.
    Proceeding,
    /// CANCEL sent.
    Sent,
}

#[derive(Debug)]
pub(super) struct ClientEntry {
    pub(super) txn: ClientTxn,
    pub(super) method: Method,
    pub(super) request: Bytes,
    pub(super) to: Transmit,
    pub(super) ids: RequestIds,
    pub(super) server: Option<ServerKey>,
    pub(super) call: Option<u64>,
    pub(super) side: Side,
    pub(super) armed: Option<super::timers::Armed>,
    /// A new request to a session-agent: when the attempt is abandoned if no response at all
    /// came (the agent's attempt expiry), so that the next candidate is tried long before
    /// timer B or F.
    pub(super) attempt_expires: Option<Instant>,
    /// A new request's attempt: the agent whose health its outcome feeds.
    pub(super) agent: Option<crate::routing::board::AgentHandle>,
    /// Why it was sent: relayed for a caller, or a request of the SBC's own.
    pub(super) purpose: Purpose,
}

/// Why a client transaction's request was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    /// Relayed (or sent on a caller's behalf: a BYE, a CANCEL).
    Relay,
    /// A health ping of its `agent` (the answer feeds the agent's ping state, not a caller).
    Ping,
    /// The SBC's refresh of a leg whose session timer it runs (the answer says whether the
    /// leg's peer is still there).
    SessionRefresh,
    /// The SBC's re-INVITE giving the other leg the offer of a peer it refreshed by an
    /// offerless re-INVITE.
    RefreshOffer,
    /// The SBC's INVITE to the target of a transfer it performs (`refer-call-transfer`).
    TransferInvite,
    /// The SBC's re-INVITE giving a transfer target's offer to the transferee.
    TransferReoffer,
}

impl ClientEntry {
    /// The transaction's earliest deadline, its attempt expiry included.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        match (self.txn.poll_timeout(), self.attempt_expires) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

pub(super) fn server_key(msg: &SipMessage, method: &Method) -> Option<ServerKey> {
    let via = msg.top_via()?;
    let kind = match method {
        Method::Invite | Method::Ack => TxKind::Invite,
        Method::Cancel => TxKind::Cancel,
        _ => TxKind::NonInvite,
    };
    let branch = match param(via, "branch") {
        Some(b) if b.starts_with("z9hG4bK") => b.to_owned(),
        // RFC 2543 peers: build a key from what identifies their transaction.
        _ => format!(
            "2543:{}:{}:{}",
            msg.call_id()?,
            msg.cseq()?.seq,
            msg.from_tag().unwrap_or("")
        ),
    };
    Some(ServerKey {
        branch,
        sent_by: via_sent_by(via).to_owned(),
        kind,
    })
}

impl Engine {
    pub(super) fn new_server(
        &mut self,
        key: &ServerKey,
        inbound: &Inbound,
        msg: &SipMessage,
        invite: bool,
        to_tag: Option<String>,
        call: Option<u64>,
    ) {
        let timers = self.cfg.timers;
        let reliable = inbound.transport.reliable();
        let txn = if invite {
            ServerTxn::Invite(ServerInvite::new(timers, reliable))
        } else {
            ServerTxn::NonInvite(ServerNonInvite::new(timers, reliable))
        };
        // Target-refresh requests: their 2xx carries our Contact.
        let contact = matches!(
            msg.method(),
            Some(
                Method::Invite
                    | Method::Update
                    | Method::Subscribe
                    | Method::Notify
                    | Method::Refer
            )
        );
        self.server.insert(
            key.clone(),
            ServerEntry {
                txn,
                reply: Self::reply_to(inbound),
                ctx: ResponseContext::of(msg, inbound.source),
                to_tag,
                contact,
                last_response: None,
                call,
                armed: None,
                end_anyway: false,
            },
        );
    }
}
