//! Generated identifiers: tags, Via branches, call ids and the core leg's Call-ID, and the
//! Retry-After of a refusal, all drawn from one ChaCha20 stream given at construction.
//!
//! Tags and branches are what an off-path attacker would have to guess to forge a BYE or a
//! CANCEL, so in production the stream is seeded from the operating system and is
//! cryptographically strong; in tests it is seeded with a constant, so a failing case replays
//! exactly.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::shard;

/// Prefix of every Via branch the SBC generates (after the RFC 3261 magic cookie).
pub const BRANCH_PREFIX: &str = "z9hG4bKsbc";

/// The engine's source of identifiers.
#[derive(Debug)]
pub(super) struct Ids {
    rng: ChaCha20Rng,
    /// The shard this engine serves, folded into generated Call-IDs.
    shard: u64,
}

impl Ids {
    /// A source for shard `shard`, from a 32-byte seed.
    pub(super) fn new(seed: [u8; 32], shard: u64) -> Self {
        Self {
            rng: ChaCha20Rng::from_seed(seed),
            shard,
        }
    }

    /// A From/To tag: 64 random bits in hex.
    /// A random 64-bit value (a registration binding's token).
    pub(super) fn token_value(&mut self) -> u64 {
        self.rng.next_u64()
    }

    pub(super) fn tag(&mut self) -> String {
        format!("{:016x}", self.rng.next_u64())
    }

    /// A Via branch: the RFC 3261 magic cookie, our prefix, 64 random bits.
    pub(super) fn branch(&mut self) -> String {
        format!("{BRANCH_PREFIX}{:016x}", self.rng.next_u64())
    }

    /// A call id, never 0 and never one of `taken`: random, so it stays unique across shards
    /// and across the pair (state sync).
    pub(super) fn call_id(&mut self, taken: impl Fn(u64) -> bool) -> u64 {
        loop {
            let id = self.rng.next_u64();
            if id != 0 && !taken(id) {
                return id;
            }
        }
    }

    /// The core leg's Call-ID for a call whose access-side Call-ID has shard key `key` (see
    /// [`shard::b2b_call_id`]).
    pub(super) fn b2b_call_id(&mut self, key: u64) -> String {
        shard::b2b_call_id(key, self.rng.next_u64() ^ (self.shard << 56))
    }

    /// An SDP origin session id (RFC 4566 §5.2: numeric; below 2^63 so that it fits a signed
    /// 64-bit integer, as some parsers require).
    pub(super) fn sdp_session_id(&mut self) -> u64 {
        self.rng.next_u64() >> 1
    }

    /// The shard this engine serves.
    pub(super) fn shard(&self) -> u64 {
        self.shard
    }

    /// A Retry-After drawn in `[min, max]` (either order).
    pub(super) fn retry_after(&mut self, min: u32, max: u32) -> u32 {
        retry_after_in(&mut self.rng, min, max)
    }
}

/// A Retry-After drawn from `rng` in `[min, max]` (either order), so refused callers do not
/// retry in lockstep.
pub(super) fn retry_after_in(rng: &mut impl RngCore, min: u32, max: u32) -> u32 {
    let (lo, hi) = (min.min(max), max.max(min));
    let span = u64::from(hi - lo) + 1;
    // span ≤ 2^32, so the remainder fits in u32.
    lo + u32::try_from(rng.next_u64() % span).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use rand_chacha::rand_core::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    use super::*;

    #[test]
    fn one_seed_one_sequence() {
        let (mut a, mut b) = (Ids::new([1; 32], 3), Ids::new([1; 32], 3));
        assert_eq!(a.tag(), b.tag());
        assert_eq!(a.branch(), b.branch());
        assert_eq!(a.b2b_call_id(42), b.b2b_call_id(42));
        let mut c = Ids::new([2; 32], 3);
        assert_ne!(Ids::new([1; 32], 3).tag(), c.tag());
        assert!(a.branch().starts_with(BRANCH_PREFIX));
    }

    #[test]
    fn call_ids_skip_zero_and_taken_ones() {
        let mut ids = Ids::new([9; 32], 0);
        let first = Ids::new([9; 32], 0).call_id(|_| false);
        let next = ids.call_id(|id| id == first);
        assert_ne!(next, first);
        assert_ne!(next, 0);
    }

    #[test]
    fn retry_after_stays_in_its_range_whatever_the_order() {
        let mut rng = ChaCha20Rng::from_seed([5; 32]);
        for _ in 0..1000 {
            let r = retry_after_in(&mut rng, 10, 3);
            assert!((3..=10).contains(&r));
        }
        assert_eq!(retry_after_in(&mut rng, 7, 7), 7);
        // The widest range: no overflow (the old draw divided by hi - lo + 1 = 0 here).
        let _ = retry_after_in(&mut rng, 0, u32::MAX);
    }
}
