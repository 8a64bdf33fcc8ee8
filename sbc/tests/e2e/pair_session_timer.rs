//! Stale calls end after a takeover (issue 30, item 4): the realms run a
//! `session-timer-profile` (session-expires 90), so the SBC refreshes each leg of SIPp's calls
//! itself (SIPp's built-in scenarios know no timers, nor UPDATE: an in-dialog OPTIONS). 20
//! calls are established and replicated; then both SIPp processes die (the endpoints vanish,
//! no BYE will ever come) and the active is killed with SIGKILL. The new active, from the
//! replicated refresh dates, probes each leg at half the interval; nothing answers, each probe
//! times out (64·T1), and every call ends with BYE on both legs, counted as a failed refresh:
//! 0 calls active well within 2 × 90 s of the last answer (before issue 30, such calls stayed
//! counted as active for good).

use std::time::{Duration, Instant};

use sbc_e2e::pair::{kill9, Pair, PairConfig, NAMES};

const CALLS: u32 = 20;

fn calls_active(pair: &Pair, node: usize) -> Option<u64> {
    pair.exec(node, "show sip-stats")
        .and_then(|v| v["data"]["calls_active"].as_u64())
}

#[test]
fn calls_whose_endpoints_vanished_end_on_the_new_active_by_the_sbc_s_session_timer() {
    let mut config = PairConfig::new();
    config.extra_toml = "\n[[session-timer-profile]]\nname = \"ninety\"\nsession-expires = 90\n\
         [[realm-config]]\nidentifier = \"access\"\nsession-timer-profile = \"ninety\"\n\
         [[realm-config]]\nidentifier = \"core\"\nsession-timer-profile = \"ninety\"\n"
        .into();
    let mut pair = Pair::start(config);
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    let uas = pair.spawn_uas("uas", CALLS, Duration::from_secs(300));
    let uac = pair
        .uac("uac", CALLS, 20, 600_000, Duration::from_secs(300))
        .spawn();
    let answered = Instant::now();
    pair.wait_replicated(standby, u64::from(CALLS), Duration::from_secs(20));
    // The endpoints vanish: SIGKILL to each SIPp's PID (dropping the process), then the
    // active dies too.
    drop(uac);
    drop(uas);
    kill9(&mut pair.nodes[active]);
    pair.wait_redundancy(standby, Duration::from_secs(5), "active", |r| r.is_active());
    assert_eq!(
        calls_active(&pair, standby),
        Some(u64::from(CALLS)),
        "the new active carries the replicated calls\n{}",
        pair.describe()
    );
    // Each leg is probed 45 s after the answer; the probe times out 32 s later.
    let deadline = answered + Duration::from_secs(2 * 90);
    let ended = loop {
        if calls_active(&pair, standby) == Some(0) {
            break answered.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "calls still active 2 x session-expires after the answer: {:?}\n{}",
            calls_active(&pair, standby),
            pair.describe()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!(
        "{} ended the {CALLS} stale calls {ended:?} after they were answered",
        NAMES[standby]
    );
    assert!(
        ended >= Duration::from_secs(45),
        "{ended:?}: not before the first probe"
    );
    let stats = pair.exec(standby, "show sip-stats").unwrap_or_default();
    let counters = &stats["data"]["counters"];
    assert_eq!(
        counters["session_refresh_failed"].as_u64(),
        Some(u64::from(CALLS)),
        "{stats:#}"
    );
    assert!(
        counters["session_refreshes_sent"].as_u64() >= Some(u64::from(CALLS)),
        "{stats:#}"
    );
    pair.nodes[standby].assert_alive();
}
