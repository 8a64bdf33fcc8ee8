//! The commented example file and the configuration reference, generated from the key tables
//! ([`crate::keys`]).
//!
//! Both are committed (`config/sbc.example.toml`, `docs/configuration-reference.md`); a unit
//! test compares them with what [`example_file`] and [`reference()`] make and fails, naming the
//! file and the first line that differs, when a table changed and they were not regenerated.
//! The test never writes them: `cargo test -p sbc-config -- --ignored regenerate_config_docs`
//! does.

use toml::value::{Table, Value};

use crate::keys::{Dflt, ElementSpec, KeySpec, Ty, ELEMENTS};
use crate::Config;

/// How to regenerate the files, for their headers and the test's message.
pub const REGENERATE: &str = "cargo test -p sbc-config -- --ignored regenerate_config_docs";

/// What the example file and the reference say about an element beyond its one line of help.
fn notes(element: &str) -> &'static str {
    match element {
        "system-config" => {
            "Known options: \"critical-memory-abort=enabled|disabled|switchover\" (absent: disabled). \
             metrics-address and snmp-agent-address take IPv6 as \"[::1]:9100\" (\"[::]:161\" \
             answers IPv4 managers too)."
        }
        "alarm-threshold" => {
            "None by default; at most one per type and severity, values rising with severity \
             (minor < major < critical); a space threshold needs its volume."
        }
        "trap-receiver" => {
            "None by default; v3 receivers name an snmp-user-entry; ip-address IPv4 or IPv6."
        }
        "snmp-community" => {
            "None by default (there is no default community); the agent needs one, or an \
             snmp-user-entry, to answer."
        }
        "snmp-user-entry" => "None by default; authPriv only, SHA and AES-128.",
        "route" => "None by default.",
        "session-router" => {
            "default-route is \"core\" when the file has no [[session-agent]] (the default \
             agent is then in use), otherwise none; never sent back into its own realm. The \
             compatibility form of local-policy: its routes and default-route count as \
             local-policy rows of the highest cost (999999999), after the explicit ones."
        }
        "session-agent-group" => {
            "None by default. Oracle's element (without the LowSusRate strategy); a member is \
             a session-agent."
        }
        "translation-rules" => {
            "None by default. add-index and delete-index are a number (add-index = 3) or \
             \"$\" for the end (add-index = \"$\")."
        }
        "session-translation" => "None by default.",
        "session-timer-profile" => {
            "None by default. A realm-config names it. The SBC refreshes with UPDATE when the \
             leg's peer allows it (and force-reinvite is off), else with a re-INVITE without an \
             offer, the peer's offer then given to the other leg (see the methods chapter)."
        }
        "local-policy" => {
            "None by default (session-router's routes still apply, after these). In the ACLI \
             its next hops are the sub-element policy-attributes, as Oracle's; in the file \
             [[local-policy.policy-attribute]]; a prefix with a leading + is added there as \
             ++prefix (+ adds an item to a list). The preferred next hop: lowest cost, then the \
             longest To match, the shortest To, the longest From match, the shortest From, the \
             narrowest days, the narrowest time window."
        }
        "policy-attributes" => {
            "None by default. A next-hop SAG:<group-name> names a session-agent-group. A \
             window whose end-time is before its start-time spans midnight."
        }
        "local-routing-config" => {
            "None by default. The node loads the file; the configuration checks neither the \
             file nor the next hops its rows name."
        }
        "tls-profile" => {
            "None by default; PEM files, read and checked at start and at every \
             activate-config."
        }
        "sip-interface" => {
            "Absent from the file: exactly the two below (access on 5060, core on 5062); \
             present: the file's list replaces them."
        }
        "session-agent" => {
            "Absent from the file: exactly the one below, and then default-route = \"core\"."
        }
        "redundancy-config" => {
            "Oracle's names and defaults (times in ms), except three shorter failure-detection \
             timers; disabled: the node runs alone. Keep a file with a shared-key 0600. \
             Addresses are IPv4 or IPv6 (witness = \"[2001:db8::3]:7000\")."
        }
        "peer" => {
            "Exactly one primary and one secondary when redundancy is enabled. Destinations are \
             IPv4 or IPv6 (\"[2001:db8::1]:9090\"); the two peers' destinations of one path \
             are of one family."
        }
        "auto-scaling-profile" => {
            "None by default. OpenSIPS's rules: up to 6 on 70% for 4 cycles within 5; down to \
             2 on 18% for 10 cycles (the three scale-down keys together, or none)."
        }
        "access-control" => "None by default.",
        "account-config" => {
            "Disabled by default. spool-path and file-path are node-local (never pushed to the \
             standby: each node spools on its own disk); everything else is pushed. A change \
             takes effect at the next restart. See the accounting chapter of the manual."
        }
        "account-server" => {
            "None by default. hostname IPv4 or IPv6; the secret is masked in every output and \
             never logged. With transport tls the records travel encrypted on one connection, \
             the server proves its name with a certificate from the tls-profile's trusted CAs, \
             and secret is usually RFC 6614's \"radsec\" (set it: there is no default)."
        }
        "capture-agent" => {
            "Disabled by default. address takes IPv6 as \"[2001:db8::9]:9060\". The password \
             is HEP's authentication key and travels in clear with every packet: it tells the \
             server who sends, it protects nothing."
        }
        "filter-config" => {
            "None by default. address and user are Oracle's; realm, session-agent and method \
             are ours."
        }
        "sip-monitoring" => {
            "Disabled by default. Enabled without monitoring-filters, nothing is captured \
             because of the configuration (a capture started from the ACLI at run time still \
             is)."
        }
        "steering-pool" => {
            "Absent from the file: exactly the two below when the sip-interfaces are the \
             default ones too, none when the file has its own. Each even port and the odd one \
             after it (RTP, RTCP) carry one leg; no two pools' ranges overlap, even on different \
             addresses; no range holds a sip-interface's port on the same address."
        }
        _ => "",
    }
}

/// The instances of an element in the embedded default configuration (an empty file), as
/// TOML tables: one for a single element, the default list of a multi-instance one.
fn default_instances(config: &Table, spec: &ElementSpec) -> Vec<Table> {
    let path: Vec<&str> = spec
        .table
        .trim_matches(|c| c == '[' || c == ']')
        .split('.')
        .collect();
    let mut value = config.get(path[0]);
    for part in &path[1..] {
        value = value.and_then(|v| v.get(part));
    }
    match value {
        Some(Value::Table(t)) => vec![t.clone()],
        Some(Value::Array(items)) => items.iter().filter_map(|i| i.as_table().cloned()).collect(),
        _ => Vec::new(),
    }
}

/// The comment after a key: its help and what is valid.
fn comment(key: &KeySpec) -> String {
    match (key.range, key.ty) {
        (Some(_), _) | (None, Ty::Words(_) | Ty::Int(_) | Ty::Index) => {
            format!("{}; {}", key.help, key.valid())
        }
        _ => key.help.to_owned(),
    }
}

/// One `key = value  # help` line; `commented` writes it as `# key = value`.
fn key_line(out: &mut String, key: &KeySpec, value: &str, commented: bool, help: bool) {
    let text = format!(
        "{}{} = {value}",
        if commented { "# " } else { "" },
        key.name
    );
    if help {
        out.push_str(&format!("{text:<36} # {}\n", comment(key)));
    } else {
        out.push_str(&text);
        out.push('\n');
    }
}

/// An example value for a line commented out: the declared example, else the default.
fn example_value(key: &KeySpec) -> String {
    key.example
        .map(str::to_owned)
        .or_else(|| key.default_toml())
        .unwrap_or_else(|| "\"\"".to_owned())
}

/// Wraps `text` into `# ` comment lines of at most 96 characters.
fn comment_block(out: &mut String, text: &str) {
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > 96 {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

/// The commented example file: every element, every key with its default (or, for a key
/// without one, an example, commented out) and its help. Read as a configuration, it equals
/// an empty file.
#[must_use]
pub fn example_file() -> String {
    let config = Config::embedded_default().to_toml_value();
    let mut out = String::new();
    comment_block(
        &mut out,
        "sbc configuration: every key with its default, so this file equals an empty one. \
         Keys are ACLI words in kebab-case; an unknown key is an error. Lines commented out \
         show keys without a default and elements absent by default, with example values.",
    );
    out.push_str(&format!(
        "# Generated from the key tables (config/src/keys.rs): do not edit; regenerate with\n\
         #   {REGENERATE}\n\
         # Reference: docs/configuration-reference.md\n"
    ));
    for spec in ELEMENTS {
        out.push('\n');
        comment_block(
            &mut out,
            &format!("{}: {}. {}", spec.name, spec.help, notes(spec.name)),
        );
        let instances = default_instances(&config, spec);
        if instances.is_empty() {
            out.push_str(&format!("# {}\n", spec.table));
            for key in spec.keys {
                key_line(&mut out, key, &example_value(key), true, true);
            }
            continue;
        }
        for (n, instance) in instances.iter().enumerate() {
            if n > 0 {
                out.push('\n');
            }
            out.push_str(spec.table);
            out.push('\n');
            for key in spec.keys {
                match instance.get(key.name) {
                    Some(value) => key_line(&mut out, key, &value.to_string(), false, n == 0),
                    None => key_line(&mut out, key, &example_value(key), true, n == 0),
                }
            }
        }
    }
    out
}

/// How the reference names a type.
fn type_name(ty: Ty) -> String {
    match ty {
        Ty::Str => "string".to_owned(),
        Ty::Int(_) => "integer".to_owned(),
        Ty::Bool => "boolean".to_owned(),
        Ty::Words(_) => "keyword".to_owned(),
        Ty::Ip => "IP address".to_owned(),
        Ty::Addr => "address:port".to_owned(),
        Ty::List(item) => format!("list of {}", type_name(*item)),
        Ty::Index => "integer or \"$\"".to_owned(),
    }
}

/// A Markdown table cell: `|` escaped.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The configuration reference: one section per element (Oracle's names), one row per key
/// with its type, default, what is valid and its help.
#[must_use]
pub fn reference() -> String {
    let mut out = String::from("# Configuration reference\n\n");
    out.push_str(&format!(
        "<!-- Generated from the key tables (config/src/keys.rs): do not edit; regenerate with\n     \
         {REGENERATE} -->\n\n"
    ));
    out.push_str(
        "The configuration of a node is one TOML file (`sbc --config <file>`); the ACLI edits \
         the same elements and keys (`configure terminal`, then the element's word). Keys are \
         Oracle's ACLI words in kebab-case; an empty file is valid and every key has the \
         default below; an unknown key is refused. The commented example file \
         [`config/sbc.example.toml`](../config/sbc.example.toml) shows every key with its \
         default. In the ACLI a boolean is `enabled` or `disabled`, an optional key is \
         cleared with `none` (a string with `\"\"`), and a list is edited with `+item`, \
         `-item` or a bare list.\n\n",
    );
    for spec in ELEMENTS {
        out.push_str(&format!(
            "- [`{}`](#{}): {}\n",
            spec.name, spec.name, spec.help
        ));
    }
    for spec in ELEMENTS {
        out.push_str(&format!("\n## {}\n\n", spec.name));
        out.push_str(&format!(
            "{}. In the file: `{}`.",
            upper_first(spec.help),
            spec.table
        ));
        let notes = notes(spec.name);
        if !notes.is_empty() {
            out.push(' ');
            out.push_str(notes);
        }
        out.push_str("\n\n| Key | Type | Default | Valid | Description |\n");
        out.push_str("|---|---|---|---|---|\n");
        for key in spec.keys {
            let default = match key.default {
                Dflt::Unset => "none".to_owned(),
                Dflt::Required => "required".to_owned(),
                _ => format!("`{}`", key.default_toml().unwrap_or_default()),
            };
            out.push_str(&format!(
                "| `{}` | {} | {} | {} | {} |\n",
                key.name,
                cell(&type_name(key.ty)),
                cell(&default),
                cell(&key.valid()),
                cell(key.help)
            ));
        }
    }
    out
}

fn upper_first(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().collect::<String>() + chars.as_str()
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::{example_file, reference, REGENERATE};
    use crate::Config;

    /// The committed files and what the tables make of them.
    fn generated() -> [(PathBuf, String); 2] {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        [
            (root.join("sbc.example.toml"), example_file()),
            (root.join("../docs/configuration-reference.md"), reference()),
        ]
    }

    #[test]
    fn the_committed_example_file_and_reference_are_what_the_key_tables_generate() {
        for (path, want) in generated() {
            let have = std::fs::read_to_string(&path).unwrap_or_default();
            if have == want {
                continue;
            }
            let first = have
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
            panic!(
                "{} differs from what the key tables generate (first at line {}: committed \
                 {:?}, generated {:?}); regenerate it with `{REGENERATE}`",
                path.display(),
                first + 1,
                have.lines().nth(first).unwrap_or("(end of file)"),
                want.lines().nth(first).unwrap_or("(end of file)"),
            );
        }
    }

    #[test]
    fn the_example_file_equals_an_empty_one() {
        let config = Config::from_toml_str(&example_file());
        assert_eq!(config.ok(), Some(Config::embedded_default()));
    }

    /// Writes the files (`cargo test -p sbc-config -- --ignored regenerate_config_docs`).
    #[test]
    #[ignore = "writes the committed files; run by hand after changing a key table"]
    fn regenerate_config_docs() {
        for (path, text) in generated() {
            if let Err(err) = std::fs::write(&path, text) {
                panic!("cannot write {}: {err}", path.display());
            }
        }
    }
}
