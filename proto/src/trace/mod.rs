//! SIP trace and capture, sans IO: what a captured message is, how captures are filtered,
//! kept in a bounded ring and drawn as a ladder ([`capture`]), which messages the on-box
//! monitor keeps by its configured and live filters ([`monitor`]), how credentials are masked
//! before anything is kept ([`mask`]), and the formats traced messages leave the box in: a
//! pcap file ([`pcap`]) and HEPv3 for Homer and sngrep ([`hep`]). Sending them (sockets,
//! queues, drops) is the shell's job.

pub mod capture;
pub mod hep;
pub mod mask;
pub mod monitor;
pub mod pcap;
