//! The pair's keys and the sealing of its datagrams.
//!
//! One secret is configured (`redundancy-config shared-key`, the same on both nodes and on
//! the witness); it never travels. [`PairKeys::derive`] turns it into one key per use with
//! HKDF-SHA256 (RFC 5869), so that a message of one kind can never be taken for another and a
//! weakness in one use cannot leak into the others:
//!
//! | key | used for |
//! |---|---|
//! | `heartbeat` | heartbeat datagrams (both nodes send with it) |
//! | `witness-probe` | a node's lease probes to the witness |
//! | `witness-answer` | the witness's answers |
//! | `sync-psk` | the pre-shared key of the state-sync channel's Noise handshake ([`crate::channel`]) |
//!
//! Datagrams are **sealed** with XChaCha20-Poly1305 (an AEAD: encrypted and authenticated in
//! one step) by [`seal_datagram`]; [`open_datagram`] checks and opens them. The 24-byte nonce
//! is built from the sender's identity, its incarnation and a per-sender sequence number, so it
//! never repeats under one key without any randomness (the state machines stay deterministic);
//! it travels in clear and is covered by the tag together with the magic and the version.
//!
//! Nothing here is hand-rolled cryptography: HKDF, SHA-256 and the AEAD are RustCrypto's
//! crates; the Noise handshake is `snow`'s.

use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hkdf::Hkdf;
use sha2::Sha256;

/// The HKDF salt: names the protocol and its version, so keys of another version differ.
/// The shortest shared key the pair accepts, in bytes (`redundancy-config.shared-key`;
/// `sbc_config::MIN_SHARED_KEY_LEN` is the same, checked by the `sbc` crate's tests).
pub const MIN_SHARED_KEY_LEN: usize = 16;

const SALT: &[u8] = b"sbc-pair v2 key derivation";

/// Bytes of an AEAD tag.
pub const TAG_LEN: usize = 16;
/// Bytes of a datagram nonce.
pub const NONCE_LEN: usize = 24;

/// One symmetric key.
#[derive(Clone)]
pub struct Key([u8; 32]);

impl Key {
    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new((&self.0).into())
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the bytes: keys must not reach a log.
        f.write_str("Key(<secret>)")
    }
}

/// Every key of the pair, derived from the shared key.
#[derive(Clone)]
pub struct PairKeys {
    /// Seals heartbeats.
    pub heartbeat: Key,
    /// Seals witness probes.
    pub witness_probe: Key,
    /// Seals witness answers.
    pub witness_answer: Key,
    /// The state-sync handshake's pre-shared key.
    pub sync_psk: [u8; 32],
}

impl std::fmt::Debug for PairKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PairKeys(<secret>)")
    }
}

impl PairKeys {
    /// Derives every key from the configured shared key.
    #[must_use]
    pub fn derive(shared_key: &[u8]) -> Self {
        let hk = Hkdf::<Sha256>::new(Some(SALT), shared_key);
        let expand = |info: &[u8]| {
            let mut k = [0u8; 32];
            // 32 bytes is far below HKDF-SHA256's limit of 255 × 32: this cannot fail.
            hk.expand(info, &mut k)
                .unwrap_or_else(|_| unreachable!("32 bytes is a valid HKDF-SHA256 length"));
            k
        };
        Self {
            heartbeat: Key(expand(b"heartbeat")),
            witness_probe: Key(expand(b"witness-probe")),
            witness_answer: Key(expand(b"witness-answer")),
            sync_psk: expand(b"sync-psk"),
        }
    }
}

/// The nonce of a datagram: `sender (8) | incarnation (8) | sequence (8)`, big-endian. Unique
/// per key as long as a sender never reuses a sequence number within one incarnation.
#[must_use]
pub fn nonce(sender: u64, incarnation: u64, seq: u64) -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    n[..8].copy_from_slice(&sender.to_be_bytes());
    n[8..16].copy_from_slice(&incarnation.to_be_bytes());
    n[16..].copy_from_slice(&seq.to_be_bytes());
    n
}

/// Why a datagram could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAuthentic;

/// Appends `header`, `nonce`, then `plaintext` sealed under `key` with `header ‖ nonce` as
/// associated data, to `out` (cleared first).
pub fn seal_datagram(
    key: &Key,
    header: &[u8],
    nonce: &[u8; NONCE_LEN],
    plaintext: &[u8],
    out: &mut Vec<u8>,
) {
    out.clear();
    out.extend_from_slice(header);
    out.extend_from_slice(nonce);
    let aad_len = out.len();
    out.extend_from_slice(plaintext);
    let (aad, body) = out.split_at_mut(aad_len);
    let tag = key
        .cipher()
        .encrypt_in_place_detached(XNonce::from_slice(nonce), aad, body)
        .unwrap_or_else(|_| unreachable!("XChaCha20-Poly1305 seals any datagram-sized buffer"));
    out.extend_from_slice(&tag);
}

/// Opens a datagram laid out as `header (header_len) ‖ nonce ‖ ciphertext ‖ tag`; returns the
/// plaintext.
///
/// # Errors
/// Too short, or the tag does not verify (wrong key, tampered with, or not ours).
pub fn open_datagram(
    key: &Key,
    header_len: usize,
    datagram: &[u8],
) -> Result<Vec<u8>, NotAuthentic> {
    let body_at = header_len + NONCE_LEN;
    if datagram.len() < body_at + TAG_LEN {
        return Err(NotAuthentic);
    }
    let (aad, rest) = datagram.split_at(body_at);
    let (ciphertext, tag) = rest.split_at(rest.len() - TAG_LEN);
    let nonce = XNonce::from_slice(&aad[header_len..]);
    let mut plain = ciphertext.to_vec();
    key.cipher()
        .decrypt_in_place_detached(nonce, aad, &mut plain, tag.into())
        .map_err(|_| NotAuthentic)?;
    Ok(plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_differ_per_use_and_per_secret() {
        let a = PairKeys::derive(b"a-shared-key-of-16-bytes");
        let b = PairKeys::derive(b"another-key-of-16-bytes!");
        assert_ne!(a.heartbeat.0, a.witness_probe.0);
        assert_ne!(a.witness_probe.0, a.witness_answer.0);
        assert_ne!(a.heartbeat.0, a.sync_psk);
        assert_ne!(a.heartbeat.0, b.heartbeat.0);
        assert_eq!(
            a.heartbeat.0,
            PairKeys::derive(b"a-shared-key-of-16-bytes").heartbeat.0
        );
        assert_eq!(format!("{a:?}"), "PairKeys(<secret>)");
        assert!(!format!("{:?}", a.heartbeat).contains(&format!("{}", a.heartbeat.0[0])));
    }

    #[test]
    fn sealed_datagrams_open_only_with_their_key_and_unchanged() {
        let keys = PairKeys::derive(b"a-shared-key-of-16-bytes");
        let n = nonce(1, 2, 3);
        let mut d = Vec::new();
        seal_datagram(&keys.heartbeat, b"HDR", &n, b"secret payload", &mut d);
        assert!(!d.windows(6).any(|w| w == b"secret"), "payload in clear");
        assert_eq!(
            open_datagram(&keys.heartbeat, 3, &d).as_deref(),
            Ok(&b"secret payload"[..])
        );
        assert_eq!(open_datagram(&keys.witness_probe, 3, &d), Err(NotAuthentic));
        for i in 0..d.len() {
            let mut bad = d.clone();
            bad[i] ^= 0x40;
            assert_eq!(
                open_datagram(&keys.heartbeat, 3, &bad),
                Err(NotAuthentic),
                "byte {i}"
            );
        }
        assert_eq!(
            open_datagram(&keys.heartbeat, 3, &d[..10]),
            Err(NotAuthentic)
        );
    }
}
