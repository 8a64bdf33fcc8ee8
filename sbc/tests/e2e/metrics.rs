//! Prometheus `/metrics` of running nodes, read over real HTTP/1.1 on loopback.
//!
//! Asserts:
//! - `scrapes_agree_with_show_sip_stats_under_sipp_load`: a node with `metrics-address` is
//!   scraped every 100 ms while 300 SIPp calls at 50 calls/s cross it: every scrape answers
//!   200 in the OpenMetrics type, the call counters never go back, and the calls all succeed
//!   (0 failed). Afterwards the call, request and transaction counters of a scrape equal those
//!   of `show sip-stats` read on either side of it, and `sbc_sip_calls_attempted_total` is 300.
//! - `both_nodes_follow_a_switchover`: each node of a pair serves its own `metrics-address`
//!   (node-local: not pushed). With 60 calls up, the standby's `sbc_ha_sync_revision` reaches
//!   the active's and the active's `sbc_ha_sync_lag_changes` is 0; the roles, epochs and
//!   heartbeat counters agree with `show redundancy`. After `notify berpd force` the role
//!   gauges swap on both nodes, the epoch moved on both, the new active's sync lag returns to
//!   0 once the former active has joined as its standby, and the calls all end (0 failed).
//! - `prometheus_scrapes_the_pair_and_the_dashboard_answers`: a real Prometheus (Debian's)
//!   scrapes both nodes every second: both targets up; it sees the active's instance as
//!   `sbc_redundancy_role{role="active"} == 1`, and the other one within 10 s of `notify berpd
//!   force`; 100 SIPp calls across it all succeed and the two nodes' attempted counters sum
//!   to 100; every expression of `docs/grafana-sbc-pair.json` is valid PromQL and has data,
//!   but for what this pair has none of (admission refusals, alarms, TLS certificates); with
//!   docs/prometheus-alerts.yml loaded, SbcSwitchover fires after the switchover and no other
//!   alert fires on the healthy pair.
//! - `alert_rules_pass_promtool`: `promtool check rules` and `promtool test rules` (the rules
//!   on promtool's virtual clock: split brain, a standby out of sync, a standing sync lag).
//! - `a_busy_metrics_address_refuses_to_start`: the listener is bound before the ready line
//!   (a scrape right after it is answered); an address another process holds stops the start
//!   with the address in the error.
//! - `strangers_on_the_metrics_port`: 16 silent connections fill the listener: a 17th is
//!   closed unanswered; the silent ones are closed at the 2 s head deadline and a scrape is
//!   served again; another path gets 404, `POST` 405 with `Allow: GET`, a 16 KiB head 431
//!   (or a close), bytes that are not HTTP 400 (or a close); nothing stops the listener.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sbc_e2e::acli::acli_json;
use sbc_e2e::pair::{lo, Pair, PairConfig, NAMES};
use sbc_e2e::prometheus::{http_exchange, HttpAnswer, Prometheus};
use sbc_e2e::{calls_through_sbc, ports, Load, SbcConfig, SbcNode, Scenario};
use serde_json::Value;

fn send(addr: SocketAddr, request: &[u8]) -> Option<HttpAnswer> {
    http_exchange(addr, request)
}

/// `GET /metrics`: the exposition text; panics unless it is a 200 in the OpenMetrics type.
#[track_caller]
fn scrape(addr: SocketAddr) -> String {
    let a = send(addr, b"GET /metrics HTTP/1.1\r\nHost: sbc\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer from {addr}"));
    assert_eq!(a.status, 200, "{}\n{}", a.head, a.body);
    assert!(
        a.head
            .contains("content-type: application/openmetrics-text"),
        "{}",
        a.head
    );
    assert!(a.body.ends_with("# EOF\n"), "{}", a.body);
    a.body
}

/// The value of one series (`name{labels}` exactly as exported).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[track_caller]
fn must(text: &str, series: &str) -> f64 {
    value(text, series).unwrap_or_else(|| panic!("{series} missing from:\n{text}"))
}

/// A counter of `show sip-stats --json`.
fn sip_stat(node: &SbcNode, key: &str) -> f64 {
    let v = acli_json(&node.mgmt_socket(), &["show sip-stats"])
        .assert_ok()
        .json();
    v["counters"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("no counter {key} in {v}"))
}

#[test]
fn scrapes_agree_with_show_sip_stats_under_sipp_load() {
    let config = SbcConfig::new();
    let metrics = SocketAddr::new(lo(1), ports::free_port());
    let mut node = SbcNode::start(&format!(
        "[system-config]\nmetrics-address = \"{metrics}\"\n\n{}",
        config.to_toml()
    ));
    let first = scrape(metrics);
    assert_eq!(must(&first, "sbc_sip_calls_attempted_total"), 0.0);
    assert_eq!(must(&first, "sbc_redundancy_enabled"), 0.0);

    let stop = Arc::new(AtomicBool::new(false));
    let scraper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut scrapes, mut last) = (0u32, 0.0);
            // Bounded: at most 600 scrapes (the load takes about 8 s).
            for _ in 0..600 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let text = scrape(metrics);
                let attempted = must(&text, "sbc_sip_calls_attempted_total");
                assert!(
                    attempted >= last,
                    "a counter went back: {last} -> {attempted}"
                );
                last = attempted;
                scrapes += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            scrapes
        })
    };
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
    stop.store(true, Ordering::Relaxed);
    let scrapes = scraper.join().expect("every scrape answered");
    eprintln!("{scrapes} scrapes during the calls");
    uac.assert_success(300);
    uas.assert_success(300);
    assert!(scrapes >= 10, "only {scrapes} scrapes in the run");

    // Idle now: a scrape between two readings of show sip-stats equals both.
    for (key, series) in [
        ("calls_attempted", "sbc_sip_calls_attempted_total"),
        ("calls_answered", "sbc_sip_calls_answered_total"),
        ("calls_failed", "sbc_sip_calls_failed_total"),
        ("requests_in", "sbc_sip_requests_received_total"),
        ("responses_in", "sbc_sip_responses_received_total"),
        ("routed_new", "sbc_sip_transactions_routed_total"),
        (
            "retransmissions_absorbed",
            "sbc_sip_retransmissions_total{direction=\"absorbed\"}",
        ),
    ] {
        let before = sip_stat(&node, key);
        let scraped = must(&scrape(metrics), series);
        let after = sip_stat(&node, key);
        assert!(
            before <= scraped && scraped <= after,
            "{series} = {scraped}, show sip-stats {key} {before} then {after}"
        );
    }
    let last = scrape(metrics);
    assert_eq!(must(&last, "sbc_sip_calls_attempted_total"), 300.0);
    assert_eq!(must(&last, "sbc_sip_calls_answered_total"), 300.0);
    assert_eq!(must(&last, "sbc_sip_calls_failed_total"), 0.0);
    assert_eq!(must(&last, "sbc_health_score"), 100.0);
}

/// Node `i`'s `show redundancy --json` data.
fn redundancy(pair: &Pair, i: usize) -> Value {
    pair.redundancy_json(i)
        .unwrap_or_else(|| panic!("{} does not answer", NAMES[i]))
}

/// Scrapes `addr` until `done` holds (bounded: 50 scrapes 200 ms apart); the last scrape.
#[track_caller]
fn scrape_until(addr: SocketAddr, what: &str, done: impl Fn(&str) -> bool) -> String {
    let mut text = String::new();
    for _ in 0..50 {
        text = scrape(addr);
        if done(&text) {
            return text;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{what} never seen at {addr}:\n{text}");
}

/// The role gauges of a scrape agree with `show redundancy`, and so do the epoch and the
/// heartbeat counters (the scrape taken between two readings).
#[track_caller]
fn agrees_with_show_redundancy(pair: &Pair, i: usize, addr: SocketAddr) -> String {
    let before = redundancy(pair, i);
    let text = scrape(addr);
    let after = redundancy(pair, i);
    let state = after["state"].as_str().unwrap_or("?");
    assert_eq!(before["state"], after["state"], "the role moved meanwhile");
    assert_eq!(
        must(&text, &format!("sbc_redundancy_role{{role=\"{state}\"}}")),
        1.0,
        "{}: {state}\n{text}",
        NAMES[i]
    );
    let epoch = must(&text, "sbc_redundancy_epoch");
    assert_eq!(Some(epoch as u64), after["epoch"].as_u64(), "{text}");
    for key in ["received", "accepted", "sent"] {
        let scraped = must(&text, &format!("sbc_ha_heartbeats_{key}_total"));
        let (lo, hi) = (
            before["counters"][key].as_f64().unwrap_or(f64::NAN),
            after["counters"][key].as_f64().unwrap_or(f64::NAN),
        );
        assert!(
            lo <= scraped && scraped <= hi,
            "{}: heartbeats {key} {scraped}, show redundancy {lo} then {hi}",
            NAMES[i]
        );
    }
    text
}

/// A pair whose nodes serve `/metrics` on their own (node-local) addresses.
fn pair_with_metrics() -> (Pair, [SocketAddr; 2]) {
    let mut config = PairConfig::new();
    let metrics = [
        SocketAddr::new(lo(11), ports::free_port()),
        SocketAddr::new(lo(12), ports::free_port()),
    ];
    for (i, addr) in metrics.iter().enumerate() {
        config.node_system_lines[i].push(format!("metrics-address = \"{addr}\""));
    }
    (Pair::start(config), metrics)
}

#[test]
fn both_nodes_follow_a_switchover() {
    let (pair, metrics) = pair_with_metrics();
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    pair.wait_redundancy(standby, Duration::from_secs(10), "synchronized", |r| {
        r.synchronized
    });

    let uas = pair.spawn_uas("uas", 60, Duration::from_secs(60));
    let uac = pair
        .uac("uac", 60, 20, 8_000, Duration::from_secs(40))
        .spawn();
    // All 60 calls are up 3 s after the last one started.
    std::thread::sleep(Duration::from_secs(4));
    pair.wait_replicated(standby, 60, Duration::from_secs(10));
    let on_active = scrape(metrics[active]);
    let revision = must(&on_active, "sbc_ha_sync_revision");
    assert!(revision >= 60.0, "{on_active}");
    let standby_caught_up = scrape_until(metrics[standby], "the active's revision", |t| {
        value(t, "sbc_ha_sync_revision").is_some_and(|r| r >= revision)
    });
    assert_eq!(
        must(&standby_caught_up, "sbc_redundancy_replicated_dialogs"),
        60.0,
        "{standby_caught_up}"
    );
    assert_eq!(must(&standby_caught_up, "sbc_redundancy_synchronized"), 1.0);
    scrape_until(metrics[active], "no sync lag", |t| {
        value(t, "sbc_ha_sync_lag_changes") == Some(0.0)
    });
    let a = agrees_with_show_redundancy(&pair, active, metrics[active]);
    eprintln!(
        "the active with 60 calls up:\n{}",
        a.lines()
            .filter(|l| l.starts_with("sbc_sip_calls")
                || l.starts_with("sbc_redundancy_role{role=\"active\"}")
                || l.starts_with("sbc_redundancy_role{role=\"standby\"}")
                || l.starts_with("sbc_ha_sync_rev")
                || l.starts_with("sbc_ha_sync_lag"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let s = agrees_with_show_redundancy(&pair, standby, metrics[standby]);
    assert_eq!(must(&a, "sbc_sip_calls_active"), 60.0, "{a}");
    assert_eq!(must(&s, "sbc_redundancy_role{role=\"active\"}"), 0.0);
    let epoch = must(&a, "sbc_redundancy_epoch");

    let reply = pair
        .exec(active, "notify berpd force")
        .expect("the active answers");
    assert_eq!(reply["ok"], Value::Bool(true), "{reply}");
    pair.wait_redundancy(standby, Duration::from_secs(10), "active", |r| {
        r.is_active()
    });
    pair.wait_redundancy(active, Duration::from_secs(10), "standby", |r| {
        r.is_standby()
    });
    let started = Instant::now();
    let now_active = agrees_with_show_redundancy(&pair, standby, metrics[standby]);
    let now_standby = agrees_with_show_redundancy(&pair, active, metrics[active]);
    eprintln!(
        "after the switchover (read in {} ms):\n{}\n{}",
        started.elapsed().as_millis(),
        now_active
            .lines()
            .filter(|l| l.starts_with("sbc_redundancy") || l.starts_with("sbc_ha_sync"))
            .collect::<Vec<_>>()
            .join("\n"),
        now_standby
            .lines()
            .filter(|l| l.starts_with("sbc_redundancy_role"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    assert_eq!(
        must(&now_active, "sbc_redundancy_role{role=\"active\"}"),
        1.0
    );
    assert_eq!(
        must(&now_standby, "sbc_redundancy_role{role=\"standby\"}"),
        1.0
    );
    assert!(must(&now_active, "sbc_redundancy_epoch") > epoch);
    assert!(must(&now_standby, "sbc_redundancy_epoch") > epoch);
    assert!(must(&now_active, "sbc_ha_sync_revision") >= revision);
    // Until the former active joins as standby the new active counts every change as unsent;
    // the snapshot it sends then brings the lag to 0.
    scrape_until(metrics[standby], "the new active's lag back to 0", |t| {
        value(t, "sbc_ha_sync_lag_changes") == Some(0.0)
    });

    let uac = uac.wait();
    let uas = uas.wait_at_most(Duration::from_secs(20));
    uac.assert_success(60);
    uas.assert_success(60);
}

#[test]
fn strangers_on_the_metrics_port() {
    let config = SbcConfig::new();
    let metrics = SocketAddr::new(lo(1), ports::free_port());
    let _node = SbcNode::start(&format!(
        "[system-config]\nmetrics-address = \"{metrics}\"\n\n{}",
        config.to_toml()
    ));
    scrape(metrics);

    // 16 silent connections take every place.
    let silent: Vec<TcpStream> = (0..16)
        .map(|_| TcpStream::connect(metrics).expect("accepted"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let seventeenth = send(metrics, b"GET /metrics HTTP/1.1\r\nHost: sbc\r\n\r\n");
    assert!(
        seventeenth.is_none(),
        "a 17th connection was served while 16 held every place"
    );
    // The head deadline (2 s) closes them; bounded wait of 6 s each.
    let closed_at = Instant::now();
    for mut s in silent {
        s.set_read_timeout(Some(Duration::from_secs(6)))
            .expect("a timeout");
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf);
        assert!(
            n.is_ok() || n.is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "a silent connection was kept past 6 s"
        );
    }
    let waited = closed_at.elapsed();
    eprintln!(
        "16 silent connections closed within {} ms",
        waited.as_millis()
    );
    scrape(metrics);

    let other = send(metrics, b"GET /admin HTTP/1.1\r\nHost: sbc\r\n\r\n").expect("an answer");
    assert_eq!(other.status, 404, "{}", other.head);
    let post = send(
        metrics,
        b"POST /metrics HTTP/1.1\r\nHost: sbc\r\nContent-Length: 0\r\n\r\n",
    )
    .expect("an answer");
    assert_eq!(post.status, 405, "{}", post.head);
    assert!(post.head.contains("allow: get"), "{}", post.head);
    let mut big = b"GET /metrics HTTP/1.1\r\nHost: sbc\r\nX-Filler: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 16 * 1024));
    big.extend_from_slice(b"\r\n\r\n");
    if let Some(a) = send(metrics, &big) {
        assert_eq!(a.status, 431, "a 16 KiB head: {}", a.head);
    }
    if let Some(a) = send(
        metrics,
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n",
    ) {
        assert_eq!(a.status, 400, "bytes that are not HTTP: {}", a.head);
    }
    let text = scrape(metrics);
    assert_eq!(must(&text, "sbc_sip_calls_attempted_total"), 0.0);
}

/// The expressions of the Grafana dashboard, `$instance` matching every instance.
fn dashboard_expressions() -> Vec<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/grafana-sbc-pair.json");
    let text = std::fs::read_to_string(path).expect("docs/grafana-sbc-pair.json");
    let doc: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut out = Vec::new();
    for panel in doc["panels"].as_array().into_iter().flatten() {
        let title = panel["title"].as_str().unwrap_or("?");
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                out.push((title.to_owned(), expr.replace("$instance", ".*")));
            }
        }
    }
    out
}

#[test]
fn prometheus_scrapes_the_pair_and_the_dashboard_answers() {
    let (pair, metrics) = pair_with_metrics();
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    let rules = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/prometheus-alerts.yml");
    let prometheus = Prometheus::start(pair.dir(), &metrics, Some(std::path::Path::new(rules)));
    prometheus.wait_targets_up(2, Duration::from_secs(20));

    let uas = pair.spawn_uas("uas", 100, Duration::from_secs(60));
    let uac = pair
        .uac("uac", 100, 20, 3_000, Duration::from_secs(40))
        .spawn();
    std::thread::sleep(Duration::from_secs(3));
    let is_active = "sbc_redundancy_role{role=\"active\"} == 1";
    let actives = prometheus.samples(is_active);
    assert_eq!(
        actives,
        vec![(metrics[active].to_string(), 1.0)],
        "Prometheus' view of the active"
    );
    pair.exec(active, "notify berpd force")
        .expect("the active answers");
    // Bounded: 40 queries 250 ms apart (scrapes are 1 s apart).
    let mut seen = Vec::new();
    for _ in 0..40 {
        seen = prometheus.samples(is_active);
        if seen == vec![(metrics[standby].to_string(), 1.0)] {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(
        seen,
        vec![(metrics[standby].to_string(), 1.0)],
        "Prometheus never saw the new active"
    );
    // The switchover moved the epoch on: SbcSwitchover fires (bounded: 40 × 250 ms).
    let switchover_firing = |alerts: &[(String, String, Value)]| {
        alerts
            .iter()
            .any(|(name, state, _)| name == "SbcSwitchover" && state == "firing")
    };
    let mut alerts = Vec::new();
    for _ in 0..40 {
        alerts = prometheus.alerts();
        if switchover_firing(&alerts) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(
        switchover_firing(&alerts),
        "SbcSwitchover not firing: {alerts:?}"
    );
    let uac = uac.wait();
    let uas = uas.wait_at_most(Duration::from_secs(20));
    uac.assert_success(100);
    uas.assert_success(100);
    // Two more scrapes after the last call.
    std::thread::sleep(Duration::from_secs(2));
    let attempted: f64 = prometheus
        .samples("sbc_sip_calls_attempted_total")
        .iter()
        .map(|(_, v)| v)
        .sum();
    assert_eq!(
        attempted, 100.0,
        "calls attempted on the two nodes together"
    );

    // Every expression of the dashboard is valid PromQL over what the pair exports.
    let mut empty = Vec::new();
    for (title, expr) in dashboard_expressions() {
        let answer = prometheus.query(&expr);
        assert_eq!(
            answer["status"], "success",
            "panel {title}: {expr}: {answer}"
        );
        if answer["data"]["result"]
            .as_array()
            .is_none_or(Vec::is_empty)
        {
            empty.push(format!("{title}: {expr}"));
        }
    }
    eprintln!(
        "dashboard expressions without data here:\n{}",
        empty.join("\n")
    );
    // Only what this pair has none of: no admission refusal, no alarm, no TLS certificate.
    let none_here = [
        "sbc_sip_admission_closed_reason",
        "sbc_alarm_active",
        "sbc_tls_certificate_expiry_timestamp_seconds",
    ];
    let unexpected: Vec<&String> = empty
        .iter()
        .filter(|e| !none_here.iter().any(|n| e.contains(n)))
        .collect();
    assert!(
        unexpected.is_empty(),
        "dashboard expressions without data: {unexpected:?}"
    );
    // A healthy pair again: nothing but the switchover's own alert.
    let others: Vec<_> = prometheus
        .alerts()
        .into_iter()
        .filter(|(name, _, _)| name != "SbcSwitchover")
        .collect();
    assert!(others.is_empty(), "alerts on a healthy pair: {others:?}");
}

/// `promtool` (Debian's prometheus package) checks the alerting rules and runs their unit
/// tests on its virtual clock (docs/prometheus-alerts.test.yml).
#[test]
fn alert_rules_pass_promtool() {
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs");
    for args in [
        ["check", "rules", "prometheus-alerts.yml"],
        ["test", "rules", "prometheus-alerts.test.yml"],
    ] {
        let out = std::process::Command::new("/usr/bin/promtool")
            .args(args)
            .current_dir(docs)
            .output()
            .expect("promtool (apt-get install --no-install-recommends prometheus)");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "promtool {}: {text}", args.join(" "));
        assert!(text.contains("SUCCESS"), "{text}");
    }
}

/// A metrics-address another process holds: the node refuses to start, naming it.
#[test]
fn a_busy_metrics_address_refuses_to_start() {
    let holder = std::net::TcpListener::bind((lo(1), 0)).expect("a port");
    let busy = holder.local_addr().expect("its address");
    let dir = sbc_e2e::TestDir::for_current_test();
    let file = dir.file("busy.toml");
    std::fs::write(
        &file,
        format!(
            "[system-config]\nmetrics-address = \"{busy}\"\n\n{}",
            SbcConfig::new().to_toml()
        ),
    )
    .expect("write config");
    let stderr = crate::acli::run_refused(&dir, &file);
    assert!(
        stderr.contains(&format!("cannot bind metrics-address {busy}")),
        "{stderr}"
    );
}
