//! Kamailio (Debian's `kamailio`) as a real peer: a registrar, proxy or authenticator whose
//! configuration a test writes, run in the foreground on loopback and stopped by its PID.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::TestDir;

/// Where Debian installs Kamailio's modules.
pub const MODULES: &str = "/usr/lib/x86_64-linux-gnu/kamailio/modules/";

/// Kamailio, started by a test, stopped by its main PID when dropped: SIGTERM, on which it
/// stops the processes it forked (a SIGKILL would leave them running), then SIGKILL if it
/// did not exit within 5 s.
#[derive(Debug)]
pub struct Kamailio(Child);

impl Kamailio {
    /// Starts Kamailio with `cfg` (written to `kamailio.cfg` in `dir`, its log beside it).
    ///
    /// # Panics
    /// The files cannot be written, or `kamailio` does not start (not installed).
    #[must_use]
    pub fn start(dir: &TestDir, cfg: &str) -> Self {
        let path = dir.path().join("kamailio.cfg");
        std::fs::write(&path, cfg).expect("write kamailio.cfg");
        let log = std::fs::File::create(dir.path().join("kamailio.log")).expect("log");
        let child = Command::new("kamailio")
            .arg("-f")
            .arg(&path)
            .args(["-DD", "-E", "-m", "64", "-M", "8", "-Y"])
            .arg(dir.path())
            .arg("-P")
            .arg(dir.path().join("kamailio.pid"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("kamailio (Debian package kamailio) starts");
        Self(child)
    }

    /// The log's path in `dir`.
    #[must_use]
    pub fn log(dir: &TestDir) -> std::path::PathBuf {
        Path::new(dir.path()).join("kamailio.log")
    }
}

impl Drop for Kamailio {
    fn drop(&mut self) {
        crate::terminate(&mut self.0, Duration::from_secs(5));
    }
}
