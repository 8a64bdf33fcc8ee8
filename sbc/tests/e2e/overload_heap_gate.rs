//! Heap-gated admission end to end, with real SIPp over UDP on loopback.
//!
//! The node starts with `system-config heap-limit-mb = 1024` (jemalloc's allocated heap is
//! about 1 MB, far under any threshold), `sip-config heap-reject-threshold = 50`,
//! `heap-resume-threshold = 40`, `retry-after-min = 3`, `retry-after-max = 9`. Lowering
//! `heap-limit-mb` to 1 MiB at runtime puts the real heap above 100 % of the limit, so the gate
//! (refreshed every 100 ms from jemalloc's statistics) must close; restoring 1024 puts it near
//! 0.1 %, so it must open again.
//!
//! Asserts:
//! - `scenario_uac_503_retry_after_fails_without_the_header` (SIPp to SIPp, no SBC):
//!   `uac_503_retry_after.xml` succeeds against `uas_503.xml` sending `Retry-After: 7`, and
//!   fails its calls when the 503 has no Retry-After or a non-numeric one: the scenario really
//!   checks the header.
//! - `heap_gate_rejects_new_calls_and_keeps_established_ones`:
//!   1. a SIPp UAC (built-in `uac`, `-d 10000`) establishes 30 calls through the SBC to a SIPp
//!      UAS (built-in `uas`) behind it; `show sip-stats` counts 30 active calls;
//!   2. `heap-limit-mb 1` is set through the ACLI (`configure terminal` … `save-config`,
//!      `activate-config`, which must say all changes are in effect); within a bounded wait
//!      `show sip-stats` reports admission `503 (heap)`, while all 30 calls are still up, and
//!      snmptrapd receives an `sbcAlarmTrap` for alarm 131074, task `sipd`, threshold 50;
//!   3. while the gate is closed, 20 new calls from a second SIPp UAC
//!      (`uac_503_retry_after.xml`) all end as scripted: a 503 with a numeric Retry-After, ACKed
//!      hop by hop; every 503 in its trace carries a Retry-After within 3..=9; the SBC's
//!      `calls-attempted` stays at 30 and `rejected-503` reaches 20; the first UAC's 30 calls
//!      then all end with a successful BYE (0 failed) and the gate is still closed after the
//!      last of them;
//!   4. `heap-limit-mb 1024` is restored the same way; within a bounded wait admission is
//!      `accepting` again and an `sbcAlarmClearTrap` (threshold 40) arrives; 10 new calls (built-in `uac`) succeed (0 failed); the UAS, which
//!      served every call, saw exactly 40 calls and 40 INVITEs (30 + 10: none of the 20
//!      refused ones reached it), all successful; the SBC counted 40 answered calls.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sbc_e2e::acli::{acli, Mgmt};
use sbc_e2e::snmp::Trapd;
use sbc_e2e::{ports, run_pair, SbcConfig, SbcNode, Sipp, SippResult, TestDir};
use serde_json::Value;

/// `sip-config retry-after-min` and `retry-after-max` of the node.
const RETRY_AFTER: std::ops::RangeInclusive<u64> = 3..=9;
/// Calls established before the gate closes, held by the caller for [`HOLD_MS`].
const LONG_CALLS: u32 = 30;
/// How long the first UAC holds each call before its BYE.
const HOLD_MS: u32 = 10_000;
/// New calls offered while the gate is closed.
const REFUSED_CALLS: u32 = 20;
/// New calls offered after the gate reopened.
const LATER_CALLS: u32 = 10;
/// Bound of every wait for the node to reach a state.
const WAIT: Duration = Duration::from_secs(15);

/// The node's config: the harness's access/core/agent config with the heap gate's keys.
fn heap_gate_toml(config: &SbcConfig, trap_port: u16) -> String {
    let base = config.to_toml();
    let sip = format!(
        "[sip-config]\n\
         heap-reject-threshold = 50\n\
         heap-resume-threshold = 40\n\
         retry-after-min = {}\n\
         retry-after-max = {}\n",
        RETRY_AFTER.start(),
        RETRY_AFTER.end()
    );
    assert!(base.starts_with("[sip-config]\n"), "{base}");
    format!(
        "[system-config]\nhostname = \"gate-node\"\nheap-limit-mb = 1024\n\n\
         [[system-config.trap-receiver]]\nip-address = \"127.0.0.1\"\nport = {trap_port}\n\
         community = \"public\"\n\n{}",
        base.replacen("[sip-config]\n", &sip, 1)
    )
}

/// Sets `system-config heap-limit-mb` through the ACLI, saves and activates it.
fn set_heap_limit(node: &SbcNode, mb: u64) {
    let limit = format!("heap-limit-mb {mb}");
    let out = acli(
        &node.mgmt_socket(),
        &[
            "configure terminal",
            "system",
            "system-config",
            &limit,
            "done",
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
        "activate-config of {limit}:\n{}",
        out.describe()
    );
}

/// The value of the `admission` line of `show sip-stats` (text): `accepting` or `503 (...)`.
fn admission(m: &mut Mgmt) -> String {
    let reply = m.exec("show sip-stats", false);
    let output = reply["output"].as_str().unwrap_or_default();
    output
        .lines()
        .find_map(|l| {
            let l = l.trim();
            l.strip_prefix("admission ")
                .map(|rest| rest.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no admission line in show sip-stats: {reply}"))
}

/// Whether an admission value names the heap among its reasons (`503 (heap)`,
/// `503 (critical-memory, heap)`).
fn names_heap(admission: &str) -> bool {
    admission.starts_with("503")
        && admission
            .split(['(', ')', ','])
            .any(|reason| reason.trim() == "heap")
}

/// `show sip-stats --json`.
fn sip_stats(m: &mut Mgmt) -> Value {
    m.data("show sip-stats")
}

fn counter(stats: &Value, name: &str) -> u64 {
    stats["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name} in {stats:#}"))
}

/// Polls `show sip-stats --json` (bounded by [`WAIT`]) until `pred` holds; returns it.
#[track_caller]
fn wait_stats(m: &mut Mgmt, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let stats = sip_stats(m);
        if pred(&stats) {
            return stats;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {WAIT:?}; last show sip-stats {stats:#}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls the admission line (bounded by [`WAIT`]) until `pred` holds; returns it.
#[track_caller]
fn wait_admission(m: &mut Mgmt, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let a = admission(m);
        if pred(&a) {
            return a;
        }
        if Instant::now() >= deadline {
            let memory = m.exec("show memory", false);
            panic!(
                "{what}: not within {WAIT:?}; show sip-stats still says admission {a:?}\n\
                 show memory:\n{}",
                memory["output"].as_str().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `Retry-After` values of the 503s a SIPp run received, from its message trace.
fn retry_afters_of_503s(run: &SippResult) -> Vec<Option<u64>> {
    run.trace()
        .iter()
        .filter(|e| e.received && e.text.starts_with("SIP/2.0 503 "))
        .map(|e| {
            e.text.lines().find_map(|l| {
                let (name, value) = l.split_once(':')?;
                if !name.trim().eq_ignore_ascii_case("retry-after") {
                    return None;
                }
                value
                    .trim()
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .and_then(|n| n.parse().ok())
            })
        })
        .collect()
}

#[test]
fn scenario_uac_503_retry_after_fails_without_the_header() {
    let dir = TestDir::for_current_test();
    for (n, (header, calls_succeed)) in [
        ("Retry-After: 7", true),
        ("Subject: no-retry-after", false),
        ("Retry-After: soon", false),
    ]
    .into_iter()
    .enumerate()
    {
        let uas_addr = SocketAddr::from(([127, 0, 2, 1], ports::free_port()));
        let uac_addr = SocketAddr::from(([127, 0, 1, 1], ports::free_port()));
        let uas = Sipp::new(&dir, &format!("uas-{n}"))
            .scenario("uas_503.xml")
            .args(["-key", "extra_header", header])
            .local(uas_addr)
            .calls(2)
            .timeout(Duration::from_secs(30));
        let uac = Sipp::new(&dir, &format!("uac-{n}"))
            .scenario("uac_503_retry_after.xml")
            .local(uac_addr)
            .remote(uas_addr)
            .calls(2)
            .rate(10)
            .timeout(Duration::from_secs(20));
        let (uac, uas) = run_pair(uas, uas_addr, false, uac);
        // The stand-in UAS plays its part either way: 503, then the caller's ACK.
        uas.assert_success(2);
        if calls_succeed {
            uac.assert_success(2);
            assert_eq!(
                retry_afters_of_503s(&uac),
                vec![Some(7), Some(7)],
                "{}",
                uac.describe()
            );
        } else {
            assert!(
                uac.code == Some(1) && uac.stats.failed == 2 && uac.stats.successful == 0,
                "a 503 with `{header}` must fail both calls\n{}",
                uac.describe()
            );
        }
    }
}

#[test]
fn heap_gate_rejects_new_calls_and_keeps_established_ones() {
    let config = SbcConfig::new();
    let tdir = TestDir::for_current_test();
    let trapd = Trapd::start(&tdir);
    let mut node = SbcNode::start_in(&tdir, &heap_gate_toml(&config, trapd.port()));
    let dir = node.dir().clone();
    let mut m = Mgmt::connect(&node.mgmt_socket());
    assert_eq!(admission(&mut m), "accepting");

    // 1. Long calls: one UAS behind the SBC serves every call of the test.
    let total_served = LONG_CALLS + LATER_CALLS;
    let uas = Sipp::new(&dir, "uas")
        .builtin("uas")
        .local(config.agent)
        .calls(total_served)
        .timeout(Duration::from_secs(120));
    let uas = uas.spawn();
    sbc_e2e::sipp::wait_listening(config.agent, false, Duration::from_secs(5));
    let long_uac = Sipp::new(&dir, "uac-long")
        .builtin("uac")
        .local(SocketAddr::new(config.access.ip(), ports::free_port()))
        .remote(config.access)
        .calls(LONG_CALLS)
        .rate(15)
        .args(["-d", &HOLD_MS.to_string()])
        .timeout(Duration::from_secs(60))
        .spawn();
    wait_stats(&mut m, "30 calls established", |s| {
        s["calls_active"].as_u64() == Some(u64::from(LONG_CALLS))
            && counter(s, "calls_answered") == u64::from(LONG_CALLS)
    });

    // 2. Close the gate: the real heap (about 1 MB) is over 100 % of a 1 MiB limit.
    set_heap_limit(&node, 1);
    let closed = wait_admission(
        &mut m,
        "the heap gate closing after heap-limit-mb 1 was activated (activate-config said all \
         changes are in effect)",
        names_heap,
    );
    // The change is trapped: sbcAlarmTrap, heap, task sipd, major, the reject threshold.
    let trap = trapd.wait_trap("SBC-PAIR-MIB::sbcAlarmTrap", 0, WAIT);
    for (object, printed) in [
        ("sbcAlarmId", "Gauge32: 131074"),
        ("sbcAlarmTask", "STRING: sipd"),
        ("sbcAlarmThreshold", "INTEGER: 50 percent"),
        ("sbcNodeName", "STRING: gate-node"),
    ] {
        assert_eq!(
            trap.get(&format!("SBC-PAIR-MIB::{object}.0")),
            Some(printed),
            "in {}",
            trap.line
        );
    }
    let at_close = sip_stats(&mut m);
    assert_eq!(
        at_close["calls_active"].as_u64(),
        Some(u64::from(LONG_CALLS)),
        "some established calls ended before the gate closed ({closed}); the {HOLD_MS} ms hold \
         is too short on this machine: {at_close:#}"
    );
    assert_eq!(counter(&at_close, "rejected_503"), 0, "{at_close:#}");

    // 3. New calls get 503 + Retry-After; none reaches the UAS.
    let refused = Sipp::new(&dir, "uac-refused")
        .scenario("uac_503_retry_after.xml")
        .local(SocketAddr::new(config.access.ip(), ports::free_port()))
        .remote(config.access)
        .calls(REFUSED_CALLS)
        .rate(20)
        .timeout(Duration::from_secs(30))
        .run();
    refused.assert_success(u64::from(REFUSED_CALLS));
    let retry_afters = retry_afters_of_503s(&refused);
    assert!(
        retry_afters.len() >= REFUSED_CALLS as usize
            && retry_afters
                .iter()
                .all(|r| r.is_some_and(|s| RETRY_AFTER.contains(&s))),
        "Retry-After of each 503 (expected within {RETRY_AFTER:?}): {retry_afters:?}\n{}",
        refused.describe()
    );
    let after_refused = wait_stats(&mut m, "20 rejected with 503", |s| {
        counter(s, "rejected_503") >= u64::from(REFUSED_CALLS)
    });
    assert_eq!(
        counter(&after_refused, "calls_attempted"),
        u64::from(LONG_CALLS),
        "a refused INVITE was relayed: {after_refused:#}"
    );
    // Each INVITE answered once, unless SIPp retransmitted one (then the 503 may be sent again).
    assert!(
        counter(&after_refused, "rejected_503")
            <= u64::from(REFUSED_CALLS) + refused.stats.retransmissions,
        "{after_refused:#}\n{}",
        refused.describe()
    );

    // The established calls' BYEs go through the closed gate.
    let long_uac = long_uac.wait();
    long_uac.assert_success(u64::from(LONG_CALLS));
    assert!(
        names_heap(&admission(&mut m)),
        "the gate reopened while the established calls ended"
    );
    wait_stats(&mut m, "the 30 calls ended", |s| {
        s["calls_active"].as_u64() == Some(0)
    });

    // 4. Reopen: restore the limit; new calls succeed again.
    set_heap_limit(&node, 1024);
    wait_admission(
        &mut m,
        "the heap gate reopening after heap-limit-mb 1024 was activated",
        |a| a == "accepting",
    );
    let clear = trapd.wait_trap("SBC-PAIR-MIB::sbcAlarmClearTrap", 0, WAIT);
    for (object, printed) in [
        ("sbcAlarmId", "Gauge32: 131074"),
        ("sbcAlarmTask", "STRING: sipd"),
        ("sbcAlarmThreshold", "INTEGER: 40 percent"),
    ] {
        assert_eq!(
            clear.get(&format!("SBC-PAIR-MIB::{object}.0")),
            Some(printed),
            "in {}",
            clear.line
        );
    }
    let later = Sipp::new(&dir, "uac-later")
        .builtin("uac")
        .local(SocketAddr::new(config.access.ip(), ports::free_port()))
        .remote(config.access)
        .calls(LATER_CALLS)
        .rate(10)
        .timeout(Duration::from_secs(30))
        .run();
    later.assert_success(u64::from(LATER_CALLS));
    let uas = uas.wait_at_most(Duration::from_secs(15));
    uas.assert_success(u64::from(total_served));
    assert_eq!(
        (uas.stats.created, uas.count("0_INVITE_Recv")),
        (u64::from(total_served), u64::from(total_served)),
        "the UAS must have seen exactly the {LONG_CALLS} + {LATER_CALLS} admitted calls\n{}",
        uas.describe()
    );
    let end = wait_stats(&mut m, "40 calls answered", |s| {
        counter(s, "calls_answered") == u64::from(total_served)
    });
    assert_eq!(
        counter(&end, "calls_attempted"),
        u64::from(total_served),
        "{end:#}"
    );
    node.assert_alive();
}

/// The heap jemalloc reports allocated (`show memory --json`), bytes; waits (bounded) for the
/// first reading of a node just started.
fn heap_allocated(m: &mut Mgmt) -> u64 {
    let deadline = Instant::now() + WAIT;
    loop {
        let memory = m.data("show memory");
        if let Some(b) = memory["readings"]["heap_allocated"].as_u64() {
            return b;
        }
        assert!(
            Instant::now() < deadline,
            "no heap_allocated in show memory: {memory:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A burst of calls closes the gate by itself (no configuration change), and once its calls
/// and their transactions are gone the heap comes back and the gate opens again: a node does
/// not keep refusing new calls after a burst because its tables kept the burst's room.
///
/// `heap-limit-mb 8`, reject at 50 % (4 MiB), resume under 40 % (3.2 MiB); the idle heap is
/// about 1.3 MiB. 2,000 calls at 400/s, each held 1 s: their transactions (kept 32 s, RFC
/// 6026) take the heap past 4 MiB and the gate closes (later calls of the burst get 503);
/// then, within a bounded wait, admission is `accepting` again and 20 new calls succeed.
#[test]
fn a_burst_that_closed_the_heap_gate_opens_it_again_once_its_calls_are_gone() {
    const BURST: u32 = 2_000;
    const AFTER: u32 = 20;
    let config = SbcConfig::new();
    let tdir = TestDir::for_current_test();
    let trapd = Trapd::start(&tdir);
    let toml = heap_gate_toml(&config, trapd.port()).replacen(
        "heap-limit-mb = 1024",
        "heap-limit-mb = 8",
        1,
    );
    let node = SbcNode::start_in(&tdir, &toml);
    let dir = node.dir().clone();
    let mut m = Mgmt::connect(&node.mgmt_socket());
    assert_eq!(admission(&mut m), "accepting");
    let idle = heap_allocated(&mut m);

    let uas = Sipp::new(&dir, "uas")
        .builtin("uas")
        .local(config.agent)
        .calls(BURST + AFTER)
        .timeout(Duration::from_secs(240))
        .spawn();
    sbc_e2e::sipp::wait_listening(config.agent, false, Duration::from_secs(5));
    let burst = Sipp::new(&dir, "uac-burst")
        .builtin("uac")
        .local(SocketAddr::new(config.access.ip(), ports::free_port()))
        .remote(config.access)
        .calls(BURST)
        .rate(400)
        .args(["-d", "1000"])
        .timeout(Duration::from_secs(60))
        .spawn();
    // The gate closes during the burst, by the burst alone.
    let closed = wait_admission(&mut m, "the burst closing the heap gate", names_heap);
    let peak = heap_allocated(&mut m);
    let burst = burst.wait();
    eprintln!(
        "burst: {:?}; gate {closed} at {peak} bytes of heap",
        burst.stats
    );
    assert!(
        burst.stats.failed > 0,
        "the gate refused none of the burst: {}",
        burst.describe()
    );

    // Once the calls are gone, the heap comes back and the gate opens again.
    let ended = Instant::now();
    let bound = Duration::from_secs(120);
    let reopened = loop {
        let a = admission(&mut m);
        if a == "accepting" {
            break ended.elapsed();
        }
        assert!(
            ended.elapsed() < bound,
            "the heap gate is still closed {bound:?} after the burst ({a}); heap {} bytes, \
             idle {idle}",
            heap_allocated(&mut m)
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let after = heap_allocated(&mut m);
    println!(
        "MEASURE heap_gate_burst: heap idle {idle} B, during the burst {peak} B, at reopening {after} B, {} ms after the burst ended",
        reopened.as_millis()
    );
    let later = Sipp::new(&dir, "uac-later")
        .builtin("uac")
        .local(SocketAddr::new(config.access.ip(), ports::free_port()))
        .remote(config.access)
        .calls(AFTER)
        .rate(10)
        .timeout(Duration::from_secs(30))
        .run();
    later.assert_success(u64::from(AFTER));
    drop(uas);
}
