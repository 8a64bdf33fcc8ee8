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
