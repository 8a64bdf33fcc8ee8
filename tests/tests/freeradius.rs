//! The harness's FreeRADIUS accounting server (`sbc_e2e::freeradius`) against `radclient`:
//! requests are written to the detail file with their attributes named (the Acme Packet
//! dictionary included), every resend is a raw entry of its own (a byte-identical one too), a
//! request with a wrong secret is neither answered nor written, and a stopped server answers
//! nothing until it is started again on the same port, appending to the same file.
//!
//! FreeRADIUS not installed is a failure naming its Debian packages, never a skip.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use sbc_e2e::freeradius::{radclient_acct, DetailEntry, FreeRadius, RadclientOutcome};

const SECRET: &str = "e2e-acct-secret";
const START: &str = r#"Acct-Status-Type = Start, Acct-Session-Id = "abc", User-Name = "x", Acme-Session-Ingress-Realm = "access""#;
const STOP: &str = r#"Acct-Status-Type = Stop, Acct-Session-Id = "abc", User-Name = "x", Acct-Session-Time = 5, Acme-Session-Ingress-Realm = "access""#;
const WAIT: Duration = Duration::from_secs(5);

fn start() -> FreeRadius {
    FreeRadius::start(SECRET).unwrap_or_else(|e| panic!("FreeRADIUS does not start: {e:#}"))
}

/// `radclient` with one try and a 1 s timeout.
fn send(addr: SocketAddr, secret: &str, attrs: &str) -> RadclientOutcome {
    radclient_acct(addr, secret, attrs, 1, 1).unwrap_or_else(|e| panic!("radclient: {e:#}"))
}

fn assert_answered(out: &RadclientOutcome, what: &str) {
    assert!(
        out.answered,
        "{what}: no Accounting-Response; radclient printed:\n{}\n{}",
        out.stdout, out.stderr
    );
}

fn assert_start(e: &DetailEntry, server: &FreeRadius) {
    assert_eq!(e.get("Acct-Status-Type"), Some("Start"), "{e:?}");
    assert_eq!(e.get("Acct-Session-Id"), Some("abc"), "{e:?}");
    assert_eq!(e.get("User-Name"), Some("x"), "{e:?}");
    assert_eq!(e.get("Acct-Session-Time"), None, "{e:?}");
    assert_common(e, server);
}

fn assert_common(e: &DetailEntry, server: &FreeRadius) {
    // Named: the local dictionary includes Debian's, and so dictionary.acme (vendor 9148).
    assert_eq!(e.get("Acme-Session-Ingress-Realm"), Some("access"), "{e:?}");
    assert!(
        e.attrs.iter().all(|(n, _)| !n.starts_with("Attr-")),
        "an attribute without a name: {e:?}"
    );
    // FreeRADIUS's own attributes are kept.
    assert_eq!(e.get("Packet-Src-IP-Address"), Some("127.0.0.1"), "{e:?}");
    let port = server.port().to_string();
    assert_eq!(e.get("Packet-Dst-Port"), Some(port.as_str()), "{e:?}");
    assert!(
        e.get("Timestamp").is_some_and(|t| t.parse::<u64>().is_ok()),
        "{e:?}"
    );
    assert!(!e.header.is_empty(), "{e:?}");
}

#[test]
fn accounting_requests_resends_wrong_secret_and_restart() {
    let t0 = Instant::now();
    let mut server = start();
    let started_in = t0.elapsed();
    let addr = server.addr();
    assert!(
        ![1812, 1813].contains(&server.port()),
        "never the system server's ports"
    );

    assert_answered(&send(addr, SECRET, START), "Start");
    assert_answered(&send(addr, SECRET, STOP), "Stop");
    let entries = server.wait_for_entries(2, WAIT);
    assert_eq!(entries.len(), 2, "{entries:#?}");
    assert_start(&entries[0], &server);
    let stop = &entries[1];
    assert_eq!(stop.get("Acct-Status-Type"), Some("Stop"), "{stop:?}");
    assert_eq!(stop.get("Acct-Session-Id"), Some("abc"), "{stop:?}");
    assert_eq!(stop.get("Acct-Session-Time"), Some("5"), "{stop:?}");
    assert_common(stop, &server);

    // A wrong secret: dropped unanswered, not written.
    let wrong = send(
        addr,
        "not-the-secret",
        r#"Acct-Status-Type = Start, Acct-Session-Id = "wrong-secret""#,
    );
    assert!(
        !wrong.answered,
        "answered a wrong secret:\n{}",
        wrong.stdout
    );

    // The same Start again (radclient: a new port and Identifier): a third raw entry, right
    // after the Stop (FreeRADIUS is single-threaded: the wrong one was handled before).
    assert_answered(&send(addr, SECRET, START), "the Start again");
    let entries = server.wait_for_entries(3, WAIT);
    assert_eq!(entries.len(), 3, "{entries:#?}");
    assert_start(&entries[2], &server);
    assert!(
        entries
            .iter()
            .all(|e| e.get("Acct-Session-Id") != Some("wrong-secret")),
        "{entries:#?}"
    );
    assert!(
        server.log().contains("Shared secret is incorrect"),
        "{}",
        server.log()
    );

    // Stopped: nothing answers.
    let t1 = Instant::now();
    server.stop().expect("FreeRADIUS stops on SIGTERM");
    let stopped_in = t1.elapsed();
    assert!(!server.is_running());
    let unanswered = send(addr, SECRET, STOP);
    assert!(
        !unanswered.answered,
        "answered while stopped:\n{}",
        unanswered.stdout
    );

    // Started again: the same port, the same file, one more entry.
    let t2 = Instant::now();
    server
        .start_again()
        .unwrap_or_else(|e| panic!("FreeRADIUS starts again: {e:#}"));
    let restarted_in = t2.elapsed();
    assert_eq!(server.addr(), addr);
    assert_answered(&send(addr, SECRET, STOP), "Stop after the restart");
    let entries = server.wait_for_entries(4, WAIT);
    assert_eq!(entries.len(), 4, "{entries:#?}");
    assert_eq!(entries[3].get("Acct-Status-Type"), Some("Stop"));
    assert_common(&entries[3], &server);
    eprintln!(
        "FreeRADIUS: started in {started_in:?}, stopped in {stopped_in:?}, \
         started again in {restarted_in:?}"
    );
}

/// The bytes radclient sends for `attrs` (with `SECRET`), caught on a socket of ours.
fn request_bytes(attrs: &str) -> Vec<u8> {
    let catcher = UdpSocket::bind("127.0.0.1:0").expect("bind a UDP socket");
    catcher
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("set a read timeout");
    let to = catcher.local_addr().expect("local address");
    let attrs = attrs.to_owned();
    let sender = std::thread::spawn(move || send(to, SECRET, &attrs));
    let mut buf = [0u8; 4096];
    let (len, _) = catcher.recv_from(&mut buf).expect("radclient's request");
    let out = sender.join().expect("radclient thread");
    assert!(!out.answered);
    buf[..len].to_vec()
}

/// FreeRADIUS keeps no answered Accounting-Request in its duplicate cache, and reads its socket
/// only between requests (`-s`): the same bytes from the same port, sent again after the
/// answer or twice while it is paused, are each written.
#[test]
fn byte_identical_resends_are_each_written() {
    let mut server = start();
    let request = request_bytes(START);
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind a UDP socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("set a read timeout");
    let server_addr = server.addr();
    let mut buf = [0u8; 4096];
    let mut answer = || {
        let (_, from) = socket
            .recv_from(&mut buf)
            .expect("an Accounting-Response from FreeRADIUS");
        assert_eq!(from, server_addr);
        assert_eq!(buf[0], 5, "Accounting-Response (code 5)");
        assert_eq!(buf[1], request[1], "the request's Identifier");
    };

    // Sent, answered, sent again.
    socket
        .send_to(&request, server.addr())
        .expect("send the request");
    answer();
    socket
        .send_to(&request, server.addr())
        .expect("send the same bytes again");
    answer();
    let entries = server.wait_for_entries(2, WAIT);
    assert_eq!(entries.len(), 2, "{entries:#?}");

    // Twice while paused.
    server.pause().expect("SIGSTOP");
    for _ in 0..2 {
        socket
            .send_to(&request, server.addr())
            .expect("send the same bytes");
    }
    server.resume().expect("SIGCONT");
    answer();
    answer();
    let entries = server.wait_for_entries(4, WAIT);
    assert_eq!(entries.len(), 4, "{entries:#?}");
    let src = socket
        .local_addr()
        .expect("local address")
        .port()
        .to_string();
    for e in &entries {
        assert_start(e, &server);
        assert_eq!(e.get("Packet-Src-Port"), Some(src.as_str()), "{e:?}");
    }
    assert!(
        !server.log().contains("duplicate"),
        "FreeRADIUS saw a duplicate:\n{}",
        server.log()
    );
}

/// A FreeRADIUS that cannot bind its port fails to start with its own words; a paused one is
/// still killed (and reaped) when dropped.
#[test]
fn a_taken_port_fails_with_the_log_and_a_paused_server_is_killed_on_drop() {
    let mut server = start();
    server.stop().expect("FreeRADIUS stops on SIGTERM");
    let squatter = UdpSocket::bind(server.addr()).expect("take the port");
    let err = server
        .start_again()
        .expect_err("FreeRADIUS cannot bind a taken port");
    let message = format!("{err:#}");
    assert!(
        message.contains("exited") && message.contains(&server.port().to_string()),
        "{message}"
    );
    assert!(
        message.contains("Failed binding to acct address"),
        "{message}"
    );
    assert!(
        !message.contains("Ready to process requests"),
        "only this start's log: {message}"
    );
    drop(squatter);

    server
        .start_again()
        .unwrap_or_else(|e| panic!("FreeRADIUS starts again: {e:#}"));
    let pid = server.pid().expect("a running FreeRADIUS has a PID");
    server.pause().expect("SIGSTOP");
    let t0 = Instant::now();
    drop(server);
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "drop took {:?}",
        t0.elapsed()
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "FreeRADIUS (PID {pid}) still there after drop"
    );
}
