//! Attended transfer through the B2BUA: a REFER's `Replaces` names the transferor's other call
//! as the transferor sees it and goes out naming its far leg as the target sees it; the
//! transferee's INVITE with that `Replaces` goes to the target.

use super::*;

fn header<'m>(m: &'m SipMessage, name: &str) -> Option<&'m str> {
    m.headers
        .iter()
        .find(|h| h.name.as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// Sets up call `n` (Call-ID `call-n@`, the callee's tag `tag`); returns our tag toward the
/// caller and the INVITE the callee got.
fn call(w: &mut World, n: u32, tag: &str) -> (String, SipMessage) {
    w.caller_sends(&invite(&format!("z9hG4bKinv{n}")).replace("call-1@", &format!("call-{n}@")));
    let inv = w.last_to_callee().clone();
    w.callee_answers(200, tag);
    let ok = w.to_caller.last().expect("200").clone();
    let ours = ok.to_tag().expect("our tag").to_owned();
    w.caller_sends(
        &caller_in_dialog("ACK", 1, &format!("z9hG4bKack{n}"), &ours)
            .replace("call-1@", &format!("call-{n}@")),
    );
    (ours, inv)
}

#[test]
fn an_attended_transfer_names_the_target_s_own_leg_and_reaches_it() {
    let mut w = World::new();
    // Alice calls bob (X), then carol (Y): both callees are behind the core side.
    let (x_tag, _) = call(&mut w, 1, "bob1");
    let (y_tag, y_invite) = call(&mut w, 2, "carol1");
    // Alice refers bob to carol, replacing Y as she sees it: Y's Call-ID, our tag on her leg as
    // to-tag, hers as from-tag, escaped in the Refer-To's headers; the host is our address.
    let refer = caller_in_dialog("REFER", 2, "z9hG4bKref1", &x_tag).replace(
        "Content-Length: 0",
        &format!(
            "Refer-To: <sip:carol@{ACCESS}?Replaces=call-2%4010.1.1.1%3Bto-tag%3D{y_tag}%3Bfrom-tag%3Da1>\n\
             Referred-By: <sip:alice@10.1.1.1>\nContact: <sip:alice@{CALLER}>\nContent-Length: 0"
        ),
    );
    w.caller_sends(&refer);
    let out = w.last_to_callee().clone();
    assert_eq!(out.method(), Some(&Method::Refer));
    let y_call_id = y_invite.call_id().expect("Y's callee leg Call-ID");
    let y_ours = y_invite.from_tag().expect("our tag on Y's callee leg");
    let expected = format!(
        "<sip:carol@{CORE}?Replaces={}%3Bto-tag%3Dcarol1%3Bfrom-tag%3D{y_ours}>",
        y_call_id.replace('@', "%40")
    );
    assert_eq!(header(&out, "refer-to"), Some(expected.as_str()));
    assert_eq!(w.engine.stats().refers_translated, 1);

    // Bob's INVITE with that Replaces arrives at our core address: it goes to carol, the far
    // end of Y's leg it names, with the Replaces she can match.
    let replaces = format!("{y_call_id};to-tag=carol1;from-tag={y_ours}");
    let z = format!(
        "INVITE sip:carol@{CORE} SIP/2.0\n\
         Via: SIP/2.0/UDP {CALLEE};branch=z9hG4bKz1\n\
         Max-Forwards: 70\n\
         From: <sip:bob@example.test>;tag=bz\n\
         To: <sip:carol@example.test>\n\
         Call-ID: z-1@198.51.100.20\n\
         CSeq: 1 INVITE\n\
         Contact: <sip:bob@{CALLEE}>\n\
         Replaces: {replaces}\n\
         Content-Length: 0\n\n"
    );
    let before = w.to_callee.len();
    w.callee_sends(&z);
    let to_carol = w
        .to_callee
        .iter()
        .skip(before)
        .find(|m| m.method() == Some(&Method::Invite))
        .expect("the INVITE sent on to carol")
        .clone();
    assert_eq!(header(&to_carol, "replaces"), Some(replaces.as_str()));
    assert_ne!(
        to_carol.call_id(),
        Some("z-1@198.51.100.20"),
        "a leg of its own"
    );
    assert_eq!(w.engine.stats().replaces_matched, 1);

    // A Replaces that names nothing of ours is routed as any INVITE (none from the core here).
    w.callee_sends(
        &z.replace("z9hG4bKz1", "z9hG4bKz2")
            .replace("z-1@", "z-2@")
            .replace("to-tag=carol1", "to-tag=nobody"),
    );
    assert_eq!(w.engine.stats().replaces_unmatched, 1);
}

#[test]
fn a_transfer_naming_a_call_in_another_shard_is_translated_with_that_shard_s_answer() {
    // The runtime shards calls by Call-ID: X in one engine, Y in another. The shell asks Y's
    // engine for the far leg, then hands the REFER to X's engine with it.
    let (mut x_shard, mut y_shard) = (World::new(), World::new());
    let (x_tag, _) = call(&mut x_shard, 1, "bob1");
    let (y_tag, y_invite) = call(&mut y_shard, 2, "carol1");
    let refer = caller_in_dialog("REFER", 2, "z9hG4bKref1", &x_tag)
        .replace(
            "Content-Length: 0",
            &format!(
                "Refer-To: <sip:carol@example.test?Replaces=call-2%4010.1.1.1%3Bto-tag%3D{y_tag}%3Bfrom-tag%3Da1>\nContent-Length: 0"
            ),
        )
        .replace('\n', "\r\n");
    assert_eq!(
        named_call_id(refer.as_bytes()).as_deref(),
        Some("call-2@10.1.1.1")
    );
    assert!(x_shard.engine.named_call(refer.as_bytes()).is_none());
    let far = y_shard.engine.named_call(refer.as_bytes());
    assert!(far.is_some(), "Y's engine knows the far leg");
    x_shard.engine.handle_inbound_with_named(
        x_shard.now,
        Inbound {
            interface: 0,
            transport: LegTransport::Udp,
            source: sa(CALLER),
            data: Bytes::from(refer),
        },
        far,
    );
    x_shard.collect();
    let out = x_shard.last_to_callee().clone();
    let expected = format!(
        "<sip:carol@example.test?Replaces={}%3Bto-tag%3Dcarol1%3Bfrom-tag%3D{}>",
        y_invite.call_id().unwrap_or_default().replace('@', "%40"),
        y_invite.from_tag().unwrap_or_default()
    );
    assert_eq!(header(&out, "refer-to"), Some(expected.as_str()));
}
