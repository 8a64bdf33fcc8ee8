//! Issue 28's routing elements, with Oracle's names: `session-agent-group`, `local-policy` and
//! its `policy-attributes`, `local-routing-config`, `translation-rules` and
//! `session-translation`; and the parsers of their time windows, days and positions.
//!
//! This module only declares and parses: which next hop a request takes is `sbc-proto`'s
//! (`routing::local_policy`), which reads these rows through the node's settings. The keys'
//! defaults and ranges are declared once in [`crate::keys`].

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{quoted, ConfigError};
use crate::keys::{local_policy, policy_attributes, session_agent_group, session_timer_profile};

keyword_enum! {
    /// `state` of a session-agent, session-agent-group, local-policy, policy-attribute or
    /// local-routing-config: whether it takes part in routing at all.
    AdminState, key "state", default Enabled {
        /// In use.
        Enabled = "enabled",
        /// Kept in the configuration, never used (and a session-agent is not pinged).
        Disabled = "disabled",
    }
}

impl AdminState {
    /// Whether it is `enabled`.
    #[must_use]
    pub const fn is_enabled(self) -> bool {
        matches!(self, Self::Enabled)
    }
}

keyword_enum! {
    /// `session-agent` `ping-send-mode` (Oracle's words): when health pings are sent.
    PingSendMode, key "ping-send-mode", default KeepAlive {
        /// Only when nothing came from the agent during the last `ping-interval`: traffic
        /// already proves it is up.
        KeepAlive = "keep-alive",
        /// Every `ping-interval`, whatever the traffic.
        Continuous = "continuous",
    }
}

keyword_enum! {
    /// `session-agent-group` `strategy` (Oracle's, without LowSusRate): how a member is chosen.
    SagStrategy, key "strategy", default Hunt {
        /// The first member in service, in `dest` order; the next on failure.
        Hunt = "hunt",
        /// Each new session to the next member in turn.
        RoundRobin = "round-robin",
        /// The member with the fewest sessions relative to its `max-sessions` (or
        /// `max-outbound-sessions`).
        LeastBusy = "least-busy",
        /// Members in proportion to their session constraints (`max-outbound-sessions`).
        PropDist = "prop-dist",
    }
}

keyword_enum! {
    /// `translation-rules` `type` (Oracle's words): what a rule does to a number or user.
    TranslationType, key "type", default None {
        /// Inserts `add-string` at `add-index`.
        Add = "add",
        /// Removes `delete-string` found at `delete-index`.
        Delete = "delete",
        /// Removes `delete-string` at `delete-index`, then inserts `add-string` at
        /// `add-index`.
        Replace = "replace",
        /// Nothing (a rule kept but inactive).
        None = "none",
    }
}

keyword_enum! {
    /// `session-timer-profile` `request-refresher` and `response-refresher` (RFC 4028 words):
    /// who refreshes the session on a leg where the SBC runs the timer.
    Refresher, key "refresher", default Uac {
        /// The UAC of the leg's INVITE: the SBC toward the callee, the caller toward the SBC.
        Uac = "uac",
        /// The UAS of the leg's INVITE: the callee toward the SBC, the SBC toward the caller.
        Uas = "uas",
    }
}

keyword_enum! {
    /// `realm-config` `refer-call-transfer` (Oracle's words): what the SBC does with an
    /// in-dialog REFER arriving in the realm.
    ReferCallTransfer, key "refer-call-transfer", default Disabled {
        /// Relayed to the other leg, its `Refer-To` translated (the transferee transfers).
        Disabled = "disabled",
        /// Answered 202 by the SBC, which calls the `Refer-To` target itself, joins it to the
        /// transferee (a re-INVITE with the target's offer), tells the transferor with a
        /// NOTIFY and releases it.
        Enabled = "enabled",
    }
}

/// `session-timer-profile`: the session timer (RFC 4028) the SBC runs on the legs of a realm
/// that names it (`realm-config` `session-timer-profile`), where the caller did not ask for one
/// itself: `Session-Expires` and `Min-SE` offered, the SBC refreshing (UPDATE, else a
/// re-INVITE) or waiting for the peer's refresh, and a call ended when its leg is not
/// refreshed in time. Requests asking for less than `min-se` get 422.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SessionTimerProfile {
    /// `name`: unique, non-empty, without spaces. Required.
    pub name: String,
    /// `session-expires`: the interval offered, seconds.
    pub session_expires: u32,
    /// `min-se`: the smallest interval accepted (below: 422 with `Min-SE`), seconds.
    pub min_se: u32,
    /// `request-refresher`: the refresher asked of the callee in our INVITE (`uac`: the SBC).
    pub request_refresher: Refresher,
    /// `response-refresher`: the refresher named in our 2xx to a caller that supports timers
    /// (`uas`: the SBC); a caller without timer support is refreshed by the SBC.
    pub response_refresher: Refresher,
    /// `force-reinvite`: the SBC refreshes with a re-INVITE even where the peer allows UPDATE
    /// (default: UPDATE where allowed, a re-INVITE elsewhere).
    pub force_reinvite: bool,
}

impl Default for SessionTimerProfile {
    fn default() -> Self {
        Self {
            name: String::new(),
            session_expires: const { session_timer_profile::SESSION_EXPIRES.u32() },
            min_se: const { session_timer_profile::MIN_SE.u32() },
            request_refresher: Refresher::Uac,
            response_refresher: Refresher::Uas,
            force_reinvite: const { session_timer_profile::FORCE_REINVITE.flag() },
        }
    }
}

/// The prefix of a `next-hop` that names a `session-agent-group`: `SAG:carriers`.
pub const SAG_PREFIX: &str = "SAG:";

/// What a `next-hop` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextHop<'a> {
    /// A `session-agent`, by name.
    Agent(&'a str),
    /// A `session-agent-group`, by `group-name` (written `SAG:<group-name>`; the prefix in any
    /// case).
    Group(&'a str),
}

impl<'a> NextHop<'a> {
    /// Reads a `next-hop` word: `SAG:<name>` (any case of `SAG`) is a group, anything else an
    /// agent.
    #[must_use]
    pub fn parse(word: &'a str) -> Self {
        match word.get(..SAG_PREFIX.len()) {
            Some(prefix) if prefix.eq_ignore_ascii_case(SAG_PREFIX) => {
                Self::Group(&word[SAG_PREFIX.len()..])
            }
            _ => Self::Agent(word),
        }
    }
}

/// `session-agent-group`: session-agents a route names together as `SAG:<group-name>`, and how
/// one of them is chosen (Oracle's element).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SessionAgentGroup {
    /// `group-name`: unique, non-empty, without spaces. Required.
    pub group_name: String,
    /// `state`: a disabled group is no candidate of any route.
    #[serde(default)]
    pub state: AdminState,
    /// `strategy`: how a member is chosen.
    #[serde(default)]
    pub strategy: SagStrategy,
    /// `dest`: the member session-agents, by name, each once; in `hunt` order. Required,
    /// non-empty.
    pub dest: Vec<String>,
    /// `sag-recursion`: after a member fails (a final error or no answer), the next member is
    /// tried (Oracle's default: off, the request fails over to the route's next candidate).
    #[serde(default)]
    pub sag_recursion: bool,
    /// `stop-sag-recurse`: final responses (300..=699) of a member that end the recursion and
    /// go back to the caller: by default 401 and 407, a challenge the caller must answer.
    #[serde(default = "default_stop_sag_recurse")]
    pub stop_sag_recurse: Vec<u16>,
}

fn codes(list: &[&str]) -> Vec<u16> {
    list.iter().filter_map(|code| code.parse().ok()).collect()
}

fn default_stop_sag_recurse() -> Vec<u16> {
    codes(session_agent_group::STOP_SAG_RECURSE.list())
}

impl Default for SessionAgentGroup {
    /// A group without name nor members (as the ACLI starts one).
    fn default() -> Self {
        Self {
            group_name: String::new(),
            state: AdminState::DEFAULT,
            strategy: SagStrategy::DEFAULT,
            dest: Vec::new(),
            sag_recursion: const { session_agent_group::SAG_RECURSION.flag() },
            stop_sag_recurse: default_stop_sag_recurse(),
        }
    }
}

/// `local-policy`: Oracle's routing table row: requests from `from-address` to `to-address`
/// arriving in `source-realm` may go to each of its `policy-attributes`' next hops. The three
/// lists name the policy among the others (its key). See [`crate::Config::effective_local_policies`]
/// for the rows `session-router` adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct LocalPolicy {
    /// `from-address`: prefixes of the From user (digits or users, read left to right), or
    /// [`LocalPolicy::ANY`] alone for any.
    pub from_address: Vec<String>,
    /// `to-address`: prefixes of the Request-URI user, or `*` alone for any.
    pub to_address: Vec<String>,
    /// `source-realm`: the realms (sip-interface realms) the request arrives from, or `*` alone
    /// for any.
    pub source_realm: Vec<String>,
    /// `description`: free text for the operator. Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `state`: a disabled policy matches nothing.
    pub state: AdminState,
    /// `policy-attribute` (`[[local-policy.policy-attribute]]`, the ACLI's `policy-attributes`):
    /// the next hops, each with its cost and time window; each next-hop once. Default none.
    #[serde(rename = "policy-attribute")]
    pub policy_attributes: Vec<PolicyAttribute>,
}

fn any_list() -> Vec<String> {
    local_policy::FROM_ADDRESS
        .list()
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

impl Default for LocalPolicy {
    /// From any, to any, from any realm, without next hops.
    fn default() -> Self {
        Self {
            from_address: any_list(),
            to_address: any_list(),
            source_realm: any_list(),
            description: None,
            state: AdminState::DEFAULT,
            policy_attributes: Vec::new(),
        }
    }
}

impl LocalPolicy {
    /// The entry of `from-address`, `to-address` and `source-realm` that means any.
    pub const ANY: &'static str = "*";

    /// What names this policy among the configuration's (the ACLI's `select` key, Oracle's):
    /// from-address, to-address and source-realm, each list joined with `,`:
    /// `"* 1555,1666 access"`.
    #[must_use]
    pub fn key(&self) -> String {
        format!(
            "{} {} {}",
            self.from_address.join(","),
            self.to_address.join(","),
            self.source_realm.join(",")
        )
    }

    /// Whether the policy applies to requests arriving in `realm` (`source-realm` `*` or
    /// naming it).
    #[must_use]
    pub fn applies_to_realm(&self, realm: &str) -> bool {
        self.source_realm
            .iter()
            .any(|r| r == Self::ANY || r == realm)
    }
}

/// `policy-attributes` of a `local-policy`: one next hop and when it may be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PolicyAttribute {
    /// `next-hop`: a session-agent's name, or `SAG:<group-name>` (see [`NextHop`]). Required.
    pub next_hop: String,
    /// `realm`: the realm the request leaves by. Default none: the next hop's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realm: Option<String>,
    /// `cost`: lower is preferred (0..=999999999).
    #[serde(default)]
    pub cost: u32,
    /// `start-time`: the daily window's start, `hhmm` (`"0000"`..=`"2400"`); see
    /// [`parse_hhmm`].
    #[serde(default = "default_start_time")]
    pub start_time: String,
    /// `end-time`: the window's end, `hhmm`; before `start-time`, the window spans midnight.
    #[serde(default = "default_end_time")]
    pub end_time: String,
    /// `days-of-week`: Oracle's letters `U M T W R F S` (Sunday first), ranges `M-F`, lists
    /// `MWF` or `U,S`; see [`parse_days_of_week`].
    #[serde(default = "default_days")]
    pub days_of_week: String,
    /// `terminate-recursion`: a failure of this next hop ends the hunt (no later candidate is
    /// tried).
    #[serde(default)]
    pub terminate_recursion: bool,
    /// `state`: a disabled attribute is no candidate.
    #[serde(default)]
    pub state: AdminState,
}

fn default_start_time() -> String {
    policy_attributes::START_TIME.text().to_owned()
}

fn default_end_time() -> String {
    policy_attributes::END_TIME.text().to_owned()
}

fn default_days() -> String {
    policy_attributes::DAYS_OF_WEEK.text().to_owned()
}

impl Default for PolicyAttribute {
    /// No next hop yet, every other key its default (every day, all day, cost 0).
    fn default() -> Self {
        Self::to(String::new())
    }
}

impl PolicyAttribute {
    /// An attribute to `next_hop` with every other key its default.
    #[must_use]
    pub fn to(next_hop: impl Into<String>) -> Self {
        Self {
            next_hop: next_hop.into(),
            realm: None,
            cost: const { policy_attributes::COST.u32() },
            start_time: default_start_time(),
            end_time: default_end_time(),
            days_of_week: default_days(),
            terminate_recursion: const { policy_attributes::TERMINATE_RECURSION.flag() },
            state: AdminState::DEFAULT,
        }
    }

    /// What `next-hop` names.
    #[must_use]
    pub fn target(&self) -> NextHop<'_> {
        NextHop::parse(&self.next_hop)
    }

    /// `start-time` as the number `hhmm` (`"0830"` → 830), the form `sbc-proto`'s
    /// `PolicyAttribute` takes; `None` when invalid (which validation refuses).
    #[must_use]
    pub fn start(&self) -> Option<u16> {
        parse_hhmm(&self.start_time).ok()
    }

    /// `end-time` as the number `hhmm`; `None` when invalid.
    #[must_use]
    pub fn end(&self) -> Option<u16> {
        parse_hhmm(&self.end_time).ok()
    }

    /// `days-of-week` as a bit set, bit 0 Sunday .. bit 6 Saturday; `None` when invalid.
    #[must_use]
    pub fn days(&self) -> Option<u8> {
        parse_days_of_week(&self.days_of_week).ok()
    }
}

/// Parses a time of day written `hhmm` with exactly four digits, `"0000"` to `"2400"`
/// (minutes 00..=59; 24 only as `2400`, the end of the day), to the number `hhmm`.
///
/// # Errors
/// Why the text is not one, for the validation message.
pub fn parse_hhmm(text: &str) -> Result<u16, String> {
    if text.len() != 4 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err("not four digits hhmm".to_owned());
    }
    let value: u16 = text
        .parse()
        .map_err(|_| "not four digits hhmm".to_owned())?;
    let (hours, minutes) = (value / 100, value % 100);
    if minutes > 59 {
        return Err(format!("{minutes} minutes"));
    }
    if hours > 24 || (hours == 24 && minutes != 0) {
        return Err("after 2400".to_owned());
    }
    Ok(value)
}

/// The letters of `days-of-week`, Sunday first (Oracle's: U for Sunday, R for Thursday).
pub const DAY_LETTERS: &str = "UMTWRFS";

/// Parses `days-of-week` to a bit set (bit 0 Sunday .. bit 6 Saturday): Oracle's letters
/// `U M T W R F S` in any case, ranges `M-F` (wrapping: `F-M` is Friday to Monday), several
/// parts run together or separated by commas: `U-S`, `MTWRF`, `M-F,S`.
///
/// # Errors
/// Why the text is not one, for the validation message.
pub fn parse_days_of_week(text: &str) -> Result<u8, String> {
    let day = |c: char| {
        DAY_LETTERS
            .find(c.to_ascii_uppercase())
            .ok_or_else(|| format!("{} is not a day letter", quoted(&c.to_string())))
    };
    let mut bits = 0u8;
    for part in text.split(',') {
        let chars: Vec<char> = part.chars().collect();
        if chars.is_empty() {
            return Err("an empty part".to_owned());
        }
        let mut i = 0;
        while i < chars.len() {
            let first = day(chars[i])?;
            if chars.get(i + 1) == Some(&'-') {
                let Some(&last) = chars.get(i + 2) else {
                    return Err("a range without its last day".to_owned());
                };
                let last = day(last)?;
                let mut d = first;
                loop {
                    bits |= 1 << d;
                    if d == last {
                        break;
                    }
                    d = (d + 1) % 7;
                }
                i += 3;
            } else {
                bits |= 1 << first;
                i += 1;
            }
        }
    }
    Ok(bits)
}

/// `local-routing-config`: a large route table kept in a file of its own (rows
/// `to-address,next-hop[,cost]`) for requests from `source-realm`. The node loads the file;
/// this crate checks neither that it exists nor the next hops it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LocalRoutingConfig {
    /// `name`: unique, non-empty, without spaces. Required.
    pub name: String,
    /// `file-name`: the path of the route table file. Required.
    pub file_name: String,
    /// `source-realm`: the realms whose requests it routes, or `*` alone for any.
    #[serde(default = "any_list")]
    pub source_realm: Vec<String>,
    /// `state`: a disabled table is not used.
    #[serde(default)]
    pub state: AdminState,
}

impl Default for LocalRoutingConfig {
    /// No name nor file yet, from any realm.
    fn default() -> Self {
        Self {
            name: String::new(),
            file_name: String::new(),
            source_realm: any_list(),
            state: AdminState::DEFAULT,
        }
    }
}

/// A position in a number or user: from the start (0 before the first character), or
/// [`TranslationIndex::End`] (`$`). In TOML `3` or `"$"` (`"3"` is read too, as the ACLI
/// writes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TranslationIndex {
    /// This many characters from the start.
    At(u32),
    /// The end (`$`).
    End,
}

impl TranslationIndex {
    /// How the end is written.
    pub const END: &'static str = "$";
}

impl Default for TranslationIndex {
    fn default() -> Self {
        Self::At(0)
    }
}

impl fmt::Display for TranslationIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::At(n) => write!(f, "{n}"),
            Self::End => f.write_str(Self::END),
        }
    }
}

impl FromStr for TranslationIndex {
    type Err = ConfigError;

    /// `$` or a whole number up to 4294967295.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == Self::END {
            return Ok(Self::End);
        }
        s.parse().map(Self::At).map_err(|_| {
            ConfigError::invalid(
                "index",
                quoted(s),
                "not a position",
                "a whole number from 0, or \"$\" for the end",
            )
        })
    }
}

impl Serialize for TranslationIndex {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::At(n) => serializer.serialize_u32(*n),
            Self::End => serializer.serialize_str(Self::END),
        }
    }
}

impl<'de> Deserialize<'de> for TranslationIndex {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IndexVisitor;

        impl Visitor<'_> for IndexVisitor {
            type Value = TranslationIndex;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number from 0, or \"$\" for the end")
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                u32::try_from(v)
                    .map(TranslationIndex::At)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                u32::try_from(v)
                    .map(TranslationIndex::At)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                v.parse()
                    .map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self))
            }
        }

        deserializer.deserialize_any(IndexVisitor)
    }
}

/// `translation-rules`: one edit of a number or user (Oracle's element), which
/// `session-translation`s name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TranslationRules {
    /// `id`: unique, non-empty, without spaces. Required.
    pub id: String,
    /// `type`: add, delete, replace or none.
    #[serde(rename = "type", default)]
    pub kind: TranslationType,
    /// `add-string`: what `add` and `replace` insert; required by them.
    #[serde(default)]
    pub add_string: String,
    /// `add-index`: where it is inserted.
    #[serde(default)]
    pub add_index: TranslationIndex,
    /// `delete-string`: what `delete` and `replace` remove (Oracle's `@` matches any one
    /// character); required by them.
    #[serde(default)]
    pub delete_string: String,
    /// `delete-index`: where it must be found.
    #[serde(default)]
    pub delete_index: TranslationIndex,
}

impl TranslationRules {
    /// A rule `id` of type none.
    #[must_use]
    pub fn named(id: &str) -> Self {
        Self {
            id: id.to_owned(),
            kind: TranslationType::DEFAULT,
            add_string: String::new(),
            add_index: TranslationIndex::default(),
            delete_string: String::new(),
            delete_index: TranslationIndex::default(),
        }
    }
}

impl Default for TranslationRules {
    fn default() -> Self {
        Self::named("")
    }
}

/// `realm-config`: what a realm (the `realm` of `sip-interface`s) applies to the requests it
/// carries: Oracle's element, with its translation keys only. A session-agent's own
/// `in-translationid` / `out-translationid` wins over its realm's.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RealmConfig {
    /// `identifier`: the realm (a sip-interface's `realm`), each once. Required.
    pub identifier: String,
    /// `in-translationid`: the `session-translation` applied to new requests arriving in the
    /// realm (from anyone but a session-agent that has its own), before routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_translationid: Option<String>,
    /// `out-translationid`: the `session-translation` applied to new requests sent into the
    /// realm (to a session-agent without its own), after routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_translationid: Option<String>,
    /// `allow-anonymous`: who may place new requests arriving in the realm (default all).
    #[serde(default)]
    pub allow_anonymous: super::AllowAnonymous,
    /// `session-timer-profile`: the session timer the SBC runs on the realm's legs (none:
    /// only the timers the endpoints negotiate are enforced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_timer_profile: Option<String>,
    /// `session-max-life-limit`: a call with a leg in the realm ends (BYE on both legs) this
    /// long after its INVITE, seconds; 0 = no limit.
    #[serde(default)]
    pub session_max_life_limit: u32,
    /// `refer-call-transfer`: whether the SBC performs a transfer asked by an in-dialog REFER
    /// arriving in the realm (default disabled: the REFER is relayed).
    #[serde(default)]
    pub refer_call_transfer: ReferCallTransfer,
}

impl RealmConfig {
    /// Its key: the realm.
    #[must_use]
    pub fn key(&self) -> String {
        self.identifier.clone()
    }
}

/// `session-translation`: the `translation-rules` applied to the calling (From, P-Asserted)
/// and called (Request-URI, To) users, in order; a session-agent (or realm) names it as its
/// `in-translationid` (applied before routing) or `out-translationid` (after).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SessionTranslation {
    /// `id`: unique, non-empty, without spaces. Required.
    pub id: String,
    /// `rules-calling`: translation-rules ids applied to the calling user, in order.
    #[serde(default)]
    pub rules_calling: Vec<String>,
    /// `rules-called`: translation-rules ids applied to the called user, in order.
    #[serde(default)]
    pub rules_called: Vec<String>,
}
