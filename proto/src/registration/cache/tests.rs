use super::*;

const PHONE: &str = "sip:alice@127.0.0.50:5060";

fn settings() -> CacheSettings {
    CacheSettings {
        registration_interval: Duration::from_secs(3600),
        min_reg_expire: Duration::from_secs(300),
        nat_interval: Duration::from_secs(30),
        max_bindings: 0,
    }
}

fn flow(port: u16) -> Flow {
    Flow {
        interface: 0,
        transport: LegTransport::Udp,
        source: SocketAddr::from(([127, 0, 0, 50], port)),
        connection: None,
    }
}

fn register(call_id: &str, cseq: u32, contact: &str, expires: Option<u32>) -> RegisterRequest {
    RegisterRequest {
        aor: "sip:alice@example.test".into(),
        call_id: call_id.into(),
        cseq,
        contacts: vec![ContactRequest {
            uri: contact.into(),
            expires: None,
        }],
        star: false,
        expires,
        behind_nat: true,
    }
}

/// The pending key and our Contacts of a decision that must be a forward.
#[track_caller]
fn forwarded(d: RegisterDecision) -> (u64, Vec<OurContact>) {
    match d {
        RegisterDecision::Forward { pending, contacts } => (pending, contacts),
        other => panic!("expected a forward, got {other:?}"),
    }
}

/// Tokens 101, 102, ... in turn.
fn tokens() -> impl FnMut() -> u64 {
    let mut next = 100;
    move || {
        next += 1;
        next
    }
}

/// Registers `PHONE` over `flow(5060)`: forwarded, answered 200 with the registrar's
/// `granted` seconds; returns the token.
fn registered(c: &mut RegistrationCache, now: Instant, granted: u32) -> u64 {
    let mut draw = tokens();
    let (pending, contacts) = forwarded(c.on_register(
        now,
        flow(5060),
        register("c1", 1, PHONE, Some(3600)),
        &mut draw,
    ));
    assert_eq!(contacts.len(), 1);
    assert_eq!(
        contacts[0].expires, 3630,
        "the registrar is asked registration-interval plus the phone's nat-interval"
    );
    let token = contacts[0].token;
    assert!(
        c.is_empty(),
        "a REGISTER alone binds nothing: only the registrar's 2xx does"
    );
    let out = c.on_registrar_answer(now, pending, 200, &[(token, granted)]);
    assert_eq!(out, AnswerOutcome::Registered(vec![(PHONE.into(), 30)]));
    token
}

#[test]
fn a_registration_binds_only_on_the_registrars_2xx_and_a_nated_phone_gets_nat_interval() {
    let t0 = Instant::now();
    let mut c = RegistrationCache::new(settings());
    let token = registered(&mut c, t0, 3600);
    let b = c.binding_for_token(token).expect("bound");
    assert_eq!(b.flow, flow(5060));
    assert_eq!(b.phone_expires, 30, "nat-interval");
    assert_eq!(b.registrar_expires, 3600);
    assert_eq!(c.counters().created, 1);
    assert_eq!(c.bindings_of("sip:alice@example.test").len(), 1);
}

#[test]
fn refreshes_on_the_same_flow_are_absorbed_while_the_registrar_outlives_the_phone() {
    let t0 = Instant::now();
    let mut c = RegistrationCache::new(settings());
    registered(&mut c, t0, 3600);
    let mut draw = tokens();
    // Every 25 s the phone refreshes (told 30 s): answered from the cache while the
    // registrar's binding (3600 s) outlives the 30 s the phone is given.
    let mut absorbed = 0;
    let mut forwarded_at = None;
    for i in 1..=200u32 {
        let now = t0 + Duration::from_secs(u64::from(i) * 25);
        match c.on_register(
            now,
            flow(5060),
            register("c1", 1 + i, PHONE, Some(3600)),
            &mut draw,
        ) {
            RegisterDecision::Answer(a) => {
                assert_eq!(a, vec![(PHONE.to_owned(), 30)]);
                absorbed += 1;
            }
            RegisterDecision::Forward { .. } => {
                forwarded_at = Some(i * 25);
                break;
            }
            RegisterDecision::Refuse(code) => panic!("refused {code}"),
        }
    }
    assert_eq!(absorbed, 142, "3550 s of refreshes absorbed");
    assert_eq!(
        forwarded_at,
        Some(3575),
        "forwarded once the registrar's binding would end within the phone's 30 s"
    );
    assert_eq!(c.counters().absorbed, 142);
}

#[test]
fn anything_but_a_refresh_on_the_same_flow_is_forwarded_and_changes_nothing_by_itself() {
    let t0 = Instant::now();
    let mut c = RegistrationCache::new(settings());
    let token = registered(&mut c, t0, 3600);
    let now = t0 + Duration::from_secs(20);
    let mut draw = tokens();
    let is_forward = |d: &RegisterDecision| matches!(d, RegisterDecision::Forward { .. });
    // Another source port (a stranger shaped as a refresh: the phone's Call-ID, a higher CSeq).
    let d = c.on_register(
        now,
        flow(6000),
        register("c1", 2, PHONE, Some(3600)),
        &mut draw,
    );
    assert!(is_forward(&d), "{d:?}");
    assert_eq!(c.binding_for_token(token).map(|b| b.flow), Some(flow(5060)));
    // Another Call-ID; the same CSeq; a lower one.
    for r in [
        register("other", 5, PHONE, Some(3600)),
        register("c1", 1, PHONE, Some(3600)),
        register("c1", 0, PHONE, Some(3600)),
    ] {
        let d = c.on_register(now, flow(5060), r, &mut draw);
        assert!(is_forward(&d), "{d:?}");
    }
    // The stranger's REGISTER is answered 401 by the registrar: still the phone's flow.
    let (pending, _) = forwarded(c.on_register(
        now,
        flow(6000),
        register("c1", 9, PHONE, Some(3600)),
        &mut draw,
    ));
    assert_eq!(
        c.on_registrar_answer(now, pending, 401, &[]),
        AnswerOutcome::Unchanged
    );
    assert_eq!(c.binding_for_token(token).map(|b| b.flow), Some(flow(5060)));
    assert_eq!(
        c.on_registrar_answer(now, pending, 200, &[]),
        AnswerOutcome::Unknown
    );
}

#[test]
fn a_new_flow_accepted_by_the_registrar_moves_the_binding_and_keeps_its_token() {
    let t0 = Instant::now();
    let mut c = RegistrationCache::new(settings());
    let token = registered(&mut c, t0, 3600);
    let now = t0 + Duration::from_secs(10);
    let mut draw = tokens();
    let (pending, contacts) = forwarded(c.on_register(
        now,
        flow(7000),
        register("c2", 1, PHONE, Some(3600)),
        &mut draw,
    ));
    assert_eq!(contacts[0].token, token, "the same Contact of ours");
    c.on_registrar_answer(now, pending, 200, &[(token, 3600)]);
    assert_eq!(c.binding_for_token(token).map(|b| b.flow), Some(flow(7000)));
    assert_eq!(c.len(), 1);
    assert_eq!(c.counters().created, 1, "refreshed, not created again");
}

#[test]
fn de_registration_is_forwarded_and_clears_on_the_2xx() {
    let t0 = Instant::now();
    let mut c = RegistrationCache::new(settings());
    let token = registered(&mut c, t0, 3600);
    let mut draw = tokens();
    let (pending, contacts) =
        forwarded(c.on_register(t0, flow(5060), register("c1", 2, PHONE, Some(0)), &mut draw));
    assert_eq!(contacts[0].expires, 0);
    assert!(c.binding_for_token(token).is_some(), "until the 2xx");
    assert_eq!(
        c.on_registrar_answer(t0, pending, 200, &[]),
        AnswerOutcome::Removed
    );
    assert!(c.is_empty());
    // `*` removes every binding of the AoR.
    let token = registered(&mut c, t0, 3600);
    let mut star = register("c1", 3, PHONE, Some(0));
    star.star = true;
    star.contacts.clear();
    let (pending, contacts) = forwarded(c.on_register(t0, flow(5060), star, &mut draw));
    assert_eq!(
        contacts.iter().map(|c| c.token).collect::<Vec<_>>(),
        [token]
    );
    c.on_registrar_answer(t0, pending, 200, &[]);
    assert!(c.is_empty());
    assert_eq!(c.counters().removed, 2);
}

#[test]
fn a_phone_not_behind_nat_gets_at_least_min_reg_expire_and_never_beyond_the_registrar() {
    let t0 = Instant::now();
    let mut c = RegistrationCache::new(settings());
    let mut draw = tokens();
    let mut r = register("c1", 1, PHONE, Some(60));
    r.behind_nat = false;
    let (pending, contacts) = forwarded(c.on_register(t0, flow(5060), r, &mut draw));
    // The registrar grants 200 s only: the phone is told 200, not min-reg-expire's 300.
    let out = c.on_registrar_answer(t0, pending, 200, &[(contacts[0].token, 200)]);
    assert_eq!(out, AnswerOutcome::Registered(vec![(PHONE.into(), 200)]));
    let mut r = register("c2", 1, "sip:alice@127.0.0.51:5060", Some(60));
    r.behind_nat = false;
    let (pending, contacts) = forwarded(c.on_register(t0, flow(5061), r, &mut draw));
    let out = c.on_registrar_answer(t0, pending, 200, &[(contacts[0].token, 3600)]);
    assert_eq!(
        out,
        AnswerOutcome::Registered(vec![("sip:alice@127.0.0.51:5060".into(), 300)])
    );
    assert_eq!(
        c.bindings_of("sip:alice@example.test").len(),
        2,
        "one AoR, two phones"
    );
}

#[test]
fn bindings_expire_on_the_timer_and_the_cache_is_bounded() {
    let t0 = Instant::now();
    let mut c = RegistrationCache::new(CacheSettings {
        max_bindings: 1,
        ..settings()
    });
    registered(&mut c, t0, 3600);
    assert_eq!(c.next_expiry(), Some(t0 + Duration::from_secs(30)));
    // A second phone: the cache is full.
    let mut draw = tokens();
    let d = c.on_register(
        t0,
        flow(5070),
        register("c9", 1, "sip:bob@127.0.0.52:5060", Some(3600)),
        &mut draw,
    );
    assert_eq!(d, RegisterDecision::Refuse(503));
    assert_eq!(c.counters().refused_full, 1);
    // The phone stops refreshing: gone at its expiry, on the timer.
    assert!(c.purge_expired(t0 + Duration::from_secs(29)).is_empty());
    let gone = c.purge_expired(t0 + Duration::from_secs(30));
    assert_eq!(gone.len(), 1);
    assert!(c.is_empty());
    assert_eq!(c.counters().expired, 1);
    // A refresh after the expiry is forwarded, not absorbed.
    let d = c.on_register(
        t0 + Duration::from_secs(31),
        flow(5060),
        register("c1", 5, PHONE, Some(3600)),
        &mut draw,
    );
    assert!(matches!(d, RegisterDecision::Forward { .. }), "{d:?}");
}

#[test]
fn a_registrar_that_drops_a_contact_unbinds_it_and_tokens_never_collide() {
    let t0 = Instant::now();
    let mut c = RegistrationCache::new(settings());
    let token = registered(&mut c, t0, 3600);
    // A refresh the registrar must see is forwarded; its 2xx no longer lists our Contact.
    let later = t0 + Duration::from_secs(3580);
    let mut draw = tokens();
    let (pending, _) = forwarded(c.on_register(
        later,
        flow(5060),
        register("c1", 2, PHONE, Some(3600)),
        &mut draw,
    ));
    c.on_registrar_answer(later, pending, 200, &[]);
    assert!(c.binding_for_token(token).is_none());
    // A stuck RNG (always the token in use) still yields an unused token.
    let token = registered(&mut c, later, 3600);
    let mut stuck = || token;
    let (_, contacts) = forwarded(c.on_register(
        later,
        flow(5080),
        register("c3", 1, "sip:alice@127.0.0.53:5060", Some(3600)),
        &mut stuck,
    ));
    assert_ne!(contacts[0].token, token);
    assert_ne!(contacts[0].token, 0);
}

#[test]
fn clear_registration_removes_an_aor() {
    let t0 = Instant::now();
    let mut c = RegistrationCache::new(settings());
    registered(&mut c, t0, 3600);
    assert_eq!(c.clear_aor("sip:bob@example.test"), 0);
    assert_eq!(c.clear_aor("sip:alice@example.test"), 1);
    assert!(c.is_empty());
}

#[test]
fn a_phone_refreshing_every_nat_interval_reaches_the_registrar_once_per_registration_interval() {
    // The storm's figures: registration-interval 60 s, phones behind NAT told 30 s and
    // refreshing 29.9 s after each answer. The registrar is asked 90 s and sees the refresh
    // nearest every 60 s; the phone's binding never outlives the registrar's.
    let t0 = Instant::now();
    let mut c = RegistrationCache::new(CacheSettings {
        registration_interval: Duration::from_secs(60),
        ..settings()
    });
    let mut draw = tokens();
    let mut forwarded_at = Vec::new();
    let mut now = t0;
    for cseq in 1..=20u32 {
        match c.on_register(
            now,
            flow(5060),
            register("c1", cseq, PHONE, Some(3600)),
            &mut draw,
        ) {
            RegisterDecision::Forward { pending, contacts } => {
                assert_eq!(contacts[0].expires, 90);
                forwarded_at.push((now - t0).as_millis());
                let granted = [(contacts[0].token, contacts[0].expires)];
                let out = c.on_registrar_answer(now, pending, 200, &granted);
                assert_eq!(out, AnswerOutcome::Registered(vec![(PHONE.into(), 30)]));
            }
            RegisterDecision::Answer(a) => assert_eq!(a, vec![(PHONE.to_owned(), 30)]),
            RegisterDecision::Refuse(code) => panic!("refused {code}"),
        }
        let b = &c.bindings_of("sip:alice@example.test")[0];
        assert!(b.phone_expires_at <= b.registrar_expires_at);
        now += Duration::from_millis(29_900);
    }
    assert_eq!(
        forwarded_at,
        [0, 59_800, 119_600, 179_400, 239_200, 299_000, 358_800, 418_600, 478_400, 538_200]
    );
    assert_eq!(c.counters().absorbed, 10);
}
