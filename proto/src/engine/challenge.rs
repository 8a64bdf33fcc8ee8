//! Digest challenges on the callee leg (RFC 3261 sections 22.2 and 22.3): a next hop that
//! answers a new INVITE 401 or 407 ties its nonce to that request, and many carriers to its
//! Call-ID and From tag too. The challenge is relayed to the caller, who re-sends the INVITE
//! with credentials on its own Call-ID and From tag with the next CSeq; this B2BUA sends that
//! INVITE out on the challenged leg's Call-ID and From tag with the next CSeq, as the caller
//! would had it been talking to the next hop itself, and to the same next hop.
//!
//! [`Challenged`] remembers, per caller (its Call-ID and From tag), the leg a challenge came
//! back on, for [`CHALLENGE_TTL`] (64·T1: a caller re-sends at once or not at all), at most
//! [`MAX_CHALLENGED`] of them (a stranger that makes the next hop challenge many calls only
//! pushes out its own oldest entries). Sans IO: time is passed in.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::sip::dialog::Leg;
use crate::sip::message::SipMessage;

use super::Engine;

/// How long a challenged leg waits for the caller's authenticated INVITE.
pub(super) const CHALLENGE_TTL: Duration = Duration::from_secs(32);

/// Challenged legs remembered at most (the oldest is forgotten beyond).
pub(super) const MAX_CHALLENGED: usize = 4096;

/// The callee leg a 401/407 came back on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ChallengedLeg {
    /// Its Call-ID.
    pub(super) call_id: String,
    /// Its From tag (ours).
    pub(super) local_tag: String,
    /// The CSeq of the INVITE that was challenged.
    pub(super) cseq: u32,
    /// Where that INVITE went.
    pub(super) peer: SocketAddr,
}

/// The caller's Call-ID and From tag.
type CallerKey = (String, String);

/// Challenged legs by caller, bounded and expiring.
#[derive(Debug, Default)]
pub(super) struct Challenged {
    legs: HashMap<CallerKey, (Instant, ChallengedLeg)>,
    order: VecDeque<(Instant, CallerKey)>,
}

impl Challenged {
    /// Remembers that the caller `(call_id, from_tag)`'s INVITE was challenged on `leg`;
    /// returns how many older entries [`MAX_CHALLENGED`] pushed out.
    pub(super) fn insert(
        &mut self,
        now: Instant,
        call_id: &str,
        from_tag: &str,
        leg: ChallengedLeg,
    ) -> u64 {
        self.expire(now);
        let mut evicted = 0;
        while self.legs.len() >= MAX_CHALLENGED {
            let Some((at, key)) = self.order.pop_front() else {
                break;
            };
            if self.legs.get(&key).is_some_and(|(t, _)| *t == at) {
                self.legs.remove(&key);
                evicted += 1;
            }
        }
        if self.order.len() >= 2 * MAX_CHALLENGED {
            // Entries taken or challenged again leave stale keys behind: drop them.
            let legs = &self.legs;
            self.order
                .retain(|(at, k)| legs.get(k).is_some_and(|(t, _)| t == at));
        }
        let key = (call_id.to_owned(), from_tag.to_owned());
        self.order.push_back((now, key.clone()));
        self.legs.insert(key, (now, leg));
        evicted
    }

    /// The challenged leg of the caller `(call_id, from_tag)`, taken (used once), if its
    /// challenge is recent enough.
    pub(super) fn take(
        &mut self,
        now: Instant,
        call_id: &str,
        from_tag: &str,
    ) -> Option<ChallengedLeg> {
        self.expire(now);
        let (_, leg) = self
            .legs
            .remove(&(call_id.to_owned(), from_tag.to_owned()))?;
        Some(leg)
    }

    /// Challenged legs held.
    #[cfg(test)]
    #[must_use]
    pub(super) fn len(&self) -> usize {
        self.legs.len()
    }

    /// Whether none is held.
    #[cfg(test)]
    #[must_use]
    pub(super) fn is_empty(&self) -> bool {
        self.legs.is_empty()
    }

    fn expire(&mut self, now: Instant) {
        while let Some((at, _)) = self.order.front() {
            if now.saturating_duration_since(*at) < CHALLENGE_TTL {
                break;
            }
            let Some((at, key)) = self.order.pop_front() else {
                break;
            };
            // A key challenged again later has a newer entry: keep that one.
            if self.legs.get(&key).is_some_and(|(t, _)| *t == at) {
                self.legs.remove(&key);
            }
        }
    }
}

/// Whether `msg` carries credentials (`Authorization` or `Proxy-Authorization`).
fn has_credentials(msg: &SipMessage) -> bool {
    msg.headers.iter().any(|h| {
        let name = h.name.as_str();
        name.eq_ignore_ascii_case("authorization")
            || name.eq_ignore_ascii_case("proxy-authorization")
    })
}

impl Engine {
    /// The callee leg of call `id` was challenged (401/407 to its INVITE): remembered for the
    /// caller's authenticated INVITE.
    pub(super) fn remember_challenge(&mut self, now: Instant, id: u64) {
        let Some(call) = self.calls.get(&id) else {
            return;
        };
        let (caller, callee) = (&call.dialog.caller, &call.dialog.callee);
        let Some(from_tag) = caller.remote_tag.clone() else {
            return;
        };
        let caller_call_id = caller.call_id.clone();
        let leg = ChallengedLeg {
            call_id: callee.call_id.clone(),
            local_tag: callee.local_tag.clone(),
            cseq: callee.last_invite_cseq,
            peer: callee.peer,
        };
        let evicted = self.challenged.insert(now, &caller_call_id, &from_tag, leg);
        self.stats.challenges_evicted += evicted;
    }

    /// A new INVITE `msg` with credentials whose caller was challenged on a leg toward
    /// `callee.peer`: `callee` takes that leg's Call-ID and From tag, and the CSeq to send it
    /// with (the challenged one's next) is returned. Otherwise `callee` is left as built and
    /// its INVITE goes with CSeq 1.
    pub(super) fn onto_challenged_leg(
        &mut self,
        now: Instant,
        msg: &SipMessage,
        callee: &mut Leg,
    ) -> u32 {
        if !has_credentials(msg) {
            return 1;
        }
        let (Some(call_id), Some(from_tag)) = (msg.call_id(), msg.from_tag()) else {
            return 1;
        };
        let Some(leg) = self.challenged.take(now, call_id, from_tag) else {
            return 1;
        };
        if leg.peer != callee.peer {
            // Routed elsewhere this time: that next hop never saw the challenge.
            return 1;
        }
        let cseq = leg.cseq.saturating_add(1);
        callee.call_id = leg.call_id;
        callee.local_tag = leg.local_tag;
        callee.local_cseq = cseq;
        callee.last_invite_cseq = cseq;
        self.stats.auth_on_challenged_leg += 1;
        cseq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leg(n: u32) -> ChallengedLeg {
        ChallengedLeg {
            call_id: format!("b-{n}"),
            local_tag: format!("t-{n}"),
            cseq: n,
            peer: SocketAddr::from(([127, 0, 0, 6], 5060)),
        }
    }

    #[test]
    fn a_challenged_leg_is_taken_once_by_its_caller_within_the_ttl() {
        let t0 = Instant::now();
        let mut c = Challenged::default();
        c.insert(t0, "a-1", "ft", leg(1));
        assert_eq!(c.take(t0, "a-1", "other-tag"), None, "another From tag");
        assert_eq!(c.take(t0, "a-2", "ft"), None, "another Call-ID");
        let later = t0 + CHALLENGE_TTL - Duration::from_millis(1);
        assert_eq!(c.take(later, "a-1", "ft"), Some(leg(1)));
        assert_eq!(c.take(later, "a-1", "ft"), None, "used once");
    }

    #[test]
    fn challenges_expire_and_the_table_is_bounded() {
        let t0 = Instant::now();
        let mut c = Challenged::default();
        c.insert(t0, "a-1", "ft", leg(1));
        assert_eq!(c.take(t0 + CHALLENGE_TTL, "a-1", "ft"), None, "expired");
        assert!(c.is_empty());
        let mut evicted = 0;
        for n in 0..(MAX_CHALLENGED as u32 + 10) {
            evicted += c.insert(t0, &format!("a-{n}"), "ft", leg(n));
        }
        assert_eq!(c.len(), MAX_CHALLENGED);
        assert_eq!(evicted, 10);
        assert_eq!(c.take(t0, "a-0", "ft"), None, "the oldest went first");
        assert!(c
            .take(t0, &format!("a-{}", MAX_CHALLENGED + 9), "ft")
            .is_some());
        // A caller challenged twice keeps its newer leg when the older entry expires.
        let mut c = Challenged::default();
        c.insert(t0, "a-1", "ft", leg(1));
        c.insert(t0 + Duration::from_secs(20), "a-1", "ft", leg(2));
        assert_eq!(
            c.take(t0 + CHALLENGE_TTL + Duration::from_secs(1), "a-1", "ft"),
            Some(leg(2))
        );
    }
}
