//! Media in the lab: an RTP load generator ([`rtp`]), the SDP its endpoints send and read
//! ([`sdp`]), a client of rtpengine's NG control protocol ([`ng`]) with the per-call offer and
//! answer that anchor the generator's calls on rtpengine ([`rtpengine`]), and the relay's CPU
//! and memory read from `/proc` ([`procstat`]).
//!
//! The same calls go through the SBC with SDP-carrying SIP calls of the traffic generator
//! ([`sip`]): a [`crate::traffic::MediaPlan`] hands each UAC call its caller endpoint and each
//! UAS call the matching callee endpoint, and collects the relay addresses both learn from
//! the SDP.

pub mod ng;
pub mod procstat;
pub mod rtp;
pub mod rtpengine;
pub mod sdp;
pub mod sip;
