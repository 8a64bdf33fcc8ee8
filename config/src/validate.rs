//! The rules a parsed configuration must satisfy before it is used or saved.
//!
//! Rules are checked in file order (system-config, sip-config, sip-interface, session-agent,
//! session-router, then the routing elements of [`routing`]: translation-rules,
//! session-translation, session-agent-group, local-policy, local-routing-config;
//! redundancy-config, auto-scaling-profile, access-control, media-manager,
//! steering-pool, filter-config, sip-monitoring, capture-agent), then the worker groups' profile
//! attachments, and the first broken one is reported, naming its full key.

use std::collections::HashMap;
use std::fmt::Display;
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;

use crate::error::{quoted, quoted_list, ConfigError};
use crate::keys::{
    alarm_threshold, auto_scaling_profile, capture_agent, media_manager, redundancy_config,
    sip_config, sip_monitoring, steering_pool, system_config, tls_profile, KeySpec,
};
use crate::model::{
    split_option, AlarmThreshold, AlarmType, AutoScalingProfile, CaptureAgent, FilterConfig,
    MediaManager, MemorySource, Peer, PeerType, RedundancyConfig, SessionAgent, SessionRouter,
    SipConfig, SipInterface, SipMonitoring, SnmpVersion, SteeringPool, SystemConfig, TlsProfile,
    Transport, TrapReceiver, KNOWN_OPTIONS,
};
use crate::Config;

mod accounting;
mod routing;

/// The lowest `steering-pool.start-port`: the well-known ports stay out of the relay.
const POOL_START_MIN: u64 = steering_pool::START_PORT.min();
/// The fewest RTP/RTCP pairs a `steering-pool` holds.
const POOL_PAIRS_MIN: usize = 2;

pub(crate) fn validate(config: &Config) -> Result<(), ConfigError> {
    system(&config.system)?;
    sip(&config.sip_config)?;
    tls_profiles(&config.tls_profiles)?;
    interfaces(&config.sip_interfaces, &config.tls_profiles)?;
    agents(
        &config.session_agents,
        &config.sip_interfaces,
        &config.tls_profiles,
    )?;
    router(
        &config.session_router,
        &config.session_agents,
        &config.sip_interfaces,
    )?;
    routing::routing(config)?;
    redundancy(&config.redundancy)?;
    profiles(&config.auto_scaling_profiles)?;
    access(&config.access_control)?;
    media_manager(&config.media_manager)?;
    steering_pools(&config.steering_pools, &config.sip_interfaces)?;
    filters(config)?;
    monitoring(&config.sip_monitoring, &config.filter_configs)?;
    capture_agent(&config.capture_agent)?;
    accounting::account_config(&config.account, &config.tls_profiles)?;
    attachments(config)
}

/// `filter-config`: names non-empty, unique and not `*` (which `monitoring-filters` reads as
/// every message); each key that is set valid, and the realm and session-agent it names
/// configured.
fn filters(config: &Config) -> Result<(), ConfigError> {
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, f) in config.filter_configs.iter().enumerate() {
        let key = |field: &str| format!("filter-config[{i}].{field}");
        if f.name.trim().is_empty() {
            return Err(ConfigError::invalid(
                key("name"),
                quoted(&f.name),
                "must not be empty",
                "a non-empty name",
            ));
        }
        if f.name == SipMonitoring::ALL {
            return Err(ConfigError::invalid(
                key("name"),
                quoted(&f.name),
                "\"*\" stands for every message in sip-monitoring's monitoring-filters",
                "a name other than \"*\"",
            ));
        }
        if let Some(first) = names.insert(&f.name, i) {
            return Err(ConfigError::invalid(
                key("name"),
                quoted(&f.name),
                format!("duplicate name, already used by filter-config[{first}]"),
                "a name not used by another filter-config",
            ));
        }
        if let Some(address) = &f.address {
            crate::net::parse_net(address).map_err(|why| {
                ConfigError::invalid(
                    key("address"),
                    quoted(address),
                    why,
                    "an IP address or network: 192.0.2.7, 192.0.2.0/24, ::1, 2001:db8::/32",
                )
            })?;
        }
        if let Some(user) = &f.user {
            if let Err(why) = filter_user(user) {
                return Err(ConfigError::invalid(
                    key("user"),
                    quoted(user),
                    why,
                    "a user part or number (alice, +15551234) or an AoR user@host \
                     (alice@example.com), without spaces",
                ));
            }
        }
        if let Some(realm) = &f.realm {
            if !config.sip_interfaces.iter().any(|i| i.realm == *realm) {
                return Err(ConfigError::invalid(
                    key("realm"),
                    quoted(realm),
                    "no sip-interface has this realm",
                    realm_list(&config.sip_interfaces),
                ));
            }
        }
        if let Some(agent) = &f.session_agent {
            if !config.session_agents.iter().any(|a| a.name == *agent) {
                return Err(ConfigError::invalid(
                    key("session-agent"),
                    quoted(agent),
                    "no session-agent has this name",
                    agent_list(&config.session_agents),
                ));
            }
        }
        if let Some(method) = &f.method {
            if let Err(why) = sip_method(method) {
                return Err(ConfigError::invalid(
                    key("method"),
                    quoted(method),
                    why,
                    "a SIP method in capitals (an RFC 3261 token), e.g. INVITE, REGISTER, \
                     OPTIONS",
                ));
            }
        }
    }
    Ok(())
}

/// Why `user` cannot be a filter's user: empty, spaces or control characters, a URI scheme,
/// or not `user` / `user@host`.
fn filter_user(user: &str) -> Result<(), &'static str> {
    if user.is_empty() {
        return Err("must not be empty (unset it instead)");
    }
    if user.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("has spaces or control characters");
    }
    let lower = user.to_ascii_lowercase();
    if ["sip:", "sips:", "tel:"]
        .iter()
        .any(|s| lower.starts_with(s))
    {
        return Err("a URI: write the user or AoR without its scheme");
    }
    match user.split_once('@') {
        Some((name, host)) if name.is_empty() || host.is_empty() || host.contains('@') => {
            Err("not an AoR user@host")
        }
        _ => Ok(()),
    }
}

/// Why `method` cannot be a SIP method: not an RFC 3261 token (letters, digits and
/// `-.!%*_+`'~`), or with lower-case letters (methods are case-sensitive, and written in
/// capitals).
fn sip_method(method: &str) -> Result<(), &'static str> {
    let token = |c: char| c.is_ascii_alphanumeric() || "-.!%*_+`'~".contains(c);
    if method.is_empty() || !method.chars().all(token) {
        return Err("not a SIP token");
    }
    if method.chars().any(|c| c.is_ascii_lowercase()) {
        return Err("SIP methods are case-sensitive and written in capitals");
    }
    Ok(())
}

/// `sip-monitoring`: each of `monitoring-filters` a filter-config's name, at most once, or
/// `*` alone; the ring's bounds in range.
fn monitoring(m: &SipMonitoring, filters: &[FilterConfig]) -> Result<(), ConfigError> {
    let at = "sip-monitoring";
    let list = &m.monitoring_filters;
    let names = || {
        if filters.is_empty() {
            "\"*\" alone, or the name of a [[filter-config]] (none is configured)".to_owned()
        } else {
            format!(
                "{}, or \"*\" alone",
                quoted_list(filters.iter().map(|f| f.name.as_str()))
            )
        }
    };
    for (k, name) in list.iter().enumerate() {
        let key = format!("{at}.monitoring-filters[{k}]");
        if name == SipMonitoring::ALL {
            if list.len() > 1 {
                return Err(ConfigError::invalid(
                    key,
                    quoted(name),
                    "\"*\" captures every message and stands alone",
                    "[\"*\"] alone, or filter-config names without \"*\"",
                ));
            }
            continue;
        }
        if !filters.iter().any(|f| f.name == *name) {
            return Err(ConfigError::invalid(
                key,
                quoted(name),
                "no filter-config has this name",
                names(),
            ));
        }
        if let Some(j) = list[..k].iter().position(|other| other == name) {
            return Err(ConfigError::invalid(
                key,
                quoted(name),
                format!("already monitoring-filters[{j}]"),
                "each filter-config at most once",
            ));
        }
    }
    check(at, &sip_monitoring::MAX_TRACE_MEMORY, m.max_trace_memory)?;
    check(at, &sip_monitoring::MAX_CAPTURES, m.max_captures)?;
    check(
        at,
        &sip_monitoring::MAX_MESSAGES_PER_CAPTURE,
        m.max_messages_per_capture,
    )
}

/// `capture-agent`: `capture-id` and `queue-size` in range (first, so that the ACLI refuses
/// a value out of range as it is typed, even before the address is set); an address when
/// enabled, never port 0 nor a wildcard (no destination).
fn capture_agent(c: &CaptureAgent) -> Result<(), ConfigError> {
    let at = "capture-agent";
    check(at, &capture_agent::CAPTURE_ID, c.capture_id)?;
    check(at, &capture_agent::QUEUE_SIZE, c.queue_size)?;
    let key = format!("{at}.address");
    let valid = "the capture server's address:port, e.g. 192.0.2.9:9060 ([2001:db8::9]:9060)";
    match c.address {
        None if c.is_enabled() => Err(ConfigError::invalid(
            key,
            "none",
            "required with state = \"enabled\": where the HEP packets go",
            valid,
        )),
        Some(address) if address.port() == 0 => Err(ConfigError::invalid(
            key,
            quoted(&address.to_string()),
            "port 0 is not allowed",
            valid,
        )),
        Some(address) if address.ip().is_unspecified() => Err(ConfigError::invalid(
            key,
            quoted(&address.to_string()),
            "a wildcard address is no destination",
            valid,
        )),
        _ => Ok(()),
    }
}

/// `media-manager`: the latching window and the inactivity timer in range.
fn media_manager(m: &MediaManager) -> Result<(), ConfigError> {
    let at = "media-manager";
    check(at, &media_manager::LATCHING_WINDOW_MS, m.latching_window_ms)?;
    check(at, &media_manager::RTP_INACTIVITY, m.rtp_inactivity)
}

/// Whether a pool on `pool` and an interface on `iface` share an address: the same one, or
/// either the wildcard of the other's family.
fn same_address(pool: IpAddr, iface: IpAddr) -> bool {
    pool == iface
        || (pool.is_ipv4() == iface.is_ipv4() && (pool.is_unspecified() || iface.is_unspecified()))
}

/// `steering-pool`: each in a known realm, one per realm and family (and one for each family
/// the realm has an interface of, once it has one), on a real address, with at least two
/// RTP/RTCP pairs above the well-known ports; no two overlapping (the relay finds a call by
/// its port alone, whatever the address), none over a sip-interface's port on its address.
fn steering_pools(pools: &[SteeringPool], interfaces: &[SipInterface]) -> Result<(), ConfigError> {
    let mut realms: HashMap<(&str, bool), usize> = HashMap::new();
    for (i, pool) in pools.iter().enumerate() {
        let key = |field: &str| format!("steering-pool[{i}].{field}");
        let range = format!("{}..={}", pool.start_port, pool.end_port);
        if !interfaces.iter().any(|iface| iface.realm == pool.realm_id) {
            return Err(ConfigError::invalid(
                key("realm-id"),
                quoted(&pool.realm_id),
                "no sip-interface has this realm",
                realm_list(interfaces),
            ));
        }
        if let Some(first) = realms.insert((&pool.realm_id, pool.ip_address.is_ipv4()), i) {
            return Err(ConfigError::invalid(
                key("realm-id"),
                quoted(&pool.realm_id),
                format!(
                    "realm {} already has an {} steering-pool, steering-pool[{first}]",
                    quoted(&pool.realm_id),
                    family(pool.ip_address)
                ),
                "a realm with at most one steering-pool per address family (one IPv4, one IPv6)",
            ));
        }
        if pool.ip_address.is_unspecified() {
            return Err(ConfigError::invalid(
                key("ip-address"),
                quoted(&pool.ip_address.to_string()),
                "the pool's address is written into the SDP, and a wildcard there means no media",
                "a local IP address that is not a wildcard, e.g. \"192.0.2.10\"",
            ));
        }
        if u64::from(pool.start_port) < POOL_START_MIN {
            return Err(ConfigError::invalid(
                key("start-port"),
                pool.start_port.to_string(),
                "out of range: the well-known ports are not for media",
                steering_pool::START_PORT.valid(),
            ));
        }
        if pool.end_port <= pool.start_port {
            return Err(ConfigError::invalid(
                key("end-port"),
                pool.end_port.to_string(),
                format!("must be above start-port ({})", pool.start_port),
                format!(
                    "{}..=65535, at least {POOL_PAIRS_MIN} RTP/RTCP pairs",
                    pool.start_port.saturating_add(1)
                ),
            ));
        }
        if pool.pairs() < POOL_PAIRS_MIN {
            // Two pairs from the first even port on: RTP and RTCP, then RTP and RTCP again.
            let first_even = u32::from(pool.start_port) + u32::from(pool.start_port) % 2;
            let least = first_even + 3;
            return Err(ConfigError::invalid(
                key("end-port"),
                pool.end_port.to_string(),
                format!(
                    "ports {range} hold {} RTP/RTCP pair(s) (an even RTP port and the odd RTCP \
                     port after it); a pool needs at least {POOL_PAIRS_MIN}",
                    pool.pairs()
                ),
                if least <= u32::from(u16::MAX) {
                    format!("{least}..=65535")
                } else {
                    "a lower start-port: no end-port fits".to_owned()
                },
            ));
        }
        let overlapping = pools[..i].iter().position(|other| {
            pool.start_port <= other.end_port && other.start_port <= pool.end_port
        });
        if let Some(j) = overlapping {
            let other = &pools[j];
            return Err(ConfigError::invalid(
                key("start-port"),
                pool.start_port.to_string(),
                format!(
                    "ports {range} overlap steering-pool[{j}] (realm-id {}, {} ports {}..={}): \
                     the media relay finds a call by its port alone, so two pools never share \
                     a port, even on different addresses",
                    quoted(&other.realm_id),
                    other.ip_address,
                    other.start_port,
                    other.end_port
                ),
                "a port range no other steering-pool uses",
            ));
        }
        let taken = interfaces.iter().position(|iface| {
            same_address(pool.ip_address, iface.address) && pool.ports().contains(&iface.port)
        });
        if let Some(j) = taken {
            return Err(ConfigError::invalid(
                key("start-port"),
                pool.start_port.to_string(),
                format!(
                    "ports {range} on {} hold the port of sip-interface[{j}] ({}, realm {})",
                    pool.ip_address,
                    interfaces[j].socket_addr(),
                    quoted(&interfaces[j].realm)
                ),
                format!(
                    "a port range without {} (or another ip-address)",
                    interfaces[j].port
                ),
            ));
        }
    }
    // A realm with pools anchors every leg: one on an interface of a family without a pool
    // would get the other family's address in its SDP.
    for (j, iface) in interfaces.iter().enumerate() {
        let realm_pools: Vec<&SteeringPool> =
            pools.iter().filter(|p| p.realm_id == iface.realm).collect();
        if let Some(other) = realm_pools.first() {
            if !realm_pools
                .iter()
                .any(|p| same_family(p.ip_address, iface.address))
            {
                return Err(ConfigError::invalid(
                    "steering-pool",
                    format!("{} {}", quoted(&other.realm_id), other.ip_address),
                    format!(
                        "realm {} has an {} sip-interface (sip-interface[{j}], {}) but no {} \
                         steering-pool: its legs' SDP would name an {} address",
                        quoted(&iface.realm),
                        family(iface.address),
                        iface.address,
                        family(iface.address),
                        family(other.ip_address)
                    ),
                    format!(
                        "a steering-pool with realm-id {} on an {} address",
                        quoted(&iface.realm),
                        family(iface.address)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `access-control`: each source an IP address or network, each once.
fn access(entries: &[crate::AccessControl]) -> Result<(), ConfigError> {
    let mut seen = std::collections::HashSet::new();
    for (i, e) in entries.iter().enumerate() {
        let key = format!("access-control[{i}].source-address");
        crate::net::parse_net(&e.source_address).map_err(|why| {
            ConfigError::invalid(
                key.clone(),
                quoted(&e.source_address),
                why,
                "an IP address or network: 192.0.2.7, 10.0.0.0/8, 2001:db8::/32",
            )
        })?;
        if !seen.insert(e.source_address.trim().to_owned()) {
            return Err(ConfigError::invalid(
                key,
                quoted(&e.source_address),
                "duplicate source-address",
                "each source in one access-control entry",
            ));
        }
    }
    Ok(())
}

fn system(system: &SystemConfig) -> Result<(), ConfigError> {
    if system.hostname.trim().is_empty() {
        return Err(ConfigError::invalid(
            "system-config.hostname",
            quoted(&system.hostname),
            "must not be empty",
            "a non-empty name",
        ));
    }
    options(&system.options)?;
    let key = |field: &str| format!("system-config.{field}");
    if system.memory_source == MemorySource::Process && system.memory_limit_mb == 0 {
        return Err(ConfigError::invalid(
            key("memory-limit-mb"),
            "0",
            "required with memory-source = \"process\"",
            "a limit in MiB above 0",
        ));
    }
    let at = "system-config";
    check(at, &system_config::HEAP_LIMIT_MB, system.heap_limit_mb)?;
    check(
        at,
        &system_config::ALARM_ITERATION_MS,
        system.alarm_iteration_ms,
    )?;
    check(
        at,
        &system_config::ALARM_SUBSAMPLES,
        system.alarm_subsamples,
    )?;
    let spike = &system_config::SPIKE_SUBSAMPLES;
    if !(spike.min()..=u64::from(system.alarm_subsamples))
        .contains(&u64::from(system.spike_subsamples))
    {
        return Err(ConfigError::invalid(
            key(spike.name),
            system.spike_subsamples.to_string(),
            format!(
                "out of range, must be at most alarm-subsamples ({})",
                system.alarm_subsamples
            ),
            format!("{}..={}", spike.min(), system.alarm_subsamples),
        ));
    }
    if let Some(addr) = system.metrics_address {
        if addr.port() == 0 {
            return Err(ConfigError::invalid(
                key("metrics-address"),
                quoted(&addr.to_string()),
                "port 0 is not allowed",
                "an address:port with a port in 1..=65535",
            ));
        }
    }
    thresholds(&system.alarm_thresholds)?;
    receivers(&system.trap_receivers)?;
    communities(system)?;
    users(system)
}

/// The shortest USM password (RFC 3414 section 11.2); `sbc_snmp::usm::MIN_PASSWORD` is the
/// same (the `sbc` crate's tests check that they agree).
pub const MIN_SNMP_PASSWORD: usize = 8;

fn users(system: &SystemConfig) -> Result<(), ConfigError> {
    if let Some(id) = &system.snmp_engine_id {
        crate::model::parse_engine_id(id).map_err(|why| {
            ConfigError::invalid(
                "system-config.snmp-engine-id",
                quoted(id),
                why,
                "5 to 32 octets in hex, e.g. 0x80000cbd0473626361",
            )
        })?;
    }
    let list = &system.snmp_users;
    for (i, u) in list.iter().enumerate() {
        let key = |field: &str| format!("system-config.snmp-user-entry[{i}].{field}");
        if u.user_name.is_empty() || u.user_name.len() > 32 {
            return Err(ConfigError::invalid(
                key("user-name"),
                quoted(&u.user_name),
                "must be 1 to 32 octets",
                "a USM user name, e.g. \"nms\"",
            ));
        }
        if let Some(j) = list[..i].iter().position(|o| o.user_name == u.user_name) {
            return Err(ConfigError::invalid(
                key("user-name"),
                quoted(&u.user_name),
                format!("the same as snmp-user-entry[{j}]"),
                "a user name used once",
            ));
        }
        for (field, password) in [
            ("auth-password", &u.auth_password),
            ("priv-password", &u.priv_password),
        ] {
            if password.chars().count() < MIN_SNMP_PASSWORD {
                return Err(ConfigError::invalid(
                    key(field),
                    "(masked)",
                    format!(
                        "{} characters, fewer than {MIN_SNMP_PASSWORD} (RFC 3414 section 11.2)",
                        password.chars().count()
                    ),
                    "a password of at least 8 characters",
                ));
            }
        }
        for (k, a) in u.ip_addresses.iter().enumerate() {
            crate::net::parse_net(a).map_err(|why| {
                ConfigError::invalid(
                    key(&format!("ip-addresses[{k}]")),
                    quoted(a),
                    why,
                    "an IP address or network, e.g. 10.0.0.0/8",
                )
            })?;
        }
    }
    for (i, r) in system.trap_receivers.iter().enumerate() {
        if r.version != SnmpVersion::V3 {
            continue;
        }
        let key = format!("system-config.trap-receiver[{i}].user-name");
        match &r.user_name {
            None => {
                return Err(ConfigError::invalid(
                    key,
                    "none",
                    "a v3 trap-receiver needs a user",
                    "the user-name of a [[system-config.snmp-user-entry]]",
                ))
            }
            Some(name) if !list.iter().any(|u| &u.user_name == name) => {
                return Err(ConfigError::invalid(
                    key,
                    quoted(name),
                    "names no snmp-user-entry",
                    quoted_list(list.iter().map(|u| u.user_name.as_str())),
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn communities(system: &SystemConfig) -> Result<(), ConfigError> {
    let list = &system.snmp_communities;
    for (i, c) in list.iter().enumerate() {
        let key = |field: &str| format!("system-config.snmp-community[{i}].{field}");
        if c.community_name.is_empty() {
            return Err(ConfigError::invalid(
                key("community-name"),
                "\"\"",
                "must not be empty",
                "a community string known to the SNMP managers",
            ));
        }
        if let Some(j) = list[..i]
            .iter()
            .position(|o| o.community_name == c.community_name)
        {
            return Err(ConfigError::invalid(
                key("community-name"),
                "(masked)",
                format!("the same as snmp-community[{j}]"),
                "a community name used once",
            ));
        }
        for (k, a) in c.ip_addresses.iter().enumerate() {
            crate::net::parse_net(a).map_err(|why| {
                ConfigError::invalid(
                    format!("system-config.snmp-community[{i}].ip-addresses[{k}]"),
                    quoted(a),
                    why,
                    "an IP address or network, e.g. 10.0.0.0/8",
                )
            })?;
        }
    }
    for (key, dns) in [
        ("system-config.dns-ip-primary", system.dns_ip_primary),
        ("system-config.dns-ip-backup1", system.dns_ip_backup1),
    ] {
        if let Some(addr) = dns {
            port(key.to_owned(), addr.port())?;
        }
    }
    if let Some(addr) = system.snmp_agent_address {
        port("system-config.snmp-agent-address".to_owned(), addr.port())?;
        if list.is_empty() && system.snmp_users.is_empty() {
            return Err(ConfigError::invalid(
                "system-config.snmp-agent-address",
                quoted(&addr.to_string()),
                "the agent has no snmp-community nor snmp-user-entry to answer (there is no \
                 default community)",
                "at least one [[system-config.snmp-community]] or [[system-config.snmp-user-entry]]",
            ));
        }
    }
    Ok(())
}

/// The valid option names, for messages.
fn option_names() -> String {
    quoted_list(KNOWN_OPTIONS.iter().map(|(name, _)| *name))
}

fn options(options: &[String]) -> Result<(), ConfigError> {
    for (i, option) in options.iter().enumerate() {
        let key = format!("system-config.options[{i}]");
        let (name, value) = split_option(option);
        let Some((_, values)) = KNOWN_OPTIONS.iter().find(|(known, _)| *known == name) else {
            return Err(ConfigError::invalid(
                key,
                quoted(option),
                format!("unknown option {}", quoted(name)),
                option_names(),
            ));
        };
        match value {
            Some(value) if values.contains(&value) => {}
            _ if values.is_empty() && value.is_none() => {}
            _ => {
                let valid: Vec<String> = values.iter().map(|v| format!("{name}={v}")).collect();
                return Err(ConfigError::invalid(
                    key,
                    quoted(option),
                    format!("bad value for option {}", quoted(name)),
                    quoted_list(valid.iter().map(String::as_str)),
                ));
            }
        }
        if let Some(first) = options[..i]
            .iter()
            .position(|other| split_option(other).0 == name)
        {
            return Err(ConfigError::invalid(
                key,
                quoted(option),
                format!("option {} already set by options[{first}]", quoted(name)),
                "each option at most once",
            ));
        }
    }
    Ok(())
}

fn thresholds(thresholds: &[AlarmThreshold]) -> Result<(), ConfigError> {
    for (i, t) in thresholds.iter().enumerate() {
        let key = |field: &str| format!("system-config.alarm-threshold[{i}].{field}");
        if t.kind == AlarmType::Space {
            if t.volume.trim().is_empty() {
                return Err(ConfigError::invalid(
                    key("volume"),
                    quoted(&t.volume),
                    "required with type = \"space\"",
                    "a mount point, e.g. \"/var\"",
                ));
            }
        } else if !t.volume.is_empty() {
            return Err(ConfigError::invalid(
                key("volume"),
                quoted(&t.volume),
                format!(
                    "only type \"space\" has a volume, not {}",
                    quoted(t.kind.as_str())
                ),
                "\"\" (empty)",
            ));
        }
        let at = format!("system-config.alarm-threshold[{i}]");
        check(&at, &alarm_threshold::VALUE, t.value)?;
        check(&at, &alarm_threshold::HEALTH_PENALTY, t.health_penalty)?;
        let same = |o: &&AlarmThreshold| o.kind == t.kind && o.volume == t.volume;
        if let Some(j) = thresholds[..i]
            .iter()
            .position(|o| same(&o) && o.severity == t.severity)
        {
            return Err(ConfigError::invalid(
                key("severity"),
                quoted(t.severity.as_str()),
                format!(
                    "duplicate: alarm-threshold[{j}] already has type {} and this severity",
                    quoted(t.kind.as_str())
                ),
                "one threshold per type and severity",
            ));
        }
        for (j, o) in thresholds[..i].iter().enumerate().filter(|(_, o)| same(o)) {
            let (low, high) = if o.severity < t.severity {
                (o, t)
            } else {
                (t, o)
            };
            if low.value >= high.value {
                return Err(ConfigError::invalid(
                    key("value"),
                    t.value.to_string(),
                    format!(
                        "a {} threshold must be above a {} one of the same type \
                         (alarm-threshold[{j}] is {} at {})",
                        high.severity, low.severity, o.severity, o.value
                    ),
                    "values rising with severity: minor < major < critical",
                ));
            }
        }
    }
    Ok(())
}

fn receivers(receivers: &[TrapReceiver]) -> Result<(), ConfigError> {
    for (i, r) in receivers.iter().enumerate() {
        let key = |field: &str| format!("system-config.trap-receiver[{i}].{field}");
        port(key("port"), r.port)?;
        if r.community.is_empty() {
            return Err(ConfigError::invalid(
                key("community"),
                "\"\"",
                "must not be empty",
                "an SNMP community, e.g. \"public\"",
            ));
        }
        if let Some(j) = receivers[..i]
            .iter()
            .position(|o| o.socket_addr() == r.socket_addr())
        {
            return Err(ConfigError::invalid(
                key("ip-address"),
                quoted(&r.ip_address.to_string()),
                format!("{} is already trap-receiver[{j}]", r.socket_addr()),
                "an address:port not used by another trap-receiver",
            ));
        }
    }
    Ok(())
}

fn redundancy(r: &RedundancyConfig) -> Result<(), ConfigError> {
    let key = |field: &str| format!("redundancy-config.{field}");
    let ports = [
        ("port", r.port),
        ("config-sync-port", r.config_sync_port),
        ("sip-sync-port", r.sip_sync_port),
    ];
    for (i, (name, value)) in ports.iter().enumerate() {
        port(key(name), *value)?;
        if let Some((other, _)) = ports[..i].iter().find(|(_, v)| v == value) {
            return Err(ConfigError::invalid(
                key(name),
                value.to_string(),
                format!("already used by {other}"),
                "a port not used by port, config-sync-port or sip-sync-port",
            ));
        }
    }
    let at = "redundancy-config";
    check(
        at,
        &redundancy_config::ADVERTISEMENT_TIME,
        r.advertisement_time,
    )?;
    check(at, &redundancy_config::PERCENT_DRIFT, r.percent_drift)?;
    check(at, &redundancy_config::INITIAL_TIME, r.initial_time)?;
    check(
        at,
        &redundancy_config::BECOMING_ACTIVE_TIME,
        r.becoming_active_time,
    )?;
    check(
        at,
        &redundancy_config::BECOMING_STANDBY_TIME,
        r.becoming_standby_time,
    )?;
    check(at, &redundancy_config::HEALTH_THRESHOLD, r.health_threshold)?;
    if r.emergency_threshold >= r.health_threshold {
        return Err(ConfigError::invalid(
            key("emergency-threshold"),
            r.emergency_threshold.to_string(),
            format!("must be below health-threshold ({})", r.health_threshold),
            format!("0..={}", r.health_threshold - 1),
        ));
    }
    if let Some(witness) = r.witness {
        port(key("witness"), witness.port()).map_err(|_| {
            ConfigError::invalid(
                key("witness"),
                quoted(&witness.to_string()),
                "port 0 is not allowed",
                "an address:port with a port in 1..=65535",
            )
        })?;
    }
    peers(&r.peers)?;
    path_families(&r.peers)?;
    if r.is_enabled() {
        if r.shared_key.len() < crate::MIN_SHARED_KEY_LEN {
            return Err(ConfigError::invalid(
                key("shared-key"),
                format!("{} bytes", r.shared_key.len()),
                "required with state = \"enabled\": the pair's secret",
                "a secret of at least 16 bytes shared by both nodes",
            ));
        }
        for kind in PeerType::ALL {
            let count = r.peers.iter().filter(|p| p.kind == *kind).count();
            if count != 1 {
                return Err(ConfigError::invalid(
                    key("peer"),
                    format!("{count} {kind} peers"),
                    "a pair needs exactly one primary and one secondary peer",
                    "one [[redundancy-config.peer]] of type \"primary\" and one of type \"secondary\"",
                ));
            }
        }
    }
    Ok(())
}

fn peers(peers: &[Peer]) -> Result<(), ConfigError> {
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, p) in peers.iter().enumerate() {
        let key = |field: &str| format!("redundancy-config.peer[{i}].{field}");
        if p.name.trim().is_empty() {
            return Err(ConfigError::invalid(
                key("name"),
                quoted(&p.name),
                "must not be empty",
                "a non-empty name",
            ));
        }
        if let Some(first) = names.insert(&p.name, i) {
            return Err(ConfigError::invalid(
                key("name"),
                quoted(&p.name),
                format!("duplicate name, already used by peer[{first}]"),
                "a name not used by another peer",
            ));
        }
        let list = || {
            let items: Vec<String> = p
                .destinations
                .iter()
                .map(|d| quoted(&d.to_string()))
                .collect();
            format!("[{}]", items.join(", "))
        };
        if p.destinations.is_empty() {
            return Err(ConfigError::invalid(
                key("destinations"),
                "[]",
                "at least one heartbeat destination",
                "one or more \"address:port\"",
            ));
        }
        for (j, d) in p.destinations.iter().enumerate() {
            if d.port() == 0 {
                return Err(ConfigError::invalid(
                    key("destinations"),
                    list(),
                    format!("{d}: port 0 is not allowed"),
                    "\"address:port\" with a port in 1..=65535",
                ));
            }
            let canonical = |a: &SocketAddr| (a.ip().to_canonical(), a.port());
            if p.destinations[..j]
                .iter()
                .any(|e| canonical(e) == canonical(d))
            {
                return Err(ConfigError::invalid(
                    key("destinations"),
                    list(),
                    format!("duplicate destination {}", quoted(&d.to_string())),
                    "each address:port at most once",
                ));
            }
        }
    }
    Ok(())
}

/// Heartbeat path `j` runs between the two peers' `j`-th destinations: both IPv4 or both
/// IPv6 (an IPv4-mapped IPv6 address counts as IPv4), or no socket can carry it.
fn path_families(peers: &[Peer]) -> Result<(), ConfigError> {
    let [a, b] = peers else {
        return Ok(());
    };
    let v4 = |d: &SocketAddr| d.ip().to_canonical().is_ipv4();
    for (j, (x, y)) in a.destinations.iter().zip(&b.destinations).enumerate() {
        if v4(x) != v4(y) {
            let family = |d: &SocketAddr| if v4(d) { "IPv4" } else { "IPv6" };
            return Err(ConfigError::invalid(
                "redundancy-config.peer[1].destinations",
                quoted(&y.to_string()),
                format!(
                    "heartbeat path {j} would run from {} ({}) to {y} ({})",
                    x,
                    family(x),
                    family(y)
                ),
                "on each path, both peers' destinations of one family (IPv4 or IPv6)",
            ));
        }
    }
    Ok(())
}

fn profiles(profiles: &[AutoScalingProfile]) -> Result<(), ConfigError> {
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, p) in profiles.iter().enumerate() {
        let key = |field: &str| format!("auto-scaling-profile[{i}].{field}");
        if p.name.trim().is_empty() {
            return Err(ConfigError::invalid(
                key("name"),
                quoted(&p.name),
                "must not be empty",
                "a non-empty name",
            ));
        }
        if let Some(first) = names.insert(&p.name, i) {
            return Err(ConfigError::invalid(
                key("name"),
                quoted(&p.name),
                format!("duplicate name, already used by auto-scaling-profile[{first}]"),
                "a name not used by another auto-scaling-profile",
            ));
        }
        let at = format!("auto-scaling-profile[{i}]");
        check(&at, &auto_scaling_profile::SCALE_UP_TO, p.scale_up_to)?;
        check(&at, &auto_scaling_profile::SCALE_UP_ON, p.scale_up_on)?;
        check(&at, &auto_scaling_profile::SCALE_UP_FOR, p.scale_up_for)?;
        let scale_cycles_max = auto_scaling_profile::SCALE_UP_WITHIN.max();
        if let Some(within_cycles) = p.scale_up_within {
            if !(u64::from(p.scale_up_for)..=scale_cycles_max).contains(&u64::from(within_cycles)) {
                return Err(ConfigError::invalid(
                    key("scale-up-within"),
                    within_cycles.to_string(),
                    format!(
                        "out of range, must be at least scale-up-for ({})",
                        p.scale_up_for
                    ),
                    format!("{}..={scale_cycles_max}", p.scale_up_for),
                ));
            }
        }
        let down = [
            ("scale-down-to", p.scale_down_to.is_some()),
            ("scale-down-on", p.scale_down_on.is_some()),
            ("scale-down-for", p.scale_down_for.is_some()),
        ];
        if down.iter().any(|(_, set)| *set) {
            if let Some((missing, _)) = down.iter().find(|(_, set)| !*set) {
                let given: Vec<&str> = down.iter().filter(|(_, s)| *s).map(|(n, _)| *n).collect();
                return Err(ConfigError::invalid(
                    key(missing),
                    "(absent)",
                    format!("required with {}", given.join(", ")),
                    "all three of scale-down-to, scale-down-on, scale-down-for, or none (never scale down)",
                ));
            }
        }
        if let Some((to, on, cycles)) = p.scale_down() {
            if !(1..p.scale_up_to).contains(&to) {
                return Err(ConfigError::invalid(
                    key("scale-down-to"),
                    to.to_string(),
                    format!("must be below scale-up-to ({})", p.scale_up_to),
                    format!("1..={}", p.scale_up_to.saturating_sub(1)),
                ));
            }
            if on >= p.scale_up_on {
                return Err(ConfigError::invalid(
                    key("scale-down-on"),
                    on.to_string(),
                    format!("must be below scale-up-on ({})", p.scale_up_on),
                    format!("0..={}", p.scale_up_on - 1),
                ));
            }
            check(&at, &auto_scaling_profile::SCALE_DOWN_FOR, cycles)?;
        }
    }
    Ok(())
}

/// The worker groups' profiles: each attachment (`sip-interface[i].auto-scaling-profile`,
/// `sip-config.tcp-auto-scaling-profile`) names an existing `auto-scaling-profile`, and the
/// group's initial count (`sip-config.workers` for a UDP group, `tcp-workers` for the TCP one)
/// lies within that profile's `scale-down-to` (1 without a down rule)..=`scale-up-to`.
fn attachments(config: &Config) -> Result<(), ConfigError> {
    let profiles = &config.auto_scaling_profiles;
    let sip = &config.sip_config;
    // The profile scales the interface's UDP group: without UDP there is none to scale.
    for (i, iface) in config.sip_interfaces.iter().enumerate() {
        if let Some(name) = iface.auto_scaling_profile.as_deref() {
            if !iface.transports.contains(&Transport::Udp) {
                return Err(ConfigError::invalid(
                    format!("sip-interface[{i}].auto-scaling-profile"),
                    quoted(name),
                    "the profile scales the interface's UDP worker group, and this interface \
                     has no udp transport",
                    "an interface whose transports include \"udp\" (TCP traffic scales with \
                     sip-config.tcp-auto-scaling-profile)",
                ));
            }
        }
    }
    let mut groups: Vec<(String, &str, &str, usize)> = config
        .sip_interfaces
        .iter()
        .enumerate()
        .filter_map(|(i, iface)| {
            let name = iface.auto_scaling_profile.as_deref()?;
            Some((
                format!("sip-interface[{i}].auto-scaling-profile"),
                name,
                "workers",
                sip.workers,
            ))
        })
        .collect();
    if let Some(name) = sip.tcp_auto_scaling_profile.as_deref() {
        groups.push((
            "sip-config.tcp-auto-scaling-profile".to_owned(),
            name,
            "tcp-workers",
            sip.tcp_workers,
        ));
    }
    for (key, name, count_key, count) in groups {
        let Some(profile) = profiles.iter().find(|p| p.name == name) else {
            let valid = if profiles.is_empty() {
                "the name of an auto-scaling-profile, but none is defined".to_owned()
            } else {
                quoted_list(profiles.iter().map(|p| p.name.as_str()))
            };
            return Err(ConfigError::invalid(
                key,
                quoted(name),
                "no auto-scaling-profile has this name",
                valid,
            ));
        };
        let low = profile.scale_down_to.unwrap_or(1);
        let high = profile.scale_up_to;
        let fits = u32::try_from(count).is_ok_and(|c| (low..=high).contains(&c));
        if !fits {
            let bound = if profile.scale_down_to.is_some() {
                "its scale-down-to"
            } else {
                "1 (it has no scale-down rule)"
            };
            return Err(ConfigError::invalid(
                format!("sip-config.{count_key}"),
                count.to_string(),
                format!(
                    "the initial worker count of a group with auto-scaling-profile {} \
                     (set by {key}) must lie between {bound} and its scale-up-to",
                    quoted(name)
                ),
                format!("{low}..={high}, or change {key}"),
            ));
        }
    }
    Ok(())
}

/// `at.key = value: out of range (valid: a..=b)` unless the literal range declared for the key
/// ([`KeySpec::literal_range`]) holds `value`; bounds that name other keys are checked by the
/// caller.
fn check(at: &str, spec: &KeySpec, value: impl TryInto<u64>) -> Result<(), ConfigError> {
    let value = value.try_into().unwrap_or(u64::MAX);
    match spec.literal_range() {
        Some(range) => within(format!("{at}.{}", spec.name), value, &range),
        None => Ok(()),
    }
}

/// `key = value: out of range (valid: a..=b)` unless `range` holds `value`.
fn within<T: PartialOrd + Display>(
    key: impl Into<String>,
    value: T,
    range: &RangeInclusive<T>,
) -> Result<(), ConfigError> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            key,
            value.to_string(),
            "out of range",
            format!("{}..={}", range.start(), range.end()),
        ))
    }
}

fn sip(sip: &SipConfig) -> Result<(), ConfigError> {
    use sip_config as k;
    let at = "sip-config";
    check(at, &k::T1_MS, sip.t1_ms)?;
    if !(sip.t1_ms..=k::T2_MS.max()).contains(&sip.t2_ms) {
        return Err(ConfigError::invalid(
            format!("{at}.{}", k::T2_MS.name),
            sip.t2_ms.to_string(),
            format!("out of range, must be at least t1-ms ({})", sip.t1_ms),
            format!("{}..={}", sip.t1_ms, k::T2_MS.max()),
        ));
    }
    check(at, &k::T4_MS, sip.t4_ms)?;
    check(at, &k::TIMER_C_MS, sip.timer_c_ms)?;
    check(at, &k::MAX_MESSAGE_SIZE, sip.max_message_size)?;
    check(at, &k::WORKERS, sip.workers)?;
    check(at, &k::TCP_WORKERS, sip.tcp_workers)?;
    check(at, &k::QUEUE_SIZE, sip.queue_size)?;
    check(at, &k::MAX_QUEUE_DELAY_MS, sip.max_queue_delay_ms)?;
    check(at, &k::ROUTING_COST_US, sip.routing_cost_us)?;
    check(at, &k::SHUTDOWN_GRACE_MS, sip.shutdown_grace_ms)?;
    check(at, &k::HEAP_REJECT_THRESHOLD, sip.heap_reject_threshold)?;
    if sip.heap_resume_threshold >= sip.heap_reject_threshold {
        return Err(ConfigError::invalid(
            format!("{at}.{}", k::HEAP_RESUME_THRESHOLD.name),
            sip.heap_resume_threshold.to_string(),
            format!(
                "must be below heap-reject-threshold ({})",
                sip.heap_reject_threshold
            ),
            format!("0..={}", sip.heap_reject_threshold - 1),
        ));
    }
    check(at, &k::RETRY_AFTER_MIN, sip.retry_after_min)?;
    let retry_max = k::RETRY_AFTER_MAX.max();
    if !(u64::from(sip.retry_after_min)..=retry_max).contains(&u64::from(sip.retry_after_max)) {
        return Err(ConfigError::invalid(
            format!("{at}.{}", k::RETRY_AFTER_MAX.name),
            sip.retry_after_max.to_string(),
            format!(
                "out of range, must be at least retry-after-min ({})",
                sip.retry_after_min
            ),
            format!("{}..={retry_max}", sip.retry_after_min),
        ));
    }
    check(at, &k::AUTO_SCALING_CYCLE_MS, sip.auto_scaling_cycle_ms)?;
    check(at, &k::SOURCE_RATE, sip.source_rate)?;
    check(at, &k::SOURCE_BURST, sip.source_burst)?;
    check(at, &k::SOURCE_DENY_SECONDS, sip.source_deny_seconds)?;
    check(
        at,
        &k::SOURCE_IPV6_PREFIX_LENGTH,
        sip.source_ipv6_prefix_length,
    )?;
    check(at, &k::MAX_CALLS, sip.max_calls)?;
    check(at, &k::MAX_TRANSACTIONS, sip.max_transactions)?;
    check(
        at,
        &k::MAX_SUBSCRIPTIONS_PER_SOURCE,
        sip.max_subscriptions_per_source,
    )?;
    check(at, &k::MAX_HEADER_SIZE, sip.max_header_size)?;
    check(at, &k::TCP_MAX_CONNECTIONS, sip.tcp_max_connections)?;
    let per_source = &k::TCP_MAX_CONNECTIONS_PER_SOURCE;
    within(
        format!("{at}.{}", per_source.name),
        sip.tcp_max_connections_per_source,
        &(usize::try_from(per_source.min()).unwrap_or(usize::MAX)..=sip.tcp_max_connections),
    )?;
    check(at, &k::TCP_MESSAGE_TIMEOUT_MS, sip.tcp_message_timeout_ms)?;
    check(at, &k::TCP_IDLE_TIMEOUT_MS, sip.tcp_idle_timeout_ms)?;
    let write_queue = &k::TCP_WRITE_QUEUE_BYTES;
    within(
        format!("{at}.{}", write_queue.name),
        sip.tcp_write_queue_bytes,
        &(sip.max_message_size..=usize::try_from(write_queue.max()).unwrap_or(usize::MAX)),
    )?;
    check(at, &k::TCP_WRITE_TIMEOUT_MS, sip.tcp_write_timeout_ms)?;
    check(
        at,
        &k::TLS_HANDSHAKE_TIMEOUT_MS,
        sip.tls_handshake_timeout_ms,
    )?;
    check(
        at,
        &k::INITIAL_INV_TRANS_EXPIRE,
        sip.initial_inv_trans_expire,
    )?;
    check(at, &k::REG_CACHE_LIMIT, sip.reg_cache_limit)
}

fn port(key: String, port: u16) -> Result<(), ConfigError> {
    if port == 0 {
        return Err(ConfigError::invalid(
            key,
            "0",
            "port 0 is not allowed",
            "1..=65535",
        ));
    }
    Ok(())
}

/// Writes a transport list as TOML does: `["udp", "tcp"]`.
fn transports_value(transports: &[Transport]) -> String {
    let names: Vec<String> = transports.iter().map(|t| quoted(t.as_str())).collect();
    format!("[{}]", names.join(", "))
}

/// Whether two interfaces would fight over the same socket: same port and either the same
/// address or one of them the wildcard of the same family.
fn overlaps(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port()
        && (a.ip() == b.ip()
            || (a.is_ipv4() == b.is_ipv4() && (a.ip().is_unspecified() || b.ip().is_unspecified())))
}

/// Whether `name` can be a certificate name to verify: an IP address, or a DNS name of
/// letters, digits, `-` and `.` (at most 253 bytes, labels of 1..=63) whose last label is not
/// a number (`1.2.3` is neither a name nor an address). The rules of the name the TLS stack
/// takes (rustls' `ServerName`), so a valid configuration also loads: no `*.` wildcard (a
/// name to verify is a reference identity, RFC 6125 §6.4.3: only a certificate carries
/// wildcards).
fn is_cert_name(name: &str) -> bool {
    if name.parse::<IpAddr>().is_ok() {
        return true;
    }
    let dns = name.strip_suffix('.').unwrap_or(name);
    let numeric = |label: &str| {
        label.bytes().all(|b| b.is_ascii_digit())
            || label
                .strip_prefix("0x")
                .or_else(|| label.strip_prefix("0X"))
                .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    !dns.is_empty()
        && name.len() <= 253
        && dns.rsplit('.').next().is_some_and(|last| !numeric(last))
        && dns.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// `tls-profile`: unique names; the certificate and its key given together; trusted CAs for
/// mutual authentication; names to verify only with it, each a DNS name or an IP address.
fn tls_profiles(profiles: &[TlsProfile]) -> Result<(), ConfigError> {
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, p) in profiles.iter().enumerate() {
        let key = |field: &str| format!("tls-profile[{i}].{field}");
        if p.name.trim().is_empty() {
            return Err(ConfigError::invalid(
                key("name"),
                quoted(&p.name),
                "must not be empty",
                "a non-empty name",
            ));
        }
        if let Some(first) = names.insert(&p.name, i) {
            return Err(ConfigError::invalid(
                key("name"),
                quoted(&p.name),
                format!("duplicate name, already used by tls-profile[{first}]"),
                "a name not used by another tls-profile",
            ));
        }
        match (
            p.end_entity_certificate.is_empty(),
            p.private_key.is_empty(),
        ) {
            (false, true) => {
                return Err(ConfigError::invalid(
                    key("private-key"),
                    "\"\"",
                    "a certificate needs its private key",
                    "the path of the PEM file of the end-entity-certificate's key",
                ))
            }
            (true, false) => {
                return Err(ConfigError::invalid(
                    key("end-entity-certificate"),
                    "\"\"",
                    "a private key needs its certificate",
                    "the path of the PEM file of the certificate chain",
                ))
            }
            _ => {}
        }
        if p.mutual_authenticate && p.trusted_ca_certificates.is_empty() {
            return Err(ConfigError::invalid(
                key("trusted-ca-certificates"),
                "[]",
                "mutual-authenticate needs the CAs that clients' certificates chain to",
                "one or more paths of PEM CA files",
            ));
        }
        if let Some(path) = p
            .trusted_ca_certificates
            .iter()
            .find(|c| c.trim().is_empty())
        {
            return Err(ConfigError::invalid(
                key("trusted-ca-certificates"),
                quoted(path),
                "an empty path",
                "paths of PEM CA files",
            ));
        }
        if !p.verify_names.is_empty() && !p.mutual_authenticate {
            return Err(ConfigError::invalid(
                key("verify-names"),
                quoted_list(p.verify_names.iter().map(String::as_str)),
                "names are verified only on client certificates: mutual-authenticate is off",
                "mutual-authenticate = true, or no verify-names",
            ));
        }
        if let Some(bad) = p.verify_names.iter().find(|n| !is_cert_name(n)) {
            return Err(ConfigError::invalid(
                key("verify-names"),
                quoted(bad),
                "not a DNS name or an IP address",
                "DNS names (sip.example.com, no *. wildcard) or IP addresses",
            ));
        }
        check(
            &format!("tls-profile[{i}]"),
            &tls_profile::EXPIRY_WARNING_DAYS,
            p.expiry_warning_days,
        )?;
    }
    Ok(())
}

/// The profile `name` of `field`, which must exist (and, for a listener, have a certificate;
/// for dialling, trusted CAs).
fn profile_ref<'p>(
    field: String,
    name: &str,
    profiles: &'p [TlsProfile],
) -> Result<&'p TlsProfile, ConfigError> {
    profiles.iter().find(|p| p.name == name).ok_or_else(|| {
        ConfigError::invalid(
            field,
            quoted(name),
            "no tls-profile has this name",
            if profiles.is_empty() {
                "the name of a [[tls-profile]] (none is configured)".to_owned()
            } else {
                quoted_list(profiles.iter().map(|p| p.name.as_str()))
            },
        )
    })
}

fn interfaces(interfaces: &[SipInterface], profiles: &[TlsProfile]) -> Result<(), ConfigError> {
    if interfaces.is_empty() {
        return Err(ConfigError::invalid(
            "sip-interface",
            "[]",
            "at least one sip-interface is required",
            "one or more [[sip-interface]] tables with a realm, address, port and transports",
        ));
    }
    let mut realms: HashMap<(&str, bool), usize> = HashMap::new();
    for (i, iface) in interfaces.iter().enumerate() {
        let key = |field: &str| format!("sip-interface[{i}].{field}");
        {
            use crate::keys::sip_interface as si;
            let at = format!("sip-interface[{i}]");
            check(&at, &si::MIN_REG_EXPIRE, iface.min_reg_expire)?;
            check(&at, &si::REGISTRATION_INTERVAL, iface.registration_interval)?;
            check(&at, &si::NAT_INTERVAL, iface.nat_interval)?;
        }
        if iface.realm.trim().is_empty() {
            return Err(ConfigError::invalid(
                key("realm"),
                quoted(&iface.realm),
                "must not be empty",
                "a non-empty realm name",
            ));
        }
        if let Some(first) = realms.insert((&iface.realm, iface.address.is_ipv4()), i) {
            return Err(ConfigError::invalid(
                key("realm"),
                quoted(&iface.realm),
                format!(
                    "realm {} already has an {} sip-interface, sip-interface[{first}]",
                    quoted(&iface.realm),
                    family(iface.address)
                ),
                "a realm with at most one sip-interface per address family (one IPv4, one IPv6)",
            ));
        }
        port(key("port"), iface.port)?;
        if iface.transports.is_empty() {
            return Err(ConfigError::invalid(
                key("transports"),
                transports_value(&iface.transports),
                "at least one transport",
                Transport::valid_list(),
            ));
        }
        for (j, t) in iface.transports.iter().enumerate() {
            if iface.transports[..j].contains(t) {
                return Err(ConfigError::invalid(
                    key("transports"),
                    transports_value(&iface.transports),
                    format!("duplicate transport {}", quoted(t.as_str())),
                    format!("{}, each at most once", Transport::valid_list()),
                ));
            }
        }
        match (&iface.tls_profile, iface.has(Transport::Tls)) {
            (None, true) => {
                return Err(ConfigError::invalid(
                    key("tls-profile"),
                    "none",
                    "TLS listens here: its certificate comes from a tls-profile",
                    "the name of a tls-profile with an end-entity-certificate",
                ))
            }
            (Some(name), false) => {
                return Err(ConfigError::invalid(
                    key("tls-profile"),
                    quoted(name),
                    "transports has no \"tls\": the profile would not be used",
                    "add \"tls\" to transports, or no tls-profile",
                ))
            }
            (Some(name), true) => {
                port(key("tls-port"), iface.tls_port)?;
                let profile = profile_ref(key("tls-profile"), name, profiles)?;
                if !profile.has_certificate() {
                    return Err(ConfigError::invalid(
                        key("tls-profile"),
                        quoted(name),
                        "the profile has no end-entity-certificate for the listener to present",
                        "a tls-profile with an end-entity-certificate and private-key",
                    ));
                }
                if iface.has(Transport::Tcp) && iface.tls_port == iface.port {
                    return Err(ConfigError::invalid(
                        key("tls-port"),
                        iface.tls_port.to_string(),
                        "TCP listens on this port already",
                        "a port other than the interface's port",
                    ));
                }
            }
            (None, false) => {}
        }
        // A TLS listener shares no TCP port with another interface's TCP or TLS listener,
        // in either direction.
        let tls_clash = |other: &SipInterface| {
            let ours = iface
                .has(Transport::Tls)
                .then(|| iface.addr_of(Transport::Tls));
            let theirs = other
                .has(Transport::Tls)
                .then(|| other.addr_of(Transport::Tls));
            other
                .stream_addrs()
                .any(|a| ours.is_some_and(|b| overlaps(a, b)))
                || iface
                    .stream_addrs()
                    .any(|a| theirs.is_some_and(|b| overlaps(a, b)))
        };
        if let Some(j) = interfaces[..i].iter().position(tls_clash) {
            return Err(ConfigError::invalid(
                key("tls-port"),
                iface.tls_port.to_string(),
                format!("a TCP port of sip-interface[{j}] is a TCP port here too (TLS and TCP)"),
                "TCP and TLS ports not used by another sip-interface on this address",
            ));
        }
        if let Some(j) = interfaces[..i]
            .iter()
            .position(|other| overlaps(other.socket_addr(), iface.socket_addr()))
        {
            return Err(ConfigError::invalid(
                key("port"),
                iface.port.to_string(),
                format!(
                    "{} is already used by sip-interface[{j}] ({})",
                    iface.socket_addr(),
                    interfaces[j].socket_addr()
                ),
                "an address:port not used by another sip-interface",
            ));
        }
    }
    Ok(())
}

/// Whether two addresses are of one family (both IPv4 or both IPv6).
fn same_family(a: IpAddr, b: IpAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
}

/// `"IPv4"` or `"IPv6"`.
fn family(a: IpAddr) -> &'static str {
    if a.is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    }
}

fn realm_list(interfaces: &[SipInterface]) -> String {
    quoted_list(interfaces.iter().map(|i| i.realm.as_str()))
}

fn agent_list(agents: &[SessionAgent]) -> String {
    quoted_list(agents.iter().map(|a| a.name.as_str()))
}

fn agents(
    agents: &[SessionAgent],
    interfaces: &[SipInterface],
    profiles: &[TlsProfile],
) -> Result<(), ConfigError> {
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, agent) in agents.iter().enumerate() {
        let key = |field: &str| format!("session-agent[{i}].{field}");
        if agent.name.trim().is_empty() {
            return Err(ConfigError::invalid(
                key("name"),
                quoted(&agent.name),
                "must not be empty",
                "a non-empty name",
            ));
        }
        if let Some(first) = names.insert(&agent.name, i) {
            return Err(ConfigError::invalid(
                key("name"),
                quoted(&agent.name),
                format!("duplicate name, already used by session-agent[{first}]"),
                "a name not used by another session-agent",
            ));
        }
        if !interfaces.iter().any(|iface| iface.realm == agent.realm) {
            return Err(ConfigError::invalid(
                key("realm"),
                quoted(&agent.realm),
                "no sip-interface has this realm",
                realm_list(interfaces),
            ));
        }
        if agent.dns_name().is_some() {
            dns_agent(agent, key)?;
        } else {
            let ip = agent.ip();
            if !interfaces
                .iter()
                .any(|iface| iface.realm == agent.realm && same_family(iface.address, ip))
            {
                return Err(ConfigError::invalid(
                    key("address"),
                    quoted(&ip.to_string()),
                    format!(
                        "realm {} has no {} sip-interface to reach the agent through",
                        quoted(&agent.realm),
                        family(ip)
                    ),
                    format!(
                        "an address of the family of realm {}'s interfaces, or an {} \
                         sip-interface in that realm",
                        quoted(&agent.realm),
                        family(ip)
                    ),
                ));
            }
            port(key("port"), agent.port)?;
        }
        agent_udp_length(agent, interfaces, key)?;
        agent_tls(agent, interfaces, profiles, key)?;
        routing::agent(agent, &format!("session-agent[{i}]"))?;
    }
    Ok(())
}

/// A session-agent resolved by DNS: its `hostname` a DNS name (RFC 1035 labels), not over
/// TLS (the certificate check and the TLS connection table key on a configured address).
fn dns_agent(agent: &SessionAgent, key: impl Fn(&str) -> String) -> Result<(), ConfigError> {
    let name = agent.dns_name().unwrap_or_default();
    let labels_ok = name.len() <= 253
        && name.trim_end_matches('.').split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if !labels_ok {
        return Err(ConfigError::invalid(
            key("hostname"),
            quoted(name),
            "not a DNS name nor an IP address",
            "an IP address, or a DNS name (pbx.example.com), resolved when address is unset: \
             labels of letters, digits and '-', at most 63 characters each, 253 in all",
        ));
    }
    if agent.transport == Transport::Tls {
        return Err(ConfigError::invalid(
            key("address"),
            "none".to_owned(),
            "an agent reached over TLS needs its address configured (not resolved by DNS)",
            "the agent's IP address, with hostname kept for the Request-URI and \
             tls-server-name for the certificate",
        ));
    }
    Ok(())
}

/// A session-agent's `max-udp-length`: 0, or with `transport = "udp"` at least 500 bytes (no
/// SIP request fits below) and TCP listening on the agent's realm interface of its family
/// (the agent's responses and in-dialog requests come back over TCP).
fn agent_udp_length(
    agent: &SessionAgent,
    interfaces: &[SipInterface],
    key: impl Fn(&str) -> String,
) -> Result<(), ConfigError> {
    let length = agent.max_udp_length;
    if length == 0 {
        return Ok(());
    }
    let refuse = |reason: String, valid: &str| {
        Err(ConfigError::invalid(
            key("max-udp-length"),
            length.to_string(),
            reason,
            valid,
        ))
    };
    if agent.transport != Transport::Udp {
        return refuse(
            format!("the agent is reached over {}, not udp", agent.transport),
            "0 (off) unless transport is udp",
        );
    }
    if length < 500 {
        return refuse(
            "no SIP request is that short".into(),
            "0 (off), or 500..=65535",
        );
    }
    let tcp = interfaces.iter().any(|i| {
        i.realm == agent.realm
            && (agent.dns_name().is_some() || same_family(i.address, agent.ip()))
            && i.has(Transport::Tcp)
    });
    if !tcp {
        return refuse(
            format!(
                "the {} sip-interface of realm {} does not listen on TCP",
                family(agent.ip()),
                quoted(&agent.realm)
            ),
            "0 (off), or add tcp to that interface's transports",
        );
    }
    Ok(())
}

/// A session-agent's TLS settings: with `transport = "tls"` a profile with trusted CAs (its
/// certificate is verified), TLS listening in its realm (its in-dialog requests come back to
/// our TLS Contact) and a valid server name; without it, no TLS settings.
fn agent_tls(
    agent: &SessionAgent,
    interfaces: &[SipInterface],
    profiles: &[TlsProfile],
    key: impl Fn(&str) -> String,
) -> Result<(), ConfigError> {
    if agent.transport != Transport::Tls {
        if let Some(name) = &agent.tls_profile {
            return Err(ConfigError::invalid(
                key("tls-profile"),
                quoted(name),
                format!(
                    "the agent is reached over {}: the profile would not be used",
                    agent.transport
                ),
                "transport = \"tls\", or no tls-profile",
            ));
        }
        if let Some(name) = &agent.tls_server_name {
            return Err(ConfigError::invalid(
                key("tls-server-name"),
                quoted(name),
                format!(
                    "the agent is reached over {}: no certificate to verify",
                    agent.transport
                ),
                "transport = \"tls\", or no tls-server-name",
            ));
        }
        return Ok(());
    }
    let Some(name) = &agent.tls_profile else {
        return Err(ConfigError::invalid(
            key("tls-profile"),
            "none",
            "an agent reached over TLS is verified with a tls-profile's trusted CAs",
            "the name of a tls-profile with trusted-ca-certificates",
        ));
    };
    let profile = profile_ref(key("tls-profile"), name, profiles)?;
    if profile.trusted_ca_certificates.is_empty() {
        return Err(ConfigError::invalid(
            key("tls-profile"),
            quoted(name),
            "the profile has no trusted-ca-certificates to verify the agent's certificate with",
            "a tls-profile with trusted-ca-certificates",
        ));
    }
    if let Some(sn) = agent.tls_server_name.as_ref().filter(|n| !is_cert_name(n)) {
        return Err(ConfigError::invalid(
            key("tls-server-name"),
            quoted(sn),
            "not a DNS name or an IP address",
            "a DNS name (sip.example.com) or an IP address",
        ));
    }
    if !interfaces
        .iter()
        .any(|i| i.realm == agent.realm && i.has(Transport::Tls))
    {
        return Err(ConfigError::invalid(
            key("transport"),
            "\"tls\"",
            format!(
                "the sip-interface of realm {} does not listen on TLS: the agent's requests \
                 in its dialogs come back to a TLS Contact",
                quoted(&agent.realm)
            ),
            "\"tls\" in that sip-interface's transports, or another transport",
        ));
    }
    Ok(())
}

fn router(
    router: &SessionRouter,
    agents: &[SessionAgent],
    interfaces: &[SipInterface],
) -> Result<(), ConfigError> {
    let agent_exists = |name: &str| agents.iter().any(|a| a.name == name);
    if let Some(name) = &router.default_route {
        if !agent_exists(name) {
            return Err(ConfigError::invalid(
                "session-router.default-route",
                quoted(name),
                "no session-agent has this name",
                agent_list(agents),
            ));
        }
    }
    for (i, route) in router.routes.iter().enumerate() {
        if !interfaces
            .iter()
            .any(|iface| iface.realm == route.from_realm)
        {
            return Err(ConfigError::invalid(
                format!("session-router.route[{i}].from-realm"),
                quoted(&route.from_realm),
                "no sip-interface has this realm",
                realm_list(interfaces),
            ));
        }
        if !agent_exists(&route.session_agent) {
            return Err(ConfigError::invalid(
                format!("session-router.route[{i}].session-agent"),
                quoted(&route.session_agent),
                "no session-agent has this name",
                agent_list(agents),
            ));
        }
    }
    Ok(())
}
