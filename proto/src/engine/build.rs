//! Message building: responses that echo a request, requests on a leg, ACKs.

use std::net::SocketAddr;

use bytes::Bytes;

use super::transactions::RequestIds;
use super::Engine;
use crate::sip::dialog::{Leg, LegTransport};
use crate::sip::message::{param, Header, HeaderName, MessageWriter, Method, SipMessage};

/// The headers a response to a request must echo (a plain type, replicated with a call in
/// set-up).
pub(super) use crate::sip::dialog::ResponseEcho as ResponseContext;

impl ResponseContext {
    /// What a response to `msg`, received from `source`, echoes: its top Via stamped with
    /// where it came from (RFC 3261 section 18.2.1 `received`, RFC 3581 `rport`), so that a
    /// phone behind a NAT learns its public address and the answer goes where it sent from.
    pub(crate) fn of(msg: &SipMessage, source: SocketAddr) -> Self {
        Self {
            vias: msg
                .header_values(&HeaderName::Via)
                .enumerate()
                .map(|(i, v)| {
                    if i == 0 {
                        stamp_received(v, source)
                    } else {
                        v.to_owned()
                    }
                })
                .collect(),
            from: msg.header(&HeaderName::From).unwrap_or_default().to_owned(),
            to: msg.header(&HeaderName::To).unwrap_or_default().to_owned(),
            call_id: msg.call_id().unwrap_or_default().to_owned(),
            cseq: msg.header(&HeaderName::CSeq).unwrap_or_default().to_owned(),
        }
    }

    pub(crate) fn write(&self, code: u16, reason: &str, to_tag: Option<&str>) -> MessageWriter {
        let mut w = MessageWriter::response(code, reason);
        for v in &self.vias {
            w.header("Via", v);
        }
        w.header("From", &self.from);
        match to_tag {
            Some(tag) if code > 100 && param(&self.to, "tag").is_none() => {
                w.header("To", format_args!("{};tag={tag}", self.to))
            }
            _ => w.header("To", &self.to),
        };
        w.header("Call-ID", &self.call_id);
        w.header("CSeq", &self.cseq);
        w
    }
}

/// `via` with `received=<source IP>` when its sent-by host is not that IP, and `rport=<source
/// port>` when it asks for it (an `rport` without a value, RFC 3581 section 4; `received` is
/// then always added).
pub(super) fn stamp_received(via: &str, source: SocketAddr) -> String {
    let mut parts = via.split(';');
    let head = parts.next().unwrap_or("").trim_end();
    let params: Vec<&str> = parts.map(str::trim).collect();
    let is = |p: &str, name: &str| {
        p.split('=')
            .next()
            .is_some_and(|n| n.trim().eq_ignore_ascii_case(name))
    };
    let wants_rport = params.iter().any(|p| p.eq_ignore_ascii_case("rport"));
    let host =
        crate::sip::uri::UriParts::parse(&format!("sip:{}", via_sent_by(via))).and_then(|p| p.ip());
    let received = wants_rport || host != Some(source.ip());
    if !received && !wants_rport {
        return via.to_owned();
    }
    let mut out = head.to_owned();
    for p in params.iter().filter(|p| !is(p, "received")) {
        out.push(';');
        if p.eq_ignore_ascii_case("rport") {
            out.push_str(&format!("rport={}", source.port()));
        } else {
            out.push_str(p);
        }
    }
    if received {
        // An IPv6 `received` is written without brackets (RFC 5118 section 4.5).
        out.push_str(&format!(";received={}", source.ip()));
    }
    out
}

pub(super) fn strip_tag(v: &str) -> String {
    // Remove a ;tag= parameter from a From/To value, keeping other parameters.
    let split_at = v.rfind('>').map_or(0, |i| i + 1);
    let (head, tail) = v.split_at(split_at);
    let mut out = head.to_owned();
    for p in tail.split(';').filter(|p| !p.trim().is_empty()) {
        let name = p.split('=').next().unwrap_or("").trim();
        if !name.eq_ignore_ascii_case("tag") {
            out.push(';');
            out.push_str(p.trim());
        }
    }
    if head.is_empty() {
        // addr-spec form: the first segment is the URI itself.
        let mut parts = v.split(';');
        let uri = parts.next().unwrap_or("").trim().to_owned();
        let rest: Vec<&str> = parts
            .filter(|p| {
                !p.trim()
                    .split('=')
                    .next()
                    .unwrap_or("")
                    .eq_ignore_ascii_case("tag")
            })
            .collect();
        return std::iter::once(uri.as_str())
            .chain(rest)
            .collect::<Vec<_>>()
            .join(";");
    }
    out
}

pub(super) fn via_sent_by(via: &str) -> &str {
    // "SIP/2.0/UDP host:port;params" -> "host:port"
    let after = via.split_whitespace().nth(1).unwrap_or("");
    after.split(';').next().unwrap_or("").trim()
}

pub(super) fn copy_end_to_end(w: &mut MessageWriter, headers: &[Header]) {
    for h in headers {
        if let HeaderName::Other(name) = &h.name {
            w.header(name, &h.value);
        }
    }
}

pub(super) fn build_ack(ids: &RequestIds, resp: &SipMessage) -> Bytes {
    let mut w = MessageWriter::request(&Method::Ack, &ids.uri);
    w.header("Via", &ids.via);
    for r in &ids.routes {
        w.header("Route", r);
    }
    w.header("Max-Forwards", 70)
        .header("From", &ids.from)
        .header(
            "To",
            resp.header(&HeaderName::To).unwrap_or(ids.to.as_str()),
        )
        .header("Call-ID", &ids.call_id)
        .header("CSeq", format_args!("{} ACK", ids.cseq));
    w.finish(b"")
}

pub(super) fn empty_message() -> SipMessage {
    SipMessage {
        start: crate::sip::message::StartLine::Request {
            method: Method::Bye,
            uri: String::new(),
        },
        headers: Vec::new(),
        body: Bytes::new(),
    }
}

/// Whether `uri` (bare or in a name-addr) has the `sips` scheme.
pub(crate) fn is_sips(uri: &str) -> bool {
    let uri = uri.trim_start();
    let uri = uri.find('<').map_or(uri, |i| uri[i + 1..].trim_start());
    uri.get(..5)
        .is_some_and(|s| s.eq_ignore_ascii_case("sips:"))
}

/// Our Contact at `addr` over `transport`: `sips:` (TLS implied, RFC 5630 §3.1.2) on a TLS leg
/// whose peer's URI is `sips:`, else `sip:` with the transport parameter (a `sips:` URI from a
/// peer over UDP or TCP must not make us name TLS at an address where only those listen).
pub(super) fn contact(addr: SocketAddr, transport: LegTransport, sips: bool) -> String {
    if sips && transport == LegTransport::Tls {
        format!("<sips:sbc@{addr}>")
    } else {
        format!("<sip:sbc@{addr};transport={}>", transport.uri_param())
    }
}

impl Engine {
    pub(super) fn our_contact(&self, leg: &Leg) -> String {
        let addr = self.cfg.interfaces[leg.interface].addr_for(leg.transport);
        contact(addr, leg.transport, is_sips(&leg.remote_target))
    }

    pub(super) fn build_request(
        &self,
        leg: &Leg,
        method: &Method,
        cseq: u32,
        branch: &str,
        orig: &SipMessage,
        mf: u32,
    ) -> Bytes {
        let addr = self.cfg.interfaces[leg.interface].addr_for(leg.transport);
        let mut w = MessageWriter::request(method, &leg.remote_target);
        w.header(
            "Via",
            format_args!(
                "SIP/2.0/{} {addr};branch={branch};rport",
                leg.transport.via_token()
            ),
        );
        for r in &leg.route_set {
            w.header("Route", r);
        }
        w.header("Max-Forwards", mf).header(
            "From",
            format_args!("{};tag={}", leg.local_party, leg.local_tag),
        );
        match &leg.remote_tag {
            Some(t) => w.header("To", format_args!("{};tag={t}", leg.remote_party)),
            None => w.header("To", &leg.remote_party),
        };
        w.header("Call-ID", &leg.call_id)
            .header("CSeq", format_args!("{cseq} {method}"));
        if matches!(
            method,
            Method::Invite | Method::Update | Method::Subscribe | Method::Notify | Method::Refer
        ) {
            w.header("Contact", self.our_contact(leg));
        }
        copy_end_to_end(&mut w, &orig.headers);
        w.finish(&orig.body)
    }
}

#[cfg(test)]
mod tests {
    use super::stamp_received;

    #[test]
    fn the_top_via_learns_where_the_request_came_from() {
        let src = "127.0.0.9:40000".parse().expect("an address");
        let same = "SIP/2.0/UDP 127.0.0.9:40000;branch=z9hG4bK1";
        assert_eq!(stamp_received(same, src), same);
        assert_eq!(
            stamp_received("SIP/2.0/UDP 127.0.0.9:5060;branch=z9hG4bK1;rport", src),
            "SIP/2.0/UDP 127.0.0.9:5060;branch=z9hG4bK1;rport=40000;received=127.0.0.9"
        );
        assert_eq!(
            stamp_received("SIP/2.0/UDP 127.0.0.60:5060;branch=z9hG4bK1", src),
            "SIP/2.0/UDP 127.0.0.60:5060;branch=z9hG4bK1;received=127.0.0.9"
        );
        assert_eq!(
            stamp_received(
                "SIP/2.0/UDP [::1]:5060;rport;branch=z9hG4bK1",
                "[::1]:7000".parse().expect("an address")
            ),
            "SIP/2.0/UDP [::1]:5060;rport=7000;branch=z9hG4bK1;received=::1"
        );
    }
}
