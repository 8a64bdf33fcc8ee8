//! Routing new requests (issue 28's groundwork, sans IO, not wired into the engine or the
//! configuration yet): Oracle's `local-policy` table and its route preference
//! ([`local_policy`]), large route files ([`route_file`]) and the indexed table the engine asks
//! ([`table`]).

pub mod local_policy;
mod prefix_index;
pub mod route_file;
pub mod table;
