//! Transfers the SBC performs itself (`refer-call-transfer enabled` on the transferor's
//! realm): the REFER is answered here, the target called without an offer, its offer given to
//! the transferee in a re-INVITE, the answer back to the target in the ACK, the transferor
//! told and released.

use super::*;

/// A world whose access realm (the caller's) performs transfers.
fn performing() -> World {
    let mut w = World::new();
    w.engine = Engine::new(
        EngineConfig {
            session_policies: vec![
                SessionPolicy {
                    refer_call_transfer: true,
                    ..SessionPolicy::default()
                },
                SessionPolicy::default(),
            ],
            accounting: Some(AccountingPolicy::default()),
            ..config()
        },
        seed(),
    );
    w
}

const OFFER: &str = "v=0\r\no=carol 1 1 IN IP4 198.51.100.30\r\ns=-\r\nc=IN IP4 198.51.100.30\r\nt=0 0\r\nm=audio 30000 RTP/AVP 0\r\n";
const ANSWER: &str = "v=0\r\no=bob 2 2 IN IP4 198.51.100.20\r\ns=-\r\nc=IN IP4 198.51.100.20\r\nt=0 0\r\nm=audio 20000 RTP/AVP 0\r\n";

fn header<'m>(m: &'m SipMessage, name: &str) -> Option<&'m str> {
    m.headers
        .iter()
        .find(|h| h.name.as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// Alice (the caller) refers bob to carol; returns alice's tag toward us.
fn refer_bob_to_carol(w: &mut World) -> String {
    let tag = establish(w);
    let refer = caller_in_dialog("REFER", 2, "z9hG4bKref1", &tag).replace(
        "Content-Length: 0",
        "Refer-To: <sip:carol@example.test>\nReferred-By: <sip:alice@10.1.1.1>\n\
         Contact: <sip:alice@10.1.1.1:5060>\nContent-Length: 0",
    );
    w.caller_sends(&refer);
    tag
}

/// The callee side answers `req` with `code` and an SDP body.
fn answer_with_sdp(w: &mut World, req: &SipMessage, code: u16, tag: &str, sdp: &str) {
    let to = req.header(&HeaderName::To).unwrap_or_default();
    let to = if req.to_tag().is_none() {
        format!("{to};tag={tag}")
    } else {
        to.to_owned()
    };
    let text = format!(
        "SIP/2.0 {code} {}\nVia: {}\nFrom: {}\nTo: {to}\nCall-ID: {}\nCSeq: {}\n\
         Contact: <sip:peer@{CALLEE}>\nContent-Type: application/sdp\nContent-Length: {}\n\n{sdp}",
        reason_for(code),
        req.top_via().unwrap_or_default(),
        req.header(&HeaderName::From).unwrap_or_default(),
        req.call_id().unwrap_or_default(),
        req.header(&HeaderName::CSeq).unwrap_or_default(),
        sdp.len(),
    );
    // The body keeps its CRLFs; the head's LFs become CRLFs.
    let (head, body) = text.split_once("\n\n").expect("head and body");
    w.engine.handle_inbound(
        w.now,
        Inbound {
            interface: 1,
            transport: LegTransport::Udp,
            source: sa(CALLEE),
            data: Bytes::from(format!("{}\r\n\r\n{body}", head.replace('\n', "\r\n"))),
        },
    );
    w.collect();
}

#[test]
fn the_sbc_calls_the_target_joins_it_to_the_transferee_and_releases_the_transferor() {
    let mut w = performing();
    refer_bob_to_carol(&mut w);
    let bob_leg = w.to_callee[0].call_id().expect("bob's leg").to_owned();
    // Alice gets 202 and the first NOTIFY (100 Trying); bob gets no REFER.
    let (accepted, notify) = (
        &w.to_caller[w.to_caller.len() - 2],
        w.to_caller.last().expect("NOTIFY"),
    );
    assert_eq!(accepted.status(), Some(202));
    assert_eq!(notify.method(), Some(&Method::Notify));
    assert_eq!(header(notify, "event"), Some("refer;id=2"));
    assert!(header(notify, "subscription-state").is_some_and(|s| s.starts_with("active")));
    assert_eq!(&notify.body[..], b"SIP/2.0 100 Trying\r\n");
    assert!(!w.methods_to_callee().contains(&"REFER".to_owned()));

    // The INVITE to carol: a leg of its own, no offer, Referred-By kept.
    let to_carol = w.last_to_callee().clone();
    assert_eq!(to_carol.method(), Some(&Method::Invite));
    assert_eq!(to_carol.request_uri(), Some("sip:carol@example.test"));
    assert_ne!(to_carol.call_id(), Some(bob_leg.as_str()));
    assert!(to_carol.body.is_empty(), "an offerless INVITE");
    assert_eq!(
        header(&to_carol, "referred-by"),
        Some("<sip:alice@10.1.1.1>")
    );

    // Carol answers with her offer: bob gets it in a re-INVITE on his leg.
    answer_with_sdp(&mut w, &to_carol, 200, "carol1", OFFER);
    let reinvite = w.last_to_callee().clone();
    assert_eq!(reinvite.method(), Some(&Method::Invite));
    assert_eq!(reinvite.call_id(), Some(bob_leg.as_str()));
    assert_eq!(reinvite.to_tag(), Some("b1"));
    assert_eq!(&reinvite.body[..], OFFER.as_bytes());

    // Bob answers: both get their ACK (carol's with bob's answer), alice the last NOTIFY and
    // a BYE.
    let before_caller = w.to_caller.len();
    answer_with_sdp(&mut w, &reinvite, 200, "b1", ANSWER);
    let acks: Vec<_> = w
        .to_callee
        .iter()
        .rev()
        .take(2)
        .filter(|m| m.method() == Some(&Method::Ack))
        .collect();
    assert_eq!(acks.len(), 2);
    let ack_carol = acks
        .iter()
        .find(|m| m.call_id() == to_carol.call_id())
        .expect("carol's ACK");
    assert_eq!(&ack_carol.body[..], ANSWER.as_bytes());
    assert_eq!(header(ack_carol, "cseq"), Some("1 ACK"));
    let ack_bob = acks
        .iter()
        .find(|m| m.call_id() == Some(bob_leg.as_str()))
        .expect("bob's ACK");
    assert_eq!(
        header(ack_bob, "cseq").map(|c| c.split(' ').next()),
        header(&reinvite, "cseq").map(|c| c.split(' ').next())
    );
    let to_alice: Vec<_> = w.to_caller[before_caller..].to_vec();
    assert_eq!(to_alice.len(), 2, "{to_alice:?}");
    assert_eq!(to_alice[0].method(), Some(&Method::Notify));
    assert_eq!(&to_alice[0].body[..], b"SIP/2.0 200 OK\r\n");
    assert!(header(&to_alice[0], "subscription-state").is_some_and(|s| s.starts_with("terminated")));
    assert_eq!(to_alice[1].method(), Some(&Method::Bye));
    assert_eq!(w.engine.stats().sbc_transfers_performed, 1);

    // Carol and bob are one call now: carol's BYE reaches bob.
    let carol_bye = format!(
        "BYE sip:sbc@{CORE} SIP/2.0\nVia: SIP/2.0/UDP {CALLEE};branch=z9hG4bKcb1\n\
         Max-Forwards: 70\nFrom: <sip:carol@example.test>;tag=carol1\nTo: {}\n\
         Call-ID: {}\nCSeq: 7 BYE\nContent-Length: 0\n\n",
        to_carol.header(&HeaderName::From).unwrap_or_default(),
        to_carol.call_id().unwrap_or_default(),
    );
    w.callee_sends(&carol_bye);
    let bye = w.last_to_callee();
    assert_eq!(bye.method(), Some(&Method::Bye));
    assert_eq!(bye.call_id(), Some(bob_leg.as_str()));

    // Accounting: the call's record session ends at the transfer, and a new one, linked to
    // it, runs until carol's BYE.
    let records: Vec<_> = std::iter::from_fn(|| w.engine.poll_accounting()).collect();
    let kinds: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r.kind,
                r.ended_by,
                r.session_id().len(),
                r.linked_session_id().len(),
            )
        })
        .collect();
    use sbc_accounting::{EndedBy, RecordKind};
    assert_eq!(
        kinds,
        vec![
            (RecordKind::Start, EndedBy::NotEnded, 16, 0),
            (RecordKind::Stop, EndedBy::Transfer, 16, 0),
            (RecordKind::Start, EndedBy::NotEnded, 19, 16),
            // Carol took alice's (the caller's) side of the call.
            (RecordKind::Stop, EndedBy::Caller, 19, 16),
        ]
    );
    assert_eq!(records[2].linked_session_id(), records[0].session_id());
}

#[test]
fn a_target_that_refuses_leaves_the_call_as_it_was_and_the_transferor_is_told() {
    let mut w = performing();
    let tag = refer_bob_to_carol(&mut w);
    let to_carol = w.last_to_callee().clone();
    w.callee_responds_to(&to_carol, 486, "carol1");
    let notify = w.to_caller.last().expect("NOTIFY").clone();
    assert_eq!(&notify.body[..], b"SIP/2.0 486 Busy Here\r\n");
    assert!(header(&notify, "subscription-state").is_some_and(|s| s.starts_with("terminated")));
    assert_eq!(w.engine.stats().sbc_transfers_failed, 1);
    // Alice and bob still talk: her BYE reaches bob.
    w.caller_sends(&caller_in_dialog("BYE", 3, "z9hG4bKbye1", &tag));
    assert_eq!(w.last_to_callee().method(), Some(&Method::Bye));
    assert_eq!(w.last_to_callee().to_tag(), Some("b1"));
}

#[test]
fn a_transferor_that_hangs_up_after_the_202_is_answered_and_the_transfer_goes_on() {
    let mut w = performing();
    let tag = refer_bob_to_carol(&mut w);
    let to_carol = w.last_to_callee().clone();
    w.caller_sends(&caller_in_dialog("BYE", 3, "z9hG4bKbye1", &tag));
    assert_eq!(w.codes_to_caller().last(), Some(&200));
    assert!(
        !w.methods_to_callee().contains(&"BYE".to_owned()),
        "bob stays"
    );
    answer_with_sdp(&mut w, &to_carol, 200, "carol1", OFFER);
    let reinvite = w.last_to_callee().clone();
    let before = w.to_caller.len();
    answer_with_sdp(&mut w, &reinvite, 200, "b1", ANSWER);
    assert_eq!(w.to_caller.len(), before, "nothing more to the transferor");
    assert_eq!(w.engine.stats().sbc_transfers_performed, 1);
}

#[test]
fn a_transferee_that_refuses_the_offer_gets_the_transferor_back_and_the_target_is_hung_up() {
    let mut w = performing();
    let tag = refer_bob_to_carol(&mut w);
    let to_carol = w.last_to_callee().clone();
    answer_with_sdp(&mut w, &to_carol, 200, "carol1", OFFER);
    let reinvite = w.last_to_callee().clone();
    w.callee_responds_to(&reinvite, 488, "b1");
    let to_carol_after: Vec<_> = w
        .to_callee
        .iter()
        .filter(|m| m.call_id() == to_carol.call_id())
        .filter_map(|m| m.method().cloned())
        .collect();
    assert_eq!(
        to_carol_after,
        vec![Method::Invite, Method::Ack, Method::Bye],
        "carol ACKed and hung up"
    );
    assert_eq!(
        &w.to_caller.last().expect("NOTIFY").body[..],
        b"SIP/2.0 488 Not Acceptable Here\r\n"
    );
    // Alice is back in the call with bob.
    w.caller_sends(&caller_in_dialog("BYE", 3, "z9hG4bKbye1", &tag));
    assert_eq!(w.last_to_callee().method(), Some(&Method::Bye));
    assert_eq!(w.last_to_callee().to_tag(), Some("b1"));
}

#[test]
fn a_refer_from_a_session_agent_with_refer_call_transfer_is_performed_and_no_route_is_told() {
    use crate::routing::local_policy::{AddressPattern, LocalPolicy};
    use crate::routing::router::{attribute_to, RouteAgent, Router, DEFAULT_ATTEMPT_EXPIRY};
    // The callee's session-agent has refer-call-transfer; its realm (core) has not, and no
    // route leaves the core realm.
    let mut agent = RouteAgent::at(
        NextHop {
            name: "core".into(),
            addr: sa(CALLEE),
            transport: LegTransport::Udp,
            interface: 1,
            max_udp_length: 0,
        },
        DEFAULT_ATTEMPT_EXPIRY,
    );
    agent.refer_call_transfer = true;
    let policy = LocalPolicy {
        from: AddressPattern::Any,
        to: AddressPattern::Any,
        source_realm: Some("access".into()),
        enabled: true,
        attributes: vec![attribute_to("core")],
    };
    let router =
        Router::new(vec![agent], Vec::new(), vec![policy], Instant::now()).expect("a valid table");
    let mut w = World::new();
    w.engine = Engine::new(
        EngineConfig {
            router: Arc::new(router),
            ..config()
        },
        seed(),
    );
    let tag = establish(&mut w);
    let invite = w.to_callee[0].clone();
    let refer = format!(
        "REFER sip:sbc@{CORE} SIP/2.0\nVia: SIP/2.0/UDP {CALLEE};branch=z9hG4bKbref\n\
         Max-Forwards: 70\nFrom: {};tag=b1\nTo: {}\nCall-ID: {}\nCSeq: 5 REFER\n\
         Refer-To: <sip:dave@example.test>\nContact: <sip:bob@{CALLEE}>\nContent-Length: 0\n\n",
        invite.header(&HeaderName::To).unwrap_or_default(),
        invite.header(&HeaderName::From).unwrap_or_default(),
        invite.call_id().unwrap_or_default(),
    );
    w.callee_sends(&refer);
    let answers: Vec<_> = w.to_callee.iter().rev().take(2).cloned().collect();
    let notify = &answers[0];
    assert_eq!(answers[1].status(), Some(202), "{answers:?}");
    assert_eq!(notify.method(), Some(&Method::Notify));
    assert_eq!(header(notify, "event"), Some("refer;id=5"));
    assert_eq!(&notify.body[..], b"SIP/2.0 404 Not Found\r\n");
    assert!(!w
        .to_caller
        .iter()
        .any(|m| m.method() == Some(&Method::Refer)));
    assert_eq!(w.engine.stats().sbc_transfers_failed, 1);
    // The call goes on: alice's BYE reaches bob.
    w.caller_sends(&caller_in_dialog("BYE", 3, "z9hG4bKbye1", &tag));
    assert_eq!(w.last_to_callee().method(), Some(&Method::Bye));
}
