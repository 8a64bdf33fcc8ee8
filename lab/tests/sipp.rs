//! SIPp judges the lab generator: our UAC against SIPp's UAS and SIPp's UAC against our UAS, on
//! the same run, and our counters must agree with SIPp's (`-trace_stat` successful and failed
//! calls, `-trace_counts` messages). A missing `sipp` is a failure, never a skip.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use sbc_e2e::{ports, Scenario, Sipp, SippResult, TestDir};
use sbc_lab::testing::{assert_all_completed, blocking, within};
use sbc_lab::traffic::{ByeFrom, Snapshot, Transport, Uac, UacConfig, Uas, UasConfig};

fn fresh() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], ports::free_port()))
}

/// Runs our UAC (`cfg`, targeted at a SIPp UAS playing `scenario` on a fresh port) and returns
/// (ours, SIPp's).
async fn uac_against_sipp(
    mut cfg: UacConfig,
    scenario: Scenario<'static>,
) -> (Snapshot, SippResult, TestDir) {
    common::require_sipp();
    let dir = TestDir::for_current_test();
    let addr = fresh();
    let calls = cfg.calls.expect("a call count");
    let mut sipp = Sipp::new(&dir, "sipp-uas")
        .play(scenario)
        .local(addr)
        .calls(u32::try_from(calls).expect("calls"))
        .timeout(Duration::from_secs(40));
    if cfg.transport == Transport::Tcp {
        sipp = sipp.tcp();
    }
    let tcp = cfg.transport == Transport::Tcp;
    let uas = blocking(move || {
        let p = sipp.spawn();
        sbc_e2e::sipp::wait_listening(addr, tcp, Duration::from_secs(5));
        p
    })
    .await;
    cfg.target = addr;
    let uac = Uac::start(cfg).await.expect("uac");
    let ours = within(Duration::from_secs(30), "our uac", uac.wait()).await;
    // SIPp's UAS exits after its -m calls (the built-in one pauses 4 s after each call). Our
    // UAC stays up meanwhile: closing its TCP connection would fail SIPp's last calls.
    let theirs = blocking(move || uas.wait_at_most(Duration::from_secs(15))).await;
    drop(uac);
    (ours, theirs, dir)
}

/// Runs SIPp's UAC (`scenario`, `calls` at `rate`) against our UAS and returns (ours, SIPp's).
async fn sipp_against_uas(
    cfg: UasConfig,
    scenario: Scenario<'static>,
    calls: u64,
    rate: u32,
) -> (Snapshot, SippResult, TestDir) {
    common::require_sipp();
    let dir = TestDir::for_current_test();
    let tcp = cfg.transport == Transport::Tcp;
    let uas = Uas::start(cfg).await.expect("uas");
    let mut sipp = Sipp::new(&dir, "sipp-uac")
        .play(scenario)
        .local(fresh())
        .remote(uas.local_addr())
        .calls(u32::try_from(calls).expect("calls"))
        .rate(rate)
        .timeout(Duration::from_secs(40));
    if tcp {
        sipp = sipp.tcp();
    }
    let theirs = blocking(move || sipp.run()).await;
    let ours = within(
        Duration::from_secs(10),
        "our uas",
        uas.wait_for_calls(calls),
    )
    .await;
    (ours, theirs, dir)
}

/// Our counters agree with SIPp's on the same calls.
fn assert_agree(ours: &Snapshot, theirs: &SippResult) {
    let s = &theirs.stats;
    assert_eq!(
        (ours.attempted, ours.completed, ours.failed),
        (s.created, s.successful, s.failed),
        "(attempted, completed, failed): ours vs SIPp's\n{}\n{}",
        ours.summary(),
        theirs.describe()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_uac_against_sipp_uas_udp() {
    let mut cfg = UacConfig::new(fresh());
    cfg.calls = Some(30);
    cfg.rate = 30.0;
    cfg.hold = Duration::from_millis(200);
    let (ours, theirs, _dir) = uac_against_sipp(cfg, Scenario::Builtin("uas")).await;
    theirs.assert_success(30);
    assert_agree(&ours, &theirs);
    assert_all_completed(&ours, 30);
    // Message by message: what we sent is what SIPp received, and the other way round.
    let c = |col: &str| theirs.count(col);
    assert_eq!(c("0_INVITE_Recv"), 30, "{:?}", theirs.counts);
    assert_eq!(c("4_BYE_Recv"), 30);
    assert_eq!(
        ours.retransmissions_sent,
        c("0_INVITE_Retrans") + c("4_BYE_Retrans"),
        "{:?}",
        theirs.counts
    );
    let responses_sent = ["1_180", "2_200", "5_200"]
        .iter()
        .map(|m| c(&format!("{m}_Sent")) + c(&format!("{m}_Retrans")))
        .sum::<u64>();
    assert_eq!(
        ours.received.responses, responses_sent,
        "{:?}",
        theirs.counts
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_uac_against_sipp_uas_tcp() {
    let mut cfg = UacConfig::new(fresh());
    cfg.transport = Transport::Tcp;
    cfg.calls = Some(30);
    cfg.rate = 30.0;
    cfg.hold = Duration::from_millis(200);
    let (ours, theirs, _dir) = uac_against_sipp(cfg, Scenario::Builtin("uas")).await;
    theirs.assert_success(30);
    assert_agree(&ours, &theirs);
    assert_all_completed(&ours, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_uac_against_sipp_busy_uas_counts_486_failures() {
    let mut cfg = UacConfig::new(fresh());
    cfg.calls = Some(10);
    cfg.rate = 20.0;
    let (ours, theirs, _dir) = uac_against_sipp(cfg, Scenario::File("uas_busy.xml")).await;
    // SIPp's scenario (answer 486, get the ACK) succeeds; each of our calls fails with 486.
    theirs.assert_success(10);
    assert_eq!(
        (ours.attempted, ours.failed, ours.answered),
        (10, 10, 0),
        "{ours:#?}"
    );
    assert_eq!(ours.failures.get("error_response_486"), Some(&10));
    assert_eq!(theirs.count("2_ACK_Recv"), 10, "{:?}", theirs.counts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_uac_waits_for_sipp_callee_bye() {
    let mut cfg = UacConfig::new(fresh());
    cfg.calls = Some(20);
    cfg.rate = 20.0;
    cfg.hold = Duration::from_millis(100);
    cfg.bye_from = ByeFrom::Callee;
    let (ours, theirs, _dir) = uac_against_sipp(cfg, Scenario::File("uas_callee_bye.xml")).await;
    theirs.assert_success(20);
    assert_agree(&ours, &theirs);
    assert_all_completed(&ours, 20);
    assert_eq!(ours.received.bye, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sipp_uac_against_our_uas_udp() {
    let mut cfg = UasConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.ring = Duration::from_millis(20);
    let (ours, theirs, _dir) = sipp_against_uas(cfg, Scenario::Builtin("uac"), 30, 30).await;
    theirs.assert_success(30);
    assert_agree(&ours, &theirs);
    assert_all_completed(&ours, 30);
    assert_eq!(
        ours.received.invite,
        theirs.count("0_INVITE_Sent") + theirs.count("0_INVITE_Retrans")
    );
    assert_eq!(ours.received.ack, 30);
    assert_eq!(ours.received.bye, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sipp_uac_against_our_uas_tcp() {
    let mut cfg = UasConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.transport = Transport::Tcp;
    cfg.ring = Duration::from_millis(20);
    let (ours, theirs, _dir) = sipp_against_uas(cfg, Scenario::Builtin("uac"), 30, 30).await;
    theirs.assert_success(30);
    assert_agree(&ours, &theirs);
    assert_all_completed(&ours, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sipp_uac_waits_for_our_callee_bye() {
    let mut cfg = UasConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.ring = Duration::from_millis(20);
    cfg.hold = Duration::from_millis(100);
    cfg.bye_from = ByeFrom::Callee;
    let (ours, theirs, _dir) =
        sipp_against_uas(cfg, Scenario::File("uac_callee_bye.xml"), 20, 20).await;
    theirs.assert_success(20);
    assert_agree(&ours, &theirs);
    assert_all_completed(&ours, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sipp_uac_rejected_by_our_uas_agrees_on_failures() {
    // Our UAS rejects with 486: SIPp's built-in UAC expects 200, so every call fails on its
    // side, and each is one rejected (not failed) call on ours.
    let mut cfg = UasConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.answer_code = 486;
    let (ours, theirs, _dir) = sipp_against_uas(cfg, Scenario::Builtin("uac"), 10, 20).await;
    assert_eq!(theirs.stats.failed, 10, "{}", theirs.describe());
    assert_eq!(theirs.stats.successful, 0);
    assert_eq!(
        (ours.attempted, ours.rejected, ours.failed),
        (theirs.stats.created, theirs.stats.failed, 0),
        "{ours:#?}"
    );
}
