//! The one place that turns a [`Config`] into every subsystem's typed settings.
//!
//! Each core (`sbc-proto`'s engine, access control, overload control; `sbc-ha`'s redundancy
//! machine; `sbc-alarms`) takes a plain struct of its own, never the serde model, so it does
//! not change when the file format does and is tested without a configuration.

use std::time::Duration;

use sbc_config::{AccessAction, Config};
use sbc_proto::access::AccessSettings;

/// Per-source protection: `sip-config source-rate`, `source-burst` and
/// `source-deny-seconds`, the `access-control` lists, and the session-agents (trusted).
#[must_use]
pub fn access(cfg: &Config) -> AccessSettings {
    let s = &cfg.sip_config;
    let (mut allow, mut deny) = (Vec::new(), Vec::new());
    for e in &cfg.access_control {
        // Validated: every source-address parses.
        if let Ok(net) = sbc_config::parse_net(&e.source_address) {
            match e.action {
                AccessAction::Allow => allow.push(net),
                AccessAction::Deny => deny.push(net),
            }
        }
    }
    AccessSettings {
        rate: f64::from(s.source_rate),
        burst: f64::from(s.source_burst),
        deny_for: Duration::from_secs(s.source_deny_seconds),
        allow,
        deny,
        trusted: cfg.session_agents.iter().map(|a| a.address).collect(),
    }
}

#[cfg(test)]
mod tests {
    /// The leaf crates do not depend on one another, so the rules the operator's configuration
    /// is validated by (`sbc-config`) and the bounds the cores defend (`sbc-ha`,
    /// `sbc-proto`) are written in each; this is where they are held to one value.
    #[test]
    fn the_configuration_and_the_cores_agree_on_their_limits() {
        assert_eq!(
            sbc_config::MIN_SHARED_KEY_LEN,
            sbc_ha::crypto::MIN_SHARED_KEY_LEN
        );
        assert_eq!(
            sbc_config::MAX_WORKERS,
            sbc_proto::overload::autoscale::MAX_WORKERS as usize
        );
    }
}
