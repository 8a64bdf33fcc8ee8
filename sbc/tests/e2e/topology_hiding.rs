//! Topology hiding: caller, SBC access interface, SBC core interface and callee each on their
//! own loopback address, so any leak is visible by address:
//!
//! | who                | address     |
//! |--------------------|-------------|
//! | caller (SIPp UAC)  | 127.0.1.1   |
//! | SBC access         | 127.0.1.2   |
//! | SBC core           | 127.0.2.2   |
//! | callee (SIPp UAS)  | 127.0.2.1   |
//!
//! Both SIPp sides record every message with `-trace_msg`. Asserts, over 5 built-in uac/uas
//! calls: the calls succeed; no start line or header of any message the caller received names a
//! core-side address (`127.0.2.`); no start line or header of any message the callee received
//! names an access-side address (`127.0.1.`); the Call-IDs the callee saw are not the caller's.
//! SDP bodies are exempt: the SBC does not anchor media yet, so `c=`/`o=` lines legitimately
//! carry the other side's media address; the check covers start line and headers only.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use sbc_e2e::raw::SipMsg;
use sbc_e2e::{ports, run_pair, SbcConfig, SbcNode, Sipp, TraceEntry};

fn ip(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

/// The start line and headers of a traced message: everything before the first blank line.
fn head(entry: &TraceEntry) -> &str {
    let text = entry.text.as_str();
    text.split("\r\n\r\n")
        .next()
        .unwrap_or(text)
        .split("\n\n")
        .next()
        .unwrap_or(text)
}

fn call_ids(entries: &[TraceEntry]) -> BTreeSet<String> {
    entries
        .iter()
        .filter_map(|e| SipMsg::parse(e.text.as_bytes()))
        .filter_map(|m| m.header("call-id").map(str::to_owned))
        .collect()
}

#[test]
fn no_address_leaks_across_realms() {
    let config = SbcConfig::with_addresses(ip(127, 0, 1, 2), ip(127, 0, 2, 2), ip(127, 0, 2, 1));
    let mut node = SbcNode::start_config(&config);
    let dir = node.dir().clone();
    let caller = SocketAddr::new(ip(127, 0, 1, 1), ports::free_port());
    let uas = Sipp::new(&dir, "uas")
        .builtin("uas")
        .local(config.agent)
        .calls(5)
        .timeout(Duration::from_secs(40));
    let uac = Sipp::new(&dir, "uac")
        .builtin("uac")
        .local(caller)
        .remote(config.access)
        .calls(5)
        .rate(10)
        .timeout(Duration::from_secs(20));
    let (uac, uas) = run_pair(uas, config.agent, false, uac);
    node.assert_alive();
    uac.assert_success(5);
    uas.assert_success(5);

    let caller_trace = uac.trace();
    let callee_trace = uas.trace();
    let caller_received: Vec<&TraceEntry> = caller_trace.iter().filter(|e| e.received).collect();
    let callee_received: Vec<&TraceEntry> = callee_trace.iter().filter(|e| e.received).collect();
    assert!(
        !caller_received.is_empty() && !callee_received.is_empty(),
        "empty traces"
    );

    for e in &caller_received {
        assert!(
            !head(e).contains("127.0.2."),
            "the caller received a core-side address (127.0.2.x) in:\n{}",
            head(e)
        );
    }
    for e in &callee_received {
        assert!(
            !head(e).contains("127.0.1."),
            "the callee received an access-side address (127.0.1.x) in:\n{}",
            head(e)
        );
    }

    let caller_ids = call_ids(&caller_trace);
    let callee_ids = call_ids(&callee_trace);
    assert_eq!(caller_ids.len(), 5, "{caller_ids:?}");
    assert_eq!(callee_ids.len(), 5, "{callee_ids:?}");
    let shared: Vec<_> = caller_ids.intersection(&callee_ids).collect();
    assert!(
        shared.is_empty(),
        "Call-IDs passed through unchanged: {shared:?}"
    );
}
