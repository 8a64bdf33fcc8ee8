//! SIP over UDP: one blocking receive thread per interface, each datagram handed to the
//! interface's worker group as it arrives. Sends go out of the same socket (the engine's
//! `Transmit`s, written by the workers through the node's wire).

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use sbc_proto::engine::Inbound;
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
                shared.dispatch(Inbound {
                    interface,
                    transport: LegTransport::Udp,
                    source,
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
