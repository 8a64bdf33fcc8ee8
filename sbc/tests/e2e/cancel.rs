//! CANCEL before answer: the callee rings (180) and holds; the caller sends CANCEL.
//!
//! Asserts (scenarios uac_cancel.xml / uas_cancel.xml): the caller gets 180, then 200 for the
//! CANCEL and 487 for the INVITE (either order) and ACKs the 487; the callee receives the
//! relayed CANCEL (answers 200, then 487 to its INVITE) and the SBC's hop-by-hop ACK for the
//! 487. 10 calls succeed on both sides.

use std::time::Duration;

use sbc_e2e::{calls_through_sbc, Load, SbcConfig, SbcNode, Scenario};

#[test]
fn cancel_through_sbc() {
    let config = SbcConfig::new();
    let mut node = SbcNode::start_config(&config);
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::File("uac_cancel.xml"),
        Scenario::File("uas_cancel.xml"),
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
