//! Subscriptions (RFC 6665): a SUBSCRIBE, or a REFER with its implicit `refer` subscription
//! (RFC 3515), makes a dialog through the B2BUA as an INVITE does, with no media and no ACK.
//! NOTIFYs and refreshing SUBSCRIBEs then travel in it like any in-dialog request, each leg
//! with its own Call-ID, tags and CSeq.
//!
//! ```text
//!  Trying ──2xx──▶ Confirmed ──NOTIFY terminated, answered──▶ (gone)
//!    │  ╲            │  ▲ SUBSCRIBE refresh 2xx: expiry moved
//!    │   NOTIFY      │  └──────────┘
//!    │   (before     ├──expiry + grace, no refresh──▶ (gone)
//!    │    the 2xx)   └──481 or 408 to a request in it──▶ (gone)
//!  final ≥ 300 ──▶ (gone)
//! ```
//!
//! A subscription is held in the call table (bounded with the calls by `max-calls`, and per
//! source by `max-subscriptions-per-source`, counted node-wide in [`SubscriptionSources`]), is
//! replicated to the standby once accepted, and is counted apart from calls. Sans IO: its
//! expiry is a timer the shell fires, and its wall-clock date is what the standby gets.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::call::{route_set_of_answer, Call};
use super::request::{caller_leg, NewLeg, Target};
use super::transactions::{ServerKey, TimerTarget};
use super::transmit::Inbound;
use super::Engine;
use crate::sip::dialog::{Dialog, DialogState, Side, Subscription};
use crate::sip::message::{HeaderName, Method, SipMessage};
use std::sync::Arc;
use tracing::debug;

/// How long a subscription is kept past its expiry: the notifier's last NOTIFY (`terminated;
/// reason=timeout`) still finds it, and a refresh crossing the expiry too.
pub(super) const EXPIRY_GRACE: Duration = Duration::from_secs(32);

/// The expiry assumed when a 2xx names none (a REFER's 202 never does, RFC 3515 section 2.4.4).
pub(super) const DEFAULT_EXPIRES: u32 = 3600;

/// The longest a subscription is held without a refresh, whatever the notifier grants.
pub(super) const MAX_EXPIRES: u32 = 86_400;

/// The `Event` header's value (`Event` or its compact form `o`).
fn event_of(msg: &SipMessage) -> Option<&str> {
    msg.headers
        .iter()
        .find(|h| {
            matches!(&h.name, HeaderName::Other(n)
                if n.eq_ignore_ascii_case("event") || n.eq_ignore_ascii_case("o"))
        })
        .map(|h| h.value.trim())
}

/// The `Expires` header's seconds, if present and a number.
fn expires_of(msg: &SipMessage) -> Option<u32> {
    crate::registration::message::expires_header(msg)
}

/// Whether a NOTIFY ends its subscription (`Subscription-State: terminated`).
pub(super) fn is_terminating_notify(msg: &SipMessage) -> bool {
    msg.headers.iter().any(|h| {
        matches!(&h.name, HeaderName::Other(n) if n.eq_ignore_ascii_case("subscription-state"))
            && h.value
                .split(';')
                .next()
                .is_some_and(|s| s.trim().eq_ignore_ascii_case("terminated"))
    })
}

/// The subscriptions each source holds, node-wide (every engine counts into the same map),
/// against `max-subscriptions-per-source`. A source is its address, an IPv6 one its prefix of
/// `ipv6_prefix_len` bits (a stranger owns a whole /64). The map holds only sources with a
/// subscription, so it is bounded by the call table.
#[derive(Debug, Clone, Default)]
pub struct SubscriptionSources {
    /// Subscriptions held, by source.
    pub counts: Arc<Mutex<HashMap<IpAddr, u32>>>,
    /// The most one source may hold (0: no bound but `max-calls`).
    pub per_source: u32,
    /// How many leading bits of an IPv6 source make one source.
    pub ipv6_prefix_len: u8,
}

impl SubscriptionSources {
    fn key(&self, ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V4(_) => ip,
            IpAddr::V6(v6) => {
                let bits = u32::from(self.ipv6_prefix_len.min(128));
                let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
                IpAddr::V6((u128::from(v6) & mask).into())
            }
        }
    }

    /// Takes a place for a subscription of `ip`: false when it holds its bound already
    /// (`force`: taken anyway, for a replicated one).
    pub(super) fn take(&self, ip: IpAddr, force: bool) -> bool {
        let key = self.key(ip);
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let held = counts.entry(key).or_insert(0);
        if !force && self.per_source > 0 && *held >= self.per_source {
            if *held == 0 {
                counts.remove(&key);
            }
            return false;
        }
        *held += 1;
        true
    }

    /// Takes a place for a subscription of `ip` replicated from the former active, which
    /// admitted it: whatever the bound.
    pub(super) fn take_replicated(&self, ip: IpAddr) {
        self.take(ip, true);
    }

    /// Gives back the place of a subscription of `ip`.
    pub(super) fn release(&self, ip: IpAddr) {
        let key = self.key(ip);
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(held) = counts.get_mut(&key) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                counts.remove(&key);
            }
        }
    }

    /// How many subscriptions `ip`'s source holds.
    #[must_use]
    pub fn held(&self, ip: IpAddr) -> u32 {
        let key = self.key(ip);
        self.counts
            .lock()
            .map(|c| c.get(&key).copied().unwrap_or(0))
            .unwrap_or(0)
    }
}

impl Engine {
    /// A new SUBSCRIBE or REFER to `target`: a subscription dialog, its request sent on a
    /// fresh callee leg (hunting as any new request does).
    #[allow(clippy::too_many_arguments)] // the request and where it goes
    pub(super) fn new_subscription(
        &mut self,
        now: Instant,
        inbound: &Inbound,
        msg: SipMessage,
        translated: Option<SipMessage>,
        key: ServerKey,
        target: Target,
        mf: u32,
    ) {
        let Some(method) = msg.method().cloned() else {
            return;
        };
        let event = match (&method, event_of(&msg)) {
            (Method::Refer, _) => "refer".to_owned(),
            (_, Some(e)) if !e.is_empty() => e.to_owned(),
            _ => {
                // RFC 6665 section 8.2.1: a SUBSCRIBE names its package.
                self.stats.subscriptions_refused += 1;
                self.trace_note("refused 400: SUBSCRIBE without an Event header");
                self.answer_warning(inbound, &msg, 400, "SUBSCRIBE without Event");
                return;
            }
        };
        let router = Arc::clone(&self.cfg.router);
        let routed = translated.as_ref().unwrap_or(&msg);
        let Some(NewLeg {
            plan,
            leg: callee,
            sent,
            agent,
        }) = self.new_request_leg(&router, routed, target, &method, mf)
        else {
            return;
        };
        if !self
            .cfg
            .subscription_sources
            .take(inbound.source.ip(), false)
        {
            self.stats.subscriptions_refused += 1;
            self.stats.subscriptions_source_capped += 1;
            self.trace_note("refused 503: max-subscriptions-per-source reached");
            self.answer(inbound, &msg, 503, Some(("Retry-After", "60".into())));
            return;
        }
        let calls = &self.calls;
        let id = self.ids.call_id(|id| calls.contains_key(&id));
        let caller_tag = self.ids.tag();
        let caller = caller_leg(inbound, &msg, &caller_tag);
        self.stats.routed_new += 1;
        debug!(call_id = %caller.call_id, b_call_id = %callee.call_id, event, "new subscription");
        self.new_server(&key, inbound, &msg, false, Some(caller_tag), Some(id));
        let dialog = Dialog {
            id,
            caller,
            callee,
            state: DialogState::Trying,
            created_unix: self.wall_clock.unix_secs_at(now),
            sdp_origin: [0; 2],
            sdp_version: [(0, 0); 2],
            media: None,
            setup: None,
            subscription: Some(Box::new(Subscription {
                event,
                expires_unix_ms: 0,
                notifies: 0,
            })),
            session_timer: None,
            leg_timers: None,
            accounting: None,
        };
        self.dialogs.insert_call(&dialog);
        self.calls
            .insert(id, Box::new(Call::inviting(dialog, key.clone())));
        self.trace_call(id);
        let ckey = self.send_on_leg(
            now,
            id,
            Side::Callee,
            &method,
            1,
            &sent,
            mf,
            Some(key.clone()),
        );
        if let Some(call) = self.calls.get_mut(&id) {
            call.invite_sent(ckey.clone());
        }
        if let (Some(ckey), Some((index, agent))) = (&ckey, agent) {
            self.start_attempt(now, ckey, agent, router.handle(index));
        }
        self.start_hunt(&key, plan, routed, mf);
    }

    /// The notifier's final answer to the subscription's initial request (`ckey`, on the
    /// callee leg of `id`): a 2xx confirms the dialog and sets its expiry; anything else ends
    /// it (after any hunting, which the caller of this has done).
    pub(super) fn subscription_answered(
        &mut self,
        now: Instant,
        id: u64,
        code: u16,
        msg: &SipMessage,
    ) {
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        if code >= 300 {
            self.stats.subscriptions_refused += 1;
            self.remove_call(id);
            return;
        }
        let leg = &mut call.dialog.callee;
        if let Some(tag) = msg.to_tag() {
            leg.remote_tag = Some(tag.to_owned());
        }
        if let Some(target) = msg.contact_uri() {
            leg.remote_target = target.to_owned();
        }
        if call.dialog.state != DialogState::Confirmed {
            // A NOTIFY that came first set the route set already (RFC 6665 section 4.1.2.4).
            leg.route_set = route_set_of_answer(msg);
        }
        call.establish();
        self.stats.subscriptions_accepted += 1;
        let expires = expires_of(msg).unwrap_or(DEFAULT_EXPIRES);
        self.set_subscription_expiry(now, id, expires);
        self.replicate(id);
    }

    /// A 2xx to a refreshing SUBSCRIBE (or its `Expires: 0`): the subscription's new expiry.
    pub(super) fn subscription_refreshed(&mut self, now: Instant, id: u64, msg: &SipMessage) {
        let expires = expires_of(msg).unwrap_or(DEFAULT_EXPIRES);
        self.set_subscription_expiry(now, id, expires);
        self.replicate(id);
    }

    /// Subscription `id`'s expiry (Unix milliseconds), and `now` in Unix milliseconds.
    fn expiry_of(&self, now: Instant, id: u64) -> Option<(u64, u64)> {
        let expires_ms = self
            .calls
            .get(&id)?
            .dialog
            .subscription
            .as_ref()?
            .expires_unix_ms;
        Some((expires_ms, self.wall_clock.unix_micros_at(now) / 1000))
    }

    /// Arms the expiry timer of a subscription replicated from the former active.
    pub(super) fn arm_replicated_subscription(&mut self, now: Instant, id: u64) {
        let Some((expires_ms, unix_ms)) = self.expiry_of(now, id) else {
            return;
        };
        let left = Duration::from_millis(expires_ms.saturating_sub(unix_ms));
        self.timers
            .push(now + left + EXPIRY_GRACE, TimerTarget::Subscription(id));
    }

    /// Sets subscription `id` to expire `expires` seconds from `now` (at most
    /// [`MAX_EXPIRES`]), and arms its timer at that plus [`EXPIRY_GRACE`].
    fn set_subscription_expiry(&mut self, now: Instant, id: u64, expires: u32) {
        let unix_ms = self.wall_clock.unix_micros_at(now) / 1000;
        let Some(sub) = self
            .calls
            .get_mut(&id)
            .and_then(|c| c.dialog.subscription.as_mut())
        else {
            return;
        };
        let expires = expires.min(MAX_EXPIRES);
        sub.expires_unix_ms = unix_ms + u64::from(expires) * 1000;
        self.timers.push(
            now + Duration::from_secs(u64::from(expires)) + EXPIRY_GRACE,
            TimerTarget::Subscription(id),
        );
    }

    /// Subscription `id`'s timer fired: released if it expired (past its grace) without a
    /// refresh (a refresh armed a later timer, and this one is then ignored).
    pub(super) fn subscription_timeout(&mut self, now: Instant, id: u64) {
        let Some((expires_ms, unix_ms)) = self.expiry_of(now, id) else {
            return;
        };
        let grace_ms = u64::try_from(EXPIRY_GRACE.as_millis()).unwrap_or(u64::MAX);
        if expires_ms.saturating_add(grace_ms) > unix_ms + 1000 {
            // Refreshed since this timer was armed: the refresh armed its own.
            return;
        }
        self.stats.subscriptions_expired += 1;
        self.trace_call(id);
        self.trace_note("subscription expired without a refresh: released");
        self.remove_call(id);
    }

    /// A request in subscription `id` from `side` (before it is relayed): a NOTIFY that came
    /// before the 2xx makes the callee's side of the dialog (RFC 6665 section 4.1.2.4); one
    /// with `Subscription-State: terminated` marks its end, which comes with its answer.
    pub(super) fn subscription_request(&mut self, id: u64, side: Side, msg: &SipMessage) {
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        let Some(sub) = call.dialog.subscription.as_mut() else {
            return;
        };
        if msg.method() != Some(&Method::Notify) {
            return;
        }
        sub.notifies = sub.notifies.saturating_add(1);
        if side == Side::Callee && call.dialog.callee.remote_tag.is_none() {
            let leg = &mut call.dialog.callee;
            leg.remote_tag = msg.from_tag().map(str::to_owned);
            leg.route_set = msg
                .header_values(&HeaderName::RecordRoute)
                .map(str::to_owned)
                .collect();
        }
        if is_terminating_notify(msg) {
            call.dialog.state = DialogState::Terminating;
        }
    }

    /// The answer to a request in subscription `id`: it ends after its terminating NOTIFY is
    /// answered, or when a request in it gets 481 or 408 (the other end forgot it).
    pub(super) fn subscription_request_answered(
        &mut self,
        now: Instant,
        id: u64,
        method: &Method,
        code: u16,
        msg: &SipMessage,
    ) {
        let Some(call) = self.calls.get(&id) else {
            return;
        };
        if call.dialog.subscription.is_none() || code < 200 {
            return;
        }
        let terminated = *method == Method::Notify && call.dialog.state == DialogState::Terminating;
        if terminated || matches!(code, 408 | 481) {
            self.stats.subscriptions_ended += 1;
            self.remove_call(id);
        } else if *method == Method::Subscribe && (200..300).contains(&code) {
            self.subscription_refreshed(now, id, msg);
        }
    }

    /// Subscriptions held (accepted or not yet), apart from calls.
    #[must_use]
    pub fn subscription_count(&self) -> usize {
        self.calls
            .values()
            .filter(|c| c.dialog.subscription.is_some())
            .count()
    }
}
