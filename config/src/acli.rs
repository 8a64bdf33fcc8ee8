//! The ACLI interpreter: Oracle's command tree over a [`Config`], one line at a time.
//!
//! Pure: no socket, no terminal, no clock. A node holds one [`Session`] per management
//! connection and one **editing** [`Config`] shared by all of them; each line goes through
//! [`Session::execute`], which either answers it ([`Reply::Text`], [`Reply::Error`]), changes
//! the session's place in the tree, commits an element into the editing config, or hands a
//! command back for the node to carry out ([`Reply::Operational`], [`Reply::Lifecycle`]).
//!
//! # The tree
//!
//! ```text
//! sbc#                        configure terminal, show …, display-alarms, clear-alarm <id> <task>,
//!                             clear-deny <address>,
//!                             notify berpd force, reboot, save-config, activate-config,
//!                             verify-config, lab ballast <MB>, exit
//! sbc(configure)#             system, session-router, sip-interface, redundancy, security,
//!                             auto-scaling-profile, media-manager, steering-pool, show …, exit
//! sbc(system)#                system-config, capture-agent
//! sbc(session-router)#        sip-config, session-router, session-agent, sip-interface,
//!                             access-control, filter-config, sip-monitoring,
//!                             session-agent-group, local-policy, local-routing-config,
//!                             translation-rules, session-translation, session-timer-profile,
//!                             account-config
//! sbc(redundancy)#            redundancy-config
//! sbc(security)#              tls-profile
//! sbc(system-config)#         attributes; alarm-threshold, trap-receiver
//! sbc(redundancy-config)#     attributes; peer
//! sbc(local-policy)#          attributes; policy-attributes
//! sbc(account-config)#        attributes; account-server
//! ```
//!
//! # Editing an element (Oracle's rules)
//!
//! - Entering a single-instance element (`system-config`, `sip-config`, `session-router`,
//!   `redundancy-config`, `media-manager`, `sip-monitoring`, `capture-agent`) loads its
//!   committed value into a **working copy** (Oracle needs a `select` first; here it is
//!   implied, and `select` reloads).
//! - Entering a multi-instance element (`sip-interface`, `session-agent`,
//!   `auto-scaling-profile`, `access-control`, `steering-pool`, `tls-profile`, `filter-config`,
//!   `session-agent-group`, `local-policy` (keyed by from-address to-address source-realm,
//!   each list joined with commas: `select * 1555 access`), `policy-attributes` (keyed by
//!   next-hop), `local-routing-config`, `translation-rules`, `session-translation`,
//!   `session-timer-profile`, `alarm-threshold`, `trap-receiver`, `peer`) starts a **new
//!   instance** with defaults, as in Oracle; `select <key>` (or `select <n>`, or bare `select`
//!   to list them) edits an existing one instead, and `no <key>` (bare `no`: the selected one)
//!   deletes one, as Oracle's `no` does.
//! - `<attribute> <value>` changes the working copy only; a value of the wrong type, a word that
//!   is not valid, or a value the validator refuses for that very attribute (out of range, a
//!   duplicate name, an unknown option) is refused at once; rules that involve other
//!   attributes or elements are checked by `done`.
//!   List attributes (`options`, `destinations`, `transports`) take `+item` (add or replace),
//!   `-item` (remove) or a bare list (replace all); `""` empties a list or clears an optional
//!   attribute (`none` too, for a non-string one).
//! - `done` validates the **whole** editing configuration with the working copy applied: if it
//!   passes, the element is committed to the editing config, and nothing changes otherwise
//!   (the error names the key). A sub-element (`alarm-threshold`, `trap-receiver`, `peer`,
//!   `policy-attributes`) is committed with its parent: its `done` puts it into the parent's
//!   working copy and commits that too, pending parent changes included, so that both
//!   Oracle's order (`done`, `exit`, `done`) and the shorter `done`, `exit`, `exit` keep the
//!   change. In a list, `+item` adds: an item that itself starts with `+` (a number with its
//!   `+`) is added as `++item`.
//! - `exit` leaves the element; changes not `done` are discarded, and the reply says so.
//!
//! Keywords (commands, attribute names, enumerated values) are case-insensitive and may be
//! abbreviated to any unique prefix (`conf t`). `?` at the end of a line lists what is valid
//! there, with one line of help each. Every error names the word that is wrong and what is
//! valid there.

mod element;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::mem;

use toml::value::Value;

use crate::error::{quoted, ConfigError};
use crate::model::{split_option, KNOWN_OPTIONS};
use crate::Config;

use crate::keys::Ty;
use element::{
    list_item_value, parse_scalar, top_list, top_put, top_remove, top_single, Attr, Kind,
};
pub use element::{render_config, render_element, Element};

/// What the node does with a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Output to print (may be empty).
    Text(String),
    /// The line was refused; the message names the wrong word and what is valid. Nothing
    /// changed.
    Error(String),
    /// An operational command for the node to parse and execute.
    Operational(OperLine),
    /// A configuration lifecycle command for the node to execute.
    Lifecycle(LifecycleCommand),
    /// `exit` at the top level: close the session.
    Exit,
}

/// An operational line for the node to parse and carry out: the command word, resolved to the
/// spelling of the node's [`Operations`] table, and the words after it as typed. A `show` of a
/// topic the node answers is `show` with the topic, resolved, as its one argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperLine {
    /// The command's word: `"show"`, `"display-alarms"`, `"clear-alarm"`, …
    pub command: &'static str,
    /// The words after it (for `show`, the full topic word).
    pub args: Vec<String>,
}

/// One operational command of the node: the interpreter lists it in `?`, resolves its word
/// (any case, any unique prefix) and completes its arguments; the node parses the arguments.
#[derive(Debug)]
pub struct OperSpec {
    /// The command word.
    pub word: &'static str,
    /// One line of help for `?`.
    pub help: &'static str,
    /// What `?` and completion offer for each argument, in order: a word, or a `<placeholder>`
    /// (shown by `?`, never completed), with its help.
    pub args: &'static [&'static [(&'static str, &'static str)]],
    /// Listed after the configuration lifecycle commands (the lab's commands) rather than
    /// before them.
    pub late: bool,
}

/// The node's operational grammar, which each [`Session`] is given: the configuration crate
/// knows the words, the node knows what they mean.
#[derive(Debug)]
pub struct Operations {
    /// The top-level operational commands, in `?` order.
    pub commands: &'static [OperSpec],
    /// The `show` topics the node answers, in `?` order, before the configuration's own
    /// (`running-config`, `configuration`).
    pub show_topics: &'static [(&'static str, &'static str)],
    /// The node's `show` topics that take words after them (`show sip-trace 7 full`): the
    /// interpreter hands those words to the node, which parses them; any other topic refuses
    /// them.
    pub show_topics_with_args: &'static [&'static str],
}

impl Operations {
    /// No operational command at all (a session that only edits configuration).
    pub const NONE: Self = Self {
        commands: &[],
        show_topics: &[],
        show_topics_with_args: &[],
    };
}

/// The configuration lifecycle commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleCommand {
    /// `save-config`: write the editing config to the file (atomically, keeping a backup).
    SaveConfig,
    /// `activate-config`: apply the saved config to the running node.
    ActivateConfig,
    /// `verify-config`: check the editing config.
    VerifyConfig,
    /// `show configuration`: print the editing (saved, not yet active) config.
    ShowConfiguration,
    /// `show running-config`: print the running config.
    ShowRunningConfig,
}

/// One management connection's place in the tree and its working copies.
#[derive(Debug, Clone)]
pub struct Session {
    /// From the outermost level in: empty at the top level (`sbc#`).
    stack: Vec<Frame>,
    /// The node's operational commands.
    operations: &'static Operations,
}

/// One level below the top.
#[derive(Debug, Clone)]
enum Frame {
    /// `configure terminal`.
    Configure,
    /// `system`, `session-router` or `redundancy`: a path that only holds elements.
    Path(Path),
    /// An element being edited (boxed: it holds two copies of the element).
    Edit(Box<Edit>),
}

/// The paths of `configure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    System,
    SessionRouter,
    Redundancy,
    Security,
}

impl Path {
    const fn word(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::SessionRouter => "session-router",
            Self::Redundancy => "redundancy",
            Self::Security => "security",
        }
    }

    const fn help(self) -> &'static str {
        match self {
            Self::System => {
                "system-config and its alarm thresholds and trap receivers; capture-agent"
            }
            Self::SessionRouter => {
                "sip-config, session-router, session-agent, sip-interface, access-control; \
                 routing: session-agent-group, local-policy, local-routing-config, \
                 translation-rules, session-translation, session-timer-profile; the SIP trace: \
                 filter-config, sip-monitoring; accounting: account-config"
            }
            Self::Redundancy => "redundancy-config and its peers",
            Self::Security => "tls-profile: certificates and peer verification for SIP over TLS",
        }
    }

    const fn elements(self) -> &'static [Kind] {
        match self {
            Self::System => &[Kind::SystemConfig, Kind::CaptureAgent],
            Self::SessionRouter => &[
                Kind::SipConfig,
                Kind::SessionRouter,
                Kind::SessionAgent,
                Kind::SipInterface,
                Kind::AccessControl,
                Kind::FilterConfig,
                Kind::SipMonitoring,
                Kind::SessionAgentGroup,
                Kind::LocalPolicy,
                Kind::LocalRoutingConfig,
                Kind::TranslationRules,
                Kind::SessionTranslation,
                Kind::SessionTimerProfile,
                Kind::AccountConfig,
            ],
            Self::Redundancy => &[Kind::RedundancyConfig],
            Self::Security => &[Kind::TlsProfile],
        }
    }
}

/// An element being edited.
#[derive(Debug, Clone)]
struct Edit {
    /// The working copy that attributes change.
    working: Element,
    /// The value last loaded or committed, to tell whether there are changes not `done`.
    baseline: Element,
    /// For a multi-instance element, the key of the committed instance being edited; `None`
    /// for a new instance.
    key: Option<String>,
}

impl Edit {
    fn new(working: Element, key: Option<String>) -> Self {
        Self {
            baseline: working.clone(),
            working,
            key,
        }
    }

    fn is_dirty(&self) -> bool {
        self.working != self.baseline
    }
}

/// What a command word does.
#[derive(Debug, Clone, Copy)]
enum Cmd {
    Configure,
    Show,
    Oper(&'static OperSpec),
    SaveConfig,
    ActivateConfig,
    VerifyConfig,
    Exit,
    Enter(Path),
    Element(Kind),
    Attr(&'static Attr),
    Select,
    No,
    Done,
}

/// A command valid at the current level.
#[derive(Debug, Clone)]
struct Entry {
    word: &'static str,
    help: Cow<'static, str>,
    cmd: Cmd,
    /// An alias that works but is not listed.
    hidden: bool,
}

const fn entry(word: &'static str, help: &'static str, cmd: Cmd) -> Entry {
    Entry {
        word,
        help: Cow::Borrowed(help),
        cmd,
        hidden: false,
    }
}

/// The top-level commands before the operational ones.
const TOP_FIRST: &[Entry] = &[entry(
    "configure",
    "configure terminal: enter configuration mode",
    Cmd::Configure,
)];

/// The configuration lifecycle commands at the top level, between the node's operational
/// commands and its late (lab) ones.
const TOP_LIFECYCLE: &[Entry] = &[
    entry(
        "save-config",
        "write the editing configuration to the file (atomic, keeps a backup)",
        Cmd::SaveConfig,
    ),
    entry(
        "activate-config",
        "apply the saved configuration to the running node",
        Cmd::ActivateConfig,
    ),
    entry(
        "verify-config",
        "check the editing configuration",
        Cmd::VerifyConfig,
    ),
];

/// The `show` topics the configuration answers itself, after the node's.
const CONFIG_TOPICS: &[(&str, &str)] = &[
    ("running-config", "the configuration the node runs"),
    (
        "configuration",
        "the editing configuration (saved, not yet active)",
    ),
];

/// Why a word did not resolve.
enum Unresolved {
    Unknown,
    Ambiguous(Vec<&'static str>),
}

/// Finds `word` among `words`: an exact match (any case) first, else the only word it is a
/// prefix of.
fn resolve_word(word: &str, words: &[&'static str]) -> Result<usize, Unresolved> {
    if let Some(i) = words.iter().position(|w| w.eq_ignore_ascii_case(word)) {
        return Ok(i);
    }
    let lower = word.to_ascii_lowercase();
    let matches: Vec<usize> = (0..words.len())
        .filter(|&i| !word.is_empty() && words[i].starts_with(&lower))
        .collect();
    match matches.as_slice() {
        [one] => Ok(*one),
        [] => Err(Unresolved::Unknown),
        many => Err(Unresolved::Ambiguous(
            many.iter().map(|&i| words[i]).collect(),
        )),
    }
}

/// Resolves the word after `after`, e.g. the topic of `show`; the error lists what is valid.
///
/// # Errors
/// `unknown word "x" after "show": valid: …` or `ambiguous word "me" after "show": could be …`.
pub fn resolve_arg(
    after: &str,
    word: &str,
    words: &[&'static str],
) -> Result<&'static str, String> {
    match resolve_word(word, words) {
        Ok(i) => Ok(words[i]),
        Err(Unresolved::Unknown) => Err(format!(
            "unknown word {} after \"{after}\": valid: {}",
            quoted(word),
            words.join(", ")
        )),
        Err(Unresolved::Ambiguous(many)) => Err(format!(
            "ambiguous word {} after \"{after}\": could be {}",
            quoted(word),
            many.join(", ")
        )),
    }
}

/// Splits a line into words; `"..."` groups a word with spaces (or an empty one), `\"` and
/// `\\` escape inside quotes.
fn tokenize(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(words);
        }
        let mut word = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
            if c != '"' {
                word.push(c);
                continue;
            }
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(escaped) => word.push(escaped),
                        None => return Err(UNTERMINATED.to_owned()),
                    },
                    Some(c) => word.push(c),
                    None => return Err(UNTERMINATED.to_owned()),
                }
            }
        }
        words.push(word);
    }
}

const UNTERMINATED: &str =
    "unterminated quote: write a value with spaces as \"like this\" (\\\" for a quote)";

/// `Err(message)` when a command that takes no argument got some.
///
/// # Errors
/// `unexpected word "x" after "reboot": "reboot" takes no argument`.
pub fn no_args(word: &str, args: &[String]) -> Result<(), String> {
    match args.first() {
        None => Ok(()),
        Some(first) => Err(format!(
            "unexpected word {} after \"{word}\": \"{word}\" takes no argument",
            quoted(first)
        )),
    }
}

/// The attributes that name an `auto-scaling-profile`, completed with the profiles' names.
const PROFILE_ATTRS: &[&str] = &["auto-scaling-profile", "tcp-auto-scaling-profile"];

/// The attributes that name a `sip-interface` realm, completed with the interfaces' realms
/// (and, inside a `filter-config`, its `realm`).
const REALM_ATTRS: &[&str] = &["realm-id"];

/// The list attribute that names `filter-config`s, completed with their names.
const FILTERS_ATTR: &str = "monitoring-filters";

/// The names an attribute of the routing elements refers to, for completion: agents, groups
/// (`SAG:name`), realms, translation ids; with what they are.
fn referenced_names(
    attr: &Attr,
    kind: Option<Kind>,
    editing: &Config,
) -> Vec<(String, &'static str)> {
    let agents = || {
        editing
            .session_agents
            .iter()
            .map(|a| (a.name.clone(), "session-agent"))
    };
    let realms = || {
        let mut realms: Vec<(String, &'static str)> = Vec::new();
        for iface in &editing.sip_interfaces {
            if !realms.iter().any(|(r, _)| *r == iface.realm) {
                realms.push((iface.realm.clone(), "sip-interface realm"));
            }
        }
        realms
    };
    match (kind, attr.name) {
        (Some(Kind::SessionAgentGroup), "dest") => agents().collect(),
        (Some(Kind::PolicyAttribute), "next-hop") => agents()
            .chain(editing.session_agent_groups.iter().map(|g| {
                (
                    format!("{}{}", crate::SAG_PREFIX, g.group_name),
                    "session-agent-group",
                )
            }))
            .collect(),
        (Some(Kind::PolicyAttribute), "realm") => realms(),
        (Some(Kind::LocalPolicy | Kind::LocalRoutingConfig), "source-realm") => {
            let mut names = realms();
            names.push((crate::LocalPolicy::ANY.to_owned(), "any realm (alone)"));
            names
        }
        (Some(Kind::SessionTranslation), "rules-calling" | "rules-called") => editing
            .translation_rules
            .iter()
            .map(|r| (r.id.clone(), "translation-rules"))
            .collect(),
        (Some(Kind::RealmConfig), "session-timer-profile") => editing
            .session_timer_profiles
            .iter()
            .map(|p| (p.name.clone(), "session-timer-profile"))
            .collect(),
        (Some(Kind::SessionAgent), "in-translationid" | "out-translationid") => editing
            .session_translations
            .iter()
            .map(|t| (t.id.clone(), "session-translation"))
            .collect(),
        _ => Vec::new(),
    }
}

/// The `valid` part of a message from an attribute's hint: `<1..=100>` → `1..=100`.
fn hint_valid(attr: &Attr) -> String {
    attr.valid()
}

/// How an item of a list is identified for `+` (replace) and `-` (remove): an option by its
/// name, anything else by itself.
fn item_identity(attr: &Attr, item: &str) -> String {
    if attr.name == "options" {
        split_option(item).0.to_ascii_lowercase()
    } else {
        item.to_owned()
    }
}

/// Parses one list item to its canonical form; an option's name is lowercased.
fn parse_item(attr: &Attr, item_ty: Ty, raw: &str) -> Result<String, String> {
    if attr.name == "options" {
        if raw.is_empty() || raw.chars().any(char::is_whitespace) {
            return Err("an option is name or name=value without spaces".to_owned());
        }
        let (name, value) = split_option(raw);
        return Ok(match value {
            Some(value) => format!("{}={value}", name.to_ascii_lowercase()),
            None => name.to_ascii_lowercase(),
        });
    }
    match parse_scalar(item_ty, raw)? {
        Value::String(s) => Ok(s),
        other => Ok(other.to_string()),
    }
}

/// The list `args` makes of `current`: `+a` adds or replaces, `-a` removes, a bare list
/// replaces, `""` empties. The error is `(value, reason)`.
fn edit_list(
    attr: &Attr,
    item_ty: Ty,
    current: &[String],
    args: &[String],
) -> Result<Vec<String>, (String, String)> {
    if let [only] = args {
        if only.is_empty() {
            return Ok(Vec::new());
        }
    }
    let signed = |a: &String| a.starts_with('+') || a.starts_with('-');
    let all_signed = args.iter().all(signed);
    if !all_signed {
        if let Some(bad) = args.iter().find(|a| signed(a)) {
            return Err((
                quoted(bad),
                "+/- items and a bare list cannot be mixed".to_owned(),
            ));
        }
        let mut list = Vec::new();
        for raw in args {
            list.push(parse_item(attr, item_ty, raw).map_err(|reason| (quoted(raw), reason))?);
        }
        return Ok(list);
    }
    let mut list = current.to_vec();
    for arg in args {
        let (sign, raw) = arg.split_at(1);
        let item = parse_item(attr, item_ty, raw).map_err(|reason| (quoted(arg), reason))?;
        let id = item_identity(attr, &item);
        let at = list.iter().position(|x| item_identity(attr, x) == id);
        match (sign, at) {
            ("+", Some(i)) => list[i] = item,
            ("+", None) => list.push(item),
            (_, Some(i)) => {
                list.remove(i);
            }
            (_, None) => {
                let now: Vec<String> = list.iter().map(|x| quoted(x)).collect();
                return Err((
                    quoted(arg),
                    format!(
                        "{} is not in the list (now: {})",
                        quoted(&id),
                        if now.is_empty() {
                            "empty".to_owned()
                        } else {
                            now.join(", ")
                        }
                    ),
                ));
            }
        }
    }
    Ok(list)
}

impl Session {
    /// A session at the top level (`sbc#`) of a node whose operational commands are
    /// `operations`.
    #[must_use]
    pub const fn new(operations: &'static Operations) -> Self {
        Self {
            stack: Vec::new(),
            operations,
        }
    }

    /// The top-level commands: `configure`, `show`, the node's operational commands, the
    /// lifecycle ones, the node's late ones, `exit`.
    fn top(&self) -> Vec<Entry> {
        let oper = |late: bool| {
            self.operations
                .commands
                .iter()
                .filter(move |c| c.late == late)
                .map(|c| entry(c.word, c.help, Cmd::Oper(c)))
        };
        let mut entries = TOP_FIRST.to_vec();
        entries.push(self.show_entry());
        entries.extend(oper(false));
        entries.extend_from_slice(TOP_LIFECYCLE);
        entries.extend(oper(true));
        entries.push(entry("exit", "close the session", Cmd::Exit));
        entries
    }

    /// Every `show` topic: the node's, then the configuration's.
    fn show_topics(&self) -> impl Iterator<Item = &'static (&'static str, &'static str)> {
        self.operations.show_topics.iter().chain(CONFIG_TOPICS)
    }

    /// `show` with its help: `show health | redundancy | … | configuration`.
    fn show_entry(&self) -> Entry {
        let topics: Vec<&str> = self.show_topics().map(|(t, _)| *t).collect();
        Entry {
            help: Cow::Owned(format!("show {}", topics.join(" | "))),
            ..entry("show", "", Cmd::Show)
        }
    }

    /// The prompt for the current level: `sbc#`, `sbc(configure)#`, `sbc(system)#`,
    /// `sbc(system-config)#`, `sbc(alarm-threshold)#`, … with `hostname` as given.
    #[must_use]
    pub fn prompt(&self, hostname: &str) -> String {
        match self.stack.last() {
            None => format!("{hostname}#"),
            Some(Frame::Configure) => format!("{hostname}(configure)#"),
            Some(Frame::Path(path)) => format!("{hostname}({})#", path.word()),
            Some(Frame::Edit(edit)) => format!("{hostname}({})#", edit.working.kind().prompt()),
        }
    }

    /// Whether some element has changes not yet `done` (which `exit` would discard).
    #[must_use]
    pub fn has_pending_changes(&self) -> bool {
        self.edits().any(Edit::is_dirty)
    }

    /// Executes one line against the shared `editing` configuration, which changes only when
    /// a `done` (or `no`) on a top-level element passes validation.
    pub fn execute(&mut self, line: &str, editing: &mut Config) -> Reply {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            return Reply::Text(String::new());
        }
        if let Some(before) = line.strip_suffix('?') {
            return self.question(before, editing);
        }
        let words = match tokenize(line) {
            Ok(words) => words,
            Err(err) => return Reply::Error(err),
        };
        let Some((first, args)) = words.split_first() else {
            return Reply::Text(String::new());
        };
        let entry = match self.resolve(first) {
            Ok(entry) => entry,
            Err(err) => return Reply::Error(err),
        };
        match self.run(entry, args, editing) {
            Ok(reply) => reply,
            Err(err) => Reply::Error(err),
        }
    }

    /// Tab completion: the words that may replace the last (partial) word of `partial_line`
    /// (the text after its last space), in the order `?` lists them. Placeholders such as
    /// `<id>` are not offered.
    #[must_use]
    pub fn complete(&self, partial_line: &str, editing: &Config) -> Vec<String> {
        self.matching(partial_line, editing)
            .unwrap_or_default()
            .into_iter()
            .map(|(word, _)| word)
            .filter(|word| !word.starts_with('<'))
            .collect()
    }

    /// `?`: the commands valid at the current level, each with one line of description.
    #[must_use]
    pub fn help(&self) -> Vec<(String, String)> {
        self.entries()
            .iter()
            .filter(|e| !e.hidden)
            .map(|e| (e.word.to_owned(), e.help.to_string()))
            .collect()
    }

    fn edits(&self) -> impl Iterator<Item = &Edit> {
        self.stack.iter().filter_map(|frame| match frame {
            Frame::Edit(edit) => Some(&**edit),
            _ => None,
        })
    }

    fn current_edit(&self) -> Option<&Edit> {
        match self.stack.last() {
            Some(Frame::Edit(edit)) => Some(&**edit),
            _ => None,
        }
    }

    fn current_edit_mut(&mut self) -> Option<&mut Edit> {
        match self.stack.last_mut() {
            Some(Frame::Edit(edit)) => Some(&mut **edit),
            _ => None,
        }
    }

    /// The commands valid at the current level.
    fn entries(&self) -> Vec<Entry> {
        let show = self.show_entry();
        let exit = entry("exit", "leave this level", Cmd::Exit);
        match self.stack.last() {
            None => self.top(),
            Some(Frame::Configure) => {
                let mut entries: Vec<Entry> = [Path::System, Path::SessionRouter]
                    .iter()
                    .map(|p| entry(p.word(), p.help(), Cmd::Enter(*p)))
                    .collect();
                entries.push(entry(
                    Kind::SipInterface.word(),
                    Kind::SipInterface.help(),
                    Cmd::Element(Kind::SipInterface),
                ));
                for path in [Path::Redundancy, Path::Security] {
                    entries.push(entry(path.word(), path.help(), Cmd::Enter(path)));
                }
                for kind in [
                    Kind::AutoScalingProfile,
                    Kind::MediaManager,
                    Kind::RealmConfig,
                    Kind::SteeringPool,
                ] {
                    entries.push(entry(kind.word(), kind.help(), Cmd::Element(kind)));
                }
                entries.extend([show, exit]);
                entries
            }
            Some(Frame::Path(path)) => {
                let mut entries: Vec<Entry> = path
                    .elements()
                    .iter()
                    .map(|k| entry(k.word(), k.help(), Cmd::Element(*k)))
                    .collect();
                entries.extend([show, exit]);
                entries
            }
            Some(Frame::Edit(edit)) => {
                let kind = edit.working.kind();
                let mut entries: Vec<Entry> = kind
                    .attrs()
                    .iter()
                    .map(|a| entry(a.name, a.help, Cmd::Attr(a)))
                    .collect();
                for child in kind.children() {
                    entries.push(entry(child.word(), child.help(), Cmd::Element(*child)));
                    if *child == Kind::Peer {
                        // Oracle's word.
                        entries.push(Entry {
                            hidden: true,
                            ..entry("peers", child.help(), Cmd::Element(*child))
                        });
                    }
                }
                if kind.is_multi() {
                    entries.push(entry(
                        "select",
                        "select <key>|<n>: edit an existing instance (bare: list them)",
                        Cmd::Select,
                    ));
                    entries.push(entry(
                        "no",
                        "no <key>|<n>: delete an instance (bare: the selected one)",
                        Cmd::No,
                    ));
                } else {
                    entries.push(entry(
                        "select",
                        "reload the committed element, discarding changes",
                        Cmd::Select,
                    ));
                }
                entries.push(entry(
                    "show",
                    "show the element being edited (or show <topic>)",
                    Cmd::Show,
                ));
                entries.push(entry("done", "validate and commit the element", Cmd::Done));
                entries.push(entry(
                    "exit",
                    "leave the element (changes not done are discarded)",
                    Cmd::Exit,
                ));
                entries
            }
        }
    }

    /// Resolves the first word of a line; the error lists what is valid here.
    fn resolve(&self, word: &str) -> Result<Entry, String> {
        let entries = self.entries();
        let words: Vec<&'static str> = entries.iter().map(|e| e.word).collect();
        match resolve_word(word, &words) {
            Ok(i) => Ok(entries[i].clone()),
            Err(Unresolved::Ambiguous(many)) => Err(format!(
                "ambiguous command {}: could be {}",
                quoted(word),
                many.join(", ")
            )),
            Err(Unresolved::Unknown) => {
                let valid: Vec<&str> = entries
                    .iter()
                    .filter(|e| !e.hidden)
                    .map(|e| e.word)
                    .collect();
                let top_entries = self.top();
                let top: Vec<&'static str> = top_entries.iter().map(|e| e.word).collect();
                // A top-level command typed deeper in the tree (spelled out, or a clear
                // abbreviation of one) gets a hint instead of only a list.
                let top_level_only = !self.stack.is_empty()
                    && (top.iter().any(|w| w.eq_ignore_ascii_case(word))
                        || (word.len() > 3 && resolve_word(word, &top).is_ok()));
                let hint = if top_level_only {
                    " (that command is valid at the top level: \"exit\" to go up)"
                } else {
                    ""
                };
                Err(format!(
                    "unknown command {}: valid here: {}{hint}",
                    quoted(word),
                    valid.join(", ")
                ))
            }
        }
    }

    fn run(
        &mut self,
        entry: Entry,
        args: &[String],
        editing: &mut Config,
    ) -> Result<Reply, String> {
        let word = entry.word;
        let done = |reply: Reply| Ok(reply);
        match entry.cmd {
            Cmd::Configure => {
                let Some(arg) = args.first() else {
                    return Err("\"configure\" needs \"terminal\": valid: terminal".to_owned());
                };
                resolve_arg(word, arg, &["terminal"])?;
                no_args("configure terminal", &args[1..])?;
                self.stack.push(Frame::Configure);
                done(Reply::Text(String::new()))
            }
            Cmd::Show => self.show(args),
            Cmd::Oper(spec) => done(Reply::Operational(OperLine {
                command: spec.word,
                args: args.to_vec(),
            })),
            Cmd::SaveConfig => {
                no_args(word, args)?;
                done(Reply::Lifecycle(LifecycleCommand::SaveConfig))
            }
            Cmd::ActivateConfig => {
                no_args(word, args)?;
                done(Reply::Lifecycle(LifecycleCommand::ActivateConfig))
            }
            Cmd::VerifyConfig => {
                no_args(word, args)?;
                done(Reply::Lifecycle(LifecycleCommand::VerifyConfig))
            }
            Cmd::Exit => {
                no_args(word, args)?;
                match self.stack.pop() {
                    None => done(Reply::Exit),
                    Some(Frame::Edit(edit)) if edit.is_dirty() => done(Reply::Text(format!(
                        "{}: changes not saved with \"done\" were discarded",
                        edit.working.name()
                    ))),
                    Some(_) => done(Reply::Text(String::new())),
                }
            }
            Cmd::Enter(path) => {
                no_args(word, args)?;
                self.stack.push(Frame::Path(path));
                done(Reply::Text(String::new()))
            }
            Cmd::Element(kind) => {
                if let Some(first) = args.first() {
                    return Err(format!(
                        "unexpected word {} after \"{}\": enter the element, then \"select {}\" to edit an existing one",
                        quoted(first),
                        kind.word(),
                        args.join(" ")
                    ));
                }
                let edit = if kind.is_multi() {
                    Edit::new(kind.fresh(), None)
                } else {
                    Edit::new(top_single(editing, kind), None)
                };
                self.stack.push(Frame::Edit(Box::new(edit)));
                done(Reply::Text(String::new()))
            }
            Cmd::Attr(attr) => self.set(attr, args, editing),
            Cmd::Select => self.select(args, editing),
            Cmd::No => self.no(args, editing),
            Cmd::Done => {
                no_args(word, args)?;
                self.done(editing)
            }
        }
    }

    fn show(&self, args: &[String]) -> Result<Reply, String> {
        let topics: Vec<&'static str> = self.show_topics().map(|(t, _)| *t).collect();
        let Some((topic, rest)) = args.split_first() else {
            return match self.current_edit() {
                Some(edit) => Ok(Reply::Text(render_element(&edit.working))),
                None => Err(format!(
                    "\"show\" needs a topic: valid: {}",
                    topics.join(", ")
                )),
            };
        };
        let topic = resolve_arg("show", topic, &topics)?;
        if !self.operations.show_topics_with_args.contains(&topic) {
            no_args(&format!("show {topic}"), rest)?;
        }
        Ok(match topic {
            "running-config" => Reply::Lifecycle(LifecycleCommand::ShowRunningConfig),
            "configuration" => Reply::Lifecycle(LifecycleCommand::ShowConfiguration),
            topic => Reply::Operational(OperLine {
                command: "show",
                args: std::iter::once(topic.to_owned())
                    .chain(rest.iter().cloned())
                    .collect(),
            }),
        })
    }

    /// The editing config with every working copy applied, innermost into its parent and the
    /// outermost into the config, and the full key of the innermost element
    /// (`system-config.alarm-threshold[1]`); an empty key when no element is being edited.
    fn applied(&self, editing: &Config) -> (Config, String) {
        self.applied_to(editing, self.stack.len())
    }

    /// As [`Self::applied`], with only the frames below `end`.
    fn applied_to(&self, editing: &Config, end: usize) -> (Config, String) {
        let edits: Vec<&Edit> = self.stack[..end]
            .iter()
            .filter_map(|frame| match frame {
                Frame::Edit(edit) => Some(&**edit),
                _ => None,
            })
            .collect();
        let mut config = editing.clone();
        let Some((innermost, outer)) = edits.split_last() else {
            return (config, String::new());
        };
        let mut value = innermost.working.clone();
        let mut indices = Vec::new();
        let mut child_key = innermost.key.as_deref();
        for parent in outer.iter().rev() {
            let mut parent_value = parent.working.clone();
            indices.push(parent_value.put_child(value, child_key));
            value = parent_value;
            child_key = parent.key.as_deref();
        }
        let top_kind = value.kind();
        let index = top_put(&mut config, value, child_key);
        let mut path = if top_kind.is_multi() {
            format!("{}[{index}]", top_kind.toml_key())
        } else {
            top_kind.toml_key().to_owned()
        };
        for (edit, index) in edits[1..].iter().zip(indices.iter().rev()) {
            path.push_str(&format!(".{}[{index}]", edit.working.kind().toml_key()));
        }
        (config, path)
    }

    /// Validates the editing config with the working copies of the frames below `end` applied
    /// and, if it passes, commits it: `editing` becomes that config, each sub-element is put
    /// into its parent's working copy, and every one of those frames is clean again.
    fn commit(&mut self, editing: &mut Config, end: usize) -> Result<(), String> {
        let (config, _) = self.applied_to(editing, end);
        config.validate().map_err(|err| err.to_string())?;
        *editing = config;
        let first = self
            .stack
            .iter()
            .position(|frame| matches!(frame, Frame::Edit(_)))
            .unwrap_or(end);
        for i in (first..end).rev() {
            let Frame::Edit(edit) = &mut self.stack[i] else {
                continue;
            };
            let value = edit.working.clone();
            let old_key = edit.key.take();
            let key = value.kind().is_multi().then(|| value.key());
            **edit = Edit::new(value.clone(), key);
            if i > first {
                if let Frame::Edit(parent) = &mut self.stack[i - 1] {
                    parent.working.put_child(value, old_key.as_deref());
                }
            }
        }
        Ok(())
    }

    /// `<attribute> <value>`.
    fn set(
        &mut self,
        attr: &'static Attr,
        args: &[String],
        editing: &Config,
    ) -> Result<Reply, String> {
        let (_, path) = self.applied(editing);
        let key = format!("{path}.{}", attr.name);
        let Some(edit) = self.current_edit_mut() else {
            unreachable!("attributes are offered only inside an element")
        };
        let kind = edit.working.kind();
        let mut table = edit.working.to_table();
        let invalid = |value: String, reason: String| {
            ConfigError::invalid(key.clone(), value, reason, hint_valid(attr)).to_string()
        };
        let (shown, value) = match attr.ty {
            Ty::List(item_ty) => {
                if args.is_empty() {
                    return Err(invalid("(nothing)".to_owned(), "missing value".to_owned()));
                }
                let current: Vec<String> = match table.get(attr.name) {
                    Some(Value::Array(items)) => items
                        .iter()
                        .map(|v| match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                let list = edit_list(attr, *item_ty, &current, args)
                    .map_err(|(value, reason)| invalid(value, reason))?;
                let shown = format!(
                    "[{}]",
                    list.iter()
                        .map(|s| quoted(s))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                (
                    shown,
                    Some(Value::Array(
                        list.into_iter()
                            .map(|item| list_item_value(*item_ty, item))
                            .collect(),
                    )),
                )
            }
            ty => {
                let [arg] = args else {
                    return Err(invalid(
                        if args.is_empty() {
                            "(nothing)".to_owned()
                        } else {
                            quoted(&args.join(" "))
                        },
                        if args.is_empty() {
                            "missing value".to_owned()
                        } else {
                            "one value expected (quote a value with spaces)".to_owned()
                        },
                    ));
                };
                let shown = match ty {
                    Ty::Int(_) if arg.parse::<u64>().is_ok() => arg.clone(),
                    _ => quoted(arg),
                };
                let clears =
                    arg.is_empty() || (!matches!(ty, Ty::Str) && arg.eq_ignore_ascii_case("none"));
                if attr.optional && clears {
                    (shown, None)
                } else {
                    let value =
                        parse_scalar(ty, arg).map_err(|reason| invalid(shown.clone(), reason))?;
                    (shown, Some(value))
                }
            }
        };
        // Clearing is never refused here: a rule such as "all three scale-down keys or none"
        // must let them be cleared one by one; `done` checks the result.
        let clearing = value.is_none();
        match value {
            Some(value) => table.insert(attr.name.to_owned(), value),
            None => table.remove(attr.name),
        };
        let element = Element::from_table(kind, table).map_err(|reason| invalid(shown, reason))?;
        let previous = mem::replace(&mut edit.working, element);
        let (config, _) = self.applied(editing);
        if let (false, Err(err)) = (clearing, config.validate()) {
            let about_this = matches!(&err, ConfigError::Invalid { key: bad, .. }
                if *bad == key || bad.starts_with(&format!("{key}[")));
            if about_this {
                if let Some(edit) = self.current_edit_mut() {
                    edit.working = previous;
                }
                return Err(err.to_string());
            }
        }
        Ok(Reply::Text(String::new()))
    }

    /// The instances `select` and `no` choose from: the parent's working copy for a
    /// sub-element, the editing config for a top-level element.
    fn instances(&self, kind: Kind, editing: &Config) -> Vec<Element> {
        let n = self.stack.len();
        match self.stack.get(n.wrapping_sub(2)) {
            Some(Frame::Edit(parent)) => parent.working.children_of(kind),
            _ => top_list(editing, kind),
        }
    }

    /// The index among `instances` that `args` (a key, or a 1-based number) names.
    fn find(kind: Kind, instances: &[Element], args: &[String]) -> Result<usize, String> {
        let wanted = args.join(" ");
        let by_key: Vec<usize> = (0..instances.len())
            .filter(|&i| {
                instances[i]
                    .aliases()
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(&wanted))
            })
            .collect();
        match by_key.as_slice() {
            [one] => return Ok(*one),
            [] => {}
            _ => {
                return Err(format!(
                    "ambiguous {} {}: could be {}",
                    kind.word(),
                    quoted(&wanted),
                    element::key_list(
                        &by_key
                            .iter()
                            .map(|&i| instances[i].clone())
                            .collect::<Vec<_>>()
                    )
                ))
            }
        }
        match wanted.parse::<usize>() {
            Ok(n) if (1..=instances.len()).contains(&n) => Ok(n - 1),
            _ => Err(format!(
                "no {} {}: valid: {}{}",
                kind.word(),
                quoted(&wanted),
                element::key_list(instances),
                if instances.is_empty() {
                    String::new()
                } else {
                    format!(" or 1..={}", instances.len())
                }
            )),
        }
    }

    /// `select`: list, or load an instance into the working copy.
    fn select(&mut self, args: &[String], editing: &Config) -> Result<Reply, String> {
        let Some(edit) = self.current_edit() else {
            unreachable!("select is offered only inside an element")
        };
        let kind = edit.working.kind();
        let note = if edit.is_dirty() {
            format!(
                "{}: changes not saved with \"done\" were discarded\n",
                kind.word()
            )
        } else {
            String::new()
        };
        if !kind.is_multi() {
            no_args("select", args)?;
            let committed = top_single(editing, kind);
            if let Some(edit) = self.current_edit_mut() {
                *edit = Edit::new(committed, None);
            }
            return Ok(Reply::Text(note));
        }
        let instances = self.instances(kind, editing);
        if args.is_empty() {
            if instances.is_empty() {
                return Ok(Reply::Text(format!("no {} yet\n", kind.word())));
            }
            let list: String = instances
                .iter()
                .enumerate()
                .map(|(i, e)| format!("{}: {}\n", i + 1, e.key()))
                .collect();
            return Ok(Reply::Text(list));
        }
        let index = Self::find(kind, &instances, args)?;
        let chosen = instances[index].clone();
        let key = chosen.key();
        if let Some(edit) = self.current_edit_mut() {
            *edit = Edit::new(chosen, Some(key));
        }
        Ok(Reply::Text(note))
    }

    /// `no`: delete an instance and commit at once (a sub-element's parent with it).
    fn no(&mut self, args: &[String], editing: &mut Config) -> Result<Reply, String> {
        let Some(edit) = self.current_edit() else {
            unreachable!("no is offered only inside an element")
        };
        let kind = edit.working.kind();
        let instances = self.instances(kind, editing);
        let index = if args.is_empty() {
            let selected = edit
                .key
                .as_deref()
                .and_then(|key| instances.iter().position(|e| e.key() == key));
            selected.ok_or_else(|| {
                format!(
                    "\"no\" needs the {} to delete (none is selected): valid: {}",
                    kind.word(),
                    element::key_list(&instances)
                )
            })?
        } else {
            Self::find(kind, &instances, args)?
        };
        let deleted = instances[index].key();
        let n = self.stack.len();
        if let Some(Frame::Edit(parent)) = self.stack.get_mut(n.wrapping_sub(2)) {
            let before = parent.working.clone();
            parent.working.remove_child(kind, index);
            if let Err(err) = self.commit(editing, n - 1) {
                if let Some(Frame::Edit(parent)) = self.stack.get_mut(n - 2) {
                    parent.working = before;
                }
                return Err(format!(
                    "cannot delete {} {}: {err}",
                    kind.word(),
                    quoted(&deleted)
                ));
            }
        } else {
            let mut next = editing.clone();
            top_remove(&mut next, kind, index);
            next.validate().map_err(|err| {
                format!("cannot delete {} {}: {err}", kind.word(), quoted(&deleted))
            })?;
            *editing = next;
        }
        if let Some(edit) = self.current_edit_mut() {
            if edit.key.as_deref() == Some(deleted.as_str()) {
                *edit = Edit::new(kind.fresh(), None);
            }
        }
        Ok(Reply::Text(format!(
            "deleted {} {}\n",
            kind.word(),
            quoted(&deleted)
        )))
    }

    /// `done`: validate everything with the working copies applied, then commit the element
    /// and every enclosing one.
    fn done(&mut self, editing: &mut Config) -> Result<Reply, String> {
        self.commit(editing, self.stack.len())?;
        let Some(edit) = self.current_edit() else {
            unreachable!("done is offered only inside an element")
        };
        Ok(Reply::Text(render_element(&edit.working)))
    }

    /// `?` after `before`: what may come next (or what the partial last word may become).
    fn question(&self, before: &str, editing: &Config) -> Reply {
        match self.matching(before, editing) {
            Ok(found) if found.is_empty() => Reply::Error(format!(
                "nothing valid matches {}: valid here: {}",
                quoted(before.trim()),
                self.help()
                    .into_iter()
                    .map(|(w, _)| w)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Ok(found) => {
                let width = found.iter().map(|(w, _)| w.len()).max().unwrap_or(0) + 2;
                Reply::Text(
                    found
                        .iter()
                        .map(|(w, h)| format!("{w:<width$}{h}").trim_end().to_owned() + "\n")
                        .collect(),
                )
            }
            Err(err) => Reply::Error(err),
        }
    }

    /// The candidates for the last word of `line`, with descriptions.
    fn matching(&self, line: &str, editing: &Config) -> Result<Vec<(String, String)>, String> {
        let mut words = tokenize(line)?;
        let partial = if line.is_empty() || line.ends_with(char::is_whitespace) {
            String::new()
        } else {
            words.pop().unwrap_or_default()
        };
        let lower = partial.to_ascii_lowercase();
        Ok(self
            .candidates(&words, editing)?
            .into_iter()
            .filter(|(w, _)| w.to_ascii_lowercase().starts_with(&lower))
            .collect())
    }

    /// Everything valid after the complete `words`.
    fn candidates(
        &self,
        words: &[String],
        editing: &Config,
    ) -> Result<Vec<(String, String)>, String> {
        let pair = |w: &str, h: &str| (w.to_owned(), h.to_owned());
        let Some((first, args)) = words.split_first() else {
            return Ok(self.help());
        };
        let entry = self.resolve(first)?;
        let enter = || vec![pair("<enter>", "run the command")];
        let list = match (entry.cmd, args.len()) {
            (Cmd::Configure, 0) => vec![pair("terminal", "enter configuration mode")],
            (Cmd::Show, 0) => {
                let mut list: Vec<_> = self.show_topics().map(|(t, h)| pair(t, h)).collect();
                if self.current_edit().is_some() {
                    list.insert(0, pair("<enter>", "show the element being edited"));
                }
                list
            }
            (Cmd::Oper(spec), n) if n < spec.args.len() => {
                spec.args[n].iter().map(|(w, h)| pair(w, h)).collect()
            }
            (Cmd::Attr(attr), n) => Self::value_candidates(attr, n, editing, self.current_edit()),
            (Cmd::Select | Cmd::No, _) => {
                let Some(edit) = self.current_edit() else {
                    return Ok(Vec::new());
                };
                let kind = edit.working.kind();
                let mut next: Vec<(String, String)> = Vec::new();
                for instance in self.instances(kind, editing) {
                    let key = instance.key();
                    let key_words: Vec<&str> = key.split_whitespace().collect();
                    let prefix_matches = key_words.len() > args.len()
                        && key_words
                            .iter()
                            .zip(args)
                            .all(|(k, a)| k.eq_ignore_ascii_case(a));
                    if prefix_matches {
                        let word = key_words[args.len()].to_owned();
                        if !next.iter().any(|(w, _)| *w == word) {
                            next.push((word, format!("{} {}", kind.word(), key)));
                        }
                    }
                }
                next
            }
            (_, 0) => enter(),
            _ => Vec::new(),
        };
        Ok(list)
    }

    /// The values an attribute may take after `given` values already typed.
    fn value_candidates(
        attr: &Attr,
        given: usize,
        editing: &Config,
        edit: Option<&Edit>,
    ) -> Vec<(String, String)> {
        let pair = |w: String, h: &str| (w, h.to_owned());
        let scalar = |ty: Ty| -> Vec<(String, String)> {
            match ty {
                Ty::Words(words) => words.iter().map(|w| pair((*w).to_owned(), "")).collect(),
                Ty::Bool => vec![pair("enabled".into(), ""), pair("disabled".into(), "")],
                _ => vec![pair(attr.hint_text(), attr.help)],
            }
        };
        let kind = edit.map(|e| e.working.kind());
        let names = referenced_names(attr, kind, editing);
        match attr.ty {
            Ty::List(_) if !names.is_empty() => {
                let mut list: Vec<(String, String)> = names
                    .iter()
                    .map(|(n, what)| pair(format!("+{n}"), &format!("add this {what}")))
                    .collect();
                if let Some(Value::Array(items)) =
                    edit.and_then(|e| e.working.to_table().get(attr.name).cloned())
                {
                    for item in items.iter().filter_map(Value::as_str) {
                        list.push(pair(format!("-{item}"), "remove it"));
                    }
                }
                list.extend(
                    names
                        .iter()
                        .map(|(n, _)| pair(n.clone(), "replace the list")),
                );
                list.push(pair("\"\"".to_owned(), "empty the list"));
                list
            }
            Ty::List(_) if attr.name == "options" => {
                let mut list = Vec::new();
                for (name, values) in KNOWN_OPTIONS {
                    for value in *values {
                        list.push(pair(
                            format!("+{name}={value}"),
                            "add or replace this option",
                        ));
                    }
                }
                if let Some(Element::SystemConfig(system)) = edit.map(|e| &e.working) {
                    for option in &system.options {
                        list.push(pair(
                            format!("-{}", split_option(option).0),
                            "remove this option",
                        ));
                    }
                }
                for (name, values) in KNOWN_OPTIONS {
                    for value in *values {
                        list.push(pair(format!("{name}={value}"), "replace all options"));
                    }
                }
                list
            }
            Ty::List(_) if attr.name == FILTERS_ATTR => {
                let names = || editing.filter_configs.iter().map(|f| f.name.clone());
                let mut list: Vec<(String, String)> = names()
                    .map(|n| pair(format!("+{n}"), "add this filter-config"))
                    .collect();
                if let Some(Element::SipMonitoring(m)) = edit.map(|e| &e.working) {
                    for name in &m.monitoring_filters {
                        list.push(pair(format!("-{name}"), "remove it"));
                    }
                }
                list.extend(names().map(|n| pair(n, "replace the list")));
                list.push(pair(
                    crate::SipMonitoring::ALL.to_owned(),
                    "every message (alone)",
                ));
                list.push(pair("\"\"".to_owned(), "empty the list"));
                list
            }
            Ty::List(item) => {
                let mut list: Vec<(String, String)> = scalar(*item)
                    .into_iter()
                    .flat_map(|(w, h)| {
                        if w.starts_with('<') {
                            vec![(w, h)]
                        } else {
                            vec![
                                (format!("+{w}"), "add".to_owned()),
                                (format!("-{w}"), "remove".to_owned()),
                                (w, "replace the list".to_owned()),
                            ]
                        }
                    })
                    .collect();
                list.push(pair("\"\"".to_owned(), "empty the list"));
                list
            }
            ty if given == 0 => {
                let mut list = scalar(ty);
                if PROFILE_ATTRS.contains(&attr.name) {
                    for profile in &editing.auto_scaling_profiles {
                        list.push(pair(profile.name.clone(), "auto-scaling-profile"));
                    }
                }
                let in_filter = edit.is_some_and(|e| e.working.kind() == Kind::FilterConfig);
                if REALM_ATTRS.contains(&attr.name) || (in_filter && attr.name == "realm") {
                    for iface in &editing.sip_interfaces {
                        if !list.iter().any(|(w, _)| *w == iface.realm) {
                            list.push(pair(iface.realm.clone(), "sip-interface realm"));
                        }
                    }
                }
                if in_filter && attr.name == "session-agent" {
                    for agent in &editing.session_agents {
                        list.push(pair(agent.name.clone(), "session-agent"));
                    }
                }
                for (name, what) in &names {
                    list.push(pair(name.clone(), what));
                }
                if attr.optional {
                    // Only `""` clears a string: `none` could be a name.
                    let clear = if matches!(ty, Ty::Str) {
                        "\"\""
                    } else {
                        "none"
                    };
                    list.push(pair(clear.to_owned(), "unset"));
                }
                list
            }
            _ => Vec::new(),
        }
    }
}
