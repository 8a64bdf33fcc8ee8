//! Overload control's decisions, as pure state machines: PRSM's request scheduling
//! ([`prsm`]) and one worker's queue with its wait rules ([`worker_queue`]), the worker-group
//! autoscaler ([`autoscale`]) and which shards move when it scales ([`handover`]), and the
//! heap gate's hysteresis ([`heap_gate`]). The `sbc` shell measures, and applies what they
//! decide.

pub mod autoscale;
pub mod handover;
pub mod heap_gate;
pub mod prsm;
pub mod worker_queue;
