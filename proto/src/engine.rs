//! The B2BUA engine: one per worker, sans-IO.
//!
//! An [`Engine`] owns the transactions and calls of the Call-IDs hashed to its worker (see
//! [`crate::shard`]). It is fed received bytes and the current time, and it produces
//! [`Transmit`]s and a deadline for its next timer; it never touches a socket, a clock or a
//! thread, so the whole SIP behaviour is tested with a virtual clock.
//!
//! ```text
//!  caller ──INVITE──▶ [server INVITE txn]──┐        ┌──[client INVITE txn] ──INVITE──▶ callee
//!         ◀─100/18x/2xx── (caller leg)     │ Call   │     (callee leg)    ◀─18x/2xx──
//!                                          └─Dialog─┘
//! ```
//! Each call has two legs with their own Call-ID, tags, CSeq space, Via and Contact, so nothing
//! of one side's topology reaches the other (topology hiding by construction). Requests inside
//! the dialog are matched by (Call-ID, our tag) and re-issued on the other leg; responses are
//! matched by our Via branch and relayed to the paired server transaction.
//!
//! Seams for later capabilities: [`Engine::set_admission`] is where a new request is admitted
//! or refused with 503 (overload control); [`Engine::dialogs`] exposes the dialog table as plain
//! data (state sync).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tracing::{debug, trace};

use crate::shard;
use crate::sip::dialog::{Dialog, DialogState, Leg, LegTransport, Side};
use crate::sip::message::{
    find_head_end, name_addr_uri, param, reason_for, split_list, uri_user, Header, HeaderName,
    MessageWriter, Method, ParseError, SipMessage,
};
use crate::sip::transaction::{
    ClientInvite, ClientInviteState, ClientNonInvite, ClientNonInviteState, ClientResponse,
    ServerInvite, ServerNonInvite, ServerRequest, TimerAction, Timers,
};

/// Sources remembered as verified (they completed a transaction with us), per engine, at most;
/// the set starts over when full.
pub const MAX_VERIFIED_SOURCES: usize = 4096;

/// Prefix of every Via branch the SBC generates (after the RFC 3261 magic cookie).
pub const BRANCH_PREFIX: &str = "z9hG4bKsbc";

/// A local SIP interface as the engine needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Realm name.
    pub realm: String,
    /// Listening address (also written in Via and Contact).
    pub addr: SocketAddr,
}

/// Where new requests from one realm are sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextHop {
    /// Session-agent name.
    pub name: String,
    /// Its address.
    pub addr: SocketAddr,
    /// Transport toward it.
    pub transport: LegTransport,
    /// Index of the interface that faces it.
    pub interface: usize,
}

/// The engine's view of the configuration.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Interfaces, indexed as in [`Inbound::interface`].
    pub interfaces: Vec<Interface>,
    /// For each interface (by index): the next hop of new requests arriving on it.
    pub routes: Vec<Option<NextHop>>,
    /// RFC 3261 timers.
    pub timers: Timers,
    /// Timer C: how long an INVITE may ring before it is cancelled with 408.
    pub timer_c: Duration,
    /// Largest message accepted.
    pub max_message_size: usize,
    /// Longest header line accepted (name, colon, value).
    pub max_header_size: usize,
    /// Where in-dialog requests and responses must come from.
    pub source_policy: SourcePolicy,
    /// Calls this engine holds at most (its share of `max-calls`).
    pub max_calls: usize,
    /// Transactions this engine holds at most (its share of `max-transactions`).
    pub max_transactions: usize,
    /// Every session-agent's address (their legs are checked by IP only).
    pub agents: Vec<SocketAddr>,
}

/// Where an in-dialog request must come from to be taken for its leg, and a response from the
/// next hop its request went to (`sip-config in-dialog-source`). The leg's interface,
/// transport and remote tag are checked whatever the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourcePolicy {
    /// UDP: the address and port the leg's peer used; TCP and session-agents: its IP.
    #[default]
    Address,
    /// The leg's peer's IP, any port.
    Ip,
    /// Anywhere (only interface, transport and tags are checked).
    Any,
}

impl EngineConfig {
    /// Whether a message from `source` over `transport` may be taken as coming from the peer
    /// at `peer` (see [`SourcePolicy`]).
    fn source_matches(
        &self,
        transport: LegTransport,
        source: SocketAddr,
        peer: SocketAddr,
    ) -> bool {
        match self.source_policy {
            SourcePolicy::Any => true,
            SourcePolicy::Ip => source.ip() == peer.ip(),
            SourcePolicy::Address => {
                if transport == LegTransport::Udp && !self.agents.contains(&peer) {
                    source == peer
                } else {
                    source.ip() == peer.ip()
                }
            }
        }
    }
}

/// Bytes received on one interface.
#[derive(Debug, Clone)]
pub struct Inbound {
    /// Interface index.
    pub interface: usize,
    /// Transport it came over.
    pub transport: LegTransport,
    /// Source address.
    pub source: SocketAddr,
    /// The message (one datagram or one TCP frame).
    pub data: Bytes,
}

/// Bytes to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Interface index to send from.
    pub interface: usize,
    /// Transport.
    pub transport: LegTransport,
    /// Destination.
    pub dest: SocketAddr,
    /// The message.
    pub payload: Bytes,
}

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
enum Lingering {
    /// Stream the dialog's deletion to the standby.
    ReplicateDelete(u64),
    /// Forget a replicated dialog that arrived in `Terminating`.
    Forget(u64),
}

/// Whether a new request may enter the engine (the overload-control seam).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Accept new requests.
    Accept,
    /// Refuse new requests with 503 and a Retry-After drawn at random in the range (seconds),
    /// so rejected callers do not retry in lockstep. In-dialog requests, ACK, CANCEL and BYE
    /// still pass.
    Reject {
        /// Smallest Retry-After.
        retry_after_min: u32,
        /// Largest Retry-After.
        retry_after_max: u32,
    },
    /// Drop new requests without an answer: this node is handing the service address over, and
    /// the caller's retransmission (after T1) reaches the new active.
    Drop,
}

/// Counters of one engine.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Requests received (parsed).
    pub requests_in: u64,
    /// Responses received (parsed).
    pub responses_in: u64,
    /// New INVITEs accepted as calls.
    pub calls_attempted: u64,
    /// Calls answered with 2xx.
    pub calls_answered: u64,
    /// Calls ended by a final non-2xx toward the caller.
    pub calls_failed: u64,
    /// Request retransmissions absorbed (answered from transaction state, not forwarded).
    pub retransmissions_absorbed: u64,
    /// Requests retransmitted by us (timers A, E) and responses (timer G).
    pub retransmissions_sent: u64,
    /// Malformed requests answered with 400.
    pub malformed_answered: u64,
    /// Malformed messages dropped (nothing to answer).
    pub malformed_dropped: u64,
    /// Responses that matched no transaction.
    pub stray_responses: u64,
    /// New requests refused with 503 by admission control or shutdown.
    pub rejected_503: u64,
    /// 408s sent because the next hop did not answer.
    pub timeouts: u64,
    /// New requests dropped unanswered while handing the service address over.
    pub handover_dropped: u64,
    /// New requests routed to a next hop (new calls and out-of-dialog requests): what the
    /// routing lookup is paid for.
    pub routed_new: u64,
    /// In-dialog requests (and ACKs, CANCELs) refused because they did not come from their
    /// leg: another interface, transport, source or remote tag (481, ACKs dropped).
    pub leg_mismatch: u64,
    /// Responses dropped because they did not come from the next hop the request went to.
    pub response_source_mismatch: u64,
    /// New requests refused with 503 because the engine held `max-calls` calls or
    /// `max-transactions` transactions.
    pub state_cap_503: u64,
}

impl std::ops::AddAssign<&Self> for Stats {
    /// Adds another engine's counters, field by field (`show sip-stats` sums the shards).
    fn add_assign(&mut self, b: &Self) {
        let Self {
            requests_in,
            responses_in,
            calls_attempted,
            calls_answered,
            calls_failed,
            retransmissions_absorbed,
            retransmissions_sent,
            malformed_answered,
            malformed_dropped,
            stray_responses,
            rejected_503,
            timeouts,
            handover_dropped,
            routed_new,
            leg_mismatch,
            response_source_mismatch,
            state_cap_503,
        } = self;
        // Destructured, so a new counter that is not summed here does not compile.
        *requests_in += b.requests_in;
        *responses_in += b.responses_in;
        *calls_attempted += b.calls_attempted;
        *calls_answered += b.calls_answered;
        *calls_failed += b.calls_failed;
        *retransmissions_absorbed += b.retransmissions_absorbed;
        *retransmissions_sent += b.retransmissions_sent;
        *malformed_answered += b.malformed_answered;
        *malformed_dropped += b.malformed_dropped;
        *stray_responses += b.stray_responses;
        *rejected_503 += b.rejected_503;
        *timeouts += b.timeouts;
        *handover_dropped += b.handover_dropped;
        *routed_new += b.routed_new;
        *leg_mismatch += b.leg_mismatch;
        *response_source_mismatch += b.response_source_mismatch;
        *state_cap_503 += b.state_cap_503;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum TxKind {
    Invite,
    Cancel,
    NonInvite,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ServerKey {
    branch: String,
    sent_by: String,
    kind: TxKind,
}

type ClientKey = (String, bool);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum TimerTarget {
    Server(ServerKey),
    Client(ClientKey),
}

/// How to reach the sender of a request again.
#[derive(Debug, Clone, Copy)]
struct ReplyTo {
    interface: usize,
    transport: LegTransport,
    dest: SocketAddr,
}

impl ReplyTo {
    /// `payload` sent back the way the request came.
    fn transmit(&self, payload: Bytes) -> Transmit {
        Transmit {
            interface: self.interface,
            transport: self.transport,
            dest: self.dest,
            payload,
        }
    }
}

/// The headers a response to a request must echo.
#[derive(Debug, Clone)]
struct ResponseContext {
    vias: Vec<String>,
    from: String,
    to: String,
    call_id: String,
    cseq: String,
}

impl ResponseContext {
    fn of(msg: &SipMessage) -> Self {
        Self {
            vias: msg
                .header_values(&HeaderName::Via)
                .map(str::to_owned)
                .collect(),
            from: msg.header(&HeaderName::From).unwrap_or_default().to_owned(),
            to: msg.header(&HeaderName::To).unwrap_or_default().to_owned(),
            call_id: msg.call_id().unwrap_or_default().to_owned(),
            cseq: msg.header(&HeaderName::CSeq).unwrap_or_default().to_owned(),
        }
    }

    fn write(&self, code: u16, reason: &str, to_tag: Option<&str>) -> MessageWriter {
        let mut w = MessageWriter::response(code, reason);
        for v in &self.vias {
            w.header("Via", v);
        }
        w.header("From", &self.from);
        match to_tag {
            Some(tag) if code > 100 && param(&self.to, "tag").is_none() => {
                w.header("To", format_args!("{};tag={tag}", self.to))
            }
            _ => w.header("To", &self.to),
        };
        w.header("Call-ID", &self.call_id);
        w.header("CSeq", &self.cseq);
        w
    }
}

#[derive(Debug)]
enum ServerTxn {
    Invite(ServerInvite),
    NonInvite(ServerNonInvite),
}

impl ServerTxn {
    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Self::Invite(t) => t.poll_timeout(),
            Self::NonInvite(t) => t.poll_timeout(),
        }
    }
    fn send_response(&mut self, now: Instant, code: u16) {
        match self {
            Self::Invite(t) => t.send_response(now, code),
            Self::NonInvite(t) => t.send_response(now, code),
        }
    }
    fn is_final(&self) -> bool {
        match self {
            Self::Invite(t) => t.is_final(),
            Self::NonInvite(t) => t.is_final(),
        }
    }
}

#[derive(Debug)]
struct ServerEntry {
    txn: ServerTxn,
    reply: ReplyTo,
    ctx: ResponseContext,
    /// Tag we add to the To of our responses (new dialogs only).
    to_tag: Option<String>,
    /// Whether responses to this request carry our Contact (INVITE, UPDATE).
    contact: bool,
    last_response: Option<Bytes>,
    call: Option<u64>,
    armed: Option<Instant>,
    /// A BYE on a dialog that is already ending: whatever the far end answers (481 if it has
    /// already hung up), the sender gets 200, because the call is over either way.
    end_anyway: bool,
}

#[derive(Debug)]
enum ClientTxn {
    Invite(ClientInvite),
    NonInvite(ClientNonInvite),
}

impl ClientTxn {
    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Self::Invite(t) => t.poll_timeout(),
            Self::NonInvite(t) => t.poll_timeout(),
        }
    }
}

/// The parts of a sent request that an ACK (for a non-2xx) or a CANCEL must repeat.
#[derive(Debug, Clone)]
struct RequestIds {
    uri: String,
    via: String,
    from: String,
    to: String,
    call_id: String,
    cseq: u32,
    routes: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CancelState {
    None,
    /// The caller cancelled before any provisional: send CANCEL when one arrives.
    Pending,
    Sent,
}

#[derive(Debug)]
struct ClientEntry {
    txn: ClientTxn,
    method: Method,
    request: Bytes,
    to: Transmit,
    ids: RequestIds,
    server: Option<ServerKey>,
    call: Option<u64>,
    side: Side,
    ack: Option<Bytes>,
    cancel: CancelState,
    provisional: bool,
    timer_c: Option<Instant>,
    armed: Option<Instant>,
}

#[derive(Debug)]
struct Call {
    dialog: Dialog,
    /// The caller's initial INVITE transaction.
    invite_server: Option<ServerKey>,
    /// Our initial INVITE toward the callee.
    invite_client: Option<ClientKey>,
    /// The last 2xx sent to the caller for the initial INVITE (re-sent when the callee
    /// retransmits its 2xx before the caller's ACK arrives).
    caller_2xx: Option<Transmit>,
    /// The last ACK sent on each leg (index: [`side_index`]), re-sent when that leg
    /// retransmits its 2xx.
    acks: [Option<Transmit>; 2],
    /// The caller cancelled, or timer C fired: any 2xx from the callee is ACKed and hung up.
    cancelled: bool,
}

/// The sans-IO B2BUA of one worker.
#[derive(Debug)]
pub struct Engine {
    cfg: EngineConfig,
    via_sent_by: Vec<String>,
    calls: HashMap<u64, Call>,
    changes: VecDeque<DialogChange>,
    /// Dialog ends not replicated yet, and replicated dialogs in `Terminating` to forget, in time
    /// order (both after 64·T1; see [`Lingering`]).
    lingering: VecDeque<(Instant, Lingering)>,
    /// The time last passed in (the engine has no clock of its own).
    now: Option<Instant>,
    dialogs: HashMap<(String, String), (u64, Side)>,
    server: HashMap<ServerKey, ServerEntry>,
    client: HashMap<ClientKey, ClientEntry>,
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
    timer_targets: HashMap<u64, TimerTarget>,
    next_timer: u64,
    out: VecDeque<Transmit>,
    admission: Admission,
    draining: bool,
    /// Sources that completed a transaction with us (an ACK, or an in-dialog request of one of
    /// our dialogs): they receive what we send, so our own final responses to them are
    /// retransmitted as RFC 3261 says. To any other source (possibly forged) they are sent
    /// once: no amplification.
    verified: std::collections::HashSet<SocketAddr>,
    stats: Stats,
    worker: u64,
}

impl Engine {
    /// A new engine for worker number `worker` (used to keep generated identifiers unique).
    pub fn new(cfg: EngineConfig, worker: u64) -> Self {
        let via_sent_by = cfg.interfaces.iter().map(|i| i.addr.to_string()).collect();
        Self {
            cfg,
            via_sent_by,
            calls: HashMap::new(),
            changes: VecDeque::new(),
            lingering: VecDeque::new(),
            now: None,
            dialogs: HashMap::new(),
            server: HashMap::new(),
            client: HashMap::new(),
            timers: BinaryHeap::new(),
            timer_targets: HashMap::new(),
            next_timer: 0,
            out: VecDeque::new(),
            admission: Admission::Accept,
            draining: false,
            verified: std::collections::HashSet::new(),
            stats: Stats::default(),
            worker,
        }
    }

    /// Applies a new configuration to this engine (`activate-config`): timers, routes and limits
    /// change for new transactions; the interfaces must be the same (binding them again needs a
    /// restart), which the caller checks.
    pub fn set_config(&mut self, cfg: EngineConfig) {
        self.via_sent_by = cfg.interfaces.iter().map(|i| i.addr.to_string()).collect();
        self.cfg = cfg;
    }

    /// Next change of the table of confirmed dialogs, for state sync to the standby.
    #[must_use]
    pub fn poll_dialog_change(&mut self) -> Option<DialogChange> {
        self.changes.pop_front()
    }

    /// Installs a confirmed dialog replicated from the former active, so that its in-dialog
    /// requests (BYE, re-INVITE, ...) are served here after a switchover. A dialog already held
    /// is replaced (a newer copy of the same call).
    pub fn install_dialog(&mut self, dialog: Dialog) {
        let id = dialog.id;
        if self.calls.contains_key(&id) {
            // This engine already serves the call: its own state is the newest.
            return;
        }
        if dialog.state == DialogState::Terminating {
            if let Some(now) = self.now {
                self.lingering
                    .push_back((now + self.cfg.timers.t64(), Lingering::Forget(id)));
            }
        }
        self.dialogs.insert(
            (
                dialog.caller.call_id.clone(),
                dialog.caller.local_tag.clone(),
            ),
            (id, Side::Caller),
        );
        self.dialogs.insert(
            (
                dialog.callee.call_id.clone(),
                dialog.callee.local_tag.clone(),
            ),
            (id, Side::Callee),
        );
        self.calls.insert(
            id,
            Call {
                dialog,
                invite_server: None,
                invite_client: None,
                caller_2xx: None,
                acks: [None, None],
                cancelled: false,
            },
        );
    }

    /// Forgets a replicated dialog (deleted on the active).
    pub fn remove_dialog(&mut self, id: u64) {
        self.remove_call_quietly(id);
    }

    fn remove_call_quietly(&mut self, id: u64) {
        if let Some(call) = self.calls.remove(&id) {
            let d = &call.dialog;
            self.dialogs
                .remove(&(d.caller.call_id.clone(), d.caller.local_tag.clone()));
            self.dialogs
                .remove(&(d.callee.call_id.clone(), d.callee.local_tag.clone()));
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The dialog table: every call this engine holds, as plain data.
    pub fn dialogs(&self) -> impl Iterator<Item = &Dialog> {
        self.calls.values().map(|c| &c.dialog)
    }

    /// Number of calls held (any state).
    pub fn call_count(&self) -> usize {
        self.calls.len()
    }

    /// Transactions still waiting for a final response, plus calls not yet confirmed by the
    /// caller's ACK (only confirmed dialogs are replicated, so a handover waits for them).
    pub fn pending_count(&self) -> usize {
        self.calls
            .values()
            .filter(|c| {
                matches!(
                    c.dialog.state,
                    DialogState::Trying | DialogState::Early | DialogState::Answered
                )
            })
            .count()
            + self.server.values().filter(|e| !e.txn.is_final()).count()
            + self
                .client
                .values()
                .filter(|e| match &e.txn {
                    ClientTxn::Invite(t) => matches!(
                        t.state(),
                        ClientInviteState::Calling | ClientInviteState::Proceeding
                    ),
                    ClientTxn::NonInvite(t) => matches!(
                        t.state(),
                        ClientNonInviteState::Trying | ClientNonInviteState::Proceeding
                    ),
                })
                .count()
    }

    /// Number of live transactions.
    pub fn transaction_count(&self) -> usize {
        self.server.len() + self.client.len()
    }

    /// Sets the admission decision for new requests (overload control).
    pub fn set_admission(&mut self, admission: Admission) {
        self.admission = admission;
    }

    /// Refuse new requests with 503 from now on (graceful shutdown); transactions and dialogs
    /// in progress go on.
    pub fn start_draining(&mut self) {
        self.draining = true;
    }

    /// Whether no transaction is waiting for a final response (a draining engine may stop;
    /// transactions that only absorb retransmissions after their final response do not count).
    pub fn is_idle(&self) -> bool {
        self.server.values().all(|e| e.txn.is_final())
            && self.client.values().all(|e| match &e.txn {
                ClientTxn::Invite(t) => !matches!(
                    t.state(),
                    ClientInviteState::Calling | ClientInviteState::Proceeding
                ),
                ClientTxn::NonInvite(t) => !matches!(
                    t.state(),
                    ClientNonInviteState::Trying | ClientNonInviteState::Proceeding
                ),
            })
    }

    /// Next message to send.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// When [`Engine::handle_timeout`] should be called next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let timer = self.timers.peek().map(|Reverse((t, _))| *t);
        let linger = self.lingering.front().map(|(t, _)| *t);
        match (timer, linger) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Processes one received message.
    pub fn handle_inbound(&mut self, now: Instant, inbound: Inbound) {
        self.now = Some(now);
        if inbound.data.iter().all(|b| *b == b'\r' || *b == b'\n') {
            return; // keep-alive
        }
        if inbound.data.len() > self.cfg.max_message_size {
            self.refuse_unparsable(
                &inbound,
                &ParseError::TooLarge {
                    size: inbound.data.len(),
                    max: self.cfg.max_message_size,
                },
            );
            return;
        }
        match SipMessage::parse(&inbound.data) {
            Ok(msg) => match msg.status() {
                None => self.on_request(now, &inbound, msg),
                Some(code) => self.on_response(now, &inbound, code, msg),
            },
            Err(e) => self.refuse_unparsable(&inbound, &e),
        }
    }

    /// Fires every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = Some(now);
        while let Some((at, what)) = self.lingering.front().copied() {
            if at > now {
                break;
            }
            self.lingering.pop_front();
            match what {
                Lingering::ReplicateDelete(id) => {
                    self.changes.push_back(DialogChange::Delete(id));
                }
                Lingering::Forget(id) => self.remove_call_quietly(id),
            }
        }
        while let Some(Reverse((at, id))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            let Some(target) = self.timer_targets.remove(&id) else {
                continue;
            };
            match target {
                TimerTarget::Server(key) => self.server_timeout(now, key),
                TimerTarget::Client(key) => self.client_timeout(now, key),
            }
        }
    }

    // ----- requests -------------------------------------------------------------------------

    fn refuse_unparsable(&mut self, inbound: &Inbound, err: &ParseError) {
        // Answer 400 when the bytes look like a request with the five headers a response needs.
        let lenient = LenientRequest::scan(&inbound.data);
        match lenient {
            Some(req) => {
                let (code, reason) = match err {
                    ParseError::TooLarge { .. } => (513, reason_for(513)),
                    _ => (400, reason_for(400)),
                };
                let mut w = req.ctx.write(code, reason, None);
                w.header(
                    "Warning",
                    format_args!("399 sbc \"{}\"", err.to_string().replace('"', "'")),
                );
                self.stats.malformed_answered += 1;
                debug!(source = %inbound.source, error = %err, "malformed request answered");
                self.out
                    .push_back(Self::reply_to(inbound).transmit(w.finish(b"")));
            }
            None => {
                self.stats.malformed_dropped += 1;
                debug!(source = %inbound.source, error = %err, "malformed message dropped");
            }
        }
    }

    fn reply_to(inbound: &Inbound) -> ReplyTo {
        ReplyTo {
            interface: inbound.interface,
            transport: inbound.transport,
            dest: inbound.source,
        }
    }

    /// Answers a request statelessly (errors before any transaction exists).
    fn answer(
        &mut self,
        inbound: &Inbound,
        msg: &SipMessage,
        code: u16,
        extra: Option<(&str, String)>,
    ) {
        let ctx = ResponseContext::of(msg);
        let tag = (code > 100 && msg.to_tag().is_none()).then(new_tag);
        let mut w = ctx.write(code, reason_for(code), tag.as_deref());
        if let Some((name, value)) = extra {
            w.header(name, value);
        }
        self.out
            .push_back(Self::reply_to(inbound).transmit(w.finish(b"")));
    }

    fn on_request(&mut self, now: Instant, inbound: &Inbound, msg: SipMessage) {
        self.stats.requests_in += 1;
        let Some(method) = msg.method().cloned() else {
            return;
        };
        if !msg.answerable() {
            self.stats.malformed_dropped += 1;
            debug!(source = %inbound.source, "request without Via/From/To/Call-ID/CSeq dropped");
            return;
        }
        if let Err(refusal) = msg.check_request(self.cfg.max_header_size) {
            if method != Method::Ack {
                self.stats.malformed_answered += 1;
                let reason = refusal.reason;
                debug!(source = %inbound.source, code = refusal.code, %reason, "malformed request answered");
                let warning = format!("399 sbc \"{}\"", reason.replace('"', "'"));
                self.answer(inbound, &msg, refusal.code, Some(("Warning", warning)));
            }
            return;
        }
        let Some(key) = server_key(&msg, &method) else {
            self.stats.malformed_dropped += 1;
            return;
        };

        if method == Method::Ack {
            if let Some(entry) = self.server.get_mut(&key) {
                if let ServerTxn::Invite(t) = &mut entry.txn {
                    let r = t.handle_ack(now);
                    let source = inbound.source;
                    self.verify(source);
                    self.arm_server(&key);
                    if r == ServerRequest::Absorb {
                        return;
                    }
                }
            }
            self.ack_in_dialog(now, inbound, &msg);
            return;
        }
        if method == Method::Cancel {
            self.on_cancel(now, inbound, &msg, key);
            return;
        }
        if let Some(entry) = self.server.get_mut(&key) {
            let r = match &mut entry.txn {
                ServerTxn::Invite(t) => t.handle_invite(),
                ServerTxn::NonInvite(t) => t.handle_request(),
            };
            self.stats.retransmissions_absorbed += 1;
            if r == ServerRequest::ResendLastResponse {
                if let Some(last) = entry.last_response.clone() {
                    self.out.push_back(entry.reply.transmit(last));
                }
            }
            return;
        }

        let max_forwards = match msg.max_forwards() {
            None => 70,
            Some(Ok(n)) => n,
            Some(Err(())) => {
                self.stats.malformed_answered += 1;
                self.answer(
                    inbound,
                    &msg,
                    400,
                    Some(("Warning", "399 sbc \"bad Max-Forwards\"".into())),
                );
                return;
            }
        };
        if max_forwards == 0 {
            self.answer(inbound, &msg, 483, None);
            return;
        }
        if self.is_loop(&msg) {
            self.answer(inbound, &msg, 482, None);
            return;
        }
        let mf = (max_forwards - 1).min(70);

        if let Some(to_tag) = msg.to_tag() {
            let found = msg
                .call_id()
                .and_then(|c| self.dialogs.get(&(c.to_owned(), to_tag.to_owned())))
                .copied();
            match found {
                Some((call, side)) => {
                    self.request_in_dialog(now, inbound, msg, key, call, side, mf)
                }
                None => self.answer(inbound, &msg, 481, None),
            }
            return;
        }

        if self.draining {
            self.stats.rejected_503 += 1;
            self.answer(inbound, &msg, 503, Some(("Retry-After", "5".into())));
            return;
        }
        if self.admission == Admission::Drop {
            // Handing the service address over: the caller's retransmission reaches the next
            // active, which serves the call from its start.
            self.stats.handover_dropped += 1;
            return;
        }
        if let Admission::Reject {
            retry_after_min,
            retry_after_max,
        } = self.admission
        {
            self.stats.rejected_503 += 1;
            let retry_after = random_retry_after(retry_after_min, retry_after_max);
            self.answer(
                inbound,
                &msg,
                503,
                Some(("Retry-After", retry_after.to_string())),
            );
            return;
        }
        if method == Method::Options && msg.request_uri().and_then(uri_user).is_none() {
            // A ping addressed to the SBC itself.
            self.answer(inbound, &msg, 200, Some(("Allow", ALLOW.into())));
            return;
        }
        if matches!(method, Method::Subscribe | Method::Refer | Method::Prack)
            || matches!(method, Method::Other(_))
        {
            // Dialog-creating methods other than INVITE are not relayed yet.
            self.answer(inbound, &msg, 501, Some(("Allow", ALLOW.into())));
            return;
        }
        let over = if method == Method::Invite {
            self.calls.len() >= self.cfg.max_calls
        } else {
            false
        } || self.server.len() + self.client.len() >= self.cfg.max_transactions;
        if over {
            // Configured limits, not memory, bound what a stranger can make us hold.
            self.stats.state_cap_503 += 1;
            self.answer(inbound, &msg, 503, Some(("Retry-After", "5".into())));
            return;
        }
        let Some(hop) = self.cfg.routes.get(inbound.interface).cloned().flatten() else {
            self.answer(
                inbound,
                &msg,
                404,
                Some(("Warning", "399 sbc \"no route\"".into())),
            );
            return;
        };
        if method == Method::Invite {
            self.new_call(now, inbound, msg, key, hop, mf);
        } else {
            self.standalone(now, inbound, msg, key, hop, mf);
        }
    }

    fn is_loop(&self, msg: &SipMessage) -> bool {
        msg.header_values(&HeaderName::Via).any(|v| {
            param(v, "branch").is_some_and(|b| b.starts_with(BRANCH_PREFIX))
                && self
                    .via_sent_by
                    .iter()
                    .any(|s| via_sent_by(v) == s.as_str())
        })
    }

    fn new_server(
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
        let contact = matches!(msg.method(), Some(Method::Invite | Method::Update));
        self.server.insert(
            key.clone(),
            ServerEntry {
                txn,
                reply: Self::reply_to(inbound),
                ctx: ResponseContext::of(msg),
                to_tag,
                contact,
                last_response: None,
                call,
                armed: None,
                end_anyway: false,
            },
        );
    }

    fn new_call(
        &mut self,
        now: Instant,
        inbound: &Inbound,
        msg: SipMessage,
        key: ServerKey,
        hop: NextHop,
        mf: u32,
    ) {
        // Random ids stay unique across workers and across the pair (state sync).
        let mut id = rand::random::<u64>();
        while id == 0 || self.calls.contains_key(&id) {
            id = rand::random::<u64>();
        }
        let a_call_id = msg.call_id().unwrap_or_default().to_owned();
        let caller_tag = new_tag();
        let from = msg.header(&HeaderName::From).unwrap_or_default();
        let to = msg.header(&HeaderName::To).unwrap_or_default();
        let caller = Leg {
            interface: inbound.interface,
            transport: inbound.transport,
            peer: inbound.source,
            call_id: a_call_id.clone(),
            local_tag: caller_tag.clone(),
            remote_tag: msg.from_tag().map(str::to_owned),
            local_party: strip_tag(to),
            remote_party: strip_tag(from),
            remote_target: msg
                .contact_uri()
                .map(str::to_owned)
                .unwrap_or_else(|| name_addr_uri(from).to_owned()),
            route_set: msg
                .header_values(&HeaderName::RecordRoute)
                .map(str::to_owned)
                .collect(),
            local_cseq: 0,
            last_invite_cseq: 0,
        };
        let callee = self.outbound_leg(&msg, &hop, 1);
        self.stats.calls_attempted += 1;
        self.stats.routed_new += 1;
        debug!(call_id = %a_call_id, b_call_id = %callee.call_id, next_hop = %hop.name, "new call");

        // 100 Trying at once.
        self.new_server(
            &key,
            inbound,
            &msg,
            true,
            Some(caller_tag.clone()),
            Some(id),
        );
        self.respond_local(now, &key, 100);

        self.dialogs
            .insert((a_call_id, caller_tag), (id, Side::Caller));
        self.dialogs.insert(
            (callee.call_id.clone(), callee.local_tag.clone()),
            (id, Side::Callee),
        );
        let dialog = Dialog {
            id,
            caller,
            callee,
            state: DialogState::Trying,
            created_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        };
        self.calls.insert(
            id,
            Call {
                dialog,
                invite_server: Some(key.clone()),
                invite_client: None,
                caller_2xx: None,
                acks: [None, None],
                cancelled: false,
            },
        );
        let ckey = self.send_on_leg(
            now,
            id,
            Side::Callee,
            &Method::Invite,
            1,
            &msg,
            mf,
            Some(key),
        );
        if let Some(call) = self.calls.get_mut(&id) {
            call.invite_client = ckey;
        }
    }

    /// The leg toward `hop` for a new request `msg`: a fresh Call-ID carrying the shard key of
    /// the caller's (so both legs stay on this worker), our tag, the Request-URI and From host
    /// rewritten to the next hop and our interface (topology hiding).
    fn outbound_leg(&self, msg: &SipMessage, hop: &NextHop, invite_cseq: u32) -> Leg {
        let out_if = &self.cfg.interfaces[hop.interface];
        let uri = match msg.request_uri().and_then(uri_user) {
            Some(user) => format!("sip:{user}@{}", hop.addr),
            None => format!("sip:{}", hop.addr),
        };
        let from = msg.header(&HeaderName::From).unwrap_or_default();
        let from_user = uri_user(name_addr_uri(from)).unwrap_or("anonymous");
        let a_call_id = msg.call_id().unwrap_or_default();
        Leg {
            interface: hop.interface,
            transport: hop.transport,
            peer: hop.addr,
            call_id: shard::b2b_call_id(
                shard::call_id_key(a_call_id.as_bytes()),
                rand::random::<u64>() ^ (self.worker << 56),
            ),
            local_tag: new_tag(),
            remote_tag: None,
            local_party: format!("<sip:{from_user}@{}>", out_if.addr.ip()),
            remote_party: format!("<{uri}>"),
            remote_target: uri,
            route_set: Vec::new(),
            local_cseq: 1,
            last_invite_cseq: invite_cseq,
        }
    }

    /// Relays an out-of-dialog non-INVITE request (OPTIONS, MESSAGE, REGISTER, ...) as a
    /// one-transaction B2BUA exchange.
    fn standalone(
        &mut self,
        now: Instant,
        inbound: &Inbound,
        msg: SipMessage,
        key: ServerKey,
        hop: NextHop,
        mf: u32,
    ) {
        let method = msg.method().cloned().unwrap_or(Method::Options);
        let leg = self.outbound_leg(&msg, &hop, 0);
        self.stats.routed_new += 1;
        self.new_server(&key, inbound, &msg, false, Some(new_tag()), None);
        self.send_request(
            now,
            &leg,
            None,
            Side::Callee,
            &method,
            1,
            &msg,
            mf,
            Some(key),
        );
    }

    #[allow(clippy::too_many_arguments)] // the request and where it goes, all needed
    fn request_in_dialog(
        &mut self,
        now: Instant,
        inbound: &Inbound,
        msg: SipMessage,
        key: ServerKey,
        id: u64,
        side: Side,
        mf: u32,
    ) {
        let Some(method) = msg.method().cloned() else {
            return;
        };
        let Some(call) = self.calls.get_mut(&id) else {
            self.answer(inbound, &msg, 481, None);
            return;
        };
        if !leg_matches(&self.cfg, call.dialog.leg(side), inbound, &msg) {
            self.stats.leg_mismatch += 1;
            debug!(source = %inbound.source, call_id = %call.dialog.caller.call_id, "in-dialog request not from its leg: 481");
            self.answer(inbound, &msg, 481, None);
            return;
        }
        self.verify(inbound.source);
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        // The call is already ending: a BYE crossed this one, or this is the retransmission of
        // a BYE the former active relayed just before a switchover. Relay it anyway (the far
        // end may never have had it) and answer the sender 200 whatever comes back.
        let ending_again = method == Method::Bye && call.dialog.state == DialogState::Terminating;
        if ending_again {
            debug!(call_id = %call.dialog.caller.call_id, "BYE on an ending dialog");
        }
        if matches!(method, Method::Invite | Method::Update) {
            if let Some(target) = msg.contact_uri() {
                call.dialog.leg_mut(side).remote_target = target.to_owned();
            }
        }
        if method == Method::Bye {
            call.dialog.state = DialogState::Terminating;
            debug!(call_id = %call.dialog.caller.call_id, from = ?side, "BYE");
        }
        let to_leg = call.dialog.leg_mut(side.other());
        to_leg.local_cseq += 1;
        let cseq = to_leg.local_cseq;
        if method == Method::Invite {
            to_leg.last_invite_cseq = cseq;
        }
        self.new_server(
            &key,
            inbound,
            &msg,
            method == Method::Invite,
            None,
            Some(id),
        );
        if ending_again {
            if let Some(e) = self.server.get_mut(&key) {
                e.end_anyway = true;
            }
        }
        if method == Method::Invite {
            self.respond_local(now, &key, 100);
        }
        self.send_on_leg(now, id, side.other(), &method, cseq, &msg, mf, Some(key));
        if let Some(call) = self.calls.get(&id) {
            if matches!(
                call.dialog.state,
                DialogState::Confirmed | DialogState::Terminating
            ) {
                // CSeq and targets moved on: the standby must continue from here.
                self.changes
                    .push_back(DialogChange::Upsert(Box::new(call.dialog.clone())));
            }
        }
    }

    /// An ACK that matched no server transaction: the ACK for a 2xx, relayed end to end.
    fn ack_in_dialog(&mut self, _now: Instant, inbound: &Inbound, msg: &SipMessage) {
        let found = match (msg.call_id(), msg.to_tag()) {
            (Some(c), Some(t)) => self.dialogs.get(&(c.to_owned(), t.to_owned())).copied(),
            _ => None,
        };
        let Some((id, side)) = found else {
            trace!("stray ACK dropped");
            return;
        };
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        if !leg_matches(&self.cfg, call.dialog.leg(side), inbound, msg) {
            self.stats.leg_mismatch += 1;
            debug!(source = %inbound.source, "ACK not from its leg dropped");
            return;
        }
        let leg = call.dialog.leg(side.other()).clone();
        self.verify(inbound.source);
        let payload = self.build_request(
            &leg,
            &Method::Ack,
            leg.last_invite_cseq,
            &new_branch(),
            msg,
            70,
        );
        let tx = Transmit {
            interface: leg.interface,
            transport: leg.transport,
            dest: leg.peer,
            payload,
        };
        if let Some(call) = self.calls.get_mut(&id) {
            if side == Side::Caller && call.dialog.state == DialogState::Answered {
                call.dialog.state = DialogState::Confirmed;
                call.caller_2xx = None;
                debug!(call_id = %call.dialog.caller.call_id, "call confirmed");
                self.changes
                    .push_back(DialogChange::Upsert(Box::new(call.dialog.clone())));
            }
            call.acks[side_index(side.other())] = Some(tx.clone());
        }
        self.out.push_back(tx);
    }

    fn on_cancel(&mut self, now: Instant, inbound: &Inbound, msg: &SipMessage, key: ServerKey) {
        if let Some(entry) = self.server.get(&key) {
            self.stats.retransmissions_absorbed += 1;
            if let Some(last) = entry.last_response.clone() {
                self.out.push_back(entry.reply.transmit(last));
            }
            return;
        }
        let invite_key = ServerKey {
            kind: TxKind::Invite,
            ..key.clone()
        };
        let Some(invite) = self.server.get(&invite_key) else {
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
        call.cancelled = true;
        debug!(call_id = %call.dialog.caller.call_id, "cancelled by the caller");
        if let Some(ckey) = call.invite_client.clone() {
            self.cancel_client(now, &ckey);
        }
    }

    /// Sends CANCEL for our INVITE `ckey`, or marks it to be sent on the first provisional.
    fn cancel_client(&mut self, now: Instant, ckey: &ClientKey) {
        let Some(entry) = self.client.get_mut(ckey) else {
            return;
        };
        if entry.cancel == CancelState::Sent {
            return;
        }
        if !entry.provisional {
            entry.cancel = CancelState::Pending;
            return;
        }
        entry.cancel = CancelState::Sent;
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
        let branch = ckey.0.clone();
        let tx = Transmit {
            payload: payload.clone(),
            ..to
        };
        let reliable = tx.transport.reliable();
        self.client.insert(
            (branch, true),
            ClientEntry {
                txn: ClientTxn::NonInvite(ClientNonInvite::new(now, self.cfg.timers, reliable)),
                method: Method::Cancel,
                request: payload,
                to: tx.clone(),
                ids,
                server: None,
                call: None,
                side: Side::Callee,
                ack: None,
                cancel: CancelState::None,
                provisional: false,
                timer_c: None,
                armed: None,
            },
        );
        self.arm_client(&(ckey.0.clone(), true));
        self.out.push_back(tx);
    }

    // ----- building and sending requests ------------------------------------------------------

    fn our_contact(&self, leg: &Leg) -> String {
        let addr = self.cfg.interfaces[leg.interface].addr;
        format!("<sip:sbc@{addr};transport={}>", leg.transport.uri_param())
    }

    fn build_request(
        &self,
        leg: &Leg,
        method: &Method,
        cseq: u32,
        branch: &str,
        orig: &SipMessage,
        mf: u32,
    ) -> Bytes {
        let addr = self.cfg.interfaces[leg.interface].addr;
        let mut w = MessageWriter::request(method, &leg.remote_target);
        w.header(
            "Via",
            format_args!(
                "SIP/2.0/{} {addr};branch={branch};rport",
                leg.transport.via_token()
            ),
        );
        for r in &leg.route_set {
            w.header("Route", r);
        }
        w.header("Max-Forwards", mf).header(
            "From",
            format_args!("{};tag={}", leg.local_party, leg.local_tag),
        );
        match &leg.remote_tag {
            Some(t) => w.header("To", format_args!("{};tag={t}", leg.remote_party)),
            None => w.header("To", &leg.remote_party),
        };
        w.header("Call-ID", &leg.call_id)
            .header("CSeq", format_args!("{cseq} {method}"));
        if matches!(method, Method::Invite | Method::Update) {
            w.header("Contact", self.our_contact(leg));
        }
        copy_end_to_end(&mut w, &orig.headers);
        w.finish(&orig.body)
    }

    /// Sends `orig` re-issued on leg `side` of call `id`; returns the client transaction key.
    #[allow(clippy::too_many_arguments)]
    fn send_on_leg(
        &mut self,
        now: Instant,
        id: u64,
        side: Side,
        method: &Method,
        cseq: u32,
        orig: &SipMessage,
        mf: u32,
        server: Option<ServerKey>,
    ) -> Option<ClientKey> {
        let leg = self.calls.get(&id)?.dialog.leg(side).clone();
        Some(self.send_request(now, &leg, Some(id), side, method, cseq, orig, mf, server))
    }

    #[allow(clippy::too_many_arguments)]
    fn send_request(
        &mut self,
        now: Instant,
        leg: &Leg,
        call: Option<u64>,
        side: Side,
        method: &Method,
        cseq: u32,
        orig: &SipMessage,
        mf: u32,
        server: Option<ServerKey>,
    ) -> ClientKey {
        let branch = new_branch();
        let payload = self.build_request(leg, method, cseq, &branch, orig, mf);
        let addr = self.cfg.interfaces[leg.interface].addr;
        let tx = Transmit {
            interface: leg.interface,
            transport: leg.transport,
            dest: leg.peer,
            payload: payload.clone(),
        };
        let reliable = leg.transport.reliable();
        let txn = if *method == Method::Invite {
            ClientTxn::Invite(ClientInvite::new(now, self.cfg.timers, reliable))
        } else {
            ClientTxn::NonInvite(ClientNonInvite::new(now, self.cfg.timers, reliable))
        };
        let ids = RequestIds {
            uri: leg.remote_target.clone(),
            via: format!(
                "SIP/2.0/{} {addr};branch={branch};rport",
                leg.transport.via_token()
            ),
            from: format!("{};tag={}", leg.local_party, leg.local_tag),
            to: match &leg.remote_tag {
                Some(t) => format!("{};tag={t}", leg.remote_party),
                None => leg.remote_party.clone(),
            },
            call_id: leg.call_id.clone(),
            cseq,
            routes: leg.route_set.clone(),
        };
        let key = (branch, false);
        let is_invite = *method == Method::Invite;
        self.client.insert(
            key.clone(),
            ClientEntry {
                txn,
                method: method.clone(),
                request: payload,
                to: tx.clone(),
                ids,
                server,
                call,
                side,
                ack: None,
                cancel: CancelState::None,
                provisional: false,
                timer_c: is_invite.then(|| now + self.cfg.timer_c),
                armed: None,
            },
        );
        self.arm_client(&key);
        self.out.push_back(tx);
        key
    }

    // ----- responses ------------------------------------------------------------------------

    fn on_response(&mut self, now: Instant, inbound: &Inbound, code: u16, msg: SipMessage) {
        self.stats.responses_in += 1;
        if let Err(refusal) = crate::sip::strict::check_headers(&msg, self.cfg.max_header_size) {
            // A response cannot be answered: dropped (its sender retransmits or times out).
            self.stats.malformed_dropped += 1;
            debug!(reason = %refusal.reason, "malformed response dropped");
            return;
        }
        let (Some(branch), Some(cseq)) = (msg.top_via_branch(), msg.cseq()) else {
            self.stats.malformed_dropped += 1;
            return;
        };
        let ckey = (branch.to_owned(), cseq.method == Method::Cancel);
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
            return;
        }
        if let ClientTxn::Invite(t) = &entry.txn {
            if t.state() == ClientInviteState::Accepted && (200..300).contains(&code) {
                // A retransmitted 2xx (RFC 6026 Accepted state): answer it from dialog state.
                let (call, side) = (entry.call, entry.side);
                if let Some(id) = call {
                    self.retransmitted_2xx(id, side);
                }
                return;
            }
        }
        let action = match &mut entry.txn {
            ClientTxn::Invite(t) => t.handle_response(now, code),
            ClientTxn::NonInvite(t) => t.handle_response(now, code),
        };
        if (100..200).contains(&code) {
            entry.provisional = true;
        }
        if code >= 200 {
            entry.timer_c = None;
        } else if code > 100 && entry.timer_c.is_some() {
            entry.timer_c = Some(now + self.cfg.timer_c);
        }
        match action {
            ClientResponse::Absorb => {}
            ClientResponse::ResendAck => {
                if let Some(ack) = entry.ack.clone() {
                    self.out.push_back(Transmit {
                        payload: ack,
                        ..entry.to.clone()
                    });
                }
            }
            ClientResponse::PassUp | ClientResponse::PassUpAndAck => {
                if action == ClientResponse::PassUpAndAck {
                    let ack = build_ack(&entry.ids, &msg);
                    entry.ack = Some(ack.clone());
                    self.out.push_back(Transmit {
                        payload: ack,
                        ..entry.to.clone()
                    });
                }
                let cancel_now = entry.provisional && entry.cancel == CancelState::Pending;
                self.arm_client(&ckey);
                if cancel_now {
                    self.cancel_client(now, &ckey);
                }
                if !ckey.1 {
                    self.response_to_user(now, &ckey, code, &msg);
                }
            }
        }
        self.arm_client(&ckey);
    }

    /// A response that matched no client transaction: a retransmitted 2xx after our INVITE
    /// transaction ended, or junk.
    fn stray_response(&mut self, _now: Instant, code: u16, msg: &SipMessage) {
        let is_invite_2xx =
            (200..300).contains(&code) && msg.cseq().is_some_and(|c| c.method == Method::Invite);
        if is_invite_2xx {
            let found = match (msg.call_id(), msg.from_tag()) {
                (Some(c), Some(t)) => self.dialogs.get(&(c.to_owned(), t.to_owned())).copied(),
                _ => None,
            };
            if let Some((id, side)) = found {
                self.retransmitted_2xx(id, side);
                return;
            }
        }
        self.stats.stray_responses += 1;
        trace!(code, "stray response dropped");
    }

    /// A 2xx to an INVITE came again from leg `side`: re-send the ACK we sent on that leg, or,
    /// while the caller has not ACKed yet, the 2xx we relayed to the caller.
    fn retransmitted_2xx(&mut self, id: u64, side: Side) {
        let Some(call) = self.calls.get(&id) else {
            return;
        };
        let resend = call.acks[side_index(side)].clone().or_else(|| {
            (side == Side::Callee)
                .then(|| call.caller_2xx.clone())
                .flatten()
        });
        if let Some(tx) = resend {
            self.out.push_back(tx);
        }
    }

    /// The transaction user's handling of a response to one of our requests.
    fn response_to_user(&mut self, now: Instant, ckey: &ClientKey, code: u16, msg: &SipMessage) {
        let Some(entry) = self.client.get(ckey) else {
            return;
        };
        let (method, server, call_id, side) = (
            entry.method.clone(),
            entry.server.clone(),
            entry.call,
            entry.side,
        );
        let initial_invite = call_id
            .and_then(|id| self.calls.get(&id))
            .is_some_and(|c| c.invite_client.as_ref() == Some(ckey));

        if let Some(id) = call_id {
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
                        leg.route_set = msg
                            .header_values(&HeaderName::RecordRoute)
                            .map(str::to_owned)
                            .collect::<Vec<_>>()
                            .into_iter()
                            .rev()
                            .collect();
                    }
                }
                if initial_invite {
                    match code {
                        101..=199 if call.dialog.state == DialogState::Trying => {
                            call.dialog.state = DialogState::Early;
                        }
                        200..=299 => {
                            if call.cancelled {
                                // Answered after the caller gave up: ACK and hang up the callee.
                                self.hang_up_callee(now, id);
                                return;
                            }
                            call.dialog.state = DialogState::Answered;
                            self.stats.calls_answered += 1;
                            debug!(call_id = %call.dialog.caller.call_id, "call answered");
                        }
                        300.. => {
                            if !call.cancelled {
                                self.stats.calls_failed += 1;
                            }
                            debug!(call_id = %call.dialog.caller.call_id, code, "call failed");
                            self.remove_call(id);
                        }
                        _ => {}
                    }
                } else if method == Method::Bye && code >= 200 {
                    debug!(call_id = %call.dialog.caller.call_id, "call ended");
                    self.remove_call(id);
                }
            }
        }
        if code == 100 && method == Method::Invite {
            return; // we sent our own 100 already
        }
        let Some(skey) = server else { return };
        let tx = self.relay_response(now, &skey, code, msg);
        if initial_invite && (200..300).contains(&code) {
            if let (Some(id), Some(tx)) = (call_id, tx) {
                if let Some(call) = self.calls.get_mut(&id) {
                    call.caller_2xx = Some(tx);
                }
            }
        }
    }

    /// Answered after a CANCEL or timer C: ACK the 2xx and send BYE to the callee.
    fn hang_up_callee(&mut self, now: Instant, id: u64) {
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        let leg = call.dialog.callee.clone();
        let ack = self.build_request(
            &leg,
            &Method::Ack,
            leg.last_invite_cseq,
            &new_branch(),
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

    /// Relays a response from the far leg to the server transaction `skey`.
    fn relay_response(
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
                let iface = self.cfg.interfaces[entry.reply.interface].addr;
                let transport = leg.map_or(entry.reply.transport, |l| l.transport);
                format!("<sip:sbc@{iface};transport={}>", transport.uri_param())
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
        if let Some(c) = contact {
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
    fn respond_local(&mut self, now: Instant, skey: &ServerKey, code: u16) {
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
        let w = entry
            .ctx
            .write(code, reason_for(code), entry.to_tag.as_deref());
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
    fn verify(&mut self, source: SocketAddr) {
        if self.verified.len() >= MAX_VERIFIED_SOURCES && !self.verified.contains(&source) {
            self.verified.clear();
        }
        self.verified.insert(source);
    }

    fn remove_call(&mut self, id: u64) {
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

    // ----- timers ---------------------------------------------------------------------------

    fn push_timer(&mut self, at: Instant, target: TimerTarget) {
        let id = self.next_timer;
        self.next_timer += 1;
        self.timer_targets.insert(id, target);
        self.timers.push(Reverse((at, id)));
    }

    fn arm_server(&mut self, key: &ServerKey) {
        let Some(entry) = self.server.get_mut(key) else {
            return;
        };
        let next = entry.txn.poll_timeout();
        if next.is_some() && next != entry.armed {
            entry.armed = next;
            if let Some(at) = next {
                self.push_timer(at, TimerTarget::Server(key.clone()));
            }
        }
    }

    fn arm_client(&mut self, key: &ClientKey) {
        let Some(entry) = self.client.get_mut(key) else {
            return;
        };
        let next = match (entry.txn.poll_timeout(), entry.timer_c) {
            (Some(a), Some(c)) => Some(a.min(c)),
            (a, c) => a.or(c),
        };
        if next.is_some() && next != entry.armed {
            entry.armed = next;
            if let Some(at) = next {
                self.push_timer(at, TimerTarget::Client(key.clone()));
            }
        }
    }

    fn server_timeout(&mut self, now: Instant, key: ServerKey) {
        let Some(entry) = self.server.get_mut(&key) else {
            return;
        };
        if entry.armed.is_some_and(|a| a <= now) {
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
                // A 2xx that the caller never ACKed (timer L): end the call on both legs.
                if key.kind == TxKind::Invite && !acked {
                    if let Some(id) = call {
                        let confirmed = self.calls.get(&id).is_some_and(|c| {
                            c.invite_server.as_ref() == Some(&key)
                                && c.dialog.state == DialogState::Answered
                        });
                        if confirmed {
                            debug!("caller never ACKed the 2xx: hanging up");
                            self.tear_down(now, id);
                        }
                    }
                }
            }
        }
    }

    /// Ends a call on both legs with BYE (no caller ACK, or a fatal condition).
    fn tear_down(&mut self, now: Instant, id: u64) {
        let Some(call) = self.calls.get(&id) else {
            return;
        };
        let mut callee = call.dialog.callee.clone();
        let mut caller = call.dialog.caller.clone();
        if call.acks[side_index(Side::Callee)].is_none() {
            let ack = self.build_request(
                &callee,
                &Method::Ack,
                callee.last_invite_cseq,
                &new_branch(),
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

    fn client_timeout(&mut self, now: Instant, key: ClientKey) {
        let Some(entry) = self.client.get_mut(&key) else {
            return;
        };
        if entry.armed.is_some_and(|a| a <= now) {
            entry.armed = None;
        }
        // Timer C: the callee rang too long.
        if entry.timer_c.is_some_and(|c| c <= now) {
            entry.timer_c = None;
            let (server, call) = (entry.server.clone(), entry.call);
            self.cancel_client(now, &key);
            if let Some(id) = call {
                if let Some(c) = self.calls.get_mut(&id) {
                    c.cancelled = true;
                }
            }
            if let Some(skey) = server {
                self.stats.timeouts += 1;
                self.stats.calls_failed += 1;
                self.respond_local(now, &skey, 408);
            }
            self.arm_client(&key);
            return;
        }
        let action = match &mut entry.txn {
            ClientTxn::Invite(t) => t.handle_timeout(now),
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
                let Some(entry) = self.client.remove(&key) else {
                    return;
                };
                debug!(method = %entry.method, "next hop did not answer");
                if let Some(id) = entry.call {
                    let initial = self
                        .calls
                        .get(&id)
                        .is_some_and(|c| c.invite_client.as_ref() == Some(&key));
                    let cancelled = self.calls.get(&id).is_some_and(|c| c.cancelled);
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
                    self.respond_local(now, &skey, 408);
                }
            }
        }
    }
}

/// Methods the SBC relays or answers.
const ALLOW: &str = "INVITE, ACK, BYE, CANCEL, OPTIONS, UPDATE, INFO, MESSAGE, REGISTER, NOTIFY";

/// Whether an in-dialog request (or ACK) came from `leg`: its interface and transport, its
/// remote tag in the From, and a source the policy accepts for its peer.
fn leg_matches(cfg: &EngineConfig, leg: &Leg, inbound: &Inbound, msg: &SipMessage) -> bool {
    inbound.interface == leg.interface
        && inbound.transport == leg.transport
        && leg
            .remote_tag
            .as_deref()
            .is_none_or(|t| msg.from_tag() == Some(t))
        && cfg.source_matches(leg.transport, inbound.source, leg.peer)
}

fn side_index(side: Side) -> usize {
    match side {
        Side::Caller => 0,
        Side::Callee => 1,
    }
}

fn new_tag() -> String {
    format!("{:016x}", rand::random::<u64>())
}

fn new_branch() -> String {
    format!("{BRANCH_PREFIX}{:016x}", rand::random::<u64>())
}

fn strip_tag(v: &str) -> String {
    // Remove a ;tag= parameter from a From/To value, keeping other parameters.
    let split_at = v.rfind('>').map_or(0, |i| i + 1);
    let (head, tail) = v.split_at(split_at);
    let mut out = head.to_owned();
    for p in tail.split(';').filter(|p| !p.trim().is_empty()) {
        let name = p.split('=').next().unwrap_or("").trim();
        if !name.eq_ignore_ascii_case("tag") {
            out.push(';');
            out.push_str(p.trim());
        }
    }
    if head.is_empty() {
        // addr-spec form: the first segment is the URI itself.
        let mut parts = v.split(';');
        let uri = parts.next().unwrap_or("").trim().to_owned();
        let rest: Vec<&str> = parts
            .filter(|p| {
                !p.trim()
                    .split('=')
                    .next()
                    .unwrap_or("")
                    .eq_ignore_ascii_case("tag")
            })
            .collect();
        return std::iter::once(uri.as_str())
            .chain(rest)
            .collect::<Vec<_>>()
            .join(";");
    }
    out
}

fn via_sent_by(via: &str) -> &str {
    // "SIP/2.0/UDP host:port;params" -> "host:port"
    let after = via.split_whitespace().nth(1).unwrap_or("");
    after.split(';').next().unwrap_or("").trim()
}

fn server_key(msg: &SipMessage, method: &Method) -> Option<ServerKey> {
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

fn copy_end_to_end(w: &mut MessageWriter, headers: &[Header]) {
    for h in headers {
        if let HeaderName::Other(name) = &h.name {
            w.header(name, &h.value);
        }
    }
}

fn build_ack(ids: &RequestIds, resp: &SipMessage) -> Bytes {
    let mut w = MessageWriter::request(&Method::Ack, &ids.uri);
    w.header("Via", &ids.via);
    for r in &ids.routes {
        w.header("Route", r);
    }
    w.header("Max-Forwards", 70)
        .header("From", &ids.from)
        .header(
            "To",
            resp.header(&HeaderName::To).unwrap_or(ids.to.as_str()),
        )
        .header("Call-ID", &ids.call_id)
        .header("CSeq", format_args!("{} ACK", ids.cseq));
    w.finish(b"")
}

fn empty_message() -> SipMessage {
    SipMessage {
        start: crate::sip::message::StartLine::Request {
            method: Method::Bye,
            uri: String::new(),
        },
        headers: Vec::new(),
        body: Bytes::new(),
    }
}

/// The headers of a request that failed strict parsing, read leniently so it can get a 400.
struct LenientRequest {
    ctx: ResponseContext,
}

impl LenientRequest {
    fn scan(data: &[u8]) -> Option<Self> {
        let head_end = find_head_end(data).unwrap_or(data.len());
        let head = String::from_utf8_lossy(&data[..head_end]);
        let mut lines = head.lines();
        let start = lines.next()?;
        let mut words = start.split_whitespace();
        let method = words.next()?;
        if method.starts_with("SIP/") || !method.bytes().all(|b| b.is_ascii_uppercase()) {
            return None; // a response, or not a request line at all
        }
        let (mut vias, mut from, mut to, mut call_id, mut cseq) =
            (Vec::new(), None, None, None, None);
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim().to_owned();
            if value.is_empty() || value.len() > 1024 {
                continue;
            }
            match HeaderName::parse(name) {
                HeaderName::Via => vias.extend(split_list(&value).map(str::to_owned)),
                HeaderName::From => from = Some(value),
                HeaderName::To => to = Some(value),
                HeaderName::CallId => call_id = Some(value),
                HeaderName::CSeq => cseq = Some(value),
                _ => {}
            }
        }
        if vias.is_empty() {
            return None;
        }
        Some(Self {
            ctx: ResponseContext {
                vias,
                from: from?,
                to: to?,
                call_id: call_id?,
                cseq: cseq?,
            },
        })
    }
}

/// Answers a new request refused before it reached an engine (a full worker queue, or one that
/// waited too long in it) with `503 Service Unavailable` and `Retry-After`, statelessly from
/// the raw bytes: no parse and no transaction, so refusing costs far less than serving. `None`
/// when the bytes are not a request with the headers a response needs (or are an ACK, which is
/// never answered).
pub fn stateless_503(inbound: &Inbound, retry_after: u32) -> Option<Transmit> {
    if inbound.data.starts_with(b"ACK ") {
        return None;
    }
    let req = LenientRequest::scan(&inbound.data)?;
    let tag = new_tag();
    let mut w = req.ctx.write(503, reason_for(503), Some(&tag));
    w.header("Retry-After", retry_after.to_string());
    Some(Engine::reply_to(inbound).transmit(w.finish(b"")))
}

/// A Retry-After drawn at random in `[min, max]` (either order), so refused callers do not
/// retry in lockstep.
pub fn random_retry_after(min: u32, max: u32) -> u32 {
    let (lo, hi) = (min.min(max), max.max(min));
    lo + (rand::random::<u32>() % (hi - lo + 1))
}

#[cfg(test)]
mod tests;
