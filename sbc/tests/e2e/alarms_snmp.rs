//! The critical memory alarm end to end, with a real `snmptrapd` loading our MIB.
//!
//! Each test starts its own `snmptrapd` on a loopback port and its own lab node: process
//! memory source against `memory-limit-mb = 88`, a 1 s alarm iteration (5 sub-samples, 3 of
//! them above the threshold make a reading critical), memory thresholds minor 50, major 70,
//! critical 80, one trap receiver (the snmptrapd), lab mode. The node idles at 18 to 35 MB
//! resident (mostly the binary's mapped pages: a debug build's are the larger), under 50 %;
//! `lab ballast 56` (touched pages) takes it to 84-104 %.
//!
//! Asserts:
//! - `snmptranslate_resolves_the_alarm_trap`: `SBC-PAIR-MIB::sbcAlarmTrap` ↔ `.1.3.6.1.3.3261.0.1`
//!   (and the clear and health traps) with our MIB directory.
//! - `critical_memory_enabled`: an established SIPp call is up; after the ballast the
//!   `sbcAlarmTrap` arrives with type memoryUtilization, value > 80, severity critical,
//!   threshold 80, id 131073, task sbcd and the node's hostname; `display-alarms` shows it
//!   (text and JSON); `show health` says admission is closed and keeps the score at 100; a new
//!   INVITE gets 503 with a Retry-After within retry-after-min..max; the established call is
//!   still listed and its BYE (sent afterwards) succeeds on both SIPp sides; `clear-alarm
//!   131073 sbcd` clears the alarm and the `sbcAlarmClearTrap` arrives marked operator.
//! - `critical_memory_switchover`: health is 100 when the first alarm trap is seen and drops by
//!   exactly 100 (score 0, one deduction of 100, ineligible until restart) at the second
//!   reading: the drop is seen about one iteration after the trap (0.3 s to 3 s), when the
//!   alarm's count is 2, and the `sbcHealthTrap` (0, previous 100) carries a sysUpTime about
//!   100 ticks after the first alarm trap's; with no peer a new INVITE gets 503; `reboot`
//!   clears alarm, health and ballast.
//! - `critical_memory_disabled`: the alarm is raised and re-sent as a trap each iteration (at
//!   least 2 traps once the alarm count reaches 3), the score stays 100, admission stays open,
//!   a SIPp call succeeds and nothing is rejected with 503; `clear-alarm` sends the clear trap.
//! - `ballast_release_returns_memory_and_the_alarm_stays_until_cleared`: `lab ballast 56`
//!   grows resident memory by 50 MB or more and raises the alarm; `lab ballast 0` gives the
//!   memory back (resident within 20 MB of idle in 15 s); the critical memory alarm does not
//!   clear by itself and no clear trap is sent; after `clear-alarm` it is not raised again.
//! - `activated_threshold_takes_effect`: a critical memory threshold added with the ACLI and
//!   `activate-config` (which says every change is in effect) raises the alarm without a
//!   restart.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sbc_e2e::acli::{acli, acli_json, Mgmt};
use sbc_e2e::raw::{ack_for, request, RawUdp, SipMsg};
use sbc_e2e::snmp::{snmptranslate, ReceivedTrap, Trapd};
use sbc_e2e::{calls_through_sbc, ports, Load, SbcConfig, SbcNode, Scenario, Sipp};
use serde_json::{json, Value};

const ALARM_TRAP: &str = "SBC-PAIR-MIB::sbcAlarmTrap";
const CLEAR_TRAP: &str = "SBC-PAIR-MIB::sbcAlarmClearTrap";
const HEALTH_TRAP: &str = "SBC-PAIR-MIB::sbcHealthTrap";
const TRAP_WAIT: Duration = Duration::from_secs(15);

/// The `[system-config]` of a lab node with `critical-memory-abort=<mode>`, thresholds and a
/// trap receiver on `trap_port`, followed by the usual SIP config.
fn lab_toml(config: &SbcConfig, hostname: &str, mode: &str, trap_port: u16) -> String {
    format!(
        "[system-config]\n\
         hostname = \"{hostname}\"\n\
         memory-source = \"process\"\n\
         memory-limit-mb = 88\n\
         alarm-iteration-ms = 1000\n\
         alarm-subsamples = 5\n\
         spike-subsamples = 3\n\
         lab-mode = true\n\
         options = [\"critical-memory-abort={mode}\"]\n\
         \n\
         [[system-config.alarm-threshold]]\n\
         type = \"memory\"\n\
         severity = \"minor\"\n\
         value = 50\n\
         \n\
         [[system-config.alarm-threshold]]\n\
         type = \"memory\"\n\
         severity = \"major\"\n\
         value = 70\n\
         \n\
         [[system-config.alarm-threshold]]\n\
         type = \"memory\"\n\
         severity = \"critical\"\n\
         value = 80\n\
         \n\
         [[system-config.trap-receiver]]\n\
         ip-address = \"127.0.0.1\"\n\
         port = {trap_port}\n\
         community = \"public\"\n\
         \n{}",
        config.to_toml()
    )
}

/// The lab's minor memory threshold in MB: 50 % of `memory-limit-mb` 88 ([`lab_toml`]).
const LAB_MINOR_MB: u64 = 44;

/// Starts snmptrapd and a lab node; checks the node starts without alarms.
fn lab_node(hostname: &str, mode: &str) -> (SbcConfig, SbcNode, Trapd) {
    let config = SbcConfig::new();
    let dir = sbc_e2e::TestDir::for_current_test();
    let trapd = Trapd::start(&dir);
    std::fs::write(
        dir.file("sbc.toml"),
        lab_toml(&config, hostname, mode, trapd.port()),
    )
    .expect("write config");
    // Its own copy of the binary, so that `reboot` survives a concurrent `cargo build`.
    let node = SbcNode::start_existing_with(&dir, &sbc_e2e::sbc::private_binary(&dir));
    let alarms = acli_json(&node.mgmt_socket(), &["display-alarms"])
        .assert_ok()
        .json();
    assert_eq!(
        alarms["alarms"],
        json!([]),
        "alarms before any ballast: {alarms:#}"
    );
    let health = health(&node);
    assert_eq!(health["score"], json!(100), "{health:#}");
    assert_eq!(health["admission_closed"], json!(false), "{health:#}");
    (config, node, trapd)
}

fn health(node: &SbcNode) -> Value {
    acli_json(&node.mgmt_socket(), &["show health"])
        .assert_ok()
        .json()
}

fn ballast(node: &SbcNode, mb: u32) {
    let out = acli(&node.mgmt_socket(), &[&format!("lab ballast {mb}")]);
    out.assert_ok();
    assert!(
        out.stdout.contains(&format!("lab ballast now {mb} MB")),
        "{}",
        out.describe()
    );
}

/// The integer after the type in `INTEGER: 117 percent`, `Gauge32: 131073`.
fn trap_int(trap: &ReceivedTrap, object: &str) -> i64 {
    let v = trap
        .get(&format!("SBC-PAIR-MIB::{object}.0"))
        .unwrap_or_else(|| panic!("{object} missing from {}", trap.line));
    let n = v.split_whitespace().nth(1).unwrap_or_default();
    n.parse()
        .unwrap_or_else(|_| panic!("{object} = {v:?} is not a number in {}", trap.line))
}

#[track_caller]
fn assert_trap_has(trap: &ReceivedTrap, object: &str, printed: &str) {
    assert_eq!(
        trap.get(&format!("SBC-PAIR-MIB::{object}.0")),
        Some(printed),
        "in {}",
        trap.line
    );
}

/// The fields of the critical memory alarm trap.
#[track_caller]
fn assert_critical_memory_trap(trap: &ReceivedTrap, hostname: &str) {
    assert_eq!(trap.name(), ALARM_TRAP, "{}", trap.line);
    assert_trap_has(trap, "sbcAlarmType", "INTEGER: memoryUtilization(1)");
    assert_trap_has(trap, "sbcAlarmSeverity", "INTEGER: critical(4)");
    assert_trap_has(trap, "sbcAlarmThreshold", "INTEGER: 80 percent");
    assert_trap_has(trap, "sbcAlarmId", "Gauge32: 131073");
    assert_trap_has(trap, "sbcAlarmTask", "STRING: sbcd");
    assert_trap_has(trap, "sbcNodeName", &format!("STRING: {hostname}"));
    let value = trap_int(trap, "sbcAlarmValue");
    assert!(value > 80 && value < 1000, "value {value} in {}", trap.line);
}

#[track_caller]
fn assert_operator_clear_trap(trap: &ReceivedTrap, hostname: &str) {
    assert_eq!(trap.name(), CLEAR_TRAP, "{}", trap.line);
    assert_trap_has(trap, "sbcAlarmId", "Gauge32: 131073");
    assert_trap_has(trap, "sbcAlarmTask", "STRING: sbcd");
    assert_trap_has(trap, "sbcAlarmType", "INTEGER: memoryUtilization(1)");
    assert_trap_has(trap, "sbcAlarmSeverity", "INTEGER: critical(4)");
    assert_trap_has(trap, "sbcAlarmClearedBy", "INTEGER: operator(1)");
    assert_trap_has(trap, "sbcNodeName", &format!("STRING: {hostname}"));
}

/// The one row of `display-alarms --json` for 131073/sbcd, if raised.
fn memory_alarm(node: &SbcNode) -> Option<Value> {
    let alarms = acli_json(&node.mgmt_socket(), &["display-alarms"])
        .assert_ok()
        .json();
    alarms["alarms"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["id"] == json!(131_073)).cloned())
}

#[track_caller]
fn assert_display_alarms_shows_it(node: &SbcNode) -> Value {
    let row = memory_alarm(node).expect("display-alarms --json lists 131073");
    assert_eq!(row["task"], json!("sbcd"), "{row:#}");
    assert_eq!(row["severity"], json!("critical"), "{row:#}");
    assert_eq!(row["type"], json!("memory"), "{row:#}");
    assert_eq!(row["threshold"], json!(80), "{row:#}");
    assert!(row["value"].as_f64().is_some_and(|v| v > 80.0), "{row:#}");
    assert!(row["count"].as_u64().is_some_and(|c| c >= 1), "{row:#}");
    let text = acli(&node.mgmt_socket(), &["display-alarms"])
        .assert_ok()
        .stdout
        .clone();
    assert!(
        text.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() > 3 && w[0] == "131073" && w[1] == "sbcd" && w[2] == "critical"
        }),
        "display-alarms text:\n{text}"
    );
    row
}

/// Waits until `show health --json` satisfies `pred`.
#[track_caller]
fn wait_health(node: &SbcNode, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let mut m = Mgmt::connect(&node.mgmt_socket());
    let deadline = Instant::now() + TRAP_WAIT;
    loop {
        let h = m.data("show health");
        if pred(&h) {
            return h;
        }
        assert!(Instant::now() < deadline, "{what}: never seen; last {h:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends a new INVITE to the access interface and returns its final response (ACKed).
fn new_invite(config: &SbcConfig, call_id: &str) -> SipMsg {
    let caller = RawUdp::bind(config.access.ip());
    let local: SocketAddr = caller.local_addr();
    let invite = request(
        "INVITE",
        local,
        config.access,
        "UDP",
        call_id,
        &format!("z9hG4bK-{call_id}"),
        &[],
    );
    caller.send_to(&invite, config.access);
    let mut skipped = Vec::new();
    let (resp, _) = caller
        .recv_sip_until(
            Duration::from_secs(5),
            |m| m.status().is_some_and(|s| s >= 200),
            &mut skipped,
        )
        .unwrap_or_else(|| panic!("no final response to INVITE {call_id}"));
    caller.send_to(&ack_for(&invite, &resp), config.access);
    resp
}

#[track_caller]
fn assert_503_retry_after(resp: &SipMsg) {
    assert_eq!(resp.status(), Some(503), "got {}", resp.start_line);
    assert_eq!(resp.cseq_method(), Some("INVITE"));
    let retry = resp
        .header("retry-after")
        .unwrap_or_else(|| panic!("503 without Retry-After: {resp:?}"));
    let secs: u64 = retry
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("Retry-After {retry:?} is not a number of seconds"));
    // sip-config retry-after-min..retry-after-max, defaults 5..15.
    assert!((5..=15).contains(&secs), "Retry-After: {retry}");
}

#[test]
fn snmptranslate_resolves_the_alarm_trap() {
    for (n, name) in [
        (1, "sbcAlarmTrap"),
        (2, "sbcAlarmClearTrap"),
        (4, "sbcHealthTrap"),
    ] {
        let full = format!("SBC-PAIR-MIB::{name}");
        let oid = format!(".1.3.6.1.3.3261.0.{n}");
        let (ok, out, err) = snmptranslate(&["-On", &full]);
        assert!(ok && err.is_empty(), "snmptranslate -On {full}: {err}");
        assert_eq!(out, oid);
        let (ok, out, err) = snmptranslate(&[&oid]);
        assert!(ok && err.is_empty(), "snmptranslate {oid}: {err}");
        assert_eq!(out, full);
    }
}

#[test]
fn critical_memory_enabled() {
    let hostname = "lab-enabled";
    let (config, mut node, trapd) = lab_node(hostname, "enabled");
    let sock = node.mgmt_socket();
    let dir = node.dir().clone();

    // An established call, held 15 s by the caller before its BYE.
    let uas = Sipp::new(&dir, "uas")
        .builtin("uas")
        .local(config.agent)
        .calls(1)
        .timeout(Duration::from_secs(60))
        .spawn();
    sbc_e2e::sipp::wait_listening(config.agent, false, Duration::from_secs(5));
    let uac = Sipp::new(&dir, "uac")
        .builtin("uac")
        .local(SocketAddr::new(config.access.ip(), ports::free_port()))
        .remote(config.access)
        .calls(1)
        .args(["-d", "15000"])
        .timeout(Duration::from_secs(45))
        .spawn();
    let mut m = Mgmt::connect(&sock);
    let deadline = Instant::now() + Duration::from_secs(10);
    while m.data("show dialogs")["dialogs"]
        .as_array()
        .is_none_or(Vec::is_empty)
    {
        assert!(
            Instant::now() < deadline,
            "the SIPp call never got established"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    ballast(&node, 56);
    let trap = trapd.wait_trap(ALARM_TRAP, 0, TRAP_WAIT);
    assert_critical_memory_trap(&trap, hostname);
    let row = assert_display_alarms_shows_it(&node);

    // Two consecutive critical readings close admission; no health penalty under `enabled`.
    let h = wait_health(&node, "admission closed", |h| {
        h["admission_closed"] == json!(true)
    });
    assert_eq!(h["score"], json!(100), "{h:#}");
    assert_eq!(h["ineligible_until_restart"], json!(false), "{h:#}");
    let text = acli(&sock, &["show health"]).assert_ok().stdout.clone();
    assert!(text.contains("503"), "show health does not say so:\n{text}");

    // A new call gets 503 + Retry-After.
    for i in 0..3 {
        assert_503_retry_after(&new_invite(&config, &format!("enabled-new-{i}")));
    }
    // The established call is still up, and its BYE comes later, while admission is closed.
    let dialogs = m.data("show dialogs");
    assert_eq!(
        dialogs["dialogs"].as_array().map(Vec::len),
        Some(1),
        "the established call was dropped: {dialogs:#}"
    );
    let uac = uac.wait();
    let uas = uas.wait_at_most(Duration::from_secs(15));
    uac.assert_success(1);
    uas.assert_success(1);
    let stats = m.data("show sip-stats");
    assert!(
        stats["counters"]["rejected_503"]
            .as_u64()
            .is_some_and(|n| n >= 3),
        "{stats:#}"
    );
    assert_eq!(stats["counters"]["calls_answered"], json!(1), "{stats:#}");
    assert_eq!(
        health(&node)["admission_closed"],
        json!(true),
        "admission reopened by itself"
    );

    // The operator clears it: the clear trap arrives, marked operator.
    let before_clear = memory_alarm(&node).expect("still raised");
    let out = acli(&sock, &["clear-alarm 131073 sbcd"]);
    out.assert_ok();
    assert!(out.stdout.contains("cleared"), "{}", out.describe());
    let clear = trapd.wait_trap(CLEAR_TRAP, 0, TRAP_WAIT);
    assert_operator_clear_trap(&clear, hostname);
    // The memory is still high, so the alarm may be raised again at the next iteration: if
    // display-alarms lists it, it is a new one (first seen after the cleared one was last seen).
    if let Some(again) = memory_alarm(&node) {
        assert!(
            again["first-seen"].as_u64() > before_clear["last-seen"].as_u64(),
            "clear-alarm did not clear it: before {before_clear:#}, after {again:#}"
        );
    }
    assert!(row["first-seen"].as_u64() <= before_clear["last-seen"].as_u64());
    node.assert_alive();
}

#[test]
fn critical_memory_switchover() {
    let hostname = "lab-switchover";
    let (config, mut node, trapd) = lab_node(hostname, "switchover");
    let sock = node.mgmt_socket();
    let mut m = Mgmt::connect(&sock);

    ballast(&node, 56);
    // Poll health and the receiver every 20 ms (bounded): when is the first alarm trap seen,
    // when does the score drop, and what does the alarm count say then.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut first_trap: Option<Instant> = None;
    let (dropped_at, dropped, count_at_drop) = loop {
        assert!(
            Instant::now() < deadline,
            "no health drop within 20 s; traps: {:?}",
            trapd.traps()
        );
        if first_trap.is_none() && !trapd.traps_named(ALARM_TRAP).is_empty() {
            first_trap = Some(Instant::now());
        }
        let h = m.data("show health");
        if h["score"] != json!(100) {
            let now = Instant::now();
            let alarms = m.data("display-alarms");
            let count = alarms["alarms"]
                .as_array()
                .and_then(|a| a.iter().find(|r| r["id"] == json!(131_073)))
                .and_then(|r| r["count"].as_u64());
            break (now, h, count);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let first_trap = first_trap.unwrap_or_else(|| {
        panic!(
            "health dropped before the alarm trap arrived: {dropped:#}\n{}",
            trapd.output()
        )
    });

    // Exactly 100 off, for the critical-memory rule, until restart.
    assert_eq!(dropped["score"], json!(0), "{dropped:#}");
    let deductions = dropped["deductions"].as_array().expect("deductions");
    assert_eq!(deductions.len(), 1, "{dropped:#}");
    assert_eq!(deductions[0]["points"], json!(100), "{dropped:#}");
    assert_eq!(
        deductions[0]["source"],
        json!("critical-memory-abort"),
        "{dropped:#}"
    );
    assert_eq!(
        dropped["ineligible_until_restart"],
        json!(true),
        "{dropped:#}"
    );
    // At the second reading: one iteration after the first (raising) one.
    assert_eq!(
        count_at_drop,
        Some(2),
        "the score dropped when the alarm had been read critical {count_at_drop:?} times"
    );
    let gap = dropped_at.saturating_duration_since(first_trap);
    assert!(
        gap >= Duration::from_millis(300) && gap <= Duration::from_secs(3),
        "health dropped {gap:?} after the first alarm trap was seen; expected about one \
         1 s iteration"
    );
    let alarm = trapd.wait_trap(ALARM_TRAP, 0, TRAP_WAIT);
    assert_critical_memory_trap(&alarm, hostname);
    let health_trap = trapd.wait_trap(HEALTH_TRAP, 0, TRAP_WAIT);
    assert_trap_has(&health_trap, "sbcHealthScore", "INTEGER: 0");
    assert_trap_has(&health_trap, "sbcHealthPreviousScore", "INTEGER: 100");
    assert_trap_has(&health_trap, "sbcNodeName", &format!("STRING: {hostname}"));
    let (t_alarm, t_health) = (
        alarm.uptime_ticks().expect("sysUpTime"),
        health_trap.uptime_ticks().expect("sysUpTime"),
    );
    assert!(
        (50..=250).contains(&t_health.saturating_sub(t_alarm)),
        "sysUpTime of the alarm trap {t_alarm}, of the health trap {t_health}: expected one \
         iteration (100 ticks) apart"
    );
    assert_display_alarms_shows_it(&node);
    let text = acli(&sock, &["show health"]).assert_ok().stdout.clone();
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["health-score", "0"]),
        "{text}"
    );

    // No peer to take over: new calls are refused like `enabled`.
    let h = wait_health(&node, "admission closed", |h| {
        h["admission_closed"] == json!(true)
    });
    assert_eq!(h["score"], json!(0));
    assert_503_retry_after(&new_invite(&config, "switchover-new-1"));

    // A restart clears the alarm, the health penalty and the ballast; the clear trap, marked
    // restart, is sent on the way out (the trap sink sends what is queued before it ends).
    acli(&sock, &["reboot"]).assert_ok();
    let clear = trapd.wait_trap(CLEAR_TRAP, 0, TRAP_WAIT);
    assert_trap_has(&clear, "sbcAlarmClearedBy", "INTEGER: restart(2)");
    assert_trap_has(&clear, "sbcNodeName", &format!("STRING: {hostname}"));
    assert!(
        node.wait_ready_count(2, Duration::from_secs(20)),
        "no `sbc ready` after reboot"
    );
    node.assert_alive();
    let h = health(&node);
    assert_eq!(h["score"], json!(100), "{h:#}");
    assert_eq!(h["ineligible_until_restart"], json!(false), "{h:#}");
    assert_eq!(h["admission_closed"], json!(false), "{h:#}");
    assert!(memory_alarm(&node).is_none(), "alarm survived the reboot");
    let mem = acli_json(&sock, &["show memory"]).assert_ok().json();
    assert_eq!(mem["ballast_mb"], json!(0), "{mem:#}");
}

#[test]
fn critical_memory_disabled() {
    let hostname = "lab-disabled";
    let (config, mut node, trapd) = lab_node(hostname, "disabled");
    let sock = node.mgmt_socket();

    ballast(&node, 56);
    let trap = trapd.wait_trap(ALARM_TRAP, 0, TRAP_WAIT);
    assert_critical_memory_trap(&trap, hostname);
    // Let it stay critical for three readings.
    let deadline = Instant::now() + TRAP_WAIT;
    while memory_alarm(&node)
        .and_then(|r| r["count"].as_u64())
        .is_none_or(|c| c < 3)
    {
        assert!(Instant::now() < deadline, "the alarm count never reached 3");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_display_alarms_shows_it(&node);
    // Re-sent each iteration while critical.
    let again = trapd.wait_trap(ALARM_TRAP, 1, TRAP_WAIT);
    assert_critical_memory_trap(&again, hostname);
    let h = health(&node);
    assert_eq!(h["score"], json!(100), "{h:#}");
    assert_eq!(h["admission_closed"], json!(false), "{h:#}");
    assert_eq!(h["ineligible_until_restart"], json!(false), "{h:#}");
    assert!(
        trapd.traps_named(HEALTH_TRAP).is_empty(),
        "a health trap under `disabled`: {:?}",
        trapd.traps_named(HEALTH_TRAP)
    );

    // New calls still succeed.
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::Builtin("uac"),
        Scenario::Builtin("uas"),
        Load {
            calls: 1,
            rate: 1,
            tcp: false,
            timeout: Duration::from_secs(30),
        },
    );
    uac.assert_success(1);
    uas.assert_success(1);
    let stats = acli_json(&sock, &["show sip-stats"]).assert_ok().json();
    assert_eq!(stats["counters"]["rejected_503"], json!(0), "{stats:#}");

    acli(&sock, &["clear-alarm 131073 sbcd"]).assert_ok();
    let clear = trapd.wait_trap(CLEAR_TRAP, 0, TRAP_WAIT);
    assert_operator_clear_trap(&clear, hostname);
}

#[test]
fn activated_threshold_takes_effect() {
    // A lab node without any threshold: the ballast raises nothing until one is activated.
    let config = SbcConfig::new();
    let dir = sbc_e2e::TestDir::for_current_test();
    let trapd = Trapd::start(&dir);
    let toml = format!(
        "[system-config]\n\
         hostname = \"lab-activate\"\n\
         memory-source = \"process\"\n\
         memory-limit-mb = 64\n\
         alarm-iteration-ms = 1000\n\
         alarm-subsamples = 5\n\
         spike-subsamples = 3\n\
         lab-mode = true\n\
         \n\
         [[system-config.trap-receiver]]\n\
         ip-address = \"127.0.0.1\"\n\
         port = {}\n\
         community = \"public\"\n\
         \n{}",
        trapd.port(),
        config.to_toml()
    );
    let node = SbcNode::start_in(&dir, &toml);
    let sock = node.mgmt_socket();
    let out = acli(
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
            "exit",
            "exit",
            "exit",
            "exit",
            "save-config",
            "activate-config",
        ],
    );
    out.assert_ok();
    assert!(
        out.stdout.contains("all changes are in effect"),
        "{}",
        out.describe()
    );
    ballast(&node, 56);
    let deadline = Instant::now() + Duration::from_secs(8);
    while memory_alarm(&node).is_none() {
        assert!(
            Instant::now() < deadline,
            "activate-config said all changes are in effect, but the activated critical memory \
             threshold raised no alarm within 8 s at {} (traps: {:?})",
            acli(&sock, &["show memory"])
                .stdout
                .lines()
                .next()
                .unwrap_or(""),
            trapd.traps()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let trap = trapd.wait_trap(ALARM_TRAP, 0, TRAP_WAIT);
    assert_critical_memory_trap(&trap, "lab-activate");
}

/// `process_resident_bytes` of `show memory --json`.
fn resident_mb(node: &SbcNode) -> u64 {
    let mem = acli_json(&node.mgmt_socket(), &["show memory"])
        .assert_ok()
        .json();
    mem["process_resident_bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("no process_resident_bytes: {mem:#}"))
        >> 20
}

#[test]
fn ballast_release_returns_memory_and_the_alarm_stays_until_cleared() {
    let hostname = "lab-release";
    let (_config, node, trapd) = lab_node(hostname, "disabled");
    let sock = node.mgmt_socket();
    let idle = resident_mb(&node);

    ballast(&node, 56);
    let grown = resident_mb(&node);
    assert!(
        grown >= idle + 50,
        "lab ballast 56 took resident memory from {idle} MB to only {grown} MB"
    );
    assert_critical_memory_trap(&trapd.wait_trap(ALARM_TRAP, 0, TRAP_WAIT), hostname);

    // `lab ballast 0` shrinks the ballast: the pages go back to the system, under the lowest
    // threshold (minor, 50 % of 88 MB) with a margin, so that no later iteration raises the
    // alarm again. (Waiting only for `idle + 20` MB once left 33 MB, over the minor threshold:
    // the alarm came back as minor after the operator's clear.)
    ballast(&node, 0);
    let below = LAB_MINOR_MB - 4;
    assert!(
        idle < below,
        "idle resident {idle} MB leaves no room under the lab's minor threshold ({LAB_MINOR_MB} MB)"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut now_mb = resident_mb(&node);
    while now_mb > below && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
        now_mb = resident_mb(&node);
    }
    assert!(
        now_mb <= below,
        "`lab ballast 0` did not give the memory back: resident {now_mb} MB 15 s later \
         (idle {idle} MB, with the ballast {grown} MB); the process memory source cannot go \
         back under a threshold\n{}",
        acli(&sock, &["show memory"]).stdout
    );

    // No automatic clear for the critical memory alarm: it stays, and no clear trap is sent.
    let row = memory_alarm(&node).expect("raised");
    let seen_count = row["count"].as_u64().unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(memory_alarm(&node).is_some(), "the alarm cleared by itself");
    assert!(
        trapd.traps_named(CLEAR_TRAP).is_empty(),
        "a clear trap without an operator: {:?}",
        trapd.traps_named(CLEAR_TRAP)
    );
    // The operator clears it; memory is low now, so it is not raised again.
    acli(&sock, &["clear-alarm 131073 sbcd"]).assert_ok();
    assert_operator_clear_trap(&trapd.wait_trap(CLEAR_TRAP, 0, TRAP_WAIT), hostname);
    let traps_at_clear = trapd.traps_named(ALARM_TRAP).len();
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        assert!(
            memory_alarm(&node).is_none(),
            "raised again below the threshold (count was {seen_count})"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(trapd.traps_named(ALARM_TRAP).len(), traps_at_clear);
}
