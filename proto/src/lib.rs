//! sbc-proto: the protocol core of the SBC, sans-IO.
//!
//! What this crate owns: SIP messages and their strict reading, the receive path's line scan,
//! the TCP framer, RFC 3261 transactions, the dialog data that state sync replicates, the B2BUA
//! [`engine`], the shard a Call-ID belongs to, per-source protection at the edge, and overload
//! control's decisions (PRSM scheduling, the autoscaler, the heap gate). What it does not: any
//! socket, clock, thread or task. Every type here is driven by bytes and by the time passed in,
//! and draws randomness from an RNG it is given, so its whole behaviour is tested on a virtual
//! clock and replays from a seed. Its Cargo.toml has no tokio, socket2 or thread pool: the
//! compiler keeps it that way. The `sbc` crate is the shell that runs it.
//!
//! The path of a message through it:
//! ```text
//!  bytes ─▶ sip::framer (TCP) ─▶ sip::classify ─▶ access ─▶ overload::prsm ─▶ engine ─▶ Transmit
//!                                (shard, kind, key)  (per source)  (new first)    (B2BUA)
//! ```
#![warn(missing_docs)]

pub mod access;
mod compact;
pub mod dialling;
pub mod engine;
pub mod media;
pub mod overload;
pub mod registration;
pub mod routing;
pub mod sdp;
pub mod shard;
pub mod sip;
pub mod trace;
