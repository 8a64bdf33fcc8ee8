//! Calls in set-up across a switchover: the active's dialog changes are installed into a
//! second engine (the new active, another seed), which must finish each call as the first
//! would have.

use super::*;
use crate::sip::dialog::Side;

/// The new active: every change the active streamed so far applied to a fresh engine, at
/// `after` past the active's clock. The old world keeps what it sent; the new one starts
/// with nothing sent.
fn take_over(active: &mut World, after: Duration) -> World {
    let mut table: std::collections::BTreeMap<u64, Dialog> = std::collections::BTreeMap::new();
    while let Some(c) = active.engine.poll_dialog_change() {
        match c {
            DialogChange::Upsert(d) => {
                table.insert(d.id, *d);
            }
            DialogChange::Delete(id) => {
                table.remove(&id);
            }
        }
    }
    let mut next = World::new();
    next.engine = Engine::new(
        config(),
        EngineSeed {
            rng: [9; 32],
            ..seed()
        },
    );
    next.now = active.now + after;
    for d in table.into_values() {
        next.engine.install_dialog(next.now, d);
    }
    next.collect();
    next
}

fn changes(w: &mut World) -> Vec<DialogChange> {
    std::iter::from_fn(|| w.engine.poll_dialog_change()).collect()
}

fn cancel() -> String {
    invite("z9hG4bKinv1")
        .replacen("INVITE sip", "CANCEL sip", 1)
        .replace("CSeq: 1 INVITE", "CSeq: 1 CANCEL")
}

#[test]
fn the_invite_is_replicated_as_it_is_forwarded_and_dropped_from_the_replica_when_confirmed() {
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKinv1"));
    let c = changes(&mut w);
    assert!(
        matches!(&c[..], [DialogChange::Upsert(d)] if d.state == DialogState::Trying
            && d.setup.as_ref().is_some_and(|s| !s.invite.is_empty())),
        "{c:?}"
    );
    w.callee_answers(180, "b1");
    let c = changes(&mut w);
    assert!(
        matches!(&c[..], [DialogChange::Upsert(d)] if d.state == DialogState::Early
            && d.setup.as_ref().is_some_and(|s| s.invite.is_empty())),
        "the first provisional is replicated, without the INVITE: {c:?}"
    );
    w.callee_answers(183, "b1");
    assert!(changes(&mut w).is_empty(), "later provisionals are not");
    w.callee_answers(200, "b1");
    let c = changes(&mut w);
    assert!(
        matches!(&c[..], [DialogChange::Upsert(d)] if d.state == DialogState::Answered
            && d.setup.as_ref().is_some_and(|s| s.invite.is_empty() && !s.caller_2xx.is_empty())),
        "{c:?}"
    );
    let tag = w
        .to_caller
        .last()
        .and_then(|m| m.to_tag())
        .unwrap_or_default()
        .to_owned();
    w.caller_sends(&caller_in_dialog("ACK", 1, "z9hG4bKack1", &tag));
    let c = changes(&mut w);
    assert!(
        matches!(&c[..], [DialogChange::Upsert(d)] if d.state == DialogState::Confirmed && d.setup.is_none()),
        "{c:?}"
    );
}

#[test]
fn a_ringing_call_is_answered_through_the_new_active() {
    let mut a = World::new();
    a.caller_sends(&invite("z9hG4bKinv1"));
    a.callee_answers(180, "b1");
    let ringing = a.to_caller.last().cloned().expect("180 relayed");
    let invite_to_callee = a.to_callee[0].clone();
    let mut b = take_over(&mut a, Duration::from_millis(400));
    assert_eq!(b.engine.call_count(), 1);
    // The callee rings on, then answers: its responses reach the new active.
    b.callee_responds_to(&invite_to_callee, 180, "b1");
    b.callee_responds_to(&invite_to_callee, 200, "b1");
    assert_eq!(b.codes_to_caller(), vec![180, 200]);
    let ok = b.to_caller.last().cloned().expect("200");
    assert_eq!(
        ok.to_tag(),
        ringing.to_tag(),
        "the caller's dialog keeps its tag"
    );
    assert_eq!(ok.top_via_branch(), Some("z9hG4bKinv1"));
    assert_eq!(ok.call_id(), Some("call-1@10.1.1.1"));
    // The caller's ACK confirms it there, and goes to the callee in its dialog.
    let tag = ok.to_tag().unwrap_or_default().to_owned();
    b.caller_sends(&caller_in_dialog("ACK", 1, "z9hG4bKack1", &tag));
    let ack = b.last_to_callee().clone();
    assert_eq!(ack.method(), Some(&Method::Ack));
    assert_eq!(ack.to_tag(), Some("b1"));
    assert_eq!(ack.call_id(), invite_to_callee.call_id());
    let d = b.engine.dialogs().next().expect("the call");
    assert_eq!(d.state, DialogState::Confirmed);
    // And it ends normally.
    b.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye1", &tag));
    assert_eq!(b.last_to_callee().method(), Some(&Method::Bye));
    b.callee_answers(200, "b1");
    assert_eq!(b.codes_to_caller(), vec![180, 200, 200]);
    assert_eq!(b.engine.call_count(), 0);
}

#[test]
fn an_invite_the_callee_never_answered_is_resent_by_the_new_active() {
    let mut a = World::new();
    a.caller_sends(&invite("z9hG4bKinv1"));
    let sent = a.raw_to_callee[0].clone();
    let mut b = take_over(&mut a, Duration::from_millis(100));
    assert!(
        b.to_callee.is_empty(),
        "nothing sent at the takeover itself"
    );
    b.advance(Duration::from_millis(600));
    assert_eq!(
        b.raw_to_callee.first(),
        Some(&sent),
        "the same INVITE, after T1"
    );
    // The caller's retransmission is absorbed with a 100, not made a second call.
    b.caller_sends(&invite("z9hG4bKinv1"));
    assert_eq!(b.codes_to_caller(), vec![100]);
    assert_eq!(b.engine.call_count(), 1);
    b.callee_answers(180, "b1");
    b.callee_answers(200, "b1");
    assert_eq!(b.codes_to_caller(), vec![100, 180, 200]);
    // No more retransmissions once answered.
    let before = b.to_callee.len();
    b.advance(Duration::from_secs(5));
    assert_eq!(b.to_callee.len(), before);
}

#[test]
fn a_cancel_after_the_takeover_cancels_both_legs() {
    let mut a = World::new();
    a.caller_sends(&invite("z9hG4bKinv1"));
    a.callee_answers(180, "b1");
    let invite_to_callee = a.to_callee[0].clone();
    let mut b = take_over(&mut a, Duration::from_millis(400));
    b.caller_sends(&cancel());
    assert_eq!(b.codes_to_caller(), vec![200, 487]);
    // The ringing was replicated: the CANCEL goes at once.
    assert_eq!(b.methods_to_callee(), vec!["CANCEL"]);
    let c = b.last_to_callee().clone();
    assert_eq!(c.top_via_branch(), invite_to_callee.top_via_branch());
    assert_eq!(c.request_uri(), invite_to_callee.request_uri());
    b.callee_responds_to(&c, 200, "b1");
    b.callee_responds_to(&invite_to_callee, 487, "b1");
    assert_eq!(b.methods_to_callee(), vec!["CANCEL", "ACK"]);
    assert_eq!(b.engine.call_count(), 0);
    let c = changes(&mut b);
    assert!(
        c.iter().any(|c| matches!(c, DialogChange::Delete(_))),
        "the end of a replicated set-up is replicated: {c:?}"
    );
}

#[test]
fn a_cancel_of_a_call_not_ringing_yet_waits_for_the_provisional_the_resent_invite_brings() {
    let mut a = World::new();
    a.caller_sends(&invite("z9hG4bKinv1"));
    let invite_to_callee = a.to_callee[0].clone();
    let mut b = take_over(&mut a, Duration::from_millis(100));
    b.caller_sends(&cancel());
    assert_eq!(b.codes_to_caller(), vec![200, 487]);
    assert!(b.to_callee.is_empty(), "no CANCEL before a provisional");
    b.advance(Duration::from_millis(600));
    assert_eq!(b.methods_to_callee(), vec!["INVITE"]);
    b.callee_responds_to(&invite_to_callee, 180, "b1");
    assert_eq!(b.methods_to_callee(), vec!["INVITE", "CANCEL"]);
    assert_eq!(b.codes_to_caller(), vec![200, 487], "no 180 after the 487");
}

#[test]
fn an_answered_call_whose_2xx_was_lost_gets_it_again_from_the_new_active() {
    let mut a = World::new();
    a.caller_sends(&invite("z9hG4bKinv1"));
    a.callee_answers(180, "b1");
    a.callee_answers(200, "b1");
    let relayed = a.raw_to_caller.last().cloned().expect("200 relayed");
    let invite_to_callee = a.to_callee[0].clone();
    let mut b = take_over(&mut a, Duration::from_millis(300));
    // The caller never got the 2xx: the callee retransmits its own, and the caller gets the
    // same 2xx again.
    b.callee_responds_to(&invite_to_callee, 200, "b1");
    assert_eq!(b.raw_to_caller, vec![relayed.clone()]);
    let tag = b.to_caller[0].to_tag().unwrap_or_default().to_owned();
    b.caller_sends(&caller_in_dialog("ACK", 1, "z9hG4bKack1", &tag));
    assert_eq!(b.methods_to_callee(), vec!["ACK"]);
    assert_eq!(
        b.engine.dialogs().next().map(|d| d.state),
        Some(DialogState::Confirmed)
    );
    // Timer L passes without a hang-up: the ACK confirmed it.
    b.advance(Duration::from_secs(40));
    assert_eq!(b.engine.call_count(), 1);
    assert_eq!(b.methods_to_callee(), vec!["ACK"]);
}

#[test]
fn an_answered_call_whose_ack_never_comes_is_hung_up_after_timer_l() {
    let mut a = World::new();
    a.caller_sends(&invite("z9hG4bKinv1"));
    a.callee_answers(200, "b1");
    let mut b = take_over(&mut a, Duration::from_millis(300));
    b.advance(Duration::from_secs(40));
    assert_eq!(b.engine.call_count(), 0);
    assert!(b.methods_to_callee().contains(&"BYE".to_owned()));
}

#[test]
fn a_failed_set_up_is_deleted_from_the_standby_at_once() {
    let mut w = World::new();
    w.caller_sends(&invite("z9hG4bKinv1"));
    w.callee_answers(486, "b1");
    let c = changes(&mut w);
    assert!(
        matches!(&c[..], [DialogChange::Upsert(_), DialogChange::Delete(_)]),
        "{c:?}"
    );
    // A call refused before it was forwarded was never replicated: nothing to delete.
    let mut w = World::new();
    w.engine.set_admission(Admission::Reject {
        retry_after_min: 1,
        retry_after_max: 2,
    });
    w.caller_sends(&invite("z9hG4bKinv1"));
    assert!(changes(&mut w).is_empty());
}

#[test]
fn a_set_up_older_than_timer_c_is_not_installed() {
    let mut a = World::new();
    a.caller_sends(&invite("z9hG4bKinv1"));
    let mut b = take_over(&mut a, Duration::from_secs(200));
    assert_eq!(b.engine.call_count(), 0);
    b.advance(Duration::from_secs(5));
    assert!(b.to_callee.is_empty() && b.to_caller.is_empty());
    // Nor one without its set-up record.
    let mut a = World::new();
    a.caller_sends(&invite("z9hG4bKinv1"));
    let mut d = match changes(&mut a).pop() {
        Some(DialogChange::Upsert(d)) => *d,
        other => panic!("{other:?}"),
    };
    d.setup = None;
    let mut b = World::new();
    b.engine.install_dialog(b.now, d);
    assert_eq!(b.engine.call_count(), 0);
}

#[test]
fn an_established_call_keeps_no_transaction_or_message_copy_after_the_rfc_6026_windows() {
    let mut w = World::new();
    establish(&mut w);
    // The callee's 2xx comes again within the window: our ACK is repeated.
    let inv = w.to_callee[0].clone();
    let acks = |w: &World| w.methods_to_callee().iter().filter(|m| *m == "ACK").count();
    w.callee_responds_to(&inv, 200, "b1");
    assert_eq!(acks(&w), 2);
    w.advance(Duration::from_secs(40));
    let call = w.engine.calls.values().next().expect("the call");
    assert!(call.ack(Side::Callee).is_none(), "no ACK kept after 64·T1");
    assert_eq!(w.engine.server.len() + w.engine.client.len(), 0);
    assert_eq!(w.engine.timers.targets.len(), 0, "no timer left armed");
    assert_eq!(w.engine.dialogs.len(), 2);
    // What every established call costs inline, boxed in the call table: one jemalloc size
    // class (640 bytes) at most.
    assert!(size_of::<Call>() <= 640, "{}", size_of::<Call>());
    // A media BYE on such a call sends no stray ACK first (the callee's 2xx was ACKed).
    w.engine
        .tear_down(w.now, call_id_of(&w), sbc_accounting::EndedBy::Sbc);
    w.collect();
    assert_eq!(acks(&w), 2);
    assert_eq!(
        w.methods_to_callee().last().map(String::as_str),
        Some("BYE")
    );
}

fn call_id_of(w: &World) -> u64 {
    w.engine.dialogs().next().map(|d| d.id).unwrap_or_default()
}

#[test]
fn a_demoted_active_forgets_its_calls_quietly_and_takes_them_from_the_replicas_again() {
    let mut a = World::new();
    establish(&mut a);
    a.caller_sends(&invite("z9hG4bKinv2").replace("call-1@", "call-2@"));
    let replicas = changes(&mut a);
    assert_eq!(a.engine.active_call_count(), 2);
    a.engine.forget_calls();
    a.collect();
    assert_eq!(a.engine.call_count(), 0);
    assert_eq!(a.engine.transaction_count(), 0);
    assert_eq!(a.engine.poll_timeout(), None, "no timer left");
    assert!(
        a.engine.poll_dialog_change().is_none(),
        "nothing replicated"
    );
    let sent = a.to_callee.len() + a.to_caller.len();
    a.advance(Duration::from_secs(200));
    assert_eq!(a.to_callee.len() + a.to_caller.len(), sent, "nothing sent");
    // Active again: the replicas are installed as for any takeover.
    let now = a.now;
    let mut latest = std::collections::BTreeMap::new();
    for c in replicas {
        if let DialogChange::Upsert(d) = c {
            latest.insert(d.id, *d);
        }
    }
    a.now = now;
    for d in latest.into_values() {
        let mut d = d;
        d.created_unix = a.engine.wall_clock.unix_secs_at(now);
        a.engine.install_dialog(now, d);
    }
    assert_eq!(a.engine.active_call_count(), 2);
}

#[test]
fn a_node_shut_down_while_it_hands_over_drops_new_calls_rather_than_refusing_them() {
    let mut w = World::new();
    w.engine.set_admission(Admission::Drop);
    w.engine.start_draining();
    w.caller_sends(&invite("z9hG4bKinv1"));
    assert!(
        w.to_caller.is_empty(),
        "no 503: the peer serves its retransmission"
    );
    assert!(w.to_callee.is_empty());
    assert_eq!(w.engine.stats().handover_dropped, 1);
    // Draining alone still answers 503.
    let mut w = World::new();
    w.engine.start_draining();
    w.caller_sends(&invite("z9hG4bKinv1"));
    assert_eq!(w.codes_to_caller(), vec![503]);
}

#[test]
fn a_call_that_was_ending_at_the_takeover_is_forgotten_and_its_end_replicated() {
    let mut a = World::new();
    let tag = establish(&mut a);
    a.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye1", &tag));
    // The former active relayed the BYE (Terminating replicated) and died before its delete.
    let mut b = take_over(&mut a, Duration::from_millis(300));
    assert_eq!(b.engine.call_count(), 1);
    assert_eq!(b.engine.active_call_count(), 0);
    b.advance(Duration::from_secs(40));
    assert_eq!(b.engine.call_count(), 0);
    let c = changes(&mut b);
    assert!(
        matches!(&c[..], [DialogChange::Delete(_)]),
        "the end is replicated from the new active: {c:?}"
    );
}
