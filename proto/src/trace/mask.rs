//! Credentials never reach a trace: the `Authorization` and `Proxy-Authorization` headers of
//! a captured message are masked before it is stored, exported or sent to a capture server.
//!
//! Digest (RFC 8760, RFC 3261 section 22.4): the `response` parameter (the hash an attacker
//! could attack offline) and `cnonce` are replaced by `"***"`; the user name, realm, URI,
//! nonce and algorithm stay, since an operator needs them to see why a challenge failed. Any
//! other scheme (`Basic`, `Bearer`, ...) keeps only its name: its whole credential is secret.

use std::borrow::Cow;

/// What a masked value becomes.
pub const MASK: &str = "\"***\"";

/// `msg` with the credentials of its `Authorization` and `Proxy-Authorization` header lines
/// masked (see the module docs); borrowed unchanged when it has none. Only the header block is
/// read (up to the first blank line); the body is kept as is.
#[must_use]
pub fn mask_credentials(msg: &[u8]) -> Cow<'_, [u8]> {
    let head_end = memchr::memmem::find(msg, b"\r\n\r\n").map_or(msg.len(), |p| p + 2);
    let head = &msg[..head_end];
    let has_credentials = std::iter::once(0)
        .chain(memchr::memchr_iter(b'\n', head).map(|i| i + 1))
        .any(|start| {
            let line = &head[start..];
            let end = memchr::memchr(b'\n', line).unwrap_or(line.len());
            credential_header(&line[..end]).is_some()
        });
    if !has_credentials {
        return Cow::Borrowed(msg);
    }
    let mut out = Vec::with_capacity(msg.len());
    let mut rest = head;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |p| p + 1);
        let (line, tail) = rest.split_at(end);
        match credential_header(line) {
            Some(colon) => {
                let (name, value) = line.split_at(colon + 1);
                out.extend_from_slice(name);
                let value = String::from_utf8_lossy(value);
                let ending = if value.ends_with("\r\n") { "\r\n" } else { "" };
                out.push(b' ');
                out.extend_from_slice(masked_value(value.trim()).as_bytes());
                out.extend_from_slice(ending.as_bytes());
            }
            None => out.extend_from_slice(line),
        }
        rest = tail;
    }
    out.extend_from_slice(&msg[head_end..]);
    Cow::Owned(out)
}

/// The colon's index when `line` is an `Authorization` or `Proxy-Authorization` header line.
fn credential_header(line: &[u8]) -> Option<usize> {
    // Most lines are rejected on their first letter: every message is masked while tracing.
    let first = line.iter().find(|b| !b.is_ascii_whitespace())?;
    if !matches!(first, b'a' | b'A' | b'p' | b'P') {
        return None;
    }
    let colon = memchr::memchr(b':', line)?;
    let name = std::str::from_utf8(&line[..colon]).ok()?.trim();
    (name.eq_ignore_ascii_case("authorization") || name.eq_ignore_ascii_case("proxy-authorization"))
        .then_some(colon)
}

/// A credentials value with its secrets masked.
fn masked_value(value: &str) -> String {
    let (scheme, params) = value.split_once(char::is_whitespace).unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("digest") {
        return if params.trim().is_empty() {
            scheme.to_owned()
        } else {
            format!("{scheme} {MASK}")
        };
    }
    let masked: Vec<String> = split_params(params)
        .into_iter()
        .map(|p| {
            let name = p.split('=').next().unwrap_or("").trim();
            if name.eq_ignore_ascii_case("response") || name.eq_ignore_ascii_case("cnonce") {
                format!("{name}={MASK}")
            } else {
                p.trim().to_owned()
            }
        })
        .collect();
    format!("{scheme} {}", masked.join(", "))
}

/// Splits Digest parameters on the commas outside quotes.
fn split_params(params: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut quoted, mut start) = (false, 0);
    for (i, c) in params.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&params[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&params[start..]);
    out.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    #[test]
    fn digest_response_and_cnonce_are_masked_the_rest_stays() {
        let msg = b"REGISTER sip:example.test SIP/2.0\r\n\
            Authorization: Digest username=\"alice\", realm=\"example.test\", nonce=\"abc\", \
            uri=\"sip:example.test\", response=\"6629fae49393a05397450978507c4ef1\", \
            algorithm=MD5, cnonce=\"0a4f113b\", qop=auth, nc=00000001\r\n\
            Content-Length: 4\r\n\r\nbody";
        let out = text(&mask_credentials(msg));
        assert!(!out.contains("6629fae4"), "{out}");
        assert!(!out.contains("0a4f113b"), "{out}");
        assert!(out.contains("response=\"***\""), "{out}");
        assert!(out.contains("username=\"alice\""), "{out}");
        assert!(out.contains("nonce=\"abc\""), "{out}");
        assert!(out.ends_with("Content-Length: 4\r\n\r\nbody"), "{out}");
    }

    #[test]
    fn proxy_authorization_any_case_and_other_schemes() {
        let msg = b"INVITE sip:b@h SIP/2.0\r\nproxy-authorization: Basic YWxpY2U6c2VjcmV0\r\n\
            AUTHORIZATION: Bearer eyJhbGciOi.x.y\r\n\r\n";
        let out = text(&mask_credentials(msg));
        assert!(
            !out.contains("YWxpY2U6c2VjcmV0") && !out.contains("eyJhbGciOi"),
            "{out}"
        );
        assert!(
            out.contains("proxy-authorization: Basic \"***\"\r\n"),
            "{out}"
        );
        assert!(out.contains("AUTHORIZATION: Bearer \"***\"\r\n"), "{out}");
    }

    #[test]
    fn a_message_without_credentials_is_borrowed_unchanged() {
        let msg = b"OPTIONS sip:b@h SIP/2.0\r\nX-Note: Authorization: none here\r\n\r\n";
        assert!(matches!(mask_credentials(msg), Cow::Borrowed(_)));
        // A body that mentions the header is not a header.
        let msg = b"MESSAGE sip:b@h SIP/2.0\r\nContent-Length: 30\r\n\r\nAuthorization: Digest response=1";
        assert!(matches!(mask_credentials(msg), Cow::Borrowed(_)));
    }

    #[test]
    fn quoted_commas_do_not_split_parameters() {
        let msg = b"BYE sip:b@h SIP/2.0\r\nAuthorization: Digest username=\"a, b\", response=\"ff\"\r\n\r\n";
        let out = text(&mask_credentials(msg));
        assert!(out.contains("username=\"a, b\""), "{out}");
        assert!(out.contains("response=\"***\""), "{out}");
    }
}
