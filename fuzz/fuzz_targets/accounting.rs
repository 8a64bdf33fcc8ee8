//! What accounting reads back: a record replicated by the former active on the sync channel
//! (decoded or refused; what decodes encodes back to the same bytes, and its CSV line and
//! RADIUS attributes are made without a panic, every text attribute within RFC 2865's 253
//! octets), and a spool segment read at start, torn or corrupt (its whole entries in order,
//! nothing past a bad one). The first byte chooses which. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sbc_accounting::radius::{attributes, Attribute, Value};
use sbc_accounting::spool::{decode_segment, encode};
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
        }
    }
});
