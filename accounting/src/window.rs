//! Which undelivered records the node holds in memory, sans IO: at most a window of them; the
//! rest live in the spool only ("on disk only") and are read back, oldest first, as the window
//! empties. The node reads the files; this decides what to read and what to load.
//!
//! Once one record is on disk only, every newer one is too until the window has caught up: the
//! delivery machine keeps a call's records in order only among what it is given, so a Stop
//! must never be loaded while its Start is still on disk. The cursor is where the records on
//! disk only begin (a segment and an offset in it); every pending record before it is in
//! memory (or held), every one after it on disk only, except records loaded again after the
//! hold ends ([`Window::end_hold`]), which the node's `in_memory` test skips.

use std::collections::HashSet;

use crate::spool::{SpoolLedger, MAX_ENTRY};

/// Undelivered records held in memory, at most (the node's default): about 10 MB of records.
pub const WINDOW: usize = 20_000;

/// Where the records on disk only begin: an entry's offset in a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The segment's number.
    pub segment: u64,
    /// The offset of the first entry not looked at yet.
    pub offset: u64,
}

/// A record entry read from the cursor's segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Its number.
    pub seq: u64,
    /// Where its entry starts in the segment.
    pub offset: u64,
    /// Whether it was replicated to the standby when spooled.
    pub replicated: bool,
}

/// What to read next: `len` bytes (at most) of the cursor's segment from its offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Read {
    /// Where.
    pub at: Cursor,
    /// How many bytes, at most.
    pub len: u64,
}

/// The window and its cursor.
#[derive(Debug)]
pub struct Window {
    limit: usize,
    cursor: Option<Cursor>,
    /// While the node's role is unknown after a start: replicated records numbered below this
    /// are held (not loaded).
    hold_below: Option<u64>,
}

impl Window {
    /// A window of `limit` records (at least 2), with nothing on disk only.
    #[must_use]
    pub fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(2),
            cursor: None,
            hold_below: None,
        }
    }

    /// The most records held in memory.
    #[must_use]
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Where the records on disk only begin, if some are.
    #[must_use]
    pub fn cursor(&self) -> Option<Cursor> {
        self.cursor
    }

    /// After the spool was read back at start ([`SpoolLedger::replay`]): every pending record
    /// is on disk only; with `hold`, the replicated ones among them are held until
    /// [`Self::end_hold`].
    pub fn start(&mut self, ledger: &SpoolLedger, hold: bool) {
        self.cursor = first(ledger, None);
        self.hold_below = hold.then(|| ledger.next_seq());
    }

    /// Whether replicated records read back at start are held.
    #[must_use]
    pub fn holding(&self) -> bool {
        self.hold_below.is_some()
    }

    /// The node's role is known: held records are no longer skipped. With `deliver` (this
    /// node delivers them) the cursor goes back to the oldest pending record, so a refill
    /// loads what was held (the node's `in_memory` test skips what is loaded already);
    /// otherwise the node marked them delivered (handed over).
    pub fn end_hold(&mut self, ledger: &SpoolLedger, deliver: bool) {
        if self.hold_below.take().is_some() && deliver {
            self.cursor = first(ledger, None);
        }
    }

    /// A record just spooled at `offset` of `segment`, with `loaded` records in memory:
    /// whether the node loads it (queues it for delivery) or leaves it on disk only.
    pub fn admit(&mut self, segment: u64, offset: u64, loaded: usize) -> bool {
        if self.cursor.is_some() {
            return false;
        }
        if loaded >= self.limit {
            self.cursor = Some(Cursor { segment, offset });
            return false;
        }
        true
    }

    /// What to read now, with `loaded` records in memory: nothing until the window is half
    /// empty (or nothing is on disk only). A cursor on a segment without pending records (or
    /// gone) moves to the next one first.
    pub fn due(&mut self, ledger: &SpoolLedger, loaded: usize) -> Option<Read> {
        let c = self.cursor?;
        if !ledger.has_pending_in(c.segment) {
            self.cursor = first(ledger, Some(c.segment));
        }
        let at = self.cursor?;
        if loaded > self.limit / 2 {
            return None;
        }
        // About a kilobyte a record with the marks between them, at least two largest
        // entries, at most a segment.
        let room = (self.limit - loaded) as u64;
        let len = room
            .saturating_mul(1024)
            .clamp(2 * (MAX_ENTRY as u64 + 8), 4 * 1024 * 1024);
        Some(Read { at, len })
    }

    /// One read of [`Self::due`]: `candidates` are its record entries in file order (offsets
    /// in the segment), `read_to` the offset after its last whole entry, or `None` when the
    /// read reached the segment's end (or it could not be read). Returns the indices of the candidates to load (pending, not in
    /// memory, not held: at most the window's room), and moves the cursor past what was
    /// looked at, to the next segment holding pending records, or to nothing (caught up).
    pub fn plan(
        &mut self,
        ledger: &SpoolLedger,
        read: Read,
        candidates: &[Candidate],
        read_to: Option<u64>,
        loaded: usize,
        in_memory: impl Fn(u64) -> bool,
    ) -> Vec<usize> {
        if self.cursor != Some(read.at) {
            return Vec::new();
        }
        let room = self.limit.saturating_sub(loaded);
        let mut load = Vec::new();
        let mut seen = HashSet::new();
        for (i, c) in candidates.iter().enumerate() {
            let held = c.replicated && self.hold_below.is_some_and(|h| c.seq < h);
            if held || !ledger.is_pending(c.seq) || in_memory(c.seq) || !seen.insert(c.seq) {
                continue;
            }
            if load.len() >= room {
                self.cursor = Some(Cursor {
                    segment: read.at.segment,
                    offset: c.offset,
                });
                return load;
            }
            load.push(i);
        }
        // No whole entry in a read of two largest ones: the rest is damaged, as at start.
        self.cursor = match read_to {
            Some(offset) if offset > read.at.offset => Some(Cursor {
                segment: read.at.segment,
                offset,
            }),
            _ => first(ledger, Some(read.at.segment)),
        };
        load
    }
}

fn first(ledger: &SpoolLedger, after: Option<u64>) -> Option<Cursor> {
    ledger
        .next_pending_segment(after)
        .map(|segment| Cursor { segment, offset: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spool::Append;

    /// `n` records of 100 bytes appended, 10 to a segment (1,000 bytes): each record's number,
    /// segment and offset.
    fn spool(n: usize) -> (SpoolLedger, Vec<(u64, u64, u64)>) {
        let mut l = SpoolLedger::new(u64::MAX, 1000);
        let recs = (0..n)
            .map(|_| {
                let seq = l.take_seq();
                let Append::To { number, .. } = l.append_record(seq, 100) else {
                    panic!("full")
                };
                (seq, number, l.tail_bytes() - 100)
            })
            .collect();
        (l, recs)
    }

    /// The candidates of a read: the records of its segment from its offset.
    fn read(recs: &[(u64, u64, u64)], r: Read) -> Vec<Candidate> {
        recs.iter()
            .filter(|(_, n, at)| *n == r.at.segment && *at >= r.at.offset)
            .map(|&(seq, _, offset)| Candidate {
                seq,
                offset,
                replicated: false,
            })
            .collect()
    }

    #[test]
    fn beyond_the_window_every_newer_record_stays_on_disk_until_it_caught_up() {
        let (l, recs) = spool(30);
        let mut w = Window::new(4);
        let admitted: Vec<bool> = recs
            .iter()
            .enumerate()
            .map(|(i, &(_, n, at))| w.admit(n, at, i.min(4)))
            .collect();
        assert_eq!(admitted.iter().filter(|a| **a).count(), 4);
        assert!(admitted[..4].iter().all(|a| *a));
        // The fifth (segment 1, offset 400) is the oldest on disk only.
        assert_eq!(
            w.cursor(),
            Some(Cursor {
                segment: 1,
                offset: 400
            })
        );
        // Even with room again, a newer record never overtakes it.
        assert!(!w.admit(3, 900, 0));
        // Not read while the window is more than half full.
        let mut w2 = Window::new(4);
        w2.start(&l, false);
        assert_eq!(w2.due(&l, 3), None);
        assert!(w2.due(&l, 2).is_some());
    }

    #[test]
    fn a_refill_loads_pending_records_in_order_up_to_the_window_and_moves_the_cursor() {
        let (mut l, recs) = spool(30);
        let mut w = Window::new(4);
        let mut memory: Vec<u64> = Vec::new();
        for &(seq, n, at) in &recs {
            if w.admit(n, at, memory.len()) {
                memory.push(seq);
            }
        }
        assert_eq!(memory, vec![1, 2, 3, 4]);
        // Two delivered, and one on disk already delivered (a hand-over).
        for seq in [1, 2, 6] {
            l.delivered(seq);
            memory.retain(|s| *s != seq);
        }
        let mut order = Vec::new();
        for _ in 0..100 {
            let Some(r) = w.due(&l, memory.len()) else {
                // Deliver what is in memory; refill again.
                if w.cursor().is_none() {
                    break;
                }
                for seq in memory.drain(..) {
                    l.delivered(seq);
                }
                continue;
            };
            let c = read(&recs, r);
            // The segment read whole, to its end.
            let load = w.plan(&l, r, &c, None, memory.len(), |s| memory.contains(&s));
            assert!(memory.len() + load.len() <= 4, "the window");
            for i in load {
                memory.push(c[i].seq);
                order.push(c[i].seq);
            }
        }
        assert_eq!(w.cursor(), None, "caught up");
        let expected: Vec<u64> = (5..=30).filter(|s| *s != 6).collect();
        assert_eq!(order, expected, "every pending one once, in order");
        // Caught up: a new record is loaded straight away.
        assert!(w.admit(3, 1000, 0));
    }

    #[test]
    fn a_read_that_stops_mid_segment_resumes_where_it_stopped() {
        let (l, recs) = spool(30);
        let mut w = Window::new(4);
        w.start(&l, false);
        let r = w.due(&l, 0).expect("due");
        assert_eq!(
            r.at,
            Cursor {
                segment: 1,
                offset: 0
            }
        );
        // A short read: the first three entries of segment 1.
        let c = &read(&recs, r)[..3];
        let load = w.plan(&l, r, c, Some(300), 0, |_| false);
        assert_eq!(load, vec![0, 1, 2]);
        assert_eq!(
            w.cursor(),
            Some(Cursor {
                segment: 1,
                offset: 300
            })
        );
        // The window full after one more: the cursor on the record not loaded.
        let r = w.due(&l, 0).expect("due");
        let c = read(&recs, r);
        let load = w.plan(&l, r, &c, None, 3, |_| false);
        assert_eq!(load, vec![0]);
        assert_eq!(
            w.cursor(),
            Some(Cursor {
                segment: 1,
                offset: 400
            })
        );
        // A read with no whole entry in it (damaged): the next segment.
        let r = w.due(&l, 0).expect("due");
        w.plan(&l, r, &[], Some(400), 0, |_| false);
        assert_eq!(
            w.cursor(),
            Some(Cursor {
                segment: 2,
                offset: 0
            })
        );
        // A plan for another read than the cursor's changes nothing.
        assert!(w.plan(&l, r, &c, None, 0, |_| false).is_empty());
        assert_eq!(
            w.cursor(),
            Some(Cursor {
                segment: 2,
                offset: 0
            })
        );
    }

    #[test]
    fn a_cursor_on_a_delivered_or_deleted_segment_moves_on() {
        let (mut l, _) = spool(30);
        let mut w = Window::new(4);
        w.start(&l, false);
        for seq in 1..=20 {
            l.delivered(seq);
        }
        assert_eq!(l.take_deletable(), vec![1, 2]);
        let r = w.due(&l, 0).expect("due");
        assert_eq!(
            r.at,
            Cursor {
                segment: 3,
                offset: 0
            }
        );
        for seq in 21..=30 {
            l.delivered(seq);
        }
        assert_eq!(w.due(&l, 0), None);
        assert_eq!(w.cursor(), None);
    }

    #[test]
    fn held_records_are_skipped_until_the_role_is_known() {
        let (mut l, recs) = spool(10);
        for seq in [2, 5] {
            l.set_replicated(seq);
        }
        let replicated = |seq| seq == 2 || seq == 5;
        let cands = |r: Read| {
            read(&recs, r)
                .into_iter()
                .map(|c| Candidate {
                    replicated: replicated(c.seq),
                    ..c
                })
                .collect::<Vec<_>>()
        };
        let mut w = Window::new(100);
        w.start(&l, true);
        assert!(w.holding());
        let r = w.due(&l, 0).expect("due");
        let c = cands(r);
        let load: Vec<u64> = w
            .plan(&l, r, &c, None, 0, |_| false)
            .into_iter()
            .map(|i| c[i].seq)
            .collect();
        assert_eq!(load, vec![1, 3, 4, 6, 7, 8, 9, 10]);
        assert_eq!(w.cursor(), None);
        // A record spooled after the start is never held.
        let s = l.take_seq();
        l.append_record(s, 100);
        l.set_replicated(s);
        // This node delivers them after all: read again from the oldest, what is in memory
        // skipped.
        w.end_hold(&l, true);
        assert!(!w.holding());
        let r = w.due(&l, 0).expect("due");
        let c = cands(r);
        let load: Vec<u64> = w
            .plan(&l, r, &c, None, 8, |s| load.contains(&s))
            .into_iter()
            .map(|i| c[i].seq)
            .collect();
        assert_eq!(load, vec![2, 5]);
        // Handed over instead: nothing read again.
        let mut w = Window::new(100);
        w.start(&l, true);
        w.end_hold(&l, false);
        assert_eq!(
            w.cursor(),
            Some(Cursor {
                segment: 1,
                offset: 0
            })
        );
        assert!(!w.holding());
    }
}
