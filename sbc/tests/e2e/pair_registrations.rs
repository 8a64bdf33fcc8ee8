//! Registrations survive a kill -9 of the active: a phone registered through the pair (to a
//! Kamailio registrar, with `registration-caching` on the access interface) is called through
//! the new active without registering again. The binding crossed the sync channel; the
//! registrar still holds our Contact, which names the pair's service address; the new active
//! installed the binding before it served and sends the INVITE to the phone's flow.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use sbc_e2e::kamailio::registrar;
use sbc_e2e::pair::{kill9, Pair, PairConfig};
use sbc_e2e::raw::RawUdp;
use sbc_e2e::SbcConfig;

fn lo(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// The bindings node `i` holds.
fn bindings(pair: &Pair, i: usize) -> u64 {
    pair.exec(i, "show registrations")
        .and_then(|v| v["data"]["bindings"].as_u64())
        .unwrap_or(0)
}

#[test]
fn a_phone_registered_before_a_kill_9_is_called_through_the_new_active() {
    let mut sip = SbcConfig::with_addresses(lo(1), lo(2), lo(6));
    sip.access_lines.push("registration-caching = true".into());
    let config = PairConfig::with_addresses(sip, [lo(11), lo(12)]);
    let (access, registrar_at) = (config.sip.access, config.sip.agent);
    let mut pair = Pair::start(config);
    let _kamailio = registrar(pair.dir(), registrar_at);
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));

    // The phone registers bob@example.test through the pair.
    let phone = RawUdp::bind(lo(21));
    let at = phone.local_addr();
    crate::registration::register_raw(&phone, "bob", access);
    assert_eq!(bindings(&pair, active), 1);
    // Replicated within the registration timer (200 ms), then streamed.
    std::thread::sleep(Duration::from_millis(1500));

    kill9(&mut pair.nodes[active]);
    pair.wait_redundancy(standby, Duration::from_secs(5), "active", |r| r.is_active());
    assert_eq!(
        bindings(&pair, standby),
        1,
        "the new active did not install the replicated binding"
    );

    // Someone calls bob at the registrar: it forks to our Contact at the service address,
    // and the new active sends the INVITE to the phone, which never registered again.
    let caller = RawUdp::bind(lo(7));
    crate::registration::call_at_registrar(&caller, "bob", "pcall", registrar_at);
    let invite = crate::registration::invite_received(&phone)
        .expect("the phone was not called through the new active");
    assert!(
        invite.starts_with(&format!("INVITE sip:bob@{at} ")),
        "{invite}"
    );
    let stats = pair.exec(standby, "show sip-stats").unwrap_or_default();
    assert!(
        stats["data"]["counters"]["to_registered_phones"].as_u64() >= Some(1),
        "{stats:#}"
    );
}
