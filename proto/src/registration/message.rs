//! What the registration cache reads from and writes into SIP messages: a phone's REGISTER as
//! a [`RegisterRequest`], whether the phone is behind a NAT, our Contacts toward the registrar
//! (`sip:r-<token>@<our address>`) and the tokens a registrar's 2xx grants.

use std::net::SocketAddr;

use super::cache::{ContactRequest, OurContact, RegisterRequest};
use crate::sip::dialog::LegTransport;
use crate::sip::message::{name_addr_uri, param, uri_host, HeaderName, SipMessage};
use crate::sip::uri::UriParts;

/// The user-part prefix of our Contacts toward the registrar.
const TOKEN_PREFIX: &str = "r-";

/// Which phones are taken as behind a NAT (`sip-interface nat-traversal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NatTraversal {
    /// None: Via and Contact are trusted as written.
    #[default]
    Off,
    /// A phone whose top Via has `rport` and whose Via or Contact does not name its source.
    Rport,
    /// Any phone whose Via or Contact does not name its source.
    Always,
}

/// The address of record of a REGISTER: its To URI without parameters or headers, scheme
/// and host in lowercase (the user part is case-sensitive, RFC 3261 section 19.1.4).
#[must_use]
pub fn address_of_record(msg: &SipMessage) -> Option<String> {
    let uri = name_addr_uri(msg.header(&HeaderName::To)?);
    let parts = UriParts::parse(uri)?;
    let host = parts.host?.to_ascii_lowercase();
    let scheme = parts.scheme.to_ascii_lowercase();
    Some(match parts.user {
        Some(user) => format!("{scheme}:{user}@{host}"),
        None => format!("{scheme}:{host}"),
    })
}

/// Whether the sender of `msg`, seen at `source`, is behind a NAT under `nat`: its top Via's
/// sent-by or its Contact's host and port is not `source`.
#[must_use]
pub fn behind_nat(msg: &SipMessage, source: SocketAddr, nat: NatTraversal) -> bool {
    let Some(via) = msg.top_via() else {
        return false;
    };
    match nat {
        NatTraversal::Off => return false,
        NatTraversal::Rport if param(via, "rport").is_none() => return false,
        NatTraversal::Rport | NatTraversal::Always => {}
    }
    let sent_by = via
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.split(';').next())
        .unwrap_or("");
    let names_source = |hostport: &str, default_port: u16| -> bool {
        let parts = UriParts::parse(&format!("sip:{hostport}")).and_then(|p| p.ip());
        let port = port_of(hostport).unwrap_or(default_port);
        parts == Some(source.ip()) && port == source.port()
    };
    let via_ok = names_source(sent_by, 5060);
    let contact_ok = msg
        .header_values(&HeaderName::Contact)
        .map(name_addr_uri)
        .filter(|c| *c != "*")
        .all(|c| {
            let hostport = c
                .split_once(':')
                .map_or(c, |(_, r)| r)
                .rsplit('@')
                .next()
                .unwrap_or("")
                .split(';')
                .next()
                .unwrap_or("");
            names_source(hostport, 5060)
        });
    !(via_ok && contact_ok)
}

/// The port of a `host[:port]` (an IPv6 reference in brackets), if written.
fn port_of(hostport: &str) -> Option<u16> {
    let after_host = match hostport.rfind(']') {
        Some(i) => &hostport[i + 1..],
        None => hostport,
    };
    after_host
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
}

/// A phone's REGISTER as the cache reads it; `None` when it has no To URI or Call-ID.
#[must_use]
pub fn register_request(msg: &SipMessage, behind_nat: bool) -> Option<RegisterRequest> {
    let aor = address_of_record(msg)?;
    let mut star = false;
    let mut contacts = Vec::new();
    for value in msg.header_values(&HeaderName::Contact) {
        if value.trim() == "*" {
            star = true;
            continue;
        }
        contacts.push(ContactRequest {
            uri: name_addr_uri(value).to_owned(),
            expires: param(value, "expires").and_then(|e| e.parse().ok()),
        });
    }
    Some(RegisterRequest {
        aor,
        call_id: msg.call_id()?.to_owned(),
        cseq: msg.cseq()?.seq,
        contacts,
        star,
        expires: expires_header(msg),
        behind_nat,
    })
}

/// The `Expires` header, if present and numeric.
#[must_use]
pub fn expires_header(msg: &SipMessage) -> Option<u32> {
    msg.headers
        .iter()
        .find(|h| matches!(&h.name, HeaderName::Other(n) if n.eq_ignore_ascii_case("expires")))
        .and_then(|h| h.value.trim().parse().ok())
}

/// Our Contact for `token` at `addr` over `transport`, with its expiry, as a header value.
#[must_use]
pub fn our_contact(token: u64, addr: SocketAddr, transport: LegTransport, expires: u32) -> String {
    format!(
        "<sip:{TOKEN_PREFIX}{token:016x}@{}:{};transport={}>;expires={expires}",
        uri_host(addr.ip()),
        addr.port(),
        transport.uri_param()
    )
}

/// The token a URI of ours names (`sip:r-<16 hex digits>@...`), if it is one.
#[must_use]
pub fn token_of(uri: &str) -> Option<u64> {
    let user = UriParts::parse(uri)?.user?;
    let hex = user.strip_prefix(TOKEN_PREFIX)?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok().filter(|t| *t != 0)
}

/// What a registrar's 2xx grants our Contacts: each token among `ours` listed in its
/// Contacts, with its `expires` (else the `Expires` header, else RFC 3261's hour).
#[must_use]
pub fn granted(msg: &SipMessage, ours: &[OurContact]) -> Vec<(u64, u32)> {
    let default = expires_header(msg).unwrap_or(super::cache::DEFAULT_EXPIRES);
    msg.header_values(&HeaderName::Contact)
        .filter_map(|value| {
            let token = token_of(name_addr_uri(value))?;
            ours.iter().any(|c| c.token == token).then(|| {
                let expires = param(value, "expires")
                    .and_then(|e| e.parse().ok())
                    .unwrap_or(default);
                (token, expires)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> SipMessage {
        SipMessage::parse(text.replace('\n', "\r\n").as_bytes()).expect("parses")
    }

    fn register(via: &str, contact: &str) -> SipMessage {
        parse(&format!(
            "REGISTER sip:example.test SIP/2.0\nVia: SIP/2.0/UDP {via};branch=z9hG4bK1\n\
             From: <sip:alice@example.test>;tag=1\nTo: \"A\" <sip:alice@EXAMPLE.test;x=y>\n\
             Call-ID: c1\nCSeq: 7 REGISTER\nContact: {contact}\nExpires: 600\n\
             Content-Length: 0\n\n"
        ))
    }

    #[test]
    fn a_register_is_read_with_its_aor_contacts_and_expiries() {
        let msg = register(
            "127.0.0.50:5070",
            "<sip:alice@127.0.0.50:5070>;expires=60, <sip:alice@127.0.0.51>",
        );
        let r = register_request(&msg, false).expect("a register");
        assert_eq!(r.aor, "sip:alice@example.test");
        assert_eq!(
            (r.call_id.as_str(), r.cseq, r.expires),
            ("c1", 7, Some(600))
        );
        assert_eq!(r.contacts.len(), 2);
        assert_eq!(r.contacts[0].uri, "sip:alice@127.0.0.50:5070");
        assert_eq!(r.contacts[0].expires, Some(60));
        assert_eq!(r.contacts[1].expires, None);
        assert!(!r.star);
        let star = register_request(&register("127.0.0.50:5070", "*"), false).expect("a register");
        assert!(star.star && star.contacts.is_empty());
    }

    #[test]
    fn a_phone_is_behind_a_nat_when_its_via_or_contact_does_not_name_its_source() {
        let at = |p: u16| SocketAddr::from(([127, 0, 0, 50], p));
        let plain = register("127.0.0.50:5070", "<sip:alice@127.0.0.50:5070>");
        let rport = register("127.0.0.50:5070;rport", "<sip:alice@127.0.0.50:5070>");
        assert!(!behind_nat(&plain, at(5070), NatTraversal::Always));
        assert!(behind_nat(&plain, at(40000), NatTraversal::Always));
        assert!(
            !behind_nat(&plain, at(40000), NatTraversal::Rport),
            "no rport"
        );
        assert!(behind_nat(&rport, at(40000), NatTraversal::Rport));
        assert!(!behind_nat(&rport, at(40000), NatTraversal::Off));
        let private = register("127.0.0.60:5060;rport", "<sip:alice@127.0.0.60>");
        assert!(behind_nat(&private, at(5060), NatTraversal::Rport));
        let v6 = register("[::1]:5070;rport", "<sip:alice@[::1]:5070>");
        assert!(!behind_nat(
            &v6,
            "[::1]:5070".parse().expect("an address"),
            NatTraversal::Rport
        ));
    }

    #[test]
    fn our_contacts_name_their_token_and_only_ours_are_granted() {
        let ours = [OurContact {
            token: 0xabc,
            phone_contact: "sip:alice@127.0.0.50".into(),
            expires: 3600,
        }];
        let c = our_contact(
            0xabc,
            "127.0.0.1:5062".parse().expect("an address"),
            LegTransport::Udp,
            3600,
        );
        assert_eq!(
            c,
            "<sip:r-0000000000000abc@127.0.0.1:5062;transport=udp>;expires=3600"
        );
        assert_eq!(token_of(name_addr_uri(&c)), Some(0xabc));
        assert_eq!(token_of("sip:r-0000000000000000@h"), None);
        assert_eq!(token_of("sip:alice@h"), None);
        let ok = parse(
            "SIP/2.0 200 OK\nVia: SIP/2.0/UDP 127.0.0.1:5062;branch=z9hG4bK1\nFrom: <sip:a@b>;tag=1\n\
             To: <sip:a@b>;tag=2\nCall-ID: c\nCSeq: 1 REGISTER\n\
             Contact: <sip:r-0000000000000abc@127.0.0.1:5062;transport=udp>;expires=1800, \
             <sip:r-00000000000000ff@127.0.0.1:5062>;expires=99, <sip:bob@127.0.0.9>\n\
             Expires: 3600\nContent-Length: 0\n\n"
        );
        assert_eq!(granted(&ok, &ours), vec![(0xabc, 1800)]);
    }
}
