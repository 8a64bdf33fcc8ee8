//! The SNMP agent with net-snmp's own tools (`snmpwalk`, `snmpget`, `snmpbulkwalk`), our MIB
//! loaded from the repository.
//!
//! Each test starts a node with `snmp-agent-address` on a fresh loopback port and one
//! community, `s3cret`, allowed from 127.0.0.0/8.
//!
//! Asserts:
//! - `walk_get_and_bulk`: `snmpwalk SBC-PAIR-MIB::sbcPairStatus` prints our objects by name,
//!   health and redundancy agreeing with `show health` (score 100) and `show redundancy`
//!   (standalone); `snmpget` of `sysUpTime.0`, `sysDescr.0`, `sysName.0` (the hostname);
//!   `snmpbulkwalk` of the node's whole view ends on `sbcStatusRegistrationBindings.0` and gives the
//!   same objects as the walk; a wrong community gets no answer (the tool times out) and
//!   `snmpInBadCommunityNames.0` counts it; `show running-config` masks the community.
//! - `alarm_table_follows_display_alarms`: a lab node (process memory against 64 MB, 1 s
//!   iterations, critical at 80 %) with 56 MB of `lab ballast` raises the critical memory
//!   alarm; the walk of `sbcAlarmTable` shows its row 131073 (memoryUtilization, critical,
//!   the value `display-alarms` gives, task sbcd); after `clear-alarm` the table is empty.
//! - `walks_under_sipp_load`: 20 walks of `sbcPairStatus` while 300 SIPp calls at 50 calls/s
//!   cross the node: every walk answers, and the calls all succeed (0 failed); afterwards
//!   `sbcStatusCallsAttempted.0` and `sbcStatusCallsAnswered.0` are 300.
//! - `a_pair_walked_on_both_nodes_across_a_switchover`: a pair with an agent on each node
//!   (node-local addresses) and 20 calls up: on the active the walk says active(1)/active(3),
//!   the peer heard and standby(5), the epoch of `show redundancy`, 20 calls active and, once
//!   the standby is current, `sbcStatusSyncLag.0` 0; on the standby standby(2)/standby(5), the
//!   peer active(3), `sbcStatusSyncLag.0` -1 and `sbcStatusReplicatedDialogs.0` 20; after
//!   `notify berpd force` the two walks swap, with the new epoch on both; every call ends.
//! - `management_addresses_follow_activate_config`: `snmp-agent-address` and
//!   `metrics-address` changed in the saved file and activated need no restart: within 3 s
//!   the agent answers and `/metrics` is served on the new addresses, and nothing on the old
//!   ones; moved and moved back (or moved and removed) within the listeners' poll, every
//!   activation is accepted and the address given up is free again; an address held by another socket refuses the activation naming the key and the
//!   address, the running configuration keeps the current one and it still answers; both
//!   removed, neither answers.

use std::time::Duration;

use sbc_e2e::acli::acli;
use sbc_e2e::snmp::snmp_tool;
use sbc_e2e::{calls_through_sbc, ports, Load, SbcConfig, SbcNode, Scenario};

const COMMUNITY: &str = "s3cret";

fn start() -> (SbcConfig, SbcNode, String) {
    start_with("", "")
}

/// A node with the agent, `system` keys added to its `[system-config]` and `tables` (its
/// sub-elements) after the community.
fn start_with(system: &str, tables: &str) -> (SbcConfig, SbcNode, String) {
    let config = SbcConfig::new();
    let port = ports::free_port();
    let toml = format!(
        "[system-config]\n\
         hostname = \"snmp-node\"\n\
         {system}\
         snmp-agent-address = \"127.0.0.1:{port}\"\n\
         \n\
         [[system-config.snmp-community]]\n\
         community-name = \"{COMMUNITY}\"\n\
         ip-addresses = [\"127.0.0.0/8\"]\n\
         {tables}\n{}",
        config.to_toml()
    );
    let node = SbcNode::start(&toml);
    (config, node, format!("127.0.0.1:{port}"))
}

/// `tool -v2c -c COMMUNITY -t 1 -r 1 AGENT ARGS...`: (success, stdout, complaints).
fn v2c(tool: &str, community: &str, agent: &str, args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["-v2c", "-c", community, "-t", "1", "-r", "1", agent];
    all.extend_from_slice(args);
    snmp_tool(tool, &all)
}

/// The objects a walk printed: its lines without net-snmp's end-of-view note (printed when
/// the walked subtree is the last of the view).
fn objects(out: &str) -> usize {
    out.lines()
        .filter(|l| !l.contains("No more variables left"))
        .count()
}

#[track_caller]
fn ok(result: (bool, String, String)) -> String {
    let (success, out, complaints) = result;
    assert!(
        success && complaints.is_empty(),
        "failed: {complaints}\n{out}"
    );
    out
}

/// The value after `= TYPE: ` on the line of `name`.
fn value<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(" = "))
        .map(|v| v.split_once(": ").map_or(v, |(_, v)| v))
        .unwrap_or_else(|| panic!("{name} missing from:\n{out}"))
}

#[test]
fn walk_get_and_bulk() {
    let (_config, node, agent) = start();
    let walk = ok(v2c(
        "snmpwalk",
        COMMUNITY,
        &agent,
        &["SBC-PAIR-MIB::sbcPairStatus"],
    ));
    eprintln!("{walk}");
    let health = acli(&node.mgmt_socket(), &["show health"]);
    health.assert_ok();
    assert!(
        health.stdout.contains("health-score             100"),
        "{}",
        health.describe()
    );
    assert_eq!(value(&walk, "SBC-PAIR-MIB::sbcStatusHealthScore.0"), "100");
    let redundancy = acli(&node.mgmt_socket(), &["show redundancy"]);
    assert!(
        redundancy.stdout.contains("runs alone"),
        "{}",
        redundancy.describe()
    );
    assert_eq!(
        value(&walk, "SBC-PAIR-MIB::sbcStatusRedundancyRole.0"),
        "standalone(4)"
    );
    assert_eq!(
        value(&walk, "SBC-PAIR-MIB::sbcStatusRedundancyState.0"),
        "standalone(8)"
    );
    assert_eq!(value(&walk, "SBC-PAIR-MIB::sbcStatusCallsActive.0"), "0");
    assert_eq!(value(&walk, "SBC-PAIR-MIB::sbcStatusCallsAttempted.0"), "0");
    assert_eq!(value(&walk, "SBC-PAIR-MIB::sbcStatusCallsFailed.0"), "0");
    // Alone: no replica, nothing to lag.
    assert_eq!(value(&walk, "SBC-PAIR-MIB::sbcStatusSyncLag.0"), "-1");
    assert_eq!(
        value(&walk, "SBC-PAIR-MIB::sbcStatusReplicatedDialogs.0"),
        "0"
    );
    let memory: i64 = value(&walk, "SBC-PAIR-MIB::sbcStatusMemoryUtilization.0")
        .trim_end_matches(" percent")
        .parse()
        .expect("a number");
    assert!((-1..=100).contains(&memory), "{walk}");
    // Accounting off: its nine status objects read zero (and not full).
    for (name, v) in [
        ("sbcStatusAccountingRecordsGenerated", "0"),
        ("sbcStatusAccountingRecordsDelivered", "0"),
        ("sbcStatusAccountingSpoolFull", "false(2)"),
        ("sbcStatusAccountingServers", "0"),
    ] {
        assert_eq!(
            value(&walk, &format!("SBC-PAIR-MIB::{name}.0")),
            v,
            "{walk}"
        );
    }
    assert_eq!(
        objects(&walk),
        24,
        "24 scalars (15, then accounting's 9) and no alarm row:\n{walk}"
    );

    let get = ok(v2c(
        "snmpget",
        COMMUNITY,
        &agent,
        &[
            "SNMPv2-MIB::sysUpTime.0",
            "SNMPv2-MIB::sysDescr.0",
            "SNMPv2-MIB::sysName.0",
        ],
    ));
    assert!(
        value(&get, "SNMPv2-MIB::sysUpTime.0").starts_with('('),
        "{get}"
    );
    assert!(
        value(&get, "SNMPv2-MIB::sysDescr.0").starts_with("sbc-pair "),
        "{get}"
    );
    assert_eq!(value(&get, "SNMPv2-MIB::sysName.0"), "snmp-node");

    let bulk = ok(v2c("snmpbulkwalk", COMMUNITY, &agent, &["-Cr20", ".1.3"]));
    assert!(
        bulk.contains("SNMPv2-MIB::sysObjectID.0 = OID: SBC-PAIR-MIB::sbcPairMIB"),
        "{bulk}"
    );
    let status: Vec<&str> = bulk
        .lines()
        .filter(|l| l.starts_with("SBC-PAIR-MIB::") && !l.contains("No more variables"))
        .collect();
    assert_eq!(status.len(), 24, "{bulk}");
    assert!(
        status
            .last()
            .is_some_and(|l| l.starts_with("SBC-PAIR-MIB::sbcStatusAccountingServers.0")),
        "{bulk}"
    );

    let (success, out, complaints) = v2c("snmpget", "wrong", &agent, &["SNMPv2-MIB::sysName.0"]);
    assert!(!success, "a wrong community is answered: {out}");
    assert!(complaints.contains("Timeout"), "{complaints}");
    let counted = ok(v2c(
        "snmpget",
        COMMUNITY,
        &agent,
        &["SNMPv2-MIB::snmpInBadCommunityNames.0"],
    ));
    // net-snmp retries once (-r 1): two datagrams.
    assert_eq!(
        value(&counted, "SNMPv2-MIB::snmpInBadCommunityNames.0"),
        "2",
        "{counted}"
    );

    let shown = acli(&node.mgmt_socket(), &["show running-config"]);
    shown.assert_ok();
    assert!(!shown.stdout.contains(COMMUNITY), "{}", shown.describe());
}

#[test]
fn walks_under_sipp_load() {
    let (config, mut node, agent) = start();
    let walker = std::thread::spawn(move || {
        let mut answered = 0;
        for _ in 0..20 {
            let out = ok(v2c(
                "snmpwalk",
                COMMUNITY,
                &agent,
                &["SBC-PAIR-MIB::sbcPairStatus"],
            ));
            assert_eq!(objects(&out), 24, "{out}");
            answered += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
        (answered, agent)
    });
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::Builtin("uac"),
        Scenario::Builtin("uas"),
        Load {
            calls: 300,
            rate: 50,
            tcp: false,
            timeout: Duration::from_secs(60),
        },
    );
    let (answered, agent) = walker.join().expect("walker");
    uac.assert_success(300);
    uas.assert_success(300);
    assert_eq!(answered, 20);
    // The snapshot is at most 500 ms old.
    std::thread::sleep(Duration::from_millis(600));
    let after = ok(v2c(
        "snmpwalk",
        COMMUNITY,
        &agent,
        &["SBC-PAIR-MIB::sbcPairStatus"],
    ));
    assert_eq!(
        value(&after, "SBC-PAIR-MIB::sbcStatusCallsAttempted.0"),
        "300",
        "{after}"
    );
    assert_eq!(
        value(&after, "SBC-PAIR-MIB::sbcStatusCallsAnswered.0"),
        "300",
        "{after}"
    );
    assert_eq!(
        value(&after, "SBC-PAIR-MIB::sbcStatusCallsFailed.0"),
        "0",
        "{after}"
    );
}

#[test]
fn alarm_table_follows_display_alarms() {
    let (_config, node, agent) = start_with(
        "memory-source = \"process\"\n\
         memory-limit-mb = 64\n\
         alarm-iteration-ms = 1000\n\
         alarm-subsamples = 5\n\
         spike-subsamples = 3\n\
         lab-mode = true\n",
        "\n[[system-config.alarm-threshold]]\n\
         type = \"memory\"\n\
         severity = \"critical\"\n\
         value = 80\n",
    );
    acli(&node.mgmt_socket(), &["lab ballast 56"]).assert_ok();
    let table = "SBC-PAIR-MIB::sbcAlarmTable";
    let mut walk = String::new();
    // Bounded: 30 walks, 0.5 s apart (the alarm needs two or three 1 s iterations).
    for _ in 0..30 {
        walk = ok(v2c("snmpwalk", COMMUNITY, &agent, &[table]));
        if walk.contains("sbcAlarmEntryType.131073") {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!("{walk}");
    assert_eq!(
        value(&walk, "SBC-PAIR-MIB::sbcAlarmEntryType.131073"),
        "memoryUtilization(1)"
    );
    assert_eq!(
        value(&walk, "SBC-PAIR-MIB::sbcAlarmEntrySeverity.131073"),
        "critical(4)"
    );
    assert_eq!(
        value(&walk, "SBC-PAIR-MIB::sbcAlarmEntryTask.131073"),
        "sbcd"
    );
    let shown = sbc_e2e::acli::acli_json(&node.mgmt_socket(), &["display-alarms"])
        .assert_ok()
        .json();
    let reading = shown["alarms"][0]["value"].as_f64().expect("a value");
    let polled: f64 = value(&walk, "SBC-PAIR-MIB::sbcAlarmEntryValue.131073")
        .trim_end_matches(" percent")
        .parse()
        .expect("a number");
    // The snapshot may be one iteration older than display-alarms.
    assert!(
        (polled - reading).abs() <= 15.0,
        "{polled} vs {reading}: {walk}"
    );
    acli(
        &node.mgmt_socket(),
        &["lab ballast 0", "clear-alarm 131073 sbcd"],
    )
    .assert_ok();
    std::thread::sleep(Duration::from_millis(600));
    let (success, out, complaints) = v2c("snmpwalk", COMMUNITY, &agent, &[table]);
    assert!(success, "{complaints}");
    assert!(
        !out.contains("131073"),
        "the cleared alarm is still polled: {out}"
    );
}

/// `sysName.0` from `agent`, if it answers within a second.
fn sys_name(agent: &str) -> Option<String> {
    let (ok, out, _) = v2c(
        "snmpget",
        COMMUNITY,
        agent,
        &["-Oqv", "SNMPv2-MIB::sysName.0"],
    );
    ok.then(|| out.trim().to_owned())
}

/// Whether `GET /metrics` at `addr` is answered 200.
fn metrics_served(addr: std::net::SocketAddr) -> bool {
    sbc_e2e::prometheus::http_exchange(addr, b"GET /metrics HTTP/1.0\r\n\r\n")
        .is_some_and(|a| a.status == 200)
}

/// Polls `done` every 100 ms for up to 3 s (the listeners follow the running configuration
/// within a second).
fn within_3s(mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    done()
}

/// Sets (or, with `None`, removes) `key` of `[system-config]` in the node's saved file.
fn set_system_key(node: &SbcNode, key: &str, value: Option<String>) {
    let path = node.config_path();
    let text = std::fs::read_to_string(&path).expect("read the saved file");
    let mut file: toml::Value = toml::from_str(&text).expect("the saved file parses");
    let system = file
        .get_mut("system-config")
        .and_then(toml::Value::as_table_mut)
        .expect("[system-config]");
    match value {
        Some(v) => {
            system.insert(key.to_owned(), toml::Value::String(v));
        }
        None => {
            system.remove(key);
        }
    }
    std::fs::write(&path, toml::to_string(&file).expect("serialise")).expect("write");
}

#[test]
fn management_addresses_follow_activate_config() {
    use sbc_e2e::acli::acli_json;
    let metrics_a = std::net::SocketAddr::from(([127, 0, 0, 1], ports::free_port()));
    let (_config, node, agent_a) = start_with(&format!("metrics-address = \"{metrics_a}\"\n"), "");
    let sock = node.mgmt_socket();
    assert_eq!(sys_name(&agent_a).as_deref(), Some("snmp-node"));
    assert!(metrics_served(metrics_a));

    // Both moved: live, no restart.
    let agent_b = format!("127.0.0.1:{}", ports::free_port());
    let metrics_b = std::net::SocketAddr::from(([127, 0, 0, 1], ports::free_port()));
    set_system_key(&node, "snmp-agent-address", Some(agent_b.clone()));
    set_system_key(&node, "metrics-address", Some(metrics_b.to_string()));
    let act = acli_json(&sock, &["activate-config"]).assert_ok().json();
    assert_eq!(act["restart_needed"], serde_json::json!([]), "{act}");
    assert!(
        within_3s(|| sys_name(&agent_b).is_some() && metrics_served(metrics_b)),
        "the agent and /metrics are not served on the new addresses"
    );
    assert_eq!(
        sys_name(&agent_a),
        None,
        "the old agent address still answers"
    );
    assert!(
        !metrics_served(metrics_a),
        "the old metrics address still serves"
    );

    // Moved and moved back, or moved and removed, faster than the listeners follow: both
    // activations are accepted, the served addresses stay, and nothing is left bound at the
    // address given up.
    let agent_c = format!("127.0.0.1:{}", ports::free_port());
    let metrics_c = std::net::SocketAddr::from(([127, 0, 0, 1], ports::free_port()));
    set_system_key(&node, "snmp-agent-address", Some(agent_c.clone()));
    set_system_key(&node, "metrics-address", Some(metrics_c.to_string()));
    acli_json(&sock, &["activate-config"]).assert_ok();
    set_system_key(&node, "snmp-agent-address", Some(agent_b.clone()));
    set_system_key(&node, "metrics-address", Some(metrics_b.to_string()));
    acli_json(&sock, &["activate-config"]).assert_ok();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(sys_name(&agent_b).as_deref(), Some("snmp-node"));
    assert!(metrics_served(metrics_b));
    std::net::UdpSocket::bind(&agent_c).expect("the address given up is free again");
    std::net::TcpListener::bind(metrics_c).expect("the address given up is free again");
    let metrics_d = std::net::SocketAddr::from(([127, 0, 0, 1], ports::free_port()));
    set_system_key(&node, "metrics-address", Some(metrics_d.to_string()));
    acli_json(&sock, &["activate-config"]).assert_ok();
    set_system_key(&node, "metrics-address", None);
    acli_json(&sock, &["activate-config"]).assert_ok();
    std::thread::sleep(Duration::from_millis(1500));
    std::net::TcpListener::bind(metrics_d).expect("a removed address is not left bound");
    assert!(
        !metrics_served(metrics_b),
        "a removed metrics address still serves"
    );
    set_system_key(&node, "metrics-address", Some(metrics_b.to_string()));
    acli_json(&sock, &["activate-config"]).assert_ok();
    assert!(
        within_3s(|| metrics_served(metrics_b)),
        "metrics-address set again"
    );

    // Taken addresses: the activation is refused, naming them; nothing moves.
    let squatter = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind a UDP squatter");
    let taken = squatter.local_addr().expect("addr").to_string();
    set_system_key(&node, "snmp-agent-address", Some(taken.clone()));
    let out = acli_json(&sock, &["activate-config"]);
    out.assert_failed();
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains(&format!("cannot bind snmp-agent-address {taken}")),
        "{}",
        out.describe()
    );
    let tcp_squatter = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a TCP squatter");
    let taken_tcp = tcp_squatter.local_addr().expect("addr").to_string();
    set_system_key(&node, "snmp-agent-address", Some(agent_b.clone()));
    set_system_key(&node, "metrics-address", Some(taken_tcp.clone()));
    let out = acli_json(&sock, &["activate-config"]);
    out.assert_failed();
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains(&format!("cannot bind metrics-address {taken_tcp}")),
        "{}",
        out.describe()
    );
    let running = acli_json(&sock, &["show running-config"])
        .assert_ok()
        .json();
    let system = &running["system-config"];
    assert_eq!(system["snmp-agent-address"], agent_b.as_str(), "{system:#}");
    assert_eq!(
        system["metrics-address"],
        metrics_b.to_string().as_str(),
        "{system:#}"
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(sys_name(&agent_b).as_deref(), Some("snmp-node"));
    assert!(metrics_served(metrics_b));
    drop((squatter, tcp_squatter));

    // Both removed: neither answers.
    set_system_key(&node, "snmp-agent-address", None);
    set_system_key(&node, "metrics-address", None);
    acli_json(&sock, &["activate-config"]).assert_ok();
    assert!(
        within_3s(|| sys_name(&agent_b).is_none() && !metrics_served(metrics_b)),
        "the agent or /metrics still answers after their addresses were removed"
    );
}

/// The walk of `sbcPairStatus` on `agent`.
fn walk(agent: &str) -> String {
    ok(v2c(
        "snmpwalk",
        COMMUNITY,
        agent,
        &["SBC-PAIR-MIB::sbcPairStatus"],
    ))
}

/// Walks `agent` every 200 ms for up to 10 s until `done`; panics naming `what` otherwise.
fn walk_until(agent: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let w = walk(agent);
        if done(&w) {
            return w;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within 10 s; last walk:\n{w}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_pair_walked_on_both_nodes_across_a_switchover() {
    use sbc_e2e::pair::{lo, Pair, PairConfig};
    let mut config = PairConfig::new();
    let agents = [
        format!("{}:{}", lo(11), ports::free_port()),
        format!("{}:{}", lo(12), ports::free_port()),
    ];
    for (i, a) in agents.iter().enumerate() {
        config.node_system_lines[i].push(format!("snmp-agent-address = \"{a}\""));
    }
    config.extra_toml = format!(
        "\n[[system-config.snmp-community]]\ncommunity-name = \"{COMMUNITY}\"\n\
         ip-addresses = [\"127.0.0.0/8\"]\n"
    );
    let pair = Pair::start(config);
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    pair.wait_redundancy(standby, Duration::from_secs(10), "synchronized", |r| {
        r.synchronized
    });
    let uas = pair.spawn_uas("uas", 20, Duration::from_secs(60));
    let uac = pair
        .uac("uac", 20, 10, 10_000, Duration::from_secs(40))
        .spawn();
    pair.wait_replicated(standby, 20, Duration::from_secs(10));

    let on_active = walk_until(&agents[active], "the standby current", |w| {
        value(w, "SBC-PAIR-MIB::sbcStatusSyncLag.0") == "0"
    });
    let r = pair.redundancy(active).expect("the active answers");
    assert_eq!(
        value(&on_active, "SBC-PAIR-MIB::sbcStatusRedundancyRole.0"),
        "active(1)"
    );
    assert_eq!(
        value(&on_active, "SBC-PAIR-MIB::sbcStatusRedundancyState.0"),
        "active(3)"
    );
    assert_eq!(
        value(&on_active, "SBC-PAIR-MIB::sbcStatusPeerAlive.0"),
        "true(1)"
    );
    assert_eq!(
        value(&on_active, "SBC-PAIR-MIB::sbcStatusPeerState.0"),
        "standby(5)"
    );
    assert_eq!(
        value(&on_active, "SBC-PAIR-MIB::sbcStatusRedundancyEpoch.0"),
        r.epoch.to_string()
    );
    assert_eq!(
        value(&on_active, "SBC-PAIR-MIB::sbcStatusCallsActive.0"),
        "20"
    );
    assert_eq!(
        value(&on_active, "SBC-PAIR-MIB::sbcStatusReplicatedDialogs.0"),
        "20",
        "the dialogs the active streams"
    );
    assert_eq!(r.replicated_dialogs, 20, "show redundancy on the active");
    let on_standby = walk(&agents[standby]);
    eprintln!("active:\n{on_active}\nstandby:\n{on_standby}");
    assert_eq!(
        value(&on_standby, "SBC-PAIR-MIB::sbcStatusRedundancyRole.0"),
        "standby(2)"
    );
    assert_eq!(
        value(&on_standby, "SBC-PAIR-MIB::sbcStatusRedundancyState.0"),
        "standby(5)"
    );
    assert_eq!(
        value(&on_standby, "SBC-PAIR-MIB::sbcStatusPeerState.0"),
        "active(3)"
    );
    assert_eq!(value(&on_standby, "SBC-PAIR-MIB::sbcStatusSyncLag.0"), "-1");
    assert_eq!(
        value(&on_standby, "SBC-PAIR-MIB::sbcStatusReplicatedDialogs.0"),
        "20"
    );

    let reply = pair
        .exec(active, "notify berpd force")
        .expect("the active answers");
    assert_eq!(reply["ok"], serde_json::Value::Bool(true), "{reply}");
    pair.wait_redundancy(standby, Duration::from_secs(10), "active", |r| {
        r.is_active()
    });
    pair.wait_redundancy(active, Duration::from_secs(10), "standby", |r| {
        r.is_standby()
    });
    let epoch = pair
        .redundancy(standby)
        .expect("the new active answers")
        .epoch;
    assert!(epoch > r.epoch, "the switchover raised the epoch");
    let new_active = walk_until(&agents[standby], "the new active's walk", |w| {
        value(w, "SBC-PAIR-MIB::sbcStatusRedundancyRole.0") == "active(1)"
            && value(w, "SBC-PAIR-MIB::sbcStatusPeerState.0") == "standby(5)"
    });
    assert_eq!(
        value(&new_active, "SBC-PAIR-MIB::sbcStatusRedundancyEpoch.0"),
        epoch.to_string()
    );
    let new_standby = walk_until(&agents[active], "the new standby's walk", |w| {
        value(w, "SBC-PAIR-MIB::sbcStatusRedundancyRole.0") == "standby(2)"
    });
    assert_eq!(
        value(&new_standby, "SBC-PAIR-MIB::sbcStatusRedundancyEpoch.0"),
        epoch.to_string()
    );
    assert_eq!(
        value(&new_standby, "SBC-PAIR-MIB::sbcStatusSyncLag.0"),
        "-1"
    );
    uac.wait().assert_success(20);
    uas.wait_at_most(Duration::from_secs(20)).assert_success(20);
}
