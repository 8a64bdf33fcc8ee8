//! A client of rtpengine's NG control protocol: `<cookie> <bencoded dictionary>` over UDP,
//! the reply carrying the same cookie.
//!
//! Bencode is [`serde_bencode`]'s: its [`Value`] decodes dictionaries whatever the order of
//! their keys (rtpengine's replies are not sorted) and its encoder writes them sorted, as the
//! format wants. Before a reply reaches it, [`decode`] checks the datagram's structure in one
//! pass (complete, no trailing bytes, nested at most [`MAX_DEPTH`] deep), so a hostile or
//! broken datagram cannot make the recursive decoder run out of stack.
//!
//! Requests are retransmitted with the same cookie when no reply comes in time: rtpengine
//! remembers the replies it sent by cookie and answers a retransmission with the same reply
//! instead of running the command twice. Each client draws a random cookie prefix, so two
//! clients never share a cookie.
//!
//! ```no_run
//! # fn demo() -> Result<(), sbc_lab::media::ng::NgError> {
//! use sbc_lab::media::ng::{NgClient, NgOptions};
//!
//! let mut ng = NgClient::new("127.0.0.1:2223".parse().unwrap())?;
//! ng.ping()?;
//! let offer_sdp = "v=0\r\n..."; // the caller's SDP
//! let to_callee = ng.offer("call-1", "tag-a", offer_sdp, &NgOptions::anchoring())?;
//! let answer_sdp = "v=0\r\n..."; // the callee's SDP
//! let to_caller = ng.answer("call-1", "tag-a", "tag-b", answer_sdp, &NgOptions::anchoring())?;
//! ng.delete("call-1", "tag-a")?;
//! # let _ = (to_callee, to_caller); Ok(()) }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

pub use serde_bencode::value::Value;

/// A bencoded dictionary, as [`serde_bencode`] holds it (keys are byte strings).
pub type Dict = HashMap<Vec<u8>, Value>;

/// Deepest nesting of lists and dictionaries a reply may have (rtpengine's `delete` statistics
/// nest about eight deep).
pub const MAX_DEPTH: usize = 32;

/// Largest datagram sent or received (UDP's limit).
const MAX_DATAGRAM: usize = 65_535;

/// Why an NG exchange failed.
#[derive(Debug)]
pub enum NgError {
    /// The socket failed.
    Io(io::Error),
    /// No reply with our cookie after every attempt.
    Timeout {
        /// The command (`ping`, `offer`, ...).
        command: String,
        /// How many times it was sent.
        attempts: u32,
    },
    /// A reply that is not `<cookie> <dictionary>` or not bencode.
    Malformed(String),
    /// `result: error` (rtpengine's `error-reason`).
    Failed {
        /// The command.
        command: String,
        /// The reason given.
        reason: String,
    },
    /// A reply without what the command must return (`pong`, an `sdp`).
    Unexpected {
        /// The command.
        command: String,
        /// What was wrong with the reply.
        what: String,
    },
}

impl fmt::Display for NgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "NG socket: {e}"),
            Self::Timeout { command, attempts } => {
                write!(f, "NG {command}: no reply after {attempts} attempts")
            }
            Self::Malformed(e) => write!(f, "malformed NG reply: {e}"),
            Self::Failed { command, reason } => write!(f, "NG {command} failed: {reason}"),
            Self::Unexpected { command, what } => write!(f, "NG {command}: {what}"),
        }
    }
}

impl std::error::Error for NgError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for NgError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// A byte-string value.
#[must_use]
pub fn string(s: impl AsRef<[u8]>) -> Value {
    Value::Bytes(s.as_ref().to_vec())
}

/// A list of byte strings.
#[must_use]
pub fn strings<S: AsRef<[u8]>>(items: &[S]) -> Value {
    Value::List(items.iter().map(string).collect())
}

/// The text of a byte-string value (`None` for another type or invalid UTF-8).
#[must_use]
pub fn as_str(v: &Value) -> Option<&str> {
    match v {
        Value::Bytes(b) => std::str::from_utf8(b).ok(),
        _ => None,
    }
}

/// `<cookie> <dictionary>`, the dictionary's keys sorted.
///
/// # Errors
/// Never for a dictionary of byte strings, integers, lists and dictionaries; the error is
/// [`serde_bencode`]'s.
pub fn encode(cookie: &str, dict: &Dict) -> Result<Vec<u8>, NgError> {
    let body = serde_bencode::to_bytes(&Value::Dict(dict.clone()))
        .map_err(|e| NgError::Malformed(format!("cannot encode: {e}")))?;
    let mut out = Vec::with_capacity(cookie.len() + 1 + body.len());
    out.extend_from_slice(cookie.as_bytes());
    out.push(b' ');
    out.extend_from_slice(&body);
    Ok(out)
}

/// Splits a datagram into its cookie and its dictionary (keys in any order).
///
/// # Errors
/// No space after the cookie, a value that is not one complete dictionary, nesting deeper
/// than [`MAX_DEPTH`], or bencode the decoder refuses.
pub fn decode(datagram: &[u8]) -> Result<(&str, Dict), NgError> {
    let space = datagram
        .iter()
        .position(|&b| b == b' ')
        .ok_or_else(|| NgError::Malformed("no space after the cookie".into()))?;
    let cookie = std::str::from_utf8(&datagram[..space])
        .map_err(|_| NgError::Malformed("cookie is not text".into()))?;
    let body = &datagram[space + 1..];
    check_structure(body, MAX_DEPTH)?;
    match serde_bencode::from_bytes::<Value>(body) {
        Ok(Value::Dict(d)) => Ok((cookie, d)),
        Ok(_) => Err(NgError::Malformed("the message is not a dictionary".into())),
        Err(e) => Err(NgError::Malformed(e.to_string())),
    }
}

/// One pass over the tokens of a bencoded value: it must be exactly one complete value,
/// nested at most `max_depth` deep.
fn check_structure(data: &[u8], max_depth: usize) -> Result<(), NgError> {
    let bad = |what: &str, at: usize| Err(NgError::Malformed(format!("{what} at byte {at}")));
    let (mut pos, mut depth) = (0usize, 0usize);
    loop {
        let Some(&b) = data.get(pos) else {
            return bad("truncated value", pos);
        };
        match b {
            b'i' => {
                let Some(end) = data[pos..].iter().position(|&c| c == b'e') else {
                    return bad("unterminated integer", pos);
                };
                pos += end + 1;
            }
            b'0'..=b'9' => {
                let Some(colon) = data[pos..].iter().position(|&c| c == b':') else {
                    return bad("string without ':'", pos);
                };
                let len: usize = match std::str::from_utf8(&data[pos..pos + colon])
                    .ok()
                    .and_then(|s| s.parse().ok())
                {
                    Some(n) => n,
                    None => return bad("bad string length", pos),
                };
                let start = pos + colon + 1;
                match start.checked_add(len) {
                    Some(end) if end <= data.len() => pos = end,
                    _ => return bad("string past the end", pos),
                }
            }
            b'l' | b'd' => {
                depth += 1;
                if depth > max_depth {
                    return bad("nested too deep", pos);
                }
                pos += 1;
            }
            b'e' if depth > 0 => {
                depth -= 1;
                pos += 1;
            }
            _ => return bad("unexpected byte", pos),
        }
        if depth == 0 {
            return if pos == data.len() {
                Ok(())
            } else {
                bad("trailing bytes", pos)
            };
        }
    }
}

/// A reply whose `result` is not `error`.
#[derive(Debug, Clone)]
pub struct Reply {
    /// `result`: `ok`, `pong`, ...
    pub result: String,
    /// `warning`, if rtpengine gave one (e.g. a `delete` of an unknown call).
    pub warning: Option<String>,
    /// Every key of the reply, as decoded.
    pub dict: Dict,
}

impl Reply {
    /// A key of the reply.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.dict.get(key.as_bytes())
    }

    /// A byte-string key of the reply, as text.
    #[must_use]
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(as_str)
    }

    /// The `sdp` of an `offer` or `answer` reply.
    #[must_use]
    pub fn sdp(&self) -> Option<&str> {
        self.get_str("sdp")
    }
}

/// The options of `offer` and `answer` besides the call's identifiers and SDP.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NgOptions {
    /// `replace`: e.g. `origin`, `session-connection`.
    pub replace: Vec<String>,
    /// `ICE`: `remove`, `force`, ...
    pub ice: Option<String>,
    /// `flags`: e.g. `trust-address`, `symmetric`.
    pub flags: Vec<String>,
    /// `transport-protocol`: e.g. `RTP/AVP`.
    pub transport_protocol: Option<String>,
    /// Any other key, as is.
    pub extra: Vec<(String, Value)>,
}

impl NgOptions {
    /// What an SBC does to a plain RTP call: `replace: [origin, session-connection]`,
    /// `ICE: remove`.
    #[must_use]
    pub fn anchoring() -> Self {
        Self {
            replace: vec!["origin".into(), "session-connection".into()],
            ice: Some("remove".into()),
            ..Self::default()
        }
    }

    fn add_to(&self, d: &mut Dict) {
        if !self.replace.is_empty() {
            d.insert(b"replace".to_vec(), strings(&self.replace));
        }
        if let Some(ice) = &self.ice {
            d.insert(b"ICE".to_vec(), string(ice));
        }
        if !self.flags.is_empty() {
            d.insert(b"flags".to_vec(), strings(&self.flags));
        }
        if let Some(t) = &self.transport_protocol {
            d.insert(b"transport-protocol".to_vec(), string(t));
        }
        for (k, v) in &self.extra {
            d.insert(k.as_bytes().to_vec(), v.clone());
        }
    }
}

/// An NG client: one UDP socket toward one rtpengine. Blocking: call it from a thread of its
/// own, or through `spawn_blocking` in async code.
#[derive(Debug)]
pub struct NgClient {
    socket: UdpSocket,
    server: SocketAddr,
    attempt_timeout: Duration,
    attempts: u32,
    prefix: String,
    seq: u64,
    buf: Vec<u8>,
}

impl NgClient {
    /// A client of the NG server at `server`, bound to an ephemeral port on the server's own
    /// address when that is a loopback address (else on the unspecified address); 1 s per
    /// attempt, 3 attempts.
    ///
    /// # Errors
    /// If the socket cannot be bound.
    pub fn new(server: SocketAddr) -> io::Result<Self> {
        let local = match server.ip() {
            ip if ip.is_loopback() => ip,
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let socket = UdpSocket::bind(SocketAddr::new(local, 0))?;
        Ok(Self {
            socket,
            server,
            attempt_timeout: Duration::from_secs(1),
            attempts: 3,
            prefix: format!("{:08x}", rand::random::<u32>()),
            seq: 0,
            buf: vec![0; MAX_DATAGRAM],
        })
    }

    /// Waits `per_attempt` for each reply, sending a request at most `attempts` times (≥ 1).
    pub fn set_timeout(&mut self, per_attempt: Duration, attempts: u32) {
        self.attempt_timeout = per_attempt.max(Duration::from_millis(1));
        self.attempts = attempts.max(1);
    }

    /// The NG server's address.
    #[must_use]
    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// Sends one command (the `command` key must be in `dict`) and returns its reply.
    ///
    /// # Errors
    /// A socket error, no reply in time, a malformed reply, or `result: error`.
    pub fn request(&mut self, dict: &Dict) -> Result<Reply, NgError> {
        let command = dict
            .get(b"command".as_slice())
            .and_then(as_str)
            .unwrap_or("?")
            .to_owned();
        self.seq += 1;
        let cookie = format!("{}_{}", self.prefix, self.seq);
        let datagram = encode(&cookie, dict)?;
        for _ in 0..self.attempts {
            self.socket.send_to(&datagram, self.server)?;
            let deadline = Instant::now() + self.attempt_timeout;
            while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                if left.is_zero() {
                    break;
                }
                self.socket.set_read_timeout(Some(left))?;
                let (n, from) = match self.socket.recv_from(&mut self.buf) {
                    Ok(r) => r,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock
                                | io::ErrorKind::TimedOut
                                | io::ErrorKind::ConnectionRefused
                        ) =>
                    {
                        // Timed out, or an ICMP error for an earlier datagram (the server is
                        // not up yet): the next attempt will tell.
                        if e.kind() == io::ErrorKind::ConnectionRefused {
                            std::thread::sleep(left.min(Duration::from_millis(20)));
                        }
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                if from != self.server {
                    continue;
                }
                let (got_cookie, reply) = decode(&self.buf[..n])?;
                if got_cookie != cookie {
                    // A late reply to an earlier request.
                    continue;
                }
                return reply_of(&command, reply);
            }
        }
        Err(NgError::Timeout {
            command,
            attempts: self.attempts,
        })
    }

    /// `ping`: the server answers `pong`.
    ///
    /// # Errors
    /// As [`NgClient::request`], or a result other than `pong`.
    pub fn ping(&mut self) -> Result<(), NgError> {
        let mut d = Dict::new();
        d.insert(b"command".to_vec(), string("ping"));
        let r = self.request(&d)?;
        if r.result == "pong" {
            Ok(())
        } else {
            Err(NgError::Unexpected {
                command: "ping".into(),
                what: format!("result {:?}, not pong", r.result),
            })
        }
    }

    /// `offer`: the caller's SDP in, the SDP for the callee out (the relay's address and
    /// ports for the callee's leg).
    ///
    /// # Errors
    /// As [`NgClient::request`], or a reply without `sdp`.
    pub fn offer(
        &mut self,
        call_id: &str,
        from_tag: &str,
        sdp: &str,
        options: &NgOptions,
    ) -> Result<String, NgError> {
        let mut d = Dict::new();
        d.insert(b"command".to_vec(), string("offer"));
        d.insert(b"call-id".to_vec(), string(call_id));
        d.insert(b"from-tag".to_vec(), string(from_tag));
        d.insert(b"sdp".to_vec(), string(sdp));
        options.add_to(&mut d);
        sdp_of("offer", &self.request(&d)?)
    }

    /// `answer`: the callee's SDP in, the SDP for the caller out.
    ///
    /// # Errors
    /// As [`NgClient::request`], or a reply without `sdp`.
    pub fn answer(
        &mut self,
        call_id: &str,
        from_tag: &str,
        to_tag: &str,
        sdp: &str,
        options: &NgOptions,
    ) -> Result<String, NgError> {
        let mut d = Dict::new();
        d.insert(b"command".to_vec(), string("answer"));
        d.insert(b"call-id".to_vec(), string(call_id));
        d.insert(b"from-tag".to_vec(), string(from_tag));
        d.insert(b"to-tag".to_vec(), string(to_tag));
        d.insert(b"sdp".to_vec(), string(sdp));
        options.add_to(&mut d);
        sdp_of("answer", &self.request(&d)?)
    }

    /// `delete`: ends the call's media; the reply holds its statistics (and a `warning` if
    /// the call was unknown).
    ///
    /// # Errors
    /// As [`NgClient::request`].
    pub fn delete(&mut self, call_id: &str, from_tag: &str) -> Result<Reply, NgError> {
        let mut d = Dict::new();
        d.insert(b"command".to_vec(), string("delete"));
        d.insert(b"call-id".to_vec(), string(call_id));
        d.insert(b"from-tag".to_vec(), string(from_tag));
        self.request(&d)
    }
}

fn reply_of(command: &str, dict: Dict) -> Result<Reply, NgError> {
    let text = |k: &str| dict.get(k.as_bytes()).and_then(as_str).map(str::to_owned);
    let result = text("result").ok_or_else(|| NgError::Unexpected {
        command: command.into(),
        what: "reply without result".into(),
    })?;
    if result == "error" {
        return Err(NgError::Failed {
            command: command.into(),
            reason: text("error-reason").unwrap_or_else(|| "(no error-reason)".into()),
        });
    }
    Ok(Reply {
        result,
        warning: text("warning"),
        dict,
    })
}

fn sdp_of(command: &str, r: &Reply) -> Result<String, NgError> {
    r.sdp()
        .map(str::to_owned)
        .ok_or_else(|| NgError::Unexpected {
            command: command.into(),
            what: format!("result {:?} without sdp", r.result),
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn dict(pairs: &[(&str, Value)]) -> Dict {
        pairs
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.clone()))
            .collect()
    }

    #[test]
    fn encodes_sorted_with_cookie() {
        let d = dict(&[
            ("sdp", string("v=0")),
            ("command", string("offer")),
            ("replace", strings(&["origin", "session-connection"])),
            ("ICE", string("remove")),
            ("n", Value::Int(-3)),
        ]);
        let out = encode("c1", &d).unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "c1 d3:ICE6:remove7:command5:offer1:ni-3e7:replacel6:origin18:session-connectione3:sdp3:v=0e"
        );
    }

    #[test]
    fn decodes_an_unsorted_reply() {
        // The order rtpengine sends: "sdp" before "result", "created" before "SSRC".
        let raw = b"abc_1 d3:sdp5:v=0\r\n6:result2:ok7:createdi17e4:SSRCde7:warning3:hm!e";
        let (cookie, d) = decode(raw).unwrap();
        assert_eq!(cookie, "abc_1");
        let r = reply_of("offer", d).unwrap();
        assert_eq!(r.result, "ok");
        assert_eq!(r.sdp(), Some("v=0\r\n"));
        assert_eq!(r.warning.as_deref(), Some("hm!"));
        assert_eq!(r.get("created"), Some(&Value::Int(17)));
        assert_eq!(r.get("SSRC"), Some(&Value::Dict(Dict::new())));
    }

    #[test]
    fn round_trips() {
        let d = dict(&[
            ("command", string("answer")),
            ("flags", strings(&["a", "b"])),
            ("nested", Value::Dict(dict(&[("x", Value::List(vec![]))]))),
        ]);
        let out = encode("k", &d).unwrap();
        let (cookie, back) = decode(&out).unwrap();
        assert_eq!((cookie, back), ("k", d));
    }

    #[test]
    fn result_error_is_an_error() {
        let (_, d) = decode(b"x d6:result5:error12:error-reason20:Unrecognized commande").unwrap();
        match reply_of("bogus", d) {
            Err(NgError::Failed { command, reason }) => {
                assert_eq!(
                    (command.as_str(), reason.as_str()),
                    ("bogus", "Unrecognized command")
                );
            }
            other => panic!("{other:?}"),
        }
        let (_, d) = decode(b"x d6:result5:errore").unwrap();
        assert!(matches!(reply_of("x", d), Err(NgError::Failed { .. })));
        let (_, d) = decode(b"x de").unwrap();
        assert!(matches!(reply_of("x", d), Err(NgError::Unexpected { .. })));
    }

    #[test]
    fn refuses_malformed_datagrams() {
        for raw in [
            &b"nospace"[..],
            b"c ",
            b"c d",
            b"c d6:result2:ok",
            b"c d6:result2:okee",
            b"c d6:result2:oke trailing",
            b"c d6:result99:oke",
            b"c d6:resulti12e",
            b"c i3e",
            b"c l3:abce",
            b"c x",
            b"c d6:result2:ok3:intix1ee",
        ] {
            assert!(decode(raw).is_err(), "{:?}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn bounds_nesting() {
        let deep = |n: usize| {
            let mut v = b"c d1:a".to_vec();
            v.extend(std::iter::repeat_n(b'l', n));
            v.extend(std::iter::repeat_n(b'e', n));
            v.push(b'e');
            v
        };
        assert!(decode(&deep(MAX_DEPTH - 1)).is_ok());
        assert!(decode(&deep(MAX_DEPTH)).is_err());
        // A datagram of nothing but opening brackets is refused before the decoder sees it.
        let mut v = b"c ".to_vec();
        v.extend(std::iter::repeat_n(b'l', 60_000));
        assert!(decode(&v).is_err());
    }

    #[test]
    fn options_become_keys() {
        let mut d = Dict::new();
        let mut o = NgOptions::anchoring();
        o.flags = vec!["trust-address".into()];
        o.extra = vec![("DTLS".into(), string("off"))];
        o.add_to(&mut d);
        assert_eq!(d.get(b"ICE".as_slice()), Some(&string("remove")));
        assert_eq!(
            d.get(b"replace".as_slice()),
            Some(&strings(&["origin", "session-connection"]))
        );
        assert_eq!(
            d.get(b"flags".as_slice()),
            Some(&strings(&["trust-address"]))
        );
        assert_eq!(d.get(b"DTLS".as_slice()), Some(&string("off")));
    }

    #[test]
    fn a_client_retries_then_times_out() {
        // A server that never answers: three attempts, each one sent.
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut ng = NgClient::new(server.local_addr().unwrap()).unwrap();
        ng.set_timeout(Duration::from_millis(30), 3);
        let got = ng.ping();
        assert!(
            matches!(&got, Err(NgError::Timeout { attempts: 3, .. })),
            "{got:?}"
        );
        server.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 512];
        let mut seen = Vec::new();
        while let Ok((n, _)) = server.recv_from(&mut buf) {
            seen.push(buf[..n].to_vec());
        }
        assert_eq!(seen.len(), 3);
        assert!(
            seen.windows(2).all(|w| w[0] == w[1]),
            "same cookie each time"
        );
    }

    #[test]
    fn a_client_skips_stale_replies() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut ng = NgClient::new(server.local_addr().unwrap()).unwrap();
        let t = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            let (n, from) = server.recv_from(&mut buf).unwrap();
            let (cookie, _) = decode(&buf[..n]).unwrap();
            let cookie = cookie.to_owned();
            server.send_to(b"old_1 d6:result4:ponge", from).unwrap();
            let reply = format!("{cookie} d6:result4:ponge");
            server.send_to(reply.as_bytes(), from).unwrap();
            // A reply that is not bencode is an error, not skipped.
            let (_, from) = server.recv_from(&mut buf).unwrap();
            server.send_to(b"garbage", from).unwrap();
        });
        ng.ping().unwrap();
        let second = ng.ping();
        t.join().unwrap();
        assert!(matches!(second, Err(NgError::Malformed(_))), "{second:?}");
    }
}
