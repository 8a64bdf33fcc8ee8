//! Accounting over RADIUS/TLS (RFC 6614, `account-server transport tls`) against a real
//! FreeRADIUS listening on TLS (Debian's `freeradius`, a lab PKI made by the test):
//!
//! - 40 SIPp calls and 10 refused ones: one Start and one Stop per call, one Stop per refused
//!   attempt, all on one verified connection (`show accounting`: transport tls, connection
//!   up, one opened, nothing resent), each entry's destination port FreeRADIUS's TLS port.
//! - FreeRADIUS stopped while calls come and go (the connection lost), then started again:
//!   the records wait in the spool, a new connection is opened, every call's Start and Stop
//!   arrive, Start first; any repeat is a resend of the same record, counted by `resent`.
//! - A server whose certificate does not chain to the profile's CAs (a rogue CA), and one
//!   whose certificate does not carry `tls-server-name`: no request reaches FreeRADIUS's
//!   detail file, the records wait in the spool, the connection is never up.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use sbc_e2e::freeradius::{DetailEntry, FreeRadius, RadsecFiles};
use sbc_e2e::pair::mgmt_exec;
use sbc_e2e::sipp::{run_pair, Sipp, SippResult};
use sbc_e2e::{ports, SbcConfig, SbcNode, Scenario, TestDir};
use sbc_lab::tls::{Issued, Pki};
use serde_json::Value;

const SECRET: &str = "radsec-test-secret-41c9";
const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The lab CA and the two leaves: FreeRADIUS's (`radius.lab`, 127.0.0.1) and the SBC's.
struct Certs {
    pki: Pki,
    radius: Issued,
    sbc: Issued,
}

fn certs(dir: &TestDir) -> Certs {
    let pki = Pki::create(dir.path()).expect("lab CA");
    let radius = pki
        .issue("radius", &["radius.lab"], &[LO])
        .expect("FreeRADIUS's certificate");
    let sbc = pki.issue("sbc", &["sbc.lab"], &[LO]).expect("the SBC's");
    Certs { pki, radius, sbc }
}

fn radsec(dir: &TestDir, server: &Issued, client_ca: &Path) -> FreeRadius {
    FreeRadius::start_radsec_in(
        dir,
        SECRET,
        RadsecFiles {
            cert: server.cert.clone(),
            key: server.key.clone(),
            ca: client_ca.to_owned(),
        },
    )
    .expect("FreeRADIUS on TLS")
}

/// `account-config` with one RADIUS/TLS server at `addr` verified as `server_name`, and the
/// `tls-profile` it uses (the SBC's certificate, the lab CA).
fn radsec_toml(dir: &Path, c: &Certs, addr: SocketAddr, server_name: &str) -> String {
    format!(
        "\n[account-config]\nstate = \"enabled\"\nspool-path = \"{}\"\n\
         \n[[account-config.account-server]]\nhostname = \"{}\"\nport = {}\n\
         secret = \"{SECRET}\"\ntransport = \"tls\"\ntls-profile = \"radsec\"\n\
         tls-server-name = \"{server_name}\"\nmin-round-trip = 250\nrestart-delay = 2\n\
         \n[[tls-profile]]\nname = \"radsec\"\nend-entity-certificate = \"{}\"\n\
         private-key = \"{}\"\ntrusted-ca-certificates = [\"{}\"]\n",
        dir.join("spool").display(),
        addr.ip(),
        addr.port(),
        c.sbc.cert.display(),
        c.sbc.key.display(),
        c.pki.ca_cert().display(),
    )
}

/// `count` calls through `node` (SIPp's UAC holding each `pause_ms`, or refused 486 when
/// `busy`) against SIPp's UAS at the core agent.
fn calls(
    node: &SbcNode,
    config: &SbcConfig,
    name: &str,
    count: u32,
    pause_ms: u32,
    busy: bool,
) -> (SippResult, SippResult) {
    let dir = node.dir().clone();
    let (uac, uas) = if busy {
        (
            Scenario::File("uac_busy.xml"),
            Scenario::File("uas_busy.xml"),
        )
    } else {
        (Scenario::Builtin("uac"), Scenario::Builtin("uas"))
    };
    let uas_sipp = Sipp::new(&dir, &format!("{name}-uas"))
        .play(uas)
        .local(config.agent)
        .calls(count)
        .timeout(Duration::from_secs(90));
    let uac_sipp = Sipp::new(&dir, &format!("{name}-uac"))
        .play(uac)
        .local(SocketAddr::new(config.access.ip(), ports::free_port()))
        .remote(config.access)
        .calls(count)
        .rate(20)
        .args(["-d", &pause_ms.to_string()])
        .timeout(Duration::from_secs(70));
    run_pair(uas_sipp, config.agent, false, uac_sipp)
}

fn show_accounting(node: &SbcNode) -> Value {
    mgmt_exec(&node.mgmt_socket(), "show accounting")
        .map(|r| r["data"].clone())
        .unwrap_or(Value::Null)
}

/// Waits until `show accounting`'s `field` reaches `n` (bounded); returns the last report.
fn wait_accounting(node: &SbcNode, field: &str, n: u64, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let a = show_accounting(node);
        if a[field].as_u64().unwrap_or(0) >= n || Instant::now() > deadline {
            return a;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Each session's entries' Acct-Status-Type, in the order FreeRADIUS wrote them.
fn by_session(entries: &[DetailEntry]) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out = std::collections::BTreeMap::<String, Vec<String>>::new();
    for e in entries {
        out.entry(e.get("Acct-Session-Id").unwrap_or_default().to_owned())
            .or_default()
            .push(e.get("Acct-Status-Type").unwrap_or_default().to_owned());
    }
    out
}

#[test]
fn calls_are_accounted_over_one_verified_tls_connection() {
    let dir = TestDir::new("radsec-calls");
    let c = certs(&dir);
    let radius = radsec(&dir, &c.radius, c.pki.ca_cert());
    let mut config = SbcConfig::new();
    config.extra_toml = radsec_toml(dir.path(), &c, radius.addr(), "radius.lab");
    let mut node = SbcNode::start_in(&dir, &config.to_toml());

    let (uac, uas) = calls(&node, &config, "ok", 40, 1000, false);
    uac.assert_success(40);
    uas.assert_success(40);
    let (uac, uas) = calls(&node, &config, "busy", 10, 0, true);
    uac.assert_success(10);
    uas.assert_success(10);
    node.assert_alive();

    let a = wait_accounting(&node, "records_delivered", 90, Duration::from_secs(20));
    let _ = radius.wait_for_entries(90, Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(500));
    let entries = radius.entries();
    assert_eq!(entries.len(), 90, "raw entries; show accounting: {a}");
    let sessions = by_session(&entries);
    let answered = sessions
        .values()
        .filter(|v| *v == &["Start", "Stop"])
        .count();
    let refused = sessions.values().filter(|v| *v == &["Stop"]).count();
    assert_eq!((answered, refused), (40, 10), "{sessions:?}");
    let port = radius.port().to_string();
    assert!(
        entries
            .iter()
            .all(|e| e.get("Packet-Dst-Port") == Some(port.as_str())),
        "every request to FreeRADIUS's TLS port {port}"
    );
    let s = &a["servers"][0];
    assert_eq!(s["transport"], "tls", "{a}");
    assert_eq!(s["connection"], "up", "{a}");
    assert_eq!(s["connects"], 1, "one connection for every record: {a}");
    assert_eq!(s["acknowledged"], 90, "{a}");
    assert_eq!(s["resent"], 0, "{a}");
    assert_eq!(a["spool_pending"], 0, "{a}");
    let text = mgmt_exec(&node.mgmt_socket(), "show accounting")
        .map(|r| r["text"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    assert!(!text.contains(SECRET), "no secret in show accounting");
    node.stop();
}

#[test]
fn a_restarted_tls_server_gets_every_record_on_a_new_connection() {
    let dir = TestDir::new("radsec-restart");
    let c = certs(&dir);
    let mut radius = radsec(&dir, &c.radius, c.pki.ca_cert());
    let mut config = SbcConfig::new();
    config.extra_toml = radsec_toml(dir.path(), &c, radius.addr(), "radius.lab");
    let mut node = SbcNode::start_in(&dir, &config.to_toml());

    let (uac, _) = calls(&node, &config, "before", 10, 200, false);
    uac.assert_success(10);
    let _ = wait_accounting(&node, "records_delivered", 20, Duration::from_secs(10));
    radius.stop().expect("FreeRADIUS stops");
    let (uac, _) = calls(&node, &config, "during", 10, 200, false);
    uac.assert_success(10);
    std::thread::sleep(Duration::from_secs(2));
    let down = show_accounting(&node);
    assert!(
        down["spool_pending"].as_u64().unwrap_or(0) >= 20,
        "the outage's records wait in the spool: {down}"
    );
    radius.start_again().expect("FreeRADIUS starts again");
    let a = wait_accounting(&node, "records_delivered", 40, Duration::from_secs(30));
    let _ = radius.wait_for_entries(40, Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(500));
    let a = if a["spool_pending"] == 0 {
        a
    } else {
        show_accounting(&node)
    };
    let entries = radius.entries();
    let sessions = by_session(&entries);
    assert_eq!(sessions.len(), 20, "every call: {sessions:?}");
    for (id, kinds) in &sessions {
        // A repeat is a resend of the same record (a request whose answer the lost
        // connection took); Start comes first, Stop last.
        assert_eq!(
            kinds.first().map(String::as_str),
            Some("Start"),
            "{id}: {kinds:?}"
        );
        assert_eq!(
            kinds.last().map(String::as_str),
            Some("Stop"),
            "{id}: {kinds:?}"
        );
    }
    let s = &a["servers"][0];
    let repeats = entries.len() as u64 - 40;
    assert!(
        repeats <= s["resent"].as_u64().unwrap_or(0),
        "{repeats} repeats, each a counted resend: {a}"
    );
    assert!(
        s["connects"].as_u64().unwrap_or(0) >= 2,
        "a new connection after the restart: {a}"
    );
    assert_eq!(s["connection"], "up", "{a}");
    assert_eq!(a["records_delivered"], 40, "{a}");
    assert_eq!(a["spool_pending"], 0, "{a}");
    node.stop();
}

#[test]
fn a_tls_server_that_is_not_the_one_configured_gets_no_record() {
    let dir = TestDir::new("radsec-untrusted");
    let c = certs(&dir);
    // A server whose certificate a rogue CA signed, and a trusted one under another name.
    let rogue = Pki::create_named(dir.path(), "rogue-ca").expect("rogue CA");
    let rogue_leaf = rogue
        .issue("rogue-radius", &["radius.lab"], &[LO])
        .expect("rogue leaf");
    for (label, server, name) in [
        ("rogue CA", &rogue_leaf, "radius.lab"),
        ("another name", &c.radius, "accounting.lab"),
    ] {
        let radius = radsec(&dir, server, c.pki.ca_cert());
        let mut config = SbcConfig::new();
        let node_dir = TestDir::new(&format!("radsec-untrusted-{}", name.replace('.', "-")));
        config.extra_toml = radsec_toml(node_dir.path(), &c, radius.addr(), name);
        let mut node = SbcNode::start_in(&node_dir, &config.to_toml());
        let (uac, _) = calls(&node, &config, "calls", 5, 100, false);
        uac.assert_success(5);
        std::thread::sleep(Duration::from_secs(3));
        let a = show_accounting(&node);
        assert_eq!(radius.entries().len(), 0, "{label}: nothing reaches it");
        assert_eq!(a["records_delivered"], 0, "{label}: {a}");
        assert_eq!(a["spool_pending"], 10, "{label}: the records wait: {a}");
        assert_ne!(a["servers"][0]["connection"], "up", "{label}: {a}");
        node.assert_alive();
        node.stop();
    }
}
