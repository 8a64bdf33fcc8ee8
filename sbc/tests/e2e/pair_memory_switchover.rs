//! Memory-driven switchover: critical memory on the active hands the service to the standby.
//!
//! Both nodes run with `options = ["critical-memory-abort=switchover"]`, the process memory
//! source against a 64 MB limit, a critical memory threshold at 80 %, 1 s alarm iterations
//! (5 sub-samples, 3 for a spike), lab mode, and traps to one real `snmptrapd`. With 100 SIPp
//! calls established (held 20 s) and replicated, `lab ballast 56` is sent to the active
//! (an ~18 MB process + 56 MB is past 80 % of 64 MB). Asserts, printing the times from the
//! ballast command:
//!
//! - an `sbcAlarmTrap` (memory, critical, threshold 80) from the active arrives;
//! - its `show health` drops by 100 (to 0) with `ineligible_until_restart`, and an
//!   `sbcHealthTrap` (0, previous 100) from it arrives;
//! - the other node becomes `active`; the former active is no longer active, and an
//!   `sbcRedundancyTrap` from each node arrives;
//! - the former active's `show health` and `show redundancy` say it is ineligible until
//!   restarted, and a later `notify berpd force` on the new active does not hand the service
//!   back to it (it stays not active for 3 s);
//! - the 100 established calls' BYEs all succeed (0 failed calls), and 10 new calls succeed
//!   through the new active.

use std::time::{Duration, Instant};

use sbc_e2e::pair::{Pair, PairConfig, NAMES};
use sbc_e2e::snmp::{ReceivedTrap, Trapd};
use sbc_e2e::TestDir;

const CALLS: u32 = 100;
const ALARM_TRAP: &str = "SBC-PAIR-MIB::sbcAlarmTrap";
const HEALTH_TRAP: &str = "SBC-PAIR-MIB::sbcHealthTrap";
const REDUNDANCY_TRAP: &str = "SBC-PAIR-MIB::sbcRedundancyTrap";

fn field<'a>(t: &'a ReceivedTrap, object: &str) -> &'a str {
    t.get(&format!("SBC-PAIR-MIB::{object}.0")).unwrap_or("")
}

/// Waits up to `timeout` for a trap named `name` from node `node` satisfying `pred`, among
/// those received after the first `skip` of that name.
#[track_caller]
fn wait_trap_from(
    trapd: &Trapd,
    name: &str,
    node: &str,
    skip: usize,
    timeout: Duration,
    pred: impl Fn(&ReceivedTrap) -> bool,
) -> ReceivedTrap {
    let deadline = Instant::now() + timeout;
    let want = format!("STRING: {node}");
    loop {
        if let Some(t) = trapd
            .traps_named(name)
            .into_iter()
            .skip(skip)
            .find(|t| field(t, "sbcNodeName") == want && pred(t))
        {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "no {name} from {node} within {timeout:?}; snmptrapd printed:\n{}",
            trapd.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn critical_memory_on_active_switches_over_and_keeps_calls() {
    let trap_dir = TestDir::new("pair_memory_switchover-snmptrapd");
    let trapd = Trapd::start(&trap_dir);
    let pair = Pair::start(PairConfig::new().with_memory_switchover(64, trapd.port()));
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    eprintln!(
        "roles: {} active, {} standby",
        NAMES[active], NAMES[standby]
    );
    for i in [active, standby] {
        let h = pair.health(i).expect("show health");
        assert_eq!(h["score"], 100, "{} health before: {h}", NAMES[i]);
        let m = pair.exec(i, "show memory").expect("show memory");
        eprintln!(
            "{} before: {}",
            NAMES[i],
            m["output"].as_str().unwrap_or_default().trim()
        );
    }

    let uas = pair.spawn_uas("uas", CALLS + 10, Duration::from_secs(120));
    let long = pair
        .uac("uac-long", CALLS, 50, 20_000, Duration::from_secs(90))
        .spawn();
    pair.wait_replicated(standby, u64::from(CALLS), Duration::from_secs(15));
    let (alarm_skip, health_skip, red_skip) = (
        trapd.traps_named(ALARM_TRAP).len(),
        trapd.traps_named(HEALTH_TRAP).len(),
        trapd.traps_named(REDUNDANCY_TRAP).len(),
    );

    let t0 = Instant::now();
    let reply = pair.exec(active, "lab ballast 56").expect("active answers");
    assert_eq!(reply["ok"], true, "lab ballast refused: {reply}");

    let alarm = wait_trap_from(
        &trapd,
        ALARM_TRAP,
        NAMES[active],
        alarm_skip,
        Duration::from_secs(10),
        |t| field(t, "sbcAlarmSeverity").contains("critical"),
    );
    let t_alarm = t0.elapsed();
    assert!(
        field(&alarm, "sbcAlarmType").contains("memory"),
        "{}",
        alarm.line
    );
    assert!(
        field(&alarm, "sbcAlarmThreshold").contains("80"),
        "{}",
        alarm.line
    );

    // Health −100 at the second critical reading.
    let deadline = Instant::now() + Duration::from_secs(10);
    let health = loop {
        if let Some(h) = pair.health(active) {
            if h["score"] == 0 {
                break h;
            }
        }
        assert!(
            Instant::now() < deadline,
            "health of {} did not drop to 0: {:?}",
            NAMES[active],
            pair.health(active)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let t_health = t0.elapsed();
    assert_eq!(
        health["ineligible_until_restart"], true,
        "show health: {health}"
    );
    let health_trap = wait_trap_from(
        &trapd,
        HEALTH_TRAP,
        NAMES[active],
        health_skip,
        Duration::from_secs(10),
        |t| field(t, "sbcHealthScore") == "INTEGER: 0",
    );
    assert_eq!(
        field(&health_trap, "sbcHealthPreviousScore"),
        "INTEGER: 100",
        "{}",
        health_trap.line
    );

    // The pair switches over.
    let new_active = pair.wait_redundancy(standby, Duration::from_secs(10), "active", |r| {
        r.is_active()
    });
    let t_switch = t0.elapsed();
    let former = pair.wait_redundancy(active, Duration::from_secs(10), "not active", |r| {
        !r.is_active() && !r.state.starts_with("becoming-active")
    });
    eprintln!(
        "lab ballast 56 on {}: alarm trap after {} ms, health 0 after {} ms, {} active after {} ms ({}); former active: {former:?}",
        NAMES[active],
        t_alarm.as_millis(),
        t_health.as_millis(),
        NAMES[standby],
        t_switch.as_millis(),
        new_active.last_transition,
    );
    println!(
        "MEASURE pair_memory_switchover: ballast -> alarm trap {} ms, -> health 0 {} ms, -> new active {} ms",
        t_alarm.as_millis(),
        t_health.as_millis(),
        t_switch.as_millis()
    );
    for i in [active, standby] {
        let t = wait_trap_from(
            &trapd,
            REDUNDANCY_TRAP,
            NAMES[i],
            red_skip,
            Duration::from_secs(10),
            |_| true,
        );
        eprintln!("redundancy trap from {}: {}", NAMES[i], t.line);
    }

    // The former active says it is ineligible until restarted.
    assert!(former.ineligible, "show redundancy: {former:?}");
    let h = pair.health(active).expect("former active answers");
    assert_eq!(h["ineligible_until_restart"], true, "show health: {h}");
    let text = pair.exec(active, "show health").expect("show health");
    let text = text["output"].as_str().unwrap_or_default().to_owned();
    assert!(
        text.contains("until restart"),
        "show health text does not say ineligible until restarted:\n{text}"
    );

    // The established calls' BYEs all cross the new active.
    let long = long.wait();
    eprintln!("established calls: {:?}", long.stats);
    long.assert_success(u64::from(CALLS));
    pair.uac("uac-new", 10, 10, 0, Duration::from_secs(30))
        .run()
        .assert_success(10);
    uas.wait_at_most(Duration::from_secs(20))
        .assert_success(u64::from(CALLS + 10));

    // An ensuing switchover must not hand the service back to the ineligible node.
    let reply = pair.exec(standby, "notify berpd force");
    eprintln!("notify berpd force on the new active: {reply:?}");
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let r = pair.redundancy(active).expect("former active answers");
        assert!(
            !r.is_active() && !r.state.starts_with("becoming-active"),
            "the ineligible former active took the service back: {r:?}\n{}",
            pair.describe()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = pair.redundancy(standby).expect("new active answers");
    assert!(r.is_active(), "{}", pair.describe());
}
