//! sbc-snmp: the SNMP of an SBC node, sans IO: the `SBC-PAIR-MIB` module, the agent's
//! logic, the SNMPv3 User-based Security Model and the traps' encoding and decoding.
//!
//! # What it owns
//!
//! - `mib/`: the MIB files (`SBC-PAIR-MIB.txt` and the IETF base modules net-snmp needs to
//!   load it; the package installs `SBC-PAIR-MIB.txt` under `/usr/share/snmp/mibs`).
//! - [`mib`]: what the agent and the traps share: the module's arc ([`ENTERPRISE_ARC`], under
//!   the experimental arc `1.3.6.1.3.3261` until the project has an IANA enterprise number),
//!   the redundancy enumerations ([`RedundancyRole`], [`TransitionState`]) and the largest
//!   message taken ([`MAX_REQUEST`]).
//! - [`agent`]: the agent's logic (the MIB view of a [`StatusSnapshot`], GET, GETNEXT,
//!   GETBULK; v2c communities and v3 USM users): one request datagram in, at most one
//!   response out.
//! - [`usm`]: the SNMPv3 User-based Security Model (RFC 3414: keys, HMAC-SHA-96, the engine's
//!   boots and time window, reports) with AES-128-CFB privacy (RFC 3826).
//! - [`trap`]: the notifications of the MIB ([`Trap`], with [`Trap::from_event`] for the alarm
//!   evaluator's events), the `trap-receiver`s and their filter levels, the [`TrapEncoder`]
//!   (v2c or v3 authPriv datagrams) and the decoder the lab's trap listener uses.
//!
//! It does no I/O: no sockets, no tasks, no clock (time is passed in). The `sbc` shell owns
//! the agent's UDP socket (`sbc::snmp_agent`) and the trap sink that queues traps and sends
//! the datagrams (`sbc::trap_sink`). It reads the alarm types (`sbc-alarms`: kind, severity,
//! cleared-by, the evaluator's events); `sbc-alarms` knows nothing of SNMP.
//!
//! # Data path
//!
//! ```text
//!  request datagram ─▶ Agent::handle_at(bytes, source, snapshot, elapsed) ─▶ response datagram
//!                        (community, or usm::open ─▶ scoped PDU ─▶ the same view)
//!  AlarmEvent ─▶ Trap::from_event ─┐
//!  HA, edge, media, TLS ─▶ Trap ───┴▶ FilterLevel::passes ─▶ TrapEncoder::encode ─▶ datagram
//! ```
#![warn(missing_docs)]

pub mod agent;
pub mod mib;
pub mod trap;
pub mod usm;

pub use agent::{AccountingStatus, StatusSnapshot};
pub use mib::{kibibytes, RedundancyRole, TransitionState, ENTERPRISE_ARC, MAX_REQUEST};
pub use trap::{
    decode_trap, encode_trap, encode_trap_v3, AlarmInfo, DecodedTrap, DecodedVarBind, FilterLevel,
    Trap, TrapEncoder, TrapError, TrapReceiver, TrapSecurity,
};
