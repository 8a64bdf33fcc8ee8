//! The engine's counters.

/// Counters of one engine.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Requests received (parsed).
    pub requests_in: u64,
    /// Responses received (parsed).
    pub responses_in: u64,
    /// New INVITEs accepted as calls.
    pub calls_attempted: u64,
    /// Calls answered with 2xx.
    pub calls_answered: u64,
    /// Calls ended by a final non-2xx toward the caller.
    pub calls_failed: u64,
    /// Request retransmissions absorbed (answered from transaction state, not forwarded).
    pub retransmissions_absorbed: u64,
    /// Requests retransmitted by us (timers A, E) and responses (timer G).
    pub retransmissions_sent: u64,
    /// Malformed requests answered with 400.
    pub malformed_answered: u64,
    /// Malformed messages dropped (nothing to answer).
    pub malformed_dropped: u64,
    /// Responses that matched no transaction.
    pub stray_responses: u64,
    /// New requests refused with 503 by admission control or shutdown.
    pub rejected_503: u64,
    /// 408s sent because the next hop did not answer.
    pub timeouts: u64,
    /// New requests dropped unanswered while handing the service address over.
    pub handover_dropped: u64,
    /// New requests routed to a next hop (new calls and out-of-dialog requests): what the
    /// routing lookup is paid for.
    pub routed_new: u64,
    /// In-dialog requests (and ACKs, CANCELs) refused because they did not come from their
    /// leg: another interface, transport, source or remote tag (481, ACKs dropped).
    pub leg_mismatch: u64,
    /// Responses dropped because they did not come from the next hop the request went to.
    pub response_source_mismatch: u64,
    /// New requests refused with 503 because the engine held `max-calls` calls or
    /// `max-transactions` transactions.
    pub state_cap_503: u64,
    /// New `sips:` requests refused: arrived over another transport than TLS (416), or routed
    /// to a next hop not reached over TLS (480).
    pub sips_refused: u64,
    /// Calls whose media the SBC anchored (their first SDP opened a media session).
    pub media_anchored: u64,
    /// New calls refused with 503 because a steering pool had no free ports.
    pub media_ports_503: u64,
    /// Requests refused with 488 for an SDP that could not be anchored (malformed, or no
    /// ports for an added stream); responses relayed without such a body.
    pub media_sdp_refused: u64,
    /// Calls ended with BYE on both legs after `rtp-inactivity` without RTP.
    pub media_inactive_ended: u64,
}

impl std::ops::AddAssign<&Self> for Stats {
    /// Adds another engine's counters, field by field (`show sip-stats` sums the shards).
    fn add_assign(&mut self, b: &Self) {
        let Self {
            requests_in,
            responses_in,
            calls_attempted,
            calls_answered,
            calls_failed,
            retransmissions_absorbed,
            retransmissions_sent,
            malformed_answered,
            malformed_dropped,
            stray_responses,
            rejected_503,
            timeouts,
            handover_dropped,
            routed_new,
            leg_mismatch,
            response_source_mismatch,
            state_cap_503,
            sips_refused,
            media_anchored,
            media_ports_503,
            media_sdp_refused,
            media_inactive_ended,
        } = self;
        // Destructured, so a new counter that is not summed here does not compile.
        *requests_in += b.requests_in;
        *responses_in += b.responses_in;
        *calls_attempted += b.calls_attempted;
        *calls_answered += b.calls_answered;
        *calls_failed += b.calls_failed;
        *retransmissions_absorbed += b.retransmissions_absorbed;
        *retransmissions_sent += b.retransmissions_sent;
        *malformed_answered += b.malformed_answered;
        *malformed_dropped += b.malformed_dropped;
        *stray_responses += b.stray_responses;
        *rejected_503 += b.rejected_503;
        *timeouts += b.timeouts;
        *handover_dropped += b.handover_dropped;
        *routed_new += b.routed_new;
        *leg_mismatch += b.leg_mismatch;
        *response_source_mismatch += b.response_source_mismatch;
        *state_cap_503 += b.state_cap_503;
        *sips_refused += b.sips_refused;
        *media_anchored += b.media_anchored;
        *media_ports_503 += b.media_ports_503;
        *media_sdp_refused += b.media_sdp_refused;
        *media_inactive_ended += b.media_inactive_ended;
    }
}
