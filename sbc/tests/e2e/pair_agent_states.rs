//! What the active learnt, on the standby: session-agent states (through a kill -9) and the
//! route files' checksums (`a_standby_tells_whether_its_route_files_are_the_actives`).
//!
//! Session-agent states survive a kill -9 of the active (kamailio#473: a standby that never
//! learnt them starts from "all up" and marks agents by itself).
//!
//! A pair routes every call to a hunt group of two agents, a silent one (a bound socket that
//! never answers: 127.0.0.3) before SIPp's UAS (the pair's core agent). The active pings the
//! silent agent every second and takes it out of service; the state crosses the sync
//! channel. After a kill -9 of the active, the new active starts with the silent agent out of
//! service (`show session-agents`, and its log says the state was replicated), without a
//! state change of its own: no "out of service" transition in its log (its first ping, one
//! interval later, only confirms it), and a call placed at once goes straight to the UAS.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use sbc_e2e::pair::{kill9, Pair, PairConfig};
use sbc_e2e::raw::RawUdp;

/// The `show session-agents` row of `name` on node `i`.
fn agent_row(pair: &Pair, i: usize, name: &str) -> serde_json::Value {
    pair.exec(i, "show session-agents")
        .and_then(|v| {
            v["data"]["session_agents"]
                .as_array()
                .and_then(|rows| rows.iter().find(|r| r["name"] == name).cloned())
        })
        .unwrap_or_default()
}

#[test]
fn a_new_active_starts_from_the_replicated_agent_states() {
    let silent = RawUdp::bind(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)));
    let mut config = PairConfig::new();
    config
        .sip
        .sip_lines
        .push("initial-inv-trans-expire = 3".into());
    config.extra_toml = format!(
        r#"
[[session-agent]]
name = "silent"
realm = "core"
address = "{}"
port = {}
ping-interval = 1
ping-response-timeout-ms = 300

[[session-agent-group]]
group-name = "pbx"
strategy = "hunt"
dest = ["silent", "core"]
sag-recursion = true

[[local-policy]]
source-realm = ["access"]

[[local-policy.policy-attribute]]
next-hop = "SAG:pbx"
"#,
        silent.local_addr().ip(),
        silent.local_addr().port()
    );
    let mut pair = Pair::start(config);
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));

    // The active takes the silent agent out of service (ping 1 s + 0.3 s).
    let deadline = Instant::now() + Duration::from_secs(10);
    while agent_row(&pair, active, "silent")["in_service"] != false {
        assert!(
            Instant::now() < deadline,
            "the active never took the silent agent out: {:#}",
            agent_row(&pair, active, "silent")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The standby does not ping: it still says in service, from its own board.
    assert_eq!(
        agent_row(&pair, standby, "silent")["in_service"],
        true,
        "a standby marked an agent by itself"
    );
    // The state is published within the reporter's second, then streamed.
    std::thread::sleep(Duration::from_millis(2000));

    let uas = pair.spawn_uas("uas", 1, Duration::from_secs(30));
    kill9(&mut pair.nodes[active]);
    pair.wait_redundancy(standby, Duration::from_secs(5), "active", |r| r.is_active());
    let row = agent_row(&pair, standby, "silent");
    assert_eq!(
        row["in_service"], false,
        "the new active did not start from the replicated state: {row:#}"
    );
    // A call at once goes straight to the UAS: the silent agent is not tried (that would
    // cost initial-inv-trans-expire, 3 s).
    let started = Instant::now();
    let uac = pair
        .uac("uac", 1, 1, 0, Duration::from_secs(20))
        .spawn()
        .wait();
    uac.assert_success(1);
    let took = started.elapsed();
    uas.wait_at_most(Duration::from_secs(10)).assert_success(1);
    let invites = silent
        .recv_all(Duration::from_millis(200))
        .iter()
        .filter(|(b, _)| b.starts_with(b"INVITE "))
        .count();
    assert_eq!(
        invites, 0,
        "the new active offered a call to the silent agent"
    );
    assert!(took < Duration::from_millis(2500), "the call took {took:?}");
    let log = std::fs::read_to_string(pair.nodes[standby].stderr_path()).unwrap_or_default();
    assert!(
        log.contains("session-agent state replicated from the former active"),
        "no restore in the new active's log"
    );
    assert!(
        !log.contains("session-agent out of service"),
        "the new active took the agent out by itself instead of starting from the replica"
    );
}

/// The `show local-routing` rows of node `i`.
fn route_rows(pair: &Pair, i: usize) -> Vec<serde_json::Value> {
    pair.exec(i, "show local-routing")
        .and_then(|v| v["data"]["route_files"].as_array().cloned())
        .unwrap_or_default()
}

/// Each node loads its own copy of a route file (`file-name` relative to its directory); the
/// active publishes its copies' SHA-256 on the sync channel, and the standby's `show
/// local-routing` says, per file, whether its copy is the active's: `same.csv` is, `other.csv`
/// is not (a route differs).
#[test]
fn a_standby_tells_whether_its_route_files_are_the_actives() {
    let pair = Pair::start(PairConfig::new());
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    for (i, other) in [(active, "1666,core\n"), (standby, "1667,core\n")] {
        let dir = pair.nodes[i].dir();
        std::fs::write(dir.file("same.csv"), "1555,core\n").expect("same.csv");
        std::fs::write(dir.file("other.csv"), other).expect("other.csv");
    }
    let out = sbc_e2e::acli::acli_script(
        &pair.socket(active),
        "configure terminal\nsession-router\n\
         local-routing-config\nname same\nfile-name same.csv\ndone\nexit\n\
         local-routing-config\nname other\nfile-name other.csv\ndone\nexit\n\
         exit\nexit\nsave-config\nactivate-config\n",
    );
    out.assert_ok();
    let deadline = Instant::now() + Duration::from_secs(15);
    let rows = loop {
        let rows = route_rows(&pair, standby);
        if rows.len() == 2 && rows.iter().all(|r| !r["active_sha256"].is_null()) {
            break rows;
        }
        assert!(
            Instant::now() < deadline,
            "the standby never compared its route files with the active's: {rows:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let by_name = |name: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(by_name("same")["matches_active"], true, "{rows:?}");
    assert_eq!(by_name("other")["matches_active"], false, "{rows:?}");
    let active_rows = route_rows(&pair, active);
    let active_other = active_rows
        .iter()
        .find(|r| r["name"] == "other")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        by_name("other")["active_sha256"],
        active_other["sha256"],
        "the standby shows the active's checksum"
    );
    assert!(
        active_other["matches_active"].is_null(),
        "the active compares with no one"
    );
    let text = pair
        .exec(standby, "show local-routing")
        .and_then(|v| v["output"].as_str().map(str::to_owned))
        .unwrap_or_default();
    assert!(text.contains("DIFFERS from the active's copy"), "{text}");
}
