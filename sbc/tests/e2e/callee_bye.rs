//! Callee-initiated BYE: the callee (core side) hangs up after the ACK; the SBC maps the BYE
//! onto the access leg.
//!
//! Asserts (scenarios uac_callee_bye.xml / uas_callee_bye.xml): the caller gets 200 for its
//! INVITE, then an in-dialog BYE, answers 200; the callee's BYE gets 200 relayed back; 10 calls
//! succeed on both sides.

use std::time::Duration;

use sbc_e2e::{calls_through_sbc, Load, SbcConfig, SbcNode, Scenario};

#[test]
fn callee_bye_through_sbc() {
    let config = SbcConfig::new();
    let mut node = SbcNode::start_config(&config);
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::File("uac_callee_bye.xml"),
        Scenario::File("uas_callee_bye.xml"),
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
