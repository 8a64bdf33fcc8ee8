//! The pair's datagrams: heartbeats, witness probes and witness answers.
//!
//! ```text
//! offset  size  field
//! 0       4     magic "SBHA" (heartbeat), "SBWP" (witness probe) or "SBWA" (witness answer)
//! 4       1     version (2)
//! 5       24    nonce: sender id | incarnation | sequence (8 bytes each, big-endian)
//! 29      N     payload, bincode 2 (standard config), sealed with XChaCha20-Poly1305
//! 29+N    16    the AEAD tag over bytes 0 .. 29 (associated data) and the payload
//! ```
//!
//! Each kind has its own key, derived from the shared key ([`crate::crypto`]), so the datagrams
//! are encrypted as well as authenticated (version 1 only signed them with HMAC-SHA256 and sent
//! the payload in clear). The tag covers the header and the nonce too, so a flipped magic,
//! version or nonce is caught as well. Decoding checks, in order: length, magic, version, tag
//! (a wrong key and tampering look the same: [`DecodeError::BadMac`]), payload; each failure has
//! its own [`DecodeError`] so the receiver can count it.
//!
//! **Freshness across restarts.** One datagram cannot say whether it is a replay; the state
//! machines check that per peer: sequence numbers must grow within an incarnation, and, since a
//! receiver that has just restarted remembers nothing, every heartbeat and probe *echoes* the
//! incarnation of the node it talks to (as last heard from it). A receiver takes a heartbeat as
//! evidence only if its echo is the receiver's own current incarnation, which no datagram
//! recorded before the receiver's start can carry. The witness does the same with its answers
//! ([`WitnessAnswer::witness`]) and the probes' echo. See [`crate::machine`] and
//! [`crate::witness`].

use std::hash::Hasher as _;

use fnv::FnvHasher;
use serde::{Deserialize, Serialize};

use crate::crypto::{self, Key, PairKeys, NONCE_LEN, TAG_LEN};
use crate::State;

/// The 4 bytes every heartbeat starts with.
pub const MAGIC: [u8; 4] = *b"SBHA";
/// The wire version this crate writes and accepts.
pub const VERSION: u8 = 2;
/// Bytes before the nonce: magic and version.
pub const HEADER_LEN: usize = 5;
/// Bytes before the sealed payload: header and nonce.
pub const PREFIX_LEN: usize = HEADER_LEN + NONCE_LEN;
/// Bytes of the trailing tag.
pub const MAC_LEN: usize = TAG_LEN;
/// The largest datagram a heartbeat may be.
pub const MAX_DATAGRAM: usize = 512;

/// A node's identity on the wire: FNV-1a (64-bit) of its configured name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub u64);

impl NodeId {
    /// The id of the node named `name`.
    #[must_use]
    pub fn from_name(name: &str) -> Self {
        let mut h = FnvHasher::default();
        h.write(name.as_bytes());
        Self(h.finish())
    }
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// A heartbeat path, the index into a peer's `destinations`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PathId(pub u8);

/// Flag: the sender is ineligible to become active until restarted (critical memory).
pub const FLAG_INELIGIBLE: u8 = 1;
/// Flag: the sender may take over as far as the witness is concerned (reached, or none set).
pub const FLAG_WITNESS_OK: u8 = 2;
/// Flag: the sender (a standby) asks the active to switch over (`notify berpd force` there).
pub const FLAG_SWITCHOVER_REQUEST: u8 = 4;
/// Flag: the sender holds a complete replica (standby that finished its sync, or an active).
pub const FLAG_SYNCED: u8 = 8;

/// Flag: the sender hears us (it considers its peer alive). An active hands over only to a
/// peer that hears it, so a one-way link cannot strand the role.
pub const FLAG_PEER_ALIVE: u8 = 16;

/// Flag: the sender holds the witness's active lease (a witness is configured and it granted
/// the sender the lease, which has not expired by the sender's clock).
pub const FLAG_LEASE: u8 = 32;

/// The content of one heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// The sender.
    pub node: NodeId,
    /// The sender's incarnation: grows at each restart (the shell uses the boot time in µs), so
    /// sequence numbers can restart at zero without looking replayed.
    pub incarnation: u64,
    /// The receiver's incarnation as the sender last heard it (0: not heard yet). The receiver
    /// takes the heartbeat as evidence only if this is its own current incarnation: a heartbeat
    /// recorded before the receiver restarted cannot carry it.
    pub echo: u64,
    /// The sender's redundancy state.
    pub state: State,
    /// The sender's health score, 0..=100.
    pub health: u8,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// Grows by one for every heartbeat the sender sends, on any path.
    pub seq: u64,
    /// The version of the configuration the sender runs.
    pub config_version: u64,
    /// The sender's epoch: grows at every takeover.
    pub epoch: u64,
    /// The path the sender sent this on.
    pub path: PathId,
    /// Milliseconds since the sender's start (informational: logs, round-trip estimates;
    /// freshness comes from [`Self::echo`], which needs no synchronized clocks).
    pub timestamp_ms: u64,
}

/// Why a datagram is not a valid heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Shorter than header plus MAC, or longer than [`MAX_DATAGRAM`].
    #[error("bad length")]
    BadLength,
    /// Does not start with [`MAGIC`].
    #[error("bad magic")]
    BadMagic,
    /// A version this build does not speak.
    #[error("unsupported version {0}")]
    BadVersion(u8),
    /// The AEAD tag does not verify: wrong key, tampered with, or not ours.
    #[error("not authentic (bad tag)")]
    BadMac,
    /// Authentic but the payload does not decode (a sender bug).
    #[error("malformed payload")]
    Malformed,
}

/// Why a datagram could not be encoded.
#[derive(Debug, thiserror::Error)]
#[error("datagram encoding failed: {0}")]
pub struct EncodeError(#[from] bincode::error::EncodeError);

fn seal<T: Serialize>(
    magic: [u8; 4],
    key: &Key,
    nonce: &[u8; NONCE_LEN],
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let plain = bincode::serde::encode_to_vec(value, bincode::config::standard())?;
    let mut header = [0u8; HEADER_LEN];
    header[..4].copy_from_slice(&magic);
    header[4] = VERSION;
    crypto::seal_datagram(key, &header, nonce, &plain, out);
    Ok(())
}

fn open<T: serde::de::DeserializeOwned>(
    magic: [u8; 4],
    key: &Key,
    datagram: &[u8],
) -> Result<T, DecodeError> {
    if datagram.len() < PREFIX_LEN + MAC_LEN || datagram.len() > MAX_DATAGRAM {
        return Err(DecodeError::BadLength);
    }
    if datagram[..4] != magic {
        return Err(DecodeError::BadMagic);
    }
    if datagram[4] != VERSION {
        return Err(DecodeError::BadVersion(datagram[4]));
    }
    let plain =
        crypto::open_datagram(key, HEADER_LEN, datagram).map_err(|_| DecodeError::BadMac)?;
    let (value, used): (T, usize) = bincode::serde::decode_from_slice(
        &plain,
        bincode::config::standard().with_limit::<MAX_DATAGRAM>(),
    )
    .map_err(|_| DecodeError::Malformed)?;
    if used != plain.len() {
        return Err(DecodeError::Malformed);
    }
    Ok(value)
}

impl Heartbeat {
    /// Appends the sealed datagram to `out` (cleared first).
    ///
    /// # Errors
    /// Only if bincode fails, which it does not for this type.
    pub fn encode(&self, keys: &PairKeys, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let nonce = crypto::nonce(self.node.0, self.incarnation, self.seq);
        seal(MAGIC, &keys.heartbeat, &nonce, self, out)
    }

    /// Checks and opens one datagram.
    ///
    /// # Errors
    /// The first check that fails, see [`DecodeError`].
    pub fn decode(keys: &PairKeys, datagram: &[u8]) -> Result<Self, DecodeError> {
        open(MAGIC, &keys.heartbeat, datagram)
    }
}

/// The 4 bytes a witness probe starts with (then the same header, payload and MAC layout as a
/// heartbeat).
pub const WITNESS_PROBE_MAGIC: [u8; 4] = *b"SBWP";
/// The 4 bytes a witness answer starts with.
pub const WITNESS_ANSWER_MAGIC: [u8; 4] = *b"SBWA";

/// A node asks the witness for the active lease, renews it, or releases it
/// (see [`crate::witness`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WitnessProbe {
    /// The sender.
    pub node: NodeId,
    /// The sender's incarnation (grows at each restart).
    pub incarnation: u64,
    /// The witness's incarnation as the sender last heard it in an answer (0: not yet). The
    /// witness grants or renews a lease only on a probe that echoes its current incarnation.
    pub echo: u64,
    /// Grows by one for every probe the sender sends; echoed in the answer.
    pub seq: u64,
    /// The sender's epoch (informational: logs and the witness's status).
    pub epoch: u64,
    /// True if the sender holds or wants the active role: grant or renew the lease. False
    /// releases a lease the sender holds (and only asks who holds it).
    pub want: bool,
    /// The lease duration asked for, in ms: the sender's dead time.
    pub lease_ms: u32,
}

impl WitnessProbe {
    /// Appends the sealed datagram to `out` (cleared first).
    ///
    /// # Errors
    /// Only if bincode fails, which it does not for this type.
    pub fn encode(&self, keys: &PairKeys, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let nonce = crypto::nonce(self.node.0, self.incarnation, self.seq);
        seal(WITNESS_PROBE_MAGIC, &keys.witness_probe, &nonce, self, out)
    }

    /// Checks and opens one datagram.
    ///
    /// # Errors
    /// The first check that fails, see [`DecodeError`].
    pub fn decode(keys: &PairKeys, datagram: &[u8]) -> Result<Self, DecodeError> {
        open(WITNESS_PROBE_MAGIC, &keys.witness_probe, datagram)
    }
}

/// The witness's answer to one [`WitnessProbe`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WitnessAnswer {
    /// The node the probe came from.
    pub node: NodeId,
    /// The probe's incarnation.
    pub incarnation: u64,
    /// The probe's sequence number.
    pub seq: u64,
    /// The witness's incarnation (grows at each restart of the witness). A probe must echo it
    /// before the witness grants anything: an answer to a probe that does not is a challenge
    /// (denied, no holder named).
    pub witness: u64,
    /// True if the prober holds the lease now, for `lease_ms` from when the witness received
    /// the probe.
    pub granted: bool,
    /// Who holds the lease after this probe (`None`: nobody).
    pub holder: Option<NodeId>,
    /// How long the holder's lease still runs, in ms, as the witness answered.
    pub remaining_ms: u32,
}

impl WitnessAnswer {
    /// Appends the sealed datagram to `out` (cleared first); `counter` is the witness's count of
    /// answers sent in this incarnation (it makes the nonce unique).
    ///
    /// # Errors
    /// Only if bincode fails, which it does not for this type.
    pub fn encode(
        &self,
        keys: &PairKeys,
        counter: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        let nonce = crypto::nonce(WITNESS_SENDER, self.witness, counter);
        seal(
            WITNESS_ANSWER_MAGIC,
            &keys.witness_answer,
            &nonce,
            self,
            out,
        )
    }

    /// Checks and opens one datagram.
    ///
    /// # Errors
    /// The first check that fails, see [`DecodeError`].
    pub fn decode(keys: &PairKeys, datagram: &[u8]) -> Result<Self, DecodeError> {
        open(WITNESS_ANSWER_MAGIC, &keys.witness_answer, datagram)
    }
}

/// The sender id in the nonce of a witness answer.
const WITNESS_SENDER: u64 = u64::from_be_bytes(*b"witness!");

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> PairKeys {
        PairKeys::derive(b"0123456789abcdef-test-key")
    }

    #[test]
    fn node_ids_are_fnv1a_of_the_name_as_older_nodes_compute_them() {
        assert_eq!(NodeId::from_name("a"), NodeId(0xaf63_dc4c_8601_ec8c));
    }

    fn other_keys() -> PairKeys {
        PairKeys::derive(b"another-key-of-16+")
    }

    fn sample() -> Heartbeat {
        Heartbeat {
            node: NodeId::from_name("sbc1"),
            incarnation: 7,
            echo: 11,
            state: State::Active,
            health: 100,
            flags: FLAG_WITNESS_OK | FLAG_SYNCED,
            seq: 42,
            config_version: 3,
            epoch: 9,
            path: PathId(1),
            timestamp_ms: 123_456,
        }
    }

    fn encoded() -> Vec<u8> {
        let mut out = Vec::new();
        sample().encode(&keys(), &mut out).expect("encode");
        out
    }

    #[test]
    fn round_trip() {
        let out = encoded();
        assert!(out.len() < 100, "heartbeat is {} bytes", out.len());
        assert_eq!(Heartbeat::decode(&keys(), &out), Ok(sample()));
    }

    #[test]
    fn payload_is_not_in_clear() {
        // The epoch 9 and health 100 would be single bytes in clear bincode; the config
        // version, epoch and state must not be readable: compare with the plain encoding.
        let plain =
            bincode::serde::encode_to_vec(sample(), bincode::config::standard()).expect("enc");
        let out = encoded();
        assert!(!out.windows(plain.len()).any(|w| w == plain.as_slice()));
    }

    #[test]
    fn wrong_key_is_bad_mac() {
        assert_eq!(
            Heartbeat::decode(&other_keys(), &encoded()),
            Err(DecodeError::BadMac)
        );
    }

    #[test]
    fn any_flipped_bit_is_refused() {
        let out = encoded();
        for i in 0..out.len() {
            for bit in 0..8 {
                let mut bad = out.clone();
                bad[i] ^= 1 << bit;
                assert!(
                    Heartbeat::decode(&keys(), &bad).is_err(),
                    "byte {i} bit {bit} accepted"
                );
            }
        }
    }

    #[test]
    fn header_errors_are_told_apart() {
        let out = encoded();
        let mut bad = out.clone();
        bad[0] = b'X';
        assert_eq!(Heartbeat::decode(&keys(), &bad), Err(DecodeError::BadMagic));
        let mut bad = out.clone();
        bad[4] = 1;
        assert_eq!(
            Heartbeat::decode(&keys(), &bad),
            Err(DecodeError::BadVersion(1))
        );
        let mut bad = out.clone();
        bad[10] ^= 1; // the nonce is authenticated too
        assert_eq!(Heartbeat::decode(&keys(), &bad), Err(DecodeError::BadMac));
    }

    #[test]
    fn truncated_and_oversized_are_bad_length() {
        let out = encoded();
        for n in 0..out.len() {
            let r = Heartbeat::decode(&keys(), &out[..n]);
            assert!(
                matches!(r, Err(DecodeError::BadLength | DecodeError::BadMac)),
                "len {n}: {r:?}"
            );
        }
        let mut long = out.clone();
        long.resize(MAX_DATAGRAM + 1, 0);
        assert_eq!(
            Heartbeat::decode(&keys(), &long),
            Err(DecodeError::BadLength)
        );
        assert_eq!(Heartbeat::decode(&keys(), &[]), Err(DecodeError::BadLength));
    }

    #[test]
    fn witness_messages_round_trip_and_are_not_heartbeats() {
        let probe = WitnessProbe {
            node: NodeId::from_name("sbc1"),
            incarnation: 7,
            echo: 5,
            seq: 3,
            epoch: 2,
            want: true,
            lease_ms: 1050,
        };
        let mut out = Vec::new();
        probe.encode(&keys(), &mut out).expect("encode");
        assert_eq!(WitnessProbe::decode(&keys(), &out), Ok(probe));
        assert_eq!(Heartbeat::decode(&keys(), &out), Err(DecodeError::BadMagic));
        assert_eq!(
            WitnessProbe::decode(&other_keys(), &out),
            Err(DecodeError::BadMac)
        );
        // A probe re-labelled as an answer does not open: the kinds have their own keys.
        let mut relabelled = out.clone();
        relabelled[..4].copy_from_slice(&WITNESS_ANSWER_MAGIC);
        assert_eq!(
            WitnessAnswer::decode(&keys(), &relabelled),
            Err(DecodeError::BadMac)
        );
        let answer = WitnessAnswer {
            node: NodeId::from_name("sbc1"),
            incarnation: 7,
            seq: 3,
            witness: 5,
            granted: false,
            holder: Some(NodeId::from_name("sbc2")),
            remaining_ms: 400,
        };
        answer.encode(&keys(), 1, &mut out).expect("encode");
        assert_eq!(WitnessAnswer::decode(&keys(), &out), Ok(answer));
        assert_eq!(
            WitnessProbe::decode(&keys(), &out),
            Err(DecodeError::BadMagic)
        );
    }

    #[test]
    fn authentic_garbage_is_malformed() {
        let mut out = Vec::new();
        crypto::seal_datagram(
            &keys().heartbeat,
            &[b'S', b'B', b'H', b'A', VERSION],
            &crypto::nonce(1, 1, 1),
            &[0xff, 0xff, 0xff],
            &mut out,
        );
        assert_eq!(
            Heartbeat::decode(&keys(), &out),
            Err(DecodeError::Malformed)
        );
    }
}
