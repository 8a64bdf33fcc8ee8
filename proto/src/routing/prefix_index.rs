//! An immutable map from prefixes to runs of entries, walked along a key: every stored prefix
//! of the key is found in one pass over its bytes.
//!
//! It is an FST map (the `fst` crate): the sorted prefixes share their beginnings and their
//! endings, so a million digit prefixes take a few bytes each, and a walk follows one node per
//! byte of the key. Each prefix's value is the run (`start..start + count`) of its entries in a
//! slice the owner keeps sorted by prefix.

use std::ops::Range;

use fst::raw::Output;

/// Prefixes and the run of entries each one has.
pub(crate) struct PrefixIndex {
    map: fst::Map<Vec<u8>>,
}

impl PrefixIndex {
    /// The index of `runs`: each prefix with its run of entries, prefixes in strictly increasing
    /// byte order (the callers build them from sorted, grouped entries, so nothing else reaches
    /// here).
    pub(crate) fn from_sorted<K: AsRef<[u8]>>(
        runs: impl IntoIterator<Item = (K, Range<u32>)>,
    ) -> Self {
        fn build<K: AsRef<[u8]>>(
            runs: impl IntoIterator<Item = (K, Range<u32>)>,
        ) -> fst::Result<fst::Map<Vec<u8>>> {
            let mut builder = fst::MapBuilder::memory();
            for (key, run) in runs {
                builder.insert(
                    key,
                    (u64::from(run.start) << 32) | u64::from(run.end - run.start),
                )?;
            }
            let mut bytes = builder.into_inner()?;
            bytes.shrink_to_fit();
            fst::Map::new(bytes)
        }
        // The only errors are keys out of order or repeated, and a failed write, which a Vec
        // does not have.
        Self {
            map: build(runs).expect("prefixes are given sorted and unique, into memory"),
        }
    }

    /// Calls `found(length, run)` for each stored prefix of `key`, shortest first (the empty
    /// prefix, if stored, matches every key with length 0).
    pub(crate) fn walk(&self, key: &[u8], mut found: impl FnMut(usize, Range<usize>)) {
        let fst = self.map.as_fst();
        let mut node = fst.root();
        let mut out = Output::zero();
        for (len, &byte) in key.iter().enumerate() {
            if node.is_final() {
                found(len, unpack(out.cat(node.final_output())));
            }
            let Some(i) = node.find_input(byte) else {
                return;
            };
            let t = node.transition(i);
            out = out.cat(t.out);
            node = fst.node(t.addr);
        }
        if node.is_final() {
            found(key.len(), unpack(out.cat(node.final_output())));
        }
    }

    /// How many prefixes it holds.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Every prefix with its run, in byte order.
    pub(crate) fn runs(&self) -> Vec<(Vec<u8>, Range<usize>)> {
        use fst::Streamer;
        let mut stream = self.map.stream();
        let mut all = Vec::with_capacity(self.map.len());
        while let Some((key, value)) = stream.next() {
            all.push((key.to_vec(), unpack(Output::new(value))));
        }
        all
    }

    /// The bytes it holds on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.map.as_fst().as_bytes().len()
    }
}

fn unpack(out: Output) -> Range<usize> {
    let value = out.value();
    // Both halves came from u32s.
    let start = (value >> 32) as usize;
    start..start + (value & 0xffff_ffff) as usize
}
