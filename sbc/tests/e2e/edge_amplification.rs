//! No amplification: a request with a forged source gets its victim about its own size back.
//!
//! A raw socket (the "victim", whose address a forged INVITE would carry) sends one minimal
//! INVITE to the SBC; the next hop (a raw socket on the session-agent's address) never answers.
//! With T1 = 50 ms, timer B fires after 3.2 s and the SBC answers 408 itself; nobody ACKs. Over
//! the next 8 s (past timer H) the victim, a source that never completed a transaction with the
//! SBC, receives the 100 Trying and the 408, once each: at most twice the INVITE's size for
//! this minimal INVITE without a body, each response echoing its Via with RFC 3581's `received`
//! and `rport` values added (RFC 3261's timer G alone would have sent about ten 408s). The next hop saw the INVITE and its retransmissions, never more than 7.

use std::time::Duration;

use sbc_e2e::raw::{request, RawUdp, SipMsg};
use sbc_e2e::{SbcConfig, SbcNode};

#[test]
fn a_forged_invite_to_a_silent_next_hop_gets_its_victim_about_its_own_size_back() {
    let mut config = SbcConfig::new();
    config.t1_ms = 50;
    let silent_next_hop = RawUdp::bind_addr(config.agent);
    let node = SbcNode::start_config(&config);
    let victim = RawUdp::bind(config.access.ip());
    let invite = request(
        "INVITE",
        victim.local_addr(),
        config.access,
        "UDP",
        "amplification-1",
        "z9hG4bK-amp-1",
        &[],
    );
    victim.send_to(&invite, config.access);
    let back = victim.recv_all(Duration::from_secs(8));
    let codes: Vec<u16> = back
        .iter()
        .filter_map(|(b, _)| SipMsg::parse(b).and_then(|m| m.status()))
        .collect();
    let bytes: usize = back.iter().map(|(b, _)| b.len()).sum();
    eprintln!(
        "INVITE of {} bytes; got back {codes:?}, {bytes} bytes ({:.2}x)",
        invite.len(),
        bytes as f64 / invite.len() as f64
    );
    assert_eq!(codes, vec![100, 408], "the 100 and the 408, once");
    assert!(
        bytes <= invite.len() * 2,
        "{bytes} bytes back for a {}-byte request",
        invite.len()
    );
    let relayed = silent_next_hop.recv_all(Duration::from_millis(100)).len();
    assert!(
        (1..=7).contains(&relayed),
        "{relayed} INVITEs toward the next hop"
    );
    drop(node);
}
