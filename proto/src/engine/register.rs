//! Phones registered through the SBC (`registration-caching`, hosted NAT traversal): a
//! phone's REGISTER decided by the node's registration cache (forwarded to the registrar with
//! our Contacts, answered from the cache, refused), the registrar's answer relayed with the
//! phone's own Contacts, a request for one of our Contacts sent to the phone over its flow,
//! and the realm's `allow-anonymous`.
//!
//! ```text
//!  phone ─REGISTER Contact: <sip:alice@10.0.0.7>──▶ SBC ─REGISTER Contact: <sip:r-<token>@core>──▶ registrar
//!        ◀─200 Contact: <sip:alice@10.0.0.7>;expires=30── ◀─200 Contact: <sip:r-<token>@core>;expires=3600──
//!  phone ◀─INVITE sip:alice@10.0.0.7 (to the NAT's address)── SBC ◀─INVITE sip:r-<token>@core── registrar
//! ```
//! The cache is node-wide (a phone's REGISTER and the calls to it hash to different shards),
//! behind a lock held for microseconds, like the agents' board.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::transactions::ServerKey;
use super::transmit::Inbound;
use super::{lock, Engine};
use crate::registration::cache::{
    AnswerOutcome, Binding, Flow, OurContact, RegisterDecision, RegistrationCache,
};
use crate::registration::message::{
    behind_nat, granted, our_contact, register_request, token_of, NatTraversal,
};
use crate::shard;
use crate::sip::dialog::Leg;
use crate::sip::message::{Header, HeaderName, SipMessage};

/// The node's registration cache, shared by every engine.
pub type SharedRegistrations = Arc<Mutex<RegistrationCache>>;

/// Who may place new requests arriving in a realm (`realm-config allow-anonymous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllowAnonymous {
    /// Anyone.
    #[default]
    All,
    /// Session-agents only.
    AgentsOnly,
    /// Session-agents and sources with a binding in the registration cache.
    Registered,
}

/// What an interface does with phones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InterfaceRegistration {
    /// `registration-caching`.
    pub caching: bool,
    /// `nat-traversal`.
    pub nat: NatTraversal,
    /// Its realm's `allow-anonymous`.
    pub allow_anonymous: AllowAnonymous,
}

/// Registrations as the engine sees them.
#[derive(Debug, Clone, Default)]
pub struct Registrations {
    /// The node's cache (`None`: no interface caches registrations).
    pub cache: Option<SharedRegistrations>,
    /// Each interface's settings, by index (missing: the defaults).
    pub interfaces: Vec<InterfaceRegistration>,
}

/// A REGISTER forwarded to the registrar, until its final answer.
#[derive(Debug, Clone)]
pub(super) struct Registering {
    /// The cache's key for the answer.
    pending: u64,
    /// Our Contacts in it.
    contacts: Vec<OurContact>,
    /// Its Call-ID toward the registrar: the same for every REGISTER of one phone's
    /// registration (RFC 3261 section 10.2: one Call-ID per registration), so the registrar
    /// sees one client.
    call_id: String,
    /// Its CSeq: the phone's, which grows as RFC 3261 asks.
    cseq: u32,
}

impl Engine {
    fn interface_registration(&self, interface: usize) -> InterfaceRegistration {
        self.cfg
            .registration
            .interfaces
            .get(interface)
            .copied()
            .unwrap_or_default()
    }

    /// Whether the realm's `allow-anonymous` refuses a new request from this source.
    pub(super) fn anonymous_refused(&self, inbound: &Inbound) -> bool {
        let policy = self
            .interface_registration(inbound.interface)
            .allow_anonymous;
        if policy == AllowAnonymous::All {
            return false;
        }
        let ip = inbound.source.ip();
        if self.cfg.agents.iter().any(|a| a.ip() == ip) {
            return false;
        }
        match policy {
            AllowAnonymous::All => false,
            AllowAnonymous::AgentsOnly => true,
            AllowAnonymous::Registered => !self
                .cfg
                .registration
                .cache
                .as_ref()
                .is_some_and(|c| lock(c).is_registered_source(inbound.source)),
        }
    }

    /// A REGISTER on an interface that caches registrations: answered from the cache,
    /// refused, or forwarded; false when the interface does not cache (relayed as any
    /// request).
    pub(super) fn cached_register(
        &mut self,
        now: Instant,
        inbound: &Inbound,
        msg: &SipMessage,
        key: &ServerKey,
        mf: u32,
    ) -> bool {
        let settings = self.interface_registration(inbound.interface);
        let Some(cache) = self
            .cfg
            .registration
            .cache
            .clone()
            .filter(|_| settings.caching)
        else {
            return false;
        };
        let nat = behind_nat(msg, inbound.source, settings.nat);
        let Some(request) = register_request(msg, nat) else {
            self.stats.malformed_answered += 1;
            self.trace_note("refused 400: a REGISTER without an address of record");
            self.answer_warning(inbound, msg, 400, "no address of record");
            return true;
        };
        let (phone_call_id, cseq) = (request.call_id.clone(), request.cseq);
        let flow = Flow {
            interface: inbound.interface,
            transport: inbound.transport,
            source: inbound.source,
            connection: None,
        };
        let decision = {
            let ids = &mut self.ids;
            lock(&cache).on_register(now, flow, request, &mut || ids.token_value())
        };
        match decision {
            RegisterDecision::Answer(bindings) => {
                self.trace_note("answered 200 from the registration cache (a refresh)");
                let tag = self.ids.tag();
                self.new_server(key, inbound, msg, false, Some(tag), None);
                let contacts: Vec<(&str, String)> = bindings
                    .iter()
                    .map(|(uri, expires)| ("Contact", format!("<{uri}>;expires={expires}")))
                    .collect();
                self.respond_local_headers(now, key, 200, &contacts);
            }
            RegisterDecision::Refuse(code) => {
                self.trace_note("refused 503: the registration cache is full (reg-cache-limit)");
                self.answer(inbound, msg, code, Some(("Retry-After", "30".into())));
            }
            RegisterDecision::Forward { pending, contacts } => {
                let shard_key = shard::call_id_key(phone_call_id.as_bytes());
                let stream =
                    shard::call_id_key(format!("{phone_call_id}|{}", inbound.source).as_bytes());
                self.registering.insert(
                    key.clone(),
                    Registering {
                        pending,
                        contacts,
                        call_id: shard::b2b_call_id(shard_key, stream),
                        cseq,
                    },
                );
                if !self.route_new(now, inbound, msg.clone(), None, key.clone(), mf) {
                    self.forget_register(key);
                }
            }
        }
        true
    }

    /// What a REGISTER forwarded on server transaction `key` carries on `leg`: our Contacts
    /// (at the address of the interface it leaves by) instead of the phone's, no `Expires`
    /// header, and the registration's Call-ID and CSeq; anything else as it is, CSeq 1.
    pub(super) fn register_view(
        &self,
        key: &ServerKey,
        leg: &mut Leg,
        msg: SipMessage,
    ) -> (SipMessage, u32) {
        let Some(reg) = self.registering.get(key) else {
            return (msg, 1);
        };
        let addr = self.cfg.interfaces[leg.interface].addr_for(leg.transport);
        let mut msg = msg;
        msg.headers.retain(|h| !is_contact_or_expires(h));
        for c in &reg.contacts {
            msg.headers.push(Header {
                name: HeaderName::Other("Contact".into()),
                value: our_contact(c.token, addr, leg.transport, c.expires),
            });
        }
        leg.call_id.clone_from(&reg.call_id);
        (msg, reg.cseq.max(1))
    }

    /// The registrar's final answer `code` to the REGISTER forwarded on `skey`: what the
    /// phone is sent instead of `msg` (the phone's own Contacts with the expiry it must
    /// refresh at; a challenge or an error as it is).
    pub(super) fn registrar_answered(
        &mut self,
        now: Instant,
        skey: &ServerKey,
        code: u16,
        msg: &SipMessage,
    ) -> Option<SipMessage> {
        let reg = self.registering.remove(skey)?;
        let cache = self.cfg.registration.cache.clone()?;
        let grants = if (200..300).contains(&code) {
            granted(msg, &reg.contacts)
        } else {
            Vec::new()
        };
        let outcome = lock(&cache).on_registrar_answer(now, reg.pending, code, &grants);
        let mut relayed = msg.clone();
        match outcome {
            AnswerOutcome::Registered(bindings) => {
                relayed.headers.retain(|h| !is_contact_or_expires(h));
                for (uri, expires) in bindings {
                    relayed.headers.push(Header {
                        name: HeaderName::Other("Contact".into()),
                        value: format!("<{uri}>;expires={expires}"),
                    });
                }
            }
            AnswerOutcome::Removed => relayed.headers.retain(|h| !is_contact_or_expires(h)),
            AnswerOutcome::Unchanged | AnswerOutcome::Unknown => {}
        }
        Some(relayed)
    }

    /// Forgets the REGISTER forwarded on `key` (its transaction ended without an answer the
    /// cache saw).
    pub(super) fn forget_register(&mut self, key: &ServerKey) {
        if let Some(reg) = self.registering.remove(key) {
            if let Some(cache) = &self.cfg.registration.cache {
                lock(cache).on_registrar_timeout(reg.pending);
            }
        }
    }

    /// A new request whose Request-URI is one of our registration Contacts goes to the
    /// phone over its flow (480 when its binding is gone); false for any other request.
    pub(super) fn request_for_phone(
        &mut self,
        now: Instant,
        inbound: &Inbound,
        msg: &SipMessage,
        key: &ServerKey,
        mf: u32,
    ) -> bool {
        let Some(cache) = &self.cfg.registration.cache else {
            return false;
        };
        let Some(token) = msg.request_uri().and_then(token_of) else {
            return false;
        };
        let binding = lock(cache).binding_for_token(token).cloned();
        let Some(binding) = binding else {
            self.stats.registered_phone_gone += 1;
            self.trace_note("refused 480: no phone is registered at this Contact any more");
            self.answer(inbound, msg, 480, None);
            return true;
        };
        self.stats.to_registered_phones += 1;
        self.trace_note_with(|| {
            format!(
                "to the phone registered as {} at {}",
                binding.aor, binding.flow.source
            )
        });
        let target = super::request::Target::Phone(binding);
        self.new_request_to(now, inbound, msg.clone(), None, key.clone(), target, mf);
        true
    }

    /// The leg toward a registered phone: its flow (the NAT's address, the connection it
    /// registered over) and its own Contact as the Request-URI.
    pub(super) fn phone_leg(
        &mut self,
        msg: &SipMessage,
        binding: &Binding,
        invite_cseq: u32,
    ) -> Leg {
        let flow = binding.flow;
        let host = crate::sip::message::uri_host(flow.source.ip());
        let mut leg = self.outbound_leg_to(
            msg,
            (flow.interface, flow.transport, flow.source),
            &host,
            invite_cseq,
        );
        leg.remote_target.clone_from(&binding.phone_contact);
        leg
    }
}

/// Whether `h` is a Contact or an Expires header (replaced in a REGISTER and its answer).
fn is_contact_or_expires(h: &Header) -> bool {
    match &h.name {
        HeaderName::Contact => true,
        HeaderName::Other(n) => {
            n.eq_ignore_ascii_case("expires") || n.eq_ignore_ascii_case("contact")
        }
        _ => false,
    }
}
