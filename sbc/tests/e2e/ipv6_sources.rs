//! Per-source protection on IPv6 (issue 26): a stranger holding a /64 is one source.
//!
//! In a network namespace of the test's own, the node's interfaces and agent on `fd00::1-3`,
//! and whole prefixes made local to the loopback (`ip route add local fd00:64::/64 dev lo`,
//! `net.ipv6.ip_nonlocal_bind = 1`) so a socket may send from any of their addresses:
//!
//! - **A flood from 2000 addresses of one /64**, each address sending one new request (an
//!   OPTIONS ping the node answers itself), is held by one bucket: at most the burst and a few
//!   seconds' rate are answered, then the /64 is denied: `show access-control` lists one
//!   source, `fd00:64::/64`, and one deny, the SNMP trap names `fd00:64::/64`, and an address
//!   of the /64 that never sent is refused too. A source in another /64 is still served;
//!   `clear-deny fd00:64::/64` lets the prefix in again.
//! - **`access-control` with IPv6 prefixes**: a `deny` /64 gets no answer, from any of its
//!   addresses; an `allow` /64 is never limited (100 new requests from it, all answered).
//! - **The TCP per-source cap** (`tcp-max-connections-per-source = 4`) counts a /64 once: the
//!   5th and 6th connections from other addresses of it are closed at once, while another
//!   /64 connects.
//!
//! And on the host's loopback: an IPv4 peer of an interface bound to the IPv6 wildcard `[::]`
//! (a dual-stack socket reports it as `::ffff:127.0.0.x`) is its IPv4 address: it is
//! answered over UDP and TCP, a flood from it is denied as `127.0.0.3` (not as a /64 of mapped
//! addresses, which would deny every IPv4 peer at once), and another IPv4 peer is still
//! served.

use std::io::{ErrorKind, Read};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use sbc_e2e::acli::{acli, acli_json};
use sbc_e2e::raw::{request, RawTcp, SipMsg};
use sbc_e2e::snmp::Trapd;
use sbc_e2e::{netns, SbcConfig, SbcNode, TestDir};
use serde_json::Value;

/// An OPTIONS ping to the node itself (no user part: the node answers it, 200).
fn options(from: SocketAddr, to: SocketAddr, transport: &str, n: u64) -> Vec<u8> {
    let text = String::from_utf8(request(
        "OPTIONS",
        from,
        to,
        transport,
        &format!("v6-flood-{n}"),
        &format!("z9hG4bK-v6-flood-{n}"),
        &[],
    ))
    .expect("ascii");
    text.replacen(
        &format!("OPTIONS sip:service@{to}"),
        &format!("OPTIONS sip:{to}"),
        1,
    )
    .into_bytes()
}

/// The `n`th address of the /64 `prefix` (its first four groups, e.g. `fd00:64:0:0`), spread
/// over the interface identifier as a stranger choosing addresses would.
fn address_in(prefix: &str, n: u32) -> IpAddr {
    let h = n.wrapping_mul(2_654_435_761); // Knuth's multiplicative hash: spread, no repeats
    let text = format!(
        "{prefix}:{:x}:{:x}:{:x}:{:x}",
        h >> 16,
        h & 0xffff,
        n >> 16,
        (n & 0xffff) | 1
    );
    text.parse().expect("an IPv6 address")
}

/// SIP responses waiting on `sock` (non-blocking: what already arrived).
fn answers_waiting(sock: &UdpSocket) -> usize {
    let mut buf = vec![0u8; 65_536];
    let mut n = 0;
    sock.set_nonblocking(true).expect("nonblocking");
    while let Ok((len, _)) = sock.recv_from(&mut buf) {
        if SipMsg::parse(&buf[..len])
            .and_then(|m| m.status())
            .is_some()
        {
            n += 1;
        }
    }
    n
}

/// One new request from each of `count` addresses of the /64 `prefix` to `to`, in batches
/// (a socket per address, kept until every answer came or `wait` passed); how many were
/// answered.
fn one_request_per_address(
    prefix: &str,
    first: u32,
    count: u32,
    to: SocketAddr,
    wait: Duration,
) -> usize {
    const BATCH: u32 = 100;
    let mut answered = 0;
    let mut next = first;
    while next < first + count {
        let end = (next + BATCH).min(first + count);
        let socks: Vec<UdpSocket> = (next..end)
            .map(|n| {
                let from = SocketAddr::new(address_in(prefix, n), 0);
                UdpSocket::bind(from).unwrap_or_else(|e| panic!("cannot bind {from}: {e}"))
            })
            .collect();
        for (sock, n) in socks.iter().zip(next..end) {
            let from = sock.local_addr().expect("bound");
            sock.send_to(&options(from, to, "UDP", u64::from(n)), to)
                .expect("send");
        }
        let deadline = Instant::now() + wait;
        let mut batch = 0;
        while batch < socks.len() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(25));
            batch += socks.iter().map(answers_waiting).sum::<usize>();
        }
        answered += batch;
        next = end;
    }
    answered
}

/// Whether one request from `from` to `to` is answered within 700 ms.
fn served(from: IpAddr, to: SocketAddr, n: u64) -> bool {
    let sock = UdpSocket::bind(SocketAddr::new(from, 0)).expect("bind");
    let local = sock.local_addr().expect("bound");
    sock.send_to(&options(local, to, "UDP", n), to)
        .expect("send");
    let deadline = Instant::now() + Duration::from_millis(700);
    while Instant::now() < deadline {
        if answers_waiting(&sock) > 0 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn access_control(node: &SbcNode) -> Value {
    acli_json(&node.mgmt_socket(), &["show access-control"])
        .assert_ok()
        .json()
}

fn denied_sources(ac: &Value) -> Vec<String> {
    ac["denied"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|d| d["source"].as_str().map(str::to_owned))
        .collect()
}

/// A TCP connection to `to` from `from` (any port; `from` may be any address of a local
/// prefix, `ip_nonlocal_bind` being on).
fn connect_from(from: IpAddr, to: SocketAddr) -> TcpStream {
    let domain = if from.is_ipv6() {
        socket2::Domain::IPV6
    } else {
        socket2::Domain::IPV4
    };
    let s = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))
        .expect("socket");
    s.bind(&SocketAddr::new(from, 0).into()).expect("bind");
    s.connect_timeout(&to.into(), Duration::from_secs(2))
        .expect("connect");
    s.into()
}

/// Whether the node closes `s` within `within` (EOF or reset).
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let start = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    let mut b = [0u8; 1024];
    while start.elapsed() < within {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}

#[test]
fn a_flood_from_many_addresses_of_one_ipv6_prefix_is_held_by_one_bucket() {
    let [access, core, agent]: [IpAddr; 3] =
        ["fd00::1", "fd00::2", "fd00::3"].map(|a| a.parse().expect("address"));
    netns::enter(&[access, core, agent]);
    for prefix in [
        "fd00:64::/64",
        "fd00:65::/64",
        "fd00:66::/64",
        "fd00:67::/64",
        "fd00:68::/64",
        "fd00:69::/64",
        "fd00:6a::/64",
    ] {
        netns::add_local_prefix(prefix);
    }
    netns::sysctl("net.ipv6.ip_nonlocal_bind", "1");

    let trap_dir = TestDir::new("ipv6_sources-trapd");
    let trapd = Trapd::start(&trap_dir);
    let mut config = SbcConfig::with_addresses(access, core, agent);
    config.sip_lines = vec!["tcp-max-connections-per-source = 4".into()];
    config.extra_toml = format!(
        "\n[[access-control]]\nsource-address = \"fd00:66::/64\"\naction = \"deny\"\n\
         \n[[access-control]]\nsource-address = \"fd00:67::/64\"\naction = \"allow\"\n\
         \n[system-config]\nhostname = \"edge\"\n\
         \n[[system-config.trap-receiver]]\nip-address = \"127.0.0.1\"\nport = {}\n",
        trapd.port()
    );
    let node = SbcNode::start_config(&config);
    let to = config.access;
    assert!(
        served("fd00:65::1".parse().expect("address"), to, 1),
        "a first request over IPv6 is answered"
    );

    // The flood: 2000 addresses of fd00:64::/64, one new request each.
    let start = Instant::now();
    let flood_wait = Duration::from_millis(150);
    let answered = one_request_per_address("fd00:64:0:0", 0, 2000, to, flood_wait);
    let took = start.elapsed();
    eprintln!(
        "2000 addresses of fd00:64::/64 sent one request each in {took:?}: {answered} answered"
    );
    // The burst (30) and the rate (15/s) for the seconds the flood lasted, at most.
    let bound = 30 + 15 * usize::try_from(took.as_secs() + 1).unwrap_or(usize::MAX);
    assert!(
        answered <= bound,
        "{answered} answers to 2000 addresses of one /64 (at most {bound})"
    );
    assert!(answered >= 30, "the burst is answered: {answered}");

    let ac = access_control(&node);
    eprintln!("show access-control: {ac}");
    assert_eq!(denied_sources(&ac), ["fd00:64::/64"], "{ac}");
    assert_eq!(ac["counters"]["denies"], 1, "{ac}");
    assert!(
        ac["counters"]["rate_limited"].as_u64().unwrap_or(0) >= 30,
        "{ac}"
    );
    assert!(
        ac["counters"]["denied"].as_u64().unwrap_or(0) > 1500,
        "{ac}"
    );
    let text = acli(&node.mgmt_socket(), &["show access-control"]);
    assert!(
        text.stdout.contains("1 sources denied now") && text.stdout.contains("fd00:64::/64"),
        "{}",
        text.describe()
    );
    // An address of the /64 that never sent is refused; another /64 is served.
    assert!(!served(address_in("fd00:64:0:0", 9_999_999), to, 2));
    assert!(served("fd00:65::2".parse().expect("address"), to, 3));
    // The trap names the prefix.
    let deadline = Instant::now() + Duration::from_secs(10);
    let named = |t: &Trapd| {
        t.traps_named("SBC-PAIR-MIB::sbcSourceDeniedTrap")
            .iter()
            .any(|t| t.line.contains("fd00:64::/64"))
    };
    while !named(&trapd) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        named(&trapd),
        "no sbcSourceDeniedTrap for fd00:64::/64: {}",
        trapd.output()
    );

    // The operator's IPv6 prefixes: a denied /64 gets nothing from any address of it, an
    // allowed /64 is never limited.
    for n in 0..3 {
        assert!(!served(address_in("fd00:66:0:0", n), to, 10 + u64::from(n)));
    }
    let allowed = one_request_per_address("fd00:67:0:0", 0, 100, to, Duration::from_secs(3));
    assert_eq!(allowed, 100, "an allowed /64 is not limited");
    let ac = access_control(&node);
    assert_eq!(denied_sources(&ac), ["fd00:64::/64"], "{ac}");

    // clear-deny with the prefix as listed lets it in again.
    acli(&node.mgmt_socket(), &["clear-deny fd00:64::/64"]).assert_ok();
    assert!(served(address_in("fd00:64:0:0", 42), to, 4));
    let again = acli(&node.mgmt_socket(), &["clear-deny fd00:64::7"]);
    assert_eq!(
        again.code,
        Some(1),
        "not denied any more: {}",
        again.describe()
    );

    // TCP: four connections per source; a /64 is one source.
    let mut held: Vec<TcpStream> = (0..6)
        .map(|n| connect_from(address_in("fd00:69:0:0", n), to))
        .collect();
    let closed: Vec<bool> = held
        .iter_mut()
        .map(|c| closed_within(c, Duration::from_millis(400)))
        .collect();
    assert_eq!(closed, [false, false, false, false, true, true]);
    let mut other = connect_from("fd00:6a::1".parse().expect("address"), to);
    assert!(!closed_within(&mut other, Duration::from_millis(400)));
    let stats = acli_json(&node.mgmt_socket(), &["show sip-stats"])
        .assert_ok()
        .json();
    assert_eq!(stats["tcp"]["refused_source_cap"], 2, "{}", stats["tcp"]);
}

/// An IPv4 peer of a dual-stack interface (`[::]`) is its IPv4 address: answered over UDP
/// and TCP, rate-limited and denied as itself.
#[test]
fn an_ipv4_peer_of_a_dual_stack_interface_is_its_ipv4_address() {
    let lo = |x: u8| IpAddr::from([127, 0, 0, x]);
    let config = SbcConfig::with_addresses(IpAddr::V6(Ipv6Addr::UNSPECIFIED), lo(2), lo(1));
    let node = SbcNode::start_config(&config);
    // The peers reach the wildcard on 127.0.0.1.
    let to = SocketAddr::new(lo(1), config.access.port());
    assert!(served(lo(4), to, 1), "answered over UDP");

    // Over TCP: the connection is registered under the IPv4 address, so the answer finds it.
    let mut tcp = RawTcp::connect(to);
    let local = tcp.local_addr();
    tcp.send(&options(local, to, "TCP", 2)).expect("send");
    let msgs = tcp.recv_messages(Duration::from_secs(2));
    assert!(
        msgs.iter().any(|m| m.status() == Some(200)),
        "answered over TCP: {msgs:?}"
    );

    // A flood from 127.0.0.3 is denied as 127.0.0.3, and 127.0.0.5 is still served.
    let sock = UdpSocket::bind(SocketAddr::new(lo(3), 0)).expect("bind");
    let from = sock.local_addr().expect("bound");
    for n in 0..200 {
        sock.send_to(&options(from, to, "UDP", 100 + n), to)
            .expect("send");
    }
    std::thread::sleep(Duration::from_millis(300));
    let answered = answers_waiting(&sock);
    assert!(answered <= 35, "{answered} answers to the flood");
    let ac = access_control(&node);
    assert_eq!(denied_sources(&ac), ["127.0.0.3"], "{ac}");
    assert!(served(lo(5), to, 3), "another IPv4 peer is its own source");
}
