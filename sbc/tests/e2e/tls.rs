//! SIP over TLS end to end: the lab's UAC over TLS → the SBC's access TLS listener → the SBC
//! dialling the session-agent over TLS → the lab's UAS over TLS. Every certificate comes from
//! a lab PKI made for the test (`sbc_lab::tls::Pki`, in the test's directory).
//!
//! - `tls_calls_through_the_sbc`: 20 calls, 0 failed at either end; both handshakes counted.
//! - `mutual_tls_accepts_a_trusted_client_and_refuses_others`: with `mutual-authenticate` and
//!   `verify-names`, a client certificate of the CA carrying the name is accepted; one of
//!   another CA, one without the name, and none at all are refused.
//! - `an_agent_whose_certificate_names_another_host_fails_at_once`: the UAS presents a
//!   certificate for `other.lab` while the agent's `tls-server-name` is `uas.lab`: the
//!   handshake is refused, the runtime hands the engine a 503 for each request (a transport
//!   error, RFC 3261 §8.1.3.1), and every call is answered 500 at once (a next hop's 503 is
//!   not relayed as 503, §16.7; not 408 after timer B).
//! - `a_rotated_certificate_is_presented_by_the_next_handshake`: the SBC's certificate files
//!   are replaced and `activate-config` runs while TLS calls are up: the calls end normally, the
//!   next handshake presents the new certificate; a broken file refuses the activation and
//!   the running certificate stays.
//! - `tls_calls_survive_kill9_*`: a pair, TLS on both sides; kill -9 of the active with 20
//!   established TLS calls: every BYE succeeds through the new active, the caller's (on its
//!   new TLS connection to the service address, relayed on a TLS connection the new active
//!   opens to the agent) and the callee's (the UAS dials the SBC's TLS Contact; the new active
//!   dials the caller's Contact, verifying the caller's certificate against that IP).
//! - `a_certificate_near_its_expiry_is_trapped_until_it_is_renewed`: a 5-day certificate sends
//!   `sbcTlsCertExpiringTrap` to snmptrapd; renewed and activated, `show tls` clears it.
//! - `strangers_on_the_tls_port_hold_nothing_past_their_handshake_deadline`: silent
//!   connections fill a source's places and are closed at `tls-handshake-timeout-ms`; the next
//!   one is refused at once; another source is unaffected; plain text is refused.
//! - `a_node_refuses_to_start_with_a_key_that_is_not_its_certificates`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sbc_e2e::dir::TestDir;
use sbc_e2e::pair::{kill9, mgmt_exec, Pair, PairConfig, NAMES};
use sbc_e2e::sbc::{SbcConfig, SbcNode, TlsSetup};
use sbc_lab::testing::{assert_all_completed, blocking, until, within};
use sbc_lab::tls::{cert_der, client_config, handshake, peer_certificate, server_config, Pki};
use sbc_lab::traffic::{ByeFrom, TlsSettings, Transport, Uac, UacConfig, Uas, UasConfig};

const LO: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// The test's PKI: a CA, the SBC's certificate (sbc.lab, 127.0.0.1), the UAS's (uas.lab,
/// 127.0.0.1), the UAC's (uac.lab), and `other.lab`'s.
struct Lab {
    dir: TestDir,
    pki: Pki,
}

impl Lab {
    fn new(name: &str) -> Self {
        let dir = TestDir::new(name);
        let pki = Pki::create(dir.path()).expect("lab CA");
        for (stem, dns) in [("sbc", "sbc.lab"), ("uas", "uas.lab"), ("uac", "uac.lab")] {
            pki.issue(stem, &[dns], &[LO]).expect("leaf");
        }
        pki.issue("other", &["other.lab"], &[]).expect("leaf");
        Self { dir, pki }
    }

    fn file(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    /// The SBC's profile: its certificate, trusting the lab CA.
    fn sbc_setup(&self) -> TlsSetup {
        TlsSetup::new(
            &self.file("sbc.pem"),
            &self.file("sbc-key.pem"),
            self.pki.ca_cert(),
        )
    }

    /// A UAS over TLS presenting `stem`'s certificate.
    fn uas_tls(&self, stem: &str) -> TlsSettings {
        let server = server_config(
            &self.file(&format!("{stem}.pem")),
            &self.file(&format!("{stem}-key.pem")),
            None,
        )
        .expect("uas server config");
        let client = client_config(&[self.pki.ca_cert()], None).expect("uas client config");
        TlsSettings::client(client)
            .with_server_name("sbc.lab")
            .with_server(server)
    }

    /// A UAC over TLS trusting the lab CA, verifying `sbc.lab`, presenting `cert` if given.
    fn uac_tls(&self, cert: Option<&str>) -> TlsSettings {
        let files = cert.map(|s| {
            (
                self.file(&format!("{s}.pem")),
                self.file(&format!("{s}-key.pem")),
            )
        });
        let client = client_config(
            &[self.pki.ca_cert()],
            files.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
        )
        .expect("uac client config");
        TlsSettings::client(client).with_server_name("sbc.lab")
    }
}

/// A UAS over TLS on a fresh port presenting `stem`'s certificate, holding calls `hold`.
async fn tls_uas(lab: &Lab, stem: &str, hold: Duration) -> Uas {
    let mut cfg = UasConfig::new(SocketAddr::new(LO, 0));
    cfg.transport = Transport::Tls;
    cfg.tls = Some(lab.uas_tls(stem));
    cfg.ring = Duration::from_millis(20);
    cfg.hold = hold;
    cfg.bye_from = ByeFrom::Caller;
    cfg.bye_wait = Duration::from_secs(30);
    Uas::start(cfg).await.expect("uas")
}

/// A node with TLS on both interfaces, its agent `uas` reached over TLS as `uas.lab`.
fn tls_node(lab: &Lab, agent: SocketAddr, tls: TlsSetup) -> (SbcConfig, SbcNode) {
    let mut config = SbcConfig::new();
    config.agent = agent;
    config.agent_transport = "tls";
    let mut tls = tls;
    tls.agent_server_name
        .get_or_insert_with(|| "uas.lab".into());
    config.tls = Some(tls);
    let _ = lab;
    let node = SbcNode::start_config(&config);
    (config, node)
}

fn access_tls(config: &SbcConfig) -> SocketAddr {
    let port = config.tls.as_ref().map_or(0, |t| t.access_port);
    SocketAddr::new(config.access.ip(), port)
}

fn uac_config(target: SocketAddr, tls: TlsSettings, calls: u64, hold: Duration) -> UacConfig {
    let mut cfg = UacConfig::new(target);
    cfg.transport = Transport::Tls;
    cfg.tls = Some(tls);
    cfg.calls = Some(calls);
    cfg.rate = 20.0;
    cfg.hold = hold;
    cfg.bye_from = ByeFrom::Caller;
    cfg.bye_wait = Duration::from_secs(30);
    cfg
}

fn tls_counters(node: &SbcNode) -> serde_json::Value {
    let v = mgmt_exec(&node.mgmt_socket(), "show sip-stats").expect("show sip-stats");
    v["data"]["tls"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_calls_through_the_sbc() {
    let lab = Lab::new("tls-calls");
    let uas = tls_uas(&lab, "uas", Duration::from_millis(500)).await;
    let (config, node) = tls_node(&lab, uas.local_addr(), lab.sbc_setup());
    let uac = Uac::start(uac_config(
        access_tls(&config),
        lab.uac_tls(None),
        20,
        Duration::from_millis(500),
    ))
    .await
    .expect("uac");
    let c = within(Duration::from_secs(60), "uac", uac.wait()).await;
    let s = within(Duration::from_secs(10), "uas", uas.wait_for_calls(20)).await;
    eprintln!("uac: {}\nuas: {}", c.summary(), s.summary());
    assert_all_completed(&c, 20);
    assert_all_completed(&s, 20);
    let node = blocking(move || {
        let tls = tls_counters(&node);
        eprintln!("TLS counters: {tls}");
        assert!(tls["accepted"].as_u64().unwrap_or(0) >= 1, "{tls}");
        assert!(tls["dialled"].as_u64().unwrap_or(0) >= 1, "{tls}");
        assert!(tls["handshakes"].as_u64().unwrap_or(0) >= 2, "{tls}");
        assert_eq!(tls["handshake_failed"].as_u64(), Some(0), "{tls}");
        let shown = mgmt_exec(&node.mgmt_socket(), "show tls").expect("show tls");
        assert!(
            shown["data"]["certificates"][0]["profile"] == "edge",
            "{shown}"
        );
        node
    })
    .await;
    drop(uac);
    drop(uas);
    blocking(move || drop(node)).await;
    drop(config);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_accepts_a_trusted_client_and_refuses_others() {
    let lab = Lab::new("tls-mutual");
    let rogue = Pki::create_named(lab.dir.path(), "rogue-ca").expect("rogue CA");
    let rogue_leaf = rogue
        .issue("rogue", &["uac.lab"], &[LO])
        .expect("rogue leaf");
    let uas = tls_uas(&lab, "uas", Duration::from_millis(200)).await;
    let mut setup = lab.sbc_setup();
    setup.mutual = true;
    setup.verify_names = vec!["uac.lab".into()];
    let (config, node) = tls_node(&lab, uas.local_addr(), setup);
    let target = access_tls(&config);
    let ca = lab.pki.ca_cert().to_owned();
    let with = |cert: Option<(&std::path::Path, &std::path::Path)>| {
        client_config(&[ca.as_path()], cert).expect("client config")
    };
    let good = handshake(
        target,
        with(Some((&lab.file("uac.pem"), &lab.file("uac-key.pem")))),
        "sbc.lab",
    )
    .await;
    assert!(good.is_ok(), "a trusted client certificate: {good:?}");
    for (what, cfg) in [
        ("no certificate", with(None)),
        (
            "another CA's",
            with(Some((&rogue_leaf.cert, &rogue_leaf.key))),
        ),
        (
            "the CA's, without the name",
            with(Some((&lab.file("other.pem"), &lab.file("other-key.pem")))),
        ),
    ] {
        let r = handshake(target, cfg, "sbc.lab").await;
        assert!(r.is_err(), "{what} must be refused: {r:?}");
        eprintln!("{what}: refused: {r:?}");
    }
    // Calls with the good certificate go through.
    let uac = Uac::start(uac_config(
        target,
        lab.uac_tls(Some("uac")),
        5,
        Duration::from_millis(200),
    ))
    .await
    .expect("uac");
    let c = within(Duration::from_secs(40), "uac", uac.wait()).await;
    assert_all_completed(&c, 5);
    let node = blocking(move || {
        let tls = tls_counters(&node);
        eprintln!("TLS counters: {tls}");
        assert!(tls["handshake_failed"].as_u64().unwrap_or(0) >= 3, "{tls}");
        node
    })
    .await;
    drop(uas);
    blocking(move || drop(node)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_whose_certificate_names_another_host_fails_at_once() {
    let lab = Lab::new("tls-wrong-name");
    let uas = tls_uas(&lab, "other", Duration::from_millis(200)).await;
    let (config, node) = tls_node(&lab, uas.local_addr(), lab.sbc_setup());
    let started = Instant::now();
    let mut cfg = uac_config(
        access_tls(&config),
        lab.uac_tls(None),
        5,
        Duration::from_millis(200),
    );
    cfg.rate = 5.0;
    let uac = Uac::start(cfg).await.expect("uac");
    let c = within(Duration::from_secs(30), "uac", uac.wait()).await;
    eprintln!("uac: {}", c.summary());
    assert_eq!(c.failed, 5, "{}", c.summary());
    assert_eq!(
        c.failures.get("error_response_500").copied(),
        Some(5),
        "every call answered 500: {:?}",
        c.failures
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "500 at once, not after timer B (32 s)"
    );
    let node = blocking(move || {
        let tls = tls_counters(&node);
        eprintln!("TLS counters: {tls}");
        assert!(tls["handshake_failed"].as_u64().unwrap_or(0) >= 1, "{tls}");
        assert!(tls["unreachable_503"].as_u64().unwrap_or(0) >= 5, "{tls}");
        // One attempt per back-off, not one handshake per call and per ACK.
        assert!(tls["dial_failed"].as_u64().unwrap_or(0) < 5, "{tls}");
        assert!(tls["dial_backoff"].as_u64().unwrap_or(0) >= 1, "{tls}");
        // The engine's ACK of each 503 is not dialled toward the agent that just failed.
        assert_eq!(tls["unreachable_ack_dropped"].as_u64(), Some(5), "{tls}");
        node
    })
    .await;
    drop(uas);
    blocking(move || drop(node)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_is_presented_by_the_next_handshake() {
    let lab = Lab::new("tls-rotate");
    let hold = Duration::from_secs(6);
    let uas = tls_uas(&lab, "uas", hold).await;
    let (config, node) = tls_node(&lab, uas.local_addr(), lab.sbc_setup());
    let target = access_tls(&config);
    let probe = client_config(&[lab.pki.ca_cert()], None).expect("probe config");
    let first = peer_certificate(target, probe.clone(), "sbc.lab")
        .await
        .expect("first");
    assert_eq!(first, cert_der(&lab.file("sbc.pem")).expect("der"));

    let uac = Uac::start(uac_config(target, lab.uac_tls(None), 5, hold))
        .await
        .expect("uac");
    let stats = uac.stats();
    until(Duration::from_secs(10), "calls up", || {
        stats.snapshot().active == 5
    })
    .await;

    // A broken file refuses the activation; the running certificate stays.
    let good_pem = std::fs::read(lab.file("sbc.pem")).expect("pem");
    std::fs::write(lab.file("sbc.pem"), b"not a certificate\n").expect("write");
    let socket = node.mgmt_socket();
    let refused = blocking({
        let socket = socket.clone();
        move || mgmt_exec(&socket, "activate-config")
    })
    .await
    .expect("answer");
    eprintln!("broken file: {refused}");
    assert_eq!(refused["ok"], false, "{refused}");
    assert!(
        refused.to_string().contains("end-entity-certificate"),
        "the error names the file: {refused}"
    );
    std::fs::write(lab.file("sbc.pem"), &good_pem).expect("restore");
    let still = peer_certificate(target, probe.clone(), "sbc.lab")
        .await
        .expect("still");
    assert_eq!(still, first);

    // The renewal: a new certificate and key in the same files.
    let renewed = lab.pki.issue("sbc", &["sbc.lab"], &[LO]).expect("renewed");
    let activated = blocking({
        let socket = socket.clone();
        move || mgmt_exec(&socket, "activate-config")
    })
    .await
    .expect("answer");
    assert_eq!(activated["ok"], true, "{activated}");
    let next = peer_certificate(target, probe, "sbc.lab")
        .await
        .expect("next");
    assert_eq!(next, cert_der(&renewed.cert).expect("der"));
    assert_ne!(
        next, first,
        "the next handshake presents the new certificate"
    );

    let c = within(hold + Duration::from_secs(30), "uac", uac.wait()).await;
    eprintln!("uac: {}", c.summary());
    assert_all_completed(&c, 5);
    drop(uas);
    blocking(move || drop(node)).await;
}

async fn tls_calls_across_kill9(bye_from: ByeFrom) {
    const CALLS: u64 = 20;
    let _ = sbc_e2e::sbc::sbc_binary();
    let lab = Arc::new(Lab::new("tls-kill9"));
    // Long enough that the calls are still up at the kill when the machine is loaded (the
    // suite runs beside it): placing them, replicating them and the takeover take a few
    // seconds then, and a call that ended before the kill proves nothing.
    let hold = Duration::from_secs(16);
    let mut uas_cfg = UasConfig::new(SocketAddr::new(LO, 0));
    uas_cfg.transport = Transport::Tls;
    uas_cfg.tls = Some(lab.uas_tls("uas"));
    uas_cfg.ring = Duration::from_millis(20);
    uas_cfg.hold = hold;
    uas_cfg.bye_from = bye_from;
    uas_cfg.bye_wait = Duration::from_secs(30);
    let uas = Uas::start(uas_cfg).await.expect("uas");
    let mut config = PairConfig::new();
    config.sip.agent = uas.local_addr();
    config.sip.agent_transport = "tls";
    let mut setup = lab.sbc_setup();
    setup.agent_server_name = Some("uas.lab".into());
    config.sip.tls = Some(setup);
    let target = access_tls(&config.sip);
    let pair = blocking(move || Pair::start(config)).await;
    let (pair, active, standby) = blocking(move || {
        let (a, s) = pair.wait_roles(Duration::from_secs(15));
        (pair, a, s)
    })
    .await;
    eprintln!(
        "roles: {} active, {} standby",
        NAMES[active], NAMES[standby]
    );
    // The caller listens on its Contact over TLS, with a certificate for its IP: the new
    // active dials it there for the callee's BYE, verifying that IP.
    let mut tls = lab.uac_tls(None);
    tls = tls.with_server(
        server_config(&lab.file("uac.pem"), &lab.file("uac-key.pem"), None).expect("uac server"),
    );
    let mut cfg = uac_config(target, tls, CALLS, hold);
    cfg.bye_from = bye_from;
    cfg.tcp_listen = true;
    let uac = Uac::start(cfg).await.expect("uac");
    let stats = uac.stats();
    until(Duration::from_secs(5), "all calls established", || {
        stats.snapshot().active == CALLS
    })
    .await;
    // Established on the UAS's side too (see pair_tcp_failover.rs): an ACK still on its way
    // through the active when it is killed dies with that connection.
    let uas_stats = uas.stats();
    until(Duration::from_secs(5), "every ACK at the UAS", || {
        uas_stats.snapshot().received.ack == CALLS
    })
    .await;
    let pair = blocking(move || {
        let mut pair = pair;
        pair.wait_replicated(standby, CALLS, Duration::from_secs(10));
        let _ = kill9(&mut pair.nodes[active]);
        pair.wait_redundancy(standby, Duration::from_secs(5), "active", |r| r.is_active());
        pair
    })
    .await;
    let c = within(hold + Duration::from_secs(40), "uac", uac.wait()).await;
    let s = within(Duration::from_secs(10), "uas", uas.wait_for_calls(CALLS)).await;
    eprintln!("uac: {}\nuas: {}", c.summary(), s.summary());
    assert_all_completed(&c, CALLS);
    assert_all_completed(&s, CALLS);
    match bye_from {
        ByeFrom::Caller => assert_eq!(s.received.bye, CALLS, "every BYE reached the UAS"),
        ByeFrom::Callee => assert_eq!(c.received.bye, CALLS, "every BYE reached the UAC"),
    }
    let pair = blocking(move || {
        let mut pair = pair;
        let st = pair
            .exec(standby, "show sip-stats")
            .expect("the new active answers");
        let tls = &st["data"]["tls"];
        eprintln!("new active's TLS counters: {tls}");
        assert!(tls["dialled"].as_u64().unwrap_or(0) >= 1, "{st}");
        assert!(tls["accepted"].as_u64().unwrap_or(0) >= 1, "{st}");
        assert_eq!(tls["handshake_failed"].as_u64(), Some(0), "{st}");
        pair.nodes[standby].assert_alive();
        pair
    })
    .await;
    drop(uac);
    drop(uas);
    blocking(move || drop(pair)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_calls_survive_kill9_caller_hangs_up() {
    tls_calls_across_kill9(ByeFrom::Caller).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_calls_survive_kill9_callee_hangs_up() {
    tls_calls_across_kill9(ByeFrom::Callee).await;
}

#[test]
fn a_certificate_near_its_expiry_is_trapped_until_it_is_renewed() {
    let lab = Lab::new("tls-expiry");
    lab.pki
        .issue_with_validity("sbc", &["sbc.lab"], &[LO], 5)
        .expect("a 5-day certificate");
    let trap_dir = TestDir::new("tls-expiry-trapd");
    let trapd = sbc_e2e::snmp::Trapd::start(&trap_dir);
    let mut config = SbcConfig::new();
    config.tls = Some(lab.sbc_setup());
    config.extra_toml.push_str(&format!(
        "\n[[system-config.trap-receiver]]\nip-address = \"127.0.0.1\"\nport = {}\n",
        trapd.port()
    ));
    let node = SbcNode::start_config(&config);
    let trap = trapd.wait_trap(
        "SBC-PAIR-MIB::sbcTlsCertExpiringTrap",
        0,
        Duration::from_secs(15),
    );
    eprintln!("trap: {trap:?}");
    assert_eq!(
        trap.get("SBC-PAIR-MIB::sbcTlsProfile.0"),
        Some("STRING: edge")
    );
    let days: i64 = trap
        .get("SBC-PAIR-MIB::sbcTlsCertDaysLeft.0")
        .and_then(|d| d.strip_prefix("INTEGER: "))
        .and_then(|d| d.parse().ok())
        .expect("days left");
    assert!((3..=5).contains(&days), "{days} days left");
    let shown = mgmt_exec(&node.mgmt_socket(), "show tls").expect("show tls");
    assert_eq!(
        shown["data"]["certificates"][0]["expiring"], true,
        "{shown}"
    );

    // Renewed: the next activation ends it.
    lab.pki.issue("sbc", &["sbc.lab"], &[LO]).expect("renewed");
    let activated = mgmt_exec(&node.mgmt_socket(), "activate-config").expect("answer");
    assert_eq!(activated["ok"], true, "{activated}");
    let shown = mgmt_exec(&node.mgmt_socket(), "show tls").expect("show tls");
    assert_eq!(
        shown["data"]["certificates"][0]["expiring"], false,
        "{shown}"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        trapd
            .traps_named("SBC-PAIR-MIB::sbcTlsCertExpiringTrap")
            .len(),
        1,
        "one trap for the expiring certificate, none after the renewal"
    );
    drop(node);
}

#[test]
fn a_node_refuses_to_start_with_a_key_that_is_not_its_certificates() {
    let lab = Lab::new("tls-mismatch");
    let mut setup = lab.sbc_setup();
    setup.key = lab.file("uas-key.pem");
    let mut config = SbcConfig::new();
    config.tls = Some(setup);
    let file = lab.dir.file("mismatch.toml");
    std::fs::write(&file, config.to_toml()).expect("write config");
    let stderr = crate::acli::run_refused(&lab.dir, &file);
    for needle in [
        "tls-profile edge",
        "private-key",
        "uas-key.pem",
        "does not belong",
    ] {
        assert!(
            stderr.contains(needle),
            "{needle:?} not in the refusal:\n{stderr}"
        );
    }
}

/// One TLS handshake from `local`'s IP to `target`, trusting the lab CA, as `sbc.lab`.
async fn handshake_from(local: IpAddr, target: SocketAddr, lab: &Lab) -> Result<(), String> {
    let socket = tokio::net::TcpSocket::new_v4().map_err(|e| e.to_string())?;
    socket
        .bind(SocketAddr::new(local, 0))
        .map_err(|e| e.to_string())?;
    let tcp = socket.connect(target).await.map_err(|e| e.to_string())?;
    let cfg = client_config(&[lab.pki.ca_cert()], None).map_err(|e| e.to_string())?;
    let name = sbc_lab::tls::server_name("sbc.lab").map_err(|e| e.to_string())?;
    let connect = tokio_rustls::TlsConnector::from(cfg).connect(name, tcp);
    match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_on_the_tls_port_hold_nothing_past_their_handshake_deadline() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let lab = Lab::new("tls-strangers");
    let mut config = SbcConfig::new();
    config.tls = Some(lab.sbc_setup());
    config.sip_lines = vec![
        "tls-handshake-timeout-ms = 1000".into(),
        "tcp-max-connections-per-source = 8".into(),
    ];
    let node = SbcNode::start_config(&config);
    let target = access_tls(&config);

    // Eight connections from a stranger (127.0.0.5: not the session-agent's address, which
    // is exempt) that never say hello fill that source's places.
    let stranger = IpAddr::from([127, 0, 0, 5]);
    let from_stranger = || async {
        let s = tokio::net::TcpSocket::new_v4().expect("socket");
        s.bind(SocketAddr::new(stranger, 0)).expect("bind");
        s.connect(target).await.expect("connect")
    };
    let mut silent = Vec::new();
    for _ in 0..8 {
        silent.push(from_stranger().await);
    }
    // A ninth from the same source is closed at once; a plain-text SIP request is no
    // handshake.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut ninth = from_stranger().await;
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_millis(500), ninth.read(&mut buf))
        .await
        .expect("closed at once, not at the handshake deadline");
    assert!(matches!(n, Ok(0) | Err(_)), "the ninth is closed: {n:?}");
    // Another source is not affected.
    handshake_from(IpAddr::from([127, 0, 0, 3]), target, &lab)
        .await
        .expect("another source's handshake");
    let plain = tokio::net::TcpSocket::new_v4().expect("socket");
    plain
        .bind(SocketAddr::new(IpAddr::from([127, 0, 0, 4]), 0))
        .expect("bind");
    let mut plain = plain.connect(target).await.expect("connect");
    let _ = plain
        .write_all(b"OPTIONS sip:sbc@127.0.0.1 SIP/2.0\r\nContent-Length: 0\r\n\r\n")
        .await;
    let n = tokio::time::timeout(Duration::from_secs(3), plain.read(&mut buf)).await;
    assert!(
        n.is_ok(),
        "plain text is answered with an alert or closed, not left hanging"
    );

    // Past the deadline the silent ones are gone and the source connects again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for s in &mut silent {
        let n = tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf))
            .await
            .expect("closed by the deadline");
        assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
    }
    handshake_from(stranger, target, &lab)
        .await
        .expect("the source's places are free again");
    let node = blocking(move || {
        let tls = tls_counters(&node);
        eprintln!("TLS counters: {tls}");
        assert_eq!(tls["handshake_timeout"].as_u64(), Some(8), "{tls}");
        assert!(tls["handshake_failed"].as_u64().unwrap_or(0) >= 1, "{tls}");
        assert!(
            tls["refused_source_cap"].as_u64().unwrap_or(0) >= 1,
            "{tls}"
        );
        assert_eq!(tls["handshakes"].as_u64(), Some(2), "{tls}");
        node
    })
    .await;
    blocking(move || drop(node)).await;
}
