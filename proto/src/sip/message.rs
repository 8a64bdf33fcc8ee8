//! SIP messages as the engine sees them: read line by line under the strict rules of
//! [`super::strict`], then held as an ordered list of header lines with canonical names, so the B2BUA can read the few headers it needs and copy
//! the rest across legs verbatim.
//!
//! Parsing is strict where RFC 3261 is strict (start line, header syntax, Content-Length) and
//! says *why* a message was refused, so the engine can answer `400 Bad Request` with a reason
//! when the request carries enough to be answered, and drop it otherwise.

use std::fmt::{self, Write as _};

use bytes::Bytes;

use super::strict::{self, Refusal};

/// A SIP method. Unknown extension methods are kept by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Method {
    /// INVITE
    Invite,
    /// ACK
    Ack,
    /// BYE
    Bye,
    /// CANCEL
    Cancel,
    /// OPTIONS
    Options,
    /// REGISTER
    Register,
    /// UPDATE
    Update,
    /// INFO
    Info,
    /// PRACK
    Prack,
    /// MESSAGE
    Message,
    /// REFER
    Refer,
    /// NOTIFY
    Notify,
    /// SUBSCRIBE
    Subscribe,
    /// PUBLISH
    Publish,
    /// Any other token.
    Other(String),
}

impl Method {
    /// Parses a method token (case-sensitive, as RFC 3261 says).
    pub fn parse(s: &str) -> Self {
        match s {
            "INVITE" => Self::Invite,
            "ACK" => Self::Ack,
            "BYE" => Self::Bye,
            "CANCEL" => Self::Cancel,
            "OPTIONS" => Self::Options,
            "REGISTER" => Self::Register,
            "UPDATE" => Self::Update,
            "INFO" => Self::Info,
            "PRACK" => Self::Prack,
            "MESSAGE" => Self::Message,
            "REFER" => Self::Refer,
            "NOTIFY" => Self::Notify,
            "SUBSCRIBE" => Self::Subscribe,
            "PUBLISH" => Self::Publish,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The method token.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Invite => "INVITE",
            Self::Ack => "ACK",
            Self::Bye => "BYE",
            Self::Cancel => "CANCEL",
            Self::Options => "OPTIONS",
            Self::Register => "REGISTER",
            Self::Update => "UPDATE",
            Self::Info => "INFO",
            Self::Prack => "PRACK",
            Self::Message => "MESSAGE",
            Self::Refer => "REFER",
            Self::Notify => "NOTIFY",
            Self::Subscribe => "SUBSCRIBE",
            Self::Publish => "PUBLISH",
            Self::Other(s) => s,
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Canonical names of the headers the engine reads or rewrites; everything else is `Other`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderName {
    /// Via (compact `v`)
    Via,
    /// From (compact `f`)
    From,
    /// To (compact `t`)
    To,
    /// Call-ID (compact `i`)
    CallId,
    /// CSeq
    CSeq,
    /// Contact (compact `m`)
    Contact,
    /// Max-Forwards
    MaxForwards,
    /// Content-Length (compact `l`)
    ContentLength,
    /// Route
    Route,
    /// Record-Route
    RecordRoute,
    /// Any other header, with the name as received.
    Other(String),
}

impl HeaderName {
    /// Maps a received header name (any case, compact forms included) to its canonical name.
    pub fn parse(name: &str) -> Self {
        let n = name.trim();
        let eq = |s: &str| n.eq_ignore_ascii_case(s);
        if eq("via") || eq("v") {
            Self::Via
        } else if eq("from") || eq("f") {
            Self::From
        } else if eq("to") || eq("t") {
            Self::To
        } else if eq("call-id") || eq("i") {
            Self::CallId
        } else if eq("cseq") {
            Self::CSeq
        } else if eq("contact") || eq("m") {
            Self::Contact
        } else if eq("max-forwards") {
            Self::MaxForwards
        } else if eq("content-length") || eq("l") {
            Self::ContentLength
        } else if eq("route") {
            Self::Route
        } else if eq("record-route") {
            Self::RecordRoute
        } else {
            Self::Other(n.to_owned())
        }
    }

    /// The name written on the wire (long form).
    pub fn as_str(&self) -> &str {
        match self {
            Self::Via => "Via",
            Self::From => "From",
            Self::To => "To",
            Self::CallId => "Call-ID",
            Self::CSeq => "CSeq",
            Self::Contact => "Contact",
            Self::MaxForwards => "Max-Forwards",
            Self::ContentLength => "Content-Length",
            Self::Route => "Route",
            Self::RecordRoute => "Record-Route",
            Self::Other(s) => s,
        }
    }

    /// Headers that describe one hop or one leg and are never copied from one leg to the other.
    pub fn is_leg_specific(&self) -> bool {
        !matches!(self, Self::Other(_))
    }
}

/// One header line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Canonical name.
    pub name: HeaderName,
    /// Value, trimmed.
    pub value: String,
}

/// Request line or status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartLine {
    /// `METHOD uri SIP/2.0`
    Request {
        /// Method.
        method: Method,
        /// Request-URI as received.
        uri: String,
    },
    /// `SIP/2.0 code reason`
    Response {
        /// Status code.
        code: u16,
        /// Reason phrase.
        reason: String,
    },
}

/// A parsed SIP message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SipMessage {
    /// Start line.
    pub start: StartLine,
    /// Headers in received order.
    pub headers: Vec<Header>,
    /// Body (exactly Content-Length bytes).
    pub body: Bytes,
}

/// Why a message could not be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Bytes that are not a SIP message at all (nothing can be answered).
    #[error("not a SIP message: {0}")]
    Garbage(String),
    /// A request whose start line or headers are malformed; the message may still carry enough
    /// to be answered with 400.
    #[error("malformed: {0}")]
    Malformed(String),
    /// The message is larger than the configured maximum.
    #[error("message of {size} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// Size received.
        size: usize,
        /// Configured maximum.
        max: usize,
    },
}

/// The CSeq header, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CSeq {
    /// Sequence number.
    pub seq: u32,
    /// Method.
    pub method: Method,
}

impl SipMessage {
    /// Parses one whole message (a datagram, or one frame cut by the TCP codec).
    pub fn parse(data: &[u8]) -> Result<Self, ParseError> {
        let head_end = find_head_end(data)
            .ok_or_else(|| ParseError::Malformed("no blank line after the headers".into()))?;
        strict::check_line_endings(&data[..head_end]).map_err(ParseError::Malformed)?;
        let head = std::str::from_utf8(&data[..head_end - 4])
            .map_err(|_| ParseError::Malformed("header block is not UTF-8".into()))?;
        let mut lines = head.split("\r\n");
        let start = parse_start_line(lines.next().unwrap_or(""))?;
        let mut headers = Vec::with_capacity(16);
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                return Err(ParseError::Malformed(format!(
                    "header without colon: {}",
                    short(line)
                )));
            };
            // RFC 3261 section 7.3.1 allows white space before the colon; a name is a token.
            let name = name.trim_end_matches([' ', '\t']);
            if name.is_empty() || !name.bytes().all(strict::token_char) {
                return Err(ParseError::Malformed(format!(
                    "bad header name: {}",
                    short(name)
                )));
            }
            headers.push(Header {
                name: HeaderName::parse(name),
                // ASCII white space only, as the receive path trims (`shard::trim`): `str::trim` would
                // also take a vertical tab or a no-break space off, and the two would read
                // different Call-IDs (the fuzzer's find).
                value: value
                    .trim_matches(|c: char| c.is_ascii_whitespace())
                    .to_owned(),
            });
        }
        let rest = &data[head_end..];
        let mut msg = Self {
            start,
            headers,
            body: Bytes::new(),
        };
        let body_len = match msg.header(&HeaderName::ContentLength) {
            None => rest.len(),
            Some(v) => {
                let n: usize = v.trim().parse().map_err(|_| {
                    ParseError::Malformed(format!("bad Content-Length: {}", short(v)))
                })?;
                if n > rest.len() {
                    return Err(ParseError::Malformed(format!(
                        "Content-Length {n} exceeds the {} body bytes received",
                        rest.len()
                    )));
                }
                n
            }
        };
        msg.body = Bytes::copy_from_slice(&rest[..body_len]);
        Ok(msg)
    }

    /// The method if this is a request.
    pub fn method(&self) -> Option<&Method> {
        match &self.start {
            StartLine::Request { method, .. } => Some(method),
            StartLine::Response { .. } => None,
        }
    }

    /// The status code if this is a response.
    pub fn status(&self) -> Option<u16> {
        match &self.start {
            StartLine::Response { code, .. } => Some(*code),
            StartLine::Request { .. } => None,
        }
    }

    /// The Request-URI if this is a request.
    pub fn request_uri(&self) -> Option<&str> {
        match &self.start {
            StartLine::Request { uri, .. } => Some(uri),
            StartLine::Response { .. } => None,
        }
    }

    /// First value of a header.
    pub fn header(&self, name: &HeaderName) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| &h.name == name)
            .map(|h| h.value.as_str())
    }

    /// All values of a header, in order, with comma-separated lists split (for Via, Route,
    /// Record-Route).
    pub fn header_values<'a>(&'a self, name: &'a HeaderName) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |h| &h.name == name)
            .flat_map(|h| split_list(&h.value))
    }

    /// Call-ID value.
    pub fn call_id(&self) -> Option<&str> {
        self.header(&HeaderName::CallId).filter(|v| !v.is_empty())
    }

    /// Parsed CSeq.
    pub fn cseq(&self) -> Option<CSeq> {
        let v = self.header(&HeaderName::CSeq)?;
        let mut it = v.split_whitespace();
        let seq = it.next()?.parse().ok()?;
        let method = Method::parse(it.next()?);
        if it.next().is_some() {
            return None;
        }
        Some(CSeq { seq, method })
    }

    /// The topmost Via value.
    pub fn top_via(&self) -> Option<&str> {
        self.header_values(&HeaderName::Via).next()
    }

    /// `branch` parameter of the topmost Via.
    pub fn top_via_branch(&self) -> Option<&str> {
        self.top_via().and_then(|v| param(v, "branch"))
    }

    /// The tag of the From header.
    pub fn from_tag(&self) -> Option<&str> {
        self.header(&HeaderName::From).and_then(name_addr_tag)
    }

    /// The tag of the To header.
    pub fn to_tag(&self) -> Option<&str> {
        self.header(&HeaderName::To).and_then(name_addr_tag)
    }

    /// Max-Forwards, if present and numeric.
    pub fn max_forwards(&self) -> Option<Result<u32, ()>> {
        self.header(&HeaderName::MaxForwards)
            .map(|v| v.trim().parse::<u32>().map_err(|_| ()))
    }

    /// URI of the first Contact.
    pub fn contact_uri(&self) -> Option<&str> {
        self.header_values(&HeaderName::Contact)
            .next()
            .map(name_addr_uri)
    }

    /// Checks what strict parsing leaves to the engine (RFC 3261 sections 8.2, 18.3, 20, and
    /// [`super::strict`]): single-instance headers once, no header line beyond `max_header`
    /// bytes, a Request-URI that parses with a supported scheme (else 416), well-formed Vias
    /// with a valid sent-by, a numeric CSeq matching the method and no control characters in
    /// header values. The refusal carries the status and the reason for the Warning header.
    ///
    /// # Errors
    /// The first rule broken.
    pub fn check_request(&self, max_header: usize) -> Result<(), Refusal> {
        let StartLine::Request { method, uri } = &self.start else {
            return Ok(());
        };
        strict::check_headers(self, max_header)?;
        strict::check_request_uri(uri)?;
        let bad = |reason: String| Refusal { code: 400, reason };
        if let Some(h) = self
            .headers
            .iter()
            .find(|h| h.value.bytes().any(|b| b < 0x20 && b != b'\t'))
        {
            return Err(bad(format!("control character in {}", h.name.as_str())));
        }
        for via in self.header_values(&HeaderName::Via) {
            let mut words = via.split_whitespace();
            let proto = words.next().unwrap_or("");
            let sent_by = words.next().unwrap_or("");
            let parts: Vec<&str> = proto.split('/').collect();
            if parts.len() != 3
                || !parts[0].eq_ignore_ascii_case("SIP")
                || parts[1] != "2.0"
                || parts[2].is_empty()
                || sent_by.is_empty()
                || sent_by.starts_with(';')
            {
                return Err(bad(format!("malformed Via: {}", short(via))));
            }
            strict::check_via_sent_by(via)?;
        }
        let lengths: Vec<&str> = self
            .headers
            .iter()
            .filter(|h| h.name == HeaderName::ContentLength)
            .map(|h| h.value.trim())
            .collect();
        if lengths.windows(2).any(|w| w[0] != w[1]) {
            return Err(bad("conflicting Content-Length headers".into()));
        }
        match self.cseq() {
            None => return Err(bad("malformed CSeq".into())),
            Some(c)
                if c.method != *method
                    && !(*method == Method::Ack && c.method == Method::Invite) =>
            {
                return Err(bad(format!(
                    "CSeq method {} does not match {method}",
                    c.method
                )));
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// Checks the headers every request must carry (RFC 3261 section 8.1.1) so that a response
    /// can be built: Via with a branch or sent-by, From, To, Call-ID, CSeq whose method matches.
    pub fn answerable(&self) -> bool {
        self.top_via().is_some()
            && self.header(&HeaderName::From).is_some()
            && self.header(&HeaderName::To).is_some()
            && self.call_id().is_some()
            && self.header(&HeaderName::CSeq).is_some()
    }
}

/// Where the header block ends (index of the first body byte): after the first CRLFCRLF
/// (RFC 3261 section 7; lines ended by a bare LF are refused, see [`strict`]).
pub fn find_head_end(data: &[u8]) -> Option<usize> {
    data.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 4)
}

/// Reads a start line: `METHOD Request-URI SIP/2.0` (RFC 3261 section 7.1: single spaces,
/// the method a token, kept as received since methods are case-sensitive) or
/// `SIP/2.0 code reason` (section 7.2: a three-digit code, any reason phrase).
fn parse_start_line(line: &str) -> Result<StartLine, ParseError> {
    let bad = |what: &str| ParseError::Malformed(format!("{what}: {}", short(line)));
    if let Some(status) = line.strip_prefix("SIP/2.0 ") {
        let (code, reason) = status.split_once(' ').unwrap_or((status, ""));
        if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("bad status code"));
        }
        let code: u16 = code.parse().map_err(|_| bad("bad status code"))?;
        if !(100..=699).contains(&code) {
            return Err(bad("status code out of range"));
        }
        return Ok(StartLine::Response {
            code,
            reason: reason.trim().to_owned(),
        });
    }
    let mut words = line.split(' ');
    let (Some(method), Some(uri), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(bad("start line is not METHOD URI SIP/2.0"));
    };
    if method.is_empty() || !method.bytes().all(strict::token_char) {
        return Err(bad("bad method"));
    }
    if uri.is_empty() {
        return Err(bad("empty Request-URI"));
    }
    if version != "SIP/2.0" {
        return Err(bad("not SIP/2.0"));
    }
    Ok(StartLine::Request {
        method: Method::parse(method),
        uri: uri.to_owned(),
    })
}

/// `s` for an error message: control characters blanked, at most 80 bytes (then `...`).
pub(crate) fn short(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.len() > 80 {
        let mut cut = 80;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}...", &s[..cut])
    } else {
        s
    }
}

/// Splits a header value on commas that are outside quotes and angle brackets.
pub fn split_list(v: &str) -> impl Iterator<Item = &str> {
    let mut parts = Vec::new();
    let (mut depth, mut quoted, mut start) = (0i32, false, 0usize);
    for (i, c) in v.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '<' if !quoted => depth += 1,
            '>' if !quoted => depth -= 1,
            ',' if !quoted && depth <= 0 => {
                parts.push(v[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(v[start..].trim());
    parts.into_iter().filter(|p| !p.is_empty())
}

/// Value of a `;name=value` parameter in a header value (outside `<...>`).
pub fn param<'a>(v: &'a str, name: &str) -> Option<&'a str> {
    let tail = match v.rfind('>') {
        Some(i) => &v[i + 1..],
        None => v,
    };
    tail.split(';').skip(1).find_map(|p| {
        let (k, val) = p.split_once('=').unwrap_or((p, ""));
        k.trim().eq_ignore_ascii_case(name).then(|| val.trim())
    })
}

/// `tag` parameter of a From/To value.
pub fn name_addr_tag(v: &str) -> Option<&str> {
    param(v, "tag").filter(|t| !t.is_empty())
}

/// The URI inside a name-addr (`"x" <sip:a@b>;p` gives `sip:a@b`) or an addr-spec. The URI
/// ends at the first `>` after the `<` that opens it (a URI holds no bare `>`), not at the
/// last one: a parameter after it may quote angle brackets (RFC 5626's `+sip.instance=
/// "<urn:uuid:...>"`), as may a quoted display name before it.
pub fn name_addr_uri(v: &str) -> &str {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in v.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '<' if !quoted => {
                let rest = &v[i + 1..];
                return match rest.find('>') {
                    Some(end) => rest[..end].trim(),
                    None => rest.trim(),
                };
            }
            _ => {}
        }
    }
    v.split(';').next().unwrap_or(v).trim()
}

/// An IP address as the host of a SIP URI or a Via sent-by: an IPv6 address as a bracketed
/// reference (`[2001:db8::1]`, RFC 3261 section 25.1), an IPv4 address as is.
pub fn uri_host(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// The user part of a SIP URI (`sip:alice@host` gives `alice`).
pub fn uri_user(uri: &str) -> Option<&str> {
    let rest = uri.split_once(':').map(|(_, r)| r).unwrap_or(uri);
    let at = rest.find('@')?;
    let user = rest[..at].split(':').next().unwrap_or("");
    (!user.is_empty()).then_some(user)
}

/// The 503 a client transaction receives when its request could not be sent (RFC 3261
/// §8.1.3.1: a transport error is treated as a 503 Service Unavailable): built from the
/// request `data` (its Vias, From, To, Call-ID and CSeq), to be handed to the engine as if the
/// next hop had answered. `None` for a response, an ACK (which has no answer) or a message
/// that does not parse.
pub fn transport_failure_response(data: &[u8]) -> Option<Bytes> {
    let msg = SipMessage::parse(data).ok()?;
    if matches!(msg.method()?, Method::Ack) {
        return None;
    }
    let mut w = MessageWriter::response(503, "Service Unavailable");
    for v in msg.header_values(&HeaderName::Via) {
        w.header("Via", v);
    }
    for name in [
        HeaderName::From,
        HeaderName::To,
        HeaderName::CallId,
        HeaderName::CSeq,
    ] {
        w.header(name.as_str(), msg.header(&name)?);
    }
    w.header("Warning", TRANSPORT_FAILURE_WARNING);
    Some(w.finish(b""))
}

/// The Warning of [`transport_failure_response`]'s 503, by which the engine tells a transport
/// failure from a next hop's own 503.
pub const TRANSPORT_FAILURE_WARNING: &str = "399 sbc \"the next hop could not be reached\"";

/// Writes SIP messages into a byte buffer.
#[derive(Debug, Default)]
pub struct MessageWriter {
    buf: String,
}

impl MessageWriter {
    /// Starts a request.
    pub fn request(method: &Method, uri: &str) -> Self {
        let mut buf = String::with_capacity(768);
        let _ = write!(buf, "{method} {uri} SIP/2.0\r\n");
        Self { buf }
    }

    /// Starts a response.
    pub fn response(code: u16, reason: &str) -> Self {
        let mut buf = String::with_capacity(768);
        let _ = write!(buf, "SIP/2.0 {code} {reason}\r\n");
        Self { buf }
    }

    /// Adds one header line.
    pub fn header(&mut self, name: &str, value: impl fmt::Display) -> &mut Self {
        let _ = write!(self.buf, "{name}: {value}\r\n");
        self
    }

    /// Ends the headers with Content-Length and appends the body.
    pub fn finish(mut self, body: &[u8]) -> Bytes {
        let _ = write!(self.buf, "Content-Length: {}\r\n\r\n", body.len());
        let mut out = self.buf.into_bytes();
        out.extend_from_slice(body);
        Bytes::from(out)
    }
}

/// A canonical reason phrase for the codes the engine generates.
pub fn reason_for(code: u16) -> &'static str {
    match code {
        100 => "Trying",
        180 => "Ringing",
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        416 => "Unsupported URI Scheme",
        420 => "Bad Extension",
        422 => "Session Interval Too Small",
        480 => "Temporarily Unavailable",
        481 => "Call/Transaction Does Not Exist",
        482 => "Loop Detected",
        483 => "Too Many Hops",
        486 => "Busy Here",
        487 => "Request Terminated",
        488 => "Not Acceptable Here",
        489 => "Bad Event",
        491 => "Request Pending",
        500 => "Server Internal Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        513 => "Message Too Large",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_name_addr_s_uri_ends_at_its_own_closing_bracket() {
        use super::name_addr_uri;
        assert_eq!(name_addr_uri("\"x\" <sip:a@b>;p"), "sip:a@b");
        assert_eq!(name_addr_uri("sip:a@b;p=1"), "sip:a@b");
        // Linphone's Contact (RFC 5626): the instance id quotes angle brackets.
        assert_eq!(
            name_addr_uri(
                "<sip:bob@127.0.0.1:25778;transport=udp>;+sip.instance=\"<urn:uuid:87a6>\""
            ),
            "sip:bob@127.0.0.1:25778;transport=udp"
        );
        assert_eq!(name_addr_uri("\"a <b> \\\" c\" <sip:x@y>"), "sip:x@y");
        assert_eq!(name_addr_uri("<sip:open@y"), "sip:open@y");
    }

    use super::*;

    const INVITE: &str = "INVITE sip:bob@example.com SIP/2.0\r\n\
        v: SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bK776asdhds, SIP/2.0/UDP 10.0.0.9;branch=z9hG4bKx\r\n\
        Max-Forwards: 70\r\n\
        To: Bob <sip:bob@example.com>\r\n\
        From: \"Alice, A\" <sip:alice@example.com;x=y>;tag=1928301774\r\n\
        i: a84b4c76e66710@pc33\r\n\
        CSeq: 314159 INVITE\r\n\
        Contact: <sip:alice@10.0.0.1:5060;transport=udp>;expires=60\r\n\
        Content-Type: application/sdp\r\n\
        l: 4\r\n\r\nv=0\r\nextra";

    #[test]
    fn parses_compact_forms_and_lists() {
        let m = SipMessage::parse(INVITE.as_bytes()).expect("parses");
        assert_eq!(m.method(), Some(&Method::Invite));
        assert_eq!(m.call_id(), Some("a84b4c76e66710@pc33"));
        assert_eq!(m.top_via_branch(), Some("z9hG4bK776asdhds"));
        assert_eq!(m.header_values(&HeaderName::Via).count(), 2);
        assert_eq!(m.from_tag(), Some("1928301774"));
        assert_eq!(m.to_tag(), None);
        assert_eq!(
            m.cseq(),
            Some(CSeq {
                seq: 314159,
                method: Method::Invite
            })
        );
        assert_eq!(
            m.contact_uri(),
            Some("sip:alice@10.0.0.1:5060;transport=udp")
        );
        assert_eq!(&m.body[..], b"v=0\r");
        assert!(m.answerable());
    }

    #[test]
    fn content_length_beyond_body_is_malformed() {
        let bad = INVITE.replace("l: 4", "l: 400");
        assert!(matches!(
            SipMessage::parse(bad.as_bytes()),
            Err(ParseError::Malformed(_))
        ));
        let neg = INVITE.replace("l: 4", "l: -1");
        assert!(SipMessage::parse(neg.as_bytes()).is_err());
    }

    #[test]
    fn garbage_is_refused() {
        assert!(SipMessage::parse(b"\x00\x01\x02garbage").is_err());
        assert!(SipMessage::parse(b"").is_err());
        assert!(SipMessage::parse("INVITE sip:a SIP/2.0\r\nVia: x\r\n".as_bytes()).is_err());
    }

    #[test]
    fn helpers() {
        assert_eq!(uri_user("sip:alice@h:5060"), Some("alice"));
        assert_eq!(uri_user("sip:h:5060"), None);
        assert_eq!(name_addr_uri("sip:a@b;tag=1"), "sip:a@b");
        assert_eq!(param("SIP/2.0/UDP h;branch=z9;rport", "rport"), Some(""));
        assert_eq!(split_list("<sip:a,b>;x, <sip:c>").count(), 2);
    }

    #[test]
    fn writer_sets_content_length() {
        let mut w = MessageWriter::response(200, "OK");
        w.header("Call-ID", "x");
        let b = w.finish(b"abc");
        assert!(b.ends_with(b"Content-Length: 3\r\n\r\nabc"));
    }
}
