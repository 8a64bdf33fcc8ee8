//! SIP trace, sans IO: what a captured message is, how captures are filtered, kept in a
//! bounded ring and drawn as a ladder, and how credentials are masked before anything is kept.

pub mod capture;
pub mod mask;
pub mod pcap;
