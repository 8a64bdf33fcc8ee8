//! A real SNMP trap receiver for the alarm tests: Debian's `snmptrapd`, started on a loopback
//! port with our MIB loaded so that traps print with names (v2c with community `public`, or
//! v3 with one USM user: [`Trapd::start_v3`]), and `snmptranslate`, `snmpwalk` and friends
//! ([`snmp_tool`], [`snmp_v3`]).
//!
//! Missing tools are a panic with the command that installs them: the tests never skip.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{ports, TestDir};

/// The directory of our MIB files (`snmp/mib`).
#[must_use]
pub fn mib_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("snmp")
        .join("mib")
}

/// Points net-snmp's persistent directory and configuration path into `dir`, so that a tool
/// neither reads the host's `/etc/snmp` nor depends on `/var/lib/snmp`: on a brand-new machine
/// that directory does not exist, and net-snmp's first run creates it and says so on stderr.
/// With a fresh `dir` every run is such a first run, so the tests see the same thing every
/// time (see [`net_snmp_complaints`]).
pub fn isolate_net_snmp(cmd: &mut Command, dir: &Path) {
    let persist = dir.join("net-snmp-persist");
    let conf = dir.join("net-snmp-conf");
    for d in [&persist, &conf] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("cannot create {}: {e}", d.display()));
    }
    cmd.env("SNMP_PERSISTENT_DIR", &persist)
        .env("SNMPCONFPATH", &conf)
        .env_remove("MIBS")
        .env_remove("MIBDIRS");
}

/// What a net-snmp tool printed on stderr, without its notes about creating its persistent
/// directories (`Created directory: ...`, printed on its first run in a directory): anything
/// left is a real complaint (a MIB that does not load, an unknown OID).
#[must_use]
pub fn net_snmp_complaints(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("Created directory:"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `addr` as net-snmp's tools and daemons take an agent or a listening address over UDP:
/// `udp:127.0.0.1:161`, or `udp6:[::1]:161` (without the `udp6:` prefix net-snmp reads an
/// IPv6 address as a host name).
#[must_use]
pub fn net_snmp_address(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => format!("udp:{a}"),
        SocketAddr::V6(a) => format!("udp6:[{}]:{}", a.ip(), a.port()),
    }
}

fn find_tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/local/sbin".into()])
        .map(|d: PathBuf| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not found: apt-get install -y snmptrapd snmp"))
}

/// One trap as snmptrapd printed it (its varbind line).
#[derive(Debug, Clone)]
pub struct ReceivedTrap {
    /// The varbind line: `SNMPv2-MIB::sysUpTime.0 = ...\tSNMPv2-MIB::snmpTrapOID.0 = OID: ...`.
    pub line: String,
}

impl ReceivedTrap {
    /// The trap's name, e.g. `SBC-PAIR-MIB::sbcAlarmTrap`.
    #[must_use]
    pub fn name(&self) -> &str {
        self.get("SNMPv2-MIB::snmpTrapOID.0")
            .map_or("", |v| v.trim_start_matches("OID: "))
    }

    /// The printed value of one varbind (`SBC-PAIR-MIB::sbcAlarmId.0` → `Gauge32: 131073`).
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.line.split('\t').find_map(|vb| {
            let (n, v) = vb.split_once(" = ")?;
            (n.trim() == name).then(|| v.trim())
        })
    }

    /// `sysUpTime.0` in hundredths of a second.
    #[must_use]
    pub fn uptime_ticks(&self) -> Option<u64> {
        let v = self.get("SNMPv2-MIB::sysUpTime.0")?;
        let open = v.find('(')?;
        let close = v.find(')')?;
        v[open + 1..close].trim().parse().ok()
    }
}

/// A running `snmptrapd`, killed by its PID when dropped.
#[derive(Debug)]
pub struct Trapd {
    child: Option<Child>,
    out: PathBuf,
    port: u16,
}

impl Trapd {
    /// Starts `snmptrapd -f -Lo -n -C -c CONF -M +MIBS -m SNMPv2-MIB:SBC-PAIR-MIB` on
    /// `udp:127.0.0.1:<fresh port>`, its output in `dir/snmptrapd.out`, and waits until it
    /// listens.
    ///
    /// # Panics
    /// If `snmptrapd` is missing or does not come up within 10 s.
    #[must_use]
    pub fn start(dir: &TestDir) -> Self {
        Self::start_on(dir, IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    /// Starts snmptrapd as [`Self::start`] does, listening on `ip` (a fresh port): net-snmp's
    /// `udp:IP:PORT` for IPv4, `udp6:[IP]:PORT` for IPv6 (e.g. `::1`).
    ///
    /// # Panics
    /// As [`Self::start`].
    #[must_use]
    pub fn start_on(dir: &TestDir, ip: IpAddr) -> Self {
        Self::start_with(
            dir,
            "authCommunity log public\ndisableAuthorization yes\n",
            ip,
        )
    }

    /// Starts snmptrapd as [`Self::start`] does, but for SNMPv3 only: its configuration knows
    /// one user of the engine `engine_id` (hex, no `0x`), SHA and AES with these passwords
    /// (`createUser -e 0x<engine_id> USER SHA AUTH AES PRIV`, `authUser log USER`), and no
    /// community: a v2c trap, or a v3 one that does not authenticate, is not printed.
    ///
    /// # Panics
    /// As [`Self::start`].
    #[must_use]
    pub fn start_v3(dir: &TestDir, engine_id: &str, user: &str, auth: &str, privacy: &str) -> Self {
        Self::start_with(
            dir,
            &format!("createUser -e 0x{engine_id} {user} SHA {auth} AES {privacy}\nauthUser log {user}\n"),
            IpAddr::V4(Ipv4Addr::LOCALHOST),
        )
    }

    fn start_with(dir: &TestDir, config: &str, ip: IpAddr) -> Self {
        let binary = find_tool("snmptrapd");
        let port = ports::free_port();
        let conf = dir.file("snmptrapd.conf");
        std::fs::write(&conf, config).expect("write snmptrapd.conf");
        let out = dir.file("snmptrapd.out");
        let stdout = std::fs::File::create(&out).expect("create snmptrapd.out");
        let stderr = std::fs::File::create(dir.file("snmptrapd.err")).expect("snmptrapd.err");
        let mut cmd = Command::new(&binary);
        isolate_net_snmp(&mut cmd, dir.path());
        let child = cmd
            .args(["-f", "-Lo", "-n", "-C", "-c"])
            .arg(&conf)
            .arg("-M")
            .arg(format!("+{}:/usr/share/snmp/mibs", mib_dir().display()))
            .args(["-m", "SNMPv2-MIB:SBC-PAIR-MIB"])
            .arg(net_snmp_address(SocketAddr::new(ip, port)))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let trapd = Self {
            child: Some(child),
            out,
            port,
        };
        // snmptrapd prints its version once it listens.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !trapd.output().contains("NET-SNMP version") {
            assert!(
                Instant::now() < deadline,
                "snmptrapd did not start on port {port}: {}",
                trapd.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        trapd
    }

    /// The UDP port it listens on (on 127.0.0.1, or the address given to [`Self::start_on`]).
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Everything it printed so far.
    #[must_use]
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// The traps received so far, in order.
    #[must_use]
    pub fn traps(&self) -> Vec<ReceivedTrap> {
        self.output()
            .lines()
            .filter(|l| l.contains("SNMPv2-MIB::snmpTrapOID.0"))
            .map(|l| ReceivedTrap { line: l.to_owned() })
            .collect()
    }

    /// The traps named `name` (e.g. `SBC-PAIR-MIB::sbcAlarmTrap`) received so far.
    #[must_use]
    pub fn traps_named(&self, name: &str) -> Vec<ReceivedTrap> {
        self.traps()
            .into_iter()
            .filter(|t| t.name() == name)
            .collect()
    }

    /// Waits up to `timeout` for the first trap named `name` after the first `skip` of them.
    ///
    /// # Panics
    /// If none arrives, with everything snmptrapd printed.
    #[must_use]
    #[track_caller]
    pub fn wait_trap(&self, name: &str, skip: usize, timeout: Duration) -> ReceivedTrap {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(t) = self.traps_named(name).into_iter().nth(skip) {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "no {name} (after {skip}) within {timeout:?}; snmptrapd printed:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Trapd {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGKILL to this child's PID only.
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- snmptrapd output ---\n{}", self.output());
        }
    }
}

/// Runs `snmptranslate -M +<mib dir> -m SNMPv2-MIB:SBC-PAIR-MIB ARGS...` with net-snmp
/// isolated in a fresh directory ([`isolate_net_snmp`]); returns `(success, stdout,
/// complaints)`, the complaints being stderr without net-snmp's first-run notes
/// ([`net_snmp_complaints`]).
///
/// # Panics
/// If `snmptranslate` is missing.
#[must_use]
pub fn snmptranslate(args: &[&str]) -> (bool, String, String) {
    snmp_tool("snmptranslate", args)
}

/// Runs a net-snmp command-line tool (`snmpwalk`, `snmpget`, `snmpbulkwalk`...) with our MIB
/// loaded (`-M +<mib dir> -m SNMPv2-MIB:SBC-PAIR-MIB`) and net-snmp isolated in a fresh
/// directory; returns `(success, stdout, complaints)` as [`snmptranslate`] does.
///
/// # Panics
/// If the tool is missing.
#[must_use]
pub fn snmp_tool(tool: &str, args: &[&str]) -> (bool, String, String) {
    let binary = find_tool(tool);
    let dir = TestDir::new(tool);
    let mut cmd = Command::new(&binary);
    isolate_net_snmp(&mut cmd, dir.path());
    let out = cmd
        .arg("-M")
        .arg(format!("+{}:/usr/share/snmp/mibs", mib_dir().display()))
        .args(["-m", "SNMPv2-MIB:SBC-PAIR-MIB"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        net_snmp_complaints(&String::from_utf8_lossy(&out.stderr)),
    )
}

/// Runs a net-snmp tool as [`snmp_tool`] does, as SNMPv3 user `user` at authPriv with SHA and
/// AES (`-v3 -l authPriv -u USER -a SHA -A AUTH -x AES -X PRIV -t 1 -r 1 AGENT ARGS...`).
///
/// # Panics
/// If the tool is missing.
#[must_use]
pub fn snmp_v3(
    tool: &str,
    agent: &str,
    (user, auth, privacy): (&str, &str, &str),
    args: &[&str],
) -> (bool, String, String) {
    let mut all = vec![
        "-v3", "-l", "authPriv", "-u", user, "-a", "SHA", "-A", auth, "-x", "AES", "-X", privacy,
        "-t", "1", "-r", "1", agent,
    ];
    all.extend_from_slice(args);
    snmp_tool(tool, &all)
}
