//! The operator's side of a node: the management socket, the ACLI console behind it, the
//! operational commands (`show ...`, `clear-alarm`, `switchover-redundancy`) and the client
//! that `sbc acli` runs.

pub mod acli_client;
pub mod console;
pub mod follow;
pub mod mgmt;
pub mod show;
pub mod subsystems;
