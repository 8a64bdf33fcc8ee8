//! The spool, sans IO: every record is appended to it (and synced) before it is sent, and a
//! mark is appended when a server acknowledged it; after a restart the records without a mark
//! are sent again. This module is the spool's format and its ledger; the node owns the files.
//!
//! The spool is a directory of segment files, `spool-<number>.log`, appended to in order. An
//! entry is `[length u32 LE][CRC-32 u32 LE][bincode]`; a torn entry at the end of a segment
//! (the node died mid-write) ends that segment's reading and is counted. A node never appends
//! to a segment it read back at start, nor to one a write failed in ([`SpoolLedger::seal`]):
//! the next entry opens a new segment, so nothing is ever written after a torn tail. A segment is deleted
//! once every record in it is acknowledged and every older segment is gone, so a mark always
//! lives in the same segment as its record or a later one: replaying the segments in order
//! never takes an acknowledged record for a pending one.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::record::CallRecord;

/// One entry of a segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SpoolEntry {
    /// A record, with the sequence number the spool gave it.
    Record {
        /// Its number in the spool (increasing, never reused while the spool lives).
        seq: u64,
        /// The record.
        record: Box<CallRecord>,
        /// Whether it was replicated to the pair's standby when it was spooled (after a
        /// restart, such a record is the new active's to deliver if this node comes back as
        /// standby).
        replicated: bool,
    },
    /// Record `seq` was acknowledged by an accounting server (or replicated to the peer and
    /// acknowledged there: either way this node need not send it again).
    Delivered {
        /// The record's number.
        seq: u64,
    },
}

/// The largest entry the spool reads back: anything claiming more is a torn or corrupt tail.
pub const MAX_ENTRY: usize = 64 * 1024;

/// An entry's bytes as appended to a segment.
#[must_use]
pub fn encode(entry: &SpoolEntry) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(&mut out, entry);
    out
}

/// Appends an entry's bytes to `out` (no allocation beyond `out`'s growth).
pub fn encode_into(out: &mut Vec<u8>, entry: &SpoolEntry) {
    framed(out, |out| {
        bincode::serde::encode_into_std_write(entry, out, bincode::config::standard()).is_ok()
    });
}

/// [`SpoolEntry::Record`]'s bytes for a record the caller keeps (no copy of it is made): the
/// same bytes as [`encode`] of the owned entry.
#[must_use]
pub fn encode_record(seq: u64, record: &CallRecord, replicated: bool) -> Vec<u8> {
    let mut out = Vec::new();
    encode_record_into(&mut out, seq, record, replicated);
    out
}

/// Appends [`encode_record`]'s bytes to `out`.
pub fn encode_record_into(out: &mut Vec<u8>, seq: u64, record: &CallRecord, replicated: bool) {
    /// The borrowed twin of [`SpoolEntry`]: serde writes a `Box` as its content, so both
    /// encode alike (variant 0, then the fields in order).
    #[derive(Serialize)]
    enum Borrowed<'a> {
        Record {
            seq: u64,
            record: &'a CallRecord,
            replicated: bool,
        },
    }
    let entry = Borrowed::Record {
        seq,
        record,
        replicated,
    };
    framed(out, |out| {
        bincode::serde::encode_into_std_write(&entry, out, bincode::config::standard()).is_ok()
    });
}

/// Appends a frame to `out`: the body's length and CRC-32, then the body `body` writes (an
/// empty one if it fails: writing into memory fails only on a programming error).
fn framed(out: &mut Vec<u8>, body: impl FnOnce(&mut Vec<u8>) -> bool) {
    let at = out.len();
    out.extend_from_slice(&[0; 8]);
    if !body(out) {
        out.truncate(at + 8);
    }
    let len = u32::try_from(out.len() - at - 8).unwrap_or(u32::MAX);
    let crc = crc32fast::hash(&out[at + 8..]);
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    out[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
}

/// What a segment's bytes hold: its whole entries in order, and whether it ended in a torn or
/// corrupt entry (whose bytes, and everything after them, are ignored).
#[must_use]
pub fn decode_segment(bytes: &[u8]) -> (Vec<SpoolEntry>, bool) {
    let mut entries = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let Some((len, crc, body)) = split_entry(rest) else {
            return (entries, true);
        };
        if crc32fast::hash(body) != crc {
            return (entries, true);
        }
        let cfg = bincode::config::standard().with_limit::<MAX_ENTRY>();
        match bincode::serde::decode_from_slice::<SpoolEntry, _>(body, cfg) {
            Ok((e, used)) if used == body.len() => entries.push(e),
            _ => return (entries, true),
        }
        rest = &rest[8 + len..];
    }
    (entries, false)
}

fn split_entry(b: &[u8]) -> Option<(usize, u32, &[u8])> {
    let len = usize::try_from(u32::from_le_bytes(b.get(0..4)?.try_into().ok()?)).ok()?;
    let crc = u32::from_le_bytes(b.get(4..8)?.try_into().ok()?);
    if len > MAX_ENTRY {
        return None;
    }
    Some((len, crc, b.get(8..8 + len)?))
}

/// The name of segment `number`.
#[must_use]
pub fn segment_name(number: u64) -> String {
    format!("spool-{number:010}.log")
}

/// The number of a segment's file name; `None` for another file.
#[must_use]
pub fn segment_number(name: &str) -> Option<u64> {
    name.strip_prefix("spool-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

#[derive(Debug)]
struct Segment {
    number: u64,
    bytes: u64,
    pending: u64,
}

/// What the spool holds: its segments, their sizes and pending records, and where each
/// pending record lives. It decides when a segment is full, when one can be deleted, and
/// whether a record still fits under the bound.
#[derive(Debug)]
pub struct SpoolLedger {
    segments: VecDeque<Segment>,
    /// The last segment takes no more entries (read back at start, or a write failed in it).
    sealed: bool,
    where_: HashMap<u64, u64>,
    next_seq: u64,
    max_bytes: u64,
    segment_bytes: u64,
}

/// What the node does after appending to the spool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Append {
    /// Append the entry to segment `number` (opening it first when `new`).
    To {
        /// The segment's number.
        number: u64,
        /// Whether the segment is new (create its file).
        new: bool,
    },
    /// The spool is full: the record is not kept.
    Full,
}

impl SpoolLedger {
    /// An empty spool bounded at `max_bytes`, cut into segments of about `segment_bytes`.
    #[must_use]
    pub fn new(max_bytes: u64, segment_bytes: u64) -> Self {
        Self {
            segments: VecDeque::new(),
            sealed: false,
            where_: HashMap::new(),
            next_seq: 1,
            max_bytes,
            segment_bytes: segment_bytes.max(1),
        }
    }

    /// Takes in segment `number` as read back at start (`bytes` long): its records pending
    /// until a mark (in it or a later segment) says otherwise. Segments are given in
    /// increasing order; the last one is sealed (new entries go to a new segment).
    pub fn replay(&mut self, number: u64, bytes: u64, entries: &[SpoolEntry]) {
        self.segments.push_back(Segment {
            number,
            bytes,
            pending: 0,
        });
        self.sealed = true;
        for e in entries {
            match e {
                SpoolEntry::Record { seq, .. } => {
                    self.next_seq = self.next_seq.max(seq + 1);
                    if self.where_.insert(*seq, number).is_none() {
                        if let Some(s) = self.segments.back_mut() {
                            s.pending += 1;
                        }
                    }
                }
                SpoolEntry::Delivered { seq } => {
                    self.next_seq = self.next_seq.max(seq + 1);
                    self.delivered(*seq);
                }
            }
        }
    }

    /// The segment being written takes no more entries: the next one opens a new segment
    /// (after a failed write, whose partial bytes the node cut off or could not).
    pub fn seal(&mut self) {
        self.sealed = true;
    }

    /// Forgets `len` bytes counted for the last append (it failed and was cut off).
    pub fn unappend(&mut self, len: u64) {
        if let Some(s) = self.segments.back_mut() {
            s.bytes = s.bytes.saturating_sub(len);
        }
    }

    /// The number the next record takes.
    pub fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Where a record entry of `len` bytes goes; records `seq` as pending there.
    pub fn append_record(&mut self, seq: u64, len: u64) -> Append {
        if self.bytes() + len > self.max_bytes {
            return Append::Full;
        }
        let append = self.append(len);
        if let Append::To { number, .. } = append {
            self.where_.insert(seq, number);
            if let Some(s) = self.segments.back_mut() {
                s.pending += 1;
            }
        }
        append
    }

    /// Where a mark of `len` bytes goes (a mark is written even when the spool is full: it
    /// frees room).
    pub fn append_mark(&mut self, len: u64) -> Append {
        self.append(len)
    }

    fn append(&mut self, len: u64) -> Append {
        let roll = self.sealed
            || self
                .segments
                .back()
                .is_none_or(|s| s.bytes > 0 && s.bytes + len > self.segment_bytes);
        if roll {
            self.sealed = false;
            let number = self.segments.back().map_or(1, |s| s.number + 1);
            self.segments.push_back(Segment {
                number,
                bytes: len,
                pending: 0,
            });
            return Append::To { number, new: true };
        }
        let Some(s) = self.segments.back_mut() else {
            return Append::Full;
        };
        s.bytes += len;
        Append::To {
            number: s.number,
            new: false,
        }
    }

    /// Record `seq` was acknowledged: it is no longer pending. Returns whether it was.
    pub fn delivered(&mut self, seq: u64) -> bool {
        let Some(number) = self.where_.remove(&seq) else {
            return false;
        };
        if let Some(s) = self.segments.iter_mut().find(|s| s.number == number) {
            s.pending = s.pending.saturating_sub(1);
        }
        true
    }

    /// The segments that can be deleted now, oldest first (never the one being written).
    pub fn take_deletable(&mut self) -> Vec<u64> {
        let mut out = Vec::new();
        while self.segments.len() > 1 && self.segments.front().is_some_and(|s| s.pending == 0) {
            if let Some(s) = self.segments.pop_front() {
                out.push(s.number);
            }
        }
        out
    }

    /// Bytes the spool holds.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// Records not yet acknowledged.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.where_.len()
    }

    /// Segment files.
    #[must_use]
    pub fn segments(&self) -> usize {
        self.segments.len()
    }

    /// The bound, in bytes.
    #[must_use]
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{sample, RecordKind};

    #[test]
    fn entries_read_back_and_a_torn_tail_is_cut_off() {
        let a = SpoolEntry::Record {
            seq: 1,
            record: Box::new(sample(RecordKind::Start)),
            replicated: false,
        };
        let b = SpoolEntry::Delivered { seq: 1 };
        assert_eq!(
            encode_record(1, &sample(RecordKind::Start), false),
            encode(&a),
            "the borrowed form encodes as the owned one"
        );
        let mut bytes = encode(&a);
        bytes.extend(encode(&b));
        assert_eq!(decode_segment(&bytes), (vec![a.clone(), b], false));
        let whole = encode(&a).len();
        let torn = &bytes[..whole + 5];
        assert_eq!(decode_segment(torn), (vec![a.clone()], true));
        let mut flipped = bytes.clone();
        flipped[whole - 1] ^= 1;
        assert_eq!(decode_segment(&flipped), (vec![], true));
        assert_eq!(segment_number(&segment_name(42)), Some(42));
    }

    #[test]
    fn a_segment_goes_once_its_records_and_every_older_one_are_delivered() {
        let mut l = SpoolLedger::new(10_000, 100);
        let mut seqs = Vec::new();
        for _ in 0..4 {
            let seq = l.take_seq();
            seqs.push(seq);
            let at = l.append_record(seq, 60);
            assert!(matches!(at, Append::To { .. }));
        }
        // 60 bytes each, 100 per segment: one record per segment.
        assert_eq!(l.segments(), 4);
        assert!(l.delivered(seqs[1]));
        assert!(!l.delivered(seqs[1]), "once");
        assert!(
            l.take_deletable().is_empty(),
            "segment 1 still holds a pending record"
        );
        l.delivered(seqs[0]);
        assert_eq!(l.take_deletable(), vec![1, 2]);
        l.delivered(seqs[2]);
        l.delivered(seqs[3]);
        assert_eq!(
            l.take_deletable(),
            vec![3],
            "never the segment being written"
        );
        assert_eq!(l.pending(), 0);
    }

    #[test]
    fn a_full_spool_refuses_records_and_takes_marks() {
        let mut l = SpoolLedger::new(100, 1000);
        let s = l.take_seq();
        assert!(matches!(
            l.append_record(s, 90),
            Append::To { new: true, .. }
        ));
        let t = l.take_seq();
        assert_eq!(l.append_record(t, 20), Append::Full);
        assert!(matches!(l.append_mark(12), Append::To { new: false, .. }));
    }

    #[test]
    fn a_replay_keeps_what_no_mark_delivered_and_never_appends_to_what_it_read() {
        let mut l = SpoolLedger::new(10_000, 1000);
        let entries = vec![
            SpoolEntry::Record {
                seq: 7,
                record: Box::new(sample(RecordKind::Start)),
                replicated: false,
            },
            SpoolEntry::Record {
                seq: 8,
                record: Box::new(sample(RecordKind::Stop)),
                replicated: true,
            },
        ];
        l.replay(3, 500, &entries);
        // A mark in a later segment.
        l.replay(4, 20, &[SpoolEntry::Delivered { seq: 7 }]);
        assert_eq!(l.take_seq(), 9);
        assert_eq!(l.pending(), 1);
        // Never appended to a segment read back (a torn tail may end it): a new one.
        assert!(matches!(
            l.append_record(9, 10),
            Append::To {
                number: 5,
                new: true
            }
        ));
        assert!(matches!(
            l.append_record(10, 10),
            Append::To {
                number: 5,
                new: false
            }
        ));
        l.seal();
        assert!(matches!(
            l.append_mark(10),
            Append::To {
                number: 6,
                new: true
            }
        ));
    }
}
