//! Phones registered through the engine, on a virtual clock: a REGISTER forwarded with our
//! Contact, the registrar's 2xx relayed with the phone's own, a refresh answered from the
//! cache, a request for our Contact sent to the phone's flow, a stranger's REGISTER binding
//! nothing, `allow-anonymous registered`.

use super::*;
use crate::registration::cache::{CacheSettings, RegistrationCache};
use crate::registration::message::{token_of, NatTraversal};
use crate::sip::message::name_addr_uri;
use std::sync::Mutex;

/// A phone behind a NAT: its Via and Contact name its own address (127.0.0.60), it is seen
/// sending from this one (the NAT's).
const PHONE_NAT: &str = "127.0.0.50:40000";

fn registering_world(allow: AllowAnonymous) -> (World, SharedRegistrations) {
    let cache: SharedRegistrations = Arc::new(Mutex::new(RegistrationCache::new(CacheSettings {
        registration_interval: Duration::from_secs(3600),
        min_reg_expire: Duration::from_secs(300),
        nat_interval: Duration::from_secs(30),
        max_bindings: 0,
    })));
    let mut cfg = config();
    cfg.registration = Registrations {
        cache: Some(Arc::clone(&cache)),
        interfaces: vec![
            InterfaceRegistration {
                caching: true,
                nat: NatTraversal::Rport,
                allow_anonymous: allow,
            },
            InterfaceRegistration::default(),
        ],
    };
    let mut w = World::new();
    w.engine = Engine::new(cfg, seed());
    (w, cache)
}

fn register(cseq: u32, branch: &str) -> String {
    format!(
        "REGISTER sip:example.test SIP/2.0\n\
         Via: SIP/2.0/UDP 127.0.0.60:5060;branch=z9hG4bK{branch};rport\n\
         Max-Forwards: 70\nFrom: <sip:alice@example.test>;tag=ph1\nTo: <sip:alice@example.test>\n\
         Call-ID: reg-1@127.0.0.60\nCSeq: {cseq} REGISTER\n\
         Contact: <sip:alice@127.0.0.60:5060>\nExpires: 600\nContent-Length: 0\n\n"
    )
}

/// The registrar's 200 to `req`, granting its Contacts `expires` seconds.
fn registrar_ok(req: &SipMessage, expires: u32) -> String {
    let contacts: Vec<String> = req
        .headers
        .iter()
        .filter(|h| {
            matches!(&h.name, HeaderName::Contact)
                || h.name.as_str().eq_ignore_ascii_case("contact")
        })
        .map(|h| format!("Contact: <{}>;expires={expires}\n", name_addr_uri(&h.value)))
        .collect();
    format!(
        "SIP/2.0 200 OK\nVia: {}\nFrom: {}\nTo: {};tag=reg\nCall-ID: {}\nCSeq: {}\n{}Content-Length: 0\n\n",
        req.top_via().unwrap_or_default(),
        req.header(&HeaderName::From).unwrap_or_default(),
        req.header(&HeaderName::To).unwrap_or_default(),
        req.call_id().unwrap_or_default(),
        req.header(&HeaderName::CSeq).unwrap_or_default(),
        contacts.concat()
    )
}

fn contact_values(msg: &SipMessage) -> Vec<String> {
    msg.headers
        .iter()
        .filter(|h| h.name.as_str().eq_ignore_ascii_case("contact"))
        .map(|h| h.value.clone())
        .collect()
}

#[test]
fn a_phone_registers_through_the_cache_and_is_called_over_its_flow() {
    let (mut w, cache) = registering_world(AllowAnonymous::All);
    w.sends_from(0, PHONE_NAT, &register(1, "r1"));
    // Forwarded with one Contact of ours at the core interface, no Expires header.
    let fwd = w.last_to_callee().clone();
    let ours = contact_values(&fwd);
    assert_eq!(ours.len(), 1, "{ours:?}");
    let token = token_of(name_addr_uri(&ours[0])).expect("our token");
    assert!(
        ours[0].contains(CORE) && ours[0].ends_with(";expires=3630"),
        "{ours:?}"
    );
    assert_eq!(fwd.cseq().map(|c| c.seq), Some(1), "the phone's CSeq");
    assert_eq!(fwd.request_uri(), Some("sip:example.test"));
    assert_eq!(
        lock(&cache).len(),
        0,
        "nothing bound before the registrar's 2xx"
    );

    w.callee_sends(&registrar_ok(&fwd, 3600));
    let ok = w
        .to_others
        .last()
        .map(|(to, m)| (*to, m.clone()))
        .expect("the 200 to the phone");
    assert_eq!(ok.0, sa(PHONE_NAT), "answered where the phone sends from");
    assert_eq!(ok.1.status(), Some(200));
    // The phone's own Contact, with nat-interval (it is behind a NAT), and its Via stamped.
    assert_eq!(
        contact_values(&ok.1),
        vec!["<sip:alice@127.0.0.60:5060>;expires=30".to_owned()]
    );
    let via = ok.1.top_via().unwrap_or_default().to_owned();
    assert!(
        via.contains("rport=40000") && via.contains("received=127.0.0.50"),
        "{via}"
    );
    assert_eq!(lock(&cache).len(), 1);

    // A refresh on the same flow is answered from the cache: nothing reaches the registrar.
    let before = w.to_callee.len();
    w.advance(Duration::from_secs(20));
    w.sends_from(0, PHONE_NAT, &register(2, "r2"));
    assert_eq!(w.to_callee.len(), before, "a refresh was forwarded");
    let (_, again) = w.to_others.last().expect("answered");
    assert_eq!(again.status(), Some(200));
    assert_eq!(lock(&cache).counters().absorbed, 1);

    // The registrar forks a call to our Contact: it goes to the phone's NAT address, with
    // the phone's Contact as its Request-URI.
    w.callee_sends(&format!(
        "INVITE sip:r-{token:016x}@{CORE} SIP/2.0\nVia: SIP/2.0/UDP {CALLEE};branch=z9hG4bKinv1\n\
         Max-Forwards: 70\nFrom: <sip:bob@example.test>;tag=b1\nTo: <sip:alice@example.test>\n\
         Call-ID: call-1@{CALLEE}\nCSeq: 1 INVITE\nContact: <sip:bob@{CALLEE}>\nContent-Length: 0\n\n"
    ));
    let (to, invite) = w
        .to_others
        .iter()
        .rev()
        .find(|(_, m)| m.method() == Some(&Method::Invite))
        .cloned()
        .expect("the INVITE to the phone");
    assert_eq!(to, sa(PHONE_NAT));
    assert_eq!(invite.request_uri(), Some("sip:alice@127.0.0.60:5060"));
    assert_eq!(w.engine.stats().to_registered_phones, 1);
}

#[test]
fn only_the_registrars_2xx_binds_and_a_gone_token_gets_480() {
    let (mut w, cache) = registering_world(AllowAnonymous::All);
    w.sends_from(0, PHONE_NAT, &register(1, "c1"));
    let fwd = w.last_to_callee().clone();
    // The registrar challenges it: relayed as it is, nothing bound.
    w.callee_sends(&format!(
        "SIP/2.0 401 Unauthorized\nVia: {}\nFrom: {}\nTo: {};tag=reg\nCall-ID: {}\nCSeq: {}\n\
         WWW-Authenticate: Digest realm=\"example.test\", nonce=\"n1\"\nContent-Length: 0\n\n",
        fwd.top_via().unwrap_or_default(),
        fwd.header(&HeaderName::From).unwrap_or_default(),
        fwd.header(&HeaderName::To).unwrap_or_default(),
        fwd.call_id().unwrap_or_default(),
        fwd.header(&HeaderName::CSeq).unwrap_or_default(),
    ));
    let (_, challenge) = w.to_others.last().expect("the challenge relayed");
    assert_eq!(challenge.status(), Some(401));
    assert!(challenge
        .headers
        .iter()
        .any(|h| h.name.as_str().eq_ignore_ascii_case("www-authenticate")));
    assert_eq!(lock(&cache).len(), 0);
    // A request for a token nobody has: 480.
    w.callee_sends(&format!(
        "OPTIONS sip:r-00000000000000aa@{CORE} SIP/2.0\nVia: SIP/2.0/UDP {CALLEE};branch=z9hG4bKo1\n\
         Max-Forwards: 70\nFrom: <sip:bob@example.test>;tag=b1\nTo: <sip:alice@example.test>\n\
         Call-ID: opt-1@{CALLEE}\nCSeq: 1 OPTIONS\nContent-Length: 0\n\n"
    ));
    assert_eq!(w.last_to_callee().status(), Some(480));
    assert_eq!(w.engine.stats().registered_phone_gone, 1);
}

#[test]
fn allow_anonymous_registered_refuses_an_unregistered_caller_but_not_its_register() {
    let (mut w, _cache) = registering_world(AllowAnonymous::Registered);
    w.caller_sends(&format!(
        "INVITE sip:bob@example.test SIP/2.0\nVia: SIP/2.0/UDP {CALLER};branch=z9hG4bKa1\n\
         Max-Forwards: 70\nFrom: <sip:mallory@example.test>;tag=m1\nTo: <sip:bob@example.test>\n\
         Call-ID: toll-1@{CALLER}\nCSeq: 1 INVITE\nContact: <sip:mallory@{CALLER}>\nContent-Length: 0\n\n"
    ));
    assert_eq!(w.to_caller.last().and_then(SipMessage::status), Some(403));
    assert!(w.to_callee.is_empty(), "the call went through");
    assert_eq!(w.engine.stats().anonymous_refused, 1);
    // Its REGISTER still goes to the registrar.
    w.sends_from(0, PHONE_NAT, &register(1, "a2"));
    assert_eq!(w.last_to_callee().method(), Some(&Method::Register));
}
