//! Worker-group autoscaling under real SIPp traffic.
//!
//! `scale_down_under_steady_load_loses_no_call`: the access group starts with 4 workers and a
//! profile `scale up to 6 on 70% for 4 cycles / scale down to 2 on 18% for 2 cycles` with a
//! 200 ms cycle (so the guard window after start-up is 10 × 2 cycles = 4 s). SIPp places 600
//! calls at 40 calls/s (15 s); the load is far below 18 %, so the autoscaler retires two
//! workers while the calls flow: each retired worker hands its shards and queued messages to
//! the others. Asserts: both SIPp sides see 600 successful and 0 failed calls, the group went
//! down to 2 workers while the UAC was still running, `show workers` records two scale-down
//! decisions and the 64 shards are still all served.
//!
//! `scale_up_when_routing_blocks`: one worker, a simulated 15 ms routing lookup per new call
//! and 100 calls/s (1.5 worker-seconds of work per second): the group must grow (profile up to
//! 4 on 70 % for 2 of 3 cycles, 200 ms cycle) and every call succeeds (the queue-wait bound is
//! raised to 2 s so the backlog of the first few hundred milliseconds is absorbed, not refused).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sbc_e2e::acli::acli_json;
use sbc_e2e::{calls_through_sbc, Load, SbcConfig, SbcNode, Scenario};
use serde_json::{json, Value};

/// `config` with `extra_sip_config` lines in `[sip-config]`, `profile` attached to the access
/// interface and defined by `profile_toml`.
fn config_with_profile(config: &SbcConfig, extra_sip_config: &str, profile_toml: &str) -> String {
    let base = config.to_toml();
    let base = base.replacen(
        "[sip-config]\n",
        &format!("[sip-config]\n{extra_sip_config}\n"),
        1,
    );
    let base = base.replacen(
        "realm = \"access\"\n",
        "realm = \"access\"\nauto-scaling-profile = \"P\"\n",
        1,
    );
    format!("{base}\n[[auto-scaling-profile]]\nname = \"P\"\n{profile_toml}\n")
}

fn access_group(workers: &Value) -> Value {
    workers["groups"]
        .as_array()
        .and_then(|a| a.iter().find(|g| g["name"] == json!("udp:access")))
        .cloned()
        .unwrap_or(Value::Null)
}

/// How many of a group's recorded scaling decisions go `direction` (`up` or `down`).
fn decisions(group: &Value, direction: &str) -> usize {
    group["decisions"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter(|x| x["text"].as_str().is_some_and(|t| t.starts_with(direction)))
                .count()
        })
        .unwrap_or(0)
}

/// Polls `show workers` every 100 ms in a thread until `stop`; returns the smallest and largest
/// worker counts of the access group seen.
fn watch_workers(
    sock: std::path::PathBuf,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(u64, u64)> {
    std::thread::spawn(move || {
        let (mut min, mut max) = (u64::MAX, 0);
        // Bounded: at most 120 s of polling.
        for _ in 0..1200 {
            if stop.load(Ordering::Acquire) {
                break;
            }
            let out = acli_json(&sock, &["show workers"]);
            if out.code == Some(0) {
                if let Some(n) = access_group(&out.json())["workers"].as_u64() {
                    min = min.min(n);
                    max = max.max(n);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        (min, max)
    })
}

#[test]
fn scale_down_under_steady_load_loses_no_call() {
    let mut config = SbcConfig::new();
    config.workers = 4;
    let toml = config_with_profile(
        &config,
        "auto-scaling-cycle-ms = 200",
        "scale-up-to = 6\nscale-up-on = 70\nscale-up-for = 4\n\
         scale-down-to = 2\nscale-down-on = 18\nscale-down-for = 2",
    );
    let mut node = SbcNode::start(&toml);
    let sock = node.mgmt_socket();
    let before = access_group(&acli_json(&sock, &["show workers"]).assert_ok().json());
    assert_eq!(before["workers"], json!(4), "{before:#}");

    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch_workers(sock.clone(), stop.clone());
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::Builtin("uac"),
        Scenario::Builtin("uas"),
        Load {
            calls: 600,
            rate: 40,
            tcp: false,
            timeout: Duration::from_secs(90),
        },
    );
    // What the watcher saw up to the end of the UAC is what counts: the scale-down must have
    // happened while calls were flowing.
    stop.store(true, Ordering::Release);
    let (min, max) = watcher.join().expect("watcher thread");
    uac.assert_success(600);
    uas.assert_success(600);
    assert_eq!(
        (min, max),
        (2, 4),
        "the access group should go from 4 down to 2 workers during the calls"
    );

    let after = access_group(&acli_json(&sock, &["show workers"]).assert_ok().json());
    assert_eq!(after["workers"], json!(2), "{after:#}");
    assert_eq!(
        decisions(&after, "down"),
        2,
        "two scale-down decisions: {after:#}"
    );
    let shards: u64 = after["members"]
        .as_array()
        .map(|m| m.iter().filter_map(|w| w["shards"].as_u64()).sum())
        .unwrap_or(0);
    assert_eq!(shards, 64, "{after:#}");
    node.assert_alive();
}

#[test]
fn scale_up_when_routing_blocks() {
    let mut config = SbcConfig::new();
    config.workers = 1;
    let toml = config_with_profile(
        &config,
        // Until the second worker starts the queue grows (1.5 times one worker's capacity);
        // a 2 s queue-wait bound lets it absorb that instead of refusing calls with 503.
        "auto-scaling-cycle-ms = 200\nrouting-cost-us = 15000\nmax-queue-delay-ms = 2000",
        "scale-up-to = 4\nscale-up-on = 70\nscale-up-for = 2\nscale-up-within = 3",
    );
    let mut node = SbcNode::start(&toml);
    let sock = node.mgmt_socket();
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch_workers(sock.clone(), stop.clone());
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::Builtin("uac"),
        Scenario::Builtin("uas"),
        Load {
            calls: 800,
            rate: 100,
            tcp: false,
            timeout: Duration::from_secs(90),
        },
    );
    stop.store(true, Ordering::Release);
    let (min, max) = watcher.join().expect("watcher thread");
    uac.assert_success(800);
    uas.assert_success(800);
    assert_eq!(min, 1, "started with one worker");
    assert!(
        max >= 2,
        "the access group never grew under 1.5 worker-seconds of routing per second"
    );
    let after = access_group(&acli_json(&sock, &["show workers"]).assert_ok().json());
    assert!(decisions(&after, "up") >= 1, "{after:#}");
    let stats = acli_json(&sock, &["show sip-stats"]).assert_ok().json();
    assert_eq!(
        stats["counters"]["routed_new"].as_u64(),
        Some(800),
        "each call paid for one routing lookup: {stats:#}"
    );
    node.assert_alive();
}
