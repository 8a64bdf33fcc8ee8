//! The witness: a lease arbiter for the active role, sans-IO (the shell's
//! [`crate::shell::serve_witness_with_key`] runs it on a UDP socket; the simulation runs it on
//! its virtual clock).
//!
//! # Lease rules
//!
//! * At most one node holds the **active lease** at a time. A probe with `want` set from the
//!   holder renews it for the `lease_ms` it asks (the node's dead time, capped at
//!   [`MAX_LEASE`]) from when the witness received the probe; from another node it is granted
//!   only when there is no holder or the holder's lease has expired. A probe without `want`
//!   from the holder releases the lease at once. Every authentic, fresh probe is answered with
//!   granted or denied, the holder and its remaining time.
//! * Probes and answers are sealed with keys derived from the pair's shared key
//!   ([`crate::crypto`]: encrypted and authenticated, as heartbeats are), and probes must be
//!   fresh: per node, `(incarnation, seq)` must grow; replayed or stale probes are dropped
//!   unanswered. A probe from a newer incarnation of the holder's node replaces the holder's
//!   incarnation (the old one is dead: it restarted).
//! * **Fresh across the witness's restarts.** The witness remembers nothing across a restart,
//!   so a probe recorded before it could look new. Every answer names the witness's
//!   incarnation and every probe echoes the one its sender last heard; a probe that does not
//!   echo the current incarnation grants, renews and releases nothing: it gets a *challenge*
//!   (denied, no holder named, the incarnation to echo), and its sender probes again at once.
//! * **Start-up quiet period.** A witness that has just (re)started does not know whether it
//!   granted a lease before: for the lease time asked by a probe after its start it grants
//!   nothing (it answers denied, holder unknown), so a lease granted by its previous life has
//!   expired before it grants another.
//!
//! A node counts its lease from when it *sent* the granted probe, so its view of the lease ends
//! no later than the witness's (clock rates are assumed equal to within a fraction of the
//! lease; there is no clock synchronization). One witness serves one pair (one key).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tracing::{debug, info};

use crate::crypto::PairKeys;
use crate::wire::{DecodeError, NodeId, WitnessAnswer, WitnessProbe};

/// The longest lease the witness grants, whatever a probe asks.
pub const MAX_LEASE: Duration = Duration::from_secs(60);

/// The current lease holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The holder.
    pub node: NodeId,
    /// Its incarnation.
    pub incarnation: u64,
    /// Its epoch as of its last probe.
    pub epoch: u64,
    /// When the lease ends (the witness's clock).
    pub until: Instant,
}

/// Counters of the witness.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WitnessCounters {
    /// Probes answered.
    pub answered: u64,
    /// Leases granted to a node that did not hold one.
    pub granted: u64,
    /// Probes that wanted the lease and were denied.
    pub denied: u64,
    /// Datagrams that were not authentic probes (bad length, magic, version, MAC, payload).
    pub bad: u64,
    /// Authentic probes that were replayed or older than one already seen.
    pub stale: u64,
    /// Authentic, new probes that did not echo this witness's incarnation: answered with a
    /// challenge, nothing granted.
    pub challenged: u64,
}

/// The lease arbiter of one pair.
#[derive(Debug)]
pub struct WitnessArbiter {
    keys: PairKeys,
    incarnation: u64,
    answers_sent: u64,
    started: Instant,
    holder: Option<Lease>,
    newest: HashMap<NodeId, (u64, u64)>,
    counters: WitnessCounters,
    buf: Vec<u8>,
}

impl WitnessArbiter {
    /// An arbiter using the pair's shared `key`, started at `now` (see the quiet period), in
    /// its `incarnation` (must grow at every start: the shell uses the start time in µs since
    /// the Unix epoch).
    #[must_use]
    pub fn new(key: &[u8], incarnation: u64, now: Instant) -> Self {
        Self {
            keys: PairKeys::derive(key),
            incarnation,
            answers_sent: 0,
            started: now,
            holder: None,
            newest: HashMap::new(),
            counters: WitnessCounters::default(),
            buf: Vec::with_capacity(128),
        }
    }

    /// The current, unexpired lease.
    #[must_use]
    pub fn holder(&self, now: Instant) -> Option<Lease> {
        self.holder.filter(|l| now < l.until)
    }

    /// Counters.
    #[must_use]
    pub fn counters(&self) -> WitnessCounters {
        self.counters
    }

    /// Decodes and handles a probe datagram; returns the answer datagram to send back, or
    /// `None` for a stale or replayed probe.
    ///
    /// # Errors
    /// The datagram is not an authentic probe (counted).
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        datagram: &[u8],
    ) -> Result<Option<Vec<u8>>, DecodeError> {
        let probe = match WitnessProbe::decode(&self.keys, datagram) {
            Ok(p) => p,
            Err(e) => {
                self.counters.bad += 1;
                return Err(e);
            }
        };
        let Some(answer) = self.handle_probe(now, &probe) else {
            return Ok(None);
        };
        self.answers_sent += 1;
        answer
            .encode(&self.keys, self.answers_sent, &mut self.buf)
            .map_err(|_| DecodeError::Malformed)?;
        Ok(Some(self.buf.clone()))
    }

    /// Handles an authenticated probe: grants, renews, releases or denies the lease. `None` for
    /// a stale or replayed probe.
    pub fn handle_probe(&mut self, now: Instant, p: &WitnessProbe) -> Option<WitnessAnswer> {
        let key = (p.incarnation, p.seq);
        match self.newest.get(&p.node) {
            Some(n) if key <= *n => {
                self.counters.stale += 1;
                return None;
            }
            _ => {}
        }
        self.newest.insert(p.node, key);
        if p.echo != self.incarnation {
            self.counters.challenged += 1;
            debug!(node = %p.node, "witness: probe without our incarnation: challenged");
            return Some(WitnessAnswer {
                node: p.node,
                incarnation: p.incarnation,
                seq: p.seq,
                witness: self.incarnation,
                granted: false,
                holder: None,
                remaining_ms: 0,
            });
        }
        let lease = Duration::from_millis(u64::from(p.lease_ms)).min(MAX_LEASE);
        let current = self.holder(now);
        if current.is_none() {
            self.holder = None;
        }
        let mine = current.is_some_and(|l| l.node == p.node);
        if mine && current.is_some_and(|l| p.incarnation < l.incarnation) {
            // An older incarnation of the holder: it is dead; a replay at worst.
            self.counters.stale += 1;
            return None;
        }
        let quiet = now < self.started + lease;
        let granted = if p.want && (mine || (current.is_none() && !quiet)) {
            if !mine {
                info!(node = %p.node, epoch = p.epoch, "witness: lease granted");
                self.counters.granted += 1;
            }
            self.holder = Some(Lease {
                node: p.node,
                incarnation: p.incarnation,
                epoch: p.epoch,
                until: now + lease,
            });
            true
        } else {
            if mine {
                info!(node = %p.node, "witness: lease released");
                self.holder = None;
            } else if p.want {
                debug!(node = %p.node, quiet, "witness: lease denied");
                self.counters.denied += 1;
            }
            false
        };
        self.counters.answered += 1;
        let holder = self.holder(now);
        let remaining = holder.map_or(Duration::ZERO, |l| l.until - now);
        Some(WitnessAnswer {
            node: p.node,
            incarnation: p.incarnation,
            seq: p.seq,
            witness: self.incarnation,
            granted,
            holder: holder.map(|l| l.node),
            remaining_ms: u32::try_from(remaining.as_millis()).unwrap_or(u32::MAX),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"witness-test-key-0123456789";
    /// The test witness's incarnation.
    const W: u64 = 77;

    fn probe(node: &str, seq: u64, want: bool) -> WitnessProbe {
        WitnessProbe {
            node: NodeId::from_name(node),
            incarnation: 1,
            echo: W,
            seq,
            epoch: 1,
            want,
            lease_ms: 1000,
        }
    }

    #[test]
    fn one_holder_until_expiry_or_release() {
        let t0 = Instant::now();
        let mut w = WitnessArbiter::new(KEY, W, t0);
        // Quiet period after start.
        let a = w.handle_probe(t0, &probe("a", 1, true)).expect("answered");
        assert!(!a.granted && a.holder.is_none());
        let t = t0 + Duration::from_millis(1000);
        assert!(
            w.handle_probe(t, &probe("a", 2, true))
                .expect("answered")
                .granted
        );
        let b = w.handle_probe(t, &probe("b", 1, true)).expect("answered");
        assert!(!b.granted);
        assert_eq!(b.holder, Some(NodeId::from_name("a")));
        assert_eq!(b.remaining_ms, 1000);
        // Renewed by a, still denied to b.
        let t = t + Duration::from_millis(500);
        assert!(
            w.handle_probe(t, &probe("a", 3, true))
                .expect("answered")
                .granted
        );
        let t = t + Duration::from_millis(999);
        assert!(
            !w.handle_probe(t, &probe("b", 2, true))
                .expect("answered")
                .granted
        );
        // Expired: b gets it.
        let t = t + Duration::from_millis(1);
        assert!(
            w.handle_probe(t, &probe("b", 3, true))
                .expect("answered")
                .granted
        );
        assert!(
            !w.handle_probe(t, &probe("a", 4, true))
                .expect("answered")
                .granted
        );
        // Released by b: a gets it at once.
        let r = w.handle_probe(t, &probe("b", 4, false)).expect("answered");
        assert!(!r.granted && r.holder.is_none());
        assert!(
            w.handle_probe(t, &probe("a", 5, true))
                .expect("answered")
                .granted
        );
    }

    #[test]
    fn replays_and_forgeries_are_dropped() {
        let t0 = Instant::now();
        let mut w = WitnessArbiter::new(KEY, W, t0);
        let t = t0 + Duration::from_secs(2);
        let keys = PairKeys::derive(KEY);
        let mut d = Vec::new();
        probe("a", 1, true).encode(&keys, &mut d).expect("encode");
        assert!(w.handle_datagram(t, &d).expect("answered").is_some());
        assert_eq!(w.handle_datagram(t, &d), Ok(None), "replay");
        assert_eq!(w.counters().stale, 1);
        let mut f = Vec::new();
        probe("b", 1, true)
            .encode(&PairKeys::derive(b"wrong-key-0123456789"), &mut f)
            .expect("answered");
        assert_eq!(w.handle_datagram(t, &f), Err(DecodeError::BadMac));
        assert_eq!(w.holder(t).map(|l| l.node), Some(NodeId::from_name("a")));
        // A restarted holder (newer incarnation) keeps the lease.
        let p = WitnessProbe {
            incarnation: 2,
            seq: 1,
            ..probe("a", 1, true)
        };
        assert!(w.handle_probe(t, &p).expect("answered").granted);
    }

    #[test]
    fn a_restarted_witness_challenges_probes_recorded_before_its_start() {
        let t0 = Instant::now();
        let keys = PairKeys::derive(KEY);
        // Recorded while the first witness (incarnation W) ran: a valid, wanting probe.
        let mut recorded = Vec::new();
        probe("a", 9, true)
            .encode(&keys, &mut recorded)
            .expect("encode");
        // The witness restarts (a new incarnation) and is past its quiet period.
        let mut w = WitnessArbiter::new(KEY, W + 1, t0);
        let t = t0 + Duration::from_secs(5);
        let d = w
            .handle_datagram(t, &recorded)
            .expect("authentic")
            .expect("answered with a challenge");
        let a = WitnessAnswer::decode(&keys, &d).expect("answer");
        assert!(!a.granted && a.holder.is_none());
        assert_eq!(
            a.witness,
            W + 1,
            "the challenge names the incarnation to echo"
        );
        assert_eq!(w.holder(t), None, "a replay grants nothing");
        assert_eq!(w.counters().challenged, 1);
        // The live node echoes the new incarnation and gets the lease.
        let fresh = WitnessProbe {
            echo: W + 1,
            ..probe("a", 10, true)
        };
        assert!(w.handle_probe(t, &fresh).expect("answered").granted);
        // A recorded probe that echoed the current incarnation is still stale by sequence.
        let mut again = Vec::new();
        fresh.encode(&keys, &mut again).expect("encode");
        assert_eq!(w.handle_datagram(t, &again), Ok(None));
    }
}
