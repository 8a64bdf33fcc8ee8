//! Sockets and message routing: one UDP socket, or TCP or TLS connections (a listener on a
//! UAS, one outgoing connection on a UAC, re-opened when lost), and a table that hands every
//! received message to the task of its call, keyed by Call-ID.
//!
//! TLS is TCP with a `tokio_rustls` stream in between: the same framing, dialling and
//! re-dialling. A handshake that fails (ours or the peer's verdict) is a transport error
//! whose reason is TLS ([`tls_error`]); a TLS 1.3 server refuses a client certificate only
//! after our side of the handshake has completed, with an alert we read once a request is
//! out, so a connection's [`Refusal`] tells the calls waiting on it. A connection refused
//! by TLS is not re-opened at once (the next request opens one).
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
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, UdpSocket};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::msg::{response_to, Frame, Framer, Message};
use super::stats::Stats;
use super::{TlsSettings, Transport};

/// How long a TLS handshake may take, either side.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// An established TCP or TLS connection: a queue to its writer task.
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    tx: mpsc::UnboundedSender<Bytes>,
    refusal: Refusal,
}

/// Tells whether a connection ended refused by TLS (an alert, or a record that does not
/// decode): the calls whose requests went out on it fail at once instead of timing out.
#[derive(Debug, Clone)]
pub(crate) struct Refusal(watch::Receiver<Option<String>>);

impl Refusal {
    /// Returns once the connection has ended with a TLS error; never if it ends otherwise.
    pub(crate) async fn refused(&mut self) {
        if self.0.wait_for(Option::is_some).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A TLS failure of ours (the handshake timed out), told apart from TCP's like rustls's.
#[derive(Debug)]
struct TlsFailure(String);

impl std::fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsFailure {}

/// The TLS reason of a transport error, if it is one: a rustls error (handshake, alert,
/// certificate verification) or a handshake timeout.
pub(crate) fn tls_error(e: &io::Error) -> Option<String> {
    let inner = e.get_ref()?;
    (inner.is::<rustls::Error>() || inner.is::<TlsFailure>()).then(|| inner.to_string())
}

/// TLS of an endpoint: a connector for the connections it opens, an acceptor for those it
/// accepts (a UAS, or a UAC listening on its Contact).
struct Tls {
    connector: TlsConnector,
    /// SNI and the name the server's certificate must carry; `None`: the dialled IP.
    name: Option<ServerName<'static>>,
    acceptor: Option<TlsAcceptor>,
}

impl Tls {
    fn new(settings: &TlsSettings) -> io::Result<Self> {
        let name = match &settings.server_name {
            Some(n) => Some(ServerName::try_from(n.clone()).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("bad TLS server name {n:?}: {e}"),
                )
            })?),
            None => None,
        };
        Ok(Self {
            connector: TlsConnector::from(settings.client.clone()),
            name,
            acceptor: settings.server.clone().map(TlsAcceptor::from),
        })
    }
}

type Reader = Box<dyn AsyncRead + Send + Unpin>;
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// Where a message goes.
#[derive(Debug, Clone)]
pub(crate) enum Peer {
    /// A UDP address.
    Udp(SocketAddr),
    /// A TCP or TLS connection.
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
    tls: Option<Tls>,
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
    /// Binds a UAC endpoint: UDP socket on `local`, or (TCP, TLS) a first connection from
    /// `local` to `target` (with `listen`: a listener on `local`, and a first connection from
    /// another port). TLS needs `tls` (with a server configuration when listening); a first
    /// connection refused by TLS is no error here: the calls fail with the reason.
    pub(crate) async fn uac(
        transport: Transport,
        local: SocketAddr,
        target: SocketAddr,
        listen: bool,
        tls: Option<&TlsSettings>,
        stats: Arc<Stats>,
    ) -> io::Result<Arc<Self>> {
        let tls = Self::tls_for(transport, tls, listen)?;
        let udp = match transport {
            Transport::Udp => Some(Arc::new(UdpSocket::bind(local).await?)),
            Transport::Tcp | Transport::Tls => None,
        };
        let listener = match transport {
            Transport::Tcp | Transport::Tls if listen => Some(TcpListener::bind(local).await?),
            _ => None,
        };
        let bound = match (&udp, &listener) {
            (Some(s), _) => s.local_addr()?,
            (None, Some(l)) => l.local_addr()?,
            (None, None) => local,
        };
        let mut ep = Self::new(transport, bound, udp, tls, Some(target), None, stats);
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
            Transport::Tls => match ep.tcp_target().await {
                Err(e) if tls_error(&e).is_none() => return Err(e),
                _ => {}
            },
        }
        Ok(ep)
    }

    /// The TLS context of an endpoint of `transport`: required for TLS (with a server
    /// configuration when the endpoint listens), ignored otherwise.
    fn tls_for(
        transport: Transport,
        tls: Option<&TlsSettings>,
        listen: bool,
    ) -> io::Result<Option<Tls>> {
        if transport != Transport::Tls {
            return Ok(None);
        }
        let invalid = |m: &str| io::Error::new(io::ErrorKind::InvalidInput, m.to_owned());
        let settings = tls.ok_or_else(|| invalid("transport tls needs TLS settings"))?;
        if listen && settings.server.is_none() {
            return Err(invalid(
                "a TLS listener needs a server configuration (TlsSettings::server)",
            ));
        }
        Tls::new(settings).map(Some)
    }

    /// Serves the connections accepted on `l` (their messages routed like any other); over
    /// TLS each completes its handshake in a task of its own first.
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
                let Some(acceptor) = ep.tls.as_ref().and_then(|t| t.acceptor.clone()) else {
                    let (r, w) = stream.into_split();
                    ep.start_conn(Box::new(r), Box::new(w), false);
                    continue;
                };
                let weak = weak.clone();
                ep.spawn(async move {
                    let accepted =
                        tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
                    let Some(ep) = weak.upgrade() else { return };
                    match accepted {
                        Ok(Ok(tls)) => {
                            let (r, w) = tokio::io::split(tls);
                            ep.start_conn(Box::new(r), Box::new(w), false);
                        }
                        Ok(Err(e)) => ep.stats.tls_failed(&e.to_string()),
                        Err(_) => ep.stats.tls_failed("TLS handshake timed out (accepting)"),
                    }
                });
            }
        });
    }

    /// Binds a UAS endpoint on `local`; new calls are announced on the returned channel. TLS
    /// needs `tls` with a server configuration.
    pub(crate) async fn uas(
        transport: Transport,
        local: SocketAddr,
        tls: Option<&TlsSettings>,
        stats: Arc<Stats>,
    ) -> io::Result<(Arc<Self>, mpsc::UnboundedReceiver<NewCall>)> {
        let tls = Self::tls_for(transport, tls, true)?;
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
                    None,
                    Some(tx),
                    stats,
                ));
                ep.start_udp();
                ep
            }
            Transport::Tcp | Transport::Tls => {
                let l = TcpListener::bind(local).await?;
                let bound = l.local_addr()?;
                let ep = Arc::new(Self::new(
                    transport,
                    bound,
                    None,
                    tls,
                    None,
                    Some(tx),
                    stats,
                ));
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
        tls: Option<Tls>,
        target: Option<SocketAddr>,
        new_calls: Option<mpsc::UnboundedSender<NewCall>>,
        stats: Arc<Stats>,
    ) -> Self {
        Self {
            transport,
            stats,
            local: Mutex::new(local),
            udp,
            tls,
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
        self.send_watched(peer, data).await.map(drop)
    }

    /// As [`Endpoint::send`], returning the [`Refusal`] of the connection the message went
    /// on (none over UDP).
    pub(crate) async fn send_watched(
        self: &Arc<Self>,
        peer: &Peer,
        data: Bytes,
    ) -> io::Result<Option<Refusal>> {
        let closed = || io::Error::new(io::ErrorKind::BrokenPipe, "connection closed");
        match peer {
            Peer::Udp(addr) => self.send_udp(*addr, &data).await.map(|()| None),
            Peer::Tcp(conn) => {
                conn.tx.send(data).map_err(|_| closed())?;
                Ok(Some(conn.refusal.clone()))
            }
            Peer::Target if self.transport == Transport::Udp => {
                let target = self.target.ok_or_else(|| io::Error::other("no target"))?;
                self.send_udp(target, &data).await.map(|()| None)
            }
            Peer::Target => {
                let conn = self.tcp_target().await?;
                if conn.tx.send(data.clone()).is_ok() {
                    return Ok(Some(conn.refusal));
                }
                // The connection just closed: one new connection, one more try.
                *self.tcp_out.lock().await = None;
                let conn = self.tcp_target().await?;
                conn.tx.send(data).map_err(|_| closed())?;
                Ok(Some(conn.refusal))
            }
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

    /// The UAC's TCP (or TLS) connection to its target, opened (from the same local port when
    /// there was one) if absent or closed.
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
        let (conn, local) = self.dial(sock, target, !self.listening).await?;
        if !self.listening {
            *lock(&self.local) = local;
        }
        *out = Some(conn.clone());
        Ok(conn)
    }

    /// Connects `sock` to `addr`, completes the TLS handshake over TLS, and starts the
    /// connection; returns it and its local address. A failed handshake is counted with its
    /// reason.
    async fn dial(
        self: &Arc<Self>,
        sock: TcpSocket,
        addr: SocketAddr,
        redial: bool,
    ) -> io::Result<(Conn, SocketAddr)> {
        let stream = tokio::time::timeout(Duration::from_secs(5), sock.connect(addr))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TCP connect timed out"))??;
        let _ = stream.set_nodelay(true);
        let local = stream.local_addr()?;
        let Some(tls) = &self.tls else {
            let (r, w) = stream.into_split();
            return Ok((self.start_conn(Box::new(r), Box::new(w), redial), local));
        };
        let name = tls
            .name
            .clone()
            .unwrap_or_else(|| ServerName::IpAddress(addr.ip().into()));
        let handshake =
            tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.connector.connect(name, stream)).await;
        let stream = match handshake {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                self.stats.tls_failed(&e.to_string());
                return Err(e);
            }
            Err(_) => {
                let why = format!("TLS handshake with {addr} timed out");
                self.stats.tls_failed(&why);
                return Err(io::Error::new(io::ErrorKind::TimedOut, TlsFailure(why)));
            }
        };
        let (r, w) = tokio::io::split(stream);
        Ok((self.start_conn(Box::new(r), Box::new(w), redial), local))
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
        let (conn, _) = self.dial(sock, addr, false).await?;
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

    /// Starts the writer and reader of a connection (TCP halves, or a TLS stream's). When the
    /// reader sees the connection end, the writer stops too (so senders see it closed,
    /// instead of writing into a connection the peer has closed), and the UAC's target
    /// connection (`redial`) is opened again, unless TLS refused it. A CRLFCRLF keep-alive
    /// is answered with CRLF (RFC 5626).
    fn start_conn(self: &Arc<Self>, mut read: Reader, mut write: Writer, redial: bool) -> Conn {
        let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
        let (ended_tx, mut ended_rx) = tokio::sync::oneshot::channel::<()>();
        let (refused_tx, refused_rx) = watch::channel(None);
        let conn = Conn {
            tx,
            refusal: Refusal(refused_rx),
        };
        self.spawn(async move {
            loop {
                let b = tokio::select! {
                    b = rx.recv() => match b {
                        Some(b) => b,
                        None => break,
                    },
                    _ = &mut ended_rx => break,
                };
                // A TLS stream may keep what it encrypted until flushed.
                if write.write_all(&b).await.is_err() || write.flush().await.is_err() {
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
            let mut refused = None;
            'read: loop {
                let n = match read.read(&mut buf).await {
                    Ok(0) => break,
                    Err(e) => {
                        refused = tls_error(&e);
                        break;
                    }
                    Ok(n) => n,
                };
                framer.push(&buf[..n]);
                loop {
                    match framer.next() {
                        Ok(None) => break,
                        Ok(Some(Frame::Ping)) => {
                            let _ = me.tx.send(Bytes::from_static(b"\r\n"));
                        }
                        Ok(Some(Frame::Pong)) => {}
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
            if let Some(why) = refused {
                if let Some(ep) = weak.upgrade() {
                    ep.stats.tls_failed(&why);
                }
                let _ = refused_tx.send(Some(why));
                return;
            }
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
