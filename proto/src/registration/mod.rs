//! Phones behind the SBC, sans IO: the registration cache ([`cache`]) that relays REGISTERs
//! to a registrar, answers a phone's refreshes itself, and remembers where each binding is
//! reached; what it reads from and writes into messages ([`message`]); a binding as the pair
//! replicates it ([`wire`]).

pub mod cache;
pub mod keepalive;
pub mod message;
pub mod wire;
