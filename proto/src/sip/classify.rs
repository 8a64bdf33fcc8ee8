//! What the receive path knows of a raw message before any parse: its shard, its PRSM kind and
//! its transaction key.
//!
//! The receive threads must hand a message to the right worker queue, in the right PRSM queue,
//! at the cost of a line scan (the full parse is the worker's job). [`classify`] reads the start
//! line and the Call-ID, To, top Via and CSeq header lines (long or compact forms), each the
//! first of its name, as the engine reads them (the engine answers 400 to a request that
//! repeats one of them, so the two can never act on different ones):
//!
//! - a response is [`Kind::Response`];
//! - ACK and CANCEL, and any request whose To carries a tag, are [`Kind::InDialog`] (they
//!   belong to calls already admitted and are never refused);
//! - any other request is [`Kind::NewRequest`]; the scheduler turns it into a retransmission
//!   when its transaction key is already known.
//!
//! The transaction key hashes the Call-ID's key, the top Via branch (the whole top Via value
//! when it has no branch) and the CSeq method, so a CANCEL does not share its INVITE's key and
//! two clients reusing a branch do not share one either.

use std::hash::Hasher as _;

use fnv::FnvHasher;

use crate::overload::prsm::Kind;
use crate::shard::{self, trim};

/// The classification of one raw message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classified {
    /// The Call-ID's shard key ([`shard::call_id_key`]); 0 without a Call-ID.
    pub shard_key: u64,
    /// Its PRSM kind.
    pub kind: Kind,
    /// Its transaction key (branch and CSeq method).
    pub txn_key: u64,
    /// Whether it is an INVITE request.
    pub is_invite: bool,
}

/// Classifies a raw message by scanning its header lines. Garbage classifies as a new request
/// (the worker answers 400 or drops it).
pub fn classify(data: &[u8]) -> Classified {
    let mut lines = data.split(|&b| b == b'\n');
    let start = lines.next().unwrap_or_default();
    let is_response = start.starts_with(b"SIP/");
    let method = if is_response {
        &b""[..]
    } else {
        start.split(|&b| b == b' ').next().unwrap_or_default()
    };
    let (mut call_id, mut to_tag, mut branch, mut cseq_method) = (None, None, None, None);
    for line in lines {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = trim(&line[..colon]);
        let value = trim(&line[colon + 1..]);
        if name.eq_ignore_ascii_case(b"call-id") || name.eq_ignore_ascii_case(b"i") {
            call_id.get_or_insert(value);
        } else if name.eq_ignore_ascii_case(b"to") || name.eq_ignore_ascii_case(b"t") {
            // The first To, as the engine reads it (a second one gets 400 there).
            to_tag.get_or_insert_with(|| has_tag_param(value));
        } else if (name.eq_ignore_ascii_case(b"via") || name.eq_ignore_ascii_case(b"v"))
            && branch.is_none()
        {
            branch = Some(branch_of(value));
        } else if name.eq_ignore_ascii_case(b"cseq") && cseq_method.is_none() {
            cseq_method = value.split(|&b| b == b' ').rfind(|w| !w.is_empty());
        }
    }
    let kind = if is_response {
        Kind::Response
    } else if method == b"ACK" || method == b"CANCEL" || to_tag == Some(true) {
        Kind::InDialog
    } else {
        Kind::NewRequest
    };
    let shard_key = call_id.map_or(0, shard::call_id_key);
    // The branch alone is unique only among well-behaved clients: the Call-ID's key keeps two
    // clients that reuse a branch apart (and, without a branch, the whole Via value counts).
    let mut h = FnvHasher::default();
    h.write(&shard_key.to_le_bytes());
    h.write(branch.unwrap_or_default());
    h.write(b" ");
    h.write(cseq_method.unwrap_or(method));
    Classified {
        shard_key,
        kind,
        txn_key: h.finish(),
        is_invite: !is_response && method == b"INVITE",
    }
}

/// Whether a To/From value carries a `tag` parameter (outside the `<...>` URI).
fn has_tag_param(value: &[u8]) -> bool {
    let params = match value.iter().rposition(|&b| b == b'>') {
        Some(gt) => &value[gt + 1..],
        None => value,
    };
    // `tag = value` with white space around the `=` is a tag too (RFC 3261 section 25.1:
    // EQUAL = SWS "=" SWS), as the engine reads it (`message::param`); an empty value is none.
    params.split(|&b| b == b';').skip(1).any(|p| {
        let Some(eq) = p.iter().position(|&b| b == b'=') else {
            return false;
        };
        trim(&p[..eq]).eq_ignore_ascii_case(b"tag") && !trim(&p[eq + 1..]).is_empty()
    })
}

/// The `branch` parameter of the first Via value of a header line (the whole value without).
fn branch_of(value: &[u8]) -> &[u8] {
    let first = value.split(|&b| b == b',').next().unwrap_or(value);
    first
        .split(|&b| b == b';')
        .skip(1)
        .map(trim)
        .find(|p| p.len() > 7 && p[..7].eq_ignore_ascii_case(b"branch="))
        .map_or(first, |p| &p[7..])
}

#[cfg(test)]
mod tests {
    use super::*;

    const INVITE: &[u8] = b"INVITE sip:bob@b SIP/2.0\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK1\r\n\
        Via: SIP/2.0/UDP c;branch=z9hG4bK2\r\nTo: <sip:bob@b>\r\nFrom: <sip:a@a>;tag=9\r\n\
        Call-ID: abc\r\nCSeq: 1 INVITE\r\n\r\n";

    #[test]
    fn new_invite_and_its_retransmission_share_a_key() {
        let a = classify(INVITE);
        assert_eq!(a.kind, Kind::NewRequest);
        assert!(a.is_invite);
        assert_eq!(a.shard_key, shard::call_id_key(b"abc"));
        assert_eq!(classify(INVITE), a);
    }

    #[test]
    fn cancel_and_ack_are_in_dialog_with_their_own_key() {
        let cancel = b"CANCEL sip:bob@b SIP/2.0\r\nv: SIP/2.0/UDP a;branch=z9hG4bK1\r\n\
            t: <sip:bob@b>\r\ni: abc\r\nCSeq: 1 CANCEL\r\n\r\n";
        let c = classify(cancel);
        assert_eq!(c.kind, Kind::InDialog);
        assert_ne!(c.txn_key, classify(INVITE).txn_key);
        assert_eq!(c.shard_key, classify(INVITE).shard_key);
        let ack = b"ACK sip:bob@b SIP/2.0\r\nVia: x;branch=q\r\nTo: <sip:b>\r\n\r\n";
        assert_eq!(classify(ack).kind, Kind::InDialog);
    }

    #[test]
    fn a_tag_with_spaces_around_the_equal_sign_is_a_tag() {
        // The fuzzer's find (after the receive path stopped going through rsip): `tag =b1`,
        // which the engine reads as a tag, was a new request to the line scan.
        for to in ["<sip:b>;tag =b1", "<sip:b>;tag= b1", "<sip:b> ; TAG = b1"] {
            let bye = format!("BYE sip:b SIP/2.0\r\nVia: x;branch=q\r\nTo: {to}\r\n\r\n");
            assert_eq!(classify(bye.as_bytes()).kind, Kind::InDialog, "{to}");
        }
        let empty = b"OPTIONS sip:b SIP/2.0\r\nVia: x;branch=q\r\nTo: <sip:b>;tag= \r\n\r\n";
        assert_eq!(classify(empty).kind, Kind::NewRequest);
    }

    #[test]
    fn a_call_id_ending_in_a_vertical_tab_is_refused_not_read_two_ways() {
        // The fuzzer's second find: `str::trim` took the vertical tab off the engine's Call-ID
        // while the line scan kept it. Now both keep it, and the strict reading refuses it.
        let req = b"BYE sip:b@h SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\n\
            From: <sip:a@x>;tag=1\r\nTo: <sip:b@y>;tag=2\r\nCall-ID: c\x0b\r\nCSeq: 2 BYE\r\n\
            Content-Length: 0\r\n\r\n";
        let msg = crate::sip::message::SipMessage::parse(req).expect("parses");
        assert_eq!(msg.call_id(), Some("c\x0b"));
        assert!(msg.check_request(8192).is_err());
    }

    #[test]
    fn to_tag_makes_a_request_in_dialog_but_not_a_uri_param() {
        let bye = b"BYE sip:b SIP/2.0\r\nVia: x;branch=q\r\nTo: <sip:b>;tag=1\r\n\r\n";
        assert_eq!(classify(bye).kind, Kind::InDialog);
        let odd = b"OPTIONS sip:b SIP/2.0\r\nVia: x;branch=q\r\nTo: <sip:b;tag=1>\r\n\r\n";
        assert_eq!(classify(odd).kind, Kind::NewRequest);
        assert!(!classify(odd).is_invite);
    }

    #[test]
    fn the_first_to_counts_as_in_the_engine() {
        // An untagged To then a tagged one: a new request (the engine refuses it with 400),
        // never queued as in-dialog where PRSM would not refuse it.
        let two =
            b"INVITE sip:b SIP/2.0\r\nVia: x;branch=q\r\nTo: <sip:b>\r\nt: <sip:b>;tag=1\r\n\r\n";
        assert_eq!(classify(two).kind, Kind::NewRequest);
        let two_cseq = b"BYE sip:b SIP/2.0\r\nVia: x;branch=q\r\nTo: <sip:b>;tag=1\r\nCSeq: 1 BYE\r\nCSeq: 2 INVITE\r\n\r\n";
        let one =
            b"BYE sip:b SIP/2.0\r\nVia: x;branch=q\r\nTo: <sip:b>;tag=1\r\nCSeq: 1 BYE\r\n\r\n";
        assert_eq!(classify(two_cseq).txn_key, classify(one).txn_key);
    }

    #[test]
    fn responses_and_garbage() {
        let r = b"SIP/2.0 180 Ringing\r\nVia: x;branch=z9hG4bK1\r\nCSeq: 1 INVITE\r\n\r\n";
        let c = classify(r);
        assert_eq!(c.kind, Kind::Response);
        assert!(!c.is_invite);
        let g = classify(b"\xff\xfe garbage");
        assert_eq!(g.kind, Kind::NewRequest);
        assert_eq!(g.shard_key, 0);
        assert_eq!(classify(b"").kind, Kind::NewRequest);
    }
}
