//! Manual switchover (`notify berpd force`) under a steady call rate.
//!
//! A SIPp UAC places 300 calls at 20 calls/s (15 s), each held 2 s, through the pair's shared
//! service address. About 6 s in, `notify berpd force` is sent to the active. Asserts:
//!
//! - the command is accepted;
//! - the roles swap: the former standby is `active`, the former active `standby` (times from
//!   the command printed);
//! - the UAC reports 300 successful and **0 failed** calls, and the UAS 300 successful: no call
//!   was lost to the release/bind gap (UDP retransmissions bridge it) nor to a dialog not yet
//!   installed on the new active. On failure SIPp's error log is printed whole: a failing call
//!   here is a product bug.
//! - the old active then holds the new active's dialogs as a synchronized standby.

use std::time::{Duration, Instant};

use sbc_e2e::pair::{Pair, PairConfig, NAMES};
use sbc_e2e::tail_of_file;

const CALLS: u32 = 300;

#[test]
fn notify_berpd_force_under_load_loses_no_call() {
    let pair = Pair::start(PairConfig::new());
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    eprintln!(
        "roles: {} active, {} standby",
        NAMES[active], NAMES[standby]
    );

    let uas = pair.spawn_uas("uas", CALLS, Duration::from_secs(90));
    let uac = pair
        .uac("uac", CALLS, 20, 2_000, Duration::from_secs(60))
        .spawn();
    std::thread::sleep(Duration::from_secs(6));
    let before = pair.redundancy(standby).expect("standby answers");
    eprintln!(
        "before the switchover: the standby holds {} replicated dialogs",
        before.replicated_dialogs
    );

    let sent_at = Instant::now();
    let reply = pair
        .exec(active, "notify berpd force")
        .expect("the active answers");
    assert_eq!(
        reply["ok"],
        serde_json::Value::Bool(true),
        "notify berpd force refused: {reply}"
    );
    let new_active = pair.wait_redundancy(standby, Duration::from_secs(10), "active", |r| {
        r.is_active()
    });
    let t_active = sent_at.elapsed();
    let old = pair.wait_redundancy(active, Duration::from_secs(10), "standby", |r| {
        r.is_standby()
    });
    let t_standby = sent_at.elapsed();
    eprintln!(
        "notify berpd force on {}: {} active after {} ms (last transition {}), {} standby after {} ms (last transition {})",
        NAMES[active],
        NAMES[standby],
        t_active.as_millis(),
        new_active.last_transition,
        NAMES[active],
        t_standby.as_millis(),
        old.last_transition,
    );
    println!(
        "MEASURE pair_manual_switchover: command -> new active = {} ms",
        t_active.as_millis()
    );

    let uac = uac.wait();
    let uas = uas.wait_at_most(Duration::from_secs(20));
    let uac_ok =
        uac.code == Some(0) && uac.stats.successful == u64::from(CALLS) && uac.stats.failed == 0;
    let uas_ok = uas.stats.successful == u64::from(CALLS) && uas.stats.failed == 0;
    assert!(
        uac_ok && uas_ok,
        "calls failed across a manual switchover (a product bug)\nUAC: {}\n--- UAC error log ---\n{}\nUAS: {}\n--- UAS error log ---\n{}\n{}",
        uac.describe(),
        tail_of_file(&pair.dir().file("uac.errors.log"), 400),
        uas.describe(),
        tail_of_file(&pair.dir().file("uas.errors.log"), 400),
        pair.describe(),
    );
    eprintln!("UAC {:?}; UAS {:?}", uac.stats, uas.stats);

    // The pair settles: one active, one standby, the former active synchronized again.
    let (a2, s2) = pair.wait_roles(Duration::from_secs(10));
    assert_eq!((a2, s2), (standby, active), "{}", pair.describe());
    pair.wait_redundancy(active, Duration::from_secs(10), "synchronized", |r| {
        r.synchronized
    });
}
