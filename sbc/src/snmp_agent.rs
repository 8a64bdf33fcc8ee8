//! The SNMP agent's shell: a UDP socket on `system-config` `snmp-agent-address`, the
//! [`sbc_snmp::agent::Agent`] deciding every answer, and a [`StatusSnapshot`] of the node
//! ([`mib_view`] of the typed status the console and `/metrics` read) taken when a request
//! comes (at most every 500 ms: a walk of the whole view is about thirty requests, and the SIP
//! figures are gathered from every shard).
//!
//! The communities and SNMPv3 users are read from the running configuration at each request,
//! so an `activate-config` changes them at once (new users' keys are computed on a blocking
//! thread, once, then cached). The address is bound before the node is ready (one that
//! cannot be bound stops the start) and followed live: `activate-config` binds a new address
//! first (refused if it is taken) and the agent moves to it within [`crate::control::follow::CONFIG_POLL`];
//! removing the address stops it. The agent tells v1/v2c from v3 by the message's version: v3
//! is served with the node's engine ([`crate::snmp_v3`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sbc_snmp::agent::{
    AccountingStatus, Agent, AgentConfig, AlarmEntry, RedundancyStatus, StatusSnapshot, V3Config,
};
use sbc_snmp::TransitionState;
use tokio::net::UdpSocket;
use tracing::{debug, info};

use crate::control::context::Console;
use crate::status::NodeStatus;
use crate::tasks::Tasks;

/// How long a snapshot of the node answers requests.
const SNAPSHOT_FOR: Duration = Duration::from_millis(500);

const fn transition(s: sbc_ha::State) -> TransitionState {
    match s {
        sbc_ha::State::Initial => TransitionState::Initial,
        sbc_ha::State::BecomingActive => TransitionState::BecomingActive,
        sbc_ha::State::Active => TransitionState::Active,
        sbc_ha::State::RelinquishingActive => TransitionState::RelinquishingActive,
        sbc_ha::State::BecomingStandby => TransitionState::BecomingStandby,
        sbc_ha::State::Standby => TransitionState::Standby,
        sbc_ha::State::OutOfService => TransitionState::OutOfService,
    }
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn whole(p: f64) -> u32 {
    p.round().clamp(0.0, f64::from(u32::MAX)) as u32
}

/// The MIB's view of the node's status: the same snapshot `show health`, `show redundancy`,
/// `show memory`, `display-alarms` and `show sip-stats` format (pure: the unit tests call it).
#[must_use]
pub fn mib_view(status: &NodeStatus) -> StatusSnapshot {
    let redundancy = status.redundancy.as_ref().map(|r| {
        let s = &r.status;
        RedundancyStatus {
            state: transition(s.state),
            epoch: s.epoch,
            peer_alive: s.peer_alive,
            peer_state: s.peer.as_ref().map(|v| transition(v.state)),
            sync_lag: r.sync_lag,
            replicated_dialogs: r.replicated_dialogs as u64,
        }
    });
    let alarms = status
        .alarms
        .iter()
        .map(|r| AlarmEntry {
            id: r.id,
            kind: r.kind,
            severity: r.severity,
            value: whole(r.value),
            task: r.task.clone(),
            raised_at: r.first_seen,
        })
        .collect();
    let readings = &status.memory.readings;
    let counters = &status.sip.counters;
    StatusSnapshot {
        sys_descr: format!(
            "sbc-pair {}: high-availability SIP session border controller",
            env!("CARGO_PKG_VERSION")
        ),
        sys_name: status.hostname.clone(),
        uptime: status.uptime,
        health_score: status.health.score,
        redundancy,
        memory_percent: readings.memory_percent.map(whole),
        heap_percent: readings.heap_percent.map(whole),
        calls_active: status.sip.calls_active as u64,
        calls_attempted: counters.calls_attempted,
        calls_answered: counters.calls_answered,
        calls_failed: counters.calls_failed,
        registration_bindings: status.registrations.bindings as u64,
        accounting: accounting_view(&status.accounting),
        alarms,
    }
}

/// `sbcStatusAccounting*`: accounting's figures from the report `show accounting` prints.
fn accounting_view(report: &crate::accounting::AccountingReport) -> AccountingStatus {
    AccountingStatus {
        records_generated: report.records_generated,
        records_delivered: report.records_delivered,
        records_refused: report.records_refused,
        spool_records: report.spool_pending as u64,
        spool_bytes: report.spool_bytes,
        spool_max_bytes: report.spool_max_bytes,
        spool_full: report.spool_full,
        servers_up: report.servers.iter().filter(|s| s.state == "up").count() as u64,
        servers: report.servers.len() as u64,
    }
}

/// Binds `system-config snmp-agent-address` of the running configuration, if set, before the
/// node says it is ready.
///
/// # Errors
/// The address cannot be bound: the node does not start.
pub async fn bind_at_start(console: &Console) -> anyhow::Result<Option<UdpSocket>> {
    let Some(address) = console.snmp_agent_address() else {
        return Ok(None);
    };
    let socket = UdpSocket::bind(address)
        .await
        .with_context(|| format!("cannot bind snmp-agent-address {address}"))?;
    Ok(Some(socket))
}

/// The agent: serves `first` (from [`bind_at_start`]) and follows `snmp-agent-address` of the
/// running configuration, taking the socket `activate-config` bound for a new address;
/// never returns.
pub async fn run(console: Arc<Console>, first: Option<UdpSocket>, tasks: Tasks) {
    let first = first.and_then(|s| s.local_addr().ok().map(|a| (s, a)));
    crate::control::follow::run(
        "snmp-agent-address",
        first,
        || console.snmp_agent_address(),
        |addr| {
            let s = console.take_prebound_snmp_agent(addr)?;
            s.set_nonblocking(true).ok()?;
            UdpSocket::from_std(s).ok()
        },
        UdpSocket::bind,
        |at| console.snmp_agent_served_at(at),
        |s, stop| {
            tasks.spawn(serve(s, console.clone(), stop));
        },
    )
    .await;
}

/// The agent's configuration from the running configuration: its communities, and its v3
/// engine and users when there are users.
async fn running_config(console: &Console) -> AgentConfig {
    let (communities, snmp_settings) = console.snmp_agent_settings();
    let mut config = AgentConfig::new(communities);
    if !snmp_settings.users.is_empty() {
        let snmp = console.subsystems.alarms.snmp_v3();
        let users = snmp.users(&snmp_settings).await;
        config.v3 = Some(V3Config {
            engine: snmp.engine(&snmp_settings),
            users: users.to_vec(),
        });
    }
    config
}

fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

async fn serve(
    socket: UdpSocket,
    console: Arc<Console>,
    mut stop: tokio::sync::watch::Receiver<Option<SocketAddr>>,
) {
    let here = socket.local_addr().ok();
    let mut agent = Agent::new(running_config(&console).await);
    agent.seed_salt(random_seed());
    let engine_clock = console.subsystems.alarms.snmp_v3().clone();
    let mut cached: Option<(Instant, StatusSnapshot)> = None;
    // One byte more than the agent takes, so that an over-long request is seen as such.
    let mut buf = vec![0u8; sbc_snmp::agent::MAX_REQUEST + 1];
    loop {
        let received = tokio::select! {
            r = socket.recv_from(&mut buf) => r,
            _ = stop.changed() => {
                if *stop.borrow() != here {
                    info!(address = ?here, "SNMP agent stopped");
                    return;
                }
                continue;
            }
        };
        let (n, from) = match received {
            Ok(r) => r,
            Err(e) => {
                debug!(error = %e, "SNMP agent receive error");
                continue;
            }
        };
        agent.set_config(running_config(&console).await);
        let fresh = cached
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < SNAPSHOT_FOR);
        if !fresh {
            cached = Some((Instant::now(), mib_view(&console.status().await)));
        }
        let Some((_, snap)) = cached.as_ref() else {
            continue;
        };
        if let Some(reply) = agent.handle_at(&buf[..n], from.ip(), snap, engine_clock.elapsed()) {
            if let Err(e) = socket.send_to(&reply, from).await {
                debug!(%from, error = %e, "SNMP response not sent");
            }
        } else {
            debug!(%from, stats = ?agent.stats(), usm = ?agent.usm_stats(),
                "SNMP request not answered");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::mib_view;

    /// The MIB answers from the same typed status the console and `/metrics` read.
    #[test]
    fn the_mib_view_is_the_typed_status() {
        let status = crate::metrics::tests::sample().status;
        let view = mib_view(&status);
        assert_eq!(view.sys_name, "sbc1");
        assert_eq!(view.health_score, 90);
        assert_eq!(
            (
                view.calls_active,
                view.calls_attempted,
                view.calls_answered,
                view.calls_failed
            ),
            (3, 10, 7, 2)
        );
        assert_eq!(view.memory_percent, Some(42));
        assert_eq!(view.heap_percent, Some(2));
        let r = view.redundancy.expect("a pair");
        assert_eq!(
            (r.epoch, r.sync_lag, r.replicated_dialogs),
            (7, Some(1), 12)
        );
        assert_eq!(view.alarms.len(), 1);
        assert_eq!(view.alarms[0].value, 85);
    }

    /// `sbcStatusAccounting*` are `show accounting`'s figures.
    #[test]
    fn the_mib_view_carries_the_accounting_figures() {
        let mut status = crate::metrics::tests::sample().status;
        status.accounting.records_refused = 4;
        status.accounting.spool_pending = 3;
        status.accounting.spool_bytes = 2_048;
        status.accounting.spool_full = true;
        status
            .accounting
            .servers
            .push(crate::accounting::ServerReport {
                address: "127.0.0.2:1813".into(),
                state: "down",
                ..crate::accounting::ServerReport::default()
            });
        let a = mib_view(&status).accounting;
        assert_eq!(
            (a.records_generated, a.records_delivered, a.records_refused),
            (10, 10, 4)
        );
        assert_eq!(
            (
                a.spool_records,
                a.spool_bytes,
                a.spool_max_bytes,
                a.spool_full
            ),
            (3, 2_048, 1 << 30, true)
        );
        assert_eq!((a.servers_up, a.servers), (1, 2));
    }
}
