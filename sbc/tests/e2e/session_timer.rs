//! A session timer the endpoints negotiated is enforced (issue 30, item 4): SIPp's caller asks
//! `Session-Expires: 20;refresher=uac`, SIPp's callee accepts it, and neither ever refreshes.
//! The SBC ends both legs with BYE (`Reason: ... session timer expired`) at 20 - 6 = 14 s
//! after the 200 (RFC 4028 section 10: the interval less min(32 s, a third of it)); both SIPp
//! sides get it, answer 200 and finish; the call is counted as ended by its session timer.
//! Scenarios uac_timer.xml / uas_timer.xml (no SIPp-to-SIPp self-check: without an enforcing
//! middle box nobody sends the BYEs).

use std::time::{Duration, Instant};

use sbc_e2e::acli::Mgmt;
use sbc_e2e::{calls_through_sbc, Load, SbcConfig, SbcNode, Scenario};

#[test]
fn an_unrefreshed_session_is_ended_by_the_sbc_on_both_legs() {
    let config = SbcConfig::new();
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let started = Instant::now();
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::File("uac_timer.xml"),
        Scenario::File("uas_timer.xml"),
        Load {
            calls: 2,
            rate: 10,
            tcp: false,
            timeout: Duration::from_secs(40),
        },
    );
    uac.assert_success(2);
    uas.assert_success(2);
    // Not before the deadline (the BYEs end both scenarios), nor long after it.
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(14) && took < Duration::from_secs(25),
        "{took:?}"
    );
    let stats = mgmt.data("show sip-stats");
    assert_eq!(
        stats["counters"]["session_timer_ended"].as_u64(),
        Some(2),
        "{stats:#}"
    );
    assert_eq!(stats["calls_active"].as_u64(), Some(0), "{stats:#}");
    node.assert_alive();
}
