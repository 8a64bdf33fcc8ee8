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
    /// New requests sent over TCP instead of UDP because they exceeded the agent's
    /// `max-udp-length` (RFC 3261 section 18.1.1).
    pub udp_to_tcp: u64,
    /// Messages not traced while the trace was on: the shell left too many waiting
    /// ([`super::MAX_PENDING_TRACE_EVENTS`]), or switched the trace off because nobody would
    /// take them (the capture server down and no monitor).
    pub trace_dropped: u64,
    /// New requests sent on to their next candidate after an attempt failed (503, a timeout,
    /// a transport failure, an `out-service-response-codes` code).
    pub rerouted: u64,
    /// New requests whose every candidate failed (the caller got the best failure).
    pub hunts_exhausted: u64,
    /// Attempts abandoned because the agent sent no response at all within its attempt
    /// expiry (`invite-trans-expire`).
    pub attempts_expired: u64,
    /// Candidates passed over because their agent refused a new session: out of service, or
    /// at `max-sessions`, `max-outbound-sessions` or `max-burst-rate`.
    pub agent_refused: u64,
    /// New requests refused with 503 because every candidate's agent refused them.
    pub no_agent_503: u64,
    /// Health pings sent to session-agents.
    pub pings_sent: u64,
    /// Requests whose numbers a session-translation rewrote (in and out counted apart).
    pub translated: u64,
    /// 2xx answers to an attempt abandoned at its expiry (a later candidate had the call):
    /// ACKed and hung up with BYE, so that the late callee does not hold a call alone.
    pub abandoned_answers_released: u64,
    /// New requests from the core sent to a registered phone over its flow (their
    /// Request-URI one of our registration Contacts).
    pub to_registered_phones: u64,
    /// Requests for one of our registration Contacts whose binding is gone: 480.
    pub registered_phone_gone: u64,
    /// New requests refused 403 by the realm's `allow-anonymous` (an unregistered source,
    /// or not a session-agent).
    pub anonymous_refused: u64,
    /// Authenticated INVITEs (re-sent after a 401/407 from the next hop) sent out on the
    /// challenged leg's Call-ID and From tag with the next CSeq.
    pub auth_on_challenged_leg: u64,
    /// Challenged legs forgotten before their caller re-sent (the table was full).
    pub challenges_evicted: u64,
    /// Subscriptions (SUBSCRIBE, or REFER's implicit one) the notifier accepted (2xx).
    pub subscriptions_accepted: u64,
    /// New subscriptions that ended before one was made: a final non-2xx (relayed), or
    /// refused by the SBC (no `Event`).
    pub subscriptions_refused: u64,
    /// Subscriptions ended by their last NOTIFY (`Subscription-State: terminated`) or by a
    /// 481/408 to a request in them.
    pub subscriptions_ended: u64,
    /// Subscriptions released at their expiry (plus a grace) without a refresh.
    pub subscriptions_expired: u64,
    /// In-dialog REFERs whose `Refer-To` was translated for the leg they went out on (a
    /// `Replaces` naming the other call's far leg, or our own address).
    pub refers_translated: u64,
    /// Transfers the SBC performed itself (`refer-call-transfer`): the target and the
    /// transferee joined, the transferor released.
    pub sbc_transfers_performed: u64,
    /// Transfers the SBC was asked to perform that failed (no route, the target or the
    /// transferee refused): the call goes on as it was.
    pub sbc_transfers_failed: u64,
    /// New INVITEs with `Replaces` naming one of our legs: sent to that leg's far end.
    pub replaces_matched: u64,
    /// New INVITEs with `Replaces` that named no leg of ours: routed as any INVITE.
    pub replaces_unmatched: u64,
    /// Calls ended with BYE on both legs because the session timer their endpoints negotiated
    /// (RFC 4028) ran out without a refresh.
    pub session_timer_ended: u64,
    /// New INVITEs answered 422 (`Session-Expires` below the realm's `min-se`).
    pub session_interval_too_small: u64,
    /// INVITEs sent again with a larger `Session-Expires` after a 422 from the next hop.
    pub session_422_retried: u64,
    /// Refreshes the SBC sent on a leg whose session timer it runs (UPDATE or OPTIONS).
    pub session_refreshes_sent: u64,
    /// Calls ended with BYE on both legs because a refresh of the SBC's was answered 481 or
    /// 408, or not at all.
    pub session_refresh_failed: u64,
    /// Calls ended with BYE on both legs at their realm's `session-max-life-limit`.
    pub max_life_ended: u64,
    /// NOTIFYs whose dialog-info body (a busy lamp's) was written with the ids of the leg it
    /// went out on.
    pub dialog_info_rewritten: u64,
    /// New SUBSCRIBEs and REFERs refused 503: their source holds
    /// `max-subscriptions-per-source` already (also counted in `subscriptions_refused`).
    pub subscriptions_source_capped: u64,
}

impl std::ops::AddAssign<&Self> for Stats {
    /// Adds another engine's counters, field by field (`show sip-stats` sums the shards).
    fn add_assign(&mut self, b: &Self) {
        let mut other = b.clone();
        for ((_, mine), (_, theirs)) in self.counters_mut().into_iter().zip(other.counters_mut()) {
            *mine += *theirs;
        }
    }
}

impl Stats {
    /// The number of counters.
    pub const COUNT: usize = 54;

    /// Every counter with its name (the serialised field name), in declaration order.
    fn counters_mut(&mut self) -> [(&'static str, &mut u64); Self::COUNT] {
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
            udp_to_tcp,
            trace_dropped,
            rerouted,
            hunts_exhausted,
            attempts_expired,
            agent_refused,
            no_agent_503,
            pings_sent,
            translated,
            abandoned_answers_released,
            to_registered_phones,
            registered_phone_gone,
            anonymous_refused,
            auth_on_challenged_leg,
            challenges_evicted,
            subscriptions_accepted,
            subscriptions_refused,
            subscriptions_ended,
            subscriptions_expired,
            refers_translated,
            sbc_transfers_performed,
            sbc_transfers_failed,
            replaces_matched,
            replaces_unmatched,
            session_timer_ended,
            session_interval_too_small,
            session_422_retried,
            session_refreshes_sent,
            session_refresh_failed,
            max_life_ended,
            dialog_info_rewritten,
            subscriptions_source_capped,
        } = self;
        // Destructured, so a new counter that is not listed here does not compile.
        [
            ("requests_in", requests_in),
            ("responses_in", responses_in),
            ("calls_attempted", calls_attempted),
            ("calls_answered", calls_answered),
            ("calls_failed", calls_failed),
            ("retransmissions_absorbed", retransmissions_absorbed),
            ("retransmissions_sent", retransmissions_sent),
            ("malformed_answered", malformed_answered),
            ("malformed_dropped", malformed_dropped),
            ("stray_responses", stray_responses),
            ("rejected_503", rejected_503),
            ("timeouts", timeouts),
            ("handover_dropped", handover_dropped),
            ("routed_new", routed_new),
            ("leg_mismatch", leg_mismatch),
            ("response_source_mismatch", response_source_mismatch),
            ("state_cap_503", state_cap_503),
            ("sips_refused", sips_refused),
            ("media_anchored", media_anchored),
            ("media_ports_503", media_ports_503),
            ("media_sdp_refused", media_sdp_refused),
            ("media_inactive_ended", media_inactive_ended),
            ("udp_to_tcp", udp_to_tcp),
            ("trace_dropped", trace_dropped),
            ("rerouted", rerouted),
            ("hunts_exhausted", hunts_exhausted),
            ("attempts_expired", attempts_expired),
            ("agent_refused", agent_refused),
            ("no_agent_503", no_agent_503),
            ("pings_sent", pings_sent),
            ("translated", translated),
            ("abandoned_answers_released", abandoned_answers_released),
            ("to_registered_phones", to_registered_phones),
            ("registered_phone_gone", registered_phone_gone),
            ("anonymous_refused", anonymous_refused),
            ("auth_on_challenged_leg", auth_on_challenged_leg),
            ("challenges_evicted", challenges_evicted),
            ("subscriptions_accepted", subscriptions_accepted),
            ("subscriptions_refused", subscriptions_refused),
            ("subscriptions_ended", subscriptions_ended),
            ("subscriptions_expired", subscriptions_expired),
            ("refers_translated", refers_translated),
            ("sbc_transfers_performed", sbc_transfers_performed),
            ("sbc_transfers_failed", sbc_transfers_failed),
            ("replaces_matched", replaces_matched),
            ("replaces_unmatched", replaces_unmatched),
            ("session_timer_ended", session_timer_ended),
            ("session_interval_too_small", session_interval_too_small),
            ("session_422_retried", session_422_retried),
            ("session_refreshes_sent", session_refreshes_sent),
            ("session_refresh_failed", session_refresh_failed),
            ("max_life_ended", max_life_ended),
            ("dialog_info_rewritten", dialog_info_rewritten),
            ("subscriptions_source_capped", subscriptions_source_capped),
        ]
    }

    /// Every counter with its name (the serialised field name), sorted by name: what
    /// `show sip-stats` lists and `/metrics` exports.
    #[must_use]
    pub fn fields(&self) -> [(&'static str, u64); Self::COUNT] {
        let mut copy = self.clone();
        let mut all = copy.counters_mut().map(|(name, n)| (name, *n));
        all.sort_unstable_by_key(|(name, _)| *name);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::Stats;

    #[test]
    fn counters_add_field_by_field() {
        let mut a = Stats {
            calls_failed: 3,
            timeouts: 1,
            ..Stats::default()
        };
        a += &Stats {
            calls_failed: 2,
            media_inactive_ended: 5,
            ..Stats::default()
        };
        assert_eq!(
            (a.calls_failed, a.timeouts, a.media_inactive_ended),
            (5, 1, 5)
        );
    }

    #[test]
    fn fields_are_the_serialised_counters_in_order() {
        let stats = Stats {
            calls_failed: 3,
            ..Stats::default()
        };
        let names: Vec<&str> = stats.fields().iter().map(|(n, _)| *n).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        assert!(stats.fields().contains(&("calls_failed", 3)));
        assert_eq!(stats.fields().len(), Stats::COUNT);
    }
}
