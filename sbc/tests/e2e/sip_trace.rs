//! The SIP trace as an operator uses it: `sip-monitoring` with a filter on one user keeps that
//! user's calls (both legs, in order) and a request the SBC refused with its reason, and no
//! other call; `show sip-trace <id> --pcap FILE` writes a pcap that Debian's `tshark -r`
//! decodes as SIP without options; HEP capture (`capture-agent`) sends every message of both
//! legs to a capture server, each leg's packets with the same correlation id (decoded here from
//! the HEPv3 datagrams, as tshark 4.0 has no HEP dissector) and the password never printed;
//! sngrep started as a HEP receiver (`-L`) shows both legs; a capture server that is down
//! costs only counted drops.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sbc_e2e::acli::run_acli;
use sbc_e2e::raw::{RawUdp, SipMsg};
use sbc_e2e::{ports, run_pair, SbcConfig, SbcNode, Sipp};
use sbc_proto::trace::hep;

const CALLS: u32 = 2;

fn sipp_pair(node: &SbcNode, config: &SbcConfig, service: &str, calls: u32) {
    let dir = node.dir().clone();
    let uas = Sipp::new(&dir, &format!("uas-{service}"))
        .builtin("uas")
        .local(config.agent)
        .calls(calls)
        .timeout(Duration::from_secs(40));
    let uac = Sipp::new(&dir, &format!("uac-{service}"))
        .builtin("uac")
        .remote(config.access)
        .args(["-s", service])
        .calls(calls)
        .rate(10)
        .timeout(Duration::from_secs(30));
    let (uac, uas) = run_pair(uas, config.agent, false, uac);
    uac.assert_success(u64::from(calls));
    uas.assert_success(u64::from(calls));
}

/// The captures `show sip-trace` lists, as JSON.
fn captures(node: &SbcNode) -> Vec<serde_json::Value> {
    let out = run_acli(&node.mgmt_socket(), true, &["show sip-trace"], None);
    out.assert_ok();
    out.json()["captures"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Waits until `show sip-trace` lists `n` captures (the trace thread is asynchronous).
fn wait_captures(node: &SbcNode, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = captures(node);
        if c.len() >= n || Instant::now() > deadline {
            return c;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_user_filter_keeps_that_user_s_calls_and_refusals_as_a_ladder_and_a_pcap() {
    let mut config = SbcConfig::new();
    config.extra_toml =
        "\n[sip-monitoring]\nstate = \"enabled\"\nmonitoring-filters = [\"alice\"]\n\
                         \n[[filter-config]]\nname = \"alice\"\nuser = \"alice\"\n"
            .to_owned();
    let mut node = SbcNode::start_config(&config);
    sipp_pair(&node, &config, "alice", CALLS);
    sipp_pair(&node, &config, "carol", CALLS);
    // A BYE for no dialog, to alice: refused with 481, with its reason.
    let stranger = RawUdp::bind("127.0.0.1".parse().expect("ip"));
    let from = stranger.local_addr();
    let bye = format!(
        "BYE sip:alice@{a} SIP/2.0\r\nVia: SIP/2.0/UDP {from};branch=z9hG4bKtrace481\r\n\
         Max-Forwards: 70\r\nFrom: <sip:zed@{from}>;tag=z1\r\nTo: <sip:alice@{a}>;tag=gone\r\n\
         Call-ID: trace-481@127.0.0.1\r\nCSeq: 2 BYE\r\n\
         Authorization: Digest username=\"alice\", realm=\"example.test\", nonce=\"n1\", \
         uri=\"sip:alice@example.test\", response=\"5ec7e7d1gest0f41ice\"\r\nContent-Length: 0\r\n\r\n",
        a = config.access
    );
    stranger.send_to(bye.as_bytes(), config.access);
    let answer = stranger
        .recv(Duration::from_secs(5))
        .and_then(|(b, _)| SipMsg::parse(&b))
        .expect("an answer to the BYE");
    assert_eq!(answer.status(), Some(481));

    let list = wait_captures(&node, CALLS as usize + 1);
    node.assert_alive();
    assert_eq!(
        list.len(),
        CALLS as usize + 1,
        "alice's calls and the refusal only: {list:#?}"
    );
    assert!(list
        .iter()
        .all(|c| !c["first"].as_str().unwrap_or("").contains("carol")));

    // A call: both legs, in order, as a ladder.
    let call = list
        .iter()
        .find(|c| c["key"].as_str().unwrap_or("").starts_with("call "))
        .expect("a call capture");
    let id = call["id"].as_u64().expect("id");
    let out = run_acli(
        &node.mgmt_socket(),
        false,
        &[&format!("show sip-trace {id}")],
        None,
    );
    out.assert_ok();
    let ladder: Vec<&str> = out.stdout.lines().collect();
    let order = [
        ("caller ──▶ sbc", "INVITE sip:alice@"),
        ("caller ◀── sbc", "SIP/2.0 100"),
        ("sbc ──▶ callee", "INVITE sip:alice@"),
        ("sbc ◀── callee", "SIP/2.0 200"),
        ("caller ◀── sbc", "SIP/2.0 200"),
        ("caller ──▶ sbc", "ACK "),
        ("sbc ──▶ callee", "ACK "),
        ("caller ──▶ sbc", "BYE "),
        ("sbc ──▶ callee", "BYE "),
    ];
    let mut at = 0;
    for (arrow, start) in order {
        let found = ladder[at..]
            .iter()
            .position(|l| l.contains(arrow) && l.contains(start));
        let Some(i) = found else {
            panic!("{arrow} {start} not after line {at} in:\n{}", out.stdout);
        };
        at += i + 1;
    }

    // The refusal, with its reason.
    let refusal = list
        .iter()
        .find(|c| c["key"].as_str() == Some("Call-ID trace-481@127.0.0.1"))
        .expect("the refused BYE's capture");
    let rid = refusal["id"].as_u64().expect("id");
    let out = run_acli(
        &node.mgmt_socket(),
        false,
        &[&format!("show sip-trace {rid}")],
        None,
    );
    out.assert_ok();
    assert!(
        out.stdout.contains("refused 481: no such dialog"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("SIP/2.0 481"), "{}", out.stdout);
    // Credentials are masked in every view of the trace.
    let full = run_acli(
        &node.mgmt_socket(),
        false,
        &[&format!("show sip-trace {rid} full")],
        None,
    );
    full.assert_ok();
    assert!(
        full.stdout.contains("Authorization: Digest"),
        "{}",
        full.stdout
    );
    assert!(
        !full.stdout.contains("5ec7e7d1gest0f41ice"),
        "{}",
        full.stdout
    );

    // The pcap, written by the client, decoded by tshark. SIP's heuristic is tried before the
    // port table: the test's ports are random, and some are another protocol's (LWAPP's
    // 12220-12223 made a CI run decode the core leg as LWAPP).
    let pcap = node.dir().path().join("call.pcap");
    let line = format!("show sip-trace {id} --pcap {}", pcap.display());
    run_acli(&node.mgmt_socket(), false, &[&line], None).assert_ok();
    let full = run_acli(
        &node.mgmt_socket(),
        true,
        &[&format!("show sip-trace {id} json")],
        None,
    );
    let kept = full.json()["messages"].as_array().map_or(0, Vec::len);
    let tshark = Command::new("tshark")
        .arg("-r")
        .arg(&pcap)
        .args([
            "-o",
            "udp.try_heuristic_first:TRUE",
            "-T",
            "fields",
            "-e",
            "sip.CSeq",
            "-e",
            "ip.src",
            "-e",
            "ip.dst",
        ])
        .stderr(Stdio::piped())
        .output()
        .expect("tshark (Debian package tshark) runs");
    let text = String::from_utf8_lossy(&tshark.stdout);
    let decoded: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("INVITE") || l.contains("ACK") || l.contains("BYE"))
        .collect();
    assert!(
        tshark.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&tshark.stderr)
    );
    assert_eq!(
        text.lines().count(),
        kept,
        "one packet per message:\n{text}"
    );
    assert_eq!(
        decoded.len(),
        kept,
        "every packet decoded as SIP with its CSeq:\n{text}"
    );
    // Both legs, with their real addresses: the access and the core interface.
    assert!(
        text.contains(&config.access.ip().to_string())
            && text.contains(&config.core.ip().to_string()),
        "{text}"
    );
}

/// Reads HEP datagrams on `sock` until `quiet` passes without one.
fn hep_datagrams(sock: &UdpSocket, quiet: Duration) -> Vec<Vec<u8>> {
    sock.set_read_timeout(Some(quiet)).expect("timeout");
    let mut out = Vec::new();
    let mut buf = vec![0u8; 70_000];
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        match sock.recv_from(&mut buf) {
            Ok((n, _)) => out.push(buf[..n].to_vec()),
            Err(_) => break,
        }
    }
    out
}

#[test]
fn hep_carries_both_legs_with_one_correlation_id_and_never_prints_its_password() {
    let server = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let server_addr = server.local_addr().expect("addr");
    let mut config = SbcConfig::new();
    config.extra_toml = format!(
        "\n[capture-agent]\nstate = \"enabled\"\naddress = \"{server_addr}\"\ncapture-id = 4242\n\
         password = \"hep-identifier-7\"\n"
    );
    let mut node = SbcNode::start_config(&config);
    sipp_pair(&node, &config, "bob", CALLS);
    let packets = hep_datagrams(&server, Duration::from_secs(2));
    node.assert_alive();

    // Every packet decodes; SIP of both legs, grouped by correlation id.
    let mut by_correlation: BTreeMap<Vec<u8>, BTreeSet<String>> = BTreeMap::new();
    let mut legs: BTreeMap<Vec<u8>, BTreeSet<SocketAddr>> = BTreeMap::new();
    for p in &packets {
        let h = hep::decode(p).expect("a HEPv3 packet");
        assert_eq!(h.capture_id, 4242);
        assert_eq!(h.auth_key, Some(&b"hep-identifier-7"[..]));
        assert_eq!(h.payload_type, hep::PayloadType::Sip);
        let msg = SipMsg::parse(h.payload).expect("SIP payload");
        let corr = h.correlation_id.expect("a correlation id").to_vec();
        by_correlation
            .entry(corr.clone())
            .or_default()
            .insert(msg.header("call-id").unwrap_or_default().to_owned());
        // The SBC's address on each leg.
        let ours = if h.src == config.access || h.src == config.core {
            h.src
        } else {
            h.dst
        };
        legs.entry(corr).or_default().insert(ours);
    }
    assert_eq!(
        by_correlation.len(),
        CALLS as usize,
        "one correlation per call: {by_correlation:#?}"
    );
    for (corr, call_ids) in &by_correlation {
        assert_eq!(
            call_ids.len(),
            2,
            "both legs' Call-IDs under one correlation: {call_ids:?}"
        );
        assert!(
            call_ids.contains(std::str::from_utf8(corr).expect("utf8")),
            "the caller's Call-ID is the correlation"
        );
        assert_eq!(legs[corr], BTreeSet::from([config.access, config.core]));
    }
    // Per call: INVITE, 100, 200, ACK, BYE, 200 on the caller leg; INVITE, 200, ACK, BYE, 200
    // on the callee's (SIPp's UAS sends no 100 or 180 here).
    assert!(
        packets.len() >= CALLS as usize * 10,
        "{} packets",
        packets.len()
    );

    // The password is never printed.
    let shown = run_acli(&node.mgmt_socket(), false, &["show running-config"], None);
    shown.assert_ok();
    assert!(
        !shown.stdout.contains("hep-identifier-7"),
        "{}",
        shown.stdout
    );
    let status = run_acli(&node.mgmt_socket(), true, &["show sip-trace"], None);
    assert!(status.json()["counters"]["hep_sent"].as_u64() >= Some(packets.len() as u64));
    let logs = std::fs::read_to_string(node.stderr_path()).unwrap_or_default();
    assert!(!logs.contains("hep-identifier-7"));
}

#[test]
fn a_capture_server_that_is_down_costs_only_counted_drops() {
    // TCP to a port nobody listens on: every connection attempt is refused.
    let down = SocketAddr::new("127.0.0.1".parse().expect("ip"), ports::free_port());
    let mut config = SbcConfig::new();
    config.extra_toml = format!(
        "\n[capture-agent]\nstate = \"enabled\"\naddress = \"{down}\"\ntransport = \"tcp\"\n"
    );
    let mut node = SbcNode::start_config(&config);
    sipp_pair(&node, &config, "dave", CALLS);
    node.assert_alive();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = run_acli(&node.mgmt_socket(), true, &["show sip-trace"], None);
        let c = &status.json()["counters"];
        // Dropped at the sink until the trace thread saw the server down, then not traced at
        // all (the engines only count): either way counted, and nothing sent.
        let counted =
            c["hep_dropped"].as_u64().unwrap_or(0) + c["not_traced"].as_u64().unwrap_or(0);
        if counted >= u64::from(CALLS) * 10 {
            assert_eq!(c["hep_sent"].as_u64(), Some(0));
            break;
        }
        assert!(Instant::now() < deadline, "drops not counted: {c}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn sngrep_as_a_hep_receiver_shows_both_legs() {
    let dir = sbc_e2e::TestDir::new("sngrep");
    let hep_port = ports::free_port();
    // sngrep reads an empty pcap file rather than a device, so that what it sees can only have
    // come over HEP (on a device it would also see the SIP on loopback). Without a terminal
    // (-N) it prints how many dialogs it holds; -c counts only those an INVITE starts. It
    // pairs legs only by an X-Call-ID header, which topology hiding must not add: one call
    // through the SBC is two dialogs, one per leg.
    let empty = dir.path().join("empty.pcap");
    let mut header = 0xa1b2_c3d4_u32.to_le_bytes().to_vec();
    header.extend_from_slice(&2u16.to_le_bytes());
    header.extend_from_slice(&4u16.to_le_bytes());
    for word in [0u32, 0, 65_535, 101] {
        header.extend_from_slice(&word.to_le_bytes());
    }
    std::fs::write(&empty, header).expect("write the empty pcap");
    let printed = dir.path().join("sngrep.out");
    let sngrep = Command::new("sngrep")
        .args(["-N", "-c", "-I"])
        .arg(&empty)
        .arg("-L")
        .arg(format!("udp:127.0.0.1:{hep_port}"))
        .stdout(std::fs::File::create(&printed).expect("sngrep's output file"))
        .stderr(Stdio::null())
        .spawn()
        .expect("sngrep (Debian package sngrep) starts");
    // Killed by its PID whatever happens below, a panic included.
    let _sngrep = KillOnDrop(sngrep);
    let mut config = SbcConfig::new();
    config.extra_toml =
        format!("\n[capture-agent]\nstate = \"enabled\"\naddress = \"127.0.0.1:{hep_port}\"\n");
    let mut node = SbcNode::start_config(&config);
    sipp_pair(&node, &config, "erin", 1);
    node.assert_alive();
    let count = |text: &str| {
        text.rsplit("Dialog count: ")
            .next()
            .and_then(|n| n.trim().parse::<u32>().ok())
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = None;
    while Instant::now() < deadline {
        seen = count(&std::fs::read_to_string(&printed).unwrap_or_default());
        if seen == Some(2) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(seen, Some(2), "sngrep's dialogs: both legs of the call");
}

/// A child process sent SIGKILL (to its own PID, `Child::kill`) and reaped when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A pair sends HEP from both nodes: calls set up on one node and hung up on the other after a
/// switchover show in the capture server as one call each, under one correlation id.
#[test]
fn a_call_across_a_switchover_keeps_its_correlation_in_hep_from_both_nodes() {
    use sbc_e2e::pair::{Pair, PairConfig};
    const HELD: u32 = 3;
    let server = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let server_addr = server.local_addr().expect("addr");
    let mut config = PairConfig::new();
    config.extra_toml =
        format!("\n[capture-agent]\nstate = \"enabled\"\naddress = \"{server_addr}\"\n");
    let pair = Pair::start(config);
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    let uas = pair.spawn_uas("uas", HELD, Duration::from_secs(60));
    let uac = pair
        .uac("uac", HELD, 10, 6_000, Duration::from_secs(40))
        .spawn();
    // The calls are established and replicated; then the active hands over.
    let _ = pair.wait_replicated(standby, u64::from(HELD), Duration::from_secs(10));
    let reply = pair
        .exec(active, "notify berpd force")
        .expect("the active answers");
    assert_eq!(reply["ok"], serde_json::Value::Bool(true), "{reply}");
    let uac = uac.wait();
    let uas = uas.wait_at_most(Duration::from_secs(20));
    assert_eq!(
        (uac.stats.successful, uac.stats.failed),
        (u64::from(HELD), 0),
        "{}",
        uac.describe()
    );
    assert_eq!(uas.stats.successful, u64::from(HELD), "{}", uas.describe());

    // HEP datagrams by the socket they came from (one per node) and by correlation id.
    server
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    let mut buf = vec![0u8; 70_000];
    let mut methods: BTreeMap<Vec<u8>, BTreeMap<String, BTreeSet<SocketAddr>>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while let (Ok((n, from)), true) = (server.recv_from(&mut buf), Instant::now() < deadline) {
        let h = hep::decode(&buf[..n]).expect("a HEPv3 packet");
        let msg = SipMsg::parse(h.payload).expect("SIP payload");
        let Some(corr) = h.correlation_id else {
            continue;
        };
        let what = msg.method().map_or_else(
            || {
                format!(
                    "{} {}",
                    msg.status().unwrap_or(0),
                    msg.cseq_method().unwrap_or("")
                )
            },
            str::to_owned,
        );
        methods
            .entry(corr.to_vec())
            .or_default()
            .entry(what)
            .or_default()
            .insert(from);
    }
    assert_eq!(
        methods.len(),
        HELD as usize,
        "one correlation id per call: {methods:#?}"
    );
    for (corr, seen) in &methods {
        let invite_from = &seen["INVITE"];
        let bye_from = &seen["BYE"];
        assert_eq!(invite_from.len(), 1, "{corr:?}: {seen:#?}");
        assert_eq!(bye_from.len(), 1, "{corr:?}: {seen:#?}");
        assert_ne!(
            invite_from, bye_from,
            "set up on one node, hung up on the other, one correlation: {seen:#?}"
        );
    }
}

/// The `m=audio` port of an SDP body.
fn audio_port(body: &[u8]) -> Option<u16> {
    String::from_utf8_lossy(body)
        .lines()
        .find_map(|l| l.strip_prefix("m=audio "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|p| p.trim().parse().ok())
}

/// The media relay's RTCP goes to the capture server as HEP RTCP (type 5), with the call's
/// correlation id, so Homer shows the call's quality reports beside its SIP.
#[test]
fn rtcp_the_relay_forwards_goes_to_hep_with_the_call_s_correlation() {
    let server = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let server_addr = server.local_addr().expect("addr");
    let mut config = SbcConfig::new();
    let mut pools = String::new();
    for (realm, ip) in [("access", "127.0.0.1"), ("core", "127.0.0.2")] {
        let first = ports::free_block(9);
        pools.push_str(&format!(
            "\n[[steering-pool]]\nip-address = \"{ip}\"\nstart-port = {first}\nend-port = {}\nrealm-id = \"{realm}\"\n",
            first + 8
        ));
    }
    config.extra_toml = format!(
        "\n[media-manager]\nstate = \"enabled\"\n{pools}\n[capture-agent]\nstate = \"enabled\"\naddress = \"{server_addr}\"\n"
    );
    let callee = RawUdp::bind_addr(config.agent);
    let mut node = SbcNode::start_config(&config);
    let lo: std::net::IpAddr = "127.0.0.1".parse().expect("ip");
    let caller = RawUdp::bind(lo);
    let caller_rtcp = RawUdp::bind(lo);
    let me = caller.local_addr();
    // The caller's RTP port is its RTCP socket's port - 1 (RTCP on RTP + 1, RFC 3550).
    let rtp_port = caller_rtcp.local_addr().port() - 1;
    let sdp = format!(
        "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio {rtp_port} RTP/AVP 8\r\na=rtpmap:8 PCMA/8000\r\n"
    );
    let call_id = "rtcp-hep-1@127.0.0.1";
    let invite = format!(
        "INVITE sip:bob@{a} SIP/2.0\r\nVia: SIP/2.0/UDP {me};branch=z9hG4bKrtcp1\r\nMax-Forwards: 70\r\n\
         From: <sip:alice@{me}>;tag=r1\r\nTo: <sip:bob@{a}>\r\nCall-ID: {call_id}\r\nCSeq: 1 INVITE\r\n\
         Contact: <sip:alice@{me}>\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{sdp}",
        sdp.len(),
        a = config.access
    );
    caller.send_to(invite.as_bytes(), config.access);
    let mut skipped = Vec::new();
    let (offer, sbc_core) = callee
        .recv_sip_until(
            Duration::from_secs(5),
            |m| m.method() == Some("INVITE"),
            &mut skipped,
        )
        .expect("the INVITE reaches the callee");
    let callee_rtcp = RawUdp::bind(lo);
    let answer_sdp = format!(
        "v=0\r\no=- 2 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio {} RTP/AVP 8\r\na=rtpmap:8 PCMA/8000\r\n",
        callee_rtcp.local_addr().port() - 1
    );
    let mut ok = "SIP/2.0 200 OK\r\n".to_owned();
    for name in ["via", "from", "to", "call-id", "cseq"] {
        let value = offer.header(name).expect("header");
        let value = if name == "to" {
            format!("{value};tag=c1")
        } else {
            value.to_owned()
        };
        ok.push_str(&format!("{name}: {value}\r\n"));
    }
    ok.push_str(&format!(
        "Contact: <sip:bob@{}>\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{answer_sdp}",
        config.agent,
        answer_sdp.len()
    ));
    callee.send_to(ok.as_bytes(), sbc_core);
    let (answer, _) = caller
        .recv_sip_until(
            Duration::from_secs(5),
            |m| m.status() == Some(200),
            &mut skipped,
        )
        .expect("the 200 reaches the caller");
    let sbc_rtp = audio_port(&answer.body).expect("the SBC's media port in the answer");
    // An RTCP receiver report (RFC 3550 6.4.2, no report blocks) to the SBC's RTCP port.
    let rr = [0x80, 201, 0, 1, 0x12, 0x34, 0x56, 0x78];
    caller_rtcp.send_to(&rr, SocketAddr::new(lo, sbc_rtp + 1));
    let relayed = callee_rtcp.recv(Duration::from_secs(5));
    assert_eq!(
        relayed.map(|(b, _)| b),
        Some(rr.to_vec()),
        "the relay forwards the RTCP"
    );

    server
        .set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    let mut buf = vec![0u8; 70_000];
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut rtcp = None;
    while Instant::now() < deadline {
        let Ok((n, _)) = server.recv_from(&mut buf) else {
            break;
        };
        let h = hep::decode(&buf[..n]).expect("HEPv3");
        if h.payload_type == hep::PayloadType::Rtcp {
            rtcp = Some((
                h.payload.to_vec(),
                h.correlation_id.map(<[u8]>::to_vec),
                h.src,
                h.dst,
            ));
            break;
        }
    }
    node.assert_alive();
    let (payload, correlation, src, dst) = rtcp.expect("an RTCP HEP packet");
    assert_eq!(payload, rr);
    assert_eq!(correlation.as_deref(), Some(call_id.as_bytes()));
    assert_eq!(src, caller_rtcp.local_addr());
    assert_eq!(dst, SocketAddr::new(lo, sbc_rtp + 1));
}
