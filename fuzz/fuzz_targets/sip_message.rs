//! A SIP message as the edge reads it: the full parse with the strict checks, and the receive
//! path's line scan (`classify`). Nothing may panic, and whenever the engine would take a
//! request (it parses and passes the strict reading), the receive path must have read the same
//! Call-ID (shard) and the same To (in-dialog or new): one reading of a message.
//!
//! The Request-URI's address is also read by an independent parser, `sip-uri` (RFC 3261 and
//! 3966, IPv6 references per RFC 5118): when it accepts a URI the engine took, both must read
//! the same host and port (the engine's reading of an IP literal, `uri_addr`, is what a
//! takeover dials). `sip-uri` is laxer in places this edge refuses (hosts like `-bad-.com`),
//! stricter in others (some user parts): only agreement where both read is asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sbc_proto::sip::classify::classify;
use sbc_proto::overload::prsm::Kind;
use sbc_proto::shard;
use sbc_proto::sip::message::{Method, SipMessage};

fuzz_target!(|data: &[u8]| {
    let seen = classify(data);
    let Ok(msg) = SipMessage::parse(data) else {
        return;
    };
    let Some(method) = msg.method() else {
        // A response: the receive path says so.
        assert_eq!(seen.kind, Kind::Response);
        return;
    };
    if !msg.answerable() || msg.check_request(8192).is_err() {
        return;
    }
    if let (Some(uri), Some(ours)) = (
        msg.request_uri(),
        msg.request_uri().and_then(sbc_proto::engine::uri_addr),
    ) {
        if let Ok(theirs) = uri.parse::<sip_uri::SipUri>() {
            let host = theirs.host().to_string();
            let host = host.trim_start_matches('[').trim_end_matches(']');
            assert_eq!(
                host.parse::<std::net::IpAddr>().ok(),
                Some(ours.ip()),
                "the engine and sip-uri read different hosts in {uri}"
            );
            if let Some(port) = theirs.port() {
                assert_eq!(port, ours.port(), "different ports in {uri}");
            }
        }
    }
    let call_id = msg.call_id().unwrap_or_default();
    assert_eq!(
        seen.shard_key,
        shard::call_id_key(call_id.as_bytes()),
        "the receive path and the engine read different Call-IDs"
    );
    let in_dialog = matches!(method, Method::Ack | Method::Cancel) || msg.to_tag().is_some();
    assert_eq!(
        seen.kind == Kind::InDialog,
        in_dialog,
        "the receive path and the engine read different To headers"
    );
    assert_eq!(seen.is_invite, *method == Method::Invite);
});
