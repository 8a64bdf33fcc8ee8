//! Routing new requests, sans IO: Oracle's `local-policy` table and its route preference
//! ([`local_policy`]); the router that turns it, the session-agents and their groups into the
//! ordered agents a request is offered to ([`router`]); each agent's health, pings and
//! admission limits ([`agent`]); the groups' strategies ([`group`]); number translations
//! ([`translation`]).

pub mod agent;
pub mod board;
pub mod group;
pub mod local_policy;
pub mod router;
pub mod translation;
