//! SDP-carrying calls for the RTP generator: a [`MediaPlan`] shared by a [`super::Uac`] and a
//! [`super::Uas`] gives each call the real ports of its two RTP endpoints and collects where
//! each endpoint must send, as the relay (the SBC) told it in the SDP it received.
//!
//! ```text
//!  UAC call i ── INVITE, SDP: c/m = A_i, s=sbc-lab media RUN/i ──▶ SBC ──▶ UAS
//!                                      the UAS reads RUN/i and the SBC's core address
//!                                      (B_i sends there), answers with c/m = B_i
//!  UAC ◀── 200, SDP: the SBC's access address (A_i sends there) ── SBC ◀──
//! ```
//! The UAS finds which call an INVITE is from by the session name (`s=`), which the key
//! rides in: an SBC anchoring media rewrites `c=`, `m=` ports and `o=`, and keeps the rest.
//! Once [`MediaPlan::ready`] counts every call, [`MediaPlan::take_calls`] hands them to
//! [`crate::media::rtp::run`].

use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

use crate::media::rtp::{CallEndpoints, MediaCall};
use crate::media::sdp;

/// The RTP endpoints of a run's calls and what their SDP exchanges taught them.
#[derive(Debug)]
pub struct MediaPlan {
    run: String,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    endpoints: Vec<Option<CallEndpoints>>,
    a: Vec<SocketAddr>,
    b: Vec<SocketAddr>,
    next: usize,
    a_relay: Vec<Option<SocketAddr>>,
    b_relay: Vec<Option<SocketAddr>>,
    status: PlanStatus,
}

/// How far the calls of a [`MediaPlan`] got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStatus {
    /// Calls in the plan.
    pub calls: usize,
    /// Caller endpoints handed to UAC calls.
    pub offered: usize,
    /// Calls whose callee endpoint learnt the relay's address from the INVITE's SDP.
    pub callee_learnt: usize,
    /// Calls whose caller endpoint learnt it from the 200's SDP.
    pub caller_learnt: usize,
    /// Calls with both: ready for media.
    pub ready: usize,
    /// UAC calls placed when every caller endpoint was taken (they carry an SDP without
    /// media of ours).
    pub overflow: u64,
    /// INVITEs at the UAS whose SDP named no call of this plan (no key, another run's key,
    /// or a call already answered with another SDP).
    pub unmatched: u64,
    /// SDPs (INVITE or 200) that did not say where to send.
    pub sdp_errors: u64,
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MediaPlan {
    /// A plan for one call per endpoint pair, in order; a random run token keeps its keys
    /// apart from any other run's.
    #[must_use]
    pub fn new(endpoints: Vec<CallEndpoints>) -> Self {
        let n = endpoints.len();
        let a = endpoints.iter().map(CallEndpoints::a_addr).collect();
        let b = endpoints.iter().map(CallEndpoints::b_addr).collect();
        Self {
            run: format!("{:08x}", rand::random::<u32>()),
            inner: Mutex::new(Inner {
                endpoints: endpoints.into_iter().map(Some).collect(),
                a,
                b,
                next: 0,
                a_relay: vec![None; n],
                b_relay: vec![None; n],
                status: PlanStatus {
                    calls: n,
                    ..PlanStatus::default()
                },
            }),
        }
    }

    /// The counters now.
    #[must_use]
    pub fn status(&self) -> PlanStatus {
        lock(&self.inner).status
    }

    /// Calls ready for media (both relay addresses known).
    #[must_use]
    pub fn ready(&self) -> usize {
        self.status().ready
    }

    /// Calls in the plan.
    #[must_use]
    pub fn len(&self) -> usize {
        self.status().calls
    }

    /// Whether the plan has no call.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ready calls, in plan order, with their endpoints (taken: a second call returns
    /// none of them); the endpoints of calls that are not ready are closed.
    #[must_use]
    pub fn take_calls(&self) -> Vec<MediaCall> {
        let mut g = lock(&self.inner);
        let mut out = Vec::new();
        for i in 0..g.endpoints.len() {
            let e = g.endpoints[i].take();
            if let (Some(endpoints), Some(a_relay), Some(b_relay)) = (e, g.a_relay[i], g.b_relay[i])
            {
                out.push(MediaCall {
                    endpoints,
                    a_relay,
                    b_relay,
                });
            }
        }
        out
    }

    /// The SDP offer of the UAC's next call: its caller endpoint and key, and the slot to
    /// report the answer to; `None` when every endpoint is taken (an SDP without our media).
    pub(crate) fn offer(&self) -> Option<(usize, String)> {
        let mut g = lock(&self.inner);
        if g.next >= g.a.len() {
            g.status.overflow += 1;
            return None;
        }
        let slot = g.next;
        g.next += 1;
        g.status.offered += 1;
        let key = format!("{}/{slot}", self.run);
        Some((
            slot,
            sdp::endpoint_sdp(g.a[slot], 2 * slot as u64 + 1, Some(&key)),
        ))
    }

    /// The 200's SDP of call `slot`: where its caller sends.
    pub(crate) fn answered(&self, slot: usize, body: &[u8]) {
        let mut g = lock(&self.inner);
        match sdp::parse(body) {
            Ok(r) => {
                if slot < g.a_relay.len() && g.a_relay[slot].is_none() {
                    g.a_relay[slot] = Some(r.rtp);
                    g.status.caller_learnt += 1;
                    if g.b_relay[slot].is_some() {
                        g.status.ready += 1;
                    }
                }
            }
            Err(_) => g.status.sdp_errors += 1,
        }
    }

    /// The SDP answer of the UAS to an INVITE's SDP: the callee endpoint of the call its key
    /// names, which will send where that SDP says; `None` for an INVITE of no call of ours.
    pub(crate) fn answer(&self, body: &[u8]) -> Option<String> {
        let mut g = lock(&self.inner);
        let Ok(remote) = sdp::parse(body) else {
            g.status.sdp_errors += 1;
            return None;
        };
        let slot = remote
            .key
            .as_deref()
            .and_then(|k| k.strip_prefix(self.run.as_str()))
            .and_then(|k| k.strip_prefix('/'))
            .and_then(|k| k.parse::<usize>().ok())
            .filter(|&s| s < g.b.len());
        let Some(slot) = slot else {
            g.status.unmatched += 1;
            return None;
        };
        match g.b_relay[slot] {
            // A retransmitted INVITE (or a relay re-sending it): the same answer.
            Some(known) if known == remote.rtp => {}
            Some(_) => {
                g.status.unmatched += 1;
                return None;
            }
            None => {
                g.b_relay[slot] = Some(remote.rtp);
                g.status.callee_learnt += 1;
                if g.a_relay[slot].is_some() {
                    g.status.ready += 1;
                }
            }
        }
        let key = format!("{}/{slot}", self.run);
        Some(sdp::endpoint_sdp(
            g.b[slot],
            2 * slot as u64 + 2,
            Some(&key),
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn pairs_offers_and_answers_by_key() {
        let eps = CallEndpoints::bind_many(2, "127.0.0.1".parse().unwrap()).unwrap();
        let (a0, b1) = (eps[0].a_addr(), eps[1].b_addr());
        let plan = MediaPlan::new(eps);
        let (s0, o0) = plan.offer().unwrap();
        let (s1, o1) = plan.offer().unwrap();
        assert_eq!((s0, s1), (0, 1));
        assert!(plan.offer().is_none());
        assert_eq!(sdp::parse(o0.as_bytes()).unwrap().rtp, a0);
        // A relay rewrote c= and m= (and o=), kept s=: the callee of call 1 answers.
        let relayed = o1.replace("127.0.0.1", "127.0.0.9").replace(
            &format!("m=audio {}", sdp::parse(o1.as_bytes()).unwrap().rtp.port()),
            "m=audio 30002",
        );
        let ans = plan.answer(relayed.as_bytes()).unwrap();
        assert_eq!(sdp::parse(ans.as_bytes()).unwrap().rtp, b1);
        // The same INVITE again: the same answer, counted once.
        assert_eq!(plan.answer(relayed.as_bytes()).unwrap(), ans);
        assert_eq!(plan.status().callee_learnt, 1);
        assert_eq!(plan.ready(), 0);
        plan.answered(
            1,
            sdp::endpoint_sdp("127.0.0.9:30000".parse().unwrap(), 1, None).as_bytes(),
        );
        assert_eq!(plan.ready(), 1);
        // Unknown keys and broken SDP are counted, not answered.
        assert!(plan
            .answer(sdp::endpoint_sdp(a0, 1, Some("other/0")).as_bytes())
            .is_none());
        assert!(plan.answer(b"junk").is_none());
        let st = plan.status();
        assert_eq!((st.unmatched, st.sdp_errors, st.overflow), (1, 1, 1));
        let calls = plan.take_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].a_relay, "127.0.0.9:30000".parse().unwrap());
        assert_eq!(calls[0].b_relay, "127.0.0.9:30002".parse().unwrap());
        assert_eq!(calls[0].endpoints.b_addr(), b1);
        assert!(plan.take_calls().is_empty());
    }
}
