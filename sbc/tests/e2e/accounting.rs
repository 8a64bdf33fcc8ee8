//! Accounting (`account-config`) against a real FreeRADIUS (Debian's `freeradius`, started by
//! the test on loopback with a `detail` file whose raw entries are counted, not distinct ids):
//!
//! - 100 SIPp calls of 1 s and 20 refused ones (486): one Start and one Stop per call, the
//!   Stop's duration within 100 ms of SIPp's pause; one Stop per refused attempt with its
//!   status; no other entry; the CSV files hold the same 220 records and rotated at
//!   `max-file-size`; `show accounting` and `/metrics`-level counters agree.
//! - FreeRADIUS stopped for 30 s while calls come and go, then started again: every record
//!   arrives, Start before Stop for each call, those generated during the outage with
//!   `Acct-Delay-Time`.
//! - The node killed (-9) with records it could not deliver (FreeRADIUS down), then started
//!   again on the same spool: the survivor's spool is replayed and every record arrives once
//!   more than it was acknowledged (none before), with its original times.
//! - A memory window of 16 records (`SBC_ACCOUNTING_MEMORY_WINDOW`, the tests' knob) and
//!   FreeRADIUS down while 40 calls come and go: `show accounting` counts records on disk only,
//!   never more than 16 in memory; FreeRADIUS back, every record arrives once, Start before
//!   Stop. The same killed (-9) during the outage and started again: all delivered, once.
//! - The smallest spool (`spool-max-size 1`, 1 MiB) filled while FreeRADIUS is down: the
//!   critical alarm 131078 (task `accounting`) in `display-alarms`, `sbcAlarmTrap` and
//!   `sbcAccountingSpoolTrap` (full) at snmptrapd; FreeRADIUS back, the records delivered: the
//!   alarm cleared, `sbcAlarmClearTrap` and `sbcAccountingSpoolTrap` (has room).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use sbc_e2e::freeradius::{DetailEntry, FreeRadius};
use sbc_e2e::pair::mgmt_exec;
use sbc_e2e::sbc::sbc_binary;
use sbc_e2e::sipp::{run_pair, Sipp, SippResult};
use sbc_e2e::snmp::Trapd;
use sbc_e2e::{ports, SbcConfig, SbcNode, Scenario, TestDir};
use serde_json::Value;

const SECRET: &str = "acct-test-secret-7f3a";

fn accounting_toml(dir: &Path, radius: Option<SocketAddr>, extra: &str) -> String {
    let mut s = format!(
        "\n[account-config]\nstate = \"enabled\"\nfile-output = \"enabled\"\n\
         file-path = \"{}\"\nmax-file-size = 20000\nmax-files = 100\n\
         spool-path = \"{}\"\n{extra}",
        dir.join("cdr").display(),
        dir.join("spool").display(),
    );
    if let Some(addr) = radius {
        s.push_str(&format!(
            "\n[[account-config.account-server]]\nhostname = \"{}\"\nport = {}\n\
             secret = \"{SECRET}\"\nrestart-delay = 2\n",
            addr.ip(),
            addr.port()
        ));
    }
    s
}

/// [`calls`] with SIPp's built-in `uac` and `uas`.
fn builtin_calls(
    node: &SbcNode,
    config: &SbcConfig,
    name: &str,
    count: u32,
    rate: u32,
    pause_ms: u32,
) -> (SippResult, SippResult) {
    calls(
        node,
        config,
        name,
        Scenario::Builtin("uac"),
        Scenario::Builtin("uas"),
        count,
        rate,
        pause_ms,
    )
}

/// Runs `calls` calls through `node`: SIPp's UAC with `uac` (pausing `pause_ms` after the ACK
/// for the built-in one) against SIPp's UAS with `uas` at the core agent.
#[allow(clippy::too_many_arguments)] // one SIPp run and its load
fn calls(
    node: &SbcNode,
    config: &SbcConfig,
    name: &str,
    uac: Scenario<'_>,
    uas: Scenario<'_>,
    calls: u32,
    rate: u32,
    pause_ms: u32,
) -> (SippResult, SippResult) {
    let dir = node.dir().clone();
    let uac_local = SocketAddr::new(config.access.ip(), ports::free_port());
    let uas_sipp = Sipp::new(&dir, &format!("{name}-uas"))
        .play(uas)
        .local(config.agent)
        .calls(calls)
        .timeout(Duration::from_secs(90));
    let uac_sipp = Sipp::new(&dir, &format!("{name}-uac"))
        .play(uac)
        .local(uac_local)
        .remote(config.access)
        .calls(calls)
        .rate(rate)
        .args(["-d", &pause_ms.to_string()])
        .timeout(Duration::from_secs(70));
    run_pair(uas_sipp, config.agent, false, uac_sipp)
}

fn show_accounting(node: &SbcNode) -> Value {
    mgmt_exec(&node.mgmt_socket(), "show accounting")
        .map(|r| r["data"].clone())
        .unwrap_or(Value::Null)
}

/// Waits until `show accounting` says `field` reached `n` (bounded).
fn wait_accounting(node: &SbcNode, field: &str, n: u64, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let a = show_accounting(node);
        if a[field].as_u64().unwrap_or(0) >= n || Instant::now() > deadline {
            return a;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The detail entries by Acct-Session-Id, in the order FreeRADIUS wrote them.
fn by_session(entries: &[DetailEntry]) -> BTreeMap<String, Vec<&DetailEntry>> {
    let mut out: BTreeMap<String, Vec<&DetailEntry>> = BTreeMap::new();
    for e in entries {
        out.entry(e.get("Acct-Session-Id").unwrap_or_default().to_owned())
            .or_default()
            .push(e);
    }
    out
}

fn status_type(e: &DetailEntry) -> &str {
    e.get("Acct-Status-Type").unwrap_or_default()
}

/// Every CSV record line (headers left out) of every CDR file in `dir`, and the files' sizes.
fn csv_records(dir: &Path) -> (Vec<Vec<String>>, Vec<u64>) {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    names.sort();
    let mut rows = Vec::new();
    let mut sizes = Vec::new();
    for p in names {
        let text = std::fs::read_to_string(&p).expect("a CDR file");
        sizes.push(text.len() as u64);
        for (i, line) in text.lines().enumerate() {
            assert!(
                i > 0 || line.starts_with("node,session-id,record"),
                "header first"
            );
            if i > 0 {
                rows.push(line.split(',').map(str::to_owned).collect());
            }
        }
    }
    (rows, sizes)
}

#[test]
fn every_call_has_one_start_and_one_stop_at_freeradius_and_in_the_csv_files() {
    let dir = TestDir::new("accounting-calls");
    let radius = FreeRadius::start_in(&dir, SECRET).expect("FreeRADIUS");
    let mut config = SbcConfig::new();
    config.extra_toml = accounting_toml(dir.path(), Some(radius.addr()), "");
    let mut node = SbcNode::start_in(&dir, &config.to_toml());

    let (uac, uas) = builtin_calls(&node, &config, "ok", 100, 20, 1000);
    uac.assert_success(100);
    uas.assert_success(100);
    let (uac, uas) = calls(
        &node,
        &config,
        "busy",
        Scenario::File("uac_busy.xml"),
        Scenario::File("uas_busy.xml"),
        20,
        20,
        0,
    );
    uac.assert_success(20);
    uas.assert_success(20);
    node.assert_alive();

    let a = wait_accounting(&node, "records_delivered", 220, Duration::from_secs(20));
    let entries = radius.wait_for_entries(220, Duration::from_secs(5));
    // A moment more: nothing else may arrive.
    std::thread::sleep(Duration::from_millis(500));
    let entries_after = radius.entries();
    assert_eq!(entries_after.len(), 220, "raw entries: {a}");
    assert_eq!(entries.len(), 220);
    let sessions = by_session(&entries_after);
    let answered: Vec<_> = sessions.values().filter(|v| v.len() == 2).collect();
    let refused: Vec<_> = sessions.values().filter(|v| v.len() == 1).collect();
    assert_eq!((answered.len(), refused.len()), (100, 20), "{sessions:?}");
    for v in answered {
        assert_eq!((status_type(v[0]), status_type(v[1])), ("Start", "Stop"));
        let stop = v[1];
        let ms: u64 = stop
            .get("Acme-Custom-VSA-202")
            .and_then(|d| d.parse().ok())
            .expect("the duration in ms");
        assert!(
            (1000..1100).contains(&ms),
            "duration {ms} ms for SIPp's 1000 ms pause"
        );
        assert_eq!(stop.get("Acct-Session-Time"), Some("1"));
        assert_eq!(stop.get("Acct-Terminate-Cause"), Some("User-Request"));
        assert_eq!(stop.get("Acme-Custom-VSA-201"), Some("caller"));
        assert_eq!(stop.get("Acme-Session-Ingress-Realm"), Some("access"));
        assert_eq!(stop.get("Acme-Session-Egress-Realm"), Some("core"));
        assert_eq!(stop.get("Acme-Terminating-Trunk-Group"), Some("core"));
        assert_eq!(stop.get("Acme-SIP-Status"), Some("200"));
        assert!(stop
            .get("h323-connect-time")
            .is_some_and(|t| t.contains("UTC")));
        assert_eq!(stop.get("Acct-Delay-Time"), Some("0"));
    }
    for v in refused {
        assert_eq!(status_type(v[0]), "Stop");
        assert_eq!(v[0].get("Acme-SIP-Status"), Some("486"));
        assert_eq!(v[0].get("Acme-Custom-VSA-201"), Some("callee"));
        assert_eq!(v[0].get("Acct-Session-Time"), Some("0"));
    }
    assert_eq!(a["records_generated"], 220);
    assert_eq!(a["records_refused"], 0);
    assert_eq!(a["servers"][0]["state"], "up");
    assert_eq!(a["servers"][0]["acknowledged"], 220);

    // The CSV files: the same 220 records, rotated at max-file-size (20,000 bytes).
    let (rows, sizes) = csv_records(&dir.path().join("cdr"));
    assert_eq!(rows.len(), 220);
    assert!(sizes.len() >= 3, "rotated: {sizes:?}");
    assert!(sizes.iter().all(|s| *s <= 20_000), "{sizes:?}");
    let csv_sessions: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r[1].as_str()).collect();
    let radius_sessions: std::collections::BTreeSet<&str> =
        sessions.keys().map(String::as_str).collect();
    assert_eq!(csv_sessions, radius_sessions);
    // The spool gave its room back: every record acknowledged, one segment left.
    assert_eq!(a["spool_pending"], 0);
    node.stop();
}

#[test]
fn a_thirty_second_radius_outage_loses_nothing_and_keeps_each_call_in_order() {
    let dir = TestDir::new("accounting-outage");
    let mut radius = FreeRadius::start_in(&dir, SECRET).expect("FreeRADIUS");
    let mut config = SbcConfig::new();
    config.extra_toml = accounting_toml(dir.path(), Some(radius.addr()), "");
    let node = SbcNode::start_in(&dir, &config.to_toml());

    radius.stop().expect("FreeRADIUS stops");
    let stopped = Instant::now();
    // 20 calls of 2 s at 2 calls/s: all made and ended while the server is down.
    let (uac, _) = builtin_calls(&node, &config, "outage", 20, 2, 2000);
    uac.assert_success(20);
    let during = show_accounting(&node);
    assert_eq!(during["records_generated"], 40, "{during}");
    assert_eq!(during["records_delivered"], 0);
    assert_ne!(during["servers"][0]["state"], "up", "{during}");
    let rest = Duration::from_secs(30).saturating_sub(stopped.elapsed());
    std::thread::sleep(rest);
    radius.start_again().expect("FreeRADIUS starts again");

    let a = wait_accounting(&node, "records_delivered", 40, Duration::from_secs(30));
    assert_eq!(a["records_delivered"], 40, "{a}");
    let entries = radius.wait_for_entries(40, Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(500));
    let entries = if radius.entries().len() > entries.len() {
        radius.entries()
    } else {
        entries
    };
    let sessions = by_session(&entries);
    assert_eq!(sessions.len(), 20);
    let mut resent = 0;
    for v in sessions.values() {
        let kinds: Vec<&str> = v.iter().map(|e| status_type(e)).collect();
        // In order: the Start first; a repeat only as a resend of the same record.
        assert_eq!(kinds.first(), Some(&"Start"), "{kinds:?}");
        assert_eq!(kinds.last(), Some(&"Stop"), "{kinds:?}");
        resent += v.len() - 2;
        for e in v {
            let delay: u64 = e
                .get("Acct-Delay-Time")
                .and_then(|d| d.parse().ok())
                .unwrap_or(0);
            assert!(delay >= 1, "sent after the outage with its delay: {e:?}");
        }
    }
    // A record whose answer was lost would come twice; on loopback none is.
    assert_eq!(resent, 0, "{entries:?}");
}

#[test]
fn a_node_killed_with_records_undelivered_sends_them_after_its_restart() {
    let dir = TestDir::new("accounting-restart");
    let mut radius = FreeRadius::start_in(&dir, SECRET).expect("FreeRADIUS");
    let mut config = SbcConfig::new();
    config.extra_toml = accounting_toml(dir.path(), Some(radius.addr()), "");
    let mut node = SbcNode::start_in(&dir, &config.to_toml());
    // Ten calls delivered, then the server goes and ten more are only spooled.
    let (uac, _) = builtin_calls(&node, &config, "before", 10, 10, 200);
    uac.assert_success(10);
    wait_accounting(&node, "records_delivered", 20, Duration::from_secs(10));
    radius.stop().expect("FreeRADIUS stops");
    let (uac, _) = builtin_calls(&node, &config, "spooled", 10, 10, 200);
    uac.assert_success(10);
    let a = wait_accounting(&node, "records_spooled", 40, Duration::from_secs(10));
    assert_eq!(a["records_delivered"], 20, "{a}");
    node.kill();

    radius.start_again().expect("FreeRADIUS starts again");
    let node = SbcNode::start_existing(&dir);
    let a = wait_accounting(&node, "records_delivered", 20, Duration::from_secs(20));
    assert_eq!(a["records_replayed"], 20, "{a}");
    let entries = radius.wait_for_entries(40, Duration::from_secs(5));
    assert_eq!(entries.len(), 40);
    let sessions = by_session(&entries);
    assert_eq!(sessions.len(), 20);
    assert!(sessions
        .values()
        .all(|v| v.len() == 2 && status_type(v[0]) == "Start" && status_type(v[1]) == "Stop"));
    // The replayed ones carry the time they waited.
    let delayed = entries
        .iter()
        .filter(|e| e.get("Acct-Delay-Time").is_some_and(|d| d != "0"))
        .count();
    assert!(delayed >= 1, "{entries:?}");
}

#[test]
fn hunt_fails_over_to_the_second_server_while_the_first_does_not_answer() {
    let dir = TestDir::new("accounting-failover");
    let mut first = FreeRadius::start_in(&dir, SECRET).expect("FreeRADIUS");
    let second = FreeRadius::start_in(&dir, SECRET).expect("a second FreeRADIUS");
    first.stop().expect("the first stops");
    let mut config = SbcConfig::new();
    config.extra_toml = format!(
        "{}\n[[account-config.account-server]]\nhostname = \"{}\"\nport = {}\n\
         secret = \"{SECRET}\"\nrestart-delay = 60\n",
        accounting_toml(dir.path(), Some(first.addr()), ""),
        second.addr().ip(),
        second.port(),
    );
    let node = SbcNode::start_in(&dir, &config.to_toml());
    let (uac, _) = builtin_calls(&node, &config, "failover", 10, 10, 200);
    uac.assert_success(10);
    // The first record waits for three unanswered sends (1 + 2 + 4 s) before it moves.
    let a = wait_accounting(&node, "records_delivered", 20, Duration::from_secs(30));
    assert_eq!(a["records_delivered"], 20, "{a}");
    assert_eq!(a["servers"][0]["state"], "down", "{a}");
    assert_eq!(a["servers"][0]["acknowledged"], 0);
    assert!(a["servers"][0]["failures"].as_u64() >= Some(1), "{a}");
    assert_eq!(a["servers"][1]["acknowledged"], 20, "{a}");
    let entries = second.wait_for_entries(20, Duration::from_secs(5));
    assert_eq!(entries.len(), 20);
    let sessions = by_session(&entries);
    assert_eq!(sessions.len(), 10);
    assert!(sessions
        .values()
        .all(|v| v.len() == 2 && status_type(v[0]) == "Start" && status_type(v[1]) == "Stop"));
}

/// The tests' memory window: far fewer records than the calls below make.
const WINDOW: u64 = 16;

/// A script that runs the node's binary with a memory window of [`WINDOW`] records (the
/// environment variable only tests set).
fn windowed_binary(dir: &TestDir) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.file("sbc-windowed.sh");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nSBC_ACCOUNTING_MEMORY_WINDOW={WINDOW} exec '{}' \"$@\"\n",
            sbc_binary().display()
        ),
    )
    .expect("the wrapper script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// Waits until `show accounting` says `records_delivered` reached `n` (bounded); the most
/// records it ever showed in memory meanwhile.
fn wait_delivered_within_window(node: &SbcNode, n: u64, limit: Duration) -> (Value, u64) {
    let deadline = Instant::now() + limit;
    let mut most = 0;
    loop {
        let a = show_accounting(node);
        most = most.max(a["records_in_memory"].as_u64().unwrap_or(0));
        if a["records_delivered"].as_u64().unwrap_or(0) >= n || Instant::now() > deadline {
            return (a, most);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every call's records once, Start then Stop: `calls` sessions, `2 × calls` raw entries.
fn assert_each_call_once_in_order(entries: &[DetailEntry], calls: usize) {
    assert_eq!(entries.len(), 2 * calls, "raw entries: {entries:?}");
    let sessions = by_session(entries);
    assert_eq!(sessions.len(), calls);
    for v in sessions.values() {
        let kinds: Vec<&str> = v.iter().map(|e| status_type(e)).collect();
        assert_eq!(kinds, ["Start", "Stop"]);
    }
}

#[test]
fn records_beyond_the_memory_window_wait_on_disk_through_an_outage() {
    let dir = TestDir::new("accounting-window");
    let mut radius = FreeRadius::start_in(&dir, SECRET).expect("FreeRADIUS");
    let mut config = SbcConfig::new();
    config.extra_toml = accounting_toml(dir.path(), Some(radius.addr()), "");
    std::fs::write(dir.file("sbc.toml"), config.to_toml()).expect("the config");
    let node = SbcNode::start_existing_with(&dir, &windowed_binary(&dir));

    radius.stop().expect("FreeRADIUS stops");
    // 40 calls of 200 ms at 10 calls/s: 80 records, five windows' worth.
    let (uac, _) = builtin_calls(&node, &config, "window", 40, 10, 200);
    uac.assert_success(40);
    let during = wait_accounting(&node, "records_spooled", 80, Duration::from_secs(10));
    assert_eq!(during["records_generated"], 80, "{during}");
    assert_eq!(during["records_delivered"], 0, "{during}");
    assert_eq!(during["spool_pending"], 80, "{during}");
    let in_memory = during["records_in_memory"].as_u64().unwrap_or(u64::MAX);
    assert!(in_memory <= WINDOW, "{during}");
    assert_eq!(
        during["records_on_disk_only"].as_u64(),
        Some(80 - in_memory),
        "{during}"
    );

    radius.start_again().expect("FreeRADIUS starts again");
    let (a, most) = wait_delivered_within_window(&node, 80, Duration::from_secs(60));
    assert_eq!(a["records_delivered"], 80, "{a}");
    assert!(most <= WINDOW, "{most} records in memory: {a}");
    assert_eq!(a["records_on_disk_only"], 0, "{a}");
    assert_eq!(a["spool_pending"], 0, "{a}");
    let _ = radius.wait_for_entries(80, Duration::from_secs(5));
    // A moment more: nothing else may arrive.
    std::thread::sleep(Duration::from_millis(500));
    assert_each_call_once_in_order(&radius.entries(), 40);
}

#[test]
fn a_node_killed_with_more_records_on_disk_than_its_window_delivers_them_all_after_restart() {
    let dir = TestDir::new("accounting-window-restart");
    let mut radius = FreeRadius::start_in(&dir, SECRET).expect("FreeRADIUS");
    let mut config = SbcConfig::new();
    config.extra_toml = accounting_toml(dir.path(), Some(radius.addr()), "");
    std::fs::write(dir.file("sbc.toml"), config.to_toml()).expect("the config");
    let windowed = windowed_binary(&dir);
    let mut node = SbcNode::start_existing_with(&dir, &windowed);

    radius.stop().expect("FreeRADIUS stops");
    let (uac, _) = builtin_calls(&node, &config, "spooled", 40, 10, 200);
    uac.assert_success(40);
    let a = wait_accounting(&node, "records_spooled", 80, Duration::from_secs(10));
    assert_eq!(a["records_delivered"], 0, "{a}");
    assert!(
        a["records_on_disk_only"].as_u64().unwrap_or(0) >= 80 - WINDOW,
        "{a}"
    );
    node.kill();

    radius.start_again().expect("FreeRADIUS starts again");
    let node = SbcNode::start_existing_with(&dir, &windowed);
    let (a, most) = wait_delivered_within_window(&node, 80, Duration::from_secs(60));
    assert_eq!(a["records_replayed"], 80, "{a}");
    assert_eq!(a["records_delivered"], 80, "{a}");
    assert!(most <= WINDOW, "{most} records in memory: {a}");
    assert_eq!(a["spool_pending"], 0, "{a}");
    let _ = radius.wait_for_entries(80, Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(500));
    assert_each_call_once_in_order(&radius.entries(), 40);
}

/// The accounting spool alarm's row in `display-alarms`, if raised.
fn spool_alarm_row(node: &SbcNode) -> Option<Value> {
    let r = mgmt_exec(&node.mgmt_socket(), "display-alarms")?;
    r["data"]["alarms"]
        .as_array()?
        .iter()
        .find(|a| a["id"] == 131_078)
        .cloned()
}

#[test]
fn a_full_spool_raises_the_critical_alarm_and_traps_until_it_has_room() {
    let dir = TestDir::new("accounting-spool-full");
    let mut radius = FreeRadius::start_in(&dir, SECRET).expect("FreeRADIUS");
    let trapd = Trapd::start(&dir);
    let mut config = SbcConfig::new();
    config.extra_toml = format!(
        "{}\n[[system-config.trap-receiver]]\nip-address = \"127.0.0.1\"\nport = {}\n\
         community = \"public\"\n",
        accounting_toml(dir.path(), Some(radius.addr()), "spool-max-size = 1\n"),
        trapd.port()
    );
    let node = SbcNode::start_in(&dir, &config.to_toml());
    radius.stop().expect("FreeRADIUS stops");

    // About 200 bytes a spooled record, two a call: 1 MiB holds about 2,600 calls.
    let started = Instant::now();
    let (uac, _) = builtin_calls(&node, &config, "fill", 3_200, 300, 0);
    uac.assert_success(3_200);
    let deadline = Instant::now() + Duration::from_secs(5);
    let row = loop {
        if let Some(row) = spool_alarm_row(&node) {
            break row;
        }
        assert!(
            Instant::now() < deadline,
            "no alarm 131078: {}",
            show_accounting(&node)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(row["task"], "accounting", "{row}");
    assert_eq!(row["severity"], "critical", "{row}");
    assert_eq!(row["type"], "accounting-spool", "{row}");
    let a = show_accounting(&node);
    assert!(a["records_refused"].as_u64().unwrap_or(0) > 0, "{a}");
    let wait = Duration::from_secs(10);
    let full = trapd.wait_trap("SBC-PAIR-MIB::sbcAccountingSpoolTrap", 0, wait);
    assert_eq!(
        full.get("SBC-PAIR-MIB::sbcAccountingSpoolState.0"),
        Some("INTEGER: full(1)"),
        "{}",
        full.line
    );
    assert_eq!(
        full.get("SBC-PAIR-MIB::sbcAccountingSpoolMaxKiB.0"),
        Some("Gauge32: 1024 KiB")
    );
    let alarm = trapd.wait_trap("SBC-PAIR-MIB::sbcAlarmTrap", 0, wait);
    assert_eq!(
        alarm.get("SBC-PAIR-MIB::sbcAlarmType.0"),
        Some("INTEGER: accountingSpoolFull(6)"),
        "{}",
        alarm.line
    );
    assert_eq!(
        alarm.get("SBC-PAIR-MIB::sbcAlarmSeverity.0"),
        Some("INTEGER: critical(4)")
    );
    let filled_in = started.elapsed();

    radius.start_again().expect("FreeRADIUS starts again");
    let deadline = Instant::now() + Duration::from_secs(60);
    while spool_alarm_row(&node).is_some() {
        assert!(
            Instant::now() < deadline,
            "alarm 131078 still raised: {}",
            show_accounting(&node)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let room = trapd.wait_trap("SBC-PAIR-MIB::sbcAccountingSpoolTrap", 1, wait);
    assert_eq!(
        room.get("SBC-PAIR-MIB::sbcAccountingSpoolState.0"),
        Some("INTEGER: hasRoom(2)"),
        "{}",
        room.line
    );
    let clear = trapd.wait_trap("SBC-PAIR-MIB::sbcAlarmClearTrap", 0, wait);
    assert_eq!(
        clear.get("SBC-PAIR-MIB::sbcAlarmClearedBy.0"),
        Some("INTEGER: auto(3)"),
        "{}",
        clear.line
    );
    eprintln!(
        "filled in {filled_in:?}, room again after {:?}: {}",
        started.elapsed(),
        show_accounting(&node)
    );
}
