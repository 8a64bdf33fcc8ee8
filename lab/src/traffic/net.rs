//! Sockets and message routing: one UDP socket, or TCP connections (a listener on a UAS, one
//! outgoing connection on a UAC, re-opened when lost), and a table that hands every received
//! message to the task of its call, keyed by Call-ID.
//!
//! A lost TCP connection is re-established as an RFC 5626 UA re-establishes its flow: the
//! UAC's connection to its target is opened again at once (from the same local port, so the
//! Contact its calls gave stays reachable through it), retried every 100 ms for up to 30 s; a
//! UAS whose in-dialog request finds the connection of its dialog gone opens one to the
//! dialog's next hop ([`Endpoint::tcp_to`]). That is what an SBC pair's kill -9 needs: every
//! connection of the dead node is gone, and the new active serves the same addresses.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream, UdpSocket};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::msg::{response_to, Frame, Framer, Message};
use super::stats::Stats;
use super::Transport;

/// An established TCP connection: a queue to its writer task.
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    tx: mpsc::UnboundedSender<Bytes>,
}

/// Where a message goes.
#[derive(Debug, Clone)]
pub(crate) enum Peer {
    /// A UDP address.
    Udp(SocketAddr),
    /// A TCP connection.
    Tcp(Conn),
    /// The UAC's target, over its transport (the TCP connection is re-opened when lost).
    Target,
}

/// A received message and where to answer it.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub(crate) msg: Message,
    pub(crate) peer: Peer,
}

/// A new call seen by a UAS: its Call-ID and the queue of its messages (the INVITE first).
pub(crate) type NewCall = (String, mpsc::UnboundedReceiver<Incoming>);

pub(crate) struct Endpoint {
    pub(crate) transport: Transport,
    pub(crate) stats: Arc<Stats>,
    local: Mutex<SocketAddr>,
    udp: Option<Arc<UdpSocket>>,
    target: Option<SocketAddr>,
    tcp_out: tokio::sync::Mutex<Option<Conn>>,
    /// A TCP UAC listening on its Contact address (its connections come from other ports).
    listening: bool,
    /// Connections a UAS opened to its dialogs' next hops, by address.
    tcp_dialled: tokio::sync::Mutex<HashMap<SocketAddr, Conn>>,
    calls: Mutex<HashMap<String, mpsc::UnboundedSender<Incoming>>>,
    new_calls: Option<mpsc::UnboundedSender<NewCall>>,
    tasks: Mutex<Option<JoinSet<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Endpoint {
    /// Binds a UAC endpoint: UDP socket on `local`, or (TCP) a first connection from `local` to
    /// `target` (with `listen`: a listener on `local`, and a first connection from another
    /// port).
    pub(crate) async fn uac(
        transport: Transport,
        local: SocketAddr,
        target: SocketAddr,
        listen: bool,
        stats: Arc<Stats>,
    ) -> io::Result<Arc<Self>> {
        let udp = match transport {
            Transport::Udp => Some(Arc::new(UdpSocket::bind(local).await?)),
            Transport::Tcp => None,
        };
        let listener = match transport {
            Transport::Tcp if listen => Some(TcpListener::bind(local).await?),
            _ => None,
        };
        let bound = match (&udp, &listener) {
            (Some(s), _) => s.local_addr()?,
            (None, Some(l)) => l.local_addr()?,
            (None, None) => local,
        };
        let mut ep = Self::new(transport, bound, udp, Some(target), None, stats);
        ep.listening = listener.is_some();
        let ep = Arc::new(ep);
        if let Some(l) = listener {
            ep.accept_loop(l);
        }
        match transport {
            Transport::Udp => ep.start_udp(),
            Transport::Tcp => {
                ep.tcp_target().await?;
            }
        }
        Ok(ep)
    }

    /// Serves the connections accepted on `l` (their messages routed like any other).
    fn accept_loop(self: &Arc<Self>, l: TcpListener) {
        let weak = Arc::downgrade(self);
        self.spawn(async move {
            loop {
                let Ok((stream, _)) = l.accept().await else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                let Some(ep) = weak.upgrade() else { return };
                let _ = stream.set_nodelay(true);
                ep.start_conn(stream, false);
            }
        });
    }

    /// Binds a UAS endpoint on `local`; new calls are announced on the returned channel.
    pub(crate) async fn uas(
        transport: Transport,
        local: SocketAddr,
        stats: Arc<Stats>,
    ) -> io::Result<(Arc<Self>, mpsc::UnboundedReceiver<NewCall>)> {
        let (tx, rx) = mpsc::unbounded_channel();
        let ep = match transport {
            Transport::Udp => {
                let s = UdpSocket::bind(local).await?;
                let bound = s.local_addr()?;
                let ep = Arc::new(Self::new(
                    transport,
                    bound,
                    Some(Arc::new(s)),
                    None,
                    Some(tx),
                    stats,
                ));
                ep.start_udp();
                ep
            }
            Transport::Tcp => {
                let l = TcpListener::bind(local).await?;
                let bound = l.local_addr()?;
                let ep = Arc::new(Self::new(transport, bound, None, None, Some(tx), stats));
                ep.accept_loop(l);
                ep
            }
        };
        Ok((ep, rx))
    }

    fn new(
        transport: Transport,
        local: SocketAddr,
        udp: Option<Arc<UdpSocket>>,
        target: Option<SocketAddr>,
        new_calls: Option<mpsc::UnboundedSender<NewCall>>,
        stats: Arc<Stats>,
    ) -> Self {
        Self {
            transport,
            stats,
            local: Mutex::new(local),
            udp,
            target,
            tcp_out: tokio::sync::Mutex::new(None),
            listening: false,
            tcp_dialled: tokio::sync::Mutex::new(HashMap::new()),
            calls: Mutex::new(HashMap::new()),
            new_calls,
            tasks: Mutex::new(Some(JoinSet::new())),
        }
    }

    /// The address written in Via and Contact (the socket's, or the TCP connection's local
    /// address on a UAC).
    pub(crate) fn local(&self) -> SocketAddr {
        *lock(&self.local)
    }

    /// Runs `fut` until it ends or the endpoint shuts down.
    pub(crate) fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = lock(&self.tasks);
        if let Some(set) = tasks.as_mut() {
            while set.try_join_next().is_some() {}
            set.spawn(fut);
        }
    }

    /// Stops every task of this endpoint (calls, readers, writers); sockets close when the
    /// last reference goes.
    pub(crate) fn shutdown(&self) {
        let set = lock(&self.tasks).take();
        if let Some(mut set) = set {
            set.abort_all();
        }
        lock(&self.calls).clear();
    }

    /// As [`Endpoint::shutdown`], and waits until every task has stopped, so that the sockets
    /// are closed once the caller drops its reference.
    pub(crate) async fn close(&self) {
        let set = lock(&self.tasks).take();
        if let Some(mut set) = set {
            set.shutdown().await;
        }
        lock(&self.calls).clear();
    }

    /// Registers a call's queue (UAC, before its INVITE goes out).
    pub(crate) fn register(&self, call_id: &str) -> mpsc::UnboundedReceiver<Incoming> {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.calls).insert(call_id.to_owned(), tx);
        rx
    }

    /// Forgets a call: later messages for it are strays.
    pub(crate) fn unregister(&self, call_id: &str) {
        lock(&self.calls).remove(call_id);
    }

    /// Sends one message; `Err` when the transport failed.
    pub(crate) async fn send(self: &Arc<Self>, peer: &Peer, data: Bytes) -> io::Result<()> {
        match peer {
            Peer::Udp(addr) => self.send_udp(*addr, &data).await,
            Peer::Tcp(conn) => conn
                .tx
                .send(data)
                .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "TCP connection closed")),
            Peer::Target => match self.transport {
                Transport::Udp => {
                    let target = self.target.ok_or_else(|| io::Error::other("no target"))?;
                    self.send_udp(target, &data).await
                }
                Transport::Tcp => {
                    let conn = self.tcp_target().await?;
                    if conn.tx.send(data.clone()).is_ok() {
                        return Ok(());
                    }
                    // The connection just closed: one new connection, one more try.
                    *self.tcp_out.lock().await = None;
                    let conn = self.tcp_target().await?;
                    conn.tx.send(data).map_err(|_| {
                        io::Error::new(io::ErrorKind::BrokenPipe, "TCP connection closed")
                    })
                }
            },
        }
    }

    async fn send_udp(&self, addr: SocketAddr, data: &[u8]) -> io::Result<()> {
        let sock = self
            .udp
            .as_ref()
            .ok_or_else(|| io::Error::other("no UDP socket"))?;
        match sock.send_to(data, addr).await {
            Ok(_) => Ok(()),
            // An ICMP port unreachable from an earlier datagram: the retransmission timers
            // handle a peer that is not there yet, so this is not a transport failure.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The UAC's TCP connection to its target, opened (from the same local port when there
    /// was one) if absent or closed.
    async fn tcp_target(self: &Arc<Self>) -> io::Result<Conn> {
        let mut out = self.tcp_out.lock().await;
        if let Some(conn) = out.as_ref() {
            if !conn.tx.is_closed() {
                return Ok(conn.clone());
            }
        }
        let target = self.target.ok_or_else(|| io::Error::other("no target"))?;
        let local = self.local();
        let sock = match target {
            SocketAddr::V4(_) => TcpSocket::new_v4()?,
            SocketAddr::V6(_) => TcpSocket::new_v6()?,
        };
        sock.set_reuseaddr(true)?;
        if self.listening {
            sock.bind(SocketAddr::new(local.ip(), 0))?;
        } else {
            sock.bind(local)?;
        }
        let stream = tokio::time::timeout(Duration::from_secs(5), sock.connect(target))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TCP connect timed out"))??;
        let _ = stream.set_nodelay(true);
        if !self.listening {
            *lock(&self.local) = stream.local_addr()?;
        }
        let conn = self.start_conn(stream, !self.listening);
        *out = Some(conn.clone());
        Ok(conn)
    }

    /// The UAC's target connection closed: open it again, every 100 ms for up to 30 s, until
    /// one attempt succeeds or the endpoint is gone.
    async fn redial(weak: Weak<Self>) {
        for _ in 0..300 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let Some(ep) = weak.upgrade() else { return };
            if ep.tcp_target().await.is_ok() {
                return;
            }
        }
    }

    /// A connection to `addr` (a UAS's dialog's next hop, when the connection its dialog came
    /// on is gone): an open one already dialled there, or a new one (from the endpoint's IP).
    pub(crate) async fn tcp_to(self: &Arc<Self>, addr: SocketAddr) -> io::Result<Conn> {
        let mut dialled = self.tcp_dialled.lock().await;
        if let Some(conn) = dialled.get(&addr) {
            if !conn.tx.is_closed() {
                return Ok(conn.clone());
            }
        }
        let sock = match addr {
            SocketAddr::V4(_) => TcpSocket::new_v4()?,
            SocketAddr::V6(_) => TcpSocket::new_v6()?,
        };
        sock.bind(SocketAddr::new(self.local().ip(), 0))?;
        let stream = tokio::time::timeout(Duration::from_secs(5), sock.connect(addr))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TCP connect timed out"))??;
        let _ = stream.set_nodelay(true);
        let conn = self.start_conn(stream, false);
        dialled.insert(addr, conn.clone());
        Ok(conn)
    }

    fn start_udp(self: &Arc<Self>) {
        let Some(sock) = self.udp.clone() else { return };
        let weak = Arc::downgrade(self);
        self.spawn(async move {
            let mut buf = vec![0u8; 65_536];
            loop {
                // ICMP errors surface here on Linux; nothing to do with them.
                let Ok((n, src)) = sock.recv_from(&mut buf).await else {
                    continue;
                };
                let Some(ep) = weak.upgrade() else { return };
                match Message::parse(&buf[..n]) {
                    Some(msg) => ep.route(msg, Peer::Udp(src)).await,
                    None => ep.stats.stray(),
                }
            }
        });
    }

    /// Starts the writer and reader of a connection. When the reader sees the connection end,
    /// the writer stops too (so senders see it closed, instead of writing into a connection
    /// the peer has closed), and the UAC's target connection (`redial`) is opened again.
    fn start_conn(self: &Arc<Self>, stream: TcpStream, redial: bool) -> Conn {
        let (mut read, mut write) = stream.into_split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
        let (ended_tx, mut ended_rx) = tokio::sync::oneshot::channel::<()>();
        let conn = Conn { tx };
        self.spawn(async move {
            loop {
                let b = tokio::select! {
                    b = rx.recv() => match b {
                        Some(b) => b,
                        None => break,
                    },
                    _ = &mut ended_rx => break,
                };
                if write.write_all(&b).await.is_err() {
                    break;
                }
            }
        });
        let weak = Arc::downgrade(self);
        let me = conn.clone();
        self.spawn(async move {
            let mut framer = Framer::default();
            let mut buf = vec![0u8; 16_384];
            // Dropping `me` at the end lets the writer finish once every sender is gone.
            'read: loop {
                let n = match read.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                framer.push(&buf[..n]);
                loop {
                    match framer.next() {
                        Ok(None) => break,
                        Ok(Some(Frame::Ping)) => {}
                        Ok(Some(Frame::Message(data))) => {
                            let Some(ep) = weak.upgrade() else {
                                break 'read;
                            };
                            match Message::parse(&data) {
                                Some(msg) => ep.route(msg, Peer::Tcp(me.clone())).await,
                                None => ep.stats.stray(),
                            }
                        }
                        Err(_) => break 'read,
                    }
                }
            }
            let _ = ended_tx.send(());
            if redial {
                if let Some(ep) = weak.upgrade() {
                    ep.spawn(Self::redial(weak));
                }
            }
        });
        conn
    }

    /// Hands a received message to its call, or starts a call (a UAS's new INVITE), or counts
    /// it as a stray (and answers a stray request other than ACK with 481).
    async fn route(self: &Arc<Self>, msg: Message, peer: Peer) {
        self.stats.received(msg.method());
        let Some(call_id) = msg.call_id().map(str::to_owned) else {
            self.stats.stray();
            return;
        };
        let stray = {
            let mut calls = lock(&self.calls);
            let mut inc = Incoming { msg, peer };
            if let Some(tx) = calls.get(&call_id) {
                match tx.send(inc) {
                    Ok(()) => return,
                    Err(mpsc::error::SendError(back)) => {
                        // The call's task has ended but not yet unregistered.
                        calls.remove(&call_id);
                        inc = back;
                    }
                }
            }
            let new_call = inc.msg.method() == Some("INVITE") && inc.msg.tag_of_to().is_none();
            match (&self.new_calls, new_call) {
                (Some(new_calls), true) => {
                    let (tx, rx) = mpsc::unbounded_channel();
                    let _ = tx.send(inc);
                    calls.insert(call_id.clone(), tx);
                    let _ = new_calls.send((call_id, rx));
                    return;
                }
                _ => inc,
            }
        };
        self.stray(stray).await;
    }

    async fn stray(self: &Arc<Self>, inc: Incoming) {
        self.stats.stray();
        if matches!(inc.msg.method(), Some(m) if m != "ACK") {
            let reply = response_to(&inc.msg, 481, Some("lab-stray")).finish(b"");
            let _ = self.send(&inc.peer, reply).await;
        }
    }
}
