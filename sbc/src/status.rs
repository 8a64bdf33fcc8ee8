//! The node's status as typed snapshots, read from the cores' counters without formatting.
//!
//! One status, four views: the console's `show` commands format these snapshots as text or
//! JSON ([`crate::control::show`]), `/metrics` encodes them ([`crate::metrics`]) and the SNMP
//! agent answers from them ([`crate::snmp_agent`]). Nothing reads back what another view
//! wrote, so a renamed field is a compile error, not a silent zero.
//!
//! Each snapshot is taken from its sources at the moment it is asked for: the engines' counters
//! (one pass over the shards), the TCP and TLS edges' atomics, the media relay, the alarm
//! service, the pair. [`NodeStatus`] gathers every part a scrape reads.

use std::time::Duration;

use sbc_alarms::{AlarmRow, Deduction};
use sbc_ha::shell::sync::SyncCountersSnapshot;
use sbc_proto::engine::Stats;

use crate::alarm_service::{AlarmService, Readings};
use crate::pair::Pair;
use crate::runtime::tcp::TcpStatsSnapshot;
use crate::runtime::tls::CertStatus;
use crate::runtime::{MediaReport, Node};
use crate::workers::GroupReport;

/// `show sip-stats`: admission, calls, the engines' counters, the TCP and TLS edges, media.
#[derive(Debug, Clone, Default)]
pub struct SipStatus {
    /// Why new requests are refused with 503 now (empty: admitted).
    pub admission_reasons: Vec<&'static str>,
    /// Calls held by the engines.
    pub calls_active: usize,
    /// The engines' counters, summed over the shards.
    pub counters: Stats,
    /// The TCP edge's counters.
    pub tcp: TcpStatsSnapshot,
    /// The TLS edge's counters.
    pub tls: TcpStatsSnapshot,
    /// The media relay's counters and pools, when media is anchored (without the per-call
    /// list, which `show media` and `show dialogs` read).
    pub media: Option<MediaReport>,
}

impl SipStatus {
    /// Whether new requests are admitted.
    #[must_use]
    pub fn admission_open(&self) -> bool {
        self.admission_reasons.is_empty()
    }
}

/// `show health`: the score and what took points off it, sync states, pending restarts.
#[derive(Debug, Clone, Default)]
pub struct HealthReport {
    /// Health score, 0..=100.
    pub score: u8,
    /// What took points off it.
    pub deductions: Vec<Deduction>,
    /// Critical memory took 100 points: ineligible to become active until restarted.
    pub ineligible_until_restart: bool,
    /// New requests refused with 503 for critical memory.
    pub admission_closed: bool,
    /// The dialog sync's state, as a sentence.
    pub sip_sync: String,
    /// Whether the standby holds the active's dialogs (`None`: redundancy disabled).
    pub synced: Option<bool>,
    /// The configuration sync's state, as a sentence.
    pub config_sync: &'static str,
    /// Configuration pushes from the peer refused.
    pub config_pushes_refused: u64,
    /// Why the last one was.
    pub last_config_push_refusal: Option<String>,
    /// Activated changes that wait for a reboot.
    pub restart_needed: Vec<String>,
}

/// `show redundancy` of a node in a pair.
#[derive(Debug, Clone)]
pub struct RedundancyReport {
    /// The redundancy machine's status.
    pub status: sbc_ha::Status,
    /// Dialogs replicated (streamed by the active, held by the standby).
    pub replicated_dialogs: usize,
    /// Registration bindings replicated (the active's cache, the standby's replica).
    pub replicated_bindings: usize,
    /// The sync channel's counters.
    pub sync: SyncCountersSnapshot,
    /// The replicated table's revision.
    pub sync_revision: u64,
    /// On the active: changes not yet sent to the standby; `None` on the standby.
    pub sync_lag: Option<u64>,
    /// Configuration pushes from the peer refused.
    pub config_pushes_refused: u64,
    /// Why the last one was.
    pub last_config_push_refusal: Option<String>,
}

/// `show memory`: the alarm service's latest readings and the process.
#[derive(Debug, Clone, Default)]
pub struct MemoryReport {
    /// The latest samples (memory, heap, CPU).
    pub readings: Readings,
    /// Resident memory of the process, bytes.
    pub process_resident_bytes: u64,
    /// The lab ballast held, MiB.
    pub ballast_mb: u64,
}

/// `show tls`: certificates and the TLS edge's counters.
#[derive(Debug, Clone, Default)]
pub struct TlsReport {
    /// Each tls-profile's certificate with its expiry.
    pub certificates: Vec<CertStatus>,
    /// The TLS edge's counters.
    pub connections: TcpStatsSnapshot,
}

/// Every part of the status a scrape reads, taken at one moment.
#[derive(Debug, Clone, Default)]
pub struct NodeStatus {
    /// `system-config hostname`.
    pub hostname: String,
    /// Time since the node started.
    pub uptime: Duration,
    /// `show sip-stats`.
    pub sip: SipStatus,
    /// `show workers`.
    pub workers: Vec<GroupReport>,
    /// `show redundancy`; `None` when the node runs alone.
    pub redundancy: Option<RedundancyReport>,
    /// `show health`.
    pub health: HealthReport,
    /// `show memory`.
    pub memory: MemoryReport,
    /// `display-alarms`.
    pub alarms: Vec<AlarmRow>,
    /// `show tls`.
    pub tls: TlsReport,
    /// `show sip-trace`'s counters.
    pub trace: crate::trace::TraceCounters,
    /// `show session-agents`.
    pub session_agents: Vec<SessionAgentRow>,
    /// `show local-routing`.
    pub route_files: Vec<RouteFileRow>,
    /// `show registrations`.
    pub registrations: RegistrationsReport,
    /// `show accounting`.
    pub accounting: crate::accounting::AccountingReport,
}

/// The most bindings `show registrations` lists (the count is always whole).
pub const MAX_LISTED_BINDINGS: usize = 1000;

/// `show registrations`: the cache's bindings (at most [`MAX_LISTED_BINDINGS`], by address of
/// record), their count, the limit and the counters.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct RegistrationsReport {
    /// Bindings held.
    pub bindings: usize,
    /// `reg-cache-limit` (0: none).
    pub limit: usize,
    /// The counters since the node started.
    pub counters: sbc_proto::registration::cache::CacheCounters,
    /// The bindings listed.
    pub rows: Vec<BindingRow>,
}

/// One binding of `show registrations`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BindingRow {
    /// The address of record.
    pub aor: String,
    /// The phone's Contact.
    pub contact: String,
    /// Where the phone is reached: transport and source address (the NAT's).
    pub flow: String,
    /// Our Contact's user part toward the registrar.
    pub token: String,
    /// Seconds until the phone must refresh.
    pub phone_expires_s: u64,
    /// Seconds until the registrar's binding expires.
    pub registrar_expires_s: u64,
    /// Seconds since the phone's last REGISTER the cache took (forwarded or absorbed).
    pub refreshed_s_ago: u64,
    /// The Call-ID of the phone's registration (its refreshes must keep it).
    pub call_id: String,
    /// The CSeq of its last REGISTER the cache took.
    pub cseq: u32,
}

/// `show registrations` of `node`.
#[must_use]
pub fn registrations(node: &Node) -> RegistrationsReport {
    let now = std::time::Instant::now();
    let cache = node
        .registrations()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut rows: Vec<BindingRow> = cache
        .bindings()
        .map(|b| BindingRow {
            aor: b.aor.clone(),
            contact: b.phone_contact.clone(),
            flow: format!("{} {}", b.flow.transport.uri_param(), b.flow.source),
            token: format!("r-{:016x}", b.token),
            phone_expires_s: b.phone_expires_at.saturating_duration_since(now).as_secs(),
            registrar_expires_s: b
                .registrar_expires_at
                .saturating_duration_since(now)
                .as_secs(),
            refreshed_s_ago: now.saturating_duration_since(b.refreshed_at).as_secs(),
            call_id: b.call_id.clone(),
            cseq: b.cseq,
        })
        .collect();
    rows.sort_by(|a, b| (&a.aor, &a.contact).cmp(&(&b.aor, &b.contact)));
    rows.truncate(MAX_LISTED_BINDINGS);
    RegistrationsReport {
        bindings: cache.len(),
        limit: cache.limit(),
        counters: cache.counters(),
        rows,
    }
}

/// One row of `show local-routing`: a `local-routing-config` file as this node loaded it (each
/// node loads its own copy: compare the checksums of both nodes).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RouteFileRow {
    /// `name`.
    pub name: String,
    /// Rows loaded.
    pub rows: usize,
    /// Distinct prefixes.
    pub prefixes: usize,
    /// SHA-256 of the file as loaded, hex.
    pub sha256: String,
    /// Heap the file's index takes, bytes.
    pub heap_bytes: usize,
    /// On a standby: the SHA-256 of the active's copy, as it published it on the sync
    /// channel (`None` on the active, alone, or before it came).
    pub active_sha256: Option<String>,
    /// On a standby: whether its copy is the active's (`None` when unknown).
    pub matches_active: Option<bool>,
}

/// `show local-routing` of `node`: the route files of the router in use, and on a standby
/// of `pair` whether each is the active's copy.
#[must_use]
pub fn route_files(node: &Node, pair: Option<&Pair>) -> Vec<RouteFileRow> {
    node.router()
        .route_files()
        .map(|(name, f)| {
            let active_sha256 = pair.and_then(|p| p.active_route_file_checksum(name));
            RouteFileRow {
                name: name.to_owned(),
                rows: f.row_count(),
                prefixes: f.prefix_count(),
                sha256: f.checksum().to_owned(),
                heap_bytes: f.heap_bytes(),
                matches_active: active_sha256.as_deref().map(|a| a == f.checksum()),
                active_sha256,
            }
        })
        .collect()
}

/// One row of `show session-agents`: a session-agent's state, load and pings on this node.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SessionAgentRow {
    /// `name`.
    pub name: String,
    /// Where its requests go (`address:port`) and over what.
    pub address: String,
    /// `in-service`, or `out-of-service (<why>)`.
    pub state: String,
    /// Whether it takes new sessions' attempts.
    pub in_service: bool,
    /// Seconds since its state last changed (or since the node started pinging it).
    pub state_for_s: u64,
    /// Sessions it holds (calls set up, or being set up, through it).
    pub sessions: u32,
    /// New sessions admitted in the current second (`max-burst-rate`'s window).
    pub burst_sessions: u32,
    /// The round trip of its last answered ping, ms.
    pub last_ping_rtt_ms: Option<f64>,
    /// The code of its last answered ping.
    pub last_ping_code: Option<u16>,
    /// Seconds since its last ping was sent.
    pub last_ping_s_ago: Option<u64>,
    /// Pings sent, and left unanswered.
    pub pings_sent: u64,
    /// Pings left unanswered.
    pub pings_missed: u64,
    /// New sessions it refused (out of service, at its limits).
    pub refusals: u64,
    /// Whether this node pings (the active does, a standby does not).
    pub pinging: bool,
}

/// `show session-agents` of `node`: the router's agents and their live state.
#[must_use]
pub fn session_agents(node: &Node) -> Vec<SessionAgentRow> {
    let router = node.router();
    let board = router.board();
    let now = std::time::Instant::now();
    let pinging = board.is_pinging();
    router
        .agents()
        .iter()
        .zip(board.snapshots(now))
        .map(|(agent, snap)| {
            let in_service = snap.state.is_in_service();
            SessionAgentRow {
                name: agent.hop.name.clone(),
                address: match &agent.dns {
                    // A DNS-named agent: the name, and the address it resolved to (unspecified
                    // until it has).
                    Some(dns) => {
                        format!("{}={} {:?}", dns.name, agent.hop.addr, agent.hop.transport)
                    }
                    None => format!("{} {:?}", agent.hop.addr, agent.hop.transport),
                },
                state: if in_service {
                    "in-service".to_owned()
                } else {
                    format!("out-of-service ({:?})", snap.state)
                },
                in_service,
                state_for_s: now.saturating_duration_since(snap.since).as_secs(),
                sessions: snap.sessions,
                burst_sessions: snap.burst_sessions,
                last_ping_rtt_ms: snap.last_ping_rtt.map(|d| d.as_secs_f64() * 1000.0),
                last_ping_code: snap.last_ping_code,
                last_ping_s_ago: snap
                    .last_ping_at
                    .map(|t| now.saturating_duration_since(t).as_secs()),
                pings_sent: snap.pings_sent,
                pings_missed: snap.pings_missed,
                refusals: snap.refusals,
                pinging,
            }
        })
        .collect()
}

/// Subscriptions listed at most by `show subscriptions` (the count is whole).
pub const MAX_LISTED_SUBSCRIPTIONS: usize = 1000;

/// `show subscriptions`: the subscription dialogs (SUBSCRIBE, REFER) and their counters.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SubscriptionsReport {
    /// Subscriptions held (accepted, or waiting for the notifier's answer).
    pub subscriptions: usize,
    /// Accepted by the notifier (2xx) since the node started.
    pub accepted: u64,
    /// Refused (a final non-2xx, or no `Event`).
    pub refused: u64,
    /// Ended by their last NOTIFY, or by a 481/408 in them.
    pub ended: u64,
    /// Released at their expiry without a refresh.
    pub expired: u64,
    /// The subscriptions listed, oldest first.
    pub rows: Vec<SubscriptionRow>,
}

/// One subscription of `show subscriptions`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SubscriptionRow {
    /// The dialog's id (as `show dialogs` lists it).
    pub id: String,
    /// The event package (`Event` header).
    pub event: String,
    /// `trying` until the notifier accepts, `confirmed`, `terminating` after its last NOTIFY.
    pub state: String,
    /// The subscriber's address and its Call-ID.
    pub subscriber: String,
    /// The subscriber's Call-ID.
    pub subscriber_call_id: String,
    /// The notifier's address.
    pub notifier: String,
    /// The notifier leg's Call-ID (ours).
    pub notifier_call_id: String,
    /// Seconds until it expires unless refreshed (none until accepted).
    pub expires_s: Option<u64>,
    /// NOTIFYs relayed in it.
    pub notifies: u32,
}

/// `show subscriptions` of `node`.
pub async fn subscriptions(node: &Node) -> SubscriptionsReport {
    let snapshots = node.snapshots(true).await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let mut report = SubscriptionsReport::default();
    let mut listed = Vec::new();
    for shard in &snapshots {
        report.accepted += shard.stats.subscriptions_accepted;
        report.refused += shard.stats.subscriptions_refused;
        report.ended += shard.stats.subscriptions_ended;
        report.expired += shard.stats.subscriptions_expired;
        for d in &shard.dialogs {
            let Some(sub) = &d.subscription else { continue };
            report.subscriptions += 1;
            listed.push((
                d.created_unix,
                SubscriptionRow {
                    id: format!("{:016x}", d.id),
                    event: sub.event.clone(),
                    state: format!("{:?}", d.state).to_lowercase(),
                    subscriber: d.caller.peer.to_string(),
                    subscriber_call_id: d.caller.call_id.clone(),
                    notifier: d.callee.peer.to_string(),
                    notifier_call_id: d.callee.call_id.clone(),
                    expires_s: (sub.expires_unix_ms > 0)
                        .then(|| sub.expires_unix_ms.saturating_sub(now_ms) / 1000),
                    notifies: sub.notifies,
                },
            ));
        }
    }
    listed.sort_by(|a, b| (a.0, &a.1.id).cmp(&(b.0, &b.1.id)));
    report.rows = listed
        .into_iter()
        .take(MAX_LISTED_SUBSCRIPTIONS)
        .map(|(_, row)| row)
        .collect();
    report
}

/// `show sip-stats` of `node`: one pass over the shards, never waiting on an engine's lock on
/// the I/O thread ([`Node::totals_nonblocking`]).
pub async fn sip(node: &Node) -> SipStatus {
    let (counters, calls_active) = node.totals_nonblocking().await;
    SipStatus {
        admission_reasons: node.admission_reasons(),
        calls_active,
        counters,
        tcp: node.tcp_stats(),
        tls: node.tls_stats(),
        media: node.media_summary(),
    }
}

/// `show health` from the alarm service and the pair; `restart_needed` from the console, which
/// knows what the node started on.
#[must_use]
pub fn health(
    alarms: &AlarmService,
    pair: Option<&Pair>,
    restart_needed: Vec<String>,
) -> HealthReport {
    let (score, deductions, ineligible_until_restart) = alarms.health_report();
    let (sip_sync, synced) = match pair {
        None => ("not applicable (redundancy disabled)".to_owned(), None),
        Some(p) => {
            let s = p.status();
            let text = match s.state {
                sbc_ha::State::Active => format!(
                    "active: streaming {} dialogs and {} registrations to the standby",
                    p.replicated_dialogs(),
                    p.replicated_bindings()
                ),
                _ if s.synced => format!(
                    "synchronized ({} dialogs, {} registrations)",
                    p.replicated_dialogs(),
                    p.replicated_bindings()
                ),
                _ => "not synchronized".to_owned(),
            };
            (text, Some(s.synced))
        }
    };
    let config_sync = match pair.map(Pair::config_synchronized) {
        None => "not applicable (redundancy disabled)",
        Some(None) => "unknown (no peer heard)",
        Some(Some(true)) => "synchronized",
        Some(Some(false)) => "not synchronized (the peer runs another configuration)",
    };
    let (config_pushes_refused, last_config_push_refusal) =
        pair.map_or((0, None), Pair::push_refusals);
    HealthReport {
        score,
        deductions,
        ineligible_until_restart,
        admission_closed: alarms.admission_closed(),
        sip_sync,
        synced,
        config_sync,
        config_pushes_refused,
        last_config_push_refusal,
        restart_needed,
    }
}

/// `show redundancy` of a node in a pair.
#[must_use]
pub fn redundancy(pair: &Pair) -> RedundancyReport {
    let (config_pushes_refused, last_config_push_refusal) = pair.push_refusals();
    RedundancyReport {
        status: pair.status(),
        replicated_dialogs: pair.replicated_dialogs(),
        replicated_bindings: pair.replicated_bindings(),
        sync: pair.sync_counters(),
        sync_revision: pair.sync_revision(),
        sync_lag: pair.sync_lag(),
        config_pushes_refused,
        last_config_push_refusal,
    }
}

/// `show memory`.
#[must_use]
pub fn memory(alarms: &AlarmService, ballast_mb: u64) -> MemoryReport {
    MemoryReport {
        readings: alarms.readings(),
        process_resident_bytes: process_rss_bytes().unwrap_or(0),
        ballast_mb,
    }
}

/// `show tls`.
#[must_use]
pub fn tls(node: &Node) -> TlsReport {
    TlsReport {
        certificates: node.tls().certificates(),
        connections: node.tls_stats(),
    }
}

/// Resident memory of this process, from /proc/self/statm.
#[must_use]
pub fn process_rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

impl RedundancyReport {
    /// The heartbeat and witness counters by name, as `show redundancy` lists them (the
    /// longest gap between heartbeats is not a counter and is left out).
    #[must_use]
    pub fn heartbeat_counters(&self) -> [(&'static str, u64); 18] {
        let sbc_ha::Counters {
            received,
            accepted,
            bad_length,
            bad_magic,
            bad_version,
            bad_mac,
            malformed,
            unknown_node,
            own_node,
            path_mismatch,
            stale,
            replayed,
            unverified,
            sent,
            max_gap_ms: _,
            witness_probes,
            witness_answers,
            witness_dropped,
            witness_challenges,
        } = self.status.counters;
        // Destructured, so a new counter that is not listed here does not compile.
        [
            ("received", received),
            ("accepted", accepted),
            ("bad_mac", bad_mac),
            ("bad_magic", bad_magic),
            ("bad_length", bad_length),
            ("bad_version", bad_version),
            ("malformed", malformed),
            ("stale", stale),
            ("replayed", replayed),
            ("unverified", unverified),
            ("unknown_node", unknown_node),
            ("own_node", own_node),
            ("path_mismatch", path_mismatch),
            ("sent", sent),
            ("witness_probes", witness_probes),
            ("witness_answers", witness_answers),
            ("witness_dropped", witness_dropped),
            ("witness_challenges", witness_challenges),
        ]
    }

    /// The sync channel's counters by name (the streamed revision is a position, not a
    /// counter, and is left out).
    #[must_use]
    pub fn sync_counters(&self) -> [(&'static str, u64); 10] {
        let SyncCountersSnapshot {
            sessions,
            replaced,
            refused_address,
            refused_busy,
            refused_handshake,
            refused_timeout,
            refused_node,
            refused_frame,
            invalid_entries,
            streamed_revision: _,
            resyncs,
        } = self.sync;
        [
            ("sessions", sessions),
            ("replaced", replaced),
            ("refused_address", refused_address),
            ("refused_busy", refused_busy),
            ("refused_handshake", refused_handshake),
            ("refused_timeout", refused_timeout),
            ("refused_node", refused_node),
            ("refused_frame", refused_frame),
            ("invalid_entries", invalid_entries),
            ("resyncs", resyncs),
        ]
    }
}
