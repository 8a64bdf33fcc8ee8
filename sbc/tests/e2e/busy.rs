//! 486 Busy Here from the callee relayed to the caller.
//!
//! Asserts (scenarios uac_busy.xml / uas_busy.xml): the caller gets 486 (CSeq INVITE) and
//! ACKs it; the callee gets the SBC's own hop-by-hop ACK for its 486. 10 calls succeed on both
//! sides.

use std::time::Duration;

use sbc_e2e::{calls_through_sbc, Load, SbcConfig, SbcNode, Scenario};

#[test]
fn busy_through_sbc() {
    let config = SbcConfig::new();
    let mut node = SbcNode::start_config(&config);
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::File("uac_busy.xml"),
        Scenario::File("uas_busy.xml"),
        Load {
            calls: 10,
            rate: 10,
            tcp: false,
            timeout: Duration::from_secs(30),
        },
    );
    uac.assert_success(10);
    uas.assert_success(10);
}
