//! Routing with hunting, end to end: a `local-policy` sends every call to a
//! `session-agent-group` (hunt, `sag-recursion`) of three agents on their own loopback
//! addresses: one answering 503 (SIPp `uas_503.xml`, 127.0.0.2), one silent (a bound socket
//! that never answers, 127.0.0.3), one answering 200 (SIPp's `uas`, 127.0.0.4).
//!
//! - `a_503_and_a_silent_agent_are_hunted_past_with_no_failed_call`: 5 calls, each offered
//!   to the 503 agent, then the silent one (abandoned after `initial-inv-trans-expire` = 1 s,
//!   not timer B), then answered by the third: 5 successful calls at the caller, 5 at the
//!   answering UAS, the 503 agent's 5 INVITEs ACKed; the silent agent saw the INVITEs with the
//!   Request-URI host its address (it has no `hostname`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use sbc_e2e::raw::{RawUdp, SipMsg};
use sbc_e2e::sipp::Sipp;
use sbc_e2e::{calls_through_sbc, ports, Load, SbcConfig, SbcNode, Scenario};

fn lo(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

#[test]
fn a_503_and_a_silent_agent_are_hunted_past_with_no_failed_call() {
    let calls = 5;
    let mut config = SbcConfig::with_addresses(lo(1), lo(1), lo(4));
    config.sip_lines.push("initial-inv-trans-expire = 1".into());
    let busy = SocketAddr::new(lo(2), ports::free_port());
    let silent = RawUdp::bind(lo(3));
    config.extra_toml = format!(
        r#"
[[session-agent]]
name = "busy"
realm = "core"
address = "{}"
port = {}

[[session-agent]]
name = "silent"
realm = "core"
address = "{}"
port = {}

[[session-agent-group]]
group-name = "pbx"
strategy = "hunt"
dest = ["busy", "silent", "core"]
sag-recursion = true

[[local-policy]]
to-address = ["*"]
source-realm = ["access"]

[[local-policy.policy-attribute]]
next-hop = "SAG:pbx"
"#,
        busy.ip(),
        busy.port(),
        silent.local_addr().ip(),
        silent.local_addr().port(),
    );
    let mut node = SbcNode::start_config(&config);
    let busy_uas = Sipp::new(node.dir(), "busy")
        .play(Scenario::File("uas_503.xml"))
        .arg("-key")
        .arg("extra_header")
        .arg("X-Busy: 1")
        .local(busy)
        .calls(calls)
        .timeout(Duration::from_secs(60))
        .spawn();
    sbc_e2e::sipp::wait_listening(busy, false, Duration::from_secs(5));
    let started = std::time::Instant::now();
    let (uac, uas) = calls_through_sbc(
        &mut node,
        &config,
        Scenario::Builtin("uac"),
        Scenario::Builtin("uas"),
        Load {
            calls,
            rate: 5,
            tcp: false,
            timeout: Duration::from_secs(40),
        },
    );
    uac.assert_success(u64::from(calls));
    uas.assert_success(u64::from(calls));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the silent agent was abandoned after 1 s, not timer B"
    );
    let busy_uas = busy_uas.wait_at_most(Duration::from_secs(20));
    busy_uas.assert_success(u64::from(calls));
    let invites: Vec<SipMsg> = silent
        .recv_all(Duration::from_millis(200))
        .iter()
        .filter_map(|(b, _)| SipMsg::parse(b))
        .filter(|m| m.method() == Some("INVITE"))
        .collect();
    assert!(!invites.is_empty(), "the silent agent was tried");
    let uri = invites[0]
        .start_line
        .split(' ')
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    assert!(
        uri.ends_with(&format!("@{}", silent.local_addr())),
        "Request-URI {uri}"
    );
}
