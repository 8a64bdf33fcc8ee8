//! SIPp-to-SIPp self-checks, no SBC involved: every UAC/UAS scenario pair used by the SBC tests
//! must succeed when the two SIPp sides talk directly, so a failure of an SBC test points at
//! the SBC, not at a scenario or at the harness. These also exercise the harness itself
//! (ports, background UAS killed by PID, statistics and trace parsing).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use sbc_e2e::{ports, run_pair, Sipp, TestDir};

fn addr(ip: [u8; 4]) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), ports::free_port())
}

/// Runs `uac_file` against `uas_file` directly for `calls` calls and asserts both succeed.
fn pair(uac: &str, uas: &str, calls: u32) {
    let dir = TestDir::for_current_test();
    let uas_addr = addr([127, 0, 2, 1]);
    let uac_addr = addr([127, 0, 1, 1]);
    let uas_sipp = Sipp::new(&dir, "uas")
        .scenario(uas)
        .local(uas_addr)
        .calls(calls)
        .timeout(Duration::from_secs(40));
    let uac_sipp = Sipp::new(&dir, "uac")
        .scenario(uac)
        .local(uac_addr)
        .remote(uas_addr)
        .calls(calls)
        .rate(10)
        .timeout(Duration::from_secs(30));
    let (uac_r, uas_r) = run_pair(uas_sipp, uas_addr, false, uac_sipp);
    uac_r.assert_success(u64::from(calls));
    uas_r.assert_success(u64::from(calls));
}

#[test]
fn builtin_uac_uas_direct_with_stats_counts_and_trace() {
    let dir = TestDir::for_current_test();
    let uas_addr = addr([127, 0, 2, 1]);
    let uac_addr = addr([127, 0, 1, 1]);
    let uas = Sipp::new(&dir, "uas")
        .builtin("uas")
        .local(uas_addr)
        .calls(20)
        .timeout(Duration::from_secs(30));
    let uac = Sipp::new(&dir, "uac")
        .builtin("uac")
        .local(uac_addr)
        .remote(uas_addr)
        .calls(20)
        .rate(50)
        .timeout(Duration::from_secs(20));
    let (uac_r, uas_r) = run_pair(uas, uas_addr, false, uac);
    uac_r.assert_success(20);
    uas_r.assert_success(20);
    assert_eq!(uas_r.count("0_INVITE_Recv"), 20, "{:?}", uas_r.counts);
    let trace = uas_r.trace();
    let invites = trace
        .iter()
        .filter(|e| e.received && e.text.starts_with("INVITE "))
        .count();
    assert_eq!(
        invites,
        20,
        "trace parse of {}",
        uas_r.messages_path.display()
    );
}

#[test]
fn builtin_uac_uas_direct_tcp() {
    let dir = TestDir::for_current_test();
    let uas_addr = addr([127, 0, 2, 1]);
    let uac_addr = addr([127, 0, 1, 1]);
    let uas = Sipp::new(&dir, "uas")
        .builtin("uas")
        .tcp()
        .local(uas_addr)
        .calls(10)
        .timeout(Duration::from_secs(30));
    let uac = Sipp::new(&dir, "uac")
        .builtin("uac")
        .tcp()
        .local(uac_addr)
        .remote(uas_addr)
        .calls(10)
        .rate(50)
        .timeout(Duration::from_secs(20));
    let (uac_r, uas_r) = run_pair(uas, uas_addr, true, uac);
    uac_r.assert_success(10);
    // Directly connected, the UAC closes its TCP connection when it exits, which fails the UAS
    // calls still in their final 4 s pause (FailedTcpClosed). Through the SBC the UAS's
    // connection is the SBC's and stays open. So here, judge the UAS by its message counts.
    assert_eq!(uas_r.count("0_INVITE_Recv"), 10, "{}", uas_r.describe());
    assert_eq!(uas_r.count("4_BYE_Recv"), 10, "{}", uas_r.describe());
    assert_eq!(uas_r.count("5_200_Sent"), 10, "{}", uas_r.describe());
}

#[test]
fn callee_bye_pair_direct() {
    pair("uac_callee_bye.xml", "uas_callee_bye.xml", 3);
}

#[test]
fn reinvite_pair_direct() {
    pair("uac_reinvite.xml", "uas_reinvite.xml", 3);
}

#[test]
fn cancel_pair_direct() {
    pair("uac_cancel.xml", "uas_cancel.xml", 3);
}

#[test]
fn busy_pair_direct() {
    pair("uac_busy.xml", "uas_busy.xml", 3);
}

#[test]
fn domain_caller_and_phone_pair_direct() {
    pair("uac_domain.xml", "uas_phone.xml", 3);
}

#[test]
fn no_answer_uac_against_stand_in_408() {
    pair("uac_no_answer.xml", "uas_selfcheck_408.xml", 2);
}

/// uas_no_answer.xml must absorb the INVITE retransmissions of a caller that gets no answer
/// and end its call successfully after its silence window.
#[test]
fn no_answer_uas_absorbs_retransmissions() {
    let dir = TestDir::for_current_test();
    let uas_addr = addr([127, 0, 2, 1]);
    let uac_addr = addr([127, 0, 1, 1]);
    let uas = Sipp::new(&dir, "uas")
        .scenario("uas_no_answer.xml")
        .local(uas_addr)
        .calls(1)
        .timeout(Duration::from_secs(20));
    // The UAC gives up after 5 s without a 100 (that is its failure, expected here).
    let uac = Sipp::new(&dir, "uac")
        .scenario("uac_no_answer.xml")
        .local(uac_addr)
        .remote(uas_addr)
        .calls(1)
        .timeout(Duration::from_secs(15));
    let (uac_r, uas_r) = run_pair(uas, uas_addr, false, uac);
    assert_eq!(uac_r.code, Some(1), "{}", uac_r.describe());
    uas_r.assert_success(1);
    // `Retransmissions(C)` counts only what SIPp re-sent; received ones are in the counts file.
    assert!(uas_r.count("0_INVITE_Retrans") > 0, "{:?}", uas_r.counts);
}

#[test]
fn ports_are_unique_and_free() {
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        let p = ports::free_port();
        assert!(seen.insert(p), "port {p} handed out twice");
        assert!((10_000..32_000).contains(&p));
    }
}
