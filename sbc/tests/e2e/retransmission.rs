//! An INVITE retransmitted by the caller is absorbed, not forwarded again.
//!
//! A raw UDP client plays the caller and sends the very same INVITE (same branch) several
//! times; a raw UDP socket plays the core-side session-agent and records every request it
//! receives. Steps and assertions:
//! 1. INVITE → the caller gets `100 Trying` (sent by the SBC at once);
//! 2. the core side receives the relayed INVITE and answers 100 then 180; the caller gets 180;
//! 3. the caller retransmits the INVITE → it gets a provisional response (100 or 180) re-sent,
//!    and no new INVITE transaction reaches the core side;
//! 4. the core side answers 486; the caller gets 486; the core side gets the SBC's ACK;
//! 5. the caller retransmits the INVITE again (before ACKing) → it gets the 486 again, and still
//!    no new INVITE transaction reaches the core side; the caller ACKs.
//!
//! Finally the core side saw exactly one INVITE transaction (one distinct Via branch; Timer A
//! retransmissions of the SBC's own INVITE, same branch, would be fine but none are expected
//! since the core side answers at once).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use sbc_e2e::raw::{ack_for, request, response_to, RawUdp, SipMsg};
use sbc_e2e::{SbcConfig, SbcNode};

/// Everything the core side received within `window`.
fn drain(core: &RawUdp, window: Duration, seen: &mut Vec<(SipMsg, SocketAddr)>) {
    for (bytes, from) in core.recv_all(window) {
        if let Some(m) = SipMsg::parse(&bytes) {
            seen.push((m, from));
        }
    }
}

fn invite_branches(seen: &[(SipMsg, SocketAddr)]) -> BTreeSet<String> {
    seen.iter()
        .filter(|(m, _)| m.method() == Some("INVITE"))
        .map(|(m, _)| m.top_branch().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn retransmitted_invite_is_forwarded_once() {
    let config = SbcConfig::new();
    let core = RawUdp::bind_addr(config.agent);
    let mut node = SbcNode::start_config(&config);
    let caller = RawUdp::bind(config.access.ip());
    let invite = request(
        "INVITE",
        caller.local_addr(),
        config.access,
        "UDP",
        "retrans-1",
        "z9hG4bK-retrans-1",
        &[],
    );
    let to_access = config.access;
    let mut skipped = Vec::new();

    // 1. INVITE → 100 Trying.
    caller.send_to(&invite, to_access);
    caller
        .recv_sip_until(
            Duration::from_secs(2),
            |m| m.status() == Some(100),
            &mut skipped,
        )
        .expect("100 Trying for the INVITE");

    // 2. The core side gets the INVITE, answers 100 and 180.
    let mut core_seen = Vec::new();
    let (core_invite, sbc_core) = core
        .recv_sip_until(
            Duration::from_secs(3),
            |m| m.method() == Some("INVITE"),
            &mut Vec::new(),
        )
        .expect("the INVITE relayed to the core side");
    core_seen.push((core_invite.clone(), sbc_core));
    core.send_to(&response_to(&core_invite, 100, "Trying", "uas-1"), sbc_core);
    core.send_to(
        &response_to(&core_invite, 180, "Ringing", "uas-1"),
        sbc_core,
    );
    caller
        .recv_sip_until(
            Duration::from_secs(2),
            |m| m.status() == Some(180),
            &mut skipped,
        )
        .expect("180 relayed to the caller");

    // 3. Retransmission while proceeding: a provisional is re-sent, nothing is forwarded.
    caller.send_to(&invite, to_access);
    let (resent, _) = caller
        .recv_sip_until(
            Duration::from_secs(2),
            |m| m.status().is_some_and(|s| (100..200).contains(&s)),
            &mut skipped,
        )
        .expect("a provisional response re-sent for the retransmitted INVITE");
    assert_eq!(resent.header("call-id"), Some("retrans-1"));
    drain(&core, Duration::from_millis(1000), &mut core_seen);
    assert_eq!(
        invite_branches(&core_seen).len(),
        1,
        "a retransmitted INVITE was forwarded as a new transaction: {core_seen:#?}"
    );

    // 4. The core side answers 486; the caller gets it; the SBC ACKs the core side.
    core.send_to(
        &response_to(&core_invite, 486, "Busy Here", "uas-1"),
        sbc_core,
    );
    let (busy, _) = caller
        .recv_sip_until(
            Duration::from_secs(2),
            |m| m.status() == Some(486),
            &mut skipped,
        )
        .expect("486 relayed to the caller");
    let mut core_other = Vec::new();
    let (core_ack, _) = core
        .recv_sip_until(
            Duration::from_secs(2),
            |m| m.method() == Some("ACK"),
            &mut core_other,
        )
        .expect("the SBC's hop-by-hop ACK for the 486");
    core_seen.extend(core_other.into_iter().map(|m| (m, sbc_core)));
    assert_eq!(
        core_ack.top_branch(),
        core_invite.top_branch(),
        "ACK for a non-2xx reuses the INVITE's branch"
    );

    // 5. Retransmission after the final response: the 486 is re-sent, nothing is forwarded.
    caller.send_to(&invite, to_access);
    caller
        .recv_sip_until(
            Duration::from_secs(2),
            |m| m.status() == Some(486),
            &mut skipped,
        )
        .expect("486 re-sent for the INVITE retransmitted after the final response");
    caller.send_to(&ack_for(&invite, &busy), to_access);
    drain(&core, Duration::from_millis(1000), &mut core_seen);
    let branches = invite_branches(&core_seen);
    assert_eq!(
        branches.len(),
        1,
        "the core side saw {} INVITE transactions: {branches:?}",
        branches.len()
    );
    // No other response code than 100/180/486 reached the caller.
    for m in &skipped {
        assert!(
            matches!(m.status(), Some(100 | 180 | 486)),
            "unexpected message to the caller: {}",
            m.start_line
        );
    }
    node.assert_alive();
}
