//! The RTP generator and the SDP-carrying SIP calls without an SBC: calls from our UAC straight
//! to our UAS (each endpoint learns the other's real address from the SDP), and RTP through a
//! small relay of the test's own that stops forwarding for a while, or for good, so the
//! report's gaps, losses and `resumed` are checked against what the relay dropped.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use sbc_lab::media::rtp::{self, CallEndpoints, MediaCall, RtpConfig};
use sbc_lab::media::sip::{SipCalls, SipMediaConfig};
use sbc_lab::testing::{assert_all_completed, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sip_calls_carry_the_endpoints_ports() {
    // The UAC calls the UAS directly: the 200 names B's real port, the INVITE A's.
    let probe = UdpSocket::bind("127.0.0.1:0").expect("probe");
    let uas = probe.local_addr().expect("addr");
    drop(probe);
    let mut cfg = SipMediaConfig::new(uas, uas, 20);
    cfg.rate = 200.0;
    cfg.setup_timeout = Duration::from_secs(20);
    let (sip, calls) = within(Duration::from_secs(30), "setup", SipCalls::establish(&cfg))
        .await
        .expect("establish");
    let st = sip.status();
    assert_eq!(calls.len(), 20, "{st:?}");
    assert_eq!(
        (st.unmatched, st.sdp_errors, st.overflow),
        (0, 0, 0),
        "{st:?}"
    );
    for c in &calls {
        assert_eq!(c.a_relay, c.endpoints.b_addr(), "A sends straight to B");
        assert_eq!(c.b_relay, c.endpoints.a_addr(), "B sends straight to A");
    }
    let rcfg = RtpConfig {
        duration: Duration::from_millis(400),
        drain: Duration::from_millis(200),
        ..RtpConfig::default()
    };
    let report = tokio::task::spawn_blocking(move || rtp::run(calls, &rcfg))
        .await
        .expect("rtp thread")
        .expect("rtp");
    assert_eq!(report.total.sent, 20 * 2 * 20);
    assert_eq!(report.total.silent_directions, 0, "{}", report.summary());
    assert_eq!(report.total.foreign, 0, "{}", report.summary());
    let (uac, uas) = within(
        Duration::from_secs(45),
        "hang up",
        sip.hang_up(Duration::from_secs(40)),
    )
    .await;
    assert_all_completed(&uac, 20);
    assert_all_completed(&uas, 20);
}

/// A relay for one call: what arrives on `leg_a` goes out of `leg_b` to B, and back; while
/// `paused`, everything is dropped and counted.
struct Relay {
    leg_a: SocketAddr,
    leg_b: SocketAddr,
    paused: Arc<AtomicBool>,
    dropped: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Relay {
    fn start(a: SocketAddr, b: SocketAddr) -> Self {
        let sa = UdpSocket::bind("127.0.0.1:0").expect("relay a");
        let sb = UdpSocket::bind("127.0.0.1:0").expect("relay b");
        let (leg_a, leg_b) = (sa.local_addr().expect("a"), sb.local_addr().expect("b"));
        let paused = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let (sa, sb) = (Arc::new(sa), Arc::new(sb));
        for (from, to, dest) in [(sa.clone(), sb.clone(), b), (sb, sa, a)] {
            let (paused, dropped, stop) = (paused.clone(), dropped.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                from.set_read_timeout(Some(Duration::from_millis(20)))
                    .expect("timeout");
                let mut buf = [0u8; 2048];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, _)) = from.recv_from(&mut buf) else {
                        continue;
                    };
                    if paused.load(Ordering::Relaxed) {
                        dropped.fetch_add(1, Ordering::Relaxed);
                    } else {
                        let _ = to.send_to(&buf[..n], dest);
                    }
                }
            }));
        }
        Self {
            leg_a,
            leg_b,
            paused,
            dropped,
            stop,
            threads,
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Three calls through their relays; `outage` pauses them after `at` for `len` (`None`: to
/// the end). Returns the report and the packets the relays dropped.
fn run_with_outage(at: Duration, len: Option<Duration>) -> (rtp::RtpReport, u64) {
    let eps = CallEndpoints::bind_many(3, "127.0.0.1".parse().expect("ip")).expect("bind");
    let relays: Vec<Relay> = eps
        .iter()
        .map(|e| Relay::start(e.a_addr(), e.b_addr()))
        .collect();
    let calls: Vec<MediaCall> = eps
        .into_iter()
        .zip(&relays)
        .map(|(endpoints, r)| MediaCall {
            endpoints,
            a_relay: r.leg_a,
            b_relay: r.leg_b,
        })
        .collect();
    let cfg = RtpConfig {
        duration: Duration::from_millis(1200),
        drain: Duration::from_millis(300),
        ..RtpConfig::default()
    };
    let run = rtp::spawn(calls, &cfg).expect("spawn");
    std::thread::sleep(at);
    assert!(run.arrived() > 0, "media flows before the outage");
    relays
        .iter()
        .for_each(|r| r.paused.store(true, Ordering::Relaxed));
    if let Some(len) = len {
        std::thread::sleep(len);
        relays
            .iter()
            .for_each(|r| r.paused.store(false, Ordering::Relaxed));
    }
    let report = run.join().expect("join");
    // The relays have read everything sent 300 ms ago (the drain); give them a little more.
    std::thread::sleep(Duration::from_millis(50));
    let dropped = relays
        .iter()
        .map(|r| r.dropped.load(Ordering::Relaxed))
        .sum();
    (report, dropped)
}

#[test]
fn a_relay_outage_shows_as_gaps_and_losses() {
    let (report, dropped) =
        run_with_outage(Duration::from_millis(300), Some(Duration::from_millis(300)));
    let t = &report.total;
    assert!(dropped > 0);
    // Every packet the relays dropped is lost, and nothing else (loopback).
    assert_eq!(t.lost, dropped, "{}", report.summary());
    assert_eq!(t.sent, 3 * 2 * 60);
    for c in &report.calls {
        assert!(c.a_to_b.lost > 0 && c.b_to_a.lost > 0, "{c:?}");
        assert!(c.resumed(), "media came back: {c:?}");
    }
    // The gap table lists every call, longest gap first.
    let gaps = report.gaps(0.0);
    assert_eq!(gaps.len(), 3);
    assert!(gaps
        .windows(2)
        .all(|w| w[0].max_gap_ms() >= w[1].max_gap_ms()));
    assert_eq!(report.gap_table(0.0).lines().count(), 2 + 3);
}

#[test]
fn a_relay_that_never_comes_back_is_not_resumed() {
    let (report, dropped) = run_with_outage(Duration::from_millis(300), None);
    let t = &report.total;
    assert_eq!(t.lost, dropped, "{}", report.summary());
    assert_eq!(t.calls_not_resumed, 3, "{}", report.summary());
    for c in &report.calls {
        assert!(!c.a_to_b.resumed && !c.b_to_a.resumed, "{c:?}");
        assert!(
            c.a_to_b.received > 0,
            "media flowed before the outage: {c:?}"
        );
    }
}
