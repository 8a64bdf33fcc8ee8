//! End to end with a real receiver: Debian's `snmptrapd`, loading our MIB, prints the group
//! trap and the clear trap that the evaluator's events produce, filtered and encoded as the
//! node's trap sink does ([`FilterLevel::passes`], [`TrapEncoder`]) and sent here over a plain
//! std UDP socket (the sink's queue and socket are the `sbc` shell's, tested there).
//!
//! Needs `snmptrapd` (Debian packages `snmptrapd` and `snmp`); without it the test fails, it
//! does not skip.

use std::fs;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use sbc_alarms::{
    AlarmEvent, AlarmKind, ClearedBy, ConditionAlarm, Evaluator, EvaluatorConfig, Severity,
    Threshold, Thresholds,
};
use sbc_snmp::{AlarmInfo, FilterLevel, Trap, TrapEncoder, TrapReceiver};

/// Kills snmptrapd by its PID when the test ends, passing or failing.
struct Trapd {
    child: Child,
    out: PathBuf,
    dir: PathBuf,
}

impl Drop for Trapd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl Trapd {
    fn output(&self) -> String {
        fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Waits until the output holds every needle, or panics with what it holds.
    fn wait_for(&self, needles: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = self.output();
            if needles.iter().all(|n| out.contains(n)) {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "snmptrapd did not print {needles:?}; it printed:\n{out}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn find_snmptrapd() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/local/sbin".into()])
        .map(|d: PathBuf| d.join("snmptrapd"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("snmptrapd not found: apt-get install -y snmptrapd snmp"))
}

/// A fresh private directory under the system's temporary directory.
fn temp_dir(label: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!("sbc-snmp-{label}-{}-{nanos}", std::process::id()));
    fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Points net-snmp's persistent directory and configuration path into `dir`: the tools then
/// neither read the host's `/etc/snmp` nor depend on `/var/lib/snmp`, which does not exist on
/// a brand-new machine (net-snmp's first run creates it and says so on stderr). With a fresh
/// `dir` every run is such a first run, the same every time.
fn isolate_net_snmp(cmd: &mut Command, dir: &Path) {
    let persist = dir.join("net-snmp-persist");
    let conf = dir.join("net-snmp-conf");
    for d in [&persist, &conf] {
        fs::create_dir_all(d).expect("net-snmp dir");
    }
    cmd.env("SNMP_PERSISTENT_DIR", &persist)
        .env("SNMPCONFPATH", &conf)
        .env_remove("MIBS")
        .env_remove("MIBDIRS");
}

/// stderr without net-snmp's first-run notes (`Created directory: ...`): what is left is a
/// real complaint.
fn net_snmp_complaints(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("Created directory:"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn free_udp_port() -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind a free port");
    socket.local_addr().expect("local addr").port()
}

/// Sends `traps` to `receivers` as the node's trap sink does: each trap to every receiver whose
/// filter level lets it through, one datagram each, the encoder's counters running on.
fn send(receivers: &[TrapReceiver], traps: impl IntoIterator<Item = Trap>) {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind a sending socket");
    let started = Instant::now();
    // A fresh salt seed per call, as a node's sink takes one per start.
    let seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut encoder = TrapEncoder::new(seed);
    for trap in traps {
        for receiver in receivers.iter().filter(|r| r.filter_level.passes(&trap)) {
            let bytes = encoder
                .encode(&trap, receiver, started.elapsed())
                .expect("encode");
            socket.send_to(&bytes, receiver.address).expect("send");
        }
    }
}

fn start_trapd(port: u16) -> Trapd {
    start_trapd_with(
        port,
        "authCommunity log,execute,net public\ndisableAuthorization no\n",
    )
}

fn start_trapd_with(port: u16, config: &str) -> Trapd {
    let binary = find_snmptrapd();
    let dir = temp_dir("trapd");
    let conf = dir.join("snmptrapd.conf");
    fs::write(&conf, config).expect("write conf");
    let out = dir.join("snmptrapd.out");
    let stdout = fs::File::create(&out).expect("create output file");
    let mibs = Path::new(env!("CARGO_MANIFEST_DIR")).join("mib");
    let mut cmd = Command::new(binary);
    isolate_net_snmp(&mut cmd, &dir);
    let child = cmd
        .arg("-f") // foreground
        .arg("-Lo") // log to stdout
        .arg("-n") // numeric addresses
        .arg("-C") // not the default config files
        .arg("-c")
        .arg(&conf)
        .arg("-M")
        .arg(format!("+{}:/usr/share/snmp/mibs", mibs.display()))
        .arg("-m")
        .arg("SNMPv2-MIB:SBC-PAIR-MIB")
        .arg(format!("udp:127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start snmptrapd");
    let trapd = Trapd { child, out, dir };
    // snmptrapd prints its version once it listens.
    trapd.wait_for(&["NET-SNMP version"]);
    trapd
}

#[test]
fn snmptrapd_prints_our_traps_with_mib_names() {
    let port = free_udp_port();
    let trapd = start_trapd(port);

    // The evaluator's own events, in the lab's timing: critical memory at 93% against 80%.
    let t0 = Instant::now();
    let thresholds = Thresholds::new([Threshold::new(AlarmKind::Memory, Severity::Critical, 80)])
        .expect("thresholds");
    let config = EvaluatorConfig {
        iteration: Duration::from_secs(1),
        sub_samples: 10,
        ..EvaluatorConfig::default()
    };
    let mut ev = Evaluator::new(config, thresholds, t0, SystemTime::now()).expect("evaluator");
    let mut events = Vec::new();
    while ev.iterations() == 0 {
        let now = ev.poll_timeout().expect("timer");
        if ev.poll_sample(now) {
            ev.handle_sample(now, AlarmKind::Memory, 93.0);
        }
        ev.handle_timeout(now);
        events.extend(std::iter::from_fn(|| ev.poll()));
    }
    ev.clear_alarm(131_073, "sbcd").expect("operator clear");
    events.extend(std::iter::from_fn(|| ev.poll()));
    assert!(matches!(events[0], AlarmEvent::Raised(_)), "{events:?}");
    assert!(matches!(
        events[1],
        AlarmEvent::Cleared {
            by: ClearedBy::Operator,
            ..
        }
    ));

    let receiver = TrapReceiver {
        address: format!("127.0.0.1:{port}").parse().expect("addr"),
        community: "public".to_owned(),
        filter_level: FilterLevel::Major,
        v3: None,
    };
    // A minor alarm first: filter-level major keeps it from this receiver.
    let minor = Trap::Alarm(AlarmInfo {
        kind: AlarmKind::Cpu,
        value: 55,
        severity: Severity::Minor,
        threshold: 50,
        alarm_id: 131_075,
        task: "sbcd".to_owned(),
        node: "sbc-a".to_owned(),
    });
    let traps: Vec<Trap> = events
        .iter()
        .filter_map(|event| Trap::from_event(event, "sbc-a"))
        .collect();
    assert_eq!(traps.len(), 2, "{events:?}");
    send(&[receiver], std::iter::once(minor).chain(traps));

    let out = trapd.wait_for(&[
        "SNMPv2-MIB::snmpTrapOID.0 = OID: SBC-PAIR-MIB::sbcAlarmTrap",
        "SNMPv2-MIB::snmpTrapOID.0 = OID: SBC-PAIR-MIB::sbcAlarmClearTrap",
    ]);
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("snmpTrapOID")).collect();
    assert_eq!(lines.len(), 2, "the minor trap was filtered out:\n{out}");
    let (raise, clear) = (lines[0], lines[1]);
    for expected in [
        "SBC-PAIR-MIB::sbcAlarmTrap",
        "SBC-PAIR-MIB::sbcAlarmType.0 = INTEGER: memoryUtilization(1)",
        "SBC-PAIR-MIB::sbcAlarmValue.0 = INTEGER: 93",
        "SBC-PAIR-MIB::sbcAlarmSeverity.0 = INTEGER: critical(4)",
        "SBC-PAIR-MIB::sbcAlarmThreshold.0 = INTEGER: 80",
        "SBC-PAIR-MIB::sbcAlarmId.0 = Gauge32: 131073",
        "SBC-PAIR-MIB::sbcAlarmTask.0 = STRING: sbcd",
        "SBC-PAIR-MIB::sbcNodeName.0 = STRING: sbc-a",
    ] {
        assert!(raise.contains(expected), "{expected:?} not in {raise}");
    }
    for expected in [
        "SBC-PAIR-MIB::sbcAlarmClearTrap",
        "SBC-PAIR-MIB::sbcAlarmSeverity.0 = INTEGER: critical(4)",
        "SBC-PAIR-MIB::sbcAlarmId.0 = Gauge32: 131073",
        "SBC-PAIR-MIB::sbcAlarmClearedBy.0 = INTEGER: operator(1)",
    ] {
        assert!(clear.contains(expected), "{expected:?} not in {clear}");
    }
    assert!(
        !out.contains("Cannot find module") && !out.contains("Unlinked OID"),
        "net-snmp loaded our MIB with errors:\n{out}"
    );
    drop(trapd);
}

/// The accounting spool full: the condition alarm's group trap (type accountingSpoolFull,
/// task accounting) and `sbcAccountingSpoolTrap`, then both again as the spool has room,
/// printed by snmptrapd with our MIB's names.
#[test]
fn snmptrapd_prints_the_accounting_spool_traps() {
    let port = free_udp_port();
    let trapd = start_trapd(port);
    let t0 = Instant::now();
    let mut ev = Evaluator::new(
        EvaluatorConfig::default(),
        Thresholds::default(),
        t0,
        SystemTime::now(),
    )
    .expect("evaluator");
    ev.raise_condition(
        t0,
        ConditionAlarm {
            id: 131_078,
            task: "accounting".to_owned(),
            kind: AlarmKind::AccountingSpool,
            severity: Severity::Critical,
            value: 99.9,
            threshold: 100,
            description: "accounting spool full".to_owned(),
            health_penalty: 0,
        },
    );
    ev.clear_condition(131_078);
    let alarm_traps: Vec<Trap> = std::iter::from_fn(|| ev.poll())
        .filter_map(|event| Trap::from_event(&event, "sbc-a"))
        .collect();
    assert_eq!(alarm_traps.len(), 2, "{alarm_traps:?}");
    let spool = |full: bool, spool_bytes: u64| Trap::AccountingSpool {
        full,
        spool_bytes,
        spool_max_bytes: 1 << 20,
        records_refused: 42,
        node: "sbc-a".to_owned(),
    };
    let receiver = TrapReceiver {
        address: format!("127.0.0.1:{port}").parse().expect("addr"),
        community: "public".to_owned(),
        filter_level: FilterLevel::Critical,
        v3: None,
    };
    send(
        &[receiver],
        [
            alarm_traps[0].clone(),
            spool(true, 1_048_000),
            alarm_traps[1].clone(),
            spool(false, 0),
        ],
    );
    let out = trapd.wait_for(&["hasRoom(2)"]);
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("snmpTrapOID")).collect();
    assert_eq!(lines.len(), 4, "{out}");
    for (line, expected) in lines.iter().zip([
        &[
            "SBC-PAIR-MIB::sbcAlarmTrap",
            "SBC-PAIR-MIB::sbcAlarmType.0 = INTEGER: accountingSpoolFull(6)",
            "SBC-PAIR-MIB::sbcAlarmSeverity.0 = INTEGER: critical(4)",
            "SBC-PAIR-MIB::sbcAlarmId.0 = Gauge32: 131078",
            "SBC-PAIR-MIB::sbcAlarmTask.0 = STRING: accounting",
        ][..],
        &[
            "SBC-PAIR-MIB::sbcAccountingSpoolTrap",
            "SBC-PAIR-MIB::sbcAccountingSpoolState.0 = INTEGER: full(1)",
            "SBC-PAIR-MIB::sbcAccountingSpoolKiB.0 = Gauge32: 1024 KiB",
            "SBC-PAIR-MIB::sbcAccountingSpoolMaxKiB.0 = Gauge32: 1024 KiB",
            "SBC-PAIR-MIB::sbcAccountingRecordsRefused.0 = Counter64: 42",
            "SBC-PAIR-MIB::sbcNodeName.0 = STRING: sbc-a",
        ][..],
        &[
            "SBC-PAIR-MIB::sbcAlarmClearTrap",
            "SBC-PAIR-MIB::sbcAlarmId.0 = Gauge32: 131078",
            "SBC-PAIR-MIB::sbcAlarmClearedBy.0 = INTEGER: auto(3)",
        ][..],
        &[
            "SBC-PAIR-MIB::sbcAccountingSpoolTrap",
            "SBC-PAIR-MIB::sbcAccountingSpoolState.0 = INTEGER: hasRoom(2)",
            "SBC-PAIR-MIB::sbcAccountingSpoolKiB.0 = Gauge32: 0 KiB",
        ][..],
    ]) {
        for e in expected {
            assert!(line.contains(e), "{e:?} not in {line}");
        }
    }
    assert!(
        !out.contains("Cannot find module") && !out.contains("Unlinked OID"),
        "net-snmp loaded our MIB with errors:\n{out}"
    );
    drop(trapd);
}

/// An SNMPv3 authPriv trap (SHA, AES-128) from our engine, received by snmptrapd that knows
/// the user under our engine ID; and one with the wrong password is not printed.
#[test]
fn snmptrapd_receives_our_v3_traps() {
    use sbc_snmp::trap::TrapSecurity;
    use sbc_snmp::usm::{Engine, UsmUser};
    use std::sync::Arc;

    let port = free_udp_port();
    let engine = Engine {
        id: b"\x80\x00\x0c\xbd\x04sbc-a".to_vec(),
        boots: 3,
    };
    let hex: String = engine.id.iter().map(|b| format!("{b:02x}")).collect();
    let trapd = start_trapd_with(
        port,
        &format!("createUser -e 0x{hex} nms SHA authpass1 AES privpass1\nauthUser log nms\n"),
    );
    let receiver = |auth: &[u8]| TrapReceiver {
        address: format!("127.0.0.1:{port}").parse().expect("addr"),
        community: "unused".to_owned(),
        filter_level: FilterLevel::All,
        v3: Some(Arc::new(TrapSecurity {
            engine: engine.clone(),
            user: UsmUser::new("nms", auth, b"privpass1", &engine.id, Vec::new()).expect("user"),
        })),
    };
    let alarm = |value: u32| {
        Trap::Alarm(AlarmInfo {
            kind: AlarmKind::Memory,
            value,
            severity: Severity::Critical,
            threshold: 80,
            alarm_id: 131_073,
            task: "sbcd".to_owned(),
            node: "sbc-a".to_owned(),
        })
    };
    // The wrong password first, then the right one.
    for (auth, value) in [(&b"wrongpass"[..], 77), (&b"authpass1"[..], 93)] {
        send(&[receiver(auth)], [alarm(value)]);
    }
    let out = trapd.wait_for(&[
        "SNMPv2-MIB::snmpTrapOID.0 = OID: SBC-PAIR-MIB::sbcAlarmTrap",
        "SBC-PAIR-MIB::sbcAlarmValue.0 = INTEGER: 93",
    ]);
    assert!(
        !out.contains("INTEGER: 77"),
        "the wrongly authenticated trap was printed:\n{out}"
    );
    drop(trapd);
}

/// `snmptranslate` (Debian package `snmp`) resolves our notification OIDs to names and back,
/// from the shipped MIB directory.
#[test]
fn snmptranslate_resolves_our_oids() {
    let mibs = Path::new(env!("CARGO_MANIFEST_DIR")).join("mib");
    let dir = temp_dir("snmptranslate");
    let run = |args: &[&str]| {
        let mut cmd = Command::new("snmptranslate");
        isolate_net_snmp(&mut cmd, &dir);
        let out = cmd
            .arg("-M")
            .arg(format!("+{}", mibs.display()))
            .args(["-m", "SNMPv2-MIB:SBC-PAIR-MIB"])
            .args(args)
            .output()
            .unwrap_or_else(|e| {
                panic!("snmptranslate not runnable ({e}): apt-get install -y snmptrapd snmp")
            });
        let complaints = net_snmp_complaints(&String::from_utf8_lossy(&out.stderr));
        assert!(
            out.status.success() && complaints.is_empty(),
            "{args:?}: {complaints}"
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    for (n, name) in [
        (1, "sbcAlarmTrap"),
        (2, "sbcAlarmClearTrap"),
        (3, "sbcRedundancyTrap"),
        (4, "sbcHealthTrap"),
    ] {
        assert_eq!(
            run(&[&format!(".1.3.6.1.3.3261.0.{n}")]),
            format!("SBC-PAIR-MIB::{name}")
        );
        assert_eq!(
            run(&["-On", &format!("SBC-PAIR-MIB::{name}")]),
            format!(".1.3.6.1.3.3261.0.{n}")
        );
    }
    assert_eq!(
        run(&[".1.3.6.1.3.3261.1.1.3.0"]),
        "SBC-PAIR-MIB::sbcAlarmSeverity.0"
    );
    let _ = fs::remove_dir_all(&dir);
}
