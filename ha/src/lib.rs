//! sbc-ha: the heartbeat wire format, the redundancy state machine, the health score and the state
//! sync of dialogs between the active and the standby.
//!
//! Empty for now: the HA issue builds it. It exists so that the workspace has the layout of
//! `DESIGN.md` section 2 from the start.
#![warn(missing_docs)]
