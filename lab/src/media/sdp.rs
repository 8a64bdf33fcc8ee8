//! The SDP of the lab's RTP endpoints, and what the lab reads back from a relay's SDP: the
//! address and port the relay wants the endpoint to send to (`c=` and `m=`).
//!
//! Parsing is `sdp-types`' (the parser the SBC uses too), but not the SBC's own rules: the lab
//! judges the SBC's rewriting, so it reads `c=` and `m=` by RFC 8866 itself: the first audio
//! `m=` line, its media-level `c=` if it has one, else the session-level one.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use sdp_types::Session;

/// The session name (`s=`) prefix that carries a lab call's media key through a relay.
pub const KEY_PREFIX: &str = "sbc-lab media ";

/// Why an SDP does not say where to send media.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SdpError {
    /// Not SDP (the parser's words).
    Malformed(String),
    /// No `m=audio` line.
    NoAudio,
    /// The audio stream is rejected (port 0).
    Rejected,
    /// No `c=` for the audio stream at either level.
    NoConnection,
    /// A connection address that is not an IP address.
    BadAddress(String),
}

impl fmt::Display for SdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed(e) => write!(f, "malformed SDP: {e}"),
            Self::NoAudio => f.write_str("SDP without an m=audio line"),
            Self::Rejected => f.write_str("SDP audio stream rejected (port 0)"),
            Self::NoConnection => f.write_str("SDP audio stream without a c= line"),
            Self::BadAddress(a) => write!(f, "SDP connection address {a:?} is not an IP"),
        }
    }
}

impl std::error::Error for SdpError {}

/// What the lab reads from an SDP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteMedia {
    /// Where to send RTP: the first audio stream's connection address and port.
    pub rtp: SocketAddr,
    /// The lab call key of the session name ([`KEY_PREFIX`]), if it has one.
    pub key: Option<String>,
}

/// The SDP of one lab endpoint at `addr`: one PCMU audio stream, 20 ms ptime, sendrecv; the
/// session name carries `key` when given (`s=sbc-lab media KEY`, see [`KEY_PREFIX`]).
#[must_use]
pub fn endpoint_sdp(addr: SocketAddr, session_id: u64, key: Option<&str>) -> String {
    let ip = addr.ip();
    let kind = if ip.is_ipv4() { "IP4" } else { "IP6" };
    let port = addr.port();
    let name = match key {
        Some(k) => format!("{KEY_PREFIX}{k}"),
        None => "sbc-lab".to_owned(),
    };
    format!(
        "v=0\r\no=lab {session_id} 1 IN {kind} {ip}\r\ns={name}\r\nc=IN {kind} {ip}\r\nt=0 0\r\n\
         m=audio {port} RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\na=ptime:20\r\na=sendrecv\r\n"
    )
}

/// Reads where to send RTP (and the lab key) from an SDP body.
///
/// # Errors
/// A body that is not SDP, or whose first audio stream is missing, rejected or has no IP
/// connection address.
pub fn parse(body: &[u8]) -> Result<RemoteMedia, SdpError> {
    let s = Session::parse(body).map_err(|e| SdpError::Malformed(e.to_string()))?;
    let m = s
        .medias
        .iter()
        .find(|m| m.media == "audio")
        .ok_or(SdpError::NoAudio)?;
    if m.port == 0 {
        return Err(SdpError::Rejected);
    }
    let c = m
        .connections
        .first()
        .or(s.connection.as_ref())
        .ok_or(SdpError::NoConnection)?;
    // `c=IN IP4 224.2.1.1/127` has a TTL: not an address to send to.
    let ip: IpAddr = c
        .connection_address
        .parse()
        .map_err(|_| SdpError::BadAddress(c.connection_address.clone()))?;
    let key = s
        .session_name
        .strip_prefix(KEY_PREFIX)
        .map(|k| k.trim().to_owned());
    Ok(RemoteMedia {
        rtp: SocketAddr::new(ip, m.port),
        key,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reads_its_own_sdp() {
        let a: SocketAddr = "127.0.0.1:40002".parse().unwrap();
        let sdp = endpoint_sdp(a, 7, Some("ab12/3"));
        let r = parse(sdp.as_bytes()).unwrap();
        assert_eq!(r.rtp, a);
        assert_eq!(r.key.as_deref(), Some("ab12/3"));
        let r = parse(endpoint_sdp(a, 7, None).as_bytes()).unwrap();
        assert_eq!(r.key, None);
        let v6: SocketAddr = "[::1]:5000".parse().unwrap();
        assert_eq!(parse(endpoint_sdp(v6, 1, None).as_bytes()).unwrap().rtp, v6);
    }

    #[test]
    fn media_level_connection_wins() {
        let sdp = "v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nc=IN IP4 10.0.0.1\r\nt=0 0\r\n\
                   m=video 0 RTP/AVP 96\r\n\
                   m=audio 30000 RTP/AVP 0\r\nc=IN IP4 127.0.0.2\r\na=rtcp:30001\r\n";
        let r = parse(sdp.as_bytes()).unwrap();
        assert_eq!(r.rtp, "127.0.0.2:30000".parse().unwrap());
    }

    #[test]
    fn refuses_what_it_cannot_send_to() {
        let base = "v=0\r\no=- 1 1 IN IP4 1.1.1.1\r\ns=-\r\nt=0 0\r\n";
        assert_eq!(
            parse(format!("{base}m=audio 30000 RTP/AVP 0\r\n").as_bytes()),
            Err(SdpError::NoConnection)
        );
        assert_eq!(
            parse(format!("{base}c=IN IP4 1.1.1.1\r\nm=audio 0 RTP/AVP 0\r\n").as_bytes()),
            Err(SdpError::Rejected)
        );
        assert_eq!(
            parse(format!("{base}c=IN IP4 1.1.1.1\r\nm=video 5 RTP/AVP 96\r\n").as_bytes()),
            Err(SdpError::NoAudio)
        );
        assert!(matches!(
            parse(format!("{base}c=IN IP4 host.example\r\nm=audio 5 RTP/AVP 0\r\n").as_bytes()),
            Err(SdpError::BadAddress(_))
        ));
        assert!(matches!(parse(b"hello"), Err(SdpError::Malformed(_))));
    }
}
