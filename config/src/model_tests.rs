//! Tests of the model additions: system-config options and alarm settings, alarm thresholds,
//! trap receivers, redundancy-config, auto-scaling profiles, sip-config heap thresholds, worker
//! groups and their queues.

#![allow(clippy::unwrap_used, reason = "tests may panic")]

use super::*;

/// Every new key, with values other than the defaults.
const ALL_NEW: &str = r#"
[system-config]
hostname = "sbc1"
options = ["critical-memory-abort=switchover"]
memory-source = "process"
memory-limit-mb = 512
heap-limit-mb = 256
alarm-iteration-ms = 1000
alarm-subsamples = 10
spike-subsamples = 2
lab-mode = true

[[system-config.alarm-threshold]]
type = "memory"
severity = "major"
value = 70
health-penalty = 10

[[system-config.alarm-threshold]]
type = "memory"
severity = "critical"
value = 80

[[system-config.alarm-threshold]]
type = "space"
volume = "/var"
severity = "critical"
value = 95

[[system-config.trap-receiver]]
ip-address = "127.0.0.1"
port = 10162
community = "lab"
filter-level = "major"

[sip-config]
heap-reject-threshold = 85
heap-resume-threshold = 70
retry-after-min = 2
retry-after-max = 30
auto-scaling-cycle-ms = 500

[redundancy-config]
state = "enabled"
port = 9190
advertisement-time = 250
percent-drift = 300
initial-time = 1000
becoming-active-time = 50
becoming-standby-time = 60000
health-threshold = 60
emergency-threshold = 40
config-sync-port = 2987
sip-sync-port = 2988
witness = "127.0.0.9:7000"
shared-key = "s3cret-s3cret-s3cret"
service-address = "127.0.0.10"

[[redundancy-config.peer]]
name = "sbc1"
type = "primary"
destinations = ["127.0.0.1:9190", "127.0.1.1:9190"]

[[redundancy-config.peer]]
name = "sbc2"
type = "secondary"
destinations = ["127.0.0.2:9190"]

[[auto-scaling-profile]]
name = "PROFILE_A"
scale-up-to = 6
scale-up-on = 70
scale-up-for = 4
scale-up-within = 5
scale-down-to = 2
scale-down-on = 18
scale-down-for = 10

[[auto-scaling-profile]]
name = "up-only"
"#;

fn refused_invalid(text: &str, key: &str, parts: &[&str]) {
    let err = Config::from_toml_str(text).unwrap_err();
    let ConfigError::Invalid { key: got, .. } = &err else {
        panic!("expected Invalid on {key}, got {err:?}");
    };
    assert_eq!(got, key, "{err}");
    let message = err.to_string();
    for part in parts {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
}

fn assert_round_trip(config: &Config) {
    let text = config.to_toml_string();
    let back = Config::from_toml_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(&back, config, "{text}");
}

#[test]
fn new_defaults_are_exactly_as_documented() {
    let c = Config::embedded_default();
    let s = &c.system;
    assert!(s.options.is_empty());
    assert_eq!(s.critical_memory_abort(), CriticalMemoryAbort::Disabled);
    assert_eq!(s.memory_source, MemorySource::Host);
    assert_eq!(s.memory_limit_mb, 0);
    assert_eq!(s.heap_limit_mb, 1024);
    assert_eq!(s.alarm_iteration_ms, 15_000);
    assert_eq!(s.alarm_subsamples, 15);
    assert_eq!(s.spike_subsamples, 3);
    assert!(!s.lab_mode);
    assert!(s.alarm_thresholds.is_empty());
    assert!(s.trap_receivers.is_empty());

    let r = &c.redundancy;
    assert_eq!(r.state, RedundancyState::Disabled);
    assert!(!r.is_enabled());
    assert_eq!(
        (
            r.port,
            r.advertisement_time,
            r.percent_drift,
            r.initial_time
        ),
        (9090, 200, 300, 1250)
    );
    assert_eq!(
        (r.becoming_active_time, r.becoming_standby_time),
        (50, 180_000)
    );
    assert_eq!((r.health_threshold, r.emergency_threshold), (75, 50));
    assert_eq!((r.config_sync_port, r.sip_sync_port), (1987, 1988));
    assert_eq!(r.dead_after_ms(), 600);
    assert_eq!((r.witness, r.service_address), (None, None));
    assert!(r.shared_key.is_empty() && r.peers.is_empty());

    assert!(c.auto_scaling_profiles.is_empty());
    let sip = &c.sip_config;
    assert_eq!(
        (sip.heap_reject_threshold, sip.heap_resume_threshold),
        (90, 80)
    );
    assert_eq!((sip.retry_after_min, sip.retry_after_max), (5, 15));
    assert_eq!(sip.auto_scaling_cycle_ms, 1000);

    let t = AlarmThreshold::default();
    assert_eq!(
        (t.kind, t.severity, t.value, t.health_penalty),
        (AlarmType::Memory, Severity::Minor, 0, 0)
    );
    let tr = TrapReceiver::default();
    assert_eq!(tr.socket_addr(), "127.0.0.1:162".parse().unwrap());
    assert_eq!(
        (tr.community.as_str(), tr.filter_level),
        ("public", FilterLevel::All)
    );
}

#[test]
fn every_new_key_parses_and_round_trips() {
    let c = Config::from_toml_str(ALL_NEW).unwrap();
    assert_eq!(
        c.system.critical_memory_abort(),
        CriticalMemoryAbort::Switchover
    );
    assert_eq!(c.system.option("critical-memory-abort"), Some("switchover"));
    assert_eq!(c.system.option("nothing"), None);
    assert_eq!(c.system.memory_source, MemorySource::Process);
    assert!(c.system.lab_mode);
    assert_eq!(c.system.thresholds(AlarmType::Memory).count(), 2);
    assert_eq!(c.system.alarm_thresholds[0].health_penalty, 10);
    assert_eq!(c.system.alarm_thresholds[2].volume, "/var");
    assert_eq!(c.system.trap_receivers[0].filter_level, FilterLevel::Major);
    assert_eq!(c.sip_config.heap_reject_threshold, 85);
    assert_eq!(c.sip_config.auto_scaling_cycle_ms, 500);
    let r = &c.redundancy;
    assert!(r.is_enabled());
    assert_eq!(r.witness, Some("127.0.0.9:7000".parse().unwrap()));
    assert_eq!(r.service_address, Some("127.0.0.10".parse().unwrap()));
    assert_eq!(r.peer("sbc1").unwrap().destinations.len(), 2);
    assert_eq!(r.peer("sbc2").unwrap().kind, PeerType::Secondary);
    assert_eq!(r.dead_after_ms(), 750);
    let a = &c.auto_scaling_profiles[0];
    assert_eq!((a.up_within(), a.scale_down()), (5, Some((2, 18, 10))));
    let b = &c.auto_scaling_profiles[1];
    assert_eq!((b.scale_up_to, b.up_within(), b.scale_down()), (6, 4, None));
    assert_round_trip(&c);
    assert_round_trip(&Config::embedded_default());
}

#[test]
fn keyword_enums_parse_any_case_and_name_valid_words() {
    assert_eq!(
        "SwitchOver".parse::<CriticalMemoryAbort>().unwrap(),
        CriticalMemoryAbort::Switchover
    );
    assert_eq!(
        "disk".parse::<MemorySource>().unwrap_err().to_string(),
        r#"memory-source = "disk": unknown memory-source (valid: "host", "cgroup", "process")"#
    );
    for s in Severity::ALL {
        assert_eq!(s.to_string().parse::<Severity>().unwrap(), *s);
    }
    assert!(Severity::Minor < Severity::Major && Severity::Major < Severity::Critical);
}

#[test]
fn new_tables_refuse_unknown_keys() {
    for (text, field) in [
        ("[system-config]\noption = []\n", "option"),
        (
            "[[system-config.alarm-threshold]]\nkind = \"cpu\"\n",
            "kind",
        ),
        (
            "[[system-config.trap-receiver]]\naddress = \"::1\"\n",
            "address",
        ),
        ("[redundancy-config]\nheartbeat = 1\n", "heartbeat"),
        ("[[redundancy-config.peer]]\naddress = \"x\"\n", "address"),
        ("[[auto-scaling-profile]]\nmax = 1\n", "max"),
        ("[sip-config]\nheap-threshold = 1\n", "heap-threshold"),
    ] {
        let err = Config::from_toml_str(text).unwrap_err().to_string();
        assert!(err.contains(&format!("unknown field `{field}`")), "{err}");
    }
    let err = Config::from_toml_str("[system-config]\nmemory-source = \"disk\"\n").unwrap_err();
    assert!(err.to_string().contains("`cgroup`"), "{err}");
}

#[test]
fn options_are_validated() {
    refused_invalid(
        "[system-config]\noptions = [\"critical-memory-abort=maybe\"]\n",
        "system-config.options[0]",
        &[
            "\"critical-memory-abort=maybe\"",
            "\"critical-memory-abort=enabled\"",
            "\"critical-memory-abort=switchover\"",
        ],
    );
    refused_invalid(
        "[system-config]\noptions = [\"critical-memory-abort\"]\n",
        "system-config.options[0]",
        &["bad value"],
    );
    refused_invalid(
        "[system-config]\noptions = [\"heap-threshold=90\"]\n",
        "system-config.options[0]",
        &[
            "unknown option \"heap-threshold\"",
            "valid: \"critical-memory-abort\"",
        ],
    );
    refused_invalid(
        "[system-config]\noptions = [\"critical-memory-abort=enabled\", \"critical-memory-abort=disabled\"]\n",
        "system-config.options[1]",
        &["already set by options[0]"],
    );
    for value in ["enabled", "disabled", "switchover"] {
        let c = Config::from_toml_str(&format!(
            "[system-config]\noptions = [\"critical-memory-abort={value}\"]\n"
        ))
        .unwrap();
        assert_eq!(c.system.critical_memory_abort().as_str(), value);
    }
}

#[test]
fn system_alarm_settings_are_validated() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "memory-source = \"process\"",
            "memory-limit-mb",
            &["= 0", "required"],
        ),
        ("heap-limit-mb = 0", "heap-limit-mb", &["1..=1048576"]),
        (
            "alarm-iteration-ms = 99",
            "alarm-iteration-ms",
            &["100..=600000"],
        ),
        (
            "alarm-iteration-ms = 600001",
            "alarm-iteration-ms",
            &["100..=600000"],
        ),
        ("alarm-subsamples = 0", "alarm-subsamples", &["1..=60"]),
        ("alarm-subsamples = 61", "alarm-subsamples", &["1..=60"]),
        ("spike-subsamples = 0", "spike-subsamples", &["1..=15"]),
        (
            "alarm-subsamples = 2",
            "spike-subsamples",
            &["= 3", "1..=2", "alarm-subsamples"],
        ),
    ];
    for (line, key, parts) in cases {
        refused_invalid(
            &format!("[system-config]\n{line}\n"),
            &format!("system-config.{key}"),
            parts,
        );
    }
    Config::from_toml_str(
        "[system-config]\nmemory-source = \"process\"\nmemory-limit-mb = 1\nalarm-iteration-ms = 100\n\
         alarm-subsamples = 1\nspike-subsamples = 1\n",
    )
    .unwrap();
}

fn threshold(body: &str) -> String {
    format!("[[system-config.alarm-threshold]]\n{body}\n")
}

#[test]
fn alarm_thresholds_are_validated() {
    let key = |i: usize, f: &str| format!("system-config.alarm-threshold[{i}].{f}");
    refused_invalid(
        &threshold("type = \"cpu\""),
        &key(0, "value"),
        &["= 0", "1..=100"],
    );
    refused_invalid(&threshold("value = 101"), &key(0, "value"), &["1..=100"]);
    refused_invalid(
        &threshold("value = 50\nhealth-penalty = 101"),
        &key(0, "health-penalty"),
        &["0..=100"],
    );
    refused_invalid(
        &threshold("type = \"space\"\nvalue = 50"),
        &key(0, "volume"),
        &["required"],
    );
    refused_invalid(
        &threshold("volume = \"/var\"\nvalue = 50"),
        &key(0, "volume"),
        &["only type \"space\""],
    );
    let dup = threshold("severity = \"critical\"\nvalue = 80")
        + &threshold("severity = \"critical\"\nvalue = 90");
    refused_invalid(
        &dup,
        &key(1, "severity"),
        &["duplicate", "alarm-threshold[0]"],
    );
    let falling = threshold("severity = \"major\"\nvalue = 80")
        + &threshold("severity = \"critical\"\nvalue = 80");
    refused_invalid(
        &falling,
        &key(1, "value"),
        &["critical threshold must be above a major"],
    );
    // Space thresholds of different volumes are separate; types are independent.
    let ok = threshold("type = \"space\"\nvolume = \"/var\"\nseverity = \"critical\"\nvalue = 90")
        + &threshold("type = \"space\"\nvolume = \"/opt\"\nseverity = \"critical\"\nvalue = 80")
        + &threshold("type = \"cpu\"\nseverity = \"critical\"\nvalue = 50")
        + &threshold("type = \"heap\"\nseverity = \"minor\"\nvalue = 100")
        + &threshold("type = \"sessions\"\nseverity = \"major\"\nvalue = 1");
    Config::from_toml_str(&ok).unwrap();
}

#[test]
fn trap_receivers_are_validated() {
    let key = |i: usize, f: &str| format!("system-config.trap-receiver[{i}].{f}");
    refused_invalid(
        "[[system-config.trap-receiver]]\nport = 0\n",
        &key(0, "port"),
        &["1..=65535"],
    );
    refused_invalid(
        "[[system-config.trap-receiver]]\ncommunity = \"\"\n",
        &key(0, "community"),
        &["must not be empty"],
    );
    refused_invalid(
        "[[system-config.trap-receiver]]\n[[system-config.trap-receiver]]\n",
        &key(1, "ip-address"),
        &["127.0.0.1:162", "trap-receiver[0]"],
    );
    let err =
        Config::from_toml_str("[[system-config.trap-receiver]]\nfilter-level = \"warning\"\n")
            .unwrap_err();
    assert!(err.to_string().contains("`critical`"), "{err}");
}

#[test]
fn snmp_agent_and_communities_are_validated() {
    let key = |i: usize, f: &str| format!("system-config.snmp-community[{i}].{f}");
    refused_invalid(
        "[system-config]\nsnmp-agent-address = \"127.0.0.1:1161\"\n",
        "system-config.snmp-agent-address",
        &["no snmp-community", "no default community"],
    );
    refused_invalid(
        "[[system-config.snmp-community]]\n",
        &key(0, "community-name"),
        &["must not be empty"],
    );
    let two = "[[system-config.snmp-community]]\ncommunity-name = \"nms\"\n";
    refused_invalid(
        &format!("{two}{two}"),
        &key(1, "community-name"),
        &["snmp-community[0]"],
    );
    refused_invalid(
        "[[system-config.snmp-community]]\ncommunity-name = \"nms\"\nip-addresses = [\"10.0.0.0/33\"]\n",
        "system-config.snmp-community[0].ip-addresses[0]",
        &["0..=32"],
    );
    let ok = Config::from_toml_str(
        "[system-config]\nsnmp-agent-address = \"127.0.0.1:1161\"\n\
         [[system-config.snmp-community]]\ncommunity-name = \"nms\"\n\
         ip-addresses = [\"10.0.0.0/8\", \"::1\"]\n",
    )
    .unwrap();
    assert_eq!(
        ok.system.snmp_agent_address,
        Some("127.0.0.1:1161".parse().unwrap())
    );
    assert_eq!(ok.system.snmp_communities[0].ip_addresses.len(), 2);
    // The community name is a secret.
    let shown = ok.to_masked_json().to_string();
    assert!(!shown.contains("\"nms\""), "{shown}");
    assert_eq!(Config::default().system.snmp_agent_address, None);
}

#[test]
fn snmp_users_engine_id_and_v3_receivers_are_validated() {
    let key = |i: usize, f: &str| format!("system-config.snmp-user-entry[{i}].{f}");
    let user = |name: &str, auth: &str, privacy: &str| {
        format!(
            "[[system-config.snmp-user-entry]]\nuser-name = \"{name}\"\n\
             auth-password = \"{auth}\"\npriv-password = \"{privacy}\"\n"
        )
    };
    refused_invalid(
        &user("", "authpass1", "privpass1"),
        &key(0, "user-name"),
        &["1 to 32 octets"],
    );
    refused_invalid(
        &user("nms", "short", "privpass1"),
        &key(0, "auth-password"),
        &["5 characters", "RFC 3414"],
    );
    refused_invalid(
        &user("nms", "authpass1", "1234567"),
        &key(0, "priv-password"),
        &["fewer than 8"],
    );
    let nms = user("nms", "authpass1", "privpass1");
    refused_invalid(
        &format!("{nms}{nms}"),
        &key(1, "user-name"),
        &["snmp-user-entry[0]"],
    );
    refused_invalid(
        &format!("{nms}ip-addresses = [\"300.0.0.1\"]\n"),
        &key(0, "ip-addresses[0]"),
        &[],
    );
    // MD5 and DES are refused by the parser, with the valid words.
    for (field, word, valid) in [
        ("auth-protocol", "md5", "`sha`"),
        ("priv-protocol", "des", "`aes128`"),
    ] {
        let err = Config::from_toml_str(&format!("{nms}{field} = \"{word}\"\n")).unwrap_err();
        assert!(err.to_string().contains(valid), "{err}");
    }
    for bad in [
        "0x1234",
        "zz00000000",
        "0x800000000102030405060708091011121314151617181920212223242526272829",
    ] {
        refused_invalid(
            &format!("[system-config]\nsnmp-engine-id = \"{bad}\"\n"),
            "system-config.snmp-engine-id",
            &[],
        );
    }
    // A v3 receiver names a user.
    let receiver =
        |extra: &str| format!("[[system-config.trap-receiver]]\nversion = \"v3\"\n{extra}");
    refused_invalid(
        &format!("{nms}{}", receiver("")),
        "system-config.trap-receiver[0].user-name",
        &["needs a user"],
    );
    refused_invalid(
        &format!("{nms}{}", receiver("user-name = \"other\"\n")),
        "system-config.trap-receiver[0].user-name",
        &["names no snmp-user-entry", "\"nms\""],
    );
    let ok = Config::from_toml_str(&format!(
        "[system-config]\nhostname = \"sbc-a\"\nsnmp-agent-address = \"127.0.0.1:1161\"\n\
         {nms}{}",
        receiver("user-name = \"nms\"\n")
    ))
    .unwrap();
    assert_eq!(ok.system.snmp_users[0].auth_protocol, SnmpAuthProtocol::Sha);
    assert_eq!(ok.system.trap_receivers[0].version, SnmpVersion::V3);
    // Both passwords are secrets, in Debug too.
    let debug = format!("{:?}", ok.system);
    assert!(
        !debug.contains("authpass1") && !debug.contains("privpass1"),
        "{debug}"
    );
    let shown = ok.to_masked_json().to_string();
    assert!(
        !shown.contains("authpass1") && !shown.contains("privpass1"),
        "{shown}"
    );
    // The default engine ID: format 4 (text) under enterprise 3261, stable, from the hostname.
    let id = ok.system.engine_id();
    assert_eq!(id[..5], [0x80, 0x00, 0x0C, 0xBD, 0x04]);
    assert_eq!(&id[5..], b"sbc-a");
    assert_eq!(ok.system.engine_id(), id);
    let mut long = ok.system.clone();
    long.hostname = "x".repeat(40);
    assert_eq!(long.engine_id().len(), 32);
    long.snmp_engine_id = Some("0x80:00:1f:88:80:01:02:03".into());
    assert_eq!(long.engine_id(), [0x80, 0, 0x1f, 0x88, 0x80, 1, 2, 3]);
    // The engine ID is node-local: not pushed; the users are.
    let mut config = ok.clone();
    config.system = long;
    let pushed = config.pushable_toml();
    assert!(!pushed.contains("snmp-engine-id"), "{pushed}");
    assert!(pushed.contains("snmp-user-entry"), "{pushed}");
}

#[test]
fn redundancy_config_is_validated() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("port = 0", "port", &["1..=65535"]),
        (
            "config-sync-port = 9090",
            "config-sync-port",
            &["already used by port"],
        ),
        (
            "sip-sync-port = 1987",
            "sip-sync-port",
            &["already used by config-sync-port"],
        ),
        (
            "advertisement-time = 49",
            "advertisement-time",
            &["50..=60000"],
        ),
        ("percent-drift = 99", "percent-drift", &["100..=65535"]),
        ("initial-time = 4", "initial-time", &["5..=600000"]),
        (
            "becoming-active-time = 600001",
            "becoming-active-time",
            &["5..=600000"],
        ),
        (
            "becoming-standby-time = 3600001",
            "becoming-standby-time",
            &["5..=3600000"],
        ),
        ("health-threshold = 0", "health-threshold", &["1..=100"]),
        ("health-threshold = 101", "health-threshold", &["1..=100"]),
        (
            "emergency-threshold = 75",
            "emergency-threshold",
            &["below health-threshold (75)", "0..=74"],
        ),
        ("witness = \"127.0.0.1:0\"", "witness", &["port 0"]),
        (
            "state = \"enabled\"",
            "shared-key",
            &["required with state = \"enabled\""],
        ),
        (
            "state = \"enabled\"\nshared-key = \"0123456789abcdef\"",
            "peer",
            &["0 primary peers", "exactly one primary and one secondary"],
        ),
    ];
    for (line, key, parts) in cases {
        refused_invalid(
            &format!("[redundancy-config]\n{line}\n"),
            &format!("redundancy-config.{key}"),
            parts,
        );
    }
    let peer = |name: &str, kind: &str, dest: &str| {
        format!("[[redundancy-config.peer]]\nname = \"{name}\"\ntype = \"{kind}\"\ndestinations = [{dest}]\n")
    };
    let key = |i: usize, f: &str| format!("redundancy-config.peer[{i}].{f}");
    refused_invalid(
        &peer("", "primary", "\"127.0.0.1:9090\""),
        &key(0, "name"),
        &["must not be empty"],
    );
    refused_invalid(
        &peer("a", "primary", ""),
        &key(0, "destinations"),
        &["at least one"],
    );
    refused_invalid(
        &peer("a", "primary", "\"127.0.0.1:0\""),
        &key(0, "destinations"),
        &["port 0"],
    );
    refused_invalid(
        &peer("a", "primary", "\"127.0.0.1:1\", \"127.0.0.1:1\""),
        &key(0, "destinations"),
        &["duplicate destination"],
    );
    let two = peer("a", "primary", "\"127.0.0.1:1\"") + &peer("a", "secondary", "\"127.0.0.2:1\"");
    refused_invalid(&two, &key(1, "name"), &["duplicate name"]);
    let both_primary = format!(
        "[redundancy-config]\nstate = \"enabled\"\nshared-key = \"0123456789abcdef\"\n{}{}",
        peer("a", "primary", "\"127.0.0.1:1\""),
        peer("b", "primary", "\"127.0.0.2:1\"")
    );
    refused_invalid(
        &both_primary,
        "redundancy-config.peer",
        &["2 primary peers"],
    );
    refused_invalid(
        &peer("a", "primary", "\"127.0.0.1:1\", \"[::ffff:127.0.0.1]:1\""),
        &key(0, "destinations"),
        &["duplicate destination"],
    );
    // A pair over IPv6, or IPv6 on one path and IPv4 on the other.
    let v6 = peer("a", "primary", "\"[fd00::1]:9090\", \"10.0.0.1:9090\"")
        + &peer(
            "b",
            "secondary",
            "\"[fd00::2]:9090\", \"[::ffff:10.0.0.2]:9090\"",
        );
    let c = Config::from_toml_str(&format!(
        "[redundancy-config]\nstate = \"enabled\"\nshared-key = \"0123456789abcdef\"\n\
         witness = \"[fd00::3]:7000\"\nservice-address = \"2001:db8::10\"\n{v6}"
    ))
    .unwrap();
    assert_eq!(
        c.redundancy.peers[1].destinations[0],
        "[fd00::2]:9090".parse().unwrap()
    );
    assert_eq!(
        c.redundancy.service_address,
        Some("2001:db8::10".parse().unwrap())
    );
    let mixed =
        peer("a", "primary", "\"[fd00::1]:9090\"") + &peer("b", "secondary", "\"10.0.0.2:9090\"");
    refused_invalid(
        &mixed,
        &key(1, "destinations"),
        &[
            "heartbeat path 0 would run from [fd00::1]:9090 (IPv6) to 10.0.0.2:9090 (IPv4)",
            "of one family",
        ],
    );
    let err = Config::from_toml_str(&peer("a", "tertiary", "\"127.0.0.1:1\"")).unwrap_err();
    assert!(err.to_string().contains("`secondary`"), "{err}");
    // Disabled: peers may be incomplete (one node alone keeps its pair settings).
    Config::from_toml_str(&peer("a", "primary", "\"127.0.0.1:1\"")).unwrap();
}

#[test]
fn auto_scaling_profiles_are_validated() {
    let profile = |body: &str| format!("[[auto-scaling-profile]]\nname = \"p\"\n{body}\n");
    let key = |f: &str| format!("auto-scaling-profile[0].{f}");
    refused_invalid(
        "[[auto-scaling-profile]]\n",
        &key("name"),
        &["must not be empty"],
    );
    refused_invalid(
        &(profile("") + "[[auto-scaling-profile]]\nname = \"p\"\n"),
        "auto-scaling-profile[1].name",
        &["duplicate"],
    );
    refused_invalid(
        &profile("scale-up-to = 0"),
        &key("scale-up-to"),
        &["1..=64"],
    );
    refused_invalid(
        &profile("scale-up-on = 101"),
        &key("scale-up-on"),
        &["1..=100"],
    );
    refused_invalid(
        &profile("scale-up-for = 0"),
        &key("scale-up-for"),
        &["1..=1000"],
    );
    refused_invalid(
        &profile("scale-up-within = 3"),
        &key("scale-up-within"),
        &["4..=1000", "scale-up-for (4)"],
    );
    refused_invalid(
        &profile("scale-down-to = 2"),
        &key("scale-down-on"),
        &["(absent)", "required with scale-down-to"],
    );
    let down = |to: u32, on: u32, cycles: u32| {
        profile(&format!(
            "scale-down-to = {to}\nscale-down-on = {on}\nscale-down-for = {cycles}"
        ))
    };
    refused_invalid(
        &down(6, 18, 10),
        &key("scale-down-to"),
        &["below scale-up-to (6)", "1..=5"],
    );
    refused_invalid(&down(0, 18, 10), &key("scale-down-to"), &["1..=5"]);
    refused_invalid(
        &down(2, 70, 10),
        &key("scale-down-on"),
        &["below scale-up-on (70)", "0..=69"],
    );
    refused_invalid(&down(2, 18, 0), &key("scale-down-for"), &["1..=1000"]);
    Config::from_toml_str(&down(5, 69, 1000)).unwrap();
    Config::from_toml_str(&profile("scale-up-within = 1000")).unwrap();
}

#[test]
fn sip_config_heap_and_retry_after_are_validated() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "heap-reject-threshold = 0",
            "heap-reject-threshold",
            &["1..=100"],
        ),
        (
            "heap-reject-threshold = 101",
            "heap-reject-threshold",
            &["1..=100"],
        ),
        (
            "heap-resume-threshold = 90",
            "heap-resume-threshold",
            &["below heap-reject-threshold (90)", "0..=89"],
        ),
        ("retry-after-min = 0", "retry-after-min", &["1..=3600"]),
        (
            "retry-after-max = 4",
            "retry-after-max",
            &["5..=3600", "retry-after-min"],
        ),
        (
            "retry-after-min = 20",
            "retry-after-max",
            &["= 15", "20..=3600"],
        ),
        (
            "auto-scaling-cycle-ms = 99",
            "auto-scaling-cycle-ms",
            &["100..=60000"],
        ),
    ];
    for (line, key, parts) in cases {
        refused_invalid(
            &format!("[sip-config]\n{line}\n"),
            &format!("sip-config.{key}"),
            parts,
        );
    }
    Config::from_toml_str(
        "[sip-config]\nretry-after-min = 10\nretry-after-max = 10\nheap-resume-threshold = 0\n",
    )
    .unwrap();
}

// ---- worker groups: counts, profiles, queues ----

/// Two profiles: `ranged` (2..=6) and `up-only` (1..=4), and `extra` appended to the file.
fn groups(extra: &str) -> String {
    format!(
        "{extra}\n\
         [[auto-scaling-profile]]\nname = \"ranged\"\nscale-up-to = 6\nscale-down-to = 2\n\
         scale-down-on = 10\nscale-down-for = 5\n\
         [[auto-scaling-profile]]\nname = \"up-only\"\nscale-up-to = 4\n"
    )
}

/// The two default interfaces, `access` with `access_profile` when given.
fn interfaces(access_profile: Option<&str>) -> String {
    let profile = access_profile
        .map(|p| format!("auto-scaling-profile = \"{p}\"\n"))
        .unwrap_or_default();
    format!(
        "[[sip-interface]]\nrealm = \"access\"\nport = 5060\n{profile}\
         [[sip-interface]]\nrealm = \"core\"\nport = 5062\n"
    )
}

#[test]
fn worker_group_defaults_are_exactly_as_documented() {
    let c = Config::embedded_default();
    let sip = &c.sip_config;
    assert_eq!((sip.workers, sip.tcp_workers), (2, 1));
    assert_eq!(sip.tcp_auto_scaling_profile, None);
    assert!(sip.prsm);
    assert_eq!(sip.queue_size, 1024);
    assert_eq!(sip.max_queue_delay_ms, 100);
    assert_eq!(sip.routing_cost_us, 0);
    assert!(c
        .sip_interfaces
        .iter()
        .all(|i| i.auto_scaling_profile.is_none()));
    // None is not written, so the default file stays as it was.
    let text = c.to_toml_string();
    assert!(!text.contains("tcp-auto-scaling-profile"), "{text}");
    assert!(!text.contains("auto-scaling-profile = \""), "{text}");
    assert!(text.contains("prsm = true"), "{text}");
    assert!(text.contains("queue-size = 1024"), "{text}");
}

#[test]
fn worker_group_keys_parse_and_round_trip() {
    let text = groups(&format!(
        "[sip-config]\nworkers = 3\ntcp-workers = 4\ntcp-auto-scaling-profile = \"up-only\"\n\
         prsm = false\nqueue-size = 16\nmax-queue-delay-ms = 0\nrouting-cost-us = 1000000\n{}",
        interfaces(Some("ranged"))
    ));
    let c = Config::from_toml_str(&text).unwrap();
    let sip = &c.sip_config;
    assert_eq!((sip.workers, sip.tcp_workers), (3, 4));
    assert_eq!(sip.tcp_auto_scaling_profile.as_deref(), Some("up-only"));
    assert!(!sip.prsm);
    assert_eq!(
        (sip.queue_size, sip.max_queue_delay_ms, sip.routing_cost_us),
        (16, 0, 1_000_000)
    );
    let access = c.interface("access").unwrap();
    assert_eq!(access.auto_scaling_profile.as_deref(), Some("ranged"));
    assert_eq!(c.interface("core").unwrap().auto_scaling_profile, None);
    assert_eq!(c.auto_scaling_profile("ranged").unwrap().scale_up_to, 6);
    assert!(c.auto_scaling_profile("nope").is_none());
    assert_round_trip(&c);
    // The upper bounds of the ranges are accepted.
    Config::from_toml_str(
        "[sip-config]\ntcp-workers = 64\nqueue-size = 65536\nmax-queue-delay-ms = 32000\n",
    )
    .unwrap();
}

#[test]
fn worker_group_ranges_are_validated() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("tcp-workers = 0", "tcp-workers", &["= 0", "1..=64"]),
        ("tcp-workers = 65", "tcp-workers", &["1..=64"]),
        ("workers = 65", "workers", &["1..=64"]),
        ("queue-size = 15", "queue-size", &["= 15", "16..=65536"]),
        ("queue-size = 65537", "queue-size", &["16..=65536"]),
        (
            "max-queue-delay-ms = 32001",
            "max-queue-delay-ms",
            &["0..=32000"],
        ),
        (
            "routing-cost-us = 1000001",
            "routing-cost-us",
            &["0..=1000000"],
        ),
    ];
    for (line, key, parts) in cases {
        refused_invalid(
            &format!("[sip-config]\n{line}\n"),
            &format!("sip-config.{key}"),
            parts,
        );
    }
    let err = Config::from_toml_str("[sip-config]\nprsm = \"yes\"\n").unwrap_err();
    assert!(matches!(err, ConfigError::Parse { .. }), "{err}");
    let err = Config::from_toml_str(&format!(
        "{}[[sip-interface]]\nrealm = \"x\"\nport = 5070\nscaling = \"p\"\n",
        interfaces(None)
    ))
    .unwrap_err();
    assert!(err.to_string().contains("unknown field `scaling`"), "{err}");
}

#[test]
fn profile_attachments_name_existing_profiles() {
    // No profile at all.
    refused_invalid(
        &interfaces(Some("ghost")),
        "sip-interface[0].auto-scaling-profile",
        &[
            "= \"ghost\"",
            "no auto-scaling-profile has this name",
            "none is defined",
        ],
    );
    refused_invalid(
        "[sip-config]\ntcp-auto-scaling-profile = \"ghost\"\n",
        "sip-config.tcp-auto-scaling-profile",
        &["= \"ghost\"", "none is defined"],
    );
    // Some profiles: the message lists them.
    refused_invalid(
        &groups(&interfaces(Some("ghost"))),
        "sip-interface[0].auto-scaling-profile",
        &["valid: \"ranged\", \"up-only\""],
    );
    refused_invalid(
        &groups("[sip-config]\ntcp-auto-scaling-profile = \"Ranged\"\n"),
        "sip-config.tcp-auto-scaling-profile",
        &["= \"Ranged\"", "valid: \"ranged\", \"up-only\""],
    );
    // A TCP-only interface has no UDP group to scale.
    refused_invalid(
        &groups(
            "[[sip-interface]]\nrealm = \"access\"\nport = 5060\ntransports = [\"tcp\"]\n\
             auto-scaling-profile = \"up-only\"\n\
             [[sip-interface]]\nrealm = \"core\"\nport = 5062\n",
        ),
        "sip-interface[0].auto-scaling-profile",
        &["no udp transport", "tcp-auto-scaling-profile"],
    );
}

#[test]
fn initial_worker_counts_lie_within_their_profile() {
    // UDP groups: workers against the interface's profile (ranged: 2..=6).
    let udp = |workers: u32, profile: &str| {
        groups(&format!(
            "[sip-config]\nworkers = {workers}\n{}",
            interfaces(Some(profile))
        ))
    };
    refused_invalid(
        &udp(1, "ranged"),
        "sip-config.workers",
        &[
            "= 1",
            "auto-scaling-profile \"ranged\"",
            "sip-interface[0].auto-scaling-profile",
            "scale-down-to",
            "valid: 2..=6",
        ],
    );
    refused_invalid(
        &udp(7, "ranged"),
        "sip-config.workers",
        &["= 7", "scale-up-to", "valid: 2..=6"],
    );
    refused_invalid(
        &udp(5, "up-only"),
        "sip-config.workers",
        &["no scale-down rule", "valid: 1..=4"],
    );
    for (workers, profile) in [(2, "ranged"), (6, "ranged"), (1, "up-only"), (4, "up-only")] {
        Config::from_toml_str(&udp(workers, profile)).unwrap();
    }
    // Without a profile, any count in 1..=64 is fixed and valid.
    Config::from_toml_str(&groups("[sip-config]\nworkers = 64\n")).unwrap();
    // The TCP group: tcp-workers against tcp-auto-scaling-profile.
    let tcp = |workers: u32, profile: &str| {
        groups(&format!(
            "[sip-config]\ntcp-workers = {workers}\ntcp-auto-scaling-profile = \"{profile}\"\n"
        ))
    };
    refused_invalid(
        &tcp(1, "ranged"),
        "sip-config.tcp-workers",
        &["= 1", "sip-config.tcp-auto-scaling-profile", "valid: 2..=6"],
    );
    refused_invalid(&tcp(5, "up-only"), "sip-config.tcp-workers", &["1..=4"]);
    assert_eq!(
        Config::from_toml_str(&tcp(5, "up-only"))
            .unwrap_err()
            .to_string(),
        "sip-config.tcp-workers = 5: the initial worker count of a group with \
         auto-scaling-profile \"up-only\" (set by sip-config.tcp-auto-scaling-profile) must lie \
         between 1 (it has no scale-down rule) and its scale-up-to \
         (valid: 1..=4, or change sip-config.tcp-auto-scaling-profile)"
    );
    Config::from_toml_str(&tcp(2, "ranged")).unwrap();
    Config::from_toml_str(&tcp(1, "up-only")).unwrap();
    // A UDP profile does not bound tcp-workers, nor the TCP one workers.
    Config::from_toml_str(&groups(&format!(
        "[sip-config]\nworkers = 2\ntcp-workers = 60\n{}",
        interfaces(Some("ranged"))
    )))
    .unwrap();
}

// ---- media anchoring: media-manager and steering-pool ----

/// `[[steering-pool]]` tables in front of `rest`, one per `(realm-id, ip-address, start, end)`.
fn pools(list: &[(&str, &str, u32, u32)], rest: &str) -> String {
    let mut text = String::new();
    for (realm, ip, start, end) in list {
        text.push_str(&format!(
            "[[steering-pool]]\nip-address = \"{ip}\"\nstart-port = {start}\nend-port = {end}\n\
             realm-id = \"{realm}\"\n"
        ));
    }
    text + rest
}

#[test]
fn media_manager_defaults_are_exactly_as_documented() {
    let m = MediaManager::default();
    assert_eq!(m.state, MediaManagerState::Enabled);
    assert!(m.is_enabled());
    assert!(m.latching);
    assert_eq!(m.restricted_latching, RestrictedLatching::None);
    assert_eq!(m.latching_window_ms, 5000);
    assert_eq!(m.rtp_inactivity, 0);
    assert_eq!(Config::embedded_default().media_manager, m);
    assert_eq!(MediaManagerState::default(), MediaManagerState::Enabled);
    assert_eq!(RestrictedLatching::default(), RestrictedLatching::None);
}

#[test]
fn media_keys_parse_and_round_trip() {
    let text = pools(
        &[
            ("access", "192.0.2.10", 30_000, 30_999),
            ("core", "192.0.2.11", 40_001, 40_100),
        ],
        "[media-manager]\nstate = \"disabled\"\nlatching = false\nrestricted-latching = \"sdp\"\n\
         latching-window-ms = 100\nrtp-inactivity = 86400\n",
    );
    let c = Config::from_toml_str(&text).unwrap();
    let m = &c.media_manager;
    assert_eq!(m.state, MediaManagerState::Disabled);
    assert!(!m.is_enabled());
    assert!(!m.latching);
    assert_eq!(m.restricted_latching, RestrictedLatching::Sdp);
    assert_eq!((m.latching_window_ms, m.rtp_inactivity), (100, 86_400));
    let access = c.steering_pool("access").unwrap();
    assert_eq!(access.ip_address, "192.0.2.10".parse::<IpAddr>().unwrap());
    assert_eq!(access.ports(), 30_000..=30_999);
    assert_eq!(access.pairs(), 500);
    let core = c.steering_pool("core").unwrap();
    assert_eq!(core.ip_address, "192.0.2.11".parse::<IpAddr>().unwrap());
    assert_eq!(
        core.pairs(),
        49,
        "40002..=40099 in pairs, 40001 and 40100 alone"
    );
    assert!(c.steering_pool("edge").is_none());
    assert_round_trip(&c);
    // The other bound of each range.
    let c =
        Config::from_toml_str("[media-manager]\nlatching-window-ms = 60000\nrtp-inactivity = 0\n")
            .unwrap();
    assert_eq!(c.media_manager.latching_window_ms, 60_000);
    assert_round_trip(&c);
    // Pools given, none, and none with the default interfaces: each reads back as written.
    let mut c = Config::embedded_default();
    c.steering_pools.clear();
    assert_round_trip(&c);
    let text = c.to_toml_string();
    assert!(text.contains("steering-pool = []"), "{text}");
}

#[test]
fn steering_pool_pairs_count_even_ports_with_their_rtcp() {
    let pool = |start: u16, end: u16| SteeringPool {
        ip_address: "127.0.0.1".parse().unwrap(),
        start_port: start,
        end_port: end,
        realm_id: "access".into(),
    };
    for (start, end, pairs) in [
        (20_000, 20_999, 500),
        (20_001, 20_999, 499),
        (20_000, 20_998, 499),
        (1025, 1028, 1),
        (1024, 1027, 2),
        (20_000, 20_001, 1),
        (20_000, 20_000, 0),
        (20_001, 20_002, 0),
        (65_534, 65_535, 1),
        (65_535, 65_535, 0),
        (30_000, 20_000, 0),
        (0, 65_535, 32_768),
    ] {
        assert_eq!(pool(start, end).pairs(), pairs, "{start}..={end}");
    }
}

#[test]
fn media_manager_is_validated() {
    for (line, key, valid) in [
        (
            "latching-window-ms = 99",
            "latching-window-ms",
            "100..=60000",
        ),
        (
            "latching-window-ms = 60001",
            "latching-window-ms",
            "100..=60000",
        ),
        ("rtp-inactivity = 86401", "rtp-inactivity", "0..=86400"),
    ] {
        refused_invalid(
            &format!("[media-manager]\n{line}\n"),
            &format!("media-manager.{key}"),
            &["out of range", &format!("(valid: {valid})")],
        );
    }
    assert_eq!(
        Config::from_toml_str("[media-manager]\nlatching-window-ms = 99\n")
            .unwrap_err()
            .to_string(),
        "media-manager.latching-window-ms = 99: out of range (valid: 100..=60000)"
    );
}

#[test]
fn media_tables_refuse_unknown_keys_wrong_words_and_missing_keys() {
    for (text, parts) in [
        (
            "[media-manager]\nlatch = true\n".to_owned(),
            &["unknown field `latch`", "`latching`", "`rtp-inactivity`"][..],
        ),
        (
            "[media-manager]\nrestricted-latching = \"always\"\n".to_owned(),
            &["always", "`none`", "`sdp`"],
        ),
        (
            "[media-manager]\nstate = \"on\"\n".to_owned(),
            &["`enabled`", "`disabled`"],
        ),
        (
            pools(&[("access", "127.0.0.1", 20_000, 20_999)], "")
                .replace("realm-id", "network-interface = \"x\"\nrealm-id"),
            &["unknown field `network-interface`", "`realm-id`"],
        ),
        (
            "[[steering-pool]]\nip-address = \"127.0.0.1\"\nstart-port = 20000\nend-port = 20999\n"
                .to_owned(),
            &["missing field `realm-id`"],
        ),
        (
            "[[steering-pool]]\nrealm-id = \"access\"\nstart-port = 20000\nend-port = 20999\n"
                .to_owned(),
            &["missing field `ip-address`"],
        ),
        (
            pools(&[("access", "127.0.0.1", 20_000, 70_000)], ""),
            &["end-port"],
        ),
    ] {
        let err = Config::from_toml_str(&text).unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
        let message = err.to_string();
        for part in parts {
            assert!(message.contains(part), "{message:?} lacks {part:?}");
        }
    }
    assert_eq!(
        "SDP".parse::<RestrictedLatching>().unwrap(),
        RestrictedLatching::Sdp
    );
    assert_eq!(
        "on".parse::<MediaManagerState>().unwrap_err().to_string(),
        r#"state = "on": unknown state (valid: "enabled", "disabled")"#
    );
    assert_eq!(
        "always"
            .parse::<RestrictedLatching>()
            .unwrap_err()
            .to_string(),
        r#"restricted-latching = "always": unknown restricted-latching (valid: "none", "sdp")"#
    );
}

#[test]
fn steering_pool_realms_exist_and_have_one_pool_each() {
    assert_eq!(
        Config::from_toml_str(&pools(&[("edge", "127.0.0.1", 20_000, 20_999)], ""))
            .unwrap_err()
            .to_string(),
        r#"steering-pool[0].realm-id = "edge": no sip-interface has this realm (valid: "access", "core")"#
    );
    refused_invalid(
        &pools(
            &[
                ("access", "127.0.0.1", 20_000, 20_999),
                ("access", "127.0.0.2", 21_000, 21_999),
            ],
            "",
        ),
        "steering-pool[1].realm-id",
        &[
            "= \"access\"",
            "already has an IPv4 steering-pool",
            "steering-pool[0]",
            "at most one steering-pool per address family",
        ],
    );
}

#[test]
fn steering_pool_addresses_and_ports_are_validated() {
    let one = |ip: &str, start: u32, end: u32| pools(&[("access", ip, start, end)], "");
    for ip in ["0.0.0.0", "::"] {
        refused_invalid(
            &one(ip, 20_000, 20_999),
            "steering-pool[0].ip-address",
            &[&format!("= \"{ip}\""), "wildcard", "SDP"],
        );
    }
    assert_eq!(
        Config::from_toml_str(&one("127.0.0.1", 1023, 2000))
            .unwrap_err()
            .to_string(),
        "steering-pool[0].start-port = 1023: out of range: the well-known ports are not for media \
         (valid: 1024..=65535)"
    );
    refused_invalid(
        &one("127.0.0.1", 20_000, 20_000),
        "steering-pool[0].end-port",
        &[
            "= 20000",
            "must be above start-port (20000)",
            "valid: 20001..=65535",
        ],
    );
    refused_invalid(
        &one("127.0.0.1", 20_000, 19_000),
        "steering-pool[0].end-port",
        &["= 19000", "must be above start-port"],
    );
    refused_invalid(
        &one("127.0.0.1", 20_000, 20_002),
        "steering-pool[0].end-port",
        &[
            "ports 20000..=20002 hold 1 RTP/RTCP pair(s)",
            "at least 2",
            "valid: 20003..=65535",
        ],
    );
    // Four ports from an odd start hold one pair only.
    refused_invalid(
        &one("127.0.0.1", 1025, 1028),
        "steering-pool[0].end-port",
        &["hold 1 RTP/RTCP pair", "valid: 1029..=65535"],
    );
    refused_invalid(
        &one("127.0.0.1", 65_533, 65_535),
        "steering-pool[0].end-port",
        &["hold 1", "no end-port fits"],
    );
    // The smallest pools: two pairs.
    let c = Config::from_toml_str(&one("127.0.0.1", 1024, 1027)).unwrap();
    assert_eq!(c.steering_pools[0].pairs(), 2);
    Config::from_toml_str(&one("127.0.0.1", 1025, 1029)).unwrap();
    Config::from_toml_str(&one("127.0.0.1", 65_532, 65_535)).unwrap();
}

#[test]
fn steering_pools_never_overlap_even_on_different_addresses() {
    let text = pools(
        &[
            ("access", "127.0.0.1", 20_000, 20_999),
            ("core", "127.0.0.2", 20_999, 21_999),
        ],
        "",
    );
    assert_eq!(
        Config::from_toml_str(&text).unwrap_err().to_string(),
        "steering-pool[1].start-port = 20999: ports 20999..=21999 overlap steering-pool[0] \
         (realm-id \"access\", 127.0.0.1 ports 20000..=20999): the media relay finds a call by \
         its port alone, so two pools never share a port, even on different addresses \
         (valid: a port range no other steering-pool uses)"
    );
    // One range inside another, and the same range on IPv6.
    refused_invalid(
        &pools(
            &[
                ("access", "127.0.0.1", 20_000, 20_999),
                ("core", "::1", 20_100, 20_199),
            ],
            "",
        ),
        "steering-pool[1].start-port",
        &["overlap steering-pool[0]", "by its port alone"],
    );
    refused_invalid(
        &pools(
            &[
                ("access", "127.0.0.1", 20_500, 20_999),
                ("core", "127.0.0.1", 20_000, 21_999),
            ],
            "",
        ),
        "steering-pool[1].start-port",
        &["overlap steering-pool[0]"],
    );
    // Adjacent ranges are fine.
    Config::from_toml_str(&pools(
        &[
            ("access", "127.0.0.1", 20_000, 20_999),
            ("core", "127.0.0.1", 21_000, 21_999),
        ],
        "",
    ))
    .unwrap();
}

#[test]
fn steering_pools_leave_the_sip_ports_of_their_address_free() {
    // The default access interface is 127.0.0.1:5060.
    assert_eq!(
        Config::from_toml_str(&pools(&[("access", "127.0.0.1", 5000, 5099)], ""))
            .unwrap_err()
            .to_string(),
        "steering-pool[0].start-port = 5000: ports 5000..=5099 on 127.0.0.1 hold the port of \
         sip-interface[0] (127.0.0.1:5060, realm \"access\") \
         (valid: a port range without 5060 (or another ip-address))"
    );
    // Any interface on the address counts, not only the pool's realm's; the ends too.
    refused_invalid(
        &pools(&[("access", "127.0.0.1", 5062, 5099)], ""),
        "steering-pool[0].start-port",
        &["sip-interface[1]", "127.0.0.1:5062"],
    );
    refused_invalid(
        &pools(&[("access", "127.0.0.1", 4000, 5060)], ""),
        "steering-pool[0].start-port",
        &["sip-interface[0]"],
    );
    // An interface on the wildcard holds its port on every address of its family.
    let wildcard = "[[sip-interface]]\nrealm = \"access\"\naddress = \"0.0.0.0\"\nport = 5060\n\
                    [[sip-interface]]\nrealm = \"core\"\nport = 5062\n";
    refused_invalid(
        &pools(&[("access", "192.0.2.10", 5000, 5099)], wildcard),
        "steering-pool[0].start-port",
        &["0.0.0.0:5060"],
    );
    // The IPv4 wildcard holds no IPv6 port (a realm with an interface of each family).
    let dual = format!(
        "{wildcard}[[sip-interface]]\nrealm = \"access\"\naddress = \"::1\"\nport = 7070\n"
    );
    Config::from_toml_str(&pools(
        &[
            ("access", "::1", 5000, 5099),
            ("access", "192.0.2.10", 6000, 6099),
        ],
        &dual,
    ))
    .unwrap();
    // Another address is fine.
    Config::from_toml_str(&pools(&[("access", "127.0.0.2", 5000, 5099)], "")).unwrap();
}

#[test]
fn system_config_metrics_address_is_off_by_default_and_refuses_port_0() {
    assert_eq!(Config::embedded_default().system.metrics_address, None);
    let cfg =
        Config::from_toml_str("[system-config]\nmetrics-address = \"127.0.0.1:9464\"\n").unwrap();
    assert_eq!(
        cfg.system.metrics_address,
        Some("127.0.0.1:9464".parse().unwrap())
    );
    refused_invalid(
        "[system-config]\nmetrics-address = \"127.0.0.1:0\"\n",
        "system-config.metrics-address",
        &["port 0"],
    );
}

#[test]
fn source_ipv6_prefix_length_is_32_to_128() {
    for bad in [0, 31, 129, 255] {
        refused_invalid(
            &format!("[sip-config]\nsource-ipv6-prefix-length = {bad}\n"),
            "sip-config.source-ipv6-prefix-length",
            &["out of range", "(valid: 32..=128)"],
        );
    }
    for good in [32, 48, 64, 128] {
        let c = Config::from_toml_str(&format!(
            "[sip-config]\nsource-ipv6-prefix-length = {good}\n"
        ))
        .expect("valid");
        assert_eq!(c.sip_config.source_ipv6_prefix_length, good);
    }
    assert_eq!(Config::default().sip_config.source_ipv6_prefix_length, 64);
}

// ---- the SIP trace: sip-monitoring, filter-config, capture-agent ----

/// Every key of the three trace elements, with values other than the defaults.
const TRACE: &str = r#"
[[session-agent]]
name = "pbx"
realm = "core"
address = "127.0.0.9"

[[filter-config]]
name = "pbx-calls"
address = "192.0.2.0/24"
user = "alice@example.com"
realm = "access"
session-agent = "pbx"
method = "INVITE"

[[filter-config]]
name = "loopback6"
address = "::1"

[[filter-config]]
name = "everything"

[sip-monitoring]
state = "enabled"
match-any-filter = true
monitoring-filters = ["pbx-calls", "loopback6"]
max-trace-memory = 64
max-captures = 5000
max-messages-per-capture = 500

[capture-agent]
state = "enabled"
address = "[2001:db8::9]:9061"
transport = "tcp"
capture-id = 4294967295
password = "hep-key"
queue-size = 16
rtcp = false
"#;

#[test]
fn trace_defaults_are_exactly_as_documented() {
    let c = Config::embedded_default();
    assert_eq!(
        c.sip_monitoring,
        SipMonitoring {
            state: SipMonitoringState::Disabled,
            match_any_filter: false,
            monitoring_filters: vec![],
            max_trace_memory: 16,
            max_captures: 1000,
            max_messages_per_capture: 200,
        }
    );
    assert_eq!(c.sip_monitoring, SipMonitoring::default());
    assert!(!c.sip_monitoring.is_enabled());
    assert!(!c.sip_monitoring.captures_all());
    assert_eq!(c.sip_monitoring.max_trace_bytes(), 16 * 1024 * 1024);
    assert!(c.filter_configs.is_empty());
    assert_eq!(
        c.capture_agent,
        CaptureAgent {
            state: CaptureAgentState::Disabled,
            address: None,
            transport: CaptureTransport::Udp,
            capture_id: 2001,
            password: String::new(),
            queue_size: 8192,
            rtcp: true,
        }
    );
    assert_eq!(c.capture_agent, CaptureAgent::default());
    assert!(!c.capture_agent.is_enabled());
    assert_eq!(CaptureTransport::default(), CaptureTransport::Udp);
    assert_eq!(SipMonitoringState::default(), SipMonitoringState::Disabled);
    assert_eq!(CaptureAgentState::default(), CaptureAgentState::Disabled);
    // A filter with nothing set.
    let f = FilterConfig::named("all");
    assert_eq!((f.name.as_str(), f.network()), ("all", None));
    assert_eq!(
        f,
        FilterConfig {
            name: "all".into(),
            ..Default::default()
        }
    );
}

#[test]
fn trace_keys_parse_and_round_trip() {
    let c = Config::from_toml_str(TRACE).unwrap();
    let m = &c.sip_monitoring;
    assert!(m.is_enabled());
    assert!(m.match_any_filter);
    assert_eq!(m.monitoring_filters, ["pbx-calls", "loopback6"]);
    assert_eq!(
        (
            m.max_trace_memory,
            m.max_captures,
            m.max_messages_per_capture
        ),
        (64, 5000, 500)
    );
    assert_eq!(m.max_trace_bytes(), 64 << 20);
    let f = c.filter_config("pbx-calls").unwrap();
    assert_eq!(f.address.as_deref(), Some("192.0.2.0/24"));
    assert_eq!(f.network(), Some("192.0.2.0/24".parse().unwrap()));
    assert_eq!(f.user.as_deref(), Some("alice@example.com"));
    assert_eq!(f.realm.as_deref(), Some("access"));
    assert_eq!(f.session_agent.as_deref(), Some("pbx"));
    assert_eq!(f.method.as_deref(), Some("INVITE"));
    // A bare address is that one address: /128 for IPv6, /32 for IPv4.
    let v6 = c.filter_config("loopback6").unwrap();
    assert_eq!(v6.network(), Some("::1/128".parse().unwrap()));
    let mut v4 = v6.clone();
    v4.address = Some("192.0.2.7".into());
    assert_eq!(v4.network(), Some("192.0.2.7/32".parse().unwrap()));
    let everything = c.filter_config("everything").unwrap();
    assert_eq!(*everything, FilterConfig::named("everything"));
    assert!(c.filter_config("nobody").is_none());
    let a = &c.capture_agent;
    assert!(a.is_enabled());
    assert_eq!(a.address, Some("[2001:db8::9]:9061".parse().unwrap()));
    assert_eq!(a.transport, CaptureTransport::Tcp);
    assert_eq!(a.capture_id, u32::MAX);
    assert_eq!(a.password, "hep-key");
    assert_eq!(a.queue_size, 16);
    assert!(!a.rtcp);
    assert_round_trip(&c);
    // Unset keys are not written, and read back unset.
    let text = c.to_toml_string();
    assert_eq!(text.matches("[[filter-config]]").count(), 3, "{text}");
    // `*` alone, and no filter at all.
    let c = Config::from_toml_str(
        "[sip-monitoring]\nstate = \"enabled\"\nmonitoring-filters = [\"*\"]\n",
    )
    .unwrap();
    assert!(c.sip_monitoring.captures_all());
    assert_round_trip(&c);
    let c = Config::from_toml_str("[sip-monitoring]\nstate = \"enabled\"\n").unwrap();
    assert!(c.sip_monitoring.is_enabled() && c.sip_monitoring.monitoring_filters.is_empty());
    assert!(c.to_toml_string().contains("filter-config = []"));
    assert_round_trip(&c);
    // The other bound of each range.
    let c = Config::from_toml_str(
        "[sip-monitoring]\nmax-trace-memory = 1024\nmax-captures = 1\nmax-messages-per-capture = \
         10000\n[capture-agent]\ncapture-id = 0\nqueue-size = 1000000\naddress = \"127.0.0.1:9060\"\n",
    )
    .unwrap();
    assert_eq!(c.sip_monitoring.max_trace_memory, 1024);
    assert_eq!(c.capture_agent.queue_size, 1_000_000);
    assert!(
        !c.capture_agent.is_enabled(),
        "an address alone sends nothing"
    );
    assert_round_trip(&c);
}

#[test]
fn trace_tables_refuse_unknown_keys_wrong_words_and_missing_keys() {
    for (text, parts) in [
        (
            "[sip-monitoring]\nfilters = []\n",
            &["unknown field `filters`", "`monitoring-filters`"][..],
        ),
        // A boolean is not the keyword `state` is spelled with.
        (
            "[sip-monitoring]\nstate = true\n",
            &["state = true", "wanted string"],
        ),
        (
            "[capture-agent]\nstate = \"on\"\n",
            &["`enabled`", "`disabled`"],
        ),
        (
            "[capture-agent]\ntransport = \"sctp\"\n",
            &["sctp", "`udp`", "`tcp`"],
        ),
        ("[capture-agent]\naddress = \"192.0.2.9\"\n", &["address"]),
        (
            "[capture-agent]\ncapture-id = 4294967296\n",
            &["capture-id"],
        ),
        (
            "[[filter-config]]\naddress = \"192.0.2.7\"\n",
            &["missing field `name`"],
        ),
        (
            "[[filter-config]]\nname = \"x\"\nmethods = \"INVITE\"\n",
            &["unknown field `methods`", "`method`"],
        ),
    ] {
        let err = Config::from_toml_str(text).unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
        let message = err.to_string();
        for part in parts {
            assert!(message.contains(part), "{message:?} lacks {part:?}");
        }
    }
    assert_eq!(
        "TCP".parse::<CaptureTransport>().unwrap(),
        CaptureTransport::Tcp
    );
    assert_eq!(
        "sctp".parse::<CaptureTransport>().unwrap_err().to_string(),
        r#"transport = "sctp": unknown transport (valid: "udp", "tcp")"#
    );
}

/// A `[[filter-config]]` named `name` with `body`, in front of `rest`.
fn filter(name: &str, body: &str, rest: &str) -> String {
    format!("[[filter-config]]\nname = \"{name}\"\n{body}\n{rest}")
}

#[test]
fn filter_configs_are_validated() {
    assert_eq!(
        Config::from_toml_str(&filter("", "", ""))
            .unwrap_err()
            .to_string(),
        "filter-config[0].name = \"\": must not be empty (valid: a non-empty name)"
    );
    refused_invalid(
        &filter("*", "", ""),
        "filter-config[0].name",
        &["\"*\"", "every message", "a name other than \"*\""],
    );
    refused_invalid(
        &filter("a", "", &filter("a", "", "")),
        "filter-config[1].name",
        &["duplicate name", "filter-config[0]"],
    );
    for bad in ["192.0.2.0/33", "nonsense", "", "::1/129"] {
        refused_invalid(
            &filter("a", &format!("address = \"{bad}\""), ""),
            "filter-config[0].address",
            &[&format!("{bad:?}"), "an IP address or network"],
        );
    }
    for (bad, why) in [
        ("", "must not be empty"),
        ("al ice", "spaces"),
        ("sip:alice@example.com", "without its scheme"),
        ("TEL:+15551234", "without its scheme"),
        ("alice@", "not an AoR"),
        ("@example.com", "not an AoR"),
        ("a@b@c", "not an AoR"),
    ] {
        refused_invalid(
            &filter("a", &format!("user = \"{bad}\""), ""),
            "filter-config[0].user",
            &[why, "a user part or number", "alice@example.com"],
        );
    }
    assert_eq!(
        Config::from_toml_str(&filter("a", "realm = \"edge\"", ""))
            .unwrap_err()
            .to_string(),
        "filter-config[0].realm = \"edge\": no sip-interface has this realm \
         (valid: \"access\", \"core\")"
    );
    assert_eq!(
        Config::from_toml_str(&filter("a", "session-agent = \"pbx\"", ""))
            .unwrap_err()
            .to_string(),
        "filter-config[0].session-agent = \"pbx\": no session-agent has this name \
         (valid: \"core\")"
    );
    for (bad, why) in [
        ("invite", "case-sensitive"),
        ("Invite", "case-sensitive"),
        ("IN VITE", "not a SIP token"),
        ("INVITE;x", "not a SIP token"),
        ("", "not a SIP token"),
    ] {
        refused_invalid(
            &filter("a", &format!("method = \"{bad}\""), ""),
            "filter-config[0].method",
            &[why, "a SIP method in capitals", "INVITE"],
        );
    }
    // What is valid: every kind of address, user and method.
    for body in [
        "address = \"192.0.2.7\"",
        "address = \"10.0.0.0/8\"",
        "address = \"2001:db8::/32\"",
        "address = \"::1\"",
        "user = \"alice\"",
        "user = \"+15551234\"",
        "user = \"alice@Example.COM\"",
        "realm = \"core\"\nsession-agent = \"core\"",
        "method = \"REGISTER\"",
        "method = \"X-CUSTOM.1\"",
    ] {
        Config::from_toml_str(&filter("a", body, "")).unwrap_or_else(|e| panic!("{body}: {e}"));
    }
}

#[test]
fn sip_monitoring_is_validated() {
    let monitoring = |filters: &str| format!("[sip-monitoring]\nmonitoring-filters = {filters}\n");
    assert_eq!(
        Config::from_toml_str(&monitoring("[\"pbx\"]"))
            .unwrap_err()
            .to_string(),
        "sip-monitoring.monitoring-filters[0] = \"pbx\": no filter-config has this name \
         (valid: \"*\" alone, or the name of a [[filter-config]] (none is configured))"
    );
    let two = filter("a", "", &filter("b", "", ""));
    assert_eq!(
        Config::from_toml_str(&(two.clone() + &monitoring("[\"a\", \"c\"]")))
            .unwrap_err()
            .to_string(),
        "sip-monitoring.monitoring-filters[1] = \"c\": no filter-config has this name \
         (valid: \"a\", \"b\", or \"*\" alone)"
    );
    refused_invalid(
        &(two.clone() + &monitoring("[\"a\", \"*\"]")),
        "sip-monitoring.monitoring-filters[1]",
        &["\"*\" captures every message and stands alone"],
    );
    refused_invalid(
        &monitoring("[\"*\", \"*\"]"),
        "sip-monitoring.monitoring-filters[0]",
        &["stands alone"],
    );
    refused_invalid(
        &(two.clone() + &monitoring("[\"a\", \"b\", \"a\"]")),
        "sip-monitoring.monitoring-filters[2]",
        &[
            "already monitoring-filters[0]",
            "each filter-config at most once",
        ],
    );
    for (line, key, valid) in [
        ("max-trace-memory = 0", "max-trace-memory", "1..=1024"),
        ("max-trace-memory = 1025", "max-trace-memory", "1..=1024"),
        ("max-captures = 0", "max-captures", "1..=100000"),
        ("max-captures = 100001", "max-captures", "1..=100000"),
        (
            "max-messages-per-capture = 0",
            "max-messages-per-capture",
            "1..=10000",
        ),
        (
            "max-messages-per-capture = 10001",
            "max-messages-per-capture",
            "1..=10000",
        ),
    ] {
        refused_invalid(
            &format!("[sip-monitoring]\n{line}\n"),
            &format!("sip-monitoring.{key}"),
            &["out of range", &format!("(valid: {valid})")],
        );
    }
    // Several filters, matched all or any.
    for any in [false, true] {
        let c = Config::from_toml_str(&format!(
            "{two}[sip-monitoring]\nstate = \"enabled\"\nmatch-any-filter = {any}\n\
             monitoring-filters = [\"b\", \"a\"]\n"
        ))
        .unwrap();
        assert_eq!(c.sip_monitoring.match_any_filter, any);
        assert!(!c.sip_monitoring.captures_all());
    }
}

#[test]
fn capture_agent_is_validated() {
    assert_eq!(
        Config::from_toml_str("[capture-agent]\nstate = \"enabled\"\n")
            .unwrap_err()
            .to_string(),
        "capture-agent.address = none: required with state = \"enabled\": where the HEP packets \
         go (valid: the capture server's address:port, e.g. 192.0.2.9:9060 ([2001:db8::9]:9060))"
    );
    for (address, why) in [
        ("127.0.0.1:0", "port 0"),
        ("0.0.0.0:9060", "wildcard"),
        ("[::]:9060", "wildcard"),
    ] {
        refused_invalid(
            &format!("[capture-agent]\naddress = \"{address}\"\n"),
            "capture-agent.address",
            &[why, "address:port"],
        );
    }
    for (line, key, valid) in [
        ("queue-size = 15", "queue-size", "16..=1000000"),
        ("queue-size = 1000001", "queue-size", "16..=1000000"),
    ] {
        refused_invalid(
            &format!("[capture-agent]\n{line}\n"),
            &format!("capture-agent.{key}"),
            &["out of range", &format!("(valid: {valid})")],
        );
    }
    let c = Config::from_toml_str(
        "[capture-agent]\nstate = \"enabled\"\naddress = \"192.0.2.9:9060\"\n",
    )
    .unwrap();
    assert_eq!(
        c.capture_agent.address,
        Some("192.0.2.9:9060".parse().unwrap())
    );
}

#[test]
fn the_hep_password_is_masked_in_debug() {
    let agent = CaptureAgent {
        password: "hep-key".into(),
        ..CaptureAgent::default()
    };
    let debug = format!("{agent:?}");
    assert!(!debug.contains("hep-key"), "{debug}");
    assert!(debug.contains("password: \"********\""), "{debug}");
    assert!(debug.contains("capture_id: 2001"), "{debug}");
    let empty = format!("{:?}", CaptureAgent::default());
    assert!(empty.contains("password: \"\""), "{empty}");
    let config = Config::from_toml_str(TRACE).unwrap();
    let debug = format!("{config:?}");
    assert!(!debug.contains("hep-key"), "{debug}");
}

// ---- routing (issue 28): agents' health and limits, groups, local policy, translations ----

/// Every routing key, with values other than the defaults.
const ROUTING: &str = r##"
[sip-config]
initial-inv-trans-expire = 8

[[session-agent]]
name = "pbx"
realm = "access"
hostname = "pbx.example.com"
state = "disabled"
ping-method = "NOTIFY"
ping-interval = 30
ping-send-mode = "continuous"
ping-response-timeout-ms = 500
ping-misses = 3
ping-in-service-response-codes = [200, 404]
out-service-response-codes = [503]
trans-timeouts = 5
time-to-resume = 60
invite-trans-expire = 2
max-sessions = 100
max-outbound-sessions = 50
max-burst-rate = 10
in-translationid = "in"
out-translationid = "out"

[[session-agent]]
name = "carrier-a"
realm = "core"
address = "127.0.0.2"

[[session-agent]]
name = "carrier-b"
realm = "core"
address = "127.0.0.3"

[[realm-config]]
identifier = "access"
in-translationid = "in"
out-translationid = "out"

[[session-agent-group]]
group-name = "carriers"
state = "disabled"
strategy = "round-robin"
dest = ["carrier-a", "carrier-b"]
sag-recursion = true
stop-sag-recurse = [401, 407, 486]

[[translation-rules]]
id = "strip-plus"
type = "delete"
delete-string = "+"

[[translation-rules]]
id = "add-suffix"
type = "add"
add-string = "#"
add-index = "$"

[[translation-rules]]
id = "at-3"
type = "replace"
add-string = "9"
add-index = 3
delete-string = "0"
delete-index = 3

[[session-translation]]
id = "in"
rules-calling = ["strip-plus"]
rules-called = ["strip-plus", "at-3"]

[[session-translation]]
id = "out"
rules-called = ["add-suffix"]

[[local-policy]]
from-address = ["*"]
to-address = ["1555", "+1666"]
source-realm = ["access"]
description = "to the carriers"

[[local-policy.policy-attribute]]
next-hop = "SAG:carriers"
realm = "core"
cost = 10
start-time = "0800"
end-time = "1800"
days-of-week = "M-F"
terminate-recursion = true

[[local-policy.policy-attribute]]
next-hop = "carrier-a"
cost = 999999999
start-time = "1800"
end-time = "0800"
days-of-week = "U,S"
state = "disabled"

[[local-policy]]
state = "disabled"

[[local-routing-config]]
name = "numbers"
file-name = "/etc/sbc/routes.csv"
source-realm = ["core"]
state = "disabled"
"##;

#[test]
fn routing_defaults_are_exactly_as_documented() {
    let c = Config::from_toml_str(
        "[[session-agent]]\nname = \"a\"\nrealm = \"core\"\n\
         [[session-agent-group]]\ngroup-name = \"g\"\ndest = [\"a\"]\n\
         [[translation-rules]]\nid = \"r\"\n\
         [[session-translation]]\nid = \"t\"\n\
         [[local-policy]]\n[[local-policy.policy-attribute]]\nnext-hop = \"a\"\n\
         [[local-routing-config]]\nname = \"n\"\nfile-name = \"f\"\n",
    )
    .unwrap();
    assert_eq!(c.sip_config.initial_inv_trans_expire, 4);
    let a = &c.session_agents[0];
    assert_eq!(
        *a,
        SessionAgent {
            name: "a".into(),
            realm: "core".into(),
            ..SessionAgent::default()
        }
    );
    assert_eq!(a.hostname, None);
    assert_eq!(a.state, AdminState::Enabled);
    assert!(a.is_enabled());
    assert_eq!(a.ping_method, "OPTIONS");
    assert_eq!(a.ping_interval, 0);
    assert_eq!(a.ping_send_mode, PingSendMode::KeepAlive);
    assert_eq!((a.ping_response_timeout_ms, a.ping_misses), (2000, 1));
    assert!(a.ping_in_service_response_codes.is_empty());
    assert!(a.out_service_response_codes.is_empty());
    assert_eq!(
        (a.trans_timeouts, a.time_to_resume, a.invite_trans_expire),
        (0, 0, 0)
    );
    assert_eq!(
        (a.max_sessions, a.max_outbound_sessions, a.max_burst_rate),
        (0, 0, 0)
    );
    assert_eq!((&a.in_translationid, &a.out_translationid), (&None, &None));
    assert_eq!(a.request_uri_host(), "127.0.0.1");
    assert_eq!(
        c.session_agent_groups,
        [SessionAgentGroup {
            group_name: "g".into(),
            state: AdminState::Enabled,
            strategy: SagStrategy::Hunt,
            dest: vec!["a".into()],
            sag_recursion: false,
            stop_sag_recurse: vec![401, 407],
        }]
    );
    assert_eq!(c.translation_rules, [TranslationRules::named("r")]);
    let r = &c.translation_rules[0];
    assert_eq!(r.kind, TranslationType::None);
    assert_eq!(
        (r.add_index, r.delete_index),
        (TranslationIndex::At(0), TranslationIndex::At(0))
    );
    assert_eq!(
        c.session_translations,
        [SessionTranslation {
            id: "t".into(),
            ..SessionTranslation::default()
        }]
    );
    let p = &c.local_policies[0];
    assert_eq!(
        (&p.from_address, &p.to_address, &p.source_realm),
        (
            &vec!["*".to_owned()],
            &vec!["*".to_owned()],
            &vec!["*".to_owned()]
        )
    );
    assert_eq!((&p.description, p.state), (&None, AdminState::Enabled));
    assert_eq!(p.key(), "* * *");
    assert_eq!(p.policy_attributes, [PolicyAttribute::to("a")]);
    let at = &p.policy_attributes[0];
    assert_eq!((at.realm.as_deref(), at.cost), (None, 0));
    assert_eq!(
        (
            at.start_time.as_str(),
            at.end_time.as_str(),
            at.days_of_week.as_str()
        ),
        ("0000", "2400", "U-S")
    );
    assert_eq!(
        (at.start(), at.end(), at.days()),
        (Some(0), Some(2400), Some(0x7f))
    );
    assert!(!at.terminate_recursion);
    assert_eq!(at.state, AdminState::Enabled);
    assert_eq!(at.target(), NextHop::Agent("a"));
    assert_eq!(
        c.local_routing_configs,
        [LocalRoutingConfig {
            name: "n".into(),
            file_name: "f".into(),
            source_realm: vec!["*".into()],
            state: AdminState::Enabled,
        }]
    );
    assert_round_trip(&c);
}

#[test]
fn routing_keys_parse_and_round_trip() {
    let c = Config::from_toml_str(ROUTING).unwrap();
    assert_eq!(c.sip_config.initial_inv_trans_expire, 8);
    let pbx = c.session_agent("pbx").unwrap();
    assert_eq!(pbx.request_uri_host(), "pbx.example.com");
    assert!(!pbx.is_enabled());
    assert_eq!(pbx.ping_method, "NOTIFY");
    assert_eq!(pbx.ping_send_mode, PingSendMode::Continuous);
    assert_eq!(
        (
            pbx.ping_interval,
            pbx.ping_response_timeout_ms,
            pbx.ping_misses
        ),
        (30, 500, 3)
    );
    assert_eq!(pbx.ping_in_service_response_codes, [200, 404]);
    assert_eq!(pbx.out_service_response_codes, [503]);
    assert_eq!(
        (
            pbx.trans_timeouts,
            pbx.time_to_resume,
            pbx.invite_trans_expire
        ),
        (5, 60, 2)
    );
    assert_eq!(
        (
            pbx.max_sessions,
            pbx.max_outbound_sessions,
            pbx.max_burst_rate
        ),
        (100, 50, 10)
    );
    assert_eq!(pbx.in_translationid.as_deref(), Some("in"));
    assert_eq!(pbx.out_translationid.as_deref(), Some("out"));
    let g = c.session_agent_group("carriers").unwrap();
    assert_eq!(g.strategy, SagStrategy::RoundRobin);
    assert_eq!(g.state, AdminState::Disabled);
    assert!(g.sag_recursion);
    assert_eq!(g.stop_sag_recurse, [401, 407, 486]);
    assert_eq!(
        c.translation_rule("add-suffix").unwrap().add_index,
        TranslationIndex::End
    );
    let at3 = c.translation_rule("at-3").unwrap();
    assert_eq!(at3.kind, TranslationType::Replace);
    assert_eq!(
        (at3.add_index, at3.delete_index),
        (TranslationIndex::At(3), TranslationIndex::At(3))
    );
    assert_eq!(
        c.session_translation("in").unwrap().rules_called,
        ["strip-plus", "at-3"]
    );
    let p = &c.local_policies[0];
    assert_eq!(p.key(), "* 1555,+1666 access");
    assert!(p.applies_to_realm("access") && !p.applies_to_realm("core"));
    let sag = &p.policy_attributes[0];
    assert_eq!(sag.target(), NextHop::Group("carriers"));
    assert_eq!(
        (sag.start(), sag.end(), sag.days()),
        (Some(800), Some(1800), Some(0b011_1110))
    );
    assert!(sag.terminate_recursion);
    let night = &p.policy_attributes[1];
    assert_eq!(
        (night.start(), night.end(), night.days()),
        (Some(1800), Some(800), Some(0b100_0001))
    );
    assert_eq!(night.state, AdminState::Disabled);
    assert_eq!(c.local_policies[1].state, AdminState::Disabled);
    assert_eq!(c.local_routing_configs[0].source_realm, ["core"]);
    assert_round_trip(&c);
    // The TOML shapes: an index as a number or "$", codes as numbers, the nested list.
    let text = c.to_toml_string();
    for part in [
        "add-index = \"$\"",
        "add-index = 3",
        "stop-sag-recurse = [401, 407, 486]",
        "[[local-policy.policy-attribute]]",
        "[[session-agent-group]]",
        "[[local-routing-config]]",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    // The JSON form too.
    let json = serde_json::to_string(&c).unwrap();
    let back: Config = serde_json::from_str(&json).unwrap();
    assert_eq!(back, c);
}

#[test]
fn days_times_next_hops_and_indexes_parse() {
    for (text, bits) in [
        ("U-S", 0x7f),
        ("MTWRF", 0b011_1110),
        ("m-f", 0b011_1110),
        ("F-M", 0b110_0011),
        ("U,S", 0b100_0001),
        ("M-F,U", 0b011_1111),
        ("R", 0b001_0000),
    ] {
        assert_eq!(parse_days_of_week(text), Ok(bits), "{text}");
    }
    for bad in ["", "X", "M-", "M,,F", "H"] {
        assert!(parse_days_of_week(bad).is_err(), "{bad}");
    }
    assert_eq!(parse_hhmm("0000"), Ok(0));
    assert_eq!(parse_hhmm("0830"), Ok(830));
    assert_eq!(parse_hhmm("2400"), Ok(2400));
    for bad in ["800", "08:00", "2401", "2500", "0860", "abcd", "08000"] {
        assert!(parse_hhmm(bad).is_err(), "{bad}");
    }
    assert_eq!(NextHop::parse("SAG:g"), NextHop::Group("g"));
    assert_eq!(NextHop::parse("sag:g"), NextHop::Group("g"));
    assert_eq!(NextHop::parse("pbx"), NextHop::Agent("pbx"));
    assert_eq!(
        "$".parse::<TranslationIndex>().unwrap(),
        TranslationIndex::End
    );
    assert_eq!(
        "7".parse::<TranslationIndex>().unwrap(),
        TranslationIndex::At(7)
    );
    assert_eq!(
        "x".parse::<TranslationIndex>().unwrap_err().to_string(),
        "index = \"x\": not a position (valid: a whole number from 0, or \"$\" for the end)"
    );
    assert_eq!(TranslationIndex::End.to_string(), "$");
    for text in [
        "add-index = -1",
        "add-index = \"end\"",
        "add-index = 4294967296",
    ] {
        let err = Config::from_toml_str(&format!("[[translation-rules]]\nid = \"r\"\n{text}\n"))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("a whole number from 0, or \"$\" for the end"),
            "{text}: {err}"
        );
    }
}

/// `ROUTING` with `from` replaced by `to` (which must be there).
fn routing_with(from: &str, to: &str) -> String {
    assert!(ROUTING.contains(from), "{from}");
    ROUTING.replacen(from, to, 1)
}

#[test]
fn session_agent_routing_keys_are_validated() {
    for (from, to, key, parts) in [
        (
            "hostname = \"pbx.example.com\"",
            "hostname = \"pbx example\"",
            "session-agent[0].hostname",
            &[
                "\"pbx example\"",
                "not a DNS name",
                "a DNS name (pbx.example.com)",
            ][..],
        ),
        (
            "hostname = \"pbx.example.com\"",
            "hostname = \"pbx.example.com\"\ntransport = \"tls\"",
            "session-agent[0].address",
            &["over TLS", "not resolved by DNS"][..],
        ),
        (
            "address = \"127.0.0.2\"",
            "address = \"127.0.0.2\"\nport = 0",
            "session-agent[1].port",
            &["0"][..],
        ),
        (
            "identifier = \"access\"",
            "identifier = \"nowhere\"",
            "realm-config[0].identifier",
            &[
                "\"nowhere\"",
                "no sip-interface has this realm",
                "\"access\"",
            ][..],
        ),
        (
            "in-translationid = \"in\"\nout-translationid = \"out\"\n\n[[session-agent-group]]",
            "in-translationid = \"nope\"\nout-translationid = \"out\"\n\n[[session-agent-group]]",
            "realm-config[0].in-translationid",
            &["\"nope\"", "no session-translation has this id"][..],
        ),
        (
            "ping-method = \"NOTIFY\"",
            "ping-method = \"options\"",
            "session-agent[0].ping-method",
            &["\"options\"", "capitals", "e.g. OPTIONS"],
        ),
        (
            "ping-method = \"NOTIFY\"",
            "ping-method = \"INVITE\"",
            "session-agent[0].ping-method",
            &["\"INVITE\"", "starts no call", "not ACK, BYE, CANCEL"],
        ),
        (
            "ping-interval = 30",
            "ping-interval = 86401",
            "session-agent[0].ping-interval",
            &["86401", "out of range", "0..=86400"],
        ),
        (
            "ping-response-timeout-ms = 500",
            "ping-response-timeout-ms = 99",
            "session-agent[0].ping-response-timeout-ms",
            &["99", "100..=32000"],
        ),
        (
            "ping-misses = 3",
            "ping-misses = 0",
            "session-agent[0].ping-misses",
            &["= 0", "1..=10"],
        ),
        (
            "ping-in-service-response-codes = [200, 404]",
            "ping-in-service-response-codes = [200, 700]",
            "session-agent[0].ping-in-service-response-codes[1]",
            &["700", "not a SIP response code", "100..=699"],
        ),
        (
            "ping-in-service-response-codes = [200, 404]",
            "ping-in-service-response-codes = [200, 200]",
            "session-agent[0].ping-in-service-response-codes[1]",
            &["already [0]", "each code at most once"],
        ),
        (
            "out-service-response-codes = [503]",
            "out-service-response-codes = [99]",
            "session-agent[0].out-service-response-codes[0]",
            &["99", "100..=699"],
        ),
        (
            "out-service-response-codes = [503]",
            "out-service-response-codes = [404]",
            "session-agent[0].out-service-response-codes[0]",
            &["404", "also in ping-in-service-response-codes"],
        ),
        (
            "trans-timeouts = 5",
            "trans-timeouts = 101",
            "session-agent[0].trans-timeouts",
            &["101", "0..=100"],
        ),
        (
            "time-to-resume = 60",
            "time-to-resume = 86401",
            "session-agent[0].time-to-resume",
            &["86401", "0..=86400"],
        ),
        (
            "invite-trans-expire = 2",
            "invite-trans-expire = 33",
            "session-agent[0].invite-trans-expire",
            &["33", "0..=32"],
        ),
        (
            "max-outbound-sessions = 50",
            "max-outbound-sessions = 101",
            "session-agent[0].max-outbound-sessions",
            &[
                "101",
                "above max-sessions (100)",
                "0 (unlimited) or 1..=100",
            ],
        ),
        (
            "in-translationid = \"in\"",
            "in-translationid = \"nope\"",
            "session-agent[0].in-translationid",
            &[
                "\"nope\"",
                "no session-translation has this id",
                "\"in\", \"out\"",
            ],
        ),
        (
            "out-translationid = \"out\"",
            "out-translationid = \"\"",
            "session-agent[0].out-translationid",
            &["\"\"", "no session-translation"],
        ),
        (
            "initial-inv-trans-expire = 8",
            "initial-inv-trans-expire = 0",
            "sip-config.initial-inv-trans-expire",
            &["= 0", "1..=32"],
        ),
    ] {
        refused_invalid(&routing_with(from, to), key, parts);
    }
    // Without max-sessions, max-outbound-sessions alone is fine.
    Config::from_toml_str(&routing_with("max-sessions = 100", "max-sessions = 0")).unwrap();
}

#[test]
fn routing_elements_are_validated() {
    for (from, to, key, parts) in [
        (
            "group-name = \"carriers\"",
            "group-name = \"two words\"",
            "session-agent-group[0].group-name",
            &["\"two words\"", "spaces", "a non-empty name without spaces"][..],
        ),
        (
            "dest = [\"carrier-a\", \"carrier-b\"]",
            "dest = []",
            "session-agent-group[0].dest",
            &[
                "[]",
                "at least one member",
                "\"pbx\", \"carrier-a\", \"carrier-b\"",
            ],
        ),
        (
            "dest = [\"carrier-a\", \"carrier-b\"]",
            "dest = [\"carrier-a\", \"carrier-c\"]",
            "session-agent-group[0].dest[1]",
            &[
                "\"carrier-c\"",
                "no session-agent has this name",
                "\"carrier-b\"",
            ],
        ),
        (
            "dest = [\"carrier-a\", \"carrier-b\"]",
            "dest = [\"carrier-a\", \"carrier-a\"]",
            "session-agent-group[0].dest[1]",
            &["already dest[0]"],
        ),
        (
            "stop-sag-recurse = [401, 407, 486]",
            "stop-sag-recurse = [200]",
            "session-agent-group[0].stop-sag-recurse[0]",
            &["200", "300..=699"],
        ),
        (
            "id = \"add-suffix\"",
            "id = \"strip-plus\"",
            "translation-rules[1].id",
            &["duplicate id, already used by translation-rules[0]"],
        ),
        (
            "add-string = \"#\"",
            "add-string = \"\"",
            "translation-rules[1].add-string",
            &["required with type = \"add\"", "a non-empty add-string"],
        ),
        (
            "delete-string = \"+\"",
            "delete-string = \"\"",
            "translation-rules[0].delete-string",
            &["required with type = \"delete\""],
        ),
        (
            "rules-calling = [\"strip-plus\"]",
            "rules-calling = [\"strip\"]",
            "session-translation[0].rules-calling[0]",
            &[
                "\"strip\"",
                "no translation-rules has this id",
                "\"strip-plus\", \"add-suffix\", \"at-3\"",
            ],
        ),
        (
            "rules-called = [\"strip-plus\", \"at-3\"]",
            "rules-called = [\"at-3\", \"at-3\"]",
            "session-translation[0].rules-called[1]",
            &["already rules-called[0]"],
        ),
        (
            "next-hop = \"SAG:carriers\"",
            "next-hop = \"SAG:nobody\"",
            "local-policy[0].policy-attribute[0].next-hop",
            &[
                "\"SAG:nobody\"",
                "no session-agent-group has this group-name",
                "\"pbx\", \"carrier-a\", \"carrier-b\", \"SAG:carriers\"",
            ],
        ),
        (
            "next-hop = \"carrier-a\"",
            "next-hop = \"carrier-z\"",
            "local-policy[0].policy-attribute[1].next-hop",
            &[
                "\"carrier-z\"",
                "no session-agent has this name",
                "\"SAG:carriers\"",
            ],
        ),
        (
            "next-hop = \"carrier-a\"",
            "next-hop = \"SAG:carriers\"",
            "local-policy[0].policy-attribute[1].next-hop",
            &["already policy-attribute[0] of this local-policy"],
        ),
        (
            "next-hop = \"SAG:carriers\"\nrealm = \"core\"",
            "next-hop = \"SAG:carriers\"\nrealm = \"edge\"",
            "local-policy[0].policy-attribute[0].realm",
            &[
                "\"edge\"",
                "no sip-interface has this realm",
                "\"access\", \"core\"",
            ],
        ),
        (
            "cost = 999999999",
            "cost = 1000000000",
            "local-policy[0].policy-attribute[1].cost",
            &["1000000000", "out of range", "0..=999999999"],
        ),
        (
            "start-time = \"0800\"",
            "start-time = \"8:00\"",
            "local-policy[0].policy-attribute[0].start-time",
            &["\"8:00\"", "not four digits hhmm", "\"0000\"..=\"2400\""],
        ),
        (
            "end-time = \"1800\"",
            "end-time = \"2460\"",
            "local-policy[0].policy-attribute[0].end-time",
            &["\"2460\"", "60 minutes", "(minutes 00..=59)"],
        ),
        (
            "end-time = \"1800\"",
            "end-time = \"0800\"",
            "local-policy[0].policy-attribute[0].end-time",
            &["the same as start-time", "the whole day"],
        ),
        (
            "days-of-week = \"M-F\"",
            "days-of-week = \"Mon-Fri\"",
            "local-policy[0].policy-attribute[0].days-of-week",
            &[
                "\"Mon-Fri\"",
                "\"o\" is not a day letter",
                "U M T W R F S",
                "\"M-F\"",
            ],
        ),
        (
            "to-address = [\"1555\", \"+1666\"]",
            "to-address = [\"1555\", \"\"]",
            "local-policy[0].to-address[1]",
            &[
                "\"\"",
                "must not be empty",
                "\"*\" alone, or user or number prefixes",
            ],
        ),
        (
            "to-address = [\"1555\", \"+1666\"]",
            "to-address = [\"1555\", \"*\"]",
            "local-policy[0].to-address[1]",
            &["\"*\" matches any and stands alone"],
        ),
        (
            "from-address = [\"*\"]",
            "from-address = [\"a b\"]",
            "local-policy[0].from-address[0]",
            &["\"a b\"", "spaces"],
        ),
        (
            "from-address = [\"*\"]",
            "from-address = []",
            "local-policy[0].from-address",
            &["[]", "matches nothing", "[\"*\"] for any"],
        ),
        (
            "source-realm = [\"access\"]",
            "source-realm = [\"edge\"]",
            "local-policy[0].source-realm[0]",
            &[
                "\"edge\"",
                "no sip-interface has this realm",
                "\"*\" alone, or \"access\", \"core\"",
            ],
        ),
        (
            "[[local-policy]]\nstate = \"disabled\"",
            "[[local-policy]]\nto-address = [\"1555\", \"+1666\"]\nsource-realm = [\"access\"]",
            "local-policy[1].from-address",
            &[
                "\"* 1555,+1666 access\"",
                "the same from-address, to-address and source-realm as local-policy[0]",
            ],
        ),
        (
            "name = \"numbers\"",
            "name = \"\"",
            "local-routing-config[0].name",
            &["must not be empty"],
        ),
        (
            "file-name = \"/etc/sbc/routes.csv\"",
            "file-name = \"\"",
            "local-routing-config[0].file-name",
            &["must not be empty", "the path of the route table file"],
        ),
        (
            "source-realm = [\"core\"]",
            "source-realm = [\"edge\"]",
            "local-routing-config[0].source-realm[0]",
            &["\"edge\"", "no sip-interface has this realm"],
        ),
    ] {
        refused_invalid(&routing_with(from, to), key, parts);
    }
    // Wrong words and shapes are the parser's, with the valid words.
    for (text, parts) in [
        (
            "[[session-agent-group]]\ngroup-name = \"g\"\ndest = [\"core\"]\nstrategy = \"random\"\n",
            &["random", "`hunt`", "`round-robin`", "`least-busy`", "`prop-dist`"][..],
        ),
        (
            "[[session-agent-group]]\ngroup-name = \"g\"\n",
            &["missing field `dest`"],
        ),
        (
            "[[local-policy]]\n[[local-policy.policy-attribute]]\ncost = 1\n",
            &["missing field `next-hop`"],
        ),
        (
            "[[local-policy]]\npolicy-attributes = []\n",
            &["unknown field `policy-attributes`", "`policy-attribute`"],
        ),
        (
            "[[translation-rules]]\nid = \"r\"\ntype = \"move\"\n",
            &["move", "`add`", "`delete`", "`replace`", "`none`"],
        ),
        (
            "[[session-agent]]\nname = \"a\"\nrealm = \"core\"\nping-send-mode = \"always\"\n",
            &["always", "`keep-alive`", "`continuous`"],
        ),
        (
            "[[local-routing-config]]\nname = \"n\"\n",
            &["missing field `file-name`"],
        ),
    ] {
        let err = Config::from_toml_str(text).unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
        let message = err.to_string();
        for part in parts {
            assert!(message.contains(part), "{message:?} lacks {part:?}");
        }
    }
    // The file of a local-routing-config is not read, nor its next hops checked.
    Config::from_toml_str(
        "[[local-routing-config]]\nname = \"n\"\nfile-name = \"/nonexistent/routes.csv\"\n",
    )
    .unwrap();
}

/// Three realms (access, core, edge), agents `core-agent` (core, the default route) and `pbx`
/// (access), and `rest`.
fn three_realms(rest: &str) -> String {
    format!(
        "[[sip-interface]]\nrealm = \"access\"\nport = 5060\n\
         [[sip-interface]]\nrealm = \"core\"\nport = 5062\n\
         [[sip-interface]]\nrealm = \"edge\"\nport = 5064\n\
         [[session-agent]]\nname = \"core-agent\"\nrealm = \"core\"\n\
         [[session-agent]]\nname = \"pbx\"\nrealm = \"access\"\n{rest}"
    )
}

#[test]
fn session_router_becomes_local_policies_after_the_explicit_ones() {
    let c = Config::from_toml_str(&three_realms(
        "[session-router]\ndefault-route = \"core-agent\"\n\
         [[session-router.route]]\nfrom-realm = \"edge\"\nsession-agent = \"pbx\"\n\
         [[session-router.route]]\nfrom-realm = \"edge\"\nsession-agent = \"core-agent\"\n\
         [[local-policy]]\nto-address = [\"1555\"]\n\
         [[local-policy.policy-attribute]]\nnext-hop = \"pbx\"\ncost = 5\n",
    ))
    .unwrap();
    let rows = c.effective_local_policies();
    let converted = |realm: &str, agent: &str, from: &str| {
        let mut attribute = PolicyAttribute::to(agent);
        attribute.cost = SESSION_ROUTER_COST;
        LocalPolicy {
            source_realm: vec![realm.to_owned()],
            description: Some(from.to_owned()),
            policy_attributes: vec![attribute],
            ..LocalPolicy::default()
        }
    };
    assert_eq!(
        rows,
        [
            // The explicit policy first.
            c.local_policies[0].clone(),
            // The first route of edge (the second was never used by route_for either).
            converted("edge", "pbx", "session-router.route[0]"),
            // default-route for access; not for core, the agent's own realm (no hairpin), nor
            // for edge, which has a route.
            converted("access", "core-agent", "session-router.default-route"),
        ]
    );
    assert_eq!(SESSION_ROUTER_COST, 999_999_999);
    // The same choice as route_for, realm by realm.
    for realm in ["access", "core", "edge"] {
        let by_rows = rows[1..]
            .iter()
            .find(|p| p.applies_to_realm(realm))
            .map(|p| p.policy_attributes[0].next_hop.as_str());
        assert_eq!(
            by_rows,
            c.route_for(realm).map(|a| a.name.as_str()),
            "{realm}"
        );
    }
    // No session-router: only the explicit ones; the embedded default: default-route "core"
    // (realm core) gives a row for access only.
    let plain = Config::from_toml_str(&three_realms("")).unwrap();
    assert!(plain.effective_local_policies().is_empty());
    let rows = Config::embedded_default().effective_local_policies();
    assert_eq!(
        rows,
        [converted("access", "core", "session-router.default-route")]
    );
}

#[test]
fn an_agent_with_a_dns_hostname_and_no_address_is_resolved_by_dns() {
    let c = Config::from_toml_str(ROUTING).unwrap();
    assert_eq!(
        c.realm_config("access")
            .and_then(|r| r.in_translationid.as_deref()),
        Some("in")
    );
    let pbx = &c.session_agents[0];
    assert_eq!(pbx.dns_name(), Some("pbx.example.com"));
    let carrier = &c.session_agents[1];
    assert_eq!(carrier.dns_name(), None, "an address is configured");
    let mut ip_host = pbx.clone();
    ip_host.hostname = Some("[::1]".into());
    assert_eq!(ip_host.dns_name(), None, "an IP hostname is no DNS name");
    // An SRV agent (port 0) validates; the same with an address does not.
    let srv = Config::from_toml_str(&ROUTING.replacen(
        "hostname = \"pbx.example.com\"",
        "hostname = \"pbx.example.com\"\nport = 0",
        1,
    ))
    .unwrap();
    assert_eq!(srv.session_agents[0].port, 0);
}

#[test]
fn session_timer_profiles_default_as_oracle_and_are_checked() {
    let c = Config::from_toml_str(
        "[[session-timer-profile]]\nname = \"st\"\n\
         [[realm-config]]\nidentifier = \"core\"\nsession-timer-profile = \"st\"\n\
         session-max-life-limit = 7200\n",
    )
    .unwrap();
    let p = c.session_timer_profile("st").unwrap();
    assert_eq!((p.session_expires, p.min_se), (1800, 90));
    assert_eq!(
        (p.request_refresher, p.response_refresher),
        (Refresher::Uac, Refresher::Uas)
    );
    let realm = c.realm_config("core").unwrap();
    assert_eq!(realm.session_timer_profile.as_deref(), Some("st"));
    assert_eq!(realm.session_max_life_limit, 7200);

    refused_invalid(
        "[[realm-config]]\nidentifier = \"core\"\nsession-timer-profile = \"none\"\n",
        "realm-config[0].session-timer-profile",
        &["no session-timer-profile has this name"],
    );
    refused_invalid(
        "[[session-timer-profile]]\nname = \"st\"\nmin-se = 60\n",
        "session-timer-profile[0].min-se",
        &["must be from 90", "90..=1800"],
    );
    refused_invalid(
        "[[session-timer-profile]]\nname = \"st\"\nsession-expires = 600\nmin-se = 900\n",
        "session-timer-profile[0].min-se",
        &["90..=600"],
    );
    refused_invalid(
        "[[session-timer-profile]]\nname = \"st\"\nsession-expires = 30\n",
        "session-timer-profile[0].session-expires",
        &["90..=86400"],
    );
    let err = Config::from_toml_str(
        "[[session-timer-profile]]\nname = \"st\"\nrequest-refresher = \"both\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("line 3") && err.contains("`uac` or `uas`"),
        "{err}"
    );
}

const ACCOUNTING: &str = "[account-config]\nstate = \"enabled\"\nstrategy = \"failover\"\n\
    max-wait-failover = 20\nfile-output = \"enabled\"\nfile-path = \"/srv/cdr\"\n\
    max-file-size = 50000\nmax-files = 10\nfile-rotate-time = 0\ngenerate-start = \"invite\"\n\
    generate-interim = \"none\"\nspool-path = \"/srv/spool\"\nspool-max-size = 64\n\
    spool-full-action = \"refuse-calls\"\n\
    \n[[account-config.account-server]]\nhostname = \"192.0.2.50\"\nsecret = \"radius-s3cret\"\n\
    \n[[account-config.account-server]]\nhostname = \"2001:db8::50\"\nport = 1646\n\
    secret = \"other\"\nstate = \"disabled\"\nrestart-delay = 5\n";

#[test]
fn account_config_defaults_as_oracle_and_round_trips() {
    let a = AccountConfig::default();
    assert!(!a.enabled());
    assert_eq!(a.strategy, AccountStrategy::Hunt);
    assert_eq!(a.max_wait_failover, 100);
    assert_eq!(
        (a.max_file_size, a.max_files, a.file_rotate_time),
        (1_000_000, 5, 60)
    );
    assert_eq!(a.generate_start, GenerateStart::Ok);
    assert_eq!(a.generate_interim, GenerateInterim::ReinviteResponse);
    assert_eq!(a.spool_full_action, SpoolFullAction::KeepCalls);
    let s = AccountServer::default();
    assert_eq!(
        (s.port, s.min_round_trip, s.max_inactivity, s.restart_delay),
        (1813, 250, 60, 30)
    );
    let c = Config::from_toml_str(ACCOUNTING).unwrap();
    assert!(c.account.enabled());
    assert_eq!(c.account.account_servers.len(), 2);
    assert_eq!(
        c.account
            .servers()
            .map(AccountServer::address)
            .collect::<Vec<_>>(),
        vec!["192.0.2.50:1813".parse().unwrap()]
    );
    assert_eq!(
        c.account.account_servers[1].address().to_string(),
        "[2001:db8::50]:1646"
    );
    assert_round_trip(&c);
}

#[test]
fn account_config_is_validated() {
    for (text, key, parts) in [
        (
            "[account-config]\nstate = \"enabled\"\n",
            "account-config.account-server",
            &["records would go nowhere", "file-output"][..],
        ),
        (
            "[account-config]\nspool-path = \"spool\"\n",
            "account-config.spool-path",
            &["absolute"][..],
        ),
        (
            "[account-config]\nmax-file-size = 999\n",
            "account-config.max-file-size",
            &["out of range", "1000..="][..],
        ),
        (
            "[[account-config.account-server]]\nhostname = \"192.0.2.5\"\n",
            "account-config.account-server[0].secret",
            &["1 to 128 bytes"][..],
        ),
        (
            "[[account-config.account-server]]\nhostname = \"0.0.0.0\"\nsecret = \"s\"\n",
            "account-config.account-server[0].hostname",
            &["unicast"][..],
        ),
        (
            "[[account-config.account-server]]\nhostname = \"192.0.2.5\"\nsecret = \"s\"\n\
             [[account-config.account-server]]\nhostname = \"192.0.2.5\"\nsecret = \"t\"\n",
            "account-config.account-server[1].hostname",
            &["already account-server[0]"][..],
        ),
        (
            "[[account-config.account-server]]\nhostname = \"192.0.2.5\"\nsecret = \"s\"\n\
             restart-delay = 0\n",
            "account-config.account-server[0].restart-delay",
            &["out of range"][..],
        ),
        (
            "[[account-config.account-server]]\nhostname = \"192.0.2.5\"\nsecret = \"s\"\n\
             tls-profile = \"radsec\"\n",
            "account-config.account-server[0].tls-profile",
            &["reached over udp", "transport = \"tls\""][..],
        ),
        (
            "[[account-config.account-server]]\nhostname = \"192.0.2.5\"\nsecret = \"s\"\n\
             transport = \"tls\"\n",
            "account-config.account-server[0].tls-profile",
            &["trusted CAs"][..],
        ),
        (
            "[[account-config.account-server]]\nhostname = \"192.0.2.5\"\nsecret = \"s\"\n\
             transport = \"tls\"\ntls-profile = \"nope\"\n",
            "account-config.account-server[0].tls-profile",
            &["no tls-profile has this name"][..],
        ),
        (
            "[[account-config.account-server]]\nhostname = \"192.0.2.5\"\nsecret = \"s\"\n\
             transport = \"tls\"\ntls-profile = \"radsec\"\n\
             [[tls-profile]]\nname = \"radsec\"\n",
            "account-config.account-server[0].tls-profile",
            &["no trusted-ca-certificates"][..],
        ),
        (
            "[[account-config.account-server]]\nhostname = \"192.0.2.5\"\nsecret = \"s\"\n\
             transport = \"tls\"\ntls-profile = \"radsec\"\ntls-server-name = \"a b\"\n\
             [[tls-profile]]\nname = \"radsec\"\ntrusted-ca-certificates = [\"/ca.pem\"]\n",
            "account-config.account-server[0].tls-server-name",
            &["not a DNS name"][..],
        ),
    ] {
        refused_invalid(text, key, parts);
    }
    // A RADIUS/TLS server with a profile that has trusted CAs is accepted.
    Config::from_toml_str(
        "[[account-config.account-server]]\nhostname = \"192.0.2.5\"\nport = 2083\n\
         secret = \"radsec\"\ntransport = \"tls\"\ntls-profile = \"radsec\"\n\
         tls-server-name = \"radius.example.com\"\n\
         [[tls-profile]]\nname = \"radsec\"\ntrusted-ca-certificates = [\"/ca.pem\"]\n",
    )
    .expect("a RADIUS/TLS server");
    let long = "x".repeat(129);
    let e = Config::from_toml_str(&format!(
        "[[account-config.account-server]]\nhostname = \"192.0.2.5\"\nsecret = \"{long}\"\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(!e.contains(&long), "the secret is not echoed: {e}");
}

#[test]
fn the_radius_secret_is_masked_and_the_spool_stays_on_its_node() {
    let c = Config::from_toml_str(ACCOUNTING).unwrap();
    let v = c.to_masked_json();
    assert_eq!(v["account-config"]["account-server"][0]["secret"], MASK);
    assert!(!v.to_string().contains("radius-s3cret"), "{v}");
    assert!(!format!("{:?}", c.account).contains("radius-s3cret"));
    let pushed = c.pushable_toml();
    assert!(
        pushed.contains("[account-config]") && !pushed.contains("/srv/spool"),
        "{pushed}"
    );
    let mut standby = Config::embedded_default();
    standby.account.spool_path = "/var/spool/b".into();
    let merged = standby.with_push(&pushed).expect("applies");
    assert_eq!(merged.account.spool_path, "/var/spool/b");
    assert_eq!(merged.account.account_servers, c.account.account_servers);
    assert_eq!(merged.account.strategy, AccountStrategy::Failover);
}
