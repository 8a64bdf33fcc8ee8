//! sbc: the shell that runs the SBC's protocol core (`sbc-proto`) on sockets, threads and
//! tasks, and the pieces the `sbc` binary wires together.
//!
//! What this crate owns: SIP over UDP and TCP sockets, the worker threads that run one engine
//! per shard, the overload-control and alarm tasks, the pair's glue, the management socket and
//! the console. What it does not: SIP, the B2BUA and overload decisions (`sbc-proto`), the
//! alarm subsystem (`sbc-alarms`), SNMP's MIB, agent logic and trap encoding (`sbc-snmp`), the
//! redundancy pair (`sbc-ha`) and the configuration model (`sbc-config`).
//!
//! The path of a message:
//! ```text
//!  socket ─▶ receive loop ─▶ classify ─▶ group's worker for the shard ─▶ PRSM queues
//!            (per interface)   (shard, kind)     (by Call-ID)            (primary, secondary)
//!                                                                              │
//!  socket ◀── Transmit ◀── Engine of the shard (sans-IO B2BUA) ◀── worker thread ┘
//! ```
//! - [`app`]: one node's life, `run(launch, shutdown)`; [`app::cli`]: `sbc run`'s options
//!   and body, shared by the `sbc` binary and the demo's nodes (`sbc-demo`); [`settings`]: the one
//!   place the configuration becomes each core's settings;
//! - [`runtime`]: UDP receive threads, the TCP edge, binding and releasing the service address,
//!   shutdown;
//! - [`workers`]: worker groups, shards, PRSM queues, hand-over, the timer thread;
//! - [`control`]: the management socket, ACLI sessions, operational commands, `sbc acli`;
//! - [`tasks`]: the node's service tasks, one shutdown signal, joined at exit;
//! - [`status`]: the node's typed status, which the console, `/metrics` and the SNMP agent
//!   read;
//! - [`metrics`]: Prometheus `/metrics`;
//! - [`pair`]: the pair's glue (health, service address, dialog and config sync, hooks);
//! - [`alarm_service`], [`heap_gate`]: the alarm subsystem's and the heap gate's tasks;
//! - [`snmp_agent`], [`snmp_v3`], [`trap_sink`]: the SNMP agent's socket, the node's SNMPv3
//!   engine and users, the trap queue and its sending task (`sbc-snmp` decides and encodes);
//! - [`service`], [`manpage`]: systemd readiness and the manual page sbc(1).
#![warn(missing_docs)]

pub mod accounting;
pub mod alarm_service;
pub mod app;
pub mod control;
pub mod dns;
pub mod heap_gate;
pub mod manpage;
pub mod metrics;
pub mod pair;
pub mod runtime;
pub mod service;
pub mod settings;
pub mod snmp_agent;
pub mod snmp_v3;
pub mod status;
pub mod tasks;
pub mod trace;
pub mod trap_sink;
pub mod udp_batch;
pub mod workers;
