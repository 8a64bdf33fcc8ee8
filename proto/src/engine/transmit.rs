//! What goes in and out of the engine: received bytes ([`Inbound`]) and bytes to send
//! ([`Transmit`]).

use std::net::SocketAddr;

use bytes::Bytes;

use super::Engine;
use crate::sip::dialog::LegTransport;

/// Bytes received on one interface.
#[derive(Debug, Clone)]
pub struct Inbound {
    /// Interface index.
    pub interface: usize,
    /// Transport it came over.
    pub transport: LegTransport,
    /// Source address.
    pub source: SocketAddr,
    /// The message (one datagram or one TCP frame).
    pub data: Bytes,
}

/// Bytes to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Interface index to send from.
    pub interface: usize,
    /// Transport.
    pub transport: LegTransport,
    /// Destination.
    pub dest: SocketAddr,
    /// The message.
    pub payload: Bytes,
}

/// How to reach the sender of a request again.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReplyTo {
    pub(super) interface: usize,
    pub(super) transport: LegTransport,
    pub(super) dest: SocketAddr,
}

impl ReplyTo {
    /// `payload` sent back the way the request came.
    pub(super) fn transmit(&self, payload: Bytes) -> Transmit {
        Transmit {
            interface: self.interface,
            transport: self.transport,
            dest: self.dest,
            payload,
        }
    }
}

impl Engine {
    pub(super) fn reply_to(inbound: &Inbound) -> ReplyTo {
        ReplyTo {
            interface: inbound.interface,
            transport: inbound.transport,
            dest: inbound.source,
        }
    }
}
