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

/// Every whole entry of a segment's bytes with the offset it starts at, in order; stops at a
/// torn or corrupt entry (then [`Entries::torn`] says so). The lazy twin of
/// [`decode_segment`]: a refill keeps only the records it loads.
#[derive(Debug)]
pub struct Entries<'a> {
    bytes: &'a [u8],
    at: usize,
    torn: bool,
}

/// The entries of `bytes` (a segment, or its tail from an entry's start).
#[must_use]
pub fn entries(bytes: &[u8]) -> Entries<'_> {
    Entries {
        bytes,
        at: 0,
        torn: false,
    }
}

impl Entries<'_> {
    /// Whether the reading stopped at a torn or corrupt entry.
    #[must_use]
    pub fn torn(&self) -> bool {
        self.torn
    }

    /// The offset after the last whole entry read.
    #[must_use]
    pub fn offset(&self) -> usize {
        self.at
    }
}

impl Iterator for Entries<'_> {
    type Item = (usize, SpoolEntry);

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.bytes.get(self.at..)?;
        if rest.is_empty() || self.torn {
            return None;
        }
        let Some((len, crc, body)) = split_entry(rest) else {
            self.torn = true;
            return None;
        };
        if crc32fast::hash(body) != crc {
            self.torn = true;
            return None;
        }
        let cfg = bincode::config::standard().with_limit::<MAX_ENTRY>();
        match bincode::serde::decode_from_slice::<SpoolEntry, _>(body, cfg) {
            Ok((e, used)) if used == body.len() => {
                let at = self.at;
                self.at += 8 + len;
                Some((at, e))
            }
            _ => {
                self.torn = true;
                None
            }
        }
    }
}

/// The widest gap of numbers inside one segment's bitset: a record further from the segment's
/// last one (only a damaged or hand-made spool has such) is kept aside, by number.
const MAX_GAP: u64 = 1 << 16;

#[derive(Debug)]
struct Segment {
    number: u64,
    bytes: u64,
    pending: u64,
    /// The numbers its bitsets cover: `first..end` (empty until its first record).
    first: u64,
    end: u64,
    /// Its pending records: bit `seq - first`.
    bits: Vec<u64>,
    /// Its records replicated to the standby when spooled (same layout; only meaningful for
    /// pending ones).
    replicated: Vec<u64>,
}

impl Segment {
    fn new(number: u64, bytes: u64, at: u64) -> Self {
        Self {
            number,
            bytes,
            pending: 0,
            first: at,
            end: at,
            bits: Vec::new(),
            replicated: Vec::new(),
        }
    }

    /// The word and mask of `seq`'s bit, if it is in the range.
    fn bit(&self, seq: u64) -> Option<(usize, u64)> {
        if seq < self.first || seq >= self.end {
            return None;
        }
        let i = seq - self.first;
        Some((usize::try_from(i / 64).ok()?, 1u64 << (i % 64)))
    }

    fn get(words: &[u64], at: Option<(usize, u64)>) -> bool {
        at.is_some_and(|(w, m)| words.get(w).is_some_and(|x| x & m != 0))
    }

    fn set(words: &mut Vec<u64>, (w, m): (usize, u64)) {
        if words.len() <= w {
            words.resize(w + 1, 0);
        }
        words[w] |= m;
    }

    fn clear(words: &mut [u64], (w, m): (usize, u64)) {
        if let Some(x) = words.get_mut(w) {
            *x &= !m;
        }
    }
}

/// What the spool holds: its segments, their sizes and which of their records are pending
/// (a bitset per segment over its range of numbers: a record's number is taken when it is
/// appended, so a segment's records have increasing numbers, above every older segment's). It
/// decides when a segment is full, when one can be deleted, and whether a record still fits
/// under the bound. Seventeen million pending records cost 2 to 4 MB.
#[derive(Debug)]
pub struct SpoolLedger {
    segments: VecDeque<Segment>,
    /// The last segment takes no more entries (read back at start, or a write failed in it).
    sealed: bool,
    /// Pending records out of their segment's order (a damaged or hand-made spool): their
    /// segment and whether they were replicated.
    odd: HashMap<u64, (u64, bool)>,
    /// One past the highest number in any segment's bitset.
    bits_end: u64,
    pending: usize,
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
            odd: HashMap::new(),
            bits_end: 0,
            pending: 0,
            next_seq: 1,
            max_bytes,
            segment_bytes: segment_bytes.max(1),
        }
    }

    /// Takes in segment `number` as read back at start (`bytes` long): its records pending
    /// until a mark (in it or a later segment) says otherwise. Segments are given in
    /// increasing order; the last one is sealed (new entries go to a new segment).
    pub fn replay(&mut self, number: u64, bytes: u64, entries: &[SpoolEntry]) {
        self.replay_segment(number, bytes);
        for e in entries {
            self.replay_entry(e);
        }
    }

    /// Starts taking in segment `number` as read back at start (`bytes` long); its entries
    /// follow through [`Self::replay_entry`]. Segments are given in increasing order.
    pub fn replay_segment(&mut self, number: u64, bytes: u64) {
        self.close_tail();
        self.segments
            .push_back(Segment::new(number, bytes, self.bits_end));
        self.sealed = true;
    }

    /// One entry of the segment being read back ([`Self::replay_segment`]).
    pub fn replay_entry(&mut self, e: &SpoolEntry) {
        match e {
            SpoolEntry::Record {
                seq, replicated, ..
            } => {
                self.next_seq = self.next_seq.max(seq.saturating_add(1));
                self.add(*seq, *replicated);
            }
            SpoolEntry::Delivered { seq } => {
                self.next_seq = self.next_seq.max(seq.saturating_add(1));
                self.delivered(*seq);
            }
        }
    }

    /// Counts record `seq` pending in the last segment (once: a number already pending is
    /// not counted again).
    fn add(&mut self, seq: u64, replicated: bool) {
        if self.is_pending(seq) {
            return;
        }
        let bits_end = self.bits_end;
        let Some(s) = self.segments.back_mut() else {
            return;
        };
        let empty = s.first == s.end;
        if seq >= bits_end && seq < u64::MAX && (empty || seq - s.end <= MAX_GAP) {
            if empty {
                s.first = seq;
                s.bits.clear();
                s.replicated.clear();
            }
            s.end = seq + 1;
            self.bits_end = seq + 1;
            if let Some(at) = s.bit(seq) {
                Segment::set(&mut s.bits, at);
                if replicated {
                    Segment::set(&mut s.replicated, at);
                }
            }
        } else {
            self.odd.insert(seq, (s.number, replicated));
        }
        s.pending += 1;
        self.pending += 1;
    }

    /// The last segment takes no more records: its bitsets shrink to what they hold.
    fn close_tail(&mut self) {
        if let Some(s) = self.segments.back_mut() {
            s.bits.shrink_to_fit();
            s.replicated.shrink_to_fit();
        }
    }

    /// The segment whose range holds `seq`, by binary search.
    fn find(&self, seq: u64) -> Option<usize> {
        let i = self.segments.partition_point(|s| s.end <= seq);
        self.segments
            .get(i)
            .is_some_and(|s| s.first <= seq && seq < s.end)
            .then_some(i)
    }

    /// Whether record `seq` is in the spool and not yet acknowledged.
    #[must_use]
    pub fn is_pending(&self, seq: u64) -> bool {
        if self.odd.contains_key(&seq) {
            return true;
        }
        self.find(seq)
            .and_then(|i| self.segments.get(i))
            .is_some_and(|s| Segment::get(&s.bits, s.bit(seq)))
    }

    /// Notes that pending record `seq` was replicated to the standby (a new active delivers
    /// it if this node hands over: [`Self::replicated_pending`]).
    pub fn set_replicated(&mut self, seq: u64) {
        if let Some((_, r)) = self.odd.get_mut(&seq) {
            *r = true;
            return;
        }
        if let Some(s) = self.find(seq).and_then(|i| self.segments.get_mut(i)) {
            if let Some(at) = s.bit(seq).filter(|at| Segment::get(&s.bits, Some(*at))) {
                Segment::set(&mut s.replicated, at);
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
        self.next_seq = self.next_seq.saturating_add(1);
        seq
    }

    /// The number the next record will take.
    #[must_use]
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Where a record entry of `len` bytes goes; records `seq` as pending there. A record
    /// refused (the spool is full) gives its number back when it was the last taken, so a
    /// long full spool leaves no gap of numbers.
    pub fn append_record(&mut self, seq: u64, len: u64) -> Append {
        if self.bytes() + len > self.max_bytes {
            if seq.saturating_add(1) == self.next_seq {
                self.next_seq = seq;
            }
            return Append::Full;
        }
        let append = self.append(len);
        if let Append::To { .. } = append {
            self.add(seq, false);
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
            self.close_tail();
            self.segments
                .push_back(Segment::new(number, len, self.bits_end));
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
        let i = if let Some((number, _)) = self.odd.remove(&seq) {
            let i = self.segments.partition_point(|s| s.number < number);
            if self.segments.get(i).is_none_or(|s| s.number != number) {
                self.pending = self.pending.saturating_sub(1);
                return true;
            }
            i
        } else {
            let Some(i) = self.find(seq) else {
                return false;
            };
            let Some(s) = self.segments.get_mut(i) else {
                return false;
            };
            let Some(at) = s.bit(seq).filter(|at| Segment::get(&s.bits, Some(*at))) else {
                return false;
            };
            Segment::clear(&mut s.bits, at);
            Segment::clear(&mut s.replicated, at);
            i
        };
        if let Some(s) = self.segments.get_mut(i) {
            s.pending = s.pending.saturating_sub(1);
            if s.pending == 0 {
                // Nothing of it to look up any more: its bitsets' memory goes.
                s.bits = Vec::new();
                s.replicated = Vec::new();
            }
        }
        self.pending = self.pending.saturating_sub(1);
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

    /// The first segment after segment `after` (from the oldest with `None`) that holds a
    /// pending record.
    #[must_use]
    pub fn next_pending_segment(&self, after: Option<u64>) -> Option<u64> {
        let from = after.map_or(0, |n| self.segments.partition_point(|s| s.number <= n));
        self.segments
            .range(from..)
            .find(|s| s.pending > 0)
            .map(|s| s.number)
    }

    /// Whether segment `number` exists and holds a pending record.
    #[must_use]
    pub fn has_pending_in(&self, number: u64) -> bool {
        let i = self.segments.partition_point(|s| s.number < number);
        self.segments
            .get(i)
            .is_some_and(|s| s.number == number && s.pending > 0)
    }

    /// Up to `max` pending records that were replicated to the standby, oldest first.
    #[must_use]
    pub fn replicated_pending(&self, max: usize) -> Vec<u64> {
        let mut out: Vec<u64> = self
            .odd
            .iter()
            .filter(|(_, (_, r))| *r)
            .map(|(seq, _)| *seq)
            .collect();
        out.sort_unstable();
        out.truncate(max);
        for s in &self.segments {
            if out.len() >= max {
                break;
            }
            for (w, (p, r)) in s.bits.iter().zip(&s.replicated).enumerate() {
                let mut both = p & r;
                while both != 0 && out.len() < max {
                    let b = u64::from(both.trailing_zeros());
                    both &= both - 1;
                    out.push(s.first + w as u64 * 64 + b);
                }
            }
        }
        out
    }

    /// Pending records that were replicated to the standby.
    #[must_use]
    pub fn replicated_pending_count(&self) -> usize {
        let odd = self.odd.values().filter(|(_, r)| *r).count();
        let bits: u64 = self
            .segments
            .iter()
            .flat_map(|s| s.bits.iter().zip(&s.replicated))
            .map(|(p, r)| u64::from((p & r).count_ones()))
            .sum();
        odd + usize::try_from(bits).unwrap_or(usize::MAX)
    }

    /// Bytes of the segment being written.
    #[must_use]
    pub fn tail_bytes(&self) -> u64 {
        self.segments.back().map_or(0, |s| s.bytes)
    }

    /// Bytes the spool holds.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// Records not yet acknowledged.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.pending
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

    /// `n` records of 10 bytes each appended, 100 to a segment (1,000 bytes); their numbers.
    fn filled(n: usize) -> (SpoolLedger, Vec<u64>) {
        let mut l = SpoolLedger::new(u64::MAX, 1000);
        let seqs = (0..n)
            .map(|_| {
                let seq = l.take_seq();
                assert!(matches!(l.append_record(seq, 10), Append::To { .. }));
                seq
            })
            .collect();
        (l, seqs)
    }

    #[test]
    fn the_compact_ledger_counts_and_finds_records_across_many_segments() {
        let (mut l, seqs) = filled(1000);
        assert_eq!((l.segments(), l.pending(), l.bytes()), (10, 1000, 10_000));
        assert!(l.is_pending(seqs[0]) && l.is_pending(seqs[999]));
        // Numbers in no segment: never pending, never delivered.
        for seq in [0, seqs[999] + 1, u64::MAX] {
            assert!(!l.is_pending(seq));
            assert!(!l.delivered(seq), "{seq}");
        }
        // Segments 1 to 3 delivered but one record of segment 2.
        for &seq in &seqs[..300] {
            if seq != seqs[150] {
                assert!(l.delivered(seq));
            }
        }
        assert!(!l.delivered(seqs[0]), "once");
        assert_eq!(l.pending(), 701);
        assert_eq!(l.take_deletable(), vec![1]);
        assert_eq!(l.next_pending_segment(None), Some(2));
        assert_eq!(l.next_pending_segment(Some(2)), Some(4));
        assert!(l.has_pending_in(2) && !l.has_pending_in(3) && !l.has_pending_in(1));
        assert!(l.delivered(seqs[150]));
        assert_eq!(l.take_deletable(), vec![2, 3]);
        for &seq in &seqs[300..] {
            assert!(l.delivered(seq));
        }
        assert_eq!(l.pending(), 0);
        assert_eq!(
            l.take_deletable(),
            (4..10).collect::<Vec<_>>(),
            "not the last"
        );
        assert_eq!(l.next_pending_segment(None), None);
    }

    #[test]
    fn a_pending_record_costs_about_a_bit() {
        let (l, _) = filled(100_000);
        let words: usize = l.segments.iter().map(|s| s.bits.len()).sum();
        // 1,000 segments of 100 records: two words each.
        assert!(words <= 2 * l.segments(), "{words} words");
        assert!(l.odd.is_empty());
    }

    #[test]
    fn replicated_records_are_found_without_reading_the_segments() {
        let (mut l, seqs) = filled(300);
        for &seq in &[seqs[3], seqs[150], seqs[299]] {
            l.set_replicated(seq);
        }
        l.set_replicated(seqs[299] + 5);
        assert_eq!(l.replicated_pending_count(), 3);
        assert_eq!(l.replicated_pending(2), vec![seqs[3], seqs[150]]);
        l.delivered(seqs[150]);
        assert_eq!(l.replicated_pending(10), vec![seqs[3], seqs[299]]);
        assert_eq!(l.replicated_pending_count(), 2);
    }

    #[test]
    fn records_out_of_order_in_a_damaged_spool_are_kept_aside_and_counted() {
        let rec = |seq, replicated| SpoolEntry::Record {
            seq,
            record: Box::new(sample(RecordKind::Start)),
            replicated,
        };
        let mut l = SpoolLedger::new(u64::MAX, 1000);
        // Decreasing, far apart, and one twice.
        l.replay(1, 100, &[rec(10, false), rec(11, true), rec(5, false)]);
        l.replay(
            2,
            100,
            &[rec(12, false), rec(500_000, true), rec(11, false)],
        );
        assert_eq!(l.pending(), 5);
        assert_eq!(l.replicated_pending_count(), 2);
        assert!(l.is_pending(5) && l.is_pending(500_000));
        assert!(l.delivered(5) && l.delivered(10) && l.delivered(11));
        assert!(!l.delivered(5));
        assert_eq!(l.take_deletable(), vec![1]);
        assert!(l.delivered(500_000) && l.delivered(12));
        assert_eq!(l.pending(), 0);
        assert_eq!(l.take_seq(), 500_001);
        // The largest number a file can hold: kept aside, nothing overflows.
        let mut m = SpoolLedger::new(u64::MAX, 1000);
        m.replay(1, 100, &[rec(u64::MAX, true), rec(u64::MAX - 1, false)]);
        assert_eq!((m.pending(), m.replicated_pending_count()), (2, 1));
        assert_eq!(m.take_seq(), u64::MAX);
        assert!(m.delivered(u64::MAX) && m.delivered(u64::MAX - 1));
        // A new segment after the odd ones: its numbers in a bitset again.
        let s = l.take_seq();
        assert!(matches!(
            l.append_record(s, 10),
            Append::To {
                number: 3,
                new: true
            }
        ));
        assert!(l.is_pending(s) && l.odd.is_empty());
    }

    #[test]
    fn a_refused_record_gives_its_number_back() {
        let mut l = SpoolLedger::new(100, 1000);
        let s = l.take_seq();
        assert!(matches!(l.append_record(s, 90), Append::To { .. }));
        for _ in 0..1000 {
            let t = l.take_seq();
            assert_eq!(l.append_record(t, 20), Append::Full);
        }
        assert_eq!(l.take_seq(), s + 1);
    }

    #[test]
    fn entries_come_with_their_offsets_and_stop_at_a_torn_one() {
        let a = encode(&SpoolEntry::Delivered { seq: 1 });
        let b = encode_record(2, &sample(RecordKind::Stop), true);
        let mut bytes = a.clone();
        bytes.extend(&b);
        bytes.extend(&a[..5]);
        let mut it = entries(&bytes);
        assert_eq!(it.next().map(|(at, _)| at), Some(0));
        assert!(
            matches!(it.next(), Some((at, SpoolEntry::Record { seq: 2, .. })) if at == a.len())
        );
        assert_eq!(it.next(), None);
        assert!(it.torn());
        assert_eq!(it.offset(), a.len() + b.len());
        // From an entry's start, as a refill reads.
        assert_eq!(entries(&bytes[a.len()..]).count(), 1);
    }

    /// A small deterministic generator (no clock, no crate).
    fn lcg(state: &mut u64) -> u64 {
        *state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *state >> 33
    }

    #[test]
    fn the_ledger_agrees_with_a_map_of_every_pending_record() {
        let mut rng = 7u64;
        let mut l = SpoolLedger::new(200_000, 2_000);
        // Record → its segment, as the per-record map the ledger replaced would say.
        let mut model: HashMap<u64, u64> = HashMap::new();
        let mut taken = Vec::new();
        for round in 0..20_000 {
            match lcg(&mut rng) % 10 {
                0..=4 => {
                    let seq = l.take_seq();
                    if let Append::To { number, .. } =
                        l.append_record(seq, 20 + lcg(&mut rng) % 200)
                    {
                        model.insert(seq, number);
                        taken.push(seq);
                    }
                }
                5..=8 => {
                    // A record taken (pending or not), or a number never taken.
                    let seq = if taken.is_empty() || lcg(&mut rng).is_multiple_of(8) {
                        lcg(&mut rng) % 100_000
                    } else {
                        taken[usize::try_from(lcg(&mut rng)).unwrap_or(0) % taken.len()]
                    };
                    assert_eq!(l.delivered(seq), model.remove(&seq).is_some(), "{seq}");
                    let _ = l.append_mark(12);
                }
                _ => {
                    if round % 7 == 0 {
                        l.seal();
                    }
                    for n in l.take_deletable() {
                        assert!(model.values().all(|m| *m != n), "segment {n} still pending");
                    }
                }
            }
            assert_eq!(l.pending(), model.len());
        }
        for seq in taken {
            assert_eq!(l.is_pending(seq), model.contains_key(&seq));
        }
        assert!(l.odd.is_empty(), "appended records are always in order");
    }

    #[test]
    fn a_replay_of_any_numbers_agrees_with_a_map() {
        let mut rng = 11u64;
        let mut l = SpoolLedger::new(u64::MAX, 1000);
        let mut model: HashMap<u64, u64> = HashMap::new();
        for n in 1..=50 {
            let entries: Vec<SpoolEntry> = (0..40)
                .map(|_| {
                    // Mostly increasing numbers, some far, some back, some twice.
                    let seq = match lcg(&mut rng) % 10 {
                        0 => lcg(&mut rng) % 10_000_000,
                        1 => lcg(&mut rng) % (n * 40 + 1),
                        _ => n * 40 + lcg(&mut rng) % 40,
                    };
                    if lcg(&mut rng).is_multiple_of(3) {
                        SpoolEntry::Delivered { seq }
                    } else {
                        SpoolEntry::Record {
                            seq,
                            record: Box::new(sample(RecordKind::Start)),
                            replicated: seq % 2 == 0,
                        }
                    }
                })
                .collect();
            for e in &entries {
                match e {
                    SpoolEntry::Record { seq, .. } => {
                        model.entry(*seq).or_insert(n);
                    }
                    SpoolEntry::Delivered { seq } => {
                        model.remove(seq);
                    }
                }
            }
            l.replay(n, 100, &entries);
            assert_eq!(l.pending(), model.len());
        }
        for seq in model.keys() {
            assert!(l.is_pending(*seq));
        }
        let replicated = model.keys().filter(|s| *s % 2 == 0).count();
        assert_eq!(l.replicated_pending_count(), replicated);
        // Delivered in any order, every segment goes but the last.
        let mut seqs: Vec<u64> = model.keys().copied().collect();
        seqs.sort_unstable_by_key(|s| s.wrapping_mul(2_654_435_761) % 1_000_003);
        for seq in seqs {
            assert!(l.delivered(seq));
        }
        assert_eq!(l.pending(), 0);
        assert_eq!(l.take_deletable().len(), 49);
    }
}
