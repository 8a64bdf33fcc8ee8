//! The management socket: created 0600, and garbage clients do not disturb the node.
//!
//! Asserts, on one node:
//! - the socket path is a Unix socket with mode 0600;
//! - clients that send random bytes (with and without newlines), valid JSON of the wrong shape,
//!   half a request line then a disconnect (abrupt, and after shutting down their write side),
//!   an over-long line (4 MiB, no newline), connect-and-drop in a burst, an ACLI session left in
//!   the middle of editing, and one that stays connected and silent throughout: each complete
//!   bad line is answered `{"ok":false,"error":"bad request: ..."}` (the over-long one
//!   `request line too long`, or the connection is closed), nothing is left changed,
//!   and while the silent and the half-line clients are still connected another client is
//!   served;
//! - afterwards `sbc acli -c "show health"` answers (exit 0, score 100), a SIPp call through
//!   the node succeeds, the node is alive and logged no panic.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use sbc_e2e::acli::{acli, acli_json, Mgmt};
use sbc_e2e::{calls_through_sbc, Load, SbcConfig, SbcNode, Scenario};
use serde_json::{json, Value};

fn connect(path: &Path) -> UnixStream {
    let s = UnixStream::connect(path).expect("connect to the management socket");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    s.set_write_timeout(Some(Duration::from_secs(5)))
        .expect("write timeout");
    s
}

/// Deterministic pseudo-random bytes (xorshift64*), so a failure can be replayed.
fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.max(1);
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

/// Reads reply lines until EOF, timeout or `max` lines.
fn read_lines(stream: &UnixStream, max: usize) -> Vec<String> {
    let mut reader = BufReader::new(stream);
    let mut out = Vec::new();
    for _ in 0..max {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => out.push(line),
        }
    }
    out
}

#[track_caller]
fn assert_bad_request(line: &str) {
    let v: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("reply {line:?} is not JSON: {e}"));
    assert_eq!(v["ok"], json!(false), "{v}");
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("bad request")),
        "{v}"
    );
}

#[test]
fn socket_is_0600_and_garbage_does_not_disturb_the_node() {
    let config = SbcConfig::new();
    let mut node = SbcNode::start_config(&config);
    let sock = node.mgmt_socket();

    let meta = std::fs::metadata(&sock).expect("the management socket exists");
    assert!(
        meta.file_type().is_socket(),
        "{} is not a socket",
        sock.display()
    );
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o600,
        "mode of {} is {:o}",
        sock.display(),
        meta.permissions().mode() & 0o777
    );

    let hostname_before = acli_json(&sock, &["show configuration"]).assert_ok().json()
        ["system-config"]["hostname"]
        .clone();

    // A client that stays connected and silent for the whole test.
    let silent = connect(&sock);

    // Random bytes without a newline, then with newlines: every complete line is refused.
    {
        let mut s = connect(&sock);
        let mut bytes = random_bytes(0x5bc0_0001, 4096);
        bytes.retain(|b| *b != b'\n');
        bytes.push(b'\n');
        s.write_all(&bytes).expect("write random line");
        let lines = read_lines(&s, 1);
        assert_eq!(lines.len(), 1, "no answer to a random line");
        assert_bad_request(&lines[0]);
    }
    {
        let mut s = connect(&sock);
        let bytes = random_bytes(0x5bc0_0002, 64 * 1024);
        let newlines = bytes.iter().filter(|b| **b == b'\n').count();
        // The node may close on a line it cannot take; a failed write is fine.
        let _ = s.write_all(&bytes);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let lines = read_lines(&s, newlines + 2);
        for line in &lines {
            assert_bad_request(line);
        }
    }
    // Valid JSON of the wrong shape.
    {
        let mut s = connect(&sock);
        let bad = [
            "{\"op\":\"nope\"}",
            "[]",
            "{\"op\":\"exec\"}",
            "{\"op\":\"exec\",\"line\":123}",
            "null",
            "\"show health\"",
        ];
        for b in bad {
            s.write_all(format!("{b}\n").as_bytes()).expect("write");
        }
        let lines = read_lines(&s, bad.len());
        assert_eq!(lines.len(), bad.len(), "{lines:?}");
        for line in &lines {
            assert_bad_request(line);
        }
        // The same connection still works after its bad lines.
        s.write_all(b"{\"op\":\"exec\",\"line\":\"show health\"}\n")
            .expect("write");
        let lines = read_lines(&s, 1);
        assert!(
            lines.first().is_some_and(|l| l.contains("\"ok\":true")),
            "{lines:?}"
        );
    }
    // Half a line, then an abrupt disconnect.
    {
        let mut s = connect(&sock);
        s.write_all(b"{\"op\":\"exec\",\"line\":\"show he")
            .expect("write half");
        drop(s);
    }
    // Half a line, then end of input: answered as a bad request (or just closed).
    {
        let mut s = connect(&sock);
        s.write_all(b"{\"op\":\"exec\",\"li").expect("write half");
        s.shutdown(std::net::Shutdown::Write).expect("shutdown");
        for line in read_lines(&s, 2) {
            assert_bad_request(&line);
        }
    }
    // Half a line and keep the connection open while another client is served.
    let mut half_open = connect(&sock);
    half_open
        .write_all(b"{\"op\":\"exec\",\"line\":\"conf")
        .expect("write half");
    {
        let mut m = Mgmt::connect(&sock);
        let reply = m.exec("show health", true);
        assert_eq!(reply["ok"], json!(true), "{reply}");
        assert_eq!(reply["data"]["score"], json!(100), "{reply}");
    }
    // An over-long line: 4 MiB without a newline. The node may refuse it or close.
    {
        let mut s = connect(&sock);
        let chunk = vec![b'A'; 64 * 1024];
        for _ in 0..64 {
            if s.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut rest = Vec::new();
        let _ = s.take(1 << 20).read_to_end(&mut rest);
        for line in String::from_utf8_lossy(&rest).lines() {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("reply {line:?} is not JSON: {e}"));
            assert_eq!(v["ok"], json!(false), "{v}");
            assert!(
                v["error"].as_str().is_some_and(|e| e.contains("too long")),
                "{v}"
            );
        }
    }
    // A burst of connect-and-drop.
    for _ in 0..100 {
        drop(connect(&sock));
    }
    // An ACLI session left in the middle of editing: the uncommitted change is not kept.
    {
        let mut m = Mgmt::connect(&sock);
        for line in [
            "configure terminal",
            "system",
            "system-config",
            "hostname garbage-was-here",
        ] {
            let reply = m.exec(line, false);
            assert_eq!(reply["ok"], json!(true), "{line}: {reply}");
        }
    }
    drop(half_open);

    // The node is undisturbed: the ACLI answers, SIP works.
    let out = acli(&sock, &["show health"]);
    out.assert_ok();
    assert!(out.stdout.contains("health-score"), "{}", out.describe());
    let health = acli_json(&sock, &["show health"]).assert_ok().json();
    assert_eq!(health["score"], json!(100), "{health}");
    let ed = acli_json(&sock, &["show configuration"]).assert_ok().json();
    assert_eq!(ed["system-config"]["hostname"], hostname_before, "{ed:#}");

    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::Builtin("uac"),
        Scenario::Builtin("uas"),
        Load {
            calls: 1,
            rate: 1,
            tcp: false,
            timeout: Duration::from_secs(30),
        },
    );
    uac.assert_success(1);
    uas.assert_success(1);

    // The silent client is still connected and can still talk.
    {
        let mut s = silent;
        s.write_all(b"{\"op\":\"exec\",\"line\":\"show health\"}\n")
            .expect("write");
        let lines = read_lines(&s, 1);
        assert!(
            lines.first().is_some_and(|l| l.contains("\"ok\":true")),
            "the silent client was dropped: {lines:?}"
        );
    }
    node.assert_alive();
    let stderr = std::fs::read_to_string(node.stderr_path()).unwrap_or_default();
    assert!(
        !stderr.contains("panicked"),
        "the node logged a panic:\n{}",
        sbc_e2e::tail_of_file(node.stderr_path(), 40)
    );
}

/// Runs `sbc <args>` as uid/gid 65534 (`nobody`) with a 10 s bound; `(exit ok, stdout+stderr)`.
fn run_as_nobody(args: &[&str]) -> (bool, String) {
    use std::os::unix::process::CommandExt as _;
    let mut child = std::process::Command::new(sbc_e2e::sbc::sbc_binary())
        .args(args)
        .uid(65_534)
        .gid(65_534)
        .env_remove("SBC_MGMT_SOCKET")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("this test runs as root, so that it can start a client as another user");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut out = String::new();
            if let Some(mut o) = child.stdout.take() {
                let _ = o.read_to_string(&mut out);
            }
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut out);
            }
            return (status.success(), out);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sbc {args:?} as nobody did not finish in 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Another local user gets nothing from the management socket, even when the file system would
/// let it connect: the node checks the client's uid (SO_PEERCRED) and serves only its own user
/// and root. (Needs root, as the whole suite does, to start a client as another user.)
#[test]
fn another_users_client_is_refused_by_uid() {
    assert!(
        std::fs::metadata("/proc/self")
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
            .ok()
            == Some(0),
        "this test must run as root (it starts a client as uid 65534)"
    );
    let node = SbcNode::start_config(&SbcConfig::new());
    let sock = node.mgmt_socket();
    // Open the socket and its directory to everyone, as a careless operator might.
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let sock_arg = sock.to_string_lossy().into_owned();
    let (ok, out) = run_as_nobody(&[
        "acli",
        "--mgmt-socket",
        &sock_arg,
        "-c",
        "show running-config",
    ]);
    assert!(!ok, "another user's client succeeded:\n{out}");
    assert!(out.contains("permission denied"), "{out}");
    assert!(
        !out.contains("sip-config"),
        "another user saw the configuration:\n{out}"
    );
    // The node's own user is still served, and the refusal was logged.
    acli(&sock, &["show health"]).assert_ok();
    let log = std::fs::read_to_string(node.stderr_path()).unwrap_or_default();
    assert!(
        log.contains("management connection refused"),
        "the refusal is not logged"
    );
}

/// A socket directory that others can write to is refused at start (a local user could replace
/// the socket); the default socket lives in a private directory created 0700.
/// Runs `sbc run` with management socket `socket`: a refused socket ends it at once. Returns
/// whether it kept running (then it is killed by its PID after 10 s) or exited successfully,
/// and its stderr.
fn run_with_socket(config: &Path, socket: &Path) -> (bool, String) {
    let mut child = std::process::Command::new(sbc_e2e::sbc::sbc_binary())
        .arg("run")
        .arg("--config")
        .arg(config)
        .arg("--mgmt-socket")
        .arg(socket)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start sbc");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let exited_ok = loop {
        match child.try_wait().expect("wait for sbc") {
            Some(status) => break status.success(),
            None if std::time::Instant::now() >= deadline => {
                let _ = child.kill(); // SIGKILL to its PID
                let _ = child.wait();
                break true;
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    (exited_ok, stderr)
}

#[test]
fn an_unsafe_socket_directory_is_refused_and_the_default_is_private() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = sbc_e2e::TestDir::for_current_test();
    let open = dir.file("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let config = dir.file("sbc.toml");
    std::fs::write(&config, SbcConfig::new().to_toml()).expect("config");
    let (started, stderr) = run_with_socket(&config, &open.join("sbc.sock"));
    assert!(
        !started,
        "started with a socket in a world-writable directory"
    );
    assert!(stderr.contains("writable by group or others"), "{stderr}");

    // A path no client could connect to (longer than sun_path) is refused, not "listening".
    let deep = dir.file(&"d".repeat(100));
    std::fs::create_dir(&deep).expect("mkdir");
    std::fs::set_permissions(&deep, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let (started, stderr) = run_with_socket(&config, &deep.join("sbc.sock"));
    assert!(!started, "started on an unreachable socket path");
    assert!(
        stderr.contains("a Unix socket path holds at most 107"),
        "{stderr}"
    );

    // Without --mgmt-socket: $XDG_RUNTIME_DIR/sbc/sbc.sock, the directory created 0700.
    let runtime = dir.file("runtime");
    std::fs::create_dir(&runtime).expect("mkdir");
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let mut child = std::process::Command::new(sbc_e2e::sbc::sbc_binary())
        .arg("run")
        .arg("--config")
        .arg(&config)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env_remove("SBC_MGMT_SOCKET")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start sbc");
    let sock = runtime.join("sbc").join("sbc.sock");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !sock.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let served = sock.exists() && acli(&sock, &["show health"]).code == Some(0);
    let dir_mode = std::fs::metadata(runtime.join("sbc")).map(|m| m.mode() & 0o777);
    let sock_mode = std::fs::metadata(&sock).map(|m| m.mode() & 0o777);
    let _ = child.kill(); // SIGKILL to its PID
    let _ = child.wait();
    assert!(served, "no node answered on {}", sock.display());
    assert_eq!(dir_mode.ok(), Some(0o700));
    assert_eq!(sock_mode.ok(), Some(0o600));
}
