//! Session-agents named by a DNS name, sans IO (RFC 3263 section 4 with the transport
//! configured, so no NAPTR step): which query to make ([`DnsAgent::query`]), how SRV records
//! are ordered (RFC 2782, [`order_srv`]), when to resolve again (the answer's TTL, clamped:
//! [`MIN_TTL`], [`MAX_TTL`]; after a failure, a backoff that keeps the last good answer), and
//! which of the resolved targets the agent uses now ([`DnsAgent::current`]: the first; the
//! next one once the agent went out of service on the one it had, RFC 3263 section 4.3).
//!
//! The shell makes the queries and reports the answers; time and randomness are passed in.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::sip::dialog::LegTransport;

/// An answer is never used for less than this (a TTL of 0 would resolve on every tick).
pub const MIN_TTL: Duration = Duration::from_secs(1);
/// Nor for longer than this (a record whose TTL says a week is looked at again hourly).
pub const MAX_TTL: Duration = Duration::from_secs(3600);
/// The first retry after a failed resolution; each next one doubles, up to [`MAX_RETRY`].
pub const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest wait between retries of a failing resolution.
pub const MAX_RETRY: Duration = Duration::from_secs(60);
/// Targets kept per agent at most (a zone cannot make a node hold an unbounded list).
pub const MAX_TARGETS: usize = 16;

/// How a session-agent is named in DNS: the name, and the configured port (0: from SRV).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DnsName {
    /// The DNS name (its `hostname`).
    pub name: String,
    /// Its `port`: 0 looks up SRV records (RFC 3263 section 4.2), else A/AAAA at this port.
    pub port: u16,
}

/// One SRV record (RFC 2782).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrvRecord {
    /// Lower is tried first.
    pub priority: u16,
    /// Relative share among records of the same priority.
    pub weight: u16,
    /// The target's port.
    pub port: u16,
    /// The target host (resolved with A/AAAA next).
    pub target: String,
}

/// The SRV owner name RFC 3263 section 4.2 queries for `host` over `transport`.
#[must_use]
pub fn srv_name(transport: LegTransport, host: &str) -> String {
    let host = host.trim_end_matches('.');
    match transport {
        LegTransport::Udp => format!("_sip._udp.{host}"),
        LegTransport::Tcp => format!("_sip._tcp.{host}"),
        LegTransport::Tls => format!("_sips._tcp.{host}"),
    }
}

/// The port RFC 3263 uses when neither the configuration nor SRV gives one.
#[must_use]
pub const fn default_port(transport: LegTransport) -> u16 {
    match transport {
        LegTransport::Tls => 5061,
        LegTransport::Udp | LegTransport::Tcp => 5060,
    }
}

/// Orders SRV records as RFC 2782 says a client tries them: by priority, and within one
/// priority by a weighted random draw (`random(n)` returns a number in `0..=n`). A target of
/// `.` (the service is decidedly not available) is left out.
#[must_use]
pub fn order_srv(records: Vec<SrvRecord>, random: &mut dyn FnMut(u32) -> u32) -> Vec<SrvRecord> {
    let mut records: Vec<SrvRecord> = records
        .into_iter()
        .filter(|r| !r.target.is_empty() && r.target != ".")
        .collect();
    // Weight 0 first within each priority, as the RFC's selection requires.
    records.sort_by_key(|r| (r.priority, r.weight != 0));
    let mut out = Vec::with_capacity(records.len());
    while !records.is_empty() {
        let priority = records[0].priority;
        let mut same: Vec<SrvRecord> = Vec::new();
        while records.first().is_some_and(|r| r.priority == priority) {
            same.push(records.remove(0));
        }
        while !same.is_empty() {
            let total: u32 = same.iter().map(|r| u32::from(r.weight)).sum();
            let draw = random(total).min(total);
            let mut running = 0u32;
            let pick = same
                .iter()
                .position(|r| {
                    running += u32::from(r.weight);
                    running >= draw
                })
                .unwrap_or(0);
            out.push(same.remove(pick));
        }
    }
    out
}

/// What the shell is to look up next for an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsQuery {
    /// SRV records at this name; then each target's A/AAAA records.
    Srv(String),
    /// A and AAAA records of this name, all at this port.
    Address {
        /// The name.
        name: String,
        /// The port every address gets.
        port: u16,
    },
}

/// One session-agent's resolution: its name, the targets of the last good answer, and when
/// to ask again.
#[derive(Debug, Clone)]
pub struct DnsAgent {
    name: String,
    /// The configured port; 0 = RFC 3263's SRV lookup.
    port: u16,
    transport: LegTransport,
    targets: Vec<SocketAddr>,
    current: usize,
    next_query: Instant,
    failures: u32,
    last_error: Option<String>,
    resolved_at: Option<Instant>,
    ttl: Duration,
}

impl DnsAgent {
    /// An agent named `name`, at `port` (0: look up SRV records), over `transport`, first
    /// resolved at `now`.
    #[must_use]
    pub fn new(name: &str, port: u16, transport: LegTransport, now: Instant) -> Self {
        Self {
            name: name.trim_end_matches('.').to_owned(),
            port,
            transport,
            targets: Vec::new(),
            current: 0,
            next_query: now,
            failures: 0,
            last_error: None,
            resolved_at: None,
            ttl: Duration::ZERO,
        }
    }

    /// The name it resolves.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lookup RFC 3263 section 4.2 makes: SRV when no port is configured, else A/AAAA.
    #[must_use]
    pub fn query(&self) -> DnsQuery {
        if self.port == 0 {
            DnsQuery::Srv(srv_name(self.transport, &self.name))
        } else {
            DnsQuery::Address {
                name: self.name.clone(),
                port: self.port,
            }
        }
    }

    /// What to look up when the SRV query found no record (RFC 3263 section 4.2: the name's
    /// own addresses at the transport's default port).
    #[must_use]
    pub fn fallback(&self) -> DnsQuery {
        DnsQuery::Address {
            name: self.name.clone(),
            port: if self.port == 0 {
                default_port(self.transport)
            } else {
                self.port
            },
        }
    }

    /// Whether it is time to resolve again.
    #[must_use]
    pub fn is_due(&self, now: Instant) -> bool {
        now >= self.next_query
    }

    /// When to resolve again.
    #[must_use]
    pub const fn next_query(&self) -> Instant {
        self.next_query
    }

    /// The answer: `targets` in the order they are to be tried (SRV order, then the address
    /// records of each), valid for `ttl`. Returns the target the agent now uses when it
    /// changed. An empty answer counts as a failure ([`Self::failed`]).
    pub fn answered(
        &mut self,
        now: Instant,
        mut targets: Vec<SocketAddr>,
        ttl: Duration,
    ) -> Option<SocketAddr> {
        let mut seen = Vec::with_capacity(targets.len());
        targets.retain(|t| {
            let new = !seen.contains(t);
            seen.push(*t);
            new
        });
        targets.truncate(MAX_TARGETS);
        if targets.is_empty() {
            self.failed(now, "no address in the answer");
            return None;
        }
        let before = self.current();
        // The target in use stays in use while it is still listed.
        self.current = before
            .and_then(|b| targets.iter().position(|t| *t == b))
            .unwrap_or(0);
        self.targets = targets;
        self.failures = 0;
        self.last_error = None;
        self.resolved_at = Some(now);
        self.ttl = ttl.clamp(MIN_TTL, MAX_TTL);
        self.next_query = now + self.ttl;
        let after = self.current();
        (after != before).then_some(after).flatten()
    }

    /// The resolution failed (no such name, no answer, no record): the last good targets
    /// stay in use, and the next try comes after a doubling backoff.
    pub fn failed(&mut self, now: Instant, why: &str) {
        let wait = FIRST_RETRY
            .saturating_mul(1 << self.failures.min(6))
            .min(MAX_RETRY);
        self.failures = self.failures.saturating_add(1);
        self.last_error = Some(why.to_owned());
        self.next_query = now + wait;
    }

    /// The agent went out of service on its current target: the next target, if there is
    /// another (it then stays out of service until that one answers a ping).
    pub fn rotate(&mut self) -> Option<SocketAddr> {
        if self.targets.len() < 2 {
            return None;
        }
        self.current = (self.current + 1) % self.targets.len();
        self.current()
    }

    /// The target the agent uses now; `None` until a first answer.
    #[must_use]
    pub fn current(&self) -> Option<SocketAddr> {
        self.targets.get(self.current).copied()
    }

    /// The targets of the last good answer, in order.
    #[must_use]
    pub fn targets(&self) -> &[SocketAddr] {
        &self.targets
    }

    /// The last failure's reason, while the resolution is failing.
    #[must_use]
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// The TTL of the last good answer (after clamping).
    #[must_use]
    pub const fn ttl(&self) -> Duration {
        self.ttl
    }

    /// When the last good answer came.
    #[must_use]
    pub const fn resolved_at(&self) -> Option<Instant> {
        self.resolved_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn srv(priority: u16, weight: u16, port: u16, target: &str) -> SrvRecord {
        SrvRecord {
            priority,
            weight,
            port,
            target: target.into(),
        }
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("addr")
    }

    #[test]
    fn srv_names_follow_rfc_3263() {
        assert_eq!(
            srv_name(LegTransport::Udp, "pbx.example.test."),
            "_sip._udp.pbx.example.test"
        );
        assert_eq!(srv_name(LegTransport::Tcp, "a.test"), "_sip._tcp.a.test");
        assert_eq!(srv_name(LegTransport::Tls, "a.test"), "_sips._tcp.a.test");
    }

    #[test]
    fn srv_order_is_by_priority_then_weighted_draw() {
        let records = vec![
            srv(20, 0, 5060, "c.test"),
            srv(10, 60, 5060, "a.test"),
            srv(10, 40, 5060, "b.test"),
            srv(30, 0, 5060, "."),
        ];
        // A draw of 0 picks the first record (weight 0 first, else the first listed).
        let low = order_srv(records.clone(), &mut |_| 0);
        let names: Vec<&str> = low.iter().map(|r| r.target.as_str()).collect();
        assert_eq!(names, ["a.test", "b.test", "c.test"]);
        // A draw at the total picks the last of the priority.
        let high = order_srv(records.clone(), &mut |n| n);
        let names: Vec<&str> = high.iter().map(|r| r.target.as_str()).collect();
        assert_eq!(names, ["b.test", "a.test", "c.test"]);
    }

    #[test]
    fn weights_share_first_places_in_proportion() {
        let records = vec![srv(10, 75, 1, "a"), srv(10, 25, 2, "b")];
        // A deterministic sweep over every draw 0..=100.
        let mut firsts = [0u32; 2];
        for draw in 0..=100u32 {
            let order = order_srv(records.clone(), &mut |n| draw.min(n));
            firsts[usize::from(order[0].port - 1)] += 1;
        }
        // Draws 0..=75 land on a (76), 76..=100 on b (25).
        assert_eq!(firsts, [76, 25]);
    }

    #[test]
    fn weight_zero_records_go_first_in_the_draw() {
        let records = vec![srv(1, 10, 1, "w"), srv(1, 0, 2, "z")];
        let order = order_srv(records, &mut |_| 0);
        assert_eq!(order[0].target, "z");
    }

    #[test]
    fn explicit_port_queries_addresses_and_port_zero_queries_srv() {
        let t0 = Instant::now();
        let srv_agent = DnsAgent::new("pbx.test", 0, LegTransport::Tcp, t0);
        assert_eq!(
            srv_agent.query(),
            DnsQuery::Srv("_sip._tcp.pbx.test".into())
        );
        assert_eq!(
            srv_agent.fallback(),
            DnsQuery::Address {
                name: "pbx.test".into(),
                port: 5060
            }
        );
        let tls = DnsAgent::new("pbx.test", 0, LegTransport::Tls, t0);
        assert_eq!(
            tls.fallback(),
            DnsQuery::Address {
                name: "pbx.test".into(),
                port: 5061
            }
        );
        let a = DnsAgent::new("pbx.test", 5070, LegTransport::Udp, t0);
        assert_eq!(
            a.query(),
            DnsQuery::Address {
                name: "pbx.test".into(),
                port: 5070
            }
        );
    }

    #[test]
    fn answers_are_used_for_their_ttl_clamped() {
        let t0 = Instant::now();
        let mut a = DnsAgent::new("pbx.test", 0, LegTransport::Udp, t0);
        assert!(a.is_due(t0));
        assert_eq!(a.current(), None);
        let first = a.answered(
            t0,
            vec![addr("127.0.0.3:5060"), addr("127.0.0.4:5060")],
            Duration::from_secs(30),
        );
        assert_eq!(first, Some(addr("127.0.0.3:5060")));
        assert!(!a.is_due(t0 + Duration::from_secs(29)));
        assert!(a.is_due(t0 + Duration::from_secs(30)));
        // A TTL of 0 is held for a second; a week for an hour.
        a.answered(t0, vec![addr("127.0.0.3:5060")], Duration::ZERO);
        assert_eq!(a.next_query(), t0 + MIN_TTL);
        a.answered(
            t0,
            vec![addr("127.0.0.3:5060")],
            Duration::from_secs(604_800),
        );
        assert_eq!(a.next_query(), t0 + MAX_TTL);
    }

    #[test]
    fn a_changed_answer_moves_the_agent_and_a_kept_target_stays() {
        let t0 = Instant::now();
        let mut a = DnsAgent::new("pbx.test", 0, LegTransport::Udp, t0);
        a.answered(
            t0,
            vec![addr("127.0.0.3:5060"), addr("127.0.0.4:5060")],
            Duration::from_secs(5),
        );
        assert_eq!(a.rotate(), Some(addr("127.0.0.4:5060")));
        // The same records again (in another order): the agent stays on .4.
        let t1 = t0 + Duration::from_secs(5);
        let moved = a.answered(
            t1,
            vec![addr("127.0.0.4:5060"), addr("127.0.0.3:5060")],
            Duration::from_secs(5),
        );
        assert_eq!(moved, None);
        assert_eq!(a.current(), Some(addr("127.0.0.4:5060")));
        // .4 is gone from the zone: the agent moves to the first listed.
        let moved = a.answered(
            t1,
            vec![addr("127.0.0.5:5060"), addr("127.0.0.5:5060")],
            Duration::from_secs(5),
        );
        assert_eq!(moved, Some(addr("127.0.0.5:5060")));
        assert_eq!(a.targets(), [addr("127.0.0.5:5060")], "duplicates dropped");
        assert_eq!(a.rotate(), None, "one target: nothing to rotate to");
    }

    #[test]
    fn failures_back_off_and_keep_the_last_good_answer() {
        let t0 = Instant::now();
        let mut a = DnsAgent::new("pbx.test", 0, LegTransport::Udp, t0);
        a.failed(t0, "NXDOMAIN");
        assert_eq!(a.next_query(), t0 + FIRST_RETRY);
        assert_eq!(a.last_error(), Some("NXDOMAIN"));
        a.answered(t0, vec![addr("127.0.0.3:5060")], Duration::from_secs(5));
        assert_eq!(a.last_error(), None);
        let mut t = t0;
        let mut waits = Vec::new();
        for _ in 0..9 {
            a.failed(t, "timeout");
            waits.push((a.next_query() - t).as_secs());
            t = a.next_query();
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(a.current(), Some(addr("127.0.0.3:5060")));
        // An empty answer is a failure too.
        assert_eq!(a.answered(t, Vec::new(), Duration::from_secs(5)), None);
        assert_eq!(a.current(), Some(addr("127.0.0.3:5060")));
    }

    #[test]
    fn targets_are_bounded() {
        let t0 = Instant::now();
        let mut a = DnsAgent::new("pbx.test", 0, LegTransport::Udp, t0);
        let many: Vec<SocketAddr> = (1..=40u16)
            .map(|p| SocketAddr::from(([127, 0, 0, 3], p)))
            .collect();
        a.answered(t0, many, Duration::from_secs(5));
        assert_eq!(a.targets().len(), MAX_TARGETS);
    }
}
