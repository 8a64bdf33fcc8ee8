//! kill -9 of the active while calls are ringing: calls in set-up survive.
//!
//! A SIPp UAC places 300 calls at 20 calls/s through the pair to a SIPp UAS that rings 3 s
//! before it answers (`uas_ring3s.xml`), so about 60 calls are in set-up at any moment. After
//! 6 s (120 calls placed: some established, about 60 ringing, some just forwarded) the active
//! is killed with SIGKILL by its PID. The new active installed every replicated call, those in
//! set-up with their INVITE transactions: the callee's 200s (and retransmissions) reach it and
//! are relayed, the callers' ACKs confirm the calls there, their BYEs end them. Then both SIPp
//! sides must count **0 failed calls** out of 300, established and in set-up alike.

use std::time::{Duration, Instant};

use sbc_e2e::pair::{kill9, Pair, PairConfig, NAMES};
use sbc_e2e::sipp::Sipp;

const CALLS: u32 = 300;
const RATE: u32 = 20;

#[test]
fn kill9_while_calls_ring_loses_no_call() {
    let mut pair = Pair::start(PairConfig::new());
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    eprintln!(
        "roles: {} active, {} standby",
        NAMES[active], NAMES[standby]
    );
    let agent = pair.config.sip.agent;
    let uas = Sipp::new(pair.dir(), "uas-ring")
        .scenario("uas_ring3s.xml")
        .local(agent)
        .calls(CALLS)
        .timeout(Duration::from_secs(120))
        .spawn();
    sbc_e2e::sipp::wait_listening(agent, false, Duration::from_secs(5));
    let uac = pair
        .uac("uac", CALLS, RATE, 2_000, Duration::from_secs(100))
        .spawn();

    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(6));
    let before = pair.redundancy(standby);
    let killed_at = kill9(&mut pair.nodes[active]);
    eprintln!(
        "killed {} {:?} after the first INVITE; standby held {:?} replicated dialogs",
        NAMES[active],
        killed_at.duration_since(started),
        before.map(|r| r.replicated_dialogs)
    );
    let now_active =
        pair.wait_redundancy(standby, Duration::from_secs(5), "active", |r| r.is_active());
    eprintln!(
        "{} active {} ms after the kill (epoch {})",
        NAMES[standby],
        killed_at.elapsed().as_millis(),
        now_active.epoch
    );

    let uac = uac.wait();
    eprintln!(
        "UAC: {:?}, retransmissions {}",
        uac.stats, uac.stats.retransmissions
    );
    let uas = uas.wait_at_most(Duration::from_secs(30));
    eprintln!("UAS: {:?}", uas.stats);
    println!(
        "MEASURE pair_setup_failover: {} calls, failed at the caller {}, at the callee {}",
        CALLS, uac.stats.failed, uas.stats.failed
    );
    uac.assert_success(u64::from(CALLS));
    uas.assert_success(u64::from(CALLS));
    pair.nodes[standby].assert_alive();
}
