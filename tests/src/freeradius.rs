//! FreeRADIUS 3.2 (Debian's `freeradius`) as a real RADIUS accounting server (RFC 2866): a
//! minimal configuration written into a test's directory, run in the foreground on a fresh
//! loopback UDP port, every Accounting-Request it accepts written to one `detail` file that a
//! test reads back ([`FreeRadius::entries`]); `radclient` (Debian's `freeradius-utils`) sends
//! requests by hand ([`radclient_acct`]).
//!
//! # The configuration
//!
//! [`FreeRadius::start_in`] writes `radiusd.conf` and `dictionary` into `<dir>/freeradius-<port>`
//! and runs `freeradius -d <that dir> -f -s -l stdout` (foreground, single-threaded, its log on
//! stdout, redirected to `freeradius.log` beside the config). `radiusd.conf` points `prefix`,
//! `raddbdir`, `radacctdir`, `logdir` and `run_dir` at that directory (nothing is read from
//! `/etc/freeradius`, nothing written to `/var`); it has one `listen` (type `acct`,
//! 127.0.0.1, the fresh port: never 1812/1813, where a system FreeRADIUS may run), one `client`
//! (127.0.0.1 with the test's secret), and one `server` whose `accounting` section runs one
//! `detail` module writing to `<dir>/detail` with `log_packet_header = yes`. No
//! authentication, no EAP, no SQL, no `user`/`group`: it runs as whoever runs the test (root
//! in CI). The local `dictionary` `$INCLUDE`s `/usr/share/freeradius/dictionary`, which
//! includes `dictionary.acme` (vendor 9148), so Acme Packet VSAs are written by name
//! (`Acme-Session-Ingress-Realm = "access"`, not `Attr-26.9148.41 = 0x...`).
//!
//! # The detail file
//!
//! One entry per Accounting-Request FreeRADIUS accepted, in the order it processed them: a
//! header line (the date, `Fri Dec  4 09:50:51 2026`), then one tab-indented `Name = value` line
//! per attribute, then a blank line. FreeRADIUS adds attributes of its own: first
//! `Packet-Src-IP-Address`, `Packet-Dst-IP-Address`, `Packet-Src-Port`, `Packet-Dst-Port`
//! (`log_packet_header`: they tell which node of a pair sent a request), then the request's
//! attributes as received (`Acct-Delay-Time` as the client sent it), then `Timestamp` (the
//! Unix time it received the request). [`DetailEntry`] keeps them all, in order. A request
//! with a wrong secret (a bad Request Authenticator) is dropped unanswered and not written;
//! FreeRADIUS logs `Shared secret is incorrect`.
//!
//! # Resends and FreeRADIUS's duplicate detection
//!
//! What was found with FreeRADIUS 3.2.1 (and is checked by `tests/tests/freeradius.rs`):
//! every resend is a new entry, even a byte-identical one (same source port, same Identifier,
//! same authenticator). FreeRADIUS detects duplicates (same client address and port, same
//! Identifier, same Request Authenticator) only among the requests it still holds, and it holds
//! no Accounting-Request once answered: `request_cleanup_delay_init` in `src/main/process.c`
//! skips `cleanup_delay` for Accounting-Requests ("they should always be updated with
//! Acct-Delay-Time"), where an Access-Request's reply is kept `cleanup_delay` seconds and a
//! duplicate answered from it without being processed again. A duplicate arriving while the
//! original is still being processed would be dropped (`Ignoring duplicate packet`), but with
//! `-s` FreeRADIUS reads its socket only between requests, so the original is always answered
//! and forgotten first: even copies queued while it was paused ([`FreeRadius::pause`]) are each
//! written. Counting entries therefore counts every Accounting-Request that reached it.
//!
//! # Timing
//!
//! Starting takes 20 to 50 ms until the port is bound (the dictionaries parsed), stopping
//! (SIGTERM) about 5 ms, on this project's 2-core machines. Both are bounded
//! ([`START_TIMEOUT`], [`STOP_TIMEOUT`]).
//!
//! # RADIUS over TLS (RFC 6614)
//!
//! [`FreeRadius::start_radsec_in`] writes the same server with a TLS `listen` instead (`proto
//! = tcp`, a `tls` section with the test's certificate, key and CA, `require_client_cert =
//! yes`, TLS 1.2 as FreeRADIUS 3.2 recommends for RadSec) and a `clients` section whose client
//! 127.0.0.1 has `proto = tls`. FreeRADIUS refuses TLS sockets without threads ("Threading
//! must be enabled for TLS sockets"), so this one runs without `-s`, with a small thread pool.
//!
//! A missing `freeradius` or `radclient` is an error naming the Debian packages
//! (`freeradius freeradius-utils`): the tests fail, they never skip.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::{dir::current_test_name, ports, TestDir};

/// The Debian packages the FreeRADIUS tests need, as `apt-get install` takes them.
pub const PACKAGES: &str = "freeradius freeradius-utils";

/// Where Debian installs FreeRADIUS's dictionaries (`dictionary` includes `dictionary.acme`).
pub const DICTIONARY_DIR: &str = "/usr/share/freeradius";

/// How long [`FreeRadius::start_in`] and [`FreeRadius::start_again`] wait for the port to be
/// bound.
pub const START_TIMEOUT: Duration = Duration::from_secs(5);

/// How long [`FreeRadius::stop`] (and dropping) waits after SIGTERM before SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The name of the detail file in the server's directory.
pub const DETAIL_FILE: &str = "detail";

/// The name of FreeRADIUS's log (its stdout and stderr) in the server's directory.
pub const LOG_FILE: &str = "freeradius.log";

/// A FreeRADIUS accounting server started by a test, killed by its PID when dropped (SIGCONT
/// in case it is paused, SIGTERM, then SIGKILL after [`STOP_TIMEOUT`], reaped).
#[derive(Debug)]
pub struct FreeRadius {
    /// Keeps the test's directory (and so the detail file and the log) alive.
    _test_dir: TestDir,
    dir: PathBuf,
    binary: PathBuf,
    port: u16,
    secret: String,
    /// Listening on TLS (RadSec) rather than UDP.
    tls: Option<RadsecFiles>,
    child: Option<Child>,
}

/// The PEM files of a RadSec listener: its certificate and key, and the CA its clients'
/// certificates must chain to.
#[derive(Debug, Clone)]
pub struct RadsecFiles {
    /// The server's certificate.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// The CA of the clients' certificates.
    pub ca: PathBuf,
}

impl FreeRadius {
    /// Starts FreeRADIUS with `secret` for client 127.0.0.1, in a fresh test directory named
    /// after the current test (see [`FreeRadius::start_in`]).
    ///
    /// # Errors
    /// As [`FreeRadius::start_in`].
    pub fn start(secret: &str) -> anyhow::Result<Self> {
        let label = format!(
            "{}-radius",
            current_test_name().as_deref().unwrap_or("test")
        );
        Self::start_in(&TestDir::new(&label), secret)
    }

    /// Writes the configuration into `<dir>/freeradius-<port>` (a fresh port, see the module
    /// documentation), starts FreeRADIUS and waits until it has bound the port.
    ///
    /// # Errors
    /// `freeradius` or the dictionaries are not installed (the message names the Debian
    /// packages), the files cannot be written, or FreeRADIUS exits or does not bind its port
    /// within [`START_TIMEOUT`] (the message has its log).
    pub fn start_in(dir: &TestDir, secret: &str) -> anyhow::Result<Self> {
        Self::start_with(dir, secret, None)
    }

    /// As [`FreeRadius::start_in`], listening on RADIUS over TLS (RFC 6614) on a fresh TCP
    /// port with `files` (see the module documentation).
    ///
    /// # Errors
    /// As [`FreeRadius::start_in`].
    pub fn start_radsec_in(
        dir: &TestDir,
        secret: &str,
        files: RadsecFiles,
    ) -> anyhow::Result<Self> {
        Self::start_with(dir, secret, Some(files))
    }

    fn start_with(dir: &TestDir, secret: &str, tls: Option<RadsecFiles>) -> anyhow::Result<Self> {
        let binary = find_tool("freeradius")?;
        let dictionary = Path::new(DICTIONARY_DIR).join("dictionary");
        if !dictionary.is_file() {
            bail!(
                "{} not found: install the Debian packages: apt-get install -y {PACKAGES}",
                dictionary.display()
            );
        }
        let port = ports::free_port();
        let conf_dir = dir.file(&format!("freeradius-{port}"));
        std::fs::create_dir_all(&conf_dir)
            .with_context(|| format!("cannot create {}", conf_dir.display()))?;
        let files = [
            (
                "radiusd.conf",
                radiusd_conf(&conf_dir, port, secret, tls.as_ref()),
            ),
            ("dictionary", format!("$INCLUDE {}\n", dictionary.display())),
        ];
        for (name, text) in files {
            let path = conf_dir.join(name);
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        let mut server = Self {
            _test_dir: dir.clone(),
            dir: conf_dir,
            binary,
            port,
            secret: secret.to_owned(),
            tls,
            child: None,
        };
        server.spawn()?;
        Ok(server)
    }

    /// Starts FreeRADIUS again after [`FreeRadius::stop`]: the same port, directory and
    /// configuration; new entries are appended to the same detail file, the log goes on.
    ///
    /// # Errors
    /// It is still running, or as [`FreeRadius::start_in`].
    pub fn start_again(&mut self) -> anyhow::Result<()> {
        if self.is_running() {
            bail!("FreeRADIUS on port {} is still running", self.port);
        }
        self.spawn()
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let log_path = self.log_path();
        // Where this run's log starts: an error quotes only this run's.
        let log_start = std::fs::metadata(&log_path).map_or(0, |m| m.len());
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("cannot open {}", log_path.display()))?;
        let log_err = log
            .try_clone()
            .with_context(|| format!("cannot open {} twice", log_path.display()))?;
        // TLS listeners need threads: no -s for them.
        let flags: &[&str] = if self.tls.is_some() {
            &["-f", "-l", "stdout"]
        } else {
            &["-f", "-s", "-l", "stdout"]
        };
        let mut child = Command::new(&self.binary)
            .arg("-d")
            .arg(&self.dir)
            .args(flags)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .with_context(|| {
                format!(
                    "cannot run {} (Debian packages: {PACKAGES})",
                    self.binary.display()
                )
            })?;
        let pid = child.id();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => bail!(
                    "FreeRADIUS exited ({status}) before binding 127.0.0.1:{}; its log ({}):\n{}",
                    self.port,
                    log_path.display(),
                    self.log_since(log_start)
                ),
                Ok(None) => {}
                Err(e) => {
                    crate::terminate(&mut child, STOP_TIMEOUT);
                    return Err(anyhow!(e).context("cannot wait for FreeRADIUS"));
                }
            }
            let table = if self.tls.is_some() {
                "/proc/net/tcp"
            } else {
                "/proc/net/udp"
            };
            if bound_by(table, pid, Ipv4Addr::LOCALHOST, self.port) {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() >= deadline {
                crate::terminate(&mut child, STOP_TIMEOUT);
                bail!(
                    "FreeRADIUS (PID {pid}) did not bind 127.0.0.1:{} within {START_TIMEOUT:?}; \
                     its log ({}):\n{}",
                    self.port,
                    log_path.display(),
                    self.log_since(log_start)
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops FreeRADIUS: SIGCONT (in case it is paused), SIGTERM to its PID, and waits up to
    /// [`STOP_TIMEOUT`] for it to exit; then SIGKILL. Does nothing if it is not running.
    ///
    /// # Errors
    /// It did not exit on SIGTERM in time (it was killed and reaped all the same).
    pub fn stop(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if let Ok(Some(_)) = child.try_wait() {
            return Ok(());
        }
        let pid = pid_of(&child);
        if let Some(pid) = pid {
            let _ = kill(pid, Signal::SIGCONT);
            let _ = kill(pid, Signal::SIGTERM);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
        bail!("FreeRADIUS did not exit within {STOP_TIMEOUT:?} of SIGTERM: killed")
    }

    /// Freezes FreeRADIUS (SIGSTOP to its PID): requests queue in its socket unanswered until
    /// [`FreeRadius::resume`].
    ///
    /// # Errors
    /// It is not running, or the signal cannot be sent.
    pub fn pause(&mut self) -> anyhow::Result<()> {
        self.signal(Signal::SIGSTOP)
    }

    /// Thaws FreeRADIUS after [`FreeRadius::pause`] (SIGCONT to its PID).
    ///
    /// # Errors
    /// It is not running, or the signal cannot be sent.
    pub fn resume(&mut self) -> anyhow::Result<()> {
        self.signal(Signal::SIGCONT)
    }

    fn signal(&mut self, signal: Signal) -> anyhow::Result<()> {
        if !self.is_running() {
            bail!("FreeRADIUS on port {} is not running", self.port);
        }
        let pid = self
            .child
            .as_ref()
            .and_then(pid_of)
            .ok_or_else(|| anyhow!("FreeRADIUS has no PID"))?;
        kill(pid, signal).with_context(|| format!("cannot send {signal} to FreeRADIUS"))
    }

    /// Whether the FreeRADIUS process is alive (a paused one is).
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The PID of the running process, if any.
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The port it listens on (on 127.0.0.1): UDP, or TCP for RadSec.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:<port>`, where accounting requests go.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), self.port)
    }

    /// The shared secret of client 127.0.0.1.
    #[must_use]
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The server's directory (`radiusd.conf`, `dictionary`, the detail file, the log).
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The detail file: every accepted Accounting-Request, across restarts.
    #[must_use]
    pub fn detail_path(&self) -> PathBuf {
        self.dir.join(DETAIL_FILE)
    }

    /// FreeRADIUS's log (its stdout and stderr, across restarts).
    #[must_use]
    pub fn log_path(&self) -> PathBuf {
        self.dir.join(LOG_FILE)
    }

    /// Everything FreeRADIUS logged so far (lossy UTF-8), or a note saying why it could not be
    /// read.
    #[must_use]
    pub fn log(&self) -> String {
        match std::fs::read(self.log_path()) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => format!("<cannot read {}: {e}>", self.log_path().display()),
        }
    }

    /// What FreeRADIUS logged from byte `offset` of its log on.
    fn log_since(&self, offset: u64) -> String {
        match std::fs::read(self.log_path()) {
            Ok(bytes) => {
                let offset = usize::try_from(offset).unwrap_or(usize::MAX);
                String::from_utf8_lossy(bytes.get(offset..).unwrap_or(&bytes)).into_owned()
            }
            Err(e) => format!("<cannot read {}: {e}>", self.log_path().display()),
        }
    }

    /// The complete entries of the detail file so far, in order (none if FreeRADIUS has not
    /// written it yet); an entry still being written is left out.
    ///
    /// # Panics
    /// The file exists but cannot be read.
    #[must_use]
    pub fn entries(&self) -> Vec<DetailEntry> {
        let path = self.detail_path();
        match std::fs::read(&path) {
            Ok(bytes) => parse_detail(&String::from_utf8_lossy(&bytes)),
            Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("cannot read {}: {e}", path.display()),
        }
    }

    /// Polls the detail file (every 10 ms) until it holds at least `n` entries or `timeout`
    /// passes; returns the entries it holds then (fewer than `n` after a timeout: the caller
    /// asserts, with the count it expects).
    ///
    /// # Panics
    /// As [`FreeRadius::entries`].
    #[must_use]
    pub fn wait_for_entries(&self, n: usize, timeout: Duration) -> Vec<DetailEntry> {
        let deadline = Instant::now() + timeout;
        loop {
            let entries = self.entries();
            if entries.len() >= n || Instant::now() >= deadline {
                return entries;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for FreeRadius {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = pid_of(&child) {
                let _ = kill(pid, Signal::SIGCONT);
            }
            crate::terminate(&mut child, STOP_TIMEOUT);
        }
        if std::thread::panicking() {
            eprintln!(
                "--- FreeRADIUS log ({}) ---\n{}",
                self.log_path().display(),
                self.log()
            );
        }
    }
}

fn pid_of(child: &Child) -> Option<Pid> {
    i32::try_from(child.id()).ok().map(Pid::from_raw)
}

/// `name` in `PATH` or in `/usr/sbin` (not in a non-root user's `PATH`).
fn find_tool(name: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/local/sbin".into()])
        .map(|d: PathBuf| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            anyhow!(
                "{name} not found: the FreeRADIUS tests need the Debian packages {PACKAGES} \
                 (apt-get install -y {PACKAGES})"
            )
        })
}

/// A string in FreeRADIUS's configuration syntax: double-quoted, `"` and `\` escaped.
fn conf_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The whole `radiusd.conf` of a server in `dir` on 127.0.0.1:`port`, on UDP or, with `tls`,
/// RADIUS over TLS (see the module docs).
fn radiusd_conf(dir: &Path, port: u16, secret: &str, tls: Option<&RadsecFiles>) -> String {
    let prefix = conf_string(&dir.display().to_string());
    let secret = conf_string(secret);
    let (clients, listen) = match tls {
        None => (
            format!("client local {{\n\tipaddr = 127.0.0.1\n\tsecret = {secret}\n}}"),
            format!("type = acct\n\t\tipaddr = 127.0.0.1\n\t\tport = {port}"),
        ),
        Some(f) => {
            let file = |p: &Path| conf_string(&p.display().to_string());
            (
                format!(
                    "thread pool {{\n\tstart_servers = 2\n\tmax_servers = 4\n\t\
                     min_spare_servers = 1\n\tmax_spare_servers = 4\n\t\
                     max_requests_per_server = 0\n}}\n\n\
                     clients radsec {{\n\tclient local {{\n\t\tipaddr = 127.0.0.1\n\t\t\
                     proto = tls\n\t\tsecret = {secret}\n\t}}\n}}"
                ),
                format!(
                    "type = acct\n\t\tipaddr = 127.0.0.1\n\t\tport = {port}\n\t\t\
                     proto = tcp\n\t\tclients = radsec\n\t\t\
                     tls {{\n\t\t\tprivate_key_file = {}\n\t\t\tcertificate_file = {}\n\t\t\t\
                     ca_file = {}\n\t\t\trequire_client_cert = yes\n\t\t\t\
                     tls_min_version = \"1.2\"\n\t\t\ttls_max_version = \"1.2\"\n\t\t}}\n\t\t\
                     limit {{\n\t\t\tmax_connections = 16\n\t\t\tlifetime = 0\n\t\t\t\
                     idle_timeout = 0\n\t\t}}",
                    file(&f.key),
                    file(&f.cert),
                    file(&f.ca)
                ),
            )
        }
    };
    format!(
        r#"# Written by sbc-e2e (tests/src/freeradius.rs): accounting only, one detail file.
prefix = {prefix}
exec_prefix = ${{prefix}}
sysconfdir = ${{prefix}}
localstatedir = ${{prefix}}
sbindir = /usr/sbin
logdir = ${{prefix}}
raddbdir = ${{prefix}}
radacctdir = ${{prefix}}
name = freeradius
confdir = ${{raddbdir}}
modconfdir = ${{confdir}}
certdir = ${{confdir}}
cadir = ${{confdir}}
run_dir = ${{prefix}}
db_dir = ${{prefix}}
libdir = /usr/lib/freeradius
pidfile = ${{run_dir}}/radiusd.pid
max_request_time = 30
cleanup_delay = 5
max_requests = 1024
hostname_lookups = no

log {{
	destination = stdout
	stripped_names = no
	auth = no
}}

security {{
	allow_core_dumps = no
	max_attributes = 200
	reject_delay = 0
	status_server = yes
}}

{clients}

modules {{
	detail {{
		filename = ${{radacctdir}}/{DETAIL_FILE}
		escape_filenames = no
		permissions = 0600
		header = "%t"
		locking = no
		log_packet_header = yes
	}}
}}

server default {{
	listen {{
		{listen}
	}}
	accounting {{
		detail
	}}
}}
"#
    )
}

/// Whether a socket bound to `ip:port` is open in process `pid`: its inode in `table`
/// (`/proc/net/udp` or `/proc/net/tcp`) is one of the process's `/proc/<pid>/fd` links
/// (`socket:[inode]`).
fn bound_by(table: &str, pid: u32, ip: Ipv4Addr, port: u16) -> bool {
    let Ok(table) = std::fs::read_to_string(table) else {
        return false;
    };
    // The kernel prints the address as the u32 it holds in network order, read natively.
    let local = format!("{:08X}:{port:04X}", u32::from_ne_bytes(ip.octets()));
    let inodes: Vec<&str> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.get(1) == Some(&local.as_str()))
                .then(|| fields.get(9).copied())
                .flatten()
        })
        .collect();
    if inodes.is_empty() {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(Result::ok).any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| {
            let target = target.to_string_lossy();
            inodes
                .iter()
                .any(|inode| target == format!("socket:[{inode}]"))
        })
    })
}

/// One entry of a FreeRADIUS detail file: one Accounting-Request as FreeRADIUS wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetailEntry {
    /// The header line: the date FreeRADIUS wrote the entry, e.g. `Fri Dec  4 09:50:51 2026`.
    pub header: String,
    /// Every attribute in the order written, names as the dictionary names them, values with
    /// the quotes removed and FreeRADIUS's escapes (`\"`, `\\`, `\n`, `\ooo`) undone: strings,
    /// integers, enumerated names (`Start`, `Interim-Update`, `Stop`), addresses, dates
    /// (`Dec  4 2026 09:49:34 UTC`).
    pub attrs: Vec<(String, String)>,
}

impl DetailEntry {
    /// The value of the first attribute named `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The values of every attribute named `name`, in order.
    #[must_use]
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.attrs
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// Parses the text of a detail file: entries separated by blank lines, each a header line then
/// tab-indented `Name = value` lines. Only complete entries (followed by a blank line) are
/// returned: the last one may still be being written. A line that is not `Name = value`
/// (a `#` comment) is skipped.
#[must_use]
pub fn parse_detail(text: &str) -> Vec<DetailEntry> {
    let mut entries = Vec::new();
    let mut rest = text;
    while let Some(end) = rest.find("\n\n") {
        let block = &rest[..end];
        rest = &rest[end + 2..];
        let mut lines = block.lines().filter(|l| !l.trim().is_empty());
        let Some(header) = lines.next() else {
            continue;
        };
        let attrs = lines
            .filter_map(|line| {
                let line = line.trim();
                if line.starts_with('#') {
                    return None;
                }
                let (name, value) = line.split_once(" = ")?;
                Some((name.trim().to_owned(), unquote(value.trim())))
            })
            .collect();
        entries.push(DetailEntry {
            header: header.trim().to_owned(),
            attrs,
        });
    }
    entries
}

/// A value as FreeRADIUS prints it, unquoted: a `"..."` string loses its quotes and escapes.
fn unquote(value: &str) -> String {
    let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
        return value.to_owned();
    };
    let bytes = inner.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b != b'\\' || i + 1 == bytes.len() {
            out.push(b);
            i += 1;
            continue;
        }
        let next = bytes[i + 1];
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        if let Some(digits) = octal {
            let value = digits
                .iter()
                .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
            out.push(u8::try_from(value).unwrap_or(b'?'));
            i += 4;
            continue;
        }
        out.push(match next {
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            other => other,
        });
        i += 2;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What `radclient` did with one request.
#[derive(Debug, Clone)]
pub struct RadclientOutcome {
    /// Whether an Accounting-Response came back.
    pub answered: bool,
    /// Its exit status (`None` if it was killed at the hard timeout).
    pub status: Option<ExitStatus>,
    /// What it printed on stdout (with `-x`: each request sent and response received).
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

/// Sends one Accounting-Request with `radclient -x -r <retries> -t <timeout_s> <addr> acct
/// <secret>`, `attrs` on its stdin (`Acct-Status-Type = Start, Acct-Session-Id = "abc"`);
/// radclient picks a new source port and Identifier each run and retransmits the same bytes
/// (same port, Identifier and authenticator) after each `timeout_s` without an answer. It
/// is killed by PID if still running `retries × timeout_s + 5` s later.
///
/// # Errors
/// `radclient` is not installed (the message names the Debian packages) or cannot be run.
pub fn radclient_acct(
    addr: SocketAddr,
    secret: &str,
    attrs: &str,
    retries: u32,
    timeout_s: u32,
) -> anyhow::Result<RadclientOutcome> {
    let binary = find_tool("radclient")?;
    let mut child = Command::new(&binary)
        .arg("-x")
        .args(["-r", &retries.to_string(), "-t", &timeout_s.to_string()])
        .arg(addr.to_string())
        .args(["acct", secret])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", binary.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        let written = stdin
            .write_all(attrs.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"));
        if let Err(e) = written {
            crate::terminate(&mut child, Duration::from_secs(1));
            return Err(anyhow!(e).context("cannot write radclient's stdin"));
        }
    }
    let stdout_reader = child.stdout.take().map(read_all);
    let stderr_reader = child.stderr.take().map(read_all);
    let hard = Duration::from_secs(u64::from(retries.max(1)) * u64::from(timeout_s) + 5);
    let deadline = Instant::now() + hard;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                crate::terminate(&mut child, Duration::from_secs(1));
                break None;
            }
        }
    };
    let join = |r: Option<std::thread::JoinHandle<String>>| {
        r.map(|h| h.join().unwrap_or_else(|_| "<reader panicked>".to_owned()))
            .unwrap_or_default()
    };
    let stdout = join(stdout_reader);
    let stderr = join(stderr_reader);
    Ok(RadclientOutcome {
        answered: stdout.contains("Received Accounting-Response"),
        status,
        stdout,
        stderr,
    })
}

fn read_all(mut source: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = source.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detail_entries_keep_every_attribute_in_order_and_skip_a_partial_one() {
        let text = "Fri Dec  4 09:50:51 2026\n\
            \tPacket-Src-IP-Address = 127.0.0.1\n\
            \tAcct-Status-Type = Start\n\
            \tAcct-Session-Id = \"a\\\"b\"\n\
            \tUser-Name = \"x\\001y\"\n\
            \tAcme-Session-Ingress-Realm = \"access\"\n\
            \tAcme-Session-Ingress-Realm = \"core\"\n\
            \tEvent-Timestamp = \"Dec  4 2026 09:49:34 UTC\"\n\
            \tTimestamp = 1796377851\n\
            \n\
            Fri Dec  4 09:50:52 2026\n\
            \tAcct-Status-Type = Stop\n";
        let entries = parse_detail(text);
        assert_eq!(entries.len(), 1, "{entries:?}");
        let e = &entries[0];
        assert_eq!(e.header, "Fri Dec  4 09:50:51 2026");
        assert_eq!(
            e.attrs[0],
            ("Packet-Src-IP-Address".into(), "127.0.0.1".into())
        );
        assert_eq!(e.get("Acct-Status-Type"), Some("Start"));
        assert_eq!(e.get("Acct-Session-Id"), Some("a\"b"));
        assert_eq!(e.get("User-Name"), Some("x\u{1}y"));
        assert_eq!(e.all("Acme-Session-Ingress-Realm"), ["access", "core"]);
        assert_eq!(e.get("Event-Timestamp"), Some("Dec  4 2026 09:49:34 UTC"));
        assert_eq!(e.get("Timestamp"), Some("1796377851"));
        assert_eq!(e.get("Acct-Session-Time"), None);
        assert_eq!(parse_detail(&format!("{text}\n")).len(), 2);
    }

    #[test]
    fn config_strings_are_quoted_and_escaped() {
        assert_eq!(conf_string(r#"a"b\c"#), r#""a\"b\\c""#);
    }
}
