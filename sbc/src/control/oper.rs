//! The node's operational commands: their table for the ACLI interpreter ([`OPERATIONS`]: words,
//! help, argument completion), the typed [`OperCommand`] and its parser.
//!
//! The configuration crate's interpreter ([`sbc_config::acli`]) knows the words only: it lists
//! them in `?`, resolves abbreviations and completes arguments from [`OPERATIONS`], and hands a
//! line that names one back as an [`OperLine`]. [`OperCommand::parse`] turns that into a typed
//! command (or the error the operator sees); the console carries it out.

use std::net::IpAddr;

use ipnet::IpNet;
use sbc_config::acli::{no_args, resolve_arg, OperLine, OperSpec, Operations};
use sbc_proto::trace::capture::TraceFilter;

/// How `show sip-trace <id>` shows a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceView {
    /// Both legs as a ladder, one line per message.
    Ladder,
    /// Every message whole.
    Full,
    /// The capture as JSON.
    Json,
    /// The capture as pcap, for the client to write (`--pcap FILE` in `sbc acli`).
    Pcap,
}

/// What `capture` takes, for its usage line.
const CAPTURE_USAGE: &str = "capture start|stop <global | realm <realm> | session-agent <name>> \
     <* | user <user> | addr-prefix <address[/len]> | method <METHOD>>";

/// The operational commands, which the node carries out and answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperCommand {
    /// `show health`: the health score, what took points off it, sync state.
    ShowHealth,
    /// `show redundancy`: role, state, peer, epochs.
    ShowRedundancy,
    /// `show memory`: memory and heap utilisation against their limits.
    ShowMemory,
    /// `display-alarms` (also `show alarms`): the alarm table.
    DisplayAlarms,
    /// `clear-alarm <id> <task>`: clear one alarm.
    ClearAlarm {
        /// The alarm id, as `display-alarms` shows it.
        id: u32,
        /// The task that raised it, as `display-alarms` shows it.
        task: String,
    },
    /// `show sip-stats`: SIP counters.
    ShowSipStats,
    /// `show workers`: worker groups and their loads.
    ShowWorkers,
    /// `show session-agents`.
    ShowSessionAgents,
    /// `show local-routing`.
    ShowLocalRouting,
    /// `show dialogs`: the dialog table.
    ShowDialogs,
    /// `show registrations`: the registration cache's bindings and counters.
    ShowRegistrations,
    /// `show subscriptions`: the subscription dialogs and their counters.
    ShowSubscriptions,
    /// `clear-registration <aor>`: forget an address of record's bindings (its phones
    /// register again on their next refresh).
    ClearRegistration {
        /// The address of record, as `show registrations` shows it.
        aor: String,
    },
    /// `show media`: the media sessions (anchored calls, their ports and latching) and the
    /// steering pools.
    ShowMedia,
    /// `show access-control`: the sources denied now, the operator's lists, the counters.
    ShowAccessControl,
    /// `show tls`: the TLS profiles' certificates, their expiry, the TLS connection counters.
    ShowTls,
    /// `show accounting`: the accounting servers and their state, the spool, the records.
    ShowAccounting,
    /// `clear-deny <address | prefix>`: lift a source's dynamic deny (an IPv6 source is a
    /// prefix: any address of it, or the prefix, names it).
    ClearDeny {
        /// The source: an address (a host prefix) or a prefix.
        address: IpNet,
    },
    /// `show sip-trace [<id> [full | json | pcap]]`: the captures kept, or one of them.
    ShowSipTrace {
        /// The capture to show (`None`: the list).
        id: Option<u64>,
        /// How to show it.
        view: TraceView,
    },
    /// `capture start|stop <main filter> <subfilter>`: a live filter of the SIP monitor, as
    /// Oracle's dynamic filter commands.
    Capture {
        /// Start (`true`) or stop it.
        start: bool,
        /// The filter.
        filter: TraceFilter,
    },
    /// `clear-sip-trace`: forget every capture kept.
    ClearSipTrace,
    /// `notify berpd force`: force a switchover.
    NotifyBerpdForce,
    /// `reboot`: restart the node process.
    Reboot,
    /// `lab ballast <MB>`: set the lab memory ballast to this size. Only parsed when the
    /// editing config has `lab-mode` enabled; the node must also check its running config.
    LabBallast {
        /// The ballast size in MiB (0 releases it).
        mb: u64,
    },
}

/// The node's operational grammar, which every ACLI session is given.
pub static OPERATIONS: Operations = Operations {
    commands: &[
        OperSpec {
            word: "display-alarms",
            help: "list raised alarms: id, task, severity, count, first and last time",
            args: &[],
            late: false,
        },
        OperSpec {
            word: "clear-alarm",
            help: "clear-alarm <id> <task>: clear a raised alarm",
            args: &[
                &[("<id>", "alarm id, as display-alarms shows it")],
                &[("<task>", "task, as display-alarms shows it")],
            ],
            late: false,
        },
        OperSpec {
            word: "clear-deny",
            help: "clear-deny <address | prefix>: let a source denied for its rate in again",
            args: &[&[("<address | prefix>", "a source show access-control lists")]],
            late: false,
        },
        OperSpec {
            word: "clear-registration",
            help: "clear-registration <aor>: forget an address of record's cached bindings",
            args: &[&[("<aor>", "an address of record, as show registrations shows it")]],
            late: false,
        },
        OperSpec {
            word: "capture",
            help: "capture start|stop <global|realm R|session-agent A> <*|user U|addr-prefix P|method M>: a live trace filter",
            args: &[
                &[("start", "start a live filter"), ("stop", "stop a live filter")],
                &[
                    ("global", "every realm and agent"),
                    ("realm", "realm <realm>: messages of one realm"),
                    ("session-agent", "session-agent <name>: messages to and from one agent"),
                ],
            ],
            late: false,
        },
        OperSpec {
            word: "clear-sip-trace",
            help: "forget every capture the SIP monitor keeps",
            args: &[],
            late: false,
        },
        OperSpec {
            word: "notify",
            help: "notify berpd force: force a switchover to the standby",
            args: &[
                &[("berpd", "the redundancy process")],
                &[("force", "force a switchover")],
            ],
            late: false,
        },
        OperSpec {
            word: "reboot",
            help: "restart the node process (clears its alarms and health)",
            args: &[],
            late: false,
        },
        OperSpec {
            word: "lab",
            help: "lab ballast <MB>: set the memory ballast (lab-mode only)",
            args: &[
                &[("ballast", "the memory ballast")],
                &[("<MB>", "ballast size in MiB (0 releases it)")],
            ],
            late: true,
        },
    ],
    show_topics: &[
        (
            "health",
            "health score, what took points off it, sync state",
        ),
        ("redundancy", "role, state and peer of the pair"),
        ("memory", "memory and heap utilisation"),
        ("alarms", "the alarm table (as display-alarms)"),
        ("sip-stats", "SIP counters"),
        ("workers", "worker groups and their loads"),
        (
            "session-agents",
            "session-agents: in or out of service, sessions, pings and their round trip",
        ),
        (
            "local-routing",
            "route files (local-routing-config) loaded: rows, prefixes, sha256",
        ),
        ("dialogs", "the dialog table"),
        (
            "registrations",
            "cached registrations: address of record, phone contact, flow, expiries",
        ),
        (
            "subscriptions",
            "subscription dialogs (SUBSCRIBE, REFER): event, both legs, expiry, NOTIFYs",
        ),
        (
            "media",
            "anchored media sessions, their ports and latching, the steering pools",
        ),
        (
            "access-control",
            "sources denied now, the allow and deny lists, rate counters",
        ),
        (
            "tls",
            "TLS certificates loaded, their expiry, TLS connections and handshakes",
        ),
        (
            "sip-trace",
            "the SIP monitor's captures; sip-trace <id> [full | json | pcap] shows one",
        ),
        (
            "accounting",
            "accounting servers and their state, the spool, records sent, retried, refused",
        ),
    ],
    show_topics_with_args: &["sip-trace"],
};

/// Writes a word for messages: `"x"`.
fn quoted(s: &str) -> String {
    format!("{s:?}")
}

impl OperCommand {
    /// The command an [`OperLine`] names, or why not (the message the operator sees).
    /// `lab_mode` is the editing configuration's `system-config lab-mode`.
    ///
    /// # Errors
    /// A message naming the wrong word and what is valid, as the interpreter's own.
    pub fn parse(line: &OperLine, lab_mode: bool) -> Result<Self, String> {
        let word = line.command;
        let args = line.args.as_slice();
        match word {
            "show" => match args.first().map(String::as_str) {
                Some("health") => Ok(Self::ShowHealth),
                Some("redundancy") => Ok(Self::ShowRedundancy),
                Some("memory") => Ok(Self::ShowMemory),
                Some("alarms") => Ok(Self::DisplayAlarms),
                Some("sip-stats") => Ok(Self::ShowSipStats),
                Some("workers") => Ok(Self::ShowWorkers),
                Some("session-agents") => Ok(Self::ShowSessionAgents),
                Some("local-routing") => Ok(Self::ShowLocalRouting),
                Some("dialogs") => Ok(Self::ShowDialogs),
                Some("registrations") => Ok(Self::ShowRegistrations),
                Some("subscriptions") => Ok(Self::ShowSubscriptions),
                Some("media") => Ok(Self::ShowMedia),
                Some("access-control") => Ok(Self::ShowAccessControl),
                Some("tls") => Ok(Self::ShowTls),
                Some("accounting") => Ok(Self::ShowAccounting),
                Some("sip-trace") => parse_show_sip_trace(&args[1..]),
                _ => Err(format!("\"show\" topic not answered: {}", args.join(" "))),
            },
            "display-alarms" => {
                no_args(word, args)?;
                Ok(Self::DisplayAlarms)
            }
            "clear-alarm" => {
                let usage = "clear-alarm <id> <task> (both as display-alarms shows them)";
                let [id, task] = args else {
                    return Err(format!(
                        "\"clear-alarm\" takes an alarm id and a task, got {} word(s): valid: {usage}",
                        args.len()
                    ));
                };
                let id = id
                    .parse::<u32>()
                    .map_err(|_| format!("{} is not an alarm id: valid: {usage}", quoted(id)))?;
                Ok(Self::ClearAlarm {
                    id,
                    task: task.clone(),
                })
            }
            "clear-registration" => {
                let [aor] = args else {
                    return Err(format!(
                        "\"clear-registration\" takes one address of record, got {} word(s): \
                         valid: clear-registration <aor> (as show registrations shows it)",
                        args.len()
                    ));
                };
                Ok(Self::ClearRegistration { aor: aor.clone() })
            }
            "clear-deny" => {
                let usage = "clear-deny <address | prefix> (as show access-control lists it)";
                let [addr] = args else {
                    return Err(format!(
                        "\"clear-deny\" takes one address, got {} word(s): valid: {usage}",
                        args.len()
                    ));
                };
                let address = addr
                    .parse::<IpAddr>()
                    .map(IpNet::from)
                    .or_else(|_| addr.parse::<IpNet>())
                    .map_err(|_| {
                        format!(
                            "{} is not an IP address or prefix: valid: {usage}",
                            quoted(addr)
                        )
                    })?;
                Ok(Self::ClearDeny { address })
            }
            "capture" => parse_capture(args),
            "clear-sip-trace" => {
                no_args(word, args)?;
                Ok(Self::ClearSipTrace)
            }
            "notify" => {
                let [berpd, force] = args else {
                    return Err("\"notify\" takes two words: valid: notify berpd force".to_owned());
                };
                resolve_arg("notify", berpd, &["berpd"])?;
                resolve_arg("notify berpd", force, &["force"])?;
                Ok(Self::NotifyBerpdForce)
            }
            "reboot" => {
                no_args(word, args)?;
                Ok(Self::Reboot)
            }
            "lab" => {
                let [ballast, mb] = args else {
                    return Err("\"lab\" takes two words: valid: lab ballast <MB>".to_owned());
                };
                resolve_arg("lab", ballast, &["ballast"])?;
                let mb = mb.parse::<u64>().map_err(|_| {
                    format!(
                        "{} is not a size: valid: lab ballast <MB> (0 releases it)",
                        quoted(mb)
                    )
                })?;
                if !lab_mode {
                    return Err(
                        "\"lab\" is refused: system-config lab-mode is disabled (valid only with lab-mode enabled)"
                            .to_owned(),
                    );
                }
                Ok(Self::LabBallast { mb })
            }
            other => Err(format!("unknown command {}", quoted(other))),
        }
    }
}

/// `show sip-trace [<id> [full | json | pcap]]` (`--full` and `--json` too).
fn parse_show_sip_trace(args: &[String]) -> Result<OperCommand, String> {
    let usage = "show sip-trace [<id> [full | json | pcap]]";
    let Some((id, rest)) = args.split_first() else {
        return Ok(OperCommand::ShowSipTrace {
            id: None,
            view: TraceView::Ladder,
        });
    };
    let id = id
        .parse::<u64>()
        .map_err(|_| format!("{} is not a capture id: valid: {usage}", quoted(id)))?;
    let view = match rest {
        [] => TraceView::Ladder,
        [word] => {
            let word = word.trim_start_matches('-');
            match resolve_arg("show sip-trace <id>", word, &["full", "json", "pcap"])? {
                "full" => TraceView::Full,
                "json" => TraceView::Json,
                _ => TraceView::Pcap,
            }
        }
        [_, extra, ..] => {
            return Err(format!(
                "unexpected word {} after the view: valid: {usage}",
                quoted(extra)
            ))
        }
    };
    Ok(OperCommand::ShowSipTrace { id: Some(id), view })
}

/// `capture start|stop <main filter> <subfilter>` into a filter.
fn parse_capture(args: &[String]) -> Result<OperCommand, String> {
    let Some((action, rest)) = args.split_first() else {
        return Err(format!(
            "\"capture\" needs start or stop: valid: {CAPTURE_USAGE}"
        ));
    };
    let start = resolve_arg("capture", action, &["start", "stop"])? == "start";
    let mut filter = TraceFilter::default();
    let rest = match rest.split_first() {
        None => {
            return Err(format!(
                "\"capture\" needs a main filter: valid: {CAPTURE_USAGE}"
            ))
        }
        Some((main, rest)) => {
            match resolve_arg(
                "capture start|stop",
                main,
                &["global", "realm", "session-agent"],
            )? {
                "global" => rest,
                which => {
                    let Some((name, rest)) = rest.split_first() else {
                        return Err(format!("\"{which}\" needs a name: valid: {CAPTURE_USAGE}"));
                    };
                    if which == "realm" {
                        filter.realm = Some(name.clone());
                    } else {
                        filter.agent = Some(name.clone());
                    }
                    rest
                }
            }
        }
    };
    match rest {
        [star] if star == "*" => {}
        [sub, value] => match resolve_arg(
            "capture's subfilter",
            sub,
            &["user", "addr-prefix", "method"],
        )? {
            "user" => filter.user = Some(value.clone()),
            "addr-prefix" => {
                filter.address = Some(
                    value
                        .parse::<IpAddr>()
                        .map(IpNet::from)
                        .or_else(|_| value.parse::<IpNet>())
                        .map_err(|_| {
                            format!(
                                "{} is not an IP address or prefix: valid: {CAPTURE_USAGE}",
                                quoted(value)
                            )
                        })?,
                );
            }
            _ => {
                if value.is_empty() || !value.bytes().all(|b| b.is_ascii_uppercase()) {
                    return Err(format!(
                        "{} is not a SIP method (upper-case letters): valid: {CAPTURE_USAGE}",
                        quoted(value)
                    ));
                }
                filter.method = Some(value.clone());
            }
        },
        _ => {
            return Err(format!(
                "\"capture\" needs a subfilter (* or one of user, addr-prefix, method with its value): valid: {CAPTURE_USAGE}"
            ))
        }
    }
    Ok(OperCommand::Capture { start, filter })
}

#[cfg(test)]
mod tests {
    use sbc_config::acli::{LifecycleCommand, Reply, Session};
    use sbc_config::Config;

    use super::{OperCommand, OPERATIONS};

    /// Runs `line` in a fresh session of the node's table and parses what it hands back.
    fn run(line: &str, lab_mode: bool) -> Result<OperCommand, String> {
        let mut config = Config::embedded_default();
        match Session::new(&OPERATIONS).execute(line, &mut config) {
            Reply::Operational(oper) => OperCommand::parse(&oper, lab_mode),
            Reply::Error(message) => Err(message),
            other => panic!("{line:?} gave {other:?}"),
        }
    }

    #[test]
    fn every_operational_line_parses_to_its_command() {
        let cases = [
            ("show health", OperCommand::ShowHealth),
            ("show redundancy", OperCommand::ShowRedundancy),
            ("show memory", OperCommand::ShowMemory),
            ("show alarms", OperCommand::DisplayAlarms),
            ("display-alarms", OperCommand::DisplayAlarms),
            ("disp", OperCommand::DisplayAlarms),
            ("show sip-stats", OperCommand::ShowSipStats),
            ("show workers", OperCommand::ShowWorkers),
            ("show session-agents", OperCommand::ShowSessionAgents),
            ("show local-routing", OperCommand::ShowLocalRouting),
            ("show dialogs", OperCommand::ShowDialogs),
            ("show registrations", OperCommand::ShowRegistrations),
            ("show subscriptions", OperCommand::ShowSubscriptions),
            (
                "clear-registration sip:alice@example.test",
                OperCommand::ClearRegistration {
                    aor: "sip:alice@example.test".into(),
                },
            ),
            ("show media", OperCommand::ShowMedia),
            ("SHOW MED", OperCommand::ShowMedia),
            ("show access-control", OperCommand::ShowAccessControl),
            ("show tls", OperCommand::ShowTls),
            ("show accounting", OperCommand::ShowAccounting),
            ("notify berpd force", OperCommand::NotifyBerpdForce),
            ("notify b f", OperCommand::NotifyBerpdForce),
            ("reboot", OperCommand::Reboot),
            (
                "clear-alarm 7 memory",
                OperCommand::ClearAlarm {
                    id: 7,
                    task: "memory".into(),
                },
            ),
            (
                "clear-deny 192.0.2.7",
                OperCommand::ClearDeny {
                    address: std::net::IpAddr::from([192, 0, 2, 7]).into(),
                },
            ),
            (
                "clear-deny fd00:64::/64",
                OperCommand::ClearDeny {
                    address: "fd00:64::/64".parse().expect("net"),
                },
            ),
            (
                "clear-deny fd00:64::9",
                OperCommand::ClearDeny {
                    address: "fd00:64::9/128".parse().expect("net"),
                },
            ),
        ];
        for (line, want) in cases {
            assert_eq!(run(line, false), Ok(want), "{line}");
        }
    }

    #[test]
    fn sip_trace_and_capture_lines_parse_to_their_commands() {
        use super::TraceView;
        use sbc_proto::trace::capture::TraceFilter;
        let show = |id, view| OperCommand::ShowSipTrace { id, view };
        assert_eq!(
            run("show sip-trace", false),
            Ok(show(None, TraceView::Ladder))
        );
        assert_eq!(
            run("show sip-t 12", false),
            Ok(show(Some(12), TraceView::Ladder))
        );
        assert_eq!(
            run("show sip-trace 12 full", false),
            Ok(show(Some(12), TraceView::Full))
        );
        assert_eq!(
            run("show sip-trace 12 --json", false),
            Ok(show(Some(12), TraceView::Json))
        );
        assert_eq!(
            run("show sip-trace 12 pcap", false),
            Ok(show(Some(12), TraceView::Pcap))
        );
        assert_eq!(
            run("clear-sip-trace", false),
            Ok(OperCommand::ClearSipTrace)
        );
        let err = |line: &str| run(line, false).err().unwrap_or_default();
        assert!(err("show sip-trace x").contains("\"x\" is not a capture id"));
        assert!(err("show sip-trace 1 sideways").contains("full"));
        assert_eq!(
            run("capture start global user alice", false),
            Ok(OperCommand::Capture {
                start: true,
                filter: TraceFilter {
                    user: Some("alice".into()),
                    ..TraceFilter::default()
                },
            })
        );
        assert_eq!(
            run(
                "capture stop session-agent pbx addr-prefix 127.0.0.0/8",
                false
            ),
            Ok(OperCommand::Capture {
                start: false,
                filter: TraceFilter {
                    agent: Some("pbx".into()),
                    address: Some("127.0.0.0/8".parse().expect("net")),
                    ..TraceFilter::default()
                },
            })
        );
        assert_eq!(
            run("capture start realm core method REGISTER", false),
            Ok(OperCommand::Capture {
                start: true,
                filter: TraceFilter {
                    realm: Some("core".into()),
                    method: Some("REGISTER".into()),
                    ..TraceFilter::default()
                },
            })
        );
        assert_eq!(
            run("capture start global *", false),
            Ok(OperCommand::Capture {
                start: true,
                filter: TraceFilter::default(),
            })
        );
        assert!(err("capture start global").contains("needs a subfilter"));
        assert!(err("capture start realm").contains("needs a name"));
        assert!(err("capture go global *").contains("start"));
        assert!(err("capture start global method invite").contains("not a SIP method"));
        assert!(err("capture start global addr-prefix nowhere").contains("not an IP address"));
    }

    #[test]
    fn wrong_arguments_name_the_word_and_what_is_valid() {
        let err = |line: &str| run(line, false).err().unwrap_or_default();
        assert!(err("notify berpd").contains("notify berpd force"));
        assert_eq!(
            err("reboot now"),
            "unexpected word \"now\" after \"reboot\": \"reboot\" takes no argument"
        );
        assert_eq!(
            err("clear-alarm x task"),
            "\"x\" is not an alarm id: valid: clear-alarm <id> <task> (both as display-alarms \
             shows them)"
        );
        assert!(err("clear-alarm 3").contains("clear-alarm <id> <task>"));
        assert!(err("clear-deny nowhere").contains("\"nowhere\" is not an IP address or prefix"));
        assert!(err("show media now").contains("takes no argument"));
        assert!(err("show me").contains("ambiguous word \"me\""));
    }

    #[test]
    fn lab_ballast_needs_lab_mode() {
        assert!(run("lab ballast 64", false)
            .err()
            .unwrap_or_default()
            .contains("lab-mode is disabled"));
        assert_eq!(
            run("lab ballast 64", true),
            Ok(OperCommand::LabBallast { mb: 64 })
        );
        assert!(run("lab ballast lots", true)
            .err()
            .unwrap_or_default()
            .contains("\"lots\" is not a size"));
    }

    #[test]
    fn the_top_level_lists_the_node_s_commands_in_the_acli_s_order() {
        let mut config = Config::embedded_default();
        let mut session = Session::new(&OPERATIONS);
        assert_eq!(
            session.execute("sytem", &mut config),
            Reply::Error(
                "unknown command \"sytem\": valid here: configure, show, display-alarms, \
                 clear-alarm, clear-deny, clear-registration, capture, clear-sip-trace, notify, reboot, save-config, \
                 activate-config, verify-config, lab, exit"
                    .to_owned()
            )
        );
        assert_eq!(
            session.execute("show conf", &mut config),
            Reply::Lifecycle(LifecycleCommand::ShowConfiguration)
        );
        let help = session.help();
        let show = help
            .iter()
            .find(|(w, _)| w == "show")
            .map(|(_, h)| h.as_str());
        assert_eq!(
            show,
            Some(
                "show health | redundancy | memory | alarms | sip-stats | workers | \
                 session-agents | local-routing | dialogs | registrations | subscriptions | media | \
                 access-control | tls | sip-trace | accounting | running-config | configuration"
            )
        );
        assert_eq!(
            session.complete("clear-alarm ", &config),
            Vec::<String>::new()
        );
        assert_eq!(session.complete("notify b", &config), vec!["berpd"]);
        assert_eq!(
            session.complete("lab ballast ", &config),
            Vec::<String>::new()
        );
    }
}
