//! The trace tap: every message in and out, with its call, its leg and why the engine
//! refused or answered it itself.

use super::*;
use crate::trace::capture::{Direction, LegSide};

fn traced_world() -> World {
    let mut w = World::new();
    w.engine = Engine::new(
        EngineConfig {
            trace: true,
            ..config()
        },
        seed(),
    );
    w
}

fn drain(w: &mut World) -> Vec<TraceEvent> {
    std::iter::from_fn(|| w.engine.poll_trace()).collect()
}

fn first_line(e: &TraceEvent) -> String {
    let end = e
        .bytes
        .iter()
        .position(|&b| b == b'\r')
        .unwrap_or(e.bytes.len());
    String::from_utf8_lossy(&e.bytes[..end]).into_owned()
}

#[test]
fn off_traces_nothing() {
    let mut w = World::new();
    establish(&mut w);
    assert!(w.engine.poll_trace().is_none());
}

#[test]
fn a_call_is_traced_on_both_legs_in_order_with_one_correlation() {
    let mut w = traced_world();
    establish(&mut w);
    let events = drain(&mut w);
    let ladder: Vec<(Direction, LegSide, String)> = events
        .iter()
        .map(|e| {
            let call = e
                .call
                .as_ref()
                .expect("every message of the call is tied to it");
            (e.direction, call.leg, first_line(e))
        })
        .collect();
    let (rx, tx) = (Direction::Received, Direction::Sent);
    let (a, b) = (LegSide::Caller, LegSide::Callee);
    let expected = [
        (rx, a, format!("INVITE sip:bob@{ACCESS} SIP/2.0")),
        (tx, a, "SIP/2.0 100 Trying".to_owned()),
        (tx, b, format!("INVITE sip:bob@{CALLEE} SIP/2.0")),
        (rx, b, "SIP/2.0 180 Ringing".to_owned()),
        (tx, a, "SIP/2.0 180 Ringing".to_owned()),
        (rx, b, "SIP/2.0 200 OK".to_owned()),
        (tx, a, "SIP/2.0 200 OK".to_owned()),
        (rx, a, format!("ACK sip:sbc@{ACCESS} SIP/2.0")),
        (tx, b, format!("ACK sip:bob@{CALLEE} SIP/2.0")),
    ];
    assert_eq!(ladder.len(), expected.len(), "{ladder:#?}");
    for (got, want) in ladder.iter().zip(expected.iter()) {
        assert_eq!((got.0, got.1), (want.0, want.1), "{got:?} vs {want:?}");
        assert!(
            got.2.starts_with(&want.2[..want.2.len().min(12)]),
            "{got:?} vs {want:?}"
        );
    }
    let ids: HashSet<_> = events
        .iter()
        .map(|e| e.call.as_ref().map(|c| (c.id, c.correlation.to_string())))
        .collect();
    assert_eq!(ids.len(), 1, "one call, one correlation: {ids:?}");
    let (id, correlation) = ids.into_iter().next().flatten().expect("a call");
    assert_eq!(correlation, "call-1@10.1.1.1");
    assert_eq!(id, w.engine.dialogs().next().map(|d| d.id));
    // Addresses as on the wire: our interface on each leg, the peer.
    let invite_out = &events[2];
    assert_eq!((invite_out.local, invite_out.peer), (sa(CORE), sa(CALLEE)));
    assert_eq!((events[0].local, events[0].peer), (sa(ACCESS), sa(CALLER)));
    assert!(
        events.iter().all(|e| e.note.is_none()),
        "a relayed call has no notes"
    );
}

#[test]
fn a_refused_request_is_traced_with_its_reason_and_our_answer() {
    let mut w = traced_world();
    w.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye9", "nosuchtag"));
    let events = drain(&mut w);
    assert_eq!(events.len(), 2, "{events:#?}");
    assert_eq!(events[0].direction, Direction::Received);
    assert_eq!(events[1].direction, Direction::Sent);
    assert!(first_line(&events[1]).starts_with("SIP/2.0 481"));
    for e in &events {
        assert_eq!(e.note.as_deref(), Some("refused 481: no such dialog"));
        assert!(e.call.is_none());
    }
}

#[test]
fn an_unparsable_request_is_traced_with_the_parser_s_reason() {
    let mut w = traced_world();
    w.caller_sends(
        "INVITE sip:bob@x SIP/2.0\nVia: SIP/2.0/UDP 10.1.1.1:5060;branch=z9hG4bKx\nFrom: <sip:a@x>;tag=1\nTo: <sip:b@x>\nCall-ID: c\nCSeq: one INVITE\nContent-Length: 0\n\n",
    );
    let events = drain(&mut w);
    assert_eq!(events.len(), 2, "{events:#?}");
    let note = events[0].note.as_deref().unwrap_or_default();
    assert!(note.starts_with("refused 400"), "{note}");
}

#[test]
fn an_out_of_dialog_exchange_is_tied_across_legs_by_the_caller_s_call_id() {
    let mut w = traced_world();
    w.caller_sends(&format!(
        "OPTIONS sip:bob@{ACCESS} SIP/2.0\nVia: SIP/2.0/UDP {CALLER};branch=z9hG4bKopt1\nMax-Forwards: 70\nFrom: <sip:alice@10.1.1.1>;tag=o1\nTo: <sip:bob@{ACCESS}>\nCall-ID: opt-1@10.1.1.1\nCSeq: 1 OPTIONS\nContent-Length: 0\n\n"
    ));
    w.callee_answers(200, "ob");
    let events = drain(&mut w);
    let legs: Vec<(Direction, LegSide)> = events
        .iter()
        .map(|e| {
            let c = e.call.as_ref().expect("tied to the exchange");
            assert_eq!(c.id, None);
            assert_eq!(&*c.correlation, "opt-1@10.1.1.1");
            (e.direction, c.leg)
        })
        .collect();
    assert_eq!(
        legs,
        [
            (Direction::Received, LegSide::Caller),
            (Direction::Sent, LegSide::Callee),
            (Direction::Received, LegSide::Callee),
            (Direction::Sent, LegSide::Caller),
        ]
    );
}

#[test]
fn a_timeout_is_traced_with_the_timer_that_fired() {
    for (trying, note) in [
        (
            false,
            "answered 408: no response within the session-agent's attempt expiry",
        ),
        (
            true,
            "answered 408: the next hop did not answer (timer B or F)",
        ),
    ] {
        let mut w = traced_world();
        w.caller_sends(&format!(
            "MESSAGE sip:bob@{ACCESS} SIP/2.0\nVia: SIP/2.0/UDP {CALLER};branch=z9hG4bKmsg1\nMax-Forwards: 70\nFrom: <sip:alice@10.1.1.1>;tag=m1\nTo: <sip:bob@{ACCESS}>\nCall-ID: msg-1@10.1.1.1\nCSeq: 1 MESSAGE\nContent-Length: 0\n\n"
        ));
        if trying {
            // A 100 ends the attempt's expiry: timer F decides.
            let msg = w.to_callee[0].clone();
            w.callee_responds_to(&msg, 100, "");
        }
        drain(&mut w);
        w.advance(Duration::from_secs(40));
        let events = drain(&mut w);
        let answer = events
            .iter()
            .find(|e| first_line(e).starts_with("SIP/2.0 408"))
            .expect("a 408 to the caller");
        assert_eq!(answer.note.as_deref(), Some(note));
        assert_eq!(answer.call.as_ref().map(|c| c.leg), Some(LegSide::Caller));
        // The retransmissions before it are traced too, on the callee leg.
        assert!(events
            .iter()
            .filter(|e| first_line(e).starts_with("MESSAGE"))
            .all(|e| e.call.as_ref().map(|c| c.leg) == Some(LegSide::Callee)));
    }
}

#[test]
fn a_shell_that_stops_draining_costs_counted_drops_not_memory() {
    let mut w = traced_world();
    for i in 0..(MAX_PENDING_TRACE_EVENTS / 2 + 10) {
        w.caller_sends(&caller_in_dialog("BYE", 2, &format!("z9hG4bKb{i}"), "none"));
    }
    assert_eq!(
        std::iter::from_fn(|| w.engine.poll_trace()).count(),
        MAX_PENDING_TRACE_EVENTS
    );
    assert_eq!(w.engine.stats().trace_dropped, 20);
}

#[test]
fn switched_off_the_tap_only_counts() {
    let switch = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut w = World::new();
    w.engine = Engine::new(
        EngineConfig {
            trace: true,
            trace_switch: Some(switch.clone()),
            ..config()
        },
        seed(),
    );
    establish(&mut w);
    assert!(w.engine.poll_trace().is_none());
    assert_eq!(w.engine.stats().trace_dropped, 9, "every message counted");
    switch.store(true, std::sync::atomic::Ordering::Relaxed);
    w.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye1", "nosuch"));
    assert_eq!(drain(&mut w).len(), 2);
}
