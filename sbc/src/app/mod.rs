//! One node's life: [`run`] starts every part from a validated configuration, serves until it
//! is told to stop, then drains, as mini-redis's `server::run(listener, shutdown)`.
//!
//! The parts, in the order they start: the SIP runtime (sockets, worker groups,
//! [`crate::runtime`]), the alarm service, the pair's machinery when `redundancy-config` is
//! enabled ([`crate::pair`]), the heap gate, the console and the management socket
//! ([`crate::control`]). Each takes its settings from [`crate::settings`]. [`cli`] is `sbc run`:
//! the configuration file, the command line's overrides, the runtime, and a reboot's re-exec.

pub mod cli;

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sbc_config::Config;
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::alarm_service::AlarmService;
use crate::control::context::{ConfigState, Console, Control};
use crate::control::subsystems::Subsystems;
use crate::pair::Pair;
use crate::runtime::Node;
use crate::tasks::Tasks;

/// What a node starts from.
#[derive(Debug)]
pub struct Launch {
    /// The validated configuration.
    pub config: Config,
    /// The file it came from, where `save-config` writes (none: the embedded default).
    pub path: Option<PathBuf>,
    /// The management socket's path.
    pub mgmt_socket: PathBuf,
}

/// How [`run`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Stopped: the shutdown future completed.
    Stopped,
    /// The operator asked for `reboot`: the caller restarts the process.
    Reboot,
}

/// Runs one node (alone or in its pair) until `shutdown` completes or the operator asks for a
/// `reboot`, then drains it: new requests get 503, transactions in progress finish.
///
/// # Errors
/// When a part cannot start: a socket that cannot be bound, a configuration the engine
/// refuses, the management socket.
pub async fn run(launch: Launch, shutdown: impl Future<Output = ()>) -> anyhow::Result<Exit> {
    let Launch {
        config: cfg,
        path,
        mgmt_socket,
    } = launch;
    let paired = cfg.redundancy.is_enabled();
    // Unused pages go back to the system even while the node is idle (RSS returns).
    if !sbc_alarms::enable_background_purge() {
        tracing::debug!("jemalloc background purge not available");
    }
    // Every background task of the node runs on `tasks`; shutdown signals and joins them.
    let tasks = Tasks::new();
    // The runtime's threads (management, TCP, pair) give their allocator caches back too.
    tasks.spawn(async {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            sbc_alarms::release_thread_cache();
        }
    });
    // In a pair the redundancy machine decides who binds the service address.
    let node = Arc::new(crate::runtime::start(&crate::settings::runtime(&cfg)?, !paired).await?);
    let (control_tx, mut control_rx) = mpsc::unbounded_channel();
    let snmp = crate::snmp_v3::SnmpV3::start(path.as_deref());
    let alarms = AlarmService::spawn(
        crate::settings::alarm_service(&cfg)?,
        node.clone(),
        cfg.redundancy.is_enabled(),
        snmp,
        &tasks,
    )?;
    let (pushed_tx, pushed_rx) = mpsc::unbounded_channel::<String>();
    let pair = if paired {
        Some(
            Pair::spawn(
                crate::settings::pair(&cfg),
                node.clone(),
                alarms.clone(),
                pushed_tx,
                &tasks,
            )
            .await?,
        )
    } else {
        None
    };
    let (heap_tx, heap_rx) = tokio::sync::watch::channel(crate::settings::heap_gate(&cfg));
    let subsystems = Arc::new(Subsystems::new(alarms.clone(), pair.clone(), heap_tx));
    let console = Arc::new(Console {
        config: Mutex::new(ConfigState {
            running: cfg.clone(),
            editing: cfg.clone(),
            path,
        }),
        node: node.clone(),
        subsystems: subsystems.clone(),
        started: Instant::now(),
        control: control_tx,
        activation: Mutex::new(()),
        started_config: cfg.clone(),
        management: Mutex::new(crate::control::management::ManagementSockets::default()),
    });
    tasks.spawn(crate::heap_gate::run_heap_gate(
        node.clone(),
        alarms.clone(),
        heap_rx,
    ));
    tasks.spawn(apply_pushed_configs(
        console.clone(),
        pair.clone(),
        pushed_rx,
    ));
    tasks.spawn(report_source_denies(
        node.clone(),
        alarms.clone(),
        pair.clone(),
        cfg.system.hostname.clone(),
    ));
    tasks.spawn(keep_registrations(
        node.clone(),
        pair.clone(),
        alarms.clone(),
        cfg.system.hostname.clone(),
    ));
    tasks.spawn(watch_accounting_spool(
        node.clone(),
        alarms.clone(),
        cfg.system.hostname.clone(),
    ));
    tasks.spawn(crate::dns::run(console.clone()));
    let snmp_agent = crate::snmp_agent::bind_at_start(&console).await?;
    tasks.spawn(crate::snmp_agent::run(
        console.clone(),
        snmp_agent,
        tasks.clone(),
    ));
    let metrics = crate::metrics::bind_at_start(&console).await?;
    tasks.spawn(crate::metrics::run(console.clone(), metrics, tasks.clone()));
    let listener = crate::control::mgmt::bind(&mgmt_socket)?;
    tasks.spawn(crate::control::mgmt::serve(
        listener,
        mgmt_socket.clone(),
        console,
        tasks.clone(),
    ));

    let routes: Vec<String> = cfg
        .sip_interfaces
        .iter()
        .filter_map(|i| {
            cfg.route_for(&i.realm)
                .map(|a| format!("{} -> {} {}", i.realm, a.name, a.socket_addr()))
        })
        .collect();
    let interfaces = node.describe_interfaces();
    info!(
        ?interfaces,
        ?routes,
        workers = cfg.sip_config.workers,
        "listening"
    );
    // The ready line: scripts and tests wait for it on stdout.
    println!(
        "sbc ready: {}{}; routes: {}; mgmt {}",
        interfaces.join(", "),
        if paired {
            " (bound only while active in the pair)"
        } else {
            ""
        },
        routes.join(", "),
        mgmt_socket.display()
    );
    // systemd (`Type=notify`): READY=1 now, or once the pair has settled.
    crate::service::notify_ready(pair.clone());
    let reboot = tokio::select! {
        () = shutdown => false,
        c = control_rx.recv() => c == Some(Control::Reboot),
    };
    if reboot {
        warn!("rebooting: draining, then restarting the process");
        crate::service::notify_rebooting();
    } else {
        info!("shutting down: refusing new requests, finishing transactions");
        crate::service::notify_stopping();
    }
    node.shutdown().await;
    // The clear traps are queued before the signal: the trap sink sends them, then ends.
    alarms.clear_for_restart();
    if !tasks.shutdown(TASKS_BOUND).await {
        warn!(
            running = tasks.len(),
            "background tasks still running at exit"
        );
    }
    let _ = std::fs::remove_file(&mgmt_socket);
    Ok(if reboot { Exit::Reboot } else { Exit::Stopped })
}

/// How long the background tasks get to end once shutdown is signalled (the trap sink sends
/// what is queued: a few datagrams).
const TASKS_BOUND: Duration = Duration::from_secs(5);

/// Applies each configuration the active pushes; a refused push changes nothing and is shown
/// in `show redundancy`.
async fn apply_pushed_configs(
    console: Arc<Console>,
    pair: Option<Arc<Pair>>,
    mut pushed: mpsc::UnboundedReceiver<String>,
) {
    while let Some(toml) = pushed.recv().await {
        if let Err(e) = console.apply_pushed(&toml).await {
            warn!(error = %e, "configuration pushed by the active refused: nothing changed");
            if let Some(p) = &pair {
                p.note_push_refused(e);
            }
        }
    }
}

/// How often a certificate that stays within its expiry warning is trapped again.
const CERT_TRAP_EVERY: Duration = Duration::from_secs(86_400);

/// How often expired registrations are purged and changed ones replicated: a binding
/// created this long before a kill -9 of the active may be lost (its phone's next
/// REGISTER, forwarded, restores it).
const REGISTRATION_SYNC_EVERY: Duration = Duration::from_millis(200);

/// A full accounting spool (checked once a second): with `spool-full-action refuse-calls`
/// new calls refused with 503 while the spool says it is full; and, as
/// [`SpoolWatch`](crate::accounting::spool_alarm::SpoolWatch) decides, logged, the critical
/// alarm 131078 (task `accounting`) raised and `sbcAccountingSpoolTrap` sent as it fills,
/// the alarm cleared and the trap sent again as it has room.
async fn watch_accounting_spool(node: Arc<Node>, alarms: Arc<AlarmService>, hostname: String) {
    use crate::accounting::spool_alarm::{
        spool_alarm, spool_trap, SpoolChange, SpoolWatch, SPOOL_ALARM_ID,
    };
    let mut admission_closed = false;
    let mut watch = SpoolWatch::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let hub = node.accounting();
        let report = hub.report();
        let refuse = hub.refuses_calls_when_full() && report.spool_full;
        if refuse != admission_closed {
            admission_closed = refuse;
            node.set_admission_reason("accounting-spool", refuse);
        }
        match watch.observe(&report) {
            Some(SpoolChange::Filled) => {
                warn!(
                    bytes = report.spool_bytes,
                    max = report.spool_max_bytes,
                    refused = report.records_refused,
                    refuse_calls = hub.refuses_calls_when_full(),
                    "accounting spool full: records are refused"
                );
                alarms.raise_condition(spool_alarm(&report));
                alarms.sink().send(spool_trap(&report, true, &hostname));
            }
            Some(SpoolChange::HasRoom) => {
                info!(
                    bytes = report.spool_bytes,
                    max = report.spool_max_bytes,
                    "accounting spool has room again"
                );
                alarms.clear_condition(SPOOL_ALARM_ID);
                alarms.sink().send(spool_trap(&report, false, &hostname));
            }
            // Still full: the row follows the spool (raised again after an activation that
            // rebuilt the alarms, never after an operator's clear-alarm).
            None if watch.is_full() => {
                alarms.raise_condition(spool_alarm(&report));
            }
            None => {}
        }
    }
}

/// How often `sbcRegCacheFullTrap` is sent at most while REGISTERs are refused.
const REG_CACHE_FULL_TRAP_EVERY: Duration = Duration::from_secs(60);

/// The registration cache's timer: bindings whose phones stopped refreshing purged (not only
/// on traffic), on the active of a pair every change replicated to the standby, and a
/// REGISTER refused at `reg-cache-limit` logged and trapped (`sbcRegCacheFullTrap`, at most
/// once a minute).
async fn keep_registrations(
    node: Arc<Node>,
    pair: Option<Arc<Pair>>,
    alarms: Arc<AlarmService>,
    hostname: String,
) {
    let mut refused_seen = 0u64;
    let mut trapped_at: Option<Instant> = None;
    if pair.is_some() {
        node.registrations()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .track_changes();
    }
    let mut tick = tokio::time::interval(REGISTRATION_SYNC_EVERY);
    loop {
        tick.tick().await;
        let now = Instant::now();
        node.purge_registrations(now);
        let (refused, bindings, limit) = {
            let cache = node
                .registrations()
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (cache.counters().refused_full, cache.len(), cache.limit())
        };
        if refused > refused_seen
            && trapped_at.is_none_or(|t| now.duration_since(t) >= REG_CACHE_FULL_TRAP_EVERY)
        {
            warn!(
                bindings,
                limit,
                refused = refused - refused_seen,
                "registration cache full (reg-cache-limit): REGISTERs refused with 503"
            );
            alarms.sink().send(sbc_snmp::Trap::RegCacheFull {
                bindings: u32::try_from(bindings).unwrap_or(u32::MAX),
                limit: u32::try_from(limit).unwrap_or(u32::MAX),
                node: hostname.clone(),
            });
            trapped_at = Some(now);
            refused_seen = refused;
        }
        if let Some(pair) = &pair {
            let changes = node
                .registrations()
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take_changes();
            pair.publish_registrations(changes);
        }
    }
}

/// Source denies at the SIP edge: logged and trapped (`sbcSourceDeniedTrap`) as they start
/// and end; steering pools running low (`sbcMediaPortsLowTrap`); TLS certificates within their
/// expiry warning (`sbcTlsCertExpiringTrap`, at once and then daily while they stay);
/// session-agents going out of service or back (`sbcSessionAgentStatusTrap`, and replicated
/// to the standby); the route files' checksums published for the standby; checked once a
/// second.
async fn report_source_denies(
    node: Arc<Node>,
    alarms: Arc<AlarmService>,
    pair: Option<Arc<Pair>>,
    hostname: String,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // (profile, file, notAfter) -> when last trapped.
    let mut cert_trapped: std::collections::HashMap<
        (String, String, String),
        tokio::time::Instant,
    > = std::collections::HashMap::new();
    loop {
        tick.tick().await;
        let now = tokio::time::Instant::now();
        let certs = node.tls().certificates();
        cert_trapped.retain(|(p, f, e), _| {
            certs
                .iter()
                .any(|c| c.expiring && &c.profile == p && &c.file == f && &c.expires == e)
        });
        for c in certs.iter().filter(|c| c.expiring) {
            let key = (c.profile.clone(), c.file.clone(), c.expires.clone());
            if cert_trapped
                .get(&key)
                .is_some_and(|at| now.duration_since(*at) < CERT_TRAP_EVERY)
            {
                continue;
            }
            cert_trapped.insert(key, now);
            warn!(profile = %c.profile, file = %c.file, expires = %c.expires, days_left = c.days_left,
                "TLS certificate expires soon: replace the files and activate-config");
            alarms.sink().send(sbc_snmp::Trap::TlsCertExpiring {
                profile: c.profile.clone(),
                days_left: i32::try_from(c.days_left).unwrap_or(i32::MIN),
                expires: c.expires.clone(),
                node: hostname.clone(),
            });
        }
        for e in node.access_events() {
            let (source, seconds) = match e {
                sbc_proto::access::AccessEvent::Denied { source, for_ } => {
                    warn!(%source, seconds = for_.as_secs(), "source denied: it kept exceeding its rate of new requests");
                    (source, u32::try_from(for_.as_secs()).unwrap_or(u32::MAX))
                }
                sbc_proto::access::AccessEvent::Released { source } => {
                    info!(%source, "source deny ended");
                    (source, 0)
                }
            };
            alarms.sink().send(sbc_snmp::Trap::SourceDenied {
                source: source.to_string(),
                seconds,
                node: hostname.clone(),
            });
        }
        let router = node.router();
        if let Some(pair) = &pair {
            let files: Vec<(String, String)> = router
                .route_files()
                .map(|(name, f)| (name.to_owned(), f.checksum().to_owned()))
                .collect();
            if !files.is_empty() {
                pair.publish_route_files(&files);
            }
        }
        for (agent, t) in router.board().poll_transitions(Instant::now()) {
            let name = router
                .agent(agent)
                .map_or_else(|| format!("#{agent}"), |a| a.hop.name.clone());
            let in_service = t.to.is_in_service();
            let reason = match (t.to, t.from) {
                (sbc_proto::routing::agent::AgentState::OutOfService(why), _) => format!("{why:?}"),
                (_, sbc_proto::routing::agent::AgentState::OutOfService(why)) => {
                    format!("recovered from {why:?}")
                }
                _ => "in service".to_owned(),
            };
            if let Some(pair) = &pair {
                pair.publish_agent_state(&name, t.to);
            }
            if in_service {
                info!(session_agent = %name, %reason, "session-agent back in service");
            } else {
                warn!(session_agent = %name, %reason, "session-agent out of service: new sessions pass it over");
            }
            alarms.sink().send(sbc_snmp::Trap::SessionAgentStatus {
                agent: name,
                in_service,
                reason,
                node: hostname.clone(),
            });
        }
        for (realm, free, total) in node.media_alerts() {
            warn!(%realm, free, total, "steering-pool running out of media ports: new calls will get 503");
            alarms.sink().send(sbc_snmp::Trap::MediaPortsLow {
                realm,
                free: u32::try_from(free).unwrap_or(u32::MAX),
                total: u32::try_from(total).unwrap_or(u32::MAX),
                node: hostname.clone(),
            });
        }
    }
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
