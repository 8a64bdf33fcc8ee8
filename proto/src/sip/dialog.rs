//! The dialog table's data: what the B2BUA knows about each leg of a call.
//!
//! These are plain serde types with no handles, timers or sockets in them, so that the HA state
//! sync can stream them to the standby as they change and the standby can rebuild its table from
//! them and carry on every call after a switchover: the confirmed ones, and (with their
//! [`CallSetup`]) those still ringing or answered but not yet ACKed.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// Which side of the B2BUA a leg faces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Side {
    /// The leg toward the caller (we are its UAS).
    Caller,
    /// The leg toward the callee (we are its UAC).
    Callee,
}

impl Side {
    /// The other side.
    pub fn other(self) -> Self {
        match self {
            Self::Caller => Self::Callee,
            Self::Callee => Self::Caller,
        }
    }
}

/// Transport of a leg.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LegTransport {
    /// UDP.
    Udp,
    /// TCP.
    Tcp,
    /// TLS over TCP.
    Tls,
}

impl LegTransport {
    /// The Via transport token.
    pub fn via_token(self) -> &'static str {
        match self {
            Self::Udp => "UDP",
            Self::Tcp => "TCP",
            Self::Tls => "TLS",
        }
    }

    /// The URI `transport` parameter value.
    pub fn uri_param(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp => "tcp",
            Self::Tls => "tls",
        }
    }

    /// Whether the transport is reliable (RFC 3261 timers collapse to 0): TCP and TLS.
    pub fn reliable(self) -> bool {
        matches!(self, Self::Tcp | Self::Tls)
    }
}

/// One leg of a B2BUA call: a dialog between the SBC and one peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leg {
    /// Index of the sip-interface this leg uses.
    pub interface: usize,
    /// Transport of the leg.
    pub transport: LegTransport,
    /// Where requests of this leg are sent (the peer's source address or the session-agent).
    pub peer: SocketAddr,
    /// Call-ID of this leg.
    pub call_id: String,
    /// Our tag on this leg.
    pub local_tag: String,
    /// The peer's tag, once known.
    pub remote_tag: Option<String>,
    /// Our From/To value on this leg, without tag.
    pub local_party: String,
    /// The peer's From/To value on this leg, without tag.
    pub remote_party: String,
    /// Request-URI for requests we send on this leg (the peer's Contact).
    pub remote_target: String,
    /// Route set for requests we send on this leg.
    pub route_set: Vec<String>,
    /// Last CSeq number we used on this leg.
    pub local_cseq: u32,
    /// CSeq number of the last INVITE we sent on this leg (an ACK reuses it).
    pub last_invite_cseq: u32,
}

/// Where a call is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DialogState {
    /// INVITE relayed, no answer yet.
    Trying,
    /// A provisional response was relayed.
    Early,
    /// A 2xx was relayed; waiting for the caller's ACK.
    Answered,
    /// ACK relayed: the call is established.
    Confirmed,
    /// A BYE is in progress.
    Terminating,
}

/// One B2BUA call: its two legs and its state. This is the unit of state sync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dialog {
    /// Call-wide identifier, unique within the node.
    pub id: u64,
    /// The caller leg.
    pub caller: Leg,
    /// The callee leg.
    pub callee: Leg,
    /// State.
    pub state: DialogState,
    /// Seconds since the Unix epoch when the call was created.
    pub created_unix: u64,
    /// The `o=` session ids of the descriptions the SBC sends on the caller's and the callee's
    /// leg (kept across a switchover: RFC 3264 §8 wants the same origin for the whole session).
    pub sdp_origin: [u64; 2],
    /// The `o=` versions last sent on the caller's and the callee's leg, and a hash of the
    /// description each carried (with the version left out): the version goes up only when the
    /// description changes (RFC 3264 §8), whatever the far side's numbering.
    pub sdp_version: [(u64, u64); 2],
    /// The call's anchored media, when the SBC relays it: ports, addresses, counters.
    pub media: Option<Box<crate::media::MediaRecord>>,
    /// While the call is being set up (`Trying`, `Early`, `Answered`), in a replica only: what
    /// the new active needs of the set-up's two INVITE transactions to finish it.
    pub setup: Option<Box<CallSetup>>,
    /// Set when this dialog is a subscription (RFC 6665, made by SUBSCRIBE or REFER), not a
    /// call: no media, no ACK, and it ends on its expiry or its last NOTIFY. Boxed: a call
    /// pays one pointer for it.
    pub subscription: Option<Box<Subscription>>,
    /// The session timer its endpoints negotiated (RFC 4028), while one runs: the SBC ends the
    /// call when no refresh comes in time. Boxed, as `subscription`.
    pub session_timer: Option<Box<SessionTimer>>,
    /// The session timers the SBC runs on each leg (caller, callee) for a realm's
    /// `session-timer-profile`, when the caller asked for none itself. Boxed, as
    /// `subscription`.
    pub leg_timers: Option<Box<[Option<LegTimer>; 2]>>,
    /// The call's accounting (`account-config`), while it is on: its record's id, what the
    /// records say, and which of them were generated, so that a new active generates each
    /// record once across the pair. Boxed, as `subscription`.
    pub accounting: Option<Box<CallAccounting>>,
}

/// What a call's records need that its legs do not say, and which records were generated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallAccounting {
    /// Acct-Session-Id of its records.
    pub session_id: String,
    /// The session this call follows (a transfer's), or empty.
    pub linked_session_id: String,
    /// The calling number as sent to the callee.
    pub calling: String,
    /// The called number as sent to the callee.
    pub called: String,
    /// The session-agent the INVITE came from, or empty.
    pub ingress_agent: String,
    /// The session-agent it went to last, or empty.
    pub egress_agent: String,
    /// When the INVITE arrived, in milliseconds since the Unix epoch.
    pub setup_ms: u64,
    /// When the call was answered, or 0.
    pub connect_ms: u64,
    /// Next hops tried after the first.
    pub reroutes: u32,
    /// Interim-Updates generated.
    pub interims: u32,
    /// When the next periodic Interim-Update is due (`intermediate-period`), in milliseconds
    /// since the Unix epoch; 0: none.
    pub next_interim_ms: u64,
    /// The media counted before the current record session began (a transfer's): the
    /// session's figures are the relay's since then. Caller to callee, callee to caller.
    pub media_before: [sbc_accounting::MediaFigures; 2],
    /// Transfers the SBC performed on the call: each ends its record session and starts a
    /// new one (`<id>-t<n>`) linked to the one before.
    pub transfers: u32,
    /// The last re-INVITE whose 2xx generated one (its leg in the top bit, its CSeq), so that
    /// a retransmitted 2xx does not generate another.
    pub last_reinvite: u32,
    /// Whether the Start was generated.
    pub started: bool,
    /// Whether the Stop was generated.
    pub stopped: bool,
}

/// A session timer the SBC runs on one leg (RFC 4028 as a B2BUA: each leg its own).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegTimer {
    /// The session interval on the leg, in seconds.
    pub interval_secs: u32,
    /// Whether the SBC refreshes the leg (at half the interval); otherwise it waits for the
    /// leg's peer to refresh and ends the call when it does not.
    pub sbc_refreshes: bool,
    /// Whether the leg's peer knows of the timer (it supports timers and `Session-Expires`
    /// was exchanged with it); the SBC's refresh then names the interval.
    pub negotiated: bool,
    /// Whether the leg's peer allows UPDATE (the SBC's refresh); without, the SBC checks the
    /// leg with an in-dialog OPTIONS.
    pub update_allowed: bool,
    /// When the leg was last refreshed, in milliseconds since the Unix epoch; 0 until the
    /// call is answered.
    pub refreshed_unix_ms: u64,
    /// Whether the SBC's refresh is in flight (not replicated: a new active sends its own).
    #[serde(skip)]
    pub refreshing: bool,
}

/// A session timer the endpoints negotiated (`Session-Expires` in the 2xx to an INVITE or
/// UPDATE).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionTimer {
    /// The session interval, in seconds.
    pub interval_secs: u32,
    /// Who refreshes (`uac` or `uas`, as the 2xx said; empty when it did not).
    pub refresher: String,
    /// When the session was last refreshed (its 2xx relayed), in milliseconds since the Unix
    /// epoch (the nodes' clocks synchronised).
    pub refreshed_unix_ms: u64,
}

/// What a subscription dialog adds to [`Dialog`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    /// Its event package as the `Event` header names it (`message-summary`, `dialog`,
    /// `presence`, `refer`), parameters (`id`) included.
    pub event: String,
    /// When it expires unless refreshed, in milliseconds since the Unix epoch (the nodes'
    /// clocks synchronised, as for replicated bindings); 0 until the notifier accepted it.
    pub expires_unix_ms: u64,
    /// NOTIFYs relayed in it.
    pub notifies: u32,
}

/// The headers a response echoes from its request (RFC 3261 §8.2.6.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseEcho {
    /// The request's Via values, in order.
    pub vias: Vec<String>,
    /// Its From value.
    pub from: String,
    /// Its To value.
    pub to: String,
    /// Its Call-ID.
    pub call_id: String,
    /// Its CSeq value.
    pub cseq: String,
}

/// What a CANCEL, or the ACK of a non-2xx final response, repeats of the request it follows
/// (RFC 3261 §9.1, §17.1.1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestEcho {
    /// The Request-URI.
    pub uri: String,
    /// Our Via (with the transaction's branch).
    pub via: String,
    /// The From value (with our tag).
    pub from: String,
    /// The To value.
    pub to: String,
    /// The Call-ID.
    pub call_id: String,
    /// The CSeq number.
    pub cseq: u32,
    /// The Route values.
    pub routes: Vec<String>,
}

/// A call in set-up as the active replicates it, so that after a switchover the new active
/// relays the callee's provisional and final responses (and their retransmissions), the
/// caller's ACK and CANCEL, and finishes the call as if nothing happened.
///
/// It is replicated when the INVITE is forwarded (so that a callee answering the first INVITE
/// reaches a node that knows it), again when the 2xx is relayed, and dropped from the replica
/// when the caller's ACK confirms the call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSetup {
    /// The branch of the caller's INVITE (its server transaction), as the engine keys it.
    pub caller_branch: String,
    /// The sent-by of the caller's top Via.
    pub caller_sent_by: String,
    /// What our responses to the caller echo.
    pub caller_echo: ResponseEcho,
    /// The branch of our INVITE toward the callee.
    pub callee_branch: String,
    /// What our CANCEL or ACK toward the callee repeats (absent once our INVITE transaction
    /// has ended, after the 2xx).
    pub callee_echo: Option<RequestEcho>,
    /// Our INVITE toward the callee, while no response to it came: the new active re-sends it
    /// (over UDP) until one does. Empty otherwise.
    pub invite: Vec<u8>,
    /// The 2xx relayed to the caller, while the caller's ACK has not come: re-sent when the
    /// callee retransmits its 2xx. Empty otherwise.
    pub caller_2xx: Vec<u8>,
}

impl Dialog {
    /// The leg on `side`.
    pub fn leg(&self, side: Side) -> &Leg {
        match side {
            Side::Caller => &self.caller,
            Side::Callee => &self.callee,
        }
    }

    /// The leg on `side`, mutably.
    pub fn leg_mut(&mut self, side: Side) -> &mut Leg {
        match side {
            Side::Caller => &mut self.caller,
            Side::Callee => &mut self.callee,
        }
    }
}
