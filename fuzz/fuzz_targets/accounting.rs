//! What accounting reads back: a record replicated by the former active on the sync channel
//! (decoded or refused; what decodes encodes back to the same bytes, and its CSV line and
//! RADIUS attributes are made without a panic, every text attribute within RFC 2865's 253
//! octets), and a spool segment read at start, torn or corrupt (its whole entries in order,
//! nothing past a bad one; read lazily with their offsets alike; the ledger rebuilt from them
//! agrees with a map of the records no mark delivered, whatever their numbers). The first byte
//! chooses which. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sbc_accounting::radius::{attributes, Attribute, Value};
use std::collections::HashSet;

use sbc_accounting::spool::{self, decode_segment, encode, SpoolEntry, SpoolLedger};
use sbc_accounting::CallRecord;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 2 {
        0 => {
            if let Some(r) = CallRecord::from_wire(rest) {
                let again = r.to_wire();
                assert_eq!(CallRecord::from_wire(&again).as_ref(), Some(&r));
                let _ = sbc_accounting::csv_file::record_line(&r);
                for a in attributes(&r, u32::MAX) {
                    if let Attribute::Standard(_, Value::Text(s)) | Attribute::Vendor(_, _, Value::Text(s)) = a {
                        assert!(s.len() <= 253);
                    }
                }
            }
        }
        _ => {
            let (entries, torn) = decode_segment(rest);
            // What was read encodes back to a prefix of the segment.
            let bytes: Vec<u8> = entries.iter().flat_map(encode).collect();
            assert!(rest.starts_with(&bytes));
            assert_eq!(torn, bytes.len() < rest.len());
            // The lazy reading: the same entries, each at its offset.
            let mut lazy = spool::entries(rest);
            let mut at = 0;
            for ((offset, e), whole) in lazy.by_ref().zip(&entries) {
                assert_eq!((offset, &e), (at, whole));
                at += encode(&e).len();
            }
            assert_eq!((lazy.torn(), lazy.offset()), (torn, bytes.len()));
            // The ledger, the entries cut into two segments.
            let mut ledger = SpoolLedger::new(u64::MAX, 4096);
            let mut model = HashSet::new();
            let half = entries.len() / 2;
            for (n, part) in [(1, &entries[..half]), (2, &entries[half..])] {
                ledger.replay(n, 100, part);
                for e in part {
                    match e {
                        SpoolEntry::Record { seq, .. } => model.insert(*seq),
                        SpoolEntry::Delivered { seq } => model.remove(seq),
                    };
                }
            }
            assert_eq!(ledger.pending(), model.len());
            for seq in &model {
                assert!(ledger.is_pending(*seq));
                assert!(ledger.delivered(*seq));
            }
            assert_eq!(ledger.pending(), 0);
        }
    }
});
