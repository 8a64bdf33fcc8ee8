//! RADIUS over TLS (RFC 6614, "RadSec") to one accounting server: one TCP connection, the
//! requests of a round written to it together (a TLS record each, one system call),
//! its answers read together and cut at each packet's Length. rustls is driven sans-IO
//! (`write_tls`, `read_tls`) on a non-blocking socket, so the accounting thread never waits
//! on the server.
//!
//! - The connection is opened when there is something to send, and again after it failed or
//!   the server closed it (not sooner than [`RECONNECT_AFTER`]). Requests written while it is
//!   being opened wait in rustls until the handshake is done.
//! - Requests in flight on a connection that closes are not answered: the delivery machine
//!   sends them again after its timeout, on the next connection.
//! - A request is never sent twice on one connection (RFC 6613 §2.6.1): a resend of what was
//!   written on the current connection closes it first ([`RadsecLink::reset`]).
//! - A stream that breaks the protocol (a Length under 20 or over 4096) closes the connection.

use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};
use tracing::{info, warn};

/// How soon a connection that failed or closed may be opened again.
pub const RECONNECT_AFTER: Duration = Duration::from_secs(1);
/// Bytes waiting in rustls (plaintext before the handshake, TLS records the socket did not
/// take), at most: 256 requests of 4096 bytes (one per Identifier) and room for their TLS
/// framing. A write beyond closes the connection rather than cut a request.
const MAX_BUFFERED: usize = 2 << 20;
/// A RADIUS packet is 20 to 4096 bytes (RFC 2865 §3).
const MIN_PACKET: usize = 20;
const MAX_PACKET: usize = 4096;
/// Reads of the socket per round, at most (each up to rustls' buffer).
const READS_PER_ROUND: usize = 64;

/// Where a connection stands, for `show accounting`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// No connection (none needed yet, or waiting to try again).
    Closed,
    /// TCP connecting or the TLS handshake under way.
    Connecting,
    /// Handshake done.
    Up,
}

impl LinkState {
    /// As `show accounting` prints it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Connecting => "connecting",
            Self::Up => "up",
        }
    }
}

struct Open {
    tcp: TcpStream,
    tls: ClientConnection,
}

/// One RADIUS/TLS server as the accounting thread reaches it.
pub struct RadsecLink {
    addr: SocketAddr,
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    conn: Option<Open>,
    /// Not before then is a new connection opened (after one failed or closed).
    retry_at: Option<Instant>,
    /// The current connection's number: a request records the connection it was written on.
    generation: u32,
    /// Answers' bytes read and not yet a whole packet.
    partial: Vec<u8>,
    /// Connections opened, and those that failed or were closed.
    pub connects: u64,
    /// Connections lost: failed, closed by the server, or reset for a resend.
    pub losses: u64,
}

impl RadsecLink {
    /// A link to `addr`, verified with `config` as `name`; nothing is opened yet.
    #[must_use]
    pub fn new(addr: SocketAddr, config: Arc<ClientConfig>, name: ServerName<'static>) -> Self {
        Self {
            addr,
            config,
            name,
            conn: None,
            retry_at: None,
            generation: 0,
            partial: Vec::new(),
            connects: 0,
            losses: 0,
        }
    }

    /// The connection's state.
    #[must_use]
    pub fn state(&self) -> LinkState {
        match &self.conn {
            None => LinkState::Closed,
            Some(o) if o.tls.is_handshaking() => LinkState::Connecting,
            Some(_) => LinkState::Up,
        }
    }

    /// The number of the connection a request written now goes on (the next one when none
    /// is open).
    #[must_use]
    pub fn generation(&self) -> u32 {
        if self.conn.is_some() {
            self.generation
        } else {
            self.generation.wrapping_add(1)
        }
    }

    /// Closes the connection (its requests in flight are lost: resent by the delivery
    /// machine on the next one); the next may be opened at once.
    pub fn reset(&mut self) {
        if let Some(mut open) = self.conn.take() {
            open.tls.send_close_notify();
            let _ = open.tls.write_tls(&mut open.tcp);
            self.losses += 1;
        }
        self.partial.clear();
    }

    fn fail(&mut self, now: Instant, why: &dyn std::fmt::Display) {
        if self.conn.take().is_some() {
            self.losses += 1;
            warn!(server = %self.addr, error = %why, "accounting RADIUS/TLS connection lost");
        }
        self.partial.clear();
        self.retry_at = Some(now + RECONNECT_AFTER);
    }

    fn open(&mut self, now: Instant) -> bool {
        if self.conn.is_some() {
            return true;
        }
        if self.retry_at.is_some_and(|t| now < t) {
            return false;
        }
        let opened = (|| -> std::io::Result<Open> {
            let domain = socket2::Domain::for_address(self.addr);
            let socket =
                socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
            socket.set_nonblocking(true)?;
            socket.set_nodelay(true)?;
            match socket.connect(&self.addr.into()) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(nix::errno::Errno::EINPROGRESS as i32) => {}
                Err(e) => return Err(e),
            }
            let mut tls = ClientConnection::new(Arc::clone(&self.config), self.name.clone())
                .map_err(std::io::Error::other)?;
            tls.set_buffer_limit(Some(MAX_BUFFERED));
            Ok(Open {
                tcp: socket.into(),
                tls,
            })
        })();
        match opened {
            Ok(open) => {
                self.conn = Some(open);
                self.generation = self.generation.wrapping_add(1);
                self.connects += 1;
                info!(server = %self.addr, "accounting RADIUS/TLS connection opening");
                true
            }
            Err(e) => {
                self.retry_at = Some(now + RECONNECT_AFTER);
                warn!(server = %self.addr, error = %e, "accounting RADIUS/TLS connection not opened");
                false
            }
        }
    }

    /// Writes the requests of `buf`, each ending at the next of `ends`, on the connection,
    /// opening it if needed, and sends what the socket takes: one TLS record per request
    /// (FreeRADIUS 3 takes a record holding more than one packet as a bad packet and closes
    /// the connection), all in as few system calls as the socket takes. Returns whether they
    /// were written: `false` if there is no connection (tried again later) or it was lost
    /// (the delivery machine resends).
    pub fn send(&mut self, now: Instant, buf: &[u8], ends: &[usize]) -> bool {
        if ends.is_empty() || !self.open(now) {
            return false;
        }
        let Some(open) = self.conn.as_mut() else {
            return false;
        };
        let mut from = 0;
        for &end in ends {
            let request = buf.get(from..end).unwrap_or_default();
            from = end;
            match open.tls.writer().write(request) {
                Ok(n) if n == request.len() => {}
                // Part of a request in the stream would break it: the connection goes.
                Ok(_) => {
                    self.fail(
                        now,
                        &"more requests waiting than the connection's buffer holds",
                    );
                    return false;
                }
                Err(e) => {
                    self.fail(now, &e);
                    return false;
                }
            }
        }
        self.flush(now);
        self.conn.is_some()
    }

    /// Sends what rustls holds for the socket, as far as the socket takes it.
    fn flush(&mut self, now: Instant) {
        let Some(open) = self.conn.as_mut() else {
            return;
        };
        while open.tls.wants_write() {
            match open.tls.write_tls(&mut open.tcp) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => {
                    self.fail(now, &e);
                    return;
                }
            }
        }
    }

    /// Reads what the server sent and hands each whole packet to `answer`; moves the
    /// handshake on and sends what it needs.
    pub fn receive(&mut self, now: Instant, mut answer: impl FnMut(&[u8])) {
        let mut failed: Option<String> = None;
        if let Some(open) = self.conn.as_mut() {
            for _ in 0..READS_PER_ROUND {
                match open.tls.read_tls(&mut open.tcp) {
                    Ok(0) => {
                        failed = Some("closed by the server".to_owned());
                        break;
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => {
                        failed = Some(e.to_string());
                        break;
                    }
                }
                if let Err(e) = open.tls.process_new_packets() {
                    failed = Some(format!("TLS: {e}"));
                    break;
                }
                let mut reader = open.tls.reader();
                let mut chunk = [0u8; 16_384];
                loop {
                    match reader.read(&mut chunk) {
                        Ok(0) => break,
                        Ok(n) => self.partial.extend_from_slice(&chunk[..n]),
                        Err(_) => break,
                    }
                }
            }
            // Whole packets, each cut at its Length (RFC 6614 §2.5: the stream is packets).
            let mut at = 0;
            while let Some(len) = self
                .partial
                .get(at + 2..at + 4)
                .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
            {
                if !(MIN_PACKET..=MAX_PACKET).contains(&len) {
                    failed = Some(format!("a packet of length {len} in the stream"));
                    break;
                }
                let Some(packet) = self.partial.get(at..at + len) else {
                    break;
                };
                answer(packet);
                at += len;
            }
            self.partial.drain(..at.min(self.partial.len()));
        }
        match failed {
            Some(why) => self.fail(now, &why),
            None => self.flush(now),
        }
    }
}
