//! SDP as a leg sends it: parsing never panics, and a description whose streams can be read is
//! always anchored into a description that parses again, with the planned ports and nothing of
//! the original's ICE attributes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sbc_proto::sdp::{AnchorPlan, Description, ICE_ATTRIBUTES};

fuzz_target!(|data: &[u8]| {
    let Ok(d) = Description::parse(data) else {
        return;
    };
    let Ok(streams) = d.streams() else {
        return;
    };
    let plan = AnchorPlan {
        address: "192.0.2.10".parse().expect("address"),
        ports: (0..streams.len()).map(|i| 20_000 + 2 * i as u16).collect(),
        session_id: 1,
        version: 1,
    };
    let out = d.anchored(&plan).expect("streams were readable");
    let again = Description::parse(&out).expect("our own SDP parses");
    let again_streams = again.streams().expect("our own streams read");
    assert_eq!(again_streams.len(), streams.len());
    for ((before, after), port) in streams.iter().zip(&again_streams).zip(&plan.ports) {
        if before.is_rejected() {
            assert!(after.is_rejected());
        } else {
            assert_eq!(after.rtp.port(), *port);
        }
    }
    for line in String::from_utf8_lossy(&out).lines() {
        if let Some(attribute) = line.strip_prefix("a=") {
            let name = attribute.split(':').next().unwrap_or_default();
            assert!(!ICE_ATTRIBUTES.contains(&name), "ICE attribute passed on: {line}");
        }
    }
});
