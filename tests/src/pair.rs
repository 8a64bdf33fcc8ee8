//! The HA pair on one machine: two `sbc run` processes sharing one SIP service address (only
//! the active binds it), each with its own heartbeat and state-sync address on loopback, plus
//! what the pair tests need around them: a non-panicking poller of `show redundancy` and
//! `show health`, SIPp UAC/UAS builders, a raw "probe" call that measures when service is
//! back, forged heartbeats, a `sbc witness` process, and [`Link`], a switchable UDP/TCP relay
//! that carries the heartbeat and sync traffic between the nodes so a test can cut and heal it.
//!
//! Node 0 is `sbc-a` (primary, heartbeat on `127.0.0.11`), node 1 is `sbc-b` (secondary,
//! `127.0.0.12`) by default; [`PairConfig::with_addresses`] puts them (and the SIP side) on
//! other addresses of either family, e.g. IPv6 ones of a test's own network namespace. Each
//! node has its own [`TestDir`] (`<test>-sbc-a`, `<test>-sbc-b`) with its config, logs and
//! management socket; SIPp runs in a third one ([`Pair::dir`]).
//!
//! Every loop here is bounded in iterations and time; every process is stopped by its PID.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::sbc::sbc_binary;
use crate::{ports, tail_of_file, SbcConfig, SbcNode, Sipp, SippProcess, TestDir};

/// The nodes' `system-config hostname`s (and redundancy peer names).
pub const NAMES: [&str; 2] = ["sbc-a", "sbc-b"];

/// The shared key both nodes use.
pub const SHARED_KEY: &str = "lab-secret-0123456789";

/// The other node's index.
#[must_use]
pub const fn other(i: usize) -> usize {
    1 - i
}

/// `127.0.0.x`.
#[must_use]
pub fn lo(x: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, x))
}

/// The shipped default `advertisement-time` (ms), restated from `sbc-config` (the harness does
/// not link the product's crates).
pub const DEFAULT_ADVERTISEMENT_MS: u64 = 200;
/// The shipped default `percent-drift`, restated from `sbc-config`.
pub const DEFAULT_PERCENT_DRIFT: u32 = 300;

/// The parameters of a pair's two config files.
#[derive(Debug, Clone)]
pub struct PairConfig {
    /// The SIP part, the same on both nodes: the access and core interfaces (the shared service
    /// address) and the session-agent.
    pub sip: SbcConfig,
    /// `redundancy-config advertisement-time` (ms) written to both files; `None` (the default)
    /// writes none, so the nodes run at the shipped default ([`DEFAULT_ADVERTISEMENT_MS`]).
    pub advertisement_ms: Option<u64>,
    /// Node `i`'s own heartbeat address (`destinations` of its own peer entry; it binds it and
    /// serves the state sync on its IP).
    pub heartbeat: [SocketAddr; 2],
    /// The address node `i` writes for the *other* node's peer entry: where it sends its
    /// heartbeats and connects for the state sync (on that IP). Normally `heartbeat[other(i)]`;
    /// a [`Link`] address to put a switchable relay in between.
    pub route_to_other: [SocketAddr; 2],
    /// `sip-sync-port`.
    pub sip_sync_port: u16,
    /// `config-sync-port`.
    pub config_sync_port: u16,
    /// `witness`.
    pub witness: Option<SocketAddr>,
    /// Extra lines of `[system-config]` (both nodes).
    pub system_lines: Vec<String>,
    /// Extra lines of `[system-config]` of node `i` only (its node-local keys).
    pub node_system_lines: [Vec<String>; 2],
    /// Extra TOML appended to both files (whole tables).
    pub extra_toml: String,
    /// Extra TOML appended to node `i`'s file only (after `extra_toml`): tables of its own,
    /// such as an `account-config` with its own spool.
    pub node_extra_toml: [String; 2],
}

impl Default for PairConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl PairConfig {
    /// Fresh ports everywhere: access `127.0.0.1`, core `127.0.0.2`, agent `127.0.0.1`,
    /// heartbeats `127.0.0.11`/`127.0.0.12`, the shipped redundancy timers, no witness.
    #[must_use]
    pub fn new() -> Self {
        Self::with_addresses(SbcConfig::new(), [lo(11), lo(12)])
    }

    /// As [`PairConfig::new`], on other addresses: the SIP part `sip` (its access, core and
    /// agent addresses) and node `i`'s heartbeat and state sync on `heartbeat_ips[i]`, each on a
    /// fresh port. Either family: e.g. `fd00::1` and `fd00::2` of a test's own namespace
    /// ([`crate::netns::enter`]) for a pair over IPv6.
    #[must_use]
    pub fn with_addresses(sip: SbcConfig, heartbeat_ips: [IpAddr; 2]) -> Self {
        let heartbeat = heartbeat_ips.map(|ip| SocketAddr::new(ip, ports::free_port()));
        Self {
            sip,
            advertisement_ms: None,
            heartbeat,
            route_to_other: [heartbeat[1], heartbeat[0]],
            sip_sync_port: ports::free_port(),
            config_sync_port: ports::free_port(),
            witness: None,
            system_lines: Vec::new(),
            node_system_lines: [Vec::new(), Vec::new()],
            extra_toml: String::new(),
            node_extra_toml: [String::new(), String::new()],
        }
    }

    /// Adds the alarm settings of the memory-driven switchover: `critical-memory-abort=switchover`,
    /// process memory source with a `limit_mb` limit, 1 s iterations (5 sub-samples, 3 for a
    /// spike), lab mode, a critical memory threshold at 80 %, traps to `trap_port` on
    /// 127.0.0.1.
    #[must_use]
    pub fn with_memory_switchover(mut self, limit_mb: u32, trap_port: u16) -> Self {
        self.system_lines.extend([
            "options = [\"critical-memory-abort=switchover\"]".to_owned(),
            "memory-source = \"process\"".to_owned(),
            format!("memory-limit-mb = {limit_mb}"),
            "alarm-iteration-ms = 1000".to_owned(),
            "alarm-subsamples = 5".to_owned(),
            "spike-subsamples = 3".to_owned(),
            "lab-mode = true".to_owned(),
        ]);
        let _ = write!(
            self.extra_toml,
            "\n[[system-config.alarm-threshold]]\ntype = \"memory\"\nseverity = \"critical\"\nvalue = 80\n\
             \n[[system-config.trap-receiver]]\nip-address = \"127.0.0.1\"\nport = {trap_port}\n"
        );
        self
    }

    /// The advertisement-time the nodes run with.
    #[must_use]
    pub fn advertisement(&self) -> Duration {
        Duration::from_millis(self.advertisement_ms.unwrap_or(DEFAULT_ADVERTISEMENT_MS))
    }

    /// The detection time of a silent peer: advertisement-time × the default percent-drift.
    #[must_use]
    pub fn dead_time(&self) -> Duration {
        self.advertisement() * DEFAULT_PERCENT_DRIFT / 100
    }

    /// Node `i`'s config file.
    #[must_use]
    pub fn to_toml(&self, i: usize) -> String {
        let mut s = self.sip.to_toml();
        let _ = writeln!(s, "\n[system-config]");
        let _ = writeln!(s, "hostname = \"{}\"", NAMES[i]);
        for line in self.system_lines.iter().chain(&self.node_system_lines[i]) {
            let _ = writeln!(s, "{line}");
        }
        let _ = writeln!(s, "\n[redundancy-config]");
        let _ = writeln!(s, "state = \"enabled\"");
        let _ = writeln!(s, "shared-key = \"{SHARED_KEY}\"");
        let _ = writeln!(s, "sip-sync-port = {}", self.sip_sync_port);
        let _ = writeln!(s, "config-sync-port = {}", self.config_sync_port);
        if let Some(ms) = self.advertisement_ms {
            let _ = writeln!(s, "advertisement-time = {ms}");
        }
        if let Some(w) = self.witness {
            let _ = writeln!(s, "witness = \"{w}\"");
        }
        for (j, kind) in [(0usize, "primary"), (1, "secondary")] {
            let dest = if j == i {
                self.heartbeat[i]
            } else {
                self.route_to_other[i]
            };
            let _ = writeln!(s, "\n[[redundancy-config.peer]]");
            let _ = writeln!(s, "name = \"{}\"", NAMES[j]);
            let _ = writeln!(s, "type = \"{kind}\"");
            let _ = writeln!(s, "destinations = [\"{dest}\"]");
        }
        s.push_str(&self.extra_toml);
        s.push_str(&self.node_extra_toml[i]);
        s
    }
}

/// One node's `show redundancy --json`, the fields the tests use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redundancy {
    /// `state`: `active`, `standby`, `becoming-active`, ...
    pub state: String,
    /// `epoch`.
    pub epoch: u64,
    /// `health`.
    pub health: u64,
    /// `ineligible_until_restart`.
    pub ineligible: bool,
    /// `synchronized`.
    pub synchronized: bool,
    /// `peer_alive`.
    pub peer_alive: bool,
    /// `replicated_dialogs`.
    pub replicated_dialogs: u64,
    /// `last_transition` as `from -> to (reason)`.
    pub last_transition: String,
}

impl Redundancy {
    fn from_json(v: &Value) -> Self {
        let t = &v["last_transition"];
        Self {
            state: v["state"].as_str().unwrap_or("?").to_owned(),
            epoch: v["epoch"].as_u64().unwrap_or(0),
            health: v["health"].as_u64().unwrap_or(0),
            ineligible: v["ineligible_until_restart"].as_bool().unwrap_or(false),
            synchronized: v["synchronized"].as_bool().unwrap_or(false),
            peer_alive: v["peer_alive"].as_bool().unwrap_or(false),
            replicated_dialogs: v["replicated_dialogs"].as_u64().unwrap_or(0),
            last_transition: if t.is_null() {
                String::new()
            } else {
                format!(
                    "{} -> {} ({})",
                    t["from"].as_str().unwrap_or("?"),
                    t["to"].as_str().unwrap_or("?"),
                    t["reason"].as_str().unwrap_or("?")
                )
            },
        }
    }

    /// Whether the state is `active`.
    #[must_use]
    pub fn is_active(&self) -> bool {
        self.state == "active"
    }

    /// Whether the state is `standby`.
    #[must_use]
    pub fn is_standby(&self) -> bool {
        self.state == "standby"
    }
}

/// Executes one ACLI line on the management socket (raw JSON-lines protocol, `json: true`),
/// with 2 s timeouts. `None` if the node does not answer (dead, not up yet); otherwise the
/// whole reply object (`ok`, `output`, `data`, `error`).
#[must_use]
pub fn mgmt_exec(socket: &Path, line: &str) -> Option<Value> {
    let stream = UnixStream::connect(socket).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .ok()?;
    let mut w = stream.try_clone().ok()?;
    let mut req = serde_json::json!({"op": "exec", "line": line, "json": true}).to_string();
    req.push('\n');
    w.write_all(req.as_bytes()).ok()?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).ok()?;
    serde_json::from_str(&reply).ok()
}

/// Parses the `counters  Counters { received: 9, accepted: 9, ... }` line of the text form of
/// `show redundancy` (the JSON form has no counters).
#[must_use]
pub fn parse_counters(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let Some(line) = text
        .lines()
        .find(|l| l.trim_start().starts_with("counters"))
    else {
        return out;
    };
    let Some(open) = line.find('{') else {
        return out;
    };
    let body = line[open + 1..].trim_end().trim_end_matches('}');
    for field in body.split(',') {
        if let Some((k, v)) = field.split_once(':') {
            if let Ok(v) = v.trim().parse() {
                out.insert(k.trim().to_owned(), v);
            }
        }
    }
    out
}

/// Two `sbc` nodes of a pair.
#[derive(Debug)]
pub struct Pair {
    /// The config both were started with.
    pub config: PairConfig,
    /// `sbc-a` and `sbc-b`; a killed node stays here, stopped.
    pub nodes: [SbcNode; 2],
    dir: TestDir,
}

impl Pair {
    /// Writes both configs and starts `sbc-a`, then `sbc-b` (each waits for `sbc ready`, which
    /// comes before the election). Does not wait for the roles: see [`Pair::wait_roles`].
    ///
    /// # Panics
    /// If a node does not start.
    #[must_use]
    pub fn start(config: PairConfig) -> Self {
        let test = crate::dir::current_test_name().unwrap_or_else(|| "pair".to_owned());
        let dir = TestDir::new(&format!("{test}-sipp"));
        let a = SbcNode::start_in(
            &TestDir::new(&format!("{test}-{}", NAMES[0])),
            &config.to_toml(0),
        );
        let b = SbcNode::start_in(
            &TestDir::new(&format!("{test}-{}", NAMES[1])),
            &config.to_toml(1),
        );
        Self {
            config,
            nodes: [a, b],
            dir,
        }
    }

    /// The directory for the test's SIPp runs and other files.
    #[must_use]
    pub fn dir(&self) -> &TestDir {
        &self.dir
    }

    /// Node `i`'s management socket.
    #[must_use]
    pub fn socket(&self, i: usize) -> PathBuf {
        self.nodes[i].mgmt_socket()
    }

    /// Node `i`'s `show redundancy`, or `None` if it does not answer.
    #[must_use]
    pub fn redundancy(&self, i: usize) -> Option<Redundancy> {
        let reply = mgmt_exec(&self.socket(i), "show redundancy")?;
        (reply["ok"] == Value::Bool(true)).then(|| Redundancy::from_json(&reply["data"]))
    }

    /// Node `i`'s whole `show redundancy --json` data (counters, `sync`, config pushes), or
    /// `None` if it does not answer.
    #[must_use]
    pub fn redundancy_json(&self, i: usize) -> Option<Value> {
        let reply = mgmt_exec(&self.socket(i), "show redundancy")?;
        (reply["ok"] == Value::Bool(true)).then(|| reply["data"].clone())
    }

    /// Node `i`'s `show health` data, or `None` if it does not answer.
    #[must_use]
    pub fn health(&self, i: usize) -> Option<Value> {
        let reply = mgmt_exec(&self.socket(i), "show health")?;
        (reply["ok"] == Value::Bool(true)).then(|| reply["data"].clone())
    }

    /// Node `i`'s heartbeat counters (from the text of `show redundancy`), or `None`.
    #[must_use]
    pub fn counters(&self, i: usize) -> Option<BTreeMap<String, u64>> {
        let reply = mgmt_exec(&self.socket(i), "show redundancy")?;
        let text = reply["output"].as_str()?;
        let c = parse_counters(text);
        (!c.is_empty()).then_some(c)
    }

    /// Executes one ACLI line on node `i` (raw protocol); `None` if it does not answer.
    #[must_use]
    pub fn exec(&self, i: usize, line: &str) -> Option<Value> {
        mgmt_exec(&self.socket(i), line)
    }

    /// Both nodes' states as one line, for messages.
    #[must_use]
    pub fn describe(&self) -> String {
        (0..2)
            .map(|i| {
                format!(
                    "{}: {}",
                    NAMES[i],
                    self.redundancy(i)
                        .map_or_else(|| "no answer".to_owned(), |r| format!("{r:?}"))
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Polls both nodes every 100 ms for up to `timeout` until one is active and the other
    /// standby; returns `(active, standby)` indexes.
    ///
    /// # Panics
    /// If that does not happen in time.
    #[must_use]
    #[track_caller]
    pub fn wait_roles(&self, timeout: Duration) -> (usize, usize) {
        let deadline = Instant::now() + timeout;
        loop {
            let r = [self.redundancy(0), self.redundancy(1)];
            for a in 0..2 {
                let s = other(a);
                if r[a].as_ref().is_some_and(Redundancy::is_active)
                    && r[s].as_ref().is_some_and(Redundancy::is_standby)
                {
                    return (a, s);
                }
            }
            assert!(
                Instant::now() < deadline,
                "no active/standby pair within {timeout:?}\n{}",
                self.describe()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Polls node `i` every 50 ms for up to `timeout` until `pred` holds on its
    /// `show redundancy`; returns the first snapshot that does.
    ///
    /// # Panics
    /// If that does not happen in time.
    #[track_caller]
    pub fn wait_redundancy(
        &self,
        i: usize,
        timeout: Duration,
        what: &str,
        mut pred: impl FnMut(&Redundancy) -> bool,
    ) -> Redundancy {
        let deadline = Instant::now() + timeout;
        let mut last = None;
        loop {
            if let Some(r) = self.redundancy(i) {
                if pred(&r) {
                    return r;
                }
                last = Some(r);
            }
            assert!(
                Instant::now() < deadline,
                "{} did not reach \"{what}\" within {timeout:?}; last: {last:?}\n{}",
                NAMES[i],
                self.describe()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the standby `s` holds at least `dialogs` replicated dialogs and says it is
    /// synchronized.
    #[track_caller]
    pub fn wait_replicated(&self, s: usize, dialogs: u64, timeout: Duration) -> Redundancy {
        self.wait_redundancy(s, timeout, &format!("{dialogs} replicated dialogs"), |r| {
            r.replicated_dialogs >= dialogs && r.synchronized
        })
    }

    /// A SIPp UAS (built-in `uas`) on the session-agent address for `calls` calls, started in
    /// the background; waits until it listens.
    #[must_use]
    pub fn spawn_uas(&self, name: &str, calls: u32, timeout: Duration) -> SippProcess {
        let uas = Sipp::new(&self.dir, name)
            .builtin("uas")
            .local(self.config.sip.agent)
            .calls(calls)
            .timeout(timeout)
            .spawn();
        crate::sipp::wait_listening(self.config.sip.agent, false, Duration::from_secs(5));
        uas
    }

    /// A SIPp UAC (built-in `uac`) from a fresh port on the access IP to the shared access
    /// address: `calls` calls at `rate` calls/s, each held `hold_ms` before its BYE.
    #[must_use]
    pub fn uac(&self, name: &str, calls: u32, rate: u32, hold_ms: u64, timeout: Duration) -> Sipp {
        let local = SocketAddr::new(self.config.sip.access.ip(), ports::free_port());
        Sipp::new(&self.dir, name)
            .builtin("uac")
            .local(local)
            .remote(self.config.sip.access)
            .calls(calls)
            .rate(rate)
            .args(["-d", &hold_ms.to_string()])
            .timeout(timeout)
    }
}

/// Sends SIGKILL to `node`'s PID (only) and reaps it; returns the instant just before the
/// signal.
pub fn kill9(node: &mut SbcNode) -> Instant {
    let at = Instant::now();
    let status = node.kill();
    assert!(status.is_some(), "the node was not running");
    at
}

/// What a [`probe_call`] saw.
#[derive(Debug, Clone)]
pub struct ProbeCall {
    /// When the INVITE was first sent.
    pub started: Instant,
    /// When the 200 OK to the INVITE arrived.
    pub answered: Instant,
    /// How many times the INVITE was sent.
    pub invites_sent: u32,
    /// The final status of the BYE (200 expected).
    pub bye_status: Option<u16>,
}

fn header_line<'a>(msg: &'a str, name: &str) -> Option<&'a str> {
    msg.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn status_of(msg: &str) -> Option<u16> {
    let first = msg.lines().next()?;
    let rest = first.strip_prefix("SIP/2.0 ")?;
    rest.get(..3)?.parse().ok()
}

/// One call from a raw UDP socket on `local_ip` to `sbc`: the INVITE is re-sent unchanged every
/// `resend` (a retransmission, so it is one call however many copies get through) until a
/// final response or `timeout`; on 200 it sends the ACK, then a BYE (re-sent every 500 ms, up
/// to 8 times) and waits for its final response. Used to measure when a node serves SIP again:
/// the 200 arrives within `resend` of service returning.
///
/// # Errors
/// A description if no 200 came within `timeout` or another final status came.
pub fn probe_call(
    local_ip: IpAddr,
    sbc: SocketAddr,
    resend: Duration,
    timeout: Duration,
) -> Result<ProbeCall, String> {
    let sock = UdpSocket::bind(SocketAddr::new(local_ip, 0)).map_err(|e| e.to_string())?;
    let local = sock.local_addr().map_err(|e| e.to_string())?;
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
        ^ u128::from(std::process::id());
    let call_id = format!("probe-{nonce:x}-{}", local.port());
    let tag = format!("pt{}", local.port());
    let invite = format!(
        "INVITE sip:service@{sbc} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {local};branch=z9hG4bK-probe-inv-{nonce:x};rport\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:probe@{local}>;tag={tag}\r\n\
         To: <sip:service@{sbc}>\r\n\
         Call-ID: {call_id}\r\n\
         CSeq: 1 INVITE\r\n\
         Contact: <sip:probe@{local}>\r\n\
         Content-Type: application/sdp\r\n\
         Content-Length: {len}\r\n\r\n{sdp}",
        sdp = probe_sdp(local.ip()),
        len = probe_sdp(local.ip()).len(),
    );
    let started = Instant::now();
    let deadline = started + timeout;
    let mut invites_sent = 0u32;
    let mut next_send = started;
    let mut buf = vec![0u8; 65_536];
    let (answered, ok) = loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(format!(
                "no final response to the probe INVITE within {timeout:?} ({invites_sent} sent)"
            ));
        }
        if now >= next_send {
            // An unbound service address may answer ICMP unreachable: not an error here.
            let _ = sock.send_to(invite.as_bytes(), sbc);
            invites_sent += 1;
            next_send = now + resend;
        }
        let wait = next_send
            .min(deadline)
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let _ = sock.set_read_timeout(Some(wait));
        match sock.recv_from(&mut buf) {
            Ok((n, _)) => {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                let is_invite = header_line(&text, "CSeq").is_some_and(|c| c.ends_with("INVITE"));
                match status_of(&text) {
                    Some(code) if is_invite && code >= 200 => break (Instant::now(), text),
                    _ => {}
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::ConnectionRefused
                ) => {}
            Err(e) => return Err(format!("probe recv: {e}")),
        }
    };
    let code = status_of(&ok).unwrap_or(0);
    let to = header_line(&ok, "To").unwrap_or_default().to_owned();
    if code != 200 {
        return Err(format!("the probe INVITE got {code}:\n{ok}"));
    }
    let contact = header_line(&ok, "Contact")
        .and_then(|c| {
            let open = c.find('<')?;
            let close = c.find('>')?;
            Some(c[open + 1..close].to_owned())
        })
        .unwrap_or_else(|| format!("sip:service@{sbc}"));
    let in_dialog = |method: &str, cseq: u32, branch: &str| {
        format!(
            "{method} {contact} SIP/2.0\r\n\
             Via: SIP/2.0/UDP {local};branch=z9hG4bK-probe-{branch}-{nonce:x};rport\r\n\
             Max-Forwards: 70\r\n\
             From: <sip:probe@{local}>;tag={tag}\r\n\
             To: {to}\r\n\
             Call-ID: {call_id}\r\n\
             CSeq: {cseq} {method}\r\n\
             Contact: <sip:probe@{local}>\r\n\
             Content-Length: 0\r\n\r\n"
        )
    };
    let _ = sock.send_to(in_dialog("ACK", 1, "ack").as_bytes(), sbc);
    let bye = in_dialog("BYE", 2, "bye");
    let mut bye_status = None;
    'bye: for _ in 0..8 {
        let _ = sock.send_to(bye.as_bytes(), sbc);
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            let _ = sock.set_read_timeout(Some(
                until
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1)),
            ));
            match sock.recv_from(&mut buf) {
                Ok((n, _)) => {
                    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let is_bye = header_line(&text, "CSeq").is_some_and(|c| c.ends_with("BYE"));
                    match status_of(&text) {
                        Some(c) if is_bye && c >= 200 => {
                            bye_status = Some(c);
                            break 'bye;
                        }
                        // A 200 to the INVITE again: our ACK was lost; re-ACK.
                        Some(200) if !is_bye => {
                            let _ = sock.send_to(in_dialog("ACK", 1, "ack").as_bytes(), sbc);
                        }
                        _ => {}
                    }
                }
                Err(_) => break,
            }
        }
    }
    Ok(ProbeCall {
        started,
        answered,
        invites_sent,
        bye_status,
    })
}

fn probe_sdp(ip: IpAddr) -> String {
    let family = if ip.is_ipv4() { "IP4" } else { "IP6" };
    format!(
        "v=0\r\no=probe 1 1 IN {family} {ip}\r\ns=-\r\nc=IN {family} {ip}\r\nt=0 0\r\nm=audio 6000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
    )
}

/// A heartbeat datagram that looks right (magic "SBHA", version 2, a 24-byte nonce made of the
/// node id of `claims`, an incarnation and `seq`, then a sealed payload and tag of plausible
/// sizes) but was not sealed with the pair's key: its bytes are mixed from `key` and `seq`.
/// It must be counted as `bad_mac` (not authentic) and change nothing.
#[must_use]
pub fn forged_heartbeat(claims: &str, key: &[u8], seq: u64) -> Vec<u8> {
    let mut node: u64 = 0xcbf2_9ce4_8422_2325;
    for b in claims.bytes() {
        node ^= u64::from(b);
        node = node.wrapping_mul(0x0100_0000_01b3);
    }
    let mut out = b"SBHA".to_vec();
    out.push(2);
    out.extend_from_slice(&node.to_be_bytes());
    out.extend_from_slice(&(u64::MAX / 2).to_be_bytes()); // incarnation
    out.extend_from_slice(&seq.to_be_bytes());
    // A real heartbeat's payload is about 40 bytes, then 16 bytes of tag.
    for i in 0..56usize {
        let k = key.get(i % key.len().max(1)).copied().unwrap_or(0);
        out.push(k ^ (i as u8).wrapping_mul(37) ^ (seq as u8).rotate_left(3));
    }
    out
}

/// `len` bytes of deterministic garbage (xorshift from `seed`).
#[must_use]
pub fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A running `sbc witness --listen ADDR`, killed by its PID when dropped.
#[derive(Debug)]
pub struct Witness {
    child: Option<Child>,
    /// Its address.
    pub addr: SocketAddr,
    log: PathBuf,
}

impl Witness {
    /// Starts a witness on `addr` (UDP) for the pair ([`SHARED_KEY`]) and waits up to 10 s for
    /// `sbc witness ready`.
    ///
    /// The witness needs the pair's shared key: it is given in `witness.key` (mode 0600) with
    /// `--key-file` (never on the command line).
    ///
    /// # Panics
    /// If it does not start.
    #[must_use]
    pub fn start(dir: &TestDir, addr: SocketAddr) -> Self {
        let log = dir.file("witness.stderr.log");
        let stderr = std::fs::File::create(&log).expect("create witness log");
        let key = dir.file("witness.key");
        std::fs::write(&key, SHARED_KEY).expect("write witness.key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
            .expect("chmod witness.key");
        let mut cmd = Command::new(sbc_binary());
        cmd.arg("witness")
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--key-file")
            .arg(key);
        std::fs::write(dir.file("witness.cmdline"), format!("{cmd:?}")).expect("write cmdline");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start sbc witness: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut line = String::new();
            // Only the first line matters; the thread ends when the witness exits.
            while r.read_line(&mut line).unwrap_or(0) > 0 {
                if line.contains("sbc witness ready") {
                    let _ = tx.send(());
                }
                line.clear();
            }
        });
        let mut w = Self {
            child: Some(child),
            addr,
            log,
        };
        let ready = rx.recv_timeout(Duration::from_secs(10)).is_ok();
        // The ready line may come before a failure (a missing key): give it a moment.
        std::thread::sleep(Duration::from_millis(500));
        let exited = w.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
        if !ready || exited.is_some() {
            w.stop();
            panic!(
                "sbc witness did not start (ready: {ready}, exited: {exited:?})\n{}",
                tail_of_file(&w.log, 20)
            );
        }
        w
    }

    /// Panics, with the tail of its stderr, if it has exited.
    #[track_caller]
    pub fn assert_alive(&mut self) {
        let exited = self
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        if let Some(status) = exited {
            panic!(
                "sbc witness exited with {status}\n--- {} ---\n{}",
                self.log.display(),
                tail_of_file(&self.log, 20)
            );
        }
    }

    /// Stops it (SIGKILL to its PID) and reaps it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Witness {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A switchable relay between the two nodes: UDP datagrams arriving on a listen address are
/// forwarded to a target; TCP connections to a listen address are spliced to a target. While
/// [`Link::cut`], UDP is dropped and TCP bytes are held (not read, as a partitioned network
/// would hold them); [`Link::heal`] resumes. Threads stop when the link is dropped, and in any
/// case after [`Link::MAX_LIFETIME`].
#[derive(Debug)]
pub struct Link {
    cut: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    forwarded: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
    recorded: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Default for Link {
    fn default() -> Self {
        Self::new()
    }
}

impl Link {
    /// No relay thread runs longer than this.
    pub const MAX_LIFETIME: Duration = Duration::from_secs(600);

    /// An empty link (add relays with [`Link::udp`] and [`Link::tcp`]).
    #[must_use]
    pub fn new() -> Self {
        Self {
            cut: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(AtomicBool::new(false)),
            forwarded: Arc::new(AtomicU64::new(0)),
            dropped: Arc::new(AtomicU64::new(0)),
            recorded: Arc::new(std::sync::Mutex::new(Vec::new())),
            threads: Vec::new(),
        }
    }

    /// Datagrams recorded at most by a recording UDP relay.
    pub const MAX_RECORDED: usize = 10_000;

    /// Relays UDP datagrams arriving on `listen` to `target` (one way: the heartbeat channel
    /// needs no replies).
    ///
    /// # Panics
    /// If `listen` cannot be bound.
    pub fn udp(&mut self, listen: SocketAddr, target: SocketAddr) {
        self.udp_relay(listen, target, false);
    }

    /// As [`Link::udp`], and keeps a copy of every datagram forwarded (up to
    /// [`Link::MAX_RECORDED`]), as an eavesdropper on the link would: see [`Link::recorded`].
    ///
    /// # Panics
    /// If `listen` cannot be bound.
    pub fn udp_recording(&mut self, listen: SocketAddr, target: SocketAddr) {
        self.udp_relay(listen, target, true);
    }

    /// The datagrams recorded so far by [`Link::udp_recording`] relays, in arrival order.
    #[must_use]
    pub fn recorded(&self) -> Vec<Vec<u8>> {
        self.recorded.lock().map(|r| r.clone()).unwrap_or_default()
    }

    fn udp_relay(&mut self, listen: SocketAddr, target: SocketAddr, record: bool) {
        let sock = UdpSocket::bind(listen).unwrap_or_else(|e| panic!("bind UDP {listen}: {e}"));
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("set_read_timeout");
        let (cut, stop, fwd, drop_) = self.flags();
        let recorded = self.recorded.clone();
        self.threads.push(std::thread::spawn(move || {
            let end = Instant::now() + Self::MAX_LIFETIME;
            let mut buf = vec![0u8; 65_536];
            while !stop.load(Ordering::SeqCst) && Instant::now() < end {
                let Ok((n, _)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                if cut.load(Ordering::SeqCst) {
                    drop_.fetch_add(1, Ordering::Relaxed);
                } else {
                    let _ = sock.send_to(&buf[..n], target);
                    fwd.fetch_add(1, Ordering::Relaxed);
                    if record {
                        if let Ok(mut r) = recorded.lock() {
                            if r.len() < Self::MAX_RECORDED {
                                r.push(buf[..n].to_vec());
                            }
                        }
                    }
                }
            }
        }));
    }

    /// Splices TCP connections to `listen` to `target` (both directions), connecting to
    /// `target` from `source` (port chosen by the system): the address the target knows the
    /// connecting node by, as a router would preserve it (the state-sync server only accepts
    /// connections from its peer's configured addresses).
    ///
    /// # Panics
    /// If `listen` cannot be bound.
    pub fn tcp(&mut self, listen: SocketAddr, target: SocketAddr, source: IpAddr) {
        let listener =
            TcpListener::bind(listen).unwrap_or_else(|e| panic!("bind TCP {listen}: {e}"));
        listener.set_nonblocking(true).expect("set_nonblocking");
        let (cut, stop, fwd, drop_) = self.flags();
        self.threads.push(std::thread::spawn(move || {
            let end = Instant::now() + Self::MAX_LIFETIME;
            let mut pumps = Vec::new();
            while !stop.load(Ordering::SeqCst) && Instant::now() < end {
                match listener.accept() {
                    Ok((client, _)) => {
                        if cut.load(Ordering::SeqCst) {
                            // A partitioned network does not answer a SYN: closing is the
                            // closest a relay can do once the kernel has accepted.
                            drop(client);
                            drop_.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        let Ok(server) = connect_from(source, target) else {
                            continue;
                        };
                        let _ = client.set_nonblocking(false);
                        for (from, to) in [
                            (client.try_clone(), server.try_clone()),
                            (server.try_clone(), client.try_clone()),
                        ] {
                            let (Ok(from), Ok(to)) = (from, to) else {
                                continue;
                            };
                            let (cut, stop, fwd) = (cut.clone(), stop.clone(), fwd.clone());
                            pumps.push(std::thread::spawn(move || {
                                pump(&from, &to, &cut, &stop, &fwd, end);
                            }));
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
            for p in pumps {
                let _ = p.join();
            }
        }));
    }

    fn flags(
        &self,
    ) -> (
        Arc<AtomicBool>,
        Arc<AtomicBool>,
        Arc<AtomicU64>,
        Arc<AtomicU64>,
    ) {
        (
            self.cut.clone(),
            self.stop.clone(),
            self.forwarded.clone(),
            self.dropped.clone(),
        )
    }

    /// Stops forwarding.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    /// Resumes forwarding.
    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }

    /// Datagrams (and TCP chunks) forwarded so far.
    #[must_use]
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::Relaxed)
    }

    /// Datagrams (and TCP connections) dropped while cut.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// A TCP connection to `target` from `source` (any port), with a 1 s connect timeout.
fn connect_from(source: IpAddr, target: SocketAddr) -> std::io::Result<TcpStream> {
    let domain = socket2::Domain::for_address(target);
    let s = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    s.bind(&SocketAddr::new(source, 0).into())?;
    s.connect_timeout(&target.into(), Duration::from_secs(1))?;
    Ok(s.into())
}

fn pump(
    from: &TcpStream,
    to: &TcpStream,
    cut: &AtomicBool,
    stop: &AtomicBool,
    fwd: &AtomicU64,
    end: Instant,
) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(50)));
    // A receiver that stops reading must not block this thread for ever.
    let _ = to.set_write_timeout(Some(Duration::from_secs(2)));
    let mut buf = vec![0u8; 65_536];
    let (mut from_r, mut to_w) = (from, to);
    while !stop.load(Ordering::SeqCst) && Instant::now() < end {
        if cut.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        match from_r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to_w.write_all(&buf[..n]).is_err() {
                    break;
                }
                fwd.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

impl Drop for Link {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
