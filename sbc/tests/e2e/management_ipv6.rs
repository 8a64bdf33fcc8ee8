//! Management on IPv6 (issue 26): `/metrics`, the SNMP agent and traps on `::1`, with
//! net-snmp's own tools over its `udp6:` transport.
//!
//! - `metrics_on_ipv6_loopback`: `metrics-address = "[::1]:PORT"`; a scrape of
//!   `http://[::1]:PORT/metrics` answers 200 with the node's health score, and nothing listens
//!   on `127.0.0.1:PORT`.
//! - `snmp_agent_on_ipv6_loopback`: `snmp-agent-address = "[::1]:PORT"`, a community allowed
//!   from `::1`, another allowed only from `127.0.0.0/8`, a v3 user allowed from `::1/128`:
//!   `snmpget -v2c udp6:[::1]:PORT sysName.0` answers the hostname, `snmpwalk` of
//!   `sbcPairStatus` prints the health score; the IPv4-only community gets no answer over IPv6
//!   and `snmpInBadCommunityNames.0` counts it; `snmpget -v3` (authPriv) answers.
//! - `snmp_agent_on_the_dual_stack_wildcard`: `snmp-agent-address = "[::]:PORT"` serves both
//!   families on one socket; a community allowed from `127.0.0.0/8` answers a manager on
//!   `udp:127.0.0.1:PORT` (its source reaches the agent as `::ffff:127.0.0.1`, which is
//!   127.0.0.1) and not one on `udp6:[::1]:PORT`.
//! - `trap_to_an_ipv6_receiver`: `snmptrapd` on `udp6:[::1]:PORT`, a `trap-receiver` with
//!   `ip-address = "::1"`, and a minor memory threshold the idle node is above (10 % of
//!   64 MB): the `sbcAlarmTrap` arrives over IPv6 within 15 s, naming the node.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use sbc_e2e::prometheus::http_get;
use sbc_e2e::snmp::{net_snmp_address, snmp_tool, snmp_v3, Trapd};
use sbc_e2e::{ports, SbcConfig, SbcNode, TestDir};

const V6_LOOPBACK: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);
const COMMUNITY: &str = "s3cret-v6";
const V4_ONLY: &str = "v4-only";
const USER: &str = "nms6";
const AUTH: &str = "auth-pass-v6";
const PRIV: &str = "priv-pass-v6";

/// A node with `system` lines in its `[system-config]` and `tables` (its sub-elements) after.
fn node(hostname: &str, system: &str, tables: &str) -> SbcNode {
    let config = SbcConfig::new();
    SbcNode::start(&format!(
        "[system-config]\nhostname = \"{hostname}\"\n{system}\n{tables}\n{}",
        config.to_toml()
    ))
}

/// `tool -v2c -c COMMUNITY -t 1 -r 1 AGENT ARGS...`: (success, stdout, complaints).
fn v2c(tool: &str, community: &str, agent: &str, args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["-v2c", "-c", community, "-t", "1", "-r", "1", agent];
    all.extend_from_slice(args);
    snmp_tool(tool, &all)
}

#[test]
fn metrics_on_ipv6_loopback() {
    let addr = SocketAddr::new(V6_LOOPBACK, ports::free_port());
    let mut node = node("metrics-v6", &format!("metrics-address = \"{addr}\""), "");
    let answer = http_get(addr, "/metrics").expect("/metrics answers on [::1]");
    assert_eq!(answer.status, 200, "{}", answer.head);
    assert!(
        answer.body.contains("sbc_health_score 100"),
        "no health score in:\n{}",
        answer.body
    );
    assert!(
        http_get(SocketAddr::from(([127, 0, 0, 1], addr.port())), "/metrics").is_none(),
        "served on IPv4 too"
    );
    node.assert_alive();
}

#[test]
fn snmp_agent_on_ipv6_loopback() {
    let addr = SocketAddr::new(V6_LOOPBACK, ports::free_port());
    let mut node = node(
        "snmp-v6",
        &format!("snmp-agent-address = \"{addr}\""),
        &format!(
            "[[system-config.snmp-community]]\n\
             community-name = \"{COMMUNITY}\"\n\
             ip-addresses = [\"::1\"]\n\
             \n\
             [[system-config.snmp-community]]\n\
             community-name = \"{V4_ONLY}\"\n\
             ip-addresses = [\"127.0.0.0/8\"]\n\
             \n\
             [[system-config.snmp-user-entry]]\n\
             user-name = \"{USER}\"\n\
             auth-protocol = \"sha\"\n\
             auth-password = \"{AUTH}\"\n\
             priv-protocol = \"aes128\"\n\
             priv-password = \"{PRIV}\"\n\
             ip-addresses = [\"::1/128\"]\n"
        ),
    );
    let agent = net_snmp_address(addr);
    assert!(agent.starts_with("udp6:[::1]:"), "{agent}");

    let (ok, out, complaints) = v2c("snmpget", COMMUNITY, &agent, &["SNMPv2-MIB::sysName.0"]);
    assert!(ok, "snmpget over IPv6 failed: {out}\n{complaints}");
    assert!(out.contains("STRING: snmp-v6"), "{out}");
    let (ok, out, complaints) = v2c(
        "snmpwalk",
        COMMUNITY,
        &agent,
        &["SBC-PAIR-MIB::sbcPairStatus"],
    );
    assert!(ok, "snmpwalk over IPv6 failed: {out}\n{complaints}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("SBC-PAIR-MIB::sbcStatusHealthScore.0 = ")
                && l.ends_with(": 100")),
        "{out}"
    );

    // The IPv4-only community is not allowed from ::1: no answer, counted.
    let (ok, out, _) = v2c("snmpget", V4_ONLY, &agent, &["SNMPv2-MIB::sysName.0"]);
    assert!(
        !ok,
        "a community allowed from 127.0.0.0/8 answered ::1: {out}"
    );
    let (ok, out, complaints) = v2c(
        "snmpget",
        COMMUNITY,
        &agent,
        &["SNMPv2-MIB::snmpInBadCommunityNames.0"],
    );
    assert!(ok, "{out}\n{complaints}");
    // The tool's request and its one retry.
    let bad: u64 = out
        .rsplit("Counter32: ")
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!((1..=2).contains(&bad), "{out}");

    let (ok, out, complaints) = snmp_v3(
        "snmpget",
        &agent,
        (USER, AUTH, PRIV),
        &["SNMPv2-MIB::sysName.0"],
    );
    assert!(ok, "snmpget -v3 over IPv6 failed: {out}\n{complaints}");
    assert!(out.contains("STRING: snmp-v6"), "{out}");
    node.assert_alive();
}

#[test]
fn snmp_agent_on_the_dual_stack_wildcard() {
    let port = ports::free_port();
    let mut node = node(
        "snmp-dual",
        &format!("snmp-agent-address = \"[::]:{port}\""),
        &format!(
            "[[system-config.snmp-community]]\n\
             community-name = \"{V4_ONLY}\"\n\
             ip-addresses = [\"127.0.0.0/8\"]\n"
        ),
    );
    let v4 = net_snmp_address(SocketAddr::from(([127, 0, 0, 1], port)));
    let (ok, out, complaints) = v2c("snmpget", V4_ONLY, &v4, &["SNMPv2-MIB::sysName.0"]);
    assert!(
        ok,
        "an IPv4 manager allowed by 127.0.0.0/8 got no answer from [::]: {out}\n{complaints}"
    );
    assert!(out.contains("STRING: snmp-dual"), "{out}");
    let v6 = net_snmp_address(SocketAddr::new(V6_LOOPBACK, port));
    let (ok, out, _) = v2c("snmpget", V4_ONLY, &v6, &["SNMPv2-MIB::sysName.0"]);
    assert!(!ok, "::1 is not in 127.0.0.0/8 but got an answer: {out}");
    node.assert_alive();
}

#[test]
fn trap_to_an_ipv6_receiver() {
    let dir = TestDir::for_current_test();
    let trapd = Trapd::start_on(&dir, V6_LOOPBACK);
    let mut node = node(
        "traps-v6",
        "memory-source = \"process\"\n\
         memory-limit-mb = 64\n\
         alarm-iteration-ms = 1000\n\
         alarm-subsamples = 5\n\
         spike-subsamples = 3\n\
         lab-mode = true\n",
        &format!(
            "[[system-config.alarm-threshold]]\n\
             type = \"memory\"\n\
             severity = \"minor\"\n\
             value = 10\n\
             \n\
             [[system-config.trap-receiver]]\n\
             ip-address = \"::1\"\n\
             port = {}\n\
             community = \"public\"\n",
            trapd.port()
        ),
    );
    let trap = trapd.wait_trap("SBC-PAIR-MIB::sbcAlarmTrap", 0, Duration::from_secs(15));
    eprintln!("trap over IPv6: {}", trap.line);
    assert!(
        trap.line.contains("traps-v6"),
        "the trap names the node: {}",
        trap.line
    );
    assert!(
        trapd.output().contains("UDP/IPv6: [::1]"),
        "snmptrapd saw the trap come over IPv6:\n{}",
        trapd.output()
    );
    node.assert_alive();
}
