//! Tiny raw SIP clients (UDP and TCP) and a lenient SIP message parser, for malformed input,
//! precise checks, and small hand-written user agents that count what they receive.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// A UDP socket that sends raw bytes and collects datagrams with timeouts.
#[derive(Debug)]
pub struct RawUdp {
    sock: UdpSocket,
}

impl RawUdp {
    /// Binds an ephemeral port on `ip`.
    ///
    /// # Panics
    /// If the bind fails.
    #[must_use]
    pub fn bind(ip: IpAddr) -> Self {
        Self::bind_addr(SocketAddr::new(ip, 0))
    }

    /// Binds exactly `addr` (e.g. to play a session-agent on its configured port).
    ///
    /// # Panics
    /// If the bind fails.
    #[must_use]
    pub fn bind_addr(addr: SocketAddr) -> Self {
        let sock = UdpSocket::bind(addr).unwrap_or_else(|e| panic!("cannot bind UDP {addr}: {e}"));
        Self { sock }
    }

    /// The bound address.
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.sock.local_addr().expect("bound socket has an address")
    }

    /// Sends one datagram.
    ///
    /// # Panics
    /// If sending fails.
    pub fn send_to(&self, bytes: &[u8], to: SocketAddr) {
        self.sock
            .send_to(bytes, to)
            .unwrap_or_else(|e| panic!("send {} bytes to {to}: {e}", bytes.len()));
    }

    /// Waits up to `timeout` for one datagram.
    #[must_use]
    pub fn recv(&self, timeout: Duration) -> Option<(Vec<u8>, SocketAddr)> {
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; 70_000];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.sock
                .set_read_timeout(Some(left))
                .expect("set_read_timeout");
            match self.sock.recv_from(&mut buf) {
                Ok((n, from)) => return Some((buf[..n].to_vec(), from)),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return None
                }
                // ICMP port unreachable from an earlier send shows up here on Linux: ignore.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
                Err(e) => panic!("recv_from: {e}"),
            }
        }
    }

    /// Collects every datagram arriving within `window`.
    #[must_use]
    pub fn recv_all(&self, window: Duration) -> Vec<(Vec<u8>, SocketAddr)> {
        let deadline = Instant::now() + window;
        let mut out = Vec::new();
        while let Some(d) = self.recv(deadline.saturating_duration_since(Instant::now())) {
            out.push(d);
        }
        out
    }

    /// Waits up to `timeout` for a datagram that parses as SIP and satisfies `pred`; other
    /// datagrams are returned too, in `skipped`, so a caller can assert on them.
    #[must_use]
    pub fn recv_sip_until(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&SipMsg) -> bool,
        skipped: &mut Vec<SipMsg>,
    ) -> Option<(SipMsg, SocketAddr)> {
        let deadline = Instant::now() + timeout;
        while let Some((bytes, from)) =
            self.recv(deadline.saturating_duration_since(Instant::now()))
        {
            if let Some(msg) = SipMsg::parse(&bytes) {
                if pred(&msg) {
                    return Some((msg, from));
                }
                skipped.push(msg);
            }
        }
        None
    }
}

/// A TCP connection that sends raw bytes and collects SIP messages framed by Content-Length.
#[derive(Debug)]
pub struct RawTcp {
    stream: TcpStream,
    buf: Vec<u8>,
    closed: bool,
}

impl RawTcp {
    /// Connects to `to` from an ephemeral port on `local_ip`'s side (the kernel picks the
    /// source address for loopback destinations).
    ///
    /// # Panics
    /// If the connection fails within 5 s.
    #[must_use]
    pub fn connect(to: SocketAddr) -> Self {
        let stream = TcpStream::connect_timeout(&to, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("cannot connect TCP to {to}: {e}"));
        stream.set_nodelay(true).expect("set_nodelay");
        Self {
            stream,
            buf: Vec::new(),
            closed: false,
        }
    }

    /// The local address.
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.stream
            .local_addr()
            .expect("connected socket has an address")
    }

    /// Writes bytes; a write error (the peer closed) is returned, not a panic.
    ///
    /// # Errors
    /// The I/O error of the write.
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Whether the peer closed the connection (seen by an earlier read).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Reads for up to `window` and returns every complete SIP message received, skipping bare
    /// CRLF keep-alive pongs. Stops early when the peer closes.
    #[must_use]
    pub fn recv_messages(&mut self, window: Duration) -> Vec<SipMsg> {
        let deadline = Instant::now() + window;
        let mut chunk = [0u8; 16384];
        while !self.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.stream
                .set_read_timeout(Some(left))
                .expect("set_read_timeout");
            match self.stream.read(&mut chunk) {
                Ok(0) => self.closed = true,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
                Err(_) => self.closed = true,
            }
        }
        let mut out = Vec::new();
        loop {
            let start = self
                .buf
                .iter()
                .position(|b| *b != b'\r' && *b != b'\n')
                .unwrap_or(self.buf.len());
            self.buf.drain(..start);
            let Some(head_end) = find(&self.buf, b"\r\n\r\n") else {
                break;
            };
            let head = String::from_utf8_lossy(&self.buf[..head_end]).into_owned();
            let body_len = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    let name = name.trim();
                    (name.eq_ignore_ascii_case("content-length") || name == "l")
                        .then(|| value.trim().parse::<usize>().ok())
                        .flatten()
                })
                .unwrap_or(0);
            let total = head_end + 4 + body_len;
            if self.buf.len() < total {
                break;
            }
            let bytes: Vec<u8> = self.buf.drain(..total).collect();
            if let Some(msg) = SipMsg::parse(&bytes) {
                out.push(msg);
            }
        }
        out
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A leniently parsed SIP message: enough to judge responses and requests in tests. It never
/// validates; it only splits the start line, header lines and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SipMsg {
    /// The first line, without CRLF.
    pub start_line: String,
    /// Header lines as (name, value), names as received, values trimmed, in order.
    pub headers: Vec<(String, String)>,
    /// The bytes after the blank line.
    pub body: Vec<u8>,
}

/// Compact header forms (RFC 3261 7.3.3) and their full names.
const COMPACT: [(&str, &str); 8] = [
    ("i", "call-id"),
    ("m", "contact"),
    ("e", "content-encoding"),
    ("l", "content-length"),
    ("c", "content-type"),
    ("f", "from"),
    ("t", "to"),
    ("v", "via"),
];

fn canonical(name: &str) -> String {
    let lower = name.trim().to_ascii_lowercase();
    COMPACT
        .iter()
        .find(|(short, _)| *short == lower)
        .map_or(lower, |(_, long)| (*long).to_owned())
}

impl SipMsg {
    /// Splits a message; `None` if there is no start line that looks like SIP
    /// (`SIP/2.0 NNN ...` or `METHOD URI SIP/2.0`).
    #[must_use]
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let text_end = find(bytes, b"\r\n\r\n");
        let (head, body) = match text_end {
            Some(i) => (&bytes[..i], bytes[i + 4..].to_vec()),
            None => (bytes, Vec::new()),
        };
        let head = String::from_utf8_lossy(head);
        let head = head.trim_start_matches(['\r', '\n']);
        let mut lines = head.split("\r\n");
        let start_line = lines.next()?.to_owned();
        let looks_like_sip = start_line.starts_with("SIP/2.0 ") || start_line.ends_with(" SIP/2.0");
        if !looks_like_sip {
            return None;
        }
        let mut headers: Vec<(String, String)> = Vec::new();
        for line in lines {
            if line.starts_with([' ', '\t']) {
                if let Some(last) = headers.last_mut() {
                    last.1.push(' ');
                    last.1.push_str(line.trim());
                }
                continue;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.push((name.trim().to_owned(), value.trim().to_owned()));
            }
        }
        Some(Self {
            start_line,
            headers,
            body,
        })
    }

    /// The status code of a response.
    #[must_use]
    pub fn status(&self) -> Option<u16> {
        let rest = self.start_line.strip_prefix("SIP/2.0 ")?;
        rest.get(..3)?.parse().ok()
    }

    /// Whether this is a response.
    #[must_use]
    pub fn is_response(&self) -> bool {
        self.status().is_some()
    }

    /// The method of a request.
    #[must_use]
    pub fn method(&self) -> Option<&str> {
        if self.is_response() {
            return None;
        }
        self.start_line.split(' ').next()
    }

    /// The first value of a header, by full or compact name, ignoring case.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        let want = canonical(name);
        self.headers
            .iter()
            .find(|(n, _)| canonical(n) == want)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of a header (repeated lines), by full or compact name, ignoring case.
    #[must_use]
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        let want = canonical(name);
        self.headers
            .iter()
            .filter(|(n, _)| canonical(n) == want)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The method named in CSeq (`INVITE` in `CSeq: 1 INVITE`).
    #[must_use]
    pub fn cseq_method(&self) -> Option<&str> {
        self.header("cseq")?.split_whitespace().nth(1)
    }

    /// The `branch` parameter of the top Via.
    #[must_use]
    pub fn top_branch(&self) -> Option<&str> {
        let via = self.header("via")?;
        let via = via.split(',').next()?;
        via.split(';').find_map(|p| {
            let (k, v) = p.split_once('=')?;
            k.trim().eq_ignore_ascii_case("branch").then_some(v.trim())
        })
    }

    /// The `tag` parameter of a From or To header value.
    #[must_use]
    pub fn tag(&self, header: &str) -> Option<&str> {
        let value = self.header(header)?;
        // Parameters after the URI: after '>' when the URI is bracketed.
        let params = value.rsplit_once('>').map_or(value, |(_, p)| p);
        params.split(';').find_map(|p| {
            let (k, v) = p.split_once('=')?;
            k.trim().eq_ignore_ascii_case("tag").then_some(v.trim())
        })
    }
}

/// A response to `request` with `code` and `reason`, copying Via, From, To (adding `to_tag` if
/// the To has no tag), Call-ID and CSeq, the way a UAS answers (RFC 3261 8.2.6).
#[must_use]
pub fn response_to(request: &SipMsg, code: u16, reason: &str, to_tag: &str) -> Vec<u8> {
    let mut out = format!("SIP/2.0 {code} {reason}\r\n");
    for via in request.header_all("via") {
        out.push_str(&format!("Via: {via}\r\n"));
    }
    let from = request.header("from").unwrap_or_default();
    let to = request.header("to").unwrap_or_default();
    let to = if request.tag("to").is_some() || code == 100 {
        to.to_owned()
    } else {
        format!("{to};tag={to_tag}")
    };
    out.push_str(&format!("From: {from}\r\n"));
    out.push_str(&format!("To: {to}\r\n"));
    out.push_str(&format!(
        "Call-ID: {}\r\n",
        request.header("call-id").unwrap_or_default()
    ));
    out.push_str(&format!(
        "CSeq: {}\r\n",
        request.header("cseq").unwrap_or_default()
    ));
    if (200..300).contains(&code) || (101..200).contains(&code) {
        if let Some(to_uri) = request.start_line.split(' ').nth(1) {
            out.push_str(&format!("Contact: <{to_uri}>\r\n"));
        }
    }
    out.push_str("Content-Length: 0\r\n\r\n");
    out.into_bytes()
}

/// A well-formed out-of-dialog request from `local` to `target` over `transport` (`UDP`/`TCP`),
/// with the given method, Call-ID, Via branch and extra header lines (each without CRLF).
#[must_use]
pub fn request(
    method: &str,
    local: SocketAddr,
    target: SocketAddr,
    transport: &str,
    call_id: &str,
    branch: &str,
    extra_headers: &[&str],
) -> Vec<u8> {
    let mut out = format!(
        "{method} sip:service@{target} SIP/2.0\r\n\
         Via: SIP/2.0/{transport} {local};branch={branch};rport\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:e2e@{local}>;tag=e2e-{call_id}\r\n\
         To: <sip:service@{target}>\r\n\
         Call-ID: {call_id}\r\n\
         CSeq: 1 {method}\r\n\
         Contact: <sip:e2e@{local}>\r\n"
    );
    for h in extra_headers {
        out.push_str(h);
        out.push_str("\r\n");
    }
    out.push_str("Content-Length: 0\r\n\r\n");
    out.into_bytes()
}

/// The ACK for a non-2xx final `response` to an INVITE sent with `request` (same branch,
/// To from the response; RFC 3261 17.1.1.3).
#[must_use]
pub fn ack_for(request: &[u8], response: &SipMsg) -> Vec<u8> {
    let req = SipMsg::parse(request).expect("our own request parses");
    let uri = req.start_line.split(' ').nth(1).unwrap_or_default();
    let cseq_num = req
        .header("cseq")
        .and_then(|c| c.split_whitespace().next())
        .unwrap_or("1");
    format!(
        "ACK {uri} SIP/2.0\r\nVia: {}\r\nMax-Forwards: 70\r\nFrom: {}\r\nTo: {}\r\nCall-ID: {}\r\nCSeq: {cseq_num} ACK\r\nContent-Length: 0\r\n\r\n",
        req.header("via").unwrap_or_default(),
        req.header("from").unwrap_or_default(),
        response.header("to").unwrap_or_default(),
        req.header("call-id").unwrap_or_default(),
    )
    .into_bytes()
}
