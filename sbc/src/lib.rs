//! sbc: the SIP engine of the SBC pair and the pieces the `sbc` binary wires together.
//!
//! What this crate owns: SIP over UDP and TCP, RFC 3261 transactions, the B2BUA that relays
//! calls between realms with topology hiding, the dialog table, and the worker threads that run
//! it. What it does not: the alarm subsystem (`sbc-alarms`), the redundancy pair (`sbc-ha`) and
//! the configuration model (`sbc-config`).
//!
//! The path of a message:
//! ```text
//!  socket ─▶ receive loop ─▶ classify ─▶ group's worker for the shard ─▶ PRSM queues
//!            (per interface)   (shard, kind)     (by Call-ID)            (primary, secondary)
//!                                                                              │
//!  socket ◀── Transmit ◀── Engine of the shard (sans-IO B2BUA) ◀── worker thread ┘
//! ```
//! - [`sip`]: messages ([`sip::message`]), the four transaction state machines
//!   ([`sip::transaction`]) and the dialog data that state sync replicates ([`sip::dialog`]);
//! - [`engine`]: the B2BUA, one instance per shard, driven by bytes and time;
//! - [`shard`]: which shard a message belongs to, so one call is always processed in order;
//! - [`classify`]: what the receive path learns from a line scan (shard, PRSM kind, key);
//! - [`prsm`], [`autoscale`], [`overload`]: overload control as pure state machines (request
//!   scheduling, worker-group scaling, the heap gate);
//! - [`workers`]: worker groups, shards, PRSM queues and the autoscaler's shell;
//! - [`node`]: the thin I/O shell: sockets, TCP framing, groups, shutdown.
#![warn(missing_docs)]

pub mod access;
pub mod acli_client;
pub mod alarm_service;
pub mod autoscale;
pub mod classify;
pub mod console;
pub mod engine;
pub mod mgmt;
pub mod node;
pub mod overload;
pub mod pair;
pub mod prsm;
pub mod replica;
pub mod shard;
pub mod sip;
pub mod subsystems;
pub mod tcp;
pub mod tcp_codec;
pub mod workers;
