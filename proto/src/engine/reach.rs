//! How a new active reaches the peers of the TCP calls it takes over.
//!
//! A TCP connection belongs to the process that holds it: when the active dies, every
//! connection of its calls dies with it, and the new active has to open new ones (RFC 5626's
//! "the flow is gone, open another"; the TCP runtime dials a request's destination when no
//! connection to it is open). Where to dial depends on the leg:
//!
//! - **Callee leg** (we connected to a session-agent or next hop): its `peer` is the address we
//!   dialled, which is still the right one. Unchanged (the replica rules also require it to be
//!   a session-agent's address).
//! - **Caller leg** (the caller connected to us): its `peer` is the caller's ephemeral source
//!   port of a connection that no longer exists; nothing listens there. The leg's next hop is
//!   what RFC 3261 §12.2.1.1 sends in-dialog requests to: the first Route of its route set, else
//!   its remote target (the Contact). When that URI's host is an IP literal **on the IP the
//!   caller connected from**, the leg's `peer` becomes that URI's address (port 5060 for `sip:`,
//!   5061 for `sips:` by default), so a BYE from the callee goes out on a new connection to the
//!   caller's listening port.
//!
//! The same-IP rule keeps every check that depends on `peer` unchanged: in-dialog requests and
//! responses over TCP are taken from the peer's IP at any port (`SourcePolicy`), so the caller's
//! own requests on its new connection still match, and a replica cannot make the new active
//! dial an address the caller did not connect from. A Contact that names a host name or
//! another IP (a caller behind NAT, whose Contact is private) leaves `peer` as it was: the
//! caller can still send its own in-dialog requests, but a request toward it finds no
//! connection to reuse and fails, as it would without a takeover once the caller's
//! connection closed.
//!
//! UDP legs are left alone: their `peer` is the address datagrams go to, connection or not.
//!
//! The rewrite happens once, when the replica is installed ([`after_takeover`]); the dialog
//! then replicates onward with the dialable address.

use std::net::{IpAddr, SocketAddr};

use crate::sip::dialog::{Dialog, Leg};
use crate::sip::message::name_addr_uri;

/// The replicated `dialog` as the new active serves it: its TCP caller leg's `peer` moved to
/// an address a new connection can reach (see the module docs).
#[must_use]
pub(super) fn after_takeover(mut dialog: Dialog) -> Dialog {
    if let Some(addr) = redial_address(&dialog.caller) {
        dialog.caller.peer = addr;
    }
    dialog
}

/// Where a new connection to a TCP caller leg's peer goes once its own connection is gone: the
/// address of the leg's next hop URI (first Route, else remote target) if it is an IP literal
/// on the IP of the leg's `peer`; `None` for UDP legs and for any other URI.
#[must_use]
pub(crate) fn redial_address(leg: &Leg) -> Option<SocketAddr> {
    if !leg.transport.reliable() {
        return None;
    }
    let next = leg
        .route_set
        .first()
        .map_or(leg.remote_target.as_str(), String::as_str);
    uri_addr(next).filter(|a| a.ip() == leg.peer.ip() && a.port() != 0)
}

/// The address of a SIP URI (or a name-addr holding one) whose host is an IP literal: `sip:`
/// defaults to port 5060, `sips:` and `sip:…;transport=tls` to 5061; `None` for a host name, another scheme or a URI that
/// does not parse.
#[must_use]
pub fn uri_addr(uri: &str) -> Option<SocketAddr> {
    // A bare URI is taken whole: its user part may hold `;` (`sip:+1555;npdi@host`).
    let uri = if uri.contains('<') {
        name_addr_uri(uri)
    } else {
        uri.trim()
    };
    let (scheme, rest) = uri.split_once(':')?;
    let tls_param = rest
        .split(['?', '>'])
        .next()
        .unwrap_or(rest)
        .split(';')
        .skip(1)
        .any(|p| p.trim().eq_ignore_ascii_case("transport=tls"));
    let default_port = if scheme.eq_ignore_ascii_case("sip") && !tls_param {
        5060
    } else if scheme.eq_ignore_ascii_case("sips") || scheme.eq_ignore_ascii_case("sip") {
        5061
    } else {
        return None;
    };
    // The user part cannot hold an unescaped '@' (RFC 3261 §25.1): the host starts after the
    // first one, and ends at the parameters or headers.
    let host_port = rest.split_once('@').map_or(rest, |(_, h)| h);
    let host_port = host_port
        .split([';', '?', '>'])
        .next()
        .unwrap_or(host_port)
        .trim();
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match host_port.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        }
    };
    let ip: IpAddr = host.parse().ok()?;
    if host_port.starts_with('[') != ip.is_ipv6() {
        return None;
    }
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default_port,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sip::dialog::LegTransport;

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn a_uri_gives_its_address_only_for_an_ip_literal() {
        let cases: [(&str, Option<&str>); 16] = [
            ("sip:alice@10.1.1.1:5070", Some("10.1.1.1:5070")),
            ("sip:alice@10.1.1.1", Some("10.1.1.1:5060")),
            ("sips:alice@10.1.1.1", Some("10.1.1.1:5061")),
            ("sip:alice@10.1.1.1;transport=tls", Some("10.1.1.1:5061")),
            ("<sip:alice@10.1.1.1;transport=TLS>", Some("10.1.1.1:5061")),
            ("SIP:10.1.1.1:5080;transport=tcp", Some("10.1.1.1:5080")),
            ("<sip:10.0.0.9;lr>", Some("10.0.0.9:5060")),
            (
                "\"A\" <sip:a@10.1.1.1:5071;transport=tcp>;expires=60",
                Some("10.1.1.1:5071"),
            ),
            (
                "sip:a;npdi=yes@10.1.1.1:5072?subject=x@y",
                Some("10.1.1.1:5072"),
            ),
            ("sip:alice@[2001:db8::1]:5090", Some("[2001:db8::1]:5090")),
            ("sip:alice@[2001:db8::1]", Some("[2001:db8::1]:5060")),
            ("sip:alice@pbx.example.com:5060", None),
            ("sip:alice@2001:db8::1", None),
            ("sip:alice@10.1.1.1:99999", None),
            ("tel:+15551234", None),
            ("", None),
        ];
        for (uri, want) in cases {
            assert_eq!(uri_addr(uri), want.map(sa), "{uri}");
        }
    }

    fn caller_leg(transport: LegTransport, peer: &str, target: &str) -> Leg {
        Leg {
            interface: 0,
            transport,
            peer: sa(peer),
            call_id: "c@x".into(),
            local_tag: "t1".into(),
            remote_tag: Some("a1".into()),
            local_party: "<sip:bob@x>".into(),
            remote_party: "<sip:alice@y>".into(),
            remote_target: target.into(),
            route_set: Vec::new(),
            local_cseq: 0,
            last_invite_cseq: 0,
        }
    }

    #[test]
    fn a_tcp_caller_is_redialled_at_its_contact_on_the_ip_it_came_from() {
        let leg = caller_leg(
            LegTransport::Tcp,
            "10.1.1.1:40001",
            "sip:alice@10.1.1.1:5070",
        );
        assert_eq!(redial_address(&leg), Some(sa("10.1.1.1:5070")));
        // No port in the Contact: 5060.
        let leg = caller_leg(LegTransport::Tcp, "10.1.1.1:40001", "sip:alice@10.1.1.1");
        assert_eq!(redial_address(&leg), Some(sa("10.1.1.1:5060")));
    }

    #[test]
    fn a_first_route_comes_before_the_contact() {
        // A proxy on the caller's side record-routed: it connected to us and is the next hop.
        let mut leg = caller_leg(
            LegTransport::Tcp,
            "10.9.9.9:40001",
            "sip:alice@10.1.1.1:5070",
        );
        leg.route_set = vec!["<sip:10.9.9.9:5065;lr>".into(), "<sip:10.8.8.8;lr>".into()];
        assert_eq!(redial_address(&leg), Some(sa("10.9.9.9:5065")));
    }

    #[test]
    fn nothing_to_redial_for_udp_a_host_name_or_another_ip() {
        let udp = caller_leg(
            LegTransport::Udp,
            "10.1.1.1:5060",
            "sip:alice@10.1.1.1:5070",
        );
        assert_eq!(redial_address(&udp), None);
        let name = caller_leg(
            LegTransport::Tcp,
            "10.1.1.1:40001",
            "sip:alice@phone.example",
        );
        assert_eq!(redial_address(&name), None);
        // Behind NAT: the Contact is private, the connection came from the NAT's address.
        let nat = caller_leg(
            LegTransport::Tcp,
            "203.0.113.7:40001",
            "sip:alice@192.168.1.20",
        );
        assert_eq!(redial_address(&nat), None);
    }
}

/// A TCP call taken over by another engine, on a virtual clock: what goes where after the
/// former active's connections are gone.
#[cfg(test)]
mod takeover {
    use std::net::SocketAddr;
    use std::time::{Duration, Instant};

    use bytes::Bytes;

    use crate::engine::{
        DialogChange, Engine, EngineConfig, EngineSeed, Inbound, Interface, NextHop, SourcePolicy,
        Transmit, WallClock,
    };
    use crate::routing::router::Router;
    use crate::sip::dialog::{Dialog, LegTransport};
    use crate::sip::message::{HeaderName, Method, SipMessage};
    use crate::sip::transaction::Timers;
    use std::sync::Arc;

    /// The caller's first connection (ephemeral source port) ...
    const CALLER_OLD: &str = "10.1.1.1:40001";
    /// ... the one it opens to the new active ...
    const CALLER_NEW: &str = "10.1.1.1:40777";
    /// ... and its listening port, in its Contact.
    const CALLER_CONTACT: &str = "10.1.1.1:5070";
    const ACCESS: &str = "192.0.2.10:5060";
    const CORE: &str = "198.51.100.10:5062";
    const CALLEE: &str = "198.51.100.20:5080";

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("test address")
    }

    fn engine(rng: u8) -> Engine {
        let cfg = EngineConfig {
            interfaces: vec![
                Interface {
                    realm: "access".into(),
                    addr: sa(ACCESS),
                    tls_addr: None,
                },
                Interface {
                    realm: "core".into(),
                    addr: sa(CORE),
                    tls_addr: None,
                },
            ],
            router: Arc::new(Router::from_realm(
                "access",
                NextHop {
                    name: "core".into(),
                    addr: sa(CALLEE),
                    transport: LegTransport::Tcp,
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
            agents: vec![sa(CALLEE)],
            max_calls: 100,
            max_transactions: 200,
            media: None,
            trace: false,
            replicate_dialogs: true,
            trace_switch: None,
            registration: crate::engine::Registrations::default(),
            session_policies: Vec::new(),
            subscription_sources: crate::engine::SubscriptionSources::default(),
            accounting: None,
        };
        let now = Instant::now();
        Engine::new(
            cfg,
            EngineSeed {
                shard: 0,
                rng: [rng; 32],
                wall_clock: WallClock {
                    at: now,
                    unix: Duration::from_secs(1_796_083_200),
                },
            },
        )
    }

    /// One engine and what it sent, on a virtual clock.
    struct Node {
        engine: Engine,
        now: Instant,
        sent: Vec<(Transmit, SipMessage)>,
    }

    impl Node {
        fn new(rng: u8) -> Self {
            Self {
                engine: engine(rng),
                now: Instant::now(),
                sent: Vec::new(),
            }
        }

        fn receive(&mut self, interface: usize, source: &str, text: &str) {
            self.engine.handle_inbound(
                self.now,
                Inbound {
                    interface,
                    transport: LegTransport::Tcp,
                    source: sa(source),
                    data: Bytes::from(text.replace('\n', "\r\n")),
                },
            );
            while let Some(t) = self.engine.poll_transmit() {
                let msg = SipMessage::parse(&t.payload).expect("engine output parses");
                assert_eq!(t.transport, LegTransport::Tcp, "a TCP call stays on TCP");
                self.sent.push((t, msg));
            }
        }

        /// The last message sent to `dest` on `interface`.
        fn last_to(&self, interface: usize, dest: &str) -> Option<&SipMessage> {
            self.sent
                .iter()
                .rev()
                .find(|(t, _)| t.interface == interface && t.dest == sa(dest))
                .map(|(_, m)| m)
        }

        /// Answers `req` from `source` with `code` (its Via, From, To, Call-ID, CSeq).
        fn answer(&mut self, interface: usize, source: &str, req: &SipMessage, code: u16) {
            let to = req.header(&HeaderName::To).unwrap_or_default();
            let to = if req.to_tag().is_none() {
                format!("{to};tag=b1")
            } else {
                to.to_owned()
            };
            let text = format!(
                "SIP/2.0 {code} OK\nVia: {}\nFrom: {}\nTo: {to}\nCall-ID: {}\nCSeq: {}\nContact: <sip:bob@{CALLEE};transport=tcp>\nContent-Length: 0\n\n",
                req.top_via().unwrap_or_default(),
                req.header(&HeaderName::From).unwrap_or_default(),
                req.call_id().unwrap_or_default(),
                req.header(&HeaderName::CSeq).unwrap_or_default(),
            );
            self.receive(interface, source, &text);
        }
    }

    fn caller_request(method: &str, cseq: u32, branch: &str, to_tag: Option<&str>) -> String {
        let to_tag = to_tag.map(|t| format!(";tag={t}")).unwrap_or_default();
        format!(
            "{method} sip:bob@{ACCESS};transport=tcp SIP/2.0\n\
             Via: SIP/2.0/TCP {CALLER_CONTACT};branch={branch}\n\
             Max-Forwards: 70\n\
             From: <sip:alice@10.1.1.1>;tag=a1\n\
             To: <sip:bob@{ACCESS}>{to_tag}\n\
             Call-ID: tcp-call@10.1.1.1\n\
             CSeq: {cseq} {method}\n\
             Contact: <sip:alice@{CALLER_CONTACT};transport=tcp>\n\
             Content-Length: 0\n\n"
        )
    }

    /// A TCP call established on `active` from the caller's first connection; returns the
    /// caller-side To tag and the replicated dialog.
    fn established(active: &mut Node) -> (String, Dialog) {
        active.receive(
            0,
            CALLER_OLD,
            &caller_request("INVITE", 1, "z9hG4bKinv", None),
        );
        let invite = active.last_to(1, CALLEE).expect("INVITE relayed").clone();
        active.answer(1, CALLEE, &invite, 200);
        let ok = active.last_to(0, CALLER_OLD).expect("200 relayed").clone();
        assert_eq!(ok.status(), Some(200));
        let tag = ok.to_tag().expect("our tag").to_owned();
        active.receive(
            0,
            CALLER_OLD,
            &caller_request("ACK", 1, "z9hG4bKack", Some(&tag)),
        );
        let mut dialog = None;
        while let Some(c) = active.engine.poll_dialog_change() {
            if let DialogChange::Upsert(d) = c {
                dialog = Some(*d);
            }
        }
        (tag, dialog.expect("the confirmed dialog is replicated"))
    }

    #[test]
    fn the_new_active_relays_the_callers_bye_from_a_new_connection() {
        let mut active = Node::new(1);
        let (tag, dialog) = established(&mut active);
        assert_eq!(dialog.caller.peer, sa(CALLER_OLD));
        let mut standby = Node::new(2);
        standby.engine.install_dialog(standby.now, dialog);
        let installed = standby.engine.dialogs().next().expect("installed").clone();
        assert_eq!(
            installed.caller.peer,
            sa(CALLER_CONTACT),
            "redialled at its Contact"
        );
        assert_eq!(installed.callee.peer, sa(CALLEE), "the session-agent stays");

        // The caller reconnects (another source port) and hangs up.
        standby.receive(
            0,
            CALLER_NEW,
            &caller_request("BYE", 2, "z9hG4bKbye", Some(&tag)),
        );
        assert_eq!(standby.engine.stats().leg_mismatch, 0);
        let bye = standby.last_to(1, CALLEE).expect("BYE relayed").clone();
        assert_eq!(bye.method(), Some(&Method::Bye));
        // The callee answers on the connection the new active opened to it.
        standby.answer(1, CALLEE, &bye, 200);
        assert_eq!(standby.engine.stats().response_source_mismatch, 0);
        let ok = standby
            .last_to(0, CALLER_NEW)
            .expect("200 on the caller's new connection");
        assert_eq!(ok.status(), Some(200));
        assert_eq!(standby.engine.call_count(), 0);
    }

    #[test]
    fn the_new_active_sends_the_callees_bye_to_the_callers_contact() {
        let mut active = Node::new(1);
        let (_tag, dialog) = established(&mut active);
        let mut standby = Node::new(2);
        standby.engine.install_dialog(standby.now, dialog);

        // The callee opened a new connection of its own (another port on its IP).
        let callee_new = "198.51.100.20:41000";
        let (callee_tag, b_call_id) = {
            let invite = active.last_to(1, CALLEE).expect("the INVITE");
            (
                invite.from_tag().expect("our tag").to_owned(),
                invite.call_id().expect("Call-ID").to_owned(),
            )
        };
        let bye = format!(
            "BYE sip:sbc@{CORE};transport=tcp SIP/2.0\n\
             Via: SIP/2.0/TCP {CALLEE};branch=z9hG4bKcalleebye\n\
             Max-Forwards: 70\n\
             From: <sip:bob@198.51.100.20>;tag=b1\n\
             To: <sip:alice@198.51.100.10>;tag={callee_tag}\n\
             Call-ID: {b_call_id}\n\
             CSeq: 7 BYE\n\
             Content-Length: 0\n\n"
        );
        standby.receive(1, callee_new, &bye);
        assert_eq!(standby.engine.stats().leg_mismatch, 0);
        let to_caller = standby
            .last_to(0, CALLER_CONTACT)
            .expect("the BYE goes to the caller's Contact, not its dead source port")
            .clone();
        assert_eq!(to_caller.method(), Some(&Method::Bye));
        assert!(standby.last_to(0, CALLER_OLD).is_none());
        // The caller answers on whatever connection it has (here its own new one).
        standby.answer(0, CALLER_NEW, &to_caller, 200);
        assert_eq!(standby.engine.stats().response_source_mismatch, 0);
        let ok = standby
            .last_to(1, callee_new)
            .expect("200 back on the callee's connection");
        assert_eq!(ok.status(), Some(200));
        assert_eq!(standby.engine.call_count(), 0);
    }

    #[test]
    fn a_stranger_is_still_refused_after_the_takeover() {
        let mut active = Node::new(1);
        let (tag, dialog) = established(&mut active);
        let mut standby = Node::new(2);
        standby.engine.install_dialog(standby.now, dialog);
        standby.receive(
            0,
            "10.6.6.6:40001",
            &caller_request("BYE", 2, "z9hG4bKevil", Some(&tag)),
        );
        assert_eq!(standby.engine.stats().leg_mismatch, 1);
        assert!(standby.last_to(1, CALLEE).is_none(), "nothing relayed");
        assert_eq!(standby.engine.call_count(), 1);
    }
}
