//! The operator's shell end to end: a real node driven through `sbc acli` in script form
//! (stdin) and one-shot form (`-c`), and read back with `show`, `--json` and the file on disk.
//!
//! Asserts, each test on its own node and ports:
//! - `configure_save_activate_round_trip`: a script sets `options
//!   +critical-memory-abort=switchover` and adds an alarm-threshold (memory, critical, 80);
//!   `show configuration` has it and `show running-config` not yet; `save-config` writes it to
//!   the TOML file (parsed) and keeps the previous file byte for byte as `FILE.bak`;
//!   `activate-config` makes it the running config (text and `--json`, parsed), with nothing
//!   needing a restart; a one-shot session then switches the option to `enabled`, saves and
//!   activates, and the file, `.bak` and running config follow.
//! - `options_list_semantics`: `+name=value` adds, then replaces the same name; `-name` removes;
//!   a bare list replaces the whole list; `""` empties it; removing an absent name and an
//!   unknown option are refused naming what is valid, and change nothing.
//! - `documented_error_paths`: unknown command, bad value and out-of-range value (naming the
//!   valid values), `done` of an invalid element (config unchanged), a script that stops at its
//!   first error with exit code 1 (later lines not run), operational and lifecycle commands
//!   inside configure mode, `lab ballast` without lab-mode in the running config (even when
//!   the editing config has it), `clear-alarm` of an unknown id and with a malformed id.
//! - `stats_workers_dialogs_after_sipp_calls`: while SIPp calls are up `show dialogs --json`
//!   lists them; afterwards `show sip-stats --json` counts exactly SIPp's successful calls as
//!   attempted and answered, none failed or active, `show workers --json` has one entry per
//!   configured worker whose counters add up to the same, and no dialog is left.
//! - `bad_config_files_are_refused`: `sbc run` refuses a file with a wrong type, an unknown key
//!   and an out-of-range value, naming the file, the line (for the first two), the key and the
//!   reason (with the valid range or keys); a running node whose saved file is broken refuses
//!   `activate-config` (exit 1, naming key and reason or line) and keeps its running config.
//! - `reboot_after_the_binary_was_replaced`: `reboot` after the node's binary was replaced on
//!   disk (renamed over) brings the node back.
//! - `an_interface_change_waits_for_a_restart`: a `sip-interface` port changed and activated is
//!   reported as waiting for a restart (also by a second activation), the engine keeps
//!   advertising the bound port in its Via until then (the agent's answer reaches the caller),
//!   `show health` names the pending change (text and JSON), and after `reboot` the new port
//!   is bound and advertised and nothing is pending.
//! - `reboot_restarts_the_node`: after calls, `reboot` re-executes the process (same PID, a
//!   second `sbc ready`), the socket answers again, every counter is back to zero, health is
//!   100, and a new call succeeds.

use std::time::{Duration, Instant};

use sbc_e2e::acli::{acli, acli_json, acli_script, Mgmt};
use sbc_e2e::{
    calls_through_sbc, ports, Load, SbcConfig, SbcNode, Scenario, Sipp, SippResult, TestDir,
};
use serde_json::{json, Value};

/// The lines of `text` whose whitespace-separated words are exactly `words`.
fn has_line(text: &str, words: &[&str]) -> bool {
    text.lines()
        .any(|l| l.split_whitespace().collect::<Vec<_>>() == words)
}

/// `show configuration --json` (the editing config).
fn editing(node: &SbcNode) -> Value {
    acli_json(&node.mgmt_socket(), &["show configuration"])
        .assert_ok()
        .json()
}

/// `show running-config --json`.
fn running(node: &SbcNode) -> Value {
    acli_json(&node.mgmt_socket(), &["show running-config"])
        .assert_ok()
        .json()
}

fn memory_critical_80(thresholds: &Value) -> bool {
    thresholds.as_array().is_some_and(|a| {
        a.iter()
            .any(|t| t["type"] == "memory" && t["severity"] == "critical" && t["value"] == 80)
    })
}

/// The config file parsed as TOML.
fn file_toml(node: &SbcNode) -> toml::Value {
    let text = std::fs::read_to_string(node.config_path()).expect("read config file");
    text.parse::<toml::Value>()
        .unwrap_or_else(|e| panic!("config file is not TOML ({e}):\n{text}"))
}

#[test]
fn configure_save_activate_round_trip() {
    let config = SbcConfig::new();
    let original = config.to_toml();
    let node = SbcNode::start(&original);
    let sock = node.mgmt_socket();

    // Script form: Oracle's order (done, exit, done), then back to the top.
    let script = "configure terminal\n\
                  system\n\
                  system-config\n\
                  options +critical-memory-abort=switchover\n\
                  alarm-threshold\n\
                  type memory\n\
                  severity critical\n\
                  value 80\n\
                  done\n\
                  exit\n\
                  done\n\
                  exit\n\
                  exit\n\
                  exit\n";
    let out = acli_script(&sock, script);
    out.assert_ok();
    assert!(out.stderr.trim().is_empty(), "{}", out.describe());

    // Committed to the editing config, not yet running.
    let ed = editing(&node);
    assert_eq!(
        ed["system-config"]["options"],
        json!(["critical-memory-abort=switchover"]),
        "{ed:#}"
    );
    assert!(
        memory_critical_80(&ed["system-config"]["alarm-threshold"]),
        "{ed:#}"
    );
    let run0 = running(&node);
    assert_eq!(run0["system-config"]["options"], json!([]), "{run0:#}");
    assert!(!memory_critical_80(
        &run0["system-config"]["alarm-threshold"]
    ));
    let text = acli(&sock, &["show configuration"])
        .assert_ok()
        .stdout
        .clone();
    assert!(
        has_line(&text, &["options", "critical-memory-abort=switchover"]),
        "{text}"
    );

    // save-config (script form again): the file holds it, the previous file is the .bak.
    let out = acli_script(&sock, "save-config\n");
    out.assert_ok();
    assert!(out.stdout.contains("saved to"), "{}", out.describe());
    let file = file_toml(&node);
    let sc = &file["system-config"];
    assert_eq!(
        sc["options"].as_array().map(|a| a
            .iter()
            .map(|v| v.as_str().unwrap_or(""))
            .collect::<Vec<_>>()),
        Some(vec!["critical-memory-abort=switchover"]),
        "{file:#?}"
    );
    let th = sc["alarm-threshold"]
        .as_array()
        .expect("alarm-threshold array in the file");
    assert!(
        th.iter().any(|t| t["type"].as_str() == Some("memory")
            && t["severity"].as_str() == Some("critical")
            && t["value"].as_integer() == Some(80)),
        "{file:#?}"
    );
    let bak = node.config_path().with_extension("toml.bak");
    assert_eq!(
        std::fs::read_to_string(&bak).expect("the .bak exists after save-config"),
        original,
        "the backup is the previous file, byte for byte"
    );
    // Saved is not active yet.
    assert_eq!(running(&node)["system-config"]["options"], json!([]));

    // activate-config (one-shot): nothing in this change needs a restart.
    let out = acli(&sock, &["activate-config"]);
    out.assert_ok();
    assert!(
        out.stdout.contains("configuration activated"),
        "{}",
        out.describe()
    );
    assert!(
        out.stdout.contains("all changes are in effect"),
        "{}",
        out.describe()
    );
    let run1 = running(&node);
    assert_eq!(
        run1["system-config"]["options"],
        json!(["critical-memory-abort=switchover"]),
        "{run1:#}"
    );
    assert!(
        memory_critical_80(&run1["system-config"]["alarm-threshold"]),
        "{run1:#}"
    );
    let text = acli(&sock, &["show running-config"])
        .assert_ok()
        .stdout
        .clone();
    assert!(
        has_line(&text, &["options", "critical-memory-abort=switchover"]),
        "{text}"
    );
    for words in [
        &["alarm-threshold"][..],
        &["type", "memory"],
        &["severity", "critical"],
        &["value", "80"],
    ] {
        assert!(has_line(&text, words), "{words:?} not in:\n{text}");
    }
    // activate-config --json says what needs a restart: nothing.
    let act = acli_json(&sock, &["activate-config"]).assert_ok().json();
    assert_eq!(act["activated"], json!(true), "{act}");
    assert_eq!(act["restart_needed"], json!([]), "{act}");

    // One-shot form: switch to enabled, save and activate in one session.
    let saved_before = std::fs::read_to_string(node.config_path()).expect("read file");
    let out = acli(
        &sock,
        &[
            "conf t",
            "system",
            "system-config",
            "options +critical-memory-abort=enabled",
            "done",
            "exit",
            "exit",
            "exit",
            "save-config",
            "activate-config",
        ],
    );
    out.assert_ok();
    let run2 = running(&node);
    assert_eq!(
        run2["system-config"]["options"],
        json!(["critical-memory-abort=enabled"]),
        "+name=value replaces the option of that name: {run2:#}"
    );
    assert!(memory_critical_80(
        &run2["system-config"]["alarm-threshold"]
    ));
    let file = file_toml(&node);
    assert_eq!(
        file["system-config"]["options"].as_array().map(Vec::len),
        Some(1),
        "{file:#?}"
    );
    assert_eq!(
        file["system-config"]["options"][0].as_str(),
        Some("critical-memory-abort=enabled")
    );
    assert_eq!(
        std::fs::read_to_string(&bak).expect("read .bak"),
        saved_before,
        "the .bak is the version saved before"
    );
}

/// Enters system-config, runs `options_line`, then `done`; returns the one-shot output.
fn set_options(node: &SbcNode, options_line: &str) -> sbc_e2e::acli::AcliOutput {
    acli(
        &node.mgmt_socket(),
        &[
            "configure terminal",
            "system",
            "system-config",
            options_line,
            "done",
        ],
    )
}

fn editing_options(node: &SbcNode) -> Value {
    editing(node)["system-config"]["options"].clone()
}

#[test]
fn options_list_semantics() {
    let node = SbcNode::start_config(&SbcConfig::new());
    assert_eq!(editing_options(&node), json!([]));

    set_options(&node, "options +critical-memory-abort=enabled").assert_ok();
    assert_eq!(
        editing_options(&node),
        json!(["critical-memory-abort=enabled"])
    );

    // +name=value for a name already there replaces it (one entry, new value).
    set_options(&node, "options +critical-memory-abort=switchover").assert_ok();
    assert_eq!(
        editing_options(&node),
        json!(["critical-memory-abort=switchover"])
    );

    // -name removes it.
    set_options(&node, "options -critical-memory-abort").assert_ok();
    assert_eq!(editing_options(&node), json!([]));

    // -name of a name not in the list is refused, naming what is valid; nothing changes.
    let out = set_options(&node, "options -critical-memory-abort");
    out.assert_failed();
    assert!(out.stderr.contains("not in the list"), "{}", out.describe());
    assert!(out.stderr.contains("valid"), "{}", out.describe());
    assert_eq!(editing_options(&node), json!([]));

    // A bare list replaces the whole list.
    set_options(&node, "options +critical-memory-abort=enabled").assert_ok();
    set_options(&node, "options critical-memory-abort=disabled").assert_ok();
    assert_eq!(
        editing_options(&node),
        json!(["critical-memory-abort=disabled"])
    );

    // An unknown option, or a bad value of a known one, is refused naming the valid ones.
    for (line, wrong, valid) in [
        ("options +a", "\"a\"", "critical-memory-abort"),
        ("options +x=1", "\"x\"", "critical-memory-abort"),
        (
            "options +critical-memory-abort=bogus",
            "critical-memory-abort=bogus",
            "critical-memory-abort=switchover",
        ),
        ("options y=1 z", "\"y\"", "critical-memory-abort"),
    ] {
        let out = set_options(&node, line);
        out.assert_failed();
        assert!(
            out.stderr.contains(wrong) && out.stderr.contains(valid),
            "{line:?} must name {wrong} and {valid}\n{}",
            out.describe()
        );
        assert_eq!(
            editing_options(&node),
            json!(["critical-memory-abort=disabled"]),
            "{line:?} changed the options"
        );
    }

    // "" empties the list.
    set_options(&node, "options \"\"").assert_ok();
    assert_eq!(editing_options(&node), json!([]));

    // Changes not `done` are discarded on exit, and the reply says so.
    let out = acli(
        &node.mgmt_socket(),
        &[
            "configure terminal",
            "system",
            "system-config",
            "options +critical-memory-abort=enabled",
            "exit",
        ],
    );
    out.assert_ok();
    assert!(out.stdout.contains("discarded"), "{}", out.describe());
    assert_eq!(editing_options(&node), json!([]));
}

#[test]
fn documented_error_paths() {
    let mut node = SbcNode::start_config(&SbcConfig::new());
    let sock = node.mgmt_socket();
    // One threshold to start with, so that a duplicate can be refused at `done`.
    acli(
        &sock,
        &[
            "configure terminal",
            "system",
            "system-config",
            "alarm-threshold",
            "type memory",
            "severity critical",
            "value 80",
            "done",
        ],
    )
    .assert_ok();
    let before = editing(&node);
    assert!(memory_critical_80(
        &before["system-config"]["alarm-threshold"]
    ));

    // Unknown command: names the word and what is valid here.
    let out = acli(&sock, &["bogus"]);
    out.assert_failed();
    assert!(
        out.stderr.contains("unknown command \"bogus\""),
        "{}",
        out.describe()
    );
    assert!(
        out.stderr.contains("valid here") && out.stderr.contains("configure"),
        "{}",
        out.describe()
    );
    let out = acli(&sock, &["show bogus"]);
    out.assert_failed();
    assert!(
        out.stderr.contains("\"bogus\"") && out.stderr.contains("running-config"),
        "{}",
        out.describe()
    );

    // Bad values name the word and the valid values, and change nothing.
    for (attr_line, wrong, valid) in [
        ("memory-source foo", "\"foo\"", "host | cgroup | process"),
        ("lab-mode maybe", "\"maybe\"", "enabled | disabled"),
        ("alarm-iteration-ms many", "many", "valid"),
    ] {
        let out = acli(
            &sock,
            &["configure terminal", "system", "system-config", attr_line],
        );
        out.assert_failed();
        assert!(
            out.stderr.contains(wrong) && out.stderr.contains(valid),
            "{attr_line:?}\n{}",
            out.describe()
        );
    }
    for (attr_line, wrong, valid) in [
        ("severity bad", "\"bad\"", "minor | major | critical"),
        ("value 500", "500", "1..=100"),
        ("type nonsense", "\"nonsense\"", "memory"),
    ] {
        let out = acli(
            &sock,
            &[
                "configure terminal",
                "system",
                "system-config",
                "alarm-threshold",
                attr_line,
            ],
        );
        out.assert_failed();
        assert!(
            out.stderr.contains(wrong) && out.stderr.contains(valid),
            "{attr_line:?}\n{}",
            out.describe()
        );
    }
    assert_eq!(editing(&node), before, "refused values changed the config");

    // `done` with an invalid element (a second memory/critical threshold) is refused and the
    // editing config is unchanged.
    let out = acli(
        &sock,
        &[
            "configure terminal",
            "system",
            "system-config",
            "alarm-threshold",
            "type memory",
            "severity critical",
            "value 90",
            "done",
        ],
    );
    out.assert_failed();
    assert!(out.stderr.contains("duplicate"), "{}", out.describe());
    assert!(out.stderr.contains("valid"), "{}", out.describe());
    assert_eq!(editing(&node), before, "a refused done changed the config");

    // A script stops at its first error with exit code 1: line 1 ran, line 3 on did not.
    let out = acli_script(
        &sock,
        "show health\nbogus\nconfigure terminal\nsystem\nsystem-config\nhostname after-error\ndone\n",
    );
    out.assert_failed();
    assert!(out.stdout.contains("health-score"), "{}", out.describe());
    assert!(
        out.stderr.contains("% unknown command \"bogus\""),
        "{}",
        out.describe()
    );
    assert!(
        out.stderr.contains("% stopped at line 2: bogus"),
        "{}",
        out.describe()
    );
    assert_eq!(
        editing(&node)["system-config"]["hostname"],
        before["system-config"]["hostname"]
    );
    // The one-shot form stops at its first error too.
    let out = acli(
        &sock,
        &[
            "bogus",
            "configure terminal",
            "system",
            "system-config",
            "hostname x",
            "done",
        ],
    );
    out.assert_failed();
    assert_eq!(editing(&node), before);

    // Operational and lifecycle commands are refused inside configure mode, pointing up.
    for line in [
        "display-alarms",
        "clear-alarm 131073 sbcd",
        "reboot",
        "save-config",
        "activate-config",
        "lab ballast 1",
    ] {
        let out = acli(&sock, &["configure terminal", line]);
        out.assert_failed();
        let word = line.split_whitespace().next().unwrap_or(line);
        assert!(
            out.stderr.contains(&format!("unknown command \"{word}\""))
                && out.stderr.contains("top level"),
            "{line:?} inside configure\n{}",
            out.describe()
        );
    }
    // ...while `show` works everywhere.
    acli(
        &sock,
        &[
            "configure terminal",
            "system",
            "system-config",
            "show health",
        ],
    )
    .assert_ok();
    assert!(
        node.ready_count() == 1,
        "the refused reboot restarted the node"
    );

    // lab ballast without lab-mode.
    let out = acli(&sock, &["lab ballast 8"]);
    out.assert_failed();
    assert!(out.stderr.contains("lab-mode"), "{}", out.describe());
    // clear-alarm of an id that is not raised, and of a malformed id.
    let out = acli(&sock, &["clear-alarm 999 sbcd"]);
    out.assert_failed();
    assert!(
        out.stderr.contains("no raised alarm 999"),
        "{}",
        out.describe()
    );
    let out = acli(&sock, &["clear-alarm 131073 sbcd"]);
    out.assert_failed();
    assert!(out.stderr.contains("131073"), "{}", out.describe());
    let out = acli(&sock, &["clear-alarm abc sbcd"]);
    out.assert_failed();
    assert!(
        out.stderr.contains("\"abc\"") && out.stderr.contains("clear-alarm <id> <task>"),
        "{}",
        out.describe()
    );
    let out = acli(&sock, &["clear-alarm 131073"]);
    out.assert_failed();
    assert!(
        out.stderr.contains("clear-alarm <id> <task>"),
        "{}",
        out.describe()
    );

    // lab-mode enabled in the editing config only: still refused (the running config decides).
    acli(
        &sock,
        &[
            "configure terminal",
            "system",
            "system-config",
            "lab-mode enabled",
            "done",
        ],
    )
    .assert_ok();
    let out = acli(&sock, &["lab ballast 8"]);
    out.assert_failed();
    assert!(out.stderr.contains("lab-mode"), "{}", out.describe());
    let mem = acli_json(&sock, &["show memory"]).assert_ok().json();
    assert_eq!(mem["ballast_mb"], json!(0), "{mem}");
    node.assert_alive();
}

/// The group named `name` in `show workers --json`.
fn group<'a>(workers: &'a Value, name: &str) -> &'a Value {
    workers["groups"]
        .as_array()
        .and_then(|a| a.iter().find(|g| g["name"] == json!(name)))
        .unwrap_or(&Value::Null)
}

#[test]
fn stats_workers_dialogs_after_sipp_calls() {
    let config = SbcConfig::new();
    let node = SbcNode::start_config(&config);
    let sock = node.mgmt_socket();
    let dir = node.dir().clone();
    let calls = 5;

    // Calls held 3 s each (-d), so that the dialogs can be seen while they are up.
    let uas = Sipp::new(&dir, "uas")
        .builtin("uas")
        .local(config.agent)
        .calls(calls)
        .timeout(Duration::from_secs(60))
        .spawn();
    sbc_e2e::sipp::wait_listening(config.agent, false, Duration::from_secs(5));
    let uac = Sipp::new(&dir, "uac")
        .builtin("uac")
        .local(std::net::SocketAddr::new(
            config.access.ip(),
            ports::free_port(),
        ))
        .remote(config.access)
        .calls(calls)
        .rate(10)
        .args(["-d", "3000"])
        .timeout(Duration::from_secs(40))
        .spawn();
    let mut mgmt = Mgmt::connect(&sock);
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut seen_dialogs = Value::Null;
    while Instant::now() < deadline {
        let d = mgmt.data("show dialogs");
        if d["dialogs"].as_array().is_some_and(|a| !a.is_empty()) {
            seen_dialogs = d;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        seen_dialogs["dialogs"]
            .as_array()
            .is_some_and(|a| !a.is_empty()),
        "show dialogs never listed a dialog while calls were up"
    );
    let stats_during = mgmt.data("show sip-stats");
    let uac: SippResult = uac.wait();
    let uas = uas.wait_at_most(Duration::from_secs(15));
    uac.assert_success(u64::from(calls));
    uas.assert_success(u64::from(calls));
    assert!(
        stats_during["calls_active"]
            .as_u64()
            .is_some_and(|n| n >= 1),
        "calls_active while calls were up: {stats_during}"
    );

    let ok = uac.stats.successful;
    let stats = acli_json(&sock, &["show sip-stats"]).assert_ok().json();
    let c = &stats["counters"];
    assert_eq!(c["calls_attempted"].as_u64(), Some(ok), "{stats:#}");
    assert_eq!(c["calls_answered"].as_u64(), Some(ok), "{stats:#}");
    assert_eq!(c["calls_failed"].as_u64(), Some(0), "{stats:#}");
    assert_eq!(c["rejected_503"].as_u64(), Some(0), "{stats:#}");
    assert_eq!(stats["calls_active"].as_u64(), Some(0), "{stats:#}");
    // INVITE, ACK and BYE from the caller for each call, at least.
    assert!(
        c["requests_in"].as_u64().is_some_and(|n| n >= 3 * ok),
        "{stats:#}"
    );

    // One group per UDP interface, one TCP group, the timer thread.
    let workers = acli_json(&sock, &["show workers"]).assert_ok().json();
    let names: Vec<&str> = workers["groups"]
        .as_array()
        .map(|a| a.iter().filter_map(|g| g["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        names,
        ["udp:access", "udp:core", "tcp", "timer"],
        "{workers:#}"
    );
    for name in ["udp:access", "udp:core"] {
        let g = group(&workers, name);
        assert_eq!(g["workers"].as_u64(), Some(config.workers as u64), "{g:#}");
        assert_eq!(g["scheduling"], json!("prsm"), "{g:#}");
        assert_eq!(g["profile"], Value::Null, "{g:#}");
        let shards: u64 = g["members"]
            .as_array()
            .map(|m| m.iter().filter_map(|w| w["shards"].as_u64()).sum())
            .unwrap_or(0);
        assert_eq!(shards, 64, "every shard is served by one worker: {g:#}");
        assert_eq!(g["rejected_queue_full"].as_u64(), Some(0), "{g:#}");
    }
    let text = acli(&sock, &["show workers"]).assert_ok().stdout.clone();
    assert!(
        text.lines().any(|l| l.starts_with("udp:access")
            && l.contains("prsm")
            && l.contains("fixed count")),
        "{text}"
    );
    let dialogs = acli_json(&sock, &["show dialogs"]).assert_ok().json();
    assert_eq!(dialogs["dialogs"], json!([]), "{dialogs:#}");

    // Several show commands in one --json session: one document each.
    let docs = acli_json(&sock, &["show sip-stats", "show workers", "show dialogs"])
        .assert_ok()
        .json_docs();
    assert_eq!(docs.len(), 3);
    assert_eq!(docs[0]["counters"]["calls_answered"].as_u64(), Some(ok));
    // And the text form says the same.
    let text = acli(&sock, &["show sip-stats"]).assert_ok().stdout.clone();
    assert!(
        has_line(&text, &["calls-answered", &ok.to_string()]),
        "{text}"
    );
    assert!(has_line(&text, &["calls-active", "0"]), "{text}");
}

#[test]
fn reboot_restarts_the_node() {
    let config = SbcConfig::new();
    // Its own copy of the binary: a concurrent `cargo build` must not pull it from under the
    // re-exec (see `reboot_after_the_binary_was_replaced`).
    let mut node = SbcNode::start_private(&config.to_toml());
    let sock = node.mgmt_socket();
    let pid = node.pid();
    let load = Load {
        calls: 2,
        rate: 10,
        tcp: false,
        timeout: Duration::from_secs(30),
    };
    let (uac, _uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::Builtin("uac"),
        Scenario::Builtin("uas"),
        load,
    );
    uac.assert_success(2);
    let stats = acli_json(&sock, &["show sip-stats"]).assert_ok().json();
    assert_eq!(
        stats["counters"]["calls_answered"].as_u64(),
        Some(2),
        "{stats:#}"
    );

    let out = acli_json(&sock, &["reboot"]);
    out.assert_ok();
    assert_eq!(out.json()["rebooting"], json!(true), "{}", out.describe());
    assert!(
        node.wait_ready_count(2, Duration::from_secs(20)),
        "no second `sbc ready` within 20 s of reboot\n--- stderr ---\n{}",
        sbc_e2e::tail_of_file(node.stderr_path(), 40)
    );
    node.assert_alive();
    assert_eq!(node.pid(), pid, "reboot re-executes the same process");
    assert!(
        sbc_e2e::acli::wait_socket_answers(&sock, Duration::from_secs(10)),
        "the management socket does not answer after reboot"
    );
    let stats = acli_json(&sock, &["show sip-stats"]).assert_ok().json();
    let counters = stats["counters"].as_object().expect("counters object");
    for (name, value) in counters {
        assert_eq!(value, &json!(0), "{name} not reset by reboot: {stats:#}");
    }
    assert_eq!(stats["calls_active"], json!(0));
    let health = acli_json(&sock, &["show health"]).assert_ok().json();
    assert_eq!(health["score"], json!(100), "{health:#}");
    // The interfaces are bound again: a call goes through.
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::Builtin("uac"),
        Scenario::Builtin("uas"),
        Load { calls: 1, ..load },
    );
    uac.assert_success(1);
    uas.assert_success(1);
    let stats = acli_json(&sock, &["show sip-stats"]).assert_ok().json();
    assert_eq!(
        stats["counters"]["calls_answered"].as_u64(),
        Some(1),
        "{stats:#}"
    );
}

/// The `Error:` paragraph of a node's stderr (without the backtrace), or its tail.
fn error_of(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    match text.find("Error:") {
        Some(i) => text[i..]
            .split("Stack backtrace")
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned(),
        None => sbc_e2e::tail_of_file(path, 12),
    }
}

/// `reboot` after the binary the node was started from was replaced on disk (an upgrade, or a
/// `cargo build` in a working tree): the node must come back, not exit.
#[test]
fn reboot_after_the_binary_was_replaced() {
    let config = SbcConfig::new();
    let dir = TestDir::for_current_test();
    std::fs::write(dir.file("sbc.toml"), config.to_toml()).expect("write config");
    let bin = sbc_e2e::sbc::private_binary(&dir);
    let mut node = SbcNode::start_existing_with(&dir, &bin);
    let pid = node.pid();
    // Replace the file the way installers and linkers do: a new file renamed over the old.
    let new = dir.file("sbc-bin.new");
    std::fs::copy(sbc_e2e::sbc::sbc_binary(), &new).expect("copy the binary");
    std::fs::rename(&new, &bin).expect("rename over the running binary");

    acli(&node.mgmt_socket(), &["reboot"]).assert_ok();
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.ready_count() < 2 && node.is_alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let back = node.ready_count() >= 2;
    let alive = node.is_alive();
    assert!(
        back && alive,
        "after `reboot` with its binary replaced on disk the node {} (pid {pid})\n--- stderr ---\n{}",
        if alive { "did not print `sbc ready` again" } else { "exited" },
        error_of(node.stderr_path())
    );
    assert_eq!(node.pid(), pid);
    assert!(sbc_e2e::acli::wait_socket_answers(
        &node.mgmt_socket(),
        Duration::from_secs(10)
    ));
}

/// Runs `sbc run --config FILE` expecting it to refuse the file: returns its stderr.
pub(crate) fn run_refused(dir: &TestDir, file: &std::path::Path) -> String {
    let mut child = std::process::Command::new(sbc_e2e::sbc::sbc_binary())
        .arg("run")
        .arg("--config")
        .arg(file)
        .arg("--mgmt-socket")
        .arg(dir.file("refused.sock"))
        .env("RUST_BACKTRACE", "0")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start sbc run");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    assert!(
        status.is_some_and(|s| !s.success()),
        "sbc run accepted {} (status {status:?}):\n{stderr}",
        file.display()
    );
    stderr
}

#[test]
fn bad_config_files_are_refused() {
    let config = SbcConfig::new();
    let good = config.to_toml();
    let dir = TestDir::for_current_test();

    // At start-up: refused with the file, the line, the key and the reason.
    for (name, text, needles) in [
        (
            "type.toml",
            "[sip-config]\nt1-ms = 500\nworkers = \"two\"\n",
            &["type.toml", "line 3", "workers", "invalid type"][..],
        ),
        (
            "unknown.toml",
            "[sip-config]\nt1-ms = 500\nbogus-key = 1\n",
            &[
                "unknown.toml",
                "line 3",
                "bogus-key",
                "expected one of",
                "t1-ms",
            ],
        ),
        (
            "range.toml",
            "[sip-config]\nt1-ms = 0\n",
            &[
                "range.toml",
                "sip-config.t1-ms",
                "out of range",
                "10..=10000",
            ],
        ),
    ] {
        let file = dir.file(name);
        std::fs::write(&file, text).expect("write bad file");
        let stderr = run_refused(&dir, &file);
        for needle in needles {
            assert!(
                stderr.contains(needle),
                "{name}: {needle:?} not in the refusal:\n{stderr}"
            );
        }
    }

    // A running node keeps its running config when activate-config would fail.
    let node = SbcNode::start_in(&dir, &good);
    let sock = node.mgmt_socket();
    let before = running(&node);
    for (bad, needles) in [
        (
            good.replace("t1-ms = 500", "t1-ms = 0"),
            &["sip-config.t1-ms", "out of range", "10..=10000"][..],
        ),
        (
            format!("{good}\n[sip-config]\nt1-ms = 600\n"),
            &["line", "duplicate"],
        ),
    ] {
        std::fs::write(node.config_path(), &bad).expect("write a broken file");
        let out = acli(&sock, &["activate-config"]);
        out.assert_failed();
        for needle in needles {
            assert!(
                out.stderr.contains(needle),
                "{needle:?}\n{}",
                out.describe()
            );
        }
        assert_eq!(
            running(&node),
            before,
            "a failed activate-config changed the running config"
        );
    }
    std::fs::write(node.config_path(), &good).expect("restore");
    acli(&sock, &["activate-config"]).assert_ok();
    assert_eq!(running(&node), before);
}

/// The port in the top Via's sent-by of `msg` (`SIP/2.0/UDP host:port;...`).
fn top_via_port(msg: &sbc_e2e::raw::SipMsg) -> Option<u16> {
    let via = msg.header_all("via").into_iter().next()?;
    let sent_by = via.split_whitespace().nth(1)?.split(';').next()?;
    sent_by.rsplit(':').next()?.parse().ok()
}

/// One INVITE from a raw caller to the access interface, answered 486 by a raw agent to the
/// top Via's sent-by as RFC 3261 §18.2.2 has it: returns the Via port the agent saw and
/// whether the caller got the 486.
fn invite_answered_by_via(config: &SbcConfig, call_id: &str) -> (Option<u16>, bool) {
    use sbc_e2e::raw::{ack_for, request, response_to, RawUdp};
    let agent = RawUdp::bind_addr(config.agent);
    let caller = RawUdp::bind(config.access.ip());
    let invite = request(
        "INVITE",
        caller.local_addr(),
        config.access,
        "UDP",
        call_id,
        &format!("z9hG4bK-{call_id}"),
        &[],
    );
    caller.send_to(&invite, config.access);
    let mut skipped = Vec::new();
    let Some((got, _)) = agent.recv_sip_until(
        Duration::from_secs(5),
        |m| m.method() == Some("INVITE"),
        &mut skipped,
    ) else {
        return (None, false);
    };
    let port = top_via_port(&got);
    let via = got.header_all("via").into_iter().next().unwrap_or_default();
    let sent_by = via
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.split(';').next())
        .and_then(|s| s.parse::<std::net::SocketAddr>().ok());
    if let Some(to) = sent_by {
        agent.send_to(&response_to(&got, 486, "Busy Here", "agent"), to);
    }
    let answered = caller.recv_sip_until(
        Duration::from_secs(5),
        |m| m.status() == Some(486),
        &mut skipped,
    );
    if let Some((resp, _)) = &answered {
        caller.send_to(&ack_for(&invite, resp), config.access);
    }
    (port, answered.is_some())
}

/// A `sip-interface` port changed in the saved file and activated: `activate-config` says
/// it waits for a restart, naming the interface and the ports, and until then the node keeps
/// advertising the port it listens on (the agent's answer sent to the Via arrives; before,
/// the engine put the new port in its Via at once while nothing listened there). A second
/// activation still reports it; after `reboot` the new port is bound and advertised.
#[test]
fn an_interface_change_waits_for_a_restart() {
    let config = SbcConfig::new();
    let node = SbcNode::start_private(&config.to_toml());
    let sock = node.mgmt_socket();
    let (port, answered) = invite_answered_by_via(&config, "before-change");
    assert_eq!(port, Some(config.core.port()), "Via of the core leg");
    assert!(answered, "the caller never got the agent's 486");

    let new_port = ports::free_port();
    let mut file = file_toml(&node);
    let interfaces = file["sip-interface"]
        .as_array_mut()
        .expect("sip-interface array");
    for i in interfaces {
        if i["realm"].as_str() == Some("core") {
            i["port"] = toml::Value::Integer(i64::from(new_port));
        }
    }
    std::fs::write(
        node.config_path(),
        toml::to_string(&file).expect("serialise"),
    )
    .expect("write the saved file");
    let expected = format!(
        "sip-interface core: port {} -> {new_port}: listeners are bound at start",
        config.core.port()
    );
    for _ in 0..2 {
        let act = acli_json(&sock, &["activate-config"]).assert_ok().json();
        assert_eq!(act["restart_needed"], json!([expected]), "{act}");
    }
    let text = acli(&sock, &["activate-config"]).assert_ok().stdout.clone();
    assert!(
        text.contains("take effect after a restart") && text.contains(&expected),
        "{text}"
    );
    // show health names what waits for the reboot, in text and JSON.
    let health = acli_json(&sock, &["show health"]).assert_ok().json();
    assert_eq!(health["restart_needed"], json!([expected]), "{health}");
    let text = acli(&sock, &["show health"]).assert_ok().stdout.clone();
    assert!(
        text.contains("restart-needed") && text.contains(&expected),
        "{text}"
    );
    let (port, answered) = invite_answered_by_via(&config, "after-activate");
    assert_eq!(
        port,
        Some(config.core.port()),
        "the engine advertises the bound port until a restart"
    );
    assert!(answered, "the answer to the advertised Via was lost");

    acli_json(&sock, &["reboot"]).assert_ok();
    assert!(
        node.wait_ready_count(2, Duration::from_secs(20)),
        "no second `sbc ready` within 20 s of reboot\n--- stderr ---\n{}",
        sbc_e2e::tail_of_file(node.stderr_path(), 40)
    );
    assert!(
        sbc_e2e::acli::wait_socket_answers(&sock, Duration::from_secs(10)),
        "the management socket does not answer after reboot"
    );
    let (port, answered) = invite_answered_by_via(&config, "after-reboot");
    assert_eq!(port, Some(new_port), "the new port after the restart");
    assert!(
        answered,
        "the caller never got the agent's 486 after the restart"
    );
    let act = acli_json(&sock, &["activate-config"]).assert_ok().json();
    assert_eq!(act["restart_needed"], json!([]), "{act}");
    let health = acli_json(&sock, &["show health"]).assert_ok().json();
    assert_eq!(health["restart_needed"], json!([]), "{health}");
}
