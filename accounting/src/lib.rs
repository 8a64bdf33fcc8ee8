//! Accounting of the SBC pair, sans IO: the call detail record ([`record`]), its CSV line and
//! the files' rotation ([`csv_file`]), its RADIUS attributes ([`radius`]), the spool's format
//! and ledger ([`spool`]), the records held in memory ([`window`]), the delivery to
//! accounting servers ([`delivery`]) and the hashers of the thread's maps ([`hashing`]).
//! Nothing here reads a clock or touches a file or a socket: the node (`sbc::accounting`)
//! does, and hands the time in.

pub mod csv_file;
pub mod delivery;
pub mod hashing;
pub mod radius;
pub mod record;
pub mod spool;
pub mod time;
pub mod window;

pub use record::{
    key_of_replication, replication_key, CallRecord, EndedBy, MediaFigures, PackedText, RecordKind,
    RecordText, TextField, REPLICATION_PREFIX, TEXT_FIELDS,
};
