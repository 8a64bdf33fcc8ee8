//! Calls are bound to their legs: a stranger who knows a live call's identifiers cannot end it.
//!
//! SIPp places 3 calls held 8 s through the SBC. While they are up, a raw UDP socket on
//! 127.0.0.3 (not the caller's address) reads the first call's Call-ID and tags from `show
//! dialogs` (what an eavesdropper on the access network would know) and sends:
//!
//! - a BYE with the caller's exact Call-ID, From tag and To tag: answered **481**, nothing
//!   relayed to the callee (the UAS sees no early BYE), the call stays in `show dialogs`;
//! - a CANCEL for it: 481;
//! - a BYE from the caller's own IP but another port with a forged From tag: 481.
//!
//! Then every call ends with its own BYE, from the caller, answered 200: SIPp reports 3
//! successful calls on both sides; `show sip-stats` counts the two BYEs as `leg_mismatch`.

use std::net::SocketAddr;
use std::time::Duration;

use sbc_e2e::acli::acli_json;
use sbc_e2e::pair::lo;
use sbc_e2e::raw::{RawUdp, SipMsg};
use sbc_e2e::{ports, SbcConfig, SbcNode, Sipp};
use serde_json::Value;

fn bye(
    method: &str,
    from: SocketAddr,
    to: SocketAddr,
    call_id: &str,
    from_tag: &str,
    to_tag: &str,
) -> Vec<u8> {
    format!(
        "{method} sip:service@{to} SIP/2.0\r\nVia: SIP/2.0/UDP {from};branch=z9hG4bK-stranger-{method}\r\n\
         Max-Forwards: 70\r\nFrom: <sip:sipp@{from}>;tag={from_tag}\r\nTo: <sip:service@{to}>;tag={to_tag}\r\n\
         Call-ID: {call_id}\r\nCSeq: 99 {method}\r\nContent-Length: 0\r\n\r\n"
    )
    .into_bytes()
}

#[test]
fn a_bye_from_another_source_gets_481_and_the_call_survives_to_its_own_bye() {
    let config = SbcConfig::new();
    let node = SbcNode::start_config(&config);
    let dir = node.dir().clone();
    let uas = Sipp::new(&dir, "uas")
        .builtin("uas")
        .local(config.agent)
        .calls(3)
        .timeout(Duration::from_secs(40))
        .spawn();
    sbc_e2e::sipp::wait_listening(config.agent, false, Duration::from_secs(5));
    let uac = Sipp::new(&dir, "uac")
        .builtin("uac")
        .local(SocketAddr::new(config.access.ip(), ports::free_port()))
        .remote(config.access)
        .calls(3)
        .rate(10)
        .args(["-d", "8000"])
        .timeout(Duration::from_secs(30))
        .spawn();

    // Wait for the 3 dialogs; take the first one's caller-side identifiers.
    let sock = node.mgmt_socket();
    let mut dialog = Value::Null;
    for _ in 0..100 {
        let d = acli_json(&sock, &["show dialogs"]).assert_ok().json();
        let list = d["dialogs"].as_array().cloned().unwrap_or_default();
        if list.len() == 3 && list.iter().all(|x| x["state"] == "Confirmed") {
            dialog = list[0].clone();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let caller = &dialog["caller"];
    let call_id = caller["call_id"]
        .as_str()
        .expect("3 confirmed dialogs")
        .to_owned();
    let our_tag = caller["local_tag"].as_str().expect("tag").to_owned();
    let their_tag = caller["remote_tag"].as_str().expect("tag").to_owned();
    let caller_addr: SocketAddr = caller["peer"]
        .as_str()
        .expect("peer")
        .parse()
        .expect("addr");

    let stranger = RawUdp::bind(lo(3));
    let from = stranger.local_addr();
    let mut codes = Vec::new();
    for method in ["BYE", "CANCEL"] {
        stranger.send_to(
            &bye(method, from, config.access, &call_id, &their_tag, &our_tag),
            config.access,
        );
        let got: Vec<SipMsg> = stranger
            .recv_all(Duration::from_millis(700))
            .into_iter()
            .filter_map(|(b, _)| SipMsg::parse(&b))
            .collect();
        codes.push(got.iter().filter_map(SipMsg::status).collect::<Vec<_>>());
    }
    // From the caller's IP, another port, a forged From tag.
    let neighbour = RawUdp::bind(caller_addr.ip());
    neighbour.send_to(
        &bye(
            "BYE",
            neighbour.local_addr(),
            config.access,
            &call_id,
            "forged",
            &our_tag,
        ),
        config.access,
    );
    let got: Vec<u16> = neighbour
        .recv_all(Duration::from_millis(700))
        .into_iter()
        .filter_map(|(b, _)| SipMsg::parse(&b).and_then(|m| m.status()))
        .collect();
    codes.push(got);
    assert_eq!(codes, vec![vec![481], vec![481], vec![481]]);
    let d = acli_json(&sock, &["show dialogs"]).assert_ok().json();
    assert!(
        d["dialogs"]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x["caller"]["call_id"] == call_id.as_str())),
        "the call did not survive"
    );
    let stats = acli_json(&sock, &["show sip-stats"]).assert_ok().json();
    // The two BYEs; the CANCEL matched no INVITE transaction at all (plain 481).
    assert_eq!(stats["counters"]["leg_mismatch"], 2, "{stats}");

    uac.wait_at_most(Duration::from_secs(30)).assert_success(3);
    uas.wait_at_most(Duration::from_secs(30)).assert_success(3);
}
