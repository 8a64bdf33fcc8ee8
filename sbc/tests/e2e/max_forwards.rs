//! Max-Forwards: an INVITE arriving with `Max-Forwards: 0` is answered `483 Too Many Hops` and
//! is not relayed.
//!
//! Asserts: the caller (a raw UDP client) gets a final 483 for CSeq INVITE with its Call-ID
//! (a 100 Trying before it is allowed); the core-side session-agent (a raw UDP socket) receives
//! nothing; the caller's ACK for the 483 is absorbed; the SBC is still running.

use std::net::SocketAddr;
use std::time::Duration;

use sbc_e2e::raw::{ack_for, request, RawUdp};
use sbc_e2e::{SbcConfig, SbcNode};

#[test]
fn max_forwards_zero_gives_483() {
    let config = SbcConfig::new();
    let core = RawUdp::bind_addr(config.agent);
    let mut node = SbcNode::start_config(&config);
    let caller = RawUdp::bind(config.access.ip());
    let local: SocketAddr = caller.local_addr();

    let invite = request(
        "INVITE",
        local,
        config.access,
        "UDP",
        "mf0-1",
        "z9hG4bK-mf0-1",
        &[],
    );
    let invite = String::from_utf8(invite)
        .expect("ascii")
        .replace("Max-Forwards: 70", "Max-Forwards: 0")
        .into_bytes();
    caller.send_to(&invite, config.access);

    let mut skipped = Vec::new();
    let (resp, _) = caller
        .recv_sip_until(
            Duration::from_secs(3),
            |m| m.status().is_some_and(|s| s >= 200),
            &mut skipped,
        )
        .expect("a final response to INVITE with Max-Forwards: 0");
    assert_eq!(resp.status(), Some(483), "got {}", resp.start_line);
    assert_eq!(resp.cseq_method(), Some("INVITE"));
    assert_eq!(resp.header("call-id"), Some("mf0-1"));
    for m in &skipped {
        assert_eq!(
            m.status(),
            Some(100),
            "only 100 Trying may precede the 483, got {}",
            m.start_line
        );
    }
    caller.send_to(&ack_for(&invite, &resp), config.access);

    let relayed = core.recv_all(Duration::from_millis(800));
    assert!(
        relayed.is_empty(),
        "the INVITE with Max-Forwards: 0 reached the core side: {:?}",
        relayed
            .first()
            .map(|(b, _)| String::from_utf8_lossy(b).into_owned())
    );
    node.assert_alive();
}
