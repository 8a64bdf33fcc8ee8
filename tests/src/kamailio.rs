//! Kamailio (Debian's `kamailio`) as a real peer: a registrar, proxy or authenticator whose
//! configuration a test writes, run in the foreground on loopback and stopped by its PID.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use std::net::SocketAddr;

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

/// The global part of a one-process Kamailio configuration: UDP on `addr` only, the domain
/// `example.test`, no DNS, logging to stderr, and `modules` (names without `.so`) loaded from
/// [`MODULES`].
#[must_use]
pub fn cfg_head(addr: SocketAddr, modules: &[&str]) -> String {
    let mut head = format!(
        r#"#!KAMAILIO
debug=2
log_stderror=yes
children=1
listen=udp:{addr}
disable_tcp=yes
auto_aliases=no
alias="example.test"
dns=no
rev_dns=no
use_dns_cache=off
mpath="{MODULES}"
"#
    );
    for module in modules {
        head.push_str(&format!("loadmodule \"{module}.so\"\n"));
    }
    head
}

/// A multi-domain registrar for `example.test` (usrloc keyed by user and domain) at `addr`,
/// relaying calls to a registered user's contact with itself record-routed.
///
/// # Panics
/// As [`Kamailio::start`].
#[must_use]
pub fn registrar(dir: &TestDir, addr: SocketAddr) -> Kamailio {
    Kamailio::start(dir, &registrar_cfg(addr, "", "save(\"location\");"))
}

/// The configuration of [`registrar`], with more modules loaded (`loadmodule` lines) and
/// `on_register` run for each REGISTER (e.g. a digest challenge before `save`).
#[must_use]
pub fn registrar_cfg(addr: SocketAddr, modules: &str, on_register: &str) -> String {
    let head = cfg_head(
        addr,
        &[
            "tm",
            "sl",
            "rr",
            "maxfwd",
            "pv",
            "siputils",
            "textops",
            "usrloc",
            "registrar",
        ],
    );
    format!(
        r#"{head}{modules}
modparam("usrloc", "db_mode", 0)
modparam("usrloc", "use_domain", 1)

request_route {{
    if (!mf_process_maxfwd_header("10")) {{ sl_send_reply("483", "Too Many Hops"); exit; }}
    if (is_method("CANCEL")) {{ if (t_check_trans()) t_relay(); exit; }}
    if (has_totag()) {{
        if (loose_route()) {{ t_relay(); exit; }}
        if (is_method("ACK")) {{ if (t_check_trans()) t_relay(); exit; }}
        sl_send_reply("404", "Not here");
        exit;
    }}
    if (is_method("REGISTER")) {{ {on_register} exit; }}
    if (!lookup("location")) {{ sl_send_reply("404", "Not Found"); exit; }}
    record_route();
    t_relay();
}}
"#
    )
}
