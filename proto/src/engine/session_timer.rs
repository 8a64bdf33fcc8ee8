//! Session timers (RFC 4028) and the last bound on a call's life.
//!
//! - **The endpoints' own timer**: when the caller asked for one (`Session-Expires` in its
//!   INVITE) and the 2xx to an INVITE or UPDATE carries `Session-Expires`, the session must be
//!   refreshed (a re-INVITE or UPDATE answered 2xx) within that interval; when no refresh
//!   comes, the SBC ends the call with BYE on both legs at the interval less min(32 s, a third
//!   of it), as RFC 4028 section 10 has the refresher's peer do. A 2xx to a refresh without
//!   `Session-Expires` turns it off.
//! - **The SBC's timers, one per leg** (a realm's `session-timer-profile`, when the caller
//!   asked for none): our INVITE offers the callee realm's `Session-Expires` and `Min-SE`; the
//!   callee's 2xx says who refreshes that leg (a callee without timers: the SBC); the 2xx
//!   relayed to the caller names the caller leg's timer instead (to a caller that supports
//!   timers; one that does not is refreshed by the SBC). Where the SBC refreshes, it sends an
//!   UPDATE at half the interval (a re-INVITE without an offer to a peer that does not allow
//!   UPDATE, or with `force-reinvite`: see [`super::reinvite_refresh`]);
//!   an answer 481 or 408, or none, ends the call; where the peer refreshes and does not, the
//!   call ends as above. So a call whose endpoint vanished ends, whichever end supports
//!   timers (OpenSIPS#991: an injected refresher that nobody honoured dropped calls).
//! - **422**: a new INVITE below its realm's `min-se` is answered 422 with `Min-SE`; a 422
//!   to the interval the SBC offered is retried once on the same leg with the larger one.
//! - **`session-max-life-limit`**: a confirmed call ends this long after its INVITE.
//!
//! Every date travels with the dialog to the standby, so a new active ends the calls whose
//! endpoints vanished with the former one (stale calls after a takeover). Sans IO: dates are
//! wall-clock milliseconds passed in; one deadline per call is armed on the timer heap.

use std::time::{Duration, Instant};

use super::build::empty_message;
use super::call::side_index;
use super::transactions::{ClientKey, Purpose, TimerTarget};
use super::transmit::Inbound;
use super::Engine;
use crate::sip::dialog::{DialogState, LegTimer, SessionTimer, Side};
use crate::sip::message::{split_list, Header, HeaderName, Method, SipMessage};

/// The `Reason` of the BYEs that end a call whose session was not refreshed.
pub(super) const EXPIRED_REASON: &str = "SIP;cause=408;text=\"session timer expired\"";

/// The `Reason` of the BYEs that end a call at its realm's `session-max-life-limit` (Q.850
/// 102: recovery on timer expiry).
pub(super) const MAX_LIFE_REASON: &str = "Q.850;cause=102;text=\"session-max-life-limit\"";

/// The largest interval a 422's `Min-SE` may ask of the SBC (a day).
const MAX_INTERVAL_SECS: u32 = 86_400;

/// A realm's `session-timer-profile` as the engine runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerProfile {
    /// `session-expires`: the interval offered, in seconds.
    pub session_expires: u32,
    /// `min-se`: the smallest interval accepted (below: 422), in seconds.
    pub min_se: u32,
    /// `request-refresher uac`: the callee is asked to let the SBC refresh its leg.
    pub sbc_refreshes_callee: bool,
    /// `response-refresher uas`: the SBC refreshes a caller that supports timers too.
    pub sbc_refreshes_caller: bool,
    /// `force-reinvite`: the SBC refreshes with a re-INVITE even where UPDATE is allowed.
    pub force_reinvite: bool,
}

/// What a realm's `realm-config` bounds its calls by (by interface in
/// [`super::EngineConfig::session_policies`]; missing: nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionPolicy {
    /// Its `session-timer-profile`, if any.
    pub timer: Option<TimerProfile>,
    /// `session-max-life-limit`, in seconds; 0: none.
    pub max_life_secs: u32,
    /// `refer-call-transfer enabled`: the SBC performs a transfer an in-dialog REFER arriving
    /// in the realm asks for, instead of relaying the REFER.
    pub refer_call_transfer: bool,
}

/// `Session-Expires` (or its compact form `x`): the interval and the `refresher`, if any.
pub(super) fn session_expires(msg: &SipMessage) -> Option<(u32, String)> {
    let value = other_header(msg, "session-expires", "x")?;
    let interval = value.split(';').next()?.trim().parse::<u32>().ok()?;
    let refresher = crate::sip::message::param(value, "refresher")
        .unwrap_or_default()
        .to_ascii_lowercase();
    (interval > 0).then_some((interval, refresher))
}

/// The first header named `name` (or its compact form), other than the ones the parser knows.
fn other_header<'m>(msg: &'m SipMessage, name: &str, compact: &str) -> Option<&'m str> {
    msg.headers
        .iter()
        .find(|h| is_named(h, name, compact))
        .map(|h| h.value.as_str())
}

fn is_named(h: &Header, name: &str, compact: &str) -> bool {
    matches!(&h.name, HeaderName::Other(n)
        if n.eq_ignore_ascii_case(name) || (!compact.is_empty() && n.eq_ignore_ascii_case(compact)))
}

/// Whether a `Supported` (`k`) or `Require` header of `msg` lists option tag `tag`.
fn has_option(msg: &SipMessage, tag: &str) -> bool {
    msg.headers.iter().any(|h| {
        (is_named(h, "supported", "k") || is_named(h, "require", ""))
            && split_list(&h.value).any(|t| t.trim().eq_ignore_ascii_case(tag))
    })
}

/// Whether the `Allow` of `msg` lists UPDATE (no `Allow`: not known, so not used).
fn allows_update(msg: &SipMessage) -> bool {
    msg.headers.iter().any(|h| {
        is_named(h, "allow", "")
            && split_list(&h.value).any(|m| m.trim().eq_ignore_ascii_case("UPDATE"))
    })
}

/// `msg` with header `name` (and its compact form) replaced by one with `value`.
fn set_header(msg: &mut SipMessage, name: &str, compact: &str, value: String) {
    msg.headers.retain(|h| !is_named(h, name, compact));
    msg.headers.push(Header {
        name: HeaderName::Other(name.to_owned()),
        value,
    });
}

/// `msg` without option tag `tag` in its `Require` (a header left empty goes).
fn drop_required(msg: &mut SipMessage, tag: &str) {
    for h in &mut msg.headers {
        if is_named(h, "require", "") {
            h.value = split_list(&h.value)
                .map(str::trim)
                .filter(|t| !t.eq_ignore_ascii_case(tag))
                .collect::<Vec<_>>()
                .join(", ");
        }
    }
    msg.headers
        .retain(|h| !(is_named(h, "require", "") && h.value.trim().is_empty()));
}

/// How long after a refresh the SBC ends an unrefreshed session: the interval less
/// min(32 s, a third of it) (RFC 4028 section 10).
pub(super) fn end_after(interval_secs: u32) -> Duration {
    let interval = u64::from(interval_secs);
    Duration::from_secs(interval - (interval / 3).min(32))
}

fn end_after_ms(interval_secs: u32) -> u64 {
    end_after(interval_secs).as_secs() * 1000
}

impl Engine {
    /// The `realm-config` bounds of interface `interface`.
    pub(super) fn session_policy(&self, interface: usize) -> SessionPolicy {
        self.cfg
            .session_policies
            .get(interface)
            .copied()
            .unwrap_or_default()
    }

    pub(super) fn unix_ms(&self, now: Instant) -> u64 {
        self.wall_clock.unix_micros_at(now) / 1000
    }

    /// The `Min-SE` a new INVITE from `inbound` must be answered 422 with: it asks for a
    /// session interval below its realm's `min-se`.
    pub(super) fn interval_too_small(&self, inbound: &Inbound, msg: &SipMessage) -> Option<u32> {
        let profile = self.session_policy(inbound.interface).timer?;
        let (interval, _) = session_expires(msg)?;
        (interval < profile.min_se).then_some(profile.min_se)
    }

    /// Sets up the session timers of new call `id` from its realms' profiles, and returns
    /// `routed` as it goes to the callee with the callee realm's `Session-Expires`, `Min-SE`
    /// and `Supported: timer` (`None`: unchanged). A caller that asked for a timer of its own
    /// keeps it end to end, raised to the callee realm's `min-se` if below.
    pub(super) fn offer_session_timers(
        &mut self,
        id: u64,
        caller_invite: &SipMessage,
        routed: &SipMessage,
    ) -> Option<SipMessage> {
        let call = self.calls.get(&id)?;
        let caller_profile = self.session_policy(call.dialog.caller.interface).timer;
        let callee_profile = self.session_policy(call.dialog.callee.interface).timer;
        if caller_profile.is_none() && callee_profile.is_none() {
            return None;
        }
        if let Some((interval, refresher)) = session_expires(caller_invite) {
            let profile = callee_profile.filter(|p| interval < p.min_se)?;
            let mut out = routed.clone();
            let value = match refresher.as_str() {
                "" => profile.min_se.to_string(),
                r => format!("{};refresher={r}", profile.min_se),
            };
            set_header(&mut out, "Session-Expires", "x", value);
            set_header(&mut out, "Min-SE", "", profile.min_se.to_string());
            return Some(out);
        }
        let caller_supports = has_option(caller_invite, "timer");
        let timers = [
            caller_profile.map(|p| LegTimer {
                interval_secs: p.session_expires,
                sbc_refreshes: p.sbc_refreshes_caller || !caller_supports,
                negotiated: caller_supports,
                update_allowed: allows_update(caller_invite),
                refreshed_unix_ms: 0,
                refreshing: false,
            }),
            callee_profile.map(|p| LegTimer {
                interval_secs: p.session_expires,
                sbc_refreshes: p.sbc_refreshes_callee,
                negotiated: false,
                update_allowed: false,
                refreshed_unix_ms: 0,
                refreshing: false,
            }),
        ];
        let out = callee_profile.map(|p| {
            let mut out = routed.clone();
            let refresher = if p.sbc_refreshes_callee { "uac" } else { "uas" };
            set_header(
                &mut out,
                "Session-Expires",
                "x",
                format!("{};refresher={refresher}", p.session_expires),
            );
            set_header(&mut out, "Min-SE", "", p.min_se.to_string());
            if !has_option(&out, "timer") {
                out.headers.push(Header {
                    name: HeaderName::Other("Supported".into()),
                    value: "timer".into(),
                });
            }
            out
        });
        if let Some(call) = self.calls.get_mut(&id) {
            call.dialog.leg_timers = Some(Box::new(timers));
        }
        out
    }

    /// The callee answered call `id`'s INVITE with `msg` (2xx) and the SBC runs leg timers:
    /// they start, the callee's as its `Session-Expires` says (none: the SBC refreshes); the
    /// 2xx relayed to the caller names the caller leg's timer, or none. `None`: `msg` goes
    /// as it is.
    pub(super) fn leg_timers_answered(
        &mut self,
        now: Instant,
        id: u64,
        msg: &SipMessage,
    ) -> Option<SipMessage> {
        let unix_ms = self.unix_ms(now);
        let call = self.calls.get_mut(&id)?;
        let timers = call.dialog.leg_timers.as_deref_mut()?;
        let update_allowed = allows_update(msg);
        timers[1] = match (timers[1].take(), session_expires(msg)) {
            (_, Some((interval_secs, refresher))) => Some(LegTimer {
                interval_secs,
                sbc_refreshes: refresher != "uas",
                negotiated: true,
                update_allowed,
                refreshed_unix_ms: unix_ms,
                refreshing: false,
            }),
            // A callee without timers: the SBC refreshes alone (RFC 4028 section 7.4).
            (Some(t), None) => Some(LegTimer {
                sbc_refreshes: true,
                update_allowed,
                refreshed_unix_ms: unix_ms,
                ..t
            }),
            (None, None) => None,
        };
        let mut out = msg.clone();
        out.headers.retain(|h| !is_named(h, "session-expires", "x"));
        drop_required(&mut out, "timer");
        if let Some(t) = timers[0].as_mut() {
            t.refreshed_unix_ms = unix_ms;
            if t.negotiated {
                let refresher = if t.sbc_refreshes { "uas" } else { "uac" };
                set_header(
                    &mut out,
                    "Session-Expires",
                    "x",
                    format!("{};refresher={refresher}", t.interval_secs),
                );
                out.headers.push(Header {
                    name: HeaderName::Other("Require".into()),
                    value: "timer".into(),
                });
            }
        }
        if timers.iter().all(Option::is_none) {
            call.dialog.leg_timers = None;
        }
        Some(out)
    }

    /// `msg`, a refresh (`request`) or its 2xx going out on leg `to` of call `id`, with the
    /// `Session-Expires` of the SBC's timer on that leg in place of the other leg's (none to a
    /// peer that does not know it), the refresher named as the SBC's role in the transaction
    /// (its UAC for a request, its UAS for a response) says. False when the SBC runs no leg
    /// timers on the call (`msg` untouched).
    pub(super) fn leg_timer_headers(
        &self,
        id: u64,
        to: Side,
        msg: &mut SipMessage,
        request: bool,
    ) -> bool {
        let Some(timers) = self
            .calls
            .get(&id)
            .and_then(|c| c.dialog.leg_timers.as_deref())
        else {
            return false;
        };
        msg.headers
            .retain(|h| !is_named(h, "session-expires", "x") && !is_named(h, "min-se", ""));
        if !request {
            drop_required(msg, "timer");
        }
        let Some(t) = timers[side_index(to)].as_ref().filter(|t| t.negotiated) else {
            return true;
        };
        let refresher = match (request, t.sbc_refreshes) {
            (true, true) | (false, false) => "uac",
            (true, false) | (false, true) => "uas",
        };
        msg.headers.push(Header {
            name: HeaderName::Other("Session-Expires".into()),
            value: format!("{};refresher={refresher}", t.interval_secs),
        });
        if !request {
            msg.headers.push(Header {
                name: HeaderName::Other("Require".into()),
                value: "timer".into(),
            });
        }
        true
    }

    /// A 2xx to an INVITE or UPDATE of call `id` was relayed (`msg`): the endpoints' session
    /// timer starts, is refreshed, or stops (a refresh's 2xx without `Session-Expires`); the
    /// SBC's leg timers count it as a refresh of both legs.
    pub(super) fn session_refreshed(&mut self, now: Instant, id: u64, msg: &SipMessage) {
        let unix_ms = self.unix_ms(now);
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        if call.dialog.subscription.is_some() {
            return;
        }
        if let Some(timers) = call.dialog.leg_timers.as_deref_mut() {
            for t in timers.iter_mut().flatten() {
                t.refreshed_unix_ms = unix_ms;
            }
        } else {
            call.dialog.session_timer = session_expires(msg).map(|(interval_secs, refresher)| {
                Box::new(SessionTimer {
                    interval_secs,
                    refresher,
                    refreshed_unix_ms: unix_ms,
                })
            });
        }
        self.arm_session(now, id);
    }

    /// When call `id` needs the session timer's attention next (Unix milliseconds): a
    /// refresh to send, a refresh that did not come, its life limit.
    fn session_due_ms(&self, id: u64) -> Option<u64> {
        let dialog = &self.calls.get(&id)?.dialog;
        let mut due: Option<u64> = None;
        let mut at = |ms: u64| due = Some(due.map_or(ms, |d| d.min(ms)));
        if let Some(t) = &dialog.session_timer {
            at(t.refreshed_unix_ms + end_after_ms(t.interval_secs));
        }
        for t in dialog.leg_timers.iter().flat_map(|l| l.iter().flatten()) {
            if t.refreshed_unix_ms == 0 {
                continue; // not answered yet
            }
            if !t.sbc_refreshes {
                at(t.refreshed_unix_ms + end_after_ms(t.interval_secs));
            } else if !t.refreshing {
                at(t.refreshed_unix_ms + u64::from(t.interval_secs) * 500);
            }
        }
        if let Some(limit_ms) = self.max_life_ms(id) {
            at(dialog.created_unix * 1000 + limit_ms);
        }
        if let Some(ms) = self.interim_due_ms(id) {
            at(ms);
        }
        due
    }

    /// Call `id`'s `session-max-life-limit` (the smaller of its legs' realms'), in
    /// milliseconds, once confirmed.
    fn max_life_ms(&self, id: u64) -> Option<u64> {
        let dialog = &self.calls.get(&id)?.dialog;
        if dialog.state != DialogState::Confirmed || dialog.subscription.is_some() {
            return None;
        }
        [dialog.caller.interface, dialog.callee.interface]
            .into_iter()
            .map(|i| self.session_policy(i).max_life_secs)
            .filter(|&s| s > 0)
            .min()
            .map(|s| u64::from(s) * 1000)
    }

    /// Arms call `id`'s next session deadline (see [`Self::session_due_ms`]), replacing the
    /// one armed before.
    pub(super) fn arm_session(&mut self, now: Instant, id: u64) {
        let due = self.session_due_ms(id);
        let unix_ms = self.unix_ms(now);
        if !self.calls.contains_key(&id) {
            return;
        }
        let at = due.map(|ms| now + Duration::from_millis(ms.saturating_sub(unix_ms)));
        let armed = self.session_armed.get(&id).copied();
        match super::timers::rearm_call(&mut self.timers, at, armed, TimerTarget::SessionTimer(id))
        {
            Some(a) => self.session_armed.insert(id, a),
            None => self.session_armed.remove(&id),
        };
    }

    /// Cancels call `id`'s session deadline (the call is gone).
    pub(super) fn disarm_session(&mut self, id: u64) {
        if let Some(armed) = self.session_armed.remove(&id) {
            self.timers.cancel(armed.id);
        }
    }

    /// Call `id`'s session deadline came: the call ends (a refresh that did not come, its
    /// life limit), or the SBC refreshes a leg; then the next deadline is armed.
    pub(super) fn session_timer_timeout(&mut self, now: Instant, id: u64) {
        let unix_ms = self.unix_ms(now);
        self.session_armed.remove(&id);
        let Some(call) = self.calls.get(&id) else {
            return;
        };
        // A second early: the heap's deadline and the wall clock may round apart.
        let due = |ms: u64| ms <= unix_ms + 1000;
        let dialog = &call.dialog;
        let e2e_expired = dialog
            .session_timer
            .as_ref()
            .is_some_and(|t| due(t.refreshed_unix_ms + end_after_ms(t.interval_secs)));
        let mut leg_expired = false;
        let mut to_refresh = Vec::new();
        for (side, t) in [Side::Caller, Side::Callee]
            .into_iter()
            .zip(dialog.leg_timers.iter().flat_map(|l| l.iter()))
        {
            let Some(t) = t.as_ref().filter(|t| t.refreshed_unix_ms > 0) else {
                continue;
            };
            if !t.sbc_refreshes {
                leg_expired |= due(t.refreshed_unix_ms + end_after_ms(t.interval_secs));
            } else if !t.refreshing && due(t.refreshed_unix_ms + u64::from(t.interval_secs) * 500) {
                to_refresh.push(side);
            }
        }
        if e2e_expired || leg_expired {
            self.stats.session_timer_ended += 1;
            self.trace_call(id);
            self.trace_note("session not refreshed in time (RFC 4028): BYE on both legs");
            self.tear_down_because(
                now,
                id,
                EXPIRED_REASON.to_owned(),
                sbc_accounting::EndedBy::SessionTimer,
            );
            return;
        }
        let created_ms = dialog.created_unix * 1000;
        if self
            .max_life_ms(id)
            .is_some_and(|limit| due(created_ms + limit))
        {
            self.stats.max_life_ended += 1;
            self.trace_call(id);
            self.trace_note("session-max-life-limit reached: BYE on both legs");
            self.tear_down_because(
                now,
                id,
                MAX_LIFE_REASON.to_owned(),
                sbc_accounting::EndedBy::MaxDuration,
            );
            return;
        }
        if let Some(due_ms) = self.interim_due_ms(id).filter(|&ms| due(ms)) {
            self.account_periodic(now, id, unix_ms.max(due_ms));
        }
        // An offer in flight (a relayed re-INVITE or UPDATE, a transfer the SBC performs):
        // no INVITE of ours beside it (RFC 3261 section 14.1); the refresh waits a second.
        let busy = self.transfers.contains_key(&id)
            || self.refresh_acks_owed.contains_key(&id)
            || self.calls.get(&id).is_some_and(|c| c.offer_undo.is_some());
        if busy && !to_refresh.is_empty() {
            let armed = self.session_armed.get(&id).copied();
            let retry = Some(now + Duration::from_secs(1));
            if let Some(a) = super::timers::rearm_call(
                &mut self.timers,
                retry,
                armed,
                TimerTarget::SessionTimer(id),
            ) {
                self.session_armed.insert(id, a);
            }
            return;
        }
        for side in to_refresh {
            self.send_session_refresh(now, id, side);
        }
        self.arm_session(now, id);
    }

    /// Ends call `id` with BYE on both legs carrying `Reason: reason`.
    pub(super) fn tear_down_because(
        &mut self,
        now: Instant,
        id: u64,
        reason: String,
        ended_by: sbc_accounting::EndedBy,
    ) {
        let mut orig = empty_message();
        orig.headers.push(Header {
            name: HeaderName::Other("Reason".into()),
            value: reason,
        });
        self.tear_down_with(now, id, &orig, ended_by);
    }

    /// The SBC refreshes leg `side` of call `id`: an UPDATE without a body (with the
    /// interval, to a peer that negotiated it), or, to a peer that does not allow UPDATE (or
    /// with the leg's profile's `force-reinvite`), a re-INVITE without an offer
    /// ([`super::reinvite_refresh`]).
    fn send_session_refresh(&mut self, now: Instant, id: u64, side: Side) {
        let force_reinvite = self.calls.get(&id).is_some_and(|c| {
            self.session_policy(c.dialog.leg(side).interface)
                .timer
                .is_some_and(|p| p.force_reinvite)
        });
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        let Some(t) = call
            .dialog
            .leg_timers
            .as_deref_mut()
            .and_then(|l| l[side_index(side)].as_mut())
        else {
            return;
        };
        if t.refreshing {
            return; // the other leg's re-INVITE refreshes this one too
        }
        t.refreshing = true;
        let (update, negotiated, interval) = (
            t.update_allowed && !force_reinvite,
            t.negotiated,
            t.interval_secs,
        );
        if !update {
            // The other leg gets a re-INVITE of ours too (the peer's offer): it is refreshed
            // by it, not by a second INVITE of ours crossing it.
            if let Some(other) = call
                .dialog
                .leg_timers
                .as_deref_mut()
                .and_then(|l| l[side_index(side.other())].as_mut())
                .filter(|o| o.sbc_refreshes)
            {
                other.refreshing = true;
            }
        }
        let leg = call.dialog.leg_mut(side);
        leg.local_cseq += 1;
        let cseq = leg.local_cseq;
        if !update {
            leg.last_invite_cseq = cseq;
        }
        let mut orig = empty_message();
        if negotiated {
            orig.headers.push(Header {
                name: HeaderName::Other("Session-Expires".into()),
                value: format!("{interval};refresher=uac"),
            });
            orig.headers.push(Header {
                name: HeaderName::Other("Supported".into()),
                value: "timer".into(),
            });
        }
        let method = if update {
            Method::Update
        } else {
            Method::Invite
        };
        self.stats.session_refreshes_sent += 1;
        self.trace_call(id);
        self.trace_note_with(|| {
            format!("session refresh of the SBC's: {method} on the {side:?} leg")
        });
        if let Some(key) = self.send_on_leg(now, id, side, &method, cseq, &orig, 70, None) {
            if let Some(entry) = self.client.get_mut(&key) {
                entry.purpose = Purpose::SessionRefresh;
            }
        }
        // The standby must know the CSeq moved on.
        self.replicate(id);
    }

    /// The SBC's refresh of leg `side` of call `id` was answered `code` (a timeout: 408): a
    /// 481 or 408 ends the call; any other answer says the peer is there.
    pub(super) fn session_refresh_answered(
        &mut self,
        now: Instant,
        id: u64,
        side: Side,
        method: &Method,
        code: u16,
    ) {
        let unix_ms = self.unix_ms(now);
        let Some(t) = self
            .calls
            .get_mut(&id)
            .and_then(|c| c.dialog.leg_timers.as_deref_mut())
            .and_then(|l| l[side_index(side)].as_mut())
        else {
            return;
        };
        t.refreshing = false;
        if matches!(code, 408 | 481) {
            self.stats.session_refresh_failed += 1;
            self.trace_call(id);
            self.trace_note("the SBC's session refresh failed (481 or 408): BYE on both legs");
            self.tear_down_because(
                now,
                id,
                format!("SIP;cause={code};text=\"session refresh failed\""),
                sbc_accounting::EndedBy::SessionTimer,
            );
            return;
        }
        if *method == Method::Update && matches!(code, 405 | 501) {
            t.update_allowed = false;
        }
        t.refreshed_unix_ms = unix_ms;
        self.replicate(id);
        self.arm_session(now, id);
    }

    /// A 422 answered call `id`'s INVITE `ckey` on the callee leg: when the SBC offered the
    /// interval, the INVITE goes again on the same leg (next CSeq) with the 422's larger
    /// `Min-SE`; true when sent. A caller's own interval goes back to it (RFC 4028: the
    /// UAC retries).
    pub(super) fn retry_after_422(
        &mut self,
        now: Instant,
        ckey: &ClientKey,
        id: u64,
        msg: &SipMessage,
    ) -> bool {
        let Some(min_se) = other_header(msg, "min-se", "")
            .and_then(|v| v.split(';').next())
            .and_then(|v| v.trim().parse::<u32>().ok())
        else {
            return false;
        };
        let Some(call) = self.calls.get_mut(&id) else {
            return false;
        };
        let Some(t) = call
            .dialog
            .leg_timers
            .as_deref_mut()
            .and_then(|l| l[1].as_mut())
        else {
            return false;
        };
        if min_se <= t.interval_secs || min_se > MAX_INTERVAL_SECS {
            return false; // no progress possible
        }
        t.interval_secs = min_se;
        let refresher = if t.sbc_refreshes { "uac" } else { "uas" };
        let Some(entry) = self.client.get(ckey) else {
            return false;
        };
        let server = entry.server.clone();
        let Ok(mut sent) = SipMessage::parse(&entry.request) else {
            return false;
        };
        set_header(
            &mut sent,
            "Session-Expires",
            "x",
            format!("{min_se};refresher={refresher}"),
        );
        set_header(&mut sent, "Min-SE", "", min_se.to_string());
        let Some(call) = self.calls.get_mut(&id) else {
            return false;
        };
        let callee = &mut call.dialog.callee;
        callee.local_cseq = callee.local_cseq.max(callee.last_invite_cseq) + 1;
        callee.last_invite_cseq = callee.local_cseq;
        let cseq = callee.local_cseq;
        self.stats.session_422_retried += 1;
        self.trace_note_with(|| {
            format!("422 from the next hop: INVITE again with Session-Expires {min_se}")
        });
        let mf = sent
            .header(&HeaderName::MaxForwards)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(70);
        let key = self.send_on_leg(
            now,
            id,
            Side::Callee,
            &Method::Invite,
            cseq,
            &sent,
            mf,
            server,
        );
        if let Some(call) = self.calls.get_mut(&id) {
            call.invite_sent(key);
        }
        self.replicate(id);
        true
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

    fn message(headers: &[(&str, &str)]) -> SipMessage {
        let mut m = empty_message();
        for (name, value) in headers {
            m.headers.push(Header {
                name: HeaderName::Other((*name).into()),
                value: (*value).into(),
            });
        }
        m
    }

    #[test]
    fn option_tags_and_allow_are_read_in_any_form() {
        let m = message(&[("k", "100rel, Timer"), ("Allow", "INVITE, update")]);
        assert!(has_option(&m, "timer"));
        assert!(allows_update(&m));
        assert_eq!(
            session_expires(&message(&[("x", "1800;refresher=UAS")])),
            Some((1800, "uas".into()))
        );
        assert!(!allows_update(&message(&[("Allow", "INVITE, BYE")])));
    }

    #[test]
    fn timer_leaves_require_and_an_empty_require_goes() {
        let mut m = message(&[("Require", "timer, 100rel"), ("Require", "timer")]);
        drop_required(&mut m, "timer");
        assert_eq!(m.headers.len(), 1);
        assert_eq!(m.headers[0].value, "100rel");
    }
}
