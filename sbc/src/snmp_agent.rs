//! The SNMP agent's shell: a UDP socket on `system-config` `snmp-agent-address`, the
//! [`sbc_snmp::agent::Agent`] deciding every answer, and a [`StatusSnapshot`] of the node
//! read when a request comes (at most every 500 ms: a walk of the whole view is about thirty
//! requests, and the SIP figures are gathered from every shard).
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
use sbc_config::{parse_net, SnmpCommunity};
use sbc_snmp::agent::{
    Agent, AgentConfig, AlarmEntry, Community, RedundancyStatus, StatusSnapshot, V3Config,
};
use sbc_snmp::TransitionState;
use tokio::net::UdpSocket;
use tracing::{debug, info};

use crate::control::console::Console;

/// How long a snapshot of the node answers requests.
const SNAPSHOT_FOR: Duration = Duration::from_millis(500);

/// The agent's communities from the configuration (addresses that do not parse were refused
/// by validation; any left are skipped).
fn communities(list: &[SnmpCommunity]) -> Vec<Community> {
    list.iter()
        .map(|c| Community {
            name: c.community_name.clone(),
            sources: c
                .ip_addresses
                .iter()
                .filter_map(|a| parse_net(a).ok())
                .collect(),
        })
        .collect()
}

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

/// The node's figures now: the same sources as `show health`, `show redundancy`, `show
/// memory`, `display-alarms` and `show sip-stats`.
async fn snapshot(console: &Console) -> StatusSnapshot {
    let subsystems = &console.subsystems;
    let shards = console.node.snapshots(false).await;
    let mut stats = sbc_proto::engine::Stats::default();
    for s in &shards {
        stats += &s.stats;
    }
    let calls: usize = shards.iter().map(|s| s.calls).sum();
    let (score, _, _) = subsystems.alarms.health_report();
    let readings = subsystems.alarms.readings();
    let redundancy = subsystems.pair.as_ref().map(|p| {
        let s = p.status();
        RedundancyStatus {
            state: transition(s.state),
            epoch: s.epoch,
            peer_alive: s.peer_alive,
            peer_state: s.peer.as_ref().map(|v| transition(v.state)),
            sync_lag: p.sync_lag(),
            replicated_dialogs: p.replicated_dialogs() as u64,
        }
    });
    let alarms = subsystems
        .alarms
        .rows()
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
    StatusSnapshot {
        sys_descr: format!(
            "sbc-pair {}: high-availability SIP session border controller",
            env!("CARGO_PKG_VERSION")
        ),
        sys_name: subsystems.alarms.hostname(),
        uptime: console.started.elapsed(),
        health_score: score,
        redundancy,
        memory_percent: readings.memory_percent.map(whole),
        heap_percent: readings.heap_percent.map(whole),
        calls_active: calls as u64,
        calls_attempted: stats.calls_attempted,
        calls_answered: stats.calls_answered,
        calls_failed: stats.calls_failed,
        alarms,
    }
}

/// Binds `system-config snmp-agent-address` of the running configuration, if set, before the
/// node says it is ready.
///
/// # Errors
/// The address cannot be bound: the node does not start.
pub async fn bind_at_start(console: &Console) -> anyhow::Result<Option<UdpSocket>> {
    let Some(address) = console.running().system.snmp_agent_address else {
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
pub async fn run(console: Arc<Console>, first: Option<UdpSocket>) {
    let first = first.and_then(|s| s.local_addr().ok().map(|a| (s, a)));
    crate::control::follow::run(
        "snmp-agent-address",
        first,
        || console.running().system.snmp_agent_address,
        |addr| {
            let s = console.take_prebound_snmp_agent(addr)?;
            s.set_nonblocking(true).ok()?;
            UdpSocket::from_std(s).ok()
        },
        UdpSocket::bind,
        |at| console.snmp_agent_served_at(at),
        |s, stop| {
            tokio::spawn(serve(s, console.clone(), stop));
        },
    )
    .await;
}

/// The agent's configuration from the running configuration: its communities, and its v3
/// engine and users when there are users.
async fn running_config(console: &Console) -> AgentConfig {
    let Ok(running) = console.config.lock().map(|c| c.running.clone()) else {
        return AgentConfig::new(Vec::new());
    };
    let mut config = AgentConfig::new(communities(&running.system.snmp_communities));
    if !running.system.snmp_users.is_empty() {
        let snmp = console.subsystems.alarms.snmp_v3();
        let users = snmp.users(&running).await;
        config.v3 = Some(V3Config {
            engine: snmp.engine(&running),
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
            cached = Some((Instant::now(), snapshot(&console).await));
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
