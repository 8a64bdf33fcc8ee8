//! The call flows: one task per call, fed the call's messages by [`super::net::Endpoint`].
//!
//! ```text
//!  UAC                                  UAS
//!   INVITE (timer A on UDP, B) ───────▶
//!   ◀─────────────── 100, 180 (ring time)
//!   ◀──────── 200 (re-sent T1, 2T1 … ≤T2 until ACK, for 64·T1)
//!   ACK ─────────────────────────────▶
//!         … hold time …
//!   BYE (timer E on UDP, F) ─────────▶   (or from the UAS, with `bye_from = callee`)
//!   ◀──────────────────────────── 200
//! ```
//! After its end a call lingers 64·T1 on UDP (0 on TCP) to answer retransmissions from state.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;
use tokio::time::{timeout_at, Instant};

use super::media::MediaPlan;
use super::msg::{name_addr_uri, response_to, strip_tag, Writer};
use super::net::{tls_error, Endpoint, Incoming, Peer, Refusal};
use super::stats::FailureReason;
use super::{ByeFrom, Timers, Transport, UacConfig, UasConfig};

const USER_AGENT: &str = "sbc-lab";

pub(crate) fn random_token() -> String {
    format!("{:016x}", rand::random::<u64>())
}

fn new_branch() -> String {
    format!("z9hG4bKlab{}", random_token())
}

fn via(ep: &Endpoint, branch: &str) -> String {
    format!(
        "SIP/2.0/{} {};branch={branch};rport",
        ep.transport.via_token(),
        ep.local()
    )
}

fn contact(ep: &Endpoint) -> String {
    match ep.transport {
        Transport::Udp => format!("<sip:lab@{}>", ep.local()),
        Transport::Tcp => format!("<sip:lab@{};transport=tcp>", ep.local()),
        Transport::Tls => format!("<sip:lab@{};transport=tls>", ep.local()),
    }
}

fn sdp(ep: &Endpoint) -> String {
    let ip = ep.local().ip();
    let kind = if ip.is_ipv4() { "IP4" } else { "IP6" };
    let port = 20_000 + (rand::random::<u16>() % 10_000) * 2;
    format!(
        "v=0\r\no=lab 1 1 IN {kind} {ip}\r\ns=sbc-lab\r\nc=IN {kind} {ip}\r\nt=0 0\r\nm=audio {port} RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
    )
}

/// The address of a SIP URI (or name-addr) whose host is an IPv4 literal (port 5060 if none).
fn uri_addr(uri: &str) -> Option<std::net::SocketAddr> {
    let uri = name_addr_uri(uri);
    let rest = uri.split_once(':')?.1;
    let host_port = rest.split_once('@').map_or(rest, |(_, h)| h);
    let host_port = host_port.split([';', '?']).next()?;
    let (host, port) = host_port.split_once(':').unwrap_or((host_port, "5060"));
    Some(std::net::SocketAddr::new(
        host.parse().ok()?,
        port.parse().ok()?,
    ))
}

async fn recv_until(rx: &mut UnboundedReceiver<Incoming>, deadline: Instant) -> Option<Incoming> {
    timeout_at(deadline, rx.recv()).await.ok().flatten()
}

/// As [`recv_until`] while a request is out on a connection: `Err` if TLS refuses that
/// connection first.
async fn recv_or_refused(
    rx: &mut UnboundedReceiver<Incoming>,
    deadline: Instant,
    refusal: &mut Option<Refusal>,
) -> Result<Option<Incoming>, FailureReason> {
    let refused = async {
        match refusal {
            Some(r) => r.refused().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        got = recv_until(rx, deadline) => Ok(got),
        () = refused => Err(FailureReason::Tls),
    }
}

/// The reason a send failed: TLS's, or the transport's.
fn send_failure(e: &std::io::Error) -> FailureReason {
    if tls_error(e).is_some() {
        FailureReason::Tls
    } else {
        FailureReason::Transport
    }
}

/// The state of one established dialog, from our side.
struct Dialog {
    call_id: String,
    local_tag: String,
    remote_tag: String,
    /// Our From/To value without tag.
    local_party: String,
    remote_party: String,
    remote_target: String,
    route_set: Vec<String>,
    local_cseq: u32,
    /// Where in-dialog requests go.
    peer: Peer,
}

/// How a call ended.
enum End {
    Completed,
    Failed(FailureReason),
}

/// What a call keeps answering from state while it lingers.
#[derive(Default)]
struct Replay {
    /// Our ACK, re-sent for each retransmitted 2xx (UAC) or each retransmitted non-2xx final.
    ack: Option<Bytes>,
    /// Our final response to the INVITE, re-sent for a retransmitted INVITE (UAS).
    invite_final: Option<Bytes>,
    /// Our 200 to the peer's BYE.
    bye_ok: Option<Bytes>,
}

struct Call {
    ep: Arc<Endpoint>,
    timers: Timers,
    rx: UnboundedReceiver<Incoming>,
    replay: Replay,
    /// A UAC's [`super::Uac::hang_up`]: ends the hold early.
    release: Option<watch::Receiver<bool>>,
}

impl Call {
    async fn send(&self, peer: &Peer, data: Bytes) -> Result<(), FailureReason> {
        self.send_request(peer, data).await.map(drop)
    }

    /// Sends a request whose answer we wait for: returns the [`Refusal`] of the connection
    /// it went on, for [`recv_or_refused`].
    async fn send_request(
        &self,
        peer: &Peer,
        data: Bytes,
    ) -> Result<Option<Refusal>, FailureReason> {
        self.ep
            .send_watched(peer, data)
            .await
            .map_err(|e| send_failure(&e))
    }

    /// Sends an in-dialog request of `d`. Over TCP or TLS, if the connection the dialog came
    /// on is gone (a UAS whose caller's node died), one is opened to the dialog's next hop
    /// (its first Route, else its remote target, which must name an IP) and the dialog moves
    /// to it.
    async fn send_in_dialog(
        &self,
        d: &mut Dialog,
        data: Bytes,
    ) -> Result<Option<Refusal>, FailureReason> {
        let first = self.send_request(&d.peer.clone(), data.clone()).await;
        if first.is_ok() || !matches!(d.peer, Peer::Tcp(_)) {
            return first;
        }
        let next = d.route_set.first().unwrap_or(&d.remote_target);
        let addr = uri_addr(next).ok_or(FailureReason::Transport)?;
        let conn = self.ep.tcp_to(addr).await.map_err(|e| send_failure(&e))?;
        d.peer = Peer::Tcp(conn);
        self.send_request(&d.peer.clone(), data).await
    }

    fn reliable(&self) -> bool {
        self.ep.transport != Transport::Udp
    }

    /// Answers a message from state if it is a retransmission we know; returns whether it
    /// was one.
    async fn replay(&self, inc: &Incoming) -> bool {
        let msg = &inc.msg;
        let stats = &self.ep.stats;
        let replay = match (msg.method(), msg.code(), msg.cseq()) {
            // A retransmitted final response to our INVITE: our ACK again, to the target.
            (None, Some(code), Some((_, "INVITE"))) if code >= 200 => {
                self.replay.ack.clone().map(|a| (a, Peer::Target))
            }
            (Some("INVITE"), _, _) if msg.tag_of_to().is_none() => self
                .replay
                .invite_final
                .clone()
                .map(|r| (r, inc.peer.clone())),
            (Some("BYE"), _, _) => self.replay.bye_ok.clone().map(|r| (r, inc.peer.clone())),
            _ => None,
        };
        match replay {
            Some((data, peer)) => {
                stats.absorbed();
                let _ = self.ep.send(&peer, data).await;
                true
            }
            None => false,
        }
    }

    /// Keeps answering retransmissions for 64·T1 on UDP, then forgets the call.
    async fn linger(mut self, call_id: &str) {
        if !self.reliable() {
            let until = Instant::now() + self.timers.t1 * 64;
            while let Some(inc) = recv_until(&mut self.rx, until).await {
                if !self.replay(&inc).await {
                    self.ep.stats.stray();
                }
            }
        }
        self.ep.unregister(call_id);
    }

    /// A request inside `d` (BYE, ACK).
    fn request(&self, d: &Dialog, method: &str, cseq: u32, branch: &str) -> Bytes {
        let mut w = Writer::request(method, &d.remote_target);
        w.header("Via", via(&self.ep, branch));
        for r in &d.route_set {
            w.header("Route", r);
        }
        w.header("Max-Forwards", 70)
            .header(
                "From",
                format_args!("{};tag={}", d.local_party, d.local_tag),
            )
            .header(
                "To",
                format_args!("{};tag={}", d.remote_party, d.remote_tag),
            )
            .header("Call-ID", &d.call_id)
            .header("CSeq", format_args!("{cseq} {method}"))
            .header("User-Agent", USER_AGENT);
        w.finish(b"")
    }

    /// Answers requests that arrive in an established dialog: BYE → 200 (returns true),
    /// retransmissions from state, anything else 501.
    async fn in_dialog(&mut self, inc: Incoming, d: &Dialog) -> bool {
        if self.replay(&inc).await {
            return false;
        }
        match inc.msg.method() {
            Some("BYE") => {
                let ok = response_to(&inc.msg, 200, None).finish(b"");
                self.replay.bye_ok = Some(ok.clone());
                let _ = self.send(&inc.peer, ok).await;
                true
            }
            Some("ACK") | None => false,
            Some(_) => {
                let _ = d;
                let r = response_to(&inc.msg, 501, None).finish(b"");
                let _ = self.send(&inc.peer, r).await;
                false
            }
        }
    }

    /// The next message before `deadline`; `None` at the deadline, or at once when we hang
    /// up and the UAC was told to hang up now.
    async fn recv_in_hold(&mut self, deadline: Instant, we_hang_up: bool) -> Option<Incoming> {
        let rx = &mut self.rx;
        let Some(release) = self.release.as_mut().filter(|_| we_hang_up) else {
            return recv_until(rx, deadline).await;
        };
        loop {
            if *release.borrow_and_update() {
                return None;
            }
            tokio::select! {
                got = recv_until(rx, deadline) => return got,
                changed = release.changed() => {
                    if changed.is_err() {
                        // The UAC is gone: no hang-up will come.
                        return recv_until(rx, deadline).await;
                    }
                }
            }
        }
    }

    /// The established part of a call: hold, then BYE from us or from the peer.
    async fn converse(
        &mut self,
        d: &mut Dialog,
        hold: Duration,
        we_hang_up: bool,
        bye_wait: Duration,
    ) -> End {
        let hold_end = Instant::now() + hold;
        let wait_end = if we_hang_up {
            hold_end
        } else {
            hold_end + bye_wait
        };
        while let Some(inc) = self.recv_in_hold(wait_end, we_hang_up).await {
            if self.in_dialog(inc, d).await {
                return End::Completed;
            }
        }
        d.local_cseq += 1;
        let cseq = d.local_cseq;
        let branch = new_branch();
        let bye = self.request(d, "BYE", cseq, &branch);
        let mut refusal = match self.send_in_dialog(d, bye.clone()).await {
            Ok(r) => r,
            Err(reason) => return End::Failed(reason),
        };
        if !we_hang_up {
            // The peer never hung up: our BYE cleans up, the call has failed anyway.
            return End::Failed(FailureReason::NoBye);
        }
        // Non-INVITE client transaction: timer E (UDP) and F.
        let start = Instant::now();
        let timer_f = start + self.timers.t1 * 64;
        let mut interval = self.timers.t1;
        let mut next_e = start + interval;
        let mut peer_hung_up = false;
        loop {
            let deadline = if self.reliable() {
                timer_f
            } else {
                next_e.min(timer_f)
            };
            let got = match recv_or_refused(&mut self.rx, deadline, &mut refusal).await {
                Ok(got) => got,
                Err(reason) => return End::Failed(reason),
            };
            match got {
                None if Instant::now() >= timer_f => {
                    return if peer_hung_up {
                        End::Completed
                    } else {
                        End::Failed(FailureReason::ByeTimeout)
                    };
                }
                None => {
                    interval = (interval * 2).min(self.timers.t2);
                    next_e = Instant::now() + interval;
                    self.ep.stats.retransmitted();
                    match self.send_in_dialog(d, bye.clone()).await {
                        Ok(r) => refusal = r,
                        Err(reason) => return End::Failed(reason),
                    }
                }
                Some(inc) => {
                    let ours = inc.msg.code().is_some()
                        && inc.msg.cseq() == Some((cseq, "BYE"))
                        && inc.msg.branch() == Some(branch.as_str());
                    match inc.msg.code() {
                        Some(code) if ours && code >= 200 => {
                            return if (200..300).contains(&code) || peer_hung_up {
                                End::Completed
                            } else {
                                End::Failed(FailureReason::ByeRejected(code))
                            };
                        }
                        Some(code) if ours && code < 200 => {
                            // Proceeding: retransmit at T2.
                            interval = self.timers.t2;
                        }
                        _ => {
                            if self.in_dialog(inc, d).await {
                                // Both hung up at once; the peer's BYE got our 200.
                                peer_hung_up = true;
                            }
                        }
                    }
                }
            }
        }
    }
}

fn bump_end(ep: &Endpoint, end: &End) {
    match end {
        End::Completed => ep.stats.completed(),
        End::Failed(r) => ep.stats.failed(*r),
    }
}

/// What every call of one UAC shares.
pub(crate) struct UacCall {
    pub(crate) ep: Arc<Endpoint>,
    pub(crate) cfg: Arc<UacConfig>,
    pub(crate) media: Option<Arc<MediaPlan>>,
    pub(crate) release: watch::Receiver<bool>,
}

/// One UAC call: INVITE, ACK, hold, BYE. `done` is dropped when the call has ended (before it
/// lingers).
pub(crate) async fn uac_call<D: Send>(uac: UacCall, n: u64, done: D) {
    let UacCall {
        ep,
        cfg,
        media,
        release,
    } = uac;
    let call_id = format!("{}-{n}@sbc-lab", random_token());
    let rx = ep.register(&call_id);
    let mut call = Call {
        ep: ep.clone(),
        timers: cfg.timers,
        rx,
        replay: Replay::default(),
        release: Some(release),
    };
    let stats = ep.stats.clone();
    stats.attempted();
    let from_tag = random_token();
    let branch = new_branch();
    let ruri = format!("sip:{}@{}", cfg.to_user, cfg.target);
    let local_party = format!("<sip:{}@{}>", cfg.from_user, ep.local().ip());
    let to = format!("<{ruri}>");
    let offer = media.as_ref().and_then(|m| m.offer());
    let body = match &offer {
        Some((_, sdp)) => sdp.clone(),
        None => sdp(&ep),
    };
    let mut w = Writer::request("INVITE", &ruri);
    w.header("Via", via(&ep, &branch))
        .header("Max-Forwards", 70)
        .header("From", format_args!("{local_party};tag={from_tag}"))
        .header("To", &to)
        .header("Call-ID", &call_id)
        .header("CSeq", "1 INVITE")
        .header("Contact", contact(&ep))
        .header("User-Agent", USER_AGENT)
        .header("Content-Type", "application/sdp");
    let invite = w.finish(body.as_bytes());

    let end = 'call: {
        let t0 = Instant::now();
        let mut refusal = match call.send_request(&Peer::Target, invite.clone()).await {
            Ok(r) => r,
            Err(r) => break 'call End::Failed(r),
        };
        // Client INVITE transaction: timer A (UDP) until any response, timer B until a
        // provisional one, then the answer timeout.
        let timer_b = t0 + cfg.timers.t1 * 64;
        let mut interval = cfg.timers.t1;
        let mut next_a = t0 + interval;
        let mut first_response = false;
        let mut answer_deadline = None;
        let ok = loop {
            let deadline = match answer_deadline {
                Some(d) => d,
                None if call.reliable() => timer_b,
                None => next_a.min(timer_b),
            };
            let got = match recv_or_refused(&mut call.rx, deadline, &mut refusal).await {
                Ok(got) => got,
                Err(r) => break 'call End::Failed(r),
            };
            let Some(inc) = got else {
                if answer_deadline.is_some() || Instant::now() >= timer_b {
                    break 'call End::Failed(FailureReason::Timeout);
                }
                interval *= 2;
                next_a = Instant::now() + interval;
                stats.retransmitted();
                match call.send_request(&Peer::Target, invite.clone()).await {
                    Ok(r) => refusal = r,
                    Err(r) => break 'call End::Failed(r),
                }
                continue;
            };
            let msg = inc.msg;
            let is_ours = msg.cseq() == Some((1, "INVITE"));
            match msg.code() {
                Some(code) if is_ours => {
                    if !first_response {
                        first_response = true;
                        stats.first_response(t0.elapsed());
                    }
                    if code < 200 {
                        answer_deadline.get_or_insert(Instant::now() + cfg.answer_timeout);
                    } else if code < 300 {
                        stats.ok_response(t0.elapsed());
                        break msg;
                    } else {
                        // Non-2xx final: ACK in the transaction (same branch), then absorb
                        // its retransmissions while lingering.
                        let mut w = Writer::request("ACK", &ruri);
                        w.header("Via", via(&ep, &branch))
                            .header("Max-Forwards", 70)
                            .header("From", format_args!("{local_party};tag={from_tag}"))
                            .header("To", msg.header("to").unwrap_or(&to))
                            .header("Call-ID", &call_id)
                            .header("CSeq", "1 ACK");
                        let ack = w.finish(b"");
                        call.replay.ack = Some(ack.clone());
                        let _ = call.send(&Peer::Target, ack).await;
                        break 'call End::Failed(FailureReason::ErrorResponse(code));
                    }
                }
                Some(_) => stats.stray(),
                None => {
                    // No request belongs to a call that is not answered yet.
                    stats.stray();
                    if msg.method() != Some("ACK") {
                        let r = response_to(&msg, 481, None).finish(b"");
                        let _ = call.send(&inc.peer, r).await;
                    }
                }
            }
        };
        let Some(remote_tag) = ok.tag_of_to() else {
            break 'call End::Failed(FailureReason::Unexpected);
        };
        if let (Some(plan), Some((slot, _))) = (&media, &offer) {
            plan.answered(*slot, &ok.body);
        }
        let mut d = Dialog {
            call_id: call_id.clone(),
            local_tag: from_tag.clone(),
            remote_tag: remote_tag.to_owned(),
            local_party: local_party.clone(),
            remote_party: strip_tag(ok.header("to").unwrap_or(&to)),
            remote_target: ok.contact_uri().unwrap_or_else(|| ruri.clone()),
            route_set: ok
                .header_values("record-route")
                .into_iter()
                .rev()
                .map(str::to_owned)
                .collect(),
            local_cseq: 1,
            peer: Peer::Target,
        };
        let ack = call.request(&d, "ACK", 1, &new_branch());
        call.replay.ack = Some(ack.clone());
        if let Err(r) = call.send(&Peer::Target, ack).await {
            break 'call End::Failed(r);
        }
        stats.answered();
        stats.established();
        let end = call
            .converse(
                &mut d,
                cfg.hold,
                cfg.bye_from == ByeFrom::Caller,
                cfg.bye_wait,
            )
            .await;
        stats.released();
        end
    };
    bump_end(&ep, &end);
    drop(done);
    call.linger(&call_id).await;
}

/// One UAS call, from its first INVITE.
pub(crate) async fn uas_call(
    ep: Arc<Endpoint>,
    cfg: Arc<UasConfig>,
    media: Option<Arc<MediaPlan>>,
    call_id: String,
    rx: UnboundedReceiver<Incoming>,
) {
    let mut call = Call {
        ep: ep.clone(),
        timers: cfg.timers,
        rx,
        replay: Replay::default(),
        release: None,
    };
    let stats = ep.stats.clone();
    let Some(first) = call.rx.recv().await else {
        ep.unregister(&call_id);
        return;
    };
    stats.attempted();
    let invite = first.msg;
    let peer = first.peer;
    let to_tag = random_token();
    let end: Option<End> = 'call: {
        let trying = response_to(&invite, 100, None).finish(b"");
        call.replay.invite_final = Some(trying.clone());
        if let Err(r) = call.send(&peer, trying).await {
            break 'call Some(End::Failed(r));
        }
        if !cfg.ring.is_zero() {
            let mut w = response_to(&invite, 180, Some(&to_tag));
            w.header("Contact", contact(&ep));
            let ringing = w.finish(b"");
            call.replay.invite_final = Some(ringing.clone());
            if let Err(r) = call.send(&peer, ringing).await {
                break 'call Some(End::Failed(r));
            }
            let ring_end = Instant::now() + cfg.ring;
            while let Some(inc) = recv_until(&mut call.rx, ring_end).await {
                if call.replay(&inc).await {
                    continue;
                }
                if inc.msg.method() == Some("CANCEL") {
                    let ok = response_to(&inc.msg, 200, Some(&to_tag)).finish(b"");
                    let _ = call.send(&inc.peer, ok).await;
                    let terminated = response_to(&invite, 487, Some(&to_tag)).finish(b"");
                    call.replay.invite_final = Some(terminated.clone());
                    let _ = call.send(&peer, terminated).await;
                    stats.cancelled();
                    break 'call None;
                }
                if !matches!(inc.msg.method(), Some("ACK") | None) {
                    let r = response_to(&inc.msg, 481, None).finish(b"");
                    let _ = call.send(&inc.peer, r).await;
                }
                stats.stray();
            }
        }
        let code = cfg.answer_code;
        let mut w = response_to(&invite, code, Some(&to_tag));
        let answer = if (200..300).contains(&code) {
            w.header("Contact", contact(&ep))
                .header("User-Agent", USER_AGENT)
                .header("Content-Type", "application/sdp");
            let body = media
                .as_ref()
                .and_then(|m| m.answer(&invite.body))
                .unwrap_or_else(|| sdp(&ep));
            w.finish(body.as_bytes())
        } else {
            w.finish(b"")
        };
        call.replay.invite_final = Some(answer.clone());
        if let Err(r) = call.send(&peer, answer.clone()).await {
            break 'call Some(End::Failed(r));
        }
        let success = (200..300).contains(&code);
        if success {
            stats.answered();
        } else {
            stats.rejected();
        }
        // Re-send the final response until the ACK: 2xx by the UAS core on every transport
        // (RFC 3261 13.3.1.4), non-2xx by the transaction on UDP only (timer G); timer H.
        let start = Instant::now();
        let timer_h = start + cfg.timers.t1 * 64;
        let mut interval = cfg.timers.t1;
        let mut next_g = start + interval;
        let retransmit = success || !call.reliable();
        let mut acked = false;
        while !acked {
            let deadline = if retransmit {
                next_g.min(timer_h)
            } else {
                timer_h
            };
            match recv_until(&mut call.rx, deadline).await {
                None if Instant::now() >= timer_h => break,
                None => {
                    interval = (interval * 2).min(cfg.timers.t2);
                    next_g = Instant::now() + interval;
                    stats.retransmitted();
                    let _ = call.send(&peer, answer.clone()).await;
                }
                Some(inc) => match inc.msg.method() {
                    Some("ACK") => acked = true,
                    Some("BYE") if success => {
                        // The ACK was lost and the caller already hangs up.
                        let ok = response_to(&inc.msg, 200, None).finish(b"");
                        call.replay.bye_ok = Some(ok.clone());
                        let _ = call.send(&inc.peer, ok).await;
                        break 'call Some(End::Completed);
                    }
                    Some("CANCEL") => {
                        let ok = response_to(&inc.msg, 200, Some(&to_tag)).finish(b"");
                        let _ = call.send(&inc.peer, ok).await;
                    }
                    _ => {
                        if !call.replay(&inc).await {
                            stats.stray();
                        }
                    }
                },
            }
        }
        if !success {
            // Counted as rejected already; a missing ACK is the caller's problem.
            break 'call None;
        }
        if !acked {
            break 'call Some(End::Failed(FailureReason::Timeout));
        }
        stats.established();
        let mut d = Dialog {
            call_id: call_id.clone(),
            local_tag: to_tag.clone(),
            remote_tag: invite.tag_of_from().unwrap_or_default().to_owned(),
            local_party: strip_tag(invite.header("to").unwrap_or_default()),
            remote_party: strip_tag(invite.header("from").unwrap_or_default()),
            remote_target: invite.contact_uri().unwrap_or_else(|| {
                name_addr_uri(invite.header("from").unwrap_or_default()).to_owned()
            }),
            route_set: invite
                .header_values("record-route")
                .into_iter()
                .map(str::to_owned)
                .collect(),
            local_cseq: 0,
            peer: peer.clone(),
        };
        let end = call
            .converse(
                &mut d,
                cfg.hold,
                cfg.bye_from == ByeFrom::Callee,
                cfg.bye_wait,
            )
            .await;
        stats.released();
        Some(end)
    };
    if let Some(end) = end {
        bump_end(&ep, &end);
    }
    call.linger(&call_id).await;
}
