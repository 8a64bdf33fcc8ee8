//! Heartbeat partition: with a witness, never two actives; with or without one, on heal one
//! active holding the union of the dialogs, and every call survives.
//!
//! There is no iptables here, so the nodes do not talk to each other directly: each node's
//! peer entry for the other points at a relay address ([`Link`]: `127.0.0.13` relays to
//! `sbc-b`, `127.0.0.14` to `sbc-a`), which forwards the heartbeat datagrams and splices the
//! state-sync TCP connections. [`Link::cut`] drops the datagrams and holds the TCP bytes (a
//! silent partition); [`Link::heal`] resumes. In the witness test both nodes reach the witness
//! (`sbc witness` on `127.0.0.15`) throughout: the partition is between the nodes only.
//!
//! Sequence and assertions (both tests):
//!
//! 1. The pair settles (one active, one standby); with a witness, both report it reachable.
//! 2. 30 calls (held 40 s) are placed and replicated to the standby.
//! 3. The link is cut for 8 s (longer than the detection time, 1.05 s, and than the 5 s a new
//!    active keeps retrying to bind the service address). Both nodes are polled every 100 ms.
//!    With a witness: **never two actives** (every sample with both `active` or
//!    `becoming-active` is a violation); without one, two actives are expected and only
//!    printed. 2 s into the cut, 20 more calls (held 30 s) are placed through whichever node
//!    serves the address.
//! 4. The link heals: within 15 s exactly one active and one standby; the standby
//!    synchronizes and holds the **union** of the dialogs (all 50), and so do the active's
//!    workers (`show dialogs`: they answer the BYEs); a new call is answered on the shared
//!    address.
//! 5. Every call's BYE succeeds: both UACs report 0 failed calls.
//!
//! Every violation is collected and reported together at the end, so one run shows the whole
//! behaviour (split brain, heal, calls).

use std::time::{Duration, Instant};

use sbc_e2e::pair::{lo, probe_call, Link, Pair, PairConfig, Redundancy, Witness, NAMES};
use sbc_e2e::{ports, tail_of_file, TestDir};

use std::net::SocketAddr;

const BEFORE: u32 = 30;
const DURING: u32 = 20;

/// Whether node `i`'s `show redundancy` shows a witness line that says neither
/// "unreachable" nor "none configured".
fn witness_reachable(pair: &Pair, i: usize) -> bool {
    pair.exec(i, "show redundancy")
        .and_then(|r| r["output"].as_str().map(str::to_owned))
        .is_some_and(|t| {
            t.lines().any(|l| {
                l.starts_with("witness") && !l.contains("unreachable") && !l.contains("none")
            })
        })
}

/// The number of dialogs in node `i`'s workers (`show dialogs`).
fn live_dialogs(pair: &Pair, i: usize) -> Option<u64> {
    let reply = pair.exec(i, "show dialogs")?;
    reply["data"]["dialogs"].as_array().map(|d| d.len() as u64)
}

fn is_activeish(r: &Option<Redundancy>) -> bool {
    r.as_ref()
        .is_some_and(|r| r.is_active() || r.state == "becoming-active")
}

#[test]
fn partition_with_witness_never_two_actives_and_heals_to_union() {
    partition_and_heal(true);
}

#[test]
fn partition_without_witness_heals_to_one_active_with_union() {
    partition_and_heal(false);
}

fn partition_and_heal(with_witness: bool) {
    let mut config = PairConfig::new();
    let relay_to_b = SocketAddr::new(lo(13), ports::free_port());
    let relay_to_a = SocketAddr::new(lo(14), ports::free_port());
    config.route_to_other = [relay_to_b, relay_to_a];
    let witness_dir = TestDir::new(if with_witness {
        "pair_partition-witness"
    } else {
        "pair_partition-no-witness"
    });
    let mut witness = None;
    if with_witness {
        config.witness = Some(SocketAddr::new(lo(15), ports::free_port()));
        witness = Some(Witness::start(
            &witness_dir,
            config.witness.expect("set above"),
        ));
    }
    let sync = config.sip_sync_port;
    let mut link = Link::new();
    link.udp(relay_to_b, config.heartbeat[1]);
    link.udp(relay_to_a, config.heartbeat[0]);
    // Each node knows the other by its relay's address (route_to_other), so the relay toward a
    // node connects from the address that node has for its peer.
    link.tcp(
        SocketAddr::new(lo(13), sync),
        SocketAddr::new(config.heartbeat[1].ip(), sync),
        lo(14),
    );
    link.tcp(
        SocketAddr::new(lo(14), sync),
        SocketAddr::new(config.heartbeat[0].ip(), sync),
        lo(13),
    );

    let pair = Pair::start(config);
    if let Some(w) = witness.as_mut() {
        w.assert_alive();
    }
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    if let Some(w) = witness.as_mut() {
        w.assert_alive();
    }
    eprintln!(
        "roles: {} active, {} standby",
        NAMES[active], NAMES[standby]
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while with_witness && !(witness_reachable(&pair, 0) && witness_reachable(&pair, 1)) {
        assert!(
            Instant::now() < deadline,
            "the witness is not reachable from both nodes"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let mut violations: Vec<String> = Vec::new();
    let uas = pair.spawn_uas("uas", BEFORE + DURING + 1, Duration::from_secs(120));
    let uac1 = pair
        .uac("uac-before", BEFORE, 30, 40_000, Duration::from_secs(90))
        .spawn();
    pair.wait_replicated(standby, u64::from(BEFORE), Duration::from_secs(10));

    // The partition.
    let cut_at = Instant::now();
    link.cut();
    eprintln!("link cut");
    let mut samples = 0u32;
    let mut both_active = 0u32;
    let mut first_both: Option<Duration> = None;
    let mut timeline: Vec<String> = Vec::new();
    let mut last_states = (String::new(), String::new());
    let mut uac2 = None;
    for _ in 0..200 {
        let t = cut_at.elapsed();
        if t > Duration::from_secs(8) {
            break;
        }
        if uac2.is_none() && t > Duration::from_secs(2) {
            uac2 = Some(
                pair.uac("uac-during", DURING, 20, 30_000, Duration::from_secs(90))
                    .spawn(),
            );
        }
        let r = [pair.redundancy(0), pair.redundancy(1)];
        samples += 1;
        let states = (
            r[0].as_ref().map_or("?".into(), |r| r.state.clone()),
            r[1].as_ref().map_or("?".into(), |r| r.state.clone()),
        );
        if states != last_states {
            timeline.push(format!(
                "{:>5} ms  {}={} {}={}",
                t.as_millis(),
                NAMES[0],
                states.0,
                NAMES[1],
                states.1
            ));
            last_states = states;
        }
        if is_activeish(&r[0]) && is_activeish(&r[1]) {
            both_active += 1;
            first_both.get_or_insert(t);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "during the cut ({samples} samples, {} heartbeats/segments dropped):\n{}",
        link.dropped(),
        timeline.join("\n")
    );
    eprintln!("two actives in {both_active} of {samples} samples");
    if with_witness && both_active > 0 {
        violations.push(format!(
            "SPLIT BRAIN: two actives in {both_active} of {samples} samples (100 ms apart), first {:?} after the cut, although both nodes reach the witness\n{}",
            first_both.unwrap_or_default(),
            timeline.join("\n")
        ));
    }

    // Heal.
    link.heal();
    let healed_at = Instant::now();
    eprintln!("link healed");
    let mut roles = None;
    let mut heal_timeline: Vec<String> = Vec::new();
    let mut last_states = (String::new(), String::new());
    for _ in 0..150 {
        if healed_at.elapsed() > Duration::from_secs(15) {
            break;
        }
        let r = [pair.redundancy(0), pair.redundancy(1)];
        let states = (
            r[0].as_ref().map_or("?".into(), |r| r.state.clone()),
            r[1].as_ref().map_or("?".into(), |r| r.state.clone()),
        );
        if states != last_states {
            heal_timeline.push(format!(
                "{:>5} ms  {}={} {}={}",
                healed_at.elapsed().as_millis(),
                NAMES[0],
                states.0,
                NAMES[1],
                states.1
            ));
            last_states = states;
        }
        let a = r
            .iter()
            .position(|r| r.as_ref().is_some_and(Redundancy::is_active));
        if let Some(a) = a {
            if r[1 - a].as_ref().is_some_and(Redundancy::is_standby) {
                roles = Some((a, 1 - a));
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("after the heal:\n{}", heal_timeline.join("\n"));
    match roles {
        None => violations.push(format!(
            "no single active/standby pair within 15 s of the heal\n{}",
            pair.describe()
        )),
        Some((a, s)) => {
            eprintln!(
                "after the heal: {} active, {} standby ({} ms)",
                NAMES[a],
                NAMES[s],
                healed_at.elapsed().as_millis()
            );
            let want = u64::from(BEFORE + DURING);
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut last = None;
            let union = loop {
                let r = pair.redundancy(s);
                if r.as_ref()
                    .is_some_and(|r| r.synchronized && r.replicated_dialogs >= want)
                {
                    break true;
                }
                last = r;
                if Instant::now() > deadline {
                    break false;
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            if !union {
                violations.push(format!(
                    "the standby {} does not hold the union of the dialogs ({want}) 10 s after the roles settled: {last:?}",
                    NAMES[s]
                ));
            }
            // The active's workers must hold every dialog: the BYEs go there. Merged dialogs
            // reach them within moments of the exchange; wait for that, bounded.
            let deadline = Instant::now() + Duration::from_secs(5);
            let live = loop {
                let live = live_dialogs(&pair, a);
                if live.is_some_and(|n| n >= want) || Instant::now() > deadline {
                    break live;
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            eprintln!("the active {} holds {live:?} live dialogs", NAMES[a]);
            if live.is_none_or(|n| n < want) {
                violations.push(format!(
                    "the active {} holds {live:?} live dialogs (show dialogs), not the union of {want}",
                    NAMES[a]
                ));
            }
            // And it serves the shared address: a new call is answered.
            let access = pair.config.sip.access;
            match probe_call(
                access.ip(),
                access,
                Duration::from_millis(100),
                Duration::from_secs(5),
            ) {
                Ok(p) => eprintln!(
                    "a new call after the heal was answered in {} ms",
                    p.answered.duration_since(p.started).as_millis()
                ),
                Err(e) => violations.push(format!(
                    "after the heal nobody serves the shared SIP address {access} (the active is {}): {e}",
                    NAMES[a]
                )),
            }
        }
    }

    // Every call ends cleanly.
    let uac1 = uac1.wait();
    let uac2 = uac2.expect("started during the cut").wait();
    let uas = uas.wait_at_most(Duration::from_secs(20));
    eprintln!(
        "calls: before {:?}; during {:?}; uas {:?}",
        uac1.stats, uac2.stats, uas.stats
    );
    for (res, n) in [(&uac1, BEFORE), (&uac2, DURING)] {
        if !(res.code == Some(0) && res.stats.successful == u64::from(n) && res.stats.failed == 0) {
            violations.push(format!(
                "calls failed across the partition and heal\n{}\n--- error log ---\n{}",
                res.describe(),
                tail_of_file(&pair.dir().file(&format!("{}.errors.log", res.name)), 60)
            ));
        }
    }
    drop(witness);
    assert!(
        violations.is_empty(),
        "{} violation(s):\n\n{}",
        violations.len(),
        violations.join("\n\n")
    );
}
