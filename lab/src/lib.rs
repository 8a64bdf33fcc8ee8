//! sbc-lab: the SBC's lab: a SIP traffic generator ([`traffic`]: UAC and UAS, also the
//! `sbc-lab` binary), [`demo`] (the `sbc-demo` binary's demo: a pair on loopback, calls, a
//! memory alarm, a switchover and a chart), benchmarks against Kamailio (`lab/bench`) and experiments, and
//! [`chart`]: the one SVG plotter of the demo's chart and the benchmarks' (`sbc-lab chart`).
//! [`tls`]: the lab PKI (`sbc-lab tls-certs`) and rustls configurations for TLS tests;
//! [`tls_load`]: a TLS handshake load driver (`sbc-lab tls-handshakes`).

pub mod chart;
pub mod demo;
pub mod media;
pub mod testing;
pub mod tls;
pub mod tls_load;
pub mod traffic;
