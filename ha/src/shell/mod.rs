//! The thin tokio shell around the sans-IO parts.
//!
//! - [`heartbeat`]: a thread with its own runtime that owns one UDP socket per heartbeat path
//!   (and the witness probe), feeds datagrams, commands and timeouts into a
//!   [`crate::Redundancy`], sends its heartbeats and reports its [`crate::HaEvent`]s on a
//!   channel.
//! - [`sync`]: the state-sync server (on the active) and client (on the standby) over
//!   `Framed<TcpStream, LengthDelimitedCodec>`.
//!
//! Nothing here decides anything: every decision is in [`crate::machine`].

pub mod heartbeat;
pub mod sync;

pub use heartbeat::{bind_paths, serve_witness, serve_witness_with_key, spawn, Command, HaHandle};
pub use sync::{run_sync_client, serve_sync, SyncEvent, SyncPublisher};
