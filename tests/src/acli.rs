//! Driving a node's management socket: the `sbc acli` client (one-shot and script form) and a
//! raw client of the socket's JSON-lines protocol (for polling and for garbage).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::sbc::sbc_binary;

/// How long one `sbc acli` run may take before the harness kills it by PID.
pub const ACLI_TIMEOUT: Duration = Duration::from_secs(20);

/// What one `sbc acli` run printed and how it exited.
#[derive(Debug, Clone)]
pub struct AcliOutput {
    /// The command line, for messages.
    pub command: String,
    /// Exit code (`None`: killed at [`ACLI_TIMEOUT`] or by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl AcliOutput {
    /// A multi-line description for assertion messages.
    #[must_use]
    pub fn describe(&self) -> String {
        format!(
            "`{}` exited with {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.command, self.code, self.stdout, self.stderr
        )
    }

    /// Asserts exit code 0 and returns `self`.
    ///
    /// # Panics
    /// Otherwise.
    #[track_caller]
    pub fn assert_ok(&self) -> &Self {
        assert_eq!(self.code, Some(0), "{}", self.describe());
        self
    }

    /// Asserts exit code 1 (a refused line) and returns `self`.
    ///
    /// # Panics
    /// Otherwise.
    #[track_caller]
    pub fn assert_failed(&self) -> &Self {
        assert_eq!(self.code, Some(1), "{}", self.describe());
        self
    }

    /// Every JSON document on stdout, in order (`--json` prints one per show/display line).
    ///
    /// # Panics
    /// If stdout is not a sequence of JSON documents.
    #[must_use]
    #[track_caller]
    pub fn json_docs(&self) -> Vec<Value> {
        serde_json::Deserializer::from_str(&self.stdout)
            .into_iter::<Value>()
            .collect::<Result<Vec<_>, _>>()
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e})\n{}", self.describe()))
    }

    /// The only JSON document on stdout.
    ///
    /// # Panics
    /// If there is not exactly one.
    #[must_use]
    #[track_caller]
    pub fn json(&self) -> Value {
        let mut docs = self.json_docs();
        assert_eq!(
            docs.len(),
            1,
            "expected one JSON document\n{}",
            self.describe()
        );
        docs.remove(0)
    }
}

/// Runs `sbc acli --mgmt-socket SOCKET [--json] [-c LINE]...` with `stdin` piped in (closed at
/// once when `None`), bounded by [`ACLI_TIMEOUT`] (then killed by PID).
///
/// # Panics
/// If the binary cannot be started.
#[must_use]
pub fn run_acli(socket: &Path, json: bool, lines: &[&str], stdin: Option<&str>) -> AcliOutput {
    let mut cmd = Command::new(sbc_binary());
    cmd.arg("acli").arg("--mgmt-socket").arg(socket);
    if json {
        cmd.arg("--json");
    }
    for line in lines {
        cmd.arg("-c").arg(line);
    }
    cmd.env_remove("SBC_MGMT_SOCKET")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let command = format!("{cmd:?}");
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command}: {e}"));
    let input = stdin.unwrap_or_default().to_owned();
    let mut child_stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || {
        // The client may stop reading at the first error: a broken pipe is fine.
        let _ = child_stdin.write_all(input.as_bytes());
    });
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let deadline = Instant::now() + ACLI_TIMEOUT;
    let code = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status.code();
        }
        if Instant::now() > deadline {
            // Child::kill is SIGKILL to this child's PID only.
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = writer.join();
    AcliOutput {
        command,
        code,
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

/// One-shot form: each element of `lines` is one `-c` line of the same session.
#[must_use]
pub fn acli(socket: &Path, lines: &[&str]) -> AcliOutput {
    run_acli(socket, false, lines, None)
}

/// One-shot form with `--json`.
#[must_use]
pub fn acli_json(socket: &Path, lines: &[&str]) -> AcliOutput {
    run_acli(socket, true, lines, None)
}

/// Script form: `script` on stdin (not a terminal), one command a line.
#[must_use]
pub fn acli_script(socket: &Path, script: &str) -> AcliOutput {
    run_acli(socket, false, &[], Some(script))
}

/// A raw client of the management socket's protocol: one JSON object a line each way.
#[derive(Debug)]
pub struct Mgmt {
    path: PathBuf,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Mgmt {
    /// Connects, with 10 s read and write timeouts.
    ///
    /// # Panics
    /// If the socket does not accept the connection.
    #[must_use]
    pub fn connect(path: &Path) -> Self {
        let stream = UnixStream::connect(path)
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", path.display()));
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("set_read_timeout");
        stream
            .set_write_timeout(Some(Duration::from_secs(10)))
            .expect("set_write_timeout");
        let writer = stream.try_clone().expect("clone unix stream");
        Self {
            path: path.to_owned(),
            reader: BufReader::new(stream),
            writer,
        }
    }

    /// Sends one raw request object and returns the reply object.
    ///
    /// # Panics
    /// If the node does not answer one JSON line within the timeout.
    #[must_use]
    pub fn request(&mut self, request: &Value) -> Value {
        let mut line = request.to_string();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .unwrap_or_else(|e| panic!("write to {}: {e}", self.path.display()));
        let mut reply = String::new();
        self.reader
            .read_line(&mut reply)
            .unwrap_or_else(|e| panic!("read from {}: {e}", self.path.display()));
        serde_json::from_str(&reply)
            .unwrap_or_else(|e| panic!("{} answered {reply:?}, not JSON: {e}", self.path.display()))
    }

    /// Executes one ACLI line; returns the whole reply (`ok`, `output`, `prompt`, `data`, `error`).
    #[must_use]
    pub fn exec(&mut self, line: &str, json: bool) -> Value {
        self.request(&serde_json::json!({"op": "exec", "line": line, "json": json}))
    }

    /// Executes a show/display line with `json` and returns its `data`.
    ///
    /// # Panics
    /// If the line is refused or has no data.
    #[must_use]
    #[track_caller]
    pub fn data(&mut self, line: &str) -> Value {
        let reply = self.exec(line, true);
        assert_eq!(reply["ok"], Value::Bool(true), "{line:?} refused: {reply}");
        let data = reply.get("data").cloned().unwrap_or(Value::Null);
        assert!(!data.is_null(), "{line:?} gave no data: {reply}");
        data
    }
}

/// Waits up to `timeout` until a fresh connection to `socket` answers `show health`; returns
/// whether it did.
#[must_use]
pub fn wait_socket_answers(socket: &Path, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(stream) = UnixStream::connect(socket) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
            let mut w = stream;
            let ok = w
                .write_all(b"{\"op\":\"exec\",\"line\":\"show health\"}\n")
                .is_ok()
                && {
                    let mut r = BufReader::new(&w);
                    let mut line = String::new();
                    r.read_line(&mut line).is_ok() && line.contains("\"ok\":true")
                };
            if ok {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}
