//! A digest challenge from a proxy behind the SBC (issue 30, item 3): Kamailio with `auth`
//! answers the caller's INVITE 407; the SBC relays it; the caller (SIPp, `uac_auth.xml`)
//! re-sends on its own Call-ID and From tag with CSeq 2 and `Proxy-Authorization`; the SBC
//! sends that INVITE out on the challenged leg's Call-ID and From tag with CSeq 2, as a
//! carrier that ties its nonce to the call expects, and the call is answered by the callee
//! behind the proxy (SIPp's built-in `uas`).
//!
//! What Kamailio saw is read from its own log (an `xlog` line per INVITE: Call-ID, From tag,
//! CSeq): the challenged and the authenticated INVITE carry the same Call-ID and From tag.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use sbc_e2e::acli::Mgmt;
use sbc_e2e::kamailio::{cfg_head, Kamailio};
use sbc_e2e::sipp::wait_listening;
use sbc_e2e::{ports, SbcConfig, SbcNode, Sipp, TestDir};

fn lo(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// An authenticating proxy at `addr` for `example.test` (password `e2e-secret` for anyone),
/// relaying authenticated INVITEs to `callee`; each INVITE it receives is logged as
/// `e2e-invite ci=<Call-ID> ft=<From tag> cs=<CSeq>`.
fn authenticating_proxy(addr: SocketAddr, callee: SocketAddr) -> String {
    let head = cfg_head(
        addr,
        &[
            "tm", "sl", "maxfwd", "pv", "textops", "siputils", "xlog", "auth",
        ],
    );
    format!(
        r#"{head}
request_route {{
    if (!mf_process_maxfwd_header("10")) {{ sl_send_reply("483", "Too Many Hops"); exit; }}
    if (is_method("INVITE")) {{ xlog("L_NOTICE", "e2e-invite ci=$ci ft=$ft cs=$cs\n"); }}
    if (is_method("ACK|CANCEL") && t_check_trans()) {{ t_relay(); exit; }}
    if (is_method("INVITE") && !has_totag()) {{
        if (!pv_proxy_authenticate("example.test", "e2e-secret", "0")) {{
            proxy_challenge("example.test", "0");
            exit;
        }}
        consume_credentials();
    }}
    $du = "sip:{callee}";
    t_relay();
}}
"#
    )
}

/// The `(Call-ID, From tag, CSeq)` of each INVITE in Kamailio's log.
fn invites_seen(dir: &TestDir) -> Vec<(String, String, String)> {
    let log = std::fs::read_to_string(Kamailio::log(dir)).unwrap_or_default();
    log.lines()
        .filter_map(|l| {
            let rest = &l[l.find("e2e-invite ")? + "e2e-invite ".len()..];
            let field = |name: &str| {
                rest.split_whitespace()
                    .find_map(|f| f.strip_prefix(name))
                    .map(str::to_owned)
            };
            Some((field("ci=")?, field("ft=")?, field("cs=")?))
        })
        .collect()
}

#[test]
fn an_authenticated_invite_reaches_the_proxy_on_the_challenged_call_id() {
    let config = SbcConfig::with_addresses(lo(1), lo(2), lo(6));
    let dir = TestDir::new("auth-challenge");
    let callee_at = SocketAddr::new(lo(8), ports::free_port());
    let uas = Sipp::new(&dir, "uas")
        .builtin("uas")
        .local(callee_at)
        .calls(1)
        .timeout(Duration::from_secs(30))
        .spawn();
    wait_listening(callee_at, false, Duration::from_secs(5));
    let _proxy = Kamailio::start(&dir, &authenticating_proxy(config.agent, callee_at));
    wait_listening(config.agent, false, Duration::from_secs(10));
    let mut node = SbcNode::start_config(&config);
    let mut mgmt = Mgmt::connect(&node.mgmt_socket());

    let uac = Sipp::new(&dir, "uac")
        .scenario("uac_auth.xml")
        .local(SocketAddr::new(lo(3), ports::free_port()))
        .remote(config.access)
        .calls(1)
        .timeout(Duration::from_secs(30))
        .run();
    uac.assert_success(1);
    uas.wait().assert_success(1);

    let seen = invites_seen(&dir);
    assert_eq!(seen.len(), 2, "{seen:?}");
    let (challenged, authenticated) = (&seen[0], &seen[1]);
    assert_eq!(
        (&authenticated.0, &authenticated.1),
        (&challenged.0, &challenged.1),
        "the authenticated INVITE must reach the proxy on the challenged Call-ID and From tag: {seen:?}"
    );
    assert_eq!(
        (challenged.2.as_str(), authenticated.2.as_str()),
        ("1", "2")
    );
    let stats = mgmt.data("show sip-stats");
    assert_eq!(
        stats["counters"]["auth_on_challenged_leg"].as_u64(),
        Some(1),
        "{stats:#}"
    );
    node.assert_alive();
}
