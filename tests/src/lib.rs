//! sbc-e2e: end-to-end tests of real `sbc` processes driven by SIPp and raw sockets on loopback.
//!
//! The end-to-end tests (the modules of `sbc/tests/e2e/`) each start their own SBC node and SIPp
//! processes on fresh ports, so they run in parallel. This library is the harness they share:
//!
//! - [`ports`]: port allocation that avoids collisions between parallel tests and processes;
//! - [`TestDir`]: a per-test temporary directory, removed on success and kept (its path
//!   printed) when the test panics;
//! - [`SbcNode`] / [`SbcConfig`]: write a config, start `sbc run --config FILE`, wait for
//!   `sbc ready`, stop it by PID (SIGTERM, then SIGKILL) when dropped;
//! - [`Sipp`]: run `sipp` with a hard timeout, in the foreground or in the background, and read
//!   back its exit code, statistics (`-trace_stat`), message counts (`-trace_counts`) and
//!   message trace (`-trace_msg`);
//! - [`acli`]: `sbc acli` in one-shot and script form with a hard timeout, and a raw client of
//!   the management socket's JSON-lines protocol ([`acli::Mgmt`]);
//! - [`snmp`]: a real `snmptrapd` on a loopback port with our MIB loaded, and `snmptranslate`;
//! - [`freeradius`]: a real FreeRADIUS accounting server on a loopback port, every request it
//!   accepted read back from its detail file, and `radclient`;
//! - [`prometheus`]: a real Prometheus server scraping nodes, and a minimal HTTP client;
//! - [`netns`]: a network namespace of the test's own, for more IPv6 addresses than `::1`;
//! - [`hog`]: a CPU hog of busy-looping child processes, killed by PID when dropped;
//! - [`raw`]: tiny UDP and TCP SIP clients for malformed input and precise checks, and a lenient
//!   SIP message parser ([`raw::SipMsg`]) to judge what came back.
//!
//! Nothing here skips a test: a missing `sipp` or `sbc` binary is a panic with the command that
//! fixes it (a missing `freeradius` an error naming its Debian packages).

pub mod acli;
pub mod dir;
pub mod freeradius;
pub mod hog;
pub mod kamailio;
pub mod netns;
pub mod pair;
pub mod ports;
pub mod prometheus;
pub mod raw;
pub mod sbc;
pub mod sipp;
pub mod snmp;

pub use dir::TestDir;
pub use sbc::{SbcConfig, SbcNode};
pub use sipp::{run_pair, Sipp, SippProcess, SippResult, SippStats, TraceEntry};

use std::path::PathBuf;

/// The directory holding the SIPp scenario files (`tests/scenarios`).
#[must_use]
pub fn scenarios_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

/// The path of one scenario file in [`scenarios_dir`]; panics if it does not exist.
#[must_use]
pub fn scenario(file_name: &str) -> PathBuf {
    let path = scenarios_dir().join(file_name);
    assert!(path.is_file(), "scenario {} not found", path.display());
    path
}

/// The last `lines` lines of a text file (lossy UTF-8), or a note saying why it could not be read.
#[must_use]
pub fn tail_of_file(path: &std::path::Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            let start = all.len().saturating_sub(lines);
            all[start..].join("\n")
        }
        Err(e) => format!("<cannot read {}: {e}>", path.display()),
    }
}

/// Which scenario a SIPp side plays.
#[derive(Debug, Clone, Copy)]
pub enum Scenario<'a> {
    /// A built-in scenario (`-sn`), e.g. `uac`, `uas`.
    Builtin(&'a str),
    /// A file in `tests/scenarios` (`-sf`).
    File(&'a str),
}

impl Sipp {
    /// Plays `scenario`.
    #[must_use]
    pub fn play(self, scenario: Scenario<'_>) -> Self {
        match scenario {
            Scenario::Builtin(name) => self.builtin(name),
            Scenario::File(name) => self.scenario(name),
        }
    }
}

/// How many calls [`calls_through_sbc`] places, how fast, over what, within what time.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Number of calls (`-m` on both sides).
    pub calls: u32,
    /// Calls per second (`-r` on the UAC).
    pub rate: u32,
    /// TCP (`-t t1`) on both SIPp sides instead of UDP.
    pub tcp: bool,
    /// The UAC's hard timeout; the UAS gets 20 s more.
    pub timeout: std::time::Duration,
}

/// Runs `load.calls` calls at `load.rate` calls/s through a running SBC: a SIPp UAS playing
/// `uas` on the config's session-agent address, a SIPp UAC playing `uac` from the access
/// interface's IP (fresh port) to the access interface, both over TCP if `load.tcp`. Asserts
/// the SBC is still alive afterwards. Returns `(uac, uas)`.
#[must_use]
pub fn calls_through_sbc(
    node: &mut SbcNode,
    config: &SbcConfig,
    uac: Scenario<'_>,
    uas: Scenario<'_>,
    load: Load,
) -> (SippResult, SippResult) {
    let Load {
        calls,
        rate,
        tcp,
        timeout,
    } = load;
    let dir = node.dir().clone();
    let uac_local = std::net::SocketAddr::new(config.access.ip(), ports::free_port());
    let mut uas_sipp = Sipp::new(&dir, "uas")
        .play(uas)
        .local(config.agent)
        .calls(calls)
        .timeout(timeout + std::time::Duration::from_secs(20));
    let mut uac_sipp = Sipp::new(&dir, "uac")
        .play(uac)
        .local(uac_local)
        .remote(config.access)
        .calls(calls)
        .rate(rate)
        .timeout(timeout);
    if tcp {
        uas_sipp = uas_sipp.tcp();
        uac_sipp = uac_sipp.tcp();
    }
    let out = run_pair(uas_sipp, config.agent, tcp, uac_sipp);
    node.assert_alive();
    out
}

/// Stops a child process a test started: SIGTERM to its PID (a daemon such as Kamailio then
/// stops the processes it forked), up to `grace` to exit, then SIGKILL.
pub fn terminate(child: &mut std::process::Child, grace: std::time::Duration) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}
