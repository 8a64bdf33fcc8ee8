//! The request path: a request received, matched to a transaction, a dialog or a new call, and
//! relayed on the other leg.

use std::time::Instant;

use bytes::Bytes;

use tracing::{debug, trace};

use super::build::{is_sips, strip_tag, via_sent_by};
use super::call::{Call, Lingering};
use super::config::{leg_matches, NextHop};
use super::ids::BRANCH_PREFIX;
use super::media::AnchorRefusal;
use super::refusal::{Admission, ALLOW};
use super::transactions::Purpose;
use super::transactions::{
    server_key, ClientEntry, ClientKey, ClientTxn, InviteProgress, RequestIds, ServerKey, ServerTxn,
};
use super::transmit::{Inbound, Transmit};
use super::Engine;
use crate::routing::board::AgentSession;
use crate::routing::router::{Attempt, RouteAgent, Router};
use crate::shard;
use crate::sip::dialog::{Dialog, DialogState, Leg, LegTransport, Side};
use crate::sip::message::{
    name_addr_uri, param, uri_host, uri_user, HeaderName, Method, SipMessage,
};
use crate::sip::transaction::{ClientInvite, ClientNonInvite, ServerRequest};
use crate::sip::uri::{display_name, UriParts};
use std::sync::Arc;

/// Where a new request goes.
#[derive(Debug)]
pub(super) enum Target {
    /// The route's candidates, in order, and the first one's session (an INVITE's).
    Agents(Vec<Attempt>, Option<AgentSession>),
    /// A registered phone, over its flow (the Request-URI was one of our registration
    /// Contacts).
    Phone(crate::registration::cache::Binding),
    /// The far end of one of our legs (an INVITE whose `Replaces` names that leg).
    Party(Box<Leg>),
}

impl Engine {
    pub(super) fn on_request(&mut self, now: Instant, inbound: &Inbound, msg: SipMessage) {
        self.stats.requests_in += 1;
        let Some(method) = msg.method().cloned() else {
            return;
        };
        if !msg.answerable() {
            self.stats.malformed_dropped += 1;
            self.trace_note("dropped: no Via, From, To, Call-ID or CSeq to answer with");
            debug!(source = %inbound.source, "request without Via/From/To/Call-ID/CSeq dropped");
            return;
        }
        if let Err(refusal) = msg.check_request(self.cfg.max_header_size) {
            if method != Method::Ack {
                self.stats.malformed_answered += 1;
                let reason = refusal.reason;
                self.trace_note_with(|| format!("refused {}: {reason}", refusal.code));
                debug!(source = %inbound.source, code = refusal.code, %reason, "malformed request answered");
                let warning = format!("399 sbc \"{}\"", reason.replace('"', "'"));
                self.answer(inbound, &msg, refusal.code, Some(("Warning", warning)));
            } else {
                self.trace_note_with(|| format!("dropped: {}", refusal.reason));
            }
            return;
        }
        let Some(key) = server_key(&msg, &method) else {
            self.stats.malformed_dropped += 1;
            self.trace_note("dropped: the top Via has no RFC 3261 branch");
            return;
        };

        if method == Method::Ack {
            self.trace_server(&key);
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
            self.trace_server(&key);
            self.trace_note("retransmission absorbed (answered from the transaction)");
            return;
        }

        let max_forwards = match msg.max_forwards() {
            None => 70,
            Some(Ok(n)) => n,
            Some(Err(())) => {
                self.stats.malformed_answered += 1;
                self.trace_note("refused 400: bad Max-Forwards");
                self.answer_warning(inbound, &msg, 400, "bad Max-Forwards");
                return;
            }
        };
        if max_forwards == 0 {
            self.trace_note("refused 483: Max-Forwards reached 0");
            self.answer(inbound, &msg, 483, None);
            return;
        }
        let mf = (max_forwards - 1).min(70);

        if let Some(to_tag) = msg.to_tag() {
            let found = msg.call_id().and_then(|c| self.find_dialog(c, to_tag));
            match found {
                Some((call, side)) => {
                    self.request_in_dialog(now, inbound, msg, key, call, side, mf)
                }
                None => {
                    self.trace_note("refused 481: no such dialog");
                    self.answer(inbound, &msg, 481, None);
                }
            }
            return;
        }

        // Loops are looked for out of dialog only: an in-dialog request of a hairpinned call
        // (a phone behind us calling another through the registrar) carries our own Via and
        // is matched to its dialog. A new request for a registered phone carries it too, its
        // Request-URI changed on the way: not a loop either (RFC 3261 section 16.3).
        let for_phone = self.cfg.registration.cache.is_some()
            && msg
                .request_uri()
                .and_then(crate::registration::message::token_of)
                .is_some();
        if !for_phone && self.is_loop(&msg) {
            self.trace_note("refused 482: loop (our own Via is in it)");
            self.answer(inbound, &msg, 482, None);
            return;
        }
        if self.admission == Admission::Drop {
            // Handing the service address over: the caller's retransmission reaches the next
            // active, which serves the call from its start. Before the shutdown's 503: a node
            // stopped while it hands over (an ineligible node restarted at once) must not
            // refuse calls its peer is about to serve.
            self.stats.handover_dropped += 1;
            self.trace_note("dropped: handing the service address over (a retransmission reaches the new active)");
            return;
        }
        if self.draining {
            self.stats.rejected_503 += 1;
            self.trace_note("refused 503: the node is shutting down");
            self.answer(inbound, &msg, 503, Some(("Retry-After", "5".into())));
            return;
        }
        if let Admission::Reject {
            retry_after_min,
            retry_after_max,
        } = self.admission
        {
            self.stats.rejected_503 += 1;
            self.trace_note("refused 503: overload (admission control)");
            let retry_after = self.ids.retry_after(retry_after_min, retry_after_max);
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
            self.trace_note("answered 200: an OPTIONS ping to the SBC itself");
            self.answer(inbound, &msg, 200, Some(("Allow", ALLOW.into())));
            return;
        }
        if matches!(method, Method::Prack | Method::Other(_)) {
            // A PRACK outside its early dialog, or a method this SBC does not know.
            self.trace_note("refused 501: method not relayed");
            self.answer(inbound, &msg, 501, Some(("Allow", ALLOW.into())));
            return;
        }
        let over = if matches!(method, Method::Invite | Method::Subscribe | Method::Refer) {
            // Subscriptions are held in the call table, and bounded with it.
            self.calls.len() >= self.cfg.max_calls
        } else {
            false
        } || self.server.len() + self.client.len() >= self.cfg.max_transactions;
        if over {
            // Configured limits, not memory, bound what a stranger can make us hold.
            self.stats.state_cap_503 += 1;
            self.trace_note("refused 503: max-calls or max-transactions reached");
            self.answer(inbound, &msg, 503, Some(("Retry-After", "5".into())));
            return;
        }
        if method != Method::Register && self.anonymous_refused(inbound) {
            self.stats.anonymous_refused += 1;
            self.trace_note("refused 403: allow-anonymous of the realm (not registered)");
            self.answer_warning(inbound, &msg, 403, "not registered");
            return;
        }
        if method == Method::Invite {
            if let Some(min_se) = self.interval_too_small(inbound, &msg) {
                self.stats.session_interval_too_small += 1;
                self.trace_note("refused 422: Session-Expires below the realm's min-se");
                self.answer(inbound, &msg, 422, Some(("Min-SE", min_se.to_string())));
                return;
            }
        }
        if method == Method::Register && self.cached_register(now, inbound, &msg, &key, mf) {
            return;
        }
        if self.request_for_phone(now, inbound, &msg, &key, mf) {
            return;
        }
        if method == Method::Invite {
            // Attended transfer, call pickup (RFC 3891): to the party of the call it replaces.
            if let Some(leg) = self.replaces_target(&msg) {
                let target = Target::Party(Box::new(leg));
                self.new_request_to(now, inbound, msg, None, key, target, mf);
                return;
            }
        }
        // `in-translationid` of the agent it comes from: a copy for routing and the next hop
        // (the caller's own From and To stay in what is echoed back to it).
        let translated = self.translate_inbound(inbound, &msg);
        self.route_new(now, inbound, msg, translated, key, mf);
    }

    /// Routes a new request to the first candidate of its route that may take it; false when
    /// it was answered instead (no route, no agent may take it, `sips:` rules).
    pub(super) fn route_new(
        &mut self,
        now: Instant,
        inbound: &Inbound,
        msg: SipMessage,
        translated: Option<SipMessage>,
        key: ServerKey,
        mf: u32,
    ) -> bool {
        let Some(method) = msg.method().cloned() else {
            return false;
        };
        let mut plan = self.plan_route(now, inbound, translated.as_ref().unwrap_or(&msg));
        if plan.is_empty() {
            self.trace_note("refused 404: no route from this realm");
            self.answer_warning(inbound, &msg, 404, "no route");
            return false;
        }
        // The first candidate whose agent takes it.
        let invite = method == Method::Invite;
        let mut session = None;
        let mut admitted = None;
        for (i, attempt) in plan.iter().enumerate() {
            if let Some(s) = self.admit_attempt(now, attempt, invite) {
                (session, admitted) = (s, Some(i));
                break;
            }
        }
        let Some(start) = admitted else {
            self.stats.no_agent_503 += 1;
            self.trace_note("refused 503: no session-agent of the route may take it now");
            self.answer(inbound, &msg, 503, Some(("Retry-After", "5".into())));
            return false;
        };
        plan.drain(..start);
        let router = Arc::clone(&self.cfg.router);
        let Some(first) = plan.first().and_then(|a| router.agent(a.agent)) else {
            return false;
        };
        if msg.request_uri().is_some_and(is_sips) {
            // RFC 3261 §26.2.2, RFC 5630 §3: a `sips:` request travels over TLS on every hop.
            let refusal = if inbound.transport != LegTransport::Tls {
                Some((
                    416,
                    "399 sbc \"sips: arrived over a transport other than TLS\"",
                ))
            } else if first.hop.transport != LegTransport::Tls {
                Some((
                    480,
                    "399 sbc \"sips: the next hop is not reached over TLS\"",
                ))
            } else {
                None
            };
            if let Some((code, warning)) = refusal {
                self.stats.sips_refused += 1;
                self.trace_note_with(|| format!("refused {code}: {warning}"));
                self.answer(inbound, &msg, code, Some(("Warning", warning.into())));
                return false;
            }
        }
        self.new_request_to(
            now,
            inbound,
            msg,
            translated,
            key,
            Target::Agents(plan, session),
            mf,
        );
        true
    }

    /// Sends a new request on to `target`: an INVITE as a call, a SUBSCRIBE or REFER as a
    /// subscription, anything else as a one-transaction exchange.
    #[allow(clippy::too_many_arguments)] // the request and where it goes
    pub(super) fn new_request_to(
        &mut self,
        now: Instant,
        inbound: &Inbound,
        msg: SipMessage,
        translated: Option<SipMessage>,
        key: ServerKey,
        target: Target,
        mf: u32,
    ) {
        match msg.method() {
            Some(Method::Invite) => self.new_call(now, inbound, msg, translated, key, target, mf),
            Some(Method::Subscribe | Method::Refer) => {
                self.new_subscription(now, inbound, msg, translated, key, target, mf);
            }
            _ => {
                let target = match target {
                    Target::Agents(plan, _) => Target::Agents(plan, None),
                    direct => direct,
                };
                self.standalone(now, inbound, msg, translated, key, target, mf);
            }
        }
    }

    pub(super) fn is_loop(&self, msg: &SipMessage) -> bool {
        msg.header_values(&HeaderName::Via).any(|v| {
            param(v, "branch").is_some_and(|b| b.starts_with(BRANCH_PREFIX))
                && self
                    .via_sent_by
                    .iter()
                    .any(|s| via_sent_by(v) == s.as_str())
        })
    }

    #[allow(clippy::too_many_arguments)] // the request and where it goes
    pub(super) fn new_call(
        &mut self,
        now: Instant,
        inbound: &Inbound,
        msg: SipMessage,
        translated: Option<SipMessage>,
        key: ServerKey,
        target: Target,
        mf: u32,
    ) {
        let router = Arc::clone(&self.cfg.router);
        let (plan, session, direct) = match target {
            Target::Agents(plan, session) => (plan, session, None),
            direct @ (Target::Phone(_) | Target::Party(_)) => (Vec::new(), None, Some(direct)),
        };
        let agent = plan
            .first()
            .and_then(|a| Some((a.agent, router.agent(a.agent)?)));
        if agent.is_none() && direct.is_none() {
            return;
        }
        let calls = &self.calls;
        let id = self.ids.call_id(|id| calls.contains_key(&id));
        let a_call_id = msg.call_id().unwrap_or_default().to_owned();
        let caller_tag = self.ids.tag();
        let caller = caller_leg(inbound, &msg, &caller_tag);
        let out_translation = agent.and_then(|(_, a)| self.cfg.router.outbound_translation(a));
        let mut callee = {
            let routed = translated.as_ref().unwrap_or(&msg);
            match (agent, &direct) {
                (Some((_, agent)), _) => {
                    let view = self.translate_outbound(out_translation.as_deref(), routed);
                    self.outbound_leg(&view, agent, 1)
                }
                (None, Some(Target::Phone(binding))) => self.phone_leg(routed, binding, 1),
                (None, Some(Target::Party(leg))) => self.party_leg(routed, leg, 1),
                (None, _) => return,
            }
        };
        // The caller's INVITE with credentials, after a challenge from this next hop: out on
        // the challenged leg's Call-ID and From tag with the next CSeq.
        let invite_cseq = self.onto_challenged_leg(now, &msg, &mut callee);
        let next_hop = match (agent, &direct) {
            (Some((_, a)), _) => a.hop.name.as_str(),
            (None, Some(Target::Party(_))) => "the party of the call it replaces",
            _ => "registered phone",
        };
        self.stats.calls_attempted += 1;
        self.stats.routed_new += 1;
        debug!(call_id = %a_call_id, b_call_id = %callee.call_id, next_hop, "new call");

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

        let dialog = Dialog {
            id,
            caller,
            callee,
            state: DialogState::Trying,
            created_unix: self.wall_clock.unix_secs_at(now),
            sdp_origin: [self.ids.sdp_session_id(), self.ids.sdp_session_id()],
            sdp_version: [(0, 0); 2],
            media: None,
            setup: None,
            subscription: None,
            session_timer: None,
            leg_timers: None,
            accounting: None,
        };
        self.dialogs.insert_call(&dialog);
        let mut call = Box::new(Call::inviting(dialog, key.clone()));
        call.agent_session = session;
        self.calls.insert(id, call);
        self.trace_call(id);
        let egress_agent = agent.map(|(_, a)| a.hop.name.clone()).unwrap_or_default();
        self.account_new_call(now, id, inbound, &egress_agent);
        let mut msg = msg;
        match self.anchor_body(now, id, Side::Caller, &msg) {
            Ok(Some(body)) => msg.body = body,
            Ok(None) => {}
            Err(refusal) => {
                let (code, extra) = match &refusal {
                    AnchorRefusal::Exhausted(_) => {
                        self.stats.media_ports_503 += 1;
                        (503, ("Retry-After", "5".to_owned()))
                    }
                    AnchorRefusal::BadSdp(_) => {
                        self.stats.media_sdp_refused += 1;
                        (488, ("Warning", refusal.warning()))
                    }
                };
                debug!(call_id = %a_call_id_log(&msg), code, ?refusal, "offer not anchored");
                self.trace_note_with(|| format!("refused {code}: offer not anchored: {refusal:?}"));
                self.stats.calls_failed += 1;
                self.account_end(now, id, code, sbc_accounting::EndedBy::Sbc);
                self.remove_call_quietly(id);
                self.respond_local_with(now, &key, code, Some(extra));
                return;
            }
        }
        // What goes to the agent: the request translated (in, then out), with the anchored
        // offer; and what a hunt re-sends to the next candidates (translated in only).
        let translated = translated.map(|mut t| {
            t.body = msg.body.clone();
            t
        });
        let routed = translated.as_ref().unwrap_or(&msg);
        // The realms' session timers: the callee's offered in our INVITE.
        let timed = self.offer_session_timers(id, &msg, routed);
        let routed = timed.as_ref().unwrap_or(routed);
        let sent = match out_translation.as_deref() {
            Some(t) => {
                let mut copy = routed.clone();
                // Counted once, when the callee leg was built from it.
                super::translate::translate(&mut copy, t);
                std::borrow::Cow::Owned(copy)
            }
            None => std::borrow::Cow::Borrowed(routed),
        };
        let msg = &*sent;
        let hop = agent.map(|(_, a)| &a.hop);
        if let (Some(call), Some(hop)) = (self.calls.get(&id), hop) {
            if self.over_udp_length(hop, &call.dialog.callee, &Method::Invite, msg, mf) {
                self.stats.udp_to_tcp += 1;
                if let Some(call) = self.calls.get_mut(&id) {
                    call.dialog.callee.transport = LegTransport::Tcp;
                }
            }
        }
        let ckey = self.send_on_leg(
            now,
            id,
            Side::Callee,
            &Method::Invite,
            invite_cseq,
            msg,
            mf,
            Some(key.clone()),
        );
        if let Some(call) = self.calls.get_mut(&id) {
            call.invite_sent(ckey.clone());
        }
        if let (Some(ckey), Some((index, agent))) = (&ckey, agent) {
            self.start_attempt(now, ckey, agent, router.handle(index));
        }
        self.start_hunt(&key, plan, routed, mf);
        // From here the callee may answer: the standby must be able to finish the set-up.
        self.replicate(id);
    }

    /// Whether the new request `msg`, relayed as `method` on `leg` toward `hop` (its first
    /// request, CSeq one), goes over TCP instead of UDP: the hop sets `max-udp-length` and the
    /// request as built exceeds it (RFC 3261 section 18.1.1). The size is measured with a
    /// branch of the real one's length; Via and Contact name the transport with as many bytes
    /// either way.
    pub(super) fn over_udp_length(
        &self,
        hop: &NextHop,
        leg: &Leg,
        method: &Method,
        msg: &SipMessage,
        mf: u32,
    ) -> bool {
        if hop.max_udp_length == 0 || leg.transport != LegTransport::Udp {
            return false;
        }
        let probe_branch = format!("{BRANCH_PREFIX}{:016x}", 0);
        self.build_request(leg, method, 1, &probe_branch, msg, mf)
            .len()
            > hop.max_udp_length
    }

    /// The leg toward `agent` for a new request `msg`: a fresh Call-ID carrying the shard key
    /// of the caller's (so both legs stay on this worker) and our tag. Domains are kept,
    /// addresses hidden: the Request-URI keeps the domain name the caller used (a registrar
    /// hosting several domains keys on it, and a digest response covers it), and an IP host
    /// there becomes the agent's `hostname` (default its address); From and To keep their
    /// display names, users and domain names, and an IP host there becomes our interface's
    /// address. A `tel:` Request-URI goes as `sip:<number>@<host>;user=phone`.
    pub(super) fn outbound_leg(
        &mut self,
        msg: &SipMessage,
        agent: &RouteAgent,
        invite_cseq: u32,
    ) -> Leg {
        let hop = &agent.hop;
        let to = (hop.interface, hop.transport, hop.addr);
        self.outbound_leg_to(msg, to, &agent.uri_host(), invite_cseq)
    }

    /// A leg for a new request `msg` toward `peer`, over `transport` from `interface` (see
    /// [`Engine::outbound_leg`]); an IP host of its Request-URI becomes `host`.
    pub(super) fn outbound_leg_to(
        &mut self,
        msg: &SipMessage,
        (interface, transport, peer): (usize, LegTransport, std::net::SocketAddr),
        ip_host: &str,
        invite_cseq: u32,
    ) -> Leg {
        let our_host = uri_host(self.cfg.interfaces[interface].addr.ip());
        let request_uri = msg.request_uri().unwrap_or_default();
        // A `sips:` request stays `sips:` (it is only routed over TLS, see `route_new`).
        let scheme = if is_sips(request_uri) { "sips" } else { "sip" };
        let target = UriParts::parse(request_uri);
        let host = target
            .and_then(|p| p.domain())
            .map_or_else(|| ip_host.to_owned(), str::to_owned);
        let uri = match target.and_then(|p| p.user) {
            Some(user) if target.is_some_and(|p| p.is_tel()) => {
                format!("{scheme}:{user}@{host};user=phone")
            }
            Some(user) => format!("{scheme}:{user}@{host}"),
            None => format!("{scheme}:{host}"),
        };
        let party = |value: &str, default_user: &str| -> String {
            let parts = UriParts::parse(name_addr_uri(value));
            let user = parts.and_then(|p| p.user).unwrap_or(default_user);
            let shown = display_name(value);
            if parts.is_some_and(|p| p.is_tel()) {
                return format!("{shown}<tel:{user}>");
            }
            let host = parts.and_then(|p| p.domain()).unwrap_or(&our_host);
            format!("{shown}<sip:{user}@{host}>")
        };
        let local_party = party(
            msg.header(&HeaderName::From).unwrap_or_default(),
            "anonymous",
        );
        let remote_party = match msg.header(&HeaderName::To) {
            Some(to) if UriParts::parse(name_addr_uri(to)).is_some_and(|p| p.user.is_some()) => {
                party(to, "")
            }
            _ => format!("<{uri}>"),
        };
        let a_call_id = msg.call_id().unwrap_or_default();
        Leg {
            interface,
            transport,
            peer,
            call_id: self
                .ids
                .b2b_call_id(shard::call_id_key(a_call_id.as_bytes())),
            local_tag: self.ids.tag(),
            remote_tag: None,
            local_party,
            remote_party,
            remote_target: uri,
            route_set: Vec::new(),
            local_cseq: 1,
            last_invite_cseq: invite_cseq,
        }
    }

    /// A leg for a new request `msg` toward the far end of `far` (one of our legs): its
    /// address, transport, target and route set.
    pub(super) fn party_leg(&mut self, msg: &SipMessage, far: &Leg, invite_cseq: u32) -> Leg {
        let host = uri_host(far.peer.ip());
        let mut leg = self.outbound_leg_to(
            msg,
            (far.interface, far.transport, far.peer),
            &host,
            invite_cseq,
        );
        leg.remote_target.clone_from(&far.remote_target);
        leg.route_set.clone_from(&far.route_set);
        leg
    }

    /// The callee leg of a new non-INVITE request `routed` (`method`) to `target`, and the
    /// request as it goes out (translated for the first agent); over TCP when it exceeds the
    /// agent's `max-udp-length`. `None` when the route names no agent.
    pub(super) fn new_request_leg<'r>(
        &mut self,
        router: &'r Router,
        routed: &SipMessage,
        target: Target,
        method: &Method,
        mf: u32,
    ) -> Option<NewLeg<'r>> {
        let mut new = match target {
            Target::Agents(plan, _) => {
                let (index, agent) = plan
                    .first()
                    .and_then(|a| Some((a.agent, router.agent(a.agent)?)))?;
                let out = router.outbound_translation(agent);
                let sent = self.translate_outbound(out.as_deref(), routed).into_owned();
                let leg = self.outbound_leg(&sent, agent, 0);
                NewLeg {
                    plan,
                    leg,
                    sent,
                    agent: Some((index, agent)),
                }
            }
            Target::Phone(binding) => NewLeg {
                plan: Vec::new(),
                leg: self.phone_leg(routed, &binding, 0),
                sent: routed.clone(),
                agent: None,
            },
            Target::Party(far) => NewLeg {
                plan: Vec::new(),
                leg: self.party_leg(routed, &far, 0),
                sent: routed.clone(),
                agent: None,
            },
        };
        if let Some((_, agent)) = new.agent {
            if self.over_udp_length(&agent.hop, &new.leg, method, &new.sent, mf) {
                self.stats.udp_to_tcp += 1;
                new.leg.transport = LegTransport::Tcp;
            }
        }
        Some(new)
    }

    /// Relays an out-of-dialog non-INVITE request (OPTIONS, MESSAGE, REGISTER, ...) as a
    /// one-transaction B2BUA exchange.
    #[allow(clippy::too_many_arguments)] // the request, its translated copy and its route
    pub(super) fn standalone(
        &mut self,
        now: Instant,
        inbound: &Inbound,
        msg: SipMessage,
        translated: Option<SipMessage>,
        key: ServerKey,
        target: Target,
        mf: u32,
    ) {
        let router = Arc::clone(&self.cfg.router);
        let method = msg.method().cloned().unwrap_or(Method::Options);
        let routed = translated.as_ref().unwrap_or(&msg);
        let Some(NewLeg {
            plan,
            mut leg,
            sent,
            agent,
        }) = self.new_request_leg(&router, routed, target, &method, mf)
        else {
            return;
        };
        let (sent, cseq) = self.register_view(&key, &mut leg, sent);
        self.stats.routed_new += 1;
        self.trace_exchange(msg.call_id().unwrap_or_default(), &leg.call_id);
        let tag = self.ids.tag();
        self.new_server(&key, inbound, &msg, false, Some(tag), None);
        let ckey = self.send_request(
            now,
            &leg,
            None,
            Side::Callee,
            &method,
            cseq,
            &sent,
            mf,
            Some(key.clone()),
        );
        if let Some((index, agent)) = agent {
            self.start_attempt(now, &ckey, agent, router.handle(index));
        }
        self.start_hunt(&key, plan, routed, mf);
    }

    #[allow(clippy::too_many_arguments)] // the request and where it goes, all needed
    pub(super) fn request_in_dialog(
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
        self.trace_call(id);
        let Some(call) = self.calls.get_mut(&id) else {
            self.trace_note("refused 481: no such dialog");
            self.answer(inbound, &msg, 481, None);
            return;
        };
        if !leg_matches(&self.cfg, call.dialog.leg(side), inbound, &msg) {
            self.stats.leg_mismatch += 1;
            debug!(source = %inbound.source, call_id = %call.dialog.caller.call_id, "in-dialog request not from its leg: 481");
            self.trace_note(
                "refused 481: not from the dialog's leg (interface, transport, source or tag)",
            );
            self.answer(inbound, &msg, 481, None);
            return;
        }
        self.verify(inbound.source);
        if method == Method::Refer
            && self.performs_transfers(inbound)
            && self.perform_transfer(now, inbound, &msg, key.clone(), id, side, mf)
        {
            return;
        }
        if method == Method::Bye && self.transferor_hangs_up(now, inbound, &msg, &key, id, side) {
            return;
        }
        let mut msg = msg;
        let before = matches!(method, Method::Invite | Method::Update)
            .then(|| self.media_before_offer(id, &msg))
            .flatten();
        match self.anchor_body(now, id, side, &msg) {
            Ok(Some(body)) => msg.body = body,
            Ok(None) => {}
            Err(refusal) => {
                self.stats.media_sdp_refused += 1;
                debug!(source = %inbound.source, ?refusal, "in-dialog offer not anchored: 488");
                self.trace_note_with(|| format!("refused 488: offer not anchored: {refusal:?}"));
                self.answer(inbound, &msg, 488, Some(("Warning", refusal.warning())));
                return;
            }
        }
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
        if matches!(
            method,
            Method::Invite | Method::Update | Method::Subscribe | Method::Notify
        ) {
            // Target refreshes (RFC 3261 section 12.2, RFC 6665 section 4.1.2.4 and 4.2.1.1).
            if let Some(target) = msg.contact_uri() {
                call.dialog.leg_mut(side).remote_target = target.to_owned();
            }
        }
        if call.dialog.subscription.is_some() {
            self.subscription_request(id, side, &msg);
        }
        if method == Method::Refer {
            self.translate_refer(id, side, &mut msg);
        }
        if method == Method::Notify {
            self.translate_dialog_info(&mut msg);
        }
        if matches!(method, Method::Invite | Method::Update) {
            // A refresh names the timer of the leg it goes out on, when the SBC runs them.
            self.leg_timer_headers(id, side.other(), &mut msg, true);
        }
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        if method == Method::Bye {
            call.dialog.state = DialogState::Terminating;
            debug!(call_id = %call.dialog.caller.call_id, from = ?side, "BYE");
            self.account_end(now, id, 200, Self::ended_by_side(side));
        }
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
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
        let sent = self.send_on_leg(now, id, side.other(), &method, cseq, &msg, mf, Some(key));
        if let (Some(before), Some(ckey), Some(call)) = (before, sent, self.calls.get_mut(&id)) {
            call.offer_undo = Some(Box::new((ckey, before)));
        }
        // CSeq and targets moved on: the standby must continue from here.
        self.replicate(id);
    }

    /// An ACK that matched no server transaction: the ACK for a 2xx, relayed end to end.
    pub(super) fn ack_in_dialog(&mut self, now: Instant, inbound: &Inbound, msg: &SipMessage) {
        let found = match (msg.call_id(), msg.to_tag()) {
            (Some(c), Some(t)) => self.find_dialog(c, t),
            _ => None,
        };
        let Some((id, side)) = found else {
            trace!("stray ACK dropped");
            self.trace_note("dropped: an ACK for no dialog");
            return;
        };
        self.trace_call(id);
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        if !leg_matches(&self.cfg, call.dialog.leg(side), inbound, msg) {
            self.stats.leg_mismatch += 1;
            self.trace_note("dropped: an ACK not from the dialog's leg");
            debug!(source = %inbound.source, "ACK not from its leg dropped");
            return;
        }
        let leg = call.dialog.leg(side.other()).clone();
        self.verify(inbound.source);
        let branch = self.ids.branch();
        let anchored = match self.anchor_body(now, id, side, msg) {
            Ok(body) => body,
            Err(refusal) => {
                // An ACK cannot be refused: its answer is dropped rather than passed unanchored.
                self.stats.media_sdp_refused += 1;
                debug!(
                    ?refusal,
                    "answer in an ACK not anchored: relayed without it"
                );
                Some(Bytes::new())
            }
        };
        let answered = anchored.as_ref().is_some_and(|b| !b.is_empty());
        let payload = match anchored {
            Some(body) => {
                let mut with = msg.clone();
                with.body = body;
                if with.body.is_empty() {
                    with.headers.retain(|h| !is_content_type(h));
                }
                self.build_request(&leg, &Method::Ack, leg.last_invite_cseq, &branch, &with, 70)
            }
            None => self.build_request(&leg, &Method::Ack, leg.last_invite_cseq, &branch, msg, 70),
        };
        let tx = Transmit {
            interface: leg.interface,
            transport: leg.transport,
            dest: leg.peer,
            payload,
        };
        if let Some(call) = self.calls.get_mut(&id) {
            call.set_ack(side.other(), tx.clone());
            self.lingering
                .push_back((now + self.cfg.timers.t64(), Lingering::ForgetAcks(id)));
            if side == Side::Caller && call.confirm() {
                debug!(call_id = %call.dialog.caller.call_id, "call confirmed");
                self.replicate(id);
                // Its life limit counts from here on.
                self.arm_session(now, id);
            } else if answered {
                // An answer in the ACK of a re-INVITE: the standby must have it.
                self.replicate(id);
            }
        }
        self.out.push_back(tx);
    }

    /// Sends `orig` re-issued on leg `side` of call `id`; returns the client transaction key.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send_on_leg(
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
    pub(super) fn send_request(
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
        let branch = self.ids.branch();
        let payload = self.build_request(leg, method, cseq, &branch, orig, mf);
        let addr = self.cfg.interfaces[leg.interface].addr_for(leg.transport);
        let tx = Transmit {
            interface: leg.interface,
            transport: leg.transport,
            dest: leg.peer,
            payload: payload.clone(),
        };
        let reliable = leg.transport.reliable();
        let txn = if *method == Method::Invite {
            ClientTxn::Invite(
                ClientInvite::new(now, self.cfg.timers, reliable),
                InviteProgress::new(now + self.cfg.timer_c),
            )
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
        let key = ClientKey::request(branch);
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
                armed: None,
                attempt_expires: None,
                agent: None,
                purpose: Purpose::Relay,
            },
        );
        self.arm_client(&key);
        self.out.push_back(tx);
        key
    }
}

/// The callee leg of a new non-INVITE request, and what goes out on it.
pub(super) struct NewLeg<'r> {
    /// The route's candidates (empty toward a registered phone).
    pub(super) plan: Vec<Attempt>,
    /// The leg toward the first candidate or the phone.
    pub(super) leg: Leg,
    /// The request as it goes out (the agent's outbound translation applied).
    pub(super) sent: SipMessage,
    /// The first candidate's index and agent, when routed to agents.
    pub(super) agent: Option<(usize, &'r RouteAgent)>,
}

/// The caller's leg of a new dialog made by `msg` (INVITE, SUBSCRIBE, REFER) from `inbound`,
/// our tag toward it `caller_tag`: its Call-ID and tag, the parties as it wrote them, its
/// Contact as the target, its Record-Route as the route set (RFC 3261 section 12.1.1).
pub(super) fn caller_leg(inbound: &Inbound, msg: &SipMessage, caller_tag: &str) -> Leg {
    let from = msg.header(&HeaderName::From).unwrap_or_default();
    let to = msg.header(&HeaderName::To).unwrap_or_default();
    Leg {
        interface: inbound.interface,
        transport: inbound.transport,
        peer: inbound.source,
        call_id: msg.call_id().unwrap_or_default().to_owned(),
        local_tag: caller_tag.to_owned(),
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
    }
}

fn a_call_id_log(msg: &SipMessage) -> &str {
    msg.call_id().unwrap_or_default()
}

/// Whether `h` is the Content-Type header (dropped with a body that is not relayed).
pub(super) fn is_content_type(h: &crate::sip::message::Header) -> bool {
    matches!(&h.name, HeaderName::Other(n) if n.eq_ignore_ascii_case("content-type") || n.eq_ignore_ascii_case("c"))
}
