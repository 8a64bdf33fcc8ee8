//! Routing new requests (issue 28's groundwork, sans IO, not wired into the engine or the
//! configuration yet): Oracle's `local-policy` table and its route preference
//! ([`local_policy`]).

pub mod agent;
pub mod group;
pub mod local_policy;
pub mod translation;
