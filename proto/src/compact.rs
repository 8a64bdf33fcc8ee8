//! Giving memory back after a burst: Rust's collections keep their capacity when emptied, so a
//! table that once held 10,000 transactions holds their room for good. [`Compact::compact`]
//! shrinks a collection that uses less than a quarter of its room to twice what it holds (an
//! empty one to nothing), so a steady load never reallocates and a finished burst is returned.
//! Small tables count too: 64 shards each keeping room for a few dozen transactions of a few
//! hundred bytes were most of what a node kept after a burst (seen with jemalloc's heap profile).

use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hash};

/// Capacities up to this are kept whatever the length (a few entries: not worth reallocating).
const KEEP: usize = 4;

fn oversized(len: usize, capacity: usize) -> bool {
    capacity > KEEP && capacity > len.saturating_mul(4)
}

fn target(len: usize) -> usize {
    len.saturating_mul(2)
}

/// A collection that can give back spare capacity.
pub(crate) trait Compact {
    /// Shrinks the collection when it uses under a quarter of its capacity.
    fn compact(&mut self);
}

impl<K: Eq + Hash, V, S: BuildHasher> Compact for HashMap<K, V, S> {
    fn compact(&mut self) {
        if oversized(self.len(), self.capacity()) {
            self.shrink_to(target(self.len()));
        }
    }
}

impl<K: Eq + Hash, S: BuildHasher> Compact for HashSet<K, S> {
    fn compact(&mut self) {
        if oversized(self.len(), self.capacity()) {
            self.shrink_to(target(self.len()));
        }
    }
}

impl<T> Compact for VecDeque<T> {
    fn compact(&mut self) {
        if oversized(self.len(), self.capacity()) {
            self.shrink_to(target(self.len()));
        }
    }
}

impl<T: Ord> Compact for BinaryHeap<T> {
    fn compact(&mut self) {
        if oversized(self.len(), self.capacity()) {
            self.shrink_to(target(self.len()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_burst_is_given_back_and_a_steady_table_is_left_alone() {
        let mut m: HashMap<u64, u64> = (0..10_000).map(|i| (i, i)).collect();
        m.retain(|k, _| *k < 10);
        let before = m.capacity();
        m.compact();
        assert!(
            m.capacity() < before / 100,
            "{} -> {}",
            before,
            m.capacity()
        );
        assert_eq!(m.len(), 10);
        // Half full: kept.
        let mut steady: HashMap<u64, u64> = (0..1000).map(|i| (i, i)).collect();
        steady.retain(|k, _| *k < 600);
        let cap = steady.capacity();
        steady.compact();
        assert_eq!(steady.capacity(), cap);
        let mut q: VecDeque<u32> = (0..5000).collect();
        q.clear();
        q.compact();
        assert!(q.capacity() <= KEEP);
    }
}
