//! `sbc-lab`: the lab's SIP traffic generator on the command line.
//!
//! ```text
//! sbc-lab uas --local 127.0.0.1:5080 --ring 100ms --calls 100
//! sbc-lab uac 127.0.0.1:5060 --rate 50 --calls 100 --hold 30s --progress
//! sbc-lab chart lines run.csv -o run.svg --x t --panel "Calls/s=offered_cps,answered_cps"
//! sbc-lab rtp-load rtpengine 127.0.0.1:2223 --calls 200 --duration 10s
//! sbc-lab rtp-load sip 127.0.0.1:5060 --uas 127.0.0.1:5080 --calls 200 --duration 10s
//! sbc-lab tls-handshakes --target 127.0.0.1:5061 --ca ca.pem --server-name sbc.lab -c 8 -d 10s
//! sbc-lab tls-certs --out /tmp/lab-pki
//! sbc-lab uas -t tls --tls-ca /tmp/lab-pki/ca.pem --tls-cert /tmp/lab-pki/uas.pem \
//!     --tls-key /tmp/lab-pki/uas-key.pem --tls-client-ca /tmp/lab-pki/ca.pem
//! sbc-lab uac 127.0.0.1:5061 -t tls --tls-ca /tmp/lab-pki/ca.pem --tls-server-name sbc.lab
//! ```
//! Each prints a summary at the end (`--json`: the counters as one JSON object) and exits 0
//! only when no call failed (1 otherwise, 2 on a usage or bind error).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
// `sbc-lab chart`: the lab's chart module (the demo's too), from a CSV.
use sbc_lab::chart::csv as chart;
use sbc_lab::media::ng::{NgClient, NgOptions};
use sbc_lab::media::rtp::{self, CallEndpoints, MediaCall, RtpConfig, RtpReport};
use sbc_lab::media::sip::{SipCalls, SipMediaConfig};
use sbc_lab::media::{procstat, rtpengine};
use sbc_lab::tls;
use sbc_lab::traffic::{
    ByeFrom, Snapshot, Timers, TlsSettings, Transport, Uac, UacConfig, Uas, UasConfig,
};

#[derive(Parser)]
#[command(
    name = "sbc-lab",
    version,
    about = "SIP and RTP traffic generator of the SBC lab (UAC, UAS, RTP load)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Place calls toward TARGET at a steady rate.
    Uac(UacArgs),
    /// Answer calls.
    Uas(UasArgs),
    /// Draw an SVG chart of a benchmark's CSV (lab/bench): time series or grouped bars.
    Chart(ChartArgs),
    /// RTP load through a media relay: N calls, two RTP endpoints each, signalled over NG
    /// (rtpengine) or with SDP-carrying SIP calls through an SBC.
    RtpLoad(RtpLoadArgs),
    /// TLS handshakes per second against a TLS listener: N connections at once in a closed
    /// loop (connect, full handshake, optionally one OPTIONS, close); the report as JSON.
    TlsHandshakes(TlsHandshakesArgs),
    /// Write the lab's TLS certificates into --out: a CA (ca.pem); sbc, uas, uac (DNS
    /// NAME.lab and IP 127.0.0.1) and other (other.lab only) signed by it; an unrelated
    /// rogue-ca with rogue (uac.lab, 127.0.0.1). Keys are NAME-key.pem, mode 0600.
    TlsCerts(TlsCertsArgs),
}

#[derive(Args)]
struct TlsHandshakesArgs {
    /// The TLS listener (IP:PORT).
    #[arg(long)]
    target: SocketAddr,
    /// PEM file of the CA certificates that verify the server.
    #[arg(long)]
    ca: PathBuf,
    /// SNI and the name the server's certificate must carry.
    #[arg(long)]
    server_name: String,
    /// Connections in flight at once.
    #[arg(long, short = 'c', default_value_t = 8)]
    concurrency: usize,
    /// How long to start new connections: 10s, 500ms.
    #[arg(long, short = 'd', default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Offer session resumption (TLS 1.3 tickets, TLS 1.2 ids); default: full handshakes.
    #[arg(long)]
    resume: bool,
    /// Send one SIP OPTIONS per connection and wait for any final response.
    #[arg(long)]
    options: bool,
    /// Client certificate chain (PEM), for a server that asks for one (with --key).
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// compatibility (1.2 and 1.3), tlsv12 or tlsv13.
    #[arg(long, default_value = "compatibility")]
    tls_version: sbc_lab::tls_load::TlsVersions,
    /// Limit of each step (connect, handshake, OPTIONS).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    step_timeout: Duration,
}

async fn tls_handshakes(a: TlsHandshakesArgs) -> Result<ExitCode, String> {
    use sbc_lab::tls_load::{HandshakeLoad, LoadConfig};
    let mut cfg = LoadConfig::new(a.target, &a.server_name, a.ca);
    cfg.concurrency = a.concurrency;
    cfg.duration = a.duration;
    cfg.resume = a.resume;
    cfg.options = a.options;
    cfg.client_cert = a.cert.zip(a.key);
    cfg.versions = a.tls_version;
    cfg.step_timeout = a.step_timeout;
    let report = HandshakeLoad::new(&cfg)?.run().await;
    eprint!("{}", report.summary());
    let json = serde_json::to_string_pretty(&report).map_err(|e| format!("JSON: {e}"))?;
    println!("{json}");
    Ok(if report.failed == 0 && report.completed > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[derive(Args)]
struct TlsCertsArgs {
    /// The directory to write into (created if absent; existing files are replaced).
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args)]
struct RtpLoadArgs {
    #[command(subcommand)]
    relay: RtpRelay,
}

#[derive(Subcommand)]
enum RtpRelay {
    /// Anchor each call on rtpengine with NG offer/answer at NG (IP:PORT), then send RTP.
    Rtpengine {
        /// rtpengine's --listen-ng address.
        ng: SocketAddr,
        #[command(flatten)]
        common: RtpCommon,
    },
    /// Place SIP calls carrying the endpoints' SDP toward TARGET (the SBC's access address),
    /// answer them at --uas, learn the relay's ports from the SDP, then send RTP.
    Sip {
        /// Where the INVITEs go.
        target: SocketAddr,
        /// Where the UAS listens (the SBC's next hop).
        #[arg(long, default_value = "127.0.0.1:5080")]
        uas: SocketAddr,
        /// New calls per second while setting up.
        #[arg(long, default_value_t = 100.0)]
        rate: f64,
        /// How long the calls may take to be set up.
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        setup_timeout: Duration,
        #[command(flatten)]
        common: RtpCommon,
    },
}

#[derive(Args)]
struct RtpCommon {
    /// Concurrent calls.
    #[arg(long, short = 'n', default_value_t = 10)]
    calls: usize,
    /// How long every stream sends (20 ms packets).
    #[arg(long, short = 'd', default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Generator threads (0: one per 250 calls, at most 4).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// The RTP endpoints' address.
    #[arg(long, default_value = "127.0.0.1")]
    ip: std::net::IpAddr,
    /// Read this process's CPU time (/proc/PID/stat) just before and after the RTP phase,
    /// and its VmRSS: the relay's cost.
    #[arg(long)]
    watch_pid: Option<u32>,
    /// Clock ticks per second of /proc/PID/stat (`getconf CLK_TCK`).
    #[arg(long, default_value_t = 100)]
    clk_tck: u64,
    /// Print the calls with a gap of at least this many ms (a Markdown table on stderr).
    #[arg(long)]
    gaps: Option<f64>,
    /// Print the report as JSON on stdout (per call with --per-call).
    #[arg(long)]
    json: bool,
    /// With --json: every call's figures too.
    #[arg(long)]
    per_call: bool,
    /// Print key=value lines on stdout (for scripts).
    #[arg(long)]
    kv: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum ChartKind {
    /// Time series: --x is a numeric column; each panel draws its columns as lines.
    Lines,
    /// Grouped bars: --x is a category column, one bar per value of --group; each panel
    /// draws its first column.
    Bars,
}

#[derive(Args)]
struct ChartArgs {
    /// lines or bars.
    kind: ChartKind,
    /// The CSV (comma-separated, a header row; lines starting with # are skipped).
    csv: PathBuf,
    /// The SVG to write.
    #[arg(long, short = 'o')]
    out: PathBuf,
    /// The x column (numeric for lines, categories for bars).
    #[arg(long)]
    x: String,
    /// Label under the x axis (lines).
    #[arg(long, default_value = "")]
    x_label: String,
    /// bars: the column whose values are the bars of each cluster.
    #[arg(long)]
    group: Option<String>,
    /// A panel: TITLE=COL[,COL...][;unit=%][;ref=N]...[;max=N][;step][;height=N]; or, for
    /// lines, TITLE=COL;spans (a column of words, e.g. a role, as coloured spans). Repeat.
    #[arg(long, required = true)]
    panel: Vec<chart::PanelSpec>,
    /// lines: a vertical marker T:LABEL (T in x units). Repeat.
    #[arg(long)]
    marker: Vec<chart::MarkerSpec>,
    /// Chart title.
    #[arg(long, default_value = "")]
    title: String,
    /// Subtitle; \n starts a new line.
    #[arg(long, default_value = "")]
    subtitle: String,
}

fn chart(a: &ChartArgs) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(&a.csv)
        .map_err(|e| format!("cannot read {}: {e}", a.csv.display()))?;
    let table = chart::Table::parse(&text)?;
    let subtitle = a.subtitle.replace("\\n", "\n");
    let svg = match a.kind {
        ChartKind::Lines => chart::lines(
            &table, &a.x, &a.x_label, &a.panel, &a.marker, &a.title, &subtitle,
        )?,
        ChartKind::Bars => {
            let group = a.group.as_deref().ok_or("bars need --group COLUMN")?;
            chart::bars(&table, &a.x, group, &a.panel, &a.title, &subtitle)?
        }
    };
    std::fs::write(&a.out, svg).map_err(|e| format!("cannot write {}: {e}", a.out.display()))?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Args)]
struct Common {
    /// udp, tcp or tls.
    #[arg(long, short = 't', default_value = "udp")]
    transport: Transport,
    #[command(flatten)]
    tls: TlsArgs,
    /// Hold time of each call, from 200 (UAC) or ACK (UAS) to BYE: 500ms, 30s, 2m.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    hold: Duration,
    /// Who sends the BYE: caller or callee.
    #[arg(long, default_value = "caller")]
    bye_from: ByeFrom,
    /// How long after the hold time to wait for the other side's BYE.
    #[arg(long, default_value = "32s", value_parser = parse_duration)]
    bye_wait: Duration,
    /// RFC 3261 T1 (retransmission base; transactions time out after 64·T1).
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    t1: Duration,
    /// RFC 3261 T2 (retransmission interval cap).
    #[arg(long, default_value = "4s", value_parser = parse_duration)]
    t2: Duration,
    /// Print the final counters as JSON on stdout (the summary goes to stderr).
    #[arg(long)]
    json: bool,
    /// Print a progress line on stderr every second.
    #[arg(long)]
    progress: bool,
    /// Give up after this long in all: print the summary, exit 1 if calls were still in
    /// progress.
    #[arg(long, value_parser = parse_duration)]
    max_time: Option<Duration>,
}

#[derive(Args)]
struct UacArgs {
    /// Where to send every request (IP:PORT).
    target: SocketAddr,
    /// Local address (port 0: any).
    #[arg(long, short = 'l', default_value = "127.0.0.1:0")]
    local: SocketAddr,
    /// New calls per second.
    #[arg(long, short = 'r', default_value_t = 10.0)]
    rate: f64,
    /// Calls in progress at most.
    #[arg(long, default_value_t = 100)]
    max_concurrent: usize,
    /// Total calls (default 10 unless --duration is given).
    #[arg(long, short = 'm')]
    calls: Option<u64>,
    /// Place calls for this long.
    #[arg(long, short = 'd', value_parser = parse_duration)]
    duration: Option<Duration>,
    /// How long a call may ring after a provisional response.
    #[arg(long, default_value = "32s", value_parser = parse_duration)]
    answer_timeout: Duration,
    /// User part of the Request-URI.
    #[arg(long, default_value = "service")]
    to_user: String,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
struct UasArgs {
    /// Address to listen on.
    #[arg(long, short = 'l', default_value = "127.0.0.1:5080")]
    local: SocketAddr,
    /// Time between 180 and the final response (0: no 180).
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    ring: Duration,
    /// Final response code: 200 answers, anything else (e.g. 486) rejects.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u16).range(200..700))]
    code: u16,
    /// Exit after this many calls have ended.
    #[arg(long, short = 'm')]
    calls: Option<u64>,
    /// Exit after this long.
    #[arg(long, short = 'd', value_parser = parse_duration)]
    duration: Option<Duration>,
    #[command(flatten)]
    common: Common,
}

/// TLS files of `--transport tls` (PEM; `sbc-lab tls-certs` writes a lab set).
#[derive(Args)]
struct TlsArgs {
    /// A CA certificate to trust when dialling (repeat for more): the UAC's target, or the
    /// SBC a UAS dials for a BYE after a failover.
    #[arg(long)]
    tls_ca: Vec<PathBuf>,
    /// Our certificate (chain, leaf first): the UAS's server certificate (required), the
    /// UAC's client certificate (optional, with --tls-key).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// SNI, and the name the server's certificate must carry, when dialling (default: the
    /// IP dialled).
    #[arg(long)]
    tls_server_name: Option<String>,
    /// UAS: callers must present a certificate from this CA (mutual TLS).
    #[arg(long)]
    tls_client_ca: Option<PathBuf>,
}

impl TlsArgs {
    /// The TLS settings of a UAC (`server = false`) or UAS; `None` unless the transport is
    /// TLS.
    fn settings(&self, transport: Transport, server: bool) -> Result<Option<TlsSettings>, String> {
        if transport != Transport::Tls {
            return Ok(None);
        }
        if self.tls_ca.is_empty() {
            return Err("--transport tls needs --tls-ca (the CA to trust when dialling)".into());
        }
        let ca: Vec<&Path> = self.tls_ca.iter().map(PathBuf::as_path).collect();
        let ours = self.tls_cert.as_deref().zip(self.tls_key.as_deref());
        let client = tls::client_config(&ca, ours).map_err(|e| format!("{e:#}"))?;
        let mut settings = TlsSettings::client(client);
        settings.server_name.clone_from(&self.tls_server_name);
        if server {
            let (cert, key) =
                ours.ok_or("a TLS UAS needs --tls-cert and --tls-key (its certificate)")?;
            let cfg = tls::server_config(cert, key, self.tls_client_ca.as_deref())
                .map_err(|e| format!("{e:#}"))?;
            settings = settings.with_server(cfg);
        }
        Ok(Some(settings))
    }
}

/// `250ms`, `2s`, `1.5s`, `2m`, `1h`, or a plain number of seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "us" => n / 1_000_000.0,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        u => return Err(format!("bad duration unit {u:?} (ms, s, m, h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("bad duration {s:?}: {e}"))
}

fn finish(snap: &Snapshot, json: bool, incomplete: bool) -> ExitCode {
    eprint!("{}", snap.summary());
    if json {
        match serde_json::to_string_pretty(snap) {
            Ok(j) => println!("{j}"),
            Err(e) => eprintln!("cannot write JSON: {e}"),
        }
    }
    if snap.failed == 0 && !incomplete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Runs `wait` with a progress line every second, up to `max_time`; `on_ctrl_c` is called at
/// the first Ctrl-C, a second one gives up. Returns whether it finished (rather than gave up).
async fn drive<F: std::future::Future<Output = Snapshot>>(
    wait: F,
    stats: std::sync::Arc<sbc_lab::traffic::Stats>,
    common: &Common,
    on_ctrl_c: impl Fn(),
) -> bool {
    tokio::pin!(wait);
    let deadline = common.max_time.map(|d| tokio::time::Instant::now() + d);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let mut ctrl_c_seen = false;
    loop {
        tokio::select! {
            _ = &mut wait => return true,
            _ = tick.tick() => {
                if common.progress {
                    eprintln!("{}", stats.snapshot().progress_line());
                }
                if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                    eprintln!("--max-time reached");
                    return false;
                }
            }
            _ = tokio::signal::ctrl_c() => {
                if ctrl_c_seen {
                    return false;
                }
                ctrl_c_seen = true;
                eprintln!("stopping: no new calls; Ctrl-C again to give up on calls in progress");
                on_ctrl_c();
            }
        }
    }
}

/// The relay's CPU ticks and memory around the RTP phase.
#[derive(serde::Serialize, Default)]
struct RelayCost {
    pid: u32,
    rss_kb_before_calls: u64,
    rss_kb_with_calls: u64,
    cpu_ticks: u64,
    cpu_s: f64,
    cpu_us_per_packet: f64,
}

#[derive(serde::Serialize)]
struct RtpLoadOutput {
    relay: &'static str,
    calls: usize,
    calls_ready: usize,
    /// Calls whose endpoints were told each other's own address: the media bypasses the
    /// relay (a relay that did not anchor it).
    bypassed: usize,
    setup_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<sbc_lab::traffic::PlanStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sip_uac: Option<Snapshot>,
    rtp: RtpReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    relay_process: Option<RelayCost>,
}

fn rtp_config(c: &RtpCommon) -> RtpConfig {
    RtpConfig {
        duration: c.duration,
        threads: c.threads,
        ..RtpConfig::default()
    }
}

/// Runs the RTP phase, reading the watched process's CPU ticks just around it.
async fn rtp_phase(
    calls: Vec<MediaCall>,
    c: &RtpCommon,
    cost: &mut Option<RelayCost>,
) -> Result<RtpReport, String> {
    let cfg = rtp_config(c);
    let ticks = |pid| procstat::cpu_ticks(pid).map_err(|e| format!("/proc/{pid}/stat: {e}"));
    let t0 = match cost.as_ref() {
        Some(k) => Some(ticks(k.pid)?),
        None => None,
    };
    let report = tokio::task::spawn_blocking(move || rtp::run(calls, &cfg))
        .await
        .map_err(|e| format!("RTP thread: {e}"))?
        .map_err(|e| format!("RTP: {e}"))?;
    if let (Some(k), Some(t0)) = (cost.as_mut(), t0) {
        k.cpu_ticks = ticks(k.pid)?.saturating_sub(t0);
        k.rss_kb_with_calls = procstat::rss_kb(k.pid).unwrap_or(0);
        k.cpu_s = k.cpu_ticks as f64 / c.clk_tck.max(1) as f64;
        if report.total.received > 0 {
            k.cpu_us_per_packet = k.cpu_s * 1e6 / report.total.received as f64;
        }
    }
    Ok(report)
}

fn rtp_finish(mut out: RtpLoadOutput, c: &RtpCommon) -> ExitCode {
    eprint!("{}", out.rtp.summary());
    if let Some(min) = c.gaps {
        eprint!("{}", out.rtp.gap_table(min));
    }
    if let Some(k) = &out.relay_process {
        eprintln!(
            "relay pid {}: {} ticks ({:.2} s) CPU over the RTP phase, {:.2} µs per packet received; VmRSS {} kB before the calls, {} kB with them",
            k.pid, k.cpu_ticks, k.cpu_s, k.cpu_us_per_packet, k.rss_kb_before_calls, k.rss_kb_with_calls
        );
    }
    let ok = out.calls_ready == out.calls && out.rtp.total.silent_directions == 0;
    if c.kv {
        let t = &out.rtp.total;
        let k = out.relay_process.take().unwrap_or_default();
        println!(
            "relay={}\ncalls={}\ncalls_ready={}\nbypassed={}\nsetup_s={:.3}\nsent={}\nreceived={}\nlost={}\nloss_percent={:.4}\nduplicates={}\nforeign={}\nsend_errors={}\nreceived_per_s={:.1}\ndelay_p50_ms={:.4}\ndelay_p99_ms={:.4}\ndelay_max_ms={:.4}\nstart_gap_p50_ms={:.2}\nstart_gap_max_ms={:.2}\nmax_gap_ms={:.2}\nsilent_directions={}\ncalls_not_resumed={}\nthreads={}\nrelay_cpu_ticks={}\nrelay_cpu_s={:.3}\nrelay_cpu_us_per_packet={:.3}\nrelay_rss_kb_before={}\nrelay_rss_kb={}",
            out.relay, out.calls, out.calls_ready, out.bypassed, out.setup_s, t.sent, t.received, t.lost,
            t.loss_percent, t.duplicates, t.foreign, t.send_errors, t.received_per_s,
            t.delay.p50_ms, t.delay.p99_ms, t.delay.max_ms, t.start_gap_p50_ms,
            t.start_gap_max_ms, t.max_gap_ms, t.silent_directions, t.calls_not_resumed,
            out.rtp.threads, k.cpu_ticks, k.cpu_s, k.cpu_us_per_packet, k.rss_kb_before_calls,
            k.rss_kb_with_calls
        );
    } else if c.json {
        if !c.per_call {
            out.rtp.calls.clear();
        }
        match serde_json::to_string_pretty(&out) {
            Ok(j) => println!("{j}"),
            Err(e) => eprintln!("cannot write JSON: {e}"),
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "rtp-load: {} of {} calls set up, {} directions received nothing",
            out.calls_ready, out.calls, out.rtp.total.silent_directions
        );
        ExitCode::from(1)
    }
}

/// Calls whose endpoints send straight to each other, with a warning when there are any.
fn bypassing(calls: &[MediaCall]) -> usize {
    let n = calls
        .iter()
        .filter(|c| c.a_relay == c.endpoints.b_addr() || c.b_relay == c.endpoints.a_addr())
        .count();
    if n > 0 {
        eprintln!(
            "rtp-load: WARNING: in {n} calls the SDP names the other endpoint itself: their media does not go through the relay"
        );
    }
    n
}

fn watch(c: &RtpCommon) -> Option<RelayCost> {
    c.watch_pid.map(|pid| RelayCost {
        pid,
        rss_kb_before_calls: procstat::rss_kb(pid).unwrap_or(0),
        ..RelayCost::default()
    })
}

async fn rtp_load(a: RtpLoadArgs) -> Result<ExitCode, String> {
    match a.relay {
        RtpRelay::Rtpengine { ng, common: c } => {
            let mut cost = watch(&c);
            let endpoints = CallEndpoints::bind_many(c.calls, c.ip)
                .map_err(|e| format!("cannot bind {} RTP endpoints: {e}", 2 * c.calls))?;
            let t0 = std::time::Instant::now();
            let (ids, calls, client) = tokio::task::spawn_blocking(move || {
                let mut client = NgClient::new(ng).map_err(|e| format!("NG socket: {e}"))?;
                client
                    .ping()
                    .map_err(|e| format!("rtpengine at {ng}: {e}"))?;
                let prefix = format!("lab-{:08x}", rand::random::<u32>());
                let anchored =
                    rtpengine::anchor(&mut client, endpoints, &prefix, &NgOptions::anchoring())
                        .map_err(|e| e.to_string())?;
                Ok::<_, String>((anchored.ids, anchored.calls, client))
            })
            .await
            .map_err(|e| format!("NG thread: {e}"))??;
            let setup_s = t0.elapsed().as_secs_f64();
            let ready = calls.len();
            let bypassed = bypassing(&calls);
            eprintln!("rtp-load: {ready} calls anchored on rtpengine at {ng} in {setup_s:.2} s");
            let report = rtp_phase(calls, &c, &mut cost).await?;
            let deleted = tokio::task::spawn_blocking(move || {
                let mut client = client;
                rtpengine::release(&mut client, &ids)
            })
            .await
            .map_err(|e| format!("NG thread: {e}"))?;
            match deleted {
                Ok(n) if n == ready => {}
                Ok(n) => eprintln!("rtp-load: rtpengine knew {n} of {ready} calls at delete"),
                Err(e) => eprintln!("rtp-load: delete: {e}"),
            }
            let out = RtpLoadOutput {
                relay: "rtpengine",
                calls: c.calls,
                calls_ready: ready,
                bypassed,
                setup_s,
                plan: None,
                sip_uac: None,
                rtp: report,
                relay_process: cost,
            };
            Ok(rtp_finish(out, &c))
        }
        RtpRelay::Sip {
            target,
            uas,
            rate,
            setup_timeout,
            common: c,
        } => {
            let mut cost = watch(&c);
            let mut cfg = SipMediaConfig::new(target, uas, c.calls);
            cfg.rate = rate;
            cfg.media_ip = c.ip;
            cfg.setup_timeout = setup_timeout;
            cfg.max_hold = setup_timeout + c.duration + Duration::from_secs(60);
            let (sip, calls) = SipCalls::establish(&cfg)
                .await
                .map_err(|e| format!("cannot start the SIP calls: {e}"))?;
            let ready = calls.len();
            let bypassed = bypassing(&calls);
            let status = sip.status();
            eprintln!(
                "rtp-load: {ready} of {} calls set up through {target} in {:.2} s ({status:?})",
                c.calls,
                sip.setup_time().as_secs_f64()
            );
            let report = if ready == 0 {
                rtp::run(Vec::new(), &rtp_config(&c)).map_err(|e| e.to_string())?
            } else {
                rtp_phase(calls, &c, &mut cost).await?
            };
            let setup_s = sip.setup_time().as_secs_f64();
            let (uac, uas) = sip.hang_up(Duration::from_secs(40)).await;
            eprint!("{}", uac.summary());
            eprint!("{}", uas.summary());
            let out = RtpLoadOutput {
                relay: "sip",
                calls: c.calls,
                calls_ready: ready,
                bypassed,
                setup_s,
                plan: Some(status),
                sip_uac: Some(uac),
                rtp: report,
                relay_process: cost,
            };
            Ok(rtp_finish(out, &c))
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode, String> {
    match cli.command {
        Command::Chart(a) => chart(&a),
        Command::RtpLoad(a) => rtp_load(a).await,
        Command::TlsHandshakes(a) => tls_handshakes(a).await,
        Command::TlsCerts(a) => {
            let set = tls::write_lab_set(&a.out).map_err(|e| format!("{e:#}"))?;
            for f in set.files() {
                println!("{}", f.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Uac(a) => {
            let c = &a.common;
            let mut cfg = UacConfig::new(a.target);
            cfg.local = a.local;
            cfg.transport = c.transport;
            cfg.tls = c.tls.settings(c.transport, false)?;
            cfg.rate = a.rate;
            cfg.max_concurrent = a.max_concurrent;
            cfg.calls = match (a.calls, a.duration) {
                (None, None) => Some(10),
                (calls, _) => calls,
            };
            cfg.duration = a.duration;
            cfg.hold = c.hold;
            cfg.bye_from = c.bye_from;
            cfg.bye_wait = c.bye_wait;
            cfg.timers = Timers { t1: c.t1, t2: c.t2 };
            cfg.answer_timeout = a.answer_timeout;
            cfg.to_user = a.to_user;
            let uac = Uac::start(cfg)
                .await
                .map_err(|e| format!("cannot start the UAC: {e}"))?;
            eprintln!(
                "uac: {} -> {} over {:?}",
                uac.local_addr(),
                a.target,
                c.transport
            );
            let finished = drive(uac.wait(), uac.stats(), c, || uac.stop()).await;
            let snap = uac.snapshot();
            Ok(finish(&snap, c.json, !finished || snap.in_progress > 0))
        }
        Command::Uas(a) => {
            let c = &a.common;
            let mut cfg = UasConfig::new(a.local);
            cfg.transport = c.transport;
            cfg.tls = c.tls.settings(c.transport, true)?;
            cfg.ring = a.ring;
            cfg.answer_code = a.code;
            cfg.hold = c.hold;
            cfg.bye_from = c.bye_from;
            cfg.bye_wait = c.bye_wait;
            cfg.timers = Timers { t1: c.t1, t2: c.t2 };
            cfg.calls = a.calls;
            cfg.duration = a.duration;
            let uas = Uas::start(cfg)
                .await
                .map_err(|e| format!("cannot start the UAS on {}: {e}", a.local))?;
            eprintln!(
                "uas: listening on {} over {:?}",
                uas.local_addr(),
                c.transport
            );
            let finished = drive(uas.wait(), uas.stats(), c, || uas.stop()).await;
            let snap = uas.snapshot();
            // A UAS stopped by time or Ctrl-C is not a failure; a --calls goal not met is.
            let incomplete = !finished && a.calls.is_some();
            Ok(finish(&snap, c.json, incomplete))
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sbc-lab: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sbc-lab: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("2 parsecs").is_err());
    }
}
