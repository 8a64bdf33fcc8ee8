//! Phones registered through the SBC (`registration-caching`), end to end with real peers:
//! two baresip softphones register through the SBC's access interface to a Kamailio
//! registrar that challenges every REGISTER (digest, `pv_www_authenticate`), and call each
//! other by address of record.
//!
//! - `phones_registered_through_the_sbc_call_each_other_by_aor`: both phones authenticate with
//!   the registrar through the SBC (the 401 and the credentials pass both ways), the cache
//!   holds one binding each with the phone's own Contact and flow, the registrar holds our
//!   Contacts (`sip:r-<token>@<core>`), and a call from alice to `sip:bob@example.test` goes
//!   phone → SBC → registrar → SBC (our Contact: the binding's flow) → phone and is answered
//!   (before issue 29 the registrar held the SBC's rewritten AoR and the call got 404), with
//!   its media anchored in both realms. A second call the other way works too, a MESSAGE
//!   to each phone's AoR at the registrar reaches it, and `clear-registration` removes a
//!   phone's binding.
//! - `a_stranger_cannot_take_a_phones_calls_and_unregistered_sources_are_refused`: a REGISTER
//!   for alice from another source, answered 401 by the registrar, changes nothing (only the
//!   registrar's 2xx binds), nor does one shaped as alice's refresh (her Call-ID, a higher
//!   CSeq, from another port of her address): a call to alice still reaches her; with `allow-anonymous = registered` an INVITE from an
//!   unregistered source gets 403; a request for a token no binding has gets 480.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sbc_e2e::acli::Mgmt;
use sbc_e2e::kamailio::{registrar_cfg, Kamailio};
use sbc_e2e::raw::{response_to, RawTcp, RawUdp, SipMsg};
use sbc_e2e::{ports, SbcConfig, SbcNode, TestDir};

fn lo(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// The password the registrar checks for every user.
const PASSWORD: &str = "e2e-secret";

/// A registrar for `example.test` at `addr` that challenges every REGISTER (digest with
/// `PASSWORD`) and relays calls to a registered user's contact, record-routed.
fn authenticating_registrar(dir: &TestDir, addr: SocketAddr) -> Kamailio {
    let challenge = format!(
        "if (!pv_www_authenticate(\"$td\", \"{PASSWORD}\", \"0\")) {{ www_challenge(\"$td\", \"0\"); exit; }} \
         consume_credentials(); save(\"location\");"
    );
    Kamailio::start(
        dir,
        &registrar_cfg(addr, "loadmodule \"auth.so\"", &challenge),
    )
}

/// A baresip softphone (Debian's `baresip`), driven through its UDP console (`cons`), stopped
/// by its PID when dropped.
struct Baresip {
    child: Child,
    console: SocketAddr,
    log: PathBuf,
}

/// A minute of 8 kHz mono 16-bit silence as a WAV file in `dir` (what the phones send).
/// baresip hangs up when its source file ends: a minute outlasts every test's call, which the
/// test ends itself (five seconds did not, on a loaded machine: a transfer's media check could
/// still be polling when the caller hung up).
fn silence(dir: &std::path::Path) -> PathBuf {
    let samples: u32 = 8000 * 60;
    let data = samples * 2;
    let mut wav = Vec::with_capacity(44 + data as usize);
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + data).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes());
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&8000u32.to_le_bytes());
    wav.extend_from_slice(&16_000u32.to_le_bytes()); // bytes per second
    wav.extend_from_slice(&2u16.to_le_bytes()); // block align
    wav.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&data.to_le_bytes());
    wav.resize(44 + data as usize, 0);
    let path = dir.join("silence.wav");
    std::fs::write(&path, wav).expect("silence.wav");
    path
}

impl Baresip {
    /// `user@example.test` listening at `sip`, registering through `proxy` (the SBC) with
    /// `PASSWORD`, answering calls itself.
    fn start(dir: &TestDir, user: &str, sip: SocketAddr, proxy: SocketAddr) -> Self {
        Self::start_with(dir, user, sip, proxy, "")
    }

    /// [`Baresip::start`] with more application modules (`module_app` lines, loaded before
    /// the account is: baresip's `mwi` loops if the account registers first).
    fn start_with(
        dir: &TestDir,
        user: &str,
        sip: SocketAddr,
        proxy: SocketAddr,
        apps: &str,
    ) -> Self {
        let home = dir.path().join(user);
        std::fs::create_dir_all(&home).expect("baresip dir");
        // Not the SIP port + 1: baresip opens TLS there.
        let console = (0..10)
            .map(|_| ports::free_port())
            .find(|&p| p != sip.port().wrapping_add(1))
            .map(|p| SocketAddr::new(sip.ip(), p))
            .expect("a free console port");
        let config = format!(
            "poll_method epoll\nsip_listen {sip}\n\
             audio_player aufile,{play}\naudio_source aufile,{source}\naudio_alert aufile,{play}\n\
             audio_srate 8000\naudio_channels 1\nrtp_ports 40000-40999\n\
             module_path /usr/lib/baresip/modules\n\
             module g711.so\nmodule aufile.so\nmodule cons.so\n\
             {apps}module_app account.so\nmodule_app menu.so\ncons_listen {console}\n",
            play = home.join("out.wav").display(),
            source = silence(&home).display(),
        );
        std::fs::write(home.join("config"), config).expect("config");
        std::fs::write(
            home.join("accounts"),
            format!(
                "<sip:{user}@example.test>;auth_pass={PASSWORD};outbound=\"sip:{proxy};transport=udp\";\
                 regint=120;answermode=auto;audio_codecs=PCMU;mwi={mwi}\n",
                mwi = if apps.contains("mwi") { "yes" } else { "no" },
            ),
        )
        .expect("accounts");
        let log = dir.path().join(format!("baresip-{user}.log"));
        let out = std::fs::File::create(&log).expect("log");
        let child = Command::new("baresip")
            .arg("-f")
            .arg(&home)
            .arg("-v")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("baresip (Debian package baresip) starts");
        Self {
            child,
            console,
            log,
        }
    }

    /// Sends one console command (`/dial ...`, `/hangup`).
    fn command(&self, line: &str) {
        let sock = UdpSocket::bind(SocketAddr::new(self.console.ip(), 0)).expect("bind");
        sock.send_to(format!("{line}\n").as_bytes(), self.console)
            .expect("send to the console");
    }

    /// The phone's output so far.
    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Baresip {
    fn drop(&mut self) {
        sbc_e2e::terminate(&mut self.child, Duration::from_secs(3));
    }
}

/// Moves the test into a network namespace of its own, with a veth address for the phones'
/// media (baresip takes its SDP address from a non-loopback interface, never `lo`): nothing
/// the test sends leaves it.
fn phones_namespace() {
    sbc_e2e::netns::enter(&[]);
    sbc_e2e::netns::add_veth_address("10.99.0.1/24");
}

/// Whether, within `limit`, the anchored calls (exactly `calls` of them, or at least one) each
/// carry at least 20 RTP packets from both ends (`show media`).
pub(crate) fn media_both_ways(mgmt: &mut Mgmt, calls: Option<usize>, limit: Duration) -> bool {
    let carried = |c: &serde_json::Value| {
        ["from_caller", "from_callee"]
            .iter()
            .all(|d| c[d]["packets"].as_u64() >= Some(20))
    };
    eventually(limit, || {
        let media = mgmt.data("show media");
        let now = media["media"]["calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        calls.map_or(!now.is_empty(), |n| now.len() == n) && now.iter().all(carried)
    })
}

/// Polls `f` every 200 ms for at most `limit`; whether it became true.
pub(crate) fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    f()
}

/// A node caching registrations on its access interface (and `extra` more access keys).
fn caching_config(registrar: IpAddr, extra: &[&str]) -> SbcConfig {
    let mut config = SbcConfig::with_addresses(lo(1), lo(1), registrar);
    config
        .access_lines
        .push("registration-caching = true".into());
    config.access_lines.push("nat-traversal = \"rport\"".into());
    config
        .access_lines
        .extend(extra.iter().map(|l| (*l).to_owned()));
    config
}

fn bindings(mgmt: &mut Mgmt) -> serde_json::Value {
    mgmt.data("show registrations")
}

#[test]
fn phones_registered_through_the_sbc_call_each_other_by_aor() {
    phones_namespace();
    let config = anchoring_config();
    let dir = TestDir::new("registration-phones");
    let _kamailio = authenticating_registrar(&dir, config.agent);
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let alice_at = SocketAddr::new(lo(21), ports::free_port());
    let bob_at = SocketAddr::new(lo(22), ports::free_port());
    let alice = Baresip::start(&dir, "alice", alice_at, config.access);
    let bob = Baresip::start(&dir, "bob", bob_at, config.access);

    let registered = eventually(Duration::from_secs(20), || {
        bindings(&mut mgmt)["bindings"].as_u64() == Some(2)
    });
    let shown = bindings(&mut mgmt);
    assert!(
        registered,
        "{shown:#}\nalice:\n{}\nbob:\n{}",
        alice.output(),
        bob.output()
    );
    let rows = shown["rows"].as_array().cloned().unwrap_or_default();
    let aors: Vec<&str> = rows.iter().filter_map(|r| r["aor"].as_str()).collect();
    assert_eq!(
        aors,
        ["sip:alice@example.test", "sip:bob@example.test"],
        "{shown:#}"
    );
    // Each binding is reached where its phone sends from, and was challenged first: the
    // registrar's 401 went back and the phone's credentials came through.
    assert!(
        rows[0]["flow"]
            .as_str()
            .is_some_and(|f| f.contains(&alice_at.to_string())),
        "{shown:#}"
    );
    assert!(
        shown["counters"]["forwarded"].as_u64() >= Some(4),
        "{shown:#}"
    );
    assert_eq!(shown["counters"]["created"].as_u64(), Some(2), "{shown:#}");

    // alice calls bob by his address of record: phone → SBC → registrar → SBC → phone.
    alice.command("/dial sip:bob@example.test");
    let answered = eventually(Duration::from_secs(15), || {
        mgmt.data("show sip-stats")["counters"]["calls_answered"].as_u64() >= Some(2)
    });
    let stats = mgmt.data("show sip-stats");
    assert!(
        answered,
        "{stats:#}\nalice:\n{}\nbob:\n{}",
        alice.output(),
        bob.output()
    );
    assert!(
        stats["counters"]["to_registered_phones"].as_u64() >= Some(1),
        "{stats:#}"
    );
    // The hairpinned call is two calls through the SBC (alice → registrar, registrar → bob),
    // each with its media anchored: RTP from both phones crosses both.
    let anchored = media_both_ways(&mut mgmt, Some(2), Duration::from_secs(10));
    assert!(anchored, "{:#}", mgmt.data("show media"));
    alice.command("/hangup");
    let ended = eventually(Duration::from_secs(10), || {
        mgmt.data("show dialogs")["dialogs"]
            .as_array()
            .is_some_and(Vec::is_empty)
    });
    assert!(ended, "{:#}", mgmt.data("show dialogs"));

    // And back: bob calls alice.
    bob.command("/dial sip:alice@example.test");
    let answered = eventually(Duration::from_secs(15), || {
        mgmt.data("show sip-stats")["counters"]["calls_answered"].as_u64() >= Some(4)
    });
    assert!(
        answered,
        "{:#}\nbob:\n{}",
        mgmt.data("show sip-stats"),
        bob.output()
    );
    bob.command("/hangup");
    assert_eq!(
        mgmt.data("show sip-stats")["counters"]["calls_failed"].as_u64(),
        Some(0)
    );

    // A MESSAGE to each phone's address of record, sent to the registrar, reaches the phone
    // through the SBC (the registrar forks it to our Contact, the SBC to the phone's flow), and
    // the phone's 200 comes back.
    let sender = RawUdp::bind(lo(7));
    for (user, phone) in [("alice", &alice), ("bob", &bob)] {
        let at = sender.local_addr();
        let text = format!("hello-{user}");
        let message = format!(
            "MESSAGE sip:{user}@example.test SIP/2.0\r\nVia: SIP/2.0/UDP {at};branch=z9hG4bK-msg-{user}\r\n\
             Max-Forwards: 70\r\nFrom: <sip:carol@example.test>;tag=m1\r\nTo: <sip:{user}@example.test>\r\n\
             Call-ID: msg-{user}@{ip}\r\nCSeq: 1 MESSAGE\r\nContent-Type: text/plain\r\n\
             Content-Length: {len}\r\n\r\n{text}",
            ip = at.ip(),
            len = text.len()
        );
        sender.send_to(message.as_bytes(), config.agent);
        let answered = final_response(&sender, Duration::from_secs(5));
        // Answered by the phone itself (baresip 1.0 takes a text/plain MESSAGE with 200; it
        // does not print it): the MESSAGE crossed the SBC to the phone's flow.
        assert!(
            answered.as_ref().is_some_and(|m| m.status() == Some(200)
                && m.header("server").is_some_and(|s| s.starts_with("baresip"))),
            "MESSAGE to {user}: {answered:?}\n{}",
            phone.output()
        );
    }
    let stats = mgmt.data("show sip-stats");
    assert!(
        stats["counters"]["to_registered_phones"].as_u64() >= Some(4),
        "two calls and two MESSAGEs to registered phones: {stats:#}"
    );

    // The operator forgets bob's binding: a call to him now finds no phone (480 from us, or
    // the registrar's answer once its own binding is gone).
    let cleared = mgmt.data("clear-registration sip:bob@example.test");
    assert_eq!(cleared["bindings"].as_u64(), Some(1), "{cleared:#}");
    assert_eq!(bindings(&mut mgmt)["bindings"].as_u64(), Some(1));
    drop(alice);
    drop(bob);
    node.assert_alive();
}

/// A caching config whose calls have their media anchored in both realms: each call's RTP
/// crosses the SBC's own ports.
pub(crate) fn anchoring_config() -> SbcConfig {
    let mut config = caching_config(lo(6), &[]);
    for realm in ["access", "core"] {
        let first = ports::free_block(41);
        config.extra_toml.push_str(&format!(
            "\n[[steering-pool]]\nip-address = \"127.0.0.1\"\nstart-port = {first}\nend-port = {}\nrealm-id = \"{realm}\"\n",
            first + 40
        ));
    }
    config
}

/// Blind transfer between phones registered through the SBC (issue 30, item 2): alice calls
/// bob; bob transfers her to carol with baresip's `/transfer`; bob's REFER crosses both of the
/// SBC's hairpinned calls and the registrar to alice, who calls carol. The call ends with alice
/// and carol talking (RTP from both through the SBC's anchored media) and bob released.
#[test]
fn a_blind_transfer_between_registered_phones_ends_with_the_right_two_talking() {
    blind_transfer(false);
}

/// The same with `refer-call-transfer enabled` on the phones' realm: the SBC answers bob's
/// REFER itself, calls carol (through the registrar) without an offer, gives carol's offer to
/// alice in a re-INVITE and carol the answer in the ACK, then tells bob (NOTIFY 200) and hangs
/// him up. Alice never sees a REFER; she and carol end talking, RTP growing both ways on every
/// call that carries them.
#[test]
fn a_blind_transfer_the_sbc_performs_ends_with_the_right_two_talking() {
    blind_transfer(true);
}

fn blind_transfer(sbc_performs: bool) {
    phones_namespace();
    let mut config = anchoring_config();
    if sbc_performs {
        config.extra_toml.push_str(
            "\n[[realm-config]]\nidentifier = \"access\"\nrefer-call-transfer = \"enabled\"\n",
        );
    }
    let dir = TestDir::new("registration-transfer");
    let _kamailio = authenticating_registrar(&dir, config.agent);
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let phone = |user: &str, last: u8| {
        Baresip::start(
            &dir,
            user,
            SocketAddr::new(lo(last), ports::free_port()),
            config.access,
        )
    };
    let (alice, bob, carol) = (phone("alice", 21), phone("bob", 22), phone("carol", 23));
    let everyone = |what: &str| {
        format!(
            "{what}\nalice:\n{}\nbob:\n{}\ncarol:\n{}",
            alice.output(),
            bob.output(),
            carol.output()
        )
    };
    assert!(
        eventually(Duration::from_secs(20), || {
            bindings(&mut mgmt)["bindings"].as_u64() == Some(3)
        }),
        "{}",
        everyone("not all registered")
    );

    alice.command("/dial sip:bob@example.test");
    assert!(
        eventually(Duration::from_secs(15), || {
            mgmt.data("show sip-stats")["counters"]["calls_answered"].as_u64() >= Some(2)
        }),
        "{}",
        everyone("alice -> bob not answered")
    );
    // Talking a moment before the transfer.
    std::thread::sleep(Duration::from_secs(1));
    bob.command("/transfer sip:carol@example.test");
    let counter = |mgmt: &mut Mgmt, name: &str| {
        mgmt.data("show sip-stats")["counters"][name]
            .as_u64()
            .unwrap_or(0)
    };
    if sbc_performs {
        // The SBC's own INVITE reaches carol through the registrar (one more call), and the
        // transfer completes.
        assert!(
            eventually(Duration::from_secs(15), || {
                counter(&mut mgmt, "sbc_transfers_performed") == 1
            }),
            "{}",
            everyone(&format!(
                "the SBC's transfer not done: {:#}",
                mgmt.data("show sip-stats")
            ))
        );
        assert_eq!(
            counter(&mut mgmt, "refers_translated"),
            0,
            "no REFER relayed"
        );
    } else {
        // alice calls carol: two more calls through the SBC (alice -> registrar -> carol).
        assert!(
            eventually(Duration::from_secs(15), || {
                counter(&mut mgmt, "calls_answered") >= 4
            }),
            "{}",
            everyone(&format!(
                "alice -> carol not answered: {:#}",
                mgmt.data("show sip-stats")
            ))
        );
    }
    // bob is released: only the calls joining alice and carol are left, their media flowing
    // both ways (alice's call to carol: two calls; alice's first call, its leg to bob now
    // one to carol, and carol's call from the registrar: three).
    let calls = if sbc_performs { 3 } else { 2 };
    let talking = media_both_ways(&mut mgmt, Some(calls), Duration::from_secs(15));
    assert!(
        talking,
        "{}",
        everyone(&format!("{:#}", mgmt.data("show media")))
    );
    let dialogs = mgmt.data("show dialogs");
    let rows = dialogs["dialogs"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), calls, "bob's calls ended: {dialogs:#}");
    let bob_ip = lo(22).to_string();
    assert!(
        rows.iter().all(|d| ["caller", "callee"].iter().all(|leg| {
            d[leg]["peer"]
                .as_str()
                .is_some_and(|p| !p.starts_with(&format!("{bob_ip}:")))
        })),
        "bob is in no call: {dialogs:#}"
    );
    if sbc_performs {
        // Carol's media reaches alice and alice's carol after the transfer: every call's
        // packet counts keep growing both ways.
        let counts = |mgmt: &mut Mgmt| -> Vec<(u64, u64, u64)> {
            let media = mgmt.data("show media");
            let mut rows: Vec<_> = media["media"]["calls"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|c| {
                    (
                        c["call"].as_u64().unwrap_or(0),
                        c["from_caller"]["packets"].as_u64().unwrap_or(0),
                        c["from_callee"]["packets"].as_u64().unwrap_or(0),
                    )
                })
                .collect();
            rows.sort_unstable();
            rows
        };
        let before = counts(&mut mgmt);
        std::thread::sleep(Duration::from_secs(2));
        let after = counts(&mut mgmt);
        assert!(
            before.len() == 3
                && after.len() == 3
                && before
                    .iter()
                    .zip(&after)
                    .all(|(b, a)| a.0 == b.0 && a.1 >= b.1 + 20 && a.2 >= b.2 + 20),
            "media not flowing both ways on all three calls: {before:?} then {after:?}\n{}",
            everyone("")
        );
    }
    let stats = mgmt.data("show sip-stats");
    assert_eq!(
        stats["counters"]["calls_failed"].as_u64(),
        Some(0),
        "{stats:#}"
    );
    alice.command("/hangup");
    drop((alice, bob, carol));
    node.assert_alive();
}

/// A registrar that is also the presence server (message-summary): REGISTER challenged (digest,
/// `PASSWORD`) and saved, SUBSCRIBE and PUBLISH handled by `presence`, in-dialog SUBSCRIBEs
/// too, calls to its users forked to their bindings. Its tables in `db`.
///
/// The challenge is there for baresip 1.0's `mwi` module: its start-up timer walks the list of
/// subscriptions and subscribes each again, appending to the list it walks. When the phone's
/// first REGISTER is answered 200 before that timer runs (a loaded machine, the answer already
/// waiting when its main loop starts), the phone subscribes without end. With a 401 first, the
/// 200 comes a main-loop turn later, after the timer.
fn registrar_with_voicemail(addr: SocketAddr, db: &std::path::Path) -> String {
    let head = sbc_e2e::kamailio::cfg_head(
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
            "db_text",
            "presence",
            "presence_mwi",
            "auth",
        ],
    );
    format!(
        r#"{head}
modparam("usrloc", "db_mode", 0)
modparam("usrloc", "use_domain", 1)
modparam("presence", "db_url", "text://{db}")
modparam("presence", "server_address", "sip:{addr}")
modparam("presence", "subs_db_mode", 0)

request_route {{
    if (!mf_process_maxfwd_header("10")) {{ sl_send_reply("483", "Too Many Hops"); exit; }}
    if (is_method("PUBLISH|SUBSCRIBE")) {{
        if (!t_newtran()) {{ sl_reply_error(); exit; }}
        if (is_method("PUBLISH")) {{ handle_publish(); }} else {{ handle_subscribe(); }}
        t_release();
        exit;
    }}
    if (has_totag()) {{
        if (loose_route()) {{ t_relay(); exit; }}
        if (is_method("ACK")) {{ if (t_check_trans()) t_relay(); exit; }}
        sl_send_reply("404", "Not here");
        exit;
    }}
    if (is_method("REGISTER")) {{
        if (!pv_www_authenticate("$td", "{PASSWORD}", "0")) {{ www_challenge("$td", "0"); exit; }}
        consume_credentials();
        save("location");
        exit;
    }}
    if (!lookup("location")) {{ sl_send_reply("404", "Not Found"); exit; }}
    record_route();
    t_relay();
}}
"#,
        db = db.display()
    )
}

/// baresip's `mwi` module through the SBC: alice's phone registers through the SBC and
/// subscribes to its own message-summary at the registrar, which is the presence server; a
/// voicemail server's PUBLISH there lights the lamp: the NOTIFY reaches baresip through the
/// SBC in its subscription's dialog, and baresip shows it.
#[test]
fn baresip_s_message_waiting_lamp_lights_through_the_sbc() {
    phones_namespace();
    let config = caching_config(lo(6), &[]);
    let dir = TestDir::new("registration-mwi-baresip");
    let db = crate::subscriptions::presence_tables(&dir);
    let _kamailio = Kamailio::start(&dir, &registrar_with_voicemail(config.agent, &db));
    sbc_e2e::sipp::wait_listening(config.agent, false, Duration::from_secs(10));
    // Kamailio binds its port before its presence answers: wait for a 2xx to a SUBSCRIBE that
    // creates nothing (Expires: 0) before the phone subscribes.
    let probe = RawUdp::bind(lo(9));
    let presence_ready = (0..20).any(|i| {
        let probing = crate::subscriptions::subscribe(&probe, &format!("probe-{i}"), (1, 0), None);
        probe.send_to(&probing, config.agent);
        let answered = crate::subscriptions::final_to(&probe, "SUBSCRIBE")
            .and_then(|m| m.status())
            .is_some_and(|s| (200..300).contains(&s));
        if !answered {
            std::thread::sleep(Duration::from_millis(250));
        }
        answered
    });
    assert!(
        presence_ready,
        "Kamailio's presence never answered a SUBSCRIBE 2xx"
    );
    let node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let alice = Baresip::start_with(
        &dir,
        "alice",
        SocketAddr::new(lo(21), ports::free_port()),
        config.access,
        "module_app mwi.so\n",
    );
    let subscribed = eventually(Duration::from_secs(20), || {
        mgmt.data("show subscriptions")["rows"]
            .as_array()
            .is_some_and(|rows| {
                rows.iter().any(|r| {
                    r["event"].as_str() == Some("message-summary")
                        && r["state"].as_str() == Some("confirmed")
                })
            })
    });
    assert!(
        subscribed,
        "{:#}\nalice:\n{}",
        mgmt.data("show subscriptions"),
        alice.output()
    );
    let voicemail = RawUdp::bind(lo(8));
    voicemail.send_to(
        &crate::subscriptions::publish(&voicemail, "vm-baresip", "yes"),
        config.agent,
    );
    let published = final_response(&voicemail, Duration::from_secs(5));
    assert_eq!(published.and_then(|m| m.status()), Some(200));
    let lit = eventually(Duration::from_secs(10), || {
        let out = alice.output();
        out.contains("MWI for") && out.contains("Messages-Waiting: yes")
    });
    assert!(lit, "alice:\n{}", alice.output());
    let subs = mgmt.data("show subscriptions");
    assert!(subs["rows"][0]["notifies"].as_u64() >= Some(2), "{subs:#}");
    drop(alice);
    let mut node = node;
    node.assert_alive();
}

/// The first final response `sock` receives within `limit`.
fn final_response(sock: &RawUdp, limit: Duration) -> Option<SipMsg> {
    final_response_where(sock, limit, |_| true)
}

/// The first final response `sock` receives within `limit` that `wanted` accepts; others
/// (a late answer to an earlier try) are passed over.
fn final_response_where(
    sock: &RawUdp,
    limit: Duration,
    wanted: impl Fn(&SipMsg) -> bool,
) -> Option<SipMsg> {
    let is_wanted = |m: &SipMsg| m.status().is_some_and(|c| c >= 200) && wanted(m);
    sock.recv_sip_until(limit, is_wanted, &mut Vec::new())
        .map(|(m, _)| m)
}

/// One REGISTER of `user@example.test` at `phone`'s address through the SBC at `access`;
/// the final answer's code, if one came within 2 s.
fn register_once(phone: &RawUdp, user: &str, access: SocketAddr, cseq: u32) -> Option<u16> {
    register_for(phone, user, access, cseq, 600)
}

/// One REGISTER asking `expires` seconds (0: de-registration); the final answer's code.
pub(crate) fn register_for(
    phone: &RawUdp,
    user: &str,
    access: SocketAddr,
    cseq: u32,
    expires: u32,
) -> Option<u16> {
    register_as(phone, user, access, cseq, expires, phone.local_addr())
}

/// One REGISTER whose Via and Contact name `contact` (where the phone thinks it is: behind a
/// NAT, not where it sends from); the final answer's code.
fn register_as(
    phone: &RawUdp,
    user: &str,
    access: SocketAddr,
    cseq: u32,
    expires: u32,
    contact: SocketAddr,
) -> Option<u16> {
    let at = contact;
    let register = format!(
        "REGISTER sip:example.test SIP/2.0\r\nVia: SIP/2.0/UDP {at};branch=z9hG4bK-reg-{user}-{cseq};rport\r\n\
         Max-Forwards: 70\r\nFrom: <sip:{user}@example.test>;tag=p1\r\nTo: <sip:{user}@example.test>\r\n\
         Call-ID: raw-reg-{user}@{ip}\r\nCSeq: {cseq} REGISTER\r\nContact: <sip:{user}@{at}>\r\n\
         Expires: {expires}\r\nContent-Length: 0\r\n\r\n",
        ip = at.ip()
    );
    phone.send_to(register.as_bytes(), access);
    let this_try = format!("{cseq} REGISTER");
    final_response_where(phone, Duration::from_secs(2), |m| {
        m.header("CSeq") == Some(this_try.as_str())
    })
    .and_then(|m| m.status())
}

/// Registers `user@example.test` at `phone`'s address through the SBC at `access` (the
/// registrar may still be starting: up to ten tries); panics unless the answer is 200.
pub(crate) fn register_raw(phone: &RawUdp, user: &str, access: SocketAddr) {
    let mut last = None;
    for cseq in 1..=10 {
        last = register_once(phone, user, access, cseq);
        if last == Some(200) {
            return;
        }
    }
    panic!("{user} was not registered through the SBC: {last:?}");
}

/// Sends an INVITE for `user@example.test` from `caller` to the registrar at `registrar`
/// (Call-ID `<tag>-call@...`), which forks it to the user's bindings.
pub(crate) fn call_at_registrar(caller: &RawUdp, user: &str, tag: &str, registrar: SocketAddr) {
    let from = caller.local_addr();
    let invite = format!(
        "INVITE sip:{user}@example.test SIP/2.0\r\nVia: SIP/2.0/UDP {from};branch=z9hG4bK-{tag}-1\r\n\
         Max-Forwards: 70\r\nFrom: <sip:carol@example.test>;tag=c1\r\nTo: <sip:{user}@example.test>\r\n\
         Call-ID: {tag}-call@{ip}\r\nCSeq: 1 INVITE\r\nContact: <sip:carol@{from}>\r\n\
         Content-Length: 0\r\n\r\n",
        ip = from.ip()
    );
    caller.send_to(invite.as_bytes(), registrar);
}

/// The first INVITE `phone` receives within 10 s, as text.
pub(crate) fn invite_received(phone: &RawUdp) -> Option<String> {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if let Some((bytes, _)) = phone.recv(Duration::from_millis(500)) {
            if bytes.starts_with(b"INVITE ") {
                return Some(String::from_utf8_lossy(&bytes).into_owned());
            }
        }
    }
    None
}

/// A phone behind a NAT: its Via and Contact name 127.0.0.99:5060, where nothing listens; it
/// sends from another address. With `nat-traversal = rport` it is told `nat-interval` (30 s),
/// and a call through the registrar reaches it at the address it sends from.
#[test]
fn a_phone_behind_a_nat_is_reached_where_it_sends_from() {
    let config = caching_config(lo(6), &[]);
    let dir = TestDir::new("registration-nat");
    let _kamailio = sbc_e2e::kamailio::registrar(&dir, config.agent);
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let phone = RawUdp::bind(lo(23));
    let private = SocketAddr::new(lo(99), 5060);
    let mut code = None;
    for cseq in 1..=10 {
        code = register_as(&phone, "erin", config.access, cseq, 600, private);
        if code == Some(200) {
            break;
        }
    }
    assert_eq!(code, Some(200));
    let row = bindings(&mut mgmt)["rows"][0].clone();
    assert_eq!(
        row["contact"].as_str(),
        Some("sip:erin@127.0.0.99:5060"),
        "{row:#}"
    );
    assert!(
        row["flow"]
            .as_str()
            .is_some_and(|f| f.ends_with(&phone.local_addr().to_string())),
        "{row:#}"
    );
    assert!(
        row["phone_expires_s"].as_u64() <= Some(30),
        "nat-interval: {row:#}"
    );

    let caller = RawUdp::bind(lo(7));
    call_at_registrar(&caller, "erin", "nat", config.agent);
    let invite = invite_received(&phone).expect("the phone was not reached where it sends from");
    assert!(
        invite.starts_with("INVITE sip:erin@127.0.0.99:5060 SIP/2.0"),
        "{invite}"
    );
    node.assert_alive();
}

/// An unsolicited message-summary NOTIFY (RFC 3842's voicemail without a subscription, as
/// PBXes send it) to a phone's address of record, sent to the registrar, reaches the phone
/// registered through the SBC, body as is, and the phone's 200 reaches the voicemail server.
#[test]
fn an_unsolicited_mwi_notify_reaches_the_registered_phone() {
    let config = caching_config(lo(6), &[]);
    let dir = TestDir::new("registration-mwi");
    let _kamailio = sbc_e2e::kamailio::registrar(&dir, config.agent);
    let mut node = SbcNode::start_config(&config);
    let phone = RawUdp::bind(lo(24));
    register_raw(&phone, "frank", config.access);

    let voicemail = RawUdp::bind(lo(8));
    let at = voicemail.local_addr();
    let body = "Messages-Waiting: yes\r\nVoice-Message: 3/1 (0/0)\r\n";
    voicemail.send_to(
        format!(
            "NOTIFY sip:frank@example.test SIP/2.0\r\nVia: SIP/2.0/UDP {at};branch=z9hG4bK-mwi-1\r\n\
             Max-Forwards: 70\r\nFrom: <sip:voicemail@example.test>;tag=vm1\r\n\
             To: <sip:frank@example.test>\r\nCall-ID: mwi-unsolicited@{ip}\r\nCSeq: 1 NOTIFY\r\n\
             Contact: <sip:voicemail@{at}>\r\nEvent: message-summary\r\n\
             Subscription-State: active\r\nContent-Type: application/simple-message-summary\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len(),
            ip = at.ip()
        )
        .as_bytes(),
        config.agent,
    );
    let (notify, sbc) = phone
        .recv_sip_until(
            Duration::from_secs(5),
            |m| m.method() == Some("NOTIFY"),
            &mut Vec::new(),
        )
        .expect("the NOTIFY at the phone");
    assert!(
        notify
            .start_line
            .starts_with(&format!("NOTIFY sip:frank@{} ", phone.local_addr())),
        "{}",
        notify.start_line
    );
    assert_eq!(String::from_utf8_lossy(&notify.body), body);
    assert_eq!(notify.header("event"), Some("message-summary"));
    assert_ne!(
        notify.header("call-id"),
        Some(format!("mwi-unsolicited@{}", at.ip()).as_str()),
        "a Call-ID of the SBC's"
    );
    phone.send_to(&response_to(&notify, 200, "OK", "fr"), sbc);
    let answered = final_response(&voicemail, Duration::from_secs(5));
    assert_eq!(answered.and_then(|m| m.status()), Some(200));
    node.assert_alive();
}

/// `reg-cache-limit` bounds the cache: with 2, a third phone's REGISTER gets 503 with
/// Retry-After from the SBC (the registrar never sees it), counted, and
/// `sbcRegCacheFullTrap` reaches snmptrapd.
#[test]
fn the_cache_is_bounded_by_reg_cache_limit_and_trapped_when_full() {
    let trap_dir = TestDir::new("registration-full-trapd");
    let trapd = sbc_e2e::snmp::Trapd::start(&trap_dir);
    let mut config = caching_config(lo(6), &[]);
    config.sip_lines.push("reg-cache-limit = 2".into());
    config.extra_toml = format!(
        "\n[[system-config.trap-receiver]]\nip-address = \"127.0.0.1\"\nport = {}\n",
        trapd.port()
    );
    let dir = TestDir::new("registration-full");
    let _kamailio = sbc_e2e::kamailio::registrar(&dir, config.agent);
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let phones: Vec<RawUdp> = (41..=43).map(|n| RawUdp::bind(lo(n))).collect();
    register_raw(&phones[0], "p1", config.access);
    register_raw(&phones[1], "p2", config.access);
    assert_eq!(register_once(&phones[2], "p3", config.access, 1), Some(503));
    let shown = bindings(&mut mgmt);
    assert_eq!(shown["bindings"].as_u64(), Some(2), "{shown:#}");
    assert_eq!(
        shown["counters"]["refused_full"].as_u64(),
        Some(1),
        "{shown:#}"
    );
    let trap = trapd.wait_trap(
        "SBC-PAIR-MIB::sbcRegCacheFullTrap",
        0,
        Duration::from_secs(5),
    );
    assert_eq!(
        trap.get("SBC-PAIR-MIB::sbcRegCacheLimit.0").map(str::trim),
        Some("Gauge32: 2"),
        "{trap:?}"
    );
    // A refresh of a phone already bound still passes.
    assert_eq!(
        register_once(&phones[0], "p1", config.access, 20),
        Some(200)
    );
    node.assert_alive();
}

/// A STUN binding request (RFC 5389: type, length 0, magic cookie, transaction id).
fn stun_binding_request(id: u8) -> Vec<u8> {
    let mut m = vec![0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42];
    m.extend_from_slice(&[id; 12]);
    m
}

/// The first STUN message `sock` receives within `limit` (RFC 7983: first byte 0-3); SIP
/// datagrams (a late answer to an earlier REGISTER try) are passed over.
fn stun_answer(sock: &RawUdp, limit: Duration) -> Option<Vec<u8>> {
    let end = Instant::now() + limit;
    while let Some((bytes, _)) = sock.recv(end.saturating_duration_since(Instant::now())) {
        if bytes.first().is_some_and(|b| *b <= 3) {
            return Some(bytes);
        }
    }
    None
}

/// The address in a binding success response's XOR-MAPPED-ADDRESS (IPv4), if it is one.
fn xor_mapped(response: &[u8]) -> Option<SocketAddr> {
    if response.len() < 32 || response[0..2] != [0x01, 0x01] || response[20..22] != [0x00, 0x20] {
        return None;
    }
    let port = u16::from_be_bytes([response[26], response[27]]) ^ 0x2112;
    let cookie = [0x21, 0x12, 0xa4, 0x42];
    let ip: [u8; 4] = std::array::from_fn(|i| response[28 + i] ^ cookie[i]);
    Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port))
}

/// RFC 5626 keep-alives over UDP: a phone registered through the SBC gets its STUN binding
/// requests on the SIP port answered with its own address; a source with no binding gets
/// nothing (no reflection toward a forged source). Counted in `show registrations`. Once the
/// phone de-registers (Expires: 0, the registrar's 2xx), its binding is gone and so are the
/// answers.
#[test]
fn stun_keepalives_are_answered_to_registered_phones_only() {
    let config = caching_config(lo(6), &[]);
    let dir = TestDir::new("registration-stun");
    let _kamailio = sbc_e2e::kamailio::registrar(&dir, config.agent);
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let phone = RawUdp::bind(lo(21));
    register_raw(&phone, "carol", config.access);

    phone.send_to(&stun_binding_request(1), config.access);
    let answer = stun_answer(&phone, Duration::from_secs(3))
        .expect("the registered phone's keep-alive is answered");
    assert_eq!(xor_mapped(&answer), Some(phone.local_addr()), "{answer:?}");
    assert_eq!(&answer[8..20], &[1u8; 12], "the request's transaction id");

    let stranger = RawUdp::bind(lo(31));
    stranger.send_to(&stun_binding_request(2), config.access);
    assert!(
        stranger.recv_all(Duration::from_millis(500)).is_empty(),
        "a source with no binding was answered"
    );
    let counters = bindings(&mut mgmt)["counters"].clone();
    assert_eq!(
        counters["keepalives_answered"].as_u64(),
        Some(1),
        "{counters:#}"
    );
    assert_eq!(
        counters["keepalives_ignored"].as_u64(),
        Some(1),
        "{counters:#}"
    );
    node.assert_alive();
}

/// A phone registered over TCP is called over the connection it registered on; once that
/// connection is gone (and the phone has not registered again), a call to it gets 480, not
/// the transport failure's 503.
#[test]
fn a_tcp_phone_is_called_over_its_connection_and_480_once_it_is_gone() {
    let config = caching_config(lo(6), &[]);
    let dir = TestDir::new("registration-tcp");
    let _kamailio = sbc_e2e::kamailio::registrar(&dir, config.agent);
    let mut node = SbcNode::start_config(&config);
    let mut phone = RawTcp::connect(config.access);
    let at = phone.local_addr();
    let mut registered = false;
    for cseq in 1..=10 {
        let register = format!(
            "REGISTER sip:example.test SIP/2.0\r\nVia: SIP/2.0/TCP {at};branch=z9hG4bK-tcp-{cseq};rport\r\n\
             Max-Forwards: 70\r\nFrom: <sip:dave@example.test>;tag=d1\r\nTo: <sip:dave@example.test>\r\n\
             Call-ID: tcp-reg@{ip}\r\nCSeq: {cseq} REGISTER\r\nContact: <sip:dave@{at};transport=tcp>\r\n\
             Expires: 600\r\nContent-Length: 0\r\n\r\n",
            ip = at.ip()
        );
        phone.send(register.as_bytes()).expect("send over TCP");
        if phone
            .recv_messages(Duration::from_secs(2))
            .iter()
            .any(|m| m.status() == Some(200))
        {
            registered = true;
            break;
        }
    }
    assert!(registered, "the TCP phone was not registered");

    let caller = RawUdp::bind(lo(7));
    let invite = |n: u32| {
        let from = caller.local_addr();
        format!(
            "INVITE sip:dave@example.test SIP/2.0\r\nVia: SIP/2.0/UDP {from};branch=z9hG4bK-tcpcall-{n}\r\n\
             Max-Forwards: 70\r\nFrom: <sip:carol@example.test>;tag=c{n}\r\nTo: <sip:dave@example.test>\r\n\
             Call-ID: tcp-call-{n}@{ip}\r\nCSeq: 1 INVITE\r\nContact: <sip:carol@{from}>\r\n\
             Content-Length: 0\r\n\r\n",
            ip = from.ip()
        )
    };
    caller.send_to(invite(1).as_bytes(), config.agent);
    let got = phone.recv_messages(Duration::from_secs(5));
    assert!(
        got.iter()
            .any(|m| m.start_line == format!("INVITE sip:dave@{at};transport=tcp SIP/2.0")),
        "the INVITE did not come over the phone's connection: {got:?}"
    );

    // The phone goes away: its connection closes.
    drop(phone);
    std::thread::sleep(Duration::from_millis(500));
    caller.send_to(invite(2).as_bytes(), config.agent);
    let end = Instant::now() + Duration::from_secs(10);
    let mut code = None;
    while Instant::now() < end && code.is_none() {
        if let Some((bytes, _)) = caller.recv(Duration::from_millis(500)) {
            code = SipMsg::parse(&bytes)
                .filter(|m| {
                    m.header("call-id")
                        .is_some_and(|c| c.starts_with("tcp-call-2"))
                })
                .and_then(|m| m.status())
                .filter(|c| *c >= 200);
        }
    }
    assert_eq!(code, Some(480));
    node.assert_alive();
}

/// A REGISTER and an INVITE from `from` (a stranger on a loopback address of its own).
fn stranger_request(method: &str, from: &RawUdp, access: SocketAddr, uri: &str) -> Option<u16> {
    let local = from.local_addr();
    let request = format!(
        "{method} {uri} SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-s-{method}\r\n\
         Max-Forwards: 70\r\nFrom: <sip:alice@example.test>;tag=s1\r\nTo: <sip:alice@example.test>\r\n\
         Call-ID: stranger-{method}@{ip}\r\nCSeq: 1 {method}\r\nContact: <sip:mallory@{local}>\r\n\
         Content-Length: 0\r\n\r\n",
        ip = local.ip(),
    );
    from.send_to(request.as_bytes(), access);
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        let (bytes, _) = from.recv(Duration::from_secs(1))?;
        if let Some(code) = SipMsg::parse(&bytes).and_then(|m| m.status()) {
            if code >= 200 {
                return Some(code);
            }
        }
    }
    None
}

#[test]
fn a_stranger_cannot_take_a_phones_calls_and_unregistered_sources_are_refused() {
    phones_namespace();
    let mut config = caching_config(lo(6), &[]);
    config.extra_toml =
        "\n[[realm-config]]\nidentifier = \"access\"\nallow-anonymous = \"registered\"\n".into();
    let dir = TestDir::new("registration-strangers");
    let _kamailio = authenticating_registrar(&dir, config.agent);
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());
    let alice = Baresip::start(
        &dir,
        "alice",
        SocketAddr::new(lo(21), ports::free_port()),
        config.access,
    );
    assert!(
        eventually(Duration::from_secs(20), || {
            bindings(&mut mgmt)["bindings"].as_u64() == Some(1)
        }),
        "{:#}\n{}",
        bindings(&mut mgmt),
        alice.output()
    );
    let before = bindings(&mut mgmt)["rows"][0].clone();

    // Mallory registers alice's AoR from elsewhere: the registrar challenges it, she has no
    // password, and nothing changed.
    let mallory = RawUdp::bind(lo(31));
    let code = stranger_request("REGISTER", &mallory, config.access, "sip:example.test");
    assert_eq!(code, Some(401));
    let where_to = |row: &serde_json::Value| {
        ["aor", "contact", "flow", "token", "call_id"].map(|k| row[k].clone())
    };
    let after = bindings(&mut mgmt);
    assert_eq!(after["bindings"].as_u64(), Some(1), "{after:#}");
    assert_eq!(where_to(&after["rows"][0]), where_to(&before), "{after:#}");

    // Mallory shapes hers as alice's refresh: alice's Call-ID, a higher CSeq, from another
    // port of alice's own address and from her own. A new flow is never absorbed: forwarded,
    // challenged, and where alice's calls go is unchanged.
    let call_id = before["call_id"].as_str().unwrap_or_default().to_owned();
    let cseq = before["cseq"].as_u64().unwrap_or_default() + 1;
    let beside_alice = RawUdp::bind(lo(21));
    for (i, from) in [&beside_alice, &mallory].into_iter().enumerate() {
        let at = from.local_addr();
        let refresh = format!(
            "REGISTER sip:example.test SIP/2.0\r\nVia: SIP/2.0/UDP {at};branch=z9hG4bK-forged-{i};rport\r\n\
             Max-Forwards: 70\r\nFrom: <sip:alice@example.test>;tag=forged{i}\r\nTo: <sip:alice@example.test>\r\n\
             Call-ID: {call_id}\r\nCSeq: {cseq} REGISTER\r\nContact: <sip:mallory@{at}>\r\n\
             Expires: 3600\r\nContent-Length: 0\r\n\r\n"
        );
        from.send_to(refresh.as_bytes(), config.access);
        let code = final_response(from, Duration::from_secs(5)).and_then(|m| m.status());
        assert_eq!(code, Some(401), "a forged refresh from {at}");
    }
    let after = bindings(&mut mgmt);
    assert_eq!(after["bindings"].as_u64(), Some(1), "{after:#}");
    assert_eq!(where_to(&after["rows"][0]), where_to(&before), "{after:#}");
    assert_eq!(
        after["counters"]["absorbed"].as_u64(),
        Some(0),
        "a forged refresh was answered from the cache: {after:#}"
    );
    // And a call to alice at the registrar still reaches alice (she answers), not mallory.
    let caller = RawUdp::bind(lo(7));
    call_at_registrar(&caller, "alice", "after-forgery", config.agent);
    let answered = caller.recv_sip_until(
        Duration::from_secs(10),
        |m| m.status().is_some_and(|c| c >= 200),
        &mut Vec::new(),
    );
    assert_eq!(
        answered.as_ref().and_then(|(m, _)| m.status()),
        Some(200),
        "{}",
        alice.output()
    );
    for from in [&beside_alice, &mallory] {
        assert!(
            from.recv_all(Duration::from_millis(300))
                .iter()
                .all(|(m, _)| !m.starts_with(b"INVITE ")),
            "mallory was called"
        );
    }

    // An unregistered source may not call through the access realm (toll fraud).
    let code = stranger_request("INVITE", &mallory, config.access, "sip:bob@example.test");
    assert_eq!(code, Some(403));
    // A request for a Contact of ours that no binding has any more: 480.
    let core_peer = RawUdp::bind(lo(6));
    let code = stranger_request(
        "OPTIONS",
        &core_peer,
        config.core,
        "sip:r-00000000000000aa@127.0.0.1",
    );
    assert_eq!(code, Some(480));
    let stats = mgmt.data("show sip-stats");
    assert_eq!(
        stats["counters"]["anonymous_refused"].as_u64(),
        Some(1),
        "{stats:#}"
    );
    assert_eq!(
        stats["counters"]["registered_phone_gone"].as_u64(),
        Some(1),
        "{stats:#}"
    );
    drop(alice);
    node.assert_alive();
}
