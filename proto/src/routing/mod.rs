//! Routing new requests, sans IO: Oracle's `local-policy` table and its route preference
//! ([`local_policy`]), and the router that turns it, the session-agents and their groups into
//! the ordered agents a request is offered to ([`router`]).

pub mod local_policy;
pub mod router;
