//! A subscription survives a kill -9 of the active (issue 30, item 1): a subscriber holds a
//! message-summary subscription through the pair to Kamailio's presence server; the active is
//! killed; a voicemail PUBLISH then makes Kamailio NOTIFY the SBC's Contact, the pair's service
//! address, and the new active relays it in the subscriber's own dialog, from the replicated
//! subscription, without the subscriber subscribing again.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use sbc_e2e::kamailio::Kamailio;
use sbc_e2e::pair::{kill9, Pair, PairConfig};
use sbc_e2e::raw::RawUdp;
use sbc_e2e::sipp::wait_listening;
use sbc_e2e::SbcConfig;

use crate::subscriptions::{
    final_to, notify_answered, presence_server, presence_tables, publish, subscribe,
};

fn lo(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

#[test]
fn a_subscription_is_notified_through_the_new_active_after_a_kill_9() {
    let sip = SbcConfig::with_addresses(lo(1), lo(2), lo(6));
    let config = PairConfig::with_addresses(sip, [lo(11), lo(12)]);
    let (access, presence_at) = (config.sip.access, config.sip.agent);
    let mut pair = Pair::start(config);
    let db = presence_tables(pair.dir());
    let _presence = Kamailio::start(pair.dir(), &presence_server(presence_at, &db));
    wait_listening(presence_at, false, Duration::from_secs(10));
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));

    let subscriber = RawUdp::bind(lo(21));
    let call_id = format!("mwi-pair@{}", lo(21));
    subscriber.send_to(&subscribe(&subscriber, &call_id, (1, 600), None), access);
    let ok = final_to(&subscriber, "SUBSCRIBE").expect("an answer to the SUBSCRIBE");
    assert_eq!(ok.status(), Some(200), "{ok:?}");
    let our_tag = ok.tag("to").expect("our tag").to_owned();
    notify_answered(&subscriber).expect("the initial NOTIFY");
    let held = pair
        .exec(active, "show subscriptions")
        .and_then(|v| v["data"]["subscriptions"].as_u64());
    assert_eq!(held, Some(1));
    // Replicated once accepted, then streamed.
    std::thread::sleep(Duration::from_millis(1500));

    kill9(&mut pair.nodes[active]);
    pair.wait_redundancy(standby, Duration::from_secs(5), "active", |r| r.is_active());
    let subs = pair.exec(standby, "show subscriptions").unwrap_or_default();
    assert_eq!(
        subs["data"]["subscriptions"].as_u64(),
        Some(1),
        "the new active did not install the replicated subscription: {subs:#}"
    );

    // Voicemail publishes through the new active; Kamailio notifies the service address.
    let voicemail = RawUdp::bind(lo(22));
    voicemail.send_to(&publish(&voicemail, "vm-pair", "yes"), access);
    let published = final_to(&voicemail, "PUBLISH").expect("an answer to the PUBLISH");
    assert_eq!(published.status(), Some(200), "{published:?}");
    let lit = notify_answered(&subscriber).expect("the NOTIFY through the new active");
    assert_eq!(lit.header("call-id"), Some(call_id.as_str()));
    assert_eq!(lit.tag("to"), Some("w1"));
    assert_eq!(lit.tag("from"), Some(our_tag.as_str()));
    let body = String::from_utf8_lossy(&lit.body).into_owned();
    assert!(body.contains("Messages-Waiting: yes"), "{body}");

    // And it is refreshed there, in the same dialog.
    subscriber.send_to(
        &subscribe(&subscriber, &call_id, (2, 600), Some(&our_tag)),
        access,
    );
    let refreshed = final_to(&subscriber, "SUBSCRIBE").expect("an answer to the refresh");
    assert_eq!(refreshed.status(), Some(200), "{refreshed:?}");
}
