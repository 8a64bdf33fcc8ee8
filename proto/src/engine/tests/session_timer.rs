//! Session timers the endpoints negotiated (RFC 4028), enforced on the virtual clock: BYE on
//! both legs when no refresh comes by the interval less min(32 s, a third of it).

use super::*;

/// The callee's 200 to `req` with `extra` header lines (each ending in `\n`).
fn callee_200(w: &mut World, req: &SipMessage, tag: &str, extra: &str) {
    let to = req.header(&HeaderName::To).unwrap_or_default();
    let to = if req.to_tag().is_none() {
        format!("{to};tag={tag}")
    } else {
        to.to_owned()
    };
    w.callee_sends(&format!(
        "SIP/2.0 200 OK\nVia: {}\nFrom: {}\nTo: {to}\nCall-ID: {}\nCSeq: {}\n\
         Contact: <sip:bob@{CALLEE}>\n{extra}Content-Length: 0\n\n",
        req.top_via().unwrap_or_default(),
        req.header(&HeaderName::From).unwrap_or_default(),
        req.call_id().unwrap_or_default(),
        req.header(&HeaderName::CSeq).unwrap_or_default(),
    ));
}

/// A call answered with `extra` in the 200 and ACKed; our tag toward the caller.
fn answered(w: &mut World, extra: &str) -> String {
    w.caller_sends(&invite("z9hG4bKinv1"));
    let inv = w.last_to_callee().clone();
    callee_200(w, &inv, "b1", extra);
    let tag = w
        .to_caller
        .last()
        .and_then(SipMessage::to_tag)
        .expect("our tag")
        .to_owned();
    w.caller_sends(&caller_in_dialog("ACK", 1, "z9hG4bKack1", &tag));
    tag
}

/// BYE transactions sent to the caller and to the callee (retransmissions counted once).
fn byes(w: &World) -> (usize, usize) {
    let count = |v: &[SipMessage]| {
        let mut branches: Vec<&str> = v
            .iter()
            .filter(|m| m.method() == Some(&Method::Bye))
            .filter_map(SipMessage::top_via_branch)
            .collect();
        branches.sort_unstable();
        branches.dedup();
        branches.len()
    };
    (count(&w.to_caller), count(&w.to_callee))
}

#[test]
fn an_unrefreshed_session_is_ended_on_both_legs_with_a_reason() {
    let mut w = World::new();
    answered(
        &mut w,
        "Session-Expires: 90;refresher=uac\nRequire: timer\n",
    );
    assert_eq!(w.engine.active_call_count(), 1);
    w.advance(Duration::from_secs(59));
    assert_eq!(byes(&w), (0, 0), "not before 90 - 30 s");
    w.advance(Duration::from_secs(2));
    assert_eq!(byes(&w), (1, 1));
    let bye = w
        .to_caller
        .iter()
        .rev()
        .find(|m| m.method() == Some(&Method::Bye))
        .expect("a BYE");
    let reason = bye
        .headers
        .iter()
        .find(|h| h.name.as_str().eq_ignore_ascii_case("reason"))
        .map(|h| h.value.as_str());
    assert_eq!(reason, Some(crate::engine::session_timer::EXPIRED_REASON));
    assert_eq!(w.engine.active_call_count(), 0);
    assert_eq!(w.engine.stats().session_timer_ended, 1);
}

#[test]
fn a_refresh_moves_the_deadline_and_one_without_session_expires_stops_it() {
    let mut w = World::new();
    let tag = answered(&mut w, "Session-Expires: 90;refresher=uac\n");
    w.advance(Duration::from_secs(40));
    // The caller refreshes with a re-INVITE at 40 s.
    w.caller_sends(&caller_in_dialog("INVITE", 2, "z9hG4bKre1", &tag).replace(
        "Content-Length: 0",
        "Session-Expires: 90;refresher=uac\nContent-Length: 0",
    ));
    let reinvite = w.last_to_callee().clone();
    assert_eq!(reinvite.method(), Some(&Method::Invite));
    callee_200(
        &mut w,
        &reinvite,
        "b1",
        "Session-Expires: 90;refresher=uac\n",
    );
    w.caller_sends(&caller_in_dialog("ACK", 2, "z9hG4bKack2", &tag));
    w.advance(Duration::from_secs(59));
    assert_eq!(
        byes(&w),
        (0, 0),
        "the first deadline (60 s) passed harmlessly"
    );
    w.advance(Duration::from_secs(2));
    assert_eq!(byes(&w), (1, 1), "40 + 60 s");

    // A refresh answered without Session-Expires turns the timer off (RFC 4028 section 9).
    let mut w = World::new();
    let tag = answered(&mut w, "Session-Expires: 90\n");
    w.advance(Duration::from_secs(30));
    w.caller_sends(&caller_in_dialog("UPDATE", 2, "z9hG4bKup1", &tag));
    let update = w.last_to_callee().clone();
    callee_200(&mut w, &update, "b1", "");
    w.advance(Duration::from_secs(600));
    assert_eq!(byes(&w), (0, 0));
    assert_eq!(w.engine.active_call_count(), 1);
}

#[test]
fn a_call_without_session_expires_has_no_timer() {
    let mut w = World::new();
    answered(&mut w, "");
    w.advance(Duration::from_secs(3600));
    assert_eq!(byes(&w), (0, 0));
    assert_eq!(w.engine.active_call_count(), 1);
}

#[test]
fn a_new_active_ends_a_replicated_call_at_the_former_active_s_deadline() {
    let mut a = World::new();
    answered(&mut a, "Session-Expires: 90;refresher=uas\n");
    let mut last = None;
    while let Some(change) = a.engine.poll_dialog_change() {
        last = Some(change);
    }
    let Some(DialogChange::Upsert(d)) = last else {
        panic!("the confirmed call is replicated");
    };
    assert_eq!(
        d.session_timer
            .as_ref()
            .map(|t| (t.interval_secs, t.refresher.as_str())),
        Some((90, "uas"))
    );
    // The former active dies; its standby takes over 20 s later, and nobody refreshes.
    let mut b = World::new();
    b.now = a.now;
    b.advance(Duration::from_secs(20));
    b.engine.install_dialog(b.now, *d);
    b.advance(Duration::from_secs(60 - 20 - 1));
    assert_eq!(byes(&b), (0, 0));
    b.advance(Duration::from_secs(2));
    assert_eq!(byes(&b), (1, 1), "at the former active's deadline");
    assert_eq!(b.engine.stats().session_timer_ended, 1);
}

// ---- the SBC's own timers: a realm's session-timer-profile, session-max-life-limit ----

/// A world whose access realm (the caller's) and core realm (the callee's) run `access` and
/// `core`.
fn profiled(access: SessionPolicy, core: SessionPolicy) -> World {
    let mut w = World::new();
    w.engine = Engine::new(
        EngineConfig {
            session_policies: vec![access, core],
            ..config()
        },
        seed(),
    );
    w
}

fn profile(session_expires: u32) -> SessionPolicy {
    SessionPolicy {
        timer: Some(TimerProfile {
            session_expires,
            min_se: 90,
            sbc_refreshes_callee: true,
            sbc_refreshes_caller: true,
            force_reinvite: false,
        }),
        max_life_secs: 0,
        ..SessionPolicy::default()
    }
}

fn header<'m>(m: &'m SipMessage, name: &str) -> Option<&'m str> {
    m.headers
        .iter()
        .find(|h| h.name.as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// Requests of `method` sent to the callee (retransmissions counted once).
fn sent_to_callee(w: &World, method: &Method) -> Vec<SipMessage> {
    let mut seen = Vec::new();
    w.to_callee
        .iter()
        .filter(|m| m.method() == Some(method))
        .filter(|m| {
            let b = m.top_via_branch().map(str::to_owned);
            let new = !seen.contains(&b);
            seen.push(b);
            new
        })
        .cloned()
        .collect()
}

#[test]
fn below_the_realm_s_min_se_a_new_invite_gets_422_with_min_se() {
    let mut w = profiled(profile(1800), SessionPolicy::default());
    w.caller_sends(
        &invite("z9hG4bKinv1").replace("CSeq: 1 INVITE\n", "CSeq: 1 INVITE\nSession-Expires: 60\n"),
    );
    assert_eq!(w.codes_to_caller(), vec![422]);
    assert_eq!(header(&w.to_caller[0], "Min-SE"), Some("90"));
    assert!(w.to_callee.is_empty());
    assert_eq!(w.engine.stats().session_interval_too_small, 1);
    // At the minimum it goes on, its timer end to end (the caller's own).
    w.caller_sends(
        &invite("z9hG4bKinv2").replace("CSeq: 1 INVITE\n", "CSeq: 2 INVITE\nSession-Expires: 90\n"),
    );
    assert_eq!(header(w.last_to_callee(), "Session-Expires"), Some("90"));
}

#[test]
fn the_sbc_offers_the_callee_realm_s_timer_and_refreshes_a_callee_without_timers() {
    let mut w = profiled(SessionPolicy::default(), profile(120));
    w.caller_sends(&invite("z9hG4bKinv1"));
    let inv = w.last_to_callee().clone();
    assert_eq!(header(&inv, "Session-Expires"), Some("120;refresher=uac"));
    assert_eq!(header(&inv, "Min-SE"), Some("90"));
    assert_eq!(header(&inv, "Supported"), Some("timer"));
    // The callee knows no timers but allows UPDATE.
    callee_200(&mut w, &inv, "b1", "Allow: INVITE, ACK, BYE, UPDATE\n");
    let ok = w.to_caller.last().expect("the 200").clone();
    assert_eq!(
        header(&ok, "Session-Expires"),
        None,
        "the caller leg has no timer"
    );
    let tag = ok.to_tag().expect("our tag").to_owned();
    w.caller_sends(&caller_in_dialog("ACK", 1, "z9hG4bKack1", &tag));
    w.advance(Duration::from_secs(59));
    assert!(
        sent_to_callee(&w, &Method::Update).is_empty(),
        "not before half"
    );
    w.advance(Duration::from_secs(2));
    let updates = sent_to_callee(&w, &Method::Update);
    assert_eq!(updates.len(), 1, "an UPDATE at half the interval");
    // Without the callee knowing the timer, the UPDATE does not name it.
    assert_eq!(header(&updates[0], "Session-Expires"), None);
    assert!(
        w.to_caller
            .iter()
            .all(|m| m.method() != Some(&Method::Update)),
        "ours only"
    );
    callee_200(&mut w, &updates[0], "b1", "");
    assert_eq!(w.engine.stats().session_refreshes_sent, 1);
    // Refreshed at 61 s: the next at 121 s.
    w.advance(Duration::from_secs(58));
    assert_eq!(sent_to_callee(&w, &Method::Update).len(), 1);
    w.advance(Duration::from_secs(3));
    let updates = sent_to_callee(&w, &Method::Update);
    assert_eq!(updates.len(), 2);
    // The callee vanished: 481 ends the call on both legs.
    w.callee_responds_to(&updates[1], 481, "b1");
    assert_eq!(byes(&w), (1, 1));
    assert_eq!(w.engine.stats().session_refresh_failed, 1);
    assert_eq!(w.engine.active_call_count(), 0);
}

#[test]
fn a_refresh_nobody_answers_ends_the_call_and_a_peer_without_update_gets_a_reinvite() {
    let mut w = profiled(SessionPolicy::default(), profile(120));
    w.caller_sends(&invite("z9hG4bKinv1"));
    let inv = w.last_to_callee().clone();
    callee_200(&mut w, &inv, "b1", "");
    let tag = w
        .to_caller
        .last()
        .and_then(SipMessage::to_tag)
        .expect("tag")
        .to_owned();
    w.caller_sends(&caller_in_dialog("ACK", 1, "z9hG4bKack1", &tag));
    w.advance(Duration::from_secs(61));
    let probes = sent_to_callee(&w, &Method::Invite);
    assert_eq!(probes.len(), 2, "no Allow: UPDATE, so a re-INVITE");
    assert_eq!(probes[1].to_tag(), Some("b1"), "in the dialog");
    assert!(probes[1].body.is_empty(), "without an offer");
    // Nothing answers: the transaction times out (64·T1) and the call ends.
    w.advance(Duration::from_secs(33));
    assert_eq!(byes(&w), (1, 1));
    assert_eq!(w.engine.stats().session_refresh_failed, 1);
}

#[test]
fn a_callee_that_refreshes_itself_is_waited_for_and_the_caller_is_told_its_own_timer() {
    let mut w = profiled(profile(300), profile(120));
    w.caller_sends(&invite("z9hG4bKinv1").replace(
        "CSeq: 1 INVITE\n",
        "CSeq: 1 INVITE\nSupported: timer\nAllow: INVITE, ACK, BYE, UPDATE\n",
    ));
    let inv = w.last_to_callee().clone();
    callee_200(
        &mut w,
        &inv,
        "b1",
        "Session-Expires: 120;refresher=uas\nRequire: timer\n",
    );
    let ok = w.to_caller.last().expect("the 200").clone();
    // The caller leg's own timer (300 s, the SBC refreshing), not the callee's.
    assert_eq!(header(&ok, "Session-Expires"), Some("300;refresher=uas"));
    assert_eq!(header(&ok, "Require"), Some("timer"));
    let tag = ok.to_tag().expect("our tag").to_owned();
    w.caller_sends(&caller_in_dialog("ACK", 1, "z9hG4bKack1", &tag));
    // The callee refreshes (re-INVITE through us at 50 s: both legs refreshed).
    w.advance(Duration::from_secs(50));
    assert!(sent_to_callee(&w, &Method::Update).is_empty());
    // Then the callee vanishes: 50 + 120 - 32 = 138 s is its deadline; meanwhile the SBC
    // refreshes the caller's leg at 150 s... which comes later: the callee's deadline ends it.
    let updates_to_caller = |w: &World| {
        w.to_caller
            .iter()
            .filter(|m| m.method() == Some(&Method::Update))
            .count()
    };
    w.callee_sends(&format!(
        "UPDATE sip:sbc@{CORE} SIP/2.0\nVia: SIP/2.0/UDP {CALLEE};branch=z9hG4bKcu1\n\
         From: {};tag=b1\nTo: {}\nCall-ID: {}\nCSeq: 2 UPDATE\nContact: <sip:bob@{CALLEE}>\n\
         Session-Expires: 120;refresher=uas\nContent-Length: 0\n\n",
        header(&inv, "To").unwrap_or_default(),
        header(&inv, "From").unwrap_or_default(),
        inv.call_id().unwrap_or_default(),
    ));
    let relayed = w
        .to_caller
        .iter()
        .rfind(|m| m.method() == Some(&Method::Update))
        .expect("the callee's UPDATE relayed")
        .clone();
    let to = header(&relayed, "To").unwrap_or_default();
    let to = format!("{};tag=a1", to.split(";tag").next().unwrap_or_default());
    w.caller_sends(&format!(
        "SIP/2.0 200 OK\nVia: {}\nFrom: {}\nTo: {to}\nCall-ID: {}\nCSeq: {}\nContent-Length: 0\n\n",
        relayed.top_via().unwrap_or_default(),
        header(&relayed, "From").unwrap_or_default(),
        relayed.call_id().unwrap_or_default(),
        header(&relayed, "CSeq").unwrap_or_default(),
    ));
    assert_eq!(updates_to_caller(&w), 1, "the callee's refresh, relayed");
    // Each leg hears of its own timer: the caller the SBC's 300 s (the SBC its refresher, and
    // the UAC of this UPDATE), the callee its 120 s in the 2xx (itself the refresher, the UAC).
    assert_eq!(
        header(&relayed, "Session-Expires"),
        Some("300;refresher=uac")
    );
    let ok_to_callee = w.to_callee.last().expect("the 200 relayed").clone();
    assert_eq!(ok_to_callee.status(), Some(200));
    assert_eq!(
        header(&ok_to_callee, "Session-Expires"),
        Some("120;refresher=uac")
    );
    assert_eq!(header(&ok_to_callee, "Require"), Some("timer"));
    w.advance(Duration::from_secs(87));
    assert_eq!(byes(&w), (0, 0), "before 50 + 88 s");
    w.advance(Duration::from_secs(2));
    assert_eq!(
        byes(&w),
        (1, 1),
        "the callee's leg was not refreshed in time"
    );
    assert_eq!(w.engine.stats().session_timer_ended, 1);
}

#[test]
fn a_422_to_the_sbc_s_interval_is_retried_on_the_same_leg_with_its_min_se() {
    let mut w = profiled(SessionPolicy::default(), profile(120));
    w.caller_sends(&invite("z9hG4bKinv1"));
    let first = w.last_to_callee().clone();
    w.callee_sends(&format!(
        "SIP/2.0 422 Session Interval Too Small\nVia: {}\nFrom: {}\nTo: {};tag=x1\nCall-ID: {}\n\
         CSeq: 1 INVITE\nMin-SE: 600\nContent-Length: 0\n\n",
        first.top_via().unwrap_or_default(),
        header(&first, "From").unwrap_or_default(),
        header(&first, "To").unwrap_or_default(),
        first.call_id().unwrap_or_default(),
    ));
    assert_eq!(w.codes_to_caller(), vec![100], "the caller sees no 422");
    let invites = sent_to_callee(&w, &Method::Invite);
    assert_eq!(invites.len(), 2);
    let second = &invites[1];
    assert_eq!(second.call_id(), first.call_id(), "the same leg");
    assert_eq!(second.from_tag(), first.from_tag());
    assert_eq!(header(second, "CSeq"), Some("2 INVITE"));
    assert_eq!(header(second, "Session-Expires"), Some("600;refresher=uac"));
    assert_eq!(header(second, "Min-SE"), Some("600"));
    assert!(second.body.starts_with(b"v=0"), "the offer again");
    assert_eq!(w.engine.stats().session_422_retried, 1);
    callee_200(&mut w, second, "b2", "Session-Expires: 600;refresher=uac\n");
    assert_eq!(w.codes_to_caller(), vec![100, 200]);
}

#[test]
fn a_call_ends_at_its_realm_s_max_life_and_a_new_active_keeps_the_date() {
    let limit = SessionPolicy {
        timer: None,
        max_life_secs: 600,
        ..SessionPolicy::default()
    };
    let mut w = profiled(SessionPolicy::default(), limit);
    answered(&mut w, "");
    w.advance(Duration::from_secs(598));
    assert_eq!(byes(&w), (0, 0));
    w.advance(Duration::from_secs(3));
    assert_eq!(byes(&w), (1, 1));
    assert_eq!(w.engine.stats().max_life_ended, 1);
    let bye = w
        .to_callee
        .iter()
        .rfind(|m| m.method() == Some(&Method::Bye))
        .expect("BYE");
    assert_eq!(
        header(bye, "Reason"),
        Some(crate::engine::session_timer::MAX_LIFE_REASON)
    );

    // Across a takeover: the standby's copy ends at the same date.
    let mut a = profiled(SessionPolicy::default(), limit);
    answered(&mut a, "");
    let mut last = None;
    while let Some(change) = a.engine.poll_dialog_change() {
        last = Some(change);
    }
    let Some(DialogChange::Upsert(d)) = last else {
        panic!("the confirmed call is replicated");
    };
    let mut b = profiled(SessionPolicy::default(), limit);
    b.now = a.now;
    b.advance(Duration::from_secs(300));
    b.engine.install_dialog(b.now, *d);
    b.advance(Duration::from_secs(298));
    assert_eq!(byes(&b), (0, 0));
    b.advance(Duration::from_secs(3));
    assert_eq!(
        byes(&b),
        (1, 1),
        "600 s after the INVITE on the former active"
    );
}

#[test]
fn the_sbc_s_leg_timers_replicate_and_a_new_active_refreshes() {
    let mut a = profiled(SessionPolicy::default(), profile(120));
    a.caller_sends(&invite("z9hG4bKinv1"));
    let inv = a.last_to_callee().clone();
    callee_200(&mut a, &inv, "b1", "Allow: UPDATE\n");
    let tag = a
        .to_caller
        .last()
        .and_then(SipMessage::to_tag)
        .expect("tag")
        .to_owned();
    a.caller_sends(&caller_in_dialog("ACK", 1, "z9hG4bKack1", &tag));
    let mut last = None;
    while let Some(change) = a.engine.poll_dialog_change() {
        last = Some(change);
    }
    let Some(DialogChange::Upsert(d)) = last else {
        panic!("the confirmed call is replicated");
    };
    let timers = d.leg_timers.as_deref().expect("the leg timers travel");
    assert!(timers[0].is_none());
    let callee = timers[1].as_ref().expect("the callee leg's");
    assert!(callee.sbc_refreshes && callee.update_allowed);
    let mut b = World::new();
    b.now = a.now;
    b.advance(Duration::from_secs(30));
    b.engine.install_dialog(b.now, *d);
    b.advance(Duration::from_secs(29));
    assert!(sent_to_callee(&b, &Method::Update).is_empty());
    b.advance(Duration::from_secs(2));
    let updates = sent_to_callee(&b, &Method::Update);
    assert_eq!(
        updates.len(),
        1,
        "the new active refreshes at the former's date"
    );
    assert_eq!(
        header(&updates[0], "CSeq"),
        Some("2 UPDATE"),
        "after the INVITE's CSeq"
    );
}

/// Answers `req` (from the caller's or the callee's side) 200 with `sdp`.
fn ok_with_sdp(w: &mut World, from_callee: bool, req: &SipMessage, tag: &str, sdp: &str) {
    let to = req.header(&HeaderName::To).unwrap_or_default();
    let to = if req.to_tag().is_none() {
        format!("{to};tag={tag}")
    } else {
        to.to_owned()
    };
    let head = format!(
        "SIP/2.0 200 OK\r\nVia: {}\r\nFrom: {}\r\nTo: {to}\r\nCall-ID: {}\r\nCSeq: {}\r\n\
         Contact: <sip:peer@{}>\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\n\r\n",
        req.top_via().unwrap_or_default(),
        req.header(&HeaderName::From).unwrap_or_default(),
        req.call_id().unwrap_or_default(),
        req.header(&HeaderName::CSeq).unwrap_or_default(),
        if from_callee { CALLEE } else { CALLER },
        sdp.len(),
    );
    let (interface, source) = if from_callee {
        (1, CALLEE)
    } else {
        (0, CALLER)
    };
    w.engine.handle_inbound(
        w.now,
        Inbound {
            interface,
            transport: LegTransport::Udp,
            source: sa(source),
            data: Bytes::from(format!("{head}{sdp}")),
        },
    );
    w.collect();
}

#[test]
fn a_reinvite_refresh_carries_no_offer_and_the_peer_s_offer_is_answered_by_the_other_leg() {
    // force-reinvite: a re-INVITE even though the callee allows UPDATE.
    let mut forced = profile(120);
    if let Some(t) = forced.timer.as_mut() {
        t.force_reinvite = true;
    }
    let mut w = profiled(SessionPolicy::default(), forced);
    let tag = answered(&mut w, "Allow: INVITE, ACK, BYE, UPDATE\n");
    w.advance(Duration::from_secs(61));
    assert!(sent_to_callee(&w, &Method::Update).is_empty());
    let refresh = sent_to_callee(&w, &Method::Invite)
        .pop()
        .expect("the refresh");
    assert_eq!(refresh.to_tag(), Some("b1"));
    assert!(refresh.body.is_empty(), "without an offer");
    // Bob offers his session again: alice gets it in a re-INVITE.
    let bob_sdp = "v=0\r\no=bob 1 1 IN IP4 198.51.100.20\r\ns=-\r\nc=IN IP4 198.51.100.20\r\nt=0 0\r\nm=audio 20000 RTP/AVP 0\r\n";
    ok_with_sdp(&mut w, true, &refresh, "b1", bob_sdp);
    let to_alice = w.to_caller.last().expect("re-INVITE to alice").clone();
    assert_eq!(to_alice.method(), Some(&Method::Invite));
    assert_eq!(to_alice.to_tag(), Some("a1"));
    assert_eq!(to_alice.from_tag(), Some(tag.as_str()));
    assert_eq!(&to_alice.body[..], bob_sdp.as_bytes());
    // Alice answers: she gets her ACK, bob his, with her answer.
    let alice_sdp = "v=0\r\no=alice 1 1 IN IP4 10.1.1.1\r\ns=-\r\nc=IN IP4 10.1.1.1\r\nt=0 0\r\nm=audio 10000 RTP/AVP 0\r\n";
    ok_with_sdp(&mut w, false, &to_alice, "a1", alice_sdp);
    let ack_alice = w.to_caller.last().expect("ACK to alice");
    assert_eq!(ack_alice.method(), Some(&Method::Ack));
    assert!(ack_alice.body.is_empty());
    let ack_bob = w.last_to_callee();
    assert_eq!(ack_bob.method(), Some(&Method::Ack));
    assert_eq!(&ack_bob.body[..], alice_sdp.as_bytes());
    assert_eq!(
        header(ack_bob, "cseq").and_then(|c| c.split(' ').next()),
        header(&refresh, "cseq").and_then(|c| c.split(' ').next())
    );
    assert_eq!(w.engine.stats().session_refreshes_sent, 1);
    // The leg counts as refreshed: no BYE at the old deadline.
    w.advance(Duration::from_secs(40));
    assert_eq!(byes(&w), (0, 0));
}

#[test]
fn two_legs_due_at_once_get_one_reinvite_of_ours_each_never_two_crossing() {
    // Both realms run the profile; neither endpoint does timers nor allows UPDATE: both legs
    // are the SBC's to refresh, at the same moment.
    let mut w = profiled(profile(120), profile(120));
    answered(&mut w, "");
    w.advance(Duration::from_secs(61));
    let mut to_alice: Vec<SipMessage> = w
        .to_caller
        .iter()
        .filter(|m| m.method() == Some(&Method::Invite))
        .cloned()
        .collect();
    to_alice.dedup_by(|a, b| a.top_via_branch() == b.top_via_branch());
    assert_eq!(
        to_alice.len(),
        1,
        "one re-INVITE to alice (retransmissions aside)"
    );
    assert!(to_alice[0].body.is_empty(), "without an offer");
    assert_eq!(
        sent_to_callee(&w, &Method::Invite).len(),
        1,
        "nothing to bob until alice offers"
    );
    let alice_sdp = "v=0\r\no=alice 1 1 IN IP4 10.1.1.1\r\ns=-\r\nc=IN IP4 10.1.1.1\r\nt=0 0\r\nm=audio 10000 RTP/AVP 0\r\n";
    ok_with_sdp(&mut w, false, &to_alice[0], "a1", alice_sdp);
    // Alice's offer goes to bob; it refreshes bob's leg too.
    let to_bob = sent_to_callee(&w, &Method::Invite);
    assert_eq!(to_bob.len(), 2);
    assert_eq!(&to_bob[1].body[..], alice_sdp.as_bytes());
    // A second passes: no second INVITE of ours toward bob while this one runs.
    w.advance(Duration::from_secs(2));
    assert_eq!(sent_to_callee(&w, &Method::Invite).len(), 2);
    let bob_sdp = "v=0\r\no=bob 1 1 IN IP4 198.51.100.20\r\ns=-\r\nc=IN IP4 198.51.100.20\r\nt=0 0\r\nm=audio 20000 RTP/AVP 0\r\n";
    ok_with_sdp(&mut w, true, &to_bob[1], "b1", bob_sdp);
    let ack_alice = w.to_caller.last().expect("alice's ACK");
    assert_eq!(ack_alice.method(), Some(&Method::Ack));
    assert_eq!(&ack_alice.body[..], bob_sdp.as_bytes());
    assert_eq!(
        header(ack_alice, "cseq").and_then(|c| c.split(' ').next()),
        header(&to_alice[0], "cseq").and_then(|c| c.split(' ').next()),
        "the ACK of alice's 2xx carries its CSeq"
    );
    // Both legs refreshed: the next refresh comes a half interval later, the call goes on.
    w.advance(Duration::from_secs(50));
    assert_eq!(byes(&w), (0, 0));
    assert_eq!(w.engine.stats().session_refreshes_sent, 1);
    w.advance(Duration::from_secs(15));
    assert_eq!(w.engine.stats().session_refreshes_sent, 2, "the next round");
    assert_eq!(byes(&w), (0, 0));
}
