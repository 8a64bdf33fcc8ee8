//! The dialog table's data: what the B2BUA knows about each leg of an established call.
//!
//! These are plain serde types with no handles, timers or sockets in them, so that the HA state
//! sync can stream them to the standby as they change and the standby can rebuild its table from
//! them and carry on every confirmed call after a switchover.

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
}

impl LegTransport {
    /// The Via transport token.
    pub fn via_token(self) -> &'static str {
        match self {
            Self::Udp => "UDP",
            Self::Tcp => "TCP",
        }
    }

    /// The URI `transport` parameter value.
    pub fn uri_param(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp => "tcp",
        }
    }

    /// Whether the transport is reliable (RFC 3261 timers collapse to 0).
    pub fn reliable(self) -> bool {
        self == Self::Tcp
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
    pub media: Option<crate::media::MediaRecord>,
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
