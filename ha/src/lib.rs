//! sbc-ha: high availability of the SBC pair.
//!
//! # What this crate owns
//!
//! - [`RedundancySettings`]: `redundancy-config` with Oracle's names and defaults, validated.
//! - [`addr`]: addresses of either family as the pair compares them (IPv4-mapped IPv6
//!   addresses canonical).
//! - [`crypto`]: one key per use derived from the shared key (HKDF-SHA256), and the sealing of
//!   datagrams (XChaCha20-Poly1305).
//! - [`wire`]: the heartbeat and witness datagrams (magic, version, nonce, sealed bincode 2
//!   payload), each echoing the receiver's incarnation so a replay after a restart is refused.
//! - [`channel`]: the state-sync channel's security, sans-IO: a Noise `NNpsk0` handshake from
//!   the shared key, then encrypted, replay-proof, size-capped frames.
//! - [`refusals`]: refusals logged once per source per interval, never per packet.
//! - [`Redundancy`]: the redundancy state machine, sans-IO: heartbeats and timeouts in,
//!   heartbeats and [`HaEvent`]s out, time passed in. Its module docs give the rules and why
//!   there are epochs.
//! - [`witness`]: the witness's lease arbiter, sans-IO: at most one node holds the active lease
//!   at a time; [`shell::serve_witness_with_key`] runs it on a UDP socket.
//! - [`sync`]: the frames of the TCP state-sync channel and [`SyncTable`], the replicated
//!   keyed map of opaque bytes with its merge-union for split-brain convergence.
//! - [`shell`]: the thin tokio shell: a thread of its own (its own runtime, so a busy SIP path
//!   cannot delay a heartbeat) that owns one UDP socket per heartbeat path and drives a
//!   [`Redundancy`]; the sync server (active) and client (standby) over TCP, closed to everyone
//!   but the configured peer, whose client reports a connection the peer's side ended (what a
//!   process that dies looks like at once) for the machine to suspect the peer.
//!
//! # What it does not own
//!
//! SIP: a dialog is an opaque key and opaque bytes here. Binding the service address, running
//! hook scripts, computing the health score from alarms, and ACLI commands belong to `sbc`,
//! which reacts to [`HaEvent`]s and feeds [`shell::Command`]s.
//!
//! # Data flow
//!
//! ```text
//!            health, force, sync link lost/up        HaEvent (mpsc)
//!  sbc ──────────────────────────────► shell::Heartbeat ───────────────────► sbc
//!                                       │  ▲  own thread: Redundancy + UDP sockets
//!                  heartbeats (UDP) ◄───┘  └─── heartbeats (UDP) from the peer, per path
//!                  lease probes (UDP) ──► witness (serve_witness_with_key) ──► granted/denied
//!
//!  active:  SyncPublisher::upsert/delete ──► SyncServer ══ TCP frames ══► SyncClient ──► SyncTable
//!                                                                           (standby) └► SyncEvent::Synchronized,
//!                                                                                          LinkLost, LinkUp
//! ```
//!
//! # Why epochs (short version)
//!
//! A partition can leave two actives. When they hear each other again they must agree at once,
//! with no further round trip, on which one stays: every takeover increments an epoch carried
//! in heartbeats, and the lower epoch (on a tie, the higher address) yields and both exchange
//! their dialogs so the survivor holds the union. See [`machine`] for the full rules.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod addr;
pub mod channel;
pub mod crypto;
pub mod machine;
pub mod refusals;
pub mod settings;
pub mod shell;
pub mod sync;
pub mod wire;
pub mod witness;

pub use machine::{
    Counters, HaEvent, Health, PeerView, Reason, Redundancy, Refused, State, Status, Transmit,
    WitnessTransmit,
};
pub use settings::{AdminState, PeerSettings, PeerType, RedundancySettings, SettingsError};
pub use sync::{SyncEntry, SyncFrame, SyncTable};
pub use wire::{DecodeError, Heartbeat, NodeId, PathId, WitnessAnswer, WitnessProbe};
pub use witness::{Lease, WitnessArbiter};
