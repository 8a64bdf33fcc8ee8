//! The SIP edge over TCP holds against clients that try to exhaust it.
//!
//! - **A ping flood that never reads**: a client sends up to 32 MiB of CRLFCRLF keep-alive
//!   pings and never reads the answers. The node keeps at most one answer in flight; once the
//!   client's receive buffer is full that answer cannot be written, further pings go
//!   unanswered, and the node closes the connection (`tcp.closed_ping_flood` in `show
//!   sip-stats`, or `closed_write_timeout` at `tcp-write-timeout-ms`, 2 s here); its resident
//!   memory does not grow by more than 16 MiB (an unbounded queue grew it by 73 MiB for 8 MiB
//!   of pings).
//! - **Deadlines**: with `tcp-idle-timeout-ms = 1500` and `tcp-message-timeout-ms = 2500`, 20
//!   silent connections are all closed in a few seconds (`closed_idle`); a client that trickles
//!   a header block a byte every 200 ms (busy, but never completing a message) is closed at the
//!   message deadline (`closed_message_timeout`); a client that sends CRLF keep-alives every
//!   500 ms stays open past both.
//! - **Connection caps**: with `tcp-max-connections-per-source = 5` and `tcp-max-connections =
//!   12`, 8 connections from 127.0.0.3 leave 5 open and 3 closed at once, the same from
//!   127.0.0.5; SIPp calls over TCP from 127.0.0.4 then all succeed; beyond 12 on the interface
//!   a connection is closed at once whatever its source. Counted in `show sip-stats`.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use sbc_e2e::acli::acli_json;
use sbc_e2e::pair::lo;
use sbc_e2e::{ports, run_pair, SbcConfig, SbcNode, Sipp};
use serde_json::Value;

fn tcp_stats(node: &SbcNode) -> Value {
    acli_json(&node.mgmt_socket(), &["show sip-stats"])
        .assert_ok()
        .json()["tcp"]
        .clone()
}

fn stat(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

fn resident(node: &SbcNode) -> u64 {
    acli_json(&node.mgmt_socket(), &["show memory"])
        .assert_ok()
        .json()["process_resident_bytes"]
        .as_u64()
        .unwrap_or(0)
}

/// A TCP connection to `to` from `from` (any port).
fn connect_from(from: IpAddr, to: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .expect("socket");
    s.bind(&SocketAddr::new(from, 0).into()).expect("bind");
    s.connect_timeout(&to.into(), Duration::from_secs(2))
        .expect("connect");
    s.into()
}

/// Waits up to `within` for the node to close `s` (EOF or reset on read); returns when.
fn closed_within(s: &mut TcpStream, within: Duration) -> Option<Duration> {
    let start = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    let mut b = [0u8; 1024];
    while start.elapsed() < within {
        match s.read(&mut b) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Some(start.elapsed()),
        }
    }
    None
}

#[test]
fn a_ping_flood_that_never_reads_is_closed_and_memory_stays_bounded() {
    let mut config = SbcConfig::new();
    config.sip_lines = vec!["tcp-write-timeout-ms = 2000".into()];
    let node = SbcNode::start_config(&config);
    let before = resident(&node);
    let mut s = TcpStream::connect(config.access).expect("connect");
    s.set_write_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let chunk = b"\r\n\r\n".repeat(16 * 1024); // 64 KiB of pings
    let start = Instant::now();
    let mut sent = 0usize;
    let mut stopped = None;
    while sent < 32 << 20 && start.elapsed() < Duration::from_secs(30) {
        match s.write(&chunk) {
            Ok(n) => sent += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                // The node stopped reading us: it may be closing; see below.
            }
            Err(e) => {
                stopped = Some(e);
                break;
            }
        }
        let st = tcp_stats(&node);
        if stat(&st, "closed_write_timeout") + stat(&st, "closed_ping_flood") > 0 {
            break;
        }
    }
    let st = tcp_stats(&node);
    eprintln!(
        "sent {} MiB of pings in {:?} ({stopped:?}); tcp stats {st}",
        sent >> 20,
        start.elapsed()
    );
    assert_eq!(
        stat(&st, "closed_write_timeout") + stat(&st, "closed_ping_flood"),
        1,
        "{st}"
    );
    assert!(
        closed_within(&mut s, Duration::from_secs(10)).is_some(),
        "the connection is still open"
    );
    // The node gave its memory back (allocator pages may linger a moment).
    std::thread::sleep(Duration::from_millis(1500));
    let after = resident(&node);
    eprintln!(
        "resident: {} MiB before, {} MiB after",
        before >> 20,
        after >> 20
    );
    assert!(after < before + (16 << 20), "{before} -> {after}");
    assert_eq!(stat(&tcp_stats(&node), "open"), 0);
}

#[test]
fn idle_and_trickling_connections_are_closed_at_their_deadlines() {
    let mut config = SbcConfig::new();
    config.sip_lines = vec![
        "tcp-idle-timeout-ms = 1500".into(),
        "tcp-message-timeout-ms = 2500".into(),
    ];
    let node = SbcNode::start_config(&config);
    let mut idle: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(config.access).expect("connect"))
        .collect();
    let mut keepalive = TcpStream::connect(config.access).expect("connect");
    let mut trickle = TcpStream::connect(config.access).expect("connect");
    trickle
        .write_all(b"OPTIONS sip:x@127.0.0.1 SIP/2.0\r\n")
        .expect("write");
    let start = Instant::now();
    let header = b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut trickle_closed = None;
    let mut i = 0;
    while start.elapsed() < Duration::from_secs(8) {
        // A keep-alive every 500 ms, a header byte every 200 ms.
        if i % 5 == 0 {
            keepalive.write_all(b"\r\n\r\n").expect("keep-alive");
        }
        if trickle_closed.is_none() {
            let b = header[i % header.len()];
            if trickle.write_all(&[b]).is_err() {
                trickle_closed = Some(start.elapsed());
            } else {
                trickle
                    .set_read_timeout(Some(Duration::from_millis(1)))
                    .expect("timeout");
                let mut x = [0u8; 16];
                if matches!(trickle.read(&mut x), Ok(0)) {
                    trickle_closed = Some(start.elapsed());
                }
            }
        }
        i += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let st = tcp_stats(&node);
    eprintln!("trickle closed after {trickle_closed:?}; tcp stats {st}");
    let t = trickle_closed.expect("the trickling client was never closed");
    assert!(
        t >= Duration::from_millis(2000) && t < Duration::from_millis(6000),
        "closed after {t:?}"
    );
    for (k, s) in idle.iter_mut().enumerate() {
        assert!(
            closed_within(s, Duration::from_secs(1)).is_some(),
            "idle connection {k} still open after 8 s"
        );
    }
    assert!(stat(&st, "closed_idle") >= 20, "{st}");
    assert_eq!(stat(&st, "closed_message_timeout"), 1, "{st}");
    // The keep-alive client was answered and is still open.
    keepalive
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    keepalive.write_all(b"\r\n\r\n").expect("still open");
    let mut pong = [0u8; 64];
    assert!(
        matches!(keepalive.read(&mut pong), Ok(n) if n > 0),
        "no pong"
    );
    assert_eq!(stat(&tcp_stats(&node), "open"), 1);
}

#[test]
fn connection_caps_per_source_and_per_interface_hold_while_others_connect() {
    let mut config = SbcConfig::new();
    config.sip_lines = vec![
        "tcp-max-connections-per-source = 5".into(),
        "tcp-max-connections = 12".into(),
    ];
    let node = SbcNode::start_config(&config);
    let mut held = Vec::new();
    for source in [lo(3), lo(5)] {
        let mut conns: Vec<TcpStream> = (0..8)
            .map(|_| connect_from(source, config.access))
            .collect();
        let closed: Vec<bool> = conns
            .iter_mut()
            .map(|c| closed_within(c, Duration::from_millis(400)).is_some())
            .collect();
        assert_eq!(
            closed.iter().filter(|c| **c).count(),
            3,
            "from {source}: {closed:?}"
        );
        assert!(
            closed[..5].iter().all(|c| !c),
            "the first five stay: {closed:?}"
        );
        held.extend(conns);
    }
    let st = tcp_stats(&node);
    assert_eq!(stat(&st, "refused_source_cap"), 6, "{st}");

    // Another source is served: 10 calls over TCP from 127.0.0.4.
    let dir = node.dir().clone();
    let uas = Sipp::new(&dir, "uas")
        .builtin("uas")
        .local(config.agent)
        .calls(10)
        .timeout(Duration::from_secs(40));
    let uac = Sipp::new(&dir, "uac")
        .builtin("uac")
        .local(SocketAddr::new(lo(4), ports::free_port()))
        .remote(config.access)
        .tcp()
        .calls(10)
        .rate(10)
        .timeout(Duration::from_secs(30));
    let (uac, uas) = run_pair(uas, config.agent, false, uac);
    uac.assert_success(10);
    uas.assert_success(10);

    // The interface's cap: 10 held + SIPp's (closed or not), then 12 at most in all.
    let mut extra: Vec<TcpStream> = (0..4).map(|_| connect_from(lo(6), config.access)).collect();
    let closed = extra
        .iter_mut()
        .filter_map(|c| closed_within(c, Duration::from_millis(400)))
        .count();
    let st = tcp_stats(&node);
    eprintln!("tcp stats: {st}");
    assert!(stat(&st, "open") <= 12, "{st}");
    assert!(closed >= 2, "{closed} of 4 closed: {st}");
    assert!(stat(&st, "refused_interface_cap") >= 2, "{st}");
    drop(held);
}
