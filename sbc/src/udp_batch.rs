//! Datagrams many at a time on one connected UDP socket: `sendmmsg` and `recvmmsg` (through
//! `nix`), up to [`BATCH`] per system call. The SIP path has its own receive loop (quinn-udp);
//! this serves the side channels that send one datagram per record or event (HEP capture,
//! RADIUS accounting), where a system call per datagram was most of their cost.

use std::io::{IoSlice, IoSliceMut};
use std::net::UdpSocket;
use std::os::fd::AsRawFd as _;

use nix::errno::Errno;
use nix::sys::socket::{recvmmsg, sendmmsg, MsgFlags, MultiHeaders, SockaddrStorage};

/// Datagrams per system call.
pub const BATCH: usize = 64;

/// Sends the datagrams of `buf`, each ending at the next of `ends` (increasing offsets), on
/// the connected `socket` without waiting, [`BATCH`] per system call. Returns how many were
/// sent and the error that stopped the rest (`EAGAIN`: the socket's buffer is full), or
/// `ECONNREFUSED` when an earlier datagram met a closed port (reported once by the kernel,
/// which clears it: the rest of the batch is then sent anyway).
pub fn send_datagrams(socket: &UdpSocket, buf: &[u8], ends: &[usize]) -> (usize, Option<Errno>) {
    let mut sent = 0;
    let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH.min(ends.len()), None);
    let none: [Option<SockaddrStorage>; BATCH] = [None; BATCH];
    let mut start = 0;
    // A "connection refused" reports an earlier datagram's ICMP error (and clears it): the
    // batch is tried once more rather than lost to it.
    let mut retried = false;
    while sent < ends.len() {
        let group = &ends[sent..ends.len().min(sent + BATCH)];
        let mut from = start;
        let mut slices: Vec<[IoSlice<'_>; 1]> = Vec::with_capacity(group.len());
        for &end in group {
            slices.push([IoSlice::new(buf.get(from..end).unwrap_or_default())]);
            from = end;
        }
        match sendmmsg(
            socket.as_raw_fd(),
            &mut headers,
            &slices,
            &none[..group.len()],
            [],
            MsgFlags::MSG_DONTWAIT,
        )
        .map(|r| r.count())
        {
            Ok(n) if n > 0 => {
                sent += n;
                start = ends[sent - 1];
            }
            Ok(_) => return (sent, Some(Errno::EAGAIN)),
            Err(Errno::ECONNREFUSED) if !retried => retried = true,
            Err(e) => return (sent, Some(e)),
        }
    }
    (sent, retried.then_some(Errno::ECONNREFUSED))
}

/// Receive slots: [`BATCH`] buffers of `slot` bytes, allocated once (the system call's
/// headers are not `Send`: they are made for each read).
pub struct RecvSlots {
    buf: Vec<u8>,
    slot: usize,
    lens: Vec<usize>,
}

impl RecvSlots {
    /// Slots for datagrams of at most `slot` bytes (a longer one is cut).
    #[must_use]
    pub fn new(slot: usize) -> Self {
        Self {
            buf: vec![0; slot.max(1) * BATCH],
            slot: slot.max(1),
            lens: Vec::with_capacity(BATCH),
        }
    }

    /// Reads up to [`BATCH`] datagrams waiting on `socket` in one system call, without
    /// waiting; returns how many (0 when none waits). An error of the socket (an ICMP
    /// "port unreachable" of an earlier send) ends the read and is returned.
    pub fn recv(&mut self, socket: &UdpSocket) -> Result<usize, Errno> {
        self.lens.clear();
        let slot = self.slot;
        let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
        let mut iovs: Vec<[IoSliceMut<'_>; 1]> = self
            .buf
            .chunks_mut(slot)
            .map(|c| [IoSliceMut::new(c)])
            .collect();
        match recvmmsg(
            socket.as_raw_fd(),
            &mut headers,
            iovs.iter_mut(),
            MsgFlags::MSG_DONTWAIT,
            None,
        ) {
            Ok(results) => {
                self.lens.extend(results.map(|m| m.bytes.min(slot)));
                Ok(self.lens.len())
            }
            Err(Errno::EAGAIN) => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// The datagrams the last [`Self::recv`] read.
    pub fn datagrams(&self) -> impl Iterator<Item = &[u8]> {
        self.lens
            .iter()
            .enumerate()
            .map(|(i, &len)| &self.buf[i * self.slot..i * self.slot + len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_go_and_come_in_batches() {
        let a = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let b = UdpSocket::bind("127.0.0.1:0").expect("bind");
        a.connect(b.local_addr().expect("addr")).expect("connect");
        // 100 datagrams of 1 to 100 bytes: two sendmmsg calls.
        let mut buf = Vec::new();
        let mut ends = Vec::new();
        for n in 1..=100u8 {
            buf.extend(std::iter::repeat_n(n, usize::from(n)));
            ends.push(buf.len());
        }
        assert_eq!(send_datagrams(&a, &buf, &ends), (100, None));
        let mut slots = RecvSlots::new(64);
        let mut got = Vec::new();
        for _ in 0..100 {
            match slots.recv(&b) {
                Ok(0) if got.len() == 100 => break,
                Ok(_) => got.extend(slots.datagrams().map(<[u8]>::to_vec)),
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got.len(), 100);
        for (i, d) in got.iter().enumerate() {
            let n = u8::try_from(i + 1).expect("small");
            // Slots of 64 bytes: longer datagrams are cut.
            assert_eq!(d.len(), usize::from(n).min(64));
            assert!(d.iter().all(|&x| x == n));
        }
        assert_eq!(slots.recv(&b), Ok(0), "nothing left");
    }

    #[test]
    fn a_closed_port_s_error_is_reported_and_the_batch_still_goes() {
        let closed = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let to = closed.local_addr().expect("addr");
        drop(closed);
        let a = UdpSocket::bind("127.0.0.1:0").expect("bind");
        a.connect(to).expect("connect");
        // The first send meets the closed port: its ICMP error waits on the socket.
        assert_eq!(send_datagrams(&a, b"x", &[1]).0, 1);
        // The next batch reports it once, and is sent all the same.
        assert_eq!(
            send_datagrams(&a, b"abc", &[1, 2, 3]),
            (3, Some(Errno::ECONNREFUSED))
        );
    }
}
