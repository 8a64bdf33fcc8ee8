//! IPv4 ↔ IPv6 interworking (issue 26) on a virtual clock: a caller of one family, a callee of
//! the other, and every leg's headers and SDP naming only its own family, in URIs that read
//! back under the strict rules.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::super::*;
use crate::media::{MediaSettings, MediaTable};
use crate::routing::router::Router;
use crate::sip::dialog::LegTransport;
use crate::sip::message::{name_addr_uri, reason_for, HeaderName, Method, SipMessage};
use crate::sip::strict;
use crate::sip::transaction::Timers;

/// The two sides of a call: the caller's and the access interface's addresses, the callee's
/// and the core interface's.
struct Sides {
    caller: SocketAddr,
    access: SocketAddr,
    core: SocketAddr,
    callee: SocketAddr,
}

const V4_TO_V6: &str = "10.1.1.1:5060 192.0.2.10:5060 [2001:db8::10]:5062 [2001:db8::20]:5080";
const V6_TO_V4: &str =
    "[2001:db8:1::1]:5060 [2001:db8:1::10]:5060 198.51.100.10:5062 198.51.100.20:5080";

fn sides(text: &str) -> Sides {
    let a: Vec<SocketAddr> = text
        .split(' ')
        .map(|s| s.parse().expect("test address"))
        .collect();
    Sides {
        caller: a[0],
        access: a[1],
        core: a[2],
        callee: a[3],
    }
}

fn engine(s: &Sides, table: &Arc<Mutex<MediaTable>>) -> Engine {
    let cfg = EngineConfig {
        interfaces: vec![
            Interface {
                realm: "access".into(),
                addr: s.access,
                tls_addr: None,
            },
            Interface {
                realm: "core".into(),
                addr: s.core,
                tls_addr: None,
            },
        ],
        router: Arc::new(Router::from_realm(
            "access",
            NextHop {
                name: "core".into(),
                addr: s.callee,
                transport: LegTransport::Udp,
                interface: 1,
                max_udp_length: 0,
            },
            Instant::now(),
        )),
        timers: Timers::default(),
        timer_c: Duration::from_secs(180),
        max_message_size: 65_535,
        max_header_size: 8192,
        source_policy: SourcePolicy::Address,
        agents: vec![s.callee],
        max_calls: 100,
        max_transactions: 200,
        media: Some(MediaAnchoring {
            table: table.clone(),
            realms: vec![Some((0, s.access.ip())), Some((1, s.core.ip()))],
        }),
        trace: false,
        replicate_dialogs: true,
        trace_switch: None,
        registration: Registrations::default(),
        session_policies: Vec::new(),
        subscription_sources: SubscriptionSources::default(),
        accounting: None,
    };
    Engine::new(
        cfg,
        EngineSeed {
            shard: 0,
            rng: [9; 32],
            wall_clock: WallClock {
                at: Instant::now(),
                unix: Duration::from_secs(1_796_083_200),
            },
        },
    )
}

fn table() -> Arc<Mutex<MediaTable>> {
    Arc::new(Mutex::new(MediaTable::new(MediaSettings {
        pools: vec![20_000..=20_009, 30_000..=30_009],
        latch_window: Duration::from_secs(5),
        latch_signalled_ip_only: false,
        inactivity: None,
    })))
}

fn host(a: SocketAddr) -> String {
    crate::sip::message::uri_host(a.ip())
}

fn sdp(addr: SocketAddr, port: u16) -> String {
    let family = if addr.is_ipv4() { "IP4" } else { "IP6" };
    let ip = addr.ip();
    format!(
        "v=0\r\no=u 1 1 IN {family} {ip}\r\ns=-\r\nc=IN {family} {ip}\r\nt=0 0\r\n\
         m=audio {port} RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
    )
}

fn send(e: &mut Engine, now: Instant, interface: usize, source: SocketAddr, text: &str) {
    e.handle_inbound(
        now,
        Inbound {
            interface,
            transport: LegTransport::Udp,
            source,
            data: Bytes::from(text.to_owned()),
        },
    );
}

/// Everything the engine sent, by destination, parsed.
fn drain(e: &mut Engine, to: SocketAddr) -> Vec<SipMessage> {
    let mut out = Vec::new();
    while let Some(t) = e.poll_transmit() {
        assert_eq!(t.dest, to, "sent to {} instead", t.dest);
        out.push(SipMessage::parse(&t.payload).expect("engine output parses"));
    }
    out
}

/// Asserts that `msg`, sent on a leg of `family_v4`'s family, names no address of the other
/// family anywhere (start line, headers, body), and that its URIs read back strictly.
#[track_caller]
fn names_only_its_family(msg: &SipMessage, v4: bool) {
    let mut text = String::new();
    if let Some(uri) = msg.request_uri() {
        assert_eq!(strict::check_request_uri(uri), Ok(()), "{uri}");
        text.push_str(uri);
    }
    for h in &msg.headers {
        if matches!(
            h.name,
            HeaderName::From | HeaderName::To | HeaderName::Contact
        ) {
            let uri = name_addr_uri(&h.value);
            assert_eq!(
                strict::check_request_uri(uri),
                Ok(()),
                "{}: {uri}",
                h.name.as_str()
            );
        }
        if h.name == HeaderName::Via {
            assert_eq!(strict::check_via_sent_by(&h.value), Ok(()), "{}", h.value);
        }
        text.push_str(&h.value);
        text.push('\n');
    }
    text.push_str(&String::from_utf8_lossy(&msg.body));
    if v4 {
        assert!(
            !text.contains("IP6") && !text.contains("2001:db8"),
            "an IPv6 address on an IPv4 leg:\n{text}"
        );
    } else {
        assert!(
            !text.contains("IP4")
                && !text.contains("192.0.2.")
                && !text.contains("198.51.100.")
                && !text.contains("10.1.1.1"),
            "an IPv4 address on an IPv6 leg:\n{text}"
        );
    }
}

fn call_across(s: &Sides) {
    let table = table();
    let mut e = engine(s, &table);
    let now = Instant::now();
    let offer = sdp(s.caller, 4000);
    let invite = format!(
        "INVITE sip:bob@{access} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {caller};branch=z9hG4bKx1\r\n\
         Max-Forwards: 70\r\n\
         From: \"Alice\" <sip:alice@{caller_host}>;tag=a1\r\n\
         To: <sip:bob@{access}>\r\n\
         Call-ID: fam-1\r\n\
         CSeq: 1 INVITE\r\n\
         Contact: <sip:alice@{caller}>\r\n\
         Content-Type: application/sdp\r\n\
         Content-Length: {len}\r\n\r\n{offer}",
        access = s.access,
        caller = s.caller,
        caller_host = host(s.caller),
        len = offer.len(),
    );
    send(&mut e, now, 0, s.caller, &invite);
    let mut out = Vec::new();
    while let Some(t) = e.poll_transmit() {
        out.push(t);
    }
    let to_callee: Vec<SipMessage> = out
        .iter()
        .filter(|t| t.dest == s.callee)
        .map(|t| SipMessage::parse(&t.payload).expect("parses"))
        .collect();
    let inv = to_callee
        .iter()
        .find(|m| m.method() == Some(&Method::Invite))
        .expect("INVITE relayed to the callee");
    names_only_its_family(inv, s.callee.is_ipv4());
    assert!(
        inv.top_via()
            .is_some_and(|v| v.contains(&s.core.to_string())),
        "the core interface's address in Via: {inv:?}"
    );

    // The callee answers with its own SDP; the 200 reaches the caller in the caller's family.
    let answer = sdp(s.callee, 6000);
    let ok = format!(
        "SIP/2.0 200 {}\r\nVia: {}\r\nFrom: {}\r\nTo: {};tag=b1\r\nCall-ID: {}\r\n\
         CSeq: 1 INVITE\r\nContact: <sip:bob@{}>\r\nContent-Type: application/sdp\r\n\
         Content-Length: {}\r\n\r\n{answer}",
        reason_for(200),
        inv.top_via().unwrap_or_default(),
        inv.header(&HeaderName::From).unwrap_or_default(),
        inv.header(&HeaderName::To).unwrap_or_default(),
        inv.call_id().unwrap_or_default(),
        s.callee,
        answer.len(),
    );
    send(&mut e, now, 1, s.callee, &ok);
    let to_caller = drain(&mut e, s.caller);
    let ok = to_caller
        .iter()
        .find(|m| m.status() == Some(200))
        .expect("200 relayed to the caller");
    names_only_its_family(ok, s.caller.is_ipv4());
    let body = String::from_utf8_lossy(&ok.body);
    assert!(
        body.contains(&format!(
            "c=IN {} {}",
            if s.access.is_ipv4() { "IP4" } else { "IP6" },
            s.access.ip()
        )),
        "the caller is told the access pool's address:\n{body}"
    );
}

#[test]
fn an_ipv4_caller_reaches_an_ipv6_core_and_each_leg_names_only_its_family() {
    call_across(&sides(V4_TO_V6));
}

#[test]
fn an_ipv6_caller_reaches_an_ipv4_core_and_each_leg_names_only_its_family() {
    call_across(&sides(V6_TO_V4));
}

/// RFC 3261 section 18.1.1: with the agent's `max-udp-length` at 1300, an INVITE that the
/// B2BUA builds larger goes over TCP (Via `SIP/2.0/TCP`, the dialog's callee leg on TCP); a
/// small one stays on UDP.
#[test]
fn a_request_past_max_udp_length_goes_over_tcp() {
    let s = sides(V4_TO_V6);
    for (padding, expected) in [(0, LegTransport::Udp), (1400, LegTransport::Tcp)] {
        let table = table();
        let mut e = engine(&s, &table);
        let hop = e.cfg.router.agents()[0].hop.clone();
        e.cfg.router = Arc::new(Router::from_realm(
            "access",
            NextHop {
                max_udp_length: 1300,
                ..hop
            },
            Instant::now(),
        ));
        let invite = format!(
            "INVITE sip:bob@{access} SIP/2.0\r\nVia: SIP/2.0/UDP {caller};branch=z9hG4bKbig\r\n\
             Max-Forwards: 70\r\nFrom: <sip:alice@{caller_host}>;tag=a1\r\n\
             To: <sip:bob@{access}>\r\nCall-ID: big-{padding}\r\nCSeq: 1 INVITE\r\n\
             Contact: <sip:alice@{caller}>\r\nX-Padding: {pad}\r\nContent-Length: 0\r\n\r\n",
            access = s.access,
            caller = s.caller,
            caller_host = host(s.caller),
            pad = "x".repeat(padding.max(1)),
        );
        send(&mut e, Instant::now(), 0, s.caller, &invite);
        let mut sent = Vec::new();
        while let Some(t) = e.poll_transmit() {
            if t.dest == s.callee {
                sent.push(t);
            }
        }
        let t = sent.first().expect("INVITE relayed");
        assert_eq!(t.transport, expected, "padding {padding}");
        let msg = SipMessage::parse(&t.payload).expect("parses");
        let token = if expected == LegTransport::Tcp {
            "TCP"
        } else {
            "UDP"
        };
        assert!(
            msg.top_via()
                .is_some_and(|v| v.starts_with(&format!("SIP/2.0/{token} "))),
            "{:?}",
            msg.top_via()
        );
        assert_eq!(
            e.stats().udp_to_tcp,
            u64::from(expected == LegTransport::Tcp)
        );
    }
}
