//! kill -9 of the active, and a planned switchover (`notify berpd force`), mid-call with RTP
//! flowing both ways (issue 14): the media resumes through the new active on the same
//! addresses and ports.
//!
//! A pair anchors media on steering pools (access 127.0.0.1, core 127.0.0.2, on the shared
//! service addresses). The lab's UAC places 30 SDP-carrying calls through the active to the
//! lab's UAS; each call has two RTP endpoints that learnt the SBC's ports from the SDP they
//! received. Once the standby holds the 30 dialogs (with their media), the endpoints send
//! 20 ms RTP both ways for 14 s; 4 s into it the active is killed with SIGKILL by its PID (or
//! told `notify berpd force`: it releases the media ports with the SIP address, the standby
//! takes them).
//!
//! Asserts: every call's media resumed both ways through the new active (the endpoints kept
//! sending to the same SBC address and port, so the new active bound the same ports and
//! relays by the replicated sessions); the longest gap of any call stays within the
//! signalling failover plus a margin; every call's BYE then succeeds through the new active.
//! Prints the gap and the packets lost per call, and a `MEASURE` line.

use std::time::{Duration, Instant};

use sbc_e2e::pair::{kill9, Pair, PairConfig, NAMES};
use sbc_e2e::ports;
use sbc_lab::media::rtp::{self, RtpConfig};
use sbc_lab::media::sip::{SipCalls, SipMediaConfig};

const CALLS: usize = 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failover {
    Kill9,
    Planned,
}

#[test]
fn kill9_of_the_active_mid_call_media_resumes_through_the_new_active() {
    media_failover(Failover::Kill9);
}

#[test]
fn a_planned_switchover_mid_call_hands_the_media_ports_over() {
    media_failover(Failover::Planned);
}

fn media_failover(kind: Failover) {
    let mut config = PairConfig::new();
    for (realm, ip) in [("access", "127.0.0.1"), ("core", "127.0.0.2")] {
        let first = ports::free_block(2 * 40 + 1);
        config.extra_toml.push_str(&format!(
            "\n[[steering-pool]]\nip-address = \"{ip}\"\nstart-port = {first}\nend-port = {}\nrealm-id = \"{realm}\"\n",
            first + 80
        ));
    }
    let mut pair = Pair::start(config);
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    eprintln!(
        "roles: {} active, {} standby",
        NAMES[active], NAMES[standby]
    );

    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let sip = SipMediaConfig {
        rate: 20.0,
        ..SipMediaConfig::new(pair.config.sip.access, pair.config.sip.agent, CALLS)
    };
    let (calls, media) = runtime
        .block_on(SipCalls::establish(&sip))
        .expect("the lab's UAC and UAS start");
    assert_eq!(
        media.len(),
        CALLS,
        "every call set up with the SBC's media ports: {:?}",
        calls.status()
    );
    let r = pair.wait_replicated(standby, CALLS as u64, Duration::from_secs(20));
    eprintln!("standby holds {} replicated dialogs", r.replicated_dialogs);

    let run = rtp::spawn(
        media,
        &RtpConfig {
            duration: Duration::from_secs(14),
            ..RtpConfig::default()
        },
    )
    .expect("RTP endpoints start");
    let started = Instant::now();
    while run.arrived() == 0 && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        run.arrived() > 0,
        "no RTP crossed the active before the kill"
    );
    std::thread::sleep(Duration::from_secs(4).saturating_sub(started.elapsed()));
    let killed_at = match kind {
        Failover::Kill9 => kill9(&mut pair.nodes[active]),
        Failover::Planned => {
            let at = Instant::now();
            let reply = pair
                .exec(active, "notify berpd force")
                .expect("the active answers");
            assert_eq!(reply["ok"], true, "notify berpd force refused: {reply}");
            at
        }
    };
    let now_active = pair.wait_redundancy(standby, Duration::from_secs(10), "active", |r| {
        r.is_active()
    });
    eprintln!(
        "{} active {} ms after the kill (epoch {})",
        NAMES[standby],
        killed_at.elapsed().as_millis(),
        now_active.epoch
    );
    let report = run.join().expect("RTP run");
    eprintln!("{}", report.summary());
    eprintln!("calls by longest gap:\n{}", report.gap_table(0.0));
    let worst = report
        .calls
        .iter()
        .map(rtp::CallReport::max_gap_ms)
        .fold(0.0_f64, f64::max);
    let lost: u64 = report.calls.iter().map(rtp::CallReport::lost).sum();
    println!(
        "MEASURE pair_media_{kind:?}: {CALLS} calls, longest media gap {worst:.0} ms, {lost} packets lost in all, detection time {} ms",
        pair.config.dead_time().as_millis()
    );
    let not_resumed: Vec<_> = report.calls.iter().filter(|c| !c.resumed()).collect();
    assert!(
        not_resumed.is_empty(),
        "{} calls lost their media for good:\n{}",
        not_resumed.len(),
        report.gap_table(0.0)
    );
    // The signalling failover (detection + becoming-active + binding) bounds the gap; a margin
    // for a shared 2-core machine.
    assert!(
        worst < 8_000.0,
        "a media gap of {worst:.0} ms:\n{}",
        report.gap_table(0.0)
    );

    let (uac, uas) = runtime.block_on(calls.hang_up(Duration::from_secs(30)));
    assert_eq!(
        (uac.completed, uac.failed),
        (CALLS as u64, 0),
        "every BYE through the new active: {uac:?}"
    );
    assert_eq!(uas.completed, CALLS as u64, "{uas:?}");
    pair.nodes[standby].assert_alive();
}
