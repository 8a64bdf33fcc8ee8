//! sbc-lab: the SBC's lab: a SIP traffic generator ([`traffic`]: UAC and UAS, also the
//! `sbc-lab` binary), benchmarks against Kamailio (`lab/bench`) and experiments.

pub mod traffic;
