//! The TCP framer: a stream cut at arbitrary points must give the same frames as the whole
//! stream at once (the framer remembers where it stopped scanning), no frame is larger than
//! the maximum, and nothing panics. The first two bytes choose the cut points' seed and the
//! maximum message size.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use sbc_proto::sip::framer::{Frame, TcpFramer};

fn frames(max: usize, chunks: &mut dyn Iterator<Item = Vec<u8>>) -> (Vec<Frame>, bool) {
    let mut codec = TcpFramer::new(max);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(&chunk);
        loop {
            match codec.next_frame(&mut buf) {
                Ok(Some(f)) => {
                    if let Frame::Message(m) = &f {
                        assert!(m.len() <= max, "a frame beyond the maximum");
                    }
                    out.push(f);
                }
                Ok(None) => break,
                Err(_) => return (out, true),
            }
        }
    }
    (out, false)
}

fuzz_target!(|data: &[u8]| {
    let [seed, size, rest @ ..] = data else {
        return;
    };
    let max = 64 + usize::from(*size) * 16;
    let whole = frames(max, &mut std::iter::once(rest.to_vec()));
    // Cut into pieces of 1..=16 bytes chosen by the seed.
    let mut x = u32::from(*seed) | 1;
    let mut pieces = Vec::new();
    let mut at = 0;
    while at < rest.len() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let n = (1 + (x % 16) as usize).min(rest.len() - at);
        pieces.push(rest[at..at + n].to_vec());
        at += n;
    }
    let cut = frames(max, &mut pieces.into_iter());
    if !whole.1 && !cut.1 {
        assert_eq!(whole.0, cut.0, "cutting the stream changed its frames");
    } else {
        // An unframeable stream may fail earlier when cut (a size limit seen sooner), but the
        // frames before the failure are the same.
        let n = whole.0.len().min(cut.0.len());
        assert_eq!(whole.0[..n], cut.0[..n]);
    }
});
