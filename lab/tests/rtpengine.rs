//! The NG client and the RTP generator against a real rtpengine (Debian's
//! `rtpengine-daemon`, userspace forwarding) on loopback, on ports of its own: ping, offer,
//! answer, an error reply, delete, then a few calls of RTP through it.
//!
//! Skipped, with a message, when `rtpengine` is not on PATH, unless
//! `SBC_LAB_REQUIRE_RTPENGINE=1` (run-tests.sh installs the package and sets it).

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sbc_e2e::ports::free_block;
use sbc_e2e::TestDir;
use sbc_lab::media::ng::{NgClient, NgError, NgOptions};
use sbc_lab::media::rtp::{self, CallEndpoints, RtpConfig};
use sbc_lab::media::{rtpengine, sdp};

fn rtpengine_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .map(|dir| dir.join("rtpengine"))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("SBC_LAB_REQUIRE_RTPENGINE").is_none_or(|v| v != "1"),
            "rtpengine not found but SBC_LAB_REQUIRE_RTPENGINE=1: apt-get install -y rtpengine-daemon"
        );
        // Straight to stderr, past the test harness's capture: a skip must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: rtpengine is not installed (apt-get install -y rtpengine-daemon, or run ./run-tests.sh)"
        );
    }
    found
}

/// An rtpengine of this test's own, killed (by its PID) when dropped.
struct Rtpengine {
    child: Child,
    ng: SocketAddr,
    ports: (u16, u16),
    dir: TestDir,
}

impl Rtpengine {
    fn start(bin: &PathBuf, name: &str) -> Self {
        let dir = TestDir::new(name);
        let ng_port = free_block(1);
        // 4 ports a call (RTP and RTCP on each leg): room for 10 calls.
        let first = free_block(40);
        let (lo, hi) = (first, first + 39);
        let ng = SocketAddr::from(([127, 0, 0, 1], ng_port));
        let log = std::fs::File::create(dir.path().join("rtpengine.log")).expect("log file");
        let child = Command::new(bin)
            .args([
                "--config-file=none",
                "--table=-1",
                "--interface=127.0.0.1",
                &format!("--listen-ng={ng}"),
                &format!("--port-min={lo}"),
                &format!("--port-max={hi}"),
                "--foreground",
                "--log-stderr",
                "--log-level=5",
                "--num-threads=2",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("rtpengine starts");
        Self {
            child,
            ng,
            ports: (lo, hi),
            dir,
        }
    }

    /// A client once rtpengine answers a ping (bounded: 10 s).
    fn client(&mut self) -> NgClient {
        let mut ng = NgClient::new(self.ng).expect("NG socket");
        ng.set_timeout(Duration::from_millis(200), 1);
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            match ng.ping() {
                Ok(()) => break,
                Err(e) if Instant::now() < end => {
                    if let Ok(Some(status)) = self.child.try_wait() {
                        panic!("rtpengine exited ({status}): {}", self.log());
                    }
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("rtpengine does not answer: {e}\n{}", self.log()),
            }
        }
        ng.set_timeout(Duration::from_secs(1), 3);
        ng
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("rtpengine.log")).unwrap_or_default()
    }

    fn in_range(&self, port: u16) -> bool {
        (self.ports.0..=self.ports.1).contains(&port)
    }
}

impl Drop for Rtpengine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn ng_ping_offer_answer_delete() {
    let Some(bin) = rtpengine_binary() else {
        return;
    };
    let mut engine = Rtpengine::start(&bin, "rtpengine-ng");
    let mut ng = engine.client();
    ng.ping().expect("ping");

    let a: SocketAddr = "127.0.0.1:30000".parse().expect("addr");
    let b: SocketAddr = "127.0.0.1:30002".parse().expect("addr");
    let offer = sdp::endpoint_sdp(a, 1, Some("ng-test"));
    let to_b = ng
        .offer("ng-call", "tag-a", &offer, &NgOptions::anchoring())
        .expect("offer");
    let seen_by_b = sdp::parse(to_b.as_bytes()).expect("offer reply SDP");
    assert_eq!(seen_by_b.rtp.ip(), a.ip(), "{to_b}");
    assert!(engine.in_range(seen_by_b.rtp.port()), "{to_b}");
    // rtpengine keeps the session name, as an SBC must.
    assert_eq!(seen_by_b.key.as_deref(), Some("ng-test"), "{to_b}");

    let answer = sdp::endpoint_sdp(b, 2, None);
    let to_a = ng
        .answer(
            "ng-call",
            "tag-a",
            "tag-b",
            &answer,
            &NgOptions::anchoring(),
        )
        .expect("answer");
    let seen_by_a = sdp::parse(to_a.as_bytes()).expect("answer reply SDP");
    assert!(engine.in_range(seen_by_a.rtp.port()), "{to_a}");
    assert_ne!(seen_by_a.rtp, seen_by_b.rtp, "one port per leg");

    // An answer for a call rtpengine never saw is `result: error`.
    match ng.answer("no-such-call", "x", "y", &answer, &NgOptions::anchoring()) {
        Err(NgError::Failed { command, reason }) => {
            assert_eq!(command, "answer");
            assert!(!reason.is_empty());
        }
        other => panic!("expected result: error, got {other:?}"),
    }

    let deleted = ng.delete("ng-call", "tag-a").expect("delete");
    assert_eq!(deleted.result, "ok");
    assert_eq!(deleted.warning, None, "{:?}", deleted.dict.keys());
    // Its statistics come back in an unsorted dictionary, decoded all the same.
    assert!(deleted.get("totals").is_some(), "{:?}", deleted.dict.keys());
    // A call it never saw is a warning, not an error. (A second delete of ng-call would be
    // `ok`: rtpengine keeps a deleted call for --delete-delay, 30 s.)
    let unknown = ng
        .delete("no-such-call", "x")
        .expect("delete of an unknown call");
    assert!(unknown.warning.is_some(), "{:?}", unknown.dict);
}

#[test]
fn rtp_through_rtpengine() {
    let Some(bin) = rtpengine_binary() else {
        return;
    };
    let mut engine = Rtpengine::start(&bin, "rtpengine-rtp");
    let mut ng = engine.client();
    let endpoints = CallEndpoints::bind_many(4, "127.0.0.1".parse().expect("ip")).expect("bind");
    let anchored =
        rtpengine::anchor(&mut ng, endpoints, "rtp-test", &NgOptions::anchoring()).expect("anchor");
    assert_eq!(anchored.calls.len(), 4);
    for c in &anchored.calls {
        assert!(engine.in_range(c.a_relay.port()) && engine.in_range(c.b_relay.port()));
        assert_ne!(
            c.a_relay,
            c.endpoints.b_addr(),
            "media goes through rtpengine"
        );
    }
    let cfg = RtpConfig {
        duration: Duration::from_millis(1000),
        ..RtpConfig::default()
    };
    let report = rtp::run(anchored.calls, &cfg).expect("rtp run");
    let t = &report.total;
    assert_eq!(t.sent, 4 * 2 * 50, "{}", report.summary());
    assert_eq!(t.silent_directions, 0, "{}", report.summary());
    assert_eq!((t.foreign, t.duplicates), (0, 0), "{}", report.summary());
    // Loopback at 400 packets/s: at most a handful lost, whatever the machine's load.
    assert!(t.lost * 100 <= t.sent, "{}", report.summary());
    assert!(
        report.calls.iter().all(|c| c.resumed()),
        "{}",
        report.summary()
    );
    let known = rtpengine::release(&mut ng, &anchored.ids).expect("delete");
    assert_eq!(known, 4, "{}", engine.log());
}
