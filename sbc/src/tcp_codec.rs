//! SIP over TCP framing (RFC 3261 section 18.3): a message is its header block plus exactly
//! Content-Length body bytes. CRLF keep-alives between messages (RFC 5626 section 3.5.1) are
//! recognised: a double CRLF "ping" is reported so the connection can answer with a CRLF "pong".
//!
//! As in mini-redis, an incomplete frame is an expected condition (`Ok(None)`), not an error;
//! a frame that can never become valid (too large, bad Content-Length) is an error that closes
//! the connection.

use bytes::{Buf, Bytes, BytesMut};
use tokio_util::codec::Decoder;

/// One item read from a SIP TCP stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A whole SIP message.
    Message(Bytes),
    /// A CRLFCRLF keep-alive ping, to be answered with CRLF.
    Ping,
}

/// Why a TCP stream is closed.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The message is larger than the maximum.
    #[error("SIP message larger than {0} bytes")]
    TooLarge(usize),
    /// The Content-Length header is missing its number or is not a number.
    #[error("bad Content-Length")]
    BadContentLength,
    /// Socket error.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Decoder of SIP messages from a byte stream.
#[derive(Debug, Clone)]
pub struct SipCodec {
    max: usize,
    poisoned: bool,
}

impl SipCodec {
    /// A codec refusing messages larger than `max` bytes.
    pub fn new(max: usize) -> Self {
        Self {
            max,
            poisoned: false,
        }
    }
}

fn content_length(head: &[u8]) -> Result<usize, FrameError> {
    for line in head.split(|&b| b == b'\n').skip(1) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = line[..colon].trim_ascii();
        if name.eq_ignore_ascii_case(b"content-length") || name.eq_ignore_ascii_case(b"l") {
            return std::str::from_utf8(line[colon + 1..].trim_ascii())
                .ok()
                .and_then(|v| v.parse().ok())
                .ok_or(FrameError::BadContentLength);
        }
    }
    Ok(0)
}

impl Decoder for SipCodec {
    type Item = Frame;
    type Error = FrameError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        if self.poisoned {
            return Err(FrameError::BadContentLength);
        }
        // Keep-alives: CRLFCRLF is a ping; a lone CRLF (pong) is skipped.
        loop {
            if buf.starts_with(b"\r\n\r\n") {
                buf.advance(4);
                return Ok(Some(Frame::Ping));
            }
            if buf.starts_with(b"\r\n") && buf.len() >= 4 {
                buf.advance(2);
                continue;
            }
            if buf.starts_with(b"\r\n") || buf.starts_with(b"\r") {
                // Could be the start of a ping: wait for more.
                if buf.len() < 4 {
                    return Ok(None);
                }
            }
            break;
        }
        let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4) else {
            if buf.len() > self.max {
                return Err(FrameError::TooLarge(self.max));
            }
            return Ok(None);
        };
        let Ok(body) = content_length(&buf[..head_end]) else {
            // The stream cannot be framed any more. Hand over the header block alone so the
            // request can still be answered with 400, then close.
            self.poisoned = true;
            return Ok(Some(Frame::Message(buf.split_to(head_end).freeze())));
        };
        let total = head_end.saturating_add(body);
        if total > self.max {
            return Err(FrameError::TooLarge(self.max));
        }
        if buf.len() < total {
            buf.reserve(total - buf.len());
            return Ok(None);
        }
        Ok(Some(Frame::Message(buf.split_to(total).freeze())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_by_content_length_across_reads() {
        let mut c = SipCodec::new(1000);
        let mut b = BytesMut::from(&b"\r\n\r\nOPTIONS sip:x SIP/2.0\r\nl: 3\r\n\r\nab"[..]);
        assert_eq!(c.decode(&mut b).ok().flatten(), Some(Frame::Ping));
        assert_eq!(c.decode(&mut b).ok().flatten(), None);
        b.extend_from_slice(b"cINVITE");
        let Some(Frame::Message(m)) = c.decode(&mut b).ok().flatten() else {
            panic!("expected a message");
        };
        assert!(m.ends_with(b"\r\n\r\nabc"));
        assert_eq!(&b[..], b"INVITE");
    }

    #[test]
    fn refuses_oversized_and_bad_length() {
        let mut c = SipCodec::new(50);
        let mut b = BytesMut::from(&[b'A'; 60][..]);
        assert!(matches!(c.decode(&mut b), Err(FrameError::TooLarge(50))));
        let mut c = SipCodec::new(1000);
        let mut b = BytesMut::from(&b"INVITE x SIP/2.0\r\nContent-Length: x\r\n\r\n"[..]);
        assert!(matches!(c.decode(&mut b), Ok(Some(Frame::Message(_)))));
        assert!(matches!(
            c.decode(&mut b),
            Err(FrameError::BadContentLength)
        ));
        let mut c = SipCodec::new(1000);
        let mut b = BytesMut::from(&b"INVITE x SIP/2.0\r\nContent-Length: 5000\r\n\r\n"[..]);
        assert!(matches!(c.decode(&mut b), Err(FrameError::TooLarge(1000))));
    }
}
