//! The engine's view of the configuration: interfaces, next hops, limits, and where in-dialog
//! traffic must come from.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::transmit::Inbound;
use crate::routing::router::Router;
use crate::sip::dialog::{Leg, LegTransport};
use crate::sip::message::SipMessage;
use crate::sip::transaction::Timers;

/// A local SIP interface as the engine needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Realm name.
    pub realm: String,
    /// Listening address of UDP and TCP (written in Via and Contact).
    pub addr: SocketAddr,
    /// Listening address of TLS (`tls-port`), when TLS listens here.
    pub tls_addr: Option<SocketAddr>,
}

impl Interface {
    /// The address written in Via and Contact of a leg over `transport`: the TLS listener's
    /// for TLS, else [`Interface::addr`].
    pub fn addr_for(&self, transport: LegTransport) -> SocketAddr {
        match (transport, self.tls_addr) {
            (LegTransport::Tls, Some(tls)) => tls,
            _ => self.addr,
        }
    }

    /// Every sent-by this interface writes in a Via.
    pub(super) fn sent_bys(&self) -> impl Iterator<Item = String> + '_ {
        std::iter::once(self.addr)
            .chain(self.tls_addr)
            .map(|a| a.to_string())
    }
}

pub use crate::routing::router::NextHop;

/// The engine's view of the configuration.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Interfaces, indexed as in [`Inbound::interface`].
    pub interfaces: Vec<Interface>,
    /// Where new requests go: the local-policy table, the agents and their groups.
    pub router: Arc<Router>,
    /// RFC 3261 timers.
    pub timers: Timers,
    /// Timer C: how long an INVITE may ring before it is cancelled with 408.
    pub timer_c: Duration,
    /// Largest message accepted.
    pub max_message_size: usize,
    /// Longest header line accepted (name, colon, value).
    pub max_header_size: usize,
    /// Where in-dialog requests and responses must come from.
    pub source_policy: SourcePolicy,
    /// Calls this engine holds at most (its share of `max-calls`).
    pub max_calls: usize,
    /// Transactions this engine holds at most (its share of `max-transactions`).
    pub max_transactions: usize,
    /// Every session-agent's address (their legs are checked by IP only).
    pub agents: Vec<SocketAddr>,
    /// Media anchoring (`None`: SDP passes unchanged).
    pub media: Option<MediaAnchoring>,
    /// Whether every message received and sent is traced (`Engine::poll_trace`): on while the
    /// on-box trace or HEP capture is.
    pub trace: bool,
    /// Whether a standby takes over this node's calls (`redundancy-config` enabled): the
    /// engine makes dialog changes ([`crate::engine::Engine::poll_dialog_change`]) only then;
    /// a node alone would clone each call for nobody at every step of it.
    pub replicate_dialogs: bool,
    /// When set, tracing also needs this on: the shell turns it off while nobody would take
    /// the events (the capture server down, no monitor), and the engine then only counts the
    /// messages it did not trace.
    pub trace_switch: Option<Arc<AtomicBool>>,
    /// Phones registered through us: the node's registration cache and each interface's
    /// settings.
    pub registration: super::Registrations,
    /// Each interface's `realm-config` bounds on its calls' lives (session timer profile,
    /// `session-max-life-limit`), by index (missing: none).
    pub session_policies: Vec<super::SessionPolicy>,
    /// Subscriptions held per source, node-wide, and `max-subscriptions-per-source`.
    pub subscription_sources: super::SubscriptionSources,
    /// What the calls' accounting records are (`None`: no accounting).
    pub accounting: Option<super::AccountingPolicy>,
}

/// The node's media table, shared by every engine (which open, update and close sessions as
/// SDP passes) and the forwarding threads (which relay packets by it); each holds the lock for
/// microseconds.
pub type SharedMediaTable = Arc<Mutex<crate::media::MediaTable>>;

/// Media anchoring as the engine needs it.
#[derive(Debug, Clone)]
pub struct MediaAnchoring {
    /// The node's media table.
    pub table: SharedMediaTable,
    /// For each interface (by index): its realm's pool in the table and media address
    /// (`steering-pool`), or `None` when the realm has none. A call is anchored when both of
    /// its legs' realms have one.
    pub realms: Vec<Option<(usize, IpAddr)>>,
}

/// Where an in-dialog request must come from to be taken for its leg, and a response from the
/// next hop its request went to (`sip-config in-dialog-source`). The leg's interface,
/// transport and remote tag are checked whatever the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourcePolicy {
    /// UDP: the address and port the leg's peer used; TCP and session-agents: its IP.
    #[default]
    Address,
    /// The leg's peer's IP, any port.
    Ip,
    /// Anywhere (only interface, transport and tags are checked).
    Any,
}

impl EngineConfig {
    /// Whether a message from `source` over `transport` may be taken as coming from the peer
    /// at `peer` (see [`SourcePolicy`]).
    pub(super) fn source_matches(
        &self,
        transport: LegTransport,
        source: SocketAddr,
        peer: SocketAddr,
    ) -> bool {
        match self.source_policy {
            SourcePolicy::Any => true,
            SourcePolicy::Ip => source.ip() == peer.ip(),
            SourcePolicy::Address => {
                if transport == LegTransport::Udp && !self.agents.contains(&peer) {
                    source == peer
                } else {
                    source.ip() == peer.ip()
                }
            }
        }
    }
}

/// Whether an in-dialog request (or ACK) came from `leg`: its interface and transport, its
/// remote tag in the From, and a source the policy accepts for its peer.
pub(super) fn leg_matches(
    cfg: &EngineConfig,
    leg: &Leg,
    inbound: &Inbound,
    msg: &SipMessage,
) -> bool {
    inbound.interface == leg.interface
        && inbound.transport == leg.transport
        && leg
            .remote_tag
            .as_deref()
            .is_none_or(|t| msg.from_tag() == Some(t))
        && cfg.source_matches(leg.transport, inbound.source, leg.peer)
}
