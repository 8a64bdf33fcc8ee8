//! Routing and hunting: a failed attempt (503, silence, out-of-service codes) goes to the next
//! candidate within the caller's transaction; what ends a hunt; the best failure; domains kept.

use super::*;
use crate::routing::local_policy::{AddressPattern, LocalPolicy};
use crate::routing::router::{
    attribute_to, GroupStrategy, RouteAgent, RouteGroup, Router, DEFAULT_ATTEMPT_EXPIRY,
};

const B: &str = "198.51.100.21:5080";
const C: &str = "198.51.100.22:5080";

fn agent(name: &str, addr: &str) -> RouteAgent {
    RouteAgent::at(
        NextHop {
            name: name.into(),
            addr: sa(addr),
            transport: LegTransport::Udp,
            interface: 1,
            max_udp_length: 0,
        },
        DEFAULT_ATTEMPT_EXPIRY,
    )
}

/// Agents a (the World's callee), b and c; everything from `access` to `next_hops` in order.
fn world_routing_to(next_hops: &[&str], edit: impl FnOnce(&mut Vec<RouteAgent>)) -> World {
    world_with(next_hops, edit, |_| {})
}

/// [`world_routing_to`], with the realms' translations per interface (access, core).
fn world_with_realms(
    next_hops: &[&str],
    edit: impl FnOnce(&mut Vec<RouteAgent>),
    realms: Vec<crate::routing::router::RealmTranslations>,
) -> World {
    let mut w = world_routing_to(next_hops, edit);
    let router = w
        .engine
        .router()
        .as_ref()
        .clone()
        .with_realm_translations(realms);
    w.engine.set_router(Arc::new(router));
    w
}

/// [`world_routing_to`], with group `pbx` (a, b, c; hunt, recursion) edited.
fn world_with(
    next_hops: &[&str],
    edit: impl FnOnce(&mut Vec<RouteAgent>),
    edit_group: impl FnOnce(&mut RouteGroup),
) -> World {
    let mut agents = vec![agent("a", CALLEE), agent("b", B), agent("c", C)];
    edit(&mut agents);
    let policy = LocalPolicy {
        from: AddressPattern::Any,
        to: AddressPattern::Any,
        source_realm: Some("access".into()),
        enabled: true,
        attributes: next_hops
            .iter()
            .enumerate()
            .map(|(i, h)| crate::routing::local_policy::PolicyAttribute {
                cost: u32::try_from(i).unwrap_or(0),
                ..attribute_to(h)
            })
            .collect(),
    };
    let mut group = RouteGroup {
        name: "pbx".into(),
        strategy: GroupStrategy::Hunt,
        dests: vec![0, 1, 2],
        recursion: true,
        stop_recurse: vec![401, 407],
    };
    edit_group(&mut group);
    let groups = vec![group];
    let router = Router::new(agents, groups, vec![policy], Instant::now()).expect("a valid table");
    let mut w = World::new();
    w.engine = Engine::new(
        EngineConfig {
            router: Arc::new(router),
            agents: vec![sa(CALLEE), sa(B), sa(C)],
            ..config()
        },
        seed(),
    );
    w
}

/// The requests sent to `addr` (an agent other than the World's callee).
fn sent_to(w: &World, addr: &str) -> Vec<SipMessage> {
    w.to_others
        .iter()
        .filter(|(dest, m)| *dest == sa(addr) && m.method().is_some())
        .map(|(_, m)| m.clone())
        .collect()
}

/// `agent` (at `addr`) answers `req` with `code`.
fn answer_from(w: &mut World, addr: &str, req: &SipMessage, code: u16, to_tag: &str) {
    let to = req.header(&HeaderName::To).unwrap_or_default();
    let to = if code > 100 {
        format!("{to};tag={to_tag}")
    } else {
        to.to_owned()
    };
    let text = format!(
        "SIP/2.0 {code} {}\nVia: {}\nFrom: {}\nTo: {to}\nCall-ID: {}\nCSeq: {}\nContact: <sip:bob@{addr}>\nContent-Length: 0\n\n",
        reason_for(code),
        req.top_via().unwrap_or_default(),
        req.header(&HeaderName::From).unwrap_or_default(),
        req.call_id().unwrap_or_default(),
        req.header(&HeaderName::CSeq).unwrap_or_default(),
    );
    w.sends_from(1, addr, &text);
}

#[test]
fn a_503_goes_on_to_the_next_candidate_and_the_caller_sees_one_call() {
    let mut w = world_routing_to(&["a", "b"], |_| {});
    w.caller_sends(&invite("z9hG4bKh1"));
    w.callee_answers(503, "a1");
    // The 503 is ACKed hop by hop and not relayed; b gets the INVITE on a fresh leg.
    assert_eq!(w.methods_to_callee(), vec!["INVITE", "ACK"]);
    let to_b = sent_to(&w, B);
    assert_eq!(to_b.len(), 1);
    assert_ne!(to_b[0].call_id(), w.to_callee[0].call_id());
    assert_eq!(to_b[0].body, w.to_callee[0].body, "the same offer");
    answer_from(&mut w, B, &to_b[0], 180, "b1");
    answer_from(&mut w, B, &to_b[0], 200, "b1");
    assert_eq!(w.codes_to_caller(), vec![100, 180, 200]);
    assert_eq!(w.engine.stats().rerouted, 1);
    // The call is b's: the caller's BYE goes there.
    let tag = w.to_caller[1].to_tag().unwrap_or_default().to_owned();
    assert_eq!(
        w.to_caller[2].to_tag(),
        Some(tag.as_str()),
        "one dialog to the caller"
    );
    w.caller_sends(&caller_in_dialog("ACK", 1, "z9hG4bKack1", &tag));
    w.caller_sends(&caller_in_dialog("BYE", 2, "z9hG4bKbye1", &tag));
    let to_b = sent_to(&w, B);
    assert_eq!(
        to_b.iter()
            .map(|m| m.method().map(|m| m.to_string()))
            .collect::<Vec<_>>(),
        vec![
            Some("INVITE".into()),
            Some("ACK".into()),
            Some("BYE".into())
        ]
    );
}

#[test]
fn a_silent_agent_is_abandoned_then_a_busy_one_ends_the_hunt() {
    let mut w = world_routing_to(&["a", "b", "c"], |_| {});
    w.caller_sends(&invite("z9hG4bKh2"));
    w.advance(DEFAULT_ATTEMPT_EXPIRY);
    let to_b = sent_to(&w, B);
    assert_eq!(to_b.len(), 1, "b tried after a's expiry");
    // 486 is not a reason to hunt: relayed, c never tried.
    answer_from(&mut w, B, &to_b[0], 486, "b1");
    assert_eq!(w.codes_to_caller(), vec![100, 486]);
    assert!(sent_to(&w, C).is_empty());
    assert_eq!(w.engine.call_count(), 0);
    assert_eq!(w.engine.stats().attempts_expired, 1);
}

#[test]
fn a_late_answer_to_an_abandoned_attempt_is_acked_and_hung_up() {
    let mut w = world_routing_to(&["a", "b"], |_| {});
    w.caller_sends(&invite("z9hG4bKlate"));
    w.advance(DEFAULT_ATTEMPT_EXPIRY);
    let to_b = sent_to(&w, B);
    assert_eq!(to_b.len(), 1, "b tried after a's expiry");
    answer_from(&mut w, B, &to_b[0], 200, "b1");
    assert_eq!(w.codes_to_caller(), vec![100, 200]);
    // a answers its abandoned INVITE after all: ACKed and hung up on that leg alone.
    w.callee_answers(200, "a-late");
    let mut methods = w.methods_to_callee();
    methods.dedup(); // the INVITE was retransmitted (timer A) before its expiry
    assert_eq!(methods, vec!["INVITE", "ACK", "BYE"]);
    let bye = w
        .to_callee
        .iter()
        .find(|m| m.method() == Some(&Method::Bye))
        .cloned()
        .expect("a BYE");
    assert_eq!(bye.call_id(), w.to_callee[0].call_id(), "a's own leg");
    assert_eq!(bye.to_tag(), Some("a-late"));
    let uri = bye.request_uri().unwrap_or_default();
    assert!(uri.contains(CALLEE), "to a's Contact: {uri}");
    assert_eq!(
        w.codes_to_caller(),
        vec![100, 200],
        "the caller sees nothing of it"
    );
    assert_eq!(w.engine.stats().abandoned_answers_released, 1);
    assert_eq!(w.engine.call_count(), 1, "b's call stays up");
    // a answers the BYE: nothing more is released.
    w.callee_answers(200, "a-late");
    assert_eq!(w.engine.stats().abandoned_answers_released, 1);
}

#[test]
fn when_every_candidate_fails_the_caller_gets_the_best_failure_never_503() {
    // 503 then 503: 500 (RFC 3261 §16.7).
    let mut w = world_routing_to(&["a", "b"], |_| {});
    w.caller_sends(&invite("z9hG4bKh3"));
    w.callee_answers(503, "a1");
    let to_b = sent_to(&w, B);
    answer_from(&mut w, B, &to_b[0], 503, "b1");
    assert_eq!(w.codes_to_caller(), vec![100, 500]);
    assert_eq!(w.engine.stats().hunts_exhausted, 1);
    assert_eq!(w.engine.call_count(), 0);
    // 503 then silence: 408, within two attempt expiries (not timer B).
    let mut w = world_routing_to(&["a", "b"], |_| {});
    w.caller_sends(&invite("z9hG4bKh4"));
    w.callee_answers(503, "a1");
    w.advance(DEFAULT_ATTEMPT_EXPIRY);
    assert_eq!(w.codes_to_caller(), vec![100, 408]);
    // An out-of-service code of the agent hunts too, and is the best failure.
    let mut w = world_routing_to(&["a", "b"], |agents| {
        agents[0].health.out_service_codes = vec![480];
    });
    w.caller_sends(&invite("z9hG4bKh5"));
    w.callee_answers(480, "a1");
    let to_b = sent_to(&w, B);
    answer_from(&mut w, B, &to_b[0], 503, "b1");
    assert_eq!(w.codes_to_caller(), vec![100, 480]);
}

#[test]
fn a_cancel_during_the_hunt_stops_it() {
    let mut w = world_routing_to(&["a", "b", "c"], |_| {});
    w.caller_sends(&invite("z9hG4bKh6"));
    w.callee_answers(503, "a1");
    let to_b = sent_to(&w, B);
    answer_from(&mut w, B, &to_b[0], 180, "b1");
    w.caller_sends(
        &invite("z9hG4bKh6")
            .replace("INVITE sip:", "CANCEL sip:")
            .replace("CSeq: 1 INVITE", "CSeq: 1 CANCEL")
            .replace("Content-Type: application/sdp\n", "")
            .replace("Content-Length: 4\n\nv=0\n", "Content-Length: 0\n\n"),
    );
    let to_b = sent_to(&w, B);
    let cancel = to_b
        .iter()
        .find(|m| m.method() == Some(&Method::Cancel))
        .expect("b's attempt cancelled")
        .clone();
    answer_from(&mut w, B, &cancel, 200, "b1");
    answer_from(&mut w, B, &to_b[0], 487, "b1");
    assert!(
        sent_to(&w, C).is_empty(),
        "no further candidate after a CANCEL"
    );
    let codes = w.codes_to_caller();
    assert!(codes.contains(&487), "{codes:?}");
    assert_eq!(w.engine.call_count(), 0);
}

#[test]
fn stop_sag_recurse_codes_end_a_group_hunt() {
    let mut w = world_routing_to(&["SAG:pbx"], |_| {});
    w.caller_sends(&invite("z9hG4bKh7"));
    w.callee_answers(503, "a1");
    let to_b = sent_to(&w, B);
    assert_eq!(to_b.len(), 1, "the group's next agent");
    answer_from(&mut w, B, &to_b[0], 407, "b1");
    assert_eq!(w.codes_to_caller(), vec![100, 407]);
    assert!(sent_to(&w, C).is_empty());
}

#[test]
fn an_out_of_dialog_request_hunts_too() {
    let mut w = world_routing_to(&["a", "b"], |_| {});
    w.caller_sends(&format!(
        "MESSAGE sip:bob@{ACCESS} SIP/2.0\nVia: SIP/2.0/UDP {CALLER};branch=z9hG4bKm1\nMax-Forwards: 70\nFrom: <sip:alice@10.1.1.1>;tag=m1\nTo: <sip:bob@{ACCESS}>\nCall-ID: msg-1@10.1.1.1\nCSeq: 1 MESSAGE\nContent-Length: 0\n\n"
    ));
    w.callee_answers(503, "a1");
    let to_b = sent_to(&w, B);
    assert_eq!(to_b.len(), 1);
    answer_from(&mut w, B, &to_b[0], 202, "b1");
    assert_eq!(w.codes_to_caller(), vec![202]);
}

#[test]
fn domains_are_kept_and_ip_hosts_replaced() {
    // A domain the caller used stays in the Request-URI, From and To; an IP host becomes
    // the agent's hostname (Request-URI) or our address (From, To).
    let mut w = world_routing_to(&["a"], |agents| {
        agents[0].hostname = Some("pbx.example.test".into());
    });
    w.caller_sends(
        &invite("z9hG4bKd1")
            .replace(
                &format!("INVITE sip:bob@{ACCESS}"),
                "INVITE sip:bob@example.test",
            )
            .replace(
                "From: \"Alice\" <sip:alice@10.1.1.1>",
                "From: \"Alice\" <sip:alice@example.test>",
            ),
    );
    let out = w.last_to_callee().clone();
    assert_eq!(out.request_uri(), Some("sip:bob@example.test"));
    let from = out.header(&HeaderName::From).unwrap_or_default();
    assert!(
        from.starts_with("\"Alice\" <sip:alice@example.test>;tag="),
        "{from}"
    );
    let to = out.header(&HeaderName::To).unwrap_or_default();
    assert_eq!(
        to, "<sip:bob@198.51.100.10>",
        "an IP host of ours becomes our core's"
    );
    // An IP host: the agent's hostname; the caller's address is nowhere.
    let mut w = world_routing_to(&["a"], |agents| {
        agents[0].hostname = Some("pbx.example.test".into());
    });
    w.caller_sends(&invite("z9hG4bKd2"));
    let out = w.last_to_callee().clone();
    assert_eq!(out.request_uri(), Some("sip:bob@pbx.example.test"));
    let from = out.header(&HeaderName::From).unwrap_or_default();
    assert!(
        from.starts_with("\"Alice\" <sip:alice@198.51.100.10>;tag="),
        "{from}"
    );
    let raw = String::from_utf8_lossy(w.raw_to_callee.last().expect("sent")).into_owned();
    assert!(
        !raw.contains("10.1.1.1") && !raw.contains("192.0.2.10"),
        "{raw}"
    );
    // No hostname: the agent's address and port; a tel: URI as sip: with user=phone.
    let mut w = world_routing_to(&["a"], |_| {});
    w.caller_sends(
        &invite("z9hG4bKd3").replace(&format!("INVITE sip:bob@{ACCESS}"), "INVITE tel:+15551234"),
    );
    let out = w.last_to_callee().clone();
    assert_eq!(
        out.request_uri(),
        Some(format!("sip:+15551234@{CALLEE};user=phone").as_str())
    );
}

/// Call `n` of a test (its own Call-ID and branch).
fn nth_invite(n: u32) -> String {
    invite(&format!("z9hG4bKn{n}")).replace("call-1@10.1.1.1", &format!("call-n{n}@10.1.1.1"))
}

/// Where each new INVITE went (retransmissions counted once): a (the World's callee), b or c.
fn invites_by_agent(w: &World) -> [usize; 3] {
    let count = |msgs: &[SipMessage]| {
        let mut ids: Vec<&str> = msgs
            .iter()
            .filter(|m| m.method() == Some(&Method::Invite))
            .filter_map(SipMessage::call_id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    };
    [
        count(&w.to_callee),
        count(&sent_to(w, B)),
        count(&sent_to(w, C)),
    ]
}

#[test]
fn a_round_robin_group_spreads_calls_one_each() {
    let mut w = world_with(
        &["SAG:pbx"],
        |_| {},
        |g| {
            g.strategy = GroupStrategy::RoundRobin;
            g.recursion = false;
        },
    );
    for n in 0..9 {
        w.caller_sends(&nth_invite(n));
    }
    assert_eq!(invites_by_agent(&w), [3, 3, 3]);
}

#[test]
fn max_sessions_are_respected_and_freed_when_a_call_ends() {
    let mut w = world_with(
        &["SAG:pbx"],
        |agents| {
            for a in agents.iter_mut() {
                a.health.max_sessions = 1;
            }
        },
        |_| {},
    );
    for n in 0..3 {
        w.caller_sends(&nth_invite(n));
    }
    assert_eq!(
        invites_by_agent(&w),
        [1, 1, 1],
        "one session each, in hunt order"
    );
    // A fourth finds every agent full: 503 from us, no INVITE anywhere.
    w.caller_sends(&nth_invite(3));
    assert_eq!(w.codes_to_caller().last(), Some(&503));
    assert_eq!(w.engine.stats().no_agent_503, 1);
    assert_eq!(invites_by_agent(&w), [1, 1, 1]);
    // a's call fails (486): its session is free again, and the next call goes there.
    let inv = w.to_callee[0].clone();
    w.callee_responds_to(&inv, 486, "a1");
    w.caller_sends(&nth_invite(4));
    assert_eq!(invites_by_agent(&w), [2, 1, 1]);
}

#[test]
fn an_agent_out_of_service_after_trans_timeouts_is_skipped_by_new_calls() {
    let mut w = world_routing_to(&["a", "b"], |agents| {
        agents[0].health.trans_timeouts = 1;
        agents[0].health.time_to_resume = Some(Duration::from_secs(60));
    });
    w.caller_sends(&nth_invite(0));
    w.advance(DEFAULT_ATTEMPT_EXPIRY);
    assert_eq!(invites_by_agent(&w), [1, 1, 0], "a silent, b tried");
    // a is out of service: the next call goes straight to b.
    w.caller_sends(&nth_invite(1));
    assert_eq!(invites_by_agent(&w), [1, 2, 0]);
    assert_eq!(w.engine.stats().agent_refused, 1);
}

/// The shell's part of pinging: every agent due at the World's time is pinged by the engine.
fn pump_pings(w: &mut World) {
    let router = Arc::clone(&w.engine.cfg.router);
    for agent in router.board().take_due_pings(w.now) {
        w.engine.send_ping(w.now, agent);
    }
    w.collect();
}

/// Moves the clock by `step` `steps` times, pumping pings at each.
fn advance_pinging(w: &mut World, step: Duration, steps: u32) {
    for _ in 0..steps {
        w.advance(step);
        pump_pings(w);
    }
}

/// The pings among `msgs`, each once (not its retransmissions).
fn options_to(msgs: &[SipMessage]) -> Vec<SipMessage> {
    let mut seen = Vec::new();
    msgs.iter()
        .filter(|m| m.method() == Some(&Method::Options))
        .filter(|m| {
            let id = m.call_id().unwrap_or_default().to_owned();
            let new = !seen.contains(&id);
            seen.push(id);
            new
        })
        .cloned()
        .collect()
}

#[test]
fn pings_take_a_silent_agent_out_after_the_misses_and_an_answer_brings_it_back() {
    use crate::routing::agent::AgentState;
    let mut w = world_routing_to(&["a", "b"], |agents| {
        agents[0].health.ping_interval = Some(Duration::from_secs(5));
        agents[0].health.ping_timeout = Duration::from_secs(1);
        agents[0].health.ping_misses = 2;
        agents[0].hostname = Some("pbx.example.test".into());
    });
    // A standby never pings.
    advance_pinging(&mut w, Duration::from_millis(500), 24);
    assert!(options_to(&w.to_callee).is_empty());
    w.engine.cfg.router.board().set_pinging(true);
    // Due since 5 s: pinged at once; the second ping 5 s later; both unanswered.
    pump_pings(&mut w);
    let first = options_to(&w.to_callee);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].request_uri(), Some("sip:pbx.example.test"));
    advance_pinging(&mut w, Duration::from_millis(500), 12);
    let states = w.engine.cfg.router.board().states();
    assert!(!states[0].is_in_service(), "{states:?}");
    assert_eq!(states[1], AgentState::InService, "b is not pinged");
    // New calls skip a.
    w.caller_sends(&nth_invite(0));
    assert_eq!(invites_by_agent(&w), [0, 1, 0]);
    // The next ping (backed off) is answered: a is back.
    let before = options_to(&w.to_callee).len();
    let mut waited = 0;
    while options_to(&w.to_callee).len() == before && waited < 60 {
        advance_pinging(&mut w, Duration::from_millis(500), 1);
        waited += 1;
    }
    let pings = options_to(&w.to_callee);
    assert!(pings.len() > before, "pinged while out of service");
    let last = pings.last().expect("a ping").clone();
    w.callee_responds_to(&last, 200, "p1");
    assert_eq!(
        w.engine.cfg.router.board().states()[0],
        AgentState::InService
    );
    w.caller_sends(&nth_invite(1));
    assert_eq!(invites_by_agent(&w), [1, 1, 0]);
    assert!(w.engine.stats().pings_sent >= 3);
}

#[test]
fn realm_translations_apply_unless_the_agent_has_its_own() {
    use crate::routing::router::RealmTranslations;
    use crate::routing::translation::{SessionTranslation, StringIndex, TranslationRule};
    let add = |s: &str| {
        Arc::new(SessionTranslation {
            calling: Vec::new(),
            called: vec![TranslationRule::add(s, StringIndex::At(0))],
        })
    };
    let realms = vec![
        // access: in-translationid adds 1 (before routing).
        RealmTranslations {
            inbound: Some(add("1")),
            outbound: None,
        },
        // core: out-translationid adds 7 (after routing), unless the agent has its own.
        RealmTranslations {
            inbound: None,
            outbound: Some(add("7")),
        },
    ];
    let mut w = world_with_realms(
        &["a", "b"],
        |agents| agents[1].out_translation = Some(add("00")),
        realms,
    );
    w.caller_sends(&nth_invite(0).replace(
        &format!("sip:bob@{ACCESS}"),
        &format!("sip:5551234@{ACCESS}"),
    ));
    // a has none of its own: the realm's, after the access realm's inbound one.
    assert_eq!(
        w.last_to_callee().request_uri(),
        Some(format!("sip:715551234@{CALLEE}").as_str())
    );
    // b has its own: it wins over the realm's.
    w.callee_answers(503, "a1");
    assert_eq!(
        sent_to(&w, B)[0].request_uri(),
        Some(format!("sip:0015551234@{B}").as_str())
    );
}

#[test]
fn translations_are_applied_per_agent_and_the_caller_keeps_its_own_numbers() {
    use crate::routing::translation::{SessionTranslation, StringIndex, TranslationRule};
    let strip_9 = Arc::new(SessionTranslation {
        calling: vec![TranslationRule::add("+1", StringIndex::At(0))],
        called: vec![TranslationRule::delete("9", StringIndex::At(0))],
    });
    let mut w = world_routing_to(&["a", "b"], |agents| {
        agents[0].out_translation = Some(Arc::clone(&strip_9));
        agents[1].out_translation = Some(Arc::new(SessionTranslation {
            calling: Vec::new(),
            called: vec![TranslationRule::add("00", StringIndex::At(0))],
        }));
    });
    w.caller_sends(
        &nth_invite(0)
            .replace(
                &format!("sip:bob@{ACCESS}"),
                &format!("sip:95551234@{ACCESS}"),
            )
            .replace("sip:alice@10.1.1.1", "sip:5550001@10.1.1.1"),
    );
    let out = w.last_to_callee().clone();
    assert_eq!(
        out.request_uri(),
        Some(format!("sip:5551234@{CALLEE}").as_str())
    );
    assert!(out
        .header(&HeaderName::To)
        .unwrap_or_default()
        .starts_with("<sip:5551234@"));
    assert!(out
        .header(&HeaderName::From)
        .unwrap_or_default()
        .starts_with("\"Alice\" <sip:+15550001@"));
    // The caller's own numbers in what comes back to it.
    assert!(w.to_caller[0]
        .header(&HeaderName::To)
        .unwrap_or_default()
        .contains("sip:95551234@"));
    // The next candidate gets its own agent's translation of the original numbers.
    w.callee_answers(503, "a1");
    let to_b = sent_to(&w, B);
    assert_eq!(
        to_b[0].request_uri(),
        Some(format!("sip:0095551234@{B}").as_str())
    );
    assert_eq!(w.engine.stats().translated, 2);
}
