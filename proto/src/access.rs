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

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use serde::Serialize;

/// Sources tracked at most.
pub const MAX_SOURCES: usize = 65_536;

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
        source: IpAddr,
        /// For how long.
        for_: Duration,
    },
    /// A dynamic deny ended (expired or cleared).
    Released {
        /// The source.
        source: IpAddr,
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
    /// The source.
    pub source: IpAddr,
    /// Seconds of deny left.
    pub remaining_s: u64,
}

/// Per-source protection (see the module docs).
#[derive(Debug)]
pub struct AccessControl {
    settings: AccessSettings,
    sources: HashMap<IpAddr, Bucket>,
    denied: HashMap<IpAddr, Instant>,
    events: VecDeque<AccessEvent>,
    counters: AccessCounters,
}

impl AccessControl {
    /// Per-source protection with `settings`.
    #[must_use]
    pub fn new(settings: AccessSettings) -> Self {
        Self {
            settings,
            sources: HashMap::new(),
            denied: HashMap::new(),
            events: VecDeque::new(),
            counters: AccessCounters::default(),
        }
    }

    /// New settings (an activated configuration); dynamic denies and buckets stay.
    pub fn set_settings(&mut self, settings: AccessSettings) {
        self.settings = settings;
    }

    /// The verdict on a message from `source` at `now`; `new_request` when the receive path
    /// classified it as an out-of-dialog request.
    pub fn check(&mut self, now: Instant, source: IpAddr, new_request: bool) -> Verdict {
        let s = &self.settings;
        if s.deny.iter().any(|n| n.contains(&source)) {
            self.counters.denied += 1;
            return Verdict::Denied;
        }
        if s.trusted.contains(&source) || s.allow.iter().any(|n| n.contains(&source)) {
            return Verdict::Pass;
        }
        if let Some(until) = self.denied.get(&source).copied() {
            if now < until {
                self.counters.denied += 1;
                return Verdict::Denied;
            }
            self.denied.remove(&source);
            self.events.push_back(AccessEvent::Released { source });
        }
        if !new_request {
            return Verdict::Pass;
        }
        let (rate, burst, deny_for) = (s.rate, s.burst, s.deny_for);
        if !self.sources.contains_key(&source) && !self.make_room(now) {
            self.counters.untracked += 1;
            return Verdict::Pass;
        }
        let b = self.sources.entry(source).or_insert(Bucket {
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
            self.denied.insert(source, now + deny_for);
            self.counters.denies += 1;
            self.events.push_back(AccessEvent::Denied {
                source,
                for_: deny_for,
            });
            return Verdict::Denied;
        }
        Verdict::RateLimited
    }

    /// Lifts a dynamic deny of `source`; false if it was not denied.
    pub fn clear_deny(&mut self, source: IpAddr) -> bool {
        let was = self.denied.remove(&source).is_some();
        if was {
            self.sources.remove(&source);
            self.events.push_back(AccessEvent::Released { source });
        }
        was
    }

    /// Ends the denies that expired by `now` (their release events included).
    pub fn handle_timeout(&mut self, now: Instant) {
        let expired: Vec<IpAddr> = self
            .denied
            .iter()
            .filter(|(_, until)| now >= **until)
            .map(|(ip, _)| *ip)
            .collect();
        for source in expired {
            self.denied.remove(&source);
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
            .filter(|(_, until)| now < **until)
            .map(|(ip, until)| DeniedSource {
                source: *ip,
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
                source: ip(3),
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
            Some(AccessEvent::Released { source: ip(3) })
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
        assert!(a.clear_deny(ip(3)));
        assert!(!a.clear_deny(ip(3)));
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
}
