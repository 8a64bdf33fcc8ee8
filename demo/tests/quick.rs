//! `sbc-demo --quick` end to end: the demo binary starts its pair (two child processes of
//! itself running the product's `sbc run`), drives calls, grows the ballast on the active, and
//! must end with 0 failed calls, a switchover after the second critical reading, the alarm,
//! health and redundancy traps, and a chart.

use std::io::Read as _;
use std::net::{Ipv4Addr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::Rng as _;
use serde_json::Value;

/// The demo's default ports; the test shifts them all by one random offset.
const PORTS: [u16; 7] = [5060, 5062, 5080, 9090, 1988, 1987, 1162];

fn free(port: u16) -> bool {
    UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok()
        && TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok()
}

/// A random offset whose ports are all free, every port below the ephemeral range.
fn free_offset() -> u16 {
    let mut rng = rand::thread_rng();
    for _ in 0..50 {
        let offset = rng.gen_range(8_000..23_000u16);
        if PORTS.iter().all(|p| free(p + offset)) {
            return offset;
        }
    }
    panic!("no port offset with all demo ports free after 50 tries");
}

#[test]
fn quick_demo_switches_over_without_failed_calls() {
    // Cargo builds the demo binary before this test and gives its path.
    let demo = PathBuf::from(env!("CARGO_BIN_EXE_sbc-demo"));
    let offset = free_offset();
    let chart =
        std::env::temp_dir().join(format!("sbc-demo-test-{}-{offset}.svg", std::process::id()));
    let mut child = Command::new(&demo)
        .args(["--quick", "--json-summary", "--port-offset"])
        .arg(offset.to_string())
        .arg("--chart")
        .arg(&chart)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sbc-demo");
    // Bounded: the quick demo takes about 25 s; its own limit is 120 s.
    let deadline = Instant::now() + Duration::from_secs(150);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for sbc-demo") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sbc-demo --quick did not end within 150 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut stdout);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let context = format!("exit {status}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("demo-summary-json: "))
        .unwrap_or_else(|| panic!("no demo-summary-json line\n{context}"));
    let s: Value = serde_json::from_str(line).expect("summary JSON");
    let u = |k: &str| {
        s[k].as_u64()
            .unwrap_or_else(|| panic!("{k} missing\n{context}"))
    };
    let f = |k: &str| {
        s[k].as_f64()
            .unwrap_or_else(|| panic!("{k} missing\n{context}"))
    };

    // Every call answered and ended, none failed; the demo says OK and exits 0.
    assert_eq!(u("failed"), 0, "failed calls\n{context}");
    assert!(u("attempted") >= 50, "too few calls\n{context}");
    assert_eq!(u("answered"), u("attempted"), "{context}");
    assert_eq!(u("completed"), u("attempted"), "{context}");
    assert_eq!(u("in_progress"), 0, "{context}");
    assert_eq!(s["ok"], Value::Bool(true), "{context}");
    assert!(status.success(), "{context}");

    // The switchover: after the second critical reading (and the health drop), to the standby,
    // which then answered new calls and the BYEs of the calls established before.
    let second = f("t_second_critical_s");
    let first = f("t_first_critical_s");
    let switchover = f("t_switchover_s");
    assert!(first < second, "{context}");
    assert!(
        switchover >= second,
        "switchover before the second critical reading\n{context}"
    );
    assert!(switchover >= f("t_health_drop_s"), "{context}");
    assert_eq!(s["switchover_after_second_critical"], Value::Bool(true));
    assert_ne!(s["first_active"], s["new_active"], "{context}");
    assert!(u("established_at_switchover") > 0, "{context}");
    assert_eq!(
        u("established_ended_through_new_active"),
        u("established_at_switchover"),
        "{context}"
    );
    assert!(u("new_calls_on_new_active") > 0, "{context}");
    assert!(f("switchover_to_first_new_call_s") >= 0.0, "{context}");
    assert_eq!(
        s["former_active_ineligible"],
        Value::Bool(true),
        "{context}"
    );

    // Traps: the alarm (at least the two critical readings), the health drop, the redundancy
    // transitions.
    let traps = &s["traps"];
    assert!(
        traps["sbcAlarmTrap"].as_u64().unwrap_or(0) >= 2,
        "{context}"
    );
    assert!(
        traps["sbcHealthTrap"].as_u64().unwrap_or(0) >= 1,
        "{context}"
    );
    assert!(
        traps["sbcRedundancyTrap"].as_u64().unwrap_or(0) >= 2,
        "{context}"
    );
    let first_active = s["first_active"].as_str().unwrap_or("?");
    assert!(
        stdout.contains(&format!("TRAP   sbcAlarmTrap from {first_active}")),
        "{context}"
    );

    // The chart: written, non-trivial, every series and the switchover marker in it.
    let svg = std::fs::read_to_string(&chart).expect("chart written");
    assert!(svg.len() > 5_000, "chart only {} bytes", svg.len());
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.matches("<polyline").count() >= 8, "too few series");
    for needle in [
        "answered / s",
        "established (UAC)",
        "sbc-a memory",
        "sbc-b memory",
        "sbc-a health",
        "sbc-b health",
        "sbc-b active",
        "2nd critical reading",
        "switchover",
    ] {
        assert!(svg.contains(needle), "chart lacks {needle:?}");
    }

    let _ = std::fs::remove_file(&chart);
    if let Some(dir) = s["dir"].as_str() {
        let dir = PathBuf::from(dir);
        if dir.starts_with(std::env::temp_dir()) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
