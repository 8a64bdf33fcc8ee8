//! Overload control's decisions, as pure state machines: PRSM's request scheduling
//! ([`prsm`]), the worker-group autoscaler ([`autoscale`]) and the heap gate's hysteresis
//! ([`heap_gate`]). The `sbc` shell measures, and applies what they decide.

pub mod autoscale;
pub mod heap_gate;
pub mod prsm;
