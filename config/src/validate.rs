//! The rules a parsed configuration must satisfy before it is used or saved.
//!
//! Rules are checked in file order (system-config, sip-config, sip-interface, session-agent,
//! session-router) and the first broken one is reported, naming its full key.

use std::collections::HashMap;
use std::fmt::Display;
use std::net::SocketAddr;
use std::ops::RangeInclusive;

use crate::error::{quoted, quoted_list, ConfigError};
use crate::model::{SessionAgent, SessionRouter, SipConfig, SipInterface, SystemConfig, Transport};
use crate::Config;

/// Valid `sip-config.t1-ms`.
const T1_MS: RangeInclusive<u64> = 10..=10_000;
/// Upper bound of `sip-config.t2-ms` (the lower bound is `t1-ms`).
const T2_MS_MAX: u64 = 60_000;
/// Valid `sip-config.t4-ms`.
const T4_MS: RangeInclusive<u64> = 10..=60_000;
/// Valid `sip-config.timer-c-ms`.
const TIMER_C_MS: RangeInclusive<u64> = 1000..=3_600_000;
/// Valid `sip-config.max-message-size`.
const MAX_MESSAGE_SIZE: RangeInclusive<usize> = 1500..=65_535;
/// Valid `sip-config.workers`.
const WORKERS: RangeInclusive<usize> = 1..=64;
/// Valid `sip-config.shutdown-grace-ms`.
const SHUTDOWN_GRACE_MS: RangeInclusive<u64> = 0..=120_000;

pub(crate) fn validate(config: &Config) -> Result<(), ConfigError> {
    system(&config.system)?;
    sip(&config.sip_config)?;
    interfaces(&config.sip_interfaces)?;
    agents(&config.session_agents, &config.sip_interfaces)?;
    router(
        &config.session_router,
        &config.session_agents,
        &config.sip_interfaces,
    )
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
    Ok(())
}

fn in_range<T: PartialOrd + Display>(
    key: &str,
    value: T,
    range: &RangeInclusive<T>,
) -> Result<(), ConfigError> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            format!("sip-config.{key}"),
            value.to_string(),
            "out of range",
            format!("{}..={}", range.start(), range.end()),
        ))
    }
}

fn sip(sip: &SipConfig) -> Result<(), ConfigError> {
    in_range("t1-ms", sip.t1_ms, &T1_MS)?;
    if !(sip.t1_ms..=T2_MS_MAX).contains(&sip.t2_ms) {
        return Err(ConfigError::invalid(
            "sip-config.t2-ms",
            sip.t2_ms.to_string(),
            format!("out of range, must be at least t1-ms ({})", sip.t1_ms),
            format!("{}..={T2_MS_MAX}", sip.t1_ms),
        ));
    }
    in_range("t4-ms", sip.t4_ms, &T4_MS)?;
    in_range("timer-c-ms", sip.timer_c_ms, &TIMER_C_MS)?;
    in_range("max-message-size", sip.max_message_size, &MAX_MESSAGE_SIZE)?;
    in_range("workers", sip.workers, &WORKERS)?;
    in_range(
        "shutdown-grace-ms",
        sip.shutdown_grace_ms,
        &SHUTDOWN_GRACE_MS,
    )
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

fn interfaces(interfaces: &[SipInterface]) -> Result<(), ConfigError> {
    if interfaces.is_empty() {
        return Err(ConfigError::invalid(
            "sip-interface",
            "[]",
            "at least one sip-interface is required",
            "one or more [[sip-interface]] tables with a realm, address, port and transports",
        ));
    }
    let mut realms: HashMap<&str, usize> = HashMap::new();
    for (i, iface) in interfaces.iter().enumerate() {
        let key = |field: &str| format!("sip-interface[{i}].{field}");
        if iface.realm.trim().is_empty() {
            return Err(ConfigError::invalid(
                key("realm"),
                quoted(&iface.realm),
                "must not be empty",
                "a non-empty realm name",
            ));
        }
        if let Some(first) = realms.insert(&iface.realm, i) {
            return Err(ConfigError::invalid(
                key("realm"),
                quoted(&iface.realm),
                format!("duplicate realm, already used by sip-interface[{first}]"),
                "a realm not used by another sip-interface",
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

fn realm_list(interfaces: &[SipInterface]) -> String {
    quoted_list(interfaces.iter().map(|i| i.realm.as_str()))
}

fn agent_list(agents: &[SessionAgent]) -> String {
    quoted_list(agents.iter().map(|a| a.name.as_str()))
}

fn agents(agents: &[SessionAgent], interfaces: &[SipInterface]) -> Result<(), ConfigError> {
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
        port(key("port"), agent.port)?;
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
