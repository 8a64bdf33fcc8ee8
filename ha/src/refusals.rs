//! Logging refusals without flooding the log: once per source per interval, never per packet.
//!
//! A stranger sending a thousand forged heartbeats a second must be visible to the operator
//! (counters, and a log line saying who and how many) without writing a thousand lines a
//! second. [`RefusalLog::note`] is told of every refusal and says when to log: the first
//! refusal of a source, then at most one line per [`RefusalLog::interval`], carrying how many
//! were refused since the last line. Sans-IO: time is passed in.
//!
//! The table is bounded ([`MAX_SOURCES`]): when it is full, sources not heard within an
//! interval are forgotten first; if all are recent (a spoofed-source flood), further sources
//! share one entry ("many sources"), so memory stays bounded and the flood is still logged.
//!
//! A source is an address by default; the management socket keys its refusals by uid.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Sources remembered at most.
pub const MAX_SOURCES: usize = 1024;

/// How often one source is logged at most, by default.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy)]
struct Entry {
    logged_at: Instant,
    last_seen: Instant,
    suppressed: u64,
}

/// What to log for one refusal, when it is time to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLine<K = IpAddr> {
    /// The source; `None` for "many sources" (the table was full).
    pub source: Option<K>,
    /// Refusals of this source since the last line, this one included.
    pub count: u64,
}

impl<K: std::fmt::Display> LogLine<K> {
    /// The source as a log field: the source, or `many sources`.
    #[must_use]
    pub fn source_text(&self) -> String {
        self.source
            .as_ref()
            .map_or_else(|| "many sources".to_owned(), ToString::to_string)
    }
}

/// Rate limiter of refusal log lines, per source (an address by default).
#[derive(Debug)]
pub struct RefusalLog<K = IpAddr> {
    interval: Duration,
    sources: HashMap<Option<K>, Entry>,
}

impl<K: Hash + Eq + Clone> Default for RefusalLog<K> {
    fn default() -> Self {
        Self::new(DEFAULT_INTERVAL)
    }
}

impl<K: Hash + Eq + Clone> RefusalLog<K> {
    /// A log that writes one line per source per `interval` at most.
    #[must_use]
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            sources: HashMap::new(),
        }
    }

    /// The interval.
    #[must_use]
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// A refusal from `source` at `now`: `Some` when a line should be written now.
    pub fn note(&mut self, now: Instant, source: K) -> Option<LogLine<K>> {
        let source = Some(source);
        let key = if self.sources.contains_key(&source) || self.make_room(now) {
            source
        } else {
            None
        };
        match self.sources.get_mut(&key) {
            Some(e) => {
                e.last_seen = now;
                e.suppressed += 1;
                if now.saturating_duration_since(e.logged_at) >= self.interval {
                    let count = e.suppressed;
                    e.suppressed = 0;
                    e.logged_at = now;
                    Some(LogLine { source: key, count })
                } else {
                    None
                }
            }
            None => {
                self.sources.insert(
                    key.clone(),
                    Entry {
                        logged_at: now,
                        last_seen: now,
                        suppressed: 0,
                    },
                );
                Some(LogLine {
                    source: key,
                    count: 1,
                })
            }
        }
    }

    /// Whether a new source fits, after forgetting those not heard within an interval. One
    /// slot stays free for the shared "many sources" entry.
    fn make_room(&mut self, now: Instant) -> bool {
        let room = |n: usize| n < MAX_SOURCES - 1;
        if room(self.sources.len()) {
            return true;
        }
        let interval = self.interval;
        self.sources
            .retain(|_, e| now.saturating_duration_since(e.last_seen) < interval);
        room(self.sources.len())
    }

    /// Sources currently remembered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.sources.len()
    }

    /// Whether no source is remembered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
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
    fn one_line_per_source_per_interval_with_the_count() {
        let t0 = Instant::now();
        let mut log = RefusalLog::new(Duration::from_secs(10));
        assert_eq!(
            log.note(t0, ip(3)),
            Some(LogLine {
                source: Some(ip(3)),
                count: 1
            })
        );
        let mut lines = 0;
        for i in 1..=999u64 {
            if log.note(t0 + Duration::from_millis(i), ip(3)).is_some() {
                lines += 1;
            }
        }
        assert_eq!(lines, 0, "a flood within the interval writes nothing more");
        // Another source is logged at once.
        assert!(log.note(t0, ip(4)).is_some());
        assert_eq!(
            log.note(t0 + Duration::from_secs(10), ip(3)),
            Some(LogLine {
                source: Some(ip(3)),
                count: 1000
            }),
            "the next line says how many were refused since"
        );
    }

    #[test]
    fn a_spoofed_source_flood_stays_bounded() {
        let t0 = Instant::now();
        let mut log = RefusalLog::new(Duration::from_secs(10));
        let mut lines = 0;
        for i in 0..(MAX_SOURCES as u32 * 4) {
            let src = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
            if log.note(t0, src).is_some() {
                lines += 1;
            }
        }
        assert_eq!(log.len(), MAX_SOURCES);
        assert_eq!(
            lines, MAX_SOURCES,
            "the overflow shares one line per interval"
        );
        // Once they are quiet for an interval, new sources get their own entries again.
        let later = t0 + Duration::from_secs(11);
        assert_eq!(
            log.note(later, ip(9)),
            Some(LogLine {
                source: Some(ip(9)),
                count: 1
            })
        );
        assert!(log.len() <= 2);
    }
}
