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
