//! Starting and stopping one `sbc` node.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::{ports, tail_of_file, TestDir};

/// How long `sbc` may take to print `sbc ready`.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `sbc` may take to exit after SIGTERM before it gets SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The `sbc` binary under test: `$SBC_BIN` when set (to test another build, e.g. a release
/// binary), else `$CARGO_BIN_EXE_sbc`, which Cargo sets when it runs the `sbc` package's own
/// integration tests (`cargo test -p sbc --test e2e`) after building that binary. Nothing is
/// guessed from paths.
///
/// # Panics
/// If neither is set or the file is missing.
#[must_use]
pub fn sbc_binary() -> PathBuf {
    let (var, path) = match std::env::var_os("SBC_BIN") {
        Some(path) => ("SBC_BIN", path),
        None => match std::env::var_os("CARGO_BIN_EXE_sbc") {
            Some(path) => ("CARGO_BIN_EXE_sbc", path),
            None => panic!(
                "no sbc binary: run the tests with `cargo test -p sbc --test e2e` (Cargo builds \
                 the binary and sets CARGO_BIN_EXE_sbc) or set SBC_BIN"
            ),
        },
    };
    let path = PathBuf::from(path);
    assert!(path.is_file(), "{var}={} is not a file", path.display());
    path
}

/// A private copy of the `sbc` binary in `dir` (a hard link when the file system allows it,
/// else a copy), for tests that `reboot` a node: `reboot` re-executes the binary the process
/// was started from, and a `cargo build` running at the same time replaces
/// `target/debug/sbc` under it. A test that wants exactly that situation replaces its own copy.
///
/// # Panics
/// If neither a link nor a copy can be made.
#[must_use]
pub fn private_binary(dir: &TestDir) -> PathBuf {
    let src = sbc_binary();
    let dst = dir.file("sbc-bin");
    let _ = std::fs::remove_file(&dst);
    if std::fs::hard_link(&src, &dst).is_err() {
        std::fs::copy(&src, &dst)
            .unwrap_or_else(|e| panic!("cannot copy {} to {}: {e}", src.display(), dst.display()));
    }
    dst
}

/// The parameters of a test SBC node's config file; [`SbcConfig::to_toml`] writes it.
///
/// [`SbcConfig::new`] gives an access interface on 127.0.0.1, a core interface on 127.0.0.2
/// and a core session-agent on 127.0.0.1, each on a fresh port, UDP to the agent, T1 = 500 ms.
#[derive(Debug, Clone)]
pub struct SbcConfig {
    /// `sip-config.t1-ms`.
    pub t1_ms: u64,
    /// `sip-config.workers`.
    pub workers: usize,
    /// `sip-config.max-message-size`, if not the default.
    pub max_message_size: Option<usize>,
    /// `sip-config.shutdown-grace-ms`: kept short so that SIGTERM stops a test node quickly.
    pub shutdown_grace_ms: u64,
    /// The access `sip-interface` (UDP and TCP).
    pub access: SocketAddr,
    /// The core `sip-interface` (UDP and TCP).
    pub core: SocketAddr,
    /// The `core` session-agent, the default route.
    pub agent: SocketAddr,
    /// The transport to the agent: `"udp"`, `"tcp"` or `"tls"` (with [`SbcConfig::tls`]).
    pub agent_transport: &'static str,
    /// More `sip-config` lines (`key = value`), e.g. TCP limits.
    pub sip_lines: Vec<String>,
    /// More TOML appended to the file (whole tables, e.g. `[[access-control]]`).
    pub extra_toml: String,
    /// More lines of the access `sip-interface` (`key = value`), e.g. registration caching.
    pub access_lines: Vec<String>,
    /// TLS on both interfaces with one `tls-profile` (and, with `agent_transport = "tls"`,
    /// toward the agent), if set.
    pub tls: Option<TlsSetup>,
}

/// A test node's `tls-profile` `edge` and TLS ports.
#[derive(Debug, Clone)]
pub struct TlsSetup {
    /// `end-entity-certificate`.
    pub cert: PathBuf,
    /// `private-key`.
    pub key: PathBuf,
    /// `trusted-ca-certificates` (one file).
    pub ca: PathBuf,
    /// `mutual-authenticate`.
    pub mutual: bool,
    /// `verify-names`.
    pub verify_names: Vec<String>,
    /// The agent's `tls-server-name`, if any.
    pub agent_server_name: Option<String>,
    /// The access interface's `tls-port`.
    pub access_port: u16,
    /// The core interface's `tls-port`.
    pub core_port: u16,
    /// More lines of the profile (`key = value`).
    pub profile_lines: Vec<String>,
}

impl TlsSetup {
    /// A profile with these files on fresh TLS ports, no mutual authentication.
    #[must_use]
    pub fn new(cert: &Path, key: &Path, ca: &Path) -> Self {
        Self {
            cert: cert.to_owned(),
            key: key.to_owned(),
            ca: ca.to_owned(),
            mutual: false,
            verify_names: Vec::new(),
            agent_server_name: None,
            access_port: ports::free_port(),
            core_port: ports::free_port(),
            profile_lines: Vec::new(),
        }
    }
}

impl Default for SbcConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl SbcConfig {
    /// A config on fresh ports (see the type's doc).
    #[must_use]
    pub fn new() -> Self {
        Self::with_addresses(
            IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
            IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
        )
    }

    /// A config whose access interface, core interface and agent are on the given addresses,
    /// each with a fresh port.
    #[must_use]
    pub fn with_addresses(access: IpAddr, core: IpAddr, agent: IpAddr) -> Self {
        Self {
            t1_ms: 500,
            workers: 2,
            max_message_size: None,
            shutdown_grace_ms: 1000,
            access: SocketAddr::new(access, ports::free_port()),
            core: SocketAddr::new(core, ports::free_port()),
            agent: SocketAddr::new(agent, ports::free_port()),
            agent_transport: "udp",
            sip_lines: Vec::new(),
            extra_toml: String::new(),
            access_lines: Vec::new(),
            tls: None,
        }
    }

    /// The TOML config file.
    #[must_use]
    pub fn to_toml(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "[sip-config]");
        let _ = writeln!(s, "t1-ms = {}", self.t1_ms);
        let _ = writeln!(s, "workers = {}", self.workers);
        let _ = writeln!(s, "shutdown-grace-ms = {}", self.shutdown_grace_ms);
        if let Some(max) = self.max_message_size {
            let _ = writeln!(s, "max-message-size = {max}");
        }
        for line in &self.sip_lines {
            let _ = writeln!(s, "{line}");
        }
        for (realm, addr) in [("access", self.access), ("core", self.core)] {
            let _ = writeln!(s, "\n[[sip-interface]]");
            let _ = writeln!(s, "realm = \"{realm}\"");
            let _ = writeln!(s, "address = \"{}\"", addr.ip());
            let _ = writeln!(s, "port = {}", addr.port());
            if realm == "access" {
                for line in &self.access_lines {
                    let _ = writeln!(s, "{line}");
                }
            }
            match &self.tls {
                None => {
                    let _ = writeln!(s, "transports = [\"udp\", \"tcp\"]");
                }
                Some(t) => {
                    let port = if realm == "access" {
                        t.access_port
                    } else {
                        t.core_port
                    };
                    let _ = writeln!(s, "transports = [\"udp\", \"tcp\", \"tls\"]");
                    let _ = writeln!(s, "tls-port = {port}");
                    let _ = writeln!(s, "tls-profile = \"edge\"");
                }
            }
        }
        let _ = writeln!(s, "\n[[session-agent]]");
        let _ = writeln!(s, "name = \"core\"");
        let _ = writeln!(s, "realm = \"core\"");
        let _ = writeln!(s, "address = \"{}\"", self.agent.ip());
        let _ = writeln!(s, "port = {}", self.agent.port());
        let _ = writeln!(s, "transport = \"{}\"", self.agent_transport);
        if let (Some(t), "tls") = (&self.tls, self.agent_transport) {
            let _ = writeln!(s, "tls-profile = \"edge\"");
            if let Some(n) = &t.agent_server_name {
                let _ = writeln!(s, "tls-server-name = \"{n}\"");
            }
        }
        let _ = writeln!(s, "\n[session-router]");
        let _ = writeln!(s, "default-route = \"core\"");
        if let Some(t) = &self.tls {
            let _ = writeln!(s, "\n[[tls-profile]]");
            let _ = writeln!(s, "name = \"edge\"");
            let _ = writeln!(s, "end-entity-certificate = \"{}\"", t.cert.display());
            let _ = writeln!(s, "private-key = \"{}\"", t.key.display());
            let _ = writeln!(s, "trusted-ca-certificates = [\"{}\"]", t.ca.display());
            let _ = writeln!(s, "mutual-authenticate = {}", t.mutual);
            if !t.verify_names.is_empty() {
                let names: Vec<String> =
                    t.verify_names.iter().map(|n| format!("\"{n}\"")).collect();
                let _ = writeln!(s, "verify-names = [{}]", names.join(", "));
            }
            for line in &t.profile_lines {
                let _ = writeln!(s, "{line}");
            }
        }
        s.push_str(&self.extra_toml);
        s
    }
}

/// A running `sbc run --config FILE` process.
///
/// Its config, stdout and stderr live in its [`TestDir`] (`sbc.toml`, `sbc.stdout.log`,
/// `sbc.stderr.log`). `RUST_LOG` is passed through, and defaults to `debug` so that a failing
/// test's kept directory shows one line per call event. Dropping the node sends SIGTERM to its
/// PID, waits up to [`STOP_TIMEOUT`], then sends SIGKILL and reaps it; when the test is failing
/// the tail of its stderr is printed.
#[derive(Debug)]
pub struct SbcNode {
    child: Option<Child>,
    dir: TestDir,
    stderr_path: PathBuf,
    /// How many `sbc ready` lines stdout has shown (more than one after a `reboot`).
    ready_lines: Arc<AtomicUsize>,
}

impl SbcNode {
    /// Starts a node with this config text in a new [`TestDir`] named after the current test.
    ///
    /// # Panics
    /// If the binary is missing, does not start, exits, or does not print `sbc ready` within
    /// [`READY_TIMEOUT`].
    #[must_use]
    pub fn start(config_toml: &str) -> Self {
        Self::start_in(&TestDir::for_current_test(), config_toml)
    }

    /// As [`SbcNode::start`], but running a [`private_binary`] copy of `sbc` in the test's
    /// directory: for tests that `reboot` the node.
    #[must_use]
    pub fn start_private(config_toml: &str) -> Self {
        let dir = TestDir::for_current_test();
        let config_path = dir.file("sbc.toml");
        std::fs::write(&config_path, config_toml)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", config_path.display()));
        Self::start_existing_with(&dir, &private_binary(&dir))
    }

    /// Starts a node from an [`SbcConfig`] in a new [`TestDir`] named after the current test.
    #[must_use]
    pub fn start_config(config: &SbcConfig) -> Self {
        Self::start(&config.to_toml())
    }

    /// Starts a node with this config text in `dir`.
    ///
    /// # Panics
    /// As [`SbcNode::start`].
    #[must_use]
    pub fn start_in(dir: &TestDir, config_toml: &str) -> Self {
        let config_path = dir.file("sbc.toml");
        std::fs::write(&config_path, config_toml)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", config_path.display()));
        Self::start_existing(dir)
    }

    /// Starts a node in `dir` on the config file already there (`dir/sbc.toml`, as a previous
    /// node left it; it may also not exist), with the management socket `dir/mgmt.sock`.
    ///
    /// # Panics
    /// As [`SbcNode::start`].
    #[must_use]
    pub fn start_existing(dir: &TestDir) -> Self {
        Self::start_existing_with(dir, &sbc_binary())
    }

    /// Starts the binary `bin` in `dir` on the config file already there, as
    /// [`SbcNode::start_existing`] does (see [`private_binary`] for why a test may want its
    /// own copy of the binary).
    ///
    /// # Panics
    /// As [`SbcNode::start`].
    #[must_use]
    pub fn start_existing_with(dir: &TestDir, bin: &Path) -> Self {
        let bin = bin.to_path_buf();
        let config_path = dir.file("sbc.toml");
        let stderr_path = dir.file("sbc.stderr.log");
        let stderr = std::fs::File::create(&stderr_path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", stderr_path.display()));
        let mut cmd = Command::new(&bin);
        cmd.arg("run")
            .arg("--config")
            .arg(&config_path)
            .arg("--mgmt-socket")
            .arg(dir.file("mgmt.sock"))
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr));
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "debug");
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));

        // A thread copies stdout into sbc.stdout.log and reports the `sbc ready` line.
        let stdout = child.stdout.take().expect("stdout is piped");
        let stdout_path = dir.file("sbc.stdout.log");
        let (ready_tx, ready_rx) = mpsc::channel();
        let ready_lines = Arc::new(AtomicUsize::new(0));
        let ready_counter = Arc::clone(&ready_lines);
        std::thread::spawn(move || {
            let mut log = std::fs::File::create(stdout_path).ok();
            let mut ready_tx = Some(ready_tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(log) = log.as_mut() {
                    let _ = writeln!(log, "{line}");
                }
                if line.contains("sbc ready") {
                    ready_counter.fetch_add(1, Ordering::SeqCst);
                    if let Some(tx) = ready_tx.take() {
                        let _ = tx.send(());
                    }
                }
            }
        });

        let mut node = Self {
            child: Some(child),
            dir: dir.clone(),
            stderr_path,
            ready_lines,
        };
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            match ready_rx.recv_timeout(Duration::from_millis(50)) {
                Ok(()) => return node,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    node.fail("closed stdout (exited?) before printing `sbc ready`");
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if let Some(status) = node.try_status() {
                node.fail(&format!("exited with {status} before printing `sbc ready`"));
            }
            if Instant::now() > deadline {
                node.fail(&format!(
                    "did not print `sbc ready` within {READY_TIMEOUT:?}"
                ));
            }
        }
    }

    fn fail(&mut self, why: &str) -> ! {
        self.stop();
        // Drop prints the tail of stderr while this panic unwinds.
        panic!(
            "sbc {why}\n--- config ---\n{}",
            std::fs::read_to_string(self.dir.file("sbc.toml")).unwrap_or_default(),
        );
    }

    /// The node's management socket (for `sbc acli --mgmt-socket`).
    #[must_use]
    pub fn mgmt_socket(&self) -> PathBuf {
        self.dir.file("mgmt.sock")
    }

    /// The node's configuration file.
    #[must_use]
    pub fn config_path(&self) -> PathBuf {
        self.dir.file("sbc.toml")
    }

    /// How many `sbc ready` lines the process has printed: 1 after start, one more after each
    /// `reboot` (the process re-executes itself and keeps its PID and stdout).
    #[must_use]
    pub fn ready_count(&self) -> usize {
        self.ready_lines.load(Ordering::SeqCst)
    }

    /// Waits up to `timeout` until [`SbcNode::ready_count`] reaches `n`; returns whether it did.
    #[must_use]
    pub fn wait_ready_count(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.ready_count() >= n {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.ready_count() >= n
    }

    /// The process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The node's temporary directory (share it with the test's SIPp processes).
    #[must_use]
    pub fn dir(&self) -> &TestDir {
        &self.dir
    }

    /// The node's stderr log file.
    #[must_use]
    pub fn stderr_path(&self) -> &Path {
        &self.stderr_path
    }

    fn try_status(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Whether the process is still running.
    pub fn is_alive(&mut self) -> bool {
        self.child.is_some() && self.try_status().is_none()
    }

    /// Panics (with the tail of stderr) unless the process is still running.
    pub fn assert_alive(&mut self) {
        if let Some(status) = self.try_status() {
            panic!(
                "sbc exited unexpectedly with {status}\n--- tail of {} ---\n{}",
                self.stderr_path.display(),
                tail_of_file(&self.stderr_path, 60)
            );
        }
    }

    /// Kills the process with SIGKILL (to its PID only) and reaps it; returns its exit status
    /// (`None` if it was already stopped).
    pub fn kill(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        let _ = child.kill();
        child.wait().ok()
    }

    /// Stops the process: SIGTERM to its PID, up to [`STOP_TIMEOUT`] to exit, then SIGKILL.
    /// Returns its exit status (`None` if it was already stopped).
    pub fn stop(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid fits in i32"));
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("sbc-e2e: sbc pid {pid} ignored SIGTERM for {STOP_TIMEOUT:?}; sending SIGKILL");
        let _ = child.kill();
        child.wait().ok()
    }
}

impl Drop for SbcNode {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!(
                "--- tail of {} ---\n{}",
                self.stderr_path.display(),
                tail_of_file(&self.stderr_path, 60)
            );
        }
    }
}
