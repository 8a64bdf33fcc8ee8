//! sbc-alarms: memory, heap and CPU samplers, threshold evaluation with a spike filter, the alarm
//! table and the SNMP trap sink.
//!
//! Empty for now: the alarms issue builds it. It exists so that the workspace has the layout of
//! `DESIGN.md` section 2 from the start and later crates can depend on it.
#![warn(missing_docs)]
