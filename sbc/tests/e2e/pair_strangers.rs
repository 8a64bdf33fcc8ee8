//! Strangers on the pair's channels get nothing and change nothing.
//!
//! A settled pair (active, synchronized standby, a witness) carries 10 established SIPp calls.
//! A third process then plays the stranger on loopback, from `127.0.0.13` (no node's address)
//! and from the standby's own address (what a stranger on the HA link, or a process on the
//! standby's host, could use):
//!
//! - on the active's state-sync port: version 1's plaintext `Hello { exchange: true }` followed
//!   by a `Snapshot` that would install a forged dialog and a `ConfigPush` that would set a
//!   hook, and raw garbage. Every connection must be closed with **nothing sent back** (so
//!   nothing names a dialog, the configuration or the key), the refusals counted in `show
//!   redundancy` (`sync.refused_address`, `sync.refused_handshake`) and logged once per source,
//!   not once per attempt; the standby keeps the same replica and the active the same dialogs;
//! - on the witness port: version 1 probes and garbage get no answer;
//! - 64 connections from the standby's address each announce a 16 MiB frame and hold on: the
//!   active's heap does not grow by more than 8 MiB (it would by 1 GiB if the announcements were
//!   reserved), the connections are closed within the handshake deadline, and 30 new calls
//!   succeed meanwhile;
//! - afterwards every established call's BYE succeeds and the roles never changed.
//!
//! A second test records, as an eavesdropper on the heartbeat link would, the active's
//! authentic heartbeats to the standby; kills both nodes with SIGKILL; restarts the former
//! standby and replays the recordings to it from the dead active's address. They are refused
//! (they do not echo the restarted node's new incarnation: `unverified`), none is accepted, and
//! the node takes the role within its initial time instead of believing an active peer is
//! there.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use sbc_e2e::pair::{kill9, lo, other, Link, Pair, PairConfig, Witness, NAMES, SHARED_KEY};
use sbc_e2e::{ports, tail_of_file, SbcNode, TestDir};
use serde_json::Value;

/// bincode 2 varint of `v` (what version 1's frames were made of).
fn varint(out: &mut Vec<u8>, v: u64) {
    if v <= 250 {
        out.push(v as u8);
    } else {
        out.push(0xfd);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn fnv(name: &str) -> u64 {
    sbc_ha::wire::NodeId::from_name(name).0
}

/// One version-1 sync frame: 4-byte length, then bincode of `(1u16, frame)`.
fn v1_frame(variant: u64, body: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    varint(&mut payload, 1);
    varint(&mut payload, variant);
    payload.extend_from_slice(body);
    let mut out = u32::try_from(payload.len())
        .expect("small")
        .to_be_bytes()
        .to_vec();
    out.extend(payload);
    out
}

fn bincode_str(out: &mut Vec<u8>, s: &str) {
    varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// What a stranger who read version 1's protocol would send: Hello (as the standby, exchange
/// set), a Snapshot with one forged dialog entry, and a ConfigPush with a hook.
fn v1_attack(claims: &str) -> Vec<u8> {
    let mut hello = Vec::new();
    varint(&mut hello, fnv(claims));
    varint(&mut hello, 1_000_000); // epoch
    varint(&mut hello, 0); // config_version
    hello.push(1); // exchange
    let mut snapshot = Vec::new();
    varint(&mut snapshot, 1); // one entry
    varint(&mut snapshot, 8);
    snapshot.extend_from_slice(&7u64.to_be_bytes()); // key
    varint(&mut snapshot, 1_000_000); // rev
    snapshot.push(1); // Some(value)
    bincode_str(&mut snapshot, "forged-dialog-call-id@stranger");
    snapshot.push(1); // last
    let mut push = Vec::new();
    varint(&mut push, 99);
    bincode_str(
        &mut push,
        "[redundancy-config]\nnotify-active = \"touch /tmp/owned-by-stranger\"\n",
    );
    let mut out = v1_frame(0, &hello);
    out.extend(v1_frame(1, &snapshot));
    out.extend(v1_frame(4, &push));
    out
}

/// Connects to `to` from `from` (any port), sends `bytes`, and reads until the server closes
/// the connection (at most 6 s); returns what came back.
fn stranger_tcp(from: IpAddr, to: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let s = socket2::Socket::new(
        socket2::Domain::IPV4,
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
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return got,
        }
    }
    panic!("the sync server kept a stranger's connection open for 6 s");
}

fn sync_counters(pair: &Pair, i: usize) -> Value {
    pair.redundancy_json(i)
        .map(|v| v["sync"].clone())
        .unwrap_or(Value::Null)
}

fn count(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

fn heap_allocated(pair: &Pair, i: usize) -> u64 {
    pair.exec(i, "show memory")
        .and_then(|r| r["data"]["readings"]["heap_allocated"].as_u64())
        .expect("show memory has heap_allocated")
}

fn dialog_keys(pair: &Pair, i: usize) -> Vec<String> {
    let mut keys: Vec<String> = pair
        .exec(i, "show dialogs")
        .and_then(|r| r["data"]["dialogs"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(Value::to_string)
        .collect();
    keys.sort();
    keys
}

#[test]
fn strangers_on_the_sync_and_witness_ports_get_nothing_and_change_nothing() {
    let mut config = PairConfig::new();
    let witness_dir = TestDir::new("pair_strangers-witness");
    config.witness = Some(SocketAddr::new(lo(15), ports::free_port()));
    let mut witness = Witness::start(&witness_dir, config.witness.expect("set"));
    let pair = Pair::start(config);
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    witness.assert_alive();
    eprintln!(
        "roles: {} active, {} standby",
        NAMES[active], NAMES[standby]
    );

    let uas = pair.spawn_uas("uas", 10 + 30, Duration::from_secs(120));
    let held = pair
        .uac("uac-held", 10, 10, 40_000, Duration::from_secs(90))
        .spawn();
    pair.wait_replicated(standby, 10, Duration::from_secs(20));
    let dialogs_before = dialog_keys(&pair, active);
    assert_eq!(dialogs_before.len(), 10, "10 established calls");
    let replica_before = pair
        .redundancy(standby)
        .expect("standby")
        .replicated_dialogs;
    let before = sync_counters(&pair, active);

    let sync_port = SocketAddr::new(
        pair.config.heartbeat[active].ip(),
        pair.config.sip_sync_port,
    );
    let standby_ip = pair.config.heartbeat[standby].ip();
    let stranger = lo(13);
    let call_ids: Vec<String> = pair
        .exec(active, "show dialogs")
        .and_then(|r| r["data"]["dialogs"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|d| d["caller"]["call_id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(call_ids.len(), 10);
    let secrets: Vec<String> = call_ids
        .iter()
        .cloned()
        .chain([
            SHARED_KEY.to_owned(),
            "shared-key".into(),
            "sip-config".into(),
        ])
        .collect();
    let mut received = Vec::new();
    for round in 0..10 {
        for from in [stranger, standby_ip] {
            received.extend(stranger_tcp(from, sync_port, &v1_attack(NAMES[standby])));
            let junk: Vec<u8> = (0..200u32).map(|i| (i * 31 + round) as u8).collect();
            received.extend(stranger_tcp(from, sync_port, &junk));
        }
    }
    assert!(
        received.is_empty(),
        "the sync server sent a stranger {} bytes",
        received.len()
    );
    for s in &secrets {
        assert!(!String::from_utf8_lossy(&received).contains(s.as_str()));
    }

    // The witness answers no stranger either (version 1 probes, garbage).
    let udp = UdpSocket::bind(SocketAddr::new(stranger, 0)).expect("bind");
    udp.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut probe = b"SBWP\x01\x00\x10".to_vec();
    probe.extend_from_slice(&[7; 16 + 32]);
    for d in [
        probe,
        b"SBWP\x02garbage-garbage-garbage-garbage-garbage!".to_vec(),
        vec![0; 300],
    ] {
        udp.send_to(&d, pair.config.witness.expect("set"))
            .expect("send");
    }
    let mut buf = [0u8; 1024];
    assert!(
        udp.recv_from(&mut buf).is_err(),
        "the witness answered a stranger"
    );
    witness.assert_alive();

    // Counted, and logged once per source rather than once per attempt.
    let after = pair
        .wait_redundancy(active, Duration::from_secs(10), "refusals counted", |_| {
            true
        })
        .state;
    assert_eq!(after, "active");
    let deadline = Instant::now() + Duration::from_secs(10);
    let c = loop {
        let c = sync_counters(&pair, active);
        if count(&c, "refused_address") >= count(&before, "refused_address") + 20
            && count(&c, "refused_handshake") >= count(&before, "refused_handshake") + 20
        {
            break c;
        }
        assert!(Instant::now() < deadline, "refusals not counted: {c}");
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("active's sync counters: {c}");
    assert_eq!(
        count(&c, "sessions"),
        count(&before, "sessions"),
        "no stranger got a session"
    );
    let log = std::fs::read_to_string(pair.nodes[active].stderr_path()).unwrap_or_default();
    let lines_from = |ip: &str| {
        log.lines()
            .filter(|l| l.contains("state sync: connection refused") && l.contains(ip))
            .count()
    };
    let (from_stranger, from_standby) = (
        lines_from("127.0.0.13"),
        lines_from(&standby_ip.to_string()),
    );
    assert!(
        (1..=3).contains(&from_stranger) && (1..=3).contains(&from_standby),
        "20 refusals per source in a few seconds logged {from_stranger} and {from_standby} times"
    );

    // Nothing was installed or changed: the same dialogs, the same replica, no hook ran.
    assert_eq!(dialog_keys(&pair, active), dialogs_before);
    assert_eq!(
        pair.redundancy(standby)
            .expect("standby")
            .replicated_dialogs,
        replica_before
    );
    assert!(!std::path::Path::new("/tmp/owned-by-stranger").exists());
    let running = pair.exec(active, "show running-config").expect("running");
    assert!(!running.to_string().contains(SHARED_KEY), "the key printed");

    // 64 connections announcing 16 MiB frames, held open, from the standby's address.
    let heap_before = heap_allocated(&pair, active);
    let mut held_open = Vec::new();
    for _ in 0..64 {
        if let Ok(mut s) = TcpStream::connect_timeout(&sync_port, Duration::from_secs(1)) {
            let _ = s.write_all(&(16u32 << 20).to_be_bytes());
            held_open.push(s);
        }
    }
    let calls = pair
        .uac("uac-during", 30, 30, 0, Duration::from_secs(30))
        .spawn();
    // The alarm subsystem samples the heap every second.
    std::thread::sleep(Duration::from_millis(2000));
    let heap_during = heap_allocated(&pair, active);
    eprintln!(
        "heap allocated: {} MiB before, {} MiB with 64 connections announcing 16 MiB each",
        heap_before >> 20,
        heap_during >> 20
    );
    assert!(
        heap_during < heap_before + (8 << 20),
        "the heap grew from {heap_before} to {heap_during}"
    );
    calls
        .wait_at_most(Duration::from_secs(30))
        .assert_success(30);
    // Every one of them is closed by the handshake deadline (3 s), or at once beyond the cap.
    let deadline = Instant::now() + Duration::from_secs(8);
    for mut s in held_open {
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .expect("timeout");
        let mut b = [0u8; 16];
        loop {
            match s.read(&mut b) {
                Ok(0) => break,
                Ok(_) => panic!("the sync server answered a stranger"),
                Err(_) if Instant::now() < deadline => {}
                Err(e) => panic!("a stranger's connection is still open: {e}"),
            }
        }
    }

    // The established calls end normally through the same active.
    held.wait_at_most(Duration::from_secs(70))
        .assert_success(10);
    uas.wait_at_most(Duration::from_secs(30)).assert_success(40);
    let r = pair.redundancy(active).expect("active");
    assert!(r.is_active(), "{}", pair.describe());
    assert!(pair.redundancy(standby).expect("standby").is_standby());
    let _ = other(active);
}

fn counters_of(pair: &Pair, i: usize) -> BTreeMap<String, u64> {
    pair.counters(i).unwrap_or_default()
}

#[test]
fn a_heartbeat_recorded_before_a_restart_is_refused_after_it() {
    // Node i sends its heartbeats to the other through a recording relay.
    let mut config = PairConfig::new();
    let relay_to_b = SocketAddr::new(lo(16), ports::free_port());
    let relay_to_a = SocketAddr::new(lo(17), ports::free_port());
    config.route_to_other = [relay_to_b, relay_to_a];
    let sync = config.sip_sync_port;
    let mut link = Link::new();
    link.udp_recording(relay_to_b, config.heartbeat[1]);
    link.udp(relay_to_a, config.heartbeat[0]);
    link.tcp(
        SocketAddr::new(lo(16), sync),
        SocketAddr::new(config.heartbeat[1].ip(), sync),
        lo(17),
    );
    link.tcp(
        SocketAddr::new(lo(17), sync),
        SocketAddr::new(config.heartbeat[0].ip(), sync),
        lo(16),
    );
    let mut pair = Pair::start(config);
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    assert_eq!(
        (active, standby),
        (0, 1),
        "sbc-a (lower address) is elected"
    );
    pair.wait_redundancy(1, Duration::from_secs(10), "synchronized", |r| {
        r.synchronized
    });
    // Record a's heartbeats to b for 3 s (about 6 of them): authentic, and echoing b's
    // incarnation of this life.
    std::thread::sleep(Duration::from_secs(3));
    let recorded = link.recorded();
    assert!(
        recorded.len() >= 4,
        "recorded {} heartbeats",
        recorded.len()
    );
    drop(link);

    kill9(&mut pair.nodes[0]);
    kill9(&mut pair.nodes[1]);
    let dir = pair.nodes[1].dir().clone();
    pair.nodes[1] = SbcNode::start_existing(&dir);
    // Replay the recordings to b's heartbeat address from a's, every 250 ms, for 4 s (longer
    // than b's initial time): a faster "active peer" than the real one ever was.
    let replayer = UdpSocket::bind(pair.config.heartbeat[0]).expect("bind a's address");
    let started = Instant::now();
    let mut sent = 0u64;
    for round in 0..16usize {
        let d = &recorded[round % recorded.len()];
        replayer
            .send_to(d, pair.config.heartbeat[1])
            .expect("replay");
        sent += 1;
        std::thread::sleep(Duration::from_millis(250));
    }
    let r = pair.wait_redundancy(1, Duration::from_secs(10), "active", |r| r.is_active());
    eprintln!(
        "restarted sbc-b: {} after {:?} with {sent} replayed heartbeats",
        r.state,
        started.elapsed()
    );
    let c = counters_of(&pair, 1);
    eprintln!("sbc-b counters: {c:?}");
    assert_eq!(
        c.get("accepted").copied().unwrap_or(0),
        0,
        "a replay was accepted"
    );
    assert!(
        c.get("unverified").copied().unwrap_or(0) >= sent * 9 / 10,
        "replays not counted unverified: {c:?}"
    );
    assert!(!r.peer_alive, "the replays made a dead peer look alive");
    assert!(
        r.last_transition.contains("becoming-active"),
        "{}",
        r.last_transition
    );
    let log = tail_of_file(pair.nodes[1].stderr_path(), 400);
    assert!(
        log.contains("heartbeat refused") && log.contains("not proven fresh"),
        "refusals not logged:\n{log}"
    );
}
