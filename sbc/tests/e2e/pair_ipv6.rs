//! The pair over IPv6 (issue 26): heartbeats, the state sync, the witness and the shared SIP
//! service address all on IPv6 addresses of a network namespace of the test's own
//! ([`sbc_e2e::netns::enter`]): `sbc-a` on `fd00::1`, `sbc-b` on `fd00::2`, the witness on
//! `fd00::3`, the service address (access `fd00::10`, core `fd00::20`), the SIPp UAS (the
//! session-agent) on `fd00::30`, and a stranger on `fd00::9`. The namespace has no IPv4 address
//! but `127.0.0.1`, which no configuration names: everything the pair says goes over IPv6.
//!
//! - `elects_replicates_and_refuses_a_third_address`: the pair elects `sbc-a` (the lower
//!   address) over IPv6 heartbeats (both count accepted heartbeats and witness answers); 10
//!   SIPp calls held through the active are replicated to the standby over the IPv6 sync
//!   channel (one session on the active); five connections from `fd00::9` to the active's sync
//!   port are closed with nothing sent back and counted `refused_address`, one connection of
//!   garbage from the standby's own address is counted `refused_handshake`, no session is
//!   added, the refusal log names `fd00::9`; the 10 calls end with their BYEs through the same
//!   active and the roles never changed.
//! - `kill9_of_the_active_keeps_every_call`: `pair_kill9`'s shape with fewer calls: 40 calls
//!   held 12 s, replicated, then the active is killed with SIGKILL; a probe call over IPv6 is
//!   answered within 10 s of the kill, the former standby is active (the witness granted it the
//!   lease over IPv6), 20 new calls succeed, and the 40 held calls end with 0 failed (their BYEs
//!   cross the new active, which installed the replicated dialogs).

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use sbc_e2e::pair::{kill9, probe_call, Pair, PairConfig, Witness, NAMES};
use sbc_e2e::{ports, SbcConfig, TestDir};
use serde_json::Value;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("an IPv6 address")
}

/// Enters a fresh namespace with every address of the test and returns a pair configuration
/// on them, with a running witness on `fd00::3`.
fn ipv6_pair(test: &str) -> (PairConfig, Witness) {
    let addresses = [
        "fd00::1", "fd00::2", "fd00::3", "fd00::9", "fd00::10", "fd00::20", "fd00::30",
    ]
    .map(ip);
    sbc_e2e::netns::enter(&addresses);
    let sip = SbcConfig::with_addresses(ip("fd00::10"), ip("fd00::20"), ip("fd00::30"));
    let mut config = PairConfig::with_addresses(sip, [ip("fd00::1"), ip("fd00::2")]);
    let witness_addr = SocketAddr::new(ip("fd00::3"), ports::free_port());
    config.witness = Some(witness_addr);
    let witness = Witness::start(&TestDir::new(&format!("{test}-witness")), witness_addr);
    (config, witness)
}

fn sync_counters(pair: &Pair, i: usize) -> Value {
    pair.redundancy_json(i)
        .map(|v| v["sync"].clone())
        .unwrap_or(Value::Null)
}

fn count(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

/// Connects to `to` from `from` (any port), sends `bytes`, and reads until the server closes
/// the connection (at most 6 s); returns what came back.
fn stranger_tcp(from: IpAddr, to: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(to),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .expect("socket");
    s.bind(&SocketAddr::new(from, 0).into())
        .expect("bind the stranger's address");
    s.connect_timeout(&to.into(), Duration::from_secs(2))
        .expect("the sync port accepts TCP");
    let mut s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let _ = s.write_all(bytes);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(6);
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return got,
        }
    }
    panic!("the sync server kept a stranger's connection open for 6 s");
}

#[test]
fn elects_replicates_and_refuses_a_third_address() {
    let (config, mut witness) = ipv6_pair("pair_ipv6-elect");
    let pair = Pair::start(config);
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    assert_eq!(
        (active, standby),
        (0, 1),
        "sbc-a (the lower address, fd00::1) is elected"
    );
    witness.assert_alive();
    for i in [active, standby] {
        let c = pair.counters(i).unwrap_or_default();
        eprintln!("{} heartbeat counters: {c:?}", NAMES[i]);
        assert!(
            c.get("accepted").copied().unwrap_or(0) > 0,
            "{}: no heartbeat accepted over IPv6: {c:?}",
            NAMES[i]
        );
        assert!(
            c.get("witness_answers").copied().unwrap_or(0) > 0,
            "{}: no witness answer over IPv6: {c:?}",
            NAMES[i]
        );
    }

    let uas = pair.spawn_uas("uas", 10, Duration::from_secs(90));
    let held = pair
        .uac("uac-held", 10, 10, 20_000, Duration::from_secs(60))
        .spawn();
    pair.wait_replicated(standby, 10, Duration::from_secs(20));
    let before = sync_counters(&pair, active);
    eprintln!("active's sync counters with the standby joined: {before}");
    assert!(
        count(&before, "sessions") >= 1,
        "the standby's session over IPv6"
    );

    let sync_port = SocketAddr::new(
        pair.config.heartbeat[active].ip(),
        pair.config.sip_sync_port,
    );
    let stranger = ip("fd00::9");
    let mut received = Vec::new();
    for round in 0..5u8 {
        let junk: Vec<u8> = (0..200u8).map(|i| i.wrapping_mul(31) ^ round).collect();
        received.extend(stranger_tcp(stranger, sync_port, &junk));
    }
    // From the standby's own address: past the address check, refused by the handshake (a
    // whole 32-byte handshake message of garbage).
    let mut garbage = vec![0x00, 0x20];
    garbage.extend((0..32u8).map(|i| i.wrapping_mul(77)));
    received.extend(stranger_tcp(
        pair.config.heartbeat[standby].ip(),
        sync_port,
        &garbage,
    ));
    assert!(
        received.is_empty(),
        "the sync server sent a stranger {} bytes",
        received.len()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let c = sync_counters(&pair, active);
        if count(&c, "refused_address") >= count(&before, "refused_address") + 5
            && count(&c, "refused_handshake") > count(&before, "refused_handshake")
        {
            break c;
        }
        assert!(Instant::now() < deadline, "refusals not counted: {c}");
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("active's sync counters after the stranger: {after}");
    assert_eq!(
        count(&after, "refused_address"),
        count(&before, "refused_address") + 5,
        "exactly the stranger's five connections refused by address"
    );
    assert_eq!(
        count(&after, "sessions"),
        count(&before, "sessions"),
        "no stranger got a session"
    );
    let log = std::fs::read_to_string(pair.nodes[active].stderr_path()).unwrap_or_default();
    let refusal_lines = log
        .lines()
        .filter(|l| l.contains("state sync: connection refused") && l.contains("fd00::9"))
        .count();
    assert!(
        (1..=2).contains(&refusal_lines),
        "five refusals of fd00::9 logged {refusal_lines} times"
    );

    held.wait_at_most(Duration::from_secs(60))
        .assert_success(10);
    uas.wait_at_most(Duration::from_secs(20)).assert_success(10);
    assert!(
        pair.redundancy(active).is_some_and(|r| r.is_active()),
        "{}",
        pair.describe()
    );
    assert!(pair.redundancy(standby).is_some_and(|r| r.is_standby()));
    witness.assert_alive();
}

const CALLS: u32 = 40;
const NEW_CALLS: u32 = 20;

#[test]
fn kill9_of_the_active_keeps_every_call() {
    let (config, mut witness) = ipv6_pair("pair_ipv6-kill9");
    let mut pair = Pair::start(config);
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    eprintln!(
        "roles: {} active, {} standby",
        NAMES[active], NAMES[standby]
    );

    let uas = pair.spawn_uas("uas", CALLS + 1 + NEW_CALLS, Duration::from_secs(120));
    let long = pair
        .uac("uac-long", CALLS, 20, 12_000, Duration::from_secs(60))
        .spawn();
    let r = pair.wait_replicated(standby, u64::from(CALLS), Duration::from_secs(20));
    eprintln!("standby holds {} replicated dialogs", r.replicated_dialogs);

    let killed_at = kill9(&mut pair.nodes[active]);
    let access = pair.config.sip.access;
    let probe = probe_call(
        access.ip(),
        access,
        Duration::from_millis(20),
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| {
        panic!(
            "no new call answered within 10 s of the kill: {e}\n{}",
            pair.describe()
        )
    });
    let to_answer = probe.answered.duration_since(killed_at);
    let now_active =
        pair.wait_redundancy(standby, Duration::from_secs(5), "active", |r| r.is_active());
    eprintln!(
        "kill -9 of {} over IPv6 -> first new call answered in {} ms ({} INVITEs); {} now {} \
         (epoch {}, {})",
        NAMES[active],
        to_answer.as_millis(),
        probe.invites_sent,
        NAMES[standby],
        now_active.state,
        now_active.epoch,
        now_active.last_transition,
    );
    println!(
        "MEASURE pair_ipv6_kill9: kill -> first new call answered = {} ms",
        to_answer.as_millis()
    );
    assert!(to_answer < Duration::from_secs(10));
    assert_eq!(probe.bye_status, Some(200), "the probe call's BYE failed");

    pair.uac("uac-new", NEW_CALLS, 20, 0, Duration::from_secs(40))
        .run()
        .assert_success(u64::from(NEW_CALLS));
    let long = long.wait();
    eprintln!("held calls: {:?}", long.stats);
    long.assert_success(u64::from(CALLS));
    uas.wait_at_most(Duration::from_secs(20))
        .assert_success(u64::from(CALLS + 1 + NEW_CALLS));
    pair.nodes[standby].assert_alive();
    witness.assert_alive();
}
