//! IPv6 at the edge (issue 26): SIPp over `::1` through an all-IPv6 node, over UDP and TCP, and
//! IPv4 ↔ IPv6 interworking (an IPv4 access side in front of an IPv6 core, and the reverse),
//! each side's messages naming only its own family.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use sbc_e2e::{calls_through_sbc, Load, SbcConfig, SbcNode, Scenario};

const V6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);
const V4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn calls(access: IpAddr, core: IpAddr, tcp: bool) {
    let mut config = SbcConfig::with_addresses(access, core, core);
    if tcp {
        config.agent_transport = "tcp";
    }
    let mut node = SbcNode::start_config(&config);
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::Builtin("uac"),
        Scenario::Builtin("uas"),
        Load {
            calls: 100,
            rate: 50,
            tcp,
            timeout: Duration::from_secs(60),
        },
    );
    uac.assert_success(100);
    uas.assert_success(100);
}

#[test]
fn all_ipv6_udp() {
    calls(V6, V6, false);
}

#[test]
fn all_ipv6_tcp() {
    calls(V6, V6, true);
}

#[test]
fn ipv4_access_to_ipv6_core() {
    calls(V4, V6, false);
}

#[test]
fn ipv6_access_to_ipv4_core() {
    calls(V6, V4, false);
}

/// Three IPv6 addresses of a namespace of the test's own: the access side, the core side and
/// the agent each on its own address, as in a real dual-homed deployment.
#[test]
fn ipv6_on_three_addresses_in_a_namespace() {
    let [access, core, agent]: [IpAddr; 3] =
        ["fd00::1", "fd00::2", "fd00::3"].map(|a| a.parse().expect("address"));
    sbc_e2e::netns::enter(&[access, core, agent]);
    let mut config = SbcConfig::with_addresses(access, core, agent);
    config.agent_transport = "tcp";
    let mut node = SbcNode::start_config(&config);
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::Builtin("uac"),
        Scenario::Builtin("uas"),
        Load {
            calls: 50,
            rate: 25,
            tcp: true,
            timeout: Duration::from_secs(60),
        },
    );
    uac.assert_success(50);
    uas.assert_success(50);
}

/// RTP across families: an IPv4 caller (127.0.0.3) and an IPv6 callee (`::1`), the access
/// realm anchored on 127.0.0.1 and the core realm on `::1`. The scenarios check that the
/// caller's answer names only IPv4 (c= and o= the access pool's) and the callee's offer only
/// IPv6 (the core pool's), in the SDP and the headers; the pcap crosses to the callee and its
/// echo back, every packet counted, none lost.
#[test]
fn rtp_crosses_from_ipv4_to_ipv6_anchored_on_both_sides() {
    use sbc_e2e::acli::Mgmt;
    use sbc_e2e::sipp::wait_listening;
    use sbc_e2e::{ports, Sipp};
    use std::net::SocketAddr;
    use std::time::Instant;

    const PCAP_PACKETS: u64 = 236;
    let mut config = SbcConfig::with_addresses(V4, V6, V6);
    let mut pools = String::new();
    for (realm, ip) in [("access", "127.0.0.1"), ("core", "::1")] {
        let first = ports::free_block(21);
        pools.push_str(&format!(
            "\n[[steering-pool]]\nip-address = \"{ip}\"\nstart-port = {first}\nend-port = {}\nrealm-id = \"{realm}\"\n",
            first + 20
        ));
    }
    config.extra_toml = format!("\n[media-manager]\n{pools}");
    let mut node = SbcNode::start_config(&config);
    let dir = node.dir().clone();
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let uas = Sipp::new(&dir, "uas")
        .scenario("uas_rtp_ip6.xml")
        .local(config.agent)
        .arg("-rtp_echo")
        .calls(2)
        .timeout(Duration::from_secs(60))
        .spawn();
    wait_listening(config.agent, false, Duration::from_secs(5));
    let caller = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)), ports::free_port());
    let uac = Sipp::new(&dir, "uac")
        .scenario("uac_rtp_ip4.xml")
        .local(caller)
        .remote(config.access)
        .calls(2)
        .rate(2)
        .timeout(Duration::from_secs(50))
        .spawn();
    let deadline = Instant::now() + Duration::from_secs(30);
    let report = loop {
        let report = mgmt.data("show media");
        let calls = report["media"]["calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let full =
            |c: &serde_json::Value, side: &str| c[side]["packets"].as_u64() == Some(PCAP_PACKETS);
        if calls.len() == 2
            && calls
                .iter()
                .all(|c| full(c, "from_caller") && full(c, "from_callee"))
        {
            break report;
        }
        assert!(
            Instant::now() < deadline,
            "RTP did not cross both ways: {report:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    for call in report["media"]["calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        for side in ["from_caller", "from_callee"] {
            assert_eq!(call[side]["lost"], 0, "{call:#}");
            assert_eq!(call[side]["dropped"], 0, "{call:#}");
        }
        let stream = &call["streams"][0];
        assert!(
            stream["caller_remote"]
                .as_str()
                .is_some_and(|a| a.starts_with("127.0.0.3:")),
            "{call:#}"
        );
        assert!(
            stream["callee_remote"]
                .as_str()
                .is_some_and(|a| a.starts_with("[::1]:")),
            "{call:#}"
        );
    }
    let uac = uac.wait();
    let uas = uas.wait_at_most(Duration::from_secs(15));
    uac.assert_success(2);
    uas.assert_success(2);
    node.assert_alive();
}

/// The family checks of `uas_rtp_ip6.xml` can fail: played directly against the IPv4 caller
/// (no SBC to translate), the callee sees IPv4 in the offer and fails the call.
#[test]
fn the_ipv6_callee_scenario_refuses_an_ipv4_offer() {
    use sbc_e2e::{ports, run_pair, Sipp, TestDir};
    use std::net::SocketAddr;

    let dir = TestDir::for_current_test();
    let uas_addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 2, 6)), ports::free_port());
    let uac_addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 1, 6)), ports::free_port());
    let uas = Sipp::new(&dir, "uas")
        .scenario("uas_rtp_ip6.xml")
        .local(uas_addr)
        .calls(1)
        .timeout(Duration::from_secs(8));
    let uac = Sipp::new(&dir, "uac")
        .scenario("uac_rtp_ip4.xml")
        .local(uac_addr)
        .remote(uas_addr)
        .calls(1)
        .timeout(Duration::from_secs(10));
    let (_uac, uas) = run_pair(uas, uas_addr, false, uac);
    // SIPp aborts the call on the failed check (the UAS never answers) and exits non-zero.
    let description = uas.describe();
    assert!(
        uas.code != Some(0)
            && description.contains("Failed regexp match")
            && description.contains("c=IN IP6 ::1"),
        "{description}"
    );
}

/// RFC 3261 section 18.1.1 on `::1`: the agent has `max-udp-length = 1300` and listens on TCP
/// only (SIPp UAS over TCP); callers send over UDP. Their INVITEs of more than 1300 bytes are
/// relayed over TCP, the calls complete, and `show sip-stats` counts each switch.
#[test]
fn a_large_invite_over_udp_reaches_the_agent_over_tcp() {
    use sbc_e2e::acli::Mgmt;
    use sbc_e2e::{ports, run_pair, Sipp};
    use std::net::SocketAddr;

    let mut config = SbcConfig::with_addresses(V6, V6, V6);
    config.extra_toml = String::new();
    let mut node = SbcNode::start(&config.to_toml().replace(
        "transport = \"udp\"",
        "transport = \"udp\"\nmax-udp-length = 1300",
    ));
    let dir = node.dir().clone();
    let uas = Sipp::new(&dir, "uas")
        .builtin("uas")
        .local(config.agent)
        .tcp()
        .calls(5)
        .timeout(Duration::from_secs(40));
    let uac = Sipp::new(&dir, "uac")
        .scenario("uac_large.xml")
        .local(SocketAddr::new(V6, ports::free_port()))
        .remote(config.access)
        .calls(5)
        .rate(5)
        .timeout(Duration::from_secs(30));
    let (uac, uas) = run_pair(uas, config.agent, true, uac);
    uac.assert_success(5);
    uas.assert_success(5);
    let stats = Mgmt::connect(&node.mgmt_socket()).data("show sip-stats");
    assert_eq!(stats["counters"]["udp_to_tcp"], 5, "{stats:#}");
    node.assert_alive();
}
