//! Subscriptions through the B2BUA (RFC 6665): SUBSCRIBE and REFER make a dialog, NOTIFYs and
//! refreshes travel in it with each leg's own ids, and it ends with its last NOTIFY, a 481 or
//! its expiry (on the virtual clock).

use super::*;

fn subscribe(branch: &str, event: Option<&str>, expires: u32) -> String {
    let event = event.map_or(String::new(), |e| format!("Event: {e}\n"));
    format!(
        "SUBSCRIBE sip:bob@{ACCESS} SIP/2.0\n\
         Via: SIP/2.0/UDP {CALLER};branch={branch}\n\
         Max-Forwards: 70\n\
         From: <sip:alice@10.1.1.1>;tag=s1\n\
         To: <sip:bob@{ACCESS}>\n\
         Call-ID: sub-1@10.1.1.1\n\
         CSeq: 1 SUBSCRIBE\n\
         Contact: <sip:alice@{CALLER}>\n\
         {event}Expires: {expires}\n\
         Accept: application/simple-message-summary\n\
         Content-Length: 0\n\n"
    )
}

/// The callee's final answer to `req`, with `Expires` when given.
fn notifier_answers(w: &mut World, req: &SipMessage, code: u16, expires: Option<u32>) {
    let to = req.header(&HeaderName::To).unwrap_or_default();
    let to = if req.to_tag().is_none() {
        format!("{to};tag=n1")
    } else {
        to.to_owned()
    };
    let expires = expires.map_or(String::new(), |e| format!("Expires: {e}\n"));
    w.callee_sends(&format!(
        "SIP/2.0 {code} {}\nVia: {}\nFrom: {}\nTo: {to}\nCall-ID: {}\nCSeq: {}\n\
         Contact: <sip:bob@{CALLEE}>\n{expires}Content-Length: 0\n\n",
        reason_for(code),
        req.top_via().unwrap_or_default(),
        req.header(&HeaderName::From).unwrap_or_default(),
        req.call_id().unwrap_or_default(),
        req.header(&HeaderName::CSeq).unwrap_or_default(),
    ));
}

/// A NOTIFY from the notifier in the dialog of the SUBSCRIBE it got (`sub`).
fn notify(sub: &SipMessage, cseq: u32, state: &str, body: &str) -> String {
    format!(
        "NOTIFY sip:sbc@{CORE} SIP/2.0\n\
         Via: SIP/2.0/UDP {CALLEE};branch=z9hG4bKnfy{cseq}\n\
         Max-Forwards: 70\n\
         From: <sip:bob@example.test>;tag=n1\n\
         To: <sip:alice@example.test>;tag={}\n\
         Call-ID: {}\n\
         CSeq: {cseq} NOTIFY\n\
         Contact: <sip:bob@{CALLEE}>\n\
         Event: message-summary\n\
         Subscription-State: {state}\n\
         Content-Type: application/simple-message-summary\n\
         Content-Length: {}\n\n{body}",
        sub.from_tag().unwrap_or_default(),
        sub.call_id().unwrap_or_default(),
        body.len() + body.matches('\n').count(),
    )
}

/// The subscriber's 200 to the last request it got.
fn subscriber_answers(w: &mut World, code: u16) {
    let req = w
        .to_caller
        .iter()
        .rev()
        .find(|m| m.method().is_some())
        .expect("a request to the subscriber")
        .clone();
    w.caller_sends(&format!(
        "SIP/2.0 {code} {}\nVia: {}\nFrom: {}\nTo: {}\nCall-ID: {}\nCSeq: {}\nContent-Length: 0\n\n",
        reason_for(code),
        req.top_via().unwrap_or_default(),
        req.header(&HeaderName::From).unwrap_or_default(),
        req.header(&HeaderName::To).unwrap_or_default(),
        req.call_id().unwrap_or_default(),
        req.header(&HeaderName::CSeq).unwrap_or_default(),
    ));
}

fn header<'m>(m: &'m SipMessage, name: &str) -> Option<&'m str> {
    m.headers
        .iter()
        .find(|h| h.name.as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// A subscription accepted for `expires` seconds: returns the SUBSCRIBE the notifier got and
/// our tag toward the subscriber.
fn subscribed(w: &mut World, expires: u32) -> (SipMessage, String) {
    w.caller_sends(&subscribe("z9hG4bKsub1", Some("message-summary"), expires));
    let sub = w.last_to_callee().clone();
    notifier_answers(w, &sub, 200, Some(expires));
    let ok = w.to_caller.last().expect("the 200").clone();
    assert_eq!(ok.status(), Some(200));
    (sub, ok.to_tag().expect("our tag").to_owned())
}

#[test]
fn a_subscription_carries_its_notifies_and_ends_with_the_last_one() {
    let mut w = World::new();
    let (sub, our_tag) = subscribed(&mut w, 600);
    // Out on a leg of its own: our Call-ID and tag, CSeq 1, our Contact, the Event kept.
    assert_eq!(sub.method(), Some(&Method::Subscribe));
    assert_ne!(sub.call_id(), Some("sub-1@10.1.1.1"));
    assert_eq!(sub.cseq().map(|c| c.seq), Some(1));
    assert_eq!(header(&sub, "event"), Some("message-summary"));
    assert!(sub.contact_uri().is_some_and(|c| c.contains(CORE)));
    // The 200 to the subscriber: our Contact, the notifier's Expires.
    let ok = w.to_caller.last().expect("200").clone();
    assert!(ok.contact_uri().is_some_and(|c| c.contains(ACCESS)));
    assert_eq!(header(&ok, "expires"), Some("600"));
    assert_eq!(w.engine.subscription_count(), 1);
    assert_eq!(w.engine.active_call_count(), 0, "not a call");
    assert_eq!(w.engine.stats().subscriptions_accepted, 1);

    // A NOTIFY on the notifier's leg reaches the subscriber on its own: its Call-ID, its tag
    // as To, ours as From, CSeq 1, the body as is.
    w.callee_sends(&notify(
        &sub,
        1,
        "active;expires=600",
        "Messages-Waiting: yes\n",
    ));
    let n = w.to_caller.last().expect("NOTIFY").clone();
    assert_eq!(n.method(), Some(&Method::Notify));
    assert_eq!(n.call_id(), Some("sub-1@10.1.1.1"));
    assert_eq!(n.to_tag(), Some("s1"));
    assert_eq!(n.from_tag(), Some(our_tag.as_str()));
    assert_eq!(n.cseq().map(|c| c.seq), Some(1));
    assert_eq!(&n.body[..], b"Messages-Waiting: yes\r\n");
    assert_eq!(header(&n, "subscription-state"), Some("active;expires=600"));
    subscriber_answers(&mut w, 200);
    assert_eq!(w.to_others.len(), 0);
    assert_eq!(
        w.to_callee.last().and_then(SipMessage::status),
        Some(200),
        "the subscriber's 200 back to the notifier"
    );

    // A refresh from the subscriber goes in the notifier's dialog, CSeq 2.
    w.caller_sends(
        &subscribe("z9hG4bKsub2", Some("message-summary"), 600)
            .replace(
                "To: <sip:bob@192.0.2.10:5060>",
                &format!("To: <sip:bob@{ACCESS}>;tag={our_tag}"),
            )
            .replace("CSeq: 1 SUBSCRIBE", "CSeq: 2 SUBSCRIBE"),
    );
    let refresh = w.last_to_callee().clone();
    assert_eq!(refresh.method(), Some(&Method::Subscribe));
    assert_eq!(refresh.call_id(), sub.call_id());
    assert_eq!(refresh.to_tag(), Some("n1"));
    assert_eq!(refresh.cseq().map(|c| c.seq), Some(2));
    notifier_answers(&mut w, &refresh, 200, Some(600));
    assert_eq!(w.codes_to_caller().last(), Some(&200));

    // The last NOTIFY (terminated): relayed, and once answered the subscription is gone.
    w.callee_sends(&notify(&sub, 2, "terminated;reason=noresource", ""));
    assert_eq!(
        w.to_caller.last().and_then(|m| m.cseq()).map(|c| c.seq),
        Some(2)
    );
    assert_eq!(w.engine.subscription_count(), 1, "until its answer");
    subscriber_answers(&mut w, 200);
    assert_eq!(w.engine.subscription_count(), 0);
    assert_eq!(w.engine.stats().subscriptions_ended, 1);
}

#[test]
fn a_subscription_not_refreshed_is_released_after_its_expiry_and_a_grace() {
    let mut w = World::new();
    let (sub, our_tag) = subscribed(&mut w, 60);
    w.advance(Duration::from_secs(50));
    // Refreshed at 50 s for 60 s more: its first expiry (60 + 32 s) passes harmlessly.
    w.caller_sends(
        &subscribe("z9hG4bKsub2", Some("message-summary"), 60)
            .replace(
                "To: <sip:bob@192.0.2.10:5060>",
                &format!("To: <sip:bob@{ACCESS}>;tag={our_tag}"),
            )
            .replace("CSeq: 1 SUBSCRIBE", "CSeq: 2 SUBSCRIBE"),
    );
    let refresh = w.last_to_callee().clone();
    assert_eq!(refresh.call_id(), sub.call_id());
    notifier_answers(&mut w, &refresh, 200, Some(60));
    w.advance(Duration::from_secs(60 + 32 - 50 + 10));
    assert_eq!(w.engine.subscription_count(), 1, "the refresh moved it");
    // 50 + 60 + 32 s: released, nothing sent (both ends know it expired).
    let sent = (w.to_caller.len(), w.to_callee.len());
    w.advance(Duration::from_secs(50 + 60 + 32 - (60 + 32 + 10) - 1));
    assert_eq!(w.engine.subscription_count(), 1);
    w.advance(Duration::from_secs(2));
    assert_eq!(w.engine.subscription_count(), 0);
    assert_eq!(w.engine.stats().subscriptions_expired, 1);
    assert_eq!((w.to_caller.len(), w.to_callee.len()), sent);
}

#[test]
fn a_notify_before_the_2xx_makes_the_dialog_and_a_481_ends_it() {
    let mut w = World::new();
    w.caller_sends(&subscribe("z9hG4bKsub1", Some("dialog"), 300));
    let sub = w.last_to_callee().clone();
    // RFC 6665 section 4.1.2.4: the NOTIFY may come first.
    w.callee_sends(&notify(&sub, 1, "active;expires=300", ""));
    let n = w.to_caller.last().expect("NOTIFY").clone();
    assert_eq!(n.method(), Some(&Method::Notify));
    assert_eq!(n.call_id(), Some("sub-1@10.1.1.1"));
    subscriber_answers(&mut w, 200);
    notifier_answers(&mut w, &sub, 200, Some(300));
    assert_eq!(w.codes_to_caller().last(), Some(&200));
    assert_eq!(w.engine.subscription_count(), 1);
    // The subscriber forgot it: 481 to the next NOTIFY ends it.
    w.callee_sends(&notify(&sub, 2, "active;expires=200", ""));
    subscriber_answers(&mut w, 481);
    assert_eq!(w.engine.subscription_count(), 0);
    assert_eq!(
        w.to_callee.last().and_then(SipMessage::status),
        Some(481),
        "the 481 relayed"
    );
}

#[test]
fn a_refused_subscription_and_one_without_event_hold_nothing() {
    let mut w = World::new();
    w.caller_sends(&subscribe("z9hG4bKsub1", Some("presence"), 300));
    let sub = w.last_to_callee().clone();
    notifier_answers(&mut w, &sub, 489, None);
    assert_eq!(w.codes_to_caller(), vec![489]);
    assert_eq!(w.engine.subscription_count(), 0);
    w.caller_sends(&subscribe("z9hG4bKsub2", None, 300).replace("sub-1@", "sub-2@"));
    assert_eq!(w.codes_to_caller(), vec![489, 400]);
    assert_eq!(w.engine.subscription_count(), 0);
    assert_eq!(w.engine.stats().subscriptions_refused, 2);
}

#[test]
fn an_out_of_dialog_refer_makes_a_refer_subscription() {
    let mut w = World::new();
    let refer = subscribe("z9hG4bKref1", None, 0)
        .replace("SUBSCRIBE sip", "REFER sip")
        .replace("CSeq: 1 SUBSCRIBE", "CSeq: 1 REFER")
        .replace("Expires: 0\n", "Refer-To: <sip:carol@example.test>\n");
    w.caller_sends(&refer);
    let out = w.last_to_callee().clone();
    assert_eq!(out.method(), Some(&Method::Refer));
    assert_eq!(header(&out, "refer-to"), Some("<sip:carol@example.test>"));
    notifier_answers(&mut w, &out, 202, None);
    assert_eq!(w.codes_to_caller(), vec![202]);
    assert_eq!(w.engine.subscription_count(), 1);
    let sipfrag = notify(&out, 1, "terminated;reason=noresource", "SIP/2.0 200 OK\n")
        .replace("Event: message-summary", "Event: refer")
        .replace("application/simple-message-summary", "message/sipfrag");
    w.callee_sends(&sipfrag);
    assert_eq!(
        &w.to_caller.last().expect("NOTIFY").body[..],
        b"SIP/2.0 200 OK\r\n"
    );
    subscriber_answers(&mut w, 200);
    assert_eq!(w.engine.subscription_count(), 0);
}

#[test]
fn an_accepted_subscription_is_replicated_and_the_new_active_carries_and_expires_it() {
    let mut a = World::new();
    a.caller_sends(&subscribe("z9hG4bKsub1", Some("message-summary"), 120));
    let sub = a.last_to_callee().clone();
    assert!(
        a.engine.poll_dialog_change().is_none(),
        "not replicated before it is accepted"
    );
    notifier_answers(&mut a, &sub, 200, Some(120));
    let Some(DialogChange::Upsert(d)) = a.engine.poll_dialog_change() else {
        panic!("the accepted subscription is replicated");
    };
    assert_eq!(d.state, DialogState::Confirmed);
    assert!(d.setup.is_none());
    assert_eq!(
        d.subscription.as_ref().map(|s| s.event.as_str()),
        Some("message-summary")
    );

    // The standby takes over 10 s later: the next NOTIFY reaches the subscriber through it.
    let mut b = World::new();
    b.now = a.now;
    b.advance(Duration::from_secs(10));
    b.engine.install_dialog(b.now, *d);
    assert_eq!(b.engine.subscription_count(), 1);
    assert_eq!(b.engine.active_call_count(), 0);
    b.callee_sends(&notify(
        &sub,
        1,
        "active;expires=110",
        "Messages-Waiting: no\n",
    ));
    let n = b
        .to_caller
        .last()
        .expect("NOTIFY through the new active")
        .clone();
    assert_eq!(n.call_id(), Some("sub-1@10.1.1.1"));
    assert_eq!(n.to_tag(), Some("s1"));
    subscriber_answers(&mut b, 200);
    // Its expiry came with it: 120 + 32 s after it was accepted, not after the takeover.
    b.advance(Duration::from_secs(120 + 32 - 10 - 1));
    assert_eq!(b.engine.subscription_count(), 1);
    b.advance(Duration::from_secs(2));
    assert_eq!(b.engine.subscription_count(), 0);
    assert_eq!(b.engine.stats().subscriptions_expired, 1);
}

/// A dialog-info NOTIFY naming `(call_id, local_tag, remote_tag)`, in the dialog of `sub`.
fn dialog_info_notify(sub: &SipMessage, cseq: u32, ids: (&str, &str, &str)) -> String {
    let (call_id, local, remote) = ids;
    let body = format!(
        "<?xml version=\"1.0\"?>\n<dialog-info xmlns=\"urn:ietf:params:xml:ns:dialog-info\" \
         version=\"1\" state=\"full\" entity=\"sip:bob@example.test\">\n\
         <dialog id=\"d1\" call-id=\"{call_id}\" local-tag=\"{local}\" remote-tag=\"{remote}\" \
         direction=\"recipient\"><state>confirmed</state></dialog>\n</dialog-info>\n"
    );
    notify(sub, cseq, "active;expires=600", &body)
        .replace("Event: message-summary", "Event: dialog")
        .replace(
            "application/simple-message-summary",
            "application/dialog-info+xml",
        )
}

#[test]
fn a_busy_lamp_s_notify_names_the_call_as_the_subscriber_s_side_knows_it() {
    let mut w = World::new();
    let our_caller_tag = establish(&mut w);
    let invite = w.to_callee[0].clone();
    let (b2b_call_id, our_callee_tag) = (
        invite.call_id().expect("Call-ID").to_owned(),
        invite.from_tag().expect("our tag").to_owned(),
    );
    let (sub, _) = subscribed(&mut w, 600);
    // The notifier saw bob's call on our callee leg: bob's tag b1 local, ours remote.
    w.callee_sends(&dialog_info_notify(
        &sub,
        1,
        (&b2b_call_id, "b1", &our_callee_tag),
    ));
    let n = w.to_caller.last().expect("NOTIFY").clone();
    let body = String::from_utf8_lossy(&n.body).into_owned();
    // On the caller's side, bob appears with our tag and the caller with its own.
    assert!(
        body.contains(&format!(
            "call-id=\"call-1@10.1.1.1\" local-tag=\"{our_caller_tag}\" remote-tag=\"a1\""
        )),
        "{body}"
    );
    assert!(!body.contains(&b2b_call_id), "{body}");
    assert_eq!(w.engine.stats().dialog_info_rewritten, 1);
    // A body naming no call of ours passes as it is.
    w.callee_sends(&dialog_info_notify(&sub, 2, ("elsewhere@x", "p", "q")));
    let n = w.to_caller.last().expect("NOTIFY").clone();
    assert!(String::from_utf8_lossy(&n.body).contains("call-id=\"elsewhere@x\""));
    assert_eq!(w.engine.stats().dialog_info_rewritten, 1);
}

#[test]
fn a_busy_lamp_s_call_in_another_shard_is_named_by_that_shard_s_engine() {
    // The call lives in shard X, the subscription in shard Y: the shell asks X first.
    let (mut x_shard, mut y_shard) = (World::new(), World::new());
    let our_caller_tag = establish(&mut x_shard);
    let invite = x_shard.to_callee[0].clone();
    let (b2b_call_id, our_callee_tag) = (
        invite.call_id().expect("Call-ID").to_owned(),
        invite.from_tag().expect("our tag").to_owned(),
    );
    let (sub, _) = subscribed(&mut y_shard, 600);
    let data =
        dialog_info_notify(&sub, 1, (&b2b_call_id, "b1", &our_callee_tag)).replace('\n', "\r\n");
    assert_eq!(
        named_call_id(data.as_bytes()).as_deref(),
        Some(b2b_call_id.as_str())
    );
    assert_eq!(y_shard.engine.named_call(data.as_bytes()), None);
    let named = x_shard.engine.named_call(data.as_bytes());
    assert!(matches!(named, Some(NamedCall::DialogViews(ref v)) if v.len() == 1));
    y_shard.engine.handle_inbound_with_named(
        y_shard.now,
        Inbound {
            interface: 1,
            transport: LegTransport::Udp,
            source: sa(CALLEE),
            data: Bytes::from(data),
        },
        named,
    );
    y_shard.collect();
    let n = y_shard.to_caller.last().expect("NOTIFY").clone();
    assert!(
        String::from_utf8_lossy(&n.body).contains(&format!(
            "call-id=\"call-1@10.1.1.1\" local-tag=\"{our_caller_tag}\" remote-tag=\"a1\""
        )),
        "{:?}",
        n.body
    );
}

#[test]
fn one_source_holds_at_most_its_bound_of_subscriptions_node_wide() {
    let sources = SubscriptionSources {
        per_source: 2,
        ..SubscriptionSources::default()
    };
    // Two engines (shards) share the node's counts.
    let world = |sources: &SubscriptionSources| {
        let mut w = World::new();
        w.engine = Engine::new(
            EngineConfig {
                subscription_sources: sources.clone(),
                ..config()
            },
            seed(),
        );
        w
    };
    let (mut a, mut b) = (world(&sources), world(&sources));
    let sub = |n: u32| {
        subscribe(&format!("z9hG4bKsub{n}"), Some("presence"), 600)
            .replace("sub-1@10.1.1.1", &format!("sub-{n}@10.1.1.1"))
    };
    a.caller_sends(&sub(1));
    b.caller_sends(&sub(2));
    assert_eq!(sources.held(sa(CALLER).ip()), 2);
    a.caller_sends(&sub(3));
    assert_eq!(
        a.codes_to_caller().last(),
        Some(&503),
        "the third is refused"
    );
    assert_eq!(a.engine.stats().subscriptions_source_capped, 1);
    assert_eq!(a.to_callee.len(), 1, "not sent on");
    // The first is refused by its notifier: its place is given back.
    let first = a.to_callee[0].clone();
    notifier_answers(&mut a, &first, 404, None);
    assert_eq!(sources.held(sa(CALLER).ip()), 1);
    a.caller_sends(&sub(4));
    assert_eq!(a.to_callee.len(), 2, "admitted again");
    assert_eq!(sources.held(sa(CALLER).ip()), 2);
}

#[test]
fn an_ipv6_source_is_its_prefix() {
    let sources = SubscriptionSources {
        per_source: 1,
        ipv6_prefix_len: 64,
        ..SubscriptionSources::default()
    };
    let ip = |s: &str| s.parse::<std::net::IpAddr>().expect("an address");
    assert!(sources.take(ip("2001:db8:0:1::1"), false));
    assert!(!sources.take(ip("2001:db8:0:1::2"), false), "the same /64");
    assert!(sources.take(ip("2001:db8:0:2::1"), false), "another /64");
    assert!(sources.take(ip("127.0.0.1"), false));
    sources.release(ip("2001:db8:0:1::ffff"));
    assert_eq!(sources.held(ip("2001:db8:0:1::1")), 0);
    assert_eq!(
        sources.counts.lock().map(|c| c.len()).unwrap_or(0),
        2,
        "no empty entry kept"
    );
}
