//! B2BUA behaviour on a virtual clock: a fake caller and a fake callee exchange bytes with one
//! engine; time only moves when a test moves it.

use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::routing::router::Router;
use crate::shard;
use crate::sip::dialog::LegTransport;
use crate::sip::message::{reason_for, HeaderName, Method};
use crate::sip::transaction::Timers;
use std::sync::Arc;

const CALLER: &str = "10.1.1.1:5060";
const ACCESS: &str = "192.0.2.10:5060";
const CORE: &str = "198.51.100.10:5062";
const CALLEE: &str = "198.51.100.20:5080";

fn sa(s: &str) -> SocketAddr {
    s.parse().expect("test address")
}

/// A fixed seed: every run draws the same tags and branches, so a failing case replays.
fn seed() -> EngineSeed {
    EngineSeed {
        shard: 0,
        rng: [7; 32],
        wall_clock: WallClock {
            at: Instant::now(),
            unix: Duration::from_secs(1_796_083_200),
        },
    }
}

fn config() -> EngineConfig {
    EngineConfig {
        interfaces: vec![
            Interface {
                realm: "access".into(),
                addr: sa(ACCESS),
                tls_addr: None,
            },
            Interface {
                realm: "core".into(),
                addr: sa(CORE),
                tls_addr: None,
            },
        ],
        router: Arc::new(Router::from_realm(
            "access",
            NextHop {
                name: "core".into(),
                addr: sa(CALLEE),
                transport: LegTransport::Udp,
                interface: 1,
                max_udp_length: 0,
            },
            Instant::now(),
        )),
        timers: Timers::default(),
        timer_c: Duration::from_secs(180),
        max_message_size: 65_535,
        max_header_size: 8192,
        source_policy: SourcePolicy::Address,
        agents: vec![sa(CALLEE)],
        max_calls: 1000,
        max_transactions: 2000,
        media: None,
        trace: false,
        replicate_dialogs: true,
        trace_switch: None,
        registration: Registrations::default(),
        session_policies: Vec::new(),
        subscription_sources: SubscriptionSources::default(),
        accounting: None,
    }
}

struct World {
    engine: Engine,
    now: Instant,
    /// Messages the engine sent toward the caller (parsed).
    to_caller: Vec<SipMessage>,
    /// Messages the engine sent toward the callee (parsed).
    to_callee: Vec<SipMessage>,
    raw_to_caller: Vec<Bytes>,
    raw_to_callee: Vec<Bytes>,
    /// Messages sent anywhere else (to a stranger).
    to_others: Vec<(SocketAddr, SipMessage)>,
}

impl World {
    fn new() -> Self {
        Self {
            engine: Engine::new(config(), seed()),
            now: Instant::now(),
            to_caller: Vec::new(),
            to_callee: Vec::new(),
            raw_to_caller: Vec::new(),
            raw_to_callee: Vec::new(),
            to_others: Vec::new(),
        }
    }

    /// A message from `source` on `interface` (a stranger, or a peer from another address).
    fn sends_from(&mut self, interface: usize, source: &str, text: &str) {
        self.engine.handle_inbound(
            self.now,
            Inbound {
                interface,
                transport: LegTransport::Udp,
                source: sa(source),
                data: Bytes::from(text.replace('\n', "\r\n")),
            },
        );
        self.collect();
    }

    fn collect(&mut self) {
        while let Some(t) = self.engine.poll_transmit() {
            let msg = SipMessage::parse(&t.payload).expect("engine output parses");
            if t.dest == sa(CALLER) && t.interface == 0 {
                self.to_caller.push(msg);
                self.raw_to_caller.push(t.payload);
            } else if t.dest == sa(CALLEE) && t.interface == 1 {
                self.to_callee.push(msg);
                self.raw_to_callee.push(t.payload);
            } else {
                // Answers to strangers, or to a peer that wrote on the wrong interface.
                assert!(
                    t.dest != sa(CALLER) && t.dest != sa(CALLEE)
                        || t.payload.starts_with(b"SIP/2.0 "),
                    "a request to a peer on the wrong interface"
                );
                self.to_others.push((t.dest, msg));
            }
        }
    }

    fn caller_sends(&mut self, text: &str) {
        self.engine.handle_inbound(
            self.now,
            Inbound {
                interface: 0,
                transport: LegTransport::Udp,
                source: sa(CALLER),
                data: Bytes::from(text.replace('\n', "\r\n")),
            },
        );
        self.collect();
    }

    fn callee_sends(&mut self, text: &str) {
        self.engine.handle_inbound(
            self.now,
            Inbound {
                interface: 1,
                transport: LegTransport::Udp,
                source: sa(CALLEE),
                data: Bytes::from(text.replace('\n', "\r\n")),
            },
        );
        self.collect();
    }

    /// Moves the virtual clock forward, firing every timer due on the way.
    fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        while let Some(t) = self.engine.poll_timeout() {
            if t > end {
                break;
            }
            self.now = self.now.max(t);
            self.engine.handle_timeout(self.now);
            self.collect();
        }
        self.now = end;
    }

    fn last_to_callee(&self) -> &SipMessage {
        self.to_callee.last().expect("something sent to the callee")
    }

    fn codes_to_caller(&self) -> Vec<u16> {
        self.to_caller
            .iter()
            .filter_map(SipMessage::status)
            .collect()
    }

    fn methods_to_callee(&self) -> Vec<String> {
        self.to_callee
            .iter()
            .filter_map(|m| m.method().map(|m| m.to_string()))
            .collect()
    }

    /// Answers the last request the callee got with `code` (same Via/From/Call-ID/CSeq).
    fn callee_answers(&mut self, code: u16, to_tag: &str) {
        let req = self
            .to_callee
            .iter()
            .rev()
            .find(|m| m.method().is_some() && m.method() != Some(&Method::Ack))
            .expect("a request to answer")
            .clone();
        self.callee_responds_to(&req, code, to_tag);
    }

    fn callee_responds_to(&mut self, req: &SipMessage, code: u16, to_tag: &str) {
        let to = req.header(&HeaderName::To).unwrap_or_default();
        let to = if code > 100 && req.to_tag().is_none() {
            format!("{to};tag={to_tag}")
        } else {
            to.to_owned()
        };
        let text = format!(
            "SIP/2.0 {code} {}\nVia: {}\nFrom: {}\nTo: {to}\nCall-ID: {}\nCSeq: {}\nContact: <sip:bob@{CALLEE}>\nServer: callee\nContent-Length: 0\n\n",
            reason_for(code),
            req.top_via().unwrap_or_default(),
            req.header(&HeaderName::From).unwrap_or_default(),
            req.call_id().unwrap_or_default(),
            req.header(&HeaderName::CSeq).unwrap_or_default(),
        );
        self.callee_sends(&text);
    }
}

fn invite(branch: &str) -> String {
    format!(
        "INVITE sip:bob@{ACCESS} SIP/2.0\n\
         Via: SIP/2.0/UDP {CALLER};branch={branch}\n\
         Max-Forwards: 70\n\
         From: \"Alice\" <sip:alice@10.1.1.1>;tag=a1\n\
         To: <sip:bob@{ACCESS}>\n\
         Call-ID: call-1@10.1.1.1\n\
         CSeq: 1 INVITE\n\
         Contact: <sip:alice@{CALLER}>\n\
         Content-Type: application/sdp\n\
         Content-Length: 4\n\nv=0\n"
    )
}

fn caller_in_dialog(method: &str, cseq: u32, branch: &str, to_tag: &str) -> String {
    format!(
        "{method} sip:sbc@{ACCESS} SIP/2.0\n\
         Via: SIP/2.0/UDP {CALLER};branch={branch}\n\
         Max-Forwards: 70\n\
         From: \"Alice\" <sip:alice@10.1.1.1>;tag=a1\n\
         To: <sip:bob@{ACCESS}>;tag={to_tag}\n\
         Call-ID: call-1@10.1.1.1\n\
         CSeq: {cseq} {method}\n\
         Content-Length: 0\n\n"
    )
}

/// Runs a call up to the caller's ACK; returns the caller-side To tag.
fn establish(w: &mut World) -> String {
    w.caller_sends(&invite("z9hG4bKinv1"));
    w.callee_answers(180, "b1");
    w.callee_answers(200, "b1");
    let ok = w.to_caller.last().expect("200 to caller").clone();
    assert_eq!(ok.status(), Some(200));
    let tag = ok.to_tag().expect("to-tag").to_owned();
    w.caller_sends(&caller_in_dialog("ACK", 1, "z9hG4bKack1", &tag));
    tag
}

#[test]
fn one_seed_replays_a_call_byte_for_byte() {
    let (mut a, mut b) = (World::new(), World::new());
    establish(&mut a);
    establish(&mut b);
    assert_eq!(a.raw_to_caller, b.raw_to_caller);
    assert_eq!(a.raw_to_callee, b.raw_to_callee);
    // Another seed draws other tags, branches and Call-IDs.
    let mut c = World::new();
    c.engine = Engine::new(
        config(),
        EngineSeed {
            rng: [8; 32],
            ..seed()
        },
    );
    establish(&mut c);
    assert_ne!(a.raw_to_callee, c.raw_to_callee);
}

#[test]
fn dialogs_are_dated_by_the_time_passed_in() {
    let mut w = World::new();
    let start = w.now;
    w.engine = Engine::new(
        config(),
        EngineSeed {
            wall_clock: WallClock {
                at: start,
                unix: Duration::from_secs(1_000_000),
            },
            ..seed()
        },
    );
    w.now = start + Duration::from_secs(90);
    establish(&mut w);
    let d = w.engine.dialogs().next().expect("a dialog");
    assert_eq!(d.created_unix, 1_000_090);
}

#[test]
fn invite_gets_100_at_once_and_is_relayed_as_a_new_dialog() {
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKinv1"));
    assert_eq!(w.codes_to_caller(), vec![100]);
    let out = w.last_to_callee().clone();
    assert_eq!(out.method(), Some(&Method::Invite));
    assert_eq!(
        out.request_uri(),
        Some(format!("sip:bob@{CALLEE}").as_str())
    );
    assert_ne!(out.call_id(), Some("call-1@10.1.1.1"));
    assert!(out
        .call_id()
        .is_some_and(|c| c.starts_with(shard::B2B_CALL_ID_PREFIX)));
    assert_eq!(out.max_forwards(), Some(Ok(69)));
    assert_eq!(&out.body[..], b"v=0\r");
    assert_eq!(
        out.header(&HeaderName::Other("Content-Type".into())),
        Some("application/sdp")
    );
    // Both legs of the call hash to the same worker.
    assert_eq!(
        shard::call_id_key(out.call_id().unwrap_or_default().as_bytes()),
        shard::call_id_key(b"call-1@10.1.1.1")
    );
}

#[test]
fn topology_is_hidden_in_both_directions() {
    let mut w = World::new();
    let tag = establish(&mut w);
    w.callee_sends(&format!(
        "BYE sip:sbc@{CORE} SIP/2.0\nVia: SIP/2.0/UDP {CALLEE};branch=z9hG4bKbye\nMax-Forwards: 70\n\
         From: {}\nTo: {}\nCall-ID: {}\nCSeq: 5 BYE\nContent-Length: 0\n\n",
        w.to_callee[0].header(&HeaderName::To).map(|t| format!("{t};tag=b1")).unwrap_or_default(),
        w.to_callee[0].header(&HeaderName::From).unwrap_or_default(),
        w.to_callee[0].call_id().unwrap_or_default(),
    ));
    let _ = tag;
    for raw in &w.raw_to_caller {
        let text = String::from_utf8_lossy(raw);
        assert!(
            !text.contains("198.51.100"),
            "core address leaked to the caller:\n{text}"
        );
    }
    for raw in &w.raw_to_callee {
        let text = String::from_utf8_lossy(raw);
        assert!(
            !text.contains("10.1.1.1"),
            "access address leaked to the callee:\n{text}"
        );
        assert!(!text.contains("call-1"), "caller Call-ID leaked:\n{text}");
    }
}

#[test]
fn invite_retransmission_is_absorbed_not_forwarded() {
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKinv1"));
    w.caller_sends(&invite("z9hG4bKinv1"));
    assert_eq!(w.methods_to_callee(), vec!["INVITE"]);
    assert_eq!(w.codes_to_caller(), vec![100, 100], "the 100 is re-sent");
    w.callee_answers(180, "b1");
    w.caller_sends(&invite("z9hG4bKinv1"));
    assert_eq!(w.codes_to_caller(), vec![100, 100, 180, 180]);
    assert_eq!(w.methods_to_callee(), vec!["INVITE"]);
    assert_eq!(w.engine.stats().retransmissions_absorbed, 2);
}

#[test]
fn call_is_established_and_bye_from_the_callee_is_mapped() {
    let mut w = World::new();
    let tag = establish(&mut w);
    assert_eq!(w.methods_to_callee(), vec!["INVITE", "ACK"]);
    let ack = w.last_to_callee();
    assert_eq!(ack.cseq().map(|c| c.seq), Some(1));
    assert_eq!(ack.to_tag(), Some("b1"));
    assert_eq!(
        ack.request_uri(),
        Some(format!("sip:bob@{CALLEE}").as_str())
    );
    assert_eq!(
        w.engine.dialogs().next().map(|d| d.state),
        Some(DialogState::Confirmed)
    );

    let invite_out = w.to_callee[0].clone();
    w.callee_sends(&format!(
        "BYE sip:sbc@{CORE} SIP/2.0\nVia: SIP/2.0/UDP {CALLEE};branch=z9hG4bKbye\nMax-Forwards: 70\n\
         From: {};tag=b1\nTo: {}\nCall-ID: {}\nCSeq: 5 BYE\nContent-Length: 0\n\n",
        invite_out.header(&HeaderName::To).unwrap_or_default(),
        invite_out.header(&HeaderName::From).unwrap_or_default(),
        invite_out.call_id().unwrap_or_default(),
    ));
    let bye = w.to_caller.last().expect("BYE to caller").clone();
    assert_eq!(bye.method(), Some(&Method::Bye));
    assert_eq!(bye.call_id(), Some("call-1@10.1.1.1"));
    assert_eq!(bye.from_tag(), Some(tag.as_str()));
    assert_eq!(bye.to_tag(), Some("a1"));
    assert_eq!(
        bye.request_uri(),
        Some(format!("sip:alice@{CALLER}").as_str())
    );
    // The caller answers; the 200 reaches the callee with its own identifiers.
    let text = format!(
        "SIP/2.0 200 OK\nVia: {}\nFrom: {}\nTo: {}\nCall-ID: call-1@10.1.1.1\nCSeq: {}\nContent-Length: 0\n\n",
        bye.top_via().unwrap_or_default(),
        bye.header(&HeaderName::From).unwrap_or_default(),
        bye.header(&HeaderName::To).unwrap_or_default(),
        bye.header(&HeaderName::CSeq).unwrap_or_default(),
    );
    w.caller_sends(&text);
    let ok = w.to_callee.last().expect("200 to callee");
    assert_eq!(ok.status(), Some(200));
    assert_eq!(ok.top_via_branch(), Some("z9hG4bKbye"));
    assert_eq!(w.engine.call_count(), 0, "dialog removed after BYE");
}

#[test]
fn reinvite_from_the_caller_is_relayed_and_acked_end_to_end() {
    let mut w = World::new();
    let tag = establish(&mut w);
    w.caller_sends(&caller_in_dialog("INVITE", 2, "z9hG4bKre", &tag));
    assert_eq!(w.codes_to_caller().last(), Some(&100));
    let re = w.last_to_callee().clone();
    assert_eq!(re.method(), Some(&Method::Invite));
    assert_eq!(re.cseq().map(|c| c.seq), Some(2));
    assert_eq!(re.to_tag(), Some("b1"));
    w.callee_answers(200, "b1");
    assert_eq!(w.codes_to_caller().last(), Some(&200));
    w.caller_sends(&caller_in_dialog("ACK", 2, "z9hG4bKack2", &tag));
    let ack = w.last_to_callee();
    assert_eq!(ack.method(), Some(&Method::Ack));
    assert_eq!(ack.cseq().map(|c| c.seq), Some(2));
}

#[test]
fn cancel_gets_200_and_487_and_is_relayed_after_a_provisional() {
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKinv1"));
    let cancel = invite("z9hG4bKinv1")
        .replacen("INVITE sip", "CANCEL sip", 1)
        .replace("CSeq: 1 INVITE", "CSeq: 1 CANCEL");
    w.caller_sends(&cancel);
    assert_eq!(w.codes_to_caller(), vec![100, 200, 487]);
    assert_eq!(
        w.methods_to_callee(),
        vec!["INVITE"],
        "no CANCEL before a provisional"
    );
    w.callee_answers(180, "b1");
    assert_eq!(w.methods_to_callee(), vec!["INVITE", "CANCEL"]);
    let c = w.last_to_callee().clone();
    assert_eq!(c.top_via_branch(), w.to_callee[0].top_via_branch());
    assert_eq!(
        w.codes_to_caller(),
        vec![100, 200, 487],
        "the 180 is not relayed after 487"
    );
    // The callee answers the CANCEL and the INVITE with 487; we ACK hop by hop.
    w.callee_responds_to(&c, 200, "b1");
    let inv = w.to_callee[0].clone();
    w.callee_responds_to(&inv, 487, "b1");
    assert_eq!(w.methods_to_callee(), vec!["INVITE", "CANCEL", "ACK"]);
    // The caller's ACK for the 487 is absorbed.
    let ack = invite("z9hG4bKinv1")
        .replacen("INVITE sip", "ACK sip", 1)
        .replace("CSeq: 1 INVITE", "CSeq: 1 ACK");
    w.caller_sends(&ack);
    assert_eq!(w.methods_to_callee(), vec!["INVITE", "CANCEL", "ACK"]);
    assert_eq!(w.engine.call_count(), 0);
}

#[test]
fn a_2xx_racing_the_callers_cancel_is_acked_and_hung_up() {
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKinv1"));
    w.callee_answers(180, "b1");
    let cancel = invite("z9hG4bKinv1")
        .replacen("INVITE sip", "CANCEL sip", 1)
        .replace("CSeq: 1 INVITE", "CSeq: 1 CANCEL");
    w.caller_sends(&cancel);
    assert_eq!(
        w.methods_to_callee(),
        vec!["INVITE", "CANCEL"],
        "after a provisional, the CANCEL goes at once"
    );
    assert_eq!(w.codes_to_caller(), vec![100, 180, 200, 487]);
    // The callee answered before it saw the CANCEL.
    let inv = w.to_callee[0].clone();
    w.callee_responds_to(&inv, 200, "b1");
    assert_eq!(
        w.methods_to_callee(),
        vec!["INVITE", "CANCEL", "ACK", "BYE"],
        "the 2xx is ACKed and the callee hung up"
    );
    assert_eq!(
        w.codes_to_caller(),
        vec![100, 180, 200, 487],
        "the caller, who cancelled, never sees the 2xx"
    );
    assert_eq!(w.engine.call_count(), 0);
    assert_eq!(w.engine.stats().calls_answered, 0);
}

#[test]
fn busy_is_relayed_and_acked_hop_by_hop() {
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKinv1"));
    w.callee_answers(486, "b1");
    assert_eq!(w.codes_to_caller(), vec![100, 486]);
    let ack = w.last_to_callee();
    assert_eq!(ack.method(), Some(&Method::Ack));
    assert_eq!(
        ack.top_via_branch(),
        w.to_callee[0].top_via_branch(),
        "same branch"
    );
    // The 486 is retransmitted by timer G until the caller ACKs.
    w.advance(Duration::from_millis(600));
    assert_eq!(w.codes_to_caller(), vec![100, 486, 486]);
    let caller_ack = invite("z9hG4bKinv1")
        .replacen("INVITE sip", "ACK sip", 1)
        .replace("CSeq: 1 INVITE", "CSeq: 1 ACK");
    w.caller_sends(&caller_ack);
    w.advance(Duration::from_secs(10));
    assert_eq!(
        w.codes_to_caller(),
        vec![100, 486, 486],
        "G stops after the ACK"
    );
    assert_eq!(
        w.methods_to_callee(),
        vec!["INVITE", "ACK"],
        "caller ACK absorbed"
    );
    // A retransmitted 486 from the callee gets the ACK again and is not relayed.
    let inv = w.to_callee[0].clone();
    w.callee_responds_to(&inv, 486, "b1");
    assert_eq!(w.methods_to_callee(), vec!["INVITE", "ACK", "ACK"]);
    assert_eq!(w.codes_to_caller(), vec![100, 486, 486]);
}

#[test]
fn an_authenticated_invite_goes_out_on_the_challenged_leg_with_the_next_cseq() {
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKau1"));
    w.callee_answers(407, "px");
    assert_eq!(w.codes_to_caller(), vec![100, 407]);
    let challenged = w.to_callee[0].clone();
    let caller_ack = invite("z9hG4bKau1")
        .replacen("INVITE sip", "ACK sip", 1)
        .replace("CSeq: 1 INVITE", "CSeq: 1 ACK");
    w.caller_sends(&caller_ack);
    // The caller re-sends on its Call-ID and From tag, CSeq 2, with credentials.
    let authenticated = invite("z9hG4bKau2").replace("CSeq: 1 INVITE", "CSeq: 2 INVITE").replace(
        "Contact:",
        "Proxy-Authorization: Digest username=\"alice\", realm=\"example.test\", nonce=\"n1\", uri=\"sip:bob@example.test\", response=\"00\"\nContact:",
    );
    w.caller_sends(&authenticated);
    let out = w.last_to_callee().clone();
    assert_eq!(out.method(), Some(&Method::Invite));
    assert_ne!(
        out.top_via_branch(),
        challenged.top_via_branch(),
        "a new transaction"
    );
    assert_eq!(
        out.call_id(),
        challenged.call_id(),
        "the challenged leg's Call-ID"
    );
    assert_eq!(out.from_tag(), challenged.from_tag(), "and From tag");
    assert_eq!(out.cseq().map(|c| c.seq), Some(2), "the next CSeq");
    assert!(
        out.headers
            .iter()
            .any(|h| h.name.as_str().eq_ignore_ascii_case("proxy-authorization")),
        "the credentials go to the next hop"
    );
    assert_eq!(w.engine.stats().auth_on_challenged_leg, 1);
    // Answered: one call, its callee leg the challenged one.
    w.callee_answers(200, "b2");
    assert_eq!(w.codes_to_caller(), vec![100, 407, 100, 200]);
    assert_eq!(w.engine.call_count(), 1);

    // A new call (another Call-ID) with credentials but no challenge: a fresh leg, CSeq 1.
    let other = invite("z9hG4bKau3").replace("call-1@", "call-2@").replace(
        "Contact:",
        "Authorization: Digest username=\"alice\"\nContact:",
    );
    w.caller_sends(&other);
    let out = w.last_to_callee().clone();
    assert_ne!(out.call_id(), challenged.call_id());
    assert_eq!(out.cseq().map(|c| c.seq), Some(1));
    assert_eq!(w.engine.stats().auth_on_challenged_leg, 1);
}

#[test]
fn a_silent_next_hop_is_abandoned_after_the_attempt_expiry_with_408() {
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKinv1"));
    w.advance(Duration::from_millis(3_999));
    // Timer A retransmissions at 0.5, 1.5, 3.5 s; not even a 100 by 4 s (the agent's
    // attempt expiry, far below timer B's 32 s): abandoned.
    assert_eq!(w.methods_to_callee().len(), 4);
    assert_eq!(w.codes_to_caller(), vec![100]);
    w.advance(Duration::from_millis(1));
    assert_eq!(w.codes_to_caller(), vec![100, 408]);
    assert_eq!(w.engine.call_count(), 0);
    assert_eq!(
        w.engine.transaction_count(),
        1,
        "only the caller's, for its 408"
    );
    assert_eq!(w.engine.stats().attempts_expired, 1);
    w.advance(Duration::from_secs(40));
    assert_eq!(w.methods_to_callee().len(), 4, "nothing more sent to it");
}

#[test]
fn a_next_hop_that_sent_100_and_nothing_more_rings_until_timer_c() {
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKinv1"));
    let inv = w.to_callee[0].clone();
    w.callee_responds_to(&inv, 100, "");
    w.advance(Duration::from_secs(60));
    assert_eq!(
        w.codes_to_caller(),
        vec![100],
        "the expiry stops at a first response"
    );
    assert_eq!(w.engine.stats().attempts_expired, 0);
    w.advance(Duration::from_secs(121));
    assert_eq!(w.codes_to_caller()[..2], [100, 408]);
}

#[test]
fn ringing_forever_gives_408_after_timer_c_and_cancels_the_callee() {
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKinv1"));
    w.callee_answers(180, "b1");
    w.advance(Duration::from_secs(181));
    assert_eq!(w.codes_to_caller()[..3], [100, 180, 408]);
    assert!(
        w.codes_to_caller()[3..].iter().all(|c| *c == 408),
        "only retransmissions of the 408 (timer G) follow"
    );
    assert_eq!(w.methods_to_callee()[..2], ["INVITE", "CANCEL"]);
}

#[test]
fn caller_not_acking_the_2xx_ends_the_call_on_both_legs() {
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKinv1"));
    w.callee_answers(200, "b1");
    w.advance(Duration::from_secs(33));
    assert!(w.methods_to_callee().contains(&"BYE".to_owned()));
    assert!(w.to_caller.iter().any(|m| m.method() == Some(&Method::Bye)));
    assert_eq!(w.engine.call_count(), 0);
}

#[test]
fn retransmitted_2xx_gets_the_ack_again() {
    let mut w = World::new();
    establish(&mut w);
    let inv = w.to_callee[0].clone();
    w.callee_responds_to(&inv, 200, "b1");
    assert_eq!(w.methods_to_callee(), vec!["INVITE", "ACK", "ACK"]);
}

#[test]
fn max_forwards_zero_gets_483_and_unknown_dialog_481() {
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKmf").replace("Max-Forwards: 70", "Max-Forwards: 0"));
    assert_eq!(w.codes_to_caller(), vec![483]);
    w.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKx", "nosuchtag"));
    assert_eq!(w.codes_to_caller(), vec![483, 481]);
    assert!(w.to_callee.is_empty());
}

#[test]
fn a_request_that_comes_back_to_us_is_a_loop() {
    let mut w = World::new();
    let looped = invite("z9hG4bKinv1").replace(
        "Max-Forwards: 70",
        &format!("Via: SIP/2.0/UDP {CORE};branch={BRANCH_PREFIX}0001\nMax-Forwards: 70"),
    );
    w.caller_sends(&looped);
    assert_eq!(w.codes_to_caller(), vec![482]);
}

#[test]
fn malformed_requests_get_400_when_answerable_and_are_dropped_otherwise() {
    let mut w = World::new();
    let bad_len = invite("z9hG4bKb1").replace("Content-Length: 4", "Content-Length: 999");
    w.caller_sends(&bad_len);
    assert_eq!(w.codes_to_caller(), vec![400]);
    let no_call_id = invite("z9hG4bKb2").replace("Call-ID: call-1@10.1.1.1\n", "");
    w.caller_sends(&no_call_id);
    assert_eq!(
        w.codes_to_caller(),
        vec![400],
        "no Call-ID: nothing to answer with"
    );
    w.caller_sends("\u{1}\u{2}garbage\n\n");
    assert_eq!(w.engine.stats().malformed_dropped, 2);
    assert_eq!(w.engine.stats().malformed_answered, 1);
    // The next good call still works.
    w.caller_sends(&invite("z9hG4bKgood"));
    assert_eq!(w.codes_to_caller(), vec![400, 100]);
    assert_eq!(w.methods_to_callee(), vec!["INVITE"]);
}

#[test]
fn draining_and_admission_refuse_only_new_requests() {
    let mut w = World::new();
    let tag = establish(&mut w);
    w.engine.set_admission(Admission::Reject {
        retry_after_min: 7,
        retry_after_max: 7,
    });
    w.caller_sends(&invite("z9hG4bKnew").replace("call-1@", "call-2@"));
    let r = w.to_caller.last().expect("503").clone();
    assert_eq!(r.status(), Some(503));
    assert_eq!(
        r.header(&HeaderName::Other("Retry-After".into())),
        Some("7")
    );
    // In-dialog BYE still flows.
    w.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye", &tag));
    assert_eq!(w.last_to_callee().method(), Some(&Method::Bye));
}

#[test]
fn options_ping_to_the_sbc_is_answered_locally() {
    let mut w = World::new();
    w.caller_sends(&format!(
        "OPTIONS sip:{ACCESS} SIP/2.0\nVia: SIP/2.0/UDP {CALLER};branch=z9hG4bKo\nFrom: <sip:mon@x>;tag=m\nTo: <sip:{ACCESS}>\nCall-ID: o1\nCSeq: 1 OPTIONS\nContent-Length: 0\n\n"
    ));
    assert_eq!(w.codes_to_caller(), vec![200]);
    assert!(w.to_callee.is_empty());
}

#[test]
fn out_of_dialog_message_is_relayed_and_answered() {
    let mut w = World::new();
    w.caller_sends(&format!(
        "MESSAGE sip:bob@{ACCESS} SIP/2.0\nVia: SIP/2.0/UDP {CALLER};branch=z9hG4bKm\nFrom: <sip:alice@x>;tag=m\nTo: <sip:bob@{ACCESS}>\nCall-ID: m1\nCSeq: 1 MESSAGE\nContent-Type: text/plain\nContent-Length: 2\n\nhi"
    ));
    assert_eq!(w.methods_to_callee(), vec!["MESSAGE"]);
    let relayed = w.last_to_callee();
    assert_eq!(&relayed.body[..], b"hi", "the text goes as it came");
    assert_eq!(
        relayed.header(&HeaderName::Other("Content-Type".into())),
        Some("text/plain")
    );
    w.callee_answers(202, "b");
    assert_eq!(w.codes_to_caller(), vec![202]);
}

#[test]
fn a_confirmed_dialog_moves_to_another_engine_and_bye_still_works() {
    let mut w = World::new();
    let tag = establish(&mut w);
    let mut replicated = None;
    while let Some(c) = w.engine.poll_dialog_change() {
        if let DialogChange::Upsert(d) = c {
            replicated = Some(d);
        }
    }
    let dialog = replicated.expect("the confirmed dialog is replicated");
    assert_eq!(dialog.state, DialogState::Confirmed);
    // The standby takes over with only the replicated dialog.
    let mut standby = World::new();
    standby.engine.install_dialog(standby.now, *dialog);
    standby.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye", &tag));
    let bye = standby.last_to_callee().clone();
    assert_eq!(bye.method(), Some(&Method::Bye));
    assert_eq!(bye.call_id(), w.to_callee[0].call_id());
    assert_eq!(bye.to_tag(), Some("b1"));
    assert_eq!(bye.cseq().map(|c| c.seq), Some(2));
    standby.callee_answers(200, "b1");
    assert_eq!(standby.codes_to_caller(), vec![200]);
    assert_eq!(standby.engine.call_count(), 0);
    let mut last = None;
    while let Some(c) = standby.engine.poll_dialog_change() {
        last = Some(c);
    }
    assert!(
        !matches!(last, Some(DialogChange::Delete(_))),
        "the end lingers 64*T1 before it is replicated"
    );
    standby.advance(Duration::from_secs(33));
    while let Some(c) = standby.engine.poll_dialog_change() {
        last = Some(c);
    }
    assert!(
        matches!(last, Some(DialogChange::Delete(_))),
        "then the end is replicated"
    );
}

#[test]
fn a_node_without_a_standby_makes_no_dialog_changes() {
    let mut w = World::new();
    w.engine = Engine::new(
        EngineConfig {
            replicate_dialogs: false,
            ..config()
        },
        seed(),
    );
    let tag = establish(&mut w);
    w.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye", &tag));
    w.callee_answers(200, "b1");
    assert_eq!(w.codes_to_caller().last(), Some(&200));
    w.advance(Duration::from_secs(64));
    assert!(
        w.engine.poll_dialog_change().is_none(),
        "nothing is cloned for a standby there is not"
    );
    assert_eq!(w.engine.call_count(), 0);
}

#[test]
fn a_bye_retransmitted_after_a_switchover_mid_bye_gets_200_not_481() {
    // The former active relayed the caller's BYE (the dialog replicated as Terminating), then
    // released the address before its 200 reached the caller.
    let mut w = World::new();
    let tag = establish(&mut w);
    w.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye", &tag));
    let mut terminating = None;
    while let Some(c) = w.engine.poll_dialog_change() {
        if let DialogChange::Upsert(d) = c {
            terminating = Some(d);
        }
    }
    let dialog = terminating.expect("the BYE's dialog change is replicated");
    assert_eq!(dialog.state, DialogState::Terminating);
    let mut standby = World::new();
    standby.engine.install_dialog(standby.now, *dialog);
    standby.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye", &tag));
    // Relayed again (the callee may never have had it); the callee already hung up and says
    // 481, but the call is over either way: the caller gets 200.
    assert_eq!(standby.methods_to_callee(), vec!["BYE"]);
    standby.callee_answers(481, "b1");
    assert_eq!(standby.codes_to_caller(), vec![200]);
    assert_eq!(standby.engine.call_count(), 0);
}

#[test]
fn the_strict_reading_refuses_and_relays_nothing() {
    let cases: [(&str, &str, u16); 5] = [
        (
            "a second To, tagged, after an untagged one",
            "To: <sip:bob@10.0.0.1>\nTo: <sip:bob@10.0.0.1>;tag=forged\n",
            400,
        ),
        ("a second Call-ID", "i: other@x\n", 400),
        ("a huge header", "X-Huge: HUGE\n", 400),
        (
            "a Via sent-by that is no host",
            "Via: SIP/2.0/UDP bad_host:5060;branch=z9hG4bKv\n",
            400,
        ),
        ("an unsupported scheme", "", 416),
    ];
    for (what, extra, code) in cases {
        let mut w = World::new();
        let mut text = invite("z9hG4bKstrict");
        if what == "an unsupported scheme" {
            text = text.replacen(&format!("sip:bob@{ACCESS}"), "http://example.com/", 1);
        }
        let extra = extra.replace("HUGE", &"a".repeat(9000));
        text = text.replacen(
            "Max-Forwards: 70\n",
            &format!("Max-Forwards: 70\n{extra}"),
            1,
        );
        if what.starts_with("a second To") {
            text = text.replacen(&format!("To: <sip:bob@{ACCESS}>\n"), "", 1);
        }
        w.caller_sends(&text);
        assert_eq!(w.codes_to_caller(), vec![code], "{what}");
        let warning = w.to_caller[0].header(&HeaderName::Other("Warning".into()));
        assert!(warning.is_some(), "{what}: no Warning");
        assert!(w.to_callee.is_empty(), "{what}: something was relayed");
        assert_eq!(w.engine.call_count(), 0, "{what}: a call was created");
    }
}

#[test]
fn in_dialog_requests_are_taken_only_from_their_leg() {
    let mut w = World::new();
    let tag = establish(&mut w);
    let to_callee_before = w.to_callee.len();
    // The caller's BYE, from another address: 481, nothing relayed, the call goes on.
    let stranger = "10.6.6.6:5060";
    w.sends_from(
        0,
        stranger,
        &caller_in_dialog("BYE", 2, "z9hG4bKevil", &tag),
    );
    assert_eq!(w.to_others.len(), 1);
    assert_eq!(w.to_others[0].1.status(), Some(481));
    assert_eq!(w.to_callee.len(), to_callee_before, "nothing relayed");
    assert_eq!(w.engine.call_count(), 1);
    // From the caller's address on the core interface: 481 too.
    w.sends_from(1, CALLER, &caller_in_dialog("BYE", 3, "z9hG4bKevil2", &tag));
    // With the right address but a forged From tag: 481.
    w.caller_sends(
        &caller_in_dialog("BYE", 4, "z9hG4bKevil3", &tag).replace(";tag=a1", ";tag=forged"),
    );
    assert_eq!(w.codes_to_caller().last(), Some(&481));
    assert_eq!(w.engine.stats().leg_mismatch, 3);
    assert_eq!(w.engine.call_count(), 1, "the call survived");
    // The caller's own BYE is relayed and the call ends.
    w.caller_sends(&caller_in_dialog("BYE", 5, "z9hG4bKbye", &tag));
    assert_eq!(
        w.methods_to_callee().last().map(String::as_str),
        Some("BYE")
    );
}

#[test]
fn a_relaxed_source_policy_takes_a_rebound_port() {
    let mut cfg = config();
    cfg.source_policy = SourcePolicy::Ip;
    let mut w = World::new();
    w.engine.set_config(cfg);
    let tag = establish(&mut w);
    // The caller's NAT rebound its port: same IP, another port.
    w.sends_from(
        0,
        "10.1.1.1:6000",
        &caller_in_dialog("BYE", 2, "z9hG4bKnat", &tag),
    );
    assert_eq!(
        w.methods_to_callee().last().map(String::as_str),
        Some("BYE")
    );
    assert_eq!(w.engine.stats().leg_mismatch, 0);
}

#[test]
fn cancel_and_responses_only_from_where_they_belong() {
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKinv1"));
    let invite_out = w.last_to_callee().clone();
    // A CANCEL from a stranger: 481, the INVITE goes on.
    let cancel = invite("z9hG4bKinv1")
        .replacen("INVITE sip:", "CANCEL sip:", 1)
        .replace("CSeq: 1 INVITE", "CSeq: 1 CANCEL");
    w.sends_from(0, "10.6.6.6:5060", &cancel);
    assert_eq!(w.to_others.last().map(|(_, m)| m.status()), Some(Some(481)));
    assert!(!w.methods_to_callee().contains(&"CANCEL".to_owned()));
    // A 200 from another address than the next hop: dropped, not relayed to the caller.
    let forged = format!(
        "SIP/2.0 200 OK\nVia: {}\nFrom: {}\nTo: {};tag=evil\nCall-ID: {}\nCSeq: 1 INVITE\nContact: <sip:evil@10.6.6.6>\nContent-Length: 0\n\n",
        invite_out.top_via().unwrap_or_default(),
        invite_out.header(&HeaderName::From).unwrap_or_default(),
        invite_out.header(&HeaderName::To).unwrap_or_default(),
        invite_out.call_id().unwrap_or_default(),
    );
    w.sends_from(1, "10.6.6.6:5080", &forged);
    assert_eq!(w.codes_to_caller(), vec![100], "the forged 200 was relayed");
    assert_eq!(w.engine.stats().response_source_mismatch, 1);
    // The real callee answers.
    w.callee_answers(200, "b1");
    assert_eq!(w.codes_to_caller(), vec![100, 200]);
}

#[test]
fn a_forged_invite_to_a_silent_next_hop_gets_its_source_about_its_own_size_back() {
    let mut w = World::new();
    let request = invite("z9hG4bKspoof").replace('\n', "\r\n");
    w.caller_sends(&invite("z9hG4bKspoof"));
    // Nobody answers, nobody ACKs: timer B (64·T1), then timer H.
    w.advance(Duration::from_secs(80));
    // The source never completed a transaction: the 100 and the 408, once. RFC 3261's timer
    // G would have sent about ten 408s.
    assert_eq!(w.codes_to_caller(), vec![100, 408]);
    let back: usize = w.raw_to_caller.iter().map(Bytes::len).sum();
    assert!(
        back * 10 <= 16 * request.len(),
        "{back} bytes sent back for a {}-byte request",
        request.len()
    );
}

#[test]
fn a_source_that_completed_a_transaction_gets_retransmissions_as_rfc_3261_says() {
    let mut w = World::new();
    let tag = establish(&mut w); // the caller ACKed our 200: it receives what we send
    w.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye", &tag));
    w.callee_answers(200, "b1");
    let before = w.codes_to_caller().len();
    w.caller_sends(&invite("z9hG4bKsecond").replace("call-1@", "call-2@"));
    w.advance(Duration::from_secs(70));
    let codes = &w.codes_to_caller()[before..];
    assert_eq!(codes[0], 100);
    assert!(
        codes.iter().filter(|c| **c == 408).count() > 5,
        "timer G retransmits the 408 to a verified source: {codes:?}"
    );
}

#[test]
fn configured_caps_not_memory_bound_the_state_a_stranger_can_create() {
    let mut cfg = config();
    cfg.max_calls = 2;
    let mut w = World::new();
    w.engine.set_config(cfg);
    for i in 0..3 {
        w.caller_sends(
            &invite(&format!("z9hG4bKcap{i}")).replace("call-1@", &format!("call-cap{i}@")),
        );
    }
    assert_eq!(w.codes_to_caller(), vec![100, 100, 503]);
    assert_eq!(w.engine.call_count(), 2);
    assert_eq!(w.engine.stats().state_cap_503, 1);
    let mut cfg = config();
    cfg.max_transactions = 2;
    let mut w = World::new();
    w.engine.set_config(cfg);
    w.caller_sends(&invite("z9hG4bKt1")); // one server and one client transaction
    w.caller_sends(&invite("z9hG4bKt2").replace("call-1@", "call-t2@"));
    assert_eq!(w.codes_to_caller(), vec![100, 503]);
}

#[test]
fn a_method_is_read_case_sensitively() {
    // `INvITE` is an extension method (RFC 3261 7.1), not INVITE: its CSeq says INVITE, so it
    // is refused, and it never makes a call.
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKcase").replacen("INVITE sip:", "INvITE sip:", 1));
    assert_eq!(w.codes_to_caller(), vec![400]);
    assert_eq!(w.engine.call_count(), 0);
}

#[test]
fn a_finished_burst_gives_its_table_room_back() {
    let mut w = World::new();
    for n in 0..500 {
        let inv = invite(&format!("z9hG4bKburst{n}"))
            .replace("call-1@10.1.1.1", &format!("burst-{n}@10.1.1.1"));
        w.caller_sends(&inv);
        w.callee_answers(200, "b1");
        let ok = w.to_caller.last().expect("200").clone();
        let tag = ok.to_tag().expect("tag").to_owned();
        let bye = caller_in_dialog("BYE", 2, &format!("z9hG4bKbye{n}"), &tag)
            .replace("call-1@10.1.1.1", &format!("burst-{n}@10.1.1.1"));
        let ack = caller_in_dialog("ACK", 1, &format!("z9hG4bKack{n}"), &tag)
            .replace("call-1@10.1.1.1", &format!("burst-{n}@10.1.1.1"));
        w.caller_sends(&ack);
        w.caller_sends(&bye);
        w.callee_answers(200, "b1");
    }
    assert!(w.engine.server.capacity() >= 500 || w.engine.client.capacity() >= 500);
    // Every transaction window and lingering dialog over (timer C's stale entries too).
    w.advance(Duration::from_secs(200));
    assert_eq!(
        (w.engine.call_count(), w.engine.transaction_count()),
        (0, 0)
    );
    w.engine.compact();
    let room = [
        w.engine.calls.capacity(),
        w.engine.dialogs.capacity(),
        w.engine.server.capacity(),
        w.engine.client.capacity(),
        w.engine.timers.heap.capacity(),
        w.engine.timers.targets.capacity(),
    ];
    assert!(room.iter().all(|c| *c <= 4), "left room: {room:?}");
    // Still serving.
    w.caller_sends(&invite("z9hG4bKafter").replace("call-1@10.1.1.1", "after@10.1.1.1"));
    assert!(w.codes_to_caller().ends_with(&[100]));
}

mod media {
    //! Media anchoring on the signalling path, against a real media table.

    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::media::{MediaEvent, MediaSettings, MediaTable, Side as MediaSide};

    const CALLER_SDP: &str = "v=0\no=alice 1 1 IN IP4 10.1.1.1\ns=-\nc=IN IP4 10.1.1.1\nt=0 0\nm=audio 4000 RTP/AVP 0\na=rtpmap:0 PCMU/8000\na=candidate:1 1 UDP 2130706431 10.1.1.1 4000 typ host\n";
    const CALLEE_SDP: &str = "v=0\no=bob 7 7 IN IP4 198.51.100.20\ns=-\nc=IN IP4 198.51.100.20\nt=0 0\nm=audio 6000 RTP/AVP 0\na=rtpmap:0 PCMU/8000\n";

    fn table(pool_pairs: u16) -> Arc<Mutex<MediaTable>> {
        Arc::new(Mutex::new(MediaTable::new(MediaSettings {
            pools: vec![
                20_000..=20_000 + pool_pairs * 2 - 1,
                30_000..=30_000 + pool_pairs * 2 - 1,
            ],
            latch_window: Duration::from_secs(5),
            latch_signalled_ip_only: false,
            inactivity: Some(Duration::from_secs(30)),
        })))
    }

    fn world(table: &Arc<Mutex<MediaTable>>) -> World {
        world_seeded(table, 7)
    }

    /// Engines sharing a table draw different call ids (as the shards of a node do).
    fn world_seeded(table: &Arc<Mutex<MediaTable>>, rng: u8) -> World {
        let mut cfg = config();
        cfg.media = Some(MediaAnchoring {
            table: table.clone(),
            realms: vec![Some((0, sa(ACCESS).ip())), Some((1, sa(CORE).ip()))],
        });
        let mut w = World::new();
        w.engine = Engine::new(
            cfg,
            EngineSeed {
                rng: [rng; 32],
                ..seed()
            },
        );
        w
    }

    /// `head` (start line and headers, without Content-Length) with `sdp` as its body.
    fn with_body(head: &str, sdp: &str) -> String {
        let body = sdp.replace('\n', "\r\n");
        format!(
            "{head}Content-Type: application/sdp\nContent-Length: {}\n\n{sdp}",
            body.len()
        )
    }

    fn invite_with(sdp: Option<&str>) -> String {
        let head = format!(
            "INVITE sip:bob@{ACCESS} SIP/2.0\n\
             Via: SIP/2.0/UDP {CALLER};branch=z9hG4bKinv1\n\
             Max-Forwards: 70\n\
             From: \"Alice\" <sip:alice@10.1.1.1>;tag=a1\n\
             To: <sip:bob@{ACCESS}>\n\
             Call-ID: call-1@10.1.1.1\n\
             CSeq: 1 INVITE\n\
             Contact: <sip:alice@{CALLER}>\n"
        );
        match sdp {
            Some(sdp) => with_body(&head, sdp),
            None => format!("{head}Content-Length: 0\n\n"),
        }
    }

    /// An anchored call set up: the caller's offer, the callee's 200 with its answer, the
    /// ACK. Returns the caller-side To tag.
    fn set_up(w: &mut World) -> String {
        w.caller_sends(&invite_with(Some(CALLER_SDP)));
        callee_answers_sdp(w, 200, CALLEE_SDP);
        let tag = w
            .to_caller
            .last()
            .and_then(|m| m.to_tag())
            .expect("tag")
            .to_owned();
        w.caller_sends(&caller_in_dialog("ACK", 1, "z9hG4bKack1", &tag));
        tag
    }

    fn callee_answers_sdp(w: &mut World, code: u16, sdp: &str) {
        let req = w
            .to_callee
            .iter()
            .rev()
            .find(|m| m.method().is_some() && m.method() != Some(&Method::Ack))
            .expect("a request to answer")
            .clone();
        let to = req.header(&HeaderName::To).unwrap_or_default();
        let to = if req.to_tag().is_none() {
            format!("{to};tag=b1")
        } else {
            to.to_owned()
        };
        let head = format!(
            "SIP/2.0 {code} {}\nVia: {}\nFrom: {}\nTo: {to}\nCall-ID: {}\nCSeq: {}\nContact: <sip:bob@{CALLEE}>\n",
            reason_for(code),
            req.top_via().unwrap_or_default(),
            req.header(&HeaderName::From).unwrap_or_default(),
            req.call_id().unwrap_or_default(),
            req.header(&HeaderName::CSeq).unwrap_or_default(),
        );
        w.callee_sends(&with_body(&head, sdp));
    }

    fn body(m: &SipMessage) -> String {
        String::from_utf8_lossy(&m.body).into_owned()
    }

    /// The audio port a description names.
    fn port_in(sdp: &str) -> u16 {
        sdp.lines()
            .find_map(|l| l.strip_prefix("m=audio "))
            .and_then(|l| l.split(' ').next())
            .and_then(|p| p.parse().ok())
            .expect("an audio port")
    }

    fn rtp(seq: u16) -> Vec<u8> {
        let mut p = vec![0u8; 172];
        p[0] = 0x80;
        p[2..4].copy_from_slice(&seq.to_be_bytes());
        p[8..12].copy_from_slice(&7u32.to_be_bytes());
        p
    }

    #[test]
    fn offer_and_answer_name_only_the_sbc_and_the_media_crosses_and_ends_with_the_call() {
        let table = table(5);
        let mut w = world(&table);
        w.caller_sends(&invite_with(Some(CALLER_SDP)));
        let offer = body(w.last_to_callee());
        assert!(offer.contains("c=IN IP4 198.51.100.10"), "{offer}");
        assert!(
            !offer.contains("10.1.1.1"),
            "caller's address leaked: {offer}"
        );
        assert!(
            !offer.contains("candidate"),
            "ICE candidates removed: {offer}"
        );
        assert!(offer.contains("a=rtpmap:0 PCMU/8000"));
        let core_port = port_in(&offer);
        assert!((30_000..30_010).contains(&core_port));

        callee_answers_sdp(&mut w, 200, CALLEE_SDP);
        let ok = w.to_caller.last().expect("200").clone();
        let answer = body(&ok);
        assert!(answer.contains("c=IN IP4 192.0.2.10"), "{answer}");
        assert!(
            !answer.contains("198.51.100.20"),
            "callee's address leaked: {answer}"
        );
        assert!(
            answer.contains("o=- "),
            "the far side's user is not passed on: {answer}"
        );
        let access_port = port_in(&answer);
        assert!((20_000..20_010).contains(&access_port));
        let tag = ok.to_tag().expect("tag").to_owned();
        w.caller_sends(&caller_in_dialog("ACK", 1, "z9hG4bKack1", &tag));
        assert_eq!(w.engine.stats().media_anchored, 1);

        // The relay forwards by the table the engine filled.
        {
            let mut t = table.lock().expect("table");
            let f = t
                .handle_packet(w.now, access_port, sa("10.1.1.1:4000"), &rtp(1))
                .expect("caller to callee");
            assert_eq!((f.from_port, f.to), (core_port, sa("198.51.100.20:6000")));
            let f = t
                .handle_packet(w.now, core_port, sa("198.51.100.20:6000"), &rtp(1))
                .expect("callee to caller");
            assert_eq!((f.from_port, f.to), (access_port, sa("10.1.1.1:4000")));
        }
        // The confirmed dialog is replicated with its media.
        let mut record = None;
        while let Some(c) = w.engine.poll_dialog_change() {
            if let DialogChange::Upsert(d) = c {
                record = d.media.clone();
            }
        }
        let record = record.expect("media replicated with the dialog");
        assert_eq!(record.streams[0][0].port, access_port);

        w.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye", &tag));
        w.callee_answers(200, "b1");
        let t = table.lock().expect("table");
        assert!(t.is_empty(), "the media ends with the call");
        assert_eq!((t.pool(0), t.pool(1)), ((5, 5), (5, 5)));
    }

    #[test]
    fn a_late_offer_in_the_200_is_anchored_and_so_is_its_answer_in_the_ack() {
        let table = table(5);
        let mut w = world(&table);
        w.caller_sends(&invite_with(None));
        assert!(w.last_to_callee().body.is_empty());
        callee_answers_sdp(&mut w, 200, CALLEE_SDP);
        let ok = w.to_caller.last().expect("200").clone();
        let offer = body(&ok);
        assert!(offer.contains("c=IN IP4 192.0.2.10") && !offer.contains("198.51.100.20"));
        let tag = ok.to_tag().expect("tag").to_owned();
        let head = format!(
            "ACK sip:sbc@{ACCESS} SIP/2.0\n\
             Via: SIP/2.0/UDP {CALLER};branch=z9hG4bKack1\n\
             Max-Forwards: 70\n\
             From: \"Alice\" <sip:alice@10.1.1.1>;tag=a1\n\
             To: <sip:bob@{ACCESS}>;tag={tag}\n\
             Call-ID: call-1@10.1.1.1\n\
             CSeq: 1 ACK\n"
        );
        w.caller_sends(&with_body(&head, CALLER_SDP));
        let ack = w.last_to_callee().clone();
        assert_eq!(ack.method(), Some(&Method::Ack));
        let answer = body(&ack);
        assert!(answer.contains("c=IN IP4 198.51.100.10") && !answer.contains("10.1.1.1"));
        let t = table.lock().expect("table");
        let s = t.sessions().next().expect("a session").1;
        assert_eq!(
            s.destination(0, MediaSide::Caller),
            Some(sa("10.1.1.1:4000"))
        );
        assert_eq!(
            s.destination(0, MediaSide::Callee),
            Some(sa("198.51.100.20:6000"))
        );
    }

    #[test]
    fn a_hold_by_re_invite_keeps_the_ports_and_the_direction_and_is_not_ended_for_silence() {
        let table = table(5);
        let mut w = world(&table);
        let tag = set_up(&mut w);
        let core_port = port_in(&body(&w.to_callee[0]));
        let hold = CALLER_SDP.replace("o=alice 1 1", "o=alice 1 2") + "a=sendonly\n";
        w.caller_sends(&reinvite(&tag, "z9hG4bKhold", 2, &hold));
        let reoffer = body(w.last_to_callee());
        assert!(reoffer.contains("a=sendonly"), "{reoffer}");
        assert_eq!(
            port_in(&reoffer),
            core_port,
            "the same port for the same stream"
        );
        assert!(
            reoffer.contains(" 2 IN IP4 198.51.100.10"),
            "our version, up by one for a changed description: {reoffer}"
        );
        callee_answers_sdp(
            &mut w,
            200,
            &(CALLEE_SDP.replace("o=bob 7 7", "o=bob 7 8") + "a=recvonly\n"),
        );
        assert!(body(w.to_caller.last().expect("200")).contains("a=recvonly"));
        // Silence while on hold is not a dead call.
        let id = w.engine.dialogs().next().map(|d| d.id).expect("call");
        assert!(w
            .engine
            .handle_media_event(w.now, MediaEvent::Inactive { id, owner: 0 }));
        assert_eq!(w.engine.call_count(), 1);
        assert_eq!(w.engine.stats().media_inactive_ended, 0);
    }

    #[test]
    fn rtp_inactivity_ends_an_established_call_with_bye_on_both_legs() {
        let table = table(5);
        let mut w = world(&table);
        set_up(&mut w);
        let deadline = table.lock().expect("table").poll_timeout().expect("armed");
        w.now = deadline;
        table.lock().expect("table").handle_timeout(deadline);
        let event = table.lock().expect("table").poll_event().expect("inactive");
        assert!(matches!(event, MediaEvent::Inactive { .. }));
        assert!(w.engine.handle_media_event(w.now, event));
        w.collect();
        assert_eq!(
            w.methods_to_callee().last().map(String::as_str),
            Some("BYE")
        );
        assert!(w
            .to_caller
            .last()
            .is_some_and(|m| m.method() == Some(&Method::Bye)));
        assert_eq!(w.engine.stats().media_inactive_ended, 1);
        assert!(table.lock().expect("table").is_empty());
    }

    #[test]
    fn no_ports_left_is_503_for_a_new_call_and_a_bad_offer_is_488() {
        let table = table(2);
        let mut hog = world(&table);
        // Two pairs per pool: one call with two streams takes them all.
        let two = CALLER_SDP.to_owned() + "m=audio 4002 RTP/AVP 0\n";
        hog.caller_sends(&invite_with(Some(&two)));
        assert_eq!(table.lock().expect("table").pool(0), (0, 2));
        let mut w = world_seeded(&table, 8);
        w.caller_sends(&invite_with(Some(CALLER_SDP)));
        let refusal = w.to_caller.last().expect("refused").clone();
        assert_eq!(refusal.status(), Some(503));
        assert!(refusal
            .header(&HeaderName::Other("Retry-After".into()))
            .is_some());
        assert_eq!(w.methods_to_callee(), Vec::<String>::new());
        assert_eq!(w.engine.call_count(), 0);
        assert_eq!(w.engine.stats().media_ports_503, 1);

        let mut w = world_seeded(&table, 9);
        w.caller_sends(&invite_with(Some("v=0\nthis is not sdp\n")));
        assert_eq!(w.to_caller.last().and_then(SipMessage::status), Some(488));
        assert_eq!(w.engine.call_count(), 0);
    }

    #[test]
    fn a_replicated_call_claims_its_media_ports_on_the_standby() {
        let table = table(5);
        let mut w = world(&table);
        set_up(&mut w);
        let core_port = port_in(&body(&w.to_callee[0]));
        let mut dialog = None;
        while let Some(c) = w.engine.poll_dialog_change() {
            if let DialogChange::Upsert(d) = c {
                dialog = Some(d);
            }
        }
        let standby_table = self::table(5);
        let mut standby = world(&standby_table);
        standby
            .engine
            .install_dialog(standby.now, *dialog.expect("replicated"));
        let mut t = standby_table.lock().expect("table");
        let f = t
            .handle_packet(standby.now, core_port, sa("198.51.100.20:6000"), &rtp(9))
            .expect("forwarded at once on the new active");
        assert_eq!(f.to, sa("10.1.1.1:4000"));
    }

    #[test]
    fn a_demoted_active_that_takes_over_again_claims_its_calls_media_again() {
        let table = table(5);
        let mut w = world(&table);
        set_up(&mut w);
        let mut dialog = None;
        while let Some(c) = w.engine.poll_dialog_change() {
            if let DialogChange::Upsert(d) = c {
                dialog = Some(d);
            }
        }
        // Released with the media address (a planned switchover): no port held.
        table.lock().expect("table").clear();
        assert_eq!(table.lock().expect("table").pool(0), (5, 5));
        // Back as the active, from the replica the peer kept.
        w.engine.install_dialog(w.now, *dialog.expect("replicated"));
        let t = table.lock().expect("table");
        assert_eq!(t.len(), 1);
        assert_eq!(t.pool(0), (4, 5));
    }

    #[test]
    fn an_offer_in_a_reliable_183_and_its_answer_in_the_prack_are_anchored() {
        let table = table(5);
        let mut w = world(&table);
        w.caller_sends(&invite_with(None));
        callee_answers_sdp(&mut w, 183, CALLEE_SDP);
        let early = w.to_caller.last().expect("183").clone();
        assert_eq!(early.status(), Some(183));
        let offer = body(&early);
        assert!(offer.contains("c=IN IP4 192.0.2.10") && !offer.contains("198.51.100.20"));
        let tag = early.to_tag().expect("early dialog tag").to_owned();
        let head = format!(
            "PRACK sip:sbc@{ACCESS} SIP/2.0\n\
             Via: SIP/2.0/UDP {CALLER};branch=z9hG4bKprack\n\
             Max-Forwards: 70\n\
             From: \"Alice\" <sip:alice@10.1.1.1>;tag=a1\n\
             To: <sip:bob@{ACCESS}>;tag={tag}\n\
             Call-ID: call-1@10.1.1.1\n\
             CSeq: 2 PRACK\n\
             RAck: 1 1 INVITE\n"
        );
        w.caller_sends(&with_body(&head, CALLER_SDP));
        let prack = w.last_to_callee().clone();
        assert_eq!(prack.method(), Some(&Method::Prack));
        let answer = body(&prack);
        assert!(
            answer.contains("c=IN IP4 198.51.100.10") && !answer.contains("10.1.1.1"),
            "{answer}"
        );
        let t = table.lock().expect("table");
        let s = t.sessions().next().expect("a session").1;
        assert_eq!(
            s.destination(0, MediaSide::Caller),
            Some(sa("10.1.1.1:4000"))
        );
        assert_eq!(
            s.destination(0, MediaSide::Callee),
            Some(sa("198.51.100.20:6000"))
        );
    }

    fn established(table: &Arc<Mutex<MediaTable>>) -> (World, String) {
        let mut w = world(table);
        let tag = set_up(&mut w);
        while w.engine.poll_dialog_change().is_some() {}
        (w, tag)
    }

    fn reinvite(tag: &str, branch: &str, cseq: u32, sdp: &str) -> String {
        let head = format!(
            "INVITE sip:sbc@{ACCESS} SIP/2.0\n\
             Via: SIP/2.0/UDP {CALLER};branch={branch}\n\
             Max-Forwards: 70\n\
             From: \"Alice\" <sip:alice@10.1.1.1>;tag=a1\n\
             To: <sip:bob@{ACCESS}>;tag={tag}\n\
             Call-ID: call-1@10.1.1.1\n\
             CSeq: {cseq} INVITE\n\
             Contact: <sip:alice@{CALLER}>\n"
        );
        with_body(&head, sdp)
    }

    fn origin_version(sdp: &str) -> Option<u64> {
        sdp.lines()
            .find_map(|l| l.strip_prefix("o="))
            .and_then(|o| o.split(' ').nth(2))
            .and_then(|v| v.parse().ok())
    }

    #[test]
    fn a_refused_re_offer_leaves_the_media_as_it_was() {
        let table = table(5);
        let (mut w, tag) = established(&table);
        let moved = CALLER_SDP
            .replace("o=alice 1 1", "o=alice 1 2")
            .replace("m=audio 4000", "m=audio 4100");
        w.caller_sends(&reinvite(&tag, "z9hG4bKre", 2, &moved));
        {
            let t = table.lock().expect("table");
            let s = t.sessions().next().expect("session").1;
            assert_eq!(
                s.destination(0, MediaSide::Caller),
                Some(sa("10.1.1.1:4100"))
            );
        }
        w.callee_answers(488, "b1");
        assert_eq!(w.codes_to_caller().last(), Some(&488));
        let t = table.lock().expect("table");
        let s = t.sessions().next().expect("session").1;
        assert_eq!(
            s.destination(0, MediaSide::Caller),
            Some(sa("10.1.1.1:4000")),
            "RFC 3264: the old description stays in force"
        );
    }

    #[test]
    fn the_answer_to_a_re_invite_is_replicated_and_the_version_moves_only_on_change() {
        let table = table(5);
        let (mut w, tag) = established(&table);
        let first_version = origin_version(&body(&w.to_callee[0])).expect("version");
        // A session refresh with the same description: the callee sees the same version.
        let same = CALLER_SDP.replace("o=alice 1 1", "o=alice 1 2");
        w.caller_sends(&reinvite(&tag, "z9hG4bKre1", 2, &same));
        assert_eq!(
            origin_version(&body(w.last_to_callee())),
            Some(first_version)
        );
        // The callee answers from a new port: the standby must learn it.
        let moved = CALLEE_SDP
            .replace("o=bob 7 7", "o=bob 7 8")
            .replace("m=audio 6000", "m=audio 6100");
        callee_answers_sdp(&mut w, 200, &moved);
        let answer = body(w.to_caller.last().expect("200"));
        assert!(origin_version(&answer).is_some());
        let mut last = None;
        while let Some(c) = w.engine.poll_dialog_change() {
            if let DialogChange::Upsert(d) = c {
                last = d.media;
            }
        }
        let record = last.expect("the answer replicated");
        assert_eq!(
            record.streams[0][1].signalled.map(|s| s.0),
            Some(sa("198.51.100.20:6100"))
        );
    }
}

mod accounting;
mod families;
mod hunt;
mod refer_call;
mod register;
mod session_timer;
mod setup;
mod subscription;
mod tap;
mod transfer;

#[test]
fn an_unreachable_next_hop_answers_500_at_once() {
    // RFC 3261 §8.1.3.1: the runtime turns a failed connect or TLS handshake into a 503 for
    // the request it could not send, and hands it in as the next hop's answer.
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKunreach"));
    let sent = w.raw_to_callee[0].clone();
    let answer = crate::sip::message::transport_failure_response(&sent).expect("a request");
    let text = String::from_utf8(answer.to_vec()).expect("text");
    assert!(text.starts_with("SIP/2.0 503 "), "{text}");
    w.callee_sends(&text.replace("\r\n", "\n"));
    // Not relayed as 503 (RFC 3261 §16.7: the caller would take the SBC itself for
    // unavailable).
    assert_eq!(w.codes_to_caller(), vec![100, 500]);
    assert_eq!(w.engine.call_count(), 0, "the failed call is gone");
    // An ACK has no answer; a response is not a request.
    let ack = String::from_utf8(sent.to_vec())
        .expect("text")
        .replacen("INVITE ", "ACK ", 1)
        .replace(" INVITE\r\n", " ACK\r\n");
    let ack = Bytes::from(ack);
    assert!(crate::sip::message::transport_failure_response(&ack).is_none());
    assert!(crate::sip::message::transport_failure_response(&answer).is_none());
}

#[test]
fn a_sips_request_travels_only_over_tls() {
    let sips_invite = |branch: &str| {
        invite(branch)
            .replace("INVITE sip:bob@", "INVITE sips:bob@")
            .replace("SIP/2.0/UDP", "SIP/2.0/TLS")
    };
    // Over UDP in, over UDP out: refused, with the reason.
    let mut w = World::new();
    w.caller_sends(&sips_invite("z9hG4bKsips1"));
    assert_eq!(w.codes_to_caller(), vec![416]);
    assert_eq!(w.engine.stats().sips_refused, 1);

    // Over TLS in, but the next hop is reached over UDP: 480.
    let mut cfg = config();
    cfg.interfaces[0].tls_addr = Some(sa("10.0.0.1:5061"));
    cfg.interfaces[1].tls_addr = Some(sa("10.0.1.1:5061"));
    let tls_in = |w: &mut World, text: &str| {
        w.engine.handle_inbound(
            w.now,
            Inbound {
                interface: 0,
                transport: LegTransport::Tls,
                source: sa(CALLER),
                data: Bytes::from(text.replace('\n', "\r\n")),
            },
        );
        w.collect();
    };
    let mut w = World::new();
    w.engine.set_config(cfg.clone());
    tls_in(&mut w, &sips_invite("z9hG4bKsips2"));
    assert_eq!(w.codes_to_caller(), vec![480]);

    // TLS on both hops: relayed as sips:, from our TLS listener, with a sips: Contact.
    let mut hop = cfg.router.agents()[0].hop.clone();
    hop.transport = LegTransport::Tls;
    cfg.router = Arc::new(Router::from_realm("access", hop, Instant::now()));
    let mut w = World::new();
    w.engine.set_config(cfg);
    tls_in(&mut w, &sips_invite("z9hG4bKsips3"));
    assert_eq!(w.codes_to_caller(), vec![100]);
    let out = w.last_to_callee();
    assert!(
        out.request_uri().unwrap_or("").starts_with("sips:"),
        "{out:?}"
    );
    let via = out.header(&HeaderName::Via).unwrap_or("");
    assert!(via.starts_with("SIP/2.0/TLS 10.0.1.1:5061;"), "{via}");
    let contact = out.header(&HeaderName::Contact).unwrap_or("");
    assert_eq!(contact, "<sips:sbc@10.0.1.1:5061>");
}

#[test]
fn a_sips_contact_on_a_leg_not_over_tls_gets_a_sip_contact() {
    // A UDP caller whose Contact is `sips:` (RFC 3261 only requires one when the
    // Request-URI is `sips:`): our Contact toward it must name the transport it can reach us
    // on, not `sips:` (TLS) at our UDP address, where no TLS listens.
    let mut w = World::new();
    w.caller_sends(
        &invite("z9hG4bKsipsct").replace("Contact: <sip:alice@", "Contact: <sips:alice@"),
    );
    w.callee_answers(200, "b1");
    let ok = w
        .to_caller
        .iter()
        .find(|m| m.status() == Some(200))
        .expect("the 200 relayed to the caller");
    let contact = ok.header(&HeaderName::Contact).unwrap_or("");
    assert_eq!(contact, format!("<sip:sbc@{ACCESS};transport=udp>"));
}
