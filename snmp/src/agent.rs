//! The SNMP agent's logic, sans IO: the MIB view built from a [`StatusSnapshot`] of the
//! node, and [`Agent::handle_at`], which turns one request datagram into at most one response
//! (GetRequest, GetNextRequest, GetBulkRequest; SetRequest is refused with `notWritable`),
//! SNMPv2c with a community or SNMPv3 with a USM user (authPriv, SHA and AES-128: the message
//! is checked and opened by [`crate::usm::open`], the scoped PDU answered by the same logic
//! as v2c on the same view, the response encrypted and authenticated with the user's keys).
//!
//! # SNMPv3
//!
//! Discovery (an empty or foreign engine ID) gets a `usmStatsUnknownEngineIDs` report with our
//! engine ID, boots and time. An unknown user (or one not allowed from the source), a security
//! level other than authPriv, a wrong digest or an undecryptable PDU gets its `usmStats`
//! report in clear; a message outside the 150 s time window gets an authenticated
//! `usmStatsNotInTimeWindows` report (so that the manager may trust our time). Reports go
//! only to reportable requests; every refusal is counted.
//!
//! # The view
//!
//! | OID                               | object |
//! |-----------------------------------|--------|
//! | `1.3.6.1.2.1.1.{1,2,3,5}.0`        | `sysDescr`, `sysObjectID`, `sysUpTime`, `sysName` |
//! | `1.3.6.1.2.1.11.{1,3,4,5,6}.0`     | `snmpInPkts`, `snmpInBadVersions`, `snmpInBadCommunityNames`, `snmpInBadCommunityUses`, `snmpInASNParseErrs` |
//! | `1.3.6.1.3.3261.1.2.1..11.0`       | `sbcPairStatus` scalars: health, redundancy, memory, heap, calls |
//! | `1.3.6.1.3.3261.1.2.12.1.c.id`     | `sbcAlarmTable`, indexed by the alarm id |
//! | `1.3.6.1.6.3.10.2.1.{1,2,3,4}.0`   | `snmpEngineID`, `snmpEngineBoots`, `snmpEngineTime`, `snmpEngineMaxMessageSize` (with v3) |
//! | `1.3.6.1.6.3.15.1.1.{1..6}.0`      | `usmStats` counters (with v3) |
//!
//! GETNEXT and GETBULK walk the view in lexicographic OID order (the order of `Vec<u32>`).
//!
//! # Limits
//!
//! Requests longer than [`MAX_REQUEST`] bytes or with more than [`MAX_VARBINDS`] varbinds are
//! dropped (counted as parse errors); `max-repetitions` is capped at [`AgentConfig::max_repetitions`];
//! a response larger than [`AgentConfig::max_response`] bytes is `tooBig` (GET, GETNEXT) or
//! truncated at the end (GETBULK, RFC 3416 §4.2.3). A community that is unknown, or known but
//! not allowed from the source address, gets no answer and is counted
//! (`snmpInBadCommunityNames`, RFC 3584 §5).

use std::borrow::Cow;
use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use ipnet::IpNet;
use rasn::types::{Integer, ObjectIdentifier, OctetString};
use rasn_smi::v1::{Counter, Gauge, TimeTicks};
use rasn_smi::v2::{ApplicationSyntax, Counter64, ObjectSyntax, SimpleSyntax};
use rasn_snmp::v2::{Pdu, Pdus, Report, Response, VarBind, VarBindValue};
use rasn_snmp::v2c::Message;

use crate::usm::{self, Engine, Refusal, UsmStats, UsmUser, SNMP_ENGINE_ARC, USM_STATS_ARC};

use sbc_alarms::{AlarmKind, Severity};

pub use crate::mib::MAX_REQUEST;
use crate::mib::{kibibytes, RedundancyRole, TransitionState, ENTERPRISE_ARC};

/// Requests with more varbinds than this are dropped.
pub const MAX_VARBINDS: usize = 128;
/// `sbcPairStatus`: `1.3.6.1.3.3261.1.2`.
pub const STATUS_ARC: [u32; 8] = [1, 3, 6, 1, 3, 3261, 1, 2];

const SYSTEM: [u32; 7] = [1, 3, 6, 1, 2, 1, 1];
const SNMP: [u32; 7] = [1, 3, 6, 1, 2, 1, 11];
const ALARM_ENTRY: u32 = 12;
/// The last scalar of `sbcPairStatus`: `sbcStatusAccountingServers`.
const LAST_STATUS_SCALAR: u32 = 25;
const ERR_TOO_BIG: u32 = 1;
const ERR_NOT_WRITABLE: u32 = 17;

/// What the node's redundancy machine says, for `sbcPairStatus`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedundancyStatus {
    /// This node's state.
    pub state: TransitionState,
    /// The epoch (`show redundancy` epoch).
    pub epoch: u64,
    /// Whether the peer is heard.
    pub peer_alive: bool,
    /// The peer's last known state, if any heard.
    pub peer_state: Option<TransitionState>,
    /// On the active: dialog changes not yet sent to a standby (all of them while none is
    /// connected); `None` on a standby.
    pub sync_lag: Option<u64>,
    /// Dialogs in the replicated table.
    pub replicated_dialogs: u64,
}

/// One raised alarm, for `sbcAlarmTable`.
#[derive(Debug, Clone, PartialEq)]
pub struct AlarmEntry {
    /// The alarm id (the table's index).
    pub id: u32,
    /// What it measures.
    pub kind: AlarmKind,
    /// Its severity.
    pub severity: Severity,
    /// The reading, whole percent.
    pub value: u32,
    /// The owning task.
    pub task: String,
    /// When it was raised.
    pub raised_at: SystemTime,
}

/// The node's figures at request time: what the shell reads from its subsystems.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StatusSnapshot {
    /// `sysDescr.0`.
    pub sys_descr: String,
    /// `sysName.0` (the hostname).
    pub sys_name: String,
    /// Time since the node started (`sysUpTime.0`).
    pub uptime: Duration,
    /// Health score, 0..=100.
    pub health_score: u8,
    /// `None` when the node runs alone (redundancy disabled).
    pub redundancy: Option<RedundancyStatus>,
    /// Memory utilisation, whole percent, when sampled.
    pub memory_percent: Option<u32>,
    /// Heap utilisation, whole percent, when sampled.
    pub heap_percent: Option<u32>,
    /// Calls up now.
    pub calls_active: u64,
    /// Calls attempted since start.
    pub calls_attempted: u64,
    /// Calls answered since start.
    pub calls_answered: u64,
    /// Calls failed since start.
    pub calls_failed: u64,
    /// The raised alarms.
    pub alarms: Vec<AlarmEntry>,
    /// Bindings in the registration cache.
    pub registration_bindings: u64,
    /// Accounting's figures (`sbcStatusAccounting*`).
    pub accounting: AccountingStatus,
}

/// Accounting's figures, for `sbcStatusAccounting*` (all 0, and the spool not full, while
/// accounting is disabled).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccountingStatus {
    /// Records generated by the calls and taken by the accounting thread.
    pub records_generated: u64,
    /// Records acknowledged by a server (or written to the files without one).
    pub records_delivered: u64,
    /// Records refused: the spool or the queue to the accounting thread was full.
    pub records_refused: u64,
    /// Records in the spool not acknowledged yet.
    pub spool_records: u64,
    /// Bytes the spool holds.
    pub spool_bytes: u64,
    /// The spool's bound, bytes.
    pub spool_max_bytes: u64,
    /// Whether the spool is full now.
    pub spool_full: bool,
    /// Servers taken as up now.
    pub servers_up: u64,
    /// Servers configured.
    pub servers: u64,
}

/// One community: its name and the sources it is allowed from (empty: any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Community {
    /// The community string.
    pub name: String,
    /// Allowed sources; empty allows every source.
    pub sources: Vec<IpNet>,
}

/// The agent's SNMPv3 side: its engine and its users (keys localized to the engine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V3Config {
    /// This engine.
    pub engine: Engine,
    /// The USM users.
    pub users: Vec<UsmUser>,
}

/// What an [`Agent`] answers and how much.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// The read-only communities.
    pub communities: Vec<Community>,
    /// SNMPv3, when configured (else v3 messages count as bad versions).
    pub v3: Option<V3Config>,
    /// Cap on a GETBULK's `max-repetitions`. Default 64.
    pub max_repetitions: u32,
    /// Largest response, bytes. Default 1472 (an Ethernet frame's UDP payload).
    pub max_response: usize,
}

impl AgentConfig {
    /// Default limits for `communities`.
    #[must_use]
    pub const fn new(communities: Vec<Community>) -> Self {
        Self {
            communities,
            v3: None,
            max_repetitions: 64,
            max_response: 1472,
        }
    }
}

/// The agent's counters (the `snmp` group of SNMPv2-MIB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentStats {
    /// Datagrams received (`snmpInPkts`).
    pub in_pkts: u32,
    /// Not SNMPv2c (`snmpInBadVersions`).
    pub bad_versions: u32,
    /// Unknown community or source not allowed (`snmpInBadCommunityNames`).
    pub bad_community_names: u32,
    /// Operations the community does not allow: SetRequest (`snmpInBadCommunityUses`).
    pub bad_community_uses: u32,
    /// Undecodable or over-limit requests (`snmpInASNParseErrs`).
    pub asn_parse_errs: u32,
    /// Responses produced.
    pub responses: u64,
}

/// The agent: configuration and counters; feed it datagrams.
#[derive(Debug, Clone)]
pub struct Agent {
    config: AgentConfig,
    stats: AgentStats,
    usm_stats: UsmStats,
    /// The next AES salt (RFC 3826 §3.1.2.1: a counter from a random start).
    salt: u64,
}

/// What the view shows of the v3 engine.
struct EngineView<'a> {
    engine: &'a Engine,
    time: u32,
    stats: UsmStats,
}

type Row = (Vec<u32>, ObjectSyntax);

fn int(i: i64) -> ObjectSyntax {
    ObjectSyntax::Simple(SimpleSyntax::Integer(Integer::from(i)))
}
fn text(s: &str) -> ObjectSyntax {
    ObjectSyntax::Simple(SimpleSyntax::String(OctetString::from(
        s.as_bytes().to_vec(),
    )))
}
fn gauge(u: u64) -> ObjectSyntax {
    ObjectSyntax::ApplicationWide(ApplicationSyntax::Unsigned(Gauge(
        u32::try_from(u).unwrap_or(u32::MAX),
    )))
}
fn counter32(u: u32) -> ObjectSyntax {
    ObjectSyntax::ApplicationWide(ApplicationSyntax::Counter(Counter(u)))
}
fn counter64(u: u64) -> ObjectSyntax {
    ObjectSyntax::ApplicationWide(ApplicationSyntax::BigCounter(Counter64(u)))
}
fn with(prefix: &[u32], tail: &[u32]) -> Vec<u32> {
    let mut v = prefix.to_vec();
    v.extend_from_slice(tail);
    v
}

/// The role a state means: active while serving or about to, standby while ready, out of
/// service otherwise.
#[must_use]
pub const fn role_of(s: TransitionState) -> RedundancyRole {
    match s {
        TransitionState::Active
        | TransitionState::BecomingActive
        | TransitionState::RelinquishingActive => RedundancyRole::Active,
        TransitionState::Initial | TransitionState::BecomingStandby | TransitionState::Standby => {
            RedundancyRole::Standby
        }
        TransitionState::OutOfService => RedundancyRole::OutOfService,
    }
}

/// `standalone(8)` in `sbcStatusRedundancyState`, `standalone(4)` in `sbcStatusRedundancyRole`.
const STANDALONE_STATE: i64 = 8;
const STANDALONE_ROLE: i64 = 4;

/// The object OIDs of the view (scalars without their `.0`, table columns), sorted: a GET
/// under one of them that names no instance is `noSuchInstance`, anything else
/// `noSuchObject`.
fn objects() -> Vec<Vec<u32>> {
    let mut v: Vec<Vec<u32>> = [1, 2, 3, 5].iter().map(|n| with(&SYSTEM, &[*n])).collect();
    v.extend([1, 3, 4, 5, 6].iter().map(|n| with(&SNMP, &[*n])));
    v.extend((1..=11).map(|n| with(&STATUS_ARC, &[n])));
    v.extend((13..=LAST_STATUS_SCALAR).map(|n| with(&STATUS_ARC, &[n])));
    v.extend((1..=6).map(|c| with(&STATUS_ARC, &[ALARM_ENTRY, 1, c])));
    v
}

/// The v3 objects: `snmpEngine` and `usmStats`.
fn engine_objects() -> Vec<Vec<u32>> {
    let mut v: Vec<Vec<u32>> = (1..=4).map(|n| with(&SNMP_ENGINE_ARC, &[n])).collect();
    v.extend((1..=6).map(|n| with(&USM_STATS_ARC, &[n])));
    v
}

fn engine_rows(e: &EngineView<'_>) -> Vec<Row> {
    let mut rows: Vec<Row> = vec![
        (
            with(&SNMP_ENGINE_ARC, &[1, 0]),
            ObjectSyntax::Simple(SimpleSyntax::String(OctetString::from(e.engine.id.clone()))),
        ),
        (
            with(&SNMP_ENGINE_ARC, &[2, 0]),
            int(i64::from(e.engine.boots)),
        ),
        (with(&SNMP_ENGINE_ARC, &[3, 0]), int(i64::from(e.time))),
        (
            with(&SNMP_ENGINE_ARC, &[4, 0]),
            int(i64::try_from(MAX_REQUEST).unwrap_or(i64::MAX)),
        ),
    ];
    for (n, value) in (1u32..).zip(e.stats.columns()) {
        rows.push((with(&USM_STATS_ARC, &[n, 0]), counter32(value)));
    }
    rows
}

/// The view: every instance with its value, sorted by OID.
#[must_use]
fn view(s: &StatusSnapshot, stats: &AgentStats, engine: Option<&EngineView<'_>>) -> Vec<Row> {
    let mut rows: Vec<Row> = vec![
        (with(&SYSTEM, &[1, 0]), text(&s.sys_descr)),
        (
            with(&SYSTEM, &[2, 0]),
            ObjectSyntax::Simple(SimpleSyntax::ObjectId(ObjectIdentifier::new_unchecked(
                Cow::Owned(ENTERPRISE_ARC.to_vec()),
            ))),
        ),
        (
            with(&SYSTEM, &[3, 0]),
            ObjectSyntax::ApplicationWide(ApplicationSyntax::Ticks(TimeTicks(
                (s.uptime.as_millis() / 10 % (1u128 << 32)) as u32,
            ))),
        ),
        (with(&SYSTEM, &[5, 0]), text(&s.sys_name)),
        (with(&SNMP, &[1, 0]), counter32(stats.in_pkts)),
        (with(&SNMP, &[3, 0]), counter32(stats.bad_versions)),
        (with(&SNMP, &[4, 0]), counter32(stats.bad_community_names)),
        (with(&SNMP, &[5, 0]), counter32(stats.bad_community_uses)),
        (with(&SNMP, &[6, 0]), counter32(stats.asn_parse_errs)),
    ];
    let (role, state, epoch, peer_alive, peer_state) = match &s.redundancy {
        None => (STANDALONE_ROLE, STANDALONE_STATE, 0, false, 0),
        Some(r) => (
            role_of(r.state).code(),
            r.state.code(),
            r.epoch,
            r.peer_alive,
            r.peer_state.map_or(0, TransitionState::code),
        ),
    };
    let status: [ObjectSyntax; 11] = [
        int(i64::from(s.health_score)),
        int(role),
        int(state),
        gauge(epoch),
        // TruthValue: true(1), false(2).
        int(if peer_alive { 1 } else { 2 }),
        int(peer_state),
        int(s.memory_percent.map_or(-1, i64::from)),
        int(s.heap_percent.map_or(-1, i64::from)),
        gauge(s.calls_active),
        counter64(s.calls_attempted),
        counter64(s.calls_answered),
    ];
    let mut n = 0;
    for value in status {
        n += 1;
        rows.push((with(&STATUS_ARC, &[n, 0]), value));
    }
    // sbcStatusCallsFailed is column 13 (12 is the table), keeping the table's arc fixed.
    rows.push((with(&STATUS_ARC, &[13, 0]), counter64(s.calls_failed)));
    // sbcStatusSyncLag: -1 where it does not apply (a standby, a node alone).
    let (lag, replicated) = s.redundancy.as_ref().map_or((-1, 0), |r| {
        (
            r.sync_lag
                .map_or(-1, |l| i64::try_from(l.min(i32::MAX as u64)).unwrap_or(-1)),
            r.replicated_dialogs,
        )
    });
    rows.push((with(&STATUS_ARC, &[14, 0]), int(lag)));
    rows.push((with(&STATUS_ARC, &[15, 0]), gauge(replicated)));
    rows.push((with(&STATUS_ARC, &[16, 0]), gauge(s.registration_bindings)));
    let a = &s.accounting;
    let accounting: [ObjectSyntax; 9] = [
        counter64(a.records_generated),
        counter64(a.records_delivered),
        counter64(a.records_refused),
        gauge(a.spool_records),
        gauge(u64::from(kibibytes(a.spool_bytes))),
        gauge(u64::from(kibibytes(a.spool_max_bytes))),
        // TruthValue: true(1), false(2).
        int(if a.spool_full { 1 } else { 2 }),
        gauge(a.servers_up),
        gauge(a.servers),
    ];
    for (n, value) in (17u32..).zip(accounting) {
        rows.push((with(&STATUS_ARC, &[n, 0]), value));
    }
    let mut alarms: Vec<&AlarmEntry> = s.alarms.iter().collect();
    alarms.sort_by_key(|a| a.id);
    for a in &alarms {
        let raised = a
            .raised_at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let cols = [
            gauge(u64::from(a.id)),
            int(i64::from(a.kind.code())),
            int(i64::from(a.severity.code())),
            int(i64::from(a.value)),
            text(&a.task),
            gauge(raised),
        ];
        for (c, value) in (1u32..).zip(cols) {
            rows.push((with(&STATUS_ARC, &[ALARM_ENTRY, 1, c, a.id]), value));
        }
    }
    if let Some(e) = engine {
        rows.extend(engine_rows(e));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows
}

fn get(rows: &[Row], objects: &[Vec<u32>], oid: &[u32]) -> VarBindValue {
    match rows.binary_search_by(|r| r.0.as_slice().cmp(oid)) {
        Ok(i) => VarBindValue::Value(rows[i].1.clone()),
        Err(_)
            if objects
                .iter()
                .any(|o| oid.len() > o.len() && oid.starts_with(o)) =>
        {
            VarBindValue::NoSuchInstance
        }
        Err(_) => VarBindValue::NoSuchObject,
    }
}

fn next(rows: &[Row], oid: &[u32]) -> VarBind {
    let i = rows.partition_point(|r| r.0.as_slice() <= oid);
    rows.get(i).map_or_else(
        || VarBind {
            name: ObjectIdentifier::new_unchecked(Cow::Owned(oid.to_vec())),
            value: VarBindValue::EndOfMibView,
        },
        |(name, value)| VarBind {
            name: ObjectIdentifier::new_unchecked(Cow::Owned(name.clone())),
            value: VarBindValue::Value(value.clone()),
        },
    )
}

fn encode(
    community: &[u8],
    request_id: i32,
    status: u32,
    index: u32,
    vbs: Vec<VarBind>,
) -> Vec<u8> {
    let message = Message {
        version: Integer::from(1),
        community: OctetString::from(community.to_vec()),
        data: Pdus::Response(Response(Pdu {
            request_id,
            error_status: status,
            error_index: index,
            variable_bindings: vbs,
        })),
    };
    // A Response of well-formed OIDs and values always encodes.
    rasn::ber::encode(&message).unwrap_or_default()
}

impl Agent {
    /// An agent with `config` and zeroed counters.
    #[must_use]
    pub fn new(config: AgentConfig) -> Self {
        Self {
            config,
            stats: AgentStats::default(),
            usm_stats: UsmStats::default(),
            salt: 0,
        }
    }

    /// Replaces the configuration (after `activate-config`); the counters stay.
    pub fn set_config(&mut self, config: AgentConfig) {
        self.config = config;
    }

    /// The counters.
    #[must_use]
    pub const fn stats(&self) -> AgentStats {
        self.stats
    }

    fn allowed(&self, community: &[u8], source: IpAddr) -> bool {
        self.config
            .communities
            .iter()
            .any(|c| c.name.as_bytes() == community && usm::source_allowed(&c.sources, source))
    }

    /// The `usmStats` counters.
    #[must_use]
    pub const fn usm_stats(&self) -> UsmStats {
        self.usm_stats
    }

    /// Starts the AES salt counter at `seed` (pass randomness: RFC 3826 §3.1.2.1 wants salts
    /// that do not repeat under one key, across restarts too).
    pub const fn seed_salt(&mut self, seed: u64) {
        self.salt = seed;
    }

    /// [`Self::handle_at`] with the snapshot's uptime as the engine's clock.
    pub fn handle(
        &mut self,
        request: &[u8],
        source: IpAddr,
        snapshot: &StatusSnapshot,
    ) -> Option<Vec<u8>> {
        self.handle_at(request, source, snapshot, snapshot.uptime)
    }

    /// Handles one request datagram from `source`; returns the response to send back, or
    /// `None` when the request gets no answer (counted). `elapsed` is the time since the
    /// engine started (`snmpEngineTime`; the boots are the configuration's).
    pub fn handle_at(
        &mut self,
        request: &[u8],
        source: IpAddr,
        snapshot: &StatusSnapshot,
        elapsed: Duration,
    ) -> Option<Vec<u8>> {
        self.stats.in_pkts = self.stats.in_pkts.wrapping_add(1);
        if request.len() > MAX_REQUEST {
            self.stats.asn_parse_errs += 1;
            return None;
        }
        if usm::message_version(request) == Some(3) {
            let Some(v3) = self.config.v3.clone() else {
                self.stats.bad_versions += 1;
                return None;
            };
            return self.handle_v3(request, source, snapshot, elapsed, &v3);
        }
        let Ok(message) = rasn::ber::decode::<Message<Pdus>>(request) else {
            self.stats.asn_parse_errs += 1;
            return None;
        };
        if message.version != Integer::from(1) {
            self.stats.bad_versions += 1;
            return None;
        }
        if !self.allowed(&message.community, source) {
            self.stats.bad_community_names += 1;
            return None;
        }
        let community = message.community.to_vec();
        let max = self.config.max_response;
        self.answer(
            message.data,
            snapshot,
            None,
            max,
            &mut |id, status, index, vbs| encode(&community, id, status, index, vbs),
        )
    }

    fn handle_v3(
        &mut self,
        request: &[u8],
        source: IpAddr,
        snapshot: &StatusSnapshot,
        elapsed: Duration,
        v3: &V3Config,
    ) -> Option<Vec<u8>> {
        let engine = &v3.engine;
        let time = Engine::time(elapsed);
        let our_max = i32::try_from(MAX_REQUEST).unwrap_or(i32::MAX);
        let opened = usm::open(
            request,
            source,
            engine,
            elapsed,
            &v3.users,
            &mut self.usm_stats,
        );
        match opened {
            Err(Refusal::Parse) => {
                self.stats.asn_parse_errs += 1;
                None
            }
            Err(Refusal::Report {
                error,
                message_id,
                user_name,
                request_id,
                reportable,
                user,
                ..
            }) => {
                if !reportable {
                    return None;
                }
                let column = error.column();
                let counter = self.usm_stats.columns()[column as usize - 1];
                let report = Pdus::Report(Report(Pdu {
                    request_id,
                    error_status: 0,
                    error_index: 0,
                    variable_bindings: vec![VarBind {
                        name: ObjectIdentifier::new_unchecked(Cow::Owned(with(
                            &USM_STATS_ARC,
                            &[column, 0],
                        ))),
                        value: VarBindValue::Value(counter32(counter)),
                    }],
                }));
                self.stats.responses += 1;
                let bytes = match user {
                    Some(u) => {
                        let salt = self.next_salt();
                        usm::encode_auth_priv(
                            engine, time, u, message_id, our_max, salt, report, true,
                        )
                    }
                    None => usm::encode_plain_report(
                        engine, time, &user_name, message_id, our_max, report,
                    ),
                };
                bytes.ok()
            }
            Ok(opened) => {
                let max = self
                    .config
                    .max_response
                    .min(usize::try_from(opened.max_size).unwrap_or(0).max(484));
                let salt = self.next_salt();
                let user = opened.user;
                let message_id = opened.message_id;
                let view = EngineView {
                    engine,
                    time,
                    stats: self.usm_stats,
                };
                self.answer(
                    opened.scoped.data,
                    snapshot,
                    Some(&view),
                    max,
                    &mut |id, status, index, vbs| {
                        let pdu = Pdus::Response(Response(Pdu {
                            request_id: id,
                            error_status: status,
                            error_index: index,
                            variable_bindings: vbs,
                        }));
                        usm::encode_auth_priv(
                            engine, time, user, message_id, our_max, salt, pdu, false,
                        )
                        .unwrap_or_default()
                    },
                )
            }
        }
    }

    const fn next_salt(&mut self) -> u64 {
        let salt = self.salt;
        self.salt = self.salt.wrapping_add(1);
        salt
    }

    /// Answers one request PDU; `encode` makes the response message of (request-id,
    /// error-status, error-index, varbinds), whose size is held to `max_response`.
    fn answer(
        &mut self,
        data: Pdus,
        snapshot: &StatusSnapshot,
        engine: Option<&EngineView<'_>>,
        max_response: usize,
        encode: &mut dyn FnMut(i32, u32, u32, Vec<VarBind>) -> Vec<u8>,
    ) -> Option<Vec<u8>> {
        let count = |n: usize| n > MAX_VARBINDS;
        let (request_id, kind, non_repeaters, max_repetitions, vbs) = match data {
            Pdus::GetRequest(p) => (p.0.request_id, Kind::Get, 0, 0, p.0.variable_bindings),
            Pdus::GetNextRequest(p) => (p.0.request_id, Kind::Next, 0, 0, p.0.variable_bindings),
            Pdus::GetBulkRequest(p) => (
                p.0.request_id,
                Kind::Bulk,
                p.0.non_repeaters,
                p.0.max_repetitions,
                p.0.variable_bindings,
            ),
            Pdus::SetRequest(p) => {
                self.stats.bad_community_uses += 1;
                self.stats.responses += 1;
                let vbs = p.0.variable_bindings;
                return Some(encode(p.0.request_id, ERR_NOT_WRITABLE, 1, vbs));
            }
            // Not requests an agent answers.
            _ => return None,
        };
        if count(vbs.len()) {
            self.stats.asn_parse_errs += 1;
            return None;
        }
        let rows = view(snapshot, &self.stats, engine);
        let mut objects = objects();
        if engine.is_some() {
            objects.extend(engine_objects());
        }
        let out: Vec<VarBind> = match kind {
            Kind::Get => vbs
                .iter()
                .map(|vb| VarBind {
                    name: vb.name.clone(),
                    value: get(&rows, &objects, &vb.name),
                })
                .collect(),
            Kind::Next => vbs.iter().map(|vb| next(&rows, &vb.name)).collect(),
            Kind::Bulk => self.bulk(&rows, &vbs, non_repeaters, max_repetitions),
        };
        self.stats.responses += 1;
        let bytes = encode(request_id, 0, 0, out.clone());
        if bytes.len() <= max_response {
            return Some(bytes);
        }
        if kind != Kind::Bulk {
            return Some(encode(request_id, ERR_TOO_BIG, 0, Vec::new()));
        }
        // GETBULK: as many varbinds as fit, dropped from the end (RFC 3416 §4.2.3).
        let mut keep = out.len();
        while keep > 0 {
            keep = keep * 3 / 4;
            let b = encode(request_id, 0, 0, out[..keep].to_vec());
            if b.len() <= max_response {
                // Grow back one at a time while it still fits.
                let mut best = b;
                while keep < out.len() {
                    let b = encode(request_id, 0, 0, out[..=keep].to_vec());
                    if b.len() > max_response {
                        break;
                    }
                    best = b;
                    keep += 1;
                }
                return Some(best);
            }
        }
        Some(encode(request_id, ERR_TOO_BIG, 0, Vec::new()))
    }

    fn bulk(
        &self,
        rows: &[Row],
        vbs: &[VarBind],
        non_repeaters: u32,
        max_rep: u32,
    ) -> Vec<VarBind> {
        let n = (non_repeaters as usize).min(vbs.len());
        let m = max_rep.min(self.config.max_repetitions);
        let mut out: Vec<VarBind> = vbs[..n].iter().map(|vb| next(rows, &vb.name)).collect();
        let mut last: Vec<Vec<u32>> = vbs[n..].iter().map(|vb| vb.name.to_vec()).collect();
        for _ in 0..m {
            if last.is_empty() {
                break;
            }
            let mut all_end = true;
            for l in &mut last {
                let vb = next(rows, l);
                if !matches!(vb.value, VarBindValue::EndOfMibView) {
                    all_end = false;
                }
                *l = vb.name.to_vec();
                out.push(vb);
            }
            if all_end {
                break;
            }
        }
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Get,
    Next,
    Bulk,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rasn_snmp::v2::{BulkPdu, GetBulkRequest, GetNextRequest, GetRequest, SetRequest};

    const LO: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    fn snapshot() -> StatusSnapshot {
        StatusSnapshot {
            sys_descr: "sbc-pair 0.1.0".into(),
            sys_name: "sbc-a".into(),
            uptime: Duration::from_millis(12_340),
            health_score: 90,
            redundancy: Some(RedundancyStatus {
                state: TransitionState::Active,
                epoch: 7,
                peer_alive: true,
                peer_state: Some(TransitionState::Standby),
                sync_lag: Some(3),
                replicated_dialogs: 2,
            }),
            memory_percent: Some(41),
            heap_percent: Some(3),
            calls_active: 2,
            calls_attempted: 10,
            calls_answered: 8,
            calls_failed: 1,
            registration_bindings: 0,
            accounting: AccountingStatus::default(),
            alarms: vec![
                AlarmEntry {
                    id: 131_074,
                    kind: AlarmKind::Heap,
                    severity: Severity::Major,
                    value: 75,
                    task: "sbcd".into(),
                    raised_at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_000),
                },
                AlarmEntry {
                    id: 131_073,
                    kind: AlarmKind::Memory,
                    severity: Severity::Critical,
                    value: 91,
                    task: "sbcd".into(),
                    raised_at: SystemTime::UNIX_EPOCH + Duration::from_secs(2_000),
                },
            ],
        }
    }

    fn agent() -> Agent {
        Agent::new(AgentConfig::new(vec![
            Community {
                name: "public".into(),
                sources: Vec::new(),
            },
            Community {
                name: "lan".into(),
                sources: vec!["10.0.0.0/8".parse().expect("net")],
            },
        ]))
    }

    fn oid(v: &[u32]) -> ObjectIdentifier {
        ObjectIdentifier::new_unchecked(Cow::Owned(v.to_vec()))
    }

    fn vbs(oids: &[&[u32]]) -> Vec<VarBind> {
        oids.iter()
            .map(|o| VarBind {
                name: oid(o),
                value: VarBindValue::Unspecified,
            })
            .collect()
    }

    fn pdu(oids: &[&[u32]]) -> Pdu {
        Pdu {
            request_id: 42,
            error_status: 0,
            error_index: 0,
            variable_bindings: vbs(oids),
        }
    }

    fn request(community: &str, data: Pdus) -> Vec<u8> {
        rasn::ber::encode(&Message {
            version: Integer::from(1),
            community: OctetString::from(community.as_bytes().to_vec()),
            data,
        })
        .expect("encode")
    }

    fn response(bytes: &[u8]) -> Pdu {
        let m: Message<Pdus> = rasn::ber::decode(bytes).expect("decode");
        match m.data {
            Pdus::Response(Response(p)) => p,
            other => panic!("not a response: {other:?}"),
        }
    }

    fn ask(agent: &mut Agent, data: Pdus) -> Pdu {
        let bytes = agent
            .handle(&request("public", data), LO, &snapshot())
            .expect("answered");
        response(&bytes)
    }

    fn names(p: &Pdu) -> Vec<Vec<u32>> {
        p.variable_bindings
            .iter()
            .map(|v| v.name.to_vec())
            .collect()
    }

    #[test]
    fn get_scalars_and_missing_ones() {
        let mut a = agent();
        let uptime = with(&SYSTEM, &[3, 0]);
        let health = with(&STATUS_ARC, &[1, 0]);
        let no_instance = with(&STATUS_ARC, &[1, 1]);
        let no_object = with(&STATUS_ARC, &[99, 0]);
        let p = ask(
            &mut a,
            Pdus::GetRequest(GetRequest(pdu(&[
                &uptime,
                &health,
                &no_instance,
                &no_object,
            ]))),
        );
        assert_eq!(p.request_id, 42);
        assert_eq!(p.error_status, 0);
        let v: Vec<_> = p
            .variable_bindings
            .iter()
            .map(|v| v.value.clone())
            .collect();
        assert_eq!(
            v[0],
            VarBindValue::Value(ObjectSyntax::ApplicationWide(ApplicationSyntax::Ticks(
                TimeTicks(1234)
            )))
        );
        assert_eq!(v[1], VarBindValue::Value(int(90)));
        assert_eq!(v[2], VarBindValue::NoSuchInstance);
        assert_eq!(v[3], VarBindValue::NoSuchObject);
        // An alarm row that does not exist under an existing column.
        let p = ask(
            &mut a,
            Pdus::GetRequest(GetRequest(pdu(&[&with(&STATUS_ARC, &[12, 1, 4, 5])]))),
        );
        assert_eq!(p.variable_bindings[0].value, VarBindValue::NoSuchInstance);
    }

    #[test]
    fn walk_is_lexicographic_and_ends_with_end_of_mib_view() {
        let mut a = agent();
        let mut at = vec![1, 3];
        let mut seen = Vec::new();
        for _ in 0..200 {
            let p = ask(&mut a, Pdus::GetNextRequest(GetNextRequest(pdu(&[&at]))));
            let vb = &p.variable_bindings[0];
            if vb.value == VarBindValue::EndOfMibView {
                break;
            }
            assert!(vb.name.to_vec() > at, "GETNEXT goes forward");
            at = vb.name.to_vec();
            seen.push(at.clone());
        }
        // 4 system + 5 snmp + 24 status scalars + 6 columns of 2 rows.
        assert_eq!(seen.len(), 4 + 5 + 24 + 12);
        assert_eq!(seen[0], with(&SYSTEM, &[1, 0]));
        // The table's columns, rows by id within each column (131073 before 131074).
        let type_col = with(&STATUS_ARC, &[12, 1, 2]);
        let rows: Vec<_> = seen.iter().filter(|o| o.starts_with(&type_col)).collect();
        assert_eq!(
            rows,
            [&with(&type_col, &[131_073]), &with(&type_col, &[131_074])]
        );
        assert_eq!(
            seen.last(),
            Some(&with(&STATUS_ARC, &[LAST_STATUS_SCALAR, 0]))
        );
        let p = ask(&mut a, Pdus::GetNextRequest(GetNextRequest(pdu(&[&at]))));
        assert_eq!(p.variable_bindings[0].value, VarBindValue::EndOfMibView);
        assert_eq!(p.variable_bindings[0].name.to_vec(), at);
    }

    fn bulk(non_repeaters: u32, max_repetitions: u32, oids: &[&[u32]]) -> Pdus {
        Pdus::GetBulkRequest(GetBulkRequest(BulkPdu {
            request_id: 9,
            non_repeaters,
            max_repetitions,
            variable_bindings: vbs(oids),
        }))
    }

    #[test]
    fn bulk_repeats_and_stops_at_the_end() {
        let mut a = agent();
        let p = ask(&mut a, bulk(1, 3, &[&SYSTEM, &STATUS_ARC]));
        let n = names(&p);
        assert_eq!(n.len(), 1 + 3);
        assert_eq!(n[0], with(&SYSTEM, &[1, 0]));
        assert_eq!(
            n[1..],
            [
                with(&STATUS_ARC, &[1, 0]),
                with(&STATUS_ARC, &[2, 0]),
                with(&STATUS_ARC, &[3, 0])
            ]
        );
        // Past the end: one repetition of endOfMibView, then it stops.
        let last = with(&STATUS_ARC, &[LAST_STATUS_SCALAR, 0]);
        let p = ask(&mut a, bulk(0, 50, &[&last]));
        assert_eq!(p.variable_bindings.len(), 1);
        assert_eq!(p.variable_bindings[0].value, VarBindValue::EndOfMibView);
    }

    #[test]
    fn bulk_is_capped_and_fits_the_response_size() {
        let mut a = agent();
        a.config.max_repetitions = 5;
        let p = ask(&mut a, bulk(0, 1000, &[&[1, 3]]));
        assert_eq!(p.variable_bindings.len(), 5);
        a.config.max_repetitions = 64;
        a.config.max_response = 300;
        let bytes = a
            .handle(&request("public", bulk(0, 64, &[&[1, 3]])), LO, &snapshot())
            .expect("answered");
        assert!(bytes.len() <= 300, "{} bytes", bytes.len());
        let p = response(&bytes);
        assert_eq!(p.error_status, 0);
        assert!(p.variable_bindings.len() > 3, "as many as fit");
        assert_eq!(p.variable_bindings[0].name.to_vec(), with(&SYSTEM, &[1, 0]));
        // A GET that does not fit is tooBig with no varbinds.
        a.config.max_response = 40;
        let p = ask(
            &mut a,
            Pdus::GetRequest(GetRequest(pdu(&[&with(&SYSTEM, &[1, 0])]))),
        );
        assert_eq!(p.error_status, ERR_TOO_BIG);
        assert!(p.variable_bindings.is_empty());
    }

    #[test]
    fn bad_communities_get_no_answer_and_are_counted() {
        let mut a = agent();
        let get = || Pdus::GetRequest(GetRequest(pdu(&[&with(&SYSTEM, &[1, 0])])));
        assert!(a
            .handle(&request("private", get()), LO, &snapshot())
            .is_none());
        // Known, but not from this source.
        assert!(a.handle(&request("lan", get()), LO, &snapshot()).is_none());
        let ten: IpAddr = "10.1.2.3".parse().expect("ip");
        assert!(a.handle(&request("lan", get()), ten, &snapshot()).is_some());
        assert!(a.handle(b"garbage", LO, &snapshot()).is_none());
        let s = a.stats();
        assert_eq!(s.bad_community_names, 2);
        assert_eq!(s.asn_parse_errs, 1);
        assert_eq!(s.in_pkts, 4);
        // An agent on `[::]` sees an IPv4 manager as `::ffff:a.b.c.d`: the same source.
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().expect("ip");
        assert!(a
            .handle(&request("lan", get()), mapped, &snapshot())
            .is_some());
        let v6: IpAddr = "2001:db8::1".parse().expect("ip");
        assert!(a.handle(&request("lan", get()), v6, &snapshot()).is_none());
        assert!(a
            .handle(&request("public", get()), v6, &snapshot())
            .is_some());
        let s = a.stats();
        assert_eq!(s.bad_community_names, 3);
        assert_eq!(s.in_pkts, 7);
        // The counters are in the view.
        let p = ask(
            &mut a,
            Pdus::GetRequest(GetRequest(pdu(&[&with(&SNMP, &[4, 0])]))),
        );
        assert_eq!(
            p.variable_bindings[0].value,
            VarBindValue::Value(counter32(3))
        );
    }

    #[test]
    fn set_is_refused_and_other_versions_dropped() {
        let mut a = agent();
        let p = ask(
            &mut a,
            Pdus::SetRequest(SetRequest(pdu(&[&with(&SYSTEM, &[5, 0])]))),
        );
        assert_eq!(p.error_status, ERR_NOT_WRITABLE);
        assert_eq!(p.error_index, 1);
        let v1 = rasn::ber::encode(&Message {
            version: Integer::from(0),
            community: OctetString::from(b"public".to_vec()),
            data: Pdus::GetRequest(GetRequest(pdu(&[&with(&SYSTEM, &[1, 0])]))),
        })
        .expect("encode");
        assert!(a.handle(&v1, LO, &snapshot()).is_none());
        assert_eq!(a.stats().bad_versions, 1);
        let huge = vec![0u8; MAX_REQUEST + 1];
        assert!(a.handle(&huge, LO, &snapshot()).is_none());
    }

    mod v3 {
        use super::*;
        use crate::usm::{
            decrypt, encode_authenticated, encode_plain, encrypt, verify, UsmError, FLAG_AUTH,
            FLAG_PRIV, FLAG_REPORTABLE,
        };
        use rasn_snmp::v3::{
            Message as V3Message, ScopedPdu, ScopedPduData, USMSecurityParameters,
        };
        use std::sync::OnceLock;

        const ID: &[u8] = b"\x80\x00\x0c\xbd\x04sbc-a";

        fn engine() -> Engine {
            Engine {
                id: ID.to_vec(),
                boots: 4,
            }
        }

        /// `nms` (allowed from anywhere) and `lan` (10/8 only); `rogue` is `nms` with other
        /// passwords, as a manager with a wrong password has it.
        fn users() -> &'static (UsmUser, UsmUser, UsmUser) {
            static USERS: OnceLock<(UsmUser, UsmUser, UsmUser)> = OnceLock::new();
            USERS.get_or_init(|| {
                let u = |n: &str, a: &[u8], p: &[u8], nets: &[&str]| {
                    UsmUser::new(
                        n,
                        a,
                        p,
                        ID,
                        nets.iter().map(|x| x.parse().expect("net")).collect(),
                    )
                    .expect("user")
                };
                (
                    u("nms", b"authpass1", b"privpass1", &[]),
                    u("lan", b"authpass2", b"privpass2", &["10.0.0.0/8"]),
                    u("nms", b"wrongpass", b"privpass1", &[]),
                )
            })
        }

        fn agent3() -> Agent {
            let (nms, lan, _) = users();
            let mut config = AgentConfig::new(Vec::new());
            config.v3 = Some(V3Config {
                engine: engine(),
                users: vec![nms.clone(), lan.clone()],
            });
            let mut a = Agent::new(config);
            a.seed_salt(0x1234_5678_9abc_def0);
            a
        }

        /// A manager's request: `flags` as given, encrypted and authenticated as `user` when
        /// they say so, with the engine's `boots` and `time` as the manager believes them.
        fn request3(user: &UsmUser, flags: u8, time: u32, data: Pdus) -> Vec<u8> {
            let e = engine();
            let scoped = ScopedPdu {
                engine_id: OctetString::from(ID.to_vec()),
                name: OctetString::from(Vec::new()),
                data,
            };
            if flags & FLAG_AUTH == 0 {
                return encode_plain(
                    &e,
                    time,
                    user.name.as_bytes(),
                    5,
                    65_507,
                    flags,
                    scoped.data,
                )
                .expect("encode");
            }
            let salt = [9u8; 8];
            let (data, privacy) = if flags & FLAG_PRIV != 0 {
                let plain = rasn::ber::encode(&scoped).expect("encode");
                (
                    ScopedPduData::EncryptedPdu(OctetString::from(encrypt(
                        user.priv_key(),
                        e.boots,
                        time,
                        &salt,
                        &plain,
                    ))),
                    salt.to_vec(),
                )
            } else {
                (ScopedPduData::CleartextPdu(scoped), Vec::new())
            };
            encode_authenticated(&e, time, user, 5, 65_507, flags, data, privacy).expect("encode")
        }

        fn get_sys_name() -> Pdus {
            Pdus::GetRequest(GetRequest(pdu(&[&with(&SYSTEM, &[5, 0])])))
        }

        const AUTH_PRIV: u8 = FLAG_AUTH | FLAG_PRIV | FLAG_REPORTABLE;
        const AT: Duration = Duration::from_secs(500);

        /// What came back: its security parameters, and its PDU (decrypted and its digest
        /// checked with `user`'s keys when the flags say so).
        fn open3(bytes: &[u8], user: &UsmUser) -> (u8, USMSecurityParameters, Pdus) {
            let m: V3Message = rasn::ber::decode(bytes).expect("decode");
            let flags = m.global_data.flags[0];
            assert_eq!(m.global_data.message_id, Integer::from(5));
            let p: USMSecurityParameters = m
                .decode_security_parameters(rasn::Codec::Ber)
                .unwrap_or_else(|e| panic!("usm: {e}"));
            if flags & FLAG_AUTH != 0 {
                let range = usm::auth_params_range(bytes).expect("auth");
                let mut zeroed = bytes.to_vec();
                zeroed[range].fill(0);
                assert!(verify(
                    user.auth_key(),
                    &zeroed,
                    &p.authentication_parameters
                ));
            }
            let scoped = match &m.scoped_data {
                ScopedPduData::CleartextPdu(s) => s.clone(),
                ScopedPduData::EncryptedPdu(c) => {
                    let boots = u32::try_from(&p.authoritative_engine_boots).expect("boots");
                    let time = u32::try_from(&p.authoritative_engine_time).expect("time");
                    let plain =
                        decrypt(user.priv_key(), boots, time, &p.privacy_parameters, c).expect("8");
                    rasn::ber::decode(&plain).expect("scoped")
                }
            };
            assert_eq!(scoped.engine_id.as_ref(), ID);
            (flags, p, scoped.data)
        }

        fn report_of(pdus: &Pdus) -> (Vec<u32>, VarBindValue) {
            let Pdus::Report(r) = pdus else {
                panic!("not a report: {pdus:?}")
            };
            let vb = &r.0.variable_bindings[0];
            (vb.name.to_vec(), vb.value.clone())
        }

        #[test]
        fn a_request_round_trips_encrypted_both_ways() {
            let (nms, _, _) = users();
            let mut a = agent3();
            let req = request3(nms, AUTH_PRIV, 500, get_sys_name());
            let bytes = a.handle_at(&req, LO, &snapshot(), AT).expect("answered");
            let (flags, p, data) = open3(&bytes, nms);
            assert_eq!(flags, FLAG_AUTH | FLAG_PRIV);
            assert_eq!(p.authoritative_engine_id.as_ref(), ID);
            assert_eq!(p.authoritative_engine_boots, Integer::from(4));
            assert_eq!(p.authoritative_engine_time, Integer::from(500));
            assert_eq!(p.user_name.as_ref(), b"nms");
            assert_eq!(
                p.privacy_parameters.as_ref(),
                0x1234_5678_9abc_def0u64.to_be_bytes()
            );
            let Pdus::Response(r) = data else {
                panic!("not a response")
            };
            assert_eq!(r.0.request_id, 42);
            assert_eq!(
                r.0.variable_bindings[0].value,
                VarBindValue::Value(text("sbc-a"))
            );
            // The value's encoding is nowhere in the datagram (the engine ID, in clear, also
            // ends in the hostname, but with another length octet).
            assert!(!bytes.windows(7).any(|w| w == b"\x04\x05sbc-a"));
            // The next response has the next salt; a GETBULK walks the same view with the
            // snmpEngine and usmStats objects at its end.
            let walk = request3(nms, AUTH_PRIV, 501, bulk(0, 64, &[&[1, 3, 6, 1, 6, 3]]));
            let bytes = a.handle_at(&walk, LO, &snapshot(), AT).expect("answered");
            let (_, p, data) = open3(&bytes, nms);
            assert_eq!(
                p.privacy_parameters.as_ref(),
                0x1234_5678_9abc_def1u64.to_be_bytes()
            );
            let Pdus::Response(r) = data else {
                panic!("not a response")
            };
            let names: Vec<Vec<u32>> =
                r.0.variable_bindings
                    .iter()
                    .map(|v| v.name.to_vec())
                    .collect();
            assert_eq!(names[0], with(&SNMP_ENGINE_ARC, &[1, 0]));
            assert_eq!(names[2], with(&SNMP_ENGINE_ARC, &[3, 0]));
            assert_eq!(
                r.0.variable_bindings[2].value,
                VarBindValue::Value(int(500))
            );
            assert_eq!(
                names[4..10],
                (1..=6)
                    .map(|n| with(&USM_STATS_ARC, &[n, 0]))
                    .collect::<Vec<_>>()[..]
            );
            // A SET is refused as in v2c.
            let set = request3(
                nms,
                AUTH_PRIV,
                500,
                Pdus::SetRequest(SetRequest(pdu(&[&with(&SYSTEM, &[5, 0])]))),
            );
            let (_, _, data) = open3(
                &a.handle_at(&set, LO, &snapshot(), AT).expect("answered"),
                nms,
            );
            let Pdus::Response(r) = data else {
                panic!("not a response")
            };
            assert_eq!(r.0.error_status, ERR_NOT_WRITABLE);
        }

        #[test]
        fn discovery_reports_the_engine_id_boots_and_time() {
            let (nms, _, _) = users();
            let mut a = agent3();
            // net-snmp's probe: no engine ID, no user, noAuthNoPriv, reportable.
            let e = Engine {
                id: Vec::new(),
                boots: 0,
            };
            let probe = encode_plain(
                &e,
                0,
                b"",
                5,
                65_507,
                FLAG_REPORTABLE,
                Pdus::GetRequest(GetRequest(pdu(&[]))),
            )
            .expect("encode");
            let bytes = a.handle_at(&probe, LO, &snapshot(), AT).expect("report");
            let (flags, p, data) = open3(&bytes, nms);
            assert_eq!(flags, 0, "a discovery report is noAuthNoPriv");
            assert_eq!(p.authoritative_engine_id.as_ref(), ID);
            assert_eq!(p.authoritative_engine_boots, Integer::from(4));
            assert_eq!(p.authoritative_engine_time, Integer::from(500));
            let (name, value) = report_of(&data);
            assert_eq!(name, with(&USM_STATS_ARC, &[4, 0]));
            assert_eq!(value, VarBindValue::Value(counter32(1)));
            assert_eq!(a.usm_stats().unknown_engine_ids, 1);
            // Not reportable: counted, no answer.
            let quiet = encode_plain(
                &e,
                0,
                b"",
                5,
                65_507,
                0,
                Pdus::GetRequest(GetRequest(pdu(&[]))),
            )
            .expect("encode");
            assert!(a.handle_at(&quiet, LO, &snapshot(), AT).is_none());
            assert_eq!(a.usm_stats().unknown_engine_ids, 2);
        }

        /// Each refusal: its report's counter, its flags, and the counter in `usmStats`.
        #[test]
        fn each_refusal_is_reported_and_counted() {
            let (nms, lan, rogue) = users();
            let ten: IpAddr = "10.1.2.3".parse().expect("ip");
            let stranger =
                UsmUser::new("who", b"authpass1", b"privpass1", ID, Vec::new()).expect("user");
            let mut bad_salt = request3(nms, AUTH_PRIV, 500, get_sys_name());
            // Same message, decrypted with another key: garbage, not a scoped PDU.
            let other_priv =
                UsmUser::new("nms", b"authpass1", b"otherpriv", ID, Vec::new()).expect("user");
            let undecryptable = request3(&other_priv, AUTH_PRIV, 500, get_sys_name());
            // One octet of the ciphertext flipped: the digest is wrong.
            let last = bad_salt.len() - 1;
            bad_salt[last] ^= 1;
            let cases: Vec<(&str, Vec<u8>, IpAddr, UsmError, u8)> = vec![
                (
                    "unknown user",
                    request3(&stranger, AUTH_PRIV, 500, get_sys_name()),
                    LO,
                    UsmError::UnknownUserName,
                    0,
                ),
                (
                    "not from this source",
                    request3(lan, AUTH_PRIV, 500, get_sys_name()),
                    LO,
                    UsmError::UnknownUserName,
                    0,
                ),
                (
                    "noAuthNoPriv",
                    request3(nms, FLAG_REPORTABLE, 500, get_sys_name()),
                    LO,
                    UsmError::UnsupportedSecLevel,
                    0,
                ),
                (
                    "authNoPriv",
                    request3(nms, FLAG_AUTH | FLAG_REPORTABLE, 500, get_sys_name()),
                    LO,
                    UsmError::UnsupportedSecLevel,
                    0,
                ),
                (
                    "wrong password",
                    request3(rogue, AUTH_PRIV, 500, get_sys_name()),
                    LO,
                    UsmError::WrongDigest,
                    0,
                ),
                ("tampered", bad_salt, LO, UsmError::WrongDigest, 0),
                (
                    "late",
                    request3(nms, AUTH_PRIV, 349, get_sys_name()),
                    LO,
                    UsmError::NotInTimeWindow,
                    FLAG_AUTH,
                ),
                (
                    "early",
                    request3(nms, AUTH_PRIV, 651, get_sys_name()),
                    LO,
                    UsmError::NotInTimeWindow,
                    FLAG_AUTH,
                ),
                (
                    "undecryptable",
                    undecryptable,
                    LO,
                    UsmError::DecryptionError,
                    0,
                ),
            ];
            let mut a = agent3();
            let mut expected = UsmStats::default();
            for (what, req, from, error, flags) in cases {
                let bytes = a
                    .handle_at(&req, from, &snapshot(), AT)
                    .unwrap_or_else(|| panic!("{what}: no report"));
                let (got_flags, p, data) = open3(&bytes, nms);
                assert_eq!(got_flags, flags, "{what}");
                assert_eq!(p.authoritative_engine_time, Integer::from(500), "{what}");
                let (name, value) = report_of(&data);
                let n = expected.count(error);
                assert_eq!(name, with(&USM_STATS_ARC, &[error.column(), 0]), "{what}");
                assert_eq!(value, VarBindValue::Value(counter32(n)), "{what}");
            }
            assert_eq!(a.usm_stats(), expected);
            assert_eq!(expected.columns(), [2, 2, 2, 0, 2, 1]);
            // lan from its network is served; the counters answer GET.
            let usm = with(&USM_STATS_ARC, &[5, 0]);
            let req = request3(
                lan,
                AUTH_PRIV,
                500,
                Pdus::GetRequest(GetRequest(pdu(&[&usm]))),
            );
            let (_, _, data) = open3(
                &a.handle_at(&req, ten, &snapshot(), AT).expect("answered"),
                lan,
            );
            let Pdus::Response(r) = data else {
                panic!("not a response")
            };
            assert_eq!(
                r.0.variable_bindings[0].value,
                VarBindValue::Value(counter32(2))
            );
        }

        #[test]
        fn the_time_window_follows_the_engine_clock() {
            let (nms, _, _) = users();
            let mut a = agent3();
            let req = request3(nms, AUTH_PRIV, 500, get_sys_name());
            for (secs, answered) in [
                (500, true),
                (650, true),
                (651, false),
                (350, true),
                (349, false),
            ] {
                let bytes = a
                    .handle_at(&req, LO, &snapshot(), Duration::from_secs(secs))
                    .expect("answer or report");
                let (_, _, data) = open3(&bytes, nms);
                assert_eq!(matches!(data, Pdus::Response(_)), answered, "at {secs} s");
            }
        }

        #[test]
        fn v3_without_users_is_a_bad_version() {
            let (nms, _, _) = users();
            let mut a = agent();
            assert!(a
                .handle_at(
                    &request3(nms, AUTH_PRIV, 500, get_sys_name()),
                    LO,
                    &snapshot(),
                    AT
                )
                .is_none());
            assert_eq!(a.stats().bad_versions, 1);
            // And v2c still works beside v3.
            let mut b = agent3();
            b.config.communities = agent().config.communities;
            assert!(b
                .handle(&request("public", get_sys_name()), LO, &snapshot())
                .is_some());
        }
    }

    #[test]
    fn accounting_figures_and_the_spool_alarm_row() {
        let mut s = snapshot();
        s.accounting = AccountingStatus {
            records_generated: 5_000_000_000,
            records_delivered: 4_000,
            records_refused: 3_200,
            spool_records: 3_180,
            spool_bytes: 1_048_000,
            spool_max_bytes: 8 << 30,
            spool_full: true,
            servers_up: 0,
            servers: 2,
        };
        s.alarms.push(AlarmEntry {
            id: 131_078,
            kind: AlarmKind::AccountingSpool,
            severity: Severity::Critical,
            value: 100,
            task: "accounting".into(),
            raised_at: SystemTime::UNIX_EPOCH + Duration::from_secs(3_000),
        });
        let rows = view(&s, &AgentStats::default(), None);
        let objects = objects();
        let at = |n: u32| get(&rows, &objects, &with(&STATUS_ARC, &[n, 0]));
        assert_eq!(at(17), VarBindValue::Value(counter64(5_000_000_000)));
        assert_eq!(at(18), VarBindValue::Value(counter64(4_000)));
        assert_eq!(at(19), VarBindValue::Value(counter64(3_200)));
        assert_eq!(at(20), VarBindValue::Value(gauge(3_180)));
        assert_eq!(at(21), VarBindValue::Value(gauge(1_024)));
        assert_eq!(at(22), VarBindValue::Value(gauge(8 << 20)));
        assert_eq!(at(23), VarBindValue::Value(int(1)));
        assert_eq!(at(24), VarBindValue::Value(gauge(0)));
        assert_eq!(at(25), VarBindValue::Value(gauge(2)));
        // An instance other than .0 of a scalar: noSuchInstance, as for the others.
        assert_eq!(
            get(&rows, &objects, &with(&STATUS_ARC, &[21, 1])),
            VarBindValue::NoSuchInstance
        );
        // The alarm's row: accountingSpoolFull(6), critical(4), task accounting.
        let col = |c: u32| get(&rows, &objects, &with(&STATUS_ARC, &[12, 1, c, 131_078]));
        assert_eq!(col(2), VarBindValue::Value(int(6)));
        assert_eq!(col(3), VarBindValue::Value(int(4)));
        assert_eq!(col(5), VarBindValue::Value(text("accounting")));
        // Disabled accounting: zeros and not full.
        s.accounting = AccountingStatus::default();
        let rows = view(&s, &AgentStats::default(), None);
        let at = |n: u32| get(&rows, &objects, &with(&STATUS_ARC, &[n, 0]));
        assert_eq!(at(23), VarBindValue::Value(int(2)));
        assert_eq!(at(25), VarBindValue::Value(gauge(0)));
    }

    #[test]
    fn standalone_and_unsampled_values() {
        let mut s = snapshot();
        s.redundancy = None;
        s.memory_percent = None;
        let rows = view(&s, &AgentStats::default(), None);
        let objects = objects();
        let at = |n: u32| get(&rows, &objects, &with(&STATUS_ARC, &[n, 0]));
        assert_eq!(at(2), VarBindValue::Value(int(STANDALONE_ROLE)));
        assert_eq!(at(3), VarBindValue::Value(int(STANDALONE_STATE)));
        assert_eq!(at(7), VarBindValue::Value(int(-1)));
    }
}
