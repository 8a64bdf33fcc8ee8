//! Phones behind the SBC, sans IO: the registration cache ([`cache`]) that relays REGISTERs
//! to a registrar, answers a phone's refreshes itself, and remembers where each binding is
//! reached.

pub mod cache;
