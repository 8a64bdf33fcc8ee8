//! Routing new requests, sans IO: Oracle's `local-policy` table and its route preference
//! ([`local_policy`]), large route files ([`route_file`]) and the indexed table that answers
//! both ([`table`]); the router that turns it, the session-agents and their groups into the
//! ordered agents a request is offered to ([`router`]); each agent's health, pings and
//! admission limits ([`agent`]), shared node-wide ([`board`]); the groups' strategies
//! ([`group`]); number translations ([`translation`]); agents named by DNS ([`dns`]).

pub mod agent;
pub mod board;
pub mod dns;
pub mod group;
pub mod local_policy;
mod prefix_index;
pub mod route_file;
pub mod router;
pub mod table;
pub mod translation;
