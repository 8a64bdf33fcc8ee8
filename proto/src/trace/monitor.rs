//! The on-box SIP monitor (`sip-monitoring`): which traced messages are kept, by the
//! configured filters and the live ones (`capture start`), in a bounded ring.
//!
//! A message is kept when its capture (its call, or its out-of-dialog exchange) is already
//! kept, or when it matches: the configured `monitoring-filters` (every one, or any one with
//! `match-any-filter`) or any live filter. A call's first messages may not match a filter
//! that a later one does (a filter on the session-agent matches the INVITE sent to it, not
//! the one received from the caller): messages that did not match wait in a small bounded
//! buffer, and join their capture, in order, when a later message of it matches.

use std::collections::VecDeque;
use std::net::IpAddr;

use super::capture::{
    CaptureKey, LegSide, MessageFacts, RingCounters, TraceFilter, TraceRing, TracedMessage,
};
use crate::engine::TraceEvent;
use crate::shard::scan_call_id;
use crate::sip::dialog::LegTransport;
use crate::sip::message::{name_addr_uri, uri_user};

/// Messages that matched no filter yet, kept at most in case a later message of their
/// capture does.
pub const MAX_UNMATCHED: usize = 256;

/// What the monitor needs of the node's topology to tell a message's realm and agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// The realm of each interface, by index.
    pub realms: Vec<String>,
    /// The session-agents: address and name (a message is the agent's when its peer has the
    /// agent's IP).
    pub agents: Vec<(IpAddr, String)>,
}

/// The configured filters (`sip-monitoring`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfiguredFilters {
    /// The filters `monitoring-filters` names (`*`: one that matches everything).
    pub filters: Vec<TraceFilter>,
    /// `match-any-filter`: any one must match, rather than every one.
    pub match_any: bool,
}

impl ConfiguredFilters {
    fn matches(&self, facts: &MessageFacts) -> bool {
        if self.filters.is_empty() {
            return false;
        }
        if self.match_any {
            self.filters.iter().any(|f| f.matches(facts))
        } else {
            self.filters.iter().all(|f| f.matches(facts))
        }
    }
}

/// Counters of the monitor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MonitorCounters {
    /// Messages offered.
    pub offered: u64,
    /// Messages kept in the ring.
    pub kept: u64,
    /// Messages that matched nothing and were forgotten.
    pub unmatched: u64,
}

/// The monitor: filters, the ring and the unmatched buffer.
#[derive(Debug)]
pub struct Monitor {
    configured: Option<ConfiguredFilters>,
    live: Vec<TraceFilter>,
    topology: Topology,
    ring: TraceRing,
    waiting: VecDeque<(CaptureKey, TracedMessage)>,
    counters: MonitorCounters,
}

impl Monitor {
    /// A monitor keeping what `configured` selects (`None`: `sip-monitoring` disabled, only
    /// live filters) in `ring`.
    #[must_use]
    pub fn new(configured: Option<ConfiguredFilters>, topology: Topology, ring: TraceRing) -> Self {
        Self {
            configured,
            live: Vec::new(),
            topology,
            ring,
            waiting: VecDeque::new(),
            counters: MonitorCounters::default(),
        }
    }

    /// Whether anything can match: configured filters, or live ones.
    #[must_use]
    pub fn is_on(&self) -> bool {
        self.configured.is_some() || !self.live.is_empty()
    }

    /// A new configuration (`activate-config`): filters and topology; the captures stay.
    pub fn reconfigure(&mut self, configured: Option<ConfiguredFilters>, topology: Topology) {
        self.configured = configured;
        self.topology = topology;
    }

    /// Starts a live filter (`capture start`); `false` when it runs already.
    pub fn capture_start(&mut self, filter: TraceFilter) -> bool {
        if self.live.contains(&filter) {
            return false;
        }
        self.live.push(filter);
        true
    }

    /// Stops a live filter (`capture stop`); `false` when it was not running.
    pub fn capture_stop(&mut self, filter: &TraceFilter) -> bool {
        let before = self.live.len();
        self.live.retain(|f| f != filter);
        self.live.len() != before
    }

    /// The live filters.
    #[must_use]
    pub fn live_filters(&self) -> &[TraceFilter] {
        &self.live
    }

    /// The configured filters, if `sip-monitoring` is enabled.
    #[must_use]
    pub fn configured(&self) -> Option<&ConfiguredFilters> {
        self.configured.as_ref()
    }

    /// The ring.
    #[must_use]
    pub fn ring(&self) -> &TraceRing {
        &self.ring
    }

    /// Forgets every capture.
    pub fn clear(&mut self) {
        self.ring.clear();
        self.waiting.clear();
    }

    /// The monitor's counters and the ring's.
    #[must_use]
    pub fn counters(&self) -> (MonitorCounters, RingCounters) {
        (self.counters, self.ring.counters())
    }

    /// Offers one traced message.
    pub fn record(&mut self, event: &TraceEvent) {
        self.counters.offered += 1;
        let key = capture_key(event);
        let msg = traced_message(event);
        if self.ring.contains(&key) {
            self.keep(key, msg);
            return;
        }
        let facts = self.facts(event);
        let matched = self.configured.as_ref().is_some_and(|c| c.matches(&facts))
            || self.live.iter().any(|f| f.matches(&facts));
        if !matched {
            if self.waiting.len() >= MAX_UNMATCHED {
                self.waiting.pop_front();
                self.counters.unmatched += 1;
            }
            self.waiting.push_back((key, msg));
            return;
        }
        // Earlier messages of the same capture first, in their order.
        let mut earlier = Vec::new();
        self.waiting.retain(|(k, m)| {
            if *k == key {
                earlier.push(m.clone());
                false
            } else {
                true
            }
        });
        for m in earlier {
            self.keep(key.clone(), m);
        }
        self.keep(key, msg);
    }

    fn keep(&mut self, key: CaptureKey, msg: TracedMessage) {
        if self.ring.push(key, msg).is_some() {
            self.counters.kept += 1;
        }
    }

    /// What filters look at in `event`.
    fn facts(&self, event: &TraceEvent) -> MessageFacts {
        let peer = event.peer.ip().to_canonical();
        MessageFacts {
            method: method_of(&event.bytes).unwrap_or_default(),
            users: users_of(&event.bytes),
            peer: Some(peer),
            realm: self
                .topology
                .realms
                .get(event.interface)
                .cloned()
                .unwrap_or_default(),
            agent: self
                .topology
                .agents
                .iter()
                .find(|(ip, _)| ip.to_canonical() == peer)
                .map(|(_, name)| name.clone()),
        }
    }
}

/// What groups `event` with others: its call, its exchange, its Call-ID, or its peer.
#[must_use]
pub fn capture_key(event: &TraceEvent) -> CaptureKey {
    match &event.call {
        Some(c) => match c.id {
            Some(id) => CaptureKey::Call(id),
            None => CaptureKey::CallId(c.correlation.to_string()),
        },
        None => match scan_call_id(&event.bytes) {
            Some(id) => CaptureKey::CallId(String::from_utf8_lossy(id).into_owned()),
            None => CaptureKey::CallId(format!("(no Call-ID from {})", event.peer)),
        },
    }
}

/// `event` as the ring keeps it (credentials masked).
#[must_use]
pub fn traced_message(event: &TraceEvent) -> TracedMessage {
    TracedMessage::new(
        event.at_unix_us / 1000,
        event.direction,
        event.call.as_ref().map_or(LegSide::Caller, |c| c.leg),
        transport_name(event.transport),
        event.local,
        event.peer,
        event.note.as_ref().map(|n| n.to_string()),
        &event.bytes,
    )
}

/// `UDP`, `TCP` or `TLS`.
#[must_use]
pub fn transport_name(t: LegTransport) -> &'static str {
    match t {
        LegTransport::Udp => "UDP",
        LegTransport::Tcp => "TCP",
        LegTransport::Tls => "TLS",
    }
}

/// The head of a message as text, lines split (nothing after the blank line).
fn head_lines(bytes: &[u8]) -> impl Iterator<Item = &str> {
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(bytes.len());
    std::str::from_utf8(&bytes[..end])
        .unwrap_or("")
        .split("\r\n")
}

/// A request's method, or a response's CSeq method.
fn method_of(bytes: &[u8]) -> Option<String> {
    let mut lines = head_lines(bytes);
    let start = lines.next()?;
    if !start.starts_with("SIP/") {
        return start.split(' ').next().map(str::to_owned);
    }
    lines.find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("cseq")
            .then(|| value.split_whitespace().nth(1).map(str::to_owned))
            .flatten()
    })
}

/// The users (`user@host`) of the Request-URI, From, To and P-Asserted-Identity.
fn users_of(bytes: &[u8]) -> Vec<String> {
    let mut users = Vec::new();
    let mut push = |uri: &str| {
        let uri = uri.trim();
        if let Some(user) = uri_user(uri) {
            let hostport = uri
                .split_once('@')
                .map_or("", |(_, h)| h)
                .split([';', '?', '>'])
                .next()
                .unwrap_or("");
            let host = match hostport.find(']') {
                Some(end) if hostport.starts_with('[') => &hostport[..=end],
                _ => hostport.split(':').next().unwrap_or(""),
            };
            users.push(format!("{user}@{host}"));
        } else if let Some(number) = uri.strip_prefix("tel:") {
            users.push(number.split(';').next().unwrap_or("").to_owned());
        }
    };
    let mut lines = head_lines(bytes);
    if let Some(start) = lines.next() {
        if !start.starts_with("SIP/") {
            if let Some(uri) = start.split(' ').nth(1) {
                push(uri);
            }
        }
    }
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        let is_party = ["from", "f", "to", "t", "p-asserted-identity"]
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n));
        if is_party {
            push(name_addr_uri(value));
        }
    }
    users
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;
    use crate::engine::TracedCall;
    use crate::trace::capture::Direction;

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    fn event(call: u64, leg: LegSide, direction: Direction, peer: &str, text: &str) -> TraceEvent {
        TraceEvent {
            at_unix_us: 1_000_000,
            direction,
            interface: usize::from(leg == LegSide::Callee),
            transport: LegTransport::Udp,
            local: sa("127.0.0.1:5060"),
            peer: sa(peer),
            call: Some(TracedCall {
                id: Some(call),
                leg,
                correlation: Arc::from(format!("c{call}").as_str()),
            }),
            note: None,
            bytes: Bytes::from(text.replace('\n', "\r\n")),
        }
    }

    fn invite(from: &str, to: &str) -> String {
        format!("INVITE sip:{to}@example.test SIP/2.0\nFrom: <sip:{from}@example.test>;tag=1\nTo: <sip:{to}@example.test>\nCall-ID: x\nCSeq: 1 INVITE\n\n")
    }

    fn topology() -> Topology {
        Topology {
            realms: vec!["access".into(), "core".into()],
            agents: vec![("127.0.0.9".parse().expect("ip"), "pbx".into())],
        }
    }

    fn monitor(filters: Vec<TraceFilter>) -> Monitor {
        Monitor::new(
            Some(ConfiguredFilters {
                filters,
                match_any: true,
            }),
            topology(),
            TraceRing::new(1 << 20, 100, 100),
        )
    }

    fn user(u: &str) -> TraceFilter {
        TraceFilter {
            user: Some(u.into()),
            ..TraceFilter::default()
        }
    }

    #[test]
    fn a_user_filter_keeps_that_user_s_calls_whole_and_no_other() {
        let mut m = monitor(vec![user("alice")]);
        let rx = Direction::Received;
        m.record(&event(
            1,
            LegSide::Caller,
            rx,
            "127.0.0.2:5060",
            &invite("alice", "bob"),
        ));
        m.record(&event(
            2,
            LegSide::Caller,
            rx,
            "127.0.0.2:5060",
            &invite("carol", "bob"),
        ));
        // A 200 without a user the filter names still joins alice's call.
        m.record(&event(
            1,
            LegSide::Callee,
            rx,
            "127.0.0.9:5060",
            "SIP/2.0 200 OK\nCSeq: 1 INVITE\n\n",
        ));
        let captures: Vec<_> = m.ring().captures().collect();
        assert_eq!(captures.len(), 1);
        assert_eq!(captures[0].key, CaptureKey::Call(1));
        assert_eq!(captures[0].messages.len(), 2);
    }

    #[test]
    fn an_agent_filter_brings_the_call_s_earlier_messages_in_order() {
        let mut m = monitor(vec![TraceFilter {
            agent: Some("pbx".into()),
            ..TraceFilter::default()
        }]);
        m.record(&event(
            1,
            LegSide::Caller,
            Direction::Received,
            "127.0.0.2:5060",
            &invite("a", "b"),
        ));
        m.record(&event(
            1,
            LegSide::Caller,
            Direction::Sent,
            "127.0.0.2:5060",
            "SIP/2.0 100 Trying\nCSeq: 1 INVITE\n\n",
        ));
        assert_eq!(m.ring().captures().count(), 0);
        m.record(&event(
            1,
            LegSide::Callee,
            Direction::Sent,
            "127.0.0.9:5060",
            &invite("a", "b"),
        ));
        let c = m.ring().captures().next().expect("the call");
        let lines: Vec<String> = c.messages.iter().map(TracedMessage::first_line).collect();
        assert_eq!(lines[1], "SIP/2.0 100 Trying");
        assert_eq!(c.messages.len(), 3);
    }

    #[test]
    fn every_filter_must_match_unless_any_is_asked_for() {
        let both = vec![
            user("alice"),
            TraceFilter {
                method: Some("MESSAGE".into()),
                ..TraceFilter::default()
            },
        ];
        let mut all = monitor(both.clone());
        all.configured = Some(ConfiguredFilters {
            filters: both,
            match_any: false,
        });
        all.record(&event(
            1,
            LegSide::Caller,
            Direction::Received,
            "127.0.0.2:1",
            &invite("alice", "b"),
        ));
        assert_eq!(all.ring().captures().count(), 0);
        let mut any = monitor(vec![user("alice"), user("nobody")]);
        any.record(&event(
            1,
            LegSide::Caller,
            Direction::Received,
            "127.0.0.2:1",
            &invite("alice", "b"),
        ));
        assert_eq!(any.ring().captures().count(), 1);
    }

    #[test]
    fn live_filters_start_and_stop() {
        let mut m = Monitor::new(None, topology(), TraceRing::new(1 << 20, 100, 100));
        assert!(!m.is_on());
        assert!(m.capture_start(user("bob")));
        assert!(!m.capture_start(user("bob")));
        assert!(m.is_on());
        m.record(&event(
            1,
            LegSide::Caller,
            Direction::Received,
            "127.0.0.2:1",
            &invite("a", "bob"),
        ));
        assert_eq!(m.ring().captures().count(), 1);
        assert!(m.capture_stop(&user("bob")));
        assert!(!m.capture_stop(&user("bob")));
        assert!(!m.is_on());
    }

    #[test]
    fn the_unmatched_buffer_is_bounded() {
        let mut m = monitor(vec![user("nobody")]);
        for i in 0..(MAX_UNMATCHED as u64 + 5) {
            m.record(&event(
                i,
                LegSide::Caller,
                Direction::Received,
                "127.0.0.2:1",
                &invite("a", "b"),
            ));
        }
        assert_eq!(m.waiting.len(), MAX_UNMATCHED);
        assert_eq!(m.counters().0.unmatched, 5);
    }

    #[test]
    fn users_and_methods_are_read_from_the_head() {
        let text = "INVITE sip:+15551234@example.test;user=phone SIP/2.0\r\nf: \"A\" <sip:alice@[::1]:5060>;tag=1\r\nTo: <tel:+15551234>\r\nCSeq: 1 INVITE\r\n\r\n";
        assert_eq!(
            users_of(text.as_bytes()),
            ["+15551234@example.test", "alice@[::1]", "+15551234"]
        );
        assert_eq!(method_of(text.as_bytes()).as_deref(), Some("INVITE"));
        assert_eq!(
            method_of(b"SIP/2.0 200 OK\r\nCSeq: 7 BYE\r\n\r\n").as_deref(),
            Some("BYE")
        );
    }
}
