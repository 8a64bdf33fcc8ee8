//! Basic relay over TCP: built-in `sipp -sn uac -t t1` → SBC access (TCP) → built-in
//! `sipp -sn uas -t t1`, the session-agent configured with `transport = "tcp"`; 300 calls at
//! 50 calls/s.
//!
//! Asserts: 300 successful and 0 failed calls on both SIPp sides, exit code 0; the SBC is still
//! running. (The UAS's TCP connection is the SBC's: the SBC must keep it open until the UAS
//! finishes its last call's 4 s closing pause.)

use std::time::Duration;

use sbc_e2e::{calls_through_sbc, Load, SbcConfig, SbcNode, Scenario};

#[test]
fn tcp_300_calls_at_50_cps() {
    let mut config = SbcConfig::new();
    config.agent_transport = "tcp";
    let mut node = SbcNode::start_config(&config);
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::Builtin("uac"),
        Scenario::Builtin("uas"),
        Load {
            calls: 300,
            rate: 50,
            tcp: true,
            timeout: Duration::from_secs(60),
        },
    );
    uac.assert_success(300);
    uas.assert_success(300);
}
