//! sbc: the SIP engine of the SBC pair and the pieces the `sbc` binary wires together.
//!
//! What this crate owns: SIP over UDP and TCP, RFC 3261 transactions, the B2BUA that relays
//! calls between realms with topology hiding, the dialog table, and the worker threads that run
//! it. What it does not: the alarm subsystem (`sbc-alarms`), the redundancy pair (`sbc-ha`) and
//! the configuration model (`sbc-config`).
//!
//! The path of a message:
//! ```text
//!  socket ─▶ receive loop ─▶ shard by Call-ID ─▶ worker thread ─▶ Engine (sans-IO B2BUA)
//!                                                      │                 │
//!                                                      ◀── Transmit ─────┘ ─▶ socket
//! ```
//! - [`sip`]: messages ([`sip::message`]), the four transaction state machines
//!   ([`sip::transaction`]) and the dialog data that state sync replicates ([`sip::dialog`]);
//! - [`engine`]: the B2BUA, one instance per worker, driven by bytes and time;
//! - [`shard`]: which worker a message belongs to, so one call is always processed in order;
//! - [`node`]: the thin I/O shell: sockets, TCP framing, worker threads, shutdown.
#![warn(missing_docs)]

pub mod acli_client;
pub mod alarm_service;
pub mod autoscale;
pub mod console;
pub mod engine;
pub mod mgmt;
pub mod node;
pub mod overload;
pub mod pair;
pub mod prsm;
pub mod shard;
pub mod sip;
pub mod subsystems;
pub mod tcp_codec;
