//! RFC 5118 (SIP torture test messages for IPv6) as unit tests of the strict reading: every
//! valid message of the RFC parses and passes [`SipMessage::check_request`], every invalid one
//! is refused with 400, and the SDP bodies give the streams' IPv6 addresses.
//!
//! The messages are the RFC's, with their essential lines kept (Via, URIs, SDP), in CRLF form.

use std::net::{IpAddr, SocketAddr};

use super::message::{name_addr_uri, SipMessage};
use super::strict;
use crate::sdp::Description;

/// A request with `start` as its start line, `vias` as its Via lines and `extra` headers, with
/// `body` (SDP) if not empty.
fn request(start: &str, vias: &[&str], extra: &[&str], body: &str) -> Vec<u8> {
    let method = start.split(' ').next().unwrap_or("");
    let mut text = format!("{start}\r\n");
    for v in vias {
        text.push_str(&format!("Via: {v}\r\n"));
    }
    text.push_str(&format!(
        "Max-Forwards: 70\r\nFrom: <sip:user@example.com>;tag=81x2\r\n\
         To: <sip:user@[2001:db8::10]>\r\nCall-ID: SSG9559905523997077@hlau_4100\r\n\
         CSeq: 1 {method}\r\n"
    ));
    for h in extra {
        text.push_str(&format!("{h}\r\n"));
    }
    let body = body.replace('\n', "\r\n");
    if !body.is_empty() {
        text.push_str("Content-Type: application/sdp\r\n");
    }
    text.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    text.into_bytes()
}

fn accepted(data: &[u8]) -> SipMessage {
    let msg = SipMessage::parse(data).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(data));
    });
    assert_eq!(
        msg.check_request(8192),
        Ok(()),
        "{}",
        String::from_utf8_lossy(data)
    );
    msg
}

fn refused(data: &[u8]) -> String {
    match SipMessage::parse(data) {
        Err(e) => e.to_string(),
        Ok(msg) => match msg.check_request(8192) {
            Err(r) => {
                assert_eq!(r.code, 400, "{r:?}");
                r.reason
            }
            Ok(()) => panic!("accepted: {}", String::from_utf8_lossy(data)),
        },
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

/// 4.1: a valid REGISTER with IPv6 references in the Request-URI, Via, To and Contact.
#[test]
fn valid_message_with_ipv6_references() {
    let msg = accepted(&request(
        "REGISTER sip:[2001:db8::10] SIP/2.0",
        &["SIP/2.0/UDP [2001:db8::9:1];branch=z9hG4bKas3-111"],
        &["Contact: \"Caller\" <sip:caller@[2001:db8::1]>"],
        "",
    ));
    assert_eq!(msg.request_uri(), Some("sip:[2001:db8::10]"));
    assert_eq!(msg.contact_uri(), Some("sip:caller@[2001:db8::1]"));
    assert_eq!(
        crate::engine::uri_addr(msg.contact_uri().unwrap_or_default()),
        Some(SocketAddr::new(ip("2001:db8::1"), 5060))
    );
}

/// 4.2: an IPv6 address without brackets in the Request-URI is refused (the colons read as a
/// port); so is one in a Via sent-by.
#[test]
fn invalid_message_without_brackets() {
    let why = refused(&request(
        "REGISTER sip:2001:db8::10 SIP/2.0",
        &["SIP/2.0/UDP [2001:db8::9:1];branch=z9hG4bKas3"],
        &[],
        "",
    ));
    assert!(why.contains("Request-URI"), "{why}");
    let why = refused(&request(
        "REGISTER sip:[2001:db8::10] SIP/2.0",
        &["SIP/2.0/UDP 2001:db8::9:1;branch=z9hG4bKas3"],
        &[],
        "",
    ));
    assert!(why.contains("Via"), "{why}");
    // An unclosed or empty reference, or an IPv4 address in brackets.
    for uri in [
        "sip:[2001:db8::10",
        "sip:[]",
        "sip:user@[192.0.2.1]",
        "sip:[2001:db8::g]",
    ] {
        refused(&request(
            &format!("OPTIONS {uri} SIP/2.0"),
            &["SIP/2.0/UDP [2001:db8::9:1];branch=z9hG4bK1"],
            &[],
            "",
        ));
    }
}

/// 4.3 and 4.4: `[2001:db8::10:5070]` is an address without a port; `[2001:db8::10]:5070` is
/// an address and a port.
#[test]
fn port_ambiguous_and_unambiguous() {
    let ambiguous = accepted(&request(
        "REGISTER sip:[2001:db8::10:5070] SIP/2.0",
        &["SIP/2.0/UDP [2001:db8::9:1];branch=z9hG4bKas3"],
        &["Contact: \"Caller\" <sip:caller@[2001:db8::1]>"],
        "",
    ));
    assert_eq!(
        ambiguous.request_uri().and_then(crate::engine::uri_addr),
        Some(SocketAddr::new(ip("2001:db8::10:5070"), 5060))
    );
    let unambiguous = accepted(&request(
        "REGISTER sip:[2001:db8::10]:5070 SIP/2.0",
        &["SIP/2.0/UDP [2001:db8::9:1];branch=z9hG4bKas3"],
        &["Contact: \"Caller\" <sip:caller@[2001:db8::1]>"],
        "",
    ));
    assert_eq!(
        unambiguous.request_uri().and_then(crate::engine::uri_addr),
        Some(SocketAddr::new(ip("2001:db8::10"), 5070))
    );
}

/// 4.5: `received` with and without brackets (RFC 3261's ABNF says without, RFC 5118 accepts
/// both), a sent-by with a port.
#[test]
fn ipv6_reference_delimiters_in_via() {
    for via in [
        "SIP/2.0/UDP [2001:db8::9:1]:6050;branch=z9hG4bKas3-111;received=[2001:db8::9:255]",
        "SIP/2.0/UDP [2001:db8::9:1]:6050;branch=z9hG4bKas3-111;received=2001:db8::9:255",
        "SIP/2.0/UDP [2001:db8::9:1];branch=z9hG4bKas3-111;rport;maddr=[2001:db8::9:2]",
    ] {
        let msg = accepted(&request("BYE sip:[2001:db8::10] SIP/2.0", &[via], &[], ""));
        assert_eq!(msg.top_via(), Some(via));
        assert_eq!(strict::check_via_sent_by(via), Ok(()));
    }
}

/// 4.6 and 4.8: IPv6 in the SDP body, one address per media line.
#[test]
fn ipv6_addresses_in_sdp() {
    let sdp = "v=0\no=assistant 971731711378798081 0 IN IP6 2001:db8::20\ns=Live video feed\n\
               c=IN IP6 2001:db8::20\nt=0 0\nm=audio 6000 RTP/AVP 0\na=rtpmap:0 PCMU/8000\n\
               m=video 6024 RTP/AVP 107\nc=IN IP6 2001:db8::21\na=rtpmap:107 H263-1998/90000\n";
    let msg = accepted(&request(
        "INVITE sip:user@[2001:db8::10] SIP/2.0",
        &["SIP/2.0/UDP [2001:db8::20];branch=z9hG4bKas3-111"],
        &["Contact: \"Caller\" <sip:caller@[2001:db8::20]>"],
        sdp,
    ));
    let streams = Description::parse(&msg.body)
        .and_then(|d| d.streams())
        .expect("SDP reads");
    assert_eq!(streams[0].rtp, SocketAddr::new(ip("2001:db8::20"), 6000));
    assert_eq!(streams[1].rtp, SocketAddr::new(ip("2001:db8::21"), 6024));
}

/// 4.7: a request that crossed an IPv4 and an IPv6 hop: Vias of both families.
#[test]
fn multiple_ip_families_in_via() {
    let msg = accepted(&request(
        "BYE sip:user@host.example.net SIP/2.0",
        &[
            "SIP/2.0/UDP [2001:db8::9:255];branch=z9hG4bKas3-111;received=192.0.2.1",
            "SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKjhja8781hjuaij65144;received=[2001:db8::9:255]",
        ],
        &[],
        "",
    ));
    assert_eq!(
        msg.header_values(&super::message::HeaderName::Via).count(),
        2
    );
}

/// 4.9: IPv4-mapped IPv6 addresses in the URI, the Via and the SDP.
#[test]
fn ipv4_mapped_addresses() {
    let sdp = "v=0\no=assistant 971731711378798081 0 IN IP6 ::ffff:192.0.2.2\ns=Call me\n\
               c=IN IP6 ::ffff:192.0.2.2\nt=0 0\nm=audio 6000 RTP/AVP 0\n";
    let msg = accepted(&request(
        "INVITE sip:user@[::ffff:192.0.2.128] SIP/2.0",
        &["SIP/2.0/UDP [::ffff:192.0.2.128];branch=z9hG4bKkdjuw"],
        &["Contact: \"Caller\" <sip:caller@[::ffff:192.0.2.128]>"],
        sdp,
    ));
    let streams = Description::parse(&msg.body)
        .and_then(|d| d.streams())
        .expect("SDP reads");
    assert_eq!(streams[0].rtp.ip(), ip("::ffff:192.0.2.2"));
    assert_eq!(
        name_addr_uri("\"Caller\" <sip:caller@[::ffff:192.0.2.128]>"),
        "sip:caller@[::ffff:192.0.2.128]"
    );
}

/// 4.10: the RFC 3261 ABNF bug: full and compressed forms of one IPv6 reference both read.
#[test]
fn ipv6_reference_forms() {
    for uri in [
        "sip:[2001:db8:0:0:1:0:0:1]",
        "sip:[2001:db8::1:0:0:1]",
        "sip:user@[2001:0db8:0000:0000:0001:0000:0000:0001]:5070;transport=udp",
        "sip:[::1]",
        "sips:[::1]:5061",
    ] {
        assert_eq!(strict::check_request_uri(uri), Ok(()), "{uri}");
    }
}
