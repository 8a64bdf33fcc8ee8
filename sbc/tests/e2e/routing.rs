//! Routing with hunting, end to end: a `local-policy` sends every call to a
//! `session-agent-group` (hunt, `sag-recursion`) of three agents on their own loopback
//! addresses: one answering 503 (SIPp `uas_503.xml`, 127.0.0.2), one silent (a bound socket
//! that never answers, 127.0.0.3), one answering 200 (SIPp's `uas`, 127.0.0.4).
//!
//! - `a_503_and_a_silent_agent_are_hunted_past_with_no_failed_call`: 5 calls, each offered
//!   to the 503 agent, then the silent one (abandoned after `initial-inv-trans-expire` = 1 s,
//!   not timer B), then answered by the third: 5 successful calls at the caller, 5 at the
//!   answering UAS, the 503 agent's 5 INVITEs ACKed; the silent agent saw the INVITEs with the
//!   Request-URI host its address (it has no `hostname`).
//! - `pings_take_a_silent_agent_out_of_service_and_an_answer_brings_it_back`: an agent pinged
//!   every second (`ping-misses = 2`, `ping-response-timeout-ms = 300`) that answers nothing
//!   goes out of service within interval × misses + timeout (plus the reporter's second):
//!   `sbcSessionAgentStatusTrap` outOfService reaches snmptrapd and `show session-agents` says
//!   so; once it answers its pings with 200, the next ping brings it back (the trap again,
//!   inService), and its round trip is shown.
//! - `round_robin_and_prop_dist_spread_calls_over_sipp_agents`, `in_dialog_requests_reach_a_disabled_agent_and_max_sessions_is_respected`,
//!   `a_call_to_a_user_of_a_domain_reaches_the_phone_registered_at_a_kamailio_registrar`,
//!   `a_route_file_routes_by_prefix_and_shows_its_checksum`: see each test's doc.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use sbc_e2e::acli::Mgmt;
use sbc_e2e::kamailio::registrar;
use sbc_e2e::raw::{response_to, RawUdp, SipMsg};
use sbc_e2e::snmp::Trapd;
use sbc_e2e::Sipp;
use sbc_e2e::TestDir;
use sbc_e2e::{calls_through_sbc, ports, Load, SbcConfig, SbcNode, Scenario};

fn lo(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

#[test]
fn a_503_and_a_silent_agent_are_hunted_past_with_no_failed_call() {
    let calls = 5;
    let mut config = SbcConfig::with_addresses(lo(1), lo(1), lo(4));
    config.sip_lines.push("initial-inv-trans-expire = 1".into());
    let busy = SocketAddr::new(lo(2), ports::free_port());
    let silent = RawUdp::bind(lo(3));
    config.extra_toml = format!(
        r#"
[[session-agent]]
name = "busy"
realm = "core"
address = "{}"
port = {}

[[session-agent]]
name = "silent"
realm = "core"
address = "{}"
port = {}

[[session-agent-group]]
group-name = "pbx"
strategy = "hunt"
dest = ["busy", "silent", "core"]
sag-recursion = true

[[local-policy]]
to-address = ["*"]
source-realm = ["access"]

[[local-policy.policy-attribute]]
next-hop = "SAG:pbx"
"#,
        busy.ip(),
        busy.port(),
        silent.local_addr().ip(),
        silent.local_addr().port(),
    );
    let mut node = SbcNode::start_config(&config);
    let busy_uas = Sipp::new(node.dir(), "busy")
        .play(Scenario::File("uas_503.xml"))
        .arg("-key")
        .arg("extra_header")
        .arg("X-Busy: 1")
        .local(busy)
        .calls(calls)
        .timeout(Duration::from_secs(60))
        .spawn();
    sbc_e2e::sipp::wait_listening(busy, false, Duration::from_secs(5));
    let started = std::time::Instant::now();
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::Builtin("uac"),
        Scenario::Builtin("uas"),
        Load {
            calls,
            rate: 5,
            tcp: false,
            timeout: Duration::from_secs(40),
        },
    );
    uac.assert_success(u64::from(calls));
    uas.assert_success(u64::from(calls));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the silent agent was abandoned after 1 s, not timer B"
    );
    let busy_uas = busy_uas.wait_at_most(Duration::from_secs(20));
    busy_uas.assert_success(u64::from(calls));
    let received = silent.recv_all(Duration::from_millis(200));
    let invites: Vec<SipMsg> = received
        .iter()
        .filter_map(|(b, _)| SipMsg::parse(b))
        .filter(|m| m.method() == Some("INVITE"))
        .collect();
    assert!(!invites.is_empty(), "the silent agent was tried");
    // The silent agent answers its last INVITE after all (within 64·T1 of its abandonment):
    // the SBC ACKs that 2xx and hangs it up with BYE, on that leg alone.
    let (last, from) = received
        .iter()
        .rev()
        .find_map(|(b, from)| {
            SipMsg::parse(b)
                .filter(|m| m.method() == Some("INVITE"))
                .map(|m| (m, *from))
        })
        .expect("an INVITE");
    silent.send_to(&response_to(&last, 200, "OK", "late"), from);
    let call_id = last.header("call-id").unwrap_or_default().to_owned();
    let after: Vec<SipMsg> = silent
        .recv_all(Duration::from_millis(1500))
        .iter()
        .filter_map(|(b, _)| SipMsg::parse(b))
        .filter(|m| m.header("call-id") == Some(call_id.as_str()))
        .collect();
    let methods: Vec<&str> = after.iter().filter_map(SipMsg::method).collect();
    assert!(
        methods.contains(&"ACK") && methods.contains(&"BYE"),
        "the late 2xx was not ACKed and hung up: {methods:?}"
    );
    if let Some(bye) = after.iter().find(|m| m.method() == Some("BYE")) {
        silent.send_to(&response_to(bye, 200, "OK", "late"), from);
    }
    let uri = invites[0]
        .start_line
        .split(' ')
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    assert!(
        uri.ends_with(&format!("@{}", silent.local_addr())),
        "Request-URI {uri}"
    );
}

#[test]
fn pings_take_a_silent_agent_out_of_service_and_an_answer_brings_it_back() {
    const TRAP: &str = "SBC-PAIR-MIB::sbcSessionAgentStatusTrap";
    let trap_dir = TestDir::new("routing-pings-trapd");
    let trapd = Trapd::start(&trap_dir);
    let agent = RawUdp::bind(lo(5));
    let mut config = SbcConfig::with_addresses(lo(1), lo(1), lo(4));
    config.extra_toml = format!(
        r#"
[[session-agent]]
name = "pinged"
realm = "core"
address = "{}"
port = {}
hostname = "pbx.example.test"
ping-interval = 1
ping-misses = 2
ping-response-timeout-ms = 300

[[system-config.trap-receiver]]
ip-address = "127.0.0.1"
port = {}
"#,
        agent.local_addr().ip(),
        agent.local_addr().port(),
        trapd.port(),
    );
    let started = std::time::Instant::now();
    let node = SbcNode::start_config(&config);
    // Silent: out after two missed pings (the first due 1 s after start).
    let out = trapd.wait_trap(TRAP, 0, Duration::from_secs(10));
    let took = started.elapsed();
    eprintln!("out of service after {took:?}: {out:?}");
    let get = |t: &sbc_e2e::snmp::ReceivedTrap, name: &str| {
        t.get(&format!("SBC-PAIR-MIB::{name}.0"))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        get(&out, "sbcSessionAgentName").contains("pinged"),
        "{out:?}"
    );
    assert!(
        get(&out, "sbcSessionAgentState").contains("outOfService"),
        "{out:?}"
    );
    assert!(
        get(&out, "sbcSessionAgentReason").contains("PingTimeout"),
        "{out:?}"
    );
    assert!(
        took < Duration::from_secs(6),
        "interval x misses + timeout is 2.3 s (and the node's start): took {took:?}"
    );
    let pings: Vec<SipMsg> = agent
        .recv_all(Duration::from_millis(50))
        .iter()
        .filter_map(|(b, _)| SipMsg::parse(b))
        .filter(|m| m.method() == Some("OPTIONS"))
        .collect();
    assert!(!pings.is_empty(), "pinged");
    assert!(
        pings[0]
            .start_line
            .starts_with("OPTIONS sip:pbx.example.test SIP/2.0"),
        "{}",
        pings[0].start_line
    );
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let shown = mgmt.data("show session-agents");
    let row = shown["session_agents"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["name"] == "pinged"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["in_service"], false, "{shown:#}");
    assert!(row["pings_missed"].as_u64().unwrap_or(0) >= 2, "{shown:#}");
    // Now it answers: back in service with the next ping (backed off to at most 4 s).
    let answering = std::time::Instant::now();
    let deadline = answering + Duration::from_secs(12);
    while trapd.traps_named(TRAP).len() < 2 && std::time::Instant::now() < deadline {
        if let Some((bytes, from)) = agent.recv(Duration::from_millis(100)) {
            if let Some(m) = SipMsg::parse(&bytes).filter(|m| m.method() == Some("OPTIONS")) {
                agent.send_to(&response_to(&m, 200, "OK", "pong"), from);
            }
        }
    }
    let back = trapd.wait_trap(TRAP, 1, Duration::from_secs(1));
    eprintln!("back in service after {:?}: {back:?}", answering.elapsed());
    assert!(
        get(&back, "sbcSessionAgentState").contains("inService"),
        "{back:?}"
    );
    let shown = mgmt.data("show session-agents");
    let row = shown["session_agents"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["name"] == "pinged"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["in_service"], true, "{shown:#}");
    assert!(row["last_ping_rtt_ms"].as_f64().is_some(), "{shown:#}");
    drop(node);
}

/// The registrar's answer to one REGISTER of `user@example.test` with `contact`.
fn register(registrar: SocketAddr, user: &str, contact: SocketAddr) -> Option<u16> {
    let sock = RawUdp::bind(lo(7));
    let request = format!(
        "REGISTER sip:example.test SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-reg-{user}\r\n\
         Max-Forwards: 70\r\nFrom: <sip:{user}@example.test>;tag=r1\r\nTo: <sip:{user}@example.test>\r\n\
         Call-ID: reg-{user}@{ip}\r\nCSeq: 1 REGISTER\r\nContact: <sip:{user}@{contact}>\r\n\
         Expires: 300\r\nContent-Length: 0\r\n\r\n",
        local = sock.local_addr(),
        ip = sock.local_addr().ip(),
    );
    // Kamailio may still be starting: a few tries, each waiting a second.
    for _ in 0..10 {
        sock.send_to(request.as_bytes(), registrar);
        if let Some((bytes, _)) = sock.recv(Duration::from_secs(1)) {
            if let Some(code) = SipMsg::parse(&bytes).and_then(|m| m.status()) {
                return Some(code);
            }
        }
    }
    None
}

/// A phone registered to a real Kamailio registrar hosting `example.test`, which keys its
/// bindings by user and domain, is called through the SBC as `sip:bob@example.test`: the
/// Request-URI reaches the registrar with its domain (before issue 28 it arrived as
/// `sip:bob@<agent address>`, and the registrar answered 404), and the call reaches the
/// registered UAS, in-dialog requests through the registrar's Record-Route.
#[test]
fn a_call_to_a_user_of_a_domain_reaches_the_phone_registered_at_a_kamailio_registrar() {
    let calls = 3;
    let config = SbcConfig::with_addresses(lo(1), lo(1), lo(6));
    let dir = TestDir::new("routing-registrar");
    let _kamailio = registrar(&dir, config.agent);
    let phone = SocketAddr::new(lo(7), ports::free_port());
    assert_eq!(
        register(config.agent, "bob", phone),
        Some(200),
        "registered at {} (kamailio.log in {})",
        config.agent,
        dir.path().display()
    );
    let mut node = SbcNode::start_config(&config);
    let uas = Sipp::new(node.dir(), "phone")
        .play(Scenario::File("uas_phone.xml"))
        .local(phone)
        .calls(calls)
        .timeout(Duration::from_secs(60))
        .spawn();
    sbc_e2e::sipp::wait_listening(phone, false, Duration::from_secs(5));
    let uac = Sipp::new(node.dir(), "caller")
        .play(Scenario::File("uac_domain.xml"))
        .local(SocketAddr::new(lo(1), ports::free_port()))
        .remote(config.access)
        .arg("-s")
        .arg("bob")
        .calls(calls)
        .rate(2)
        .timeout(Duration::from_secs(40))
        .run();
    uac.assert_success(u64::from(calls));
    let uas = uas.wait_at_most(Duration::from_secs(15));
    uas.assert_success(u64::from(calls));
    node.assert_alive();
}

/// A `local-routing-config` file routes by the called number's prefix (its rows beside the
/// configured policies), `show local-routing` reports its rows and the SHA-256 of the file
/// (what `sha256sum` says), and a call to a prefix of a silent agent is hunted to the next
/// candidate (session-router's compatibility row).
#[test]
fn a_route_file_routes_by_prefix_and_shows_its_checksum() {
    let mut config = SbcConfig::with_addresses(lo(1), lo(1), lo(4));
    config.sip_lines.push("initial-inv-trans-expire = 1".into());
    let silent = RawUdp::bind(lo(3));
    let dir = TestDir::new("routing-file");
    let file = dir.path().join("routes.csv");
    std::fs::write(
        &file,
        "# prefix,next-hop[,cost]\n555,core\n+1-666,other,5\n",
    )
    .expect("write");
    config.extra_toml = format!(
        r#"
[[session-agent]]
name = "other"
realm = "core"
address = "{}"
port = {}

[[local-routing-config]]
name = "numbers"
file-name = "{}"
source-realm = ["access"]
"#,
        silent.local_addr().ip(),
        silent.local_addr().port(),
        file.display(),
    );
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let shown = mgmt.data("show local-routing");
    let row = &shown["route_files"][0];
    assert_eq!(row["name"], "numbers", "{shown:#}");
    assert_eq!(row["rows"], 2, "{shown:#}");
    let sum = std::process::Command::new("sha256sum")
        .arg(&file)
        .output()
        .expect("sha256sum");
    let sum = String::from_utf8_lossy(&sum.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(row["sha256"], sum.as_str(), "{shown:#}");
    for (n, (number, silent_tried)) in [("5551234", false), ("+16661234", true)].iter().enumerate()
    {
        let uas = Sipp::new(node.dir(), &format!("uas{n}"))
            .play(Scenario::Builtin("uas"))
            .local(config.agent)
            .calls(1)
            .timeout(Duration::from_secs(30))
            .spawn();
        sbc_e2e::sipp::wait_listening(config.agent, false, Duration::from_secs(5));
        let uac = Sipp::new(node.dir(), &format!("uac{n}"))
            .play(Scenario::Builtin("uac"))
            .local(SocketAddr::new(lo(1), ports::free_port()))
            .remote(config.access)
            .arg("-s")
            .arg(number)
            .calls(1)
            .timeout(Duration::from_secs(20))
            .run();
        uac.assert_success(1);
        uas.wait_at_most(Duration::from_secs(15)).assert_success(1);
        let invites = silent
            .recv_all(Duration::from_millis(100))
            .iter()
            .filter_map(|(b, _)| SipMsg::parse(b))
            .filter(|m| m.method() == Some("INVITE"))
            .count();
        assert_eq!(
            invites > 0,
            *silent_tried,
            "{number}: the silent agent tried?"
        );
    }
    node.assert_alive();
    drop(node);
}

/// Three SIPp UAS agents (127.0.0.2-4, each also answering pings: `-aa`) in one group.
fn group_config(strategy: &str, agents: &[SocketAddr], extra_agent_lines: &[&str]) -> SbcConfig {
    let mut config = SbcConfig::with_addresses(lo(1), lo(1), lo(9));
    let mut toml = String::new();
    for (i, a) in agents.iter().enumerate() {
        toml.push_str(&format!(
            "\n[[session-agent]]\nname = \"a{i}\"\nrealm = \"core\"\naddress = \"{}\"\nport = {}\n{}\n",
            a.ip(),
            a.port(),
            extra_agent_lines.get(i).copied().unwrap_or("")
        ));
    }
    let names: Vec<String> = (0..agents.len()).map(|i| format!("\"a{i}\"")).collect();
    toml.push_str(&format!(
        "\n[[session-agent-group]]\ngroup-name = \"pbx\"\nstrategy = \"{strategy}\"\ndest = [{}]\nsag-recursion = true\n\n[[local-policy]]\nsource-realm = [\"access\"]\n\n[[local-policy.policy-attribute]]\nnext-hop = \"SAG:pbx\"\n",
        names.join(", ")
    ));
    config.extra_toml = toml;
    config
}

/// The agents' UASes: SIPp's built-in `uas` answering pings (`-aa`), each ending after the
/// number of calls `counts` gives it (one more would be refused: a spread other than the
/// expected one fails the caller's calls or leaves a UAS waiting).
fn agent_uases(node: &SbcNode, agents: &[SocketAddr], counts: &[u64]) -> Vec<sbc_e2e::SippProcess> {
    agents
        .iter()
        .zip(counts)
        .enumerate()
        .map(|(i, (a, n))| {
            let p = Sipp::new(node.dir(), &format!("agent{i}"))
                .play(Scenario::Builtin("uas"))
                .arg("-aa")
                .local(*a)
                .calls(u32::try_from(*n).unwrap_or(u32::MAX))
                .timeout(Duration::from_secs(120))
                .spawn();
            sbc_e2e::sipp::wait_listening(*a, false, Duration::from_secs(5));
            p
        })
        .collect()
}

/// `calls` calls from a SIPp UAC through `node`, each held `hold_ms`.
fn place_calls(
    node: &SbcNode,
    config: &SbcConfig,
    name: &str,
    calls: u32,
    hold_ms: u32,
) -> sbc_e2e::SippProcess {
    Sipp::new(node.dir(), name)
        .play(Scenario::Builtin("uac"))
        .local(SocketAddr::new(lo(1), ports::free_port()))
        .remote(config.access)
        .arg("-d")
        .arg(hold_ms.to_string())
        .calls(calls)
        .rate(10)
        .timeout(Duration::from_secs(60))
        .spawn()
}

/// Round-robin spreads 30 calls over three SIPp agents 10 each; prop-dist by `max-sessions`
/// 1:2:3 gives 60 calls 10, 20 and 30 (both exact: each UAS takes exactly its share and
/// ends, and every call of the caller succeeds).
#[test]
fn round_robin_and_prop_dist_spread_calls_over_sipp_agents() {
    for (strategy, calls, lines, expected) in [
        ("round-robin", 30u32, ["", "", ""], [10u64, 10, 10]),
        (
            "prop-dist",
            60,
            [
                "max-sessions = 100",
                "max-sessions = 200",
                "max-sessions = 300",
            ],
            [10, 20, 30],
        ),
    ] {
        let agents: Vec<SocketAddr> = (2..=4)
            .map(|i| SocketAddr::new(lo(i), ports::free_port()))
            .collect();
        let config = group_config(strategy, &agents, &lines);
        let mut node = SbcNode::start_config(&config);
        let uases = agent_uases(&node, &agents, &expected);
        let uac = place_calls(&node, &config, "uac", calls, 0).wait();
        uac.assert_success(u64::from(calls));
        for (u, e) in uases.into_iter().zip(expected) {
            u.wait_at_most(Duration::from_secs(15)).assert_success(e);
        }
        node.assert_alive();
    }
}

/// Calls established through an agent that the operator then disables (`state disabled`,
/// activate-config) still reach it in-dialog (their BYEs), while new calls go to the group's
/// other agent; `max-sessions` holds a hunt group's first agent to its limit.
#[test]
fn in_dialog_requests_reach_a_disabled_agent_and_max_sessions_is_respected() {
    let agents: Vec<SocketAddr> = (2..=3)
        .map(|i| SocketAddr::new(lo(i), ports::free_port()))
        .collect();
    let config = group_config("hunt", &agents, &["max-sessions = 4", ""]);
    let mut node = SbcNode::start_config(&config);
    let uases = agent_uases(&node, &agents, &[4, 6]);
    // 6 calls held 6 s: a0 takes 4 (its max-sessions), a1 the other 2.
    let held = place_calls(&node, &config, "held", 6, 6000);
    std::thread::sleep(Duration::from_millis(2000));
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let shown = mgmt.data("show session-agents");
    let sessions: Vec<u64> = ["a0", "a1"]
        .iter()
        .map(|name| {
            shown["session_agents"]
                .as_array()
                .and_then(|rows| rows.iter().find(|r| r["name"] == *name))
                .and_then(|r| r["sessions"].as_u64())
                .unwrap_or(u64::MAX)
        })
        .collect();
    assert_eq!(sessions, vec![4, 2], "{shown:#}");
    // Disable a0 while its 4 calls are up.
    let out = sbc_e2e::acli::acli_script(
        &node.mgmt_socket(),
        "configure terminal\nsession-router\nsession-agent\nselect a0\nstate disabled\ndone\nexit\nexit\nexit\nactivate-config\n",
    );
    out.assert_ok();
    // New calls go to a1 only.
    let more = place_calls(&node, &config, "more", 4, 0).wait();
    more.assert_success(4);
    // The held calls end with their BYEs delivered, a0's included.
    held.wait().assert_success(6);
    // a0 finished its 4 calls, a1 took 2 + 4.
    for (u, n) in uases.into_iter().zip([4, 6]) {
        u.wait_at_most(Duration::from_secs(15)).assert_success(n);
    }
    node.assert_alive();
}

/// Debian's dnsmasq serving `records` (its `--srv-host` / `--host-record` arguments) on
/// `addr`, every answer with a TTL of `ttl` seconds, no upstream; stopped by PID on drop.
struct Dnsmasq {
    child: std::process::Child,
}

impl Dnsmasq {
    fn start(dir: &TestDir, addr: SocketAddr, ttl: u32, records: &[String]) -> Self {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.file(&format!("dnsmasq-{}.log", addr.port())))
            .expect("dnsmasq log");
        let child = std::process::Command::new("dnsmasq")
            .args([
                "--keep-in-foreground",
                "--no-resolv",
                "--no-hosts",
                "--conf-file=/dev/null",
                "--bind-interfaces",
                "--pid-file=",
                "--log-facility=-",
                "--log-queries",
            ])
            .arg(format!("--listen-address={}", addr.ip()))
            .arg(format!("--port={}", addr.port()))
            .arg(format!("--local-ttl={ttl}"))
            .args(records)
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("dnsmasq (Debian package dnsmasq-base) not installed");
        // Ready once it answers a query for a name it serves.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let probe = std::net::UdpSocket::bind((addr.ip(), 0)).expect("probe socket");
        probe
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("timeout");
        // A query for "." type NS, id 0x5b5b.
        let query = [0x5b, 0x5b, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1];
        let mut buf = [0u8; 512];
        loop {
            assert!(
                std::time::Instant::now() < deadline,
                "dnsmasq did not answer on {addr}"
            );
            let _ = probe.send_to(&query, addr);
            if probe.recv_from(&mut buf).is_ok() {
                break;
            }
        }
        Self { child }
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        sbc_e2e::terminate(&mut self.child, Duration::from_secs(3));
    }
}

/// The `show session-agents` row of `name`.
fn agent_row(node: &SbcNode, name: &str) -> serde_json::Value {
    let shown = Mgmt::connect(&node.mgmt_socket()).data("show session-agents");
    shown["session_agents"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["name"] == name))
        .cloned()
        .unwrap_or_default()
}

/// Waits (bounded) until agent `name` is in service at `addr`.
fn wait_agent_at(node: &SbcNode, name: &str, addr: SocketAddr, within: Duration) {
    let deadline = std::time::Instant::now() + within;
    loop {
        let row = agent_row(node, name);
        let at = row["address"].as_str().unwrap_or_default().to_owned();
        if row["in_service"] == true && at.contains(&format!("={addr} ")) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name} not in service at {addr} within {within:?}: {row:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// INVITEs the SIPp agent `name` in `dir` received (its `-trace_msg` log).
fn invites_at(dir: &TestDir, name: &str) -> usize {
    std::fs::read_to_string(dir.file(&format!("{name}.messages.log")))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("INVITE sip:"))
        .count()
}

/// A session-agent named by DNS (`hostname = "pbx.test"`, no address, `port = 0`) is found
/// through SRV records that Debian's dnsmasq serves on loopback (RFC 3263): its calls go to
/// the priority-10 target, with the name in their Request-URI; when that target stops (its
/// SIPp UAS killed), the missed ping moves the agent on to the priority-20 target, which
/// takes the next 3 calls; when the zone changes (dnsmasq restarted with one other target),
/// the agent follows it within the records' TTL (2 s) and the last 3 calls reach the new
/// target. No call fails. (The UASes answer pings, `-aa`, which SIPp counts as calls: they
/// are given room and stopped by PID.)
#[test]
fn an_agent_named_by_dns_follows_its_srv_records() {
    let dir = TestDir::for_current_test();
    let dns = SocketAddr::new(lo(1), ports::free_port());
    let targets: Vec<SocketAddr> = (2..=4)
        .map(|i| SocketAddr::new(lo(i), ports::free_port()))
        .collect();
    let srv = |host: &str, t: SocketAddr, priority: u16| {
        vec![
            format!(
                "--srv-host=_sip._udp.pbx.test,{host}.pbx.test,{},{priority},50",
                t.port()
            ),
            format!("--host-record={host}.pbx.test,{}", t.ip()),
        ]
    };
    let first_zone: Vec<String> = [srv("a1", targets[0], 10), srv("b1", targets[1], 20)].concat();
    let first = Dnsmasq::start(&dir, dns, 2, &first_zone);
    let mut config = SbcConfig::with_addresses(lo(1), lo(1), lo(9));
    config.extra_toml = format!(
        r#"
[system-config]
dns-ip-primary = "{dns}"

[[session-agent]]
name = "carrier"
realm = "core"
hostname = "pbx.test"
port = 0
ping-interval = 1
ping-response-timeout-ms = 300

[[local-policy]]
source-realm = ["access"]

[[local-policy.policy-attribute]]
next-hop = "carrier"
"#
    );
    // The agents listen before the node resolves and pings them.
    let mut uases = targets
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let p = Sipp::new(&dir, &format!("agent{i}"))
                .play(Scenario::Builtin("uas"))
                .arg("-aa")
                .local(*a)
                .calls(1000)
                .timeout(Duration::from_secs(120))
                .spawn();
            sbc_e2e::sipp::wait_listening(*a, false, Duration::from_secs(5));
            p
        })
        .collect::<Vec<_>>()
        .into_iter();
    let mut node = SbcNode::start_config(&config);
    let wait = Duration::from_secs(10);
    let spread = |_: &SbcNode| -> Vec<usize> {
        (0..3)
            .map(|i| invites_at(&dir, &format!("agent{i}")))
            .collect()
    };

    wait_agent_at(&node, "carrier", targets[0], wait);
    place_calls(&node, &config, "to-a", 3, 0)
        .wait()
        .assert_success(3);
    assert_eq!(spread(&node), [3, 0, 0]);
    let uri = std::fs::read_to_string(dir.file("agent0.messages.log")).unwrap_or_default();
    assert!(
        uri.contains("INVITE sip:service@pbx.test SIP/2.0"),
        "Request-URI: {uri}"
    );

    // a1 is gone: the next missed ping moves the agent to b1.
    drop(uases.next());
    wait_agent_at(&node, "carrier", targets[1], wait);
    place_calls(&node, &config, "to-b", 3, 0)
        .wait()
        .assert_success(3);
    assert_eq!(spread(&node), [3, 3, 0]);

    // The zone now names c1 alone: followed within the TTL.
    drop(first);
    let _second = Dnsmasq::start(&dir, dns, 2, &srv("c1", targets[2], 10));
    wait_agent_at(&node, "carrier", targets[2], wait);
    place_calls(&node, &config, "to-c", 3, 0)
        .wait()
        .assert_success(3);
    assert_eq!(spread(&node), [3, 3, 3]);
    node.assert_alive();
}

/// Sessions per agent of `show session-agents`, for `names`.
fn sessions_of(node: &SbcNode, names: &[&str]) -> Vec<u64> {
    names
        .iter()
        .map(|n| agent_row(node, n)["sessions"].as_u64().unwrap_or(u64::MAX))
        .collect()
}

/// Least-busy sends each new call to the agent with the fewest sessions relative to its
/// `max-sessions` (10 and 20 here): 6 held calls go 2 and 4, as `show session-agents` and the
/// UASes count them. `max-burst-rate = 2` on a hunt group's first agent: of 6 calls placed
/// within one second it takes 2, the next agent 4.
#[test]
fn least_busy_follows_live_sessions_and_max_burst_rate_holds() {
    for (strategy, lines, expected) in [
        (
            "least-busy",
            ["max-sessions = 10", "max-sessions = 20"],
            [2u64, 4],
        ),
        ("hunt", ["max-burst-rate = 2", ""], [2, 4]),
    ] {
        let agents: Vec<SocketAddr> = (2..=3)
            .map(|i| SocketAddr::new(lo(i), ports::free_port()))
            .collect();
        let config = group_config(strategy, &agents, &lines);
        let mut node = SbcNode::start_config(&config);
        let uases = agent_uases(&node, &agents, &expected);
        // 6 calls at 10/s (within 0.6 s), each held 4 s: all up together.
        let held = place_calls(&node, &config, "held", 6, 4000);
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        let mut sessions = sessions_of(&node, &["a0", "a1"]);
        while sessions.iter().sum::<u64>() < 6 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            sessions = sessions_of(&node, &["a0", "a1"]);
        }
        if strategy == "least-busy" {
            assert_eq!(sessions, expected, "{strategy}: live sessions");
        }
        held.wait().assert_success(6);
        for (u, e) in uases.into_iter().zip(expected) {
            u.wait_at_most(Duration::from_secs(15)).assert_success(e);
        }
        node.assert_alive();
    }
}

/// Translations on the wire: the access realm's `in-translationid` (`realm-config`) adds 55
/// before the called user, before routing; the agent's `out-translationid` adds 99 after it
/// (Request-URI and To) and replaces the calling user `sipp` by `+15550100` (From); the agent
/// (SIPp's UAS) sees the translated numbers, the caller (SIPp's UAC) its own in the answer.
#[test]
fn translations_are_seen_on_the_wire_toward_the_agent_only() {
    let agents = [SocketAddr::new(lo(2), ports::free_port())];
    let mut config = group_config("hunt", &agents, &["out-translationid = \"to-carrier\""]);
    config.extra_toml.push_str(
        r#"
[[translation-rules]]
id = "prefix-99"
type = "add"
add-string = "99"
add-index = 0

[[translation-rules]]
id = "calling-e164"
type = "replace"
delete-string = "sipp"
delete-index = 0
add-string = "+15550100"
add-index = 0

[[session-translation]]
id = "to-carrier"
rules-called = ["prefix-99"]
rules-calling = ["calling-e164"]

[[translation-rules]]
id = "prefix-55"
type = "add"
add-string = "55"
add-index = 0

[[session-translation]]
id = "from-access"
rules-called = ["prefix-55"]

[[realm-config]]
identifier = "access"
in-translationid = "from-access"
"#,
    );
    let mut node = SbcNode::start_config(&config);
    let uases = agent_uases(&node, &agents, &[2]);
    place_calls(&node, &config, "uac", 2, 0)
        .wait()
        .assert_success(2);
    for u in uases {
        u.wait_at_most(Duration::from_secs(15)).assert_success(2);
    }
    let at_agent =
        std::fs::read_to_string(node.dir().file("agent0.messages.log")).unwrap_or_default();
    let invite = at_agent
        .split("-----")
        .find(|m| m.contains("INVITE sip:"))
        .unwrap_or_default();
    // The access realm's in-translationid (55) before routing, the agent's out (99) after.
    assert!(
        invite.contains("INVITE sip:9955service@"),
        "Request-URI: {invite}"
    );
    assert!(
        invite.contains("To: service <sip:9955service@"),
        "To: {invite}"
    );
    assert!(invite.contains("<sip:+15550100@"), "From: {invite}");
    let at_caller =
        std::fs::read_to_string(node.dir().file("uac.messages.log")).unwrap_or_default();
    let answer = at_caller
        .split("-----")
        .find(|m| m.contains("SIP/2.0 200 OK") && m.contains("INVITE"))
        .unwrap_or_default();
    assert!(
        answer.contains("<sip:service@"),
        "the caller's own To: {answer}"
    );
    assert!(!answer.contains("55service"), "{answer}");
    assert!(!answer.contains("+15550100"), "{answer}");
    let stats = Mgmt::connect(&node.mgmt_socket()).data("show sip-stats");
    assert!(
        stats["counters"]["translated"].as_u64().unwrap_or(0) >= 4,
        "{stats:#}"
    );
    node.assert_alive();
}
