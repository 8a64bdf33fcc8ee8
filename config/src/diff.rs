//! What a restart would change: a configuration compared with the one a node started on.
//!
//! A node binds its SIP interfaces, steering pools, worker groups and the pair's channels at
//! start; an activated configuration that changes them runs on the bound ones until a reboot
//! ([`on_bound_interfaces`]), and [`restart_needed`] names each such change for the operator
//! (`activate-config`, `show health`).

use crate::Config;

/// `cfg` as this node can run it before a restart: with the SIP interfaces it bound at start
/// (`started`'s), and their steering pools. An interface that is still configured with the
/// same realm, address, transports and ports takes its live attribute (`tls-profile`) from
/// `cfg`.
///
/// # Errors
/// `cfg` does not hold together with the bound interfaces (a session agent in a realm that
/// is not bound yet, a TLS listener whose profile was removed): the activation is refused
/// whole, naming why.
pub fn on_bound_interfaces(started: &Config, cfg: &Config) -> Result<Config, String> {
    if started.sip_interfaces == cfg.sip_interfaces {
        return Ok(cfg.clone());
    }
    let same_binding = |a: &crate::SipInterface, b: &crate::SipInterface| {
        a.realm == b.realm
            && a.address == b.address
            && a.port == b.port
            && a.transports == b.transports
            && a.tls_port == b.tls_port
    };
    let mut effective = cfg.clone();
    effective.sip_interfaces = started
        .sip_interfaces
        .iter()
        .map(|bound| {
            let mut i = bound.clone();
            if let Some(new) = cfg.sip_interfaces.iter().find(|n| same_binding(bound, n)) {
                i.tls_profile.clone_from(&new.tls_profile);
            }
            // The worker groups keep the profiles they started with whatever this says; the
            // reference is only checked, so it is the new one (or none).
            i.auto_scaling_profile = cfg
                .sip_interfaces
                .iter()
                .find(|n| n.realm == bound.realm)
                .and_then(|n| n.auto_scaling_profile.clone());
            i
        })
        .collect();
    // Media anchoring stays as it was set up at start: its pools, for the bound realms.
    effective.steering_pools.clone_from(&started.steering_pools);
    effective.media_manager.state = started.media_manager.state;
    effective.validate().map_err(|e| {
        format!(
            "this configuration changes the sip-interfaces, which are bound at start, and cannot \
             run on the bound ones until a restart: {e}; it is saved: reboot to run it"
        )
    })?;
    Ok(effective)
}

/// The changes between `started` (the configuration the node started on) and `saved` that
/// only a restart applies; compared with the start, not the running configuration, so a
/// pending change stays reported until the restart, and one undone is no longer reported.
pub fn restart_needed(started: &Config, saved: &Config) -> Vec<String> {
    let running = started;
    let mut out = Vec::new();
    out.extend(interface_changes(
        &running.sip_interfaces,
        &saved.sip_interfaces,
    ));
    if running.steering_pools != saved.steering_pools {
        out.push("steering-pool: media addresses and ports are bound at start".to_owned());
    }
    if running.account != saved.account {
        out.push(
            "account-config: accounting (its spool, files and servers) is started with the node"
                .to_owned(),
        );
    }
    if running.media_manager.state != saved.media_manager.state {
        out.push(format!(
            "media-manager state {} -> {}: media anchoring is set up at start",
            running.media_manager.state, saved.media_manager.state
        ));
    }
    if running.sip_config.workers != saved.sip_config.workers {
        out.push(format!(
            "sip-config workers {} -> {}: the worker count is fixed at start",
            running.sip_config.workers, saved.sip_config.workers
        ));
    }
    let (r, n) = (&running.sip_config, &saved.sip_config);
    let groups = [
        (
            "tcp-workers",
            r.tcp_workers.to_string(),
            n.tcp_workers.to_string(),
        ),
        (
            "tcp-auto-scaling-profile",
            format!("{:?}", r.tcp_auto_scaling_profile),
            format!("{:?}", n.tcp_auto_scaling_profile),
        ),
        ("prsm", r.prsm.to_string(), n.prsm.to_string()),
        (
            "queue-size",
            r.queue_size.to_string(),
            n.queue_size.to_string(),
        ),
        (
            "max-queue-delay-ms",
            r.max_queue_delay_ms.to_string(),
            n.max_queue_delay_ms.to_string(),
        ),
        (
            "routing-cost-us",
            r.routing_cost_us.to_string(),
            n.routing_cost_us.to_string(),
        ),
        (
            "auto-scaling-cycle-ms",
            r.auto_scaling_cycle_ms.to_string(),
            n.auto_scaling_cycle_ms.to_string(),
        ),
    ];
    for (key, old, new) in groups {
        if old != new {
            out.push(format!(
                "sip-config {key} {old} -> {new}: worker groups are set up at start"
            ));
        }
    }
    if running.auto_scaling_profiles != saved.auto_scaling_profiles {
        out.push("auto-scaling-profile: worker groups take their profiles at start".to_owned());
    }
    if running.redundancy != saved.redundancy {
        out.push("redundancy-config: the pair's channels are set up at start".to_owned());
    }
    out
}

/// Each `sip-interface` change a restart applies, by key (realm and family): added, removed,
/// or what of its
/// binding (address, port, transports, tls-port, auto-scaling-profile) changed.
fn interface_changes(bound: &[crate::SipInterface], saved: &[crate::SipInterface]) -> Vec<String> {
    let mut out = Vec::new();
    for b in bound {
        let Some(n) = saved.iter().find(|n| n.key() == b.key()) else {
            out.push(format!(
                "sip-interface {}: removed; it listens until a restart",
                b.key()
            ));
            continue;
        };
        let mut what = Vec::new();
        if n.address != b.address {
            what.push(format!("address {} -> {}", b.address, n.address));
        }
        if n.port != b.port {
            what.push(format!("port {} -> {}", b.port, n.port));
        }
        if n.transports != b.transports {
            let list = |t: &[crate::Transport]| {
                t.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            };
            what.push(format!(
                "transports {} -> {}",
                list(&b.transports),
                list(&n.transports)
            ));
        }
        if n.tls_port != b.tls_port
            && (n.has(crate::Transport::Tls) || b.has(crate::Transport::Tls))
        {
            what.push(format!("tls-port {} -> {}", b.tls_port, n.tls_port));
        }
        if n.auto_scaling_profile != b.auto_scaling_profile {
            what.push(format!(
                "auto-scaling-profile {} -> {}",
                b.auto_scaling_profile.as_deref().unwrap_or("none"),
                n.auto_scaling_profile.as_deref().unwrap_or("none")
            ));
        }
        if !what.is_empty() {
            out.push(format!(
                "sip-interface {}: {}: listeners are bound at start",
                b.key(),
                what.join(", ")
            ));
        }
    }
    for n in saved {
        if !bound.iter().any(|b| b.key() == n.key()) {
            out.push(format!(
                "sip-interface {}: added; it listens after a restart",
                n.key()
            ));
        }
    }
    let realms =
        |l: &[crate::SipInterface]| l.iter().map(crate::SipInterface::key).collect::<Vec<_>>();
    if out.is_empty() && realms(bound) != realms(saved) {
        // Same interfaces in another order: the engine numbers them by position.
        out.push("sip-interface: reordered; the order is fixed at start".to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{on_bound_interfaces, restart_needed};
    use crate::{AutoScalingProfile, Config, SessionAgent};

    fn with_access_port(port: u16) -> Config {
        let mut c = Config::embedded_default();
        if let Some(i) = c.sip_interfaces.iter_mut().find(|i| i.realm == "access") {
            i.port = port;
        }
        c
    }

    /// Adds an interface in realm `peering` (port 5090) beside the default two.
    fn add_peering_interface(cfg: &mut Config) {
        let mut extra = cfg.sip_interfaces[0].clone();
        extra.realm = "peering".into();
        extra.port = 5090;
        cfg.sip_interfaces.push(extra);
    }

    #[test]
    fn a_changed_port_is_reported_and_the_engine_keeps_the_bound_one() {
        let started = Config::embedded_default();
        let saved = with_access_port(5070);
        let restart = restart_needed(&started, &saved);
        assert_eq!(
            restart,
            ["sip-interface access: port 5060 -> 5070: listeners are bound at start"]
        );
        let effective = on_bound_interfaces(&started, &saved).expect("runs on the bound ones");
        assert_eq!(effective.sip_interfaces, started.sip_interfaces);
    }

    #[test]
    fn a_pending_change_stays_reported_and_an_undone_one_is_not() {
        let started = Config::embedded_default();
        let once = with_access_port(5070);
        let mut twice = once.clone();
        twice.sip_config.timer_c_ms += 1000;
        // A second activation of another (live) change still reports the port.
        assert_eq!(restart_needed(&started, &twice).len(), 1);
        // The port set back: nothing waits for a restart.
        assert!(restart_needed(&started, &with_access_port(5060)).is_empty());
    }

    #[test]
    fn added_and_removed_interfaces_are_named() {
        let started = Config::embedded_default();
        let mut saved = started.clone();
        add_peering_interface(&mut saved);
        assert_eq!(
            restart_needed(&started, &saved),
            ["sip-interface peering: added; it listens after a restart"]
        );
        assert_eq!(
            restart_needed(&saved, &started),
            ["sip-interface peering: removed; it listens until a restart"]
        );
        // Until then the engine knows only the bound two.
        let effective = on_bound_interfaces(&started, &saved).expect("runs");
        assert_eq!(effective.sip_interfaces.len(), 2);
    }

    #[test]
    fn a_configuration_that_needs_an_unbound_interface_is_refused() {
        let started = Config::embedded_default();
        let mut saved = started.clone();
        add_peering_interface(&mut saved);
        let mut agent: SessionAgent = saved.session_agents[0].clone();
        agent.name = "carrier".into();
        agent.realm = "peering".into();
        agent.port = 5098;
        saved.session_agents.push(agent);
        saved.validate().expect("valid after a restart");
        let err = on_bound_interfaces(&started, &saved).expect_err("refused before one");
        assert!(err.contains("reboot to run it"), "{err}");
        assert!(err.contains("peering"), "{err}");
    }

    #[test]
    fn a_profile_detached_and_deleted_waits_for_the_restart() {
        let mut started = Config::embedded_default();
        started.auto_scaling_profiles.push(AutoScalingProfile {
            name: "burst".into(),
            ..Default::default()
        });
        started.sip_interfaces[0].auto_scaling_profile = Some("burst".into());
        started.validate().expect("valid start");
        let mut saved = started.clone();
        saved.sip_interfaces[0].auto_scaling_profile = None;
        saved.sip_interfaces[0].port = 5070;
        saved.auto_scaling_profiles.clear();
        saved.validate().expect("valid after a restart");
        let effective = on_bound_interfaces(&started, &saved).expect("not refused");
        assert_eq!(
            effective.sip_interfaces[0].port,
            started.sip_interfaces[0].port
        );
        let restart = restart_needed(&started, &saved);
        assert!(
            restart
                .iter()
                .any(|r| r.contains("auto-scaling-profile burst -> none")),
            "{restart:?}"
        );
    }

    #[test]
    fn a_pool_for_an_added_realm_waits_for_the_restart() {
        let started = Config::embedded_default();
        let mut saved = started.clone();
        add_peering_interface(&mut saved);
        let mut pool = saved.steering_pools[0].clone();
        pool.realm_id = "peering".into();
        pool.start_port = 30_000;
        pool.end_port = 30_999;
        saved.steering_pools.push(pool);
        saved.validate().expect("valid after a restart");
        let effective = on_bound_interfaces(&started, &saved).expect("not refused");
        assert_eq!(effective.steering_pools, started.steering_pools);
    }

    #[test]
    fn the_sip_trace_is_changed_without_a_restart() {
        let started = Config::embedded_default();
        let mut saved = started.clone();
        let mut filter = crate::FilterConfig::named("core-invites");
        filter.realm = Some("core".into());
        filter.session_agent = Some("core".into());
        filter.method = Some("INVITE".into());
        saved.filter_configs.push(filter);
        saved.sip_monitoring.state = crate::SipMonitoringState::Enabled;
        saved.sip_monitoring.monitoring_filters = vec!["core-invites".into()];
        saved.sip_monitoring.max_trace_memory = 64;
        saved.capture_agent.state = crate::CaptureAgentState::Enabled;
        saved.capture_agent.address = Some("127.0.0.1:9060".parse().expect("an address"));
        saved.capture_agent.transport = crate::CaptureTransport::Tcp;
        saved.capture_agent.password = "hep-key".into();
        saved.validate().expect("valid");
        assert!(restart_needed(&started, &saved).is_empty());
        assert!(restart_needed(&saved, &started).is_empty());
        assert_eq!(on_bound_interfaces(&started, &saved).expect("runs"), saved);
    }

    #[test]
    fn unchanged_interfaces_pass_through() {
        let started = Config::embedded_default();
        let mut saved = started.clone();
        saved.sip_config.timer_c_ms += 1000;
        assert!(restart_needed(&started, &saved).is_empty());
        assert_eq!(on_bound_interfaces(&started, &saved).expect("runs"), saved);
    }
}
