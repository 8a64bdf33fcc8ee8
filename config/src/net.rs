//! IP networks, as `access-control` names its sources.

use std::net::IpAddr;

pub use ipnet::IpNet;

/// Parses an `access-control` source: `a.b.c.d`, `a.b.c.d/n`, an IPv6 address or `addr/n` (a
/// bare address is a `/32` or `/128`). The network is kept as written: host bits are not
/// cleared, and `contains` compares only the prefix.
///
/// # Errors
/// Not an address, or a prefix longer than the address.
pub fn parse_net(s: &str) -> Result<IpNet, String> {
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
    IpNet::new(addr, prefix).map_err(|_| format!("the prefix length must be 0..={max}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn networks() {
        let n = parse_net("10.0.0.0/8").expect("net");
        assert!(n.contains(&ip("10.200.3.4")));
        assert!(!n.contains(&ip("11.0.0.1")));
        assert!(parse_net("192.0.2.7")
            .expect("host")
            .contains(&ip("192.0.2.7")));
        assert!(!parse_net("192.0.2.7")
            .expect("host")
            .contains(&ip("192.0.2.8")));
        assert!(parse_net("0.0.0.0/0")
            .expect("all")
            .contains(&ip("127.0.0.9")));
        assert!(parse_net("2001:db8::/32")
            .expect("v6")
            .contains(&ip("2001:db8::1")));
        assert!(!parse_net("2001:db8::/32")
            .expect("v6")
            .contains(&ip("127.0.0.1")));
        assert!(parse_net("10.0.0.0/33").is_err());
        assert!(parse_net("nonsense").is_err());
    }
}
