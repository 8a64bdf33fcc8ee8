//! IP networks, as `access-control` names its sources.

use std::net::IpAddr;

/// An IP network: an address and a prefix length (`10.0.0.0/8`; a bare address is a `/32` or
/// `/128`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    /// Parses `a.b.c.d`, `a.b.c.d/n`, an IPv6 address or `addr/n`.
    ///
    /// # Errors
    /// Not an address, or a prefix longer than the address.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| "not an IP address or network".to_owned())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("the prefix length must be 0..={max}"))?,
        };
        Ok(Self { addr, prefix })
    }

    /// Whether `ip` is in the network.
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn networks() {
        let n = IpNet::parse("10.0.0.0/8").expect("net");
        assert!(n.contains(ip("10.200.3.4")));
        assert!(!n.contains(ip("11.0.0.1")));
        assert!(IpNet::parse("192.0.2.7")
            .expect("host")
            .contains(ip("192.0.2.7")));
        assert!(!IpNet::parse("192.0.2.7")
            .expect("host")
            .contains(ip("192.0.2.8")));
        assert!(IpNet::parse("0.0.0.0/0")
            .expect("all")
            .contains(ip("127.0.0.9")));
        assert!(IpNet::parse("2001:db8::/32")
            .expect("v6")
            .contains(ip("2001:db8::1")));
        assert!(!IpNet::parse("2001:db8::/32")
            .expect("v6")
            .contains(ip("127.0.0.1")));
        assert!(IpNet::parse("10.0.0.0/33").is_err());
        assert!(IpNet::parse("nonsense").is_err());
    }
}
