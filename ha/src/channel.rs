//! The security of the state-sync channel, sans-IO: a Noise handshake that authenticates both
//! ends from the shared key, then an encrypted, integrity-protected, replay-proof stream of
//! frames.
//!
//! # Why Noise `NNpsk0`
//!
//! The two nodes share one secret and no certificates, which is exactly Noise's pre-shared-key
//! case. `Noise_NNpsk0_25519_ChaChaPoly_SHA256` (implemented by the `snow` crate):
//!
//! * **Mutual authentication from the shared key**, which never travels: the initiator's first
//!   message is already encrypted under a key mixed from the PSK, and the responder's answer
//!   too, so each side proves it holds the key. A stranger's first message does not decrypt
//!   (refused before anything is sent back but one closed connection); a stranger answering a
//!   node's connection cannot produce the second message.
//! * **Forward secrecy**: the session keys come from fresh X25519 ephemerals, so a key leaked
//!   later does not decrypt a recorded session.
//! * **Replay-proof**: every transport message has an implicit, strictly increasing nonce, so a
//!   message replayed, dropped or reordered within a session fails to open; a recorded first
//!   message replayed in a new connection yields keys the replayer cannot use. The owner only
//!   counts a session as established once the initiator's first transport message opened
//!   (key confirmation), so a replayed handshake cannot displace the live session.
//!
//! The alternative the issue names, a nonce challenge with HKDF-derived keys and
//! ChaCha20-Poly1305, would need us to design the handshake; Noise is a published, analysed
//! one.
//!
//! # Wire
//!
//! On TCP every Noise message is preceded by its length (2 bytes, big-endian, as the Noise
//! specification suggests), so no message exceeds [`MAX_MESSAGE`] bytes and a peer can never
//! make the receiver reserve more. Handshake messages are at most [`MAX_HANDSHAKE_MESSAGE`].
//! After the handshake, an application frame (a [`crate::sync::SyncFrame`]) of up to
//! [`MAX_FRAME`] bytes is cut into fragments; each transport message's plaintext is one flag
//! byte ([`MORE`] or [`LAST`]) and up to 65,518 bytes of the frame. The receiver appends
//! fragments to one buffer that grows only with authentic data and refuses a frame beyond
//! [`MAX_FRAME`].
//!
//! Randomness (the ephemeral keys) comes from a seed given by the caller ([`Initiator::start`],
//! [`Responder::respond`]): the shell passes 32 bytes from the OS, tests and fuzz targets a
//! fixed seed, so a failing case replays exactly.

use std::sync::atomic::{AtomicBool, Ordering};

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use snow::params::{CipherChoice, DHChoice, HashChoice};
use snow::resolvers::{CryptoResolver, DefaultResolver};
use snow::types::{Cipher, Dh, Hash, Random};
use snow::{HandshakeState, TransportState};

/// The Noise protocol name.
pub const NOISE_PATTERN: &str = "Noise_NNpsk0_25519_ChaChaPoly_SHA256";
/// Bound into the handshake hash: a peer of another protocol or version fails the handshake.
pub const PROLOGUE: &[u8] = b"sbc-pair state-sync v2";
/// The payload of both handshake messages: checked after decryption.
const HANDSHAKE_PAYLOAD: &[u8] = b"sbc-sync/2";
/// The largest Noise message (the 2-byte length prefix's limit).
pub const MAX_MESSAGE: usize = 65_535;
/// The largest handshake message accepted (each is 58 bytes).
pub const MAX_HANDSHAKE_MESSAGE: usize = 128;
/// The largest application frame. Snapshots are cut into chunks below it
/// ([`crate::sync::SNAPSHOT_CHUNK_BYTES`]).
pub const MAX_FRAME: usize = 1024 * 1024;
/// Bytes of a Noise AEAD tag.
const TAG: usize = 16;
/// Frame bytes per transport message.
const CHUNK: usize = MAX_MESSAGE - TAG - 1;
/// Fragment flag: more fragments of this frame follow.
pub const MORE: u8 = 0;
/// Fragment flag: the frame's last fragment.
pub const LAST: u8 = 1;

/// Why the channel failed. Every variant closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// A handshake message longer than [`MAX_HANDSHAKE_MESSAGE`].
    #[error("handshake message of {0} bytes (at most {MAX_HANDSHAKE_MESSAGE})")]
    HandshakeTooLong(usize),
    /// The handshake did not complete: another key, another protocol or version, or garbage.
    #[error("handshake refused: not the pair's shared key, or not a v2 state-sync peer")]
    Handshake,
    /// A transport message did not open: tampered with, replayed, reordered or truncated.
    #[error("message not authentic (tampered with, replayed or out of order)")]
    NotAuthentic,
    /// A frame beyond [`MAX_FRAME`].
    #[error("frame larger than {MAX_FRAME} bytes")]
    FrameTooLarge,
    /// A fragment without a valid flag.
    #[error("malformed fragment")]
    BadFragment,
    /// The Noise library refused an operation (a bug here, not the peer's doing).
    #[error("noise: {0}")]
    Noise(String),
}

/// `snow`'s default primitives, with the random numbers drawn from a given seed, once.
struct SeededResolver {
    seed: [u8; 32],
    used: AtomicBool,
}

struct SeededRandom(ChaCha20Rng);

impl Random for SeededRandom {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        self.0.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoResolver for SeededResolver {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        // One handshake, one draw: a second would repeat the ephemeral key.
        if self.used.swap(true, Ordering::SeqCst) {
            return None;
        }
        Some(Box::new(SeededRandom(ChaCha20Rng::from_seed(self.seed))))
    }
    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        DefaultResolver.resolve_dh(choice)
    }
    fn resolve_hash(&self, choice: &HashChoice) -> Option<Box<dyn Hash>> {
        DefaultResolver.resolve_hash(choice)
    }
    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        DefaultResolver.resolve_cipher(choice)
    }
}

fn noise(e: &snow::Error) -> ChannelError {
    ChannelError::Noise(e.to_string())
}

fn handshake(
    psk: &[u8; 32],
    seed: [u8; 32],
    initiator: bool,
) -> Result<HandshakeState, ChannelError> {
    let params = NOISE_PATTERN.parse().map_err(|e: snow::Error| noise(&e))?;
    let resolver = Box::new(SeededResolver {
        seed,
        used: AtomicBool::new(false),
    });
    let builder = snow::Builder::with_resolver(params, resolver)
        .prologue(PROLOGUE)
        .map_err(|e| noise(&e))?
        .psk(0, psk)
        .map_err(|e| noise(&e))?;
    if initiator {
        builder.build_initiator()
    } else {
        builder.build_responder()
    }
    .map_err(|e| noise(&e))
}

fn check_len(message: &[u8]) -> Result<(), ChannelError> {
    if message.len() > MAX_HANDSHAKE_MESSAGE {
        return Err(ChannelError::HandshakeTooLong(message.len()));
    }
    Ok(())
}

/// The connecting side (the standby) after sending its first message.
pub struct Initiator {
    hs: HandshakeState,
}

impl std::fmt::Debug for Initiator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Initiator")
    }
}

impl Initiator {
    /// Starts a handshake: returns the state and the first message to send.
    ///
    /// # Errors
    /// Only [`ChannelError::Noise`] (a bug).
    pub fn start(psk: &[u8; 32], seed: [u8; 32]) -> Result<(Self, Vec<u8>), ChannelError> {
        let mut hs = handshake(psk, seed, true)?;
        let mut msg = vec![0u8; MAX_HANDSHAKE_MESSAGE];
        let n = hs
            .write_message(HANDSHAKE_PAYLOAD, &mut msg)
            .map_err(|e| noise(&e))?;
        msg.truncate(n);
        Ok((Self { hs }, msg))
    }

    /// Reads the responder's answer: the session, if the responder holds the key.
    ///
    /// # Errors
    /// [`ChannelError::HandshakeTooLong`] or [`ChannelError::Handshake`].
    pub fn finish(mut self, message: &[u8]) -> Result<Session, ChannelError> {
        check_len(message)?;
        let mut payload = [0u8; MAX_HANDSHAKE_MESSAGE];
        let n = self
            .hs
            .read_message(message, &mut payload)
            .map_err(|_| ChannelError::Handshake)?;
        if &payload[..n] != HANDSHAKE_PAYLOAD || !self.hs.is_handshake_finished() {
            return Err(ChannelError::Handshake);
        }
        Session::new(self.hs)
    }
}

/// The accepting side (the active).
#[derive(Debug)]
pub struct Responder;

impl Responder {
    /// Reads the initiator's first message; if it holds the key, returns the session and the
    /// answer to send.
    ///
    /// # Errors
    /// [`ChannelError::HandshakeTooLong`] or [`ChannelError::Handshake`].
    pub fn respond(
        psk: &[u8; 32],
        seed: [u8; 32],
        message: &[u8],
    ) -> Result<(Session, Vec<u8>), ChannelError> {
        check_len(message)?;
        let mut hs = handshake(psk, seed, false)?;
        let mut payload = [0u8; MAX_HANDSHAKE_MESSAGE];
        let n = hs
            .read_message(message, &mut payload)
            .map_err(|_| ChannelError::Handshake)?;
        if &payload[..n] != HANDSHAKE_PAYLOAD {
            return Err(ChannelError::Handshake);
        }
        let mut msg = vec![0u8; MAX_HANDSHAKE_MESSAGE];
        let n = hs
            .write_message(HANDSHAKE_PAYLOAD, &mut msg)
            .map_err(|e| noise(&e))?;
        msg.truncate(n);
        Ok((Session::new(hs)?, msg))
    }
}

/// An established channel: seals frames into messages and opens messages into frames.
pub struct Session {
    transport: TransportState,
    partial: Vec<u8>,
    buf: Vec<u8>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("partial", &self.partial.len())
            .finish_non_exhaustive()
    }
}

impl Session {
    fn new(hs: HandshakeState) -> Result<Self, ChannelError> {
        Ok(Self {
            transport: hs.into_transport_mode().map_err(|e| noise(&e))?,
            partial: Vec::new(),
            buf: vec![0u8; MAX_MESSAGE],
        })
    }

    /// Seals one frame into the transport messages that carry it, in order.
    ///
    /// # Errors
    /// [`ChannelError::FrameTooLarge`] (nothing is sealed), or [`ChannelError::Noise`].
    pub fn seal(&mut self, frame: &[u8]) -> Result<Vec<Vec<u8>>, ChannelError> {
        if frame.len() > MAX_FRAME {
            return Err(ChannelError::FrameTooLarge);
        }
        let mut out = Vec::with_capacity(frame.len() / CHUNK + 1);
        let mut plain = Vec::with_capacity(CHUNK.min(frame.len()) + 1);
        let mut chunks = frame.chunks(CHUNK).peekable();
        if chunks.peek().is_none() {
            plain.push(LAST);
            out.push(self.seal_one(&plain)?);
        }
        while let Some(chunk) = chunks.next() {
            plain.clear();
            plain.push(if chunks.peek().is_some() { MORE } else { LAST });
            plain.extend_from_slice(chunk);
            out.push(self.seal_one(&plain)?);
        }
        Ok(out)
    }

    fn seal_one(&mut self, plain: &[u8]) -> Result<Vec<u8>, ChannelError> {
        let n = self
            .transport
            .write_message(plain, &mut self.buf)
            .map_err(|e| noise(&e))?;
        Ok(self.buf[..n].to_vec())
    }

    /// Opens one transport message: `Some(frame)` when it completes a frame.
    ///
    /// # Errors
    /// [`ChannelError::NotAuthentic`], [`ChannelError::BadFragment`] or
    /// [`ChannelError::FrameTooLarge`]; the session is unusable afterwards (close it).
    pub fn open(&mut self, message: &[u8]) -> Result<Option<Vec<u8>>, ChannelError> {
        if message.len() > MAX_MESSAGE {
            return Err(ChannelError::NotAuthentic);
        }
        let n = self
            .transport
            .read_message(message, &mut self.buf)
            .map_err(|_| ChannelError::NotAuthentic)?;
        let Some((&flag, data)) = self.buf[..n].split_first() else {
            return Err(ChannelError::BadFragment);
        };
        if self.partial.len() + data.len() > MAX_FRAME {
            return Err(ChannelError::FrameTooLarge);
        }
        match flag {
            MORE => {
                self.partial.extend_from_slice(data);
                Ok(None)
            }
            LAST => {
                self.partial.extend_from_slice(data);
                Ok(Some(std::mem::take(&mut self.partial)))
            }
            _ => Err(ChannelError::BadFragment),
        }
    }
}

/// A session pair connected in memory (tests, fuzzing): `(initiator's, responder's)`.
///
/// # Errors
/// Only [`ChannelError::Noise`] (a bug), or a handshake failure if the keys differ.
pub fn connected_pair(
    initiator_psk: &[u8; 32],
    responder_psk: &[u8; 32],
    seed: u8,
) -> Result<(Session, Session), ChannelError> {
    let (init, m1) = Initiator::start(initiator_psk, [seed; 32])?;
    let (resp, m2) = Responder::respond(responder_psk, [seed.wrapping_add(1); 32], &m1)?;
    Ok((init.finish(&m2)?, resp))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PSK: [u8; 32] = [7; 32];

    fn pair() -> (Session, Session) {
        connected_pair(&PSK, &PSK, 1).expect("handshake")
    }

    fn deliver(from: &mut Session, to: &mut Session, frame: &[u8]) -> Vec<Vec<u8>> {
        let msgs = from.seal(frame).expect("seal");
        let mut frames = Vec::new();
        for m in &msgs {
            assert!(m.len() <= MAX_MESSAGE);
            if let Some(f) = to.open(m).expect("open") {
                frames.push(f);
            }
        }
        frames
    }

    #[test]
    fn frames_of_any_size_cross_both_ways() {
        let (mut a, mut b) = pair();
        for size in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5, MAX_FRAME] {
            let frame: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            assert_eq!(
                deliver(&mut a, &mut b, &frame),
                vec![frame.clone()],
                "{size}"
            );
            assert_eq!(deliver(&mut b, &mut a, &frame), vec![frame], "{size} back");
        }
        assert_eq!(
            a.seal(&vec![0; MAX_FRAME + 1]),
            Err(ChannelError::FrameTooLarge)
        );
    }

    #[test]
    fn a_wrong_key_fails_the_handshake_on_both_sides() {
        let other = [8u8; 32];
        let (_, m1) = Initiator::start(&other, [1; 32]).expect("start");
        assert!(matches!(
            Responder::respond(&PSK, [2; 32], &m1),
            Err(ChannelError::Handshake)
        ));
        // A responder with the wrong key: the initiator refuses its answer.
        let (init, m1) = Initiator::start(&PSK, [1; 32]).expect("start");
        let (_, m2) = Responder::respond(&PSK, [2; 32], &m1).expect("respond");
        let (init2, _) = Initiator::start(&other, [1; 32]).expect("start");
        assert!(matches!(init2.finish(&m2), Err(ChannelError::Handshake)));
        assert!(init.finish(&m2).is_ok());
    }

    #[test]
    fn garbage_and_oversized_handshakes_are_refused() {
        assert_eq!(
            Responder::respond(&PSK, [2; 32], &[0u8; 200]).map(|_| ()),
            Err(ChannelError::HandshakeTooLong(200))
        );
        for len in [0usize, 1, 31, 32, 48, 58, 100] {
            let junk: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            assert!(Responder::respond(&PSK, [2; 32], &junk).is_err(), "{len}");
        }
        // The first frames of version 1 (4-byte length, bincode Hello) are not a handshake.
        let v1_hello = [0u8, 0, 0, 12, 1, 0, 0xfd, 1, 2, 3, 4, 5, 6, 7, 8, 0];
        assert_eq!(
            Responder::respond(&PSK, [2; 32], &v1_hello).map(|_| ()),
            Err(ChannelError::Handshake)
        );
    }

    #[test]
    fn replayed_tampered_and_reordered_messages_do_not_open() {
        let (mut a, mut b) = pair();
        let m1 = a.seal(b"first").expect("seal");
        let m2 = a.seal(b"second").expect("seal");
        assert_eq!(b.open(&m1[0]), Ok(Some(b"first".to_vec())));
        assert_eq!(b.open(&m1[0]), Err(ChannelError::NotAuthentic), "replay");
        let (mut a, mut b) = pair();
        let m1 = a.seal(b"first").expect("seal");
        let m2b = a.seal(b"second").expect("seal");
        assert_eq!(b.open(&m2b[0]), Err(ChannelError::NotAuthentic), "reorder");
        let _ = (m1, m2);
        let (mut a, mut b) = pair();
        let mut m = a.seal(b"payload").expect("seal").remove(0);
        m[3] ^= 1;
        assert_eq!(b.open(&m), Err(ChannelError::NotAuthentic), "tampered");
    }

    #[test]
    fn a_replayed_first_message_gives_the_replayer_nothing() {
        // The responder accepts a replayed first message (it cannot tell), but the session it
        // makes shares no keys with anyone: what the replayer sends does not open.
        let (_, m1) = Initiator::start(&PSK, [1; 32]).expect("start");
        let (mut victim, _) = Responder::respond(&PSK, [2; 32], &m1).expect("respond");
        let (mut attacker, _) = connected_pair(&PSK, &PSK, 9).expect("own pair");
        let forged = attacker.seal(b"Snapshot").expect("seal");
        assert_eq!(victim.open(&forged[0]), Err(ChannelError::NotAuthentic));
    }

    #[test]
    fn bad_fragments_and_oversized_frames_are_refused() {
        let (mut a, mut b) = pair();
        let m = a.seal_one(&[]).expect("seal");
        assert_eq!(b.open(&m), Err(ChannelError::BadFragment), "no flag");
        let (mut a, mut b) = pair();
        let m = a.seal_one(&[9, 1, 2]).expect("seal");
        assert_eq!(b.open(&m), Err(ChannelError::BadFragment), "unknown flag");
        // An authentic peer announcing more than MAX_FRAME in MORE fragments is cut off.
        let (mut a, mut b) = pair();
        let mut plain = vec![MORE];
        plain.extend(std::iter::repeat_n(0u8, CHUNK));
        let mut refused = false;
        for _ in 0..(MAX_FRAME / CHUNK + 2) {
            let m = a.seal_one(&plain).expect("seal");
            match b.open(&m) {
                Ok(None) => {}
                Err(ChannelError::FrameTooLarge) => {
                    refused = true;
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(refused);
        assert!(b.partial.len() <= MAX_FRAME);
    }
}
