//! Hashers for the maps of the accounting thread, whose keys are numbers already: spool
//! numbers (counted up from 1) and record or session ids (keyed hashes, the node's). Neither
//! needs hashing again with SipHash, which the thread paid four times per record.

use std::hash::{BuildHasher, Hasher};

/// For keys that are keyed hashes already (a record's or a session's id): taken as they are.
#[derive(Debug, Clone, Copy, Default)]
pub struct IdHash;

impl BuildHasher for IdHash {
    type Hasher = NumberHasher<false>;
    fn build_hasher(&self) -> Self::Hasher {
        NumberHasher(0)
    }
}

/// For keys counted up (spool numbers): multiplied by the golden ratio, so that the bits a
/// table looks at first (the high ones) differ between neighbours.
#[derive(Debug, Clone, Copy, Default)]
pub struct SeqHash;

impl BuildHasher for SeqHash {
    type Hasher = NumberHasher<true>;
    fn build_hasher(&self) -> Self::Hasher {
        NumberHasher(0)
    }
}

/// The hasher of [`IdHash`] and [`SeqHash`] (`SPREAD`: the latter's multiplication).
#[derive(Debug, Clone, Copy, Default)]
pub struct NumberHasher<const SPREAD: bool>(u64);

impl<const SPREAD: bool> Hasher for NumberHasher<SPREAD> {
    fn finish(&self) -> u64 {
        if SPREAD {
            self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        } else {
            self.0
        }
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u64s are hashed with these; anything else is folded in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A record's id from its session's keyed hash, its kind's number and its interim number:
/// one bijective mix of their sum, so two records of one session never share an id, and
/// records of different sessions do only as two keyed 64-bit hashes would.
#[must_use]
pub fn record_id(session: u64, kind: u32, interim: u32) -> u64 {
    let mut z = session ^ (u64::from(interim) << 2 | u64::from(kind & 3));
    // splitmix64's finaliser (a bijection of u64).
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    #[test]
    fn the_records_of_one_session_have_distinct_ids() {
        let mut ids = HashSet::new();
        for session in [0u64, 1, u64::MAX, 0x1234_5678_9abc_def0] {
            for kind in 1..=3 {
                for interim in 0..1000 {
                    assert!(ids.insert((session, record_id(session, kind, interim))));
                }
            }
        }
    }

    #[test]
    fn maps_with_either_hasher_behave_as_maps() {
        let mut by_seq: HashMap<u64, u64, SeqHash> = HashMap::default();
        let mut by_id: HashMap<u64, u64, IdHash> = HashMap::default();
        for n in 1..=10_000u64 {
            by_seq.insert(n, n * 2);
            by_id.insert(record_id(n, 2, 0), n);
        }
        for n in (1..=10_000u64).step_by(2) {
            assert_eq!(by_seq.remove(&n), Some(n * 2));
            assert_eq!(by_id.remove(&record_id(n, 2, 0)), Some(n));
        }
        assert_eq!((by_seq.len(), by_id.len()), (5000, 5000));
        assert_eq!(by_seq.get(&2), Some(&4));
    }
}
