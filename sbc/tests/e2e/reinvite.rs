//! Re-INVITE from the caller mid-call: INVITE/200/ACK, then a re-INVITE in the dialog (new
//! SDP) answered 200 by the callee and ACKed end to end, then BYE/200.
//!
//! Asserts (scenarios uac_reinvite.xml / uas_reinvite.xml): 10 calls succeed on both sides; the
//! caller's 200 to the re-INVITE carries CSeq 2 INVITE (checked in the scenario); the callee
//! receives the re-INVITE and its ACK.

use std::time::Duration;

use sbc_e2e::{calls_through_sbc, Load, SbcConfig, SbcNode, Scenario};

#[test]
fn reinvite_through_sbc() {
    let config = SbcConfig::new();
    let mut node = SbcNode::start_config(&config);
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::File("uac_reinvite.xml"),
        Scenario::File("uas_reinvite.xml"),
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
