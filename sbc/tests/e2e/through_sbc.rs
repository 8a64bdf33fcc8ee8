//! Our UAC → a real `sbc` process → our UAS, with long calls (the BYE goes out seconds after
//! the answer, from either side), over UDP and TCP: every call completes on both sides and the
//! counts match exactly. The `sbc` binary must be built first (`cargo build -p sbc`).

use std::net::SocketAddr;
use std::time::Duration;

use sbc_e2e::{SbcConfig, SbcNode};
use sbc_lab::testing::{assert_all_completed, blocking, until, within};
use sbc_lab::traffic::{ByeFrom, Transport, Uac, UacConfig, Uas, UasConfig};

struct Case {
    access: Transport,
    core: Transport,
    bye_from: ByeFrom,
    calls: u64,
    rate: f64,
    hold: Duration,
}

async fn through_sbc(case: Case) {
    let _ = sbc_e2e::sbc::sbc_binary();
    let mut uas_cfg = UasConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    uas_cfg.transport = case.core;
    uas_cfg.ring = Duration::from_millis(50);
    uas_cfg.hold = case.hold;
    uas_cfg.bye_from = case.bye_from;
    let uas = Uas::start(uas_cfg).await.expect("uas");

    let mut config = SbcConfig::new();
    config.agent = uas.local_addr();
    config.agent_transport = match case.core {
        Transport::Udp => "udp",
        Transport::Tcp => "tcp",
        Transport::Tls => "tls",
    };
    let access = config.access;
    let mut node = blocking(move || SbcNode::start_config(&config)).await;

    let mut cfg = UacConfig::new(access);
    cfg.transport = case.access;
    cfg.calls = Some(case.calls);
    cfg.rate = case.rate;
    cfg.hold = case.hold;
    cfg.bye_from = case.bye_from;
    let uac = Uac::start(cfg).await.expect("uac");
    let stats = uac.stats();
    // Long calls really overlap: all of them are up at once at some point.
    until(
        case.hold + Duration::from_secs(5),
        "all calls established",
        || stats.snapshot().active == case.calls,
    )
    .await;
    let limit = case.hold + Duration::from_secs(20);
    let c = within(limit, "uac", uac.wait()).await;
    let s = within(
        Duration::from_secs(5),
        "uas",
        uas.wait_for_calls(case.calls),
    )
    .await;
    node.assert_alive();
    assert_all_completed(&c, case.calls);
    assert_all_completed(&s, case.calls);
    let n = case.calls;
    assert_eq!((s.received.invite, s.received.ack), (n, n), "{s:#?}");
    match case.bye_from {
        ByeFrom::Caller => assert_eq!((s.received.bye, c.received.bye), (n, 0)),
        ByeFrom::Callee => assert_eq!((c.received.bye, s.received.bye), (n, 0)),
    }
    // The SBC answers 100 Trying itself, before the callee's ring time.
    assert_eq!(c.invite_to_first_response.count, n);
    assert!(
        c.invite_to_first_response.p50_ms < c.invite_to_200.p50_ms
            && c.invite_to_200.p50_ms >= 50.0,
        "{}",
        c.summary()
    );
    drop(uac);
    drop(uas);
    blocking(move || drop(node)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_long_calls_caller_hangs_up() {
    through_sbc(Case {
        access: Transport::Udp,
        core: Transport::Udp,
        bye_from: ByeFrom::Caller,
        calls: 30,
        rate: 15.0,
        hold: Duration::from_secs(3),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_long_calls_callee_hangs_up() {
    through_sbc(Case {
        access: Transport::Udp,
        core: Transport::Udp,
        bye_from: ByeFrom::Callee,
        calls: 30,
        rate: 15.0,
        hold: Duration::from_secs(3),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_long_calls_callee_hangs_up() {
    through_sbc(Case {
        access: Transport::Tcp,
        core: Transport::Tcp,
        bye_from: ByeFrom::Callee,
        calls: 20,
        rate: 10.0,
        hold: Duration::from_secs(3),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_caller_to_udp_callee_caller_hangs_up() {
    through_sbc(Case {
        access: Transport::Tcp,
        core: Transport::Udp,
        bye_from: ByeFrom::Caller,
        calls: 20,
        rate: 10.0,
        hold: Duration::from_secs(3),
    })
    .await;
}
