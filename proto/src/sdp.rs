//! SDP for media anchoring (RFC 8866, RFC 3264 offer/answer): what one leg's description says
//! about its media streams, and the same description rewritten so that the other leg sends its
//! media to the SBC instead.
//!
//! Parsing and writing are `sdp-types`'; this module owns the SBC's rules:
//! - **What a leg wants** ([`Description::streams`]): per `m=` line, the media, the port (0:
//!   rejected), the connection address (the media-level `c=`, else the session-level one),
//!   the explicit RTCP address of `a=rtcp` (RFC 3605), `a=rtcp-mux` and the direction.
//! - **What the other leg is told** ([`Description::anchored`]): every `c=` and the `o=`
//!   address become the SBC's media address; each accepted stream's port becomes the one the
//!   SBC allocated for it, and `a=rtcp` its RTCP port (the RTP port under `a=rtcp-mux`); the
//!   origin's session id and version are the SBC's own for that leg (RFC 3264 §8: a new version
//!   for every changed offer), so nothing of the far side's origin leaks. ICE attributes are
//!   removed: the candidates are the far side's, and the SBC answers from one address. The
//!   origin's user name (often the far side's device or user) becomes `-`.
//!   Everything else is kept in order: codecs (`rtpmap`, `fmtp`), `ptime`, the direction
//!   (`sendonly`, `recvonly`, `inactive`) and crypto attributes.
//! - **Hold by address** (RFC 2543, still sent by old phones): a connection address of
//!   `0.0.0.0` stays `0.0.0.0`, so the hold is relayed rather than turned into a live stream.
//!
//! A description with more than [`MAX_STREAMS`] media lines, or over [`MAX_BODY`] bytes, is
//! refused: these bound what a request can make the SBC allocate.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use sdp_types::{AddrType, Attribute, Connection, NetType, Session};

/// The most media lines one description may carry.
pub const MAX_STREAMS: usize = 16;

/// The largest description accepted, in bytes.
pub const MAX_BODY: usize = 16 * 1024;

/// ICE attributes (RFC 8839), removed when media is anchored.
pub const ICE_ATTRIBUTES: [&str; 7] = [
    "candidate",
    "remote-candidates",
    "end-of-candidates",
    "ice-ufrag",
    "ice-pwd",
    "ice-options",
    "ice-lite",
];

/// Why a body is not a description the SBC can anchor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SdpError {
    /// Not SDP (the parser's words).
    Malformed(String),
    /// Larger than [`MAX_BODY`].
    TooLarge(usize),
    /// More media lines than [`MAX_STREAMS`].
    TooManyStreams(usize),
    /// An accepted stream without a connection address at either level.
    NoConnection {
        /// The stream's index (0-based, in `m=` order).
        stream: usize,
    },
    /// A connection address that is not one IP address (an FQDN, a multicast range).
    BadAddress(String),
    /// The plan names a different number of streams than the description has.
    StreamCount {
        /// Streams in the description.
        description: usize,
        /// Ports in the plan.
        plan: usize,
    },
}

impl fmt::Display for SdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed(e) => write!(f, "malformed SDP: {e}"),
            Self::TooLarge(n) => write!(f, "SDP of {n} bytes (at most {MAX_BODY})"),
            Self::TooManyStreams(n) => write!(f, "{n} media lines (at most {MAX_STREAMS})"),
            Self::NoConnection { stream } => {
                write!(f, "media line {stream} has no connection address")
            }
            Self::BadAddress(a) => write!(f, "connection address {a:?} is not an IP address"),
            Self::StreamCount { description, plan } => write!(
                f,
                "{plan} ports planned for a description with {description} media lines"
            ),
        }
    }
}

impl std::error::Error for SdpError {}

/// Which way a stream flows, from the describing side's point of view (RFC 3264 §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `a=sendrecv`, or no direction attribute.
    SendRecv,
    /// `a=sendonly`.
    SendOnly,
    /// `a=recvonly`.
    RecvOnly,
    /// `a=inactive`.
    Inactive,
}

/// One media line as its leg describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stream {
    /// `audio`, `video`, ...
    pub media: String,
    /// Where the leg receives RTP; port 0: the stream is rejected or disabled.
    pub rtp: SocketAddr,
    /// Where it receives RTCP when it is not multiplexed: `a=rtcp` (RFC 3605), otherwise RTP's
    /// port + 1 (under `a=rtcp-mux` accepted by both sides, RTP's own port is used instead).
    pub rtcp: Option<SocketAddr>,
    /// `a=rtcp-mux`: RTP and RTCP share one port.
    pub rtcp_mux: bool,
    /// The direction attribute (media-level, else session-level).
    pub direction: Direction,
}

impl Stream {
    /// Whether the stream is rejected or disabled (port 0).
    #[must_use]
    pub fn is_rejected(&self) -> bool {
        self.rtp.port() == 0
    }

    /// Whether the leg holds by address (`c=IN IP4 0.0.0.0`, RFC 2543).
    #[must_use]
    pub fn is_held_by_address(&self) -> bool {
        self.rtp.ip().is_unspecified()
    }
}

/// The SBC's side of one leg's description: its media address, the port it allocated for each
/// media line, and the origin it presents on that leg.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchorPlan {
    /// The media address of the realm the description is sent into.
    pub address: IpAddr,
    /// One RTP port per media line, in `m=` order (RTCP on the next port, or the same one
    /// under `a=rtcp-mux`); ignored for a rejected stream, which keeps port 0.
    pub ports: Vec<u16>,
    /// The origin's session id on this leg.
    pub session_id: u64,
    /// The origin's version on this leg: the caller increments it for every changed offer.
    pub version: u64,
}

/// A parsed session description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    session: Session,
}

impl Description {
    /// Parses a message body.
    ///
    /// # Errors
    /// A body that is too large, not SDP, or has too many media lines.
    pub fn parse(body: &[u8]) -> Result<Self, SdpError> {
        if body.len() > MAX_BODY {
            return Err(SdpError::TooLarge(body.len()));
        }
        let session = Session::parse(body).map_err(|e| SdpError::Malformed(e.to_string()))?;
        if session.medias.len() > MAX_STREAMS {
            return Err(SdpError::TooManyStreams(session.medias.len()));
        }
        Ok(Self { session })
    }

    /// The origin's session version (`o=`): the describing side increments it when its
    /// description changes.
    #[must_use]
    pub fn origin_version(&self) -> u64 {
        self.session.origin.sess_version
    }

    /// The media lines as this leg describes them.
    ///
    /// # Errors
    /// An accepted stream without a usable connection address.
    pub fn streams(&self) -> Result<Vec<Stream>, SdpError> {
        let session_direction = direction_of(&self.session.attributes);
        self.session
            .medias
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let connection = m.connections.first().or(self.session.connection.as_ref());
                let ip = match connection {
                    Some(c) => ip_of(c)?,
                    None if m.port == 0 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                    None => return Err(SdpError::NoConnection { stream: i }),
                };
                let rtcp_mux = has(&m.attributes, "rtcp-mux");
                // Where RTCP goes when it is not multiplexed: whether it is (`rtcp_mux`
                // offered here and accepted by the other side) is the media table's decision.
                let rtcp = match explicit_rtcp(&m.attributes, ip)? {
                    Some(a) => Some(a),
                    None if m.port == 0 => None,
                    None => m.port.checked_add(1).map(|p| SocketAddr::new(ip, p)),
                };
                Ok(Stream {
                    media: m.media.clone(),
                    rtp: SocketAddr::new(ip, m.port),
                    rtcp,
                    rtcp_mux,
                    direction: direction_of(&m.attributes)
                        .unwrap_or(session_direction.unwrap_or(Direction::SendRecv)),
                })
            })
            .collect()
    }

    /// The description as the other leg must see it: media to the SBC (see the module doc).
    ///
    /// # Errors
    /// A plan for another number of streams, or a connection address that is not an IP.
    pub fn anchored(&self, plan: &AnchorPlan) -> Result<Vec<u8>, SdpError> {
        let streams = self.streams()?;
        if plan.ports.len() != streams.len() {
            return Err(SdpError::StreamCount {
                description: streams.len(),
                plan: plan.ports.len(),
            });
        }
        let mut s = self.session.clone();
        let ours = connection_to(plan.address);
        let held_everywhere = !streams.is_empty() && streams.iter().all(Stream::is_held_by_address);
        // The far side's user name in `o=` names its device or user: not passed on.
        s.origin.username = None;
        s.origin.sess_id = plan.session_id.to_string();
        s.origin.sess_version = plan.version;
        s.origin.nettype = NetType::In;
        s.origin.addrtype = ours.addrtype.clone();
        s.origin.unicast_address = plan.address.to_string();
        if let Some(c) = s.connection.as_mut() {
            *c = if held_everywhere {
                connection_to(unspecified_like(plan.address))
            } else {
                ours.clone()
            };
        }
        s.attributes.retain(|a| !is_ice(a));
        for ((m, stream), &port) in s.medias.iter_mut().zip(&streams).zip(&plan.ports) {
            m.attributes.retain(|a| !is_ice(a));
            if stream.is_rejected() {
                // Port 0 stays; nothing of the far side's addresses does.
                m.attributes.retain(|a| a.attribute != "rtcp");
                if !m.connections.is_empty() {
                    m.connections = vec![connection_to(plan.address)];
                }
                continue;
            }
            m.port = port;
            let address = if stream.is_held_by_address() {
                unspecified_like(plan.address)
            } else {
                plan.address
            };
            if !m.connections.is_empty() || s.connection.is_none() {
                m.connections = vec![connection_to(address)];
            } else if held_everywhere != stream.is_held_by_address() {
                // The session-level address does not say this stream's hold state.
                m.connections = vec![connection_to(address)];
            }
            let rtcp_port = if stream.rtcp_mux {
                port
            } else {
                port.saturating_add(1)
            };
            for a in &mut m.attributes {
                if a.attribute == "rtcp" {
                    a.value = Some(format!(
                        "{rtcp_port} IN {} {address}",
                        addrtype_of(address).as_str()
                    ));
                }
            }
        }
        let mut out = Vec::with_capacity(512);
        // Writing to a Vec cannot fail.
        let _ = s.write(&mut out);
        Ok(out)
    }
}

fn has(attributes: &[Attribute], name: &str) -> bool {
    attributes.iter().any(|a| a.attribute == name)
}

fn is_ice(a: &Attribute) -> bool {
    ICE_ATTRIBUTES.contains(&a.attribute.as_str())
}

fn direction_of(attributes: &[Attribute]) -> Option<Direction> {
    attributes
        .iter()
        .rev()
        .find_map(|a| match a.attribute.as_str() {
            "sendrecv" => Some(Direction::SendRecv),
            "sendonly" => Some(Direction::SendOnly),
            "recvonly" => Some(Direction::RecvOnly),
            "inactive" => Some(Direction::Inactive),
            _ => None,
        })
}

/// The one IP address of a `c=` line (a multicast TTL or count is refused).
fn ip_of(c: &Connection) -> Result<IpAddr, SdpError> {
    c.connection_address
        .parse()
        .map_err(|_| SdpError::BadAddress(c.connection_address.clone()))
}

/// `a=rtcp:PORT [IN IP4 ADDR]` (RFC 3605), the address defaulting to the stream's.
fn explicit_rtcp(attributes: &[Attribute], ip: IpAddr) -> Result<Option<SocketAddr>, SdpError> {
    let Some(value) = attributes
        .iter()
        .find(|a| a.attribute == "rtcp")
        .and_then(|a| a.value.as_deref())
    else {
        return Ok(None);
    };
    let mut words = value.split_ascii_whitespace();
    let port: u16 = words
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| SdpError::Malformed(format!("a=rtcp:{value}")))?;
    let ip = match (words.next(), words.next(), words.next()) {
        (Some(_nettype), Some(_addrtype), Some(addr)) => addr
            .parse()
            .map_err(|_| SdpError::BadAddress(addr.to_owned()))?,
        _ => ip,
    };
    Ok(Some(SocketAddr::new(ip, port)))
}

fn addrtype_of(ip: IpAddr) -> AddrType {
    match ip {
        IpAddr::V4(_) => AddrType::Ip4,
        IpAddr::V6(_) => AddrType::Ip6,
    }
}

fn connection_to(ip: IpAddr) -> Connection {
    Connection {
        nettype: NetType::In,
        addrtype: addrtype_of(ip),
        connection_address: ip.to_string(),
    }
}

/// The unspecified address of `ip`'s family (a hold by address in that family).
fn unspecified_like(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFER: &str = "v=0\r\n\
        o=alice 2890844526 2890844526 IN IP4 10.1.1.1\r\n\
        s=-\r\n\
        c=IN IP4 10.1.1.1\r\n\
        t=0 0\r\n\
        a=ice-lite\r\n\
        m=audio 49170 RTP/AVP 0 8 101\r\n\
        a=rtpmap:0 PCMU/8000\r\n\
        a=rtpmap:8 PCMA/8000\r\n\
        a=rtpmap:101 telephone-event/8000\r\n\
        a=fmtp:101 0-15\r\n\
        a=ptime:20\r\n\
        a=rtcp:49171 IN IP4 10.1.1.1\r\n\
        a=ice-ufrag:8hhY\r\n\
        a=ice-pwd:asd88fgpdd777uzjYhagZg\r\n\
        a=candidate:1 1 UDP 2130706431 10.1.1.1 49170 typ host\r\n\
        a=candidate:2 1 UDP 1694498815 203.0.113.7 55000 typ srflx raddr 10.1.1.1 rport 49170\r\n\
        a=sendrecv\r\n\
        m=video 0 RTP/AVP 96\r\n\
        a=rtpmap:96 H264/90000\r\n";

    fn plan(ports: Vec<u16>) -> AnchorPlan {
        AnchorPlan {
            address: "192.0.2.10".parse().expect("address"),
            ports,
            session_id: 7,
            version: 1,
        }
    }

    fn text(d: &Description, p: &AnchorPlan) -> String {
        String::from_utf8(d.anchored(p).expect("anchored")).expect("utf-8")
    }

    #[test]
    fn a_leg_s_streams_are_read_from_both_levels() {
        let d = Description::parse(OFFER.as_bytes()).expect("offer");
        let s = d.streams().expect("streams");
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].media, "audio");
        assert_eq!(s[0].rtp, "10.1.1.1:49170".parse().expect("addr"));
        assert_eq!(s[0].rtcp, Some("10.1.1.1:49171".parse().expect("addr")));
        assert_eq!(s[0].direction, Direction::SendRecv);
        assert!(!s[0].rtcp_mux);
        assert!(s[1].is_rejected());
    }

    #[test]
    fn the_other_leg_is_told_the_sbc_s_address_and_ports_and_nothing_of_the_far_side() {
        let d = Description::parse(OFFER.as_bytes()).expect("offer");
        let out = text(&d, &plan(vec![20000, 20002]));
        assert!(out.contains("o=- 7 1 IN IP4 192.0.2.10\r\n"), "{out}");
        assert!(out.contains("c=IN IP4 192.0.2.10\r\n"), "{out}");
        assert!(out.contains("m=audio 20000 RTP/AVP 0 8 101\r\n"), "{out}");
        assert!(out.contains("a=rtcp:20001 IN IP4 192.0.2.10\r\n"), "{out}");
        // The rejected stream stays rejected.
        assert!(out.contains("m=video 0 RTP/AVP 96\r\n"), "{out}");
        // Neither the far side's addresses nor its ICE credentials leak.
        for leak in [
            "10.1.1.1",
            "203.0.113.7",
            "ice-",
            "candidate",
            "2890844526",
            "alice",
        ] {
            assert!(!out.contains(leak), "{leak} leaked:\n{out}");
        }
        // Codecs, ptime and direction are kept, in order.
        let kept = [
            "a=rtpmap:0 PCMU/8000",
            "a=rtpmap:8 PCMA/8000",
            "a=rtpmap:101 telephone-event/8000",
            "a=fmtp:101 0-15",
            "a=ptime:20",
            "a=sendrecv",
        ];
        let positions: Vec<usize> = kept
            .iter()
            .map(|k| out.find(k).unwrap_or_else(|| panic!("{k} missing:\n{out}")))
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{out}");
        // What we wrote is SDP again, with the streams we planned.
        let again = Description::parse(out.as_bytes()).expect("re-parsed");
        let s = again.streams().expect("streams");
        assert_eq!(s[0].rtp, "192.0.2.10:20000".parse().expect("addr"));
        assert_eq!(s[0].rtcp, Some("192.0.2.10:20001".parse().expect("addr")));
    }

    #[test]
    fn hold_and_direction_are_relayed_as_they_are() {
        let old_hold = OFFER
            .replace("c=IN IP4 10.1.1.1", "c=IN IP4 0.0.0.0")
            .replace("a=sendrecv", "a=sendonly");
        let d = Description::parse(old_hold.as_bytes()).expect("hold");
        let s = d.streams().expect("streams");
        assert!(s[0].is_held_by_address());
        assert_eq!(s[0].direction, Direction::SendOnly);
        let out = text(&d, &plan(vec![20000, 0]));
        assert!(out.contains("c=IN IP4 0.0.0.0\r\n"), "{out}");
        assert!(out.contains("a=sendonly\r\n"), "{out}");
        assert!(!out.contains("c=IN IP4 192.0.2.10"), "{out}");

        let inactive = OFFER.replace("a=sendrecv", "a=inactive");
        let d = Description::parse(inactive.as_bytes()).expect("inactive");
        assert_eq!(
            d.streams().expect("streams")[0].direction,
            Direction::Inactive
        );
        assert!(text(&d, &plan(vec![20000, 0])).contains("a=inactive\r\n"));
    }

    #[test]
    fn rtcp_mux_keeps_rtcp_on_the_rtp_port() {
        let mux = OFFER.replace("a=sendrecv", "a=rtcp-mux\r\na=sendrecv");
        let d = Description::parse(mux.as_bytes()).expect("mux");
        assert!(d.streams().expect("streams")[0].rtcp_mux);
        let out = text(&d, &plan(vec![20000, 0]));
        assert!(out.contains("a=rtcp:20000 IN IP4 192.0.2.10\r\n"), "{out}");
        assert!(out.contains("a=rtcp-mux\r\n"), "{out}");
    }

    #[test]
    fn media_level_addresses_win_and_ipv6_is_written_as_ipv6() {
        let sdp = "v=0\r\no=- 1 1 IN IP6 2001:db8::1\r\ns=-\r\nc=IN IP6 2001:db8::1\r\nt=0 0\r\n\
                   m=audio 4000 RTP/AVP 0\r\nc=IN IP6 2001:db8::2\r\n";
        let d = Description::parse(sdp.as_bytes()).expect("v6");
        let s = d.streams().expect("streams");
        assert_eq!(s[0].rtp, "[2001:db8::2]:4000".parse().expect("addr"));
        let p = AnchorPlan {
            address: "2001:db8::a".parse().expect("address"),
            ports: vec![30000],
            session_id: 1,
            version: 2,
        };
        let out = text(&d, &p);
        assert!(out.contains("o=- 1 2 IN IP6 2001:db8::a\r\n"), "{out}");
        assert!(out.contains("c=IN IP6 2001:db8::a\r\n"), "{out}");
        assert!(!out.contains("2001:db8::2"), "{out}");
    }

    #[test]
    fn what_cannot_be_anchored_is_refused_with_the_reason() {
        assert!(matches!(
            Description::parse(b"not sdp at all"),
            Err(SdpError::Malformed(_))
        ));
        assert_eq!(
            Description::parse(&vec![b'a'; MAX_BODY + 1]),
            Err(SdpError::TooLarge(MAX_BODY + 1))
        );
        let many = format!(
            "v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nc=IN IP4 10.0.0.1\r\nt=0 0\r\n{}",
            "m=audio 4000 RTP/AVP 0\r\n".repeat(MAX_STREAMS + 1)
        );
        assert_eq!(
            Description::parse(many.as_bytes()),
            Err(SdpError::TooManyStreams(MAX_STREAMS + 1))
        );
        let no_c = "v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n";
        let d = Description::parse(no_c.as_bytes()).expect("parses");
        assert_eq!(d.streams(), Err(SdpError::NoConnection { stream: 0 }));
        let fqdn = no_c.replace("t=0 0", "c=IN IP4 pbx.example.com\r\nt=0 0");
        let d = Description::parse(fqdn.as_bytes()).expect("parses");
        assert!(matches!(d.streams(), Err(SdpError::BadAddress(_))));
        let d = Description::parse(OFFER.as_bytes()).expect("offer");
        assert_eq!(
            d.anchored(&plan(vec![20000])),
            Err(SdpError::StreamCount {
                description: 2,
                plan: 1
            })
        );
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        use rand_chacha::rand_core::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
        let base = OFFER.as_bytes();
        for _ in 0..2000 {
            let mut b = base.to_vec();
            for _ in 0..(rng.next_u32() % 8 + 1) {
                let i = rng.next_u32() as usize % b.len();
                b[i] = rng.next_u32() as u8;
            }
            if let Ok(d) = Description::parse(&b) {
                if let Ok(s) = d.streams() {
                    let p = plan(vec![20000; s.len()]);
                    let out = d.anchored(&p).expect("anchorable once streams parse");
                    assert!(
                        Description::parse(&out).is_ok(),
                        "{}",
                        String::from_utf8_lossy(&out)
                    );
                }
            }
        }
    }
}
