//! A configuration push cannot take the standby over.
//!
//! The test process plays a **compromised active**: it holds the pair's shared key (so it
//! passes the sync channel's authentication, as a real but subverted active would) and runs the
//! product's own redundancy machine and sync server (`sbc-ha`) as `sbc-a`. The real `sbc-b`
//! joins it as standby. The rogue active then pushes:
//!
//! 1. a configuration with a `[redundancy-config]` section that sets `notify-active` to a shell
//!    command: refused whole by the standby (`show health` and `show redundancy` say so and
//!    name `redundancy-config`), the command never runs, the standby's file and running
//!    configuration keep their own pair settings;
//! 2. one that turns on `system-config lab-mode` (management commands): refused the same way;
//! 3. a legitimate one (the pushable part only, with `t1-ms` changed): applied.
//!
//! `an_activation_on_the_active_reaches_the_standby_whole`: a real pair; the active's saved
//! file gets a new access port (which waits for a restart) and a new `t1-ms`; after its
//! `activate-config` the standby runs and saves both (the push carries what was activated,
//! not the interfaces the active still listens on until its restart), and `show health`
//! says the configurations are synchronized on both nodes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sbc_e2e::pair::{mgmt_exec, PairConfig, NAMES, SHARED_KEY};
use sbc_e2e::{SbcNode, TestDir};
use sbc_ha::shell::sync::{EntryCheck, SyncContext};
use sbc_ha::shell::{self, SyncPublisher};
use sbc_ha::{
    AdminState, PeerSettings, PeerType, Redundancy, RedundancySettings, State, SyncTable,
};
use serde_json::Value;

fn wait_json(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Option<Value>,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let v = probe();
        if let Some(v) = v.as_ref().filter(|v| pred(v)) {
            return v.clone();
        }
        assert!(Instant::now() < deadline, "{what}: last seen {v:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_push_of_redundancy_config_hooks_or_lab_mode_is_refused_by_the_standby() {
    let config = PairConfig::new();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let _guard = rt.enter();

    // The rogue sbc-a: the product's redundancy machine and sync server, with the key.
    let ha = RedundancySettings {
        state: AdminState::Enabled,
        advertisement_time: config.advertisement(),
        sip_sync_port: config.sip_sync_port,
        config_sync_port: config.config_sync_port,
        shared_key: SHARED_KEY.into(),
        peers: vec![
            PeerSettings {
                name: NAMES[0].into(),
                peer_type: PeerType::Primary,
                destinations: vec![config.heartbeat[0]],
            },
            PeerSettings {
                name: NAMES[1].into(),
                peer_type: PeerType::Secondary,
                destinations: vec![config.heartbeat[1]],
            },
        ],
        ..RedundancySettings::default()
    };
    let machine = Redundancy::new(&ha, NAMES[0], 42, Instant::now()).expect("machine");
    let sockets = rt
        .block_on(shell::bind_paths(&ha, NAMES[0]))
        .expect("bind sbc-a's heartbeat address");
    let rogue = shell::spawn(&ha, machine, sockets).expect("heartbeat thread");
    let accept_all: EntryCheck = Arc::new(|_: &[u8], _: &[u8]| Ok(()));
    let ctx = Arc::new(SyncContext::new(&ha, NAMES[0], accept_all).expect("context"));
    let publisher = SyncPublisher::new(SyncTable::new(), 1024);
    let marker = TestDir::new("pair_push-marker").file("hook-ran");
    publisher.push_config(
        1,
        format!(
            "[redundancy-config]\nnotify-active = \"touch {}\"\n",
            marker.display()
        ),
    );
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(SocketAddr::new(
            config.heartbeat[0].ip(),
            config.sip_sync_port,
        )))
        .expect("bind the sync port");
    rt.spawn(shell::serve_sync(listener, publisher.clone(), ctx, 1));
    let deadline = Instant::now() + Duration::from_secs(10);
    while rogue.status().state != State::Active {
        assert!(
            Instant::now() < deadline,
            "the rogue sbc-a did not become active"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // The real sbc-b joins as standby and receives the push.
    let dir = TestDir::new("pair_push-sbc-b");
    let b = SbcNode::start_in(&dir, &config.to_toml(1));
    let sock = b.mgmt_socket();
    let health = |s: &std::path::Path| {
        mgmt_exec(s, "show health")
            .and_then(|r| (r["ok"] == Value::Bool(true)).then(|| r["data"].clone()))
    };
    wait_json(
        "sbc-b standby and synchronized",
        Duration::from_secs(15),
        || mgmt_exec(&sock, "show redundancy").map(|r| r["data"].clone()),
        |v| v["state"] == "standby" && v["synchronized"] == true,
    );
    let h = wait_json(
        "the redundancy-config push refused",
        Duration::from_secs(10),
        || health(&sock),
        |v| v["config_pushes_refused"] == 1,
    );
    let why = h["last_config_push_refusal"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    eprintln!("refusal: {why}");
    assert!(why.starts_with("redundancy-config"), "{why}");
    let text = mgmt_exec(&sock, "show health").expect("health");
    assert!(
        text["output"]
            .as_str()
            .unwrap_or_default()
            .contains("redundancy-config"),
        "show health does not say why: {text}"
    );

    // lab-mode is node-local too.
    publisher.push_config(2, "[system-config]\nlab-mode = true\n".into());
    let h = wait_json(
        "the lab-mode push refused",
        Duration::from_secs(10),
        || health(&sock),
        |v| v["config_pushes_refused"] == 2,
    );
    assert!(
        h["last_config_push_refusal"]
            .as_str()
            .is_some_and(|w| w.starts_with("system-config.lab-mode")),
        "{h}"
    );
    let r = mgmt_exec(&sock, "show redundancy").expect("redundancy");
    assert_eq!(r["data"]["config_pushes_refused"], 2, "{r}");

    // A legitimate push (the pushable part, T1 changed) is applied.
    let mut sip = config.sip.clone();
    sip.t1_ms = 400;
    publisher.push_config(3, sip.to_toml());
    wait_json(
        "the legitimate push applied",
        Duration::from_secs(10),
        || mgmt_exec(&sock, "show running-config").map(|r| r["data"].clone()),
        |v| v["sip-config"]["t1-ms"] == 400,
    );
    let running = mgmt_exec(&sock, "show running-config").expect("running")["data"].clone();
    assert_eq!(running["system-config"]["hostname"], NAMES[1]);
    assert_eq!(running["system-config"]["lab-mode"], false);
    assert_eq!(running["redundancy-config"]["notify-active"], "");
    assert_eq!(running["redundancy-config"]["shared-key"], "********");
    let file = std::fs::read_to_string(b.config_path()).expect("sbc-b's file");
    assert!(
        !file.contains("touch"),
        "the rogue hook reached the file:\n{file}"
    );
    assert!(
        file.contains(SHARED_KEY),
        "sbc-b's own pair settings were kept"
    );
    assert!(!marker.exists(), "the pushed hook ran");
    drop(b);
    drop(rogue);
}

#[test]
fn an_activation_on_the_active_reaches_the_standby_whole() {
    use sbc_e2e::pair::Pair;
    let pair = Pair::start(PairConfig::new());
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    let path = pair.nodes[active].config_path();
    let text = std::fs::read_to_string(&path).expect("the active's file");
    let mut file: toml::Value = toml::from_str(&text).expect("parses");
    let new_port = sbc_e2e::ports::free_port();
    let mut old_port = 0;
    for i in file["sip-interface"].as_array_mut().expect("interfaces") {
        if i["realm"].as_str() == Some("access") {
            old_port = i["port"].as_integer().unwrap_or(0);
            i["port"] = toml::Value::Integer(i64::from(new_port));
        }
    }
    let sip = file
        .get_mut("sip-config")
        .and_then(toml::Value::as_table_mut)
        .expect("[sip-config]");
    sip.insert("t1-ms".into(), toml::Value::Integer(650));
    std::fs::write(&path, toml::to_string(&file).expect("serialise")).expect("write");
    let act = pair
        .exec(active, "activate-config")
        .expect("the active answers");
    assert_eq!(act["ok"], Value::Bool(true), "{act}");
    assert!(
        act["data"]["restart_needed"].to_string().contains(&format!(
            "sip-interface access: port {old_port} -> {new_port}"
        )),
        "{act}"
    );

    let running = wait_json(
        "the standby runs the activated configuration",
        Duration::from_secs(10),
        || pair.exec(standby, "show running-config"),
        |v| v["data"]["sip-config"]["t1-ms"] == 650,
    );
    let access = running["data"]["sip-interface"]
        .as_array()
        .and_then(|l| l.iter().find(|i| i["realm"] == "access").cloned())
        .unwrap_or(Value::Null);
    assert_eq!(access["port"], i64::from(new_port), "{running}");
    let saved = std::fs::read_to_string(pair.nodes[standby].config_path()).expect("read");
    assert!(
        saved.contains(&format!("port = {new_port}")),
        "the standby's file:\n{saved}"
    );
    for i in [active, standby] {
        wait_json(
            "config-sync synchronized",
            Duration::from_secs(10),
            || pair.health(i),
            |h| h["config_sync"] == "synchronized",
        );
    }
}
