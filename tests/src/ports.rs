//! Port allocation for parallel tests.
//!
//! Ports are taken from `10000..32000`, below Linux's ephemeral range (32768..60999) so that
//! no outgoing connection can grab them between allocation and use. Each test process starts at
//! an offset derived from its PID and walks the range with an atomic counter, so parallel
//! tests in one process never get the same port and parallel processes rarely meet; every
//! candidate is then checked with a trial bind on `0.0.0.0` for both UDP and TCP (a wildcard
//! bind fails if any address holds the port, so the port is free on every loopback address).

use std::net::{TcpListener, UdpSocket};
use std::sync::atomic::{AtomicU32, Ordering};

const LOW: u32 = 10_000;
const HIGH: u32 = 32_000;
static NEXT: AtomicU32 = AtomicU32::new(0);

fn is_free(port: u16) -> bool {
    UdpSocket::bind(("0.0.0.0", port)).is_ok() && TcpListener::bind(("0.0.0.0", port)).is_ok()
}

/// A block of `len` consecutive ports, all free on UDP and TCP; returns the first.
///
/// # Panics
/// If the whole range is exhausted.
#[must_use]
pub fn free_block(len: u16) -> u16 {
    let len = u32::from(len.max(1));
    let span = HIGH - LOW;
    // Spread processes over the range: 7919 is prime, so nearby PIDs land far apart.
    let offset = (std::process::id().wrapping_mul(7919)) % span;
    for _ in 0..span {
        let n = NEXT.fetch_add(len, Ordering::Relaxed);
        let first = LOW + (offset + n) % span;
        if first + len > HIGH {
            continue;
        }
        let all_free = (first..first + len).all(|p| is_free(p as u16));
        if all_free {
            return first as u16;
        }
    }
    panic!("no free port block of {len} in {LOW}..{HIGH}");
}

/// One port free on UDP and TCP.
#[must_use]
pub fn free_port() -> u16 {
    free_block(1)
}
