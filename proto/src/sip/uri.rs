//! The parts of a SIP or tel URI that routing and topology hiding look at: the scheme, the
//! user (a tel URI's number) and the host, without copying.

use std::net::{IpAddr, Ipv6Addr};

/// A `sip:`, `sips:` or `tel:` URI split into what routing needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UriParts<'a> {
    /// The scheme as written (`sip`, `sips`, `tel`).
    pub scheme: &'a str,
    /// The user (userinfo without a password), or a tel URI's number; `None` when absent.
    pub user: Option<&'a str>,
    /// The host without its port (an IPv6 reference with its brackets); `None` for `tel:`.
    pub host: Option<&'a str>,
}

impl<'a> UriParts<'a> {
    /// Splits `uri` (a bare URI, not a name-addr); `None` without a scheme.
    #[must_use]
    pub fn parse(uri: &'a str) -> Option<Self> {
        let (scheme, rest) = uri.trim().split_once(':')?;
        if scheme.eq_ignore_ascii_case("tel") {
            let number = rest.split(';').next().unwrap_or("");
            return Some(Self {
                scheme,
                user: (!number.is_empty()).then_some(number),
                host: None,
            });
        }
        // Headers (`?`) and parameters (`;`) end the host; a user may hold `;` (RFC 3261
        // user-unreserved), so the user is what comes before the last `@` of that part.
        let rest = rest.split('?').next().unwrap_or("");
        let (user, hostport) = match rest.rfind('@') {
            Some(at) => {
                let user = rest[..at].split(':').next().unwrap_or("");
                (Some(user).filter(|u| !u.is_empty()), &rest[at + 1..])
            }
            None => (None, rest),
        };
        let hostport = hostport.split(';').next().unwrap_or("");
        let host = if hostport.starts_with('[') {
            hostport.find(']').map_or(hostport, |i| &hostport[..=i])
        } else {
            hostport.split(':').next().unwrap_or("")
        };
        Some(Self {
            scheme,
            user,
            host: (!host.is_empty()).then_some(host),
        })
    }

    /// The host as an IP address, when it is one (`[::1]` and `127.0.0.1` are; a domain
    /// name is not).
    #[must_use]
    pub fn ip(&self) -> Option<IpAddr> {
        let host = self.host?;
        match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(v6) => v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
            None => host.parse::<IpAddr>().ok(),
        }
    }

    /// The host when it is a domain name (not an IP address).
    #[must_use]
    pub fn domain(&self) -> Option<&'a str> {
        self.host.filter(|_| self.ip().is_none())
    }

    /// Whether it is a `tel:` URI.
    #[must_use]
    pub fn is_tel(&self) -> bool {
        self.scheme.eq_ignore_ascii_case("tel")
    }
}

/// The display name of a name-addr (`"Alice" <sip:...>` gives `"Alice" `, with its quotes
/// and the space before `<`), empty for an addr-spec or a name-addr without one.
#[must_use]
pub fn display_name(value: &str) -> &str {
    match value.find('<') {
        Some(i) => &value[..i],
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sip_uris_split_into_user_and_host() {
        let p =
            UriParts::parse("sip:bob@example.test:5060;transport=tcp?subject=x").expect("parses");
        assert_eq!(
            (p.scheme, p.user, p.host),
            ("sip", Some("bob"), Some("example.test"))
        );
        assert_eq!(p.domain(), Some("example.test"));
        let p = UriParts::parse("sips:alice:secret@[2001:db8::1]:5061").expect("parses");
        assert_eq!((p.user, p.host), (Some("alice"), Some("[2001:db8::1]")));
        assert_eq!(p.ip(), Some("2001:db8::1".parse().expect("parses")));
        assert_eq!(p.domain(), None);
        let p = UriParts::parse("sip:127.0.0.1:5060").expect("parses");
        assert_eq!((p.user, p.host), (None, Some("127.0.0.1")));
        assert!(p.ip().is_some());
    }

    #[test]
    fn tel_uris_carry_a_number_and_no_host() {
        let p = UriParts::parse("tel:+1-555-123;phone-context=example.test").expect("parses");
        assert!(p.is_tel());
        assert_eq!((p.user, p.host), (Some("+1-555-123"), None));
        assert_eq!(UriParts::parse("tel:").expect("parses").user, None);
        assert_eq!(UriParts::parse("no scheme"), None);
    }

    #[test]
    fn display_names_keep_their_quotes() {
        assert_eq!(display_name("\"Alice A\" <sip:a@x>;tag=1"), "\"Alice A\" ");
        assert_eq!(display_name("sip:a@x;tag=1"), "");
    }
}
