//! The on-box trace (`sip-monitoring`): which messages are captured (a [`TraceFilter`]), the
//! captures kept (a [`TraceRing`] bounded in bytes and in count, oldest dropped first), and a
//! capture drawn as a ladder of both legs ([`ladder`]).
//!
//! A capture groups every message of one call (both legs, by the engine's call id) or of one
//! out-of-dialog transaction (by its Call-ID), including the requests the SBC refused and its
//! own answers, each with the reason. Time is passed in (milliseconds since the UNIX epoch);
//! nothing here reads a clock.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

use super::mask::mask_credentials;

/// Which way a message went, seen from the SBC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Received from the peer.
    Received,
    /// Sent to the peer.
    Sent,
}

/// Which leg of a call a message belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegSide {
    /// The leg toward the caller (the request came in on it).
    Caller,
    /// The leg toward the callee (the next hop).
    Callee,
}

/// What groups messages into one capture.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CaptureKey {
    /// A call: the engine's call id, shared by both legs.
    Call(u64),
    /// An out-of-dialog exchange or a refused request: its Call-ID as received.
    CallId(String),
}

/// One traced message. Its bytes are stored with credentials masked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracedMessage {
    /// When it was received or sent, ms since the UNIX epoch.
    pub at_unix_ms: u64,
    /// Received or sent.
    pub direction: Direction,
    /// The leg it belongs to.
    pub leg: LegSide,
    /// `UDP`, `TCP` or `TLS`.
    pub transport: &'static str,
    /// The SBC's address on that leg.
    pub local: SocketAddr,
    /// The peer's address.
    pub remote: SocketAddr,
    /// Why the SBC refused or dropped it, or answered it itself (`None` for a relayed message).
    pub note: Option<String>,
    /// The message, credentials masked.
    pub bytes: Vec<u8>,
}

impl TracedMessage {
    /// The message with `bytes` masked (see [`super::mask`]).
    #[must_use]
    #[allow(clippy::too_many_arguments)] // one traced message's facts, all needed
    pub fn new(
        at_unix_ms: u64,
        direction: Direction,
        leg: LegSide,
        transport: &'static str,
        local: SocketAddr,
        remote: SocketAddr,
        note: Option<String>,
        bytes: &[u8],
    ) -> Self {
        Self {
            at_unix_ms,
            direction,
            leg,
            transport,
            local,
            remote,
            note,
            bytes: mask_credentials(bytes).into_owned(),
        }
    }

    /// The start line.
    #[must_use]
    pub fn first_line(&self) -> String {
        let end = self
            .bytes
            .iter()
            .position(|&b| b == b'\r' || b == b'\n')
            .unwrap_or(self.bytes.len());
        String::from_utf8_lossy(&self.bytes[..end]).into_owned()
    }

    /// The value of the first header `name` (any case, compact forms not read).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<String> {
        let text = String::from_utf8_lossy(&self.bytes);
        text.split("\r\n")
            .skip(1)
            .take_while(|l| !l.is_empty())
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().to_owned())
            })
    }

    /// What the ring counts against its byte budget for it.
    fn cost(&self) -> usize {
        self.bytes.len() + self.note.as_ref().map_or(0, String::len) + 96
    }
}

/// What a filter looks at in a message: its method (a request's, or a response's CSeq
/// method), the users of its Request-URI, From and To, the peer's address, the realm of its
/// leg and the session-agent it goes to or comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageFacts {
    /// Method (`INVITE`, ...).
    pub method: String,
    /// Users (or AoRs, `user@host`) named by the Request-URI, From and To.
    pub users: Vec<String>,
    /// The peer's IP address.
    pub peer: Option<IpAddr>,
    /// The realm of the leg.
    pub realm: String,
    /// The session-agent of the leg, if it is one.
    pub agent: Option<String>,
}

/// What to capture: every condition set must hold; none set captures everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceFilter {
    /// A user or AoR: matches a user part equal to it, or an AoR `user@host` equal to it (case
    /// of the host ignored).
    pub user: Option<String>,
    /// An IP address or network the peer is in.
    pub address: Option<IpNet>,
    /// The leg's realm.
    pub realm: Option<String>,
    /// The session-agent.
    pub agent: Option<String>,
    /// The method (case-sensitive, as SIP methods are).
    pub method: Option<String>,
}

impl TraceFilter {
    /// Whether a message with these facts is captured.
    #[must_use]
    pub fn matches(&self, facts: &MessageFacts) -> bool {
        self.user.as_ref().is_none_or(|u| {
            facts.users.iter().any(|f| {
                f == u
                    || match (f.split_once('@'), u.split_once('@')) {
                        (Some((fu, fh)), Some((uu, uh))) => fu == uu && fh.eq_ignore_ascii_case(uh),
                        (Some((fu, _)), None) => fu == u,
                        _ => false,
                    }
            })
        }) && self.address.is_none_or(|net| {
            facts
                .peer
                .is_some_and(|ip| net.contains(&ip.to_canonical()))
        }) && self.realm.as_ref().is_none_or(|r| *r == facts.realm)
            && self
                .agent
                .as_ref()
                .is_none_or(|a| facts.agent.as_ref() == Some(a))
            && self.method.as_ref().is_none_or(|m| *m == facts.method)
    }
}

/// One capture: a call's or an exchange's messages, in the order they were traced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// The id `show sip-trace <id>` takes: increasing, never reused.
    pub id: u64,
    /// What groups its messages.
    pub key: CaptureKey,
    /// Its messages (at most the ring's per-capture limit; later ones are counted).
    pub messages: Vec<TracedMessage>,
    /// Messages not kept because the capture was full.
    pub messages_dropped: u64,
    bytes: usize,
}

impl Capture {
    /// The first message's start line: what the list shows.
    #[must_use]
    pub fn summary(&self) -> String {
        self.messages
            .first()
            .map(TracedMessage::first_line)
            .unwrap_or_default()
    }

    /// When its first message was traced, ms since the UNIX epoch.
    #[must_use]
    pub fn started_unix_ms(&self) -> u64 {
        self.messages.first().map_or(0, |m| m.at_unix_ms)
    }
}

/// Counters of a [`TraceRing`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingCounters {
    /// Messages kept.
    pub messages: u64,
    /// Captures dropped, oldest first, to stay within the budget.
    pub captures_evicted: u64,
    /// Messages not kept because their capture held the most a capture may.
    pub messages_dropped: u64,
}

/// The captures kept: at most `max_bytes` of messages and `max_captures` captures, each of at
/// most `max_messages` messages; the oldest capture goes first when a new message would
/// exceed a bound.
#[derive(Debug)]
pub struct TraceRing {
    max_bytes: usize,
    max_captures: usize,
    max_messages: usize,
    captures: VecDeque<Capture>,
    by_key: HashMap<CaptureKey, u64>,
    bytes: usize,
    next_id: u64,
    counters: RingCounters,
}

impl TraceRing {
    /// An empty ring with these bounds (each at least 1).
    #[must_use]
    pub fn new(max_bytes: usize, max_captures: usize, max_messages: usize) -> Self {
        Self {
            max_bytes: max_bytes.max(1),
            max_captures: max_captures.max(1),
            max_messages: max_messages.max(1),
            captures: VecDeque::new(),
            by_key: HashMap::new(),
            bytes: 0,
            next_id: 1,
            counters: RingCounters::default(),
        }
    }

    /// Adds `msg` to the capture of `key` (a new capture if there is none), dropping the
    /// oldest captures as the bounds require. Returns the capture's id, or `None` when the
    /// message was not kept (its capture is full, or it alone exceeds the byte budget).
    pub fn push(&mut self, key: CaptureKey, msg: TracedMessage) -> Option<u64> {
        let cost = msg.cost();
        if cost > self.max_bytes {
            self.counters.messages_dropped += 1;
            return None;
        }
        if let Some(&id) = self.by_key.get(&key) {
            let full = self
                .captures
                .iter()
                .find(|c| c.id == id)
                .is_some_and(|c| c.messages.len() >= self.max_messages);
            if full {
                if let Some(c) = self.captures.iter_mut().find(|c| c.id == id) {
                    c.messages_dropped += 1;
                }
                self.counters.messages_dropped += 1;
                return None;
            }
        } else {
            while self.captures.len() >= self.max_captures {
                self.evict_oldest();
            }
            let id = self.next_id;
            self.next_id += 1;
            self.by_key.insert(key.clone(), id);
            self.captures.push_back(Capture {
                id,
                key: key.clone(),
                messages: Vec::new(),
                messages_dropped: 0,
                bytes: 0,
            });
        }
        let id = *self.by_key.get(&key)?;
        while self.bytes + cost > self.max_bytes {
            // Never the capture being added to while older ones remain.
            if self.captures.front().is_some_and(|c| c.id == id) && self.captures.len() == 1 {
                break;
            }
            if self.captures.front().is_some_and(|c| c.id == id) {
                self.captures.rotate_left(1);
                self.evict_oldest();
                self.captures.rotate_right(1);
            } else {
                self.evict_oldest();
            }
        }
        if self.bytes + cost > self.max_bytes {
            self.counters.messages_dropped += 1;
            return None;
        }
        let capture = self.captures.iter_mut().find(|c| c.id == id)?;
        capture.bytes += cost;
        capture.messages.push(msg);
        self.bytes += cost;
        self.counters.messages += 1;
        Some(id)
    }

    fn evict_oldest(&mut self) {
        if let Some(c) = self.captures.pop_front() {
            self.bytes -= c.bytes;
            if self.by_key.get(&c.key) == Some(&c.id) {
                self.by_key.remove(&c.key);
            }
            self.counters.captures_evicted += 1;
        }
    }

    /// The captures, oldest first.
    pub fn captures(&self) -> impl Iterator<Item = &Capture> {
        self.captures.iter()
    }

    /// The bounds: bytes, captures, messages per capture.
    #[must_use]
    pub fn bounds(&self) -> (usize, usize, usize) {
        (self.max_bytes, self.max_captures, self.max_messages)
    }

    /// Whether a capture of `key` is kept.
    #[must_use]
    pub fn contains(&self, key: &CaptureKey) -> bool {
        self.by_key.contains_key(key)
    }

    /// The capture `id`, if it is still kept.
    #[must_use]
    pub fn get(&self, id: u64) -> Option<&Capture> {
        self.captures.iter().find(|c| c.id == id)
    }

    /// Bytes held (the messages' cost).
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The counters.
    #[must_use]
    pub fn counters(&self) -> RingCounters {
        self.counters
    }

    /// Forgets every capture (ids keep increasing).
    pub fn clear(&mut self) {
        self.captures.clear();
        self.by_key.clear();
        self.bytes = 0;
    }
}

/// Draws a capture as a ladder of both legs, one line per message: the time since its first
/// message, the arrow between the caller, the SBC and the callee, the start line, the CSeq
/// and the peer; a refused or locally answered message carries its note on the next line.
#[must_use]
pub fn ladder(capture: &Capture) -> String {
    let start = capture.started_unix_ms();
    let mut out = String::new();
    let _ = writeln!(out, "{:>9}  {:<22} {:<40} peer", "time", "leg", "message");
    for m in &capture.messages {
        let arrow = match (m.leg, m.direction) {
            (LegSide::Caller, Direction::Received) => "caller ──▶ sbc",
            (LegSide::Caller, Direction::Sent) => "caller ◀── sbc",
            (LegSide::Callee, Direction::Sent) => "        sbc ──▶ callee",
            (LegSide::Callee, Direction::Received) => "        sbc ◀── callee",
        };
        let cseq = m.header("CSeq").unwrap_or_default();
        let line = m.first_line();
        let elapsed = m.at_unix_ms.saturating_sub(start);
        let _ = writeln!(
            out,
            "{:>6}.{:03}s {:<22} {:<40} {} {} ({})",
            elapsed / 1000,
            elapsed % 1000,
            arrow,
            truncate(&line, 40),
            m.transport,
            m.remote,
            cseq
        );
        if let Some(note) = &m.note {
            let _ = writeln!(out, "{:>11}{:<22} ! {note}", "", "");
        }
    }
    if capture.messages_dropped > 0 {
        let _ = writeln!(
            out,
            "({} later messages not kept: the capture was full)",
            capture.messages_dropped
        );
    }
    out
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    fn msg(at: u64, direction: Direction, leg: LegSide, text: &str) -> TracedMessage {
        TracedMessage::new(
            at,
            direction,
            leg,
            "UDP",
            sa("192.0.2.10:5060"),
            sa("10.1.1.1:5060"),
            None,
            text.replace('\n', "\r\n").as_bytes(),
        )
    }

    const INVITE: &str = "INVITE sip:bob@example.test SIP/2.0\nCSeq: 1 INVITE\nAuthorization: Digest username=\"alice\", response=\"deadbeef\"\n\n";

    #[test]
    fn a_filter_matches_every_condition_it_sets() {
        let facts = MessageFacts {
            method: "INVITE".into(),
            users: vec!["alice@example.test".into(), "bob@example.test".into()],
            peer: Some("10.1.1.1".parse().expect("ip")),
            realm: "access".into(),
            agent: None,
        };
        assert!(TraceFilter::default().matches(&facts));
        let by_user = |u: &str| TraceFilter {
            user: Some(u.into()),
            ..TraceFilter::default()
        };
        assert!(by_user("alice").matches(&facts));
        assert!(by_user("bob@EXAMPLE.test").matches(&facts));
        assert!(!by_user("carol").matches(&facts));
        assert!(!by_user("alice@other.test").matches(&facts));
        let by_net = TraceFilter {
            address: Some("10.0.0.0/8".parse().expect("net")),
            realm: Some("access".into()),
            method: Some("INVITE".into()),
            ..TraceFilter::default()
        };
        assert!(by_net.matches(&facts));
        // An IPv4-mapped peer is its IPv4 address.
        let mapped = MessageFacts {
            peer: Some("::ffff:10.1.1.1".parse().expect("ip")),
            ..facts.clone()
        };
        assert!(by_net.matches(&mapped));
        assert!(!TraceFilter {
            method: Some("invite".into()),
            ..TraceFilter::default()
        }
        .matches(&facts));
        assert!(!TraceFilter {
            agent: Some("pbx".into()),
            ..TraceFilter::default()
        }
        .matches(&facts));
    }

    #[test]
    fn messages_are_grouped_by_call_and_credentials_are_masked() {
        let mut ring = TraceRing::new(1 << 20, 100, 50);
        let id = ring
            .push(
                CaptureKey::Call(7),
                msg(1000, Direction::Received, LegSide::Caller, INVITE),
            )
            .expect("kept");
        let again = ring.push(
            CaptureKey::Call(7),
            msg(1001, Direction::Sent, LegSide::Callee, INVITE),
        );
        assert_eq!(again, Some(id));
        let other = ring.push(
            CaptureKey::CallId("opt-1".into()),
            msg(
                1002,
                Direction::Received,
                LegSide::Caller,
                "OPTIONS sip:x SIP/2.0\n\n",
            ),
        );
        assert_ne!(other, Some(id));
        let c = ring.get(id).expect("capture");
        assert_eq!(c.messages.len(), 2);
        assert_eq!(c.summary(), "INVITE sip:bob@example.test SIP/2.0");
        assert!(c
            .messages
            .iter()
            .all(|m| !String::from_utf8_lossy(&m.bytes).contains("deadbeef")));
    }

    #[test]
    fn the_ring_stays_within_its_bytes_and_drops_the_oldest_first() {
        let one = msg(0, Direction::Received, LegSide::Caller, INVITE).cost();
        let mut ring = TraceRing::new(one * 10, 1000, 1000);
        for call in 0..100u64 {
            ring.push(
                CaptureKey::Call(call),
                msg(call, Direction::Received, LegSide::Caller, INVITE),
            );
            assert!(ring.bytes() <= one * 10);
        }
        let ids: Vec<u64> = ring.captures().map(|c| c.id).collect();
        assert_eq!(
            ids,
            (91..=100).collect::<Vec<_>>(),
            "the newest ten, in order"
        );
        assert_eq!(ring.counters().captures_evicted, 90);
        // By count too, and a full capture counts what it drops.
        let mut ring = TraceRing::new(1 << 20, 3, 2);
        for call in 0..5u64 {
            ring.push(
                CaptureKey::Call(call),
                msg(call, Direction::Received, LegSide::Caller, INVITE),
            );
        }
        assert_eq!(ring.captures().count(), 3);
        for _ in 0..4 {
            ring.push(
                CaptureKey::Call(4),
                msg(9, Direction::Sent, LegSide::Callee, INVITE),
            );
        }
        let last = ring.captures().last().expect("capture");
        assert_eq!((last.messages.len(), last.messages_dropped), (2, 3));
        // A message larger than the whole budget is not kept.
        let mut ring = TraceRing::new(10, 10, 10);
        assert_eq!(
            ring.push(
                CaptureKey::Call(1),
                msg(0, Direction::Received, LegSide::Caller, INVITE)
            ),
            None
        );
    }

    #[test]
    fn a_capture_growing_past_the_budget_evicts_older_ones_not_itself() {
        let one = msg(0, Direction::Received, LegSide::Caller, INVITE).cost();
        let mut ring = TraceRing::new(one * 3, 100, 100);
        ring.push(
            CaptureKey::Call(1),
            msg(0, Direction::Received, LegSide::Caller, INVITE),
        );
        let id = ring
            .push(
                CaptureKey::Call(2),
                msg(1, Direction::Received, LegSide::Caller, INVITE),
            )
            .expect("kept");
        ring.push(
            CaptureKey::Call(2),
            msg(2, Direction::Sent, LegSide::Callee, INVITE),
        );
        ring.push(
            CaptureKey::Call(2),
            msg(3, Direction::Received, LegSide::Callee, INVITE),
        );
        let kept: Vec<u64> = ring.captures().map(|c| c.id).collect();
        assert_eq!(kept, vec![id]);
        assert_eq!(ring.get(id).map(|c| c.messages.len()), Some(3));
    }

    #[test]
    fn the_ladder_shows_both_legs_in_order_with_notes() {
        let mut ring = TraceRing::new(1 << 20, 10, 10);
        let key = CaptureKey::Call(1);
        ring.push(
            key.clone(),
            msg(1000, Direction::Received, LegSide::Caller, INVITE),
        );
        ring.push(
            key.clone(),
            msg(1001, Direction::Sent, LegSide::Callee, INVITE),
        );
        let mut refused = msg(
            1250,
            Direction::Sent,
            LegSide::Caller,
            "SIP/2.0 503 Service Unavailable\nCSeq: 1 INVITE\n\n",
        );
        refused.note = Some("the next hop could not be reached".into());
        ring.push(key, refused);
        let text = ladder(ring.captures().next().expect("capture"));
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].contains("0.000s") && lines[1].contains("caller ──▶ sbc"),
            "{text}"
        );
        assert!(
            lines[2].contains("sbc ──▶ callee") && lines[2].contains("INVITE"),
            "{text}"
        );
        assert!(
            lines[3].contains("0.250s") && lines[3].contains("503"),
            "{text}"
        );
        assert!(
            lines[4].contains("! the next hop could not be reached"),
            "{text}"
        );
    }
}
