//! The heartbeat datagram.
//!
//! ```text
//! offset  size  field
//! 0       4     magic "SBHA"
//! 4       1     version (1)
//! 5       2     payload length N, big-endian
//! 7       N     payload: bincode 2 (standard config) of `Heartbeat`
//! 7+N     32    HMAC-SHA256(shared key, bytes 0 .. 7+N)
//! ```
//!
//! The MAC covers the header too, so a flipped version or length is caught as well. Decoding
//! checks, in order: length, magic, version, declared length, MAC (constant time), payload; each
//! failure has its own [`DecodeError`] so the receiver can count it. Replay and staleness are
//! not a property of one datagram: the state machine checks them per peer and per path.
//!
//! The witness's probe ([`WitnessProbe`], magic `SBWP`) and answer ([`WitnessAnswer`], magic
//! `SBWA`) use the same layout and the same key.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::State;

/// The 4 bytes every heartbeat starts with.
pub const MAGIC: [u8; 4] = *b"SBHA";
/// The wire version this crate writes and accepts.
pub const VERSION: u8 = 1;
/// Bytes before the payload: magic, version, length.
pub const HEADER_LEN: usize = 7;
/// Bytes of the trailing MAC.
pub const MAC_LEN: usize = 32;
/// The largest datagram a heartbeat may be.
pub const MAX_DATAGRAM: usize = 512;

type HmacSha256 = Hmac<Sha256>;

/// A node's identity on the wire: FNV-1a (64-bit) of its configured name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub u64);

impl NodeId {
    /// The id of the node named `name`.
    #[must_use]
    pub fn from_name(name: &str) -> Self {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in name.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        Self(h)
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
    /// Milliseconds since the sender's start (informational: logs, round-trip estimates).
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
    /// The MAC does not match: wrong key, or tampered with.
    #[error("bad MAC")]
    BadMac,
    /// Authentic but the payload does not decode (a sender bug).
    #[error("malformed payload")]
    Malformed,
}

/// Why a heartbeat could not be encoded.
#[derive(Debug, thiserror::Error)]
#[error("heartbeat encoding failed: {0}")]
pub struct EncodeError(#[from] bincode::error::EncodeError);

fn mac(key: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    <HmacSha256 as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes any key length"))
}

fn seal<T: Serialize>(
    magic: [u8; 4],
    value: &T,
    key: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    out.clear();
    out.extend_from_slice(&magic);
    out.push(VERSION);
    out.extend_from_slice(&[0, 0]);
    bincode::serde::encode_into_std_write(value, out, bincode::config::standard())?;
    let n = out.len() - HEADER_LEN;
    let n16 = u16::try_from(n).unwrap_or(u16::MAX);
    out[5..7].copy_from_slice(&n16.to_be_bytes());
    let mut m = mac(key);
    m.update(out);
    let tag = m.finalize().into_bytes();
    out.extend_from_slice(&tag);
    Ok(())
}

fn open<T: serde::de::DeserializeOwned>(
    magic: [u8; 4],
    key: &[u8],
    datagram: &[u8],
) -> Result<T, DecodeError> {
    if datagram.len() < HEADER_LEN + MAC_LEN || datagram.len() > MAX_DATAGRAM {
        return Err(DecodeError::BadLength);
    }
    if datagram[..4] != magic {
        return Err(DecodeError::BadMagic);
    }
    if datagram[4] != VERSION {
        return Err(DecodeError::BadVersion(datagram[4]));
    }
    let n = usize::from(u16::from_be_bytes([datagram[5], datagram[6]]));
    if HEADER_LEN + n + MAC_LEN != datagram.len() {
        return Err(DecodeError::BadLength);
    }
    let (signed, tag) = datagram.split_at(HEADER_LEN + n);
    let mut m = mac(key);
    m.update(signed);
    m.verify_slice(tag).map_err(|_| DecodeError::BadMac)?;
    let (value, used): (T, usize) =
        bincode::serde::decode_from_slice(&signed[HEADER_LEN..], bincode::config::standard())
            .map_err(|_| DecodeError::Malformed)?;
    if used != n {
        return Err(DecodeError::Malformed);
    }
    Ok(value)
}

impl Heartbeat {
    /// Appends the authenticated datagram to `out` (cleared first).
    ///
    /// # Errors
    /// Only if bincode fails, which it does not for this type.
    pub fn encode(&self, key: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        seal(MAGIC, self, key, out)
    }

    /// Checks and decodes one datagram.
    ///
    /// # Errors
    /// The first check that fails, see [`DecodeError`].
    pub fn decode(key: &[u8], datagram: &[u8]) -> Result<Self, DecodeError> {
        open(MAGIC, key, datagram)
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
    /// Appends the authenticated datagram to `out` (cleared first).
    ///
    /// # Errors
    /// Only if bincode fails, which it does not for this type.
    pub fn encode(&self, key: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        seal(WITNESS_PROBE_MAGIC, self, key, out)
    }

    /// Checks and decodes one datagram.
    ///
    /// # Errors
    /// The first check that fails, see [`DecodeError`].
    pub fn decode(key: &[u8], datagram: &[u8]) -> Result<Self, DecodeError> {
        open(WITNESS_PROBE_MAGIC, key, datagram)
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
    /// True if the prober holds the lease now, for `lease_ms` from when the witness received
    /// the probe.
    pub granted: bool,
    /// Who holds the lease after this probe (`None`: nobody).
    pub holder: Option<NodeId>,
    /// How long the holder's lease still runs, in ms, as the witness answered.
    pub remaining_ms: u32,
}

impl WitnessAnswer {
    /// Appends the authenticated datagram to `out` (cleared first).
    ///
    /// # Errors
    /// Only if bincode fails, which it does not for this type.
    pub fn encode(&self, key: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        seal(WITNESS_ANSWER_MAGIC, self, key, out)
    }

    /// Checks and decodes one datagram.
    ///
    /// # Errors
    /// The first check that fails, see [`DecodeError`].
    pub fn decode(key: &[u8], datagram: &[u8]) -> Result<Self, DecodeError> {
        open(WITNESS_ANSWER_MAGIC, key, datagram)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef-test-key";

    fn sample() -> Heartbeat {
        Heartbeat {
            node: NodeId::from_name("sbc1"),
            incarnation: 7,
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
        sample().encode(KEY, &mut out).expect("encode");
        out
    }

    #[test]
    fn round_trip() {
        let out = encoded();
        assert!(out.len() < 100, "heartbeat is {} bytes", out.len());
        assert_eq!(Heartbeat::decode(KEY, &out), Ok(sample()));
    }

    #[test]
    fn wrong_key_is_bad_mac() {
        assert_eq!(
            Heartbeat::decode(b"another-key-of-16+", &encoded()),
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
                    Heartbeat::decode(KEY, &bad).is_err(),
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
        assert_eq!(Heartbeat::decode(KEY, &bad), Err(DecodeError::BadMagic));
        let mut bad = out.clone();
        bad[4] = 2;
        assert_eq!(
            Heartbeat::decode(KEY, &bad),
            Err(DecodeError::BadVersion(2))
        );
        let mut bad = out.clone();
        bad[6] ^= 1;
        assert_eq!(Heartbeat::decode(KEY, &bad), Err(DecodeError::BadLength));
    }

    #[test]
    fn truncated_and_oversized_are_bad_length() {
        let out = encoded();
        for n in 0..out.len() {
            let r = Heartbeat::decode(KEY, &out[..n]);
            assert!(
                matches!(r, Err(DecodeError::BadLength | DecodeError::BadMac)),
                "len {n}: {r:?}"
            );
        }
        let mut long = out.clone();
        long.resize(MAX_DATAGRAM + 1, 0);
        assert_eq!(Heartbeat::decode(KEY, &long), Err(DecodeError::BadLength));
        assert_eq!(Heartbeat::decode(KEY, &[]), Err(DecodeError::BadLength));
    }

    #[test]
    fn witness_messages_round_trip_and_are_not_heartbeats() {
        let probe = WitnessProbe {
            node: NodeId::from_name("sbc1"),
            incarnation: 7,
            seq: 3,
            epoch: 2,
            want: true,
            lease_ms: 1050,
        };
        let mut out = Vec::new();
        probe.encode(KEY, &mut out).expect("encode");
        assert_eq!(WitnessProbe::decode(KEY, &out), Ok(probe));
        assert_eq!(Heartbeat::decode(KEY, &out), Err(DecodeError::BadMagic));
        assert_eq!(
            WitnessProbe::decode(b"another-key-of-16+", &out),
            Err(DecodeError::BadMac)
        );
        let answer = WitnessAnswer {
            node: NodeId::from_name("sbc1"),
            incarnation: 7,
            seq: 3,
            granted: false,
            holder: Some(NodeId::from_name("sbc2")),
            remaining_ms: 400,
        };
        answer.encode(KEY, &mut out).expect("encode");
        assert_eq!(WitnessAnswer::decode(KEY, &out), Ok(answer));
        assert_eq!(WitnessProbe::decode(KEY, &out), Err(DecodeError::BadMagic));
    }

    #[test]
    fn authentic_garbage_is_malformed() {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&3u16.to_be_bytes());
        out.extend_from_slice(&[0xff, 0xff, 0xff]);
        let mut m = mac(KEY);
        m.update(&out);
        let tag = m.finalize().into_bytes();
        out.extend_from_slice(&tag);
        assert_eq!(Heartbeat::decode(KEY, &out), Err(DecodeError::Malformed));
    }
}
