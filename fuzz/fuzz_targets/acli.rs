//! The ACLI interpreter: lines (one per input line) run through one session against the
//! embedded default configuration. Nothing may panic, and the configuration being edited is
//! valid after every line: `done` commits only what validates, and nothing else changes it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sbc_config::acli::{OperSpec, Operations, Session};
use sbc_config::Config;

/// A node's operational words, as `sbc::control::oper::OPERATIONS` gives them (the interpreter
/// lists, resolves and completes them and hands a matching line back; the node parses it).
static NODE: Operations = Operations {
    commands: &[
        OperSpec {
            word: "display-alarms",
            help: "list alarms",
            args: &[],
            late: false,
        },
        OperSpec {
            word: "clear-alarm",
            help: "clear an alarm",
            args: &[&[("<id>", "an id")], &[("<task>", "a task")]],
            late: false,
        },
        OperSpec {
            word: "notify",
            help: "notify berpd force",
            args: &[&[("berpd", "berpd")], &[("force", "force")]],
            late: false,
        },
        OperSpec {
            word: "lab",
            help: "lab ballast <MB>",
            args: &[&[("ballast", "ballast")], &[("<MB>", "size")]],
            late: true,
        },
    ],
    show_topics: &[
        ("health", "health"),
        ("sip-stats", "counters"),
        ("tls", "tls"),
        ("sip-trace", "captures"),
    ],
    show_topics_with_args: &["sip-trace"],
};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut session = Session::new(&NODE);
    let mut editing = Config::embedded_default();
    for line in text.lines().take(64) {
        let _ = session.execute(line, &mut editing);
        let _ = session.prompt("sbc");
        let _ = session.complete(line, &editing);
        if let Err(e) = editing.validate() {
            panic!("after {line:?} the edited configuration is invalid: {e}");
        }
    }
});
