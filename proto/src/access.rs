//! Per-source protection at the edge, sans-IO: which sources may send new requests, and how
//! fast.
//!
//! The receive path asks [`AccessControl::check`] about every message before it is queued:
//!
//! - **Operator lists** (`access-control` elements): a source in a `deny` entry is dropped
//!   whatever it sends; one in an `allow` entry is never limited. Session-agents are allowed
//!   (trusted) by default: a carrier trunk or a PBX sends far more than any phone.
//! - **A token bucket per source** for new requests (out-of-dialog, as the receive path
//!   classifies them): `source-rate` per second, `source-burst` at once. A new request beyond
//!   the bucket is dropped (no answer: an answer would feed the flood) and counted.
//! - **Dynamic deny** (as Kamailio's `pike` does): a source that sends `source-burst` more new
//!   requests while its bucket is empty is denied for `source-deny-seconds`, every message of
//!   it dropped, with an event for the log and an SNMP trap; `clear-deny <addr>` lifts it.
//!   0 seconds turns dynamic deny off.
//!
//! Defaults follow `pike`'s (30 requests per 2 s sampling interval, blocked for 120 s):
//! 15 new requests per second, 30 at once, 120 s. The table of sources is bounded
//! ([`MAX_SOURCES`]): idle ones are forgotten first, and a source not in a full table passes
//! unlimited (counted), so memory stays bounded under a flood of forged addresses (which a
//! per-source limit cannot stop anyway; admission control and PRSM do).
//!
//! **A source** is an IPv4 address, or the IPv6 prefix an address is in ([`SourceKey`]): a
//! stranger holding a /64 has 2^64 addresses, so per-address state would let it refill its
//! bucket at will and fill the table. IPv6 sources are aggregated to `ipv6_prefix` bits (a /64
//! by default, `source-ipv6-prefix-length`); an IPv4-mapped address (`::ffff:a.b.c.d`) is
//! the IPv4 address it maps ([`canonical`]). The operator's lists and the session-agents are
//! matched against the address itself.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Serialize, Serializer};

/// Sources tracked at most.
pub const MAX_SOURCES: usize = 65_536;

/// The prefix length IPv6 sources are aggregated to by default: a /64, the size of an IPv6
/// LAN (RFC 7421), any of whose addresses a host on it may take.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// `addr` with an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, as a dual-stack socket reports
/// an IPv4 peer) turned into the IPv4 address it maps; any other address unchanged.
#[must_use]
pub fn canonical(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => SocketAddr::new(v6.ip().to_canonical(), v6.port()),
        SocketAddr::V4(_) => addr,
    }
}

/// What a per-source limit counts as one source: an IPv4 address, or an IPv6 prefix (see the
/// module docs). Shown as the address for a single address (`192.0.2.7`, `2001:db8::7`), as
/// the prefix otherwise (`2001:db8:0:1::/64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceKey(IpNet);

impl SourceKey {
    /// The source `ip` counts as: its IPv4 address (an IPv4-mapped one's too), or the IPv6
    /// prefix of `ipv6_prefix` bits (at most 128) it is in.
    #[must_use]
    pub fn of(ip: IpAddr, ipv6_prefix: u8) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(a) => Self(IpNet::V4(Ipv4Net::from(a))),
            IpAddr::V6(a) => {
                let net = Ipv6Net::new(a, ipv6_prefix.min(128)).unwrap_or_else(|_| a.into());
                Self(IpNet::V6(net.trunc()))
            }
        }
    }

    /// The addresses it covers.
    #[must_use]
    pub fn net(&self) -> IpNet {
        self.0
    }

    /// Whether `ip` (canonical) is one of its addresses.
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.contains(&ip.to_canonical())
    }

    /// Whether it is an IPv6 prefix (or address).
    #[must_use]
    pub fn is_ipv6(&self) -> bool {
        matches!(self.0, IpNet::V6(_))
    }
}

/// `net` with an IPv4-mapped IPv6 prefix (`::ffff:192.0.2.0/120`) turned into the IPv4
/// prefix it maps (`192.0.2.0/24`); any other prefix unchanged.
#[must_use]
pub fn canonical_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.addr().to_ipv4_mapped() {
            Some(a) => Ipv4Net::new(a, v6.prefix_len() - 96).map_or(net, |n| IpNet::V4(n.trunc())),
            None => net,
        },
        _ => net,
    }
}

impl fmt::Display for SourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Padded as a whole (`{:<40}` in `show access-control`).
        if self.0.prefix_len() == self.0.max_prefix_len() {
            f.pad(&self.0.addr().to_string())
        } else {
            f.pad(&self.0.to_string())
        }
    }
}

impl Serialize for SourceKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// The settings of [`AccessControl`].
#[derive(Debug, Clone, PartialEq)]
pub struct AccessSettings {
    /// New requests per second a source may send.
    pub rate: f64,
    /// New requests a source may send at once.
    pub burst: f64,
    /// How long a source that keeps exceeding is denied (zero: never).
    pub deny_for: Duration,
    /// Never limited.
    pub allow: Vec<IpNet>,
    /// Always dropped.
    pub deny: Vec<IpNet>,
    /// Session-agent addresses: never limited.
    pub trusted: Vec<IpAddr>,
    /// The prefix length IPv6 sources are aggregated to (at most 128).
    pub ipv6_prefix: u8,
}

impl Default for AccessSettings {
    fn default() -> Self {
        Self {
            rate: 15.0,
            burst: 30.0,
            deny_for: Duration::from_secs(120),
            allow: Vec::new(),
            deny: Vec::new(),
            trusted: Vec::new(),
            ipv6_prefix: DEFAULT_IPV6_PREFIX,
        }
    }
}

/// What to do with one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Queue it.
    Pass,
    /// Drop it: a new request beyond the source's rate.
    RateLimited,
    /// Drop it: the source is denied (operator list or dynamic deny).
    Denied,
}

/// A change the shell logs and traps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessEvent {
    /// A source was denied dynamically until `until`.
    Denied {
        /// The source.
        source: SourceKey,
        /// For how long.
        for_: Duration,
    },
    /// A dynamic deny ended (expired or cleared).
    Released {
        /// The source.
        source: SourceKey,
    },
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
    /// New requests refused since the bucket last had a token.
    over: u32,
}

/// Counters, for `show access-control`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AccessCounters {
    /// New requests dropped for rate.
    pub rate_limited: u64,
    /// Messages dropped from denied sources (lists or dynamic).
    pub denied: u64,
    /// Dynamic denies started.
    pub denies: u64,
    /// New requests passed unlimited because the source table was full.
    pub untracked: u64,
}

/// One denied source, for `show access-control`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeniedSource {
    /// The source (an IPv6 prefix shown as such).
    pub source: SourceKey,
    /// Seconds of deny left.
    pub remaining_s: u64,
}

/// `s` with IPv4-mapped addresses and prefixes in its lists made IPv4, as sources are.
fn canonical_settings(mut s: AccessSettings) -> AccessSettings {
    for net in s.allow.iter_mut().chain(s.deny.iter_mut()) {
        *net = canonical_net(*net);
    }
    for ip in &mut s.trusted {
        *ip = ip.to_canonical();
    }
    s
}

/// Per-source protection (see the module docs).
#[derive(Debug)]
pub struct AccessControl {
    settings: AccessSettings,
    sources: HashMap<SourceKey, Bucket>,
    denied: HashMap<SourceKey, Instant>,
    /// IPv6 denies of prefixes shorter than `ipv6_prefix`, left by a change of it to a longer
    /// one: matched by containment until they end.
    wider: HashMap<SourceKey, Instant>,
    events: VecDeque<AccessEvent>,
    counters: AccessCounters,
}

impl AccessControl {
    /// Per-source protection with `settings`.
    #[must_use]
    pub fn new(settings: AccessSettings) -> Self {
        Self {
            settings: canonical_settings(settings),
            sources: HashMap::new(),
            denied: HashMap::new(),
            wider: HashMap::new(),
            events: VecDeque::new(),
            counters: AccessCounters::default(),
        }
    }

    /// New settings (an activated configuration); dynamic denies and buckets stay. A new
    /// `ipv6_prefix` forgets the IPv6 buckets (they were counted per other prefixes) and keeps
    /// the IPv6 denies: a denied prefix longer than the new length denies the prefix of the
    /// new length it is in; a shorter one stays denied as a whole.
    pub fn set_settings(&mut self, settings: AccessSettings) {
        let len = settings.ipv6_prefix.min(128);
        let changed = len != self.settings.ipv6_prefix.min(128);
        self.settings = canonical_settings(settings);
        if !changed {
            return;
        }
        self.sources.retain(|k, _| !k.is_ipv6());
        let v6: Vec<(SourceKey, Instant)> = self
            .denied
            .iter()
            .chain(&self.wider)
            .filter(|(k, _)| k.is_ipv6())
            .map(|(k, until)| (*k, *until))
            .collect();
        self.denied.retain(|k, _| !k.is_ipv6());
        self.wider.clear();
        for (key, until) in v6 {
            let net = key.net();
            let (map, key) = if net.prefix_len() >= len {
                (&mut self.denied, SourceKey::of(net.addr(), len))
            } else {
                (&mut self.wider, key)
            };
            let at = map.entry(key).or_insert(until);
            *at = (*at).max(until);
        }
    }

    /// The source `ip` counts as under the current settings.
    #[must_use]
    pub fn source_of(&self, ip: IpAddr) -> SourceKey {
        SourceKey::of(ip, self.settings.ipv6_prefix)
    }

    /// The verdict on a message from `source` at `now`; `new_request` when the receive path
    /// classified it as an out-of-dialog request.
    pub fn check(&mut self, now: Instant, source: IpAddr, new_request: bool) -> Verdict {
        let source = source.to_canonical();
        let s = &self.settings;
        if s.deny.iter().any(|n| n.contains(&source)) {
            self.counters.denied += 1;
            return Verdict::Denied;
        }
        if s.trusted.contains(&source) || s.allow.iter().any(|n| n.contains(&source)) {
            return Verdict::Pass;
        }
        let key = SourceKey::of(source, s.ipv6_prefix);
        if let Some(until) = self.denied.get(&key).copied() {
            if now < until {
                self.counters.denied += 1;
                return Verdict::Denied;
            }
            self.denied.remove(&key);
            self.events.push_back(AccessEvent::Released { source: key });
        }
        if !self.wider.is_empty() && source.is_ipv6() && self.denied_wider(now, source) {
            self.counters.denied += 1;
            return Verdict::Denied;
        }
        if !new_request {
            return Verdict::Pass;
        }
        let (rate, burst, deny_for) = (s.rate, s.burst, s.deny_for);
        if !self.sources.contains_key(&key) && !self.make_room(now) {
            self.counters.untracked += 1;
            return Verdict::Pass;
        }
        let b = self.sources.entry(key).or_insert(Bucket {
            tokens: burst,
            at: now,
            over: 0,
        });
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate).min(burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            b.over = 0;
            return Verdict::Pass;
        }
        b.over += 1;
        self.counters.rate_limited += 1;
        if !deny_for.is_zero() && f64::from(b.over) >= burst {
            b.over = 0;
            self.denied.insert(key, now + deny_for);
            self.counters.denies += 1;
            self.events.push_back(AccessEvent::Denied {
                source: key,
                for_: deny_for,
            });
            return Verdict::Denied;
        }
        Verdict::RateLimited
    }

    /// Whether a wider IPv6 deny still running at `now` covers `source`.
    fn denied_wider(&self, now: Instant, source: IpAddr) -> bool {
        self.wider
            .iter()
            .any(|(k, until)| now < *until && k.contains(source))
    }

    /// Lifts the dynamic denies of the sources `net` is in or holds (an address: the source
    /// it counts as; a prefix: every denied source within it too) and forgets their buckets;
    /// how many were lifted.
    pub fn clear_deny(&mut self, net: IpNet) -> usize {
        let net = canonical_net(net);
        let hit = |k: &SourceKey| k.net().contains(&net) || net.contains(&k.net());
        let lifted: Vec<SourceKey> = self
            .denied
            .keys()
            .chain(self.wider.keys())
            .filter(|k| hit(k))
            .copied()
            .collect();
        for source in &lifted {
            self.denied.remove(source);
            self.wider.remove(source);
            self.sources.remove(source);
            self.events
                .push_back(AccessEvent::Released { source: *source });
        }
        lifted.len()
    }

    /// Ends the denies that expired by `now` (their release events included).
    pub fn handle_timeout(&mut self, now: Instant) {
        let expired: Vec<SourceKey> = self
            .denied
            .iter()
            .chain(&self.wider)
            .filter(|(_, until)| now >= **until)
            .map(|(k, _)| *k)
            .collect();
        for source in expired {
            self.denied.remove(&source);
            self.wider.remove(&source);
            self.events.push_back(AccessEvent::Released { source });
        }
    }

    /// The next event, if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<AccessEvent> {
        self.events.pop_front()
    }

    /// The denied sources and the counters.
    #[must_use]
    pub fn report(&self, now: Instant) -> (Vec<DeniedSource>, AccessCounters) {
        let mut denied: Vec<DeniedSource> = self
            .denied
            .iter()
            .chain(&self.wider)
            .filter(|(_, until)| now < **until)
            .map(|(k, until)| DeniedSource {
                source: *k,
                remaining_s: until.saturating_duration_since(now).as_secs().max(1),
            })
            .collect();
        denied.sort_by_key(|d| d.source);
        (denied, self.counters)
    }

    /// Whether a new source fits, after forgetting sources whose bucket refilled (idle).
    fn make_room(&mut self, now: Instant) -> bool {
        if self.sources.len() < MAX_SOURCES {
            return true;
        }
        let full_after =
            Duration::from_secs_f64(self.settings.burst / self.settings.rate.max(0.001));
        self.sources
            .retain(|_, b| now.saturating_duration_since(b.at) < full_after);
        self.sources.len() < MAX_SOURCES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(x: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, x))
    }

    fn key(ip: IpAddr) -> SourceKey {
        SourceKey::of(ip, DEFAULT_IPV6_PREFIX)
    }

    fn v6(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    /// Sends `n` new requests from `source` at `now`; the verdicts.
    fn burst(a: &mut AccessControl, now: Instant, source: IpAddr, n: usize) -> Vec<Verdict> {
        (0..n).map(|_| a.check(now, source, true)).collect()
    }

    #[test]
    fn a_flood_is_limited_then_denied_and_others_are_not_touched() {
        let t0 = Instant::now();
        let mut a = AccessControl::new(AccessSettings::default());
        // The burst passes, then the rate: 30 at once, then 15 per second.
        let passed = (0..30)
            .filter(|_| a.check(t0, ip(3), true) == Verdict::Pass)
            .count();
        assert_eq!(passed, 30);
        assert_eq!(a.check(t0, ip(3), true), Verdict::RateLimited);
        // Another source is not affected at all.
        assert_eq!(a.check(t0, ip(4), true), Verdict::Pass);
        // In-dialog traffic of the flooding source still passes while it is only limited.
        assert_eq!(a.check(t0, ip(3), false), Verdict::Pass);
        // 29 more refusals with an empty bucket: denied.
        let mut v = Verdict::Pass;
        for _ in 0..29 {
            v = a.check(t0, ip(3), true);
        }
        assert_eq!(v, Verdict::Denied);
        assert_eq!(
            a.poll_event(),
            Some(AccessEvent::Denied {
                source: key(ip(3)),
                for_: Duration::from_secs(120)
            })
        );
        assert_eq!(
            a.check(t0 + Duration::from_secs(10), ip(3), false),
            Verdict::Denied
        );
        let (denied, c) = a.report(t0 + Duration::from_secs(10));
        assert_eq!(denied.len(), 1);
        assert_eq!(denied[0].remaining_s, 110);
        assert_eq!((c.rate_limited, c.denies), (30, 1));
        // It expires; then the source is served again.
        let later = t0 + Duration::from_secs(121);
        a.handle_timeout(later);
        assert_eq!(
            a.poll_event(),
            Some(AccessEvent::Released { source: key(ip(3)) })
        );
        assert_eq!(a.check(later, ip(3), true), Verdict::Pass);
    }

    #[test]
    fn lists_trust_and_clear_deny() {
        let t0 = Instant::now();
        let mut a = AccessControl::new(AccessSettings {
            rate: 1.0,
            burst: 2.0,
            allow: vec!["127.0.0.8/30".parse().expect("net")],
            deny: vec!["127.0.0.66/32".parse().expect("net")],
            trusted: vec![ip(5)],
            ..AccessSettings::default()
        });
        assert_eq!(a.check(t0, ip(66), false), Verdict::Denied);
        for _ in 0..100 {
            assert_eq!(a.check(t0, ip(5), true), Verdict::Pass, "a session-agent");
            assert_eq!(a.check(t0, ip(9), true), Verdict::Pass, "allowed");
        }
        for _ in 0..4 {
            let _ = a.check(t0, ip(3), true);
        }
        assert_eq!(a.check(t0, ip(3), true), Verdict::Denied);
        assert_eq!(a.clear_deny(ip(3).into()), 1);
        assert_eq!(a.clear_deny(ip(3).into()), 0);
        assert_eq!(a.check(t0, ip(3), true), Verdict::Pass, "a fresh bucket");
        // Dynamic deny off: only limited.
        a.set_settings(AccessSettings {
            rate: 1.0,
            burst: 2.0,
            deny_for: Duration::ZERO,
            ..AccessSettings::default()
        });
        for _ in 0..50 {
            assert_ne!(a.check(t0, ip(7), true), Verdict::Denied);
        }
    }

    #[test]
    fn a_source_key_is_the_ipv4_address_or_the_ipv6_prefix() {
        let k = SourceKey::of(v6("fd00:64::1234:5678"), 64);
        assert_eq!(k.to_string(), "fd00:64::/64");
        assert!(k.contains(v6("fd00:64::ffff:1")));
        assert!(!k.contains(v6("fd00:65::1")));
        assert_eq!(
            SourceKey::of(v6("2001:db8:1:2:3::9"), 48).to_string(),
            "2001:db8:1::/48"
        );
        // A single address is shown as the address.
        assert_eq!(SourceKey::of(v6("fd00::7"), 128).to_string(), "fd00::7");
        assert_eq!(SourceKey::of(ip(7), 64).to_string(), "127.0.0.7");
        assert_eq!(format!("{k:<14}|"), "fd00:64::/64  |");
        // An IPv4-mapped address is the IPv4 source, never a /64 of mapped addresses.
        assert_eq!(
            SourceKey::of(v6("::ffff:192.0.2.7"), 64).to_string(),
            "192.0.2.7"
        );
        assert_eq!(
            SourceKey::of(v6("::ffff:192.0.2.7"), 64),
            SourceKey::of(v6("192.0.2.7"), 64)
        );
        // Lengths beyond 128 are 128.
        assert_eq!(SourceKey::of(v6("fd00::7"), 200).to_string(), "fd00::7");
    }

    #[test]
    fn ipv4_mapped_socket_addresses_become_ipv4() {
        let mapped: SocketAddr = "[::ffff:10.1.2.3]:5060".parse().expect("addr");
        assert_eq!(canonical(mapped), "10.1.2.3:5060".parse().expect("addr"));
        for same in ["[fd00::1]:5060", "10.1.2.3:5060", "[::1]:7"] {
            let a: SocketAddr = same.parse().expect("addr");
            assert_eq!(canonical(a), a);
        }
    }

    #[test]
    fn a_flood_from_many_addresses_of_one_ipv6_prefix_is_one_source() {
        let t0 = Instant::now();
        let mut a = AccessControl::new(AccessSettings::default());
        // 30 addresses of one /64: the burst, one request each.
        for i in 0..30u16 {
            let src = v6(&format!("fd00:64::{i:x}:1"));
            assert_eq!(a.check(t0, src, true), Verdict::Pass, "request {i}");
        }
        // Every further address of the /64 finds the bucket empty, then the /64 is denied.
        let v = burst(&mut a, t0, v6("fd00:64::dead:beef"), 30);
        assert_eq!(v.last(), Some(&Verdict::Denied));
        assert_eq!(
            a.check(t0, v6("fd00:64::1:2:3:4"), false),
            Verdict::Denied,
            "any address of the /64, in-dialog too"
        );
        assert_eq!(
            a.poll_event(),
            Some(AccessEvent::Denied {
                source: SourceKey::of(v6("fd00:64::"), 64),
                for_: Duration::from_secs(120)
            })
        );
        // Another /64 is another source; an IPv4 source is per address still.
        assert_eq!(a.check(t0, v6("fd00:65::1"), true), Verdict::Pass);
        assert_eq!(a.check(t0, ip(9), true), Verdict::Pass);
        let (denied, c) = a.report(t0);
        let names: Vec<String> = denied.iter().map(|d| d.source.to_string()).collect();
        assert_eq!(names, ["fd00:64::/64"]);
        assert_eq!(c.denies, 1);
        // 40 000 addresses of one /64 take one bucket: the table stays small.
        for i in 0..40_000u32 {
            let src = v6(&format!("fd00:66::{:x}:{:x}", i >> 16, i & 0xffff));
            let _ = a.check(t0, src, true);
        }
        assert!(a.sources.len() <= 5, "{} buckets", a.sources.len());
        // clear-deny with any address of the /64, or the /64 itself, lifts it.
        assert_eq!(a.clear_deny(v6("fd00:64::42").into()), 1);
        assert_eq!(a.check(t0, v6("fd00:64::1"), true), Verdict::Pass);
        let wide: IpNet = "fd00::/16".parse().expect("net");
        assert_eq!(a.clear_deny(wide), 1, "the /64 of fd00:66:: within it");
    }

    #[test]
    fn the_ipv6_prefix_length_is_configurable() {
        let t0 = Instant::now();
        let settings = |len| AccessSettings {
            rate: 1.0,
            burst: 2.0,
            ipv6_prefix: len,
            ..AccessSettings::default()
        };
        // Per address (/128): every address has its own bucket.
        let mut a = AccessControl::new(settings(128));
        for i in 0..20u16 {
            let src = v6(&format!("fd00:64::{i:x}"));
            assert_eq!(burst(&mut a, t0, src, 2), [Verdict::Pass; 2]);
        }
        // A /56: two /64s of it share one bucket.
        let mut a = AccessControl::new(settings(56));
        assert_eq!(a.check(t0, v6("fd00:0:0:1::1"), true), Verdict::Pass);
        assert_eq!(a.check(t0, v6("fd00:0:0:2::1"), true), Verdict::Pass);
        assert_eq!(a.check(t0, v6("fd00:0:0:3::1"), true), Verdict::RateLimited);
        assert_eq!(a.source_of(v6("fd00:0:0:3::1")).to_string(), "fd00::/56");
        // Refilled by the rate, on the virtual clock.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(a.check(t1, v6("fd00:0:0:4::1"), true), Verdict::Pass);
    }

    #[test]
    fn a_new_prefix_length_keeps_the_ipv6_denies() {
        let t0 = Instant::now();
        let settings = |len| AccessSettings {
            rate: 1.0,
            burst: 2.0,
            ipv6_prefix: len,
            ..AccessSettings::default()
        };
        let mut a = AccessControl::new(settings(64));
        let _ = burst(&mut a, t0, v6("fd00:1:2:3::1"), 5);
        let _ = burst(&mut a, t0, ip(3), 5);
        assert_eq!(a.check(t0, v6("fd00:1:2:3::9"), false), Verdict::Denied);
        // Longer (/96): the /64 stays denied as a whole.
        a.set_settings(settings(96));
        assert_eq!(
            a.check(t0, v6("fd00:1:2:3:ffff::9"), false),
            Verdict::Denied
        );
        assert_eq!(a.check(t0, ip(3), false), Verdict::Denied, "IPv4 untouched");
        assert_eq!(a.check(t0, v6("fd00:1:2:4::1"), true), Verdict::Pass);
        let names = |a: &AccessControl| -> Vec<String> {
            a.report(t0)
                .0
                .iter()
                .map(|d| d.source.to_string())
                .collect()
        };
        assert_eq!(names(&a), ["127.0.0.3", "fd00:1:2:3::/64"]);
        // Shorter (/48): the /48 that holds it is denied.
        a.set_settings(settings(48));
        assert_eq!(a.check(t0, v6("fd00:1:2:ffff::1"), false), Verdict::Denied);
        assert_eq!(names(&a), ["127.0.0.3", "fd00:1:2::/48"]);
        // They end when they would have.
        let later = t0 + Duration::from_secs(121);
        a.handle_timeout(later);
        assert!(a.report(later).0.is_empty());
        assert_eq!(a.check(later, v6("fd00:1:2:3::1"), true), Verdict::Pass);
        // A wider deny left by a longer length is lifted by clear-deny too.
        let mut a = AccessControl::new(settings(64));
        let _ = burst(&mut a, t0, v6("fd00:9::1"), 5);
        a.set_settings(settings(128));
        assert_eq!(a.check(t0, v6("fd00:9::2"), true), Verdict::Denied);
        assert_eq!(a.clear_deny(v6("fd00:9::2").into()), 1);
        assert_eq!(a.check(t0, v6("fd00:9::2"), true), Verdict::Pass);
    }

    #[test]
    fn ipv6_prefixes_in_the_operator_lists_are_enforced() {
        let t0 = Instant::now();
        let mut a = AccessControl::new(AccessSettings {
            rate: 1.0,
            burst: 1.0,
            allow: vec!["fd00:a::/64".parse().expect("net")],
            deny: vec![
                "fd00:d::/48".parse().expect("net"),
                "::ffff:192.0.2.0/120".parse().expect("net"),
            ],
            trusted: vec![v6("::ffff:198.51.100.99"), v6("fd00:5::5")],
            ..AccessSettings::default()
        });
        assert_eq!(a.check(t0, v6("fd00:d:0:7::1"), false), Verdict::Denied);
        assert_eq!(a.check(t0, v6("fd00:d:1::1"), true), Verdict::Pass);
        for _ in 0..50 {
            assert_eq!(a.check(t0, v6("fd00:a::9"), true), Verdict::Pass, "allowed");
            assert_eq!(
                a.check(t0, v6("fd00:5::5"), true),
                Verdict::Pass,
                "an agent"
            );
            // A session-agent written IPv4-mapped is its IPv4 address.
            assert_eq!(a.check(t0, v6("198.51.100.99"), true), Verdict::Pass);
        }
        // Outside the allowed /64: limited (a burst of 1).
        assert_ne!(burst(&mut a, t0, v6("fd00:a:0:1::9"), 2)[1], Verdict::Pass);
        // A prefix written IPv4-mapped denies the IPv4 sources it maps.
        assert_eq!(a.check(t0, v6("192.0.2.7"), false), Verdict::Denied);
        assert_eq!(a.check(t0, v6("::ffff:192.0.2.7"), false), Verdict::Denied);
        assert_eq!(
            canonical_net("::ffff:192.0.2.0/120".parse().expect("net")),
            "192.0.2.0/24".parse::<IpNet>().expect("net")
        );
        // A mapped source is matched as the IPv4 address it is.
        let mapped = v6("::ffff:127.0.0.66");
        let mut b = AccessControl::new(AccessSettings {
            deny: vec!["127.0.0.66/32".parse().expect("net")],
            ..AccessSettings::default()
        });
        assert_eq!(b.check(t0, mapped, false), Verdict::Denied);
    }
}
