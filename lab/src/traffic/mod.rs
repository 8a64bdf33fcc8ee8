//! The lab's SIP traffic generator: a UAC that places calls at a steady rate and a UAS that
//! answers them, over UDP, TCP or TLS ([`TlsSettings`]), with exact counters.
//!
//! Both are RFC 3261 endpoints, enough to be judged by SIPp and to drive an SBC: INVITE with a
//! small SDP offer, 100/180/200, ACK for 2xx (and for non-2xx, in the transaction), BYE after
//! the hold time from either side ([`ByeFrom`]), INVITE retransmission on UDP (timers A and B),
//! BYE retransmission (timers E and F), the UAS re-sending its 200 until the ACK (T1 doubling
//! up to T2, for 64·T1), retransmissions absorbed from call state, and a BYE answered 481 (or
//! anything but 2xx) counted as the failure of that call.
//!
//! Calls are long-lived tasks: the hold time may be minutes, and the BYE goes out when it ends,
//! to the same target address: an SBC pair's virtual address keeps working across a switchover,
//! so an established call survives exactly when its BYE is answered 200 by the new active.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use std::time::Duration;
//! use sbc_lab::traffic::{Uac, UacConfig, Uas, UasConfig};
//!
//! let uas = Uas::start(UasConfig::new("127.0.0.1:0".parse().unwrap())).await?;
//! let mut cfg = UacConfig::new(uas.local_addr());
//! cfg.rate = 20.0;
//! cfg.calls = Some(100);
//! cfg.hold = Duration::from_secs(30);
//! let uac = Uac::start(cfg).await?;
//! let stats = uac.stats(); // Arc: print stats.snapshot().progress_line() while it runs
//! let summary = uac.wait().await; // every call ended: completed + failed == attempted
//! assert_eq!(summary.failed, 0);
//! # drop(stats); Ok(()) }
//! ```

mod call;
mod media;
mod msg;
mod net;
mod stats;

use std::io;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

pub use media::{MediaPlan, PlanStatus};
pub use stats::{FailureReason, Latency, Received, Snapshot, Stats};

use net::Endpoint;

/// The SIP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// One UDP socket.
    #[default]
    Udp,
    /// TCP: the UAC opens one connection to its target (re-opened when lost) and carries all
    /// its calls on it; the UAS listens and answers on the connection a request came on.
    Tcp,
    /// TLS over TCP, used as TCP is ([`UacConfig::tls`], [`UasConfig::tls`]): Via
    /// `SIP/2.0/TLS`, Contact `;transport=tls`.
    Tls,
}

impl Transport {
    fn via_token(self) -> &'static str {
        match self {
            Self::Udp => "UDP",
            Self::Tcp => "TCP",
            Self::Tls => "TLS",
        }
    }

    /// The lower-case name (`udp`, `tcp`, `tls`), as in a configuration or `transport=`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp => "tcp",
            Self::Tls => "tls",
        }
    }
}

impl FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "udp" => Ok(Self::Udp),
            "tcp" => Ok(Self::Tcp),
            "tls" => Ok(Self::Tls),
            _ => Err(format!("unknown transport {s:?} (udp, tcp or tls)")),
        }
    }
}

/// TLS of a UAC or UAS with [`Transport::Tls`] (configurations from [`crate::tls`]).
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// For the connections we open (a UAC to its target; a UAS to the SBC's Contact, for a
    /// BYE after a failover): the CAs we trust, and the client certificate we present if any.
    pub client: Arc<rustls::ClientConfig>,
    /// The name sent as SNI when dialling, which the server's certificate must carry (a DNS
    /// name or an IP literal); `None`: the IP dialled.
    pub server_name: Option<String>,
    /// For the connections we accept (required by a UAS, and by a UAC with `tcp_listen`):
    /// our certificate, and whether clients must present one.
    pub server: Option<Arc<rustls::ServerConfig>>,
}

impl TlsSettings {
    /// Dialling only, with `client`, verifying the dialled IP (no server configuration).
    #[must_use]
    pub fn client(client: Arc<rustls::ClientConfig>) -> Self {
        Self {
            client,
            server_name: None,
            server: None,
        }
    }

    /// With `name` as SNI and the name to verify when dialling.
    #[must_use]
    pub fn with_server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// With `server` for the connections we accept.
    #[must_use]
    pub fn with_server(mut self, server: Arc<rustls::ServerConfig>) -> Self {
        self.server = Some(server);
        self
    }
}

/// Settings are equal when they share the same configurations (rustls's are not comparable).
impl PartialEq for TlsSettings {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.client, &other.client)
            && self.server_name == other.server_name
            && match (&self.server, &other.server) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
    }
}

/// Which side ends a call with BYE after the hold time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ByeFrom {
    /// The UAC sends the BYE; the UAS waits for it.
    #[default]
    Caller,
    /// The UAS sends the BYE; the UAC waits for it.
    Callee,
}

impl FromStr for ByeFrom {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "caller" | "uac" => Ok(Self::Caller),
            "callee" | "uas" => Ok(Self::Callee),
            _ => Err(format!("unknown side {s:?} (caller or callee)")),
        }
    }
}

/// RFC 3261 timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timers {
    /// T1, the RTT estimate: first retransmission interval; transactions time out at 64·T1.
    pub t1: Duration,
    /// T2: the cap of non-INVITE and 2xx retransmission intervals.
    pub t2: Duration,
}

impl Default for Timers {
    fn default() -> Self {
        Self {
            t1: Duration::from_millis(500),
            t2: Duration::from_secs(4),
        }
    }
}

/// What a [`Uac`] does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UacConfig {
    /// Where every request goes (INVITE, ACK, BYE): the SBC (or its virtual address) or a UAS.
    pub target: SocketAddr,
    /// Local address to bind (port 0: any free port). TCP binds its connection's source here.
    pub local: SocketAddr,
    /// UDP, TCP or TLS.
    pub transport: Transport,
    /// New calls per second, paced evenly (> 0).
    pub rate: f64,
    /// Calls in progress at most (ringing or established); new calls wait for a slot.
    pub max_concurrent: usize,
    /// Stop after this many calls ...
    pub calls: Option<u64>,
    /// ... or after starting calls for this long (whichever comes first; at least one must be
    /// set, or [`Uac::stop`] must be called).
    pub duration: Option<Duration>,
    /// Hold time: from the 200 to the BYE.
    pub hold: Duration,
    /// Who sends the BYE.
    pub bye_from: ByeFrom,
    /// RFC 3261 timers.
    pub timers: Timers,
    /// How long an INVITE may ring after a provisional response before the call fails with
    /// [`FailureReason::Timeout`].
    pub answer_timeout: Duration,
    /// With `bye_from = callee`: how long after the hold time the UAC still waits for the
    /// callee's BYE before failing the call with [`FailureReason::NoBye`].
    pub bye_wait: Duration,
    /// User part of the Request-URI and To.
    pub to_user: String,
    /// User part of From.
    pub from_user: String,
    /// TCP: listen on `local` and write that address in Via and Contact, and open the
    /// connection to the target from another (ephemeral) port, as SIPp does; a lost connection
    /// is opened again only when there is something to send. Without it (the default), the
    /// Contact is the connection's own address, re-established at once when lost.
    #[serde(default)]
    pub tcp_listen: bool,
    /// TLS (required with [`Transport::Tls`]): the client configuration and server name for
    /// the connection to the target; the server configuration with `tcp_listen`. A
    /// connection TLS refuses fails the calls that needed it with [`FailureReason::Tls`].
    #[serde(skip)]
    pub tls: Option<TlsSettings>,
}

impl UacConfig {
    /// Defaults toward `target`: from 127.0.0.1 (any port), UDP, 10 calls/s, 100 concurrent,
    /// 10 calls, 1 s hold, BYE from the caller, T1 500 ms, 32 s answer timeout and BYE wait.
    #[must_use]
    pub fn new(target: SocketAddr) -> Self {
        Self {
            target,
            local: SocketAddr::from(([127, 0, 0, 1], 0)),
            transport: Transport::Udp,
            rate: 10.0,
            max_concurrent: 100,
            calls: Some(10),
            duration: None,
            hold: Duration::from_secs(1),
            bye_from: ByeFrom::Caller,
            timers: Timers::default(),
            answer_timeout: Duration::from_secs(32),
            bye_wait: Duration::from_secs(32),
            to_user: "service".into(),
            from_user: "lab".into(),
            tcp_listen: false,
            tls: None,
        }
    }
}

/// What a [`Uas`] does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UasConfig {
    /// Address to listen on (port 0: any free port, see [`Uas::local_addr`]).
    pub local: SocketAddr,
    /// UDP, TCP or TLS.
    pub transport: Transport,
    /// Time between 180 Ringing and the final response; 0 sends no 180.
    pub ring: Duration,
    /// The final response: 200 answers the call, anything else (e.g. 486) rejects it.
    pub answer_code: u16,
    /// Hold time: from the ACK to the BYE (with `bye_from = callee`), or how long to expect the
    /// caller's BYE (plus `bye_wait`).
    pub hold: Duration,
    /// Who sends the BYE.
    pub bye_from: ByeFrom,
    /// RFC 3261 timers.
    pub timers: Timers,
    /// With `bye_from = caller`: how long after the hold time the UAS still waits for the BYE
    /// before failing the call with [`FailureReason::NoBye`].
    pub bye_wait: Duration,
    /// [`Uas::wait`] returns once this many calls have ended ...
    pub calls: Option<u64>,
    /// ... or after this long (whichever comes first; neither: never, use [`Uas::stop`]).
    pub duration: Option<Duration>,
    /// TLS (required with [`Transport::Tls`]): the server configuration of the listener
    /// (with a client CA: callers must present a certificate), and the client configuration
    /// and server name for a connection the UAS opens to the SBC's Contact.
    #[serde(skip)]
    pub tls: Option<TlsSettings>,
}

impl UasConfig {
    /// Defaults on `local`: UDP, 180 then 200 after 100 ms, 0 s hold, BYE expected from the
    /// caller within 32 s, no end condition.
    #[must_use]
    pub fn new(local: SocketAddr) -> Self {
        Self {
            local,
            transport: Transport::Udp,
            ring: Duration::from_millis(100),
            answer_code: 200,
            hold: Duration::ZERO,
            bye_from: ByeFrom::Caller,
            timers: Timers::default(),
            bye_wait: Duration::from_secs(32),
            calls: None,
            duration: None,
            tls: None,
        }
    }
}

/// A running UAC. Dropping it stops everything it started (calls in progress are abandoned).
pub struct Uac {
    ep: Arc<Endpoint>,
    stop: watch::Sender<bool>,
    release: watch::Sender<bool>,
    done: watch::Receiver<bool>,
}

impl Uac {
    /// Binds and starts placing calls.
    ///
    /// # Errors
    /// If the socket cannot be bound (or, over TCP or TLS, the target does not accept a TCP
    /// connection), the rate is not positive, or TLS lacks its settings. A TLS handshake
    /// refused is no error here: the calls fail with [`FailureReason::Tls`].
    pub async fn start(cfg: UacConfig) -> io::Result<Self> {
        Self::start_inner(cfg, None).await
    }

    /// As [`Uac::start`], each call's INVITE carrying the SDP of its caller endpoint in
    /// `media` (in plan order) and reporting the address the 200's SDP gives it; calls beyond
    /// the plan's carry an SDP without media of ours.
    ///
    /// # Errors
    /// As [`Uac::start`].
    pub async fn start_with_media(cfg: UacConfig, media: Arc<MediaPlan>) -> io::Result<Self> {
        Self::start_inner(cfg, Some(media)).await
    }

    async fn start_inner(cfg: UacConfig, media: Option<Arc<MediaPlan>>) -> io::Result<Self> {
        if !(cfg.rate > 0.0 && cfg.rate.is_finite()) || cfg.max_concurrent == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "rate must be > 0 and max_concurrent >= 1",
            ));
        }
        let stats = Arc::new(Stats::new("uac"));
        let ep = Endpoint::uac(
            cfg.transport,
            cfg.local,
            cfg.target,
            cfg.tcp_listen,
            cfg.tls.as_ref(),
            stats,
        )
        .await?;
        let (stop, mut stop_rx) = watch::channel(false);
        let (release, release_rx) = watch::channel(false);
        let (done_tx, done) = watch::channel(false);
        let cfg = Arc::new(cfg);
        let ep2 = ep.clone();
        ep.spawn(async move {
            let ep = ep2;
            let max = u32::try_from(cfg.max_concurrent.min(1 << 20)).unwrap_or(1 << 20);
            let slots = Arc::new(Semaphore::new(max as usize));
            let interval = Duration::from_secs_f64(1.0 / cfg.rate);
            let start = Instant::now();
            let end = cfg.duration.map(|d| start + d);
            let mut next = start;
            let mut n = 0u64;
            loop {
                if cfg.calls.is_some_and(|c| n >= c) || end.is_some_and(|e| next >= e) {
                    break;
                }
                if *stop_rx.borrow_and_update() {
                    break;
                }
                tokio::select! {
                    () = tokio::time::sleep_until(next) => {}
                    _ = stop_rx.changed() => break,
                }
                let permit = tokio::select! {
                    p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
                    _ = stop_rx.changed() => break,
                };
                n += 1;
                ep.spawn(call::uac_call(
                    call::UacCall {
                        ep: ep.clone(),
                        cfg: cfg.clone(),
                        media: media.clone(),
                        release: release_rx.clone(),
                    },
                    n,
                    permit,
                ));
                next += interval;
                // Behind schedule (waiting for a slot): resume the pace from now, no burst.
                let now = Instant::now();
                if next + interval < now {
                    next = now;
                }
            }
            let _ = slots.acquire_many(max).await;
            let _ = done_tx.send(true);
        });
        Ok(Self {
            ep,
            stop,
            release,
            done,
        })
    }

    /// The live counters (share them with a progress display).
    #[must_use]
    pub fn stats(&self) -> Arc<Stats> {
        self.ep.stats.clone()
    }

    /// A copy of the counters now.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        self.ep.stats.snapshot()
    }

    /// The address in our Via and Contact.
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.ep.local()
    }

    /// Starts no more calls; calls in progress carry on to their BYE.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// Starts no more calls and ends the hold of every established call now: each sends its
    /// BYE (with `bye_from = caller`; a call still ringing hangs up as soon as it is
    /// answered). [`Uac::wait`] then returns once the BYEs are answered.
    pub fn hang_up(&self) {
        self.stop();
        let _ = self.release.send(true);
    }

    /// Whether the run is over: no more calls will start and every call has ended.
    #[must_use]
    pub fn is_done(&self) -> bool {
        *self.done.borrow()
    }

    /// Waits until no more calls will start (count, duration or [`Uac::stop`]) and every call
    /// has ended, and returns the final counters. Bound it with `tokio::time::timeout`.
    pub async fn wait(&self) -> Snapshot {
        let mut done = self.done.clone();
        let _ = done.wait_for(|d| *d).await;
        self.snapshot()
    }

    /// Stops everything (calls in progress are abandoned, uncounted) and waits until the
    /// socket is closed; returns the counters.
    pub async fn close(self) -> Snapshot {
        self.ep.close().await;
        self.snapshot()
    }
}

impl Drop for Uac {
    fn drop(&mut self) {
        self.ep.shutdown();
    }
}

/// A running UAS. Dropping it stops everything it started.
pub struct Uas {
    ep: Arc<Endpoint>,
    cfg: Arc<UasConfig>,
    started: Instant,
    stop: watch::Sender<bool>,
}

impl Uas {
    /// Binds and starts answering calls.
    ///
    /// # Errors
    /// If the socket cannot be bound, or TLS lacks its settings (a server configuration).
    pub async fn start(cfg: UasConfig) -> io::Result<Self> {
        Self::start_inner(cfg, None).await
    }

    /// As [`Uas::start`], answering each INVITE whose SDP names a call of `media` with the
    /// SDP of that call's callee endpoint, after reporting where the INVITE's SDP tells it to
    /// send; other INVITEs get an SDP without media of ours.
    ///
    /// # Errors
    /// As [`Uas::start`].
    pub async fn start_with_media(cfg: UasConfig, media: Arc<MediaPlan>) -> io::Result<Self> {
        Self::start_inner(cfg, Some(media)).await
    }

    async fn start_inner(cfg: UasConfig, media: Option<Arc<MediaPlan>>) -> io::Result<Self> {
        let stats = Arc::new(Stats::new("uas"));
        let (ep, mut new_calls) =
            Endpoint::uas(cfg.transport, cfg.local, cfg.tls.as_ref(), stats).await?;
        let cfg = Arc::new(cfg);
        let (ep2, cfg2) = (ep.clone(), cfg.clone());
        ep.spawn(async move {
            while let Some((call_id, rx)) = new_calls.recv().await {
                ep2.spawn(call::uas_call(
                    ep2.clone(),
                    cfg2.clone(),
                    media.clone(),
                    call_id,
                    rx,
                ));
            }
        });
        let (stop, _) = watch::channel(false);
        Ok(Self {
            ep,
            cfg,
            started: Instant::now(),
            stop,
        })
    }

    /// The live counters.
    #[must_use]
    pub fn stats(&self) -> Arc<Stats> {
        self.ep.stats.clone()
    }

    /// A copy of the counters now.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        self.ep.stats.snapshot()
    }

    /// The bound address (with the real port when configured with port 0).
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.ep.local()
    }

    /// Makes [`Uas::wait`] return now (the UAS keeps answering until dropped).
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// Waits until `calls` calls have ended, or `duration` has passed since the start, or
    /// [`Uas::stop`]; returns the counters then.
    pub async fn wait(&self) -> Snapshot {
        self.wait_for_calls(self.cfg.calls.unwrap_or(u64::MAX))
            .await
    }

    /// Waits until `n` calls have ended (completed, failed, rejected or cancelled), or the
    /// configured duration has passed, or [`Uas::stop`]. Polls every 10 ms.
    pub async fn wait_for_calls(&self, n: u64) -> Snapshot {
        let end = self.cfg.duration.map(|d| self.started + d);
        let mut stop = self.stop.subscribe();
        loop {
            if self.ep.stats.ended() >= n
                || end.is_some_and(|e| Instant::now() >= e)
                || *stop.borrow_and_update()
            {
                return self.snapshot();
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(10)) => {}
                _ = stop.changed() => {}
            }
        }
    }
}

impl Uas {
    /// Stops answering and waits until the socket (or listener) is closed, so that the
    /// address can be bound again at once; returns the counters.
    pub async fn close(self) -> Snapshot {
        self.ep.close().await;
        self.snapshot()
    }
}

impl Drop for Uas {
    fn drop(&mut self) {
        self.ep.shutdown();
    }
}
