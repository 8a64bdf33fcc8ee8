//! Heartbeat datagrams into the redundancy machine: raw bytes (what a stranger can send) and,
//! with the first byte odd, payloads sealed with the pair's key (what a buggy or compromised
//! peer could send), one datagram per chunk, with time advancing between them. Nothing may
//! panic, and the machine keeps its invariants (health at most 100, a known state).
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use sbc_fuzz::{chunks, keys, pair_config, sealed};
use sbc_ha::wire::{Heartbeat, MAGIC};
use sbc_ha::{PathId, Redundancy};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let cfg = pair_config(false);
    let t0 = Instant::now();
    let Ok(mut m) = Redundancy::new(&cfg, "a", 7, t0) else {
        return;
    };
    let keys = keys();
    for (i, chunk) in chunks(rest).enumerate() {
        let now = t0 + Duration::from_millis(37 * i as u64);
        let datagram = if mode & 1 == 1 {
            sealed(&keys.heartbeat, MAGIC, i as u64, chunk)
        } else {
            chunk.to_vec()
        };
        let _ = Heartbeat::decode(&keys, &datagram);
        let _ = m.handle_datagram(now, PathId(mode >> 4), &datagram);
        m.handle_timeout(now);
        while m.poll_transmit(now).is_some() {}
        while m.poll().is_some() {}
        assert!(m.status().health.score <= 100);
        if let Some(p) = m.peer() {
            assert!(p.health <= 100);
        }
    }
});
