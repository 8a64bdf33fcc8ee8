//! Addresses as the pair compares and uses them, IPv4 or IPv6 alike.
//!
//! An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is the IPv4 address it carries: a
//! socket bound on `[::]` reports IPv4 peers that way, and an operator may write one. The
//! pair uses every configured address in its canonical form ([`canonical`]): it binds, sends
//! to and accepts from the plain IPv4 address, and two spellings of one address are one.

use std::net::{IpAddr, SocketAddr};

/// `addr` with an IPv4-mapped IPv6 address as the IPv4 address it carries; any other address
/// unchanged (an IPv6 one keeps its scope id, which a link-local address needs).
#[must_use]
pub fn canonical(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(a) => a
            .ip()
            .to_ipv4_mapped()
            .map_or(addr, |v4| SocketAddr::new(IpAddr::V4(v4), a.port())),
        SocketAddr::V4(_) => addr,
    }
}

/// Whether `a` and `b` are one endpoint: the same canonical IP and port. An IPv6 flow label
/// or scope id, which a received datagram's source may carry and a configured address does
/// not, is not compared.
#[must_use]
pub fn same_endpoint(a: SocketAddr, b: SocketAddr) -> bool {
    a.ip().to_canonical() == b.ip().to_canonical() && a.port() == b.port()
}

/// Whether `a` and `b` are of one family (both IPv4 or both IPv6) once canonical: the two
/// ends of a heartbeat path must be, a socket of one family cannot reach the other.
#[must_use]
pub fn same_family(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical().is_ipv4() == b.to_canonical().is_ipv4()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn mapped_addresses_are_their_ipv4_address() {
        assert_eq!(canonical(sa("[::ffff:10.0.0.1]:9090")), sa("10.0.0.1:9090"));
        assert_eq!(canonical(sa("10.0.0.1:9090")), sa("10.0.0.1:9090"));
        assert_eq!(canonical(sa("[fd00::1]:9090")), sa("[fd00::1]:9090"));
        // Not mapped: IPv4-compatible (deprecated) and the unspecified address stay IPv6.
        assert_eq!(canonical(sa("[::10.0.0.1]:1")), sa("[::10.0.0.1]:1"));
        assert_eq!(canonical(sa("[::]:1")), sa("[::]:1"));
        let scoped = sa("[fe80::1%3]:9090");
        assert_eq!(canonical(scoped), scoped, "the scope id is kept");
    }

    #[test]
    fn endpoints_compare_canonical_ip_and_port() {
        assert!(same_endpoint(
            sa("[::ffff:10.0.0.3]:7000"),
            sa("10.0.0.3:7000")
        ));
        assert!(same_endpoint(sa("[fd00::3]:7000"), sa("[fd00::3]:7000")));
        assert!(same_endpoint(sa("[fe80::3%2]:7000"), sa("[fe80::3]:7000")));
        assert!(!same_endpoint(sa("[fd00::3]:7000"), sa("[fd00::3]:7001")));
        assert!(!same_endpoint(sa("[fd00::3]:7000"), sa("[fd00::4]:7000")));
        assert!(!same_endpoint(sa("10.0.0.3:7000"), sa("[::10.0.0.3]:7000")));
    }

    #[test]
    fn families() {
        assert!(same_family(ip("10.0.0.1"), ip("::ffff:10.0.0.2")));
        assert!(same_family(ip("fd00::1"), ip("fd00::2")));
        assert!(!same_family(ip("10.0.0.1"), ip("fd00::2")));
        assert!(!same_family(ip("::ffff:10.0.0.1"), ip("fd00::2")));
    }
}
