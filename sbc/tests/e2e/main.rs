//! End-to-end tests of the `sbc` binary: real `sbc` processes (one node, a pair, a witness,
//! `sbc acli`) driven by SIPp, snmptrapd, the lab's traffic generator and raw
//! sockets on loopback. One module per scenario; the harness they share is the `sbc-e2e`
//! library (`tests/`).
//!
//! They are one test binary so that Cargo builds and links the harness once and libtest
//! schedules every test of the suite over its threads, instead of one binary after the other.

mod accounting;
mod accounting_radsec;
mod acli;
mod alarms_snmp;
mod attended_transfer;
mod auth_challenge;
mod autoscale;
mod basic_tcp;
mod basic_udp;
mod busy;
mod callee_bye;
mod cancel;
mod config_save_kill;
mod edge_amplification;
mod edge_flood;
mod edge_legs;
mod ipv6;
mod ipv6_sources;
mod malformed;
mod management_ipv6;
mod max_forwards;
mod media_anchoring;
mod metrics;
mod mgmt_socket;
mod no_answer;
mod overload_heap_gate;
mod pair_accounting;
mod pair_agent_states;
mod pair_cpu_hog;
mod pair_forged;
mod pair_ipv6;
mod pair_kill9;
mod pair_manual_switchover;
mod pair_media_failover;
mod pair_memory_switchover;
mod pair_partition;
mod pair_push;
mod pair_registrations;
mod pair_session_timer;
mod pair_setup_failover;
mod pair_strangers;
mod pair_subscriptions;
mod pair_tcp_failover;
mod registration;
mod reinvite;
mod retransmission;
mod routing;
mod scenarios_selfcheck;
mod session_timer;
mod sip_trace;
mod snmp_agent;
mod snmp_v3;
mod subscriptions;
mod tcp_edge;
mod through_sbc;
mod tls;
mod topology_hiding;
mod transfer;
