//! HEPv3 (Homer Encapsulation Protocol version 3) encoding and strict decoding, sans-IO.
//!
//! A HEPv3 packet is the 4 bytes `HEP3`, its total length (u16, big-endian, counting these 6
//! header bytes), then chunks. Each chunk is a vendor id (u16), a type id (u16), a length (u16,
//! counting the chunk's own 6-byte header) and the value; all integers are big-endian. Only the
//! generic chunks (vendor id 0) used for SIP and RTCP capture are written:
//!
//! | type           | value                                         |
//! |----------------|-----------------------------------------------|
//! | 0x0001         | IP family (u8): 2 IPv4, 10 IPv6               |
//! | 0x0002         | IP protocol id (u8): 17 UDP, 6 TCP            |
//! | 0x0003, 0x0004 | IPv4 source, destination                      |
//! | 0x0005, 0x0006 | IPv6 source, destination                      |
//! | 0x0007, 0x0008 | source, destination port (u16)                |
//! | 0x0009         | timestamp, seconds since the UNIX epoch (u32) |
//! | 0x000a         | timestamp, microseconds added (u32)           |
//! | 0x000b         | protocol type (u8): 1 SIP, 5 RTCP             |
//! | 0x000c         | capture agent id (u32)                        |
//! | 0x000e         | authentication key (octets)                   |
//! | 0x000f         | captured payload (octets)                     |
//! | 0x0011         | internal correlation id (octets)              |
//!
//! The packet is at most 65,535 bytes (its length field is a u16): [`encode`] refuses a larger
//! one with [`HepError::TooLong`] rather than truncating the captured message. [`decode`] is
//! strict about framing and skips chunks it does not know; it takes one whole packet (on a TCP
//! stream, the header's length says where the next one starts).
//!
//! The chunk ids were checked against the generic chunk list of the HEP3 specification
//! (sipcapture/HEP, rev. 12) as two independent implementations transcribe it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The magic that starts every HEPv3 packet.
pub const MAGIC: &[u8; 4] = b"HEP3";
/// The largest HEPv3 packet: its total length is a u16.
pub const MAX_LEN: usize = u16::MAX as usize;

const HEADER_LEN: usize = 6;
const CHUNK_HEADER_LEN: usize = 6;

const FAMILY_V4: u8 = 2;
const FAMILY_V6: u8 = 10;

const CHUNK_FAMILY: u16 = 0x0001;
const CHUNK_IP_PROTO: u16 = 0x0002;
const CHUNK_V4_SRC: u16 = 0x0003;
const CHUNK_V4_DST: u16 = 0x0004;
const CHUNK_V6_SRC: u16 = 0x0005;
const CHUNK_V6_DST: u16 = 0x0006;
const CHUNK_SRC_PORT: u16 = 0x0007;
const CHUNK_DST_PORT: u16 = 0x0008;
const CHUNK_TS_SECS: u16 = 0x0009;
const CHUNK_TS_MICROS: u16 = 0x000a;
const CHUNK_PROTO_TYPE: u16 = 0x000b;
const CHUNK_CAPTURE_ID: u16 = 0x000c;
const CHUNK_AUTH_KEY: u16 = 0x000e;
const CHUNK_PAYLOAD: u16 = 0x000f;
const CHUNK_CORRELATION: u16 = 0x0011;

/// The transport the captured message travelled on (HEP chunk 0x0002, an IP protocol number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// UDP (17).
    Udp,
    /// TCP (6); TLS legs are captured as TCP, with the decrypted message as payload.
    Tcp,
    /// Any other IP protocol number, kept as read.
    Other(u8),
}

impl Transport {
    /// The IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            Self::Udp => 17,
            Self::Tcp => 6,
            Self::Other(n) => n,
        }
    }

    /// The transport of an IP protocol number.
    pub fn from_number(n: u8) -> Self {
        match n {
            17 => Self::Udp,
            6 => Self::Tcp,
            n => Self::Other(n),
        }
    }
}

/// What the payload is (HEP chunk 0x000b, the capture protocol type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadType {
    /// A SIP message (1).
    Sip,
    /// An RTCP report (5).
    Rtcp,
    /// Any other capture protocol type, kept as read.
    Other(u8),
}

impl PayloadType {
    /// The HEP protocol type number.
    pub fn number(self) -> u8 {
        match self {
            Self::Sip => 1,
            Self::Rtcp => 5,
            Self::Other(n) => n,
        }
    }

    /// The payload type of a HEP protocol type number.
    pub fn from_number(n: u8) -> Self {
        match n {
            1 => Self::Sip,
            5 => Self::Rtcp,
            n => Self::Other(n),
        }
    }
}

/// One captured message, borrowing its byte fields: what [`encode`] writes and [`decode`] reads.
///
/// The IP family is that of `src` and `dst`, which must be the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HepPacket<'a> {
    /// Where the message came from.
    pub src: SocketAddr,
    /// Where it went.
    pub dst: SocketAddr,
    /// Its transport.
    pub transport: Transport,
    /// Capture time, whole seconds since the UNIX epoch (passed in, never read from a clock).
    pub time_secs: u32,
    /// Capture time, microseconds added to `time_secs`.
    pub time_micros: u32,
    /// What the payload is.
    pub payload_type: PayloadType,
    /// The capture agent id (the `capture-id` setting).
    pub capture_id: u32,
    /// The HEP password, sent in clear: an identifier, not a secret. No chunk when `None`.
    pub auth_key: Option<&'a [u8]>,
    /// The correlation id tying packets together (e.g. the two legs of a call). No chunk when
    /// `None`.
    pub correlation_id: Option<&'a [u8]>,
    /// The captured message.
    pub payload: &'a [u8],
}

/// Why a packet could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HepError {
    /// The encoded packet would be longer than 65,535 bytes.
    #[error("HEP packet of {0} bytes is longer than 65535")]
    TooLong(usize),
    /// The source and destination are not of the same IP family.
    #[error("source and destination of different IP families")]
    MixedFamilies,
    /// The buffer is shorter than the 6-byte HEPv3 header.
    #[error("HEP packet shorter than its header")]
    Short,
    /// The buffer does not start with `HEP3`.
    #[error("not a HEPv3 packet (bad magic)")]
    BadMagic,
    /// The header's total length is not the buffer's length.
    #[error("HEP length field {field} but {actual} bytes")]
    LengthMismatch {
        /// The length the header states.
        field: usize,
        /// The buffer's length.
        actual: usize,
    },
    /// A chunk's length is below its header's 6 bytes or runs past the end of the packet.
    #[error("HEP chunk at offset {0} has a bad length")]
    BadChunk(usize),
    /// A known chunk's value has the wrong size for its type.
    #[error("HEP chunk type {0:#06x} has a value of the wrong size")]
    BadValue(u16),
    /// A known chunk appears twice.
    #[error("HEP chunk type {0:#06x} appears twice")]
    Duplicate(u16),
    /// A chunk needed to describe the packet is missing.
    #[error("HEP chunk type {0:#06x} is missing")]
    Missing(u16),
    /// The IP family chunk names an unknown family or disagrees with the address chunks.
    #[error("HEP IP family missing, unknown or not that of the addresses")]
    BadFamily,
}

/// The encoded length of `p`, which may exceed [`MAX_LEN`] (then [`encode`] refuses it).
pub fn encoded_len(p: &HepPacket<'_>) -> usize {
    // family, protocol and protocol type (u8); 2 ports (u16); 2 timestamps and capture id (u32).
    let fixed =
        3 * (CHUNK_HEADER_LEN + 1) + 2 * (CHUNK_HEADER_LEN + 2) + 3 * (CHUNK_HEADER_LEN + 4);
    let addr_len = if p.src.is_ipv4() { 4 } else { 16 };
    let optional = |v: Option<&[u8]>| v.map_or(0, |v| CHUNK_HEADER_LEN + v.len());
    HEADER_LEN
        + fixed
        + 2 * (CHUNK_HEADER_LEN + addr_len)
        + optional(p.auth_key)
        + optional(p.correlation_id)
        + CHUNK_HEADER_LEN
        + p.payload.len()
}

/// Encodes `p` as one HEPv3 packet.
pub fn encode(p: &HepPacket<'_>) -> Result<Vec<u8>, HepError> {
    let mut out = Vec::new();
    encode_into(p, &mut out)?;
    Ok(out)
}

/// Appends `p`, encoded as one HEPv3 packet, to `out` (a buffer reused across packets).
/// On error `out` is left as it was.
pub fn encode_into(p: &HepPacket<'_>, out: &mut Vec<u8>) -> Result<(), HepError> {
    let total = encoded_len(p);
    let total16 = u16::try_from(total).map_err(|_| HepError::TooLong(total))?;
    let family = match (p.src, p.dst) {
        (SocketAddr::V4(_), SocketAddr::V4(_)) => FAMILY_V4,
        (SocketAddr::V6(_), SocketAddr::V6(_)) => FAMILY_V6,
        _ => return Err(HepError::MixedFamilies),
    };
    out.reserve(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&total16.to_be_bytes());
    chunk(out, CHUNK_FAMILY, &[family]);
    chunk(out, CHUNK_IP_PROTO, &[p.transport.number()]);
    match (p.src.ip(), p.dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            chunk(out, CHUNK_V4_SRC, &s.octets());
            chunk(out, CHUNK_V4_DST, &d.octets());
        }
        (s, d) => {
            chunk(out, CHUNK_V6_SRC, &v6(s).octets());
            chunk(out, CHUNK_V6_DST, &v6(d).octets());
        }
    }
    chunk(out, CHUNK_SRC_PORT, &p.src.port().to_be_bytes());
    chunk(out, CHUNK_DST_PORT, &p.dst.port().to_be_bytes());
    chunk(out, CHUNK_TS_SECS, &p.time_secs.to_be_bytes());
    chunk(out, CHUNK_TS_MICROS, &p.time_micros.to_be_bytes());
    chunk(out, CHUNK_PROTO_TYPE, &[p.payload_type.number()]);
    chunk(out, CHUNK_CAPTURE_ID, &p.capture_id.to_be_bytes());
    if let Some(key) = p.auth_key {
        chunk(out, CHUNK_AUTH_KEY, key);
    }
    if let Some(id) = p.correlation_id {
        chunk(out, CHUNK_CORRELATION, id);
    }
    chunk(out, CHUNK_PAYLOAD, p.payload);
    Ok(())
}

/// The IPv6 address of `a`, which the caller knows is IPv6 (an IPv4 one is mapped, not lost).
fn v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// Writes one generic chunk. Its length fits a u16: the whole packet's was checked first.
fn chunk(out: &mut Vec<u8>, type_id: u16, value: &[u8]) {
    let len = (CHUNK_HEADER_LEN + value.len()) as u16;
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&type_id.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(value);
}

/// Decodes one whole HEPv3 packet, borrowing its byte fields from `buf`.
///
/// Strict: `buf` must be exactly the packet its header announces, every chunk must lie within
/// it, each known chunk must appear at most once with a value of its type's size, and the
/// family, protocol, addresses, ports, timestamps, protocol type, capture id and payload must
/// all be present. Chunks of other vendors or of unknown generic types are skipped.
pub fn decode(buf: &[u8]) -> Result<HepPacket<'_>, HepError> {
    let (magic, rest) = buf.split_first_chunk::<4>().ok_or(HepError::Short)?;
    let (len, _) = rest.split_first_chunk::<2>().ok_or(HepError::Short)?;
    if magic != MAGIC {
        return Err(HepError::BadMagic);
    }
    let field = usize::from(u16::from_be_bytes(*len));
    if field != buf.len() {
        return Err(HepError::LengthMismatch {
            field,
            actual: buf.len(),
        });
    }

    let mut seen = Fields::default();
    let mut at = HEADER_LEN;
    while at < buf.len() {
        let head = buf
            .get(at..at + CHUNK_HEADER_LEN)
            .ok_or(HepError::BadChunk(at))?;
        let vendor = u16::from_be_bytes([head[0], head[1]]);
        let type_id = u16::from_be_bytes([head[2], head[3]]);
        let len = usize::from(u16::from_be_bytes([head[4], head[5]]));
        if len < CHUNK_HEADER_LEN {
            return Err(HepError::BadChunk(at));
        }
        let value = buf
            .get(at + CHUNK_HEADER_LEN..at + len)
            .ok_or(HepError::BadChunk(at))?;
        if vendor == 0 {
            seen.take(type_id, value)?;
        }
        at += len;
    }
    seen.finish()
}

/// The known chunks met so far while decoding.
#[derive(Default)]
struct Fields<'a> {
    family: Option<u8>,
    ip_proto: Option<u8>,
    v4_src: Option<Ipv4Addr>,
    v4_dst: Option<Ipv4Addr>,
    v6_src: Option<Ipv6Addr>,
    v6_dst: Option<Ipv6Addr>,
    src_port: Option<u16>,
    dst_port: Option<u16>,
    time_secs: Option<u32>,
    time_micros: Option<u32>,
    proto_type: Option<u8>,
    capture_id: Option<u32>,
    auth_key: Option<&'a [u8]>,
    payload: Option<&'a [u8]>,
    correlation_id: Option<&'a [u8]>,
}

/// Stores `v` in `slot`, refusing a second occurrence of chunk `t`.
fn once<T>(slot: &mut Option<T>, t: u16, v: T) -> Result<(), HepError> {
    if slot.is_some() {
        return Err(HepError::Duplicate(t));
    }
    *slot = Some(v);
    Ok(())
}

/// The value of chunk `t` as exactly `N` bytes.
fn fixed<const N: usize>(t: u16, value: &[u8]) -> Result<[u8; N], HepError> {
    <[u8; N]>::try_from(value).map_err(|_| HepError::BadValue(t))
}

impl<'a> Fields<'a> {
    /// Takes one generic chunk; unknown types are ignored.
    fn take(&mut self, t: u16, v: &'a [u8]) -> Result<(), HepError> {
        match t {
            CHUNK_FAMILY => once(&mut self.family, t, fixed::<1>(t, v)?[0]),
            CHUNK_IP_PROTO => once(&mut self.ip_proto, t, fixed::<1>(t, v)?[0]),
            CHUNK_V4_SRC => once(&mut self.v4_src, t, Ipv4Addr::from(fixed::<4>(t, v)?)),
            CHUNK_V4_DST => once(&mut self.v4_dst, t, Ipv4Addr::from(fixed::<4>(t, v)?)),
            CHUNK_V6_SRC => once(&mut self.v6_src, t, Ipv6Addr::from(fixed::<16>(t, v)?)),
            CHUNK_V6_DST => once(&mut self.v6_dst, t, Ipv6Addr::from(fixed::<16>(t, v)?)),
            CHUNK_SRC_PORT => once(&mut self.src_port, t, u16::from_be_bytes(fixed(t, v)?)),
            CHUNK_DST_PORT => once(&mut self.dst_port, t, u16::from_be_bytes(fixed(t, v)?)),
            CHUNK_TS_SECS => once(&mut self.time_secs, t, u32::from_be_bytes(fixed(t, v)?)),
            CHUNK_TS_MICROS => once(&mut self.time_micros, t, u32::from_be_bytes(fixed(t, v)?)),
            CHUNK_PROTO_TYPE => once(&mut self.proto_type, t, fixed::<1>(t, v)?[0]),
            CHUNK_CAPTURE_ID => once(&mut self.capture_id, t, u32::from_be_bytes(fixed(t, v)?)),
            CHUNK_AUTH_KEY => once(&mut self.auth_key, t, v),
            CHUNK_PAYLOAD => once(&mut self.payload, t, v),
            CHUNK_CORRELATION => once(&mut self.correlation_id, t, v),
            _ => Ok(()),
        }
    }

    /// The packet, once every needed chunk was met and the family agrees with the addresses.
    fn finish(self) -> Result<HepPacket<'a>, HepError> {
        let family = self.family.ok_or(HepError::Missing(CHUNK_FAMILY))?;
        let (src, dst): (IpAddr, IpAddr) = match family {
            FAMILY_V4 if self.v6_src.is_none() && self.v6_dst.is_none() => (
                self.v4_src.ok_or(HepError::Missing(CHUNK_V4_SRC))?.into(),
                self.v4_dst.ok_or(HepError::Missing(CHUNK_V4_DST))?.into(),
            ),
            FAMILY_V6 if self.v4_src.is_none() && self.v4_dst.is_none() => (
                self.v6_src.ok_or(HepError::Missing(CHUNK_V6_SRC))?.into(),
                self.v6_dst.ok_or(HepError::Missing(CHUNK_V6_DST))?.into(),
            ),
            _ => return Err(HepError::BadFamily),
        };
        let src_port = self.src_port.ok_or(HepError::Missing(CHUNK_SRC_PORT))?;
        let dst_port = self.dst_port.ok_or(HepError::Missing(CHUNK_DST_PORT))?;
        let ip_proto = self.ip_proto.ok_or(HepError::Missing(CHUNK_IP_PROTO))?;
        let proto_type = self.proto_type.ok_or(HepError::Missing(CHUNK_PROTO_TYPE))?;
        Ok(HepPacket {
            src: SocketAddr::new(src, src_port),
            dst: SocketAddr::new(dst, dst_port),
            transport: Transport::from_number(ip_proto),
            time_secs: self.time_secs.ok_or(HepError::Missing(CHUNK_TS_SECS))?,
            time_micros: self.time_micros.ok_or(HepError::Missing(CHUNK_TS_MICROS))?,
            payload_type: PayloadType::from_number(proto_type),
            capture_id: self.capture_id.ok_or(HepError::Missing(CHUNK_CAPTURE_ID))?,
            auth_key: self.auth_key,
            correlation_id: self.correlation_id,
            payload: self.payload.ok_or(HepError::Missing(CHUNK_PAYLOAD))?,
        })
    }
}

/// One traced SIP message as a HEPv3 packet appended to `out`: its addresses as on the wire
/// (received: from the peer to us; sent: from us to the peer; an IPv4 address beside an
/// IPv6 one written IPv4-mapped), its time, the caller leg's Call-ID as correlation id, and
/// the message with its credentials masked. TLS is written as TCP (the payload is the
/// decrypted message).
///
/// # Errors
/// A message too long for one HEP packet.
pub fn encode_event(
    event: &crate::engine::TraceEvent,
    capture_id: u32,
    auth_key: Option<&[u8]>,
    out: &mut Vec<u8>,
) -> Result<(), HepError> {
    use crate::sip::dialog::LegTransport;
    use crate::trace::capture::Direction;
    let (local, peer) = same_family(event.local, event.peer);
    let (src, dst) = match event.direction {
        Direction::Received => (peer, local),
        Direction::Sent => (local, peer),
    };
    let payload = super::mask::mask_credentials(&event.bytes);
    encode_into(
        &HepPacket {
            src,
            dst,
            transport: match event.transport {
                LegTransport::Udp => Transport::Udp,
                LegTransport::Tcp | LegTransport::Tls => Transport::Tcp,
            },
            time_secs: u32::try_from(event.at_unix_us / 1_000_000).unwrap_or(u32::MAX),
            time_micros: u32::try_from(event.at_unix_us % 1_000_000).unwrap_or(0),
            payload_type: PayloadType::Sip,
            capture_id,
            auth_key,
            correlation_id: event.call.as_ref().map(|c| c.correlation.as_bytes()),
            payload: &payload,
        },
        out,
    )
}

/// Two addresses of one family: an IPv4 one beside an IPv6 one becomes IPv4-mapped.
fn same_family(a: SocketAddr, b: SocketAddr) -> (SocketAddr, SocketAddr) {
    let v6 = |s: SocketAddr| match s {
        SocketAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port()),
        v6 @ SocketAddr::V6(_) => v6,
    };
    if a.is_ipv4() == b.is_ipv4() {
        (a, b)
    } else {
        (v6(a), v6(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4_packet() -> HepPacket<'static> {
        HepPacket {
            src: "10.0.0.1:5060".parse().expect("address"),
            dst: "10.0.0.2:5080".parse().expect("address"),
            transport: Transport::Udp,
            time_secs: 1_700_000_000,
            time_micros: 250_000,
            payload_type: PayloadType::Sip,
            capture_id: 2001,
            auth_key: Some(b"pw"),
            correlation_id: Some(b"c1"),
            payload: b"OPTIONS",
        }
    }

    fn v6_packet() -> HepPacket<'static> {
        HepPacket {
            src: "[2001:db8::1]:5061".parse().expect("address"),
            dst: "[2001:db8::2:3]:40000".parse().expect("address"),
            transport: Transport::Tcp,
            time_secs: u32::MAX,
            time_micros: 999_999,
            payload_type: PayloadType::Rtcp,
            capture_id: u32::MAX,
            auth_key: None,
            correlation_id: Some(b"a84b4c76e66710@pc33"),
            payload: &[0x81, 0xc9, 0x00, 0x07, 0xff, 0x00],
        }
    }

    /// The bytes of `v4_packet`, written out by hand from the HEPv3 specification.
    const V4_BYTES: &[u8] = &[
        b'H', b'E', b'P', b'3', 0x00, 122, // magic, total length 122
        0, 0, 0x00, 0x01, 0, 7, 2, // IP family: IPv4
        0, 0, 0x00, 0x02, 0, 7, 17, // IP protocol: UDP
        0, 0, 0x00, 0x03, 0, 10, 10, 0, 0, 1, // IPv4 source
        0, 0, 0x00, 0x04, 0, 10, 10, 0, 0, 2, // IPv4 destination
        0, 0, 0x00, 0x07, 0, 8, 0x13, 0xc4, // source port 5060
        0, 0, 0x00, 0x08, 0, 8, 0x13, 0xd8, // destination port 5080
        0, 0, 0x00, 0x09, 0, 10, 0x65, 0x53, 0xf1, 0x00, // seconds 1,700,000,000
        0, 0, 0x00, 0x0a, 0, 10, 0x00, 0x03, 0xd0, 0x90, // microseconds 250,000
        0, 0, 0x00, 0x0b, 0, 7, 1, // protocol type: SIP
        0, 0, 0x00, 0x0c, 0, 10, 0x00, 0x00, 0x07, 0xd1, // capture agent 2001
        0, 0, 0x00, 0x0e, 0, 8, b'p', b'w', // auth key
        0, 0, 0x00, 0x11, 0, 8, b'c', b'1', // correlation id
        0, 0, 0x00, 0x0f, 0, 13, b'O', b'P', b'T', b'I', b'O', b'N', b'S', // payload
    ];

    /// Sets the header's total length to the buffer's.
    fn fix_len(buf: &mut [u8]) {
        let len = u16::try_from(buf.len()).expect("short enough");
        buf[4..6].copy_from_slice(&len.to_be_bytes());
    }

    #[test]
    fn trace_hep_known_bytes() {
        let bytes = encode(&v4_packet()).expect("encodes");
        assert_eq!(bytes, V4_BYTES);
        assert_eq!(encoded_len(&v4_packet()), V4_BYTES.len());
        assert_eq!(decode(V4_BYTES), Ok(v4_packet()));
    }

    #[test]
    fn trace_hep_round_trip_ipv4_and_ipv6() {
        for p in [v4_packet(), v6_packet()] {
            let bytes = encode(&p).expect("encodes");
            assert_eq!(bytes.len(), encoded_len(&p));
            assert_eq!(decode(&bytes), Ok(p));
        }
        // Optional chunks absent, other numbers kept.
        let p = HepPacket {
            auth_key: None,
            correlation_id: None,
            transport: Transport::Other(132),
            payload_type: PayloadType::Other(100),
            payload: b"",
            ..v4_packet()
        };
        let bytes = encode(&p).expect("encodes");
        assert_eq!(bytes.len(), V4_BYTES.len() - 8 - 8 - 7);
        assert_eq!(decode(&bytes), Ok(p));
        let v6 = encode(&v6_packet()).expect("encodes");
        assert_eq!(&v6[6..13], &[0, 0, 0, 1, 0, 7, 10], "IPv6 family is 10");
        assert_eq!(&v6[13..20], &[0, 0, 0, 2, 0, 7, 6], "TCP is 6");
        assert_eq!(&v6[20..26], &[0, 0, 0, 5, 0, 22], "IPv6 source chunk");
    }

    #[test]
    fn trace_hep_mixed_families_refused() {
        let p = HepPacket {
            dst: "[::1]:5060".parse().expect("address"),
            ..v4_packet()
        };
        assert_eq!(encode(&p), Err(HepError::MixedFamilies));
    }

    #[test]
    fn trace_hep_unknown_chunks_skipped() {
        let mut buf = V4_BYTES.to_vec();
        buf.extend_from_slice(&[0, 0, 0x00, 0x12, 0, 8, 0, 42]); // generic VLAN id
        buf.extend_from_slice(&[0, 3, 0x00, 0x01, 0, 9, 1, 2, 3]); // vendor 3's own type 1
        buf.extend_from_slice(&[0, 0, 0x12, 0x34, 0, 6]); // unknown type, empty value
        fix_len(&mut buf);
        assert_eq!(decode(&buf), Ok(v4_packet()));
    }

    #[test]
    fn trace_hep_malformed_refused() {
        assert_eq!(decode(b""), Err(HepError::Short));
        assert_eq!(decode(b"HEP3\x00"), Err(HepError::Short));
        let mut bad = V4_BYTES.to_vec();
        bad[3] = b'2';
        assert_eq!(decode(&bad), Err(HepError::BadMagic));
        // Every truncation is refused: the length field no longer matches.
        for n in 6..V4_BYTES.len() {
            assert!(
                matches!(decode(&V4_BYTES[..n]), Err(HepError::LengthMismatch { .. })),
                "prefix {n}"
            );
        }
        // Trailing bytes.
        let mut long = V4_BYTES.to_vec();
        long.push(0);
        assert!(matches!(
            decode(&long),
            Err(HepError::LengthMismatch { .. })
        ));
        // A chunk length below its header, and one past the end.
        let mut bad = V4_BYTES.to_vec();
        bad[11] = 5;
        assert_eq!(decode(&bad), Err(HepError::BadChunk(6)));
        let mut bad = V4_BYTES.to_vec();
        bad[11] = 200;
        assert_eq!(decode(&bad), Err(HepError::BadChunk(6)));
        let mut bad = V4_BYTES.to_vec();
        bad.extend_from_slice(&[0, 0, 0]); // a chunk header cut short
        fix_len(&mut bad);
        assert_eq!(decode(&bad), Err(HepError::BadChunk(V4_BYTES.len())));
        // A value of the wrong size for its type.
        let mut bad = V4_BYTES.to_vec();
        bad.extend_from_slice(&[0, 0, 0x00, 0x01, 0, 8, 2, 2]);
        fix_len(&mut bad);
        assert_eq!(decode(&bad), Err(HepError::BadValue(CHUNK_FAMILY)));
        // A known chunk twice.
        let mut bad = V4_BYTES.to_vec();
        bad.extend_from_slice(&[0, 0, 0x00, 0x0f, 0, 7, b'X']);
        fix_len(&mut bad);
        assert_eq!(decode(&bad), Err(HepError::Duplicate(CHUNK_PAYLOAD)));
        // The payload chunk left out.
        let mut bad = V4_BYTES[..V4_BYTES.len() - 13].to_vec();
        fix_len(&mut bad);
        assert_eq!(decode(&bad), Err(HepError::Missing(CHUNK_PAYLOAD)));
        // The family says IPv6 but the addresses are IPv4; an unknown family.
        for family in [FAMILY_V6, 7] {
            let mut bad = V4_BYTES.to_vec();
            bad[12] = family;
            assert_eq!(decode(&bad), Err(HepError::BadFamily));
        }
    }

    #[test]
    fn trace_hep_corrupted_input_never_panics() {
        let good = encode(&v6_packet()).expect("encodes");
        for i in 0..good.len() {
            for x in [0x00, 0x01, 0x05, 0x06, 0x7f, 0xff] {
                let mut buf = good.clone();
                buf[i] = x;
                let _ = decode(&buf);
            }
        }
        // Pseudo-random bodies under a valid header (a fixed-seed xorshift, no RNG crate).
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for len in 6..400usize {
            let mut buf: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 56) as u8
                })
                .collect();
            buf[..4].copy_from_slice(MAGIC);
            fix_len(&mut buf);
            let _ = decode(&buf);
        }
    }

    #[test]
    fn trace_hep_large_payload_and_over_length() {
        let big = vec![b'a'; 60 * 1024];
        let p = HepPacket {
            payload: &big,
            ..v6_packet()
        };
        let bytes = encode(&p).expect("60 kB fits");
        assert_eq!(decode(&bytes), Ok(p));

        // The largest payload that fits makes a packet of exactly 65,535 bytes.
        let overhead = encoded_len(&HepPacket {
            payload: b"",
            ..v6_packet()
        });
        let max = vec![b'b'; MAX_LEN - overhead];
        let p = HepPacket {
            payload: &max,
            ..v6_packet()
        };
        let bytes = encode(&p).expect("exactly the maximum");
        assert_eq!(bytes.len(), MAX_LEN);
        assert_eq!(decode(&bytes), Ok(p));

        // One byte more is refused, and the reused buffer is left as it was.
        let over = vec![b'c'; MAX_LEN - overhead + 1];
        let p = HepPacket {
            payload: &over,
            ..v6_packet()
        };
        assert_eq!(encode(&p), Err(HepError::TooLong(MAX_LEN + 1)));
        let mut out = b"kept".to_vec();
        assert_eq!(
            encode_into(&p, &mut out),
            Err(HepError::TooLong(MAX_LEN + 1))
        );
        assert_eq!(out, b"kept");
        // A payload far beyond u16 is refused too, without overflow.
        let huge = vec![0u8; 200_000];
        let p = HepPacket {
            payload: &huge,
            ..v4_packet()
        };
        assert!(matches!(encode(&p), Err(HepError::TooLong(_))));
    }

    #[test]
    fn trace_hep_encode_into_appends() {
        let mut out = Vec::new();
        encode_into(&v4_packet(), &mut out).expect("encodes");
        encode_into(&v6_packet(), &mut out).expect("encodes");
        let (first, second) = out.split_at(V4_BYTES.len());
        assert_eq!(first, V4_BYTES);
        assert_eq!(decode(second), Ok(v6_packet()));
    }
}
