//! The state-sync channel: the Noise handshake and the frames behind it.
//!
//! The first byte picks what the input is:
//! - 0: the initiator's first handshake message, as a stranger would send it to the active;
//! - 1: the responder's answer, as whoever answers on the active's address would send it;
//! - 2: transport messages (one per chunk) fed to an established session, as an attacker on
//!   the path would inject them; completed frames are decoded;
//! - 3: frames (one per chunk) sealed by a genuine peer and opened by the other end, then
//!   decoded as `SyncFrame`s (arbitrary authentic content through the real path).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sbc_fuzz::{chunks, keys};
use sbc_ha::channel::{connected_pair, Initiator, Responder};
use sbc_ha::SyncFrame;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let psk = keys().sync_psk;
    match mode % 4 {
        0 => {
            let _ = Responder::respond(&psk, [1; 32], rest);
        }
        1 => {
            if let Ok((init, _)) = Initiator::start(&psk, [2; 32]) {
                let _ = init.finish(rest);
            }
        }
        2 => {
            let Ok((_, mut responder)) = connected_pair(&psk, &psk, 3) else {
                return;
            };
            for m in chunks(rest) {
                match responder.open(m) {
                    Ok(Some(frame)) => {
                        let _ = SyncFrame::decode(&frame);
                    }
                    Ok(None) => {}
                    Err(_) => break,
                }
            }
        }
        _ => {
            let Ok((mut a, mut b)) = connected_pair(&psk, &psk, 4) else {
                return;
            };
            for frame in chunks(rest) {
                let Ok(messages) = a.seal(frame) else {
                    return;
                };
                let mut got = None;
                for m in &messages {
                    got = b.open(m).expect("a genuine peer's messages open");
                }
                let got = got.expect("the last message completes the frame");
                assert_eq!(got, frame);
                let _ = SyncFrame::decode(&got);
            }
        }
    }
});
