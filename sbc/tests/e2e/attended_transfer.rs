//! Attended transfer between real phones (issue 30, item 2): three linphone consoles
//! (Debian's `linphone-cli`, linphonec 5.1) registered through the SBC to a Kamailio registrar.
//! alice calls bob; bob puts her on hold and calls carol; then bob transfers alice to carol
//! with `transfer <alice's call> --to-call <carol's call>`: his REFER's `Refer-To` carries
//! `Replaces` naming his call to carol as he knows it; the SBC translates it for each leg it
//! crosses, alice's INVITE with that `Replaces` reaches carol naming carol's own dialog, carol
//! replaces bob with alice, and bob is released. The first calls hairpin through the
//! registrar (each phone-to-phone call is two calls through the SBC); alice's INVITE with
//! `Replaces` names a leg of the SBC's and goes to carol directly.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use sbc_e2e::acli::Mgmt;
use sbc_e2e::kamailio::registrar;
use sbc_e2e::{ports, SbcNode, TestDir};

use crate::registration::eventually;

/// A linphone console driven on its standard input, stopped by its PID when dropped.
struct Linphone {
    child: Child,
    stdin: ChildStdin,
    log: PathBuf,
}

impl Linphone {
    /// `user@example.test` on SIP port `port` (UDP only), registering through `proxy`,
    /// answering calls itself, its sound from files (no sound card).
    fn start(dir: &TestDir, user: &str, port: u16, proxy: SocketAddr) -> Self {
        let home = dir.path().join(format!("linphone-{user}"));
        std::fs::create_dir_all(&home).expect("linphone dir");
        let rtp = ports::free_block(4);
        let rc = home.join("rc");
        std::fs::write(
            &rc,
            format!(
                "[sip]\nsip_port={port}\nsip_tcp_port=0\nsip_tls_port=0\ndefault_proxy=0\n\
                 [rtp]\naudio_rtp_port={rtp}\n[sound]\nechocancellation=0\n\
                 [storage]\nuri={db}\ncall_logs_db_uri={calls}\nzrtp_secrets_db_uri={zrtp}\n\
                 [proxy_0]\nreg_proxy=<sip:{proxy};transport=udp>\n\
                 reg_route=<sip:{proxy};transport=udp;lr>\n\
                 reg_identity=\"{user}\" <sip:{user}@example.test>\nreg_expires=600\n\
                 reg_sendregister=1\nquality_reporting_enabled=0\n",
                db = home.join("linphone.db").display(),
                calls = home.join("calls.db").display(),
                zrtp = home.join("zrtp.db").display(),
            ),
        )
        .expect("rc");
        let log = dir.path().join(format!("linphone-{user}.log"));
        let out = std::fs::File::create(&log).expect("log");
        let mut child = Command::new("linphonec")
            .arg("-c")
            .arg(&rc)
            .env("HOME", &home)
            .stdin(Stdio::piped())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("linphonec (Debian package linphone-cli) starts");
        let stdin = child.stdin.take().expect("its stdin");
        let mut phone = Self { child, stdin, log };
        phone.command("soundcard use files");
        phone.command("autoanswer enable");
        phone
    }

    /// One console command.
    fn command(&mut self, line: &str) {
        let _ = writeln!(self.stdin, "{line}");
        let _ = self.stdin.flush();
    }

    /// Its output so far.
    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Linphone {
    fn drop(&mut self) {
        self.command("quit");
        sbc_e2e::terminate(&mut self.child, Duration::from_secs(3));
    }
}

/// The users in calls through the SBC: each dialog's parties, as JSON text.
fn dialogs(mgmt: &mut Mgmt) -> Vec<serde_json::Value> {
    mgmt.data("show dialogs")["dialogs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn an_attended_transfer_between_linphones_ends_with_alice_and_carol() {
    attended_transfer(false);
}

/// The same with `refer-call-transfer enabled` on the phones' realm: the SBC answers bob's
/// REFER itself and sends carol (through its own hairpin, to her leg directly) an offerless
/// INVITE with `Replaces` naming her dialog with bob; carol's offer goes to alice in a
/// re-INVITE, alice's answer to carol in the ACK; carol replaces bob (her BYE reaches him
/// through the hairpin), and the SBC tells bob (NOTIFY 200) and hangs him up.
#[test]
fn an_attended_transfer_the_sbc_performs_ends_with_alice_and_carol() {
    attended_transfer(true);
}

fn attended_transfer(sbc_performs: bool) {
    sbc_e2e::netns::enter(&[]);
    sbc_e2e::netns::add_veth_address("10.99.0.1/24");
    // Registration caching, media anchored in both realms.
    let mut config = crate::registration::anchoring_config();
    if sbc_performs {
        config.extra_toml.push_str(
            "\n[[realm-config]]\nidentifier = \"access\"\nrefer-call-transfer = \"enabled\"\n",
        );
    }
    let dir = TestDir::new("attended-transfer");
    let _kamailio = registrar(&dir, config.agent);
    sbc_e2e::sipp::wait_listening(config.agent, false, Duration::from_secs(10));
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let mut alice = Linphone::start(&dir, "alice", ports::free_port(), config.access);
    let bob_port = ports::free_port();
    let mut bob = Linphone::start(&dir, "bob", bob_port, config.access);
    let carol = Linphone::start(&dir, "carol", ports::free_port(), config.access);
    let everyone = |what: &str, alice: &Linphone, bob: &Linphone, carol: &Linphone| {
        format!(
            "{what}\nalice:\n{}\nbob:\n{}\ncarol:\n{}",
            alice.output(),
            bob.output(),
            carol.output()
        )
    };
    let registered = eventually(Duration::from_secs(20), || {
        mgmt.data("show registrations")["bindings"].as_u64() == Some(3)
    });
    assert!(
        registered,
        "{}",
        everyone("not all registered", &alice, &bob, &carol)
    );

    alice.command("call sip:bob@example.test");
    let answered = |mgmt: &mut Mgmt, n: u64| {
        eventually(Duration::from_secs(15), || {
            mgmt.data("show sip-stats")["counters"]["calls_answered"].as_u64() >= Some(n)
        })
    };
    assert!(
        answered(&mut mgmt, 2),
        "{}",
        everyone("alice -> bob", &alice, &bob, &carol)
    );
    std::thread::sleep(Duration::from_secs(1));
    bob.command("pause 1");
    std::thread::sleep(Duration::from_secs(1));
    bob.command("call sip:carol@example.test");
    assert!(
        answered(&mut mgmt, 4),
        "{}",
        everyone("bob -> carol", &alice, &bob, &carol)
    );
    std::thread::sleep(Duration::from_secs(1));
    bob.command("transfer 1 --to-call 2");
    // alice and carol end in one call, bob in none. alice's INVITE with `Replaces` names a
    // leg of the SBC's: it goes to that leg's far end, carol, directly (one call through the
    // SBC, no longer hairpinned through the registrar).
    let done = eventually(Duration::from_secs(20), || {
        let d = dialogs(&mut mgmt);
        let text = serde_json::Value::Array(d.clone()).to_string();
        if sbc_performs {
            // Alice's calls keep the parties she dialled (bob's name): no leg reaches bob's
            // phone any more, one reaches carol's.
            let bob_at = format!(":{bob_port}\"");
            let performed = mgmt.data("show sip-stats")["counters"]["sbc_transfers_performed"]
                .as_u64()
                == Some(1);
            return performed && !d.is_empty() && !text.contains(&bob_at);
        }
        !d.is_empty()
            && !text.contains("sip:bob@")
            && text.contains("sip:carol@")
            && text.contains("sip:alice@")
    });
    let stats = mgmt.data("show sip-stats");
    assert!(
        done,
        "{}",
        everyone(
            &format!(
                "dialogs: {:#}\nstats: {stats:#}",
                serde_json::Value::Array(dialogs(&mut mgmt))
            ),
            &alice,
            &bob,
            &carol
        )
    );
    // They talk: RTP from both crosses the SBC's anchored ports on the call that is left.
    let talking = crate::registration::media_both_ways(&mut mgmt, None, Duration::from_secs(15));
    assert!(
        talking,
        "{}",
        everyone(
            &format!("{:#}", mgmt.data("show media")),
            &alice,
            &bob,
            &carol
        )
    );
    let counters = &stats["counters"];
    let relayed = if sbc_performs { 0 } else { 1 };
    assert!(
        counters["refers_translated"].as_u64() >= Some(relayed),
        "{stats:#}"
    );
    assert!(
        counters["replaces_matched"].as_u64() >= Some(1),
        "{stats:#}"
    );
    drop((alice, bob, carol));
    node.assert_alive();
}
