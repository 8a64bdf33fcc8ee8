//! Registrations survive a kill -9 of the active: 20 phones registered through the pair (to a
//! Kamailio registrar, with `registration-caching` on the access interface) are each called
//! through the new active and answer, 20/20, without registering again. The binding crossed the sync channel; the
//! registrar still holds our Contact, which names the pair's service address; the new active
//! installed the binding before it served and sends the INVITE to the phone's flow.
//!
//! Deletes replicate too (Kamailio's `dmq_usrloc` lost them: kamailio#265, #1445): a phone that
//! de-registers and one removed with `clear-registration` on the active are gone from the
//! standby before the kill, and the new active does not reach the cleared one, whose Contact
//! the registrar still holds (480).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use sbc_e2e::kamailio::registrar;
use sbc_e2e::pair::{kill9, Pair, PairConfig};
use sbc_e2e::raw::{response_to, RawUdp};
use sbc_e2e::SbcConfig;

use crate::registration::eventually;

fn lo(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// The bindings the standby `i` holds in its replica.
fn replicated(pair: &Pair, i: usize) -> u64 {
    pair.exec(i, "show redundancy")
        .and_then(|v| v["data"]["replicated_bindings"].as_u64())
        .unwrap_or(0)
}

/// The bindings node `i` holds.
fn bindings(pair: &Pair, i: usize) -> u64 {
    pair.exec(i, "show registrations")
        .and_then(|v| v["data"]["bindings"].as_u64())
        .unwrap_or(0)
}

/// How many phones register before the kill.
const PHONES: u8 = 20;

#[test]
fn phones_registered_before_a_kill_9_are_called_through_the_new_active() {
    let mut sip = SbcConfig::with_addresses(lo(1), lo(2), lo(6));
    sip.access_lines.push("registration-caching = true".into());
    let config = PairConfig::with_addresses(sip, [lo(11), lo(12)]);
    let (access, registrar_at) = (config.sip.access, config.sip.agent);
    let mut pair = Pair::start(config);
    let _kamailio = registrar(pair.dir(), registrar_at);
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));

    // phone01..phone20@example.test register through the pair, each from a loopback address
    // of its own (127.0.0.21..40).
    let phones: Vec<(String, RawUdp)> = (0..PHONES)
        .map(|i| {
            let user = format!("phone{:02}", i + 1);
            let phone = RawUdp::bind(lo(21 + i));
            crate::registration::register_raw(&phone, &user, access);
            (user, phone)
        })
        .collect();
    // Two more: one de-registers, one is cleared by the operator, both on the active.
    let leaving = RawUdp::bind(lo(21 + PHONES));
    let cleared = RawUdp::bind(lo(22 + PHONES));
    crate::registration::register_raw(&leaving, "leaving", access);
    crate::registration::register_raw(&cleared, "cleared", access);
    let all = u64::from(PHONES) + 2;
    assert_eq!(bindings(&pair, active), all);
    // Replicated within the registration timer (200 ms), then streamed.
    assert!(
        eventually(Duration::from_secs(5), || replicated(&pair, standby) == all),
        "the standby holds {} bindings, not {all}",
        replicated(&pair, standby)
    );
    assert_eq!(
        crate::registration::register_for(&leaving, "leaving", access, 11, 0),
        Some(200),
        "de-registration"
    );
    let clear = pair
        .exec(active, "clear-registration sip:cleared@example.test")
        .unwrap_or_default();
    assert_eq!(clear["data"]["bindings"].as_u64(), Some(1), "{clear:#}");
    assert!(
        eventually(Duration::from_secs(5), || replicated(&pair, standby)
            == u64::from(PHONES)),
        "deletes not replicated: the standby holds {} bindings, not {PHONES}",
        replicated(&pair, standby)
    );

    // A call to phone01 is established before the kill (carol at the registrar, phone01
    // answering through the active): the new active must carry it on (the replica's callee
    // leg goes to a phone, no session-agent).
    let (held_phone, held_caller) = (&phones[0].1, RawUdp::bind(lo(8)));
    let held = establish_held_call(&held_caller, held_phone, registrar_at);
    assert!(
        eventually(Duration::from_secs(5), || pair
            .redundancy(standby)
            .is_some_and(|r| r.replicated_dialogs >= 1)),
        "the call to the phone was not replicated"
    );

    kill9(&mut pair.nodes[active]);
    pair.wait_redundancy(standby, Duration::from_secs(5), "active", |r| r.is_active());
    assert_eq!(
        bindings(&pair, standby),
        u64::from(PHONES),
        "the new active did not install the replicated bindings"
    );
    // The phone hangs up through the new active: its BYE reaches carol, whose 200 comes back.
    held_phone.send_to(&held.bye, held.sbc);
    let bye = held_caller.recv_sip_until(
        Duration::from_secs(5),
        |m| m.method() == Some("BYE"),
        &mut Vec::new(),
    );
    let (bye, from) = bye.expect("the phone's BYE relayed to the caller by the new active");
    held_caller.send_to(&response_to(&bye, 200, "OK", "c1"), from);
    let ok = held_phone.recv_sip_until(
        Duration::from_secs(5),
        |m| m.cseq_method() == Some("BYE"),
        &mut Vec::new(),
    );
    assert_eq!(
        ok.and_then(|(m, _)| m.status()),
        Some(200),
        "the call to a registered phone did not survive the kill"
    );

    // Someone calls each phone at the registrar: it forks to our Contact at the service
    // address, the new active sends the INVITE to the phone, which never registered again,
    // and the phone's 200 reaches the caller.
    let caller = RawUdp::bind(lo(7));
    let mut answered = Vec::new();
    for (user, phone) in &phones {
        let tag = format!("kill9-{user}");
        crate::registration::call_at_registrar(&caller, user, &tag, registrar_at);
        let invite = phone.recv_sip_until(
            Duration::from_secs(10),
            |m| m.method() == Some("INVITE"),
            &mut Vec::new(),
        );
        let Some((invite, sbc)) = invite else {
            continue;
        };
        let at = phone.local_addr();
        assert!(
            invite
                .start_line
                .starts_with(&format!("INVITE sip:{user}@{at} ")),
            "{}",
            invite.start_line
        );
        phone.send_to(&response_to(&invite, 200, "OK", "ph"), sbc);
        let call_id = format!("{tag}-call@");
        let ok = caller.recv_sip_until(
            Duration::from_secs(5),
            |m| {
                m.status() == Some(200)
                    && m.header("call-id").is_some_and(|c| c.starts_with(&call_id))
            },
            &mut Vec::new(),
        );
        if ok.is_some() {
            answered.push(user.clone());
        }
    }
    assert_eq!(
        answered.len(),
        usize::from(PHONES),
        "answered: {answered:?}"
    );
    let registrations = pair.exec(standby, "show registrations").unwrap_or_default();
    assert_eq!(
        registrations["data"]["counters"]["forwarded"].as_u64(),
        Some(0),
        "no phone registered again through the new active: {registrations:#}"
    );

    // The cleared phone's Contact is still at the registrar, which forks to it: the new active
    // has no binding for it (480) and the phone hears nothing.
    crate::registration::call_at_registrar(&caller, "cleared", "kill9-cleared", registrar_at);
    let refused = caller.recv_sip_until(
        Duration::from_secs(5),
        |m| m.status().is_some_and(|s| s >= 400),
        &mut Vec::new(),
    );
    assert_eq!(refused.and_then(|(m, _)| m.status()), Some(480));
    assert!(cleared.recv(Duration::from_millis(500)).is_none());

    let stats = pair.exec(standby, "show sip-stats").unwrap_or_default();
    assert!(
        stats["data"]["counters"]["to_registered_phones"].as_u64() >= Some(u64::from(PHONES)),
        "{stats:#}"
    );
}

/// A call established from `caller` (at the registrar) to `phone`, and the phone's BYE for it.
struct HeldCall {
    /// Where the phone's requests go: the SBC that sent it the INVITE.
    sbc: std::net::SocketAddr,
    /// The phone's BYE, ready to send.
    bye: Vec<u8>,
}

/// Calls `phone` from `caller` through the registrar at `registrar`; the phone answers and
/// the caller ACKs (through the registrar, on its Record-Route, to the SBC's Contact).
fn establish_held_call(
    caller: &RawUdp,
    phone: &RawUdp,
    registrar: std::net::SocketAddr,
) -> HeldCall {
    let user = "phone01";
    crate::registration::call_at_registrar(caller, user, "held", registrar);
    let (invite, sbc) = phone
        .recv_sip_until(
            Duration::from_secs(10),
            |m| m.method() == Some("INVITE"),
            &mut Vec::new(),
        )
        .expect("the INVITE at the phone");
    let ok = response_to(&invite, 200, "OK", "ph");
    let at = phone.local_addr();
    phone.send_to(&ok, sbc);
    let (answer, _) = caller
        .recv_sip_until(
            Duration::from_secs(5),
            |m| m.status() == Some(200),
            &mut Vec::new(),
        )
        .expect("the 200 at the caller");
    let target = contact_uri(&answer).expect("our Contact in the 200");
    let from = caller.local_addr();
    let ack = format!(
        "ACK {target} SIP/2.0\r\nVia: SIP/2.0/UDP {from};branch=z9hG4bK-held-ack\r\n\
         Route: {}\r\nMax-Forwards: 70\r\nFrom: {}\r\nTo: {}\r\nCall-ID: {}\r\n\
         CSeq: 1 ACK\r\nContent-Length: 0\r\n\r\n",
        answer
            .header("record-route")
            .expect("the registrar record-routes"),
        answer.header("from").unwrap_or_default(),
        answer.header("to").unwrap_or_default(),
        answer.header("call-id").unwrap_or_default(),
    );
    // Through the registrar, which record-routed (the SBC takes in-dialog requests of that
    // leg only from it).
    caller.send_to(ack.as_bytes(), registrar);
    phone
        .recv_sip_until(
            Duration::from_secs(5),
            |m| m.method() == Some("ACK"),
            &mut Vec::new(),
        )
        .expect("the ACK at the phone");
    let our_contact = contact_uri(&invite).expect("the SBC's Contact in the INVITE");
    let bye = format!(
        "BYE {our_contact} SIP/2.0\r\nVia: SIP/2.0/UDP {at};branch=z9hG4bK-held-bye\r\n\
         Max-Forwards: 70\r\nFrom: {};tag=ph\r\nTo: {}\r\nCall-ID: {}\r\nCSeq: 1 BYE\r\n\
         Content-Length: 0\r\n\r\n",
        invite.header("to").unwrap_or_default(),
        invite.header("from").unwrap_or_default(),
        invite.header("call-id").unwrap_or_default(),
    );
    HeldCall {
        sbc,
        bye: bye.into_bytes(),
    }
}

/// The URI of a message's Contact (`<...>` taken off).
fn contact_uri(m: &sbc_e2e::raw::SipMsg) -> Option<String> {
    let c = m.header("contact")?.trim();
    Some(
        c.trim_start_matches('<')
            .split('>')
            .next()
            .unwrap_or_default()
            .to_owned(),
    )
}
