//! The async shell on loopback: two heartbeat tasks elect, one is dropped, the other takes
//! over; and the sync channel carries a snapshot and a stream of changes.
#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sbc_ha::shell::{self, Command, HaHandle, SyncEvent, SyncPublisher};
use sbc_ha::{
    HaEvent, NodeId, PeerConfig, PeerType, Redundancy, RedundancyConfig, State, SyncTable,
};
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::mpsc;

async fn wait_for(h: &mut HaHandle, want: State, within: Duration) -> Vec<HaEvent> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    while h.status().state != want {
        match tokio::time::timeout_at(deadline, h.events.recv()).await {
            Ok(Some(e)) => seen.push(e),
            Ok(None) => panic!("task ended"),
            Err(_) => panic!(
                "{want} not reached in {within:?}; now {:?}, events {seen:?}",
                h.status().state
            ),
        }
    }
    while let Ok(e) = h.events.try_recv() {
        seen.push(e);
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
    let cfg = RedundancyConfig {
        advertisement_time_ms: 100,
        initial_time_ms: 300,
        becoming_active_time_ms: 20,
        shared_key: "loopback-test-key-0123456789".into(),
        peers: vec![
            PeerConfig {
                name: "a".into(),
                peer_type: PeerType::Primary,
                destinations: vec![addrs[0], addrs[1]],
            },
            PeerConfig {
                name: "b".into(),
                peer_type: PeerType::Secondary,
                destinations: vec![addrs[2], addrs[3]],
            },
        ],
        ..RedundancyConfig::default()
    };
    let names = ["a", "b"];
    let lower = if lo == 0 { 0 } else { 1 };
    let _ = hi;
    let mut it = socks.into_iter();
    let mut handles = Vec::new();
    for name in names {
        let m = Redundancy::new(&cfg, name, 1, Instant::now()).unwrap();
        let sockets = vec![it.next().unwrap(), it.next().unwrap()];
        handles.push(shell::spawn(&cfg, m, sockets));
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
    tokio::spawn(shell::serve_sync(
        listener,
        publisher.clone(),
        NodeId::from_name("a"),
        1,
    ));

    let replica = Arc::new(Mutex::new(SyncTable::new()));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let client = tokio::spawn(shell::run_sync_client(
        addr,
        Arc::clone(&replica),
        NodeId::from_name("b"),
        1,
        false,
        tx,
    ));
    let ev = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ev, SyncEvent::Synchronized { entries: 1500 });
    let ev = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
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
    client.abort();

    // Split-brain exchange: a yielded node with its own dialogs rejoins; both end with the union.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(shell::serve_sync(
        listener,
        publisher.clone(),
        NodeId::from_name("a"),
        2,
    ));
    let mut own = replica.lock().unwrap().clone();
    own.upsert(b"made-during-partition".to_vec(), b"x".to_vec());
    let yielded = Arc::new(Mutex::new(own));
    let (tx, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(shell::run_sync_client(
        addr,
        Arc::clone(&yielded),
        NodeId::from_name("b"),
        2,
        true,
        tx,
    ));
    let ev = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
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
        let entry = |n: usize, addr| PeerConfig {
            name: names[n].into(),
            peer_type: if n == 0 {
                PeerType::Primary
            } else {
                PeerType::Secondary
            },
            destinations: vec![addr],
        };
        let cfg = RedundancyConfig {
            advertisement_time_ms: 100,
            initial_time_ms: 300,
            becoming_active_time_ms: 20,
            shared_key: key.into(),
            witness: Some(witness),
            peers: vec![entry(i, own_addrs[i]), entry(1 - i, holes[1 - i])],
            ..RedundancyConfig::default()
        };
        let m = Redundancy::new(&cfg, names[i], 1, Instant::now()).unwrap();
        handles.push(shell::spawn(&cfg, m, vec![socket]));
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
