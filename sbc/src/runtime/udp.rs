//! SIP over UDP: one blocking receive thread per interface, each datagram handed to the
//! interface's worker group as it arrives. Sends go out of the same socket (the engine's
//! `Transmit`s, written by the workers through the node's wire).

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use sbc_proto::access::canonical;
use sbc_proto::engine::Inbound;
use sbc_proto::registration::keepalive;
use sbc_proto::sip::dialog::LegTransport;
use tracing::debug;

use super::Shared;

/// Socket buffer size asked for on UDP sockets (the kernel caps it at `net.core.rmem_max`):
/// bursts of retransmissions must not overflow the kernel's default buffer.
const UDP_BUFFER_BYTES: usize = 4 << 20;

/// How long a receive waits before the loop looks at its stop flags again.
const RECEIVE_TIMEOUT: Duration = Duration::from_millis(100);

/// A SIP interface's UDP socket, bound, with a receive timeout and large buffers.
pub(super) fn bind(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    let sock = UdpSocket::bind(addr)?;
    sock.set_read_timeout(Some(RECEIVE_TIMEOUT))?;
    let sref = socket2::SockRef::from(&sock);
    let _ = sref.set_recv_buffer_size(UDP_BUFFER_BYTES);
    let _ = sref.set_send_buffer_size(UDP_BUFFER_BYTES);
    Ok(sock)
}

/// Where a datagram to `dest` is sent from a socket of family `socket_v6`: an IPv6 socket
/// (a dual-stack wildcard) reaches an IPv4 peer, canonicalised on receipt, at its IPv4-mapped
/// address (`::ffff:a.b.c.d`); anything else as it is.
pub(super) fn dest_for(socket_v6: bool, dest: SocketAddr) -> SocketAddr {
    match dest {
        SocketAddr::V4(v4) if socket_v6 => {
            SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
        }
        _ => dest,
    }
}

/// Receives datagrams on interface `interface` until the node or this binding stops.
pub(super) fn receive_loop(
    interface: usize,
    sock: &UdpSocket,
    max: usize,
    shared: &Shared,
    stop: &AtomicBool,
) {
    // One byte more than the maximum, so an oversized datagram is seen as such.
    let mut buf = vec![0u8; max.max(65_535) + 1];
    let mut received_since_release = false;
    while !shared.stopping.load(Ordering::Acquire) && !stop.load(Ordering::Acquire) {
        match sock.recv_from(&mut buf) {
            Ok((len, source)) => {
                received_since_release = true;
                if keepalive::is_stun(&buf[..len]) {
                    answer_stun(sock, canonical(source), &buf[..len], shared);
                    continue;
                }
                shared.dispatch(Inbound {
                    interface,
                    transport: LegTransport::Udp,
                    // An IPv4 peer of a dual-stack socket is its IPv4 address from here on.
                    source: canonical(source),
                    data: Bytes::copy_from_slice(&buf[..len]),
                });
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                // Quiet for RECEIVE_TIMEOUT: this thread's allocator cache goes back.
                if std::mem::take(&mut received_since_release) {
                    sbc_alarms::release_thread_cache();
                }
            }
            Err(e) => {
                // ICMP port unreachable from a previous send shows up here on Linux; go on.
                debug!(error = %e, "UDP receive error");
            }
        }
    }
}

/// A STUN message on the SIP port: a registered phone's keep-alive gets its reflexive address
/// back (RFC 5626 section 4.4.2); a source with no binding gets nothing (no reflection for a
/// forged source), and a source the edge denies is not even looked up.
fn answer_stun(sock: &UdpSocket, source: SocketAddr, datagram: &[u8], shared: &Shared) {
    let denied = super::lock(&shared.access).check(std::time::Instant::now(), source.ip(), false)
        != sbc_proto::access::Verdict::Pass;
    let mut cache = super::lock(&shared.registrations);
    let answer = (!denied && cache.is_registered_source(source))
        .then(|| keepalive::binding_response(datagram, source))
        .flatten();
    cache.count_keepalive(answer.is_some());
    drop(cache);
    if let Some(answer) = answer {
        let v6 = sock.local_addr().is_ok_and(|a| a.is_ipv6());
        if let Err(e) = sock.send_to(&answer, dest_for(v6, source)) {
            debug!(error = %e, %source, "STUN keep-alive answer not sent");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    #[test]
    fn an_ipv4_peer_is_reached_mapped_from_an_ipv6_socket() {
        assert_eq!(
            dest_for(true, addr("192.0.2.7:5060")),
            addr("[::ffff:192.0.2.7]:5060")
        );
        for (v6, dest) in [
            (true, "[fd00::7]:5060"),
            (false, "192.0.2.7:5060"),
            (false, "[fd00::7]:5060"),
        ] {
            assert_eq!(dest_for(v6, addr(dest)), addr(dest));
        }
    }

    /// A dual-stack wildcard socket sees an IPv4 peer as `::ffff:a.b.c.d`: canonicalised it is
    /// the IPv4 address, and the answer sent to that reaches the peer.
    #[test]
    fn a_dual_stack_socket_answers_an_ipv4_peer_at_its_canonical_address() {
        let Ok(server) = bind(addr("[::]:0")) else {
            return; // no IPv6 on this host
        };
        let port = server.local_addr().expect("bound").port();
        let peer = UdpSocket::bind("127.0.0.1:0").expect("bind");
        peer.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        if peer.send_to(b"ping", ("127.0.0.1", port)).is_err() {
            return;
        }
        let mut buf = [0u8; 16];
        let Ok((_, from)) = server.recv_from(&mut buf) else {
            return; // bindv6only: the wildcard is IPv6 only here
        };
        let source = canonical(from);
        assert_eq!(source, peer.local_addr().expect("bound"));
        server
            .send_to(b"pong", dest_for(true, source))
            .expect("a send to the canonical IPv4 peer");
        let (n, _) = peer.recv_from(&mut buf).expect("the answer");
        assert_eq!(&buf[..n], b"pong");
    }
}
