//! The demo's pair: its port layout, the two node configurations, the node processes and a
//! small client of their management sockets.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context as _};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

/// Every port of the demo, the embedded default layout shifted by `offset`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    /// The shift applied to every default port.
    pub(crate) offset: u16,
    /// The access realm (UDP and TCP), where the caller sends: 5060.
    pub(crate) access: u16,
    /// The core realm: 5062.
    pub(crate) core: u16,
    /// The session agent (the lab UAS): 5080.
    pub(crate) agent: u16,
    /// The heartbeat, on 127.0.0.11 and 127.0.0.12: 9090.
    pub(crate) heartbeat: u16,
    /// The dialog state sync: 1988.
    pub(crate) sip_sync: u16,
    /// The configuration sync: 1987.
    pub(crate) config_sync: u16,
    /// The demo's trap listener: 1162.
    pub(crate) traps: u16,
}

impl Layout {
    /// The default layout shifted by `offset`; an error when a port would pass 65535.
    pub(crate) fn new(offset: u16) -> anyhow::Result<Self> {
        let shift = |p: u16| {
            p.checked_add(offset).with_context(|| {
                format!("--port-offset {offset} moves port {p} past 65535 (at most 56445)")
            })
        };
        Ok(Self {
            offset,
            access: shift(5060)?,
            core: shift(5062)?,
            agent: shift(5080)?,
            heartbeat: shift(9090)?,
            sip_sync: shift(1988)?,
            config_sync: shift(1987)?,
            traps: shift(1162)?,
        })
    }

    fn ports(&self) -> [(u16, &'static str); 7] {
        [
            (self.access, "access realm (SIP, UDP+TCP)"),
            (self.core, "core realm (SIP)"),
            (self.agent, "session agent (the lab UAS)"),
            (self.heartbeat, "heartbeat (127.0.0.11/12)"),
            (self.sip_sync, "sip-sync-port"),
            (self.config_sync, "config-sync-port"),
            (self.traps, "trap listener"),
        ]
    }

    /// Checks that every port is free on UDP and TCP (a wildcard bind fails when any loopback
    /// address holds the port).
    pub(crate) fn check_free(&self) -> anyhow::Result<()> {
        let mut busy = Vec::new();
        for (port, what) in self.ports() {
            let udp = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok();
            let tcp = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok();
            if !(udp && tcp) {
                busy.push(format!("{port} ({what})"));
            }
        }
        if !busy.is_empty() {
            bail!(
                "port(s) in use: {}. Is another sbc (or a demo) running? Stop it, or shift every \
                 port with --port-offset N (e.g. --port-offset 10000)",
                busy.join(", ")
            );
        }
        Ok(())
    }

    /// Where the caller sends (the pair's service address).
    pub(crate) fn access_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.access))
    }

    /// Where the lab UAS listens.
    pub(crate) fn agent_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.agent))
    }

    /// Where the demo listens for traps.
    pub(crate) fn traps_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.traps))
    }
}

/// The alarm timing of the demo's nodes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AlarmTiming {
    /// `alarm-iteration-ms`.
    pub(crate) iteration_ms: u64,
    /// `alarm-subsamples`.
    pub(crate) subsamples: u32,
}

/// The node names, in peer order (primary first).
pub(crate) const NAMES: [&str; 2] = ["sbc-a", "sbc-b"];
/// The memory limit the process memory source measures against, MiB.
pub(crate) const MEMORY_LIMIT_MB: u64 = 64;
/// Memory thresholds, percent: minor, major, critical.
pub(crate) const THRESHOLDS: [(&str, u8); 3] = [("minor", 60), ("major", 70), ("critical", 80)];

/// The configuration of node `index` (0: sbc-a, the primary; 1: sbc-b).
pub(crate) fn node_config(layout: &Layout, timing: AlarmTiming, index: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Written by `sbc-demo`: the embedded default SIP layout, a pair on loopback, a short\n\
         # alarm iteration and the lab ballast.\n\
         [system-config]\n\
         hostname = \"{name}\"\n\
         options = [\"critical-memory-abort=switchover\"]\n\
         memory-source = \"process\"\n\
         memory-limit-mb = {MEMORY_LIMIT_MB}\n\
         alarm-iteration-ms = {iter}\n\
         alarm-subsamples = {sub}\n\
         spike-subsamples = 3\n\
         lab-mode = true\n",
        name = NAMES[index],
        iter = timing.iteration_ms,
        sub = timing.subsamples,
    );
    for (severity, value) in THRESHOLDS {
        let _ = writeln!(
            s,
            "[[system-config.alarm-threshold]]\ntype = \"memory\"\nseverity = \"{severity}\"\nvalue = {value}\n"
        );
    }
    let _ = writeln!(
        s,
        "[[system-config.trap-receiver]]\n\
         ip-address = \"127.0.0.1\"\n\
         port = {traps}\n\
         community = \"public\"\n\
         filter-level = \"all\"\n\
         \n\
         [sip-config]\n\
         shutdown-grace-ms = 1000\n\
         \n\
         [[sip-interface]]\n\
         realm = \"access\"\n\
         address = \"127.0.0.1\"\n\
         port = {access}\n\
         transports = [\"udp\", \"tcp\"]\n\
         \n\
         [[sip-interface]]\n\
         realm = \"core\"\n\
         address = \"127.0.0.1\"\n\
         port = {core}\n\
         transports = [\"udp\", \"tcp\"]\n\
         \n\
         [[session-agent]]\n\
         name = \"core\"\n\
         realm = \"core\"\n\
         address = \"127.0.0.1\"\n\
         port = {agent}\n\
         transport = \"udp\"\n\
         \n\
         [session-router]\n\
         default-route = \"core\"\n\
         \n\
         [redundancy-config]\n\
         state = \"enabled\"\n\
         shared-key = \"demo-shared-key-0123\"\n\
         port = {hb}\n\
         sip-sync-port = {sip_sync}\n\
         config-sync-port = {config_sync}\n\
         \n\
         [[redundancy-config.peer]]\n\
         name = \"{a}\"\n\
         type = \"primary\"\n\
         destinations = [\"127.0.0.11:{hb}\"]\n\
         \n\
         [[redundancy-config.peer]]\n\
         name = \"{b}\"\n\
         type = \"secondary\"\n\
         destinations = [\"127.0.0.12:{hb}\"]",
        traps = layout.traps,
        access = layout.access,
        core = layout.core,
        agent = layout.agent,
        hb = layout.heartbeat,
        sip_sync = layout.sip_sync,
        config_sync = layout.config_sync,
        a = NAMES[0],
        b = NAMES[1],
    );
    s
}

/// A node process started by the demo.
pub(crate) struct NodeProcess {
    pub(crate) name: &'static str,
    pub(crate) socket: PathBuf,
    pub(crate) log: PathBuf,
    child: Child,
    pid: u32,
}

impl NodeProcess {
    /// Starts `exe run --config CONFIG --mgmt-socket SOCK` with its output in `dir/NAME.log`.
    pub(crate) fn start(exe: &Path, dir: &Path, name: &'static str) -> anyhow::Result<Self> {
        let config = dir.join(format!("{name}.toml"));
        let socket = dir.join(format!("{name}.sock"));
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).with_context(|| format!("{}", log.display()))?;
        let err = out.try_clone()?;
        let child = Command::new(exe)
            .arg("run")
            .arg("--config")
            .arg(&config)
            .arg("--mgmt-socket")
            .arg(&socket)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .env_remove("SBC_MGMT_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            // Its own process group: a Ctrl-C in the terminal reaches the demo only, which
            // then stops the node (SIGTERM, then SIGKILL) and waits for it.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {} run", exe.display()))?;
        let pid = child.id().context("the node exited at once")?;
        Ok(Self {
            name,
            socket,
            log,
            child,
            pid,
        })
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// An error with the end of its log when the process has exited.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{} exited ({status}); the end of its log {}:\n{}",
                self.name,
                self.log.display(),
                tail(&self.log, 15)
            );
        }
        Ok(())
    }

    /// SIGTERM (the node drains, sends its clear traps), then SIGKILL after `grace`; waits.
    pub(crate) async fn stop(&mut self, grace: Duration) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        if let Ok(pid) = i32::try_from(self.pid) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        }
    }
}

/// The last `n` lines of a file.
pub(crate) fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A client of one node's management socket: one session, reconnected when lost; every
/// request bounded in time.
pub(crate) struct Mgmt {
    path: PathBuf,
    conn: Option<(
        BufReader<tokio::net::unix::OwnedReadHalf>,
        tokio::net::unix::OwnedWriteHalf,
    )>,
}

impl Mgmt {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self { path, conn: None }
    }

    /// Runs one ACLI line with JSON output; returns the whole response object.
    pub(crate) async fn exec(&mut self, line: &str) -> anyhow::Result<Value> {
        let r = tokio::time::timeout(Duration::from_secs(2), self.exec_inner(line)).await;
        match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                self.conn = None;
                Err(e)
            }
            Err(_) => {
                self.conn = None;
                bail!("{}: no answer to {line:?} within 2 s", self.path.display())
            }
        }
    }

    async fn exec_inner(&mut self, line: &str) -> anyhow::Result<Value> {
        if self.conn.is_none() {
            let s = UnixStream::connect(&self.path).await?;
            let (r, w) = s.into_split();
            self.conn = Some((BufReader::new(r), w));
        }
        let Some((reader, writer)) = self.conn.as_mut() else {
            bail!("not connected");
        };
        let mut req = serde_json::to_vec(&json!({"op": "exec", "line": line, "json": true}))?;
        req.push(b'\n');
        writer.write_all(&req).await?;
        let mut resp = String::new();
        if reader.read_line(&mut resp).await? == 0 {
            bail!("management socket closed");
        }
        let v: Value = serde_json::from_str(&resp)?;
        if v.get("ok").and_then(Value::as_bool) != Some(true) {
            bail!(
                "{line:?} refused: {}",
                v.get("error").and_then(Value::as_str).unwrap_or("?")
            );
        }
        Ok(v)
    }

    /// The `data` of a JSON command.
    pub(crate) async fn data(&mut self, line: &str) -> anyhow::Result<Value> {
        Ok(self
            .exec(line)
            .await?
            .get("data")
            .cloned()
            .unwrap_or(Value::Null))
    }

    /// The text output of a command.
    pub(crate) async fn text(&mut self, line: &str) -> anyhow::Result<String> {
        Ok(self
            .exec(line)
            .await?
            .get("output")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned())
    }
}

/// What the demo reads from one node at every tick.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct NodeView {
    /// Whether the node answered.
    pub(crate) up: bool,
    /// Redundancy state (`active`, `standby`, `out-of-service`, ...).
    pub(crate) state: String,
    /// Health score.
    pub(crate) health: u8,
    /// Not eligible to become active until restarted.
    pub(crate) ineligible: bool,
    /// Memory utilisation, percent of the process source (resident / 64 MB).
    pub(crate) memory: Option<f64>,
    /// Resident bytes measured by the memory source.
    pub(crate) memory_used: Option<u64>,
    /// Calls (dialogs) the node holds.
    pub(crate) calls: u64,
    /// Calls the node answered (2xx relayed) since it started.
    pub(crate) answered: u64,
}

impl NodeView {
    /// Reads `show redundancy`, `show memory` and `show sip-stats`.
    pub(crate) async fn read(m: &mut Mgmt) -> Self {
        let mut v = Self::default();
        let Ok(r) = m.data("show redundancy").await else {
            return v;
        };
        v.up = true;
        v.state = r["state"].as_str().unwrap_or("?").to_owned();
        v.health = r["health"]
            .as_u64()
            .and_then(|h| u8::try_from(h).ok())
            .unwrap_or(0);
        v.ineligible = r["ineligible_until_restart"].as_bool().unwrap_or(false);
        if let Ok(mem) = m.data("show memory").await {
            v.memory = mem["readings"]["memory_percent"].as_f64();
            v.memory_used = mem["readings"]["memory_bytes"][0].as_u64();
        }
        if let Ok(s) = m.data("show sip-stats").await {
            v.calls = s["calls_active"].as_u64().unwrap_or(0);
            v.answered = s["counters"]["calls_answered"].as_u64().unwrap_or(0);
        }
        v
    }

    /// Whether it is the active.
    pub(crate) fn is_active(&self) -> bool {
        self.up && self.state == "active"
    }
}
