//! Just enough SIP message handling for a test endpoint: a lenient parser, a writer that sets
//! Content-Length, TCP stream framing, and the header helpers the call flows need.

use std::fmt::Write as _;

use bytes::{Bytes, BytesMut};

/// The first line of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StartLine {
    Request { method: String, uri: String },
    Response { code: u16 },
}

/// A parsed SIP message. Header names are stored in their long, lower-case form.
#[derive(Debug, Clone)]
pub(crate) struct Message {
    pub(crate) start: StartLine,
    pub(crate) headers: Vec<(String, String)>,
    /// The body (an SDP), cut at Content-Length when there is one.
    pub(crate) body: Vec<u8>,
}

fn long_name(name: &str) -> String {
    let lower = name.trim().to_ascii_lowercase();
    match lower.as_str() {
        "v" => "via".into(),
        "f" => "from".into(),
        "t" => "to".into(),
        "i" => "call-id".into(),
        "m" => "contact".into(),
        "l" => "content-length".into(),
        "c" => "content-type".into(),
        "k" => "supported".into(),
        _ => lower,
    }
}

impl Message {
    /// Parses one complete message (a datagram or a framed TCP message).
    pub(crate) fn parse(data: &[u8]) -> Option<Self> {
        let head_end = find_head_end(data)?;
        let head = std::str::from_utf8(&data[..head_end]).ok()?;
        let mut lines = head.split("\r\n").filter(|l| !l.is_empty());
        let first = lines.next()?;
        let start = if let Some(rest) = first.strip_prefix("SIP/2.0 ") {
            let code = rest.split_whitespace().next()?.parse().ok()?;
            StartLine::Response { code }
        } else {
            let mut parts = first.split_whitespace();
            let method = parts.next()?.to_owned();
            let uri = parts.next()?.to_owned();
            if parts.next()? != "SIP/2.0" {
                return None;
            }
            StartLine::Request { method, uri }
        };
        let mut headers: Vec<(String, String)> = Vec::new();
        for line in lines {
            if line.starts_with([' ', '\t']) {
                // Folded continuation line.
                if let Some(last) = headers.last_mut() {
                    last.1.push(' ');
                    last.1.push_str(line.trim());
                }
                continue;
            }
            let (name, value) = line.split_once(':')?;
            headers.push((long_name(name), value.trim().to_owned()));
        }
        let rest = &data[head_end + 4..];
        let length = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(rest.len())
            .min(rest.len());
        Some(Self {
            start,
            headers,
            body: rest[..length].to_vec(),
        })
    }

    pub(crate) fn method(&self) -> Option<&str> {
        match &self.start {
            StartLine::Request { method, .. } => Some(method),
            StartLine::Response { .. } => None,
        }
    }

    pub(crate) fn code(&self) -> Option<u16> {
        match self.start {
            StartLine::Response { code } => Some(code),
            StartLine::Request { .. } => None,
        }
    }

    /// The first value of a header (long lower-case name).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// All values of a header, comma-separated lists split (outside `<>` and quotes).
    pub(crate) fn header_values(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, v)| split_list(v))
            .collect()
    }

    pub(crate) fn call_id(&self) -> Option<&str> {
        self.header("call-id")
    }

    /// `(number, method)` of CSeq.
    pub(crate) fn cseq(&self) -> Option<(u32, &str)> {
        let v = self.header("cseq")?;
        let mut parts = v.split_whitespace();
        let n = parts.next()?.parse().ok()?;
        Some((n, parts.next()?))
    }

    pub(crate) fn tag_of_from(&self) -> Option<&str> {
        self.header("from").and_then(|v| param(v, "tag"))
    }

    pub(crate) fn tag_of_to(&self) -> Option<&str> {
        self.header("to").and_then(|v| param(v, "tag"))
    }

    /// The branch of the top Via.
    pub(crate) fn branch(&self) -> Option<&str> {
        self.header_values("via")
            .first()
            .and_then(|v| param(v, "branch"))
    }

    /// The URI of the first Contact.
    pub(crate) fn contact_uri(&self) -> Option<String> {
        self.header_values("contact")
            .first()
            .map(|v| name_addr_uri(v).to_owned())
    }
}

/// Splits a header value on commas that are not inside `<...>` or quotes.
pub(crate) fn split_list(v: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut quoted, mut start) = (0i32, false, 0usize);
    for (i, c) in v.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '<' if !quoted => depth += 1,
            '>' if !quoted => depth -= 1,
            ',' if !quoted && depth <= 0 => {
                out.push(v[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(v[start..].trim());
    out.retain(|s| !s.is_empty());
    out
}

/// The URI of a name-addr (`"x" <sip:a@b>;tag=1` → `sip:a@b`) or addr-spec (params cut).
pub(crate) fn name_addr_uri(v: &str) -> &str {
    if let (Some(a), Some(b)) = (v.find('<'), v.find('>')) {
        if a < b {
            return &v[a + 1..b];
        }
    }
    v.split(';').next().unwrap_or(v).trim()
}

/// A header parameter (after the URI's closing `>` if there is one).
pub(crate) fn param<'a>(v: &'a str, name: &str) -> Option<&'a str> {
    let after = v.rfind('>').map_or(v, |i| &v[i + 1..]);
    after.split(';').skip(1).find_map(|p| {
        let (k, val) = p.split_once('=').unwrap_or((p, ""));
        k.trim().eq_ignore_ascii_case(name).then(|| val.trim())
    })
}

/// The header value without its `tag` parameter.
pub(crate) fn strip_tag(v: &str) -> String {
    let split_at = v.rfind('>').map_or(0, |i| i + 1);
    let (addr, params) = v.split_at(split_at);
    let mut out = addr.to_owned();
    for p in params.split(';').filter(|p| !p.trim().is_empty()) {
        let key = p.split('=').next().unwrap_or("").trim();
        if !key.eq_ignore_ascii_case("tag") {
            out.push(';');
            out.push_str(p.trim());
        }
    }
    out
}

pub(crate) fn find_head_end(data: &[u8]) -> Option<usize> {
    data.windows(4).position(|w| w == b"\r\n\r\n")
}

/// Builds a message; [`Writer::finish`] adds Content-Length and the body.
pub(crate) struct Writer {
    text: String,
}

impl Writer {
    pub(crate) fn request(method: &str, uri: &str) -> Self {
        Self {
            text: format!("{method} {uri} SIP/2.0\r\n"),
        }
    }

    pub(crate) fn response(code: u16) -> Self {
        Self {
            text: format!("SIP/2.0 {code} {}\r\n", reason(code)),
        }
    }

    pub(crate) fn header(&mut self, name: &str, value: impl std::fmt::Display) -> &mut Self {
        let _ = write!(self.text, "{name}: {value}\r\n");
        self
    }

    pub(crate) fn finish(&mut self, body: &[u8]) -> Bytes {
        let _ = write!(self.text, "Content-Length: {}\r\n\r\n", body.len());
        let mut out = BytesMut::with_capacity(self.text.len() + body.len());
        out.extend_from_slice(self.text.as_bytes());
        out.extend_from_slice(body);
        out.freeze()
    }
}

/// A response to `req`: its Via, From, Call-ID and CSeq copied, To with `to_tag` added if it
/// has none.
pub(crate) fn response_to(req: &Message, code: u16, to_tag: Option<&str>) -> Writer {
    let mut w = Writer::response(code);
    for (name, value) in &req.headers {
        if name == "via" || name == "record-route" && (101..300).contains(&code) {
            let shown = if name == "via" { "Via" } else { "Record-Route" };
            w.header(shown, value);
        }
    }
    if let Some(from) = req.header("from") {
        w.header("From", from);
    }
    if let Some(to) = req.header("to") {
        match (param(to, "tag"), to_tag) {
            (None, Some(tag)) => w.header("To", format_args!("{to};tag={tag}")),
            _ => w.header("To", to),
        };
    }
    if let Some(c) = req.call_id() {
        w.header("Call-ID", c);
    }
    if let Some(c) = req.header("cseq") {
        w.header("CSeq", c);
    }
    w
}

pub(crate) fn reason(code: u16) -> &'static str {
    match code {
        100 => "Trying",
        180 => "Ringing",
        183 => "Session Progress",
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        480 => "Temporarily Unavailable",
        481 => "Call/Transaction Does Not Exist",
        486 => "Busy Here",
        487 => "Request Terminated",
        500 => "Server Internal Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        603 => "Decline",
        _ => "Lab",
    }
}

/// Outcome of [`Framer::next`].
#[derive(Debug)]
pub(crate) enum Frame {
    Message(Bytes),
    /// A CRLFCRLF keep-alive ping (RFC 5626 section 3.5.1): answered with CRLF.
    Ping,
    /// A lone CRLF: a keep-alive's answer (or half a ping split across reads), not answered.
    Pong,
}

/// Splits a TCP byte stream into messages by Content-Length.
#[derive(Default)]
pub(crate) struct Framer {
    buf: BytesMut,
}

/// Largest message the framer accepts before it declares the stream broken.
const MAX_MESSAGE: usize = 65_535;

impl Framer {
    pub(crate) fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete frame, `Ok(None)` if more bytes are needed, `Err` if the stream is
    /// not SIP.
    pub(crate) fn next(&mut self) -> Result<Option<Frame>, &'static str> {
        if self.buf.starts_with(b"\r\n\r\n") {
            let _ = self.buf.split_to(4);
            return Ok(Some(Frame::Ping));
        }
        if self.buf.starts_with(b"\r\n") {
            let _ = self.buf.split_to(2);
            return Ok(Some(Frame::Pong));
        }
        let Some(head_end) = find_head_end(&self.buf) else {
            return if self.buf.len() > MAX_MESSAGE {
                Err("header too long")
            } else {
                Ok(None)
            };
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]);
        let mut length = None;
        for line in head.split("\r\n").skip(1) {
            if let Some((name, value)) = line.split_once(':') {
                if long_name(name) == "content-length" {
                    length = Some(
                        value
                            .trim()
                            .parse::<usize>()
                            .map_err(|_| "bad Content-Length")?,
                    );
                }
            }
        }
        let length = length.ok_or("no Content-Length on a stream")?;
        let total = head_end + 4 + length;
        if total > MAX_MESSAGE {
            return Err("message too large");
        }
        if self.buf.len() < total {
            return Ok(None);
        }
        Ok(Some(Frame::Message(self.buf.split_to(total).freeze())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_compact_and_params() {
        let raw = b"SIP/2.0 200 OK\r\nv: SIP/2.0/UDP 1.2.3.4;branch=z9hG4bKx\r\nf: <sip:a@b>;tag=A\r\nt: \"B\" <sip:b@c;lr>;tag=B\r\ni: cid\r\nCSeq: 2 BYE\r\nm: <sip:x@1.2.3.4:5>\r\nl: 3\r\n\r\nabcdef";
        let m = Message::parse(raw).expect("parses");
        assert_eq!(m.code(), Some(200));
        assert_eq!(m.branch(), Some("z9hG4bKx"));
        assert_eq!(m.tag_of_from(), Some("A"));
        assert_eq!(m.tag_of_to(), Some("B"));
        assert_eq!(m.call_id(), Some("cid"));
        assert_eq!(m.cseq(), Some((2, "BYE")));
        assert_eq!(m.contact_uri().as_deref(), Some("sip:x@1.2.3.4:5"));
        assert_eq!(m.body, b"abc", "cut at Content-Length");
        assert_eq!(
            strip_tag("\"B\" <sip:b@c;lr>;tag=B;x=1"),
            "\"B\" <sip:b@c;lr>;x=1"
        );
    }

    #[test]
    fn frames_a_stream() {
        let mut f = Framer::default();
        f.push(b"\r\n\r\nOPTIONS sip:a SIP/2.0\r\nContent-Length: 2\r\n\r\nhi");
        f.push(b"BYE sip:a SIP/2.0\r\nl: 0\r\n");
        assert!(matches!(f.next(), Ok(Some(Frame::Ping))));
        assert!(matches!(f.next(), Ok(Some(Frame::Message(m))) if m.ends_with(b"hi")));
        assert!(matches!(f.next(), Ok(None)));
        f.push(b"\r\n");
        assert!(matches!(f.next(), Ok(Some(Frame::Message(_)))));
        f.push(b"\r\n");
        assert!(matches!(f.next(), Ok(Some(Frame::Pong))));
    }
}
