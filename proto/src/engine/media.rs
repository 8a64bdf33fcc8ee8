//! Media anchoring on the signalling path: every SDP body relayed from one leg to the other is
//! anchored (the media table learns where the sending leg receives its streams, and the body
//! the other leg gets names only the SBC's media address and ports for its realm), whatever
//! message carries it: an INVITE's offer, a 183's or a 200's answer, a late offer in a 200 and
//! its answer in the ACK, a re-INVITE's or an UPDATE's (hold, resume, a new port, a new
//! stream), a PRACK's. The call's media ends with the call.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use tracing::debug;

use super::Engine;
use crate::media::{MediaError, MediaEvent};
use crate::sdp::{AnchorPlan, Description, Direction};
use crate::sip::dialog::{DialogState, Side};
use crate::sip::message::{HeaderName, SipMessage};

/// Why an SDP body could not be anchored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AnchorRefusal {
    /// A pool has too few free ports.
    Exhausted(String),
    /// Not a usable description.
    BadSdp(String),
}

impl AnchorRefusal {
    /// The `Warning` of the refusal (RFC 3261 code 399: miscellaneous).
    pub(super) fn warning(&self) -> String {
        let text = match self {
            Self::Exhausted(why) | Self::BadSdp(why) => why.replace('"', "'"),
        };
        format!("399 sbc \"{text}\"")
    }
}

/// Whether a message's body is a session description (`Content-Type: application/sdp`).
pub(super) fn carries_sdp(msg: &SipMessage) -> bool {
    !msg.body.is_empty()
        && msg.headers.iter().any(|h| {
            matches!(&h.name, HeaderName::Other(n)
                if n.eq_ignore_ascii_case("content-type") || n.eq_ignore_ascii_case("c"))
                && h.value
                    .split(';')
                    .next()
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/sdp"))
        })
}

impl Engine {
    /// The body to relay on the other leg for `msg`, received from leg `from` of call `id`:
    /// `None` when it is not anchored (no SDP, no media anchoring, a realm without a steering
    /// pool), else the anchored description.
    ///
    /// # Errors
    /// The description cannot be parsed, or a pool has no ports for it.
    pub(super) fn anchor_body(
        &mut self,
        now: Instant,
        id: u64,
        from: Side,
        msg: &SipMessage,
    ) -> Result<Option<Bytes>, AnchorRefusal> {
        let Some(media) = self.cfg.media.clone() else {
            return Ok(None);
        };
        if !carries_sdp(msg) {
            return Ok(None);
        }
        let Some(call) = self.calls.get(&id) else {
            return Ok(None);
        };
        let realm = |side: Side| {
            media
                .realms
                .get(call.dialog.leg(side).interface)
                .copied()
                .flatten()
        };
        let (Some((caller_pool, _)), Some((callee_pool, _))) =
            (realm(Side::Caller), realm(Side::Callee))
        else {
            return Ok(None);
        };
        let to = from.other();
        let Some((_, address)) = realm(to) else {
            return Ok(None);
        };
        let origin = call.dialog.sdp_origin[super::call::side_index(to)];
        let (version, last_hash) = call.dialog.sdp_version[super::call::side_index(to)];
        let desc =
            Description::parse(&msg.body).map_err(|e| AnchorRefusal::BadSdp(e.to_string()))?;
        let streams = desc
            .streams()
            .map_err(|e| AnchorRefusal::BadSdp(e.to_string()))?;
        let shard = usize::try_from(self.ids.shard()).unwrap_or(0);
        // A rejected stream (port 0) gets no pair: a flood of them cannot empty a pool.
        let accepted: Vec<bool> = streams.iter().map(|s| !s.is_rejected()).collect();
        let ports = {
            let mut table = super::lock(&media.table);
            let opened = if table.session(id).is_none() {
                table
                    .open(now, id, shard, [caller_pool, callee_pool], &accepted)
                    .map(|_| true)
            } else {
                table.extend(now, id, &accepted).map(|()| false)
            };
            if self.cfg.trace {
                if let Some(call) = self.calls.get(&id) {
                    table.set_label(id, Arc::from(call.dialog.caller.call_id.as_str()));
                }
            }
            match opened {
                Ok(true) => self.stats.media_anchored += 1,
                Ok(false) => {}
                Err(e @ MediaError::PoolExhausted { .. }) => {
                    return Err(AnchorRefusal::Exhausted(e.to_string()))
                }
                Err(e) => return Err(AnchorRefusal::BadSdp(e.to_string())),
            }
            for (i, s) in streams.iter().enumerate() {
                if s.is_rejected() || s.is_held_by_address() {
                    continue; // the leg keeps its remote: it sends nothing meanwhile
                }
                // The session has at least `streams.len()` streams (opened or extended).
                let _ = table.signal(now, id, i, from, s.rtp, s.rtcp, s.rtcp_mux);
            }
            table.session(id).map(|s| s.ports(to)).unwrap_or_default()
        };
        let held = !streams.is_empty()
            && streams.iter().all(|s| {
                s.is_rejected() || s.is_held_by_address() || s.direction != Direction::SendRecv
            });
        if let Some(call) = self.calls.get_mut(&id) {
            call.on_hold = held;
        }
        let mut plan = AnchorPlan {
            address,
            ports: ports.into_iter().take(streams.len()).collect(),
            session_id: origin,
            version: 0,
        };
        // Our own version on this leg: up by one whenever what we describe changes.
        let canonical = desc
            .anchored(&plan)
            .map_err(|e| AnchorRefusal::BadSdp(e.to_string()))?;
        let hash = fnv_hash(&canonical);
        plan.version = if hash == last_hash && version > 0 {
            version
        } else {
            version + 1
        };
        if let Some(call) = self.calls.get_mut(&id) {
            call.dialog.sdp_version[super::call::side_index(to)] = (plan.version, hash);
        }
        let body = desc
            .anchored(&plan)
            .map_err(|e| AnchorRefusal::BadSdp(e.to_string()))?;
        Ok(Some(Bytes::from(body)))
    }

    /// Call `id`'s media as it stands, before a re-offer changes it (`None`: not anchored).
    pub(super) fn media_before_offer(
        &self,
        id: u64,
        msg: &SipMessage,
    ) -> Option<crate::media::MediaRecord> {
        if !carries_sdp(msg) {
            return None;
        }
        self.media_record(id)
    }

    /// The final answer to our request `key` came (or it timed out): a refused re-offer puts
    /// the media back as it was; an accepted one stays.
    pub(super) fn offer_settled(
        &mut self,
        id: u64,
        key: &super::transactions::ClientKey,
        accepted: bool,
    ) {
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        if !call.offer_undo.as_ref().is_some_and(|u| u.0 == *key) {
            return;
        }
        let Some(undo) = call.offer_undo.take() else {
            return;
        };
        let (_, before) = *undo;
        if accepted {
            return;
        }
        let shard = usize::try_from(self.ids.shard()).unwrap_or(0);
        if let (Some(media), Some(now)) = (self.cfg.media.clone(), self.now) {
            let restored = super::lock(&media.table).restore(now, id, shard, &before);
            self.label_media(&media.table, id);
            if let Err(e) = restored {
                debug!(call = id, error = %e, "media before a refused re-offer not restored");
            }
        }
        self.replicate(id);
    }

    /// Ends call `id`'s media (its ports go back to their pools).
    pub(super) fn close_media(&mut self, id: u64) {
        if let Some(media) = &self.cfg.media {
            super::lock(&media.table).close(id);
        }
    }

    /// Call `id`'s media as the standby must hold it (`None` when it is not anchored).
    pub(super) fn media_record(&self, id: u64) -> Option<crate::media::MediaRecord> {
        let media = self.cfg.media.as_ref()?;
        super::lock(&media.table).record(id)
    }

    /// Claims the ports of a replicated call's media (at a takeover).
    pub(super) fn restore_media(
        &mut self,
        now: Instant,
        id: u64,
        record: Option<&crate::media::MediaRecord>,
    ) {
        let (Some(media), Some(record)) = (self.cfg.media.clone(), record) else {
            return;
        };
        let shard = usize::try_from(self.ids.shard()).unwrap_or(0);
        let restored = super::lock(&media.table).restore(now, id, shard, record);
        self.label_media(&media.table, id);
        if let Err(e) = restored {
            debug!(call = id, error = %e, "replicated media not restored");
        }
    }

    /// While tracing, labels call `id`'s media with its caller leg's Call-ID (the correlation
    /// id of its RTCP in HEP).
    fn label_media(&self, table: &std::sync::Mutex<crate::media::MediaTable>, id: u64) {
        if !self.cfg.trace {
            return;
        }
        if let Some(call) = self.calls.get(&id) {
            super::lock(table).set_label(id, Arc::from(call.dialog.caller.call_id.as_str()));
        }
    }

    /// An event of the media table about one of this engine's calls: an inactive call is
    /// ended with BYE on both legs (unless it is on hold), a latched leg is replicated.
    /// Returns whether the call is this engine's.
    pub fn handle_media_event(&mut self, now: Instant, event: MediaEvent) -> bool {
        self.now = Some(now);
        self.trace_begin();
        let ours = self.media_event(now, event);
        self.trace_end(now, None);
        ours
    }

    fn media_event(&mut self, now: Instant, event: MediaEvent) -> bool {
        match event {
            MediaEvent::Inactive { id, .. } => {
                let Some(call) = self.calls.get(&id) else {
                    return false;
                };
                if call.on_hold || call.dialog.state != DialogState::Confirmed {
                    // Silence is expected here: the clock starts again.
                    if let Some(m) = &self.cfg.media {
                        super::lock(&m.table).rearm(now, id);
                    }
                    return true;
                }
                debug!(call_id = %call.dialog.caller.call_id, "no RTP for rtp-inactivity: BYE on both legs");
                self.stats.media_inactive_ended += 1;
                self.trace_call(id);
                self.trace_note("no RTP for rtp-inactivity: BYE on both legs");
                self.tear_down(now, id, sbc_accounting::EndedBy::MediaInactivity);
                true
            }
            MediaEvent::Latched { id, .. } => {
                if !self.calls.contains_key(&id) {
                    return false;
                }
                self.replicate(id);
                true
            }
            MediaEvent::PoolLow { .. } => false,
        }
    }
}

/// FNV-1a of a description (to tell whether it changed).
fn fnv_hash(bytes: &[u8]) -> u64 {
    use std::hash::Hasher as _;
    let mut h = fnv::FnvHasher::default();
    h.write(bytes);
    h.finish()
}
