//! The async shell on loopback: two heartbeat tasks elect, one is dropped, the other takes
//! over; and the sync channel carries a snapshot and a stream of changes.
#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sbc_ha::shell::sync::{EntryCheck, SyncContext, SyncCountersSnapshot};
use sbc_ha::shell::{self, Command, HaHandle, SyncEvent, SyncPublisher};
use sbc_ha::{HaEvent, PeerSettings, PeerType, Redundancy, RedundancySettings, State, SyncTable};
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::mpsc;

/// Waits until the heartbeat thread reports the transition to `want` (the status is updated
/// before the events of the same step are sent), then collects what else that step sent.
async fn wait_for(h: &mut HaHandle, want: State, within: Duration) -> Vec<HaEvent> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    let reached = |seen: &[HaEvent]| {
        seen.iter()
            .any(|e| matches!(e, HaEvent::Transition { to, .. } if *to == want))
    };
    while !reached(&seen) || h.status().state != want {
        match tokio::time::timeout_at(deadline, h.events.recv()).await {
            Ok(Some(e)) => seen.push(e),
            Ok(None) => panic!("task ended"),
            Err(_) => panic!(
                "{want} not reached in {within:?}; now {:?}, events {seen:?}",
                h.status().state
            ),
        }
    }
    // The rest of that step's events follow at once: collect until 50 ms of quiet.
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(50), h.events.recv()).await {
        seen.push(e);
        if seen.len() > 1000 {
            break;
        }
    }
    seen
}

#[tokio::test]
async fn two_shells_elect_then_survivor_takes_over() {
    // Two paths per node, on random loopback ports.
    let mut socks = Vec::new();
    for _ in 0..4 {
        socks.push(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    }
    let addrs: Vec<_> = socks.iter().map(|s| s.local_addr().unwrap()).collect();
    let (lo, hi) = if addrs[0] < addrs[2] { (0, 2) } else { (2, 0) };
    let cfg = RedundancySettings {
        advertisement_time: Duration::from_millis(100),
        initial_time: Duration::from_millis(300),
        becoming_active_time: Duration::from_millis(20),
        shared_key: "loopback-test-key-0123456789".into(),
        peers: vec![
            PeerSettings {
                name: "a".into(),
                peer_type: PeerType::Primary,
                destinations: vec![addrs[0], addrs[1]],
            },
            PeerSettings {
                name: "b".into(),
                peer_type: PeerType::Secondary,
                destinations: vec![addrs[2], addrs[3]],
            },
        ],
        ..RedundancySettings::default()
    };
    let names = ["a", "b"];
    let lower = if lo == 0 { 0 } else { 1 };
    let _ = hi;
    let mut it = socks.into_iter();
    let mut handles = Vec::new();
    for name in names {
        let m = Redundancy::new(&cfg, name, 1, Instant::now()).unwrap();
        let sockets = vec![it.next().unwrap(), it.next().unwrap()];
        handles.push(shell::spawn(&cfg, m, sockets).unwrap());
    }
    let mut b = handles.pop().unwrap();
    let mut a = handles.pop().unwrap();
    let (winner, loser) = if lower == 0 {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    let ev = wait_for(winner, State::Active, Duration::from_secs(3)).await;
    assert!(ev.contains(&HaEvent::TakeServiceAddress), "{ev:?}");
    wait_for(loser, State::BecomingStandby, Duration::from_secs(3)).await;
    assert!(loser.send(Command::SyncComplete));
    wait_for(loser, State::Standby, Duration::from_secs(3)).await;
    assert!(loser.status().peer_alive && loser.status().paths_up == vec![true, true]);

    // The active dies (its task and sockets go away): the standby takes over within
    // dead time (210 ms) + becoming-active-time (20 ms), plus scheduling slack.
    let t = Instant::now();
    if lower == 0 {
        drop(a);
        let ev = wait_for(&mut b, State::Active, Duration::from_secs(3)).await;
        assert!(ev.contains(&HaEvent::PeerDead), "{ev:?}");
        assert_eq!(b.status().epoch, 2);
    } else {
        drop(b);
        wait_for(&mut a, State::Active, Duration::from_secs(3)).await;
    }
    let took = t.elapsed();
    assert!(took < Duration::from_millis(800), "takeover took {took:?}");
}

/// A pair's `redundancy-config` with both nodes on 127.0.0.1 (heartbeat ports that nothing
/// uses in these tests) and `key`.
fn sync_config(key: &str) -> RedundancySettings {
    let peer = |name: &str, port: u16, t| PeerSettings {
        name: name.into(),
        peer_type: t,
        destinations: vec![std::net::SocketAddr::from(([127, 0, 0, 1], port))],
    };
    RedundancySettings {
        shared_key: key.into(),
        peers: vec![
            peer("a", 1, PeerType::Primary),
            peer("b", 2, PeerType::Secondary),
        ],
        ..RedundancySettings::default()
    }
}

const SYNC_KEY: &str = "loopback-sync-key-0123456789";

fn accept_all() -> EntryCheck {
    Arc::new(|_: &[u8], _: &[u8]| Ok(()))
}

fn context(key: &str, node: &str, check: EntryCheck) -> Arc<SyncContext> {
    Arc::new(SyncContext::new(&sync_config(key), node, check).unwrap())
}

async fn wait_counter(
    what: &str,
    ctx: &SyncContext,
    pred: impl Fn(&SyncCountersSnapshot) -> bool,
) -> SyncCountersSnapshot {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = ctx.counters();
        if pred(&c) {
            return c;
        }
        assert!(Instant::now() < deadline, "{what}: counters {c:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Starts a sync client toward `addr` with `ctx` on `table`; returns its task and its events.
fn spawn_client(
    addr: std::net::SocketAddr,
    table: &Arc<Mutex<SyncTable>>,
    ctx: &Arc<SyncContext>,
    epoch: u64,
    exchange: bool,
) -> (
    tokio::task::JoinHandle<Result<(), sbc_ha::sync::SyncError>>,
    mpsc::UnboundedReceiver<SyncEvent>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(shell::run_sync_client(
        addr,
        Arc::clone(table),
        ctx.clone(),
        epoch,
        exchange,
        tx,
    ));
    (task, rx)
}

async fn next_event(rx: &mut mpsc::UnboundedReceiver<SyncEvent>) -> SyncEvent {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn sync_channel_carries_snapshot_and_changes() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut table = SyncTable::new();
    for i in 0..1500u32 {
        table.upsert(format!("dialog-{i}").into_bytes(), vec![7; 100]);
    }
    let publisher = SyncPublisher::new(table, 1024);
    publisher.push_config(3, "[system-config]\n".into());
    let server_ctx = context(SYNC_KEY, "a", accept_all());
    tokio::spawn(shell::serve_sync(
        listener,
        publisher.clone(),
        server_ctx.clone(),
        1,
    ));

    let replica = Arc::new(Mutex::new(SyncTable::new()));
    let client_ctx = context(SYNC_KEY, "b", accept_all());
    let (client, mut rx) = spawn_client(addr, &replica, &client_ctx, 1, false);
    assert_eq!(next_event(&mut rx).await, SyncEvent::LinkUp);
    let ev = next_event(&mut rx).await;
    assert_eq!(ev, SyncEvent::Synchronized { entries: 1500 });
    let ev = next_event(&mut rx).await;
    assert_eq!(
        ev,
        SyncEvent::Config {
            version: 3,
            toml: "[system-config]\n".into()
        }
    );

    publisher.upsert(b"new-call".to_vec(), b"confirmed".to_vec());
    publisher.delete(b"dialog-0".to_vec());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        {
            let r = replica.lock().unwrap();
            if r.get(b"new-call").is_some() && r.get(b"dialog-0").is_none() {
                assert_eq!(r.len(), 1500);
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "changes did not reach the standby"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A second session from the peer (a reconnect) replaces the first.
    let again = Arc::new(Mutex::new(SyncTable::new()));
    let (client2, mut rx2) = spawn_client(addr, &again, &client_ctx, 1, false);
    assert_eq!(next_event(&mut rx2).await, SyncEvent::LinkUp);
    let ev = next_event(&mut rx2).await;
    assert_eq!(ev, SyncEvent::Synchronized { entries: 1500 });
    let c = wait_counter("replaced", &server_ctx, |c| c.replaced == 1).await;
    assert_eq!(c.sessions, 2);
    let first = tokio::time::timeout(Duration::from_secs(5), client)
        .await
        .expect("the replaced session ends")
        .unwrap();
    assert!(first.is_ok(), "{first:?}");
    // Closed by the active's side: reported as a lost link.
    assert_eq!(next_event(&mut rx).await, SyncEvent::LinkLost);
    client2.abort();

    // Split-brain exchange: a yielded node with its own dialogs rejoins; both end with the union.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(shell::serve_sync(
        listener,
        publisher.clone(),
        context(SYNC_KEY, "a", accept_all()),
        2,
    ));
    let mut own = replica.lock().unwrap().clone();
    own.upsert(b"made-during-partition".to_vec(), b"x".to_vec());
    let yielded = Arc::new(Mutex::new(own));
    let (_client, mut rx) = spawn_client(addr, &yielded, &client_ctx, 2, true);
    assert_eq!(next_event(&mut rx).await, SyncEvent::LinkUp);
    let ev = next_event(&mut rx).await;
    assert_eq!(ev, SyncEvent::Synchronized { entries: 1501 });
    assert_eq!(
        publisher.table().get(b"made-during-partition"),
        Some(&b"x"[..])
    );
    assert_eq!(
        yielded.lock().unwrap().snapshot(),
        publisher.table().snapshot()
    );
}

/// `sync_config` with both nodes on `ip` instead of 127.0.0.1.
fn sync_config_on(key: &str, ip: std::net::IpAddr) -> RedundancySettings {
    let mut c = sync_config(key);
    for p in &mut c.peers {
        for d in &mut p.destinations {
            d.set_ip(ip);
        }
    }
    c
}

/// The sync channel over IPv6, and an IPv4 peer reaching a server on the dual-stack `[::]`
/// (its source arrives as `::ffff:127.0.0.1`): both establish a session; an IPv6 stranger on
/// the dual-stack server is refused by address.
#[tokio::test]
async fn sync_over_ipv6_and_from_ipv4_mapped_sources() {
    use tokio::io::AsyncWriteExt as _;
    let v6: std::net::IpAddr = "::1".parse().unwrap();
    let config = sync_config_on(SYNC_KEY, v6);
    let listener = TcpListener::bind("[::1]:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut table = SyncTable::new();
    table.upsert(b"dialog".to_vec(), b"confirmed".to_vec());
    let publisher = SyncPublisher::new(table, 64);
    let server_ctx = Arc::new(SyncContext::new(&config, "a", accept_all()).unwrap());
    tokio::spawn(shell::serve_sync(
        listener,
        publisher.clone(),
        server_ctx.clone(),
        1,
    ));
    let client_ctx = Arc::new(SyncContext::new(&config, "b", accept_all()).unwrap());
    let replica = Arc::new(Mutex::new(SyncTable::new()));
    let (client, mut rx) = spawn_client(addr, &replica, &client_ctx, 1, false);
    assert_eq!(next_event(&mut rx).await, SyncEvent::LinkUp);
    assert_eq!(
        next_event(&mut rx).await,
        SyncEvent::Synchronized { entries: 1 }
    );
    assert_eq!(server_ctx.counters().sessions, 1);
    client.abort();

    // IPv4 peers, the server on [::] (dual stack).
    let listener = TcpListener::bind("[::]:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server_ctx = context(SYNC_KEY, "a", accept_all());
    tokio::spawn(shell::serve_sync(
        listener,
        publisher.clone(),
        server_ctx.clone(),
        1,
    ));
    let client_ctx = context(SYNC_KEY, "b", accept_all());
    let replica = Arc::new(Mutex::new(SyncTable::new()));
    let v4_addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let (client, mut rx) = spawn_client(v4_addr, &replica, &client_ctx, 1, false);
    assert_eq!(
        next_event(&mut rx).await,
        SyncEvent::LinkUp,
        "an IPv4 peer seen as ::ffff:127.0.0.1 is the peer"
    );
    assert_eq!(
        next_event(&mut rx).await,
        SyncEvent::Synchronized { entries: 1 }
    );
    client.abort();
    let mut stranger = tokio::net::TcpStream::connect(("::1", port)).await.unwrap();
    let _ = stranger.write_all(&[0, 32]).await;
    assert!(read_until_closed(&mut stranger).await.is_empty());
    let c = wait_counter("refused", &server_ctx, |c| c.refused_address == 1).await;
    assert_eq!((c.sessions, c.refused_address), (1, 1));
}

/// Reads from `stream` until it closes or 5 s pass; returns what it got.
async fn read_until_closed(stream: &mut tokio::net::TcpStream) -> Vec<u8> {
    use tokio::io::AsyncReadExt as _;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return got,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!("connection still open after 5 s; got {got:?}"),
        }
    }
}

#[tokio::test]
async fn strangers_get_nothing_from_the_sync_server() {
    use tokio::io::AsyncWriteExt as _;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut table = SyncTable::new();
    table.upsert(b"call-id-SECRET-DIALOG".to_vec(), b"tag-SECRET".to_vec());
    let publisher = SyncPublisher::new(table, 64);
    publisher.push_config(1, "shared-key = \"SECRET-KEY\"".into());
    let ctx = context(SYNC_KEY, "a", accept_all());
    tokio::spawn(shell::serve_sync(
        listener,
        publisher.clone(),
        ctx.clone(),
        1,
    ));

    // From an address that is not the peer's: closed at once, nothing sent.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind("127.0.0.3:0".parse().unwrap()).unwrap();
    let mut s = sock.connect(addr).await.unwrap();
    let _ = s.write_all(b"\x00\x00\x00\x10hello").await;
    assert!(read_until_closed(&mut s).await.is_empty());
    wait_counter("refused_address", &ctx, |c| c.refused_address == 1).await;

    // From the peer's address, without the key: version 1's plaintext Hello, a 16 MiB length
    // announcement, garbage, and a handshake made with another key are all refused unanswered.
    let attempts: Vec<Vec<u8>> = vec![
        vec![0, 0, 0, 12, 1, 0, 0xfd, 1, 2, 3, 4, 5, 6, 7, 8, 1],
        (16u32 << 20).to_be_bytes().to_vec(),
        vec![0, 58]
            .into_iter()
            .chain(std::iter::repeat_n(0x41, 58))
            .collect(),
        {
            let psk = sbc_ha::crypto::PairKeys::derive(b"not-the-pair-key-at-all").sync_psk;
            let (_, m1) = sbc_ha::channel::Initiator::start(&psk, [3; 32]).unwrap();
            let mut v = u16::try_from(m1.len()).unwrap().to_be_bytes().to_vec();
            v.extend(m1);
            v
        },
    ];
    for (i, bytes) in attempts.iter().enumerate() {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let _ = s.write_all(bytes).await;
        let got = read_until_closed(&mut s).await;
        assert!(got.is_empty(), "attempt {i} got {} bytes back", got.len());
    }
    let c = wait_counter("refused_handshake", &ctx, |c| c.refused_handshake == 4).await;
    assert_eq!(c.sessions, 0);

    // One that connects and says nothing is closed at the handshake deadline.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let t = Instant::now();
    assert!(read_until_closed(&mut s).await.is_empty());
    assert!(t.elapsed() >= shell::sync::HANDSHAKE_TIMEOUT - Duration::from_millis(100));
    wait_counter("refused_timeout", &ctx, |c| c.refused_timeout == 1).await;

    // More silent connections than the handshake cap: the extra ones are closed at once.
    let mut silent = Vec::new();
    for _ in 0..shell::sync::MAX_PENDING {
        silent.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut extra = tokio::net::TcpStream::connect(addr).await.unwrap();
    let t = Instant::now();
    assert!(read_until_closed(&mut extra).await.is_empty());
    assert!(t.elapsed() < shell::sync::HANDSHAKE_TIMEOUT);
    wait_counter("refused_busy", &ctx, |c| c.refused_busy >= 1).await;
    drop(silent);

    // The key holder that names a node other than the peer is refused after the handshake.
    let impostor = context(SYNC_KEY, "a", accept_all()); // claims to be "a", the server itself
    let (tx, _rx) = mpsc::unbounded_channel();
    let r = shell::run_sync_client(
        addr,
        Arc::new(Mutex::new(SyncTable::new())),
        impostor,
        1,
        true,
        tx,
    )
    .await;
    assert!(r.is_err(), "{r:?}");
    wait_counter("refused_node", &ctx, |c| c.refused_node == 1).await;
    assert_eq!(
        publisher.table().len(),
        1,
        "nothing of the impostor was merged"
    );
}

#[tokio::test]
async fn a_standby_refuses_a_server_without_the_key_and_invalid_entries() {
    // Whoever answers on the peer's sync address without the key gets nothing installed.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut table = SyncTable::new();
    table.upsert(b"forged".to_vec(), b"dialog".to_vec());
    let rogue = SyncPublisher::new(table, 64);
    rogue.push_config(9, "notify-active = \"rm -rf /\"".into());
    tokio::spawn(shell::serve_sync(
        listener,
        rogue,
        context("a-rogue-key-0123456789", "a", accept_all()),
        1,
    ));
    let replica = Arc::new(Mutex::new(SyncTable::new()));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let ctx = context(SYNC_KEY, "b", accept_all());
    let r = shell::run_sync_client(addr, Arc::clone(&replica), ctx.clone(), 1, false, tx).await;
    assert!(r.is_err());
    assert!(replica.lock().unwrap().is_empty());
    assert!(rx.try_recv().is_err(), "no config push reached the owner");
    assert_eq!(ctx.counters().refused_handshake, 1);

    // With the key, entries the owner's check refuses are dropped and counted.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut table = SyncTable::new();
    table.upsert(b"good".to_vec(), b"ok".to_vec());
    table.upsert(b"bad".to_vec(), b"interface 99".to_vec());
    let publisher = SyncPublisher::new(table, 64);
    tokio::spawn(shell::serve_sync(
        listener,
        publisher.clone(),
        context(SYNC_KEY, "a", accept_all()),
        1,
    ));
    let check: EntryCheck = Arc::new(|_: &[u8], v: &[u8]| {
        if v == b"ok" {
            Ok(())
        } else {
            Err("interface index out of range".into())
        }
    });
    let ctx = context(SYNC_KEY, "b", check);
    let (_client, mut rx) = spawn_client(addr, &replica, &ctx, 1, false);
    assert_eq!(next_event(&mut rx).await, SyncEvent::LinkUp);
    let ev = next_event(&mut rx).await;
    assert_eq!(ev, SyncEvent::Synchronized { entries: 1 });
    publisher.upsert(b"bad2".to_vec(), b"nope".to_vec());
    wait_counter("invalid_entries", &ctx, |c| c.invalid_entries == 2).await;
    assert!(replica.lock().unwrap().get(b"bad2").is_none());
}

/// A UDP port on loopback that nothing listens on (bound, then closed).
async fn black_hole() -> std::net::SocketAddr {
    let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    s.local_addr().unwrap()
}

#[tokio::test]
async fn witness_lease_allows_one_active_when_heartbeats_are_black_holed() {
    let key = "loopback-witness-key-0123456789";
    let witness_socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let witness = witness_socket.local_addr().unwrap();
    let server = tokio::spawn(shell::serve_witness_with_key(witness_socket, key));

    let own = [
        UdpSocket::bind("127.0.0.1:0").await.unwrap(),
        UdpSocket::bind("127.0.0.1:0").await.unwrap(),
    ];
    let own_addrs: Vec<_> = own.iter().map(|s| s.local_addr().unwrap()).collect();
    let holes = [black_hole().await, black_hole().await];
    let names = ["a", "b"];
    let mut handles = Vec::new();
    for (i, socket) in own.into_iter().enumerate() {
        // Each node's view: its own real address, the peer's heartbeat address a black hole.
        let entry = |n: usize, addr| PeerSettings {
            name: names[n].into(),
            peer_type: if n == 0 {
                PeerType::Primary
            } else {
                PeerType::Secondary
            },
            destinations: vec![addr],
        };
        let cfg = RedundancySettings {
            advertisement_time: Duration::from_millis(100),
            initial_time: Duration::from_millis(300),
            becoming_active_time: Duration::from_millis(20),
            shared_key: key.into(),
            witness: Some(witness),
            peers: vec![entry(i, own_addrs[i]), entry(1 - i, holes[1 - i])],
            ..RedundancySettings::default()
        };
        let m = Redundancy::new(&cfg, names[i], 1, Instant::now()).unwrap();
        handles.push(shell::spawn(&cfg, m, vec![socket]).unwrap());
    }

    // Exactly one becomes active (the witness grants one lease), and the other never does.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let active = loop {
        let states: Vec<State> = handles.iter().map(|h| h.status().state).collect();
        assert!(
            states.iter().filter(|s| **s == State::Active).count() <= 1,
            "{states:?}"
        );
        if let Some(i) = states.iter().position(|s| *s == State::Active) {
            break i;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "nobody active: {states:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let other = 1 - active;
    let until = tokio::time::Instant::now() + Duration::from_millis(1500);
    while tokio::time::Instant::now() < until {
        assert_eq!(handles[active].status().state, State::Active);
        assert_ne!(handles[other].status().state, State::Active);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(handles[active].status().lease, Some(true));
    assert_eq!(handles[other].status().lease, Some(false));
    assert!(
        !handles[other].status().peer_alive,
        "heartbeats are black-holed"
    );

    // The active dies: its lease runs out (dead time, 210 ms, from its last renewal at most one
    // advertisement-time before) and the other gets it.
    let t = Instant::now();
    let mut survivor = handles.remove(other);
    drop(handles);
    wait_for(&mut survivor, State::Active, Duration::from_secs(3)).await;
    assert_eq!(survivor.status().lease, Some(true));
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(80) && took < Duration::from_millis(1500),
        "takeover after {took:?}"
    );
    server.abort();
}

#[tokio::test]
async fn serve_witness_without_a_key_refuses_to_run() {
    let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let e = shell::serve_witness(s).await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
}
