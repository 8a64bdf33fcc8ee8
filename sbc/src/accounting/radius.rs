//! RADIUS packets: a record's attributes (chosen by `sbc_accounting::radius`) in an
//! Accounting-Request whose Request Authenticator (RFC 2866 §3) and encoding the `radius`
//! crate computes, and the check that an Accounting-Response is the server's answer to it.
//! The only module that knows the crate.

use radius::core::avp::AVP;
use radius::core::code::Code;
use radius::core::packet::Packet;
use sbc_accounting::radius::{Attribute, Value};
use sbc_accounting::CallRecord;

fn value_bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::Text(s) => s.as_bytes().to_vec(),
        Value::Integer(n) => n.to_be_bytes().to_vec(),
    }
}

/// The Accounting-Request for `record` with Identifier `identifier`, sent `delay_secs`
/// after the record was generated; `None` if it cannot be encoded (larger than 4096 bytes).
pub(crate) fn accounting_request(
    record: &CallRecord,
    identifier: u8,
    delay_secs: u32,
    secret: &[u8],
) -> Option<Vec<u8>> {
    let mut packet = Packet::new_with_identifier(Code::AccountingRequest, secret, identifier);
    for a in sbc_accounting::radius::attributes(record, delay_secs) {
        match a {
            Attribute::Standard(t, v) => packet.add(AVP::from_bytes(t, &value_bytes(&v))),
            Attribute::Vendor(vendor, t, v) => {
                // RFC 2865 §5.26: Vendor-Id, then the vendor's type, length and value.
                let value = value_bytes(&v);
                let mut body = vendor.to_be_bytes().to_vec();
                body.push(t);
                body.push(u8::try_from(value.len() + 2).ok()?);
                body.extend_from_slice(&value);
                packet.add(AVP::from_bytes(26, &body));
            }
        }
    }
    packet.encode().ok()
}

/// Whether `response` is an authentic Accounting-Response to `request` (its Response
/// Authenticator computed with the shared secret, RFC 2866 §3).
pub(crate) fn is_answer(response: &[u8], request: &[u8], secret: &[u8]) -> bool {
    response.first() == Some(&(Code::AccountingResponse as u8))
        && response.get(1) == request.get(1)
        && Packet::is_authentic_response(response, request, secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_authentic_for_its_secret_only() {
        let record = CallRecord {
            session_id: "0123456789abcdef".into(),
            kind: sbc_accounting::RecordKind::Start,
            interim: 0,
            linked_session_id: String::new(),
            calling: "alice".into(),
            called: "bob".into(),
            ingress_realm: "access".into(),
            egress_realm: "core".into(),
            ingress_agent: String::new(),
            egress_agent: "core".into(),
            ingress_call_id: "a@h".into(),
            egress_call_id: "b@h".into(),
            caller_address: "127.0.0.1:5070".into(),
            callee_address: "127.0.0.1:5080".into(),
            setup_ms: 1_800_000_000_000,
            connect_ms: 1_800_000_001_000,
            disconnect_ms: 0,
            status: 200,
            ended_by: sbc_accounting::EndedBy::NotEnded,
            reroutes: 0,
            caller_to_callee: Default::default(),
            callee_to_caller: Default::default(),
            event_ms: 1_800_000_001_000,
            node: "sbc1".into(),
        };
        let req = accounting_request(&record, 7, 0, b"s3cret").expect("encodes");
        assert_eq!((req[0], req[1]), (4, 7));
        assert!(Packet::is_authentic_request(&req, b"s3cret"));
        assert!(!Packet::is_authentic_request(&req, b"other"));
        let parsed = Packet::decode(&req, b"s3cret").expect("decodes");
        let answer = parsed
            .make_response_packet(Code::AccountingResponse)
            .encode()
            .expect("answer");
        assert!(is_answer(&answer, &req, b"s3cret"));
        assert!(!is_answer(&answer, &req, b"other"));
    }
}
