//! Per-Call-ID ordering: every message of one call goes to the same worker.
//!
//! The receive path reads only the Call-ID line of a message (no full parse) and hashes it to a
//! shard key. The B2BUA's core-side leg gets a generated Call-ID of the form
//! `b2b-<16 hex digits>-<random>` whose hex digits *are* the shard key of the access-side
//! Call-ID, so both legs of a call hash to the same worker and are processed in order by it.
//! A 180 and a 200 of one call can therefore never overtake each other inside the SBC, however
//! many workers run.

use std::hash::Hasher as _;

use fnv::FnvHasher;

/// Prefix of the Call-IDs the B2BUA generates for its outbound legs.
pub const B2B_CALL_ID_PREFIX: &str = "b2b-";

/// The Call-ID value of a raw message, found by scanning header lines (long or compact form).
pub fn scan_call_id(data: &[u8]) -> Option<&[u8]> {
    let mut lines = data.split(|&b| b == b'\n');
    lines.next()?; // start line
    for line in lines {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return None;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = trim(&line[..colon]);
        if name.eq_ignore_ascii_case(b"call-id") || name.eq_ignore_ascii_case(b"i") {
            return Some(trim(&line[colon + 1..]));
        }
    }
    None
}

/// `s` without leading and trailing ASCII whitespace.
pub(crate) fn trim(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &s[start..end]
}

/// The shard key of a Call-ID: the embedded key for a Call-ID the B2BUA generated, an FNV-1a
/// hash otherwise.
pub fn call_id_key(call_id: &[u8]) -> u64 {
    if let Some(rest) = call_id.strip_prefix(B2B_CALL_ID_PREFIX.as_bytes()) {
        if rest.len() > 16 && rest[16] == b'-' {
            if let Some(k) = std::str::from_utf8(&rest[..16])
                .ok()
                .and_then(|h| u64::from_str_radix(h, 16).ok())
            {
                return k;
            }
        }
    }
    fnv1a(call_id)
}

/// The Call-ID for the outbound leg of a call whose inbound Call-ID has shard key `key`.
pub fn b2b_call_id(key: u64, random: u64) -> String {
    format!("{B2B_CALL_ID_PREFIX}{key:016x}-{random:016x}")
}

/// FNV-1a (64-bit) of `data`.
fn fnv1a(data: &[u8]) -> u64 {
    let mut h = FnvHasher::default();
    h.write(data);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_legs_have_the_same_shard_key() {
        let a = b"INVITE sip:x SIP/2.0\r\nVia: v\r\nCall-ID:  abc@host \r\n\r\n";
        let key = call_id_key(b"abc@host");
        let b_id = b2b_call_id(key, 42);
        let b = format!("SIP/2.0 200 OK\r\ni: {b_id}\r\n\r\n");
        let key_of = |m: &[u8]| scan_call_id(m).map(call_id_key);
        assert_eq!(key_of(a), Some(key));
        assert_eq!(key_of(b.as_bytes()), Some(key));
    }

    #[test]
    fn scan_stops_at_blank_line_and_handles_junk() {
        assert_eq!(scan_call_id(b"X\r\n\r\nCall-ID: late"), None);
        assert_eq!(scan_call_id(b""), None);
        assert_eq!(scan_call_id(b"\xff\xfe"), None);
        assert_eq!(scan_call_id(b"garbage"), None);
        assert_eq!(call_id_key(b"b2b-zz"), fnv1a(b"b2b-zz"));
        // The published FNV-1a 64 vector: shard keys stay what older nodes computed.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
