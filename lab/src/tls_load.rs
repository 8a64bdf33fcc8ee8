//! A TLS handshake load driver: `sbc-lab tls-handshakes`.
//!
//! N connections at once in a closed loop toward one TLS listener (a SIP relay's TLS port):
//! each connects over TCP, completes a TLS handshake (rustls client, `ring` provider, the
//! server's certificate verified against the given CA and name), optionally sends one SIP
//! `OPTIONS` and waits for any response, closes (close_notify, then FIN), and starts over, until
//! the duration is over. The report counts handshakes per second, failures by reason and
//! latency percentiles (TCP connect, handshake, OPTIONS, the whole connection).
//!
//! Every handshake is a full one unless `resume` is set: the client keeps no session state, so
//! the figure is the server's full handshake cost (its signature and key exchange every time).
//! With `resume` it keeps session tickets (TLS 1.3) and session ids (TLS 1.2) in memory and
//! offers them; the report says how many handshakes were resumed.
//!
//! ```no_run
//! # async fn demo() -> Result<(), String> {
//! use std::time::Duration;
//! use sbc_lab::tls_load::{HandshakeLoad, LoadConfig};
//!
//! let mut cfg = LoadConfig::new("127.0.0.1:5061".parse().unwrap(), "sbc.lab", "ca.pem");
//! cfg.concurrency = 8;
//! cfg.duration = Duration::from_secs(5);
//! let report = HandshakeLoad::new(&cfg)?.run().await;
//! println!("{:.0} handshakes/s", report.handshakes_per_s);
//! # Ok(()) }
//! ```
//!
//! The split: [`Tally`] (what one connection's outcome adds to the counters, and the report
//! from them) and the message helpers are pure and unit-tested; [`HandshakeLoad::run`] is the
//! thin async shell that opens the connections.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::{ClientSessionMemoryCache, ClientSessionStore, Resumption};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, HandshakeKind, NamedGroup, RootCertStore};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::{timeout, Instant};
use tokio_rustls::TlsConnector;

/// At most this many latency samples are kept per connection slot (about 8 MB for the four
/// series of 16 slots); past it, outcomes are still counted but no longer sampled.
const MAX_SAMPLES_PER_SLOT: usize = 250_000;
/// The longest OPTIONS response header read before giving up on it.
const MAX_RESPONSE_BYTES: usize = 65_536;
/// How long a resuming client waits, after a TLS 1.3 handshake, for the server's session ticket
/// (sent after the handshake, so a connection closed at once would never see it).
const TICKET_WAIT: Duration = Duration::from_millis(200);
/// A connection slot pauses this long after a failure before its next connection, so that a
/// server that is down (every connect refused at once) is not hammered in a busy loop.
const FAILURE_PAUSE: Duration = Duration::from_millis(10);

/// Which TLS versions the client offers (the SBC's `tls-version` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsVersions {
    /// TLS 1.2 and 1.3 (the server picks; both relays here pick 1.3).
    #[default]
    Compatibility,
    /// TLS 1.2 only.
    Tlsv12,
    /// TLS 1.3 only.
    Tlsv13,
}

impl FromStr for TlsVersions {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "compatibility" => Ok(Self::Compatibility),
            "tlsv12" | "1.2" => Ok(Self::Tlsv12),
            "tlsv13" | "1.3" => Ok(Self::Tlsv13),
            _ => Err(format!(
                "unknown TLS version {s:?} (compatibility, tlsv12, tlsv13)"
            )),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// The TLS listener.
    pub target: SocketAddr,
    /// SNI, and the name the server's certificate must carry (a DNS name or an IP).
    pub server_name: String,
    /// PEM file of the CA certificates that verify the server.
    pub ca: PathBuf,
    /// A client certificate chain and its key (PEM), for a server that asks for one.
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Connections in flight at once.
    pub concurrency: usize,
    /// How long new connections are started; those in flight at the end are finished.
    pub duration: Duration,
    /// Offer session resumption (tickets, session ids); off: every handshake is a full one.
    pub resume: bool,
    /// Send one SIP OPTIONS on each connection and wait for a response before closing.
    pub options: bool,
    /// Limit of each step: TCP connect, TLS handshake, OPTIONS response.
    pub step_timeout: Duration,
    /// The versions offered.
    pub versions: TlsVersions,
}

impl LoadConfig {
    /// Full handshakes, 8 at once for 10 s, 5 s per step, no OPTIONS.
    pub fn new(target: SocketAddr, server_name: &str, ca: impl Into<PathBuf>) -> Self {
        Self {
            target,
            server_name: server_name.to_owned(),
            ca: ca.into(),
            client_cert: None,
            concurrency: 8,
            duration: Duration::from_secs(10),
            resume: false,
            options: false,
            step_timeout: Duration::from_secs(5),
            versions: TlsVersions::Compatibility,
        }
    }
}

/// Latency percentiles of one series, in ms (nearest rank).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Percentiles {
    /// Samples in the series.
    pub count: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest sample.
    pub max: f64,
}

impl Percentiles {
    /// Percentiles of samples in µs (sorted in place).
    pub fn of_micros(samples: &mut [u32]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let n = samples.len();
        let rank = |q: f64| {
            // nearest rank: the smallest sample with at least q of them at or below it
            let k = (q * n as f64).ceil() as usize;
            f64::from(samples[k.clamp(1, n) - 1]) / 1000.0
        };
        let sum: u64 = samples.iter().map(|&s| u64::from(s)).sum();
        Self {
            count: n as u64,
            mean: sum as f64 / n as f64 / 1000.0,
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            max: f64::from(samples[n - 1]) / 1000.0,
        }
    }
}

/// What one completed connection measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Completed {
    /// TCP connect.
    pub connect: Duration,
    /// TLS handshake, from the TCP connection to the client's Finished.
    pub handshake: Duration,
    /// OPTIONS sent → response header read, and the response's status code.
    pub options: Option<(Duration, u16)>,
    /// Connect to close, everything included.
    pub total: Duration,
    /// Full, full with a HelloRetryRequest, or resumed.
    pub kind: HandshakeKind,
    /// Protocol version, cipher suite and key exchange group, e.g.
    /// `TLSv1_3 TLS13_AES_256_GCM_SHA384 X25519`.
    pub negotiated: String,
}

/// The counters of a run (or of one connection slot: tallies merge).
#[derive(Debug, Default)]
pub struct Tally {
    attempted: u64,
    completed: u64,
    full: u64,
    hello_retry: u64,
    resumed: u64,
    failures: BTreeMap<String, u64>,
    negotiated: BTreeMap<String, u64>,
    options_status: BTreeMap<u16, u64>,
    connect_us: Vec<u32>,
    handshake_us: Vec<u32>,
    options_us: Vec<u32>,
    total_us: Vec<u32>,
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

impl Tally {
    /// A connection that completed its handshake (and its OPTIONS, when asked).
    pub fn completed(&mut self, c: &Completed) {
        self.attempted += 1;
        self.completed += 1;
        match c.kind {
            HandshakeKind::Full => self.full += 1,
            HandshakeKind::FullWithHelloRetryRequest => self.hello_retry += 1,
            HandshakeKind::Resumed => self.resumed += 1,
        }
        *self.negotiated.entry(c.negotiated.clone()).or_default() += 1;
        if let Some((_, code)) = c.options {
            *self.options_status.entry(code).or_default() += 1;
        }
        if self.total_us.len() < MAX_SAMPLES_PER_SLOT {
            self.connect_us.push(micros(c.connect));
            self.handshake_us.push(micros(c.handshake));
            self.total_us.push(micros(c.total));
            if let Some((d, _)) = c.options {
                self.options_us.push(micros(d));
            }
        }
    }

    /// A connection that failed, with the reason ([`failure_reason`]).
    pub fn failed(&mut self, reason: String) {
        self.attempted += 1;
        *self.failures.entry(reason).or_default() += 1;
    }

    /// Adds another slot's counters.
    pub fn merge(&mut self, mut other: Self) {
        self.attempted += other.attempted;
        self.completed += other.completed;
        self.full += other.full;
        self.hello_retry += other.hello_retry;
        self.resumed += other.resumed;
        for (k, v) in other.failures {
            *self.failures.entry(k).or_default() += v;
        }
        for (k, v) in other.negotiated {
            *self.negotiated.entry(k).or_default() += v;
        }
        for (k, v) in other.options_status {
            *self.options_status.entry(k).or_default() += v;
        }
        self.connect_us.append(&mut other.connect_us);
        self.handshake_us.append(&mut other.handshake_us);
        self.options_us.append(&mut other.options_us);
        self.total_us.append(&mut other.total_us);
    }

    /// The report of a run that took `elapsed` (first connection to the last one's end).
    pub fn report(mut self, cfg: &LoadConfig, elapsed: Duration) -> Report {
        let secs = elapsed.as_secs_f64();
        Report {
            target: cfg.target.to_string(),
            server_name: cfg.server_name.clone(),
            versions: cfg.versions,
            concurrency: cfg.concurrency,
            duration_s: cfg.duration.as_secs_f64(),
            elapsed_s: secs,
            resume: cfg.resume,
            options: cfg.options,
            attempted: self.attempted,
            completed: self.completed,
            failed: self.attempted - self.completed,
            handshakes_per_s: if secs > 0.0 {
                self.completed as f64 / secs
            } else {
                0.0
            },
            full: self.full,
            hello_retry: self.hello_retry,
            resumed: self.resumed,
            failures: self.failures,
            negotiated: self.negotiated,
            options_status: self
                .options_status
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            connect_ms: Percentiles::of_micros(&mut self.connect_us),
            handshake_ms: Percentiles::of_micros(&mut self.handshake_us),
            options_ms: cfg
                .options
                .then(|| Percentiles::of_micros(&mut self.options_us)),
            total_ms: Percentiles::of_micros(&mut self.total_us),
        }
    }
}

/// The result of a run (`sbc-lab tls-handshakes` prints it as JSON).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The TLS listener.
    pub target: String,
    /// SNI and verified name.
    pub server_name: String,
    /// Versions offered.
    pub versions: TlsVersions,
    /// Connections in flight at once.
    pub concurrency: usize,
    /// How long new connections were started.
    pub duration_s: f64,
    /// First connection to the end of the last one.
    pub elapsed_s: f64,
    /// Whether resumption was offered.
    pub resume: bool,
    /// Whether each connection carried one OPTIONS.
    pub options: bool,
    /// Connections started.
    pub attempted: u64,
    /// Connections that completed (handshake, and OPTIONS when asked).
    pub completed: u64,
    /// attempted − completed.
    pub failed: u64,
    /// completed ÷ elapsed_s.
    pub handshakes_per_s: f64,
    /// Completed with a full handshake.
    pub full: u64,
    /// Completed with a full handshake after a HelloRetryRequest (the server refused the
    /// offered key share: an extra round trip).
    pub hello_retry: u64,
    /// Completed with a resumed handshake.
    pub resumed: u64,
    /// Failed connections by reason.
    pub failures: BTreeMap<String, u64>,
    /// Completed connections by protocol version, cipher suite and key exchange group.
    pub negotiated: BTreeMap<String, u64>,
    /// OPTIONS responses by status code.
    pub options_status: BTreeMap<String, u64>,
    /// TCP connect.
    pub connect_ms: Percentiles,
    /// TLS handshake after the TCP connection.
    pub handshake_ms: Percentiles,
    /// OPTIONS → response, when asked.
    pub options_ms: Option<Percentiles>,
    /// The whole connection, connect to close.
    pub total_ms: Percentiles,
}

impl Report {
    /// A human summary (a few lines).
    pub fn summary(&self) -> String {
        let mut s = format!(
            "tls-handshakes {} ({}): {} completed, {} failed in {:.2} s: {:.0} handshakes/s at concurrency {}\n  full {}, hello-retry {}, resumed {}\n  handshake ms p50 {:.2} p90 {:.2} p99 {:.2} max {:.2}; connect ms p50 {:.2} p99 {:.2}\n",
            self.target,
            self.server_name,
            self.completed,
            self.failed,
            self.elapsed_s,
            self.handshakes_per_s,
            self.concurrency,
            self.full,
            self.hello_retry,
            self.resumed,
            self.handshake_ms.p50,
            self.handshake_ms.p90,
            self.handshake_ms.p99,
            self.handshake_ms.max,
            self.connect_ms.p50,
            self.connect_ms.p99,
        );
        for (k, v) in &self.negotiated {
            s.push_str(&format!("  negotiated {k}: {v}\n"));
        }
        if let Some(o) = &self.options_ms {
            s.push_str(&format!(
                "  OPTIONS ms p50 {:.2} p99 {:.2}; statuses {:?}\n",
                o.p50, o.p99, self.options_status
            ));
        }
        for (k, v) in &self.failures {
            s.push_str(&format!("  failed: {k}: {v}\n"));
        }
        s
    }
}

/// The step a connection failed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// TCP connect.
    Connect,
    /// TLS handshake.
    Handshake,
    /// OPTIONS sent, response awaited.
    Options,
    /// close_notify and FIN.
    Close,
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::Handshake => "handshake",
            Self::Options => "options",
            Self::Close => "close",
        }
    }
}

/// A failure's reason, few distinct values per run: the step, then the TLS error (`invalid peer
/// certificate: ...`, `received fatal alert: ...`) or the I/O error kind, or `timeout`.
pub fn failure_reason(step: Step, err: Option<&io::Error>) -> String {
    let Some(e) = err else {
        return format!("{}: timeout", step.name());
    };
    if let Some(tls) = e.get_ref().and_then(|r| r.downcast_ref::<rustls::Error>()) {
        return format!("{}: {tls}", step.name());
    }
    let what = match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        io::ErrorKind::ConnectionReset => "connection reset".to_owned(),
        io::ErrorKind::UnexpectedEof => "closed by the peer".to_owned(),
        io::ErrorKind::AddrNotAvailable => "no local address (ephemeral ports?)".to_owned(),
        k => format!("{k:?}"),
    };
    format!("{}: {what}", step.name())
}

/// One SIP OPTIONS to the relay itself (no user part), as a keep-alive probe would send.
pub fn options_request(target: SocketAddr, local: SocketAddr, seq: u64) -> String {
    format!(
        "OPTIONS sip:{target};transport=tls SIP/2.0\r\n\
         Via: SIP/2.0/TLS {local};branch=z9hG4bK-tlsload-{seq}\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:tls-load@{local};transport=tls>;tag=tl{seq}\r\n\
         To: <sip:{target};transport=tls>\r\n\
         Call-ID: tls-load-{seq}@{local}\r\n\
         CSeq: 1 OPTIONS\r\n\
         Contact: <sip:tls-load@{local};transport=tls>\r\n\
         Content-Length: 0\r\n\r\n"
    )
}

/// The status code of a SIP response once its header is complete: `Ok(None)` while more is
/// needed, `Err` when what came is not a SIP response.
pub fn response_status(buf: &[u8]) -> Result<Option<u16>, String> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = String::from_utf8_lossy(&buf[..end]);
    let line = head.lines().next().unwrap_or_default();
    let mut parts = line.split(' ');
    match (
        parts.next(),
        parts.next().and_then(|c| c.parse::<u16>().ok()),
    ) {
        (Some("SIP/2.0"), Some(code)) if (100..700).contains(&code) => {
            if code < 200 {
                // a provisional response: wait for the final one behind it
                return response_status(&buf[end + 4..]);
            }
            Ok(Some(code))
        }
        _ => Err(format!("not a SIP response: {line:?}")),
    }
}

/// A session store that says when a TLS 1.3 ticket arrives (the resuming client waits for one
/// before closing, so the next connection has one to offer).
#[derive(Debug)]
struct TicketStore {
    inner: ClientSessionMemoryCache,
    tickets: AtomicU64,
    arrived: Notify,
}

impl ClientSessionStore for TicketStore {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.inner.set_kx_hint(server_name, group);
    }
    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.inner.kx_hint(server_name)
    }
    fn set_tls12_session(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls12ClientSessionValue,
    ) {
        self.inner.set_tls12_session(server_name, value);
    }
    fn tls12_session(
        &self,
        server_name: &ServerName<'_>,
    ) -> Option<rustls::client::Tls12ClientSessionValue> {
        self.inner.tls12_session(server_name)
    }
    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.inner.remove_tls12_session(server_name);
    }
    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls13ClientSessionValue,
    ) {
        self.inner.insert_tls13_ticket(server_name, value);
        self.tickets.fetch_add(1, Ordering::Relaxed);
        self.arrived.notify_waiters();
    }
    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<rustls::client::Tls13ClientSessionValue> {
        self.inner.take_tls13_ticket(server_name)
    }
}

/// A prepared run: the client configuration built, the files read.
pub struct HandshakeLoad {
    cfg: LoadConfig,
    connector: TlsConnector,
    server_name: ServerName<'static>,
    tickets: Option<Arc<TicketStore>>,
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in it", path.display()));
    }
    Ok(certs)
}

impl HandshakeLoad {
    /// Reads the CA (and client certificate) files and builds the client.
    ///
    /// # Errors
    /// A file that cannot be read or holds no usable certificate or key, a bad server name, a
    /// zero concurrency.
    pub fn new(cfg: &LoadConfig) -> Result<Self, String> {
        if cfg.concurrency == 0 {
            return Err("concurrency must be at least 1".into());
        }
        let server_name = ServerName::try_from(cfg.server_name.clone())
            .map_err(|e| format!("bad server name {:?}: {e}", cfg.server_name))?;
        let mut roots = RootCertStore::empty();
        for c in read_certs(&cfg.ca)? {
            roots
                .add(c)
                .map_err(|e| format!("{}: {e}", cfg.ca.display()))?;
        }
        let versions: &[&rustls::SupportedProtocolVersion] = match cfg.versions {
            TlsVersions::Compatibility => rustls::DEFAULT_VERSIONS,
            TlsVersions::Tlsv12 => &[&rustls::version::TLS12],
            TlsVersions::Tlsv13 => &[&rustls::version::TLS13],
        };
        let builder =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(versions)
                .map_err(|e| format!("TLS versions: {e}"))?
                .with_root_certificates(roots);
        let mut config = match &cfg.client_cert {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = read_certs(cert)?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| format!("{}: {e}", key.display()))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("client certificate {}: {e}", cert.display()))?
            }
        };
        let tickets = cfg.resume.then(|| {
            Arc::new(TicketStore {
                inner: ClientSessionMemoryCache::new(cfg.concurrency.max(1) * 4),
                tickets: AtomicU64::new(0),
                arrived: Notify::new(),
            })
        });
        config.resumption = match &tickets {
            Some(store) => Resumption::store(store.clone()),
            None => Resumption::disabled(),
        };
        Ok(Self {
            cfg: cfg.clone(),
            connector: TlsConnector::from(Arc::new(config)),
            server_name,
            tickets,
        })
    }

    /// Runs the closed loop for the configured duration and returns the report.
    pub async fn run(self) -> Report {
        let this = Arc::new(self);
        let start = Instant::now();
        let deadline = start + this.cfg.duration;
        let seq = Arc::new(AtomicU64::new(0));
        let mut slots = Vec::with_capacity(this.cfg.concurrency);
        for _ in 0..this.cfg.concurrency {
            let this = this.clone();
            let seq = seq.clone();
            slots.push(tokio::spawn(async move {
                let mut tally = Tally::default();
                while Instant::now() < deadline {
                    let n = seq.fetch_add(1, Ordering::Relaxed);
                    match this.one(n).await {
                        Ok(c) => tally.completed(&c),
                        Err(reason) => {
                            tally.failed(reason);
                            tokio::time::sleep(FAILURE_PAUSE).await;
                        }
                    }
                }
                tally
            }));
        }
        let mut tally = Tally::default();
        for slot in slots {
            match slot.await {
                Ok(t) => tally.merge(t),
                Err(e) => tally.failed(format!("driver task: {e}")),
            }
        }
        tally.report(&this.cfg, start.elapsed())
    }

    /// One connection: connect, handshake, OPTIONS (when asked), close.
    async fn one(&self, seq: u64) -> Result<Completed, String> {
        let limit = self.cfg.step_timeout;
        let t0 = Instant::now();
        let tcp = match timeout(limit, TcpStream::connect(self.cfg.target)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(failure_reason(Step::Connect, Some(&e))),
            Err(_) => return Err(failure_reason(Step::Connect, None)),
        };
        let _ = tcp.set_nodelay(true);
        let local = tcp.local_addr().unwrap_or(self.cfg.target);
        let t1 = Instant::now();
        let mut tls =
            match timeout(limit, self.connector.connect(self.server_name.clone(), tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return Err(failure_reason(Step::Handshake, Some(&e))),
                Err(_) => return Err(failure_reason(Step::Handshake, None)),
            };
        let t2 = Instant::now();
        let (kind, negotiated, tls13) = {
            let (_, conn) = tls.get_ref();
            let version = conn.protocol_version();
            (
                conn.handshake_kind().unwrap_or(HandshakeKind::Full),
                format!(
                    "{} {} {}",
                    version.map_or_else(|| "?".to_owned(), |v| format!("{v:?}")),
                    conn.negotiated_cipher_suite()
                        .map_or_else(|| "?".to_owned(), |s| format!("{:?}", s.suite())),
                    conn.negotiated_key_exchange_group()
                        .map_or_else(|| "-".to_owned(), |g| format!("{:?}", g.name())),
                ),
                version == Some(rustls::ProtocolVersion::TLSv1_3),
            )
        };
        let options = if self.cfg.options {
            let req = options_request(self.cfg.target, local, seq);
            let exchange = async {
                tls.write_all(req.as_bytes()).await?;
                tls.flush().await?;
                let mut buf = Vec::with_capacity(1024);
                let mut chunk = [0u8; 4096];
                loop {
                    let n = tls.read(&mut chunk).await?;
                    if n == 0 {
                        return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    match response_status(&buf) {
                        Ok(Some(code)) => return Ok(code),
                        Ok(None) if buf.len() < MAX_RESPONSE_BYTES => {}
                        Ok(None) => {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                "response header too long",
                            ))
                        }
                        Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
                    }
                }
            };
            match timeout(limit, exchange).await {
                Ok(Ok(code)) => Some((t2.elapsed(), code)),
                Ok(Err(e)) => return Err(failure_reason(Step::Options, Some(&e))),
                Err(_) => return Err(failure_reason(Step::Options, None)),
            }
        } else {
            None
        };
        if let (Some(store), true, None) = (&self.tickets, tls13, options) {
            // TLS 1.3 tickets come after the handshake: read (nothing is expected) until one
            // has arrived, for at most TICKET_WAIT.
            let before = store.tickets.load(Ordering::Relaxed);
            let arrived = store.arrived.notified();
            if store.tickets.load(Ordering::Relaxed) == before {
                let mut byte = [0u8; 1];
                let _ = timeout(TICKET_WAIT, async {
                    tokio::select! {
                        _ = arrived => {}
                        _ = tls.read(&mut byte) => {}
                    }
                })
                .await;
            }
        }
        // close_notify, then FIN; the server's close is not awaited.
        match timeout(limit, tls.shutdown()).await {
            Ok(Ok(())) => {}
            // A server that closed first (after its response) is not a failure.
            Ok(Err(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotConnected
                        | io::ErrorKind::BrokenPipe
                        | io::ErrorKind::ConnectionReset
                ) => {}
            Ok(Err(e)) => return Err(failure_reason(Step::Close, Some(&e))),
            Err(_) => return Err(failure_reason(Step::Close, None)),
        }
        Ok(Completed {
            connect: t1 - t0,
            handshake: t2 - t1,
            options,
            total: t0.elapsed(),
            kind,
            negotiated,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn done(handshake_ms: u64, kind: HandshakeKind) -> Completed {
        Completed {
            connect: ms(1),
            handshake: ms(handshake_ms),
            options: None,
            total: ms(handshake_ms + 1),
            kind,
            negotiated: "TLSv1_3 TLS13_AES_256_GCM_SHA384 X25519".into(),
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        v.reverse();
        let p = Percentiles::of_micros(&mut v);
        assert_eq!(p.count, 100);
        assert_eq!(p.p50, 50.0);
        assert_eq!(p.p90, 90.0);
        assert_eq!(p.p99, 99.0);
        assert_eq!(p.max, 100.0);
        assert!((p.mean - 50.5).abs() < 1e-9);
        let one = Percentiles::of_micros(&mut [2500]);
        assert_eq!((one.p50, one.p99, one.max), (2.5, 2.5, 2.5));
        assert_eq!(Percentiles::of_micros(&mut []), Percentiles::default());
    }

    #[test]
    fn tallies_merge_into_the_report() {
        let cfg = LoadConfig::new("127.0.0.1:5061".parse().unwrap(), "sbc.lab", "ca.pem");
        let mut a = Tally::default();
        a.completed(&done(2, HandshakeKind::Full));
        a.completed(&done(4, HandshakeKind::Full));
        a.failed(failure_reason(Step::Handshake, None));
        let mut b = Tally::default();
        b.completed(&done(6, HandshakeKind::Resumed));
        b.failed(failure_reason(Step::Handshake, None));
        b.failed(failure_reason(
            Step::Connect,
            Some(&io::Error::from(io::ErrorKind::ConnectionRefused)),
        ));
        a.merge(b);
        let r = a.report(&cfg, Duration::from_secs(2));
        assert_eq!((r.attempted, r.completed, r.failed), (6, 3, 3));
        assert_eq!((r.full, r.resumed, r.hello_retry), (2, 1, 0));
        assert_eq!(r.handshakes_per_s, 1.5);
        assert_eq!(r.failures["handshake: timeout"], 2);
        assert_eq!(r.failures["connect: connection refused"], 1);
        assert_eq!(r.negotiated["TLSv1_3 TLS13_AES_256_GCM_SHA384 X25519"], 3);
        assert_eq!(r.handshake_ms.p50, 4.0);
        assert_eq!(r.handshake_ms.max, 6.0);
        assert!(r.options_ms.is_none());
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["handshakes_per_s"], 1.5);
        assert_eq!(json["versions"], "compatibility");
    }

    #[test]
    fn options_statuses_are_counted() {
        let mut cfg = LoadConfig::new("127.0.0.1:5061".parse().unwrap(), "sbc.lab", "ca.pem");
        cfg.options = true;
        let mut t = Tally::default();
        let mut c = done(3, HandshakeKind::Full);
        c.options = Some((ms(1), 200));
        t.completed(&c);
        c.options = Some((ms(3), 404));
        t.completed(&c);
        let r = t.report(&cfg, Duration::from_secs(1));
        assert_eq!(r.options_status["200"], 1);
        assert_eq!(r.options_status["404"], 1);
        assert_eq!(r.options_ms.unwrap().max, 3.0);
    }

    #[test]
    fn tls_errors_name_the_reason() {
        let e = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let r = failure_reason(Step::Handshake, Some(&e));
        assert!(r.starts_with("handshake: invalid peer certificate"), "{r}");
        assert!(r.contains("UnknownIssuer"), "{r}");
        let eof = io::Error::from(io::ErrorKind::UnexpectedEof);
        assert_eq!(
            failure_reason(Step::Options, Some(&eof)),
            "options: closed by the peer"
        );
    }

    #[test]
    fn sip_responses_are_read_to_the_final_one() {
        assert_eq!(response_status(b"SIP/2.0 200 OK\r\nVia: x\r\n"), Ok(None));
        assert_eq!(
            response_status(b"SIP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n"),
            Ok(Some(200))
        );
        let both = b"SIP/2.0 100 Trying\r\n\r\nSIP/2.0 404 Not Found\r\n\r\n";
        assert_eq!(response_status(both), Ok(Some(404)));
        assert_eq!(response_status(b"SIP/2.0 100 Trying\r\n\r\n"), Ok(None));
        assert!(response_status(b"HTTP/1.1 400 Bad\r\n\r\n").is_err());
    }

    #[test]
    fn the_options_request_is_a_complete_sip_request() {
        let t: SocketAddr = "127.0.0.1:5061".parse().unwrap();
        let l: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let req = options_request(t, l, 7);
        assert!(req.starts_with("OPTIONS sip:127.0.0.1:5061;transport=tls SIP/2.0\r\n"));
        assert!(req.contains("Via: SIP/2.0/TLS 127.0.0.1:40000;branch=z9hG4bK-tlsload-7\r\n"));
        assert!(req.ends_with("Content-Length: 0\r\n\r\n"));
        assert_eq!(req.matches("\r\n\r\n").count(), 1);
    }

    #[test]
    fn versions_parse() {
        assert_eq!("tlsv13".parse(), Ok(TlsVersions::Tlsv13));
        assert_eq!("Compatibility".parse(), Ok(TlsVersions::Compatibility));
        assert!("sslv3".parse::<TlsVersions>().is_err());
    }

    #[test]
    fn a_missing_ca_file_is_a_clear_error() {
        let cfg = LoadConfig::new(
            "127.0.0.1:5061".parse().unwrap(),
            "sbc.lab",
            "/nonexistent/ca.pem",
        );
        let err = HandshakeLoad::new(&cfg).err().unwrap();
        assert!(err.starts_with("/nonexistent/ca.pem"), "{err}");
        let mut zero = cfg;
        zero.concurrency = 0;
        assert!(HandshakeLoad::new(&zero).is_err());
    }
    /// A rustls server on loopback with a self-signed certificate for `sbc.lab`: answers one
    /// SIP request per connection with 200 when `sip`, else reads to the end.
    struct Server {
        addr: SocketAddr,
        dir: PathBuf,
        task: tokio::task::JoinHandle<()>,
    }

    impl Drop for Server {
        fn drop(&mut self) {
            self.task.abort();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    async fn server(tag: &str) -> Server {
        use rustls::pki_types::PrivatePkcs8KeyDer;
        let ck = rcgen::generate_simple_self_signed(vec!["sbc.lab".to_owned()]).unwrap();
        let dir = std::env::temp_dir().join(format!("tls-load-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.pem"), ck.cert.pem()).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()));
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![ck.cert.der().clone()], key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 2048];
                    while let Ok(n) = tls.read(&mut chunk).await {
                        if n == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            let _ = tls
                                .write_all(b"SIP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n")
                                .await;
                            buf.clear();
                        }
                    }
                });
            }
        });
        Server { addr, dir, task }
    }

    fn load(s: &Server, name: &str) -> LoadConfig {
        let mut cfg = LoadConfig::new(s.addr, name, s.dir.join("ca.pem"));
        cfg.concurrency = 2;
        cfg.duration = ms(300);
        cfg
    }

    #[tokio::test]
    async fn full_handshakes_against_a_rustls_server() {
        let s = server("full").await;
        let r = HandshakeLoad::new(&load(&s, "sbc.lab"))
            .unwrap()
            .run()
            .await;
        assert!(r.completed > 0, "{r:?}");
        assert_eq!(r.failed, 0, "{:?}", r.failures);
        assert_eq!((r.full, r.resumed), (r.completed, 0));
        assert!(
            r.negotiated.keys().all(|k| k.starts_with("TLSv1_3 ")),
            "{r:?}"
        );

        let mut cfg = load(&s, "sbc.lab");
        cfg.options = true;
        cfg.versions = TlsVersions::Tlsv12;
        let r = HandshakeLoad::new(&cfg).unwrap().run().await;
        assert!(r.completed > 0);
        assert_eq!(r.failed, 0, "{:?}", r.failures);
        assert_eq!(r.options_status.get("200"), Some(&r.completed));
        assert!(
            r.negotiated.keys().all(|k| k.starts_with("TLSv1_2 ")),
            "{r:?}"
        );
    }

    #[tokio::test]
    async fn resumption_is_offered_only_when_asked() {
        let s = server("resume").await;
        let mut cfg = load(&s, "sbc.lab");
        cfg.resume = true;
        let r = HandshakeLoad::new(&cfg).unwrap().run().await;
        assert_eq!(r.failed, 0, "{:?}", r.failures);
        assert!(r.resumed > 0, "{r:?}");
    }

    #[tokio::test]
    async fn a_certificate_for_another_name_fails_every_handshake() {
        let s = server("name").await;
        let mut cfg = load(&s, "uas.lab");
        cfg.duration = ms(100);
        let r = HandshakeLoad::new(&cfg).unwrap().run().await;
        assert_eq!(r.completed, 0);
        assert!(r.failed > 0);
        assert!(
            r.failures.keys().all(|k| k.contains("not valid for name")),
            "{:?}",
            r.failures
        );
    }
}
