//! Session timers the endpoints negotiated (RFC 4028), enforced: when the 2xx to an INVITE or
//! UPDATE carries `Session-Expires`, the session must be refreshed (a re-INVITE or UPDATE
//! answered 2xx) within that interval; when no refresh comes, the SBC ends the call with BYE on
//! both legs at the interval less min(32 s, a third of it), as RFC 4028 section 10 has the
//! refresher's peer do. A 2xx to a refresh without `Session-Expires` turns the timer off.
//!
//! The timer's date travels with the dialog to the standby, so a new active ends the calls
//! whose endpoints vanished with the former one (stale calls after a takeover). Sans IO: the
//! date is wall-clock milliseconds passed in, the deadline a timer the shell fires.

use std::time::{Duration, Instant};

use super::build::empty_message;
use super::transactions::TimerTarget;
use super::Engine;
use crate::sip::dialog::SessionTimer;
use crate::sip::message::{Header, HeaderName, SipMessage};

/// The `Reason` of the BYEs that end a call whose session was not refreshed.
pub(super) const EXPIRED_REASON: &str = "SIP;cause=408;text=\"session timer expired\"";

/// `Session-Expires` (or its compact form `x`): the interval and the `refresher`, if any.
pub(super) fn session_expires(msg: &SipMessage) -> Option<(u32, String)> {
    let value = msg
        .headers
        .iter()
        .find(|h| {
            matches!(&h.name, HeaderName::Other(n)
                if n.eq_ignore_ascii_case("session-expires") || n.eq_ignore_ascii_case("x"))
        })?
        .value
        .as_str();
    let interval = value.split(';').next()?.trim().parse::<u32>().ok()?;
    let refresher = crate::sip::message::param(value, "refresher")
        .unwrap_or_default()
        .to_ascii_lowercase();
    (interval > 0).then_some((interval, refresher))
}

/// How long after a refresh the SBC ends an unrefreshed session: the interval less
/// min(32 s, a third of it) (RFC 4028 section 10).
pub(super) fn end_after(interval_secs: u32) -> Duration {
    let interval = u64::from(interval_secs);
    Duration::from_secs(interval - (interval / 3).min(32))
}

impl Engine {
    /// A 2xx to an INVITE or UPDATE of call `id` was relayed (`msg`): the session timer starts,
    /// is refreshed, or stops (a refresh's 2xx without `Session-Expires`).
    pub(super) fn session_refreshed(&mut self, now: Instant, id: u64, msg: &SipMessage) {
        let unix_ms = self.wall_clock.unix_micros_at(now) / 1000;
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        if call.dialog.subscription.is_some() {
            return;
        }
        match session_expires(msg) {
            Some((interval_secs, refresher)) => {
                call.dialog.session_timer = Some(Box::new(SessionTimer {
                    interval_secs,
                    refresher,
                    refreshed_unix_ms: unix_ms,
                }));
                self.timers.push(
                    now + end_after(interval_secs),
                    TimerTarget::SessionTimer(id),
                );
            }
            None => call.dialog.session_timer = None,
        }
    }

    /// Arms the session timer of a call replicated from the former active, at the date it
    /// had there.
    pub(super) fn arm_replicated_session_timer(&mut self, now: Instant, id: u64) {
        let Some((due_ms, unix_ms)) = self.session_due(now, id) else {
            return;
        };
        self.timers.push(
            now + Duration::from_millis(due_ms.saturating_sub(unix_ms)),
            TimerTarget::SessionTimer(id),
        );
    }

    /// When call `id`'s session ends unless refreshed (Unix milliseconds), and `now` in Unix
    /// milliseconds.
    fn session_due(&self, now: Instant, id: u64) -> Option<(u64, u64)> {
        let timer = self.calls.get(&id)?.dialog.session_timer.as_ref()?;
        let after = u64::try_from(end_after(timer.interval_secs).as_millis()).unwrap_or(u64::MAX);
        Some((
            timer.refreshed_unix_ms.saturating_add(after),
            self.wall_clock.unix_micros_at(now) / 1000,
        ))
    }

    /// Call `id`'s session timer fired: the call ends with BYE on both legs unless a refresh
    /// came since (it armed a later timer) or the timer was turned off.
    pub(super) fn session_timer_timeout(&mut self, now: Instant, id: u64) {
        let Some((due_ms, unix_ms)) = self.session_due(now, id) else {
            return;
        };
        if due_ms > unix_ms + 1000 {
            return;
        }
        self.stats.session_timer_ended += 1;
        self.trace_call(id);
        self.trace_note("session not refreshed in time (RFC 4028): BYE on both legs");
        let mut reason = empty_message();
        reason.headers.push(Header {
            name: HeaderName::Other("Reason".into()),
            value: EXPIRED_REASON.into(),
        });
        self.tear_down_with(now, id, &reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_call_ends_a_third_or_32_s_before_the_interval() {
        assert_eq!(end_after(90), Duration::from_secs(60));
        assert_eq!(end_after(1800), Duration::from_secs(1768));
        assert_eq!(end_after(20), Duration::from_secs(14));
    }
}
