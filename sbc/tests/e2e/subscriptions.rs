//! Subscriptions through the SBC (issue 30, item 1) against a real presence server: Kamailio
//! with `presence` and `presence_mwi` (Debian's `kamailio-presence-modules`, its tables in
//! `db_text`) behind the SBC. A subscriber on the access side subscribes to alice's
//! message-summary; the initial NOTIFY, then the one a voicemail server's PUBLISH (through the
//! SBC too) makes, reach it in its own dialog (its Call-ID and tag, ours as From); a refresh
//! and an unsubscribe (`Expires: 0`) travel in Kamailio's dialog, whose last NOTIFY
//! (`terminated`) ends the subscription on the SBC. What Kamailio saw is read from its log: the
//! SUBSCRIBE on the SBC's own Call-ID, never the subscriber's.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use sbc_e2e::acli::Mgmt;
use sbc_e2e::kamailio::{cfg_head, Kamailio};
use sbc_e2e::raw::{response_to, RawUdp, SipMsg};
use sbc_e2e::sipp::wait_listening;
use sbc_e2e::{SbcConfig, SbcNode, TestDir};

fn lo(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// The presence tables Kamailio's `db_text` needs, copied from the package into `dir/db`.
pub(crate) fn presence_tables(dir: &TestDir) -> std::path::PathBuf {
    let db = dir.path().join("db");
    std::fs::create_dir_all(&db).expect("db dir");
    let src = Path::new("/usr/share/kamailio/dbtext/kamailio");
    for table in [
        "version",
        "presentity",
        "active_watchers",
        "watchers",
        "xcap",
    ] {
        std::fs::copy(src.join(table), db.join(table)).expect("kamailio's db_text tables");
    }
    db
}

/// A presence server at `addr` for `example.test` (message-summary, and dialog for busy lamps),
/// its tables in `db`;
/// each request it receives is logged as `e2e-request <method> ci=<Call-ID> cs=<CSeq>`.
pub(crate) fn presence_server(addr: SocketAddr, db: &Path) -> String {
    let head = cfg_head(
        addr,
        &[
            "tm",
            "sl",
            "maxfwd",
            "pv",
            "textops",
            "siputils",
            "xlog",
            "db_text",
            "presence",
            "presence_mwi",
            "presence_dialoginfo",
        ],
    );
    format!(
        r#"{head}
modparam("presence", "db_url", "text://{db}")
modparam("presence", "server_address", "sip:{addr}")
modparam("presence", "subs_db_mode", 0)

request_route {{
    if (!mf_process_maxfwd_header("10")) {{ sl_send_reply("483", "Too Many Hops"); exit; }}
    xlog("L_NOTICE", "e2e-request $rm ci=$ci cs=$cs\n");
    if (is_method("PUBLISH|SUBSCRIBE")) {{
        if (!t_newtran()) {{ sl_reply_error(); exit; }}
        if (is_method("PUBLISH")) {{ handle_publish(); }} else {{ handle_subscribe(); }}
        t_release();
        exit;
    }}
    if (is_method("ACK")) {{ exit; }}
    sl_send_reply("404", "Not here");
}}
"#,
        db = db.display()
    )
}

/// The SUBSCRIBE of `user`'s message-summary from `subscriber` (Call-ID `call_id`, tag `w1`),
/// in the dialog `to_tag` names when given, with `cseq` and `expires`.
pub(crate) fn subscribe(
    subscriber: &RawUdp,
    call_id: &str,
    (cseq, expires): (u32, u32),
    to_tag: Option<&str>,
) -> Vec<u8> {
    let at = subscriber.local_addr();
    let to_tag = to_tag.map_or(String::new(), |t| format!(";tag={t}"));
    format!(
        "SUBSCRIBE sip:alice@example.test SIP/2.0\r\n\
         Via: SIP/2.0/UDP {at};branch=z9hG4bK-sub-{call_id}-{cseq};rport\r\n\
         Max-Forwards: 70\r\nFrom: <sip:alice@example.test>;tag=w1\r\n\
         To: <sip:alice@example.test>{to_tag}\r\nCall-ID: {call_id}\r\n\
         CSeq: {cseq} SUBSCRIBE\r\nContact: <sip:alice@{at}>\r\nEvent: message-summary\r\n\
         Accept: application/simple-message-summary\r\nExpires: {expires}\r\n\
         Content-Length: 0\r\n\r\n"
    )
    .into_bytes()
}

/// A voicemail server's PUBLISH of alice's message-summary (`waiting`: yes or no).
pub(crate) fn publish(from: &RawUdp, tag: &str, waiting: &str) -> Vec<u8> {
    let at = from.local_addr();
    let body = format!("Messages-Waiting: {waiting}\r\nVoice-Message: 2/8 (0/2)\r\n");
    format!(
        "PUBLISH sip:alice@example.test SIP/2.0\r\n\
         Via: SIP/2.0/UDP {at};branch=z9hG4bK-pub-{tag};rport\r\n\
         Max-Forwards: 70\r\nFrom: <sip:voicemail@example.test>;tag={tag}\r\n\
         To: <sip:alice@example.test>\r\nCall-ID: pub-{tag}@{ip}\r\nCSeq: 1 PUBLISH\r\n\
         Event: message-summary\r\nExpires: 3600\r\n\
         Content-Type: application/simple-message-summary\r\nContent-Length: {}\r\n\r\n{body}",
        body.len(),
        ip = at.ip()
    )
    .into_bytes()
}

/// The final response to `method` `phone` receives within 5 s.
pub(crate) fn final_to(phone: &RawUdp, method: &str) -> Option<SipMsg> {
    phone
        .recv_sip_until(
            Duration::from_secs(5),
            |m| m.status().is_some_and(|s| s >= 200) && m.cseq_method() == Some(method),
            &mut Vec::new(),
        )
        .map(|(m, _)| m)
}

/// The next NOTIFY `subscriber` receives within 5 s, answered 200.
pub(crate) fn notify_answered(subscriber: &RawUdp) -> Option<SipMsg> {
    let (n, from) = subscriber.recv_sip_until(
        Duration::from_secs(5),
        |m| m.method() == Some("NOTIFY"),
        &mut Vec::new(),
    )?;
    subscriber.send_to(&response_to(&n, 200, "OK", "w1"), from);
    Some(n)
}

/// The Call-IDs of the SUBSCRIBEs Kamailio received.
fn subscribes_seen(dir: &TestDir) -> Vec<String> {
    let log = std::fs::read_to_string(Kamailio::log(dir)).unwrap_or_default();
    log.lines()
        .filter_map(|l| {
            let rest = &l[l.find("e2e-request SUBSCRIBE ")? + "e2e-request SUBSCRIBE ".len()..];
            rest.split_whitespace()
                .find_map(|f| f.strip_prefix("ci="))
                .map(str::to_owned)
        })
        .collect()
}

#[test]
fn a_message_summary_subscription_through_the_sbc_to_kamailio_presence() {
    let config = SbcConfig::with_addresses(lo(1), lo(2), lo(6));
    let dir = TestDir::new("subscriptions");
    let db = presence_tables(&dir);
    let _presence = Kamailio::start(&dir, &presence_server(config.agent, &db));
    wait_listening(config.agent, false, Duration::from_secs(10));
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());

    let subscriber = RawUdp::bind(lo(21));
    let call_id = format!("mwi-1@{}", lo(21));
    subscriber.send_to(
        &subscribe(&subscriber, &call_id, (1, 120), None),
        config.access,
    );
    let ok = final_to(&subscriber, "SUBSCRIBE").expect("an answer to the SUBSCRIBE");
    assert_eq!(ok.status(), Some(200), "{ok:?}");
    assert_eq!(ok.header("expires"), Some("120"));
    let our_tag = ok
        .tag("to")
        .expect("our tag toward the subscriber")
        .to_owned();
    let contact = ok.header("contact").unwrap_or_default();
    assert!(
        contact.contains(&config.access.to_string()),
        "the 200's Contact is the SBC's: {contact}"
    );

    // The initial NOTIFY: in the subscriber's own dialog.
    let first = notify_answered(&subscriber).expect("the initial NOTIFY");
    assert_eq!(first.header("call-id"), Some(call_id.as_str()));
    assert_eq!(first.tag("to"), Some("w1"));
    assert_eq!(first.tag("from"), Some(our_tag.as_str()));
    assert!(first
        .header("subscription-state")
        .is_some_and(|s| s.starts_with("active")));

    // Voicemail publishes through the SBC; the subscriber's light goes on.
    let voicemail = RawUdp::bind(lo(22));
    voicemail.send_to(&publish(&voicemail, "vm1", "yes"), config.access);
    let published = final_to(&voicemail, "PUBLISH").expect("an answer to the PUBLISH");
    assert_eq!(published.status(), Some(200), "{published:?}");
    assert!(published.header("sip-etag").is_some(), "{published:?}");
    let lit = notify_answered(&subscriber).expect("the NOTIFY the PUBLISH made");
    let body = String::from_utf8_lossy(&lit.body).into_owned();
    assert!(body.contains("Messages-Waiting: yes"), "{body}");
    assert_eq!(lit.header("call-id"), Some(call_id.as_str()));

    let subs = mgmt.data("show subscriptions");
    assert_eq!(subs["subscriptions"].as_u64(), Some(1), "{subs:#}");
    let row = &subs["rows"][0];
    assert_eq!(row["event"].as_str(), Some("message-summary"));
    assert_eq!(row["state"].as_str(), Some("confirmed"));
    assert!(row["notifies"].as_u64() >= Some(2), "{subs:#}");
    assert!(row["expires_s"].as_u64().is_some_and(|s| s <= 120));
    let stats = mgmt.data("show sip-stats");
    assert_eq!(stats["calls_active"].as_u64(), Some(0), "not a call");

    // A refresh, then an unsubscribe, in the dialog; Kamailio's last NOTIFY ends it.
    subscriber.send_to(
        &subscribe(&subscriber, &call_id, (2, 120), Some(&our_tag)),
        config.access,
    );
    let refreshed = final_to(&subscriber, "SUBSCRIBE").expect("an answer to the refresh");
    assert_eq!(refreshed.status(), Some(200), "{refreshed:?}");
    notify_answered(&subscriber).expect("the NOTIFY a refresh makes");
    subscriber.send_to(
        &subscribe(&subscriber, &call_id, (3, 0), Some(&our_tag)),
        config.access,
    );
    let unsubscribed = final_to(&subscriber, "SUBSCRIBE").expect("an answer to the unsubscribe");
    assert_eq!(unsubscribed.status(), Some(200), "{unsubscribed:?}");
    let last = notify_answered(&subscriber).expect("the last NOTIFY");
    assert!(
        last.header("subscription-state")
            .is_some_and(|s| s.starts_with("terminated")),
        "{last:?}"
    );
    let ended = crate::registration::eventually(Duration::from_secs(5), || {
        mgmt.data("show subscriptions")["subscriptions"].as_u64() == Some(0)
    });
    assert!(ended, "{:#}", mgmt.data("show subscriptions"));
    let subs = mgmt.data("show subscriptions");
    assert_eq!(subs["accepted"].as_u64(), Some(1), "{subs:#}");
    assert_eq!(subs["ended"].as_u64(), Some(1), "{subs:#}");

    // Kamailio saw the three SUBSCRIBEs on one Call-ID of the SBC's, never the subscriber's.
    let seen = subscribes_seen(&dir);
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(
        seen.iter().all(|c| c == &seen[0] && c != &call_id),
        "{seen:?}"
    );
    node.assert_alive();
}

/// A busy lamp (RFC 4235) through the SBC: a subscriber on the access side watches bob's
/// dialogs at Kamailio's presence server (`presence_dialoginfo`); a call from the access side
/// reaches bob's phone in the core (a session-agent of its own) through the SBC. The PBX
/// side publishes bob's dialog as bob's phone sees it: the SBC's core-leg Call-ID and tags.
/// The NOTIFY Kamailio makes reaches the subscriber naming the call as the access side knows
/// it: the caller's Call-ID, bob as our tag there, the caller's tag; none of the core leg's.
#[test]
fn a_busy_lamp_names_the_call_as_the_subscriber_s_side_knows_it() {
    let mut config = SbcConfig::with_addresses(lo(1), lo(2), lo(6));
    let bob = RawUdp::bind(lo(7));
    config.extra_toml = format!(
        "\n[[session-agent]]\nname = \"bob-phone\"\nrealm = \"core\"\naddress = \"{}\"\n\
         port = {}\n\n[[local-policy]]\nto-address = [\"bobphone\"]\nsource-realm = [\"access\"]\n\n\
         [[local-policy.policy-attribute]]\nnext-hop = \"bob-phone\"\n",
        bob.local_addr().ip(),
        bob.local_addr().port()
    );
    let dir = TestDir::new("busy-lamp");
    let db = presence_tables(&dir);
    let _presence = Kamailio::start(&dir, &presence_server(config.agent, &db));
    wait_listening(config.agent, false, Duration::from_secs(10));
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());

    // alice calls bob's phone through the SBC; bob answers.
    let alice = RawUdp::bind(lo(21));
    let at = alice.local_addr();
    let alice_call = format!("blf-call@{}", at.ip());
    alice.send_to(
        format!(
            "INVITE sip:bobphone@example.test SIP/2.0\r\nVia: SIP/2.0/UDP {at};branch=z9hG4bK-blf-inv\r\n\
             Max-Forwards: 70\r\nFrom: <sip:alice@example.test>;tag=alicetag\r\n\
             To: <sip:bobphone@example.test>\r\nCall-ID: {alice_call}\r\nCSeq: 1 INVITE\r\n\
             Contact: <sip:alice@{at}>\r\nContent-Length: 0\r\n\r\n"
        )
        .as_bytes(),
        config.access,
    );
    let (invite, sbc_core) = bob
        .recv_sip_until(
            Duration::from_secs(5),
            |m| m.method() == Some("INVITE"),
            &mut Vec::new(),
        )
        .expect("the INVITE at bob's phone");
    let (b2b_call, our_core_tag) = (
        invite.header("call-id").expect("Call-ID").to_owned(),
        invite.tag("from").expect("our tag").to_owned(),
    );
    bob.send_to(&response_to(&invite, 200, "OK", "bobtag"), sbc_core);
    let ok = final_to(&alice, "INVITE").expect("the 200 at alice");
    assert_eq!(ok.status(), Some(200), "{ok:?}");
    let our_access_tag = ok.tag("to").expect("our tag toward alice").to_owned();
    let target = ok.header("contact").unwrap_or_default();
    let target = target
        .trim()
        .trim_start_matches('<')
        .split('>')
        .next()
        .unwrap_or_default();
    alice.send_to(
        format!(
            "ACK {target} SIP/2.0\r\nVia: SIP/2.0/UDP {at};branch=z9hG4bK-blf-ack\r\n\
             Max-Forwards: 70\r\nFrom: <sip:alice@example.test>;tag=alicetag\r\n\
             To: <sip:bobphone@example.test>;tag={our_access_tag}\r\nCall-ID: {alice_call}\r\n\
             CSeq: 1 ACK\r\nContent-Length: 0\r\n\r\n"
        )
        .as_bytes(),
        config.access,
    );

    // carol's lamp watches bob.
    let carol = RawUdp::bind(lo(22));
    let cat = carol.local_addr();
    carol.send_to(
        format!(
            "SUBSCRIBE sip:bob@example.test SIP/2.0\r\nVia: SIP/2.0/UDP {cat};branch=z9hG4bK-blf-sub\r\n\
             Max-Forwards: 70\r\nFrom: <sip:carol@example.test>;tag=w1\r\nTo: <sip:bob@example.test>\r\n\
             Call-ID: blf-sub@{ip}\r\nCSeq: 1 SUBSCRIBE\r\nContact: <sip:carol@{cat}>\r\n\
             Event: dialog\r\nAccept: application/dialog-info+xml\r\nExpires: 300\r\n\
             Content-Length: 0\r\n\r\n",
            ip = cat.ip()
        )
        .as_bytes(),
        config.access,
    );
    let subscribed = final_to(&carol, "SUBSCRIBE").expect("an answer to the SUBSCRIBE");
    assert_eq!(subscribed.status(), Some(200), "{subscribed:?}");
    notify_answered(&carol).expect("the initial NOTIFY");

    // The PBX side publishes bob's dialog as bob's phone sees it (the core leg).
    let pbx = RawUdp::bind(lo(23));
    let pat = pbx.local_addr();
    let body = format!(
        "<?xml version=\"1.0\"?>\r\n<dialog-info xmlns=\"urn:ietf:params:xml:ns:dialog-info\" \
         version=\"1\" state=\"full\" entity=\"sip:bob@example.test\">\r\n\
         <dialog id=\"bob-1\" call-id=\"{b2b_call}\" local-tag=\"bobtag\" remote-tag=\"{our_core_tag}\" \
         direction=\"recipient\"><state>confirmed</state></dialog>\r\n</dialog-info>\r\n"
    );
    pbx.send_to(
        format!(
            "PUBLISH sip:bob@example.test SIP/2.0\r\nVia: SIP/2.0/UDP {pat};branch=z9hG4bK-blf-pub\r\n\
             Max-Forwards: 70\r\nFrom: <sip:bob@example.test>;tag=p1\r\nTo: <sip:bob@example.test>\r\n\
             Call-ID: blf-pub@{ip}\r\nCSeq: 1 PUBLISH\r\nEvent: dialog\r\nExpires: 300\r\n\
             Content-Type: application/dialog-info+xml\r\nContent-Length: {}\r\n\r\n{body}",
            body.len(),
            ip = pat.ip()
        )
        .as_bytes(),
        config.agent,
    );
    let published = final_to(&pbx, "PUBLISH").expect("an answer to the PUBLISH");
    assert_eq!(published.status(), Some(200), "{published:?}");
    let lamp = notify_answered(&carol).expect("the NOTIFY the PUBLISH made");
    let shown = String::from_utf8_lossy(&lamp.body).into_owned();
    assert!(
        shown.contains(&format!("call-id=\"{alice_call}\"")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("local-tag=\"{our_access_tag}\"")),
        "{shown}"
    );
    assert!(shown.contains("remote-tag=\"alicetag\""), "{shown}");
    assert!(
        !shown.contains(&b2b_call) && !shown.contains("bobtag"),
        "{shown}"
    );
    let stats = mgmt.data("show sip-stats");
    assert_eq!(
        stats["counters"]["dialog_info_rewritten"].as_u64(),
        Some(1),
        "{stats:#}"
    );
    node.assert_alive();
}
