#![allow(clippy::unwrap_used, reason = "tests may panic")]

use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The TOML spelling example of the issue, plus the `pbx` agent its route needs.
const FULL: &str = r#"
[system-config]
hostname = "sbc1"

[sip-config]
t1-ms = 250
t2-ms = 2000
t4-ms = 2500
timer-c-ms = 200000
max-message-size = 4096
workers = 4
shutdown-grace-ms = 0

[[sip-interface]]
realm = "access"
address = "10.0.0.1"
port = 5060
transports = ["udp", "tcp"]

[[sip-interface]]
realm = "core"
address = "::1"
port = 5062
transports = ["tcp"]

[[session-agent]]
name = "core"
realm = "core"
address = "::1"
port = 5080
transport = "tcp"

[[session-agent]]
name = "pbx"
realm = "access"
address = "10.0.0.9"

[session-router]
default-route = "core"
[[session-router.route]]
from-realm = "core"
session-agent = "pbx"
"#;

/// The message of the error `text` is refused with.
fn refused(text: &str) -> String {
    match Config::from_toml_str(text) {
        Ok(config) => panic!("accepted: {config:?}"),
        Err(err) => err.to_string(),
    }
}

/// Asserts that `text` is refused with an `Invalid` error on `key` whose message contains every
/// one of `parts`.
fn refused_invalid(text: &str, key: &str, parts: &[&str]) {
    let err = Config::from_toml_str(text).unwrap_err();
    let ConfigError::Invalid { key: got, .. } = &err else {
        panic!("expected Invalid on {key}, got {err:?}");
    };
    assert_eq!(got, key, "{err}");
    let message = err.to_string();
    assert!(message.starts_with(&format!("{key} = ")), "{message}");
    for part in parts {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
}

/// Two interfaces (access, core) in front of `rest`.
fn with_interfaces(rest: &str) -> String {
    format!(
        r#"
[[sip-interface]]
realm = "access"
port = 5060
[[sip-interface]]
realm = "core"
port = 5062
{rest}"#
    )
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "sbc-config-test-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

// ---- defaults ----

#[test]
fn empty_file_is_the_embedded_default() {
    let empty = Config::from_toml_str("").unwrap();
    assert_eq!(empty, Config::embedded_default());
    assert_eq!(Config::default(), Config::embedded_default());
    assert_eq!(Config::from_toml_str("# nothing\n\n").unwrap(), empty);
    Config::embedded_default().validate().unwrap();
}

#[test]
fn embedded_default_is_exactly_as_documented() {
    let c = Config::embedded_default();
    assert_eq!(c.system.hostname, "sbc");
    assert_eq!(
        c.sip_config,
        SipConfig {
            t1_ms: 500,
            t2_ms: 4000,
            t4_ms: 5000,
            timer_c_ms: 180_000,
            max_message_size: 65_535,
            workers: 2,
            tcp_workers: 1,
            tcp_auto_scaling_profile: None,
            prsm: true,
            queue_size: 1024,
            max_queue_delay_ms: 100,
            routing_cost_us: 0,
            shutdown_grace_ms: 5000,
            heap_reject_threshold: 90,
            heap_resume_threshold: 80,
            retry_after_min: 5,
            retry_after_max: 15,
            auto_scaling_cycle_ms: 1000,
            source_rate: 15,
            source_burst: 30,
            source_deny_seconds: 120,
            source_ipv6_prefix_length: 64,
            max_calls: 100_000,
            max_transactions: 200_000,
            max_subscriptions_per_source: 500,
            in_dialog_source: InDialogSource::Address,
            max_header_size: 8192,
            tcp_max_connections: 2048,
            tcp_max_connections_per_source: 64,
            tcp_message_timeout_ms: 20_000,
            tcp_idle_timeout_ms: 120_000,
            tcp_write_queue_bytes: 262_144,
            tcp_write_timeout_ms: 10_000,
            tls_handshake_timeout_ms: 5000,
            initial_inv_trans_expire: 4,
            reg_cache_limit: 0,
        }
    );
    assert_eq!(
        c.sip_interfaces,
        vec![
            SipInterface::with_defaults("access", 5060),
            SipInterface::with_defaults("core", 5062),
        ]
    );
    assert_eq!(
        c.session_agents,
        vec![SessionAgent {
            name: "core".into(),
            realm: "core".into(),
            address: None,
            port: 5080,
            transport: Transport::Udp,
            tls_profile: None,
            tls_server_name: None,
            max_udp_length: 0,
            hostname: None,
            state: AdminState::Enabled,
            ping_method: "OPTIONS".into(),
            ping_interval: 0,
            ping_send_mode: PingSendMode::KeepAlive,
            ping_response_timeout_ms: 2000,
            ping_misses: 1,
            ping_in_service_response_codes: vec![],
            out_service_response_codes: vec![],
            trans_timeouts: 0,
            time_to_resume: 0,
            invite_trans_expire: 0,
            max_sessions: 0,
            max_outbound_sessions: 0,
            max_burst_rate: 0,
            in_translationid: None,
            out_translationid: None,
            refer_call_transfer: ReferCallTransfer::default(),
        }]
    );
    assert_eq!(
        c.session_agents[0],
        SessionAgent {
            name: "core".into(),
            realm: "core".into(),
            port: 5080,
            ..SessionAgent::default()
        }
    );
    assert!(c.session_agent_groups.is_empty());
    assert!(c.local_policies.is_empty());
    assert!(c.local_routing_configs.is_empty());
    assert!(c.translation_rules.is_empty());
    assert!(c.session_translations.is_empty());
    assert_eq!(
        c.session_router,
        SessionRouter {
            default_route: Some("core".into()),
            routes: vec![],
        }
    );
    assert_eq!(c.media_manager, MediaManager::default());
    assert_eq!(
        c.steering_pools,
        vec![
            SteeringPool {
                ip_address: LOCALHOST,
                start_port: 20_000,
                end_port: 20_999,
                realm_id: "access".into(),
            },
            SteeringPool {
                ip_address: LOCALHOST,
                start_port: 21_000,
                end_port: 21_999,
                realm_id: "core".into(),
            },
        ]
    );
    assert_eq!(c.steering_pool("access").unwrap().pairs(), 500);
    assert_eq!(c.steering_pool("core").unwrap().start_port, 21_000);
    // The SIP trace is off, without filters, and sends nothing.
    assert_eq!(c.sip_monitoring, SipMonitoring::default());
    assert!(c.filter_configs.is_empty());
    assert_eq!(c.capture_agent, CaptureAgent::default());
}

#[test]
fn default_steering_pools_go_with_the_default_interfaces_only() {
    let defaults = Config::embedded_default().steering_pools;
    // Neither list: the default pools.
    let c = Config::from_toml_str(
        "[media-manager]
latching = false
",
    )
    .unwrap();
    assert_eq!(c.steering_pools, defaults);
    // The file's own interfaces (even equal to the defaults) and no pool: none, media passes
    // unchanged.
    let c = Config::from_toml_str(&with_interfaces("")).unwrap();
    assert!(c.steering_pools.is_empty());
    assert!(c.steering_pool("access").is_none());
    // An explicitly empty list: none, with the default interfaces too.
    let c = Config::from_toml_str(
        "steering-pool = []
",
    )
    .unwrap();
    assert!(c.steering_pools.is_empty());
    assert_eq!(c.sip_interfaces, Config::embedded_default().sip_interfaces);
    // Pools given: they replace the defaults, with or without interfaces.
    let one = "[[steering-pool]]\nip-address = \"127.0.0.1\"\nstart-port = 30000\n\
               end-port = 30099\nrealm-id = \"core\"\n";
    for text in [one.to_owned(), with_interfaces(one)] {
        let c = Config::from_toml_str(&text).unwrap();
        assert_eq!(c.steering_pools.len(), 1, "{text}");
        assert_eq!(c.steering_pool("core").unwrap().start_port, 30_000);
        assert!(c.steering_pool("access").is_none());
    }
}

#[test]
fn example_file_spells_out_the_default() {
    let example = include_str!("../sbc.example.toml");
    assert_eq!(
        Config::from_toml_str(example).unwrap(),
        Config::embedded_default()
    );
}

#[test]
fn full_file_parses_every_key() {
    let c = Config::from_toml_str(FULL).unwrap();
    assert_eq!(c.system.hostname, "sbc1");
    assert_eq!(c.sip_config.t1_ms, 250);
    assert_eq!(c.sip_config.t2_ms, 2000);
    assert_eq!(c.sip_config.t4_ms, 2500);
    assert_eq!(c.sip_config.timer_c_ms, 200_000);
    assert_eq!(c.sip_config.max_message_size, 4096);
    assert_eq!(c.sip_config.workers, 4);
    assert_eq!(c.sip_config.shutdown_grace_ms, 0);
    let core = c.interface("core").unwrap();
    assert_eq!(
        core.socket_addr(),
        SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 5062)
    );
    assert_eq!(core.transports, vec![Transport::Tcp]);
    let pbx = c.session_agent("pbx").unwrap();
    assert_eq!(pbx.socket_addr(), "10.0.0.9:5060".parse().unwrap());
    assert_eq!(pbx.transport, Transport::Udp, "transport defaults to udp");
    assert_eq!(c.session_router.default_route.as_deref(), Some("core"));
    assert_eq!(
        c.session_router.routes,
        vec![Route {
            from_realm: "core".into(),
            session_agent: "pbx".into(),
        }]
    );
    assert!(c.interface("nowhere").is_none());
    assert!(c.session_agent("nobody").is_none());
}

#[test]
fn sip_config_keys_default_one_by_one() {
    let c = Config::from_toml_str("[sip-config]\nworkers = 8\n").unwrap();
    assert_eq!(c.sip_config.workers, 8);
    assert_eq!(c.sip_config.t1_ms, 500);
    assert_eq!(c.sip_interfaces, Config::embedded_default().sip_interfaces);
}

#[test]
fn interface_fields_default() {
    let c = Config::from_toml_str(&with_interfaces("")).unwrap();
    assert_eq!(c.sip_interfaces[0].address, LOCALHOST);
    assert_eq!(
        c.sip_interfaces[0].transports,
        vec![Transport::Udp, Transport::Tcp]
    );
}

#[test]
fn absent_lists_take_defaults_present_lists_replace_them() {
    // Interfaces given, agents absent: the default agent and default route apply.
    let c = Config::from_toml_str(&with_interfaces("")).unwrap();
    assert_eq!(c.session_agents, Config::embedded_default().session_agents);
    assert_eq!(c.session_router.default_route.as_deref(), Some("core"));

    // Agents given: no default agent, no default route unless written.
    let agents = r#"
[[session-agent]]
name = "pbx"
realm = "core"
"#;
    let c = Config::from_toml_str(agents).unwrap();
    assert_eq!(c.sip_interfaces, Config::embedded_default().sip_interfaces);
    assert_eq!(c.session_agents.len(), 1);
    assert_eq!(c.session_agents[0].name, "pbx");
    assert_eq!(c.session_router.default_route, None);
    assert!(c.route_for("access").is_none());

    let c = Config::from_toml_str(&format!(
        "{agents}[session-router]\ndefault-route = \"pbx\"\n"
    ))
    .unwrap();
    assert_eq!(c.session_router.default_route.as_deref(), Some("pbx"));

    // An explicitly empty list means none.
    let c = Config::from_toml_str("session-agent = []\n").unwrap();
    assert!(c.session_agents.is_empty());
    assert_eq!(c.session_router.default_route, None);

    // A default-route written without agents must name the default agent.
    refused_invalid(
        "[session-router]\ndefault-route = \"pbx\"\n",
        "session-router.default-route",
        &["\"pbx\"", "valid: \"core\""],
    );
}

// ---- round trip ----

fn assert_round_trip(config: &Config) {
    let text = config.to_toml_string();
    let back = Config::from_toml_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(&back, config, "{text}");
}

#[test]
fn round_trip_through_toml() {
    assert_round_trip(&Config::embedded_default());
    assert_round_trip(&Config::from_toml_str(FULL).unwrap());

    // Default agents but no default route: only expressible because the agents are written.
    let mut c = Config::embedded_default();
    c.session_router.default_route = None;
    assert_round_trip(&c);

    // No agents at all.
    let mut c = Config::embedded_default();
    c.session_agents.clear();
    c.session_router.default_route = None;
    assert_round_trip(&c);

    // Media settings and pools of every shape.
    let mut c = Config::embedded_default();
    c.media_manager = MediaManager {
        state: MediaManagerState::Disabled,
        latching: false,
        restricted_latching: RestrictedLatching::Sdp,
        latching_window_ms: 250,
        rtp_inactivity: 30,
    };
    c.steering_pools[0].ip_address = "127.0.0.9".parse().unwrap();
    c.steering_pools[1].start_port = 21_001;
    assert_round_trip(&c);
    // A realm with an interface and a pool of each family.
    let mut v6_interface = c.sip_interfaces[0].clone();
    v6_interface.address = "::1".parse().unwrap();
    c.sip_interfaces.push(v6_interface);
    let mut v6_pool = c.steering_pools[0].clone();
    (v6_pool.ip_address, v6_pool.start_port, v6_pool.end_port) =
        ("::1".parse().unwrap(), 22_000, 22_999);
    c.steering_pools.push(v6_pool);
    assert_round_trip(&c);
    c.steering_pools.clear();
    assert_round_trip(&c);

    // Awkward strings.
    let mut c = Config::embedded_default();
    c.system.hostname = "sbc \"one\" \\ ü".into();
    assert_round_trip(&c);
}

// ---- validation ----

#[test]
fn sip_config_ranges() {
    assert_eq!(
        refused("[sip-config]\nt1-ms = 0\n"),
        "sip-config.t1-ms = 0: out of range (valid: 10..=10000)"
    );
    let cases: &[(&str, &str, &str)] = &[
        ("t1-ms = 10001\nt2-ms = 20000", "t1-ms", "10..=10000"),
        ("t2-ms = 499", "t2-ms", "500..=60000"),
        ("t2-ms = 60001", "t2-ms", "500..=60000"),
        ("t4-ms = 9", "t4-ms", "10..=60000"),
        ("t4-ms = 60001", "t4-ms", "10..=60000"),
        ("timer-c-ms = 999", "timer-c-ms", "1000..=3600000"),
        ("timer-c-ms = 3600001", "timer-c-ms", "1000..=3600000"),
        (
            "max-message-size = 1499",
            "max-message-size",
            "1500..=65535",
        ),
        (
            "max-message-size = 65536",
            "max-message-size",
            "1500..=65535",
        ),
        ("workers = 0", "workers", "1..=64"),
        ("workers = 65", "workers", "1..=64"),
        (
            "shutdown-grace-ms = 120001",
            "shutdown-grace-ms",
            "0..=120000",
        ),
    ];
    for (line, key, valid) in cases {
        refused_invalid(
            &format!("[sip-config]\n{line}\n"),
            &format!("sip-config.{key}"),
            &[&format!("(valid: {valid})")],
        );
    }
    // The bounds themselves are valid; t2 may equal t1.
    Config::from_toml_str(
        "[sip-config]\nt1-ms = 10\nt2-ms = 10\nt4-ms = 60000\ntimer-c-ms = 1000\n\
         max-message-size = 1500\nworkers = 64\nshutdown-grace-ms = 120000\n",
    )
    .unwrap();
    // t2's lower bound follows t1.
    refused_invalid(
        "[sip-config]\nt1-ms = 1000\nt2-ms = 999\n",
        "sip-config.t2-ms",
        &["999", "1000..=60000", "t1-ms"],
    );
}

#[test]
fn hostname_must_not_be_empty() {
    refused_invalid(
        "[system-config]\nhostname = \"\"\n",
        "system-config.hostname",
        &["\"\"", "non-empty"],
    );
}

#[test]
fn at_least_one_interface() {
    refused_invalid(
        "sip-interface = []\n",
        "sip-interface",
        &["[]", "at least one"],
    );
}

#[test]
fn interface_realms_are_non_empty_and_unique() {
    refused_invalid(
        "[[sip-interface]]\nrealm = \"\"\n",
        "sip-interface[0].realm",
        &["\"\"", "empty"],
    );
    refused_invalid(
        &with_interfaces("[[sip-interface]]\nrealm = \"core\"\nport = 5070\n"),
        "sip-interface[2].realm",
        &[
            "\"core\"",
            "sip-interface[1]",
            "valid: a realm with at most one sip-interface per address family",
        ],
    );
}

#[test]
fn interface_port_is_not_zero() {
    refused_invalid(
        "[[sip-interface]]\nrealm = \"access\"\nport = 0\n",
        "sip-interface[0].port",
        &["= 0", "valid: 1..=65535"],
    );
}

#[test]
fn interface_transports_are_non_empty_and_distinct() {
    assert_eq!(
        refused("[[sip-interface]]\nrealm = \"access\"\ntransports = []\n"),
        r#"sip-interface[0].transports = []: at least one transport (valid: "udp", "tcp", "tls")"#
    );
    refused_invalid(
        "[[sip-interface]]\nrealm = \"access\"\ntransports = [\"udp\", \"tcp\", \"udp\"]\n",
        "sip-interface[0].transports",
        &[
            r#"["udp", "tcp", "udp"]"#,
            "duplicate",
            r#"valid: "udp", "tcp""#,
        ],
    );
}

#[test]
fn interfaces_do_not_share_a_socket() {
    refused_invalid(
        &with_interfaces("[[sip-interface]]\nrealm = \"peer\"\nport = 5062\n"),
        "sip-interface[2].port",
        &[
            "5062",
            "127.0.0.1:5062",
            "sip-interface[1]",
            "valid: an address:port",
        ],
    );
    // A wildcard address overlaps every address of its family on that port...
    refused_invalid(
        &with_interfaces(
            "[[sip-interface]]\nrealm = \"peer\"\naddress = \"0.0.0.0\"\nport = 5060\n",
        ),
        "sip-interface[2].port",
        &["sip-interface[0]"],
    );
    // ...but the same port on another address is fine.
    Config::from_toml_str(&with_interfaces(
        "[[sip-interface]]\nrealm = \"peer\"\naddress = \"127.0.0.2\"\nport = 5060\n",
    ))
    .unwrap();
}

#[test]
fn session_agent_names_are_non_empty_and_unique() {
    refused_invalid(
        "[[session-agent]]\nname = \"\"\nrealm = \"core\"\n",
        "session-agent[0].name",
        &["\"\"", "valid: a non-empty name"],
    );
    refused_invalid(
        "[[session-agent]]\nname = \"a\"\nrealm = \"core\"\n\
         [[session-agent]]\nname = \"a\"\nrealm = \"access\"\n",
        "session-agent[1].name",
        &["\"a\"", "session-agent[0]", "valid: a name not used"],
    );
}

#[test]
fn session_agent_realm_must_exist() {
    assert_eq!(
        refused("[[session-agent]]\nname = \"core\"\nrealm = \"cor\"\n"),
        r#"session-agent[0].realm = "cor": no sip-interface has this realm (valid: "access", "core")"#
    );
}

#[test]
fn session_agent_port_is_not_zero() {
    refused_invalid(
        "[[session-agent]]\nname = \"core\"\nrealm = \"core\"\nport = 0\n",
        "session-agent[0].port",
        &["valid: 1..=65535"],
    );
}

#[test]
fn router_references_must_exist() {
    let agents = "[[session-agent]]\nname = \"core\"\nrealm = \"core\"\n\
                  [[session-agent]]\nname = \"pbx\"\nrealm = \"access\"\n";
    refused_invalid(
        &format!("{agents}[session-router]\ndefault-route = \"nope\"\n"),
        "session-router.default-route",
        &["\"nope\"", "no session-agent", r#"valid: "core", "pbx""#],
    );
    refused_invalid(
        &format!(
            "{agents}[[session-router.route]]\nfrom-realm = \"edge\"\nsession-agent = \"pbx\"\n"
        ),
        "session-router.route[0].from-realm",
        &["\"edge\"", r#"valid: "access", "core""#],
    );
    refused_invalid(
        &format!(
            "{agents}[[session-router.route]]\nfrom-realm = \"core\"\nsession-agent = \"pbx\"\n\
             [[session-router.route]]\nfrom-realm = \"access\"\nsession-agent = \"nope\"\n"
        ),
        "session-router.route[1].session-agent",
        &["\"nope\"", r#"valid: "core", "pbx""#],
    );
    // With no agents at all, the message says there is nothing valid.
    refused_invalid(
        "session-agent = []\n[session-router]\ndefault-route = \"core\"\n",
        "session-router.default-route",
        &["valid: (none)"],
    );
    // The issue's own example routes to "pbx", which it does not define.
    let example = r#"
[[session-agent]]
name = "core"
realm = "core"
address = "127.0.0.1"
port = 5080
transport = "udp"

[session-router]
default-route = "core"
[[session-router.route]]
from-realm = "core"
session-agent = "pbx"
"#;
    refused_invalid(
        example,
        "session-router.route[0].session-agent",
        &["\"pbx\""],
    );
}

#[test]
fn validate_checks_a_hand_built_config() {
    let mut c = Config::embedded_default();
    c.sip_interfaces[1].port = 0;
    let err = c.validate().unwrap_err();
    assert!(matches!(&err, ConfigError::Invalid { key, .. } if key == "sip-interface[1].port"));
}

// ---- parse errors ----

fn assert_parse_error(text: &str, parts: &[&str]) {
    let err = Config::from_toml_str(text).unwrap_err();
    assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
    let message = err.to_string();
    for part in parts {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
}

#[test]
fn unknown_keys_are_refused_by_name() {
    assert_parse_error(
        "[sip-confg]\nt1-ms = 500\n",
        &["sip-confg", "line 1", "`sip-config`", "`session-router`"],
    );
    assert_parse_error("hostname = \"x\"\n", &["unknown field `hostname`"]);
    assert_parse_error(
        "[system-config]\nhost-name = \"x\"\n",
        &["unknown field `host-name`", "`hostname`", "line 2"],
    );
    assert_parse_error(
        "[sip-config]\nt3-ms = 1\n",
        &["unknown field `t3-ms`", "`t1-ms`", "`shutdown-grace-ms`"],
    );
    assert_parse_error(
        "[[sip-interface]]\nrealm = \"a\"\nproto = \"udp\"\n",
        &["unknown field `proto`", "`transports`", "line 3"],
    );
    assert_parse_error(
        "[[session-agent]]\nname = \"a\"\nrealm = \"core\"\nhost = \"x\"\n",
        &["unknown field `host`", "`address`"],
    );
    assert_parse_error(
        "[session-router]\ndefault = \"core\"\n",
        &["unknown field `default`", "`default-route`"],
    );
    assert_parse_error(
        "[[session-router.route]]\nfrom-realm = \"core\"\nsession-agent = \"core\"\nto = \"x\"\n",
        &["unknown field `to`", "`from-realm`"],
    );
    // snake_case spellings are not accepted.
    assert_parse_error("[sip-config]\nt1_ms = 500\n", &["unknown field `t1_ms`"]);
}

#[test]
fn wrong_types_are_refused() {
    assert_parse_error(
        "[sip-config]\nt1-ms = \"500\"\n",
        &["line 2", "invalid type", "expected u64"],
    );
    assert_parse_error("[sip-config]\nworkers = -1\n", &["line 2"]);
    assert_parse_error(
        "[[sip-interface]]\nrealm = \"a\"\nport = 70000\n",
        &["line 3"],
    );
    assert_parse_error(
        "[[sip-interface]]\nrealm = \"a\"\naddress = \"localhost\"\n",
        &["line 3", "address"],
    );
    assert_parse_error(
        "[[sip-interface]]\nrealm = \"a\"\ntransports = [\"sctp\"]\n",
        &["sctp", "`udp`", "`tcp`"],
    );
    assert_parse_error("[system-config]\nhostname = 1\n", &["invalid type"]);
    assert_parse_error("[sip-config\n", &["line 1"]);
    assert_parse_error("sip-interface = 5\n", &["invalid type"]);
}

#[test]
fn required_keys_are_named() {
    assert_parse_error(
        "[[sip-interface]]\nport = 5060\n",
        &["missing field `realm`"],
    );
    assert_parse_error(
        "[[session-agent]]\nname = \"x\"\n",
        &["missing field `realm`"],
    );
    assert_parse_error(
        "[[session-router.route]]\nfrom-realm = \"core\"\n",
        &["missing field `session-agent`"],
    );
}

// ---- routing ----

#[test]
fn route_for_prefers_routes_then_default_without_hairpin() {
    let c = Config::from_toml_str(FULL).unwrap();
    // core has a route to pbx.
    assert_eq!(c.route_for("core").unwrap().name, "pbx");
    // access has no route: default core.
    assert_eq!(c.route_for("access").unwrap().name, "core");
    // Unknown realm: default.
    assert_eq!(c.route_for("other").unwrap().name, "core");

    let d = Config::embedded_default();
    assert_eq!(d.route_for("access").unwrap().name, "core");
    // The default agent is in core itself: no hairpin.
    assert!(d.route_for("core").is_none());

    let mut none = d.clone();
    none.session_router.default_route = None;
    assert!(none.route_for("access").is_none());

    // The first matching route wins, and an explicit route may stay in its realm.
    let text = with_interfaces(
        "[[session-agent]]\nname = \"a\"\nrealm = \"core\"\nport = 5081\n\
         [[session-agent]]\nname = \"b\"\nrealm = \"core\"\nport = 5082\n\
         [[session-router.route]]\nfrom-realm = \"core\"\nsession-agent = \"b\"\n\
         [[session-router.route]]\nfrom-realm = \"core\"\nsession-agent = \"a\"\n",
    );
    let c = Config::from_toml_str(&text).unwrap();
    assert_eq!(c.route_for("core").unwrap().name, "b");
    assert!(c.route_for("access").is_none());
}

// ---- overrides ----

#[test]
fn overrides_replace_listen_and_next_hop() {
    let listen: SocketAddr = "127.0.0.1:15060".parse().unwrap();
    let hop: SocketAddr = "127.0.0.1:15080".parse().unwrap();
    let c = Config::embedded_default()
        .with_overrides(Some(listen), Some(hop))
        .unwrap();
    assert_eq!(c.interface("access").unwrap().socket_addr(), listen);
    assert_eq!(c.interface("core").unwrap().port, 5062);
    assert_eq!(c.route_for("access").unwrap().socket_addr(), hop);
    assert_eq!(c.session_agents.len(), 1);

    // Nothing to override: unchanged.
    assert_eq!(
        Config::embedded_default()
            .with_overrides(None, None)
            .unwrap(),
        Config::embedded_default()
    );
}

#[test]
fn listen_override_moves_the_default_access_pool() {
    let listen: SocketAddr = "192.0.2.7:5070".parse().unwrap();
    let c = Config::embedded_default()
        .with_overrides(Some(listen), None)
        .unwrap();
    let access = c.steering_pool("access").unwrap();
    assert_eq!(access.ip_address, listen.ip());
    assert_eq!(access.ports(), 20_000..=20_999, "the ports stay");
    // The core pool stays with the core interface.
    assert_eq!(
        c.steering_pool("core").unwrap(),
        &Config::embedded_default().steering_pools[1]
    );
    // IPv6 too.
    let listen: SocketAddr = "[::1]:5060".parse().unwrap();
    let c = Config::embedded_default()
        .with_overrides(Some(listen), None)
        .unwrap();
    assert_eq!(c.steering_pool("access").unwrap().ip_address, listen.ip());

    // A pool of the operator's own is not moved.
    let own = "[[steering-pool]]\nip-address = \"127.0.0.1\"\nstart-port = 30000\n\
               end-port = 30099\nrealm-id = \"access\"\n";
    let c = Config::from_toml_str(own)
        .unwrap()
        .with_overrides(Some("192.0.2.7:5060".parse().unwrap()), None)
        .unwrap();
    assert_eq!(c.steering_pool("access").unwrap().ip_address, LOCALHOST);
    // The first interface of another realm takes the address; no pool follows it.
    let c = Config::from_toml_str(
        "[[sip-interface]]\nrealm = \"core\"\nport = 6002\n\
         [[steering-pool]]\nip-address = \"127.0.0.1\"\nstart-port = 21000\nend-port = 21999\n\
         realm-id = \"core\"\n",
    )
    .unwrap()
    .with_overrides(Some("192.0.2.7:5060".parse().unwrap()), None)
    .unwrap();
    assert_eq!(c.steering_pool("core").unwrap().ip_address, LOCALHOST);

    // A listen port inside the moved pool is refused by validation.
    let err = Config::embedded_default()
        .with_overrides(Some("192.0.2.7:20500".parse().unwrap()), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("steering-pool[0].start-port = 20000"),
        "{err}"
    );
    assert!(err.contains("192.0.2.7:20500"), "{err}");
}

#[test]
fn listen_override_falls_back_to_the_first_interface() {
    let c = Config::from_toml_str(
        "[[sip-interface]]\nrealm = \"edge\"\nport = 6000\n\
         [[sip-interface]]\nrealm = \"core\"\nport = 6002\n",
    )
    .unwrap();
    let listen: SocketAddr = "[::1]:7000".parse().unwrap();
    let c = c.with_overrides(Some(listen), None).unwrap();
    assert_eq!(c.sip_interfaces[0].socket_addr(), listen);
    assert_eq!(c.sip_interfaces[1].port, 6002);
}

#[test]
fn next_hop_override_updates_the_default_route_agent() {
    let c = Config::from_toml_str(FULL).unwrap();
    let hop: SocketAddr = "[::1]:9000".parse().unwrap();
    let c = c.with_overrides(None, Some(hop)).unwrap();
    assert_eq!(c.session_agent("core").unwrap().socket_addr(), hop);
    assert_eq!(c.session_agent("core").unwrap().transport, Transport::Tcp);
    assert_eq!(
        c.session_agent("pbx").unwrap().socket_addr(),
        "10.0.0.9:5060".parse().unwrap()
    );
}

#[test]
fn next_hop_override_creates_a_core_agent() {
    let hop: SocketAddr = "127.0.0.1:9000".parse().unwrap();
    let c = Config::from_toml_str("session-agent = []\n")
        .unwrap()
        .with_overrides(None, Some(hop))
        .unwrap();
    assert_eq!(c.session_router.default_route.as_deref(), Some("core"));
    let core = c.session_agent("core").unwrap();
    assert_eq!(core.realm, "core");
    assert_eq!(core.transport, Transport::Udp);
    assert_eq!(core.socket_addr(), hop);

    // No default route but an agent called core: that one is reused and becomes the default.
    let mut c = Config::embedded_default();
    c.session_router.default_route = None;
    let c = c.with_overrides(None, Some(hop)).unwrap();
    assert_eq!(c.session_agents.len(), 1);
    assert_eq!(c.route_for("access").unwrap().socket_addr(), hop);
}

#[test]
fn overrides_are_validated() {
    // Listening on the core interface's socket.
    let err = Config::embedded_default()
        .with_overrides(Some("127.0.0.1:5062".parse().unwrap()), None)
        .unwrap_err();
    assert!(
        err.to_string().starts_with("sip-interface[1].port = 5062"),
        "{err}"
    );
    // Port 0.
    let err = Config::embedded_default()
        .with_overrides(None, Some("127.0.0.1:0".parse().unwrap()))
        .unwrap_err();
    assert!(
        err.to_string().starts_with("session-agent[0].port = 0"),
        "{err}"
    );
    // A core agent needs a core realm.
    let err = Config::from_toml_str("session-agent = []\n[[sip-interface]]\nrealm = \"access\"\n")
        .unwrap()
        .with_overrides(None, Some("127.0.0.1:9000".parse().unwrap()))
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("session-agent[0].realm = \"core\""),
        "{err}"
    );
}

// ---- files ----

#[test]
fn load_reads_a_file_and_names_a_missing_one() {
    let dir = TempDir::new("load");
    let path = dir.path().join("sbc.toml");
    fs::write(&path, FULL).unwrap();
    assert_eq!(
        Config::load(&path).unwrap(),
        Config::from_toml_str(FULL).unwrap()
    );

    let missing = dir.path().join("missing.toml");
    let err = Config::load(&missing).unwrap_err();
    assert!(
        matches!(&err, ConfigError::Io { path, .. } if path == &missing),
        "{err:?}"
    );
    assert!(err.to_string().contains("missing.toml"), "{err}");

    fs::write(&path, "[sip-config]\nt1-ms = 0\n").unwrap();
    assert!(matches!(
        Config::load(&path),
        Err(ConfigError::Invalid { .. })
    ));
}

#[test]
fn save_atomic_writes_keeps_a_backup_and_leaves_no_temp_files() {
    let dir = TempDir::new("save");
    let path = dir.path().join("sbc.toml");
    let bak = Config::backup_path(&path);
    assert_eq!(bak, dir.path().join("sbc.toml.bak"));

    // First save: no previous file, so no backup.
    let first = Config::embedded_default();
    first.save_atomic(&path).unwrap();
    assert_eq!(Config::load(&path).unwrap(), first);
    assert_eq!(dir.entries(), vec!["sbc.toml"]);

    // Second save: the first file becomes the backup.
    let second = Config::from_toml_str(FULL).unwrap();
    let first_text = fs::read_to_string(&path).unwrap();
    second.save_atomic(&path).unwrap();
    assert_eq!(Config::load(&path).unwrap(), second);
    assert_eq!(fs::read_to_string(&bak).unwrap(), first_text);
    assert_eq!(dir.entries(), vec!["sbc.toml", "sbc.toml.bak"]);

    // Third save: the backup is the second file.
    let second_text = fs::read_to_string(&path).unwrap();
    first.save_atomic(&path).unwrap();
    assert_eq!(fs::read_to_string(&bak).unwrap(), second_text);
    assert_eq!(dir.entries(), vec!["sbc.toml", "sbc.toml.bak"]);
}

#[test]
fn save_atomic_refuses_an_invalid_config_and_touches_nothing() {
    let dir = TempDir::new("refuse");
    let path = dir.path().join("sbc.toml");
    let hand_written = "# operator's comments\n[system-config]\nhostname = \"keep\"\n";
    fs::write(&path, hand_written).unwrap();

    let mut bad = Config::embedded_default();
    bad.sip_config.workers = 0;
    let err = bad.save_atomic(&path).unwrap_err();
    assert!(matches!(err, ConfigError::Invalid { .. }), "{err:?}");
    assert_eq!(fs::read_to_string(&path).unwrap(), hand_written);
    assert_eq!(dir.entries(), vec!["sbc.toml"]);
}

#[test]
fn save_atomic_reports_an_unwritable_directory() {
    let dir = TempDir::new("nodir");
    let path = dir.path().join("no").join("such").join("sbc.toml");
    let err = Config::embedded_default().save_atomic(&path).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("such"), "{err}");
}

#[cfg(unix)]
#[test]
fn saved_files_and_backups_are_0600_from_the_first_save() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = TempDir::new("mode");
    // The first save creates the file: 0600, not the umask's 0644.
    let path = dir.path().join("sbc.toml");
    Config::embedded_default().save_atomic(&path).unwrap();
    assert_eq!(mode(&path), 0o600);
    // A file left readable by others (written by hand, say) is replaced by a 0600 one, and its
    // backup is 0600 too.
    let open = dir.path().join("open.toml");
    fs::write(&open, "").unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o644)).unwrap();
    Config::embedded_default().save_atomic(&open).unwrap();
    assert_eq!(mode(&open), 0o600);
    assert_eq!(mode(&Config::backup_path(&open)), 0o600);
}

// ---- small types ----

#[test]
fn transport_display_and_from_str() {
    for t in Transport::ALL {
        assert_eq!(t.to_string().parse::<Transport>().unwrap(), t);
    }
    assert_eq!(Transport::Udp.to_string(), "udp");
    assert_eq!(Transport::Tcp.to_string(), "tcp");
    assert_eq!("TCP".parse::<Transport>().unwrap(), Transport::Tcp);
    let err = "sctp".parse::<Transport>().unwrap_err().to_string();
    assert_eq!(
        err,
        r#"transport = "sctp": unknown transport (valid: "udp", "tcp", "tls")"#
    );
}

// ---- SIP over TLS ----

/// A profile, an access interface listening on TLS with it, and a core agent reached over TLS.
const TLS_CONFIG: &str = r#"
[[tls-profile]]
name = "edge"
end-entity-certificate = "/etc/sbc/sbc.pem"
private-key = "/etc/sbc/sbc-key.pem"
trusted-ca-certificates = ["/etc/sbc/ca.pem"]

[[sip-interface]]
realm = "access"
transports = ["udp", "tcp", "tls"]
tls-profile = "edge"

[[sip-interface]]
realm = "core"
port = 5062
tls-port = 5063
transports = ["tls"]
tls-profile = "edge"

[[session-agent]]
name = "core"
realm = "core"
port = 5081
transport = "tls"
tls-profile = "edge"
tls-server-name = "uas.example.net"

[session-router]
default-route = "core"
"#;

#[test]
fn a_tls_configuration_parses_round_trips_and_defaults_the_port_to_5061() {
    let c = Config::from_toml_str(TLS_CONFIG).unwrap();
    let profile = c.tls_profile("edge").unwrap();
    assert_eq!(profile.tls_version, TlsVersion::Compatibility);
    assert_eq!(profile.expiry_warning_days, 30);
    assert!(!profile.mutual_authenticate);
    assert_eq!(c.sip_interfaces[0].tls_port, 5061);
    assert_eq!(
        c.sip_interfaces[0].addr_of(Transport::Tls),
        "127.0.0.1:5061".parse().unwrap()
    );
    let agent = c.session_agent("core").unwrap();
    assert_eq!(agent.transport, Transport::Tls);
    assert_eq!(agent.tls_server_name.as_deref(), Some("uas.example.net"));
    let again = Config::from_toml_str(&c.to_toml_string()).unwrap();
    assert_eq!(again, c);
}

#[test]
fn tls_settings_are_refused_with_the_key_and_what_is_valid() {
    let with = |from: &str, to: &str| {
        assert!(TLS_CONFIG.contains(from), "{from}");
        TLS_CONFIG.replacen(from, to, 1)
    };
    refused_invalid(
        &with(
            "tls-profile = \"edge\"\n\n[[sip-interface]]",
            "\n[[sip-interface]]",
        ),
        "sip-interface[0].tls-profile",
        &[
            "TLS listens here",
            "a tls-profile with an end-entity-certificate",
        ],
    );
    refused_invalid(
        &with(
            "tls-profile = \"edge\"\n\n[[sip-interface]]",
            "tls-profile = \"edgy\"\n\n[[sip-interface]]",
        ),
        "sip-interface[0].tls-profile",
        &["no tls-profile has this name", "\"edge\""],
    );
    refused_invalid(
        &with(
            "transports = [\"udp\", \"tcp\", \"tls\"]",
            "transports = [\"udp\", \"tcp\"]",
        ),
        "sip-interface[0].tls-profile",
        &["no \"tls\""],
    );
    refused_invalid(
        &with(
            "realm = \"access\"\n",
            "realm = \"access\"\ntls-port = 5060\n",
        ),
        "sip-interface[0].tls-port",
        &["TCP listens on this port already"],
    );
    refused_invalid(
        &with("tls-port = 5063", "tls-port = 5061"),
        "sip-interface[1].tls-port",
        &["sip-interface[0]"],
    );
    refused_invalid(
        &with("private-key = \"/etc/sbc/sbc-key.pem\"\n", ""),
        "tls-profile[0].private-key",
        &["a certificate needs its private key"],
    );
    refused_invalid(
        &with(
            "trusted-ca-certificates",
            "mutual-authenticate = true\nverify-names = [\"a..b\"]\ntrusted-ca-certificates",
        ),
        "tls-profile[0].verify-names",
        &["not a DNS name or an IP address"],
    );
    // Names rustls would refuse at load: the node would not start on a "valid" config.
    for bad in ["*.example.net", "1.2.3", "sip.0x1f"] {
        refused_invalid(
            &with(
                "trusted-ca-certificates",
                &format!("mutual-authenticate = true\nverify-names = [\"{bad}\"]\ntrusted-ca-certificates"),
            ),
            "tls-profile[0].verify-names",
            &["not a DNS name or an IP address", "no *. wildcard"],
        );
        refused_invalid(
            &with(
                "tls-server-name = \"uas.example.net\"",
                &format!("tls-server-name = \"{bad}\""),
            ),
            "session-agent[0].tls-server-name",
            &["not a DNS name or an IP address"],
        );
    }
    refused_invalid(
        &with(
            "trusted-ca-certificates",
            "verify-names = [\"uac.example.net\"]\ntrusted-ca-certificates",
        ),
        "tls-profile[0].verify-names",
        &["mutual-authenticate is off"],
    );
    refused_invalid(
        &with(
            "trusted-ca-certificates = [\"/etc/sbc/ca.pem\"]\n",
            "mutual-authenticate = true\n",
        ),
        "tls-profile[0].trusted-ca-certificates",
        &["mutual-authenticate needs the CAs"],
    );
    refused_invalid(
        &with("transports = [\"tls\"]", "transports = [\"udp\"]")
            .replace("tls-port = 5063\n", "")
            .replacen(
                "tls-profile = \"edge\"\n\n[[session-agent]]",
                "\n[[session-agent]]",
                1,
            ),
        "session-agent[0].transport",
        &["does not listen on TLS"],
    );
    refused_invalid(
        &with(
            "tls-server-name = \"uas.example.net\"",
            "tls-server-name = \"uas example\"",
        ),
        "session-agent[0].tls-server-name",
        &["not a DNS name or an IP address"],
    );
    refused_invalid(
        &with("transport = \"tls\"", "transport = \"tcp\""),
        "session-agent[0].tls-profile",
        &["reached over tcp"],
    );
}

/// A realm with an interface of each family: accepted, each agent reached through the
/// interface of its own family, each interface anchored by the pool of its family.
#[test]
fn dual_stack_realms_have_one_interface_and_pool_per_family() {
    let dual = r#"
[[sip-interface]]
realm = "access"
address = "127.0.0.1"
port = 5060
[[sip-interface]]
realm = "core"
address = "127.0.0.1"
port = 5062
[[sip-interface]]
realm = "core"
address = "::1"
port = 5062
[[session-agent]]
name = "v6"
realm = "core"
address = "::1"
port = 5080
[[session-agent]]
name = "v4"
realm = "core"
address = "127.0.0.1"
port = 5080
[session-router]
default-route = "v6"
"#;
    let c = Config::from_toml_str(dual).unwrap();
    let v6: std::net::IpAddr = "::1".parse().unwrap();
    assert_eq!(c.interface_for("core", v6), Some(2));
    assert_eq!(c.interface_for("core", LOCALHOST), Some(1));
    assert_eq!(c.interface_for("access", v6), None);

    // A third interface of one family in a realm is refused.
    refused_invalid(
        &format!("{dual}[[sip-interface]]\nrealm = \"core\"\naddress = \"::2\"\nport = 5064\n"),
        "sip-interface[3].realm",
        &["already has an IPv6 sip-interface, sip-interface[2]"],
    );
    // An agent of a family its realm has no interface of is refused.
    refused_invalid(
        &dual
            .replace(
                "name = \"v4\"\nrealm = \"core\"",
                "name = \"v4\"\nrealm = \"access\"",
            )
            .replace(
                "address = \"127.0.0.1\"\nport = 5080",
                "address = \"2001:db8::5\"\nport = 5080",
            ),
        "session-agent[1].address",
        &["realm \"access\" has no IPv6 sip-interface"],
    );
    // Pools: one per family; a realm with a pool needs one for each family it listens on.
    let pool = |realm: &str, ip: &str, start: u32| {
        format!(
            "[[steering-pool]]\nip-address = \"{ip}\"\nstart-port = {start}\n\
             end-port = {}\nrealm-id = \"{realm}\"\n",
            start + 99
        )
    };
    let with_pools = format!(
        "{dual}{}{}{}",
        pool("access", "127.0.0.1", 20_000),
        pool("core", "127.0.0.1", 21_000),
        pool("core", "::1", 22_000)
    );
    let c = Config::from_toml_str(&with_pools).unwrap();
    assert_eq!(c.steering_pool_for(0), Some(0));
    assert_eq!(c.steering_pool_for(1), Some(1));
    assert_eq!(c.steering_pool_for(2), Some(2));
    let err = refused(&format!(
        "{dual}{}{}",
        pool("access", "127.0.0.1", 20_000),
        pool("core", "127.0.0.1", 21_000)
    ));
    assert!(
        err.contains("realm \"core\" has an IPv6 sip-interface")
            && err.contains("no IPv6 steering-pool"),
        "{err}"
    );
    refused_invalid(
        &format!("{with_pools}{}", pool("core", "::2", 23_000)),
        "steering-pool[3].realm-id",
        &["already has an IPv6 steering-pool"],
    );
}

#[test]
fn max_udp_length_needs_udp_and_a_tcp_listener() {
    let agent = |extra: &str| {
        with_interfaces(&format!(
            "[[session-agent]]\nname = \"core\"\nrealm = \"core\"\nport = 5080\n{extra}"
        ))
    };
    let c = Config::from_toml_str(&agent("max-udp-length = 1300\n")).unwrap();
    assert_eq!(c.session_agents[0].max_udp_length, 1300);
    refused_invalid(
        &agent("max-udp-length = 100\n"),
        "session-agent[0].max-udp-length",
        &["500..=65535"],
    );
    refused_invalid(
        &agent("transport = \"tcp\"\nmax-udp-length = 1300\n"),
        "session-agent[0].max-udp-length",
        &["reached over tcp"],
    );
    let udp_only = "[[sip-interface]]\nrealm = \"access\"\nport = 5060\n[[sip-interface]]\n\
                    realm = \"core\"\nport = 5062\ntransports = [\"udp\"]\n[[session-agent]]\n\
                    name = \"core\"\nrealm = \"core\"\nport = 5080\nmax-udp-length = 1300\n";
    refused_invalid(
        udp_only,
        "session-agent[0].max-udp-length",
        &["does not listen on TCP"],
    );
}
