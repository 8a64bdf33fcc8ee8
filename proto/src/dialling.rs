//! Dialling over connection-oriented transports (TCP, TLS), as bookkeeping with time passed in:
//! the connects in flight with the messages that wait for each, the destinations backing off
//! after a failed connect, and the INVITEs answered 503 because their next hop could not be
//! reached (so that their ACKs are not dialled). The shell (`sbc`'s TCP edge) does the I/O and
//! asks these tables what to do; their rules are unit-tested here.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::sip::message::SipMessage;

/// The smallest cost of one queued write: bounds the number of queued items too.
pub const MIN_ITEM_COST: usize = 64;

/// The connects in flight, each with the messages waiting for it: at most one connect per
/// destination, at most `max_connects` at once, each queue bounded like a connection's write
/// queue. Pure bookkeeping (the sender task does the I/O), so its rules are unit-tested.
///
/// A destination whose connect (or TLS handshake) failed is not dialled again for
/// [`DIAL_BACKOFF`]: requests for it meanwhile are answered 503 at once and ACKs dropped, so a
/// broken next hop at hundreds of calls a second costs one attempt per back-off, not one
/// handshake per call (and each failed INVITE's ACK no second one).
#[derive(Debug)]
pub struct Dialling {
    pending: HashMap<SocketAddr, Waiting>,
    max_connects: usize,
    /// Destinations whose last connect failed, and until when they are not dialled.
    backoff: HashMap<SocketAddr, Instant>,
}

/// How long a destination whose connect failed is not dialled again.
pub const DIAL_BACKOFF: Duration = Duration::from_secs(1);

/// The messages waiting for one connect, and what they cost against the queue bound.
#[derive(Debug, Default)]
struct Waiting {
    queued: Vec<Bytes>,
    cost: usize,
}

/// What to do with a message for a destination without a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queued {
    /// The first message for it: queued, and a connect must start.
    Connect,
    /// Queued behind the connect in flight.
    Behind,
    /// Dropped: the connect's queue is full.
    QueueFull,
    /// Dropped: too many connects are in flight.
    TooManyConnects,
}

impl Dialling {
    /// At most `max_connects` connects in flight (and destinations backing off).
    #[must_use]
    pub fn new(max_connects: usize) -> Self {
        Self {
            pending: HashMap::new(),
            max_connects,
            backoff: HashMap::new(),
        }
    }

    /// Whether `dest` is in its back-off at `now`.
    pub fn backing_off(&mut self, dest: SocketAddr, now: Instant) -> bool {
        match self.backoff.get(&dest) {
            Some(until) if *until > now => true,
            Some(_) => {
                self.backoff.remove(&dest);
                false
            }
            None => false,
        }
    }

    /// The connect to `dest` failed at `now`: it backs off. The table holds at most
    /// `max_connects` destinations (expired ones go first, then the one ending soonest), so a
    /// flood of unreachable destinations cannot grow it.
    pub fn failed(&mut self, dest: SocketAddr, now: Instant) {
        if self.backoff.len() >= self.max_connects && !self.backoff.contains_key(&dest) {
            self.backoff.retain(|_, until| *until > now);
            if self.backoff.len() >= self.max_connects {
                if let Some(first) = self
                    .backoff
                    .iter()
                    .min_by_key(|(_, u)| **u)
                    .map(|(d, _)| *d)
                {
                    self.backoff.remove(&first);
                }
            }
        }
        self.backoff.insert(dest, now + DIAL_BACKOFF);
    }

    /// Queues `payload` for `dest`, within `limit` bytes (each item costing at least
    /// [`MIN_ITEM_COST`]).
    pub fn push(&mut self, dest: SocketAddr, payload: Bytes, limit: usize) -> Queued {
        let cost = payload.len().max(MIN_ITEM_COST);
        if let Some(w) = self.pending.get_mut(&dest) {
            if w.cost + cost > limit {
                return Queued::QueueFull;
            }
            w.cost += cost;
            w.queued.push(payload);
            return Queued::Behind;
        }
        if self.pending.len() >= self.max_connects {
            return Queued::TooManyConnects;
        }
        if cost > limit {
            return Queued::QueueFull;
        }
        self.pending.insert(
            dest,
            Waiting {
                queued: vec![payload],
                cost,
            },
        );
        Queued::Connect
    }

    /// The connect to `dest` ended: what waited for it, in order.
    pub fn finish(&mut self, dest: SocketAddr) -> Vec<Bytes> {
        self.pending
            .remove(&dest)
            .map(|w| w.queued)
            .unwrap_or_default()
    }
}

/// How long the branch of an INVITE answered 503 locally is remembered: the engine sends the
/// 503's ACK at once (microseconds to milliseconds later, through a worker's queue).
pub const LOCAL_503_MEMORY: Duration = Duration::from_secs(4);
/// Branches remembered at most; beyond, an ACK is dialled as before (a wasted connect only).
pub const LOCAL_503_MAX: usize = 4096;

/// The INVITEs answered 503 here because their next hop could not be reached, by branch, so
/// that the ACK the engine sends for each (RFC 3261 §17.1.1.3: same branch as the INVITE) is
/// not dialled toward the next hop that just failed. Pure bookkeeping with time passed in.
#[derive(Debug, Default)]
pub struct Local503s {
    at: HashMap<String, Instant>,
}

impl Local503s {
    /// The INVITE with top Via branch `branch` was answered 503 at `now`.
    pub fn note(&mut self, branch: &str, now: Instant) {
        if self.at.len() >= LOCAL_503_MAX {
            self.at
                .retain(|_, at| now.saturating_duration_since(*at) < LOCAL_503_MEMORY);
        }
        if self.at.len() < LOCAL_503_MAX {
            self.at.insert(branch.to_owned(), now);
        }
    }

    /// Whether `payload` is the ACK of a 503 noted within [`LOCAL_503_MEMORY`] of `now` (then
    /// forgotten: one ACK each).
    pub fn is_ack_of_one(&mut self, payload: &[u8], now: Instant) -> bool {
        if !payload.starts_with(b"ACK ") || self.at.is_empty() {
            return false;
        }
        let Ok(msg) = SipMessage::parse(payload) else {
            return false;
        };
        let Some(branch) = msg.top_via_branch() else {
            return false;
        };
        self.at
            .remove(branch)
            .is_some_and(|at| now.saturating_duration_since(at) < LOCAL_503_MEMORY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn one_connect_per_destination_with_its_messages_behind_it_in_order() {
        let mut d = Dialling::new(4);
        let dest = sa("127.0.0.1:5060");
        assert_eq!(
            d.push(dest, Bytes::from_static(b"BYE 1"), 1024),
            Queued::Connect
        );
        assert_eq!(
            d.push(dest, Bytes::from_static(b"BYE 2"), 1024),
            Queued::Behind
        );
        assert_eq!(
            d.push(sa("127.0.0.1:5070"), Bytes::from_static(b"BYE 3"), 1024),
            Queued::Connect
        );
        assert_eq!(
            d.finish(dest),
            vec![Bytes::from_static(b"BYE 1"), Bytes::from_static(b"BYE 2")]
        );
        // Done: the next message for it starts a connect again (the connection may be gone).
        assert!(d.finish(dest).is_empty());
        assert_eq!(
            d.push(dest, Bytes::from_static(b"BYE 4"), 1024),
            Queued::Connect
        );
    }

    #[test]
    fn a_connects_queue_is_bounded_like_a_write_queue() {
        let mut d = Dialling::new(4);
        let dest = sa("127.0.0.1:5060");
        // Each small item costs MIN_ITEM_COST: 4 fit in 256 bytes, the fifth does not.
        let limit = 4 * MIN_ITEM_COST;
        assert_eq!(
            d.push(dest, Bytes::from_static(b"a"), limit),
            Queued::Connect
        );
        for _ in 0..3 {
            assert_eq!(
                d.push(dest, Bytes::from_static(b"b"), limit),
                Queued::Behind
            );
        }
        assert_eq!(
            d.push(dest, Bytes::from_static(b"c"), limit),
            Queued::QueueFull
        );
        assert_eq!(d.finish(dest).len(), 4);
        // A single message beyond the bound does not even start a connect.
        let big = Bytes::from(vec![b'x'; limit + 1]);
        assert_eq!(d.push(dest, big, limit), Queued::QueueFull);
        assert!(d.pending.is_empty());
    }

    fn ack_of(branch: &str) -> Bytes {
        Bytes::from(format!(
            "ACK sip:bob@127.0.0.1:5061 SIP/2.0\r\nVia: SIP/2.0/TLS 127.0.0.2:5061;branch={branch}\r\n\
             From: <sip:a@127.0.0.1>;tag=1\r\nTo: <sip:bob@127.0.0.1>;tag=2\r\nCall-ID: c1\r\n\
             CSeq: 1 ACK\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
        ))
    }

    #[test]
    fn the_ack_of_a_local_503_is_not_dialled_and_other_acks_are() {
        let t0 = Instant::now();
        let mut l = Local503s::default();
        l.note("z9hG4bKfailed", t0);
        // Another branch (a 2xx ACK, another call): dialled.
        assert!(!l.is_ack_of_one(&ack_of("z9hG4bKother"), t0));
        // A request of the same branch that is not an ACK: dialled.
        let bye = Bytes::from(
            String::from_utf8(ack_of("z9hG4bKfailed").to_vec())
                .expect("text")
                .replacen("ACK ", "BYE ", 1),
        );
        assert!(!l.is_ack_of_one(&bye, t0));
        // The 503's ACK: not dialled, once.
        assert!(l.is_ack_of_one(&ack_of("z9hG4bKfailed"), t0));
        assert!(!l.is_ack_of_one(&ack_of("z9hG4bKfailed"), t0));
        // Remembered for LOCAL_503_MEMORY only.
        l.note("z9hG4bKlate", t0);
        assert!(!l.is_ack_of_one(&ack_of("z9hG4bKlate"), t0 + LOCAL_503_MEMORY));
    }

    #[test]
    fn local_503s_are_bounded() {
        let t0 = Instant::now();
        let mut l = Local503s::default();
        for i in 0..LOCAL_503_MAX + 10 {
            l.note(&format!("z9hG4bK{i}"), t0);
        }
        assert_eq!(l.at.len(), LOCAL_503_MAX);
        // Full of fresh entries: the newest is not remembered (its ACK dials, as before).
        assert!(!l.is_ack_of_one(&ack_of(&format!("z9hG4bK{LOCAL_503_MAX}")), t0));
        // Once they are old, a new one evicts them.
        l.note("z9hG4bKnew", t0 + LOCAL_503_MEMORY);
        assert_eq!(l.at.len(), 1);
        assert!(l.is_ack_of_one(&ack_of("z9hG4bKnew"), t0 + LOCAL_503_MEMORY));
    }

    #[test]
    fn a_failed_destination_backs_off_and_the_table_stays_bounded() {
        let mut d = Dialling::new(2);
        let t0 = Instant::now();
        let dest = sa("127.0.0.1:5061");
        assert!(!d.backing_off(dest, t0));
        d.failed(dest, t0);
        assert!(d.backing_off(dest, t0 + DIAL_BACKOFF / 2));
        assert!(
            !d.backing_off(dest, t0 + DIAL_BACKOFF),
            "dialled again after it"
        );
        assert!(
            d.backoff.is_empty(),
            "an expired entry is dropped when seen"
        );
        for port in 1..=10 {
            d.failed(
                sa(&format!("127.0.0.1:{port}")),
                t0 + Duration::from_millis(port),
            );
        }
        assert_eq!(d.backoff.len(), 2, "at most max_connects destinations");
        assert!(d.backing_off(sa("127.0.0.1:10"), t0 + Duration::from_millis(10)));
    }

    #[test]
    fn connects_in_flight_are_capped() {
        let mut d = Dialling::new(2);
        assert_eq!(
            d.push(sa("127.0.0.1:1"), Bytes::new(), 1024),
            Queued::Connect
        );
        assert_eq!(
            d.push(sa("127.0.0.1:2"), Bytes::new(), 1024),
            Queued::Connect
        );
        assert_eq!(
            d.push(sa("127.0.0.1:3"), Bytes::new(), 1024),
            Queued::TooManyConnects
        );
        // Messages behind a connect already in flight still queue.
        assert_eq!(
            d.push(sa("127.0.0.1:1"), Bytes::new(), 1024),
            Queued::Behind
        );
        drop(d.finish(sa("127.0.0.1:1")));
        assert_eq!(
            d.push(sa("127.0.0.1:3"), Bytes::new(), 1024),
            Queued::Connect
        );
    }
}
