//! A capture as a standard pcap file that `tshark -r` and Wireshark decode as SIP: each
//! traced message becomes one packet whose IPv4 or IPv6 and UDP or TCP headers are built
//! from the real addresses of its leg (link type RAW, no Ethernet header), timestamped when it
//! was traced.
//!
//! TCP and TLS legs: each message is one TCP segment (PSH, ACK) with sequence numbers that
//! follow each direction of the flow, so a dissector reassembles nothing and reads one SIP
//! message per segment. A TLS leg's messages are written decrypted, as TCP: Wireshark decodes
//! SIP on the SIP ports by itself; on 5061 (which it takes for TLS) use "Decode As... SIP"
//! (`tshark -d tcp.port==5061,sip`).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use etherparse::PacketBuilder;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::DataLink;

use super::capture::{Capture, Direction, TracedMessage};

/// Why a capture could not be written as pcap.
#[derive(Debug, thiserror::Error)]
pub enum PcapExportError {
    /// A message's two addresses are of different families (a capture is never built so).
    #[error("a message's addresses {0} and {1} are of different families")]
    MixedFamilies(SocketAddr, SocketAddr),
    /// A message too large for one IP packet.
    #[error("a message of {0} bytes does not fit one IP packet")]
    TooLarge(usize),
    /// The pcap writer failed (it writes to memory, so only on a bug).
    #[error("pcap: {0}")]
    Pcap(String),
}

/// The capture's messages as one pcap file, in their order.
///
/// # Errors
/// A message whose addresses mix families or that does not fit an IP packet.
pub fn to_pcap(capture: &Capture) -> Result<Vec<u8>, PcapExportError> {
    let header = PcapHeader {
        datalink: DataLink::RAW,
        ..PcapHeader::default()
    };
    let mut writer = PcapWriter::with_header(Vec::new(), header)
        .map_err(|e| PcapExportError::Pcap(e.to_string()))?;
    // The next sequence number of each TCP direction (source, destination).
    let mut seq: HashMap<(SocketAddr, SocketAddr), u32> = HashMap::new();
    for m in &capture.messages {
        let (src, dst) = endpoints(m);
        let packet = packet(m, src, dst, &mut seq)?;
        let at = Duration::from_millis(m.at_unix_ms);
        let len =
            u32::try_from(packet.len()).map_err(|_| PcapExportError::TooLarge(packet.len()))?;
        writer
            .write_packet(&PcapPacket::new(at, len, &packet))
            .map_err(|e| PcapExportError::Pcap(e.to_string()))?;
    }
    Ok(writer.into_writer())
}

/// Source and destination of a traced message.
fn endpoints(m: &TracedMessage) -> (SocketAddr, SocketAddr) {
    let local = canonical(m.local);
    let remote = canonical(m.remote);
    match m.direction {
        Direction::Received => (remote, local),
        Direction::Sent => (local, remote),
    }
}

fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// One message as an IP packet.
fn packet(
    m: &TracedMessage,
    src: SocketAddr,
    dst: SocketAddr,
    seq: &mut HashMap<(SocketAddr, SocketAddr), u32>,
) -> Result<Vec<u8>, PcapExportError> {
    let ip = match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => PacketBuilder::ipv4(s.octets(), d.octets(), 64),
        (IpAddr::V6(s), IpAddr::V6(d)) => PacketBuilder::ipv6(s.octets(), d.octets(), 64),
        _ => return Err(PcapExportError::MixedFamilies(src, dst)),
    };
    let mut out = Vec::with_capacity(m.bytes.len() + 60);
    let result = if m.transport == "UDP" {
        ip.udp(src.port(), dst.port()).write(&mut out, &m.bytes)
    } else {
        let ack = seq.get(&(dst, src)).copied().unwrap_or(1);
        let len =
            u32::try_from(m.bytes.len()).map_err(|_| PcapExportError::TooLarge(m.bytes.len()))?;
        let next = seq.entry((src, dst)).or_insert(1);
        let this = *next;
        *next = next.wrapping_add(len);
        ip.tcp(src.port(), dst.port(), this, 65_535)
            .psh()
            .ack(ack)
            .write(&mut out, &m.bytes)
    };
    result.map_err(|_| PcapExportError::TooLarge(m.bytes.len()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::capture::{CaptureKey, LegSide, TraceRing};
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};
    use pcap_file::pcap::PcapReader;

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    fn sip(first: &str) -> Vec<u8> {
        format!("{first}\r\nCall-ID: c1\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n")
            .into_bytes()
    }

    /// A call across families: the caller on IPv4 UDP, the callee on IPv6 TCP.
    fn capture() -> Capture {
        let mut ring = TraceRing::new(1 << 20, 10, 10);
        let key = CaptureKey::Call(1);
        let caller = |at, dir, text: &str| {
            TracedMessage::new(
                at,
                dir,
                LegSide::Caller,
                "UDP",
                sa("192.0.2.10:5060"),
                sa("10.1.1.1:5070"),
                None,
                &sip(text),
            )
        };
        let callee = |at, dir, text: &str| {
            TracedMessage::new(
                at,
                dir,
                LegSide::Callee,
                "TCP",
                sa("[2001:db8::10]:5062"),
                sa("[2001:db8::20]:5080"),
                None,
                &sip(text),
            )
        };
        ring.push(
            key.clone(),
            caller(
                1_000,
                Direction::Received,
                "INVITE sip:bob@192.0.2.10 SIP/2.0",
            ),
        );
        ring.push(
            key.clone(),
            callee(
                1_001,
                Direction::Sent,
                "INVITE sip:bob@[2001:db8::20]:5080 SIP/2.0",
            ),
        );
        ring.push(
            key.clone(),
            callee(1_050, Direction::Received, "SIP/2.0 200 OK"),
        );
        ring.push(
            key.clone(),
            caller(1_051, Direction::Sent, "SIP/2.0 200 OK"),
        );
        let first = ring.captures().next().cloned();
        first.expect("capture")
    }

    #[test]
    fn every_message_is_one_packet_with_its_leg_s_addresses() {
        let c = capture();
        let bytes = to_pcap(&c).expect("pcap");
        let mut reader = PcapReader::new(&bytes[..]).expect("reads");
        assert_eq!(reader.header().datalink, DataLink::RAW);
        let mut seen = Vec::new();
        while let Some(p) = reader.next_packet() {
            let p = p.expect("packet");
            let sliced = SlicedPacket::from_ip(&p.data).expect("an IP packet");
            let (src, dst) = match sliced.net {
                Some(NetSlice::Ipv4(v4)) => (
                    IpAddr::V4(v4.header().source_addr()),
                    IpAddr::V4(v4.header().destination_addr()),
                ),
                Some(NetSlice::Ipv6(v6)) => (
                    IpAddr::V6(v6.header().source_addr()),
                    IpAddr::V6(v6.header().destination_addr()),
                ),
                _ => panic!("no IP header"),
            };
            let (sport, dport, payload, tcp_seq) = match sliced.transport {
                Some(TransportSlice::Udp(u)) => (
                    u.source_port(),
                    u.destination_port(),
                    u.payload().to_vec(),
                    None,
                ),
                Some(TransportSlice::Tcp(t)) => (
                    t.source_port(),
                    t.destination_port(),
                    t.payload().to_vec(),
                    Some(t.sequence_number()),
                ),
                _ => panic!("no transport header"),
            };
            seen.push((
                p.timestamp,
                SocketAddr::new(src, sport),
                SocketAddr::new(dst, dport),
                payload,
                tcp_seq,
            ));
        }
        assert_eq!(seen.len(), 4);
        assert_eq!(seen[0].0, Duration::from_millis(1_000));
        assert_eq!(
            (seen[0].1, seen[0].2),
            (sa("10.1.1.1:5070"), sa("192.0.2.10:5060"))
        );
        assert_eq!(
            (seen[1].1, seen[1].2),
            (sa("[2001:db8::10]:5062"), sa("[2001:db8::20]:5080"))
        );
        assert_eq!(
            (seen[2].1, seen[2].2),
            (sa("[2001:db8::20]:5080"), sa("[2001:db8::10]:5062"))
        );
        assert_eq!(seen[1].3, c.messages[1].bytes);
        assert_eq!(seen[1].4, Some(1));
        assert_eq!(seen[2].4, Some(1), "each direction numbers its own bytes");
        assert_eq!(seen[3].4, None, "UDP");
    }

    #[test]
    fn tcp_sequence_numbers_follow_each_direction() {
        let mut c = capture();
        let again = c.messages[1].clone();
        c.messages.push(again);
        let bytes = to_pcap(&c).expect("pcap");
        let mut reader = PcapReader::new(&bytes[..]).expect("reads");
        let mut seqs = Vec::new();
        while let Some(p) = reader.next_packet() {
            let p = p.expect("packet");
            let sliced = SlicedPacket::from_ip(&p.data).expect("ip");
            if let Some(TransportSlice::Tcp(t)) = sliced.transport {
                seqs.push(t.sequence_number());
            }
        }
        let first_len = u32::try_from(c.messages[1].bytes.len()).expect("small");
        assert_eq!(seqs, vec![1, 1, 1 + first_len]);
    }
}
