//! Per-source protection: a flood from one source does not lower the success rate of others.
//!
//! One SBC with the defaults (`source-rate` 15/s, `source-burst` 30, `source-deny-seconds`
//! 120), a real `snmptrapd` as trap receiver, and an `access-control` deny entry for
//! 127.0.0.5. While SIPp places 100 calls at 10 calls/s from 127.0.0.4, a raw socket on
//! 127.0.0.3 floods the SBC with new requests (OPTIONS pings to the SBC itself, each a new
//! transaction) as fast as it can for 4 s. Then:
//!
//! - every SIPp call succeeded (100 of 100);
//! - the flooder got at most the burst and a few seconds' rate of answers, then nothing:
//!   `show access-control` lists 127.0.0.3 as denied, counts the dropped requests and one deny,
//!   and snmptrapd printed `sbcSourceDeniedTrap` naming 127.0.0.3;
//! - 127.0.0.5 (operator deny list) gets no answer at all, 127.0.0.6 does;
//! - `clear-deny 127.0.0.3` lets it in again: its next request is answered.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sbc_e2e::acli::{acli, acli_json};
use sbc_e2e::pair::lo;
use sbc_e2e::raw::{request, RawUdp, SipMsg};
use sbc_e2e::snmp::Trapd;
use sbc_e2e::{ports, run_pair, SbcConfig, SbcNode, Sipp, TestDir};

fn options(from: SocketAddr, to: SocketAddr, n: u64) -> Vec<u8> {
    // No user part in the Request-URI: a ping the SBC answers itself (200).
    let text = String::from_utf8(request(
        "OPTIONS",
        from,
        to,
        "UDP",
        &format!("flood-{n}"),
        &format!("z9hG4bK-flood-{n}"),
        &[],
    ))
    .expect("ascii");
    text.replacen(
        &format!("OPTIONS sip:service@{to}"),
        &format!("OPTIONS sip:{to}"),
        1,
    )
    .into_bytes()
}

fn answered(sock: &RawUdp, window: Duration) -> usize {
    sock.recv_all(window)
        .into_iter()
        .filter(|(b, _)| SipMsg::parse(b).and_then(|m| m.status()).is_some())
        .count()
}

#[test]
fn a_flood_from_one_source_is_denied_while_calls_from_another_all_succeed() {
    let trap_dir = TestDir::new("edge_flood-trapd");
    let trapd = Trapd::start(&trap_dir);
    let mut config = SbcConfig::new();
    config.extra_toml = format!(
        "\n[[access-control]]\nsource-address = \"127.0.0.5\"\naction = \"deny\"\n\
         \n[system-config]\nhostname = \"edge\"\n\
         \n[[system-config.trap-receiver]]\nip-address = \"127.0.0.1\"\nport = {}\n",
        trapd.port()
    );
    let node = SbcNode::start_config(&config);
    let dir = node.dir().clone();
    let uas = Sipp::new(&dir, "uas")
        .builtin("uas")
        .local(config.agent)
        .calls(100)
        .timeout(Duration::from_secs(60));
    let uac = Sipp::new(&dir, "uac")
        .builtin("uac")
        .local(SocketAddr::new(lo(4), ports::free_port()))
        .remote(config.access)
        .calls(100)
        .rate(10)
        .timeout(Duration::from_secs(40));

    let flooder = std::thread::spawn({
        let access = config.access;
        move || {
            std::thread::sleep(Duration::from_secs(2));
            let sock = RawUdp::bind(lo(3));
            let from = sock.local_addr();
            let start = Instant::now();
            let mut sent = 0u64;
            let mut answers = 0usize;
            while start.elapsed() < Duration::from_secs(4) && sent < 40_000 {
                for _ in 0..50 {
                    sock.send_to(&options(from, access, sent), access);
                    sent += 1;
                }
                answers += answered(&sock, Duration::from_millis(1));
            }
            answers += answered(&sock, Duration::from_millis(500));
            (sent, answers, start.elapsed())
        }
    });
    let (uac, uas) = run_pair(uas, config.agent, false, uac);
    let (sent, answers, took) = flooder.join().expect("flooder");
    eprintln!("flooder sent {sent} new requests in {took:?}, got {answers} answers");
    uac.assert_success(100);
    uas.assert_success(100);
    // The burst and the rate for the seconds before the deny, at most.
    assert!(answers <= 30 + 15 * 5, "{answers} answers to the flood");
    assert!(
        sent > 1000,
        "the flood was too slow to test anything ({sent})"
    );

    let sock = node.mgmt_socket();
    let ac = acli_json(&sock, &["show access-control"])
        .assert_ok()
        .json();
    eprintln!("show access-control: {ac}");
    let denied: Vec<String> = ac["denied"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|d| d["source"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(denied, vec!["127.0.0.3".to_owned()]);
    assert_eq!(ac["counters"]["denies"], 1, "{ac}");
    assert!(
        ac["counters"]["rate_limited"].as_u64().unwrap_or(0) >= 30,
        "{ac}"
    );
    assert!(ac["counters"]["denied"].as_u64().unwrap_or(0) > 100, "{ac}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while trapd
        .traps_named("SBC-PAIR-MIB::sbcSourceDeniedTrap")
        .is_empty()
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let traps = trapd.traps_named("SBC-PAIR-MIB::sbcSourceDeniedTrap");
    assert!(
        traps.iter().any(|t| t.line.contains("127.0.0.3")
            && t.line.contains("sbcDeniedSeconds.0 = INTEGER: 120")),
        "no sbcSourceDeniedTrap for 127.0.0.3: {}",
        trapd.output()
    );

    // The operator's deny list: 127.0.0.5 gets nothing, 127.0.0.6 is answered.
    for (ip, expect) in [(lo(5), 0usize), (lo(6), 1)] {
        let s = RawUdp::bind(ip);
        s.send_to(&options(s.local_addr(), config.access, 1), config.access);
        assert_eq!(
            answered(&s, Duration::from_millis(700)),
            expect,
            "from {ip}"
        );
    }

    // clear-deny lets the flooder in again.
    acli(&sock, &["clear-deny 127.0.0.3"]).assert_ok();
    let s = RawUdp::bind(lo(3));
    s.send_to(
        &options(s.local_addr(), config.access, 999_999),
        config.access,
    );
    assert_eq!(answered(&s, Duration::from_millis(700)), 1, "served again");
    let out = acli(&sock, &["clear-deny 127.0.0.3"]);
    assert_eq!(out.code, Some(1), "not denied any more: {}", out.describe());
}
