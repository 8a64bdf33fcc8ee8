//! RFC 5626 keep-alives over UDP: a registered phone behind a NAT sends STUN binding requests
//! (RFC 5389) to the SIP port it registered through, and is answered with its reflexive
//! address (`XOR-MAPPED-ADDRESS`), which also tells it whether its NAT binding changed. Over
//! TCP and TLS the CRLFCRLF ping is answered by the connection (`sip::framer`).
//!
//! Only sources with a registration binding are answered (the caller checks): a stranger
//! forging a victim's address gets nothing reflected.

use std::net::SocketAddr;

use bytecodec::{DecodeExt as _, EncodeExt as _};
use stun_codec::rfc5389::attributes::XorMappedAddress;
use stun_codec::rfc5389::{methods::BINDING, Attribute};
use stun_codec::{Message, MessageClass, MessageDecoder, MessageEncoder};

/// The STUN magic cookie (RFC 5389 section 6).
const MAGIC_COOKIE: [u8; 4] = [0x21, 0x12, 0xa4, 0x42];

/// Whether a datagram is a STUN message rather than SIP: at least a header, the two top bits
/// of its first byte zero (SIP starts with a letter), the magic cookie in place (RFC 5626
/// section 4.4.2 tells them apart this way).
#[must_use]
pub fn is_stun(datagram: &[u8]) -> bool {
    datagram.len() >= 20 && datagram[0] & 0xc0 == 0 && datagram[4..8] == MAGIC_COOKIE
}

/// The binding success response to a STUN binding request from `source`; `None` for
/// anything else (another method or class, a message that does not decode).
#[must_use]
pub fn binding_response(datagram: &[u8], source: SocketAddr) -> Option<Vec<u8>> {
    let mut decoder = MessageDecoder::<Attribute>::new();
    let request = decoder.decode_from_bytes(datagram).ok()?.ok()?;
    if request.class() != MessageClass::Request || request.method() != BINDING {
        return None;
    }
    let mut response = Message::<Attribute>::new(
        MessageClass::SuccessResponse,
        BINDING,
        request.transaction_id(),
    );
    response.add_attribute(Attribute::XorMappedAddress(XorMappedAddress::new(source)));
    MessageEncoder::new().encode_into_bytes(response).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stun_codec::TransactionId;

    fn request(class: MessageClass) -> Vec<u8> {
        let m = Message::<Attribute>::new(class, BINDING, TransactionId::new([7; 12]));
        MessageEncoder::new().encode_into_bytes(m).expect("encodes")
    }

    #[test]
    fn a_binding_request_gets_the_source_back_and_nothing_else_is_answered() {
        let source: SocketAddr = "127.0.0.21:40000".parse().expect("address");
        let req = request(MessageClass::Request);
        assert!(is_stun(&req));
        let resp = binding_response(&req, source).expect("answered");
        let decoded = MessageDecoder::<Attribute>::new()
            .decode_from_bytes(&resp)
            .expect("decodes")
            .expect("a whole message");
        assert_eq!(decoded.class(), MessageClass::SuccessResponse);
        assert_eq!(decoded.transaction_id(), TransactionId::new([7; 12]));
        let mapped = decoded
            .get_attribute::<XorMappedAddress>()
            .map(XorMappedAddress::address);
        assert_eq!(mapped, Some(source));
        // An indication, a response, SIP and garbage are not answered.
        assert!(binding_response(&request(MessageClass::Indication), source).is_none());
        assert!(binding_response(&request(MessageClass::SuccessResponse), source).is_none());
        assert!(!is_stun(b"OPTIONS sip:x SIP/2.0\r\n\r\n"));
        let mut broken = req.clone();
        broken.truncate(19);
        assert!(!is_stun(&broken));
        let mut lying = req;
        lying[3] = 200; // a length beyond the datagram
        assert!(binding_response(&lying, source).is_none());
    }
}
