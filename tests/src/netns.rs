//! A network namespace of the test's own: for tests that need more IPv6 addresses than the
//! host's loopback has (only `::1`), e.g. a pair on two addresses, or many sources of one /64.
//!
//! [`enter`] moves the calling thread (the test's, which libtest runs each test on) into a new
//! network namespace with its loopback up and the given addresses on it. Namespaces are per
//! thread in Linux: the rest of the test binary stays on the host, while every socket the
//! test thread opens and every process it starts (SBC nodes, SIPp, the lab's tools) lives in
//! the namespace; threads the test thread starts inherit it too. Nothing leaves the namespace:
//! it has no interface but `lo`. It goes away with its last process, when the test ends.
//!
//! Entering needs `CAP_SYS_ADMIN` (the CI runs as root, as `unshare -n` would need).

use std::net::IpAddr;
use std::process::Command;

use nix::sched::{unshare, CloneFlags};

/// Moves the calling thread into a new network namespace whose loopback is up and carries
/// `addresses` (each as a /128 for IPv6 or /32 for IPv4, IPv6 without duplicate address
/// detection, so they are usable at once).
///
/// # Panics
/// If the namespace cannot be created (not root) or `ip` fails; the message says which.
pub fn enter(addresses: &[IpAddr]) {
    unshare(CloneFlags::CLONE_NEWNET).unwrap_or_else(|e| {
        panic!("cannot create a network namespace ({e}): the IPv6 tests run as root")
    });
    ip(&["link", "set", "lo", "up"]);
    for addr in addresses {
        let cidr = match addr {
            IpAddr::V4(a) => format!("{a}/32"),
            IpAddr::V6(a) => format!("{a}/128"),
        };
        let mut args = vec!["addr", "add", cidr.as_str(), "dev", "lo"];
        if addr.is_ipv6() {
            args.push("nodad");
        }
        ip(&args);
    }
}

/// Gives the namespace a second interface (one end of a veth pair, both ends inside it, up)
/// carrying `cidr`: for peers that take their media address from a non-loopback interface
/// (baresip ignores `lo`). Its traffic never leaves the namespace.
///
/// # Panics
/// If `ip` fails.
pub fn add_veth_address(cidr: &str) {
    ip(&[
        "link", "add", "sbc-v0", "type", "veth", "peer", "name", "sbc-v1",
    ]);
    ip(&["addr", "add", cidr, "dev", "sbc-v0"]);
    ip(&["link", "set", "sbc-v0", "up"]);
    ip(&["link", "set", "sbc-v1", "up"]);
}

/// Makes a whole prefix local to the namespace's loopback (`ip route add local PREFIX dev
/// lo`), so a process may bind any address in it with `IPV6_FREEBIND`/`ip_nonlocal_bind`, as
/// a stranger holding a /64 would send from any of its 2^64 addresses.
///
/// # Panics
/// If `ip` fails.
pub fn add_local_prefix(prefix: &str) {
    let family = if prefix.contains(':') { "-6" } else { "-4" };
    ip(&[family, "route", "add", "local", prefix, "dev", "lo"]);
}

/// Sets a sysctl of the namespace (`/proc/sys/...` as this thread sees it).
///
/// # Panics
/// If it cannot be written.
pub fn sysctl(path: &str, value: &str) {
    // A child started from this thread runs in its namespace and sees its /proc/sys/net.
    let out = Command::new("sysctl")
        .args(["-q", "-w", &format!("{path}={value}")])
        .output()
        .unwrap_or_else(|e| panic!("cannot run sysctl: {e}"));
    assert!(
        out.status.success(),
        "sysctl -w {path}={value} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run ip (iproute2): {e}"));
    assert!(
        out.status.success(),
        "ip {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}
