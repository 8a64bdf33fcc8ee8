//! The strict reading of what an edge device must not take on trust: Request-URIs, Via
//! sent-by, duplicated single-instance headers and oversized headers (RFC 3261 sections 8.2.2.1,
//! 18.2.1, 19.1.1, 20, 25.1).
//!
//! A request the SBC cannot read exactly is refused here, with the status RFC 3261 gives it,
//! before anything of it is relayed (a lenient library parser, which keeps what it cannot read
//! as text, is right for a library and wrong for a border):
//!
//! - a Request-URI whose scheme is not `sip`, `sips` or `tel` gets **416 Unsupported URI
//!   Scheme** (section 8.2.2.1); one that does not parse gets 400;
//! - a Via whose sent-by is not a host with an optional port gets 400; hosts are names, IPv4
//!   addresses or bracketed IPv6 references (`[2001:db8::1]`, RFC 3261 section 25.1 and the
//!   RFC 5118 torture cases: an unbracketed IPv6 host, `sip:2001:db8::1`, is refused);
//! - a second `To`, `From`, `Call-ID`, `CSeq`, `Max-Forwards` or `Content-Length` gets 400 (the
//!   receive path and the engine then cannot read different ones);
//! - a header line longer than `max-header-size` gets 400 naming the header.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::message::{short, HeaderName, SipMessage};

/// A request refused by the strict reading: the status to answer and the reason for the
/// Warning header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 400 or 416.
    pub code: u16,
    /// What is wrong, for `Warning: 399 sbc "..."`.
    pub reason: String,
}

impl Refusal {
    fn bad(reason: impl Into<String>) -> Self {
        Self {
            code: 400,
            reason: reason.into(),
        }
    }
}

/// Checks the header block's lines (start line included, up to and with the blank line): each
/// ends with CRLF (no bare CR or LF), and none is a folded continuation (a line starting with
/// a space or a tab). Both are legal in old SIP, and both let two readers see different header
/// lines (a line scan splits on LF, a parser may not; a folded line may look like a header of
/// its own), so an edge device refuses them.
///
/// # Errors
/// What is wrong, for the 400's Warning.
pub fn check_line_endings(head: &[u8]) -> Result<(), String> {
    for (i, &b) in head.iter().enumerate() {
        match b {
            b'\n' if i == 0 || head[i - 1] != b'\r' => {
                return Err("a header line ends with a bare LF (CRLF is required)".into());
            }
            b'\r' if head.get(i + 1) != Some(&b'\n') => {
                return Err("a bare CR in the header block".into());
            }
            b'\n' if matches!(head.get(i + 1), Some(b' ' | b'\t')) => {
                return Err("a folded header line (continuation lines are not accepted)".into());
            }
            _ => {}
        }
    }
    Ok(())
}

/// Headers that may appear once (RFC 3261 section 7.3.1: only list headers may repeat).
pub const SINGLE_INSTANCE: [HeaderName; 6] = [
    HeaderName::To,
    HeaderName::From,
    HeaderName::CallId,
    HeaderName::CSeq,
    HeaderName::MaxForwards,
    HeaderName::ContentLength,
];

/// Checks the headers of any message: single-instance headers once, no header line beyond
/// `max_header` bytes.
///
/// # Errors
/// The first problem, as a 400 refusal.
pub fn check_headers(msg: &SipMessage, max_header: usize) -> Result<(), Refusal> {
    for name in &SINGLE_INSTANCE {
        if msg.headers.iter().filter(|h| &h.name == name).count() > 1 {
            return Err(Refusal::bad(format!("duplicate {} header", name.as_str())));
        }
    }
    if let Some(h) = msg
        .headers
        .iter()
        .find(|h| h.name.as_str().len() + 2 + h.value.len() > max_header)
    {
        return Err(Refusal::bad(format!(
            "{} header longer than {max_header} bytes",
            h.name.as_str()
        )));
    }
    Ok(())
}

/// Checks a Request-URI: `sip:`/`sips:` URIs must parse (userinfo, host, port, parameters,
/// headers), `tel:` must carry a number; other schemes are unsupported (416).
///
/// # Errors
/// 416 for another scheme, 400 for a URI that does not parse.
pub fn check_request_uri(uri: &str) -> Result<(), Refusal> {
    let Some((scheme, rest)) = uri.split_once(':') else {
        return Err(Refusal::bad(format!(
            "Request-URI without a scheme: {}",
            short(uri)
        )));
    };
    if scheme.is_empty()
        || !scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
    {
        return Err(Refusal::bad(format!(
            "Request-URI without a scheme: {}",
            short(uri)
        )));
    }
    match scheme.to_ascii_lowercase().as_str() {
        "sip" | "sips" => check_sip_uri(rest)
            .map_err(|why| Refusal::bad(format!("Request-URI {why}: {}", short(uri)))),
        "tel" => check_tel_uri(rest)
            .map_err(|why| Refusal::bad(format!("Request-URI {why}: {}", short(uri)))),
        _ => Err(Refusal {
            code: 416,
            reason: format!("URI scheme {scheme} is not supported (sip, sips, tel)"),
        }),
    }
}

/// Checks a Via value's sent-by (`SIP/2.0/UDP host[:port];params`).
///
/// # Errors
/// 400 when the sent-by is not a host with an optional port.
pub fn check_via_sent_by(via: &str) -> Result<(), Refusal> {
    let mut words = via.splitn(2, char::is_whitespace);
    let _proto = words.next();
    let rest = words.next().unwrap_or("").trim_start();
    let sent_by = rest.split(';').next().unwrap_or("").trim();
    if host_port(sent_by).is_some() {
        Ok(())
    } else {
        Err(Refusal::bad(format!(
            "Via sent-by is not host[:port]: {}",
            short(via)
        )))
    }
}

/// `sip:` after the scheme: `[userinfo@]hostport[;params][?headers]`.
fn check_sip_uri(rest: &str) -> Result<(), &'static str> {
    if rest
        .bytes()
        .any(|b| b <= b' ' || b"<>\"\\{}|^`".contains(&b) || b >= 0x7f)
    {
        return Err("has a character a SIP URI may not hold");
    }
    let (before_headers, headers) = match rest.split_once('?') {
        Some((a, h)) => (a, Some(h)),
        None => (rest, None),
    };
    let (userinfo, hostpart) = match before_headers.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, before_headers),
    };
    if userinfo.is_some_and(str::is_empty) {
        return Err("has an empty user part");
    }
    let mut parts = hostpart.split(';');
    let hostport = parts.next().unwrap_or("");
    if host_port(hostport).is_none() {
        return Err("has no valid host[:port]");
    }
    for p in parts {
        let name = p.split('=').next().unwrap_or("");
        if name.is_empty() || !name.bytes().all(token_char) {
            return Err("has a malformed parameter");
        }
    }
    if let Some(h) = headers {
        if h.is_empty() || h.split('&').any(|kv| !kv.contains('=')) {
            return Err("has malformed headers");
        }
    }
    Ok(())
}

/// `tel:` after the scheme: a global (`+` digits) or local number, visual separators allowed,
/// then parameters (RFC 3966).
fn check_tel_uri(rest: &str) -> Result<(), &'static str> {
    let number = rest.split(';').next().unwrap_or("");
    let digits = number.trim_start_matches('+');
    if digits.is_empty()
        || !digits
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b"-.()*#".contains(&b))
        || !digits.bytes().any(|b| b.is_ascii_digit())
    {
        return Err("is not a telephone number");
    }
    Ok(())
}

/// RFC 3261 `token` characters.
pub(crate) fn token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-.!%*_+`'~".contains(&b)
}

/// `host[:port]`: a hostname, an IPv4 address or a bracketed IPv6 reference, and a port in
/// 1..=65535. Returns the host.
pub fn host_port(s: &str) -> Option<&str> {
    let (host, port) = if let Some(v6) = s.strip_prefix('[') {
        let (addr, after) = v6.split_once(']')?;
        addr.parse::<Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (&s[..addr.len() + 2], port)
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    if let Some(p) = port {
        if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if !(1..=65535).contains(&p.parse::<u32>().ok()?) {
            return None;
        }
    }
    if host.starts_with('[') || host.parse::<Ipv4Addr>().is_ok() || hostname(host) {
        Some(host)
    } else {
        None
    }
}

/// A DNS hostname (RFC 3261 section 25.1): dot-separated labels of letters, digits and
/// hyphens, not starting or ending with a hyphen; a trailing dot allowed; the last label not
/// all digits (that would be a malformed IPv4 address).
fn hostname(h: &str) -> bool {
    let h = h.strip_suffix('.').unwrap_or(h);
    if h.is_empty() || h.len() > 253 {
        return false;
    }
    let labels: Vec<&str> = h.split('.').collect();
    let ok = labels.iter().all(|l| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    });
    ok && labels
        .last()
        .is_some_and(|l| !l.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_uris() {
        for ok in [
            "sip:bob@example.com",
            "sip:bob@127.0.0.1:5060;transport=udp",
            "sips:alice:secret@biloxi.example.com;maddr=239.255.255.1?subject=hi",
            "sip:+14155550100@[2001:db8::1]:5061;user=phone",
            "sip:example.com",
            "SIP:carol@Chicago.COM.",
            "tel:+1-201-555-0123",
            "tel:7042;phone-context=example.com",
        ] {
            assert_eq!(check_request_uri(ok), Ok(()), "{ok}");
        }
        for (bad, code) in [
            ("http://example.com/", 416),
            ("mailto:bob@example.com", 416),
            ("urn:service:sos", 416),
            ("sip:", 400),
            ("sip:bob@", 400),
            ("sip:@example.com", 400),
            ("sip:bob@exa mple.com", 400),
            ("sip:bob@-bad-.com", 400),
            ("sip:bob@example.com:0", 400),
            ("sip:bob@example.com:99999", 400),
            ("sip:bob@[::1", 400),
            ("sip:bob@1.2.3.4.5", 400),
            ("sip:bob@host;=x", 400),
            ("sip:bob@<host>", 400),
            ("tel:", 400),
            ("tel:abc", 400),
            ("nocolon", 400),
            (":x", 400),
        ] {
            assert_eq!(
                check_request_uri(bad).map_err(|r| r.code),
                Err(code),
                "{bad}"
            );
        }
    }

    #[test]
    fn via_sent_by() {
        for ok in [
            "SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK1",
            "SIP/2.0/TCP pc33.atlanta.com;branch=z9hG4bK2;rport",
            "SIP/2.0/UDP [2001:db8::9]:5070;branch=z9hG4bK3",
            "SIP/2.0/UDP host.example.com",
        ] {
            assert_eq!(check_via_sent_by(ok), Ok(()), "{ok}");
        }
        for bad in [
            "SIP/2.0/UDP ;branch=z9hG4bK1",
            "SIP/2.0/UDP bad_host:5060;branch=z9hG4bK1",
            "SIP/2.0/UDP 10.0.0.1:notaport;branch=x",
            "SIP/2.0/UDP 10.0.0.1:70000;branch=x",
            "SIP/2.0/UDP",
        ] {
            assert!(check_via_sent_by(bad).is_err(), "{bad}");
        }
    }

    fn msg(headers: &str) -> SipMessage {
        let text = format!("OPTIONS sip:a@b SIP/2.0\r\n{headers}Content-Length: 0\r\n\r\n");
        SipMessage::parse(text.as_bytes()).expect("parses")
    }

    #[test]
    fn line_endings_are_crlf_and_lines_are_not_folded() {
        assert_eq!(
            check_line_endings(b"INVITE x SIP/2.0\r\nA: b\r\n\r\n"),
            Ok(())
        );
        // The fuzzer's find: a bare LF then CRLF, which a line scan takes for the blank line
        // ending the headers while the parser reads on.
        assert!(
            check_line_endings(b"INVITE x SIP/2.0\r\nMax-Forwards: 7\n\r\nCall-ID: c\r\n\r\n")
                .is_err()
        );
        assert!(check_line_endings(b"INVITE x SIP/2.0\r\nA: b\rC: d\r\n\r\n").is_err());
        assert!(
            check_line_endings(b"INVITE x SIP/2.0\r\nSubject: a\r\n Call-ID: c\r\n\r\n").is_err()
        );
        assert!(check_line_endings(b"INVITE x SIP/2.0\r\nSubject: a\r\n\tb\r\n\r\n").is_err());
    }

    #[test]
    fn duplicates_and_oversized_headers() {
        let base = "Via: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: <sip:a@b>;tag=1\r\nCall-ID: c\r\nCSeq: 1 OPTIONS\r\n";
        assert_eq!(
            check_headers(&msg(&format!("{base}To: <sip:b@c>\r\n")), 8192),
            Ok(())
        );
        let two_to = msg(&format!("{base}To: <sip:b@c>\r\nt: <sip:b@c>;tag=9\r\n"));
        assert_eq!(
            check_headers(&two_to, 8192).map_err(|r| r.reason),
            Err("duplicate To header".into())
        );
        let long = msg(&format!(
            "{base}To: <sip:b@c>\r\nX-Big: {}\r\n",
            "a".repeat(9000)
        ));
        let e = check_headers(&long, 8192).expect_err("too long");
        assert!(
            e.reason.contains("X-Big") && e.reason.contains("8192"),
            "{e:?}"
        );
        // A list header may repeat.
        let vias = msg(&format!(
            "{base}Via: SIP/2.0/UDP g;branch=z9hG4bK2\r\nTo: <sip:b@c>\r\n"
        ));
        assert_eq!(check_headers(&vias, 8192), Ok(()));
    }
}
