//! SNMPv3 (USM, authPriv with SHA and AES-128) with net-snmp's own tools: the agent walked by
//! `snmpwalk -v3`, and v3 traps received by `snmptrapd` that knows our user under our engine
//! ID.
//!
//! Asserts:
//! - `v3_walk_and_refusals`: a node whose agent has one `snmp-user-entry` (`nms`, allowed
//!   from 127.0.0.0/8) and no community: `snmpwalk -v3 -l authPriv -u nms -a SHA -A ... -x AES
//!   -X ... SBC-PAIR-MIB::sbcPairStatus` prints our objects by name, health and redundancy
//!   agreeing with `show health` (100) and `show redundancy` (standalone); `snmpget` of
//!   `snmpEngineID.0` gives the engine ID derived from the hostname (RFC 3411 format 4 under
//!   enterprise 3261) and `snmpEngineBoots.0` 1 (the node's first start); a wrong auth
//!   password gets no data (net-snmp prints its authentication failure) and
//!   `usmStatsWrongDigests.0` counts it; an unknown user is refused ("Unknown user name") and
//!   `usmStatsUnknownUserNames.0` counts it; a v2c walk gets nothing (no community);
//!   a second user added with the ACLI and `activate-config` walks at once; `show
//!   running-config` masks every password.
//! - `v3_trap_reaches_snmptrapd`: a node with a v3 `trap-receiver` for user `nms` and a
//!   minor memory threshold at 1 % (host memory: raised at the first 1 s iteration); the
//!   `sbcAlarmTrap` is printed by snmptrapd configured with `createUser -e 0x<engine ID> nms
//!   SHA ... AES ...` and `authUser log nms` only (no community: a v2c trap would not print).

use std::time::{Duration, Instant};

use sbc_e2e::acli::acli;
use sbc_e2e::snmp::{snmp_tool, snmp_v3, Trapd};
use sbc_e2e::{ports, SbcConfig, SbcNode};

const USER: &str = "nms";
const AUTH: &str = "auth-pass-v3";
const PRIV: &str = "priv-pass-v3";
const CREDS: (&str, &str, &str) = (USER, AUTH, PRIV);

/// The `[[system-config.snmp-user-entry]]` of `nms`.
fn user_entry() -> String {
    format!(
        "[[system-config.snmp-user-entry]]\n\
         user-name = \"{USER}\"\n\
         auth-protocol = \"sha\"\n\
         auth-password = \"{AUTH}\"\n\
         priv-protocol = \"aes128\"\n\
         priv-password = \"{PRIV}\"\n\
         ip-addresses = [\"127.0.0.0/8\"]\n"
    )
}

/// The default engine ID of `hostname`, in hex: `80 00 0C BD 04` then the name.
fn engine_id(hostname: &str) -> String {
    let mut id = vec![0x80u8, 0x00, 0x0C, 0xBD, 0x04];
    id.extend(hostname.as_bytes());
    id.iter().map(|b| format!("{b:02x}")).collect()
}

#[track_caller]
fn ok(result: (bool, String, String)) -> String {
    let (success, out, complaints) = result;
    assert!(
        success && complaints.is_empty(),
        "failed: {complaints}\n{out}"
    );
    out
}

/// The value after `= TYPE: ` on the line of `name`.
fn value<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(" = "))
        .map(|v| v.split_once(": ").map_or(v, |(_, v)| v))
        .unwrap_or_else(|| panic!("{name} missing from:\n{out}"))
}

/// `snmpget -Oqv` of a numeric OID as `nms`: the bare value.
fn get(agent: &str, oid: &str) -> String {
    ok(snmp_v3("snmpget", agent, CREDS, &["-Oqv", oid]))
}

#[test]
fn v3_walk_and_refusals() {
    let hostname = "snmp-v3";
    let config = SbcConfig::new();
    let port = ports::free_port();
    let agent = format!("127.0.0.1:{port}");
    let node = SbcNode::start(&format!(
        "[system-config]\n\
         hostname = \"{hostname}\"\n\
         snmp-agent-address = \"{agent}\"\n\
         \n{}\n{}",
        user_entry(),
        config.to_toml()
    ));

    let t0 = Instant::now();
    let walk = ok(snmp_v3(
        "snmpwalk",
        &agent,
        CREDS,
        &["SBC-PAIR-MIB::sbcPairStatus"],
    ));
    eprintln!("snmpwalk -v3 took {:?}:\n{walk}", t0.elapsed());
    let health = acli(&node.mgmt_socket(), &["show health"]);
    health.assert_ok();
    assert!(
        health.stdout.contains("health-score             100"),
        "{}",
        health.describe()
    );
    assert_eq!(value(&walk, "SBC-PAIR-MIB::sbcStatusHealthScore.0"), "100");
    let redundancy = acli(&node.mgmt_socket(), &["show redundancy"]);
    assert!(
        redundancy.stdout.contains("runs alone"),
        "{}",
        redundancy.describe()
    );
    assert_eq!(
        value(&walk, "SBC-PAIR-MIB::sbcStatusRedundancyState.0"),
        "standalone(8)"
    );
    assert_eq!(value(&walk, "SBC-PAIR-MIB::sbcStatusCallsAttempted.0"), "0");

    // snmpEngineID.0 (hex string) and snmpEngineBoots.0.
    let id = get(&agent, "1.3.6.1.6.3.10.2.1.1.0");
    let printed: String = id
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect::<String>()
        .to_lowercase();
    assert_eq!(printed, engine_id(hostname), "snmpEngineID.0 printed {id}");
    assert_eq!(get(&agent, "1.3.6.1.6.3.10.2.1.2.0"), "1");

    // A wrong auth password: no data, net-snmp's authentication failure, counted.
    let (success, out, complaints) = snmp_v3(
        "snmpwalk",
        &agent,
        (USER, "wrong-pass-v3", PRIV),
        &["SBC-PAIR-MIB::sbcPairStatus"],
    );
    eprintln!("wrong password: {complaints}");
    assert!(!success, "a wrong password got data:\n{out}");
    assert!(!out.contains("sbcStatusHealthScore"), "{out}");
    assert!(
        complaints.contains("Authentication failure"),
        "net-snmp said: {complaints}"
    );
    let wrong_digests: u64 = get(&agent, "1.3.6.1.6.3.15.1.1.5.0")
        .parse()
        .expect("usmStatsWrongDigests.0");
    assert!(
        wrong_digests >= 1,
        "usmStatsWrongDigests.0 = {wrong_digests}"
    );

    // An unknown user.
    let (success, out, complaints) = snmp_v3(
        "snmpwalk",
        &agent,
        ("intruder", AUTH, PRIV),
        &["SBC-PAIR-MIB::sbcPairStatus"],
    );
    eprintln!("unknown user: {complaints}");
    assert!(!success, "an unknown user got data:\n{out}");
    assert!(
        complaints.contains("Unknown user name"),
        "net-snmp said: {complaints}"
    );
    let unknown: u64 = get(&agent, "1.3.6.1.6.3.15.1.1.3.0")
        .parse()
        .expect("usmStatsUnknownUserNames.0");
    assert!(unknown >= 1, "usmStatsUnknownUserNames.0 = {unknown}");

    // No community: v2c gets nothing.
    let (success, out, _) = snmp_tool(
        "snmpwalk",
        &[
            "-v2c",
            "-c",
            "public",
            "-t",
            "1",
            "-r",
            "0",
            &agent,
            "SBC-PAIR-MIB::sbcPairStatus",
        ],
    );
    assert!(!success && !out.contains("sbcStatusHealthScore"), "{out}");

    // A user added with the ACLI and activated is served at once (its keys computed then).
    let out = acli(
        &node.mgmt_socket(),
        &[
            "configure terminal",
            "system",
            "system-config",
            "snmp-user-entry",
            "user-name ops",
            "auth-password ops-auth-pass",
            "priv-password ops-priv-pass",
            "done",
            "exit",
            "exit",
            "exit",
            "exit",
            "save-config",
            "activate-config",
        ],
    );
    out.assert_ok();
    let walk = ok(snmp_v3(
        "snmpwalk",
        &agent,
        ("ops", "ops-auth-pass", "ops-priv-pass"),
        &["SBC-PAIR-MIB::sbcPairStatus"],
    ));
    assert_eq!(value(&walk, "SBC-PAIR-MIB::sbcStatusHealthScore.0"), "100");

    let running = acli(&node.mgmt_socket(), &["show running-config"]);
    running.assert_ok();
    assert!(
        !running.stdout.contains(AUTH)
            && !running.stdout.contains(PRIV)
            && !running.stdout.contains("ops-auth-pass"),
        "{}",
        running.describe()
    );
    assert!(
        running.stdout.contains("auth-password") && running.stdout.contains("********"),
        "{}",
        running.describe()
    );
}

#[test]
fn v3_trap_reaches_snmptrapd() {
    let hostname = "snmp-v3-traps";
    let dir = sbc_e2e::TestDir::for_current_test();
    let trapd = Trapd::start_v3(&dir, &engine_id(hostname), USER, AUTH, PRIV);
    let config = SbcConfig::new();
    let node = SbcNode::start(&format!(
        "[system-config]\n\
         hostname = \"{hostname}\"\n\
         alarm-iteration-ms = 1000\n\
         alarm-subsamples = 2\n\
         spike-subsamples = 1\n\
         \n\
         [[system-config.alarm-threshold]]\n\
         type = \"memory\"\n\
         severity = \"minor\"\n\
         value = 1\n\
         \n\
         [[system-config.trap-receiver]]\n\
         ip-address = \"127.0.0.1\"\n\
         port = {}\n\
         version = \"v3\"\n\
         user-name = \"{USER}\"\n\
         \n{}\n{}",
        trapd.port(),
        user_entry(),
        config.to_toml()
    ));
    let trap = trapd.wait_trap("SBC-PAIR-MIB::sbcAlarmTrap", 0, Duration::from_secs(15));
    assert_eq!(
        trap.get("SBC-PAIR-MIB::sbcNodeName.0"),
        Some(&*format!("STRING: {hostname}")),
        "{}",
        trap.line
    );
    assert_eq!(
        trap.get("SBC-PAIR-MIB::sbcAlarmType.0"),
        Some("INTEGER: memoryUtilization(1)"),
        "{}",
        trap.line
    );
    drop(node);
}
