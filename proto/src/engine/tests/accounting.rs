//! Accounting records on the virtual clock: a Start at the answer and one Stop at the end with
//! who ended it, one Stop for a failed attempt, an Interim-Update per answered re-INVITE, and
//! across a switchover no record twice.

use sbc_accounting::{CallRecord, EndedBy, RecordKind};

use super::*;

fn accounting_world() -> World {
    let mut w = World::new();
    w.engine.set_config(EngineConfig {
        accounting: Some(AccountingPolicy {
            node: "sbc1".into(),
            start_at: StartAt::Answer,
            interim_on_reinvite: true,
            interim_period_ms: 0,
        }),
        ..config()
    });
    w
}

fn records(w: &mut World) -> Vec<CallRecord> {
    std::iter::from_fn(|| w.engine.poll_accounting()).collect()
}

#[test]
fn an_answered_call_has_one_start_and_one_stop_with_its_duration_and_who_ended_it() {
    let mut w = accounting_world();
    let tag = establish(&mut w);
    let start = records(&mut w);
    assert_eq!(start.len(), 1);
    let s = &start[0];
    assert_eq!(
        (s.kind, s.status, s.ended_by),
        (RecordKind::Start, 200, EndedBy::NotEnded)
    );
    assert_eq!((s.ingress_realm(), s.egress_realm()), ("access", "core"));
    assert_eq!(s.egress_agent(), "core");
    assert_eq!(s.called(), "bob");
    assert_eq!(s.ingress_call_id(), "call-1@10.1.1.1");
    assert_eq!(s.node(), "sbc1", "the node's name, from the policy");
    assert!(
        s.caller_address().starts_with("10.1.1.1:") && s.callee_address().contains(':'),
        "{s:?}"
    );
    assert!(s.connect_ms >= s.setup_ms && s.setup_ms >= 1_796_083_200_000);

    w.advance(Duration::from_millis(61_250));
    w.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye", &tag));
    let stop = records(&mut w);
    assert_eq!(stop.len(), 1, "the Stop at the BYE");
    let t = &stop[0];
    assert_eq!(
        (t.kind, t.status, t.ended_by),
        (RecordKind::Stop, 200, EndedBy::Caller)
    );
    assert_eq!(t.session_id(), s.session_id());
    assert_eq!(t.duration_ms(), 61_250);
    // The BYE's 200 and the end of the call generate nothing more.
    w.callee_answers(200, "b1");
    w.advance(Duration::from_secs(40));
    assert!(records(&mut w).is_empty());
}

#[test]
fn a_refused_attempt_has_one_stop_with_its_status_and_no_start() {
    let mut w = accounting_world();
    w.caller_sends(&invite("z9hG4bKinv1"));
    w.callee_answers(486, "b1");
    let r = records(&mut w);
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].kind, r[0].status, r[0].ended_by),
        (RecordKind::Stop, 486, EndedBy::Callee)
    );
    assert_eq!((r[0].connect_ms, r[0].duration_ms()), (0, 0));
    w.advance(Duration::from_secs(40));
    assert!(records(&mut w).is_empty());
}

#[test]
fn an_answered_reinvite_is_one_interim_update_whatever_its_retransmissions() {
    let mut w = accounting_world();
    let tag = establish(&mut w);
    records(&mut w);
    w.caller_sends(&caller_in_dialog("INVITE", 2, "z9hG4bKre", &tag));
    w.callee_answers(200, "b1");
    let reinvite = w
        .to_callee
        .iter()
        .rev()
        .find(|m| m.method() == Some(&Method::Invite))
        .expect("the re-INVITE")
        .clone();
    w.callee_responds_to(&reinvite, 200, "b1");
    let r = records(&mut w);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!((r[0].kind, r[0].interim), (RecordKind::Interim, 1));
}

#[test]
fn after_a_switchover_the_new_active_writes_only_the_stop() {
    let mut w = accounting_world();
    let tag = establish(&mut w);
    let start = records(&mut w);
    let mut replicated = None;
    while let Some(c) = w.engine.poll_dialog_change() {
        if let DialogChange::Upsert(d) = c {
            replicated = Some(d);
        }
    }
    let dialog = replicated.expect("replicated");
    assert!(dialog
        .accounting
        .as_ref()
        .is_some_and(|a| a.started && !a.stopped));
    let mut standby = accounting_world();
    standby.now = w.now + Duration::from_secs(30);
    standby.engine.install_dialog(standby.now, *dialog);
    standby.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye", &tag));
    let stop = records(&mut standby);
    assert_eq!(stop.len(), 1);
    assert_eq!(stop[0].kind, RecordKind::Stop);
    assert_eq!(stop[0].session_id(), start[0].session_id());
    assert_eq!(
        stop[0].connect_ms, start[0].connect_ms,
        "the replicated connect time"
    );
    // A dialog replicated after its Stop (a BYE relayed just before the switchover) gives
    // none again.
    let mut again = None;
    while let Some(c) = standby.engine.poll_dialog_change() {
        if let DialogChange::Upsert(d) = c {
            again = Some(d);
        }
    }
    let ending = again.expect("the BYE replicated");
    assert!(ending.accounting.as_ref().is_some_and(|a| a.stopped));
    let mut third = accounting_world();
    third.engine.install_dialog(third.now, *ending);
    third.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye", &tag));
    third.advance(Duration::from_secs(40));
    assert!(records(&mut third).is_empty());
}

#[test]
fn intermediate_period_gives_an_interim_update_each_period_and_a_new_active_goes_on() {
    let mut w = World::new();
    w.engine.set_config(EngineConfig {
        accounting: Some(AccountingPolicy {
            interim_period_ms: 60_000,
            ..AccountingPolicy::default()
        }),
        ..config()
    });
    let tag = establish(&mut w);
    assert_eq!(records(&mut w).len(), 1, "the Start");
    w.advance(Duration::from_millis(150_500));
    let interims = records(&mut w);
    assert_eq!(
        interims
            .iter()
            .map(|r| (r.kind, r.interim))
            .collect::<Vec<_>>(),
        vec![(RecordKind::Interim, 1), (RecordKind::Interim, 2)]
    );
    // Each says how long the call has lasted so far.
    assert!(
        (59_900..=60_100).contains(&interims[0].duration_ms()),
        "{}",
        interims[0].duration_ms()
    );
    let mut replicated = None;
    while let Some(c) = w.engine.poll_dialog_change() {
        if let DialogChange::Upsert(d) = c {
            replicated = Some(d);
        }
    }
    let mut standby = World::new();
    standby.engine.set_config(EngineConfig {
        accounting: Some(AccountingPolicy {
            interim_period_ms: 60_000,
            ..AccountingPolicy::default()
        }),
        ..config()
    });
    standby.now = w.now;
    standby
        .engine
        .install_dialog(standby.now, *replicated.expect("replicated"));
    standby.advance(Duration::from_secs(40));
    let third = records(&mut standby);
    assert_eq!(
        third
            .iter()
            .map(|r| (r.kind, r.interim))
            .collect::<Vec<_>>(),
        vec![(RecordKind::Interim, 3)],
        "the new active goes on from the replicated count"
    );
    standby.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye", &tag));
    standby.advance(Duration::from_secs(120));
    let end = records(&mut standby);
    assert_eq!(
        end.iter().map(|r| r.kind).collect::<Vec<_>>(),
        vec![RecordKind::Stop]
    );
}

#[test]
fn a_cancelled_attempt_is_the_caller_s_487_even_when_a_2xx_crosses_the_cancel() {
    let mut w = accounting_world();
    w.caller_sends(&invite("z9hG4bKinv1"));
    w.callee_answers(180, "b1");
    let cancel = invite("z9hG4bKinv1")
        .replacen("INVITE sip", "CANCEL sip", 1)
        .replace("CSeq: 1 INVITE", "CSeq: 1 CANCEL");
    w.caller_sends(&cancel);
    let inv = w.to_callee[0].clone();
    w.callee_responds_to(&inv, 200, "b1");
    w.advance(Duration::from_secs(40));
    let r = records(&mut w);
    assert_eq!(
        r.iter()
            .map(|r| (r.kind, r.status, r.ended_by))
            .collect::<Vec<_>>(),
        vec![(RecordKind::Stop, 487, EndedBy::Caller)]
    );
}

#[test]
fn a_next_hop_that_never_answers_is_the_sbc_s_408() {
    let mut w = accounting_world();
    w.caller_sends(&invite("z9hG4bKinv1"));
    w.advance(Duration::from_secs(40));
    let r = records(&mut w);
    assert_eq!(
        r.iter()
            .map(|r| (r.kind, r.status, r.ended_by))
            .collect::<Vec<_>>(),
        vec![(RecordKind::Stop, 408, EndedBy::Sbc)]
    );
}
