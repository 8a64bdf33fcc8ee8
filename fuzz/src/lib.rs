//! Fixtures shared by the fuzz targets: a pair's configuration and keys, and the ways an input
//! is turned into something the decoders see.
#![forbid(unsafe_code)]

use std::net::SocketAddr;

use sbc_ha::crypto::{self, PairKeys};
use sbc_ha::{PeerSettings, PeerType, RedundancySettings};

/// The pair's shared key in every target.
pub const KEY: &[u8] = b"fuzzing-shared-key-0123456789";

/// A two-node pair (`a` primary, `b` secondary) with `KEY`, one path each, optionally a
/// witness.
#[must_use]
pub fn pair_config(witness: bool) -> RedundancySettings {
    let peer = |name: &str, port: u16, t| PeerSettings {
        name: name.into(),
        peer_type: t,
        destinations: vec![SocketAddr::from(([127, 0, 0, 1], port))],
    };
    RedundancySettings {
        shared_key: String::from_utf8_lossy(KEY).into_owned(),
        witness: witness.then(|| SocketAddr::from(([127, 0, 0, 1], 9099))),
        peers: vec![
            peer("a", 9001, PeerType::Primary),
            peer("b", 9002, PeerType::Secondary),
        ],
        ..RedundancySettings::default()
    }
}

/// The pair's keys.
#[must_use]
pub fn keys() -> PairKeys {
    PairKeys::derive(KEY)
}

/// `payload` sealed as a datagram of kind `magic` (v2 layout) with `key`, so that the payload
/// decoder and the state machines behind it see arbitrary authentic content.
#[must_use]
pub fn sealed(key: &crypto::Key, magic: [u8; 4], nonce_seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut header = [0u8; 5];
    header[..4].copy_from_slice(&magic);
    header[4] = sbc_ha::wire::VERSION;
    crypto::seal_datagram(
        key,
        &header,
        &crypto::nonce(1, 1, nonce_seq),
        payload,
        &mut out,
    );
    out
}

/// Splits `data` into chunks, each prefixed by a 1-byte length (0 = the rest), so one input
/// makes a sequence of datagrams or messages.
pub fn chunks(mut data: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let (&n, rest) = data.split_first()?;
        let n = if n == 0 {
            rest.len()
        } else {
            usize::from(n).min(rest.len())
        };
        let (chunk, rest) = rest.split_at(n);
        data = rest;
        Some(chunk)
    })
}
