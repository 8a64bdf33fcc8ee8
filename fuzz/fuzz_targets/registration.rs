//! What phones and the pair send the registration cache: a STUN datagram on the SIP port
//! (only a binding request is answered, with the source's address), a replicated binding on
//! the sync channel (decoded or refused; what decodes encodes back to the same bytes), and a
//! REGISTER read into the cache's request (AoR, Contacts, NAT detection). The first byte
//! chooses which. Nothing may panic.
#![no_main]

use std::net::SocketAddr;
use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use sbc_proto::registration::cache::Binding;
use sbc_proto::registration::keepalive::{binding_response, is_stun};
use sbc_proto::registration::message::{behind_nat, register_request, NatTraversal};
use sbc_proto::sip::message::SipMessage;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let source: SocketAddr = "127.0.0.21:40000".parse().unwrap();
    match which % 3 {
        0 => {
            if let Some(answer) = binding_response(rest, source) {
                assert!(is_stun(&answer), "an answer that is not STUN");
                assert!(is_stun(rest), "a non-STUN datagram answered");
            }
        }
        1 => {
            let now = Instant::now();
            if let Some(b) = Binding::from_wire(rest, now, 1_796_083_200_000) {
                let again = b.to_wire(now, 1_796_083_200_000);
                let back = Binding::from_wire(&again, now, 1_796_083_200_000)
                    .expect("what encodes decodes");
                assert_eq!(back.to_wire(now, 1_796_083_200_000), again);
            }
        }
        _ => {
            if let Ok(msg) = SipMessage::parse(rest) {
                for nat in [NatTraversal::Off, NatTraversal::Rport, NatTraversal::Always] {
                    let _ = register_request(&msg, behind_nat(&msg, source, nat));
                }
            }
        }
    }
});
