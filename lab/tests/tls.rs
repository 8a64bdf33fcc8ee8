//! Our UAC against our UAS over TLS on 127.0.0.1 (no SBC), with the lab PKI
//! (`sbc_lab::tls`) written into the test's temporary directory: calls complete with mutual
//! TLS; a caller trusting another CA, or without the client certificate the UAS requires,
//! fails every call with the TLS reason, at once; `peer_certificate` sees the file's
//! certificate, and one issued later by the reopened CA.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sbc_e2e::dir::TestDir;
use sbc_lab::testing::{assert_all_completed, within};
use sbc_lab::tls::{self, Issued, LabSet, Pki};
use sbc_lab::traffic::{
    ByeFrom, FailureReason, Snapshot, TlsSettings, Transport, Uac, UacConfig, Uas, UasConfig,
};

fn any_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A TLS UAS presenting `cert`; callers must present a certificate from `client_ca` if given.
async fn uas(set: &LabSet, cert: &Issued, client_ca: Option<&std::path::Path>) -> Uas {
    let client = tls::client_config(&[&set.ca], Some((&cert.cert, &cert.key))).expect("client");
    let server = tls::server_config(&cert.cert, &cert.key, client_ca).expect("server");
    let mut cfg = UasConfig::new(any_port());
    cfg.transport = Transport::Tls;
    cfg.ring = Duration::from_millis(20);
    cfg.tls = Some(TlsSettings::client(client).with_server(server));
    Uas::start(cfg).await.expect("uas")
}

/// A TLS UAC of `calls` calls to `target`, trusting `ca`, presenting `cert` if given,
/// verifying the name uas.lab.
async fn uac(target: SocketAddr, ca: &std::path::Path, cert: Option<&Issued>, calls: u64) -> Uac {
    let client =
        tls::client_config(&[ca], cert.map(|c| (c.cert.as_path(), c.key.as_path()))).expect("cfg");
    let mut cfg = UacConfig::new(target);
    cfg.transport = Transport::Tls;
    cfg.rate = 50.0;
    cfg.calls = Some(calls);
    cfg.hold = Duration::from_millis(200);
    cfg.tls = Some(TlsSettings::client(client).with_server_name("uas.lab"));
    Uac::start(cfg).await.expect("uac")
}

/// Every call failed with the TLS reason, and the last TLS error names `why`.
fn assert_all_refused(c: &Snapshot, calls: u64, why: &str) {
    assert!(
        c.attempted == calls
            && c.failed == calls
            && c.answered == 0
            && c.failures.get(&FailureReason::Tls.key()) == Some(&calls),
        "expected {calls} calls refused by TLS:\n{}\n{c:#?}",
        c.summary()
    );
    let last = c.last_tls_error.as_deref().unwrap_or_default();
    assert!(
        last.contains(why),
        "last TLS error {last:?}, expected {why:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_calls_complete() {
    let dir = TestDir::for_current_test();
    let set = tls::write_lab_set(dir.path()).expect("lab set");
    let uas = uas(&set, &set.uas, Some(&set.ca)).await;
    let uac = uac(uas.local_addr(), &set.ca, Some(&set.uac), 20).await;
    let c = within(Duration::from_secs(20), "uac", uac.wait()).await;
    let s = within(Duration::from_secs(5), "uas", uas.wait_for_calls(20)).await;
    assert_all_completed(&c, 20);
    assert_all_completed(&s, 20);
    assert_eq!((c.tls_failures, s.tls_failures), (0, 0), "{c:#?}\n{s:#?}");
    // One connection carries every call: no retransmission, nothing stray.
    assert_eq!(c.retransmissions_sent + s.retransmissions_sent, 0);
    assert_eq!(c.stray_messages + s.stray_messages, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callee_hangs_up_over_tls() {
    let dir = TestDir::for_current_test();
    let set = tls::write_lab_set(dir.path()).expect("lab set");
    let client = tls::client_config(&[&set.ca], None).expect("client");
    let server = tls::server_config(&set.uas.cert, &set.uas.key, None).expect("server");
    let mut cfg = UasConfig::new(any_port());
    cfg.transport = Transport::Tls;
    cfg.hold = Duration::from_millis(200);
    cfg.bye_from = ByeFrom::Callee;
    cfg.tls = Some(TlsSettings::client(client.clone()).with_server(server));
    let uas = Uas::start(cfg).await.expect("uas");
    let mut cfg = UacConfig::new(uas.local_addr());
    cfg.transport = Transport::Tls;
    cfg.rate = 50.0;
    cfg.calls = Some(10);
    cfg.bye_from = ByeFrom::Callee;
    // No server name: the IP dialled, which the certificate carries too.
    cfg.tls = Some(TlsSettings::client(client));
    let uac = Uac::start(cfg).await.expect("uac");
    let c = within(Duration::from_secs(20), "uac", uac.wait()).await;
    let s = within(Duration::from_secs(5), "uas", uas.wait_for_calls(10)).await;
    assert_all_completed(&c, 10);
    assert_all_completed(&s, 10);
    assert_eq!((c.received.bye, s.received.bye), (10, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_trusting_another_ca_fails_every_call() {
    let dir = TestDir::for_current_test();
    let set = tls::write_lab_set(dir.path()).expect("lab set");
    let uas = uas(&set, &set.uas, None).await;
    let uac = uac(uas.local_addr(), &set.rogue_ca, None, 10).await;
    // At once, not after timer B (32 s).
    let c = within(Duration::from_secs(10), "uac", uac.wait()).await;
    assert_all_refused(&c, 10, "UnknownIssuer");
    let s = uas.snapshot();
    assert_eq!(s.attempted, 0, "{s:#?}");
    assert!(
        s.tls_failures >= 10,
        "the UAS counts the refused handshakes: {s:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callee_verifies_its_name() {
    let dir = TestDir::for_current_test();
    let set = tls::write_lab_set(dir.path()).expect("lab set");
    // other.lab's certificate, where uas.lab is expected.
    let uas = uas(&set, &set.other, None).await;
    let uac = uac(uas.local_addr(), &set.ca, None, 5).await;
    let c = within(Duration::from_secs(10), "uac", uac.wait()).await;
    assert_all_refused(&c, 5, "not valid for name \"uas.lab\"");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uas_requiring_client_certificates_refuses_callers_without_a_good_one() {
    let dir = TestDir::for_current_test();
    let set = tls::write_lab_set(dir.path()).expect("lab set");
    let uas = uas(&set, &set.uas, Some(&set.ca)).await;
    let addr = uas.local_addr();

    // TLS 1.3: the caller's handshake completes, the UAS's alert follows its INVITE.
    let uac_without = uac(addr, &set.ca, None, 5).await;
    let c = within(Duration::from_secs(10), "uac", uac_without.wait()).await;
    assert_all_refused(&c, 5, "CertificateRequired");
    let uac_rogue = uac(addr, &set.ca, Some(&set.rogue), 5).await;
    let c = within(Duration::from_secs(10), "uac", uac_rogue.wait()).await;
    assert_all_refused(&c, 5, "UnknownCA");
    assert_eq!(uas.snapshot().attempted, 0);

    // The same verdicts from one handshake each.
    let cfg = |cert: Option<&Issued>| {
        tls::client_config(
            &[&set.ca],
            cert.map(|c| (c.cert.as_path(), c.key.as_path())),
        )
        .expect("cfg")
    };
    let refused = tls::handshake(addr, cfg(None), "uas.lab").await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("CertificateRequired")),
        "{refused:?}"
    );
    let refused = tls::handshake(addr, cfg(Some(&set.rogue)), "uas.lab").await;
    assert!(refused.is_err(), "{refused:?}");
    let accepted = tls::handshake(addr, cfg(Some(&set.uac)), "uas.lab").await;
    assert_eq!(accepted, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_certificate_is_the_files_and_a_reissued_one_is_seen() {
    let dir = TestDir::for_current_test();
    let set = tls::write_lab_set(dir.path()).expect("lab set");
    let client: Arc<rustls::ClientConfig> = tls::client_config(&[&set.ca], None).expect("cfg");
    let first = uas(&set, &set.uas, None).await;
    let der = tls::peer_certificate(first.local_addr(), client.clone(), "uas.lab")
        .await
        .expect("handshake");
    assert_eq!(der, tls::cert_der(&set.uas.cert).expect("uas.pem"));

    // The CA reopened from its files issues a certificate the same trust accepts: a
    // rotation's new certificate (5 days: one an expiry alarm must report).
    let pki = Pki::open(dir.path()).expect("reopen the CA");
    let rotated = pki
        .issue_with_validity("uas-rotated", &["uas.lab"], &[[127, 0, 0, 1].into()], 5)
        .expect("issue");
    let second = uas(&set, &rotated, None).await;
    let der2 = tls::peer_certificate(second.local_addr(), client.clone(), "uas.lab")
        .await
        .expect("handshake with the rotated certificate");
    assert_eq!(der2, tls::cert_der(&rotated.cert).expect("rotated"));
    assert_ne!(der, der2);
    // A name the certificate does not carry is refused.
    let err = tls::peer_certificate(second.local_addr(), client, "sbc.lab")
        .await
        .expect_err("wrong name");
    assert!(format!("{err:#}").contains("not valid for name"), "{err:#}");
}
