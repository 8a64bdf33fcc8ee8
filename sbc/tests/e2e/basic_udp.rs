//! Basic relay over UDP: built-in `sipp -sn uac` → SBC access → built-in `sipp -sn uas` on the
//! core side (the default route's session-agent), 300 calls at 50 calls/s.
//!
//! Asserts: the UAC exits 0 with 300 successful and 0 failed calls; so does the UAS (so every
//! INVITE, ACK and BYE crossed the SBC, in both directions for the responses); the SBC is
//! still running.

use std::time::Duration;

use sbc_e2e::{calls_through_sbc, Load, SbcConfig, SbcNode, Scenario};

#[test]
fn udp_300_calls_at_50_cps() {
    let config = SbcConfig::new();
    let mut node = SbcNode::start_config(&config);
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::Builtin("uac"),
        Scenario::Builtin("uas"),
        Load {
            calls: 300,
            rate: 50,
            tcp: false,
            timeout: Duration::from_secs(60),
        },
    );
    uac.assert_success(300);
    uas.assert_success(300);
}
