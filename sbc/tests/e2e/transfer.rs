//! Attended transfer through the real binary (issue 30, item 2): alice (access) calls bob and
//! carol (both behind the core agent's address); her REFER to bob, with `Replaces` naming her
//! call to carol as she sees it, reaches bob naming carol's own leg, with our core address as
//! the host; bob's INVITE with that `Replaces`, sent to us, reaches carol with the `Replaces`
//! she can match, on a leg of its own, and her 200 reaches bob.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use sbc_e2e::acli::Mgmt;
use sbc_e2e::raw::{response_to, RawUdp, SipMsg};
use sbc_e2e::{SbcConfig, SbcNode};

fn lo(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// The next request `sock` receives within 5 s with `method`.
fn request_in(sock: &RawUdp, method: &str) -> (SipMsg, SocketAddr) {
    sock.recv_sip_until(
        Duration::from_secs(5),
        |m| m.method() == Some(method),
        &mut Vec::new(),
    )
    .unwrap_or_else(|| panic!("no {method} came"))
}

/// The next final response `sock` receives within 5 s.
fn final_in(sock: &RawUdp) -> SipMsg {
    sock.recv_sip_until(
        Duration::from_secs(5),
        |m| m.status().is_some_and(|s| s >= 200),
        &mut Vec::new(),
    )
    .map(|(m, _)| m)
    .expect("a final response")
}

/// Sends alice's INVITE to `user` on Call-ID `call_id` (her tag `a-<call_id>`); returns it.
fn invite(alice: &RawUdp, access: SocketAddr, user: &str, call_id: &str) -> Vec<u8> {
    let at = alice.local_addr();
    let invite = format!(
        "INVITE sip:{user}@example.test SIP/2.0\r\nVia: SIP/2.0/UDP {at};branch=z9hG4bK-{call_id}-1;rport\r\n\
         Max-Forwards: 70\r\nFrom: <sip:alice@example.test>;tag=a-{call_id}\r\nTo: <sip:{user}@example.test>\r\n\
         Call-ID: {call_id}\r\nCSeq: 1 INVITE\r\nContact: <sip:alice@{at}>\r\nContent-Length: 0\r\n\r\n"
    )
    .into_bytes();
    alice.send_to(&invite, access);
    invite
}

/// alice calls `user`, the core peer answers 200 with tag `tag`, alice ACKs: returns our tag
/// toward alice and the INVITE the core peer got.
fn call(
    alice: &RawUdp,
    core: &RawUdp,
    access: SocketAddr,
    (user, call_id, tag): (&str, &str, &str),
) -> (String, SipMsg) {
    let sent = invite(alice, access, user, call_id);
    let (inv, sbc) = request_in(core, "INVITE");
    let mut ok = response_to(&inv, 200, "OK", tag);
    // response_to's Contact names the Request-URI; the peer's own is where it is.
    let contact = format!("Contact: <sip:{user}@{}>", core.local_addr());
    let text = String::from_utf8_lossy(&ok).replace(
        &format!(
            "Contact: <{}>",
            inv.start_line.split(' ').nth(1).unwrap_or_default()
        ),
        &contact,
    );
    ok = text.into_bytes();
    core.send_to(&ok, sbc);
    let answer = final_in(alice);
    assert_eq!(answer.status(), Some(200), "{answer:?}");
    let ours = answer.tag("to").expect("our tag").to_owned();
    alice.send_to(&sbc_e2e::raw::ack_for(&sent, &answer), access);
    (ours, inv)
}

#[test]
fn an_attended_transfer_reaches_the_target_with_a_replaces_it_can_match() {
    let config = SbcConfig::with_addresses(lo(1), lo(2), lo(6));
    let core = RawUdp::bind_addr(config.agent);
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let alice = RawUdp::bind(lo(21));
    let access = config.access;

    let (x_ours, _) = call(&alice, &core, access, ("bob", "x-1@127.0.0.21", "bob1"));
    let (y_ours, y_out) = call(&alice, &core, access, ("carol", "y-1@127.0.0.21", "carol1"));

    // alice refers bob to carol, replacing her call to carol as she sees it.
    let at = alice.local_addr();
    let refer = format!(
        "REFER sip:bob@{access} SIP/2.0\r\nVia: SIP/2.0/UDP {at};branch=z9hG4bK-refer-1;rport\r\n\
         Max-Forwards: 70\r\nFrom: <sip:alice@example.test>;tag=a-x-1@127.0.0.21\r\n\
         To: <sip:bob@example.test>;tag={x_ours}\r\nCall-ID: x-1@127.0.0.21\r\nCSeq: 2 REFER\r\n\
         Contact: <sip:alice@{at}>\r\n\
         Refer-To: <sip:carol@{access}?Replaces=y-1%40127.0.0.21%3Bto-tag%3D{y_ours}%3Bfrom-tag%3Da-y-1%40127.0.0.21&Require=replaces>\r\n\
         Referred-By: <sip:alice@example.test>\r\nContent-Length: 0\r\n\r\n"
    );
    alice.send_to(refer.as_bytes(), access);
    let (refer_out, sbc) = request_in(&core, "REFER");
    let y_call_id = y_out
        .header("call-id")
        .expect("Y's core Call-ID")
        .to_owned();
    let y_tag = y_out
        .tag("from")
        .expect("our tag on Y's core leg")
        .to_owned();
    let expected = format!(
        "<sip:carol@{}?Replaces={}%3Bto-tag%3Dcarol1%3Bfrom-tag%3D{y_tag}&Require=replaces>",
        config.core,
        y_call_id.replace('@', "%40")
    );
    assert_eq!(refer_out.header("refer-to"), Some(expected.as_str()));
    core.send_to(&response_to(&refer_out, 202, "Accepted", "bob1"), sbc);
    assert_eq!(final_in(&alice).status(), Some(202));

    // bob, as told, sends the INVITE with Replaces to our core address: it reaches carol.
    let replaces = format!("{y_call_id};to-tag=carol1;from-tag={y_tag}");
    let bob_at = core.local_addr();
    let z = format!(
        "INVITE sip:carol@{} SIP/2.0\r\nVia: SIP/2.0/UDP {bob_at};branch=z9hG4bK-z-1;rport\r\n\
         Max-Forwards: 70\r\nFrom: <sip:bob@example.test>;tag=bz\r\nTo: <sip:carol@example.test>\r\n\
         Call-ID: z-1@{}\r\nCSeq: 1 INVITE\r\nContact: <sip:bob@{bob_at}>\r\nReplaces: {replaces}\r\n\
         Content-Length: 0\r\n\r\n",
        config.core,
        bob_at.ip()
    );
    core.send_to(z.as_bytes(), config.core);
    let (to_carol, sbc) = request_in(&core, "INVITE");
    assert_eq!(to_carol.header("replaces"), Some(replaces.as_str()));
    assert!(
        to_carol.start_line.starts_with("INVITE sip:carol@"),
        "to carol's Contact: {}",
        to_carol.start_line
    );
    assert_ne!(
        to_carol.header("call-id"),
        Some(format!("z-1@{}", bob_at.ip()).as_str())
    );
    core.send_to(&response_to(&to_carol, 200, "OK", "carol2"), sbc);
    let answered = final_in(&core);
    assert_eq!(
        answered.status(),
        Some(200),
        "bob gets carol's 200: {answered:?}"
    );

    let stats = mgmt.data("show sip-stats");
    assert_eq!(
        stats["counters"]["refers_translated"].as_u64(),
        Some(1),
        "{stats:#}"
    );
    assert_eq!(
        stats["counters"]["replaces_matched"].as_u64(),
        Some(1),
        "{stats:#}"
    );
    node.assert_alive();
}
