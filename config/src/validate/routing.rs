//! The rules of issue 28's routing keys: a session-agent's health and limits, and the
//! `translation-rules`, `session-translation`, `session-agent-group`, `local-policy` and
//! `local-routing-config` elements and their references.

use std::collections::HashMap;
use std::ops::RangeInclusive;

use super::{agent_list, check, is_cert_name, realm_list, sip_method};
use crate::error::{quoted, quoted_list, ConfigError};
use crate::keys::{policy_attributes, realm_config, session_agent, session_timer_profile};
use crate::model::{
    parse_days_of_week, parse_hhmm, LocalPolicy, NextHop, SessionAgent, SipInterface,
    TranslationRules, TranslationType,
};
use crate::Config;

/// Codes a ping's answer may have: provisional to global failure.
const ANSWER_CODES: RangeInclusive<u16> = 100..=699;
/// Codes that end a group's recursion: final responses other than success.
const FINAL_ERROR_CODES: RangeInclusive<u16> = 300..=699;
/// Methods a ping may not use: they need a dialog or a transaction to refer to, or start a
/// call.
const NOT_PING_METHODS: &[&str] = &["ACK", "BYE", "CANCEL", "INFO", "INVITE", "PRACK", "UPDATE"];

/// A session-agent's issue-28 keys: `hostname` a DNS name or IP address; `ping-method` a
/// method answered outside a dialog; the ranges; response codes in range, each once, none in
/// both lists; `max-outbound-sessions` at most `max-sessions` when both are set.
pub(super) fn agent(agent: &SessionAgent, at: &str) -> Result<(), ConfigError> {
    let key = |field: &str| format!("{at}.{field}");
    if let Some(host) = &agent.hostname {
        if !is_cert_name(host) {
            return Err(ConfigError::invalid(
                key("hostname"),
                quoted(host),
                "not a DNS name or an IP address",
                "a DNS name (pbx.example.com) or an IP address, or unset for the agent's address",
            ));
        }
    }
    let method = &agent.ping_method;
    let refused = NOT_PING_METHODS.contains(&method.as_str());
    if let Err(why) = sip_method(method).and(if refused {
        Err("a ping is sent outside any dialog and starts no call")
    } else {
        Ok(())
    }) {
        return Err(ConfigError::invalid(
            key("ping-method"),
            quoted(method),
            why,
            format!(
                "a SIP method in capitals, e.g. OPTIONS (the default) or NOTIFY; not {}",
                NOT_PING_METHODS.join(", ")
            ),
        ));
    }
    use session_agent as k;
    check(at, &k::PING_INTERVAL, agent.ping_interval)?;
    check(
        at,
        &k::PING_RESPONSE_TIMEOUT_MS,
        agent.ping_response_timeout_ms,
    )?;
    check(at, &k::PING_MISSES, agent.ping_misses)?;
    codes(
        &key(k::PING_IN_SERVICE_RESPONSE_CODES.name),
        &agent.ping_in_service_response_codes,
        &ANSWER_CODES,
    )?;
    codes(
        &key(k::OUT_SERVICE_RESPONSE_CODES.name),
        &agent.out_service_response_codes,
        &ANSWER_CODES,
    )?;
    for (n, code) in agent.out_service_response_codes.iter().enumerate() {
        if agent.ping_in_service_response_codes.contains(code) {
            return Err(ConfigError::invalid(
                format!("{}[{n}]", key(k::OUT_SERVICE_RESPONSE_CODES.name)),
                code.to_string(),
                "also in ping-in-service-response-codes: an answer cannot be up and down",
                "a code not in ping-in-service-response-codes",
            ));
        }
    }
    check(at, &k::TRANS_TIMEOUTS, agent.trans_timeouts)?;
    check(at, &k::TIME_TO_RESUME, agent.time_to_resume)?;
    check(at, &k::INVITE_TRANS_EXPIRE, agent.invite_trans_expire)?;
    if agent.max_sessions > 0 && agent.max_outbound_sessions > agent.max_sessions {
        return Err(ConfigError::invalid(
            key(k::MAX_OUTBOUND_SESSIONS.name),
            agent.max_outbound_sessions.to_string(),
            format!(
                "above max-sessions ({}), which counts outbound sessions too",
                agent.max_sessions
            ),
            format!("0 (unlimited) or 1..={}", agent.max_sessions),
        ));
    }
    Ok(())
}

/// Each code of `list` (at `key`) in `range` and at most once.
fn codes(key: &str, list: &[u16], range: &RangeInclusive<u16>) -> Result<(), ConfigError> {
    for (n, code) in list.iter().enumerate() {
        let key = format!("{key}[{n}]");
        if !range.contains(code) {
            return Err(ConfigError::invalid(
                key,
                code.to_string(),
                "not a SIP response code of this use",
                format!("{}..={}", range.start(), range.end()),
            ));
        }
        if let Some(first) = list[..n].iter().position(|c| c == code) {
            return Err(ConfigError::invalid(
                key,
                code.to_string(),
                format!("already [{first}]"),
                "each code at most once",
            ));
        }
    }
    Ok(())
}

/// A name that keys an element (`id`, `group-name`, `name`): non-empty, without spaces (the
/// ACLI's `select` reads words), unique among `names` (which it joins).
fn name<'a>(
    names: &mut HashMap<&'a str, usize>,
    element: &str,
    i: usize,
    field: &str,
    value: &'a str,
) -> Result<(), ConfigError> {
    let key = format!("{element}[{i}].{field}");
    if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ConfigError::invalid(
            key,
            quoted(value),
            if value.is_empty() {
                "must not be empty"
            } else {
                "has spaces or control characters"
            },
            "a non-empty name without spaces",
        ));
    }
    if let Some(first) = names.insert(value, i) {
        return Err(ConfigError::invalid(
            key,
            quoted(value),
            format!("duplicate {field}, already used by {element}[{first}]"),
            format!("a {field} not used by another {element}"),
        ));
    }
    Ok(())
}

/// The routing elements, in dependency order: translation-rules, session-translation (and the
/// agents' translation ids), session-agent-group, local-policy, local-routing-config.
pub(super) fn routing(config: &Config) -> Result<(), ConfigError> {
    translation_rules(&config.translation_rules)?;
    session_translations(config)?;
    session_timer_profiles(config)?;
    realm_configs(config)?;
    groups(config)?;
    local_policies(config)?;
    local_routing(config)
}

/// `translation-rules`: ids; `add` needs an `add-string`, `delete` a `delete-string`,
/// `replace` both.
fn translation_rules(rules: &[TranslationRules]) -> Result<(), ConfigError> {
    let mut ids = HashMap::new();
    for (i, rule) in rules.iter().enumerate() {
        name(&mut ids, "translation-rules", i, "id", &rule.id)?;
        let needs_add = matches!(rule.kind, TranslationType::Add | TranslationType::Replace);
        let needs_delete = matches!(
            rule.kind,
            TranslationType::Delete | TranslationType::Replace
        );
        for (needed, field, value) in [
            (needs_add, "add-string", &rule.add_string),
            (needs_delete, "delete-string", &rule.delete_string),
        ] {
            if needed && value.is_empty() {
                return Err(ConfigError::invalid(
                    format!("translation-rules[{i}].{field}"),
                    quoted(value),
                    format!("required with type = {}", quoted(rule.kind.as_str())),
                    format!("a non-empty {field}, or another type"),
                ));
            }
        }
    }
    Ok(())
}

/// `session-translation`: ids; each rule id a translation-rules' at most once per list; each
/// session-agent's `in-translationid` and `out-translationid` a session-translation's id.
fn session_translations(config: &Config) -> Result<(), ConfigError> {
    let rule_ids = || quoted_list(config.translation_rules.iter().map(|r| r.id.as_str()));
    let mut ids = HashMap::new();
    for (i, t) in config.session_translations.iter().enumerate() {
        name(&mut ids, "session-translation", i, "id", &t.id)?;
        for (field, list) in [
            ("rules-calling", &t.rules_calling),
            ("rules-called", &t.rules_called),
        ] {
            for (n, id) in list.iter().enumerate() {
                let key = format!("session-translation[{i}].{field}[{n}]");
                if config.translation_rule(id).is_none() {
                    return Err(ConfigError::invalid(
                        key,
                        quoted(id),
                        "no translation-rules has this id",
                        rule_ids(),
                    ));
                }
                if let Some(first) = list[..n].iter().position(|other| other == id) {
                    return Err(ConfigError::invalid(
                        key,
                        quoted(id),
                        format!("already {field}[{first}]"),
                        "each translation-rules at most once",
                    ));
                }
            }
        }
    }
    for (i, agent) in config.session_agents.iter().enumerate() {
        translation_ids(
            config,
            &format!("session-agent[{i}]"),
            &agent.in_translationid,
            &agent.out_translationid,
        )?;
    }
    Ok(())
}

/// An element's `in-translationid` and `out-translationid`: each, when set, a
/// session-translation's id.
fn translation_ids(
    config: &Config,
    at: &str,
    inbound: &Option<String>,
    outbound: &Option<String>,
) -> Result<(), ConfigError> {
    for (field, id) in [
        ("in-translationid", inbound),
        ("out-translationid", outbound),
    ] {
        let Some(id) = id else { continue };
        if config.session_translation(id).is_none() {
            return Err(ConfigError::invalid(
                format!("{at}.{field}"),
                quoted(id),
                "no session-translation has this id",
                quoted_list(config.session_translations.iter().map(|t| t.id.as_str())),
            ));
        }
    }
    Ok(())
}

/// `session-timer-profile`: unique names; `session-expires` 90..=86400, `min-se` from 90 to
/// `session-expires` (RFC 4028: Min-SE is never below 90 s).
fn session_timer_profiles(config: &Config) -> Result<(), ConfigError> {
    let mut names = HashMap::new();
    for (i, p) in config.session_timer_profiles.iter().enumerate() {
        name(&mut names, "session-timer-profile", i, "name", &p.name)?;
        let at = format!("session-timer-profile[{i}]");
        check(
            &at,
            &session_timer_profile::SESSION_EXPIRES,
            p.session_expires,
        )?;
        if !(90..=p.session_expires).contains(&p.min_se) {
            return Err(ConfigError::invalid(
                format!("{at}.min-se"),
                p.min_se.to_string(),
                format!(
                    "must be from 90 (RFC 4028) to session-expires ({})",
                    p.session_expires
                ),
                format!(
                    "90..={}, or change session-expires",
                    p.session_expires.max(90)
                ),
            ));
        }
    }
    Ok(())
}

/// `realm-config`: each names a sip-interface realm, once; its translation ids name
/// session-translations, its `session-timer-profile` a profile.
fn realm_configs(config: &Config) -> Result<(), ConfigError> {
    let mut realms = HashMap::new();
    for (i, realm) in config.realm_configs.iter().enumerate() {
        name(
            &mut realms,
            "realm-config",
            i,
            "identifier",
            &realm.identifier,
        )?;
        if !config
            .sip_interfaces
            .iter()
            .any(|iface| iface.realm == realm.identifier)
        {
            return Err(ConfigError::invalid(
                format!("realm-config[{i}].identifier"),
                quoted(&realm.identifier),
                "no sip-interface has this realm",
                realm_list(&config.sip_interfaces),
            ));
        }
        translation_ids(
            config,
            &format!("realm-config[{i}]"),
            &realm.in_translationid,
            &realm.out_translationid,
        )?;
        if let Some(profile) = &realm.session_timer_profile {
            if config.session_timer_profile(profile).is_none() {
                return Err(ConfigError::invalid(
                    format!("realm-config[{i}].session-timer-profile"),
                    quoted(profile),
                    "no session-timer-profile has this name",
                    quoted_list(
                        config
                            .session_timer_profiles
                            .iter()
                            .map(|p| p.name.as_str()),
                    ),
                ));
            }
        }
        check(
            &format!("realm-config[{i}]"),
            &realm_config::SESSION_MAX_LIFE_LIMIT,
            realm.session_max_life_limit,
        )?;
    }
    Ok(())
}

/// `session-agent-group`: names; `dest` non-empty, each a session-agent at most once;
/// `stop-sag-recurse` final error codes, each once.
fn groups(config: &Config) -> Result<(), ConfigError> {
    let mut names = HashMap::new();
    for (i, group) in config.session_agent_groups.iter().enumerate() {
        let at = format!("session-agent-group[{i}]");
        name(
            &mut names,
            "session-agent-group",
            i,
            "group-name",
            &group.group_name,
        )?;
        if group.dest.is_empty() {
            return Err(ConfigError::invalid(
                format!("{at}.dest"),
                "[]",
                "a group needs at least one member",
                agent_list(&config.session_agents),
            ));
        }
        for (n, member) in group.dest.iter().enumerate() {
            let key = format!("{at}.dest[{n}]");
            if config.session_agent(member).is_none() {
                return Err(ConfigError::invalid(
                    key,
                    quoted(member),
                    "no session-agent has this name",
                    agent_list(&config.session_agents),
                ));
            }
            if let Some(first) = group.dest[..n].iter().position(|m| m == member) {
                return Err(ConfigError::invalid(
                    key,
                    quoted(member),
                    format!("already dest[{first}]"),
                    "each session-agent at most once",
                ));
            }
        }
        codes(
            &format!("{at}.stop-sag-recurse"),
            &group.stop_sag_recurse,
            &FINAL_ERROR_CODES,
        )?;
    }
    Ok(())
}

/// A list of `from-address`, `to-address` or `source-realm`: non-empty, `*` alone or entries
/// without spaces (the ACLI key reads words); realms (`interfaces` given) a sip-interface's.
fn patterns(
    key: &str,
    list: &[String],
    interfaces: Option<&[SipInterface]>,
) -> Result<(), ConfigError> {
    let what = if interfaces.is_some() {
        "sip-interface realms"
    } else {
        "user or number prefixes without spaces"
    };
    if list.is_empty() {
        return Err(ConfigError::invalid(
            key,
            "[]",
            "an empty list matches nothing",
            format!("[\"*\"] for any, or {what}"),
        ));
    }
    for (n, entry) in list.iter().enumerate() {
        let key = format!("{key}[{n}]");
        if entry == LocalPolicy::ANY {
            if list.len() > 1 {
                return Err(ConfigError::invalid(
                    key,
                    quoted(entry),
                    "\"*\" matches any and stands alone",
                    format!("[\"*\"] alone, or {what} without \"*\""),
                ));
            }
            continue;
        }
        if entry.is_empty() || entry.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ConfigError::invalid(
                key,
                quoted(entry),
                if entry.is_empty() {
                    "must not be empty"
                } else {
                    "has spaces or control characters"
                },
                format!("\"*\" alone, or {what}"),
            ));
        }
        if let Some(interfaces) = interfaces {
            if !interfaces.iter().any(|i| i.realm == *entry) {
                return Err(ConfigError::invalid(
                    key,
                    quoted(entry),
                    "no sip-interface has this realm",
                    format!("\"*\" alone, or {}", realm_list(interfaces)),
                ));
            }
        }
        if let Some(first) = list[..n].iter().position(|other| other == entry) {
            return Err(ConfigError::invalid(
                key,
                quoted(entry),
                format!("already [{first}]"),
                "each entry at most once",
            ));
        }
    }
    Ok(())
}

/// `local-policy`: the three lists; no two policies with the same key; each attribute's
/// next-hop an agent or `SAG:<group>` at most once per policy, realm a sip-interface's, cost
/// in range, times `hhmm` with a non-empty window, days Oracle's letters.
fn local_policies(config: &Config) -> Result<(), ConfigError> {
    let mut keys: HashMap<String, usize> = HashMap::new();
    for (i, policy) in config.local_policies.iter().enumerate() {
        let at = format!("local-policy[{i}]");
        patterns(&format!("{at}.from-address"), &policy.from_address, None)?;
        patterns(&format!("{at}.to-address"), &policy.to_address, None)?;
        patterns(
            &format!("{at}.source-realm"),
            &policy.source_realm,
            Some(&config.sip_interfaces),
        )?;
        if let Some(first) = keys.insert(policy.key(), i) {
            return Err(ConfigError::invalid(
                format!("{at}.from-address"),
                quoted(&policy.key()),
                format!(
                    "the same from-address, to-address and source-realm as local-policy[{first}]"
                ),
                "a from-address, to-address and source-realm no other local-policy has \
                 (add next hops to that one as policy-attributes)",
            ));
        }
        for (n, attribute) in policy.policy_attributes.iter().enumerate() {
            let at = format!("{at}.policy-attribute[{n}]");
            let key = |field: &str| format!("{at}.{field}");
            let hop = &attribute.next_hop;
            let known = match attribute.target() {
                NextHop::Agent(agent) => config.session_agent(agent).is_some(),
                NextHop::Group(group) => config.session_agent_group(group).is_some(),
            };
            if !known {
                return Err(ConfigError::invalid(
                    key("next-hop"),
                    quoted(hop),
                    match attribute.target() {
                        NextHop::Agent(_) => "no session-agent has this name",
                        NextHop::Group(_) => "no session-agent-group has this group-name",
                    },
                    next_hops(config),
                ));
            }
            if let Some(first) = policy.policy_attributes[..n]
                .iter()
                .position(|other| other.next_hop == *hop)
            {
                return Err(ConfigError::invalid(
                    key("next-hop"),
                    quoted(hop),
                    format!("already policy-attribute[{first}] of this local-policy"),
                    "each next-hop at most once per local-policy",
                ));
            }
            if let Some(realm) = &attribute.realm {
                if !config.sip_interfaces.iter().any(|i| i.realm == *realm) {
                    return Err(ConfigError::invalid(
                        key("realm"),
                        quoted(realm),
                        "no sip-interface has this realm",
                        realm_list(&config.sip_interfaces),
                    ));
                }
            }
            check(&at, &policy_attributes::COST, attribute.cost)?;
            let mut window = [0u16; 2];
            for (slot, (field, text)) in [
                ("start-time", &attribute.start_time),
                ("end-time", &attribute.end_time),
            ]
            .into_iter()
            .enumerate()
            {
                window[slot] = parse_hhmm(text).map_err(|why| {
                    ConfigError::invalid(
                        key(field),
                        quoted(text),
                        why,
                        "four digits hhmm, \"0000\"..=\"2400\" (minutes 00..=59)",
                    )
                })?;
            }
            if window[0] == window[1] {
                return Err(ConfigError::invalid(
                    key("end-time"),
                    quoted(&attribute.end_time),
                    "the same as start-time: the window is empty",
                    "a time other than start-time (\"0000\" to \"2400\" is the whole day)",
                ));
            }
            parse_days_of_week(&attribute.days_of_week).map_err(|why| {
                ConfigError::invalid(
                    key("days-of-week"),
                    quoted(&attribute.days_of_week),
                    why,
                    "Oracle's day letters U M T W R F S (Sunday first), ranges and lists: \
                     \"U-S\", \"M-F\", \"MWF\", \"M-F,U\"",
                )
            })?;
        }
    }
    Ok(())
}

/// What a next-hop may name, for messages: `"core", "pbx", "SAG:carriers"`.
fn next_hops(config: &Config) -> String {
    let groups: Vec<String> = config
        .session_agent_groups
        .iter()
        .map(|g| format!("{}{}", crate::SAG_PREFIX, g.group_name))
        .collect();
    quoted_list(
        config
            .session_agents
            .iter()
            .map(|a| a.name.as_str())
            .chain(groups.iter().map(String::as_str)),
    )
}

/// `local-routing-config`: names, a file name, the source realms. The file's rows (and the
/// next hops they name) are the node's to load and check.
fn local_routing(config: &Config) -> Result<(), ConfigError> {
    let mut names = HashMap::new();
    for (i, table) in config.local_routing_configs.iter().enumerate() {
        let at = format!("local-routing-config[{i}]");
        name(&mut names, "local-routing-config", i, "name", &table.name)?;
        if table.file_name.trim().is_empty() {
            return Err(ConfigError::invalid(
                format!("{at}.file-name"),
                quoted(&table.file_name),
                "must not be empty",
                "the path of the route table file",
            ));
        }
        patterns(
            &format!("{at}.source-realm"),
            &table.source_realm,
            Some(&config.sip_interfaces),
        )?;
    }
    Ok(())
}
