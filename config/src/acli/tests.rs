#![allow(clippy::unwrap_used, reason = "tests may panic")]

use super::*;
use crate::model::{AlarmThreshold, AlarmType, CriticalMemoryAbort, PeerType, Severity};

/// A node's operational grammar for these tests: the words of `sbc`'s table
/// (`sbc::control::oper::OPERATIONS`, whose own tests parse every line), with help of their
/// own; the interpreter only lists, resolves and completes them.
static NODE: Operations = Operations {
    commands: &[
        OperSpec {
            word: "display-alarms",
            help: "test: list alarms",
            args: &[],
            late: false,
        },
        OperSpec {
            word: "clear-alarm",
            help: "test: clear an alarm",
            args: &[&[("<id>", "an id")], &[("<task>", "a task")]],
            late: false,
        },
        OperSpec {
            word: "clear-deny",
            help: "test: lift a deny",
            args: &[&[("<address>", "an address")]],
            late: false,
        },
        OperSpec {
            word: "notify",
            help: "test: notify berpd force",
            args: &[&[("berpd", "berpd")], &[("force", "force")]],
            late: false,
        },
        OperSpec {
            word: "reboot",
            help: "test: reboot",
            args: &[],
            late: false,
        },
        OperSpec {
            word: "lab",
            help: "test: lab ballast <MB>",
            args: &[&[("ballast", "ballast")], &[("<MB>", "size")]],
            late: true,
        },
    ],
    show_topics: &[
        ("health", "test"),
        ("redundancy", "test"),
        ("memory", "test"),
        ("alarms", "test"),
        ("sip-stats", "test"),
        ("workers", "test"),
        ("dialogs", "test"),
        ("media", "anchored media sessions (test)"),
        ("access-control", "test"),
        ("tls", "test"),
        ("sip-trace", "test"),
    ],
    show_topics_with_args: &["sip-trace"],
};

/// The line handed to the node for `command args…`.
fn oper(command: &'static str, args: &[&str]) -> Reply {
    Reply::Operational(OperLine {
        command,
        args: args.iter().map(|a| (*a).to_owned()).collect(),
    })
}

/// A session and the editing config it works on, as a node holds them.
struct Shell {
    session: Session,
    config: Config,
}

impl Shell {
    fn new() -> Self {
        Self {
            session: Session::new(&NODE),
            config: Config::embedded_default(),
        }
    }

    fn run(&mut self, line: &str) -> Reply {
        self.session.execute(line, &mut self.config)
    }

    /// Runs a line that must succeed with text; returns the text.
    fn ok(&mut self, line: &str) -> String {
        match self.run(line) {
            Reply::Text(text) => text,
            other => panic!("{line:?} gave {other:?}"),
        }
    }

    /// Runs lines that must all succeed with text.
    fn script(&mut self, lines: &[&str]) {
        for line in lines {
            self.ok(line);
        }
    }

    /// Runs a line that must be refused without touching the editing config; returns the
    /// message.
    fn err(&mut self, line: &str) -> String {
        let before = self.config.clone();
        match self.run(line) {
            Reply::Error(message) => {
                assert_eq!(self.config, before, "{line:?} changed the config");
                message
            }
            other => panic!("{line:?} gave {other:?}, expected an error"),
        }
    }

    fn prompt(&self) -> String {
        self.session.prompt(&self.config.system.hostname)
    }
}

fn contains_all(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
}

// ---- the seed's example ----

#[test]
fn seed_example_sets_option_and_critical_memory_threshold() {
    let mut sh = Shell::new();
    sh.script(&[
        "configure terminal",
        "system",
        "system-config",
        "options +critical-memory-abort=switchover",
        "alarm-threshold",
        "type memory",
        "severity critical",
        "value 80",
    ]);
    // Nothing is committed before done.
    assert_eq!(sh.config, Config::embedded_default());
    let shown = sh.ok("done");
    contains_all(
        &shown,
        &["alarm-threshold\n", "type", "memory", "critical", "80"],
    );
    sh.script(&["done", "exit", "exit", "exit", "exit"]);
    assert_eq!(sh.prompt(), "sbc#");
    assert_eq!(sh.run("exit"), Reply::Exit);

    let system = &sh.config.system;
    assert_eq!(system.options, vec!["critical-memory-abort=switchover"]);
    assert_eq!(
        system.critical_memory_abort(),
        CriticalMemoryAbort::Switchover
    );
    assert_eq!(
        system.alarm_thresholds,
        vec![AlarmThreshold {
            kind: AlarmType::Memory,
            volume: String::new(),
            severity: Severity::Critical,
            value: 80,
            health_penalty: 0,
        }]
    );
    // The result round-trips through the file.
    let text = sh.config.to_toml_string();
    assert_eq!(Config::from_toml_str(&text).unwrap(), sh.config);
}

#[test]
fn oracle_order_done_exit_done_keeps_the_change_too() {
    let mut sh = Shell::new();
    sh.script(&[
        "configure terminal",
        "system",
        "system-config",
        "alarm-threshold",
        "type memory",
        "severity critical",
        "value 80",
        "done",
        "exit",
        "done",
        "exit",
    ]);
    assert_eq!(sh.config.system.alarm_thresholds.len(), 1);
    assert!(!sh.session.has_pending_changes());
}

#[test]
fn prompts_at_each_level() {
    let mut sh = Shell::new();
    let steps = [
        ("configure terminal", "sbc(configure)#"),
        ("system", "sbc(system)#"),
        ("system-config", "sbc(system-config)#"),
        ("alarm-threshold", "sbc(alarm-threshold)#"),
        ("exit", "sbc(system-config)#"),
        ("trap-receiver", "sbc(trap-receiver)#"),
        ("exit", "sbc(system-config)#"),
        ("exit", "sbc(system)#"),
        ("capture-agent", "sbc(capture-agent)#"),
        ("exit", "sbc(system)#"),
        ("exit", "sbc(configure)#"),
        ("session-router", "sbc(session-router)#"),
        ("sip-config", "sbc(sip-config)#"),
        ("exit", "sbc(session-router)#"),
        ("session-router", "sbc(session-router-config)#"),
        ("exit", "sbc(session-router)#"),
        ("session-agent", "sbc(session-agent)#"),
        ("exit", "sbc(session-router)#"),
        ("sip-interface", "sbc(sip-interface)#"),
        ("exit", "sbc(session-router)#"),
        ("filter-config", "sbc(filter-config)#"),
        ("exit", "sbc(session-router)#"),
        ("sip-monitoring", "sbc(sip-monitoring)#"),
        ("exit", "sbc(session-router)#"),
        ("exit", "sbc(configure)#"),
        ("redundancy", "sbc(redundancy)#"),
        ("redundancy-config", "sbc(redundancy-config)#"),
        ("peer", "sbc(peer)#"),
        ("exit", "sbc(redundancy-config)#"),
        ("exit", "sbc(redundancy)#"),
        ("exit", "sbc(configure)#"),
        ("sip-interface", "sbc(sip-interface)#"),
        ("exit", "sbc(configure)#"),
        ("auto-scaling-profile", "sbc(auto-scaling-profile)#"),
        ("exit", "sbc(configure)#"),
        ("media-manager", "sbc(media-manager)#"),
        ("exit", "sbc(configure)#"),
        ("steering-pool", "sbc(steering-pool)#"),
        ("exit", "sbc(configure)#"),
        ("exit", "sbc#"),
    ];
    assert_eq!(sh.prompt(), "sbc#");
    for (line, prompt) in steps {
        sh.ok(line);
        assert_eq!(sh.prompt(), prompt, "after {line:?}");
    }
    assert_eq!(sh.session.prompt("SBC1"), "SBC1#");
}

#[test]
fn keywords_are_case_insensitive_and_abbreviable() {
    let mut sh = Shell::new();
    sh.script(&[
        "CONF T",
        "Sys",
        "system-c",
        "alarm-t",
        "TYPE Heap",
        "sev MAJOR",
        "val 70",
        "done",
    ]);
    let t = &sh.config.system.alarm_thresholds[0];
    assert_eq!(
        (t.kind, t.severity, t.value),
        (AlarmType::Heap, Severity::Major, 70)
    );
    // An ambiguous prefix lists what it could be.
    sh.ok("exit");
    let message = sh.err("s");
    contains_all(
        &message,
        &["ambiguous command \"s\"", "show", "spike-subsamples"],
    );
}

// ---- options ----

fn options_shell() -> Shell {
    let mut sh = Shell::new();
    sh.script(&["configure terminal", "system", "system-config"]);
    sh
}

fn working_options(sh: &Shell) -> Vec<String> {
    match &sh.session.current_edit().unwrap().working {
        Element::SystemConfig(system) => system.options.clone(),
        other => panic!("not system-config: {other:?}"),
    }
}

#[test]
fn options_plus_adds_or_replaces_one() {
    let mut sh = options_shell();
    sh.ok("options +critical-memory-abort=enabled");
    assert_eq!(working_options(&sh), vec!["critical-memory-abort=enabled"]);
    sh.ok("options +Critical-Memory-Abort=switchover");
    assert_eq!(
        working_options(&sh),
        vec!["critical-memory-abort=switchover"]
    );
    sh.ok("done");
    assert_eq!(
        sh.config.system.critical_memory_abort(),
        CriticalMemoryAbort::Switchover
    );
}

#[test]
fn options_minus_removes_one() {
    let mut sh = options_shell();
    sh.script(&["options +critical-memory-abort=enabled", "done"]);
    sh.ok("options -critical-memory-abort");
    assert!(working_options(&sh).is_empty());
    sh.ok("done");
    assert!(sh.config.system.options.is_empty());
    assert_eq!(
        sh.config.system.critical_memory_abort(),
        CriticalMemoryAbort::Disabled
    );
    // Removing what is not there names it and the current list.
    let message = sh.err("options -critical-memory-abort");
    contains_all(
        &message,
        &[
            "system-config.options",
            "\"-critical-memory-abort\"",
            "not in the list (now: empty)",
        ],
    );
}

#[test]
fn bare_options_replace_the_whole_list() {
    let mut sh = options_shell();
    sh.script(&["options +critical-memory-abort=enabled", "done"]);
    sh.ok("options critical-memory-abort=disabled");
    assert_eq!(working_options(&sh), vec!["critical-memory-abort=disabled"]);
    sh.ok("options \"\"");
    assert!(working_options(&sh).is_empty());
    let message = sh.err("options +critical-memory-abort=enabled critical-memory-abort=disabled");
    contains_all(&message, &["cannot be mixed"]);
}

#[test]
fn bad_options_are_refused_at_once_naming_the_valid_ones() {
    let mut sh = options_shell();
    let message = sh.err("options +critical-memory-abort=maybe");
    contains_all(
        &message,
        &[
            "system-config.options[0]",
            "\"critical-memory-abort=maybe\"",
            "critical-memory-abort=enabled",
            "critical-memory-abort=switchover",
        ],
    );
    let message = sh.err("options +memory-utilization-threshold=90");
    contains_all(
        &message,
        &[
            "unknown option \"memory-utilization-threshold\"",
            "valid: \"critical-memory-abort\"",
        ],
    );
    // Refused means the working copy is unchanged too.
    assert!(working_options(&sh).is_empty());
    assert!(!sh.session.has_pending_changes());
}

// ---- values ----

#[test]
fn bad_values_name_key_value_and_valid_values() {
    let mut sh = options_shell();
    sh.ok("alarm-threshold");
    let message = sh.err("type memroy");
    assert_eq!(
        message,
        "system-config.alarm-threshold[0].type = \"memroy\": not one of \"memory\", \"heap\", \
         \"cpu\", \"sessions\", \"space\" (valid: memory | heap | cpu | sessions | space)"
    );
    let message = sh.err("value 150");
    assert_eq!(
        message,
        "system-config.alarm-threshold[0].value = 150: out of range (valid: 1..=100)"
    );
    let message = sh.err("value 300");
    contains_all(&message, &["value = 300", "1..=100"]);
    let message = sh.err("value eighty");
    contains_all(
        &message,
        &["value = \"eighty\"", "not a whole number", "1..=100"],
    );
    let message = sh.err("value");
    contains_all(&message, &["missing value", "1..=100"]);
    let message = sh.err("severity critical major");
    contains_all(&message, &["one value expected"]);
    sh.ok("exit");
    let message = sh.err("memory-source disk");
    contains_all(
        &message,
        &["memory-source = \"disk\"", "host | cgroup | process"],
    );
    let message = sh.err("hostname \"\"");
    contains_all(
        &message,
        &["system-config.hostname = \"\"", "must not be empty"],
    );
    let message = sh.err("alarm-iteration-ms 50");
    contains_all(
        &message,
        &["system-config.alarm-iteration-ms = 50", "100..=600000"],
    );
    assert_eq!(sh.config, Config::embedded_default());
}

#[test]
fn done_refuses_an_invalid_element_and_leaves_editing_untouched() {
    let mut sh = options_shell();
    sh.script(&[
        "alarm-threshold",
        "type space",
        "severity critical",
        "value 90",
    ]);
    let message = sh.err("done");
    assert_eq!(
        message,
        "system-config.alarm-threshold[0].volume = \"\": required with type = \"space\" \
         (valid: a mount point, e.g. \"/var\")"
    );
    sh.script(&["volume /var", "done"]);
    assert_eq!(sh.config.system.alarm_thresholds[0].volume, "/var");

    // Cross-field rule: memory-source process needs a limit.
    sh.script(&["exit", "memory-source process"]);
    let message = sh.err("done");
    contains_all(
        &message,
        &["system-config.memory-limit-mb = 0", "memory-source"],
    );
    sh.script(&["memory-limit-mb 256", "done"]);
    assert_eq!(sh.config.system.memory_limit_mb, 256);
}

#[test]
fn exit_with_undone_changes_says_so_and_discards_them() {
    let mut sh = options_shell();
    sh.ok("hostname edge1");
    assert!(sh.session.has_pending_changes());
    let said = sh.ok("exit");
    contains_all(&said, &["system-config", "discarded", "done"]);
    assert_eq!(sh.config.system.hostname, "sbc");
    // Coming back shows the committed value, and a clean exit says nothing.
    sh.ok("system-config");
    assert_eq!(sh.ok("exit"), "");
}

#[test]
fn show_prints_the_working_copy_aligned() {
    let mut sh = options_shell();
    sh.script(&[
        "alarm-threshold",
        "type memory",
        "severity critical",
        "value 80",
    ]);
    let shown = sh.ok("show");
    assert_eq!(
        shown,
        "alarm-threshold\n\
         \x20       type                            memory\n\
         \x20       volume\n\
         \x20       severity                        critical\n\
         \x20       value                           80\n\
         \x20       health-penalty                  0\n"
    );
    sh.script(&["done", "exit", "options +critical-memory-abort=switchover"]);
    let shown = sh.ok("show");
    contains_all(
        &shown,
        &[
            "system-config\n",
            "        hostname                        sbc\n",
            "        options                         critical-memory-abort=switchover\n",
            "        lab-mode                        disabled\n",
            "        alarm-threshold\n                type",
        ],
    );
}

#[test]
fn render_config_lists_every_element() {
    let text = render_config(&Config::embedded_default());
    for element in [
        "system-config\n",
        "sip-config\n",
        "session-router\n",
        "sip-interface\n",
        "session-agent\n",
        "redundancy-config\n",
        "media-manager\n",
        "steering-pool\n",
        "sip-monitoring\n",
        "capture-agent\n",
    ] {
        assert!(text.contains(element), "{text}");
    }
    assert_eq!(text.matches("sip-interface\n").count(), 2);
    assert_eq!(text.matches("steering-pool\n").count(), 2);
}

// ---- unknown words ----

#[test]
fn unknown_words_name_the_word_and_what_is_valid() {
    let mut sh = Shell::new();
    assert_eq!(
        sh.err("sytem"),
        "unknown command \"sytem\": valid here: configure, show, display-alarms, clear-alarm, \
         clear-deny, notify, reboot, save-config, activate-config, verify-config, lab, exit"
    );
    sh.ok("configure terminal");
    assert_eq!(
        sh.err("sytem"),
        "unknown command \"sytem\": valid here: system, session-router, sip-interface, \
         redundancy, security, auto-scaling-profile, media-manager, realm-config, steering-pool, show, exit"
    );
    contains_all(&sh.err("save-config"), &["valid at the top level"]);
    contains_all(
        &sh.err("show helth"),
        &["unknown word \"helth\" after \"show\"", "health"],
    );
    sh.ok("exit");
    contains_all(&sh.err("configure"), &["terminal"]);
    contains_all(&sh.err("configure terminl"), &["\"terminl\"", "terminal"]);
    // The arguments of the node's commands are the node's to check (sbc's control::oper).
    contains_all(&sh.err("hostname \"unterminated"), &["unterminated quote"]);
}

// ---- operational and lifecycle ----

#[test]
fn operational_and_lifecycle_commands_are_handed_to_the_node() {
    let mut sh = Shell::new();
    let cases = [
        ("show health", oper("show", &["health"])),
        ("show redundancy", oper("show", &["redundancy"])),
        ("show memory", oper("show", &["memory"])),
        ("show alarms", oper("show", &["alarms"])),
        ("display-alarms", oper("display-alarms", &[])),
        ("disp", oper("display-alarms", &[])),
        ("show sip-stats", oper("show", &["sip-stats"])),
        ("show workers", oper("show", &["workers"])),
        ("show dialogs", oper("show", &["dialogs"])),
        ("show media", oper("show", &["media"])),
        ("SHOW MED", oper("show", &["media"])),
        ("notify berpd force", oper("notify", &["berpd", "force"])),
        ("reboot", oper("reboot", &[])),
        (
            "clear-alarm 7 memory",
            oper("clear-alarm", &["7", "memory"]),
        ),
        (
            "save-config",
            Reply::Lifecycle(LifecycleCommand::SaveConfig),
        ),
        (
            "activate-config",
            Reply::Lifecycle(LifecycleCommand::ActivateConfig),
        ),
        (
            "verify-config",
            Reply::Lifecycle(LifecycleCommand::VerifyConfig),
        ),
        (
            "show running-config",
            Reply::Lifecycle(LifecycleCommand::ShowRunningConfig),
        ),
        (
            "show configuration",
            Reply::Lifecycle(LifecycleCommand::ShowConfiguration),
        ),
        (
            "show conf",
            Reply::Lifecycle(LifecycleCommand::ShowConfiguration),
        ),
    ];
    for (line, reply) in cases {
        assert_eq!(sh.run(line), reply, "{line}");
    }
    // show topics work inside configuration mode too.
    sh.script(&["configure terminal", "system", "system-config"]);
    assert_eq!(sh.run("show health"), oper("show", &["health"]));
}

#[test]
fn lab_lines_are_handed_over_whatever_lab_mode_says() {
    // The node checks lab-mode (in the editing and the running config) when it parses them.
    let mut sh = Shell::new();
    assert_eq!(sh.run("lab ballast 64"), oper("lab", &["ballast", "64"]));
    assert_eq!(sh.run("LA ballast 1"), oper("lab", &["ballast", "1"]));
}

// ---- multi-instance elements ----

#[test]
fn session_agents_are_added_selected_edited_and_deleted() {
    let mut sh = Shell::new();
    sh.script(&[
        "configure terminal",
        "session-router",
        "session-agent",
        "name pbx",
        "realm access",
        "address 10.0.0.9",
        "port 5070",
        "transport TCP",
        "done",
    ]);
    let pbx = sh.config.session_agent("pbx").unwrap();
    assert_eq!(pbx.socket_addr(), "10.0.0.9:5070".parse().unwrap());
    assert_eq!(pbx.transport, crate::Transport::Tcp);
    // A second done updates the same instance rather than adding one.
    sh.script(&["port 5071", "done"]);
    assert_eq!(sh.config.session_agents.len(), 2);
    assert_eq!(sh.config.session_agent("pbx").unwrap().port, 5071);

    assert_eq!(sh.ok("select"), "1: core\n2: pbx\n");
    sh.script(&["select core", "port 5090", "done"]);
    assert_eq!(sh.config.session_agent("core").unwrap().port, 5090);
    sh.script(&["select 2", "name pbx2", "done"]);
    assert!(sh.config.session_agent("pbx").is_none());
    assert!(sh.config.session_agent("pbx2").is_some());

    contains_all(
        &sh.err("select nobody"),
        &["no session-agent \"nobody\"", "\"core\", \"pbx2\""],
    );
    // Deleting the default route's agent is refused with the validation error.
    contains_all(
        &sh.err("no core"),
        &[
            "cannot delete session-agent \"core\"",
            "session-router.default-route",
        ],
    );
    assert_eq!(sh.ok("no pbx2"), "deleted session-agent \"pbx2\"\n");
    assert_eq!(sh.config.session_agents.len(), 1);
    // A name in use is refused as soon as it is typed.
    sh.script(&["exit", "session-agent"]);
    contains_all(
        &sh.err("name core"),
        &["session-agent[1].name = \"core\"", "duplicate"],
    );
}

#[test]
fn session_router_default_route_can_be_cleared() {
    let mut sh = Shell::new();
    sh.script(&["configure terminal", "session-router", "session-router"]);
    contains_all(
        &sh.err("default-route nope"),
        &["session-router.default-route = \"nope\"", "valid: \"core\""],
    );
    sh.script(&["default-route \"\"", "done"]);
    assert_eq!(sh.config.session_router.default_route, None);
    sh.script(&["default-route core", "done"]);
    assert_eq!(
        sh.config.session_router.default_route.as_deref(),
        Some("core")
    );
}

#[test]
fn sip_interfaces_and_list_attributes() {
    let mut sh = Shell::new();
    sh.script(&[
        "configure terminal",
        "sip-interface",
        "realm peer",
        "address 127.0.0.2",
        "port 5064",
        "transports udp",
        "transports +tcp",
        "done",
    ]);
    let peer = sh.config.interface("peer").unwrap();
    assert_eq!(
        peer.transports,
        vec![crate::Transport::Udp, crate::Transport::Tcp]
    );
    sh.script(&["transports -udp", "done"]);
    assert_eq!(
        sh.config.interface("peer").unwrap().transports,
        vec![crate::Transport::Tcp]
    );
    contains_all(
        &sh.err("transports -tcp"),
        &["sip-interface[2].transports", "at least one"],
    );
    contains_all(
        &sh.err("transports sctp"),
        &["\"sctp\"", "not one of \"udp\", \"tcp\""],
    );
    contains_all(&sh.err("address 300.1.1.1"), &["not an IP address"]);
}

#[test]
fn alarm_thresholds_are_keyed_by_type_and_severity() {
    let mut sh = options_shell();
    for (severity, value) in [("minor", 60), ("major", 70), ("critical", 80)] {
        sh.script(&[
            "alarm-threshold",
            "type memory",
            &format!("severity {severity}"),
            &format!("value {value}"),
            "done",
            "exit",
        ]);
    }
    assert_eq!(sh.config.system.thresholds(AlarmType::Memory).count(), 3);
    sh.ok("alarm-threshold");
    assert_eq!(
        sh.ok("select"),
        "1: memory minor\n2: memory major\n3: memory critical\n"
    );
    sh.script(&["select memory major", "value 75", "done"]);
    assert_eq!(sh.config.system.alarm_thresholds[1].value, 75);
    // Values must rise with severity.
    sh.ok("value 85");
    contains_all(
        &sh.err("done"),
        &[
            "alarm-threshold[2].value = 80",
            "major at 85",
            "minor < major < critical",
        ],
    );
    sh.ok("select memory minor");
    // A duplicate type and severity is refused.
    sh.script(&[
        "exit",
        "alarm-threshold",
        "type memory",
        "severity critical",
        "value 90",
    ]);
    contains_all(
        &sh.err("done"),
        &["alarm-threshold[3].severity", "duplicate"],
    );
    sh.ok("exit");
    // Delete from inside the sub-element: committed with its parent.
    sh.script(&["alarm-threshold", "no memory minor"]);
    assert_eq!(sh.config.system.alarm_thresholds.len(), 2);
    assert_eq!(
        sh.config.system.alarm_thresholds[0].severity,
        Severity::Major
    );
}

#[test]
fn snmp_agent_address_and_communities() {
    let mut sh = options_shell();
    sh.script(&[
        "snmp-community",
        "community-name n0c-secret",
        "ip-addresses 10.0.0.0/8 127.0.0.1",
        "done",
        "exit",
        "snmp-agent-address 127.0.0.1:1161",
        "done",
        "exit",
        "exit",
    ]);
    let system = &sh.config.system;
    assert_eq!(
        system.snmp_agent_address,
        Some("127.0.0.1:1161".parse().unwrap())
    );
    assert_eq!(system.snmp_communities[0].community_name, "n0c-secret");
    assert_eq!(
        system.snmp_communities[0].ip_addresses,
        ["10.0.0.0/8", "127.0.0.1"]
    );
}

#[test]
fn snmp_user_entries_and_v3_receivers() {
    let mut sh = options_shell();
    sh.script(&[
        "snmp-user-entry",
        "user-name nms",
        "auth-password authpass1",
        "priv-password privpass1",
        "ip-addresses 127.0.0.1",
    ]);
    // Both passwords print masked inside the element.
    let shown = sh.ok("show");
    assert!(
        !shown.contains("authpass1") && !shown.contains("privpass1"),
        "{shown}"
    );
    assert!(
        shown.contains("auth-password                   ********\n"),
        "{shown}"
    );
    contains_all(&sh.err("auth-protocol md5"), &["sha"]);
    sh.script(&[
        "done",
        "exit",
        "trap-receiver",
        "ip-address 127.0.0.1",
        "port 1162",
        "version v3",
        "user-name nms",
        "done",
        "exit",
        "snmp-engine-id 0x80000cbd0401020304",
        "done",
        "exit",
        "exit",
    ]);
    let system = &sh.config.system;
    assert_eq!(system.snmp_users[0].user_name, "nms");
    assert_eq!(system.snmp_users[0].priv_password, "privpass1");
    assert_eq!(system.trap_receivers[0].version, crate::SnmpVersion::V3);
    assert_eq!(system.trap_receivers[0].user_name.as_deref(), Some("nms"));
    assert_eq!(
        system.snmp_engine_id.as_deref(),
        Some("0x80000cbd0401020304")
    );
}

#[test]
fn trap_receivers_and_peers() {
    let mut sh = options_shell();
    sh.script(&[
        "trap-receiver",
        "ip-address 127.0.0.1",
        "port 10162",
        "community lab",
        "filter-level critical",
        "done",
        "exit",
        "exit",
        "exit",
    ]);
    let receiver = &sh.config.system.trap_receivers[0];
    assert_eq!(receiver.socket_addr(), "127.0.0.1:10162".parse().unwrap());
    assert_eq!(receiver.community, "lab");

    sh.script(&["redundancy", "redundancy-config", "state enabled"]);
    // Enabling needs a shared key and both peers: checked by done.
    contains_all(
        &sh.err("done"),
        &["redundancy-config.shared-key", "required"],
    );
    sh.ok("shared-key s3cret-s3cret-s3cret");
    contains_all(
        &sh.err("done"),
        &["redundancy-config.peer", "exactly one primary"],
    );
    // Peers first, then the pair.
    sh.script(&[
        "state disabled",
        "peer",
        "name sbc1",
        "type primary",
        "destinations 127.0.0.1:9090 127.0.0.1:9091",
        "done",
        "exit",
        "peers",
        "name sbc2",
        "type secondary",
        "destinations +127.0.0.2:9090",
        "done",
        "exit",
        "state enabled",
        "done",
    ]);
    let r = &sh.config.redundancy;
    assert!(r.is_enabled());
    assert_eq!(r.peers.len(), 2);
    assert_eq!(r.peers[0].kind, PeerType::Primary);
    assert_eq!(r.peers[0].destinations.len(), 2);
    assert_eq!(r.peer("sbc2").unwrap().kind, PeerType::Secondary);
    // The shared key prints masked.
    assert!(sh
        .ok("show")
        .contains("shared-key                      ********\n"));
    contains_all(
        &sh.err("emergency-threshold 80"),
        &["emergency-threshold = 80", "0..=74"],
    );
    sh.script(&[
        "witness 127.0.0.3:7000",
        "service-address 127.0.0.10",
        "done",
    ]);
    assert_eq!(
        sh.config.redundancy.witness,
        Some("127.0.0.3:7000".parse().unwrap())
    );
    sh.script(&["witness none", "done"]);
    assert_eq!(sh.config.redundancy.witness, None);
    // IPv6: bracketed address:port, bare IP address.
    sh.script(&[
        "witness [fd00::3]:7000",
        "service-address 2001:db8::10",
        "done",
    ]);
    assert_eq!(
        sh.config.redundancy.witness,
        Some("[fd00::3]:7000".parse().unwrap())
    );
    assert_eq!(
        sh.config.redundancy.service_address,
        Some("2001:db8::10".parse().unwrap())
    );
    contains_all(&sh.err("witness fd00::3:7000"), &["[::1]:9090"]);
    sh.script(&["witness none", "done"]);
    let text = sh.config.to_toml_string();
    assert_eq!(Config::from_toml_str(&text).unwrap(), sh.config);
}

#[test]
fn auto_scaling_profiles_follow_opensips_rules() {
    let mut sh = Shell::new();
    sh.script(&[
        "configure terminal",
        "auto-scaling-profile",
        "name PROFILE_A",
        "scale-up-to 6",
        "scale-up-on 70",
        "scale-up-for 4",
        "scale-up-within 5",
        "scale-down-to 2",
        "scale-down-on 18",
    ]);
    contains_all(
        &sh.err("done"),
        &["scale-down-for = (absent)", "required with"],
    );
    sh.script(&["scale-down-for 10", "done"]);
    let p = &sh.config.auto_scaling_profiles[0];
    assert_eq!(p.scale_down(), Some((2, 18, 10)));
    assert_eq!(p.up_within(), 5);
    contains_all(
        &sh.err("scale-up-within 3"),
        &["scale-up-within = 3", "4..=1000"],
    );
    contains_all(
        &sh.err("scale-down-to 6"),
        &["scale-down-to = 6", "below scale-up-to"],
    );
    contains_all(
        &sh.err("scale-down-on 70"),
        &["scale-down-on = 70", "below scale-up-on"],
    );
    sh.script(&[
        "scale-down-to none",
        "scale-down-on none",
        "scale-down-for none",
        "done",
    ]);
    assert_eq!(sh.config.auto_scaling_profiles[0].scale_down(), None);
}

// ---- worker groups ----

/// One attribute line of `show` at the first nesting level: the name padded, then the value.
fn shown(name: &str, value: &str) -> String {
    format!("        {name:<32}{value}").trim_end().to_owned() + "\n"
}

/// A shell whose editing config has profile `ranged` (2..=6), at `sbc(configure)#`.
fn profile_shell() -> Shell {
    let mut sh = Shell::new();
    sh.script(&[
        "configure terminal",
        "auto-scaling-profile",
        "name ranged",
        "scale-up-to 6",
        "scale-down-to 2",
        "scale-down-on 10",
        "scale-down-for 5",
        "done",
        "exit",
    ]);
    sh
}

#[test]
fn sip_config_worker_keys_set_show_and_validate() {
    let mut sh = profile_shell();
    sh.script(&["session-router", "sip-config"]);
    contains_all(
        &sh.ok("?"),
        &[
            "tcp-workers",
            "tcp-auto-scaling-profile",
            "prsm",
            "queue-size",
            "max-queue-delay-ms",
            "routing-cost-us",
            "benchmarks only",
        ],
    );
    assert_eq!(
        sh.session.complete("prsm ", &sh.config),
        vec!["enabled", "disabled"]
    );
    assert_eq!(
        sh.session.complete("tcp-auto-scaling-profile ", &sh.config),
        vec!["ranged", "\"\""]
    );
    contains_all(&sh.ok("queue-size ?"), &["<16..=65536>"]);
    // Single-key ranges are refused as typed.
    for (line, parts) in [
        (
            "tcp-workers 0",
            &["sip-config.tcp-workers = 0", "1..=64"][..],
        ),
        ("tcp-workers 65", &["sip-config.tcp-workers = 65", "1..=64"]),
        (
            "queue-size 15",
            &["sip-config.queue-size = 15", "16..=65536"],
        ),
        (
            "max-queue-delay-ms 32001",
            &["sip-config.max-queue-delay-ms = 32001", "0..=32000"],
        ),
        (
            "routing-cost-us 1000001",
            &["sip-config.routing-cost-us = 1000001", "0..=1000000"],
        ),
        (
            "prsm maybe",
            &["sip-config.prsm = \"maybe\"", "not enabled or disabled"],
        ),
    ] {
        contains_all(&sh.err(line), parts);
    }
    // An unknown profile is refused as typed, listing the valid names.
    contains_all(
        &sh.err("tcp-auto-scaling-profile ghost"),
        &[
            "sip-config.tcp-auto-scaling-profile = \"ghost\"",
            "no auto-scaling-profile has this name",
            "valid: \"ranged\"",
        ],
    );
    // A known one is taken, but done refuses tcp-workers = 1 outside its 2..=6.
    sh.ok("tcp-auto-scaling-profile ranged");
    contains_all(
        &sh.err("done"),
        &[
            "sip-config.tcp-workers = 1",
            "sip-config.tcp-auto-scaling-profile",
            "\"ranged\"",
            "2..=6",
        ],
    );
    assert_eq!(sh.config.sip_config.tcp_auto_scaling_profile, None);
    // With tcp-workers set, typing a count outside the profile is refused at once.
    sh.ok("tcp-workers 3");
    contains_all(
        &sh.err("tcp-workers 7"),
        &["sip-config.tcp-workers = 7", "scale-up-to", "2..=6"],
    );
    let text = sh.ok("show");
    assert!(
        text.contains(&shown("tcp-auto-scaling-profile", "ranged")),
        "{text}"
    );
    sh.script(&[
        "prsm disabled",
        "queue-size 65536",
        "max-queue-delay-ms 0",
        "routing-cost-us 250",
        "workers 1",
    ]);
    let text = sh.ok("done");
    for (name, value) in [
        ("workers", "1"),
        ("tcp-workers", "3"),
        ("tcp-auto-scaling-profile", "ranged"),
        ("prsm", "disabled"),
        ("queue-size", "65536"),
        ("max-queue-delay-ms", "0"),
        ("routing-cost-us", "250"),
    ] {
        assert!(text.contains(&shown(name, value)), "{name}: {text}");
    }
    let sip = &sh.config.sip_config;
    assert_eq!((sip.workers, sip.tcp_workers), (1, 3));
    assert_eq!(sip.tcp_auto_scaling_profile.as_deref(), Some("ranged"));
    assert!(!sip.prsm);
    assert_eq!(
        (sip.queue_size, sip.max_queue_delay_ms, sip.routing_cost_us),
        (65_536, 0, 250)
    );
    let rendered = render_config(&sh.config);
    assert!(rendered.contains(&shown("prsm", "disabled")), "{rendered}");
    assert!(
        rendered.contains(&shown("tcp-auto-scaling-profile", "ranged")),
        "{rendered}"
    );
    assert_eq!(
        Config::from_toml_str(&sh.config.to_toml_string()).unwrap(),
        sh.config
    );
    // "" clears the profile (the TCP group is then fixed at tcp-workers); "none" is a name.
    contains_all(
        &sh.err("tcp-auto-scaling-profile none"),
        &["= \"none\"", "valid: \"ranged\""],
    );
    sh.script(&["tcp-auto-scaling-profile \"\"", "prsm enabled", "done"]);
    assert_eq!(sh.config.sip_config.tcp_auto_scaling_profile, None);
    assert!(sh.config.sip_config.prsm);
    let text = sh.ok("show");
    assert!(
        text.contains(&shown("tcp-auto-scaling-profile", "")),
        "{text}"
    );
}

#[test]
fn sip_interface_profile_set_show_clear_and_protect() {
    let mut sh = profile_shell();
    sh.script(&[
        "session-router",
        "sip-config",
        "workers 1",
        "done",
        "exit",
        "exit",
    ]);
    sh.script(&["sip-interface", "select access"]);
    contains_all(&sh.ok("?"), &["auto-scaling-profile", "UDP worker group"]);
    assert_eq!(
        sh.session.complete("auto-scaling-profile ", &sh.config),
        vec!["ranged", "\"\""]
    );
    contains_all(
        &sh.err("auto-scaling-profile ghost"),
        &[
            "sip-interface[0].auto-scaling-profile = \"ghost\"",
            "valid: \"ranged\"",
        ],
    );
    // workers = 1 is outside ranged's 2..=6: done names both keys.
    sh.ok("auto-scaling-profile ranged");
    contains_all(
        &sh.err("done"),
        &[
            "sip-config.workers = 1",
            "sip-interface[0].auto-scaling-profile",
            "2..=6",
        ],
    );
    assert_eq!(
        sh.config.interface("access").unwrap().auto_scaling_profile,
        None
    );
    sh.script(&[
        "exit",
        "session-router",
        "sip-config",
        "workers 2",
        "done",
        "exit",
        "exit",
        "sip-interface",
        "select access",
        "auto-scaling-profile ranged",
    ]);
    let text = sh.ok("done");
    assert!(
        text.contains(&shown("auto-scaling-profile", "ranged")),
        "{text}"
    );
    assert_eq!(
        sh.config
            .interface("access")
            .unwrap()
            .auto_scaling_profile
            .as_deref(),
        Some("ranged")
    );
    assert_eq!(
        sh.config.interface("core").unwrap().auto_scaling_profile,
        None
    );
    let rendered = render_config(&sh.config);
    assert!(
        rendered.contains(&shown("auto-scaling-profile", "ranged")),
        "{rendered}"
    );
    assert_eq!(
        Config::from_toml_str(&sh.config.to_toml_string()).unwrap(),
        sh.config
    );
    // Now workers = 7 is refused as typed, and the profile in use cannot be deleted or
    // shrunk below the count.
    sh.script(&["exit", "session-router", "sip-config"]);
    contains_all(
        &sh.err("workers 7"),
        &[
            "sip-config.workers = 7",
            "sip-interface[0].auto-scaling-profile",
        ],
    );
    sh.script(&["exit", "exit", "auto-scaling-profile"]);
    contains_all(
        &sh.err("no ranged"),
        &[
            "cannot delete auto-scaling-profile \"ranged\"",
            "sip-interface[0].auto-scaling-profile",
            "none is defined",
        ],
    );
    sh.script(&["select ranged", "scale-down-to 3"]);
    contains_all(&sh.err("done"), &["sip-config.workers = 2", "3..=6"]);
    // Clearing detaches it; then the profile may go.
    sh.script(&[
        "exit",
        "sip-interface",
        "select access",
        "auto-scaling-profile \"\"",
        "done",
    ]);
    assert_eq!(
        sh.config.interface("access").unwrap().auto_scaling_profile,
        None
    );
    sh.script(&["exit", "auto-scaling-profile", "no ranged"]);
    assert!(sh.config.auto_scaling_profiles.is_empty());
}

// ---- help and completion ----

#[test]
fn question_mark_lists_what_is_valid() {
    let mut sh = Shell::new();
    let top = sh.ok("?");
    contains_all(
        &top,
        &[
            "configure",
            "enter configuration mode",
            "display-alarms",
            "exit",
        ],
    );
    let help = sh.session.help();
    assert_eq!(help[0].0, "configure");
    assert!(help.iter().all(|(_, h)| !h.is_empty()));
    contains_all(&sh.ok("show ?"), &["health", "running-config"]);
    contains_all(&sh.ok("sh?"), &["show"]);
    sh.script(&["configure terminal", "system", "system-config"]);
    contains_all(
        &sh.ok("?"),
        &["hostname", "options", "alarm-threshold", "done", "exit"],
    );
    contains_all(
        &sh.ok("options ?"),
        &[
            "+critical-memory-abort=switchover",
            "add or replace this option",
        ],
    );
    contains_all(&sh.ok("memory-source ?"), &["host", "cgroup", "process"]);
    contains_all(&sh.ok("heap-limit-mb ?"), &["<1..=1048576>"]);
    contains_all(&sh.ok("done ?"), &["<enter>"]);
    contains_all(&sh.err("zzz?"), &["nothing valid matches \"zzz\""]);
    contains_all(&sh.err("bogus ?"), &["unknown command \"bogus\""]);
}

#[test]
fn completion_candidates() {
    let mut sh = Shell::new();
    let complete = |sh: &Shell, line: &str| sh.session.complete(line, &sh.config);
    assert_eq!(complete(&sh, "conf"), vec!["configure"]);
    assert_eq!(complete(&sh, "configure "), vec!["terminal"]);
    assert_eq!(complete(&sh, "s"), vec!["show", "save-config"]);
    assert_eq!(
        complete(&sh, "show r"),
        vec!["redundancy", "running-config"]
    );
    assert!(
        complete(&sh, "clear-alarm ").is_empty(),
        "no placeholder offered"
    );
    assert_eq!(complete(&sh, "notify b"), vec!["berpd"]);
    sh.script(&["configure terminal", "system", "system-config"]);
    assert_eq!(complete(&sh, "memory-s"), vec!["memory-source"]);
    assert_eq!(complete(&sh, "memory-source c"), vec!["cgroup"]);
    assert_eq!(complete(&sh, "lab-mode "), vec!["enabled", "disabled"]);
    assert_eq!(
        complete(&sh, "options +c"),
        vec![
            "+critical-memory-abort=enabled",
            "+critical-memory-abort=disabled",
            "+critical-memory-abort=switchover",
        ]
    );
    sh.ok("options +critical-memory-abort=enabled");
    assert_eq!(complete(&sh, "options -"), vec!["-critical-memory-abort"]);
    sh.script(&[
        "done",
        "alarm-threshold",
        "type cpu",
        "severity major",
        "value 90",
        "done",
    ]);
    assert_eq!(complete(&sh, "select "), vec!["cpu"]);
    assert_eq!(complete(&sh, "select cpu "), vec!["major"]);
    assert_eq!(complete(&sh, "type s"), vec!["sessions", "space"]);
    assert!(complete(&sh, "nonsense ").is_empty());
}

#[test]
fn comments_and_blank_lines_do_nothing() {
    let mut sh = Shell::new();
    assert_eq!(sh.ok(""), "");
    assert_eq!(sh.ok("   "), "");
    assert_eq!(sh.ok("# a comment"), "");
    assert_eq!(sh.ok("! an Oracle comment"), "");
    assert_eq!(sh.prompt(), "sbc#");
}

#[test]
fn quoted_values_keep_spaces() {
    let mut sh = options_shell();
    sh.script(&["hostname \"edge \\\"one\\\"\"", "done"]);
    assert_eq!(sh.config.system.hostname, "edge \"one\"");
    assert_eq!(sh.prompt(), "edge \"one\"(system-config)#");
}

#[test]
fn every_attribute_exists_in_the_model() {
    // Each attribute table names real keys of the element's TOML form, in the model's order,
    // and every scalar key of the model is reachable from the ACLI (except session-router's
    // route list).
    let kinds = [
        Kind::SystemConfig,
        Kind::SipConfig,
        Kind::SessionRouter,
        Kind::RedundancyConfig,
        Kind::SipInterface,
        Kind::SessionAgent,
        Kind::AlarmThreshold,
        Kind::TrapReceiver,
        Kind::SnmpCommunity,
        Kind::SnmpUserEntry,
        Kind::Peer,
        Kind::AutoScalingProfile,
        Kind::AccessControl,
        Kind::MediaManager,
        Kind::SteeringPool,
        Kind::TlsProfile,
        Kind::SipMonitoring,
        Kind::FilterConfig,
        Kind::CaptureAgent,
        Kind::SessionAgentGroup,
        Kind::LocalPolicy,
        Kind::PolicyAttribute,
        Kind::LocalRoutingConfig,
        Kind::TranslationRules,
        Kind::SessionTranslation,
        Kind::RealmConfig,
        Kind::AccountConfig,
        Kind::AccountServer,
    ];
    let children = [
        "account-server",
        "alarm-threshold",
        "trap-receiver",
        "peer",
        "route",
        "policy-attribute",
        "snmp-community",
        "snmp-user-entry",
    ];
    for kind in kinds {
        let mut fresh = kind.fresh();
        // Fill the optional fields so that they appear in the table.
        if let Element::RedundancyConfig(r) = &mut fresh {
            r.witness = Some("127.0.0.1:1".parse().unwrap());
            r.service_address = Some("127.0.0.1".parse().unwrap());
        }
        if let Element::SystemConfig(s) = &mut fresh {
            s.snmp_agent_address = Some("127.0.0.1:161".parse().unwrap());
            s.metrics_address = Some("127.0.0.1:9464".parse().unwrap());
            s.dns_ip_primary = Some("127.0.0.1:53".parse().unwrap());
            s.dns_ip_backup1 = Some("127.0.0.2:53".parse().unwrap());
            s.snmp_engine_id = Some("0x8000000001".into());
        }
        if let Element::TrapReceiver(t) = &mut fresh {
            t.user_name = Some("x".into());
        }
        if let Element::AutoScalingProfile(p) = &mut fresh {
            p.scale_up_within = Some(1);
            p.scale_down_to = Some(1);
            p.scale_down_on = Some(1);
            p.scale_down_for = Some(1);
        }
        if let Element::SessionRouter(r) = &mut fresh {
            r.default_route = Some("x".into());
        }
        if let Element::SipConfig(s) = &mut fresh {
            s.tcp_auto_scaling_profile = Some("x".into());
        }
        if let Element::SipInterface(i) = &mut fresh {
            i.auto_scaling_profile = Some("x".into());
            i.tls_profile = Some("x".into());
        }
        if let Element::SessionAgent(a) = &mut fresh {
            a.address = Some("127.0.0.1".parse().unwrap());
            a.tls_profile = Some("x".into());
            a.tls_server_name = Some("x".into());
            a.hostname = Some("x".into());
            a.in_translationid = Some("x".into());
            a.out_translationid = Some("x".into());
        }
        if let Element::LocalPolicy(p) = &mut fresh {
            p.description = Some("x".into());
        }
        if let Element::PolicyAttribute(a) = &mut fresh {
            a.realm = Some("x".into());
        }
        if let Element::FilterConfig(f) = &mut fresh {
            f.address = Some("x".into());
            f.user = Some("x".into());
            f.realm = Some("x".into());
            f.session_agent = Some("x".into());
            f.method = Some("x".into());
        }
        if let Element::CaptureAgent(a) = &mut fresh {
            a.address = Some("127.0.0.1:9060".parse().unwrap());
        }
        if let Element::RealmConfig(r) = &mut fresh {
            r.in_translationid = Some("x".into());
            r.out_translationid = Some("x".into());
            r.session_timer_profile = Some("x".into());
        }
        if let Element::AccountServer(a) = &mut fresh {
            a.tls_profile = Some("x".into());
            a.tls_server_name = Some("x".into());
        }
        if let Element::TlsProfile(p) = &mut fresh {
            p.end_entity_certificate = "x".into();
            p.private_key = "x".into();
            p.trusted_ca_certificates = vec!["x".into()];
            p.verify_names = vec!["x".into()];
        }
        let table = fresh.to_table();
        let attrs: Vec<&str> = kind.attrs().iter().map(|a| a.name).collect();
        let keys: Vec<&str> = table
            .keys()
            .map(String::as_str)
            .filter(|k| !children.contains(k))
            .collect();
        let mut sorted_attrs = attrs.clone();
        sorted_attrs.sort_unstable();
        let mut sorted_keys = keys.clone();
        sorted_keys.sort_unstable();
        assert_eq!(sorted_attrs, sorted_keys, "{}", kind.word());
        assert_eq!(Element::from_table(kind, table).unwrap(), fresh);
    }
}

// ---- media anchoring ----

#[test]
fn media_manager_attributes_are_set_shown_and_refused_with_the_valid_values() {
    let mut sh = Shell::new();
    sh.script(&["configure terminal", "media-manager"]);
    assert_eq!(sh.prompt(), "sbc(media-manager)#");
    contains_all(
        &sh.ok("?"),
        &[
            "state",
            "latching",
            "restricted-latching",
            "latching-window-ms",
            "rtp-inactivity",
            "select",
            "done",
        ],
    );
    let complete = |sh: &Shell, line: &str| sh.session.complete(line, &sh.config);
    assert_eq!(complete(&sh, "state "), vec!["enabled", "disabled"]);
    assert_eq!(complete(&sh, "latching "), vec!["enabled", "disabled"]);
    assert_eq!(complete(&sh, "restricted-latching "), vec!["none", "sdp"]);
    contains_all(&sh.ok("latching-window-ms ?"), &["<100..=60000>"]);
    contains_all(&sh.ok("rtp-inactivity ?"), &["<0..=86400, 0 = off>"]);
    assert_eq!(
        sh.err("state off"),
        "media-manager.state = \"off\": not one of \"enabled\", \"disabled\" \
         (valid: enabled | disabled)"
    );
    assert_eq!(
        sh.err("restricted-latching always"),
        "media-manager.restricted-latching = \"always\": not one of \"none\", \"sdp\" \
         (valid: none | sdp)"
    );
    assert_eq!(
        sh.err("latching-window-ms 99"),
        "media-manager.latching-window-ms = 99: out of range (valid: 100..=60000)"
    );
    contains_all(
        &sh.err("rtp-inactivity 86401"),
        &["media-manager.rtp-inactivity = 86401", "0..=86400"],
    );
    contains_all(
        &sh.err("latching maybe"),
        &[
            "media-manager.latching = \"maybe\"",
            "not enabled or disabled",
        ],
    );
    assert!(!sh.session.has_pending_changes());
    sh.script(&[
        "state disabled",
        "latching disabled",
        "restricted-latching SDP",
        "latching-window-ms 1000",
        "rtp-inactivity 120",
    ]);
    assert_eq!(sh.config.media_manager, crate::MediaManager::default());
    let text = sh.ok("done");
    for (name, value) in [
        ("state", "disabled"),
        ("latching", "disabled"),
        ("restricted-latching", "sdp"),
        ("latching-window-ms", "1000"),
        ("rtp-inactivity", "120"),
    ] {
        assert!(text.contains(&shown(name, value)), "{name}: {text}");
    }
    let m = &sh.config.media_manager;
    assert!(!m.is_enabled());
    assert!(!m.latching);
    assert_eq!(m.restricted_latching, crate::RestrictedLatching::Sdp);
    assert_eq!((m.latching_window_ms, m.rtp_inactivity), (1000, 120));
    let rendered = render_config(&sh.config);
    assert!(rendered.contains("media-manager\n"), "{rendered}");
    assert!(
        rendered.contains(&shown("rtp-inactivity", "120")),
        "{rendered}"
    );
    assert_eq!(
        Config::from_toml_str(&sh.config.to_toml_string()).unwrap(),
        sh.config
    );
    // Leaving and entering again shows the committed element.
    sh.script(&["exit", "media-manager"]);
    assert!(sh.ok("show").contains(&shown("state", "disabled")));
}

#[test]
fn steering_pools_are_created_modified_and_deleted_by_realm_id() {
    let mut sh = Shell::new();
    sh.script(&["configure terminal", "steering-pool"]);
    assert_eq!(sh.prompt(), "sbc(steering-pool)#");
    assert_eq!(sh.ok("select"), "1: access\n2: core\n");
    // Delete the default core pool, then create another one for core.
    assert_eq!(sh.ok("no core"), "deleted steering-pool \"core\"\n");
    assert!(sh.config.steering_pool("core").is_none());
    assert_eq!(
        sh.session.complete("realm-id ", &sh.config),
        vec!["access", "core"]
    );
    // The realm is checked as typed: an unknown one, and one that has a pool already.
    assert_eq!(
        sh.err("realm-id edge"),
        "steering-pool[1].realm-id = \"edge\": no sip-interface has this realm \
         (valid: \"access\", \"core\")"
    );
    contains_all(
        &sh.err("realm-id access"),
        &[
            "steering-pool[1].realm-id = \"access\"",
            "already has an IPv4 steering-pool",
            "steering-pool[0]",
        ],
    );
    sh.ok("realm-id core");
    // done names what is still to set.
    contains_all(
        &sh.err("done"),
        &["steering-pool[1].start-port = 0", "1024..=65535"],
    );
    contains_all(
        &sh.err("start-port 1023"),
        &["steering-pool[1].start-port = 1023", "valid: 1024..=65535"],
    );
    contains_all(
        &sh.err("start-port 70000"),
        &["steering-pool[1].start-port = 70000", "out of range"],
    );
    contains_all(
        &sh.err("ip-address nowhere"),
        &[
            "steering-pool[1].ip-address = \"nowhere\"",
            "not an IP address",
        ],
    );
    contains_all(
        &sh.err("ip-address 0.0.0.0"),
        &["steering-pool[1].ip-address = \"0.0.0.0\"", "wildcard"],
    );
    sh.script(&["ip-address 127.0.0.2", "start-port 30000"]);
    contains_all(
        &sh.err("done"),
        &["steering-pool[1].end-port = 0", "must be above start-port"],
    );
    contains_all(
        &sh.err("end-port 30002"),
        &[
            "steering-pool[1].end-port = 30002",
            "1 RTP/RTCP pair",
            "30003..=65535",
        ],
    );
    sh.ok("end-port 30999");
    let text = sh.ok("done");
    for (name, value) in [
        ("ip-address", "127.0.0.2"),
        ("start-port", "30000"),
        ("end-port", "30999"),
        ("realm-id", "core"),
    ] {
        assert!(text.contains(&shown(name, value)), "{name}: {text}");
    }
    let core = sh.config.steering_pool("core").unwrap();
    assert_eq!(core.ports(), 30_000..=30_999);
    assert_eq!(
        core.ip_address,
        "127.0.0.2".parse::<std::net::IpAddr>().unwrap()
    );
    // A second done updates the same instance.
    sh.script(&["end-port 30099", "done"]);
    assert_eq!(sh.config.steering_pools.len(), 2);
    assert_eq!(sh.config.steering_pool("core").unwrap().end_port, 30_099);

    // Modify the access pool: an overlap with the core pool is checked by done.
    sh.script(&["select access", "end-port 30050"]);
    contains_all(
        &sh.err("done"),
        &[
            "steering-pool[1].start-port = 30000",
            "overlap steering-pool[0]",
            "by its port alone",
        ],
    );
    assert_eq!(sh.config.steering_pool("access").unwrap().end_port, 20_999);
    // A SIP port on the same address is refused as typed (the rule is about start-port).
    sh.ok("end-port 20999");
    contains_all(
        &sh.err("start-port 5000"),
        &["steering-pool[0].start-port = 5000", "sip-interface[0]"],
    );
    sh.script(&["start-port 22000", "end-port 22999", "done"]);
    assert_eq!(
        sh.config.steering_pool("access").unwrap().ports(),
        22_000..=22_999
    );
    let rendered = render_config(&sh.config);
    assert_eq!(rendered.matches("steering-pool\n").count(), 2, "{rendered}");
    assert!(
        rendered.contains(&shown("start-port", "22000")),
        "{rendered}"
    );
    assert_eq!(
        Config::from_toml_str(&sh.config.to_toml_string()).unwrap(),
        sh.config
    );
    // Bare no deletes the selected one; by number too.
    assert_eq!(sh.ok("no"), "deleted steering-pool \"access\"\n");
    contains_all(
        &sh.err("no edge"),
        &["no steering-pool \"edge\"", "\"core\""],
    );
    assert_eq!(sh.ok("no 1"), "deleted steering-pool \"core\"\n");
    assert!(sh.config.steering_pools.is_empty());
    assert_eq!(sh.ok("select"), "no steering-pool yet\n");
    // No pool at all is written as such, and reads back as none.
    let text = sh.config.to_toml_string();
    assert!(text.contains("steering-pool = []"), "{text}");
    assert_eq!(Config::from_toml_str(&text).unwrap(), sh.config);
}

#[test]
fn show_media_is_a_topic_everywhere() {
    let mut sh = Shell::new();
    contains_all(&sh.ok("show ?"), &["media", "anchored media sessions"]);
    contains_all(
        &sh.err("show me"),
        &["ambiguous word \"me\"", "memory", "media"],
    );
    contains_all(&sh.err("show media now"), &["\"now\"", "takes no argument"]);
    sh.script(&["configure terminal", "steering-pool"]);
    assert_eq!(sh.run("show media"), oper("show", &["media"]));
    let help = Session::new(&NODE).help();
    let show = help
        .iter()
        .find(|(w, _)| w == "show")
        .map(|(_, h)| h.as_str());
    contains_all(show.unwrap_or_default(), &["dialogs | media |"]);
}

// ---- SIP over TLS ----

#[test]
fn a_tls_profile_is_configured_under_security_and_used_by_an_interface() {
    let mut sh = Shell::new();
    sh.script(&["configure terminal", "security", "tls-profile"]);
    assert_eq!(sh.prompt(), "sbc(tls-profile)#");
    contains_all(
        &sh.ok("?"),
        &[
            "end-entity-certificate",
            "private-key",
            "mutual-authenticate",
            "tls-version",
        ],
    );
    contains_all(
        &sh.err("tls-version tlsv10"),
        &["\"compatibility\", \"tlsv12\", \"tlsv13\""],
    );
    sh.script(&[
        "name edge",
        "end-entity-certificate /etc/sbc/sbc.pem",
        "trusted-ca-certificates /etc/sbc/ca.pem",
    ]);
    // The key is missing: `done` names it and commits nothing.
    contains_all(
        &sh.err("done"),
        &["tls-profile[0].private-key", "private key"],
    );
    sh.script(&[
        "private-key /etc/sbc/sbc-key.pem",
        "tls-version tlsv13",
        "done",
    ]);
    let profile = sh.config.tls_profile("edge").unwrap();
    assert_eq!(profile.tls_version, crate::TlsVersion::Tlsv13);
    assert_eq!(profile.trusted_ca_certificates, vec!["/etc/sbc/ca.pem"]);
    sh.script(&["exit", "exit", "sip-interface", "select access"]);
    sh.ok("transports +tls");
    contains_all(
        &sh.err("done"),
        &["sip-interface[0].tls-profile", "TLS listens here"],
    );
    sh.script(&["tls-profile edge", "done"]);
    let access = &sh.config.sip_interfaces[0];
    assert!(access.has(crate::Transport::Tls));
    assert_eq!(access.tls_profile.as_deref(), Some("edge"));
    // `show` prints the key's path, and the profile before the interfaces.
    let shown = sh.ok("show");
    contains_all(&shown, &["tls-port", "5061", "tls-profile", "edge"]);
}

#[test]
fn system_config_metrics_address_set_refused_and_cleared() {
    let mut sh = Shell::new();
    sh.script(&[
        "configure terminal",
        "system",
        "system-config",
        "metrics-address 127.0.0.1:9464",
        "done",
    ]);
    assert_eq!(
        sh.config.system.metrics_address,
        Some("127.0.0.1:9464".parse().unwrap())
    );
    // The result round-trips through the file (a value after the tables of system-config).
    let text = sh.config.to_toml_string();
    assert!(
        text.contains("metrics-address = \"127.0.0.1:9464\""),
        "{text}"
    );
    assert_eq!(Config::from_toml_str(&text).unwrap(), sh.config);
    contains_all(&sh.err("metrics-address 127.0.0.1:0"), &["port 0"]);
    contains_all(&sh.err("metrics-address 9464"), &["metrics-address"]);
    sh.script(&["metrics-address none", "done"]);
    assert_eq!(sh.config.system.metrics_address, None);
}

#[test]
fn a_dual_stack_realm_is_selected_by_family() {
    let mut sh = Shell::new();
    sh.script(&[
        "configure terminal",
        // The realm anchors media: its IPv6 pool comes first (an IPv6 interface without one
        // would write an IPv4 address into its legs' SDP).
        "steering-pool",
        "ip-address ::1",
        "start-port 22000",
        "end-port 22999",
        "realm-id core",
        "done",
        "exit",
        "sip-interface",
        // The address first: a new interface starts on 127.0.0.1, and core has an IPv4 one.
        "address ::1",
        "realm core",
        "port 5062",
        "done",
    ]);
    assert_eq!(
        sh.config.interface_for("core", "::1".parse().unwrap()),
        Some(2)
    );
    assert_eq!(sh.ok("select"), "1: access\n2: core\n3: core ipv6\n");
    // The realm alone is ambiguous now; its family or address names one.
    contains_all(&sh.err("select core"), &["ambiguous", "core", "core ipv6"]);
    sh.script(&["select core ipv6", "port 5072", "done"]);
    assert_eq!(sh.config.sip_interfaces[2].port, 5072);
    assert_eq!(
        sh.config.sip_interfaces[1].port, 5062,
        "the IPv4 one is untouched"
    );
    sh.script(&["select core 127.0.0.1", "port 5063", "done"]);
    assert_eq!(sh.config.sip_interfaces[1].port, 5063);
    // The IPv4 agent of core needs the IPv4 interface: deleting it is refused, saying why.
    contains_all(
        &sh.err("no core ipv4"),
        &["cannot delete", "realm \"core\" has no IPv4 sip-interface"],
    );
    sh.ok("no core ipv6");
    assert_eq!(sh.config.sip_interfaces.len(), 2);
}

#[test]
fn a_show_topic_with_arguments_hands_them_to_the_node_and_others_refuse_them() {
    let mut config = Config::embedded_default();
    let mut session = Session::new(&NODE);
    assert_eq!(
        session.execute("show sip-t 7 full", &mut config),
        Reply::Operational(OperLine {
            command: "show",
            args: vec!["sip-trace".into(), "7".into(), "full".into()],
        })
    );
    assert!(matches!(
        session.execute("show media 7", &mut config),
        Reply::Error(e) if e.contains("takes no argument")
    ));
}

// ---- the SIP trace ----

#[test]
fn filter_configs_are_created_refused_and_deleted_by_name() {
    let mut sh = Shell::new();
    sh.script(&["configure terminal", "session-router"]);
    contains_all(
        &sh.ok("?"),
        &["filter-config", "sip-monitoring", "the SIP trace"],
    );
    sh.ok("filter-config");
    assert_eq!(sh.prompt(), "sbc(filter-config)#");
    contains_all(
        &sh.ok("?"),
        &[
            "name",
            "address",
            "user",
            "realm",
            "session-agent",
            "method",
            "our extension, not Oracle's",
            "select",
            "no",
            "done",
        ],
    );
    assert_eq!(sh.ok("select"), "no filter-config yet\n");
    // done names what is still to set; nothing is committed.
    assert_eq!(
        sh.err("done"),
        "filter-config[0].name = \"\": must not be empty (valid: a non-empty name)"
    );
    contains_all(
        &sh.err("name *"),
        &["filter-config[0].name = \"*\"", "a name other than \"*\""],
    );
    sh.ok("name pbx");
    // Each key is checked as typed, naming the key, the value and what is valid.
    assert_eq!(
        sh.err("address 192.0.2.0/33"),
        "filter-config[0].address = \"192.0.2.0/33\": the prefix length must be 0..=32 \
         (valid: an IP address or network: 192.0.2.7, 192.0.2.0/24, ::1, 2001:db8::/32)"
    );
    contains_all(
        &sh.err("user \"al ice\""),
        &["filter-config[0].user = \"al ice\"", "spaces", "user@host"],
    );
    contains_all(
        &sh.err("user sip:alice@example.com"),
        &["filter-config[0].user", "without its scheme"],
    );
    assert_eq!(
        sh.err("realm edge"),
        "filter-config[0].realm = \"edge\": no sip-interface has this realm \
         (valid: \"access\", \"core\")"
    );
    assert_eq!(
        sh.err("session-agent pbx"),
        "filter-config[0].session-agent = \"pbx\": no session-agent has this name \
         (valid: \"core\")"
    );
    contains_all(
        &sh.err("method invite"),
        &[
            "filter-config[0].method = \"invite\"",
            "case-sensitive",
            "a SIP method in capitals",
        ],
    );
    contains_all(&sh.err("method IN;VITE"), &["not a SIP token"]);
    let complete = |sh: &Shell, line: &str| sh.session.complete(line, &sh.config);
    assert_eq!(complete(&sh, "realm "), vec!["access", "core", "\"\""]);
    assert_eq!(complete(&sh, "session-agent "), vec!["core", "\"\""]);
    contains_all(
        &sh.ok("method ?"),
        &["<SIP method in capitals, e.g. INVITE | \"\">"],
    );
    assert!(sh.config.filter_configs.is_empty(), "nothing committed yet");
    sh.script(&[
        "address ::1",
        "user alice@example.com",
        "realm core",
        "session-agent core",
        "method INVITE",
    ]);
    let text = sh.ok("done");
    for (name, value) in [
        ("name", "pbx"),
        ("address", "::1"),
        ("user", "alice@example.com"),
        ("realm", "core"),
        ("session-agent", "core"),
        ("method", "INVITE"),
    ] {
        assert!(text.contains(&shown(name, value)), "{name}: {text}");
    }
    let pbx = sh.config.filter_config("pbx").unwrap();
    assert_eq!(pbx.network(), Some("::1/128".parse().unwrap()));
    // Clearing a key, then a second filter with nothing set (it matches everything).
    sh.script(&["user \"\"", "done"]);
    assert_eq!(sh.config.filter_config("pbx").unwrap().user, None);
    sh.script(&["exit", "filter-config", "name all", "done"]);
    assert_eq!(
        sh.config.filter_configs[1],
        crate::FilterConfig::named("all")
    );
    assert_eq!(sh.ok("select"), "1: pbx\n2: all\n");
    contains_all(
        &sh.err("name pbx"),
        &["filter-config[1].name = \"pbx\"", "duplicate name"],
    );
    sh.script(&["select pbx", "method BYE", "done"]);
    assert_eq!(
        sh.config.filter_config("pbx").unwrap().method.as_deref(),
        Some("BYE")
    );
    assert_eq!(sh.config.filter_configs.len(), 2);
    let rendered = render_config(&sh.config);
    assert_eq!(rendered.matches("filter-config\n").count(), 2, "{rendered}");
    assert_eq!(
        Config::from_toml_str(&sh.config.to_toml_string()).unwrap(),
        sh.config
    );
    assert_eq!(sh.ok("no all"), "deleted filter-config \"all\"\n");
    contains_all(
        &sh.err("no edge"),
        &["no filter-config \"edge\"", "\"pbx\""],
    );
    assert_eq!(sh.config.filter_configs.len(), 1);
}

#[test]
fn sip_monitoring_names_filters_and_keeps_them_from_deletion() {
    let mut sh = Shell::new();
    sh.script(&[
        "configure terminal",
        "session-router",
        "filter-config",
        "name pbx",
        "done",
        "exit",
        "filter-config",
        "name invites",
        "method INVITE",
        "done",
        "exit",
        "sip-monitoring",
    ]);
    assert_eq!(sh.prompt(), "sbc(sip-monitoring)#");
    contains_all(
        &sh.ok("?"),
        &[
            "state",
            "match-any-filter",
            "monitoring-filters",
            "max-trace-memory",
            "max-captures",
            "max-messages-per-capture",
            "our extension, not Oracle's",
            "select",
        ],
    );
    let complete = |sh: &Shell, line: &str| sh.session.complete(line, &sh.config);
    assert_eq!(complete(&sh, "state "), vec!["enabled", "disabled"]);
    assert_eq!(
        complete(&sh, "match-any-filter "),
        vec!["enabled", "disabled"]
    );
    assert_eq!(
        complete(&sh, "monitoring-filters "),
        vec!["+pbx", "+invites", "pbx", "invites", "*", "\"\""]
    );
    assert_eq!(complete(&sh, "monitoring-filters +i"), vec!["+invites"]);
    contains_all(&sh.ok("max-trace-memory ?"), &["<1..=1024>"]);
    assert_eq!(
        sh.err("monitoring-filters +nothing"),
        "sip-monitoring.monitoring-filters[0] = \"nothing\": no filter-config has this name \
         (valid: \"pbx\", \"invites\", or \"*\" alone)"
    );
    contains_all(
        &sh.err("monitoring-filters pbx *"),
        &[
            "sip-monitoring.monitoring-filters[1] = \"*\"",
            "stands alone",
        ],
    );
    contains_all(
        &sh.err("monitoring-filters pbx pbx"),
        &["sip-monitoring.monitoring-filters[1]", "at most once"],
    );
    assert_eq!(
        sh.err("max-trace-memory 0"),
        "sip-monitoring.max-trace-memory = 0: out of range (valid: 1..=1024)"
    );
    contains_all(
        &sh.err("max-captures 100001"),
        &["sip-monitoring.max-captures = 100001", "1..=100000"],
    );
    contains_all(
        &sh.err("max-messages-per-capture 10001"),
        &[
            "sip-monitoring.max-messages-per-capture = 10001",
            "1..=10000",
        ],
    );
    contains_all(
        &sh.err("state on"),
        &["sip-monitoring.state = \"on\"", "enabled | disabled"],
    );
    assert!(!sh.session.has_pending_changes());
    sh.script(&[
        "state enabled",
        "match-any-filter enabled",
        "monitoring-filters +pbx +invites",
        "max-trace-memory 32",
        "max-captures 50",
        "max-messages-per-capture 20",
    ]);
    assert_eq!(sh.config.sip_monitoring, crate::SipMonitoring::default());
    let text = sh.ok("done");
    for line in [
        shown("state", "enabled"),
        shown("match-any-filter", "enabled"),
        shown("monitoring-filters", "pbx"),
        shown("", "invites"),
        shown("max-trace-memory", "32"),
    ] {
        assert!(text.contains(&line), "{line:?}: {text}");
    }
    let m = &sh.config.sip_monitoring;
    assert!(m.is_enabled() && m.match_any_filter);
    assert_eq!(m.monitoring_filters, ["pbx", "invites"]);
    assert_eq!(
        (
            m.max_trace_memory,
            m.max_captures,
            m.max_messages_per_capture
        ),
        (32, 50, 20)
    );
    assert_eq!(
        complete(&sh, "monitoring-filters -"),
        vec!["-pbx", "-invites"]
    );
    // A filter in use cannot be deleted; the configuration stays as it was.
    sh.script(&["exit", "filter-config"]);
    assert_eq!(
        sh.err("no pbx"),
        "cannot delete filter-config \"pbx\": sip-monitoring.monitoring-filters[0] = \"pbx\": \
         no filter-config has this name (valid: \"invites\", or \"*\" alone)"
    );
    assert_eq!(sh.config.filter_configs.len(), 2);
    // Nor renamed from under it: the new name is taken as typed, done refuses it.
    sh.script(&["select pbx", "name renamed"]);
    contains_all(
        &sh.err("done"),
        &[
            "sip-monitoring.monitoring-filters[0] = \"pbx\"",
            "\"renamed\"",
        ],
    );
    assert!(sh.config.filter_config("pbx").is_some());
    sh.script(&[
        "select pbx",
        "exit",
        "sip-monitoring",
        "monitoring-filters *",
        "done",
    ]);
    assert!(sh.config.sip_monitoring.captures_all());
    sh.script(&["exit", "filter-config", "no pbx"]);
    assert_eq!(sh.config.filter_configs.len(), 1);
    let rendered = render_config(&sh.config);
    assert!(rendered.contains("sip-monitoring\n"), "{rendered}");
    assert!(
        rendered.contains(&shown("monitoring-filters", "*")),
        "{rendered}"
    );
    assert_eq!(
        Config::from_toml_str(&sh.config.to_toml_string()).unwrap(),
        sh.config
    );
    // Back in sip-monitoring: the committed element; an empty list is allowed.
    sh.script(&["exit", "sip-monitoring", "monitoring-filters \"\"", "done"]);
    assert!(sh.config.sip_monitoring.monitoring_filters.is_empty());
    assert!(sh.config.sip_monitoring.is_enabled());
}

#[test]
fn capture_agent_is_set_shown_masked_and_refused() {
    let mut sh = Shell::new();
    sh.script(&["configure terminal", "system"]);
    contains_all(&sh.ok("?"), &["system-config", "capture-agent", "HEPv3"]);
    sh.ok("capture-agent");
    assert_eq!(sh.prompt(), "sbc(capture-agent)#");
    contains_all(
        &sh.ok("?"),
        &[
            "state",
            "address",
            "transport",
            "capture-id",
            "password",
            "queue-size",
            "rtcp",
            "select",
            "done",
        ],
    );
    let complete = |sh: &Shell, line: &str| sh.session.complete(line, &sh.config);
    assert_eq!(complete(&sh, "transport "), vec!["udp", "tcp"]);
    assert_eq!(complete(&sh, "state "), vec!["enabled", "disabled"]);
    assert_eq!(complete(&sh, "rtcp "), vec!["enabled", "disabled"]);
    assert_eq!(complete(&sh, "address "), vec!["none"]);
    contains_all(&sh.ok("capture-id ?"), &["<0..=4294967295>"]);
    contains_all(&sh.ok("queue-size ?"), &["<16..=1000000>"]);
    // Enabled without an address: done says what is missing and commits nothing.
    sh.ok("state enabled");
    assert_eq!(
        sh.err("done"),
        "capture-agent.address = none: required with state = \"enabled\": where the HEP \
         packets go (valid: the capture server's address:port, e.g. 192.0.2.9:9060 \
         ([2001:db8::9]:9060))"
    );
    // Values out of range are refused as typed, even before the address is set.
    assert_eq!(
        sh.err("queue-size 15"),
        "capture-agent.queue-size = 15: out of range (valid: 16..=1000000)"
    );
    contains_all(
        &sh.err("capture-id 4294967296"),
        &["capture-agent.capture-id = 4294967296", "out of range"],
    );
    contains_all(
        &sh.err("address 192.0.2.9"),
        &[
            "capture-agent.address = \"192.0.2.9\"",
            "not an address:port",
        ],
    );
    contains_all(
        &sh.err("address 0.0.0.0:9060"),
        &["capture-agent.address = \"0.0.0.0:9060\"", "wildcard"],
    );
    contains_all(
        &sh.err("address 192.0.2.9:0"),
        &["capture-agent.address = \"192.0.2.9:0\"", "port 0"],
    );
    assert_eq!(
        sh.err("transport sctp"),
        "capture-agent.transport = \"sctp\": not one of \"udp\", \"tcp\" (valid: udp | tcp)"
    );
    assert_eq!(sh.config.capture_agent, crate::CaptureAgent::default());
    sh.script(&[
        "address [::1]:9060",
        "transport TCP",
        "capture-id 7",
        "password hep-key",
        "queue-size 16",
        "rtcp disabled",
    ]);
    // The password prints masked in the element, and in the whole configuration.
    let shown_now = sh.ok("show");
    assert!(!shown_now.contains("hep-key"), "{shown_now}");
    assert!(
        shown_now.contains(&shown("password", crate::MASK)),
        "{shown_now}"
    );
    let text = sh.ok("done");
    for (name, value) in [
        ("state", "enabled"),
        ("address", "[::1]:9060"),
        ("transport", "tcp"),
        ("capture-id", "7"),
        ("password", crate::MASK),
        ("queue-size", "16"),
        ("rtcp", "disabled"),
    ] {
        assert!(text.contains(&shown(name, value)), "{name}: {text}");
    }
    let a = &sh.config.capture_agent;
    assert!(a.is_enabled());
    assert_eq!(a.address, Some("[::1]:9060".parse().unwrap()));
    assert_eq!(a.transport, crate::CaptureTransport::Tcp);
    assert_eq!((a.capture_id, a.queue_size, a.rtcp), (7, 16, false));
    assert_eq!(a.password, "hep-key");
    let rendered = render_config(&sh.config);
    assert!(rendered.contains("capture-agent\n"), "{rendered}");
    assert!(!rendered.contains("hep-key"), "{rendered}");
    assert_eq!(
        sh.config.to_masked_json()["capture-agent"]["password"],
        crate::MASK
    );
    assert_eq!(
        Config::from_toml_str(&sh.config.to_toml_string()).unwrap(),
        sh.config
    );
    // Clearing the address while enabled waits for done, which refuses it.
    sh.ok("address none");
    contains_all(&sh.err("done"), &["capture-agent.address = none"]);
    assert!(sh.config.capture_agent.address.is_some());
    sh.script(&["state disabled", "done"]);
    assert_eq!(sh.config.capture_agent.address, None);
    assert!(!sh.config.capture_agent.is_enabled());
    // An empty password shows empty.
    sh.script(&["password \"\"", "done"]);
    assert!(sh.ok("show").contains(&shown("password", "")));
}

// ---- routing (issue 28) ----

#[test]
fn a_local_policy_with_policy_attributes_is_edited_like_oracles() {
    let mut sh = Shell::new();
    sh.script(&["configure terminal", "session-router"]);
    contains_all(
        &sh.ok("?"),
        &[
            "session-agent-group",
            "local-policy",
            "local-routing-config",
            "translation-rules",
            "session-translation",
        ],
    );
    // A group first, which a next hop names as SAG:<group-name>.
    sh.script(&["session-agent-group", "group-name carriers"]);
    assert_eq!(
        sh.err("done"),
        "session-agent-group[0].dest = []: a group needs at least one member (valid: \"core\")"
    );
    assert_eq!(
        sh.err("dest core nobody"),
        "session-agent-group[0].dest[1] = \"nobody\": no session-agent has this name \
         (valid: \"core\")"
    );
    sh.ok("dest core");
    contains_all(
        &sh.err("stop-sag-recurse +200"),
        &[
            "session-agent-group[0].stop-sag-recurse[2] = 200",
            "300..=699",
        ],
    );
    sh.script(&[
        "strategy round-robin",
        "stop-sag-recurse +486",
        "done",
        "exit",
    ]);
    let group = sh.config.session_agent_group("carriers").unwrap();
    assert_eq!(group.dest, ["core"]);
    assert_eq!(group.strategy, crate::SagStrategy::RoundRobin);
    assert_eq!(group.stop_sag_recurse, [401, 407, 486]);

    // The policy, then its next hops from inside it.
    sh.ok("local-policy");
    assert_eq!(sh.prompt(), "sbc(local-policy)#");
    contains_all(
        &sh.ok("?"),
        &["from-address", "policy-attributes", "select", "done"],
    );
    // A bare list replaces; +item adds, so a prefix with its leading + is added as ++item.
    sh.script(&[
        "to-address 1555 1666",
        "to-address ++1777",
        "to-address -1666",
    ]);
    sh.script(&["to-address ++1666", "to-address -+1777"]);
    sh.script(&["source-realm access", "description \"to core\""]);
    assert_eq!(
        sh.err("source-realm edge"),
        "local-policy[0].source-realm[0] = \"edge\": no sip-interface has this realm \
         (valid: \"*\" alone, or \"access\", \"core\")"
    );
    let complete = |sh: &Shell, line: &str| sh.session.complete(line, &sh.config);
    assert_eq!(
        complete(&sh, "source-realm "),
        ["+access", "+core", "+*", "-access", "access", "core", "*", "\"\""]
    );
    sh.ok("policy-attributes");
    assert_eq!(sh.prompt(), "sbc(policy-attributes)#");
    assert_eq!(complete(&sh, "next-hop "), ["core", "SAG:carriers"]);
    assert_eq!(
        sh.err("next-hop SAG:nobody"),
        "local-policy[0].policy-attribute[0].next-hop = \"SAG:nobody\": no session-agent-group \
         has this group-name (valid: \"core\", \"SAG:carriers\")"
    );
    // Each key is checked as typed once the element is otherwise complete.
    sh.ok("next-hop SAG:carriers");
    contains_all(
        &sh.err("days-of-week Mon"),
        &[
            "local-policy[0].policy-attribute[0].days-of-week = \"Mon\"",
            "\"o\" is not a day letter",
            "U M T W R F S",
        ],
    );
    contains_all(
        &sh.err("cost 1000000000"),
        &["policy-attribute[0].cost = 1000000000", "0..=999999999"],
    );
    sh.script(&[
        "cost 10",
        "start-time 0800",
        "end-time 1800",
        "days-of-week M-F",
        "terminate-recursion enabled",
    ]);
    contains_all(
        &sh.err("start-time 2500"),
        &["policy-attribute[0].start-time = \"2500\"", "after 2400"],
    );
    let text = sh.ok("done");
    assert!(text.starts_with("policy-attributes\n"), "{text}");
    for (name, value) in [
        ("next-hop", "SAG:carriers"),
        ("cost", "10"),
        ("days-of-week", "M-F"),
    ] {
        assert!(text.contains(&shown(name, value)), "{name}: {text}");
    }
    // done on the sub-element committed the policy with it.
    assert_eq!(sh.config.local_policies.len(), 1);
    assert_eq!(sh.config.local_policies[0].policy_attributes.len(), 1);
    sh.script(&[
        "exit",
        "policy-attributes",
        "next-hop core",
        "cost 20",
        "done",
        "exit",
    ]);
    let policy = &sh.config.local_policies[0];
    assert_eq!(policy.key(), "* 1555,+1666 access");
    assert_eq!(policy.description.as_deref(), Some("to core"));
    let hops: Vec<&str> = policy
        .policy_attributes
        .iter()
        .map(|a| a.next_hop.as_str())
        .collect();
    assert_eq!(hops, ["SAG:carriers", "core"]);
    assert!(policy.policy_attributes[0].terminate_recursion);
    // show nests the attributes under the policy, as Oracle's.
    let text = sh.ok("show");
    assert!(text.starts_with("local-policy\n"), "{text}");
    assert_eq!(
        text.matches("\n        policy-attributes\n").count(),
        2,
        "{text}"
    );
    // Select an attribute by its next-hop, change it, delete the other.
    sh.ok("policy-attributes");
    assert_eq!(sh.ok("select"), "1: SAG:carriers\n2: core\n");
    sh.script(&["select core", "state disabled", "done"]);
    assert_eq!(
        sh.config.local_policies[0].policy_attributes[1].state,
        crate::AdminState::Disabled
    );
    assert_eq!(
        sh.ok("no SAG:carriers"),
        "deleted policy-attributes \"SAG:carriers\"\n"
    );
    assert_eq!(sh.config.local_policies[0].policy_attributes.len(), 1);
    sh.script(&["exit", "exit"]);
    assert_eq!(sh.prompt(), "sbc(session-router)#");
    // A second policy with the same key is refused; select by key or number.
    sh.script(&[
        "local-policy",
        "to-address 1555",
        "to-address ++1666",
        "source-realm access",
    ]);
    contains_all(
        &sh.err("done"),
        &[
            "local-policy[1].from-address = \"* 1555,+1666 access\"",
            "the same from-address, to-address and source-realm as local-policy[0]",
        ],
    );
    sh.script(&["to-address 1777", "done"]);
    assert_eq!(
        sh.ok("select"),
        "1: * 1555,+1666 access\n2: * 1777 access\n"
    );
    sh.script(&["select * 1777 access", "to-address 1888", "done"]);
    assert_eq!(sh.config.local_policies[1].to_address, ["1888"]);
    assert_eq!(sh.ok("no 2"), "deleted local-policy \"* 1888 access\"\n");
    // Deleting the agent a policy names is refused with the validation error.
    sh.script(&["exit", "session-agent"]);
    contains_all(
        &sh.err("no core"),
        &[
            "cannot delete session-agent \"core\"",
            "session-router.default-route",
        ],
    );
    // Everything shows in the configuration and round-trips through the file.
    let rendered = render_config(&sh.config);
    for part in [
        "session-agent-group\n",
        "local-policy\n",
        "        policy-attributes\n",
        "        next-hop                        core\n",
    ] {
        assert!(rendered.contains(part), "{part}: {rendered}");
    }
    assert_eq!(
        Config::from_toml_str(&sh.config.to_toml_string()).unwrap(),
        sh.config
    );
}

#[test]
fn session_agent_routing_keys_and_translations_are_edited() {
    let mut sh = Shell::new();
    sh.script(&[
        "configure terminal",
        "session-router",
        "translation-rules",
        "id add-hash",
        "type add",
    ]);
    assert_eq!(
        sh.err("done"),
        "translation-rules[0].add-string = \"\": required with type = \"add\" \
         (valid: a non-empty add-string, or another type)"
    );
    contains_all(
        &sh.err("add-index end"),
        &[
            "translation-rules[0].add-index",
            "not a position",
            "$ for the end",
        ],
    );
    sh.script(&["add-string #", "add-index $", "done"]);
    assert_eq!(
        sh.config.translation_rule("add-hash").unwrap().add_index,
        crate::TranslationIndex::End
    );
    sh.script(&["add-index 3", "done"]);
    assert_eq!(
        sh.config.translation_rule("add-hash").unwrap().add_index,
        crate::TranslationIndex::At(3)
    );
    sh.script(&["exit", "session-translation", "id out"]);
    let complete = |sh: &Shell, line: &str| sh.session.complete(line, &sh.config);
    assert_eq!(
        complete(&sh, "rules-called "),
        ["+add-hash", "add-hash", "\"\""]
    );
    assert_eq!(
        sh.err("rules-called nope"),
        "session-translation[0].rules-called[0] = \"nope\": no translation-rules has this id \
         (valid: \"add-hash\")"
    );
    sh.script(&[
        "rules-called add-hash",
        "done",
        "exit",
        "session-agent",
        "select core",
    ]);
    assert_eq!(complete(&sh, "out-translationid "), ["out", "\"\""]);
    assert_eq!(
        sh.err("in-translationid nope"),
        "session-agent[0].in-translationid = \"nope\": no session-translation has this id \
         (valid: \"out\")"
    );
    // Lists of response codes are numbers, edited with +, - or a bare list.
    sh.script(&[
        "out-service-response-codes 503 502",
        "out-service-response-codes +500",
        "out-service-response-codes -502",
        "ping-in-service-response-codes 200",
    ]);
    assert_eq!(
        sh.err("ping-in-service-response-codes +700"),
        "session-agent[0].ping-in-service-response-codes[1] = 700: not a SIP response code of \
         this use (valid: 100..=699)"
    );
    contains_all(
        &sh.err("ping-in-service-response-codes x"),
        &[
            "ping-in-service-response-codes = \"x\"",
            "not a whole number",
        ],
    );
    assert_eq!(
        sh.err("ping-misses 11"),
        "session-agent[0].ping-misses = 11: out of range (valid: 1..=10)"
    );
    assert_eq!(
        sh.err("invite-trans-expire 33"),
        "session-agent[0].invite-trans-expire = 33: out of range (valid: 0..=32)"
    );
    sh.script(&[
        "hostname pbx.example.com",
        "state disabled",
        "ping-interval 30",
        "ping-send-mode continuous",
        "max-sessions 10",
        "max-outbound-sessions 5",
        "out-translationid out",
        "done",
    ]);
    let core = sh.config.session_agent("core").unwrap();
    assert_eq!(core.out_service_response_codes, [503, 500]);
    assert_eq!(core.ping_in_service_response_codes, [200]);
    assert_eq!(core.request_uri_host(), "pbx.example.com");
    assert!(!core.is_enabled());
    assert_eq!(core.ping_send_mode, crate::PingSendMode::Continuous);
    assert_eq!((core.max_sessions, core.max_outbound_sessions), (10, 5));
    assert_eq!(core.out_translationid.as_deref(), Some("out"));
    let text = sh.ok("show");
    assert!(
        text.contains(&shown("out-service-response-codes", "503")),
        "{text}"
    );
    // The session-translation an agent names cannot be deleted.
    sh.script(&["exit", "session-translation"]);
    contains_all(
        &sh.err("no out"),
        &[
            "cannot delete session-translation \"out\"",
            "session-agent[0].out-translationid",
        ],
    );
    // A local-routing-config: its file is the node's to read.
    sh.script(&["exit", "local-routing-config", "name numbers"]);
    contains_all(
        &sh.err("done"),
        &["local-routing-config[0].file-name", "must not be empty"],
    );
    sh.script(&["file-name /etc/sbc/routes.csv", "source-realm core", "done"]);
    assert_eq!(sh.config.local_routing_configs[0].source_realm, ["core"]);
    // sip-config's default INVITE expiry.
    sh.script(&["exit", "sip-config"]);
    assert_eq!(
        sh.err("initial-inv-trans-expire 0"),
        "sip-config.initial-inv-trans-expire = 0: out of range (valid: 1..=32)"
    );
    sh.script(&["initial-inv-trans-expire 6", "done"]);
    assert_eq!(sh.config.sip_config.initial_inv_trans_expire, 6);
    assert_eq!(
        Config::from_toml_str(&sh.config.to_toml_string()).unwrap(),
        sh.config
    );
}

#[test]
fn a_realm_config_attaches_translations_to_a_realm() {
    let mut sh = Shell::new();
    sh.script(&[
        "configure terminal",
        "session-router",
        "translation-rules",
        "id add-plus",
        "type add",
        "add-string +",
        "done",
        "exit",
        "session-translation",
        "id to-e164",
        "rules-called add-plus",
        "done",
        "exit",
        "exit",
        "realm-config",
    ]);
    assert_eq!(sh.prompt(), "sbc(realm-config)#");
    contains_all(
        &sh.err("identifier edge"),
        &[
            "realm-config[0].identifier = \"edge\"",
            "no sip-interface has this realm",
        ],
    );
    sh.ok("identifier core");
    contains_all(
        &sh.err("out-translationid nope"),
        &[
            "realm-config[0].out-translationid = \"nope\"",
            "\"to-e164\"",
        ],
    );
    sh.ok("out-translationid to-e164");
    sh.ok("done");
    assert_eq!(
        sh.config
            .realm_config("core")
            .and_then(|r| r.out_translationid.as_deref()),
        Some("to-e164")
    );
    sh.ok("exit");
    sh.ok("realm-config");
    assert_eq!(sh.ok("select"), "1: core\n");
    assert_eq!(sh.ok("no core"), "deleted realm-config \"core\"\n");
    assert!(sh.config.realm_configs.is_empty());
}

#[test]
fn account_config_and_its_servers_are_edited_as_oracle_s() {
    let mut sh = Shell::new();
    sh.script(&[
        "configure terminal",
        "session-router",
        "account-config",
        "state enabled",
        "strategy roundrobin",
        "file-output enabled",
        "file-path /srv/cdr",
        "account-server",
        "hostname 192.0.2.50",
        "secret radius-s3cret",
    ]);
    assert_eq!(sh.prompt(), "sbc(account-server)#");
    let shown = sh.ok("show");
    assert!(!shown.contains("radius-s3cret"), "{shown}");
    contains_all(&sh.err("port 0"), &["1..=65535"]);
    contains_all(&sh.err("min-round-trip 5"), &["10..=60000"]);
    sh.script(&["done", "exit", "done", "exit", "exit", "exit"]);
    let a = &sh.config.account;
    assert!(a.enabled());
    assert_eq!(a.strategy, crate::AccountStrategy::Roundrobin);
    assert_eq!(a.account_servers.len(), 1);
    assert_eq!(
        a.account_servers[0].address().to_string(),
        "192.0.2.50:1813"
    );
    assert_eq!(a.account_servers[0].secret, "radius-s3cret");
    // A word that is not valid names the valid ones; nothing changes.
    sh.script(&["configure terminal", "session-router", "account-config"]);
    contains_all(
        &sh.err("strategy fastestrtt"),
        &["fastestrtt", "hunt", "failover", "roundrobin"],
    );
    // select the server by its address, and remove it: state enabled with file-output keeps
    // the configuration valid.
    sh.script(&[
        "account-server",
        "select 192.0.2.50:1813",
        "restart-delay 5",
        "done",
        "exit",
    ]);
    assert_eq!(sh.config.account.account_servers[0].restart_delay, 5);
    sh.script(&["account-server", "no 192.0.2.50:1813", "exit", "done"]);
    assert!(sh.config.account.account_servers.is_empty());
}
