//! The registration cache, sans IO (Oracle's `registration-caching`; RFC 3261 section 10):
//! what to do with a phone's REGISTER ([`RegistrationCache::on_register`]: forward it to the
//! registrar, answer it from the cache, or refuse it), what the registrar's answer changes
//! ([`RegistrationCache::on_registrar_answer`]: only a 2xx creates, refreshes or removes a
//! binding, never a REGISTER alone), where a request for one of our Contacts goes
//! ([`RegistrationCache::binding_for_token`]), and when bindings expire
//! ([`RegistrationCache::purge_expired`]).
//!
//! A binding is one phone Contact of one AoR, reached over one flow (the interface, the
//! transport, the source address and port, the connection). Toward the registrar it is named
//! by a Contact of ours whose user part is the binding's token (chosen by the caller, from
//! its RNG), so that several phones of one AoR each get their own Contact and the registrar
//! forks to them as it would.
//!
//! The refresh rule: a phone's re-REGISTER on the same flow, with the same Call-ID, a higher
//! CSeq and the same Contacts, is answered from the cache until the registrar's binding is
//! `registration-interval` old (less half the phone's interval, so the phone refresh nearest
//! it goes) and while it outlives the binding the phone is given; anything else is forwarded.
//! The registrar is asked for `registration-interval` plus the phone's own interval, so a
//! phone binding never outlives the registrar's, and the registrar sees one refresh per
//! `registration-interval` however often the phone refreshes (a phone behind NAT is told to
//! refresh every `nat-interval`, to keep its pinhole open).
//!
//! Time is passed in; nothing here reads a clock.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::sip::dialog::LegTransport;

/// Where a phone's messages come from, and so where requests for it go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flow {
    /// The interface (index) the REGISTER arrived on.
    pub interface: usize,
    /// Its transport.
    pub transport: LegTransport,
    /// Its source address and port (the NAT's, for a phone behind one).
    pub source: SocketAddr,
    /// The TCP/TLS connection it came over (`None` over UDP).
    pub connection: Option<u64>,
}

/// One Contact of a REGISTER, as the cache needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactRequest {
    /// The Contact URI, as the phone wrote it.
    pub uri: String,
    /// Its `expires` parameter, if any.
    pub expires: Option<u32>,
}

/// A phone's REGISTER, as the cache needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterRequest {
    /// The address of record (the To URI, normalised by the caller).
    pub aor: String,
    /// Its Call-ID.
    pub call_id: String,
    /// Its CSeq number.
    pub cseq: u32,
    /// Its Contacts (none: a query for the bindings).
    pub contacts: Vec<ContactRequest>,
    /// `Contact: *` (with `Expires: 0`: remove every binding of the AoR).
    pub star: bool,
    /// The `Expires` header, if any.
    pub expires: Option<u32>,
    /// Whether the source is behind a NAT (its Via or Contact does not name where it sends
    /// from; decided by the caller's `nat-traversal` setting).
    pub behind_nat: bool,
}

impl RegisterRequest {
    /// The expiry a Contact asks for: its own parameter, else the `Expires` header, else
    /// RFC 3261's default of an hour.
    fn requested(&self, c: &ContactRequest) -> u32 {
        c.expires.or(self.expires).unwrap_or(DEFAULT_EXPIRES)
    }

    /// Whether it removes bindings only (`*`, or every Contact with expiry 0).
    fn is_removal(&self) -> bool {
        self.star
            || (!self.contacts.is_empty() && self.contacts.iter().all(|c| self.requested(c) == 0))
    }
}

/// RFC 3261 section 10.2.1.1: a Contact without expiry asks for an hour.
pub const DEFAULT_EXPIRES: u32 = 3600;

/// The cache's settings (`sip-interface` and `sip-config` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSettings {
    /// `registration-interval`: how often the registrar sees a refresh of each binding (it
    /// is asked this plus the phone's own interval).
    pub registration_interval: Duration,
    /// `min-reg-expire`: the shortest expiry a phone not behind NAT is given.
    pub min_reg_expire: Duration,
    /// `nat-interval`: the expiry a phone behind NAT is given (its own refreshes keep its
    /// pinhole open).
    pub nat_interval: Duration,
    /// `reg-cache-limit`: bindings at most; 0 = no limit of the operator's (the hard cap,
    /// [`MAX_BINDINGS`], still holds).
    pub max_bindings: usize,
}

/// What to do with a REGISTER.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterDecision {
    /// Forward it to the registrar with these Contacts of ours (token, the phone Contact it
    /// stands for, the expiry to ask) and remember it under `pending` until the answer.
    Forward {
        /// The key of [`RegistrationCache::on_registrar_answer`].
        pending: u64,
        /// Our Contacts toward the registrar.
        contacts: Vec<OurContact>,
    },
    /// Answer 200 from the cache with these bindings of the AoR (the phone's Contacts and
    /// the expiry each must refresh at).
    Answer(Vec<(String, u32)>),
    /// Refuse with this status (503: the cache is full).
    Refuse(u16),
}

/// One Contact of ours in a forwarded REGISTER.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OurContact {
    /// The token that names the binding (our Contact's user part).
    pub token: u64,
    /// The phone's Contact it stands for.
    pub phone_contact: String,
    /// The expiry asked of the registrar (0: remove).
    pub expires: u32,
}

/// One binding: a phone Contact of an AoR over one flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The token of our Contact toward the registrar.
    pub token: u64,
    /// The address of record.
    pub aor: String,
    /// The phone's Contact.
    pub phone_contact: String,
    /// Where the phone is reached.
    pub flow: Flow,
    /// The Call-ID and CSeq of the phone's last REGISTER that the cache saw.
    pub call_id: String,
    /// Its CSeq.
    pub cseq: u32,
    /// When the phone's registration expires (what it was told, from its last refresh).
    pub phone_expires_at: Instant,
    /// The expiry the phone was told, in seconds.
    pub phone_expires: u32,
    /// When the registrar's binding expires.
    pub registrar_expires_at: Instant,
    /// The expiry the registrar granted, in seconds.
    pub registrar_expires: u32,
    /// When the phone last refreshed.
    pub refreshed_at: Instant,
}

impl Binding {
    /// Whether a phone refresh at `now`, to be granted `phone` seconds, goes to the
    /// registrar: its binding would end before the phone's, or it was last refreshed at
    /// least `interval` (`registration-interval`) less half the phone's interval ago (so the
    /// phone refresh nearest `registration-interval` is the one forwarded).
    fn registrar_refresh_due(&self, now: Instant, phone: u32, interval: Duration) -> bool {
        let phone = Duration::from_secs(u64::from(phone));
        let refreshed_at = self
            .registrar_expires_at
            .checked_sub(Duration::from_secs(u64::from(self.registrar_expires)))
            .unwrap_or(self.registrar_expires_at);
        now + phone > self.registrar_expires_at || now + phone / 2 >= refreshed_at + interval
    }
}

/// A REGISTER forwarded and not answered yet.
#[derive(Debug, Clone)]
struct Pending {
    request: RegisterRequest,
    flow: Flow,
    contacts: Vec<OurContact>,
}

/// What an answer of the registrar changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerOutcome {
    /// A 2xx: relay it to the phone with these Contacts (the phone's, with the expiry it
    /// must refresh at).
    Registered(Vec<(String, u32)>),
    /// A 2xx to a removal: the bindings are gone; relay it.
    Removed,
    /// Anything else (a challenge, an error): relay it; nothing changed.
    Unchanged,
    /// No REGISTER of ours waits for this answer.
    Unknown,
}

/// Counters for `show registrations` and `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheCounters {
    /// REGISTERs answered from the cache.
    pub absorbed: u64,
    /// REGISTERs forwarded to the registrar.
    pub forwarded: u64,
    /// Bindings the registrar's 2xx created.
    pub created: u64,
    /// Bindings removed by a de-registration the registrar accepted.
    pub removed: u64,
    /// Bindings that expired (purged on the timer).
    pub expired: u64,
    /// REGISTERs refused because the cache was full.
    pub refused_full: u64,
    /// STUN keep-alives of registered phones answered.
    pub keepalives_answered: u64,
    /// STUN messages not answered: from a source with no binding, or not a binding request.
    pub keepalives_ignored: u64,
}

/// Forwarded REGISTERs waiting at most (a registrar that never answers cannot grow this).
pub const MAX_PENDING: usize = 4096;

/// Bindings at most whatever `reg-cache-limit` says (0, Oracle's default, means this): a
/// registrar that accepts anyone cannot make a stranger grow the cache without bound.
pub const MAX_BINDINGS: usize = 1_000_000;

/// The bindings of every AoR, indexed by token.
#[derive(Debug, Clone)]
pub struct RegistrationCache {
    settings: CacheSettings,
    /// Timings of interfaces that have their own (`sip-interface` keys), by index.
    interface_settings: HashMap<usize, CacheSettings>,
    bindings: HashMap<u64, Binding>,
    /// Bindings per source address (`allow-anonymous registered`).
    sources: HashMap<SocketAddr, u32>,
    /// Tokens whose binding changed since [`RegistrationCache::take_changes`], when changes
    /// are tracked (for the standby).
    changed: Option<HashSet<u64>>,
    /// Tokens by (AoR, phone Contact).
    by_contact: HashMap<(String, String), u64>,
    pending: HashMap<u64, Pending>,
    next_pending: u64,
    counters: CacheCounters,
}

impl RegistrationCache {
    /// An empty cache with `settings`.
    #[must_use]
    pub fn new(settings: CacheSettings) -> Self {
        Self {
            settings,
            interface_settings: HashMap::new(),
            bindings: HashMap::new(),
            sources: HashMap::new(),
            changed: None,
            by_contact: HashMap::new(),
            pending: HashMap::new(),
            next_pending: 1,
            counters: CacheCounters::default(),
        }
    }

    /// Replaces the node-wide settings (`reg-cache-limit` and the default timings); bindings
    /// are kept, also beyond a lowered limit (new ones are refused until below it).
    pub fn set_settings(&mut self, settings: CacheSettings) {
        self.settings = settings;
    }

    /// Interface `interface` gives phones these timings (its `min-reg-expire`,
    /// `registration-interval`, `nat-interval`); `max_bindings` stays the cache's.
    pub fn set_interface_settings(&mut self, interface: usize, settings: CacheSettings) {
        self.interface_settings.insert(interface, settings);
    }

    fn settings_for(&self, interface: usize) -> CacheSettings {
        self.interface_settings
            .get(&interface)
            .copied()
            .unwrap_or(self.settings)
    }

    /// Starts recording which bindings change, for [`RegistrationCache::take_changes`] (a
    /// node of a pair replicates them); off by default, so that nothing accumulates on a
    /// node nobody drains.
    pub fn track_changes(&mut self) {
        if self.changed.is_none() {
            self.changed = Some(HashSet::new());
        }
    }

    /// The bindings changed since the last call, each once (refreshes coalesced): the
    /// binding as it is now, or `None` for one removed.
    pub fn take_changes(&mut self) -> Vec<(u64, Option<Binding>)> {
        let Some(changed) = self.changed.as_mut() else {
            return Vec::new();
        };
        let tokens: Vec<u64> = changed.drain().collect();
        tokens
            .into_iter()
            .map(|t| (t, self.bindings.get(&t).cloned()))
            .collect()
    }

    fn mark(&mut self, token: u64) {
        if let Some(changed) = self.changed.as_mut() {
            changed.insert(token);
        }
    }

    /// Whether `source` has a binding (its phone registered through us).
    #[must_use]
    pub fn is_registered_source(&self, source: SocketAddr) -> bool {
        self.sources.contains_key(&source)
    }

    /// Every binding, by token.
    pub fn bindings(&self) -> impl Iterator<Item = &Binding> {
        self.bindings.values()
    }

    /// Installs a binding replicated from the active (or replaces the one of its token).
    pub fn install(&mut self, binding: Binding) {
        self.insert_binding(binding);
    }

    /// Forgets every binding and pending REGISTER (a new active installs the replicated
    /// ones instead); the counters stay.
    pub fn clear(&mut self) {
        self.bindings.clear();
        self.by_contact.clear();
        self.sources.clear();
        self.pending.clear();
        if let Some(changed) = self.changed.as_mut() {
            changed.clear();
        }
    }

    /// Removes the binding of `token` (its removal replicated from the active).
    pub fn uninstall(&mut self, token: u64) -> Option<Binding> {
        self.remove(token)
    }

    fn insert_binding(&mut self, binding: Binding) -> bool {
        let token = binding.token;
        *self.sources.entry(binding.flow.source).or_default() += 1;
        self.by_contact
            .insert((binding.aor.clone(), binding.phone_contact.clone()), token);
        let old = self.bindings.insert(token, binding);
        if let Some(old) = &old {
            self.forget_source(old.flow.source);
        }
        self.mark(token);
        old.is_none()
    }

    fn forget_source(&mut self, source: SocketAddr) {
        if let Some(n) = self.sources.get_mut(&source) {
            *n -= 1;
            if *n == 0 {
                self.sources.remove(&source);
            }
        }
    }

    /// Counts a STUN keep-alive: answered, or ignored.
    pub fn count_keepalive(&mut self, answered: bool) {
        if answered {
            self.counters.keepalives_answered += 1;
        } else {
            self.counters.keepalives_ignored += 1;
        }
    }

    /// `reg-cache-limit` (0: none).
    #[must_use]
    pub const fn limit(&self) -> usize {
        self.settings.max_bindings
    }

    /// The counters.
    #[must_use]
    pub const fn counters(&self) -> CacheCounters {
        self.counters
    }

    /// Bindings held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.bindings.len()
    }

    /// Whether no binding is held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty()
    }

    /// The binding our Contact with user part `token` names.
    #[must_use]
    pub fn binding_for_token(&self, token: u64) -> Option<&Binding> {
        self.bindings.get(&token)
    }

    /// The bindings of `aor`.
    #[must_use]
    pub fn bindings_of(&self, aor: &str) -> Vec<&Binding> {
        let mut out: Vec<&Binding> = self.bindings.values().filter(|b| b.aor == aor).collect();
        out.sort_by_key(|b| b.token);
        out
    }

    /// A phone's REGISTER arriving over `flow` at `now`; `new_token` draws a fresh token (the
    /// caller's RNG) for a Contact the cache does not know yet.
    pub fn on_register(
        &mut self,
        now: Instant,
        flow: Flow,
        request: RegisterRequest,
        new_token: &mut dyn FnMut() -> u64,
    ) -> RegisterDecision {
        if let Some(answer) = self.absorb(now, &flow, &request) {
            self.counters.absorbed += 1;
            return RegisterDecision::Answer(answer);
        }
        if self.pending.len() >= MAX_PENDING {
            self.counters.refused_full += 1;
            return RegisterDecision::Refuse(503);
        }
        let removal = request.is_removal();
        let contacts: Vec<OurContact> = if request.star {
            self.bindings_of(&request.aor)
                .into_iter()
                .map(|b| OurContact {
                    token: b.token,
                    phone_contact: b.phone_contact.clone(),
                    expires: 0,
                })
                .collect()
        } else {
            let mut fresh = 0usize;
            let contacts: Vec<OurContact> = request
                .contacts
                .iter()
                .map(|c| {
                    let known = self.by_contact.get(&(request.aor.clone(), c.uri.clone()));
                    let token = known.copied().unwrap_or_else(|| {
                        fresh += 1;
                        self.unused_token(new_token)
                    });
                    let asked = request.requested(c);
                    OurContact {
                        token,
                        phone_contact: c.uri.clone(),
                        expires: if asked == 0 {
                            0
                        } else {
                            self.registrar_expiry(flow.interface, asked, request.behind_nat)
                        },
                    }
                })
                .collect();
            let limit = match self.settings.max_bindings {
                0 => MAX_BINDINGS,
                n => n.min(MAX_BINDINGS),
            };
            if !removal && self.bindings.len() + fresh > limit {
                self.counters.refused_full += 1;
                return RegisterDecision::Refuse(503);
            }
            contacts
        };
        let pending = self.next_pending;
        self.next_pending = self.next_pending.wrapping_add(1).max(1);
        self.pending.insert(
            pending,
            Pending {
                request,
                flow,
                contacts: contacts.clone(),
            },
        );
        self.counters.forwarded += 1;
        RegisterDecision::Forward { pending, contacts }
    }

    /// The answer to a refresh the cache can give by itself, if it can: the same flow,
    /// Call-ID and Contacts, a higher CSeq, the registrar's binding outliving the phone's.
    fn absorb(
        &mut self,
        now: Instant,
        flow: &Flow,
        request: &RegisterRequest,
    ) -> Option<Vec<(String, u32)>> {
        if request.star || request.contacts.is_empty() || request.is_removal() {
            return None;
        }
        let tokens: Vec<u64> = request
            .contacts
            .iter()
            .map(|c| {
                self.by_contact
                    .get(&(request.aor.clone(), c.uri.clone()))
                    .copied()
            })
            .collect::<Option<Vec<u64>>>()?;
        let interval = self.settings_for(flow.interface).registration_interval;
        let all_match = tokens.iter().zip(&request.contacts).all(|(t, c)| {
            let phone = self.phone_expiry(flow.interface, request.requested(c), request.behind_nat);
            self.bindings.get(t).is_some_and(|b| {
                b.flow == *flow
                    && b.call_id == request.call_id
                    && request.cseq > b.cseq
                    && !b.registrar_refresh_due(now, phone, interval)
                    && b.phone_expires_at > now
            })
        });
        if !all_match {
            return None;
        }
        let mut answer = Vec::with_capacity(tokens.len());
        for (token, c) in tokens.iter().zip(&request.contacts) {
            let expires =
                self.phone_expiry(flow.interface, request.requested(c), request.behind_nat);
            self.mark(*token);
            if let Some(b) = self.bindings.get_mut(token) {
                // Never beyond what the registrar still holds.
                let left = secs(b.registrar_expires_at.saturating_duration_since(now));
                let expires = expires.min(left.max(1));
                b.cseq = request.cseq;
                b.refreshed_at = now;
                b.phone_expires = expires;
                b.phone_expires_at = now + Duration::from_secs(u64::from(expires));
                answer.push((b.phone_contact.clone(), expires));
            }
        }
        Some(answer)
    }

    /// The registrar answered the REGISTER forwarded as `pending` with `code`, granting each
    /// of our Contacts (by token) the expiry listed (a 2xx's Contacts; one of ours missing
    /// from a 2xx is not bound there).
    pub fn on_registrar_answer(
        &mut self,
        now: Instant,
        pending: u64,
        code: u16,
        granted: &[(u64, u32)],
    ) -> AnswerOutcome {
        if (100..200).contains(&code) {
            return if self.pending.contains_key(&pending) {
                AnswerOutcome::Unchanged
            } else {
                AnswerOutcome::Unknown
            };
        }
        let Some(p) = self.pending.remove(&pending) else {
            return AnswerOutcome::Unknown;
        };
        if !(200..300).contains(&code) {
            return AnswerOutcome::Unchanged;
        }
        if p.request.is_removal() {
            for c in &p.contacts {
                if self.remove(c.token).is_some() {
                    self.counters.removed += 1;
                }
            }
            return AnswerOutcome::Removed;
        }
        let mut answer = Vec::new();
        for c in &p.contacts {
            let granted = granted.iter().find(|(t, _)| *t == c.token).map(|(_, e)| *e);
            let asked = p
                .request
                .contacts
                .iter()
                .find(|r| r.uri == c.phone_contact)
                .map_or(DEFAULT_EXPIRES, |r| p.request.requested(r));
            match granted {
                Some(registrar) if registrar > 0 && c.expires > 0 => {
                    let phone = self
                        .phone_expiry(p.flow.interface, asked, p.request.behind_nat)
                        .min(registrar);
                    let binding = Binding {
                        token: c.token,
                        aor: p.request.aor.clone(),
                        phone_contact: c.phone_contact.clone(),
                        flow: p.flow,
                        call_id: p.request.call_id.clone(),
                        cseq: p.request.cseq,
                        phone_expires_at: now + Duration::from_secs(u64::from(phone)),
                        phone_expires: phone,
                        registrar_expires_at: now + Duration::from_secs(u64::from(registrar)),
                        registrar_expires: registrar,
                        refreshed_at: now,
                    };
                    if self.insert_binding(binding) {
                        self.counters.created += 1;
                    }
                    answer.push((c.phone_contact.clone(), phone));
                }
                // Removed by the phone, or not listed by the registrar: not bound there.
                _ => {
                    if self.remove(c.token).is_some() {
                        self.counters.removed += 1;
                    }
                }
            }
        }
        AnswerOutcome::Registered(answer)
    }

    /// The forwarded REGISTER `pending` got no answer (its transaction timed out): forgotten.
    pub fn on_registrar_timeout(&mut self, pending: u64) {
        self.pending.remove(&pending);
    }

    /// Removes the bindings whose phone registration expired by `now` (the phone stopped
    /// refreshing); returns them.
    pub fn purge_expired(&mut self, now: Instant) -> Vec<Binding> {
        let gone: Vec<u64> = self
            .bindings
            .values()
            .filter(|b| b.phone_expires_at <= now)
            .map(|b| b.token)
            .collect();
        let out: Vec<Binding> = gone.into_iter().filter_map(|t| self.remove(t)).collect();
        self.counters.expired += out.len() as u64;
        out
    }

    /// When the next binding expires, for the caller's timer.
    #[must_use]
    pub fn next_expiry(&self) -> Option<Instant> {
        self.bindings.values().map(|b| b.phone_expires_at).min()
    }

    /// Removes every binding of `aor` (`clear-registration`); returns how many.
    pub fn clear_aor(&mut self, aor: &str) -> usize {
        let tokens: Vec<u64> = self
            .bindings
            .values()
            .filter(|b| b.aor == aor)
            .map(|b| b.token)
            .collect();
        tokens.into_iter().filter_map(|t| self.remove(t)).count()
    }

    fn remove(&mut self, token: u64) -> Option<Binding> {
        let b = self.bindings.remove(&token)?;
        self.by_contact
            .remove(&(b.aor.clone(), b.phone_contact.clone()));
        self.forget_source(b.flow.source);
        self.mark(token);
        Some(b)
    }

    /// The expiry a phone is told: `nat-interval` behind a NAT, else what it asked, at least
    /// `min-reg-expire` (the settings of the interface it registered on).
    fn phone_expiry(&self, interface: usize, asked: u32, behind_nat: bool) -> u32 {
        let settings = self.settings_for(interface);
        if behind_nat {
            secs(settings.nat_interval).min(asked.max(1))
        } else {
            asked.max(secs(settings.min_reg_expire))
        }
    }

    /// The expiry asked of the registrar for a phone Contact: `registration-interval` plus
    /// what the phone is told, so that the registrar's binding outlives every phone binding
    /// given until the next forwarded refresh, one `registration-interval` later.
    fn registrar_expiry(&self, interface: usize, asked: u32, behind_nat: bool) -> u32 {
        let interval = secs(self.settings_for(interface).registration_interval);
        interval.saturating_add(self.phone_expiry(interface, asked, behind_nat))
    }

    /// A token no binding or pending REGISTER uses (0 is never one): a draw of `new_token`,
    /// or after 64 unlucky draws the next after the largest in use.
    fn unused_token(&self, new_token: &mut dyn FnMut() -> u64) -> u64 {
        let used = |t: u64| {
            t == 0
                || self.bindings.contains_key(&t)
                || self
                    .pending
                    .values()
                    .any(|p| p.contacts.iter().any(|c| c.token == t))
        };
        for _ in 0..64 {
            let t = new_token();
            if !used(t) {
                return t;
            }
        }
        let largest = self
            .bindings
            .keys()
            .copied()
            .chain(
                self.pending
                    .values()
                    .flat_map(|p| p.contacts.iter().map(|c| c.token)),
            )
            .max()
            .unwrap_or(0);
        largest.wrapping_add(1).max(1)
    }
}

fn secs(d: Duration) -> u32 {
    u32::try_from(d.as_secs()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;
