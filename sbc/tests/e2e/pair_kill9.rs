//! kill -9 of the active with hundreds of established calls.
//!
//! A pair (`sbc-a`, `sbc-b`) shares one SIP service address on loopback. A SIPp UAC places 300
//! calls at 50 calls/s, each held 15 s before its BYE, through the active to a SIPp UAS. Once
//! the standby reports all 300 dialogs replicated (and synchronized), the active is killed with
//! SIGKILL by its PID. Then:
//!
//! - a probe call (a raw UDP INVITE re-sent every 20 ms as a retransmission of one call) is
//!   placed at once: the time from the kill to its 200 OK is printed (`kill -> first new call
//!   answered`), and must be under 10 s; its BYE must get 200;
//! - the former standby must report `active` (the time from the kill is printed too);
//! - a new SIPp run of 50 calls must succeed entirely;
//! - the 300 established calls' UAC must report 300 successful and **0 failed** calls: every
//!   BYE crossed the new active, which installed the replicated dialogs;
//! - the UAS must see all 351 calls (300 + probe + 50) succeed.

use std::time::{Duration, Instant};

use sbc_e2e::pair::{kill9, probe_call, Pair, PairConfig, NAMES};

const CALLS: u32 = 300;
const NEW_CALLS: u32 = 50;

#[test]
fn kill9_of_active_keeps_every_call_and_serves_again() {
    let pair = Pair::start(PairConfig::new());
    let mut pair = pair;
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    eprintln!(
        "roles: {} active, {} standby",
        NAMES[active], NAMES[standby]
    );

    let uas = pair.spawn_uas("uas", CALLS + 1 + NEW_CALLS, Duration::from_secs(150));
    let long = pair
        .uac("uac-long", CALLS, 50, 15_000, Duration::from_secs(90))
        .spawn();

    // All 300 established and replicated before the kill (placing them takes 6 s).
    let started = Instant::now();
    let r = pair.wait_replicated(standby, u64::from(CALLS), Duration::from_secs(20));
    eprintln!(
        "standby holds {} replicated dialogs {:?} after the first INVITE",
        r.replicated_dialogs,
        started.elapsed()
    );

    let killed_at = kill9(&mut pair.nodes[active]);
    let access = pair.config.sip.access;
    let probe = probe_call(
        access.ip(),
        access,
        Duration::from_millis(20),
        Duration::from_secs(10),
    );
    let probe = probe.unwrap_or_else(|e| {
        panic!(
            "no new call answered within 10 s of the kill: {e}\n{}",
            pair.describe()
        )
    });
    let to_answer = probe.answered.duration_since(killed_at);
    let now_active =
        pair.wait_redundancy(standby, Duration::from_secs(5), "active", |r| r.is_active());
    eprintln!(
        "kill -9 of {} -> first new call answered in {} ms (probe INVITE sent {} times, every 20 ms); \
         detection time {} ms; {} now {:?} (epoch {}, last transition {})",
        NAMES[active],
        to_answer.as_millis(),
        probe.invites_sent,
        pair.config.dead_time().as_millis(),
        NAMES[standby],
        now_active.state,
        now_active.epoch,
        now_active.last_transition,
    );
    println!(
        "MEASURE pair_kill9: kill -> first new call answered = {} ms",
        to_answer.as_millis()
    );
    assert!(to_answer < Duration::from_secs(10));
    assert_eq!(probe.bye_status, Some(200), "the probe call's BYE failed");

    let new = pair
        .uac("uac-new", NEW_CALLS, 25, 0, Duration::from_secs(60))
        .run();
    new.assert_success(u64::from(NEW_CALLS));

    let long = long.wait();
    eprintln!(
        "established calls: {:?}, retransmissions {}",
        long.stats, long.stats.retransmissions
    );
    long.assert_success(u64::from(CALLS));

    let uas = uas.wait_at_most(Duration::from_secs(20));
    uas.assert_success(u64::from(CALLS + 1 + NEW_CALLS));
    pair.nodes[standby].assert_alive();
}
