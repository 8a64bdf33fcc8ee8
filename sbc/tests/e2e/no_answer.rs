//! The callee never answers: the core-side UAS receives the INVITE and stays silent. With
//! `t1-ms = 50` the SBC's client transaction times out after Timer B = 64*T1 = 3.2 s.
//!
//! Asserts (scenarios uac_no_answer.xml / uas_no_answer.xml): the caller gets 100 Trying, then
//! 408 Request Timeout (CSeq INVITE) within 15 s, and ACKs it; the callee saw the INVITE and
//! its call ends cleanly (a CANCEL toward it is tolerated, not required); 3 calls, all
//! successful on both sides; the SBC is still running.

use std::time::Duration;

use sbc_e2e::{calls_through_sbc, Load, SbcConfig, SbcNode, Scenario};

#[test]
fn no_answer_gives_408_after_timer_b() {
    let mut config = SbcConfig::new();
    config.t1_ms = 50;
    let mut node = SbcNode::start_config(&config);
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::File("uac_no_answer.xml"),
        Scenario::File("uas_no_answer.xml"),
        Load {
            calls: 3,
            rate: 10,
            tcp: false,
            timeout: Duration::from_secs(30),
        },
    );
    uac.assert_success(3);
    uas.assert_success(3);
    assert_eq!(uas.count("0_INVITE_Recv"), 3, "{:?}", uas.counts);
}
