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

/// The SBC's own session timers (a realm's `session-timer-profile`: session-expires 90, min-se
/// 90, the caller asked to refresh, the SBC refreshing the callee): SIPp's caller asks 60 s and
/// gets 422 with Min-SE 90, tries again without a timer and is told to refresh every 90 s; the
/// callee, without timers, gets the SBC's UPDATE between 40 and 55 s after the answer; the
/// caller never refreshes and both legs get BYE between 55 and 72 s (at 60 s: 90 less 30).
#[test]
fn a_realm_s_session_timer_profile_is_offered_refreshed_and_enforced() {
    let mut config = SbcConfig::new();
    config.extra_toml = "\n[[session-timer-profile]]\nname = \"ninety\"\nsession-expires = 90\n\
         min-se = 90\nresponse-refresher = \"uac\"\n\
         [[realm-config]]\nidentifier = \"access\"\nsession-timer-profile = \"ninety\"\n\
         [[realm-config]]\nidentifier = \"core\"\nsession-timer-profile = \"ninety\"\n"
        .into();
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let socket = node.mgmt_socket();
    let started = Instant::now();
    // The SBC's refresh, sampled from beside the call: none at 40 s, one by 56 s.
    let sampler = std::thread::spawn(move || {
        let mut mgmt = Mgmt::connect(&socket);
        let refreshes = |m: &mut Mgmt| {
            m.data("show sip-stats")["counters"]["session_refreshes_sent"]
                .as_u64()
                .unwrap_or(u64::MAX)
        };
        std::thread::sleep(Duration::from_secs(40).saturating_sub(started.elapsed()));
        let at_40 = refreshes(&mut mgmt);
        std::thread::sleep(Duration::from_secs(56).saturating_sub(started.elapsed()));
        (at_40, refreshes(&mut mgmt))
    });
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::File("uac_profile_timer.xml"),
        Scenario::File("uas_profile_timer.xml"),
        Load {
            calls: 1,
            rate: 1,
            tcp: false,
            timeout: Duration::from_secs(100),
        },
    );
    uac.assert_success(1);
    uas.assert_success(1);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(55) && took < Duration::from_secs(72),
        "the BYEs came {took:?} after the call started"
    );
    let (at_40, at_56) = sampler.join().expect("the sampler");
    assert_eq!((at_40, at_56), (0, 1), "one UPDATE, between 40 and 56 s");
    let stats = mgmt.data("show sip-stats");
    let counters = &stats["counters"];
    assert_eq!(
        counters["session_interval_too_small"].as_u64(),
        Some(1),
        "{stats:#}"
    );
    assert_eq!(
        counters["session_timer_ended"].as_u64(),
        Some(1),
        "{stats:#}"
    );
    assert_eq!(
        counters["session_refresh_failed"].as_u64(),
        Some(0),
        "{stats:#}"
    );
    assert_eq!(stats["calls_active"].as_u64(), Some(0), "{stats:#}");
    node.assert_alive();
}

/// `force-reinvite` (issue 30, item 4): the callee's realm runs a profile of 90 s with
/// force-reinvite; the callee, without timers, allows UPDATE but is refreshed with a
/// re-INVITE without an offer at 45 s; its 200 offers its session again, which the SBC gives
/// the caller in a re-INVITE; the caller's answer reaches the callee in the ACK; the call goes
/// on and the caller hangs up. Scenarios uac_reinvite_refresh.xml / uas_reinvite_refresh.xml.
#[test]
fn force_reinvite_refreshes_with_an_offerless_reinvite_answered_by_the_other_leg() {
    let mut config = SbcConfig::new();
    config.extra_toml = "\n[[session-timer-profile]]\nname = \"ninety\"\nsession-expires = 90\n\
         force-reinvite = true\n\
         [[realm-config]]\nidentifier = \"core\"\nsession-timer-profile = \"ninety\"\n"
        .into();
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let started = Instant::now();
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::File("uac_reinvite_refresh.xml"),
        Scenario::File("uas_reinvite_refresh.xml"),
        Load {
            calls: 1,
            rate: 1,
            tcp: false,
            timeout: Duration::from_secs(80),
        },
    );
    uac.assert_success(1);
    uas.assert_success(1);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(44) && took < Duration::from_secs(60),
        "the refresh came {took:?} after the call started"
    );
    let stats = mgmt.data("show sip-stats");
    let counters = &stats["counters"];
    assert_eq!(
        counters["session_refreshes_sent"].as_u64(),
        Some(1),
        "{stats:#}"
    );
    assert_eq!(
        counters["session_refresh_failed"].as_u64(),
        Some(0),
        "{stats:#}"
    );
    assert_eq!(counters["calls_failed"].as_u64(), Some(0), "{stats:#}");
    assert_eq!(stats["calls_active"].as_u64(), Some(0), "{stats:#}");
    node.assert_alive();
}
