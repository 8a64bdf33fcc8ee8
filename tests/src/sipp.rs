//! Running SIPp: command building, hard timeouts, kill by PID, statistics and traces.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{ports, tail_of_file, TestDir};

/// Finds `sipp` on `PATH`.
///
/// # Panics
/// If it is not there: the tests never skip silently.
#[must_use]
pub fn sipp_binary() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("sipp"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("sipp not found: apt-get install -y sip-tester"))
}

/// A SIPp command line being built. Every run gets, on top of the caller's arguments:
/// `-nostdin`, a control port (`-cp`, on 127.0.0.1) and a media port block (`-mp`) of its own,
/// `-trace_stat -stf NAME.stat.csv -fd 1`, `-trace_counts`, `-trace_msg -message_file
/// NAME.messages.log`, `-trace_err -error_file NAME.errors.log`, and `-timeout N -timeout_error`
/// one second shorter than the harness's hard timeout. Screen output goes to
/// `NAME.stdout.log`/`NAME.stderr.log`. SIPp runs in `DIR/NAME/` so files it names itself (the
/// counts CSV) land there. `-bg` is never used: the harness owns the PID.
#[derive(Debug, Clone)]
pub struct Sipp {
    name: String,
    dir: TestDir,
    args: Vec<OsString>,
    local_ip: Option<IpAddr>,
    timeout: Duration,
}

impl Sipp {
    /// A SIPp run named `name` (used for its files) writing into `dir`; hard timeout 60 s.
    #[must_use]
    pub fn new(dir: &TestDir, name: &str) -> Self {
        Self {
            name: name.to_owned(),
            dir: dir.clone(),
            args: Vec::new(),
            local_ip: None,
            timeout: Duration::from_secs(60),
        }
    }

    /// Appends one argument.
    #[must_use]
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Appends arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// A built-in scenario (`-sn uac`, `-sn uas`, ...).
    #[must_use]
    pub fn builtin(self, scenario: &str) -> Self {
        self.arg("-sn").arg(scenario)
    }

    /// A scenario file from `tests/scenarios` (`-sf`).
    #[must_use]
    pub fn scenario(self, file_name: &str) -> Self {
        let path = crate::scenario(file_name);
        self.arg("-sf").arg(path)
    }

    /// The local signalling address (`-i IP -p PORT`); the media address (`-mi`) follows it.
    #[must_use]
    pub fn local(mut self, addr: SocketAddr) -> Self {
        self.local_ip = Some(addr.ip());
        self.arg("-i")
            .arg(addr.ip().to_string())
            .arg("-p")
            .arg(addr.port().to_string())
    }

    /// The remote host (the positional argument `IP:PORT`).
    #[must_use]
    pub fn remote(self, addr: SocketAddr) -> Self {
        self.arg(addr.to_string())
    }

    /// Number of calls before exiting (`-m`).
    #[must_use]
    pub fn calls(self, n: u32) -> Self {
        self.arg("-m").arg(n.to_string())
    }

    /// Call rate in calls per second (`-r`).
    #[must_use]
    pub fn rate(self, per_second: u32) -> Self {
        self.arg("-r").arg(per_second.to_string())
    }

    /// TCP, one socket (`-t t1`).
    #[must_use]
    pub fn tcp(self) -> Self {
        self.arg("-t").arg("t1")
    }

    /// Sets the hard timeout (SIPp's own `-timeout` is one second shorter).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Starts SIPp in the background. The returned process is killed by PID when dropped.
    ///
    /// # Panics
    /// If `sipp` is not installed or cannot be started.
    #[must_use]
    pub fn spawn(self) -> SippProcess {
        let bin = sipp_binary();
        let work = self.dir.file(&self.name);
        std::fs::create_dir_all(&work)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", work.display()));
        let files = SippFiles::new(&self.dir, &self.name);
        let sipp_timeout = self
            .timeout
            .saturating_sub(Duration::from_secs(1))
            .as_secs()
            .max(1);
        let control_port = ports::free_port();
        let media_port = ports::free_block(4);
        let mut cmd = Command::new(&bin);
        cmd.args(&self.args)
            .arg("-nostdin")
            .args(["-ci", "127.0.0.1", "-cp", &control_port.to_string()])
            .args(["-mp", &media_port.to_string()])
            .args(["-trace_stat", "-fd", "1", "-stf"])
            .arg(&files.stat)
            .arg("-trace_counts")
            .args(["-trace_msg", "-message_file"])
            .arg(&files.messages)
            .args(["-trace_err", "-error_file"])
            .arg(&files.errors)
            .args(["-timeout", &format!("{sipp_timeout}s"), "-timeout_error"]);
        if let Some(ip) = self.local_ip {
            cmd.args(["-mi", &ip.to_string()]);
        }
        let stdout = std::fs::File::create(&files.stdout).expect("create sipp stdout log");
        let stderr = std::fs::File::create(&files.stderr).expect("create sipp stderr log");
        cmd.current_dir(&work)
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr));
        let command_line = format!("{cmd:?}");
        std::fs::write(
            self.dir.file(&format!("{}.cmdline", self.name)),
            &command_line,
        )
        .expect("write sipp command line");
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        SippProcess {
            name: self.name,
            child: Some(child),
            deadline: Instant::now() + self.timeout,
            files,
            work,
            command_line,
            _dir: self.dir,
        }
    }

    /// Runs SIPp in the foreground up to the hard timeout and returns its result.
    #[must_use]
    pub fn run(self) -> SippResult {
        self.spawn().wait()
    }
}

#[derive(Debug, Clone)]
struct SippFiles {
    stat: PathBuf,
    messages: PathBuf,
    errors: PathBuf,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl SippFiles {
    fn new(dir: &TestDir, name: &str) -> Self {
        Self {
            stat: dir.file(&format!("{name}.stat.csv")),
            messages: dir.file(&format!("{name}.messages.log")),
            errors: dir.file(&format!("{name}.errors.log")),
            stdout: dir.file(&format!("{name}.stdout.log")),
            stderr: dir.file(&format!("{name}.stderr.log")),
        }
    }
}

/// A running SIPp process. Dropping it kills it by PID (SIGKILL) if it is still running.
#[derive(Debug)]
pub struct SippProcess {
    name: String,
    child: Option<Child>,
    deadline: Instant,
    files: SippFiles,
    work: PathBuf,
    command_line: String,
    _dir: TestDir,
}

impl SippProcess {
    /// The process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Waits for SIPp to exit, up to its hard timeout (then kills it by PID), and collects the
    /// result.
    #[must_use]
    pub fn wait(self) -> SippResult {
        let deadline = self.deadline;
        self.wait_until(deadline)
    }

    /// As [`SippProcess::wait`], but gives up (kills by PID) at `limit` if that comes before
    /// the hard timeout: used to bound a UAS once its UAC has finished.
    #[must_use]
    pub fn wait_at_most(self, limit: Duration) -> SippResult {
        let deadline = self.deadline.min(Instant::now() + limit);
        self.wait_until(deadline)
    }

    fn wait_until(mut self, deadline: Instant) -> SippResult {
        let mut child = self.child.take().expect("not waited yet");
        let mut timed_out = false;
        let code = loop {
            if let Ok(Some(status)) = child.try_wait() {
                break status.code();
            }
            if Instant::now() > deadline {
                timed_out = true;
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        SippResult {
            name: self.name.clone(),
            code,
            timed_out,
            stats: SippStats::read(&self.files.stat),
            counts: read_counts(&self.work),
            messages_path: self.files.messages.clone(),
            files: self.files.clone(),
            command_line: self.command_line.clone(),
        }
    }
}

impl Drop for SippProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(None) = child.try_wait() {
                // Child::kill sends SIGKILL to this child's PID, never to a process group.
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

/// Waits up to `timeout` until something listens on `addr` (UDP, or TCP if `tcp`), read from
/// the kernel's socket tables (`/proc/net/{udp,tcp}{,6}`): nothing is bound or sent, so the
/// check cannot race the process it waits for (a trial bind could take the port first and
/// make that process fail to start).
///
/// # Panics
/// If nothing listens in time.
pub fn wait_listening(addr: SocketAddr, tcp: bool, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        if listening(addr.port(), tcp) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "nothing listens on {addr} (tcp: {tcp}) after {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a socket of this thread's network namespace (the host's, or the one [`crate::netns`]
/// entered) has `port` bound locally (TCP: in LISTEN state).
fn listening(port: u16, tcp: bool) -> bool {
    let files: &[&str] = if tcp {
        &["/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"]
    } else {
        &["/proc/thread-self/net/udp", "/proc/thread-self/net/udp6"]
    };
    let want = format!(":{port:04X}");
    files.iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|text| {
            text.lines().skip(1).any(|line| {
                let mut cols = line.split_whitespace();
                let local = cols.nth(1).unwrap_or("");
                let state = cols.nth(1).unwrap_or("");
                local.ends_with(&want) && (!tcp || state == "0A")
            })
        })
    })
}

/// Runs a call pair: starts `uas` in the background, waits until it listens on `uas_addr`,
/// runs `uac` in the foreground, then gives the UAS at most 15 s more to finish (it exits
/// after its `-m` calls; the built-in UAS ends each call with a 4 s pause). Both processes are
/// killed by PID if they overrun. Returns `(uac, uas)` results.
#[must_use]
pub fn run_pair(uas: Sipp, uas_addr: SocketAddr, tcp: bool, uac: Sipp) -> (SippResult, SippResult) {
    let uas = uas.spawn();
    wait_listening(uas_addr, tcp, Duration::from_secs(5));
    let uac = uac.run();
    let uas = uas.wait_at_most(Duration::from_secs(15));
    (uac, uas)
}

/// Counters from SIPp's `-trace_stat` file (the cumulative `(C)` columns of the last row).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SippStats {
    /// `TotalCallCreated`.
    pub created: u64,
    /// `SuccessfulCall(C)`.
    pub successful: u64,
    /// `FailedCall(C)`.
    pub failed: u64,
    /// `Retransmissions(C)`: messages SIPp itself re-sent. Received retransmissions are in the
    /// `-trace_counts` columns `N_<MSG>_Retrans` (see [`SippResult::count`]).
    pub retransmissions: u64,
    /// `OutOfCallMsgs(C)`: messages that matched no call.
    pub out_of_call: u64,
    /// `DeadCallMsgs(C)`: messages for calls already finished.
    pub dead_call: u64,
}

impl SippStats {
    /// Parses a `-trace_stat` CSV file (`;`-separated, header row first); zeros if absent.
    #[must_use]
    pub fn read(path: &Path) -> Self {
        let Ok(text) = std::fs::read_to_string(path) else {
            return Self::default();
        };
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let Some(header) = lines.next() else {
            return Self::default();
        };
        let Some(last) = lines.next_back() else {
            return Self::default();
        };
        let names: Vec<&str> = header.split(';').collect();
        let values: Vec<&str> = last.split(';').collect();
        let get = |name: &str| -> u64 {
            names
                .iter()
                .position(|n| n.trim() == name)
                .and_then(|i| values.get(i))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        Self {
            created: get("TotalCallCreated"),
            successful: get("SuccessfulCall(C)"),
            failed: get("FailedCall(C)"),
            retransmissions: get("Retransmissions(C)"),
            out_of_call: get("OutOfCallMsgs(C)"),
            dead_call: get("DeadCallMsgs(C)"),
        }
    }
}

/// Reads the `*_counts.csv` file SIPp writes in its working directory with `-trace_counts`:
/// column name (e.g. `0_INVITE_Recv`, `2_200_Retrans`) → value of the last row.
fn read_counts(work: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(work) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_counts = path
            .file_name()
            .and_then(OsStr::to_str)
            .is_some_and(|n| n.ends_with("_counts.csv"));
        if !is_counts {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let (Some(header), Some(last)) = (lines.next(), lines.next_back()) else {
            continue;
        };
        for (name, value) in header.split(';').zip(last.split(';')) {
            if let Ok(v) = value.trim().parse() {
                out.insert(name.trim().to_owned(), v);
            }
        }
    }
    out
}

/// What a finished SIPp run left behind.
#[derive(Debug, Clone)]
pub struct SippResult {
    /// The run's name.
    pub name: String,
    /// Exit code: 0 all calls succeeded, 1 at least one failed, 97 stopped by command, 99 no
    /// call processed, 255/254 fatal error; `None` if killed.
    pub code: Option<i32>,
    /// Whether the harness had to kill it at its hard timeout.
    pub timed_out: bool,
    /// Statistics from `-trace_stat`.
    pub stats: SippStats,
    /// Per-message counts from `-trace_counts` (column name → last value).
    pub counts: BTreeMap<String, u64>,
    /// The `-trace_msg` file.
    pub messages_path: PathBuf,
    files: SippFiles,
    command_line: String,
}

impl SippResult {
    /// A multi-line description for assertion messages: command, code, stats, and the tails of
    /// the screen and error logs.
    #[must_use]
    pub fn describe(&self) -> String {
        format!(
            "sipp `{}`: code {:?}, timed out {}, {:?}\ncommand: {}\n--- screen (tail) ---\n{}\n--- stderr (tail) ---\n{}\n--- unexpected messages (tail) ---\n{}",
            self.name,
            self.code,
            self.timed_out,
            self.stats,
            self.command_line,
            tail_of_file(&self.files.stdout, 40),
            tail_of_file(&self.files.stderr, 20),
            tail_of_file(&self.files.errors, 40),
        )
    }

    /// Asserts exit code 0, `calls` successful calls and no failed call.
    ///
    /// # Panics
    /// Otherwise, with [`SippResult::describe`].
    pub fn assert_success(&self, calls: u64) {
        assert!(
            self.code == Some(0) && self.stats.successful == calls && self.stats.failed == 0,
            "expected {calls} successful calls and none failed\n{}",
            self.describe()
        );
    }

    /// One count from `-trace_counts` (0 if absent).
    #[must_use]
    pub fn count(&self, column: &str) -> u64 {
        self.counts.get(column).copied().unwrap_or(0)
    }

    /// The messages SIPp sent and received, from its `-trace_msg` file.
    #[must_use]
    pub fn trace(&self) -> Vec<TraceEntry> {
        let text = std::fs::read(&self.messages_path).unwrap_or_default();
        parse_trace(&String::from_utf8_lossy(&text))
    }
}

/// One message in a SIPp `-trace_msg` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEntry {
    /// `true` for "message received", `false` for "message sent".
    pub received: bool,
    /// The SIP message text (start line, headers, blank line, body).
    pub text: String,
}

/// Parses a SIPp `-trace_msg` file: entries start with a line of dashes and a timestamp,
/// then `UDP message received [N] bytes :` or `UDP message sent (N bytes):` (TCP alike), then
/// a blank line and the message.
#[must_use]
pub fn parse_trace(text: &str) -> Vec<TraceEntry> {
    let mut out = Vec::new();
    for block in text.split("-----------------------------------------------") {
        // First line: the rest of the separator line (timestamp). Second: the direction.
        let mut parts = block.splitn(3, '\n');
        let (_stamp, Some(kind), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let received = if kind.contains("message received") {
            true
        } else if kind.contains("message sent") {
            false
        } else {
            continue;
        };
        let message = rest.strip_prefix('\n').unwrap_or(rest);
        let message = message.strip_prefix("\r\n").unwrap_or(message);
        out.push(TraceEntry {
            received,
            text: message.trim_end_matches(['\n', '-']).to_owned(),
        });
    }
    out
}
