//! Witness messages: probes into the witness's lease arbiter and answers into a node's
//! redundancy machine, raw (a stranger) or, with the first byte odd, sealed with the pair's
//! keys (arbitrary authentic payloads). At most one lease holder at any time; no panic.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use sbc_fuzz::{chunks, keys, pair_config, sealed, KEY};
use sbc_ha::wire::{WitnessAnswer, WitnessProbe, WITNESS_ANSWER_MAGIC, WITNESS_PROBE_MAGIC};
use sbc_ha::{Redundancy, WitnessArbiter};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let t0 = Instant::now();
    let keys = keys();
    let mut arbiter = WitnessArbiter::new(KEY, 5, t0);
    let Ok(mut node) = Redundancy::new(&pair_config(true), "a", 7, t0) else {
        return;
    };
    for (i, chunk) in chunks(rest).enumerate() {
        let now = t0 + Duration::from_millis(53 * i as u64);
        let to_witness = i % 2 == 0;
        let datagram = match (mode & 1 == 1, to_witness) {
            (false, _) => chunk.to_vec(),
            (true, true) => sealed(&keys.witness_probe, WITNESS_PROBE_MAGIC, i as u64, chunk),
            (true, false) => sealed(&keys.witness_answer, WITNESS_ANSWER_MAGIC, i as u64, chunk),
        };
        if to_witness {
            let _ = WitnessProbe::decode(&keys, &datagram);
            if let Ok(Some(answer)) = arbiter.handle_datagram(now, &datagram) {
                // The arbiter's own answers are authentic: the node must take them.
                let _ = node.handle_witness_datagram(now, &answer);
            }
            let _ = arbiter.holder(now);
        } else {
            let _ = WitnessAnswer::decode(&keys, &datagram);
            let _ = node.handle_witness_datagram(now, &datagram);
        }
        node.handle_timeout(now);
        while let Some(p) = node.poll_witness(now) {
            if let Ok(Some(answer)) = arbiter.handle_datagram(now, &p.payload) {
                let _ = node.handle_witness_datagram(now, &answer);
            }
        }
        while node.poll_transmit(now).is_some() {}
        while node.poll().is_some() {}
    }
});
