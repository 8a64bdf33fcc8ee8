//! sbc: the shell that runs the SBC's protocol core (`sbc-proto`) on sockets, threads and
//! tasks, and the pieces the `sbc` binary wires together.
//!
//! What this crate owns: SIP over UDP and TCP sockets, the worker threads that run one engine
//! per shard, the overload-control and alarm tasks, the pair's glue, the management socket and
//! the console. What it does not: SIP, the B2BUA and overload decisions (`sbc-proto`), the
//! alarm subsystem (`sbc-alarms`), the redundancy pair (`sbc-ha`) and the configuration model
//! (`sbc-config`).
//!
//! The path of a message:
//! ```text
//!  socket ─▶ receive loop ─▶ classify ─▶ group's worker for the shard ─▶ PRSM queues
//!            (per interface)   (shard, kind)     (by Call-ID)            (primary, secondary)
//!                                                                              │
//!  socket ◀── Transmit ◀── Engine of the shard (sans-IO B2BUA) ◀── worker thread ┘
//! ```
//! - [`workers`]: worker groups, shards, PRSM queues and the autoscaler's shell;
//! - [`node`]: sockets, groups, shutdown; [`tcp`]: the TCP edge;
//! - [`settings`]: configuration into each subsystem's settings.
#![warn(missing_docs)]

pub mod acli_client;
pub mod alarm_service;
pub mod console;
pub mod mgmt;
pub mod node;
pub mod overload;
pub mod pair;
pub mod replica;
pub mod settings;
pub mod subsystems;
pub mod tcp;
pub mod workers;
