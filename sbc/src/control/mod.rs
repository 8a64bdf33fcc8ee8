//! The operator's side of a node, in rooms:
//! - [`mgmt`]: the management socket (who may connect, framing, limits);
//! - [`context`]: what a session can reach (the node, its subsystems, the configuration's three
//!   copies, the management listeners' sockets), which every room below acts on;
//! - [`console`]: the ACLI session protocol over it, dispatching what the interpreter returns;
//! - [`show`]: the operational commands, one file per group of `show` commands formatting a
//!   typed status snapshot ([`crate::status`]) as text or JSON, and the node actions;
//! - [`lifecycle`]: save, verify, activate, a push from the active, what waits for a restart;
//! - [`management`], [`follow`]: the metrics and SNMP listeners' sockets and how they follow
//!   the running configuration;
//! - [`subsystems`]: the alarm service, the pair, the heap gate and the lab ballast as the
//!   console reaches them;
//! - [`acli_client`]: the client that `sbc acli` runs.

pub mod acli_client;
pub mod console;
pub mod context;
pub mod follow;
pub mod lifecycle;
pub mod management;
pub mod mgmt;
pub mod oper;
pub mod show;
pub mod subsystems;
