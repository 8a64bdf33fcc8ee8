//! State sync: the frames of the TCP channel and the replicated table.
//!
//! # Frames
//!
//! Each frame is bincode 2 (standard config) of `(u16 version, SyncFrame)`, at most
//! [`MAX_FRAME`] bytes, carried encrypted by the channel of [`crate::channel`] (a Noise
//! session: nothing of a frame is readable on the wire, and nothing is accepted from a peer
//! that does not hold the shared key). The version comes first so that a peer of another
//! version is refused with a clear error before the body is decoded.
//!
//! A conversation, once the handshake is done: the standby sends `Hello` (with `exchange` set
//! after a split brain, followed by its own table as `Snapshot` chunks); the active answers
//! `Hello`, its table as `Snapshot` chunks (the last one has `last` set), the current
//! `ConfigPush` if any, then streams `Upsert`/`Delete`/`ConfigPush` as they happen. The standby
//! sends `Ack` after each complete snapshot and each config push. Snapshots are cut into chunks
//! of at most [`SNAPSHOT_CHUNK`] entries and [`SNAPSHOT_CHUNK_BYTES`] ([`snapshot_chunks`]), so
//! every frame stays below the cap.
//!
//! # The table
//!
//! [`SyncTable`] maps opaque keys to opaque values with a revision each (a Lamport clock: a
//! local write takes the largest revision seen plus one). A delete leaves a tombstone with its
//! revision, so a merge does not resurrect a dialog that one side ended. Between two versions
//! of a key the larger `(revision, value)` wins, a total order, so merging in either direction
//! gives the same table: this is the union that the two nodes converge on after a split brain.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::wire::NodeId;

pub use crate::channel::MAX_FRAME;

/// The sync frame version this crate writes and accepts (2: inside the Noise channel).
pub const SYNC_VERSION: u16 = 2;
/// Entries per snapshot chunk at most.
pub const SNAPSHOT_CHUNK: usize = 512;
/// Bytes of keys and values per snapshot chunk at most (half the frame cap, leaving room for
/// the encoding's overhead).
pub const SNAPSHOT_CHUNK_BYTES: usize = MAX_FRAME / 2;
/// The largest key and value one entry may have: anything larger cannot be replicated.
pub const MAX_ENTRY_BYTES: usize = SNAPSHOT_CHUNK_BYTES;

/// One key of the table: its value, or a tombstone, with the revision that wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncEntry {
    /// The key (a dialog id, say).
    pub key: Vec<u8>,
    /// The revision that wrote this version.
    pub rev: u64,
    /// The value; `None` is a tombstone (deleted).
    pub value: Option<Vec<u8>>,
}

/// A message of the sync channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SyncFrame {
    /// First frame in each direction.
    Hello {
        /// The sender.
        node: NodeId,
        /// The sender's redundancy epoch.
        epoch: u64,
        /// The sender's configuration version.
        config_version: u64,
        /// From a standby: it will send its own table first, to be merged (split brain).
        exchange: bool,
    },
    /// A chunk of a full table.
    Snapshot {
        /// Entries, tombstones included.
        items: Vec<SyncEntry>,
        /// Whether this is the last chunk.
        last: bool,
    },
    /// A key was created or changed.
    Upsert {
        /// The key.
        key: Vec<u8>,
        /// Its revision.
        rev: u64,
        /// The value.
        value: Vec<u8>,
    },
    /// A key was deleted.
    Delete {
        /// The key.
        key: Vec<u8>,
        /// The revision of the delete.
        rev: u64,
    },
    /// A configuration saved and activated on the active.
    ConfigPush {
        /// Its version.
        version: u64,
        /// The configuration file's text.
        toml: String,
    },
    /// The receiver applied everything up to here.
    Ack {
        /// Frames received so far on this connection.
        received: u64,
    },
}

/// Why a sync frame was refused.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Another version of the protocol.
    #[error("sync frame version {0} (this node speaks {SYNC_VERSION})")]
    Version(u16),
    /// Not a valid frame.
    #[error("malformed sync frame: {0}")]
    Malformed(#[from] bincode::error::DecodeError),
    /// Could not encode.
    #[error("sync frame encoding failed: {0}")]
    Encode(#[from] bincode::error::EncodeError),
    /// The connection failed.
    #[error("sync connection: {0}")]
    Io(#[from] std::io::Error),
    /// The peer broke the conversation (e.g. no Hello first).
    #[error("sync protocol: {0}")]
    Protocol(&'static str),
    /// The secure channel failed: handshake refused, a message not authentic, a frame too
    /// large.
    #[error("sync channel: {0}")]
    Channel(#[from] crate::channel::ChannelError),
    /// The peer took too long for a step of the conversation.
    #[error("sync: {0} timed out")]
    Timeout(&'static str),
    /// An authentic peer that says it is another node than the configured peer (or this one).
    #[error("sync: the peer says it is node {0}, not the configured peer")]
    WrongNode(NodeId),
}

impl SyncFrame {
    /// The frame's bytes (to be sent through a `LengthDelimitedCodec`).
    ///
    /// # Errors
    /// Only if bincode fails, which it does not for this type.
    pub fn encode(&self) -> Result<Bytes, SyncError> {
        let v = bincode::serde::encode_to_vec((SYNC_VERSION, self), bincode::config::standard())?;
        Ok(Bytes::from(v))
    }

    /// Decodes one frame's bytes, checking the version first.
    ///
    /// # Errors
    /// [`SyncError::Version`] or [`SyncError::Malformed`].
    pub fn decode(bytes: &[u8]) -> Result<Self, SyncError> {
        // The limit makes bincode refuse a length prefix beyond the frame before it allocates
        // (without one, a 2^60-byte string length is a capacity-overflow panic: found by
        // fuzzing, see `a_huge_length_prefix_is_an_error_not_an_allocation`).
        let cfg = bincode::config::standard().with_limit::<MAX_FRAME>();
        let (version, _): (u16, usize) = bincode::serde::decode_from_slice(bytes, cfg)?;
        if version != SYNC_VERSION {
            return Err(SyncError::Version(version));
        }
        let ((_, frame), used): ((u16, Self), usize) =
            bincode::serde::decode_from_slice(bytes, cfg)?;
        if used != bytes.len() {
            return Err(SyncError::Protocol("trailing bytes after frame"));
        }
        Ok(frame)
    }
}

/// Cuts a table's entries into snapshot chunks of at most [`SNAPSHOT_CHUNK`] entries and
/// [`SNAPSHOT_CHUNK_BYTES`] bytes of keys and values, in order. Entries larger than
/// [`MAX_ENTRY_BYTES`] are left out (they could not cross the channel); the second value
/// counts them. An empty table gives one empty chunk (a snapshot is never zero frames).
#[must_use]
pub fn snapshot_chunks(items: Vec<SyncEntry>) -> (Vec<Vec<SyncEntry>>, usize) {
    let mut chunks = Vec::new();
    let mut current = Vec::new();
    let mut bytes = 0usize;
    let mut oversized = 0usize;
    for e in items {
        let size = e.key.len() + e.value.as_ref().map_or(0, Vec::len);
        if size > MAX_ENTRY_BYTES {
            oversized += 1;
            continue;
        }
        if !current.is_empty()
            && (current.len() == SNAPSHOT_CHUNK || bytes + size > SNAPSHOT_CHUNK_BYTES)
        {
            chunks.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += size;
        current.push(e);
    }
    if !current.is_empty() || chunks.is_empty() {
        chunks.push(current);
    }
    (chunks, oversized)
}

/// Tombstones a table keeps, the newest: a deleted key's tombstone makes a merge after a split
/// brain prefer the delete to the other side's older value. Without a bound a table kept one
/// per call ever ended (the pair hands it from node to node), and every snapshot carried them:
/// about 100 bytes each, 170 MB a day at 20 calls/s. 16,384 of them (under 2 MB) cover the
/// deletes of the last 13 minutes at 20 calls/s, 8 s at 2,000; a partition longer than that
/// may bring back, at its merge, calls that ended early in it.
pub const MAX_TOMBSTONES: usize = 16_384;

/// The replicated keyed map of opaque bytes (dialogs, to the `sbc`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncTable {
    entries: BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)>,
    /// The tombstones of `entries` by (revision, key), oldest first.
    tombstones: std::collections::BTreeSet<(u64, Vec<u8>)>,
    clock: u64,
}

impl SyncTable {
    /// An empty table.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to (`rev`, `value`), keeping the tombstone index and its bound.
    fn set(&mut self, key: Vec<u8>, rev: u64, value: Option<Vec<u8>>) {
        if let Some((old, None)) = self.entries.get(&key) {
            self.tombstones.remove(&(*old, key.clone()));
        }
        if value.is_none() {
            self.tombstones.insert((rev, key.clone()));
        }
        self.entries.insert(key, (rev, value));
        while self.tombstones.len() > MAX_TOMBSTONES {
            if let Some((_, oldest)) = self.tombstones.pop_first() {
                self.entries.remove(&oldest);
            }
        }
    }

    /// The table's revision: the largest revision written or seen (its Lamport clock). The
    /// active's and the standby's are comparable: their difference is the standby's lag in
    /// changes.
    #[must_use]
    pub fn revision(&self) -> u64 {
        self.clock
    }

    /// Tombstones held (at most [`MAX_TOMBSTONES`]).
    #[must_use]
    pub fn tombstone_count(&self) -> usize {
        self.tombstones.len()
    }

    /// A local write: sets `key` with a fresh revision and returns the entry to replicate.
    pub fn upsert(&mut self, key: Vec<u8>, value: Vec<u8>) -> SyncEntry {
        self.clock += 1;
        self.set(key.clone(), self.clock, Some(value.clone()));
        SyncEntry {
            key,
            rev: self.clock,
            value: Some(value),
        }
    }

    /// A local delete: leaves a tombstone and returns the entry to replicate.
    pub fn delete(&mut self, key: Vec<u8>) -> SyncEntry {
        self.clock += 1;
        self.set(key.clone(), self.clock, None);
        SyncEntry {
            key,
            rev: self.clock,
            value: None,
        }
    }

    /// A remote write: kept if it is newer than what the table holds (larger revision, then
    /// larger value; a tombstone is smaller than any value). Returns whether it changed the table.
    pub fn apply(&mut self, entry: SyncEntry) -> bool {
        self.clock = self.clock.max(entry.rev);
        let incoming = (entry.rev, entry.value);
        match self.entries.get(&entry.key) {
            Some(current) if *current >= incoming => false,
            _ => {
                self.set(entry.key, incoming.0, incoming.1);
                true
            }
        }
    }

    /// Merges another table's entries (union, newest version of each key wins). Returns how
    /// many keys changed.
    pub fn merge(&mut self, entries: impl IntoIterator<Item = SyncEntry>) -> usize {
        entries
            .into_iter()
            .map(|e| usize::from(self.apply(e)))
            .sum()
    }

    /// Replaces the whole content by a snapshot (a standby joining); keeps the clock monotonic.
    pub fn replace(&mut self, entries: impl IntoIterator<Item = SyncEntry>) {
        self.entries.clear();
        self.tombstones.clear();
        for e in entries {
            self.clock = self.clock.max(e.rev);
            self.set(e.key, e.rev, e.value);
        }
    }

    /// The value of `key`, if it is live.
    #[must_use]
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.entries.get(key).and_then(|(_, v)| v.as_deref())
    }

    /// The number of live keys.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.values().filter(|(_, v)| v.is_some()).count()
    }

    /// Whether no key is live.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The live keys and values, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.entries
            .iter()
            .filter_map(|(k, (_, v))| v.as_deref().map(|v| (k.as_slice(), v)))
    }

    /// Every entry, tombstones included, in key order (what a snapshot carries).
    #[must_use]
    pub fn snapshot(&self) -> Vec<SyncEntry> {
        self.entries
            .iter()
            .map(|(k, (rev, v))| SyncEntry {
                key: k.clone(),
                rev: *rev,
                value: v.clone(),
            })
            .collect()
    }

    /// Drops the tombstones (once both nodes are known to be synchronized).
    pub fn compact(&mut self) {
        self.entries.retain(|_, (_, v)| v.is_some());
        self.tombstones.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tombstones_are_bounded_oldest_first_and_live_keys_stay() {
        let mut t = SyncTable::new();
        t.upsert(b"live".to_vec(), b"v".to_vec());
        let n = MAX_TOMBSTONES + 100;
        for i in 0..n {
            let k = format!("call-{i}").into_bytes();
            t.upsert(k.clone(), b"x".to_vec());
            t.delete(k);
        }
        assert_eq!(t.tombstone_count(), MAX_TOMBSTONES);
        assert_eq!(t.len(), 1);
        assert_eq!(t.get(b"live"), Some(&b"v"[..]));
        assert_eq!(t.snapshot().len(), MAX_TOMBSTONES + 1);
        // The newest tombstones still win a merge; the oldest are gone (an old value returns).
        let newest = format!("call-{}", n - 1).into_bytes();
        let oldest = b"call-0".to_vec();
        assert!(!t.apply(SyncEntry {
            key: newest,
            rev: 1,
            value: Some(b"old".to_vec())
        }));
        assert!(t.apply(SyncEntry {
            key: oldest.clone(),
            rev: 1,
            value: Some(b"old".to_vec())
        }));
        assert_eq!(t.get(&oldest), Some(&b"old"[..]));
        // A key upserted again after its delete leaves the tombstone index.
        let mut u = SyncTable::new();
        u.upsert(b"k".to_vec(), b"1".to_vec());
        u.delete(b"k".to_vec());
        u.upsert(b"k".to_vec(), b"2".to_vec());
        assert_eq!(u.tombstone_count(), 0);
        let mut r = SyncTable::new();
        r.replace(t.snapshot());
        assert_eq!(r.tombstone_count(), t.tombstone_count());
    }

    #[test]
    fn frames_round_trip_with_version() {
        let frames = [
            SyncFrame::Hello {
                node: NodeId(7),
                epoch: 3,
                config_version: 9,
                exchange: true,
            },
            SyncFrame::Snapshot {
                items: vec![SyncEntry {
                    key: b"k".to_vec(),
                    rev: 1,
                    value: None,
                }],
                last: true,
            },
            SyncFrame::Upsert {
                key: b"a".to_vec(),
                rev: 2,
                value: b"v".to_vec(),
            },
            SyncFrame::Delete {
                key: b"a".to_vec(),
                rev: 3,
            },
            SyncFrame::ConfigPush {
                version: 4,
                toml: "[system-config]\n".into(),
            },
            SyncFrame::Ack { received: 5 },
        ];
        for f in frames {
            let b = f.encode().expect("encode");
            assert_eq!(SyncFrame::decode(&b).expect("decode"), f);
        }
    }

    #[test]
    fn other_version_and_garbage_are_refused() {
        let mut b = SyncFrame::Ack { received: 1 }
            .encode()
            .expect("encode")
            .to_vec();
        b[0] = 3;
        assert!(matches!(SyncFrame::decode(&b), Err(SyncError::Version(3))));
        assert!(matches!(
            SyncFrame::decode(&[2, 200, 200, 200]),
            Err(SyncError::Malformed(_))
        ));
        assert!(SyncFrame::decode(&[]).is_err());
    }

    #[test]
    fn a_huge_length_prefix_is_an_error_not_an_allocation() {
        // The fuzzer's find: a ConfigPush whose TOML claims ~2^64 bytes.
        let crash = [
            2u8, 4, 61, 253, 9, 0, 255, 255, 255, 255, 255, 255, 255, 255,
        ];
        assert!(matches!(
            SyncFrame::decode(&crash),
            Err(SyncError::Malformed(_))
        ));
        // A Snapshot claiming a million entries in a few bytes.
        let mut many = vec![2u8, 1, 252];
        many.extend_from_slice(&1_000_000u32.to_le_bytes());
        assert!(SyncFrame::decode(&many).is_err());
    }

    #[test]
    fn snapshot_chunks_stay_below_the_frame_cap() {
        let entry = |i: u32, size: usize| SyncEntry {
            key: i.to_be_bytes().to_vec(),
            rev: u64::from(i),
            value: Some(vec![0xab; size]),
        };
        let (chunks, over) = snapshot_chunks(Vec::new());
        assert_eq!((chunks.len(), chunks[0].len(), over), (1, 0, 0));
        let (chunks, _) = snapshot_chunks((0..1500).map(|i| entry(i, 100)).collect());
        assert_eq!(
            chunks.iter().map(Vec::len).collect::<Vec<_>>(),
            [512, 512, 476]
        );
        let big: Vec<SyncEntry> = (0..40).map(|i| entry(i, 100_000)).collect();
        let (chunks, _) = snapshot_chunks(big);
        for c in &chunks {
            let frame = SyncFrame::Snapshot {
                items: c.clone(),
                last: false,
            }
            .encode()
            .expect("encode");
            assert!(frame.len() <= MAX_FRAME, "{} bytes", frame.len());
        }
        assert_eq!(chunks.iter().map(Vec::len).sum::<usize>(), 40);
        let (chunks, over) = snapshot_chunks(vec![entry(1, MAX_ENTRY_BYTES + 1), entry(2, 1)]);
        assert_eq!((chunks.len(), chunks[0].len(), over), (1, 1, 1));
    }

    #[test]
    fn merge_is_a_commutative_union() {
        let mut a = SyncTable::new();
        let mut b = SyncTable::new();
        let shared = a.upsert(b"d1".to_vec(), b"confirmed".to_vec());
        b.apply(shared);
        let gone = a.upsert(b"d2".to_vec(), b"x".to_vec());
        b.apply(gone);
        // Partition: each side changes things on its own.
        a.upsert(b"a-only".to_vec(), b"1".to_vec());
        b.upsert(b"b-only".to_vec(), b"2".to_vec());
        b.delete(b"d2".to_vec());
        let mut ab = a.clone();
        ab.merge(b.snapshot());
        let mut ba = b.clone();
        ba.merge(a.snapshot());
        assert_eq!(ab.snapshot(), ba.snapshot());
        assert_eq!(ab.get(b"a-only"), Some(&b"1"[..]));
        assert_eq!(ab.get(b"b-only"), Some(&b"2"[..]));
        assert_eq!(ab.get(b"d1"), Some(&b"confirmed"[..]));
        assert_eq!(ab.get(b"d2"), None, "the delete is not undone by the merge");
        assert_eq!(ab.len(), 3);
        ab.compact();
        assert_eq!(ab.snapshot().len(), 3);
    }

    #[test]
    fn revision_is_comparable_between_active_and_standby() {
        let mut active = SyncTable::new();
        let mut standby = SyncTable::new();
        let a = active.upsert(b"d1".to_vec(), b"v".to_vec());
        let b = active.upsert(b"d2".to_vec(), b"v".to_vec());
        let c = active.delete(b"d1".to_vec());
        assert_eq!(active.revision(), 3);
        standby.replace(vec![a]);
        assert_eq!(
            active.revision() - standby.revision(),
            2,
            "two changes behind"
        );
        standby.apply(b);
        standby.apply(c.clone());
        assert_eq!(standby.revision(), active.revision(), "caught up");
        // A stale change does not move it back.
        standby.apply(SyncEntry { rev: 1, ..c });
        assert_eq!(standby.revision(), 3);
    }

    #[test]
    fn stale_updates_are_ignored() {
        let mut t = SyncTable::new();
        assert!(t.apply(SyncEntry {
            key: b"k".to_vec(),
            rev: 5,
            value: Some(b"new".to_vec())
        }));
        assert!(!t.apply(SyncEntry {
            key: b"k".to_vec(),
            rev: 4,
            value: Some(b"old".to_vec())
        }));
        assert_eq!(t.get(b"k"), Some(&b"new"[..]));
        let e = t.upsert(b"k".to_vec(), b"local".to_vec());
        assert_eq!(e.rev, 6, "a local write follows the largest revision seen");
    }
}
