//! Media anchoring (issue 14): the SBC rewrites every SDP so that each side sees only the SBC's
//! media address of its own realm, and relays the RTP between the legs.
//!
//! Addresses: the caller (SIPp UAC) on 127.0.0.3, the access interface and its steering pool on
//! 127.0.0.1, the core interface and its pool on 127.0.0.2, the callee (SIPp UAS, `-rtp_echo`)
//! on 127.0.0.4. The scenarios check the bodies each side receives (`uac_rtp*.xml`,
//! `uas_rtp*.xml`: the SBC's address of that side present, the far side's absent); the tests
//! read `show media` and `show sip-stats` for what crossed.
//!
//! - `rtp_crosses_both_ways_through_the_sbc_s_own_ports`: 3 calls play g711a.pcap (236 RTP
//!   packets each) to the SBC, the callee echoes it: every packet counted both ways, none lost,
//!   nothing dropped, and every port back in its pool after the calls;
//! - `hold_resume_and_a_new_port_by_update_keep_the_anchor`: re-INVITE to hold (a=sendonly /
//!   a=recvonly) and back, then UPDATE to another port: the SBC's ports stay, the caller's media
//!   moves to the new port;
//! - `a_silent_call_is_ended_with_bye_on_both_legs`: `rtp-inactivity = 2` ends a call without
//!   RTP, a BYE to each side;
//! - `no_media_ports_left_is_503_not_a_crash`: pools of two pairs: the third concurrent call
//!   gets 503, snmptrapd receives `sbcMediaPortsLowTrap` for the pool, and a call after them
//!   succeeds;
//! - `a_stranger_cannot_take_over_a_call_s_media`: after the latch window, packets from another
//!   address to both legs' ports are dropped and counted, the media still goes where it went,
//!   and the call's RTP is complete.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use sbc_e2e::acli::Mgmt;
use sbc_e2e::sipp::wait_listening;
use sbc_e2e::{ports, SbcConfig, SbcNode, Sipp, SippProcess, TestDir};
use serde_json::Value;

const CALLER_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
const CALLEE_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 4);
/// RTP packets in /usr/share/sip-tester/g711a.pcap.
const PCAP_PACKETS: u64 = 236;

/// A node anchoring media on pools of `pairs` RTP/RTCP pairs per realm, with these
/// `media-manager` lines.
fn config(pairs: u16, manager: &str) -> SbcConfig {
    let mut c = SbcConfig::with_addresses(
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
        IpAddr::V4(CALLEE_IP),
    );
    let mut pools = String::new();
    for (realm, ip) in [("access", "127.0.0.1"), ("core", "127.0.0.2")] {
        // One more port than needed, so an odd first port still holds `pairs` even pairs.
        let first = ports::free_block(pairs * 2 + 1);
        pools.push_str(&format!(
            "\n[[steering-pool]]\nip-address = \"{ip}\"\nstart-port = {first}\nend-port = {}\nrealm-id = \"{realm}\"\n",
            first + pairs * 2
        ));
    }
    c.extra_toml = format!("\n[media-manager]\n{manager}\n{pools}");
    c
}

fn caller_addr() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(CALLER_IP), ports::free_port())
}

/// The callee: SIPp playing `scenario` on the session-agent's address for `calls` calls
/// (echoing RTP with `echo`), started in the background; returns once it listens.
fn callee(
    dir: &TestDir,
    name: &str,
    config: &SbcConfig,
    scenario: &str,
    calls: u32,
    echo: bool,
    timeout_s: u64,
) -> SippProcess {
    let mut uas = Sipp::new(dir, name).scenario(scenario).local(config.agent);
    if echo {
        uas = uas.arg("-rtp_echo");
    }
    let uas = uas
        .calls(calls)
        .timeout(Duration::from_secs(timeout_s))
        .spawn();
    wait_listening(config.agent, false, Duration::from_secs(5));
    uas
}

/// The caller: SIPp playing `scenario` from the caller's address to the access interface for
/// `calls` calls (not started: the test sets its rate and timeout).
fn caller(dir: &TestDir, name: &str, config: &SbcConfig, scenario: &str, calls: u32) -> Sipp {
    Sipp::new(dir, name)
        .scenario(scenario)
        .local(caller_addr())
        .remote(config.access)
        .calls(calls)
}

/// Polls `show media` until `done` holds for it, or panics with the last report after
/// `within`.
#[track_caller]
fn media_until(
    mgmt: &mut Mgmt,
    within: Duration,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let report = mgmt.data("show media");
        if done(&report) {
            return report;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not seen within {within:?}; last show media: {report:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn calls(report: &Value) -> Vec<Value> {
    report["media"]["calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn counter(call: &Value, from: &str, name: &str) -> u64 {
    call[from][name].as_u64().unwrap_or(0)
}

#[test]
fn rtp_crosses_both_ways_through_the_sbc_s_own_ports() {
    let config = config(10, "");
    let mut node = SbcNode::start_config(&config);
    let dir = node.dir().clone();
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let uas = callee(&dir, "uas", &config, "uas_rtp.xml", 3, true, 60);
    let uac = caller(&dir, "uac", &config, "uac_rtp.xml", 3)
        .rate(2)
        .timeout(Duration::from_secs(50))
        .spawn();
    // While the calls are up: each one's whole pcap crossed to the callee and its echo back.
    let report = media_until(
        &mut mgmt,
        Duration::from_secs(30),
        "3 calls with all RTP both ways",
        |r| {
            let c = calls(r);
            c.len() == 3
                && c.iter().all(|call| {
                    counter(call, "from_caller", "packets") == PCAP_PACKETS
                        && counter(call, "from_callee", "packets") == PCAP_PACKETS
                })
        },
    );
    let per_call = report["media"]["memory_sessions"].as_u64().unwrap_or(0) / 3;
    assert!(per_call > 0, "{report:#}");
    println!("MEASURE media_anchoring: media table memory {per_call} bytes per anchored call");
    for call in calls(&report) {
        assert_eq!(counter(&call, "from_caller", "lost"), 0, "{call:#}");
        assert_eq!(counter(&call, "from_callee", "lost"), 0, "{call:#}");
        assert_eq!(counter(&call, "from_caller", "dropped"), 0, "{call:#}");
        let stream = &call["streams"][0];
        // Each leg's media goes to that side's own address, from the SBC's port of its realm.
        assert!(
            stream["caller_remote"]
                .as_str()
                .is_some_and(|a| a.starts_with("127.0.0.3:")),
            "{call:#}"
        );
        assert!(
            stream["callee_remote"]
                .as_str()
                .is_some_and(|a| a.starts_with("127.0.0.4:")),
            "{call:#}"
        );
    }
    let uac = uac.wait();
    let uas = uas.wait_at_most(Duration::from_secs(15));
    uac.assert_success(3);
    uas.assert_success(3);
    let after = media_until(
        &mut mgmt,
        Duration::from_secs(10),
        "every session closed",
        |r| r["media"]["sessions"] == 0,
    );
    let m = &after["media"];
    assert!(
        m["forwarded"].as_u64().unwrap_or(0) >= 3 * 2 * PCAP_PACKETS,
        "{m:#}"
    );
    assert_eq!(m["send_errors"], 0, "{m:#}");
    assert_eq!(m["dropped_stranger"], 0, "{m:#}");
    for pool in m["pools"].as_array().cloned().unwrap_or_default() {
        assert_eq!(
            pool["free_pairs"], pool["total_pairs"],
            "ports returned: {pool:#}"
        );
    }
    node.assert_alive();
}

#[test]
fn hold_resume_and_a_new_port_by_update_keep_the_anchor() {
    let config = config(10, "");
    let mut node = SbcNode::start_config(&config);
    let dir = node.dir().clone();
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let uas = callee(&dir, "uas", &config, "uas_rtp_hold.xml", 1, true, 60);
    let uac = caller(&dir, "uac", &config, "uac_rtp_hold.xml", 1)
        .timeout(Duration::from_secs(50))
        .spawn();
    let first = media_until(
        &mut mgmt,
        Duration::from_secs(15),
        "the first pcap both ways",
        |r| {
            calls(r).first().is_some_and(|c| {
                counter(c, "from_caller", "packets") >= PCAP_PACKETS
                    && counter(c, "from_callee", "packets") >= PCAP_PACKETS
            })
        },
    );
    let call = calls(&first).remove(0);
    let stream = call["streams"][0].clone();
    let caller_remote: SocketAddr = stream["caller_remote"]
        .as_str()
        .and_then(|a| a.parse().ok())
        .expect("the caller's media address");
    // After hold, resume (the second pcap) and the UPDATE: the caller's media moved to its new
    // port, the SBC kept its own ports and its one stream.
    let moved = SocketAddr::new(caller_remote.ip(), caller_remote.port() + 2);
    let after = media_until(
        &mut mgmt,
        Duration::from_secs(35),
        "the caller moved by UPDATE",
        |r| {
            calls(r).first().is_some_and(|c| {
                c["streams"][0]["caller_remote"].as_str() == Some(moved.to_string().as_str())
            })
        },
    );
    let call = calls(&after).remove(0);
    assert_eq!(
        call["streams"].as_array().map(Vec::len),
        Some(1),
        "{call:#}"
    );
    assert_eq!(
        call["streams"][0]["caller_port"], stream["caller_port"],
        "{call:#}"
    );
    assert_eq!(
        call["streams"][0]["callee_port"], stream["callee_port"],
        "{call:#}"
    );
    assert!(
        counter(&call, "from_caller", "packets") >= 2 * PCAP_PACKETS,
        "{call:#}"
    );
    assert_eq!(counter(&call, "from_caller", "lost"), 0, "{call:#}");
    let uac = uac.wait();
    let uas = uas.wait_at_most(Duration::from_secs(15));
    uac.assert_success(1);
    uas.assert_success(1);
    node.assert_alive();
}

#[test]
fn a_silent_call_is_ended_with_bye_on_both_legs() {
    let config = config(10, "rtp-inactivity = 2");
    let mut node = SbcNode::start_config(&config);
    let dir = node.dir().clone();
    let uas = callee(&dir, "uas", &config, "uas_rtp_silent.xml", 2, false, 40);
    let uac = caller(&dir, "uac", &config, "uac_rtp_silent.xml", 2)
        .rate(2)
        .timeout(Duration::from_secs(30))
        .run();
    let uas = uas.wait_at_most(Duration::from_secs(15));
    // Both sides got the SBC's BYE (their scenarios wait for it) and answered it.
    uac.assert_success(2);
    uas.assert_success(2);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let stats = mgmt.data("show sip-stats");
    assert_eq!(stats["counters"]["media_inactive_ended"], 2, "{stats:#}");
    node.assert_alive();
}

#[test]
fn no_media_ports_left_is_503_not_a_crash() {
    // Two pairs per realm: two concurrent one-stream calls hold them all.
    let trap_dir = TestDir::new("media-ports-low-trapd");
    let trapd = sbc_e2e::snmp::Trapd::start(&trap_dir);
    let mut config = config(2, "");
    config.extra_toml.push_str(&format!(
        "\n[[system-config.trap-receiver]]\nip-address = \"127.0.0.1\"\nport = {}\n",
        trapd.port()
    ));
    let mut node = SbcNode::start_config(&config);
    let dir = node.dir().clone();
    let uas = callee(&dir, "uas", &config, "uas_rtp.xml", 2, true, 60);
    let uac = caller(&dir, "uac", &config, "uac_rtp.xml", 3)
        .rate(10)
        .timeout(Duration::from_secs(40))
        .run();
    let uas = uas.wait_at_most(Duration::from_secs(15));
    assert_eq!(
        (uac.stats.successful, uac.stats.failed),
        (2, 1),
        "two calls fit, the third is refused\n{}",
        uac.describe()
    );
    uas.assert_success(2);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let stats = mgmt.data("show sip-stats");
    assert_eq!(stats["counters"]["media_ports_503"], 1, "{stats:#}");
    let trap = trapd.wait_trap(
        "SBC-PAIR-MIB::sbcMediaPortsLowTrap",
        0,
        Duration::from_secs(10),
    );
    let value = |name: &str| {
        trap.get(name)
            .map(|v| v.rsplit(' ').next().unwrap_or(v).to_owned())
    };
    assert_eq!(
        value("SBC-PAIR-MIB::sbcMediaPairsFree.0").as_deref(),
        Some("0"),
        "{trap:?}"
    );
    assert_eq!(
        value("SBC-PAIR-MIB::sbcMediaPairsTotal.0").as_deref(),
        Some("2"),
        "{trap:?}"
    );
    // The ports came back: the next call goes through.
    let uas = callee(&dir, "uas-after", &config, "uas_rtp.xml", 1, true, 40);
    let uac = caller(&dir, "uac-after", &config, "uac_rtp.xml", 1)
        .timeout(Duration::from_secs(30))
        .run();
    uac.assert_success(1);
    uas.wait_at_most(Duration::from_secs(15)).assert_success(1);
    node.assert_alive();
}

#[test]
fn a_stranger_cannot_take_over_a_call_s_media() {
    let config = config(10, "latching-window-ms = 500");
    let mut node = SbcNode::start_config(&config);
    let dir = node.dir().clone();
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let uas = callee(&dir, "uas", &config, "uas_rtp.xml", 1, true, 40);
    let uac = caller(&dir, "uac", &config, "uac_rtp.xml", 1)
        .timeout(Duration::from_secs(30))
        .spawn();
    let up = media_until(&mut mgmt, Duration::from_secs(10), "RTP both ways", |r| {
        calls(r).first().is_some_and(|c| {
            counter(c, "from_caller", "packets") > 20 && counter(c, "from_callee", "packets") > 20
        })
    });
    std::thread::sleep(Duration::from_millis(600)); // past the latch window
    let stream = calls(&up)[0]["streams"][0].clone();
    let port = |k: &str| u16::try_from(stream[k].as_u64().unwrap_or(0)).unwrap_or(0);
    let stranger = std::net::UdpSocket::bind("127.0.0.9:0").expect("stranger socket");
    let mut rtp = [0u8; 172];
    rtp[0] = 0x80;
    for (ip, p) in [
        ("127.0.0.1", port("caller_port")),
        ("127.0.0.2", port("callee_port")),
    ] {
        for seq in 0..50u16 {
            rtp[2..4].copy_from_slice(&seq.to_be_bytes());
            let _ = stranger.send_to(&rtp, (ip, p));
        }
    }
    let after = media_until(
        &mut mgmt,
        Duration::from_secs(5),
        "the stranger's packets dropped",
        |r| r["media"]["dropped_stranger"].as_u64() == Some(100),
    );
    let call = &calls(&after)[0];
    assert_eq!(
        call["streams"][0]["caller_remote"], stream["caller_remote"],
        "{call:#}"
    );
    assert_eq!(
        call["streams"][0]["callee_remote"], stream["callee_remote"],
        "{call:#}"
    );
    assert_eq!(counter(call, "from_caller", "dropped"), 50, "{call:#}");
    assert_eq!(counter(call, "from_callee", "dropped"), 50, "{call:#}");
    // Nothing of the stranger reached the callee (its echo would have come back): the call's
    // own RTP is complete, both ways.
    media_until(
        &mut mgmt,
        Duration::from_secs(15),
        "the whole pcap both ways",
        |r| {
            calls(r).first().is_some_and(|c| {
                counter(c, "from_caller", "packets") == PCAP_PACKETS
                    && counter(c, "from_callee", "packets") == PCAP_PACKETS
            })
        },
    );
    uac.wait().assert_success(1);
    uas.wait_at_most(Duration::from_secs(15)).assert_success(1);
    node.assert_alive();
}
