//! Our UAC against our UAS on 127.0.0.1 (no SBC): exact counts over UDP and TCP, BYE from
//! either side, rejected calls, timeouts with timer A retransmissions, 481 to a BYE, and the
//! UAS's 200 retransmission and INVITE absorption checked with a raw socket.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use sbc_lab::testing::{assert_all_completed, blocking, until, within};
use sbc_lab::traffic::{ByeFrom, Timers, Transport, Uac, UacConfig, Uas, UasConfig};

fn any_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

async fn pair(transport: Transport, bye_from: ByeFrom, calls: u64) {
    let mut uas_cfg = UasConfig::new(any_port());
    uas_cfg.transport = transport;
    uas_cfg.ring = Duration::from_millis(20);
    uas_cfg.hold = Duration::from_millis(300);
    uas_cfg.bye_from = bye_from;
    uas_cfg.calls = Some(calls);
    let uas = Uas::start(uas_cfg).await.expect("uas");
    let mut cfg = UacConfig::new(uas.local_addr());
    cfg.transport = transport;
    cfg.rate = 100.0;
    cfg.calls = Some(calls);
    cfg.hold = Duration::from_millis(300);
    cfg.bye_from = bye_from;
    let uac = Uac::start(cfg).await.expect("uac");
    let c = within(Duration::from_secs(20), "uac", uac.wait()).await;
    let s = within(Duration::from_secs(5), "uas", uas.wait()).await;
    assert_all_completed(&c, calls);
    assert_all_completed(&s, calls);
    // Loopback loses nothing: no retransmission either way, every message counted once.
    assert_eq!(
        c.retransmissions_sent + s.retransmissions_sent,
        0,
        "{c:#?}\n{s:#?}"
    );
    assert_eq!(
        (s.received.invite, s.received.ack),
        (calls, calls),
        "{s:#?}"
    );
    let byes = match bye_from {
        ByeFrom::Caller => (s.received.bye, c.received.bye),
        ByeFrom::Callee => (c.received.bye, s.received.bye),
    };
    assert_eq!(byes, (calls, 0), "BYEs received (hung-up side, other side)");
    assert_eq!(c.invite_to_first_response.count, calls);
    assert_eq!(c.invite_to_200.count, calls);
    assert!(c.invite_to_200.p50_ms >= 19.0, "ring time shows: {c:#?}");
    assert!(c.invite_to_first_response.max_ms <= c.invite_to_200.max_ms);
    assert_eq!(c.stray_messages + s.stray_messages, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_caller_hangs_up() {
    pair(Transport::Udp, ByeFrom::Caller, 40).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_callee_hangs_up() {
    pair(Transport::Udp, ByeFrom::Callee, 40).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_caller_hangs_up() {
    pair(Transport::Tcp, ByeFrom::Caller, 40).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_callee_hangs_up() {
    pair(Transport::Tcp, ByeFrom::Callee, 40).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_calls_are_failures_with_their_code() {
    let mut uas_cfg = UasConfig::new(any_port());
    uas_cfg.answer_code = 486;
    let uas = Uas::start(uas_cfg).await.expect("uas");
    let mut cfg = UacConfig::new(uas.local_addr());
    cfg.calls = Some(10);
    cfg.rate = 50.0;
    let uac = Uac::start(cfg).await.expect("uac");
    let c = within(Duration::from_secs(10), "uac", uac.wait()).await;
    let s = uas.wait_for_calls(10).await;
    assert_eq!((c.attempted, c.answered, c.failed), (10, 0, 10), "{c:#?}");
    assert_eq!(c.failures.get("error_response_486"), Some(&10), "{c:#?}");
    assert_eq!(c.failures.len(), 1);
    assert_eq!(c.invite_to_200.count, 0);
    assert_eq!((s.attempted, s.rejected, s.failed), (10, 10, 0), "{s:#?}");
    // The non-2xx is ACKed in its transaction: every rejection was acknowledged.
    until(Duration::from_secs(2), "ACKs", || {
        uas.snapshot().received.ack == 10
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_invites_time_out_after_timer_a_retransmissions() {
    // A socket that reads nothing: no ICMP, no answer.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let mut cfg = UacConfig::new(silent.local_addr().expect("addr"));
    cfg.calls = Some(5);
    cfg.rate = 100.0;
    cfg.timers = Timers {
        t1: Duration::from_millis(20),
        t2: Duration::from_millis(80),
    };
    let uac = Uac::start(cfg).await.expect("uac");
    let c = within(Duration::from_secs(10), "uac", uac.wait()).await;
    assert_eq!((c.attempted, c.failed, c.answered), (5, 5, 0), "{c:#?}");
    assert_eq!(c.failures.get("timeout"), Some(&5));
    // Timer A: re-sent at T1, 3T1, 7T1, 15T1, 31T1, 63T1 before timer B at 64T1 (the last
    // one may lose the race to B when the scheduler is late).
    assert!(
        (25..=30).contains(&c.retransmissions_sent),
        "timer A retransmissions: {c:#?}"
    );
    drop(silent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bye_answered_481_fails_the_call() {
    // Calls established on a UAS that then loses its state (a switchover without state
    // sync): the new UAS on the same address answers every BYE 481.
    let mut uas_cfg = UasConfig::new(any_port());
    uas_cfg.ring = Duration::ZERO;
    uas_cfg.hold = Duration::from_secs(2);
    let first = Uas::start(uas_cfg.clone()).await.expect("uas");
    let addr = first.local_addr();
    let mut cfg = UacConfig::new(addr);
    cfg.calls = Some(10);
    cfg.rate = 100.0;
    cfg.hold = Duration::from_secs(2);
    let uac = Uac::start(cfg).await.expect("uac");
    until(Duration::from_secs(5), "answered", || {
        uac.snapshot().active == 10
    })
    .await;
    let _ = first.close().await;
    uas_cfg.local = addr;
    let second = Uas::start(uas_cfg).await.expect("uas on the same address");
    let c = within(Duration::from_secs(10), "uac", uac.wait()).await;
    assert_eq!(
        (c.attempted, c.answered, c.completed, c.failed),
        (10, 10, 0, 10),
        "{c:#?}"
    );
    assert_eq!(c.failures.get("bye_rejected_481"), Some(&10), "{c:#?}");
    let s = second.snapshot();
    assert_eq!(
        (s.attempted, s.stray_messages, s.received.bye),
        (0, 10, 10),
        "{s:#?}"
    );
}

/// Reads one datagram (at most 2 s) as text.
fn recv_text(sock: &std::net::UdpSocket) -> String {
    let mut buf = [0u8; 4096];
    let n = sock
        .recv(&mut buf)
        .expect("a message within the read timeout");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uas_retransmits_200_until_ack_and_absorbs_invite_retransmissions() {
    let mut uas_cfg = UasConfig::new(any_port());
    uas_cfg.ring = Duration::ZERO;
    uas_cfg.timers = Timers {
        t1: Duration::from_millis(50),
        t2: Duration::from_millis(200),
    };
    let uas = Uas::start(uas_cfg).await.expect("uas");
    let target = uas.local_addr();
    let stats = uas.stats();
    blocking(move || {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        sock.set_read_timeout(Some(Duration::from_secs(2))).expect("timeout");
        sock.connect(target).expect("connect");
        let me = sock.local_addr().expect("addr");
        let invite = format!(
            "INVITE sip:service@{target} SIP/2.0\r\nVia: SIP/2.0/UDP {me};branch=z9hG4bKraw1\r\nMax-Forwards: 70\r\nFrom: <sip:raw@{me}>;tag=r1\r\nTo: <sip:service@{target}>\r\nCall-ID: raw-1@test\r\nCSeq: 1 INVITE\r\nContact: <sip:raw@{me}>\r\nContent-Length: 0\r\n\r\n"
        );
        sock.send(invite.as_bytes()).expect("send");
        assert!(recv_text(&sock).starts_with("SIP/2.0 100 "));
        let ok = recv_text(&sock);
        assert!(ok.starts_with("SIP/2.0 200 "), "{ok}");
        // An INVITE retransmission is answered from state (the 200 again), not a new call.
        sock.send(invite.as_bytes()).expect("send");
        assert!(recv_text(&sock).starts_with("SIP/2.0 200 "));
        // Without ACK the 200 keeps coming: T1, 2T1, 4T1 (capped at T2)...
        for _ in 0..3 {
            assert!(recv_text(&sock).starts_with("SIP/2.0 200 "));
        }
        let to = ok
            .lines()
            .find(|l| l.starts_with("To:"))
            .expect("To")
            .trim_start_matches("To:")
            .trim()
            .to_owned();
        let in_dialog = |method: &str, cseq: &str, branch: &str| {
            format!(
                "{method} sip:lab@{target} SIP/2.0\r\nVia: SIP/2.0/UDP {me};branch={branch}\r\nMax-Forwards: 70\r\nFrom: <sip:raw@{me}>;tag=r1\r\nTo: {to}\r\nCall-ID: raw-1@test\r\nCSeq: {cseq}\r\nContent-Length: 0\r\n\r\n"
            )
        };
        sock.send(in_dialog("ACK", "1 ACK", "z9hG4bKraw2").as_bytes()).expect("ack");
        std::thread::sleep(Duration::from_millis(400));
        sock.send(in_dialog("BYE", "2 BYE", "z9hG4bKraw3").as_bytes()).expect("bye");
        // Any 200 still in flight before the ACK landed, then the BYE's 200.
        let mut bye_ok = false;
        for _ in 0..5 {
            let m = recv_text(&sock);
            if m.starts_with("SIP/2.0 200 ") && m.contains("CSeq: 2 BYE") {
                bye_ok = true;
                break;
            }
        }
        assert!(bye_ok, "BYE answered 200");
    })
    .await;
    until(Duration::from_secs(2), "call ended", || stats.ended() == 1).await;
    let s = stats.snapshot();
    assert_eq!(
        (s.attempted, s.answered, s.completed, s.failed),
        (1, 1, 1, 0),
        "{s:#?}"
    );
    assert_eq!(s.received.invite, 2);
    assert_eq!(s.retransmissions_received, 1, "{s:#?}");
    assert!(s.retransmissions_sent >= 3, "{s:#?}");
}
