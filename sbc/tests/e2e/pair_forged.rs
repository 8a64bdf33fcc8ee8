//! Forged heartbeats and garbage from a third party change nothing.
//!
//! With the pair settled (one active, one standby), a raw UDP socket on 127.0.0.13 (neither
//! node's address) sends to both nodes' heartbeat addresses, for about 3 s (a bounded loop):
//!
//! - well-formed heartbeats (magic, version 2, a nonce naming the *other* node, a sealed payload
//!   and tag of plausible sizes) not sealed with the pair's key: to be counted `bad_mac`;
//! - random garbage of random lengths, datagrams with a wrong magic, a wrong version, oversized
//!   and runt datagrams.
//!
//! While it runs both nodes are polled every 100 ms: the roles never change. Afterwards:
//! same active, same epoch, same last transition, both peers alive, the real heartbeats still
//! accepted, `bad_mac` grew by at least 90 % of the forged heartbeats sent to that node (UDP on
//! loopback may drop a few), and the garbage counters (`bad_magic`, `bad_length`, `bad_version`)
//! grew; 20 calls still succeed through the pair.

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use sbc_e2e::pair::{forged_heartbeat, garbage, lo, other, Pair, PairConfig, NAMES};

fn delta(after: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>, k: &str) -> u64 {
    after
        .get(k)
        .copied()
        .unwrap_or(0)
        .saturating_sub(before.get(k).copied().unwrap_or(0))
}

#[test]
fn forged_heartbeats_and_garbage_change_nothing() {
    let pair = Pair::start(PairConfig::new());
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    // Let the standby finish its first sync so nothing is still settling.
    pair.wait_redundancy(standby, Duration::from_secs(10), "synchronized", |r| {
        r.synchronized
    });
    let before = [
        pair.redundancy(0).expect("sbc-a answers"),
        pair.redundancy(1).expect("sbc-b answers"),
    ];
    let counters_before = [
        pair.counters(0).expect("sbc-a counters"),
        pair.counters(1).expect("sbc-b counters"),
    ];
    eprintln!("before: {before:?}\ncounters before: {counters_before:?}");

    let attacker = UdpSocket::bind(SocketAddr::new(lo(13), 0)).expect("bind 127.0.0.13");
    let targets = pair.config.heartbeat;
    let wrong_key = b"not-the-lab-secret-at-all";
    let mut forged_sent = [0u64; 2];
    let mut garbage_sent = [0u64; 2];
    let mut role_changes = Vec::new();
    let start = Instant::now();
    let mut next_poll = start;
    for k in 0..600u64 {
        if start.elapsed() > Duration::from_secs(10) {
            break;
        }
        for (i, target) in targets.iter().enumerate() {
            let claims = NAMES[other(i)];
            let hb = forged_heartbeat(claims, wrong_key, 1_000_000 + k);
            if attacker.send_to(&hb, target).is_ok() {
                forged_sent[i] += 1;
            }
            let junk: Vec<u8> = match k % 5 {
                0 => garbage(k + 1, 1 + (k as usize * 7) % 600),
                1 => {
                    let mut d = hb.clone();
                    d[0] = b'X'; // wrong magic
                    d
                }
                2 => {
                    let mut d = hb.clone();
                    d[4] = 9; // wrong version
                    d
                }
                3 => {
                    let mut d = hb.clone();
                    d.resize(600, 0xab); // longer than any heartbeat may be
                    d
                }
                _ => b"SBHA\x02".to_vec(), // runt
            };
            if attacker.send_to(&junk, target).is_ok() {
                garbage_sent[i] += 1;
            }
        }
        if Instant::now() >= next_poll {
            next_poll += Duration::from_millis(100);
            for (i, b) in before.iter().enumerate() {
                match pair.redundancy(i) {
                    Some(r) if r.state == b.state => {}
                    other => role_changes.push(format!(
                        "{:?} after {:?}: {} is {other:?}",
                        k,
                        start.elapsed(),
                        NAMES[i]
                    )),
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!(
        "sent forged {forged_sent:?}, garbage {garbage_sent:?} in {:?}",
        start.elapsed()
    );
    assert!(
        role_changes.is_empty(),
        "roles changed under forged traffic:\n{}",
        role_changes.join("\n")
    );

    // Give the nodes a moment to drain their sockets, then compare.
    std::thread::sleep(Duration::from_millis(1500));
    for i in 0..2 {
        let after = pair.redundancy(i).expect("node answers");
        let c = pair.counters(i).expect("counters");
        eprintln!("{} after: {after:?}\ncounters after: {c:?}", NAMES[i]);
        assert_eq!(after.state, before[i].state, "{}", NAMES[i]);
        assert_eq!(after.epoch, before[i].epoch, "{}", NAMES[i]);
        assert_eq!(
            after.last_transition, before[i].last_transition,
            "{}",
            NAMES[i]
        );
        assert!(after.peer_alive, "{} lost its peer", NAMES[i]);
        let cb = &counters_before[i];
        let bad_mac = delta(&c, cb, "bad_mac");
        assert!(
            bad_mac >= forged_sent[i] * 9 / 10,
            "{}: bad_mac grew by {bad_mac}, {} forged heartbeats sent",
            NAMES[i],
            forged_sent[i]
        );
        for k in ["bad_magic", "bad_length", "bad_version"] {
            assert!(
                delta(&c, cb, k) > 0,
                "{}: {k} did not grow: {c:?}",
                NAMES[i]
            );
        }
        assert!(
            delta(&c, cb, "accepted") > 0,
            "{}: real heartbeats no longer accepted: {c:?}",
            NAMES[i]
        );
        for k in ["unknown_node", "own_node", "malformed"] {
            assert_eq!(delta(&c, cb, k), 0, "{}: {k} grew: {c:?}", NAMES[i]);
        }
    }
    assert_eq!(pair.wait_roles(Duration::from_secs(2)), (active, standby));

    let uas = pair.spawn_uas("uas", 20, Duration::from_secs(40));
    pair.uac("uac", 20, 20, 0, Duration::from_secs(20))
        .run()
        .assert_success(20);
    uas.wait_at_most(Duration::from_secs(15)).assert_success(20);
}
