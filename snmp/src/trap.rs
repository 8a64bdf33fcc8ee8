//! SNMP traps: SNMPv2-Trap-PDUs of `SBC-PAIR-MIB` (encoding, decoding), the configured
//! `trap-receiver`s and their filter levels, and the [`TrapEncoder`] that encodes a trap for
//! one receiver: SNMPv2c with the receiver's community or, for a receiver with a
//! [`TrapSecurity`], SNMPv3 authPriv from our engine ([`encode_trap_v3`]: the same PDU). Sans
//! IO: the `sbc` shell's trap sink queues the traps and sends the datagrams.
//!
//! # The MIB
//!
//! `snmp/mib/SBC-PAIR-MIB.txt`, modelled on Oracle's APSYSMGMT-MIB. There is no IANA
//! Private Enterprise Number for this project, so the module lives under the **experimental**
//! arc `1.3.6.1.3.3261` ([`ENTERPRISE_ARC`]), to be replaced by an enterprise subtree when a
//! PEN is obtained (the names stay).
//!
//! | OID                         | name                    | carries |
//! |-----------------------------|-------------------------|---------|
//! | `1.3.6.1.3.3261.0.1`        | `sbcAlarmTrap`          | type, value, severity, threshold, alarm id, task, node |
//! | `1.3.6.1.3.3261.0.2`        | `sbcAlarmClearTrap`     | the same + cleared by (operator, restart, auto) |
//! | `1.3.6.1.3.3261.0.3`        | `sbcRedundancyTrap`     | role, state, reason, peer, node |
//! | `1.3.6.1.3.3261.0.4`        | `sbcHealthTrap`         | score, previous score, reason, node |
//! | `1.3.6.1.3.3261.0.5`        | `sbcSourceDeniedTrap`   | source, seconds denied (0: let in again), node |
//! | `1.3.6.1.3.3261.0.6`        | `sbcMediaPortsLowTrap`  | realm, port pairs free, pairs in all, node |
//! | `1.3.6.1.3.3261.0.7`        | `sbcTlsCertExpiringTrap` | tls-profile, days left, expiry date, node |
//! | `1.3.6.1.3.3261.0.8`        | `sbcSessionAgentStatusTrap` | session-agent, in service (1) or out (2), reason, node |
//! | `1.3.6.1.3.3261.0.9`        | `sbcRegCacheFullTrap`   | bindings, reg-cache-limit, node |
//! | `1.3.6.1.3.3261.0.10`       | `sbcAccountingSpoolTrap` | full (1) or has room (2), spool KiB, its bound, records refused, node |
//! | `1.3.6.1.3.3261.1.1.1..32`  | `sbcAlarmType` … `sbcAccountingRecordsRefused` | the objects, sent as instance `.0` |
//!
//! Every trap's varbinds are `sysUpTime.0`, `snmpTrapOID.0`, then the notification's objects
//! in the MIB's order.
//!
//! # Filtering
//!
//! A receiver's [`FilterLevel`] lets through alarm and clear traps of at least its severity
//! (`all` and `minor` pass every one); redundancy and health traps pass every level except
//! `none`, which passes nothing.

use std::borrow::Cow;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rasn::types::{Integer, ObjectIdentifier, OctetString};
use rasn_smi::v1::{Gauge, TimeTicks};
use rasn_smi::v2::{ApplicationSyntax, Counter64, ObjectSyntax, SimpleSyntax};
use rasn_snmp::v2::{Pdu, Pdus, Trap as TrapPdu, VarBind, VarBindValue};
use rasn_snmp::v2c::Message;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use sbc_alarms::{AlarmEvent, AlarmKind, AlarmRow, ClearedBy, Severity};

use crate::mib::{
    kibibytes, EnumNames, RedundancyRole, TransitionState, ENTERPRISE_ARC, MAX_REQUEST,
};
use crate::usm::{Engine, UsmUser};

const SYS_UPTIME_0: [u32; 9] = [1, 3, 6, 1, 2, 1, 1, 3, 0];
const SNMP_TRAP_OID_0: [u32; 11] = [1, 3, 6, 1, 6, 3, 1, 1, 4, 1, 0];
const MODULE: &str = "SBC-PAIR-MIB";

/// What a trap reports about an alarm (the objects of `sbcAlarmTrap`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlarmInfo {
    /// What the alarm measures (`sbcAlarmType`).
    pub kind: AlarmKind,
    /// The reading, whole percent (`sbcAlarmValue`).
    pub value: u32,
    /// The severity (`sbcAlarmSeverity`).
    pub severity: Severity,
    /// The threshold crossed, percent (`sbcAlarmThreshold`).
    pub threshold: u8,
    /// The alarm id (`sbcAlarmId`).
    pub alarm_id: u32,
    /// The owning task (`sbcAlarmTask`).
    pub task: String,
    /// The sending node's hostname (`sbcNodeName`).
    pub node: String,
}

impl AlarmInfo {
    /// The trap view of an alarm row sent by `node`.
    #[must_use]
    pub fn from_row(row: &AlarmRow, node: &str) -> Self {
        // Rounded to whole percent, as the MIB's Integer32 carries it.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let value = row.value.round().clamp(0.0, f64::from(u32::MAX)) as u32;
        Self {
            kind: row.kind,
            value,
            severity: row.severity,
            threshold: row.threshold,
            alarm_id: row.id,
            task: row.task.clone(),
            node: node.to_owned(),
        }
    }
}

/// A trap to send: one of the notifications of `SBC-PAIR-MIB`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "trap")]
pub enum Trap {
    /// `sbcAlarmTrap`: an alarm raised, changed, or still critical.
    Alarm(AlarmInfo),
    /// `sbcAlarmClearTrap`: an alarm cleared.
    AlarmClear {
        /// The alarm as it was when cleared.
        alarm: AlarmInfo,
        /// Who cleared it.
        cleared_by: ClearedBy,
    },
    /// `sbcRedundancyTrap`: a redundancy transition (sent by the HA crate).
    Redundancy {
        /// The role taken.
        role: RedundancyRole,
        /// The state entered.
        state: TransitionState,
        /// Why, in words.
        reason: String,
        /// The peer's name, empty when none.
        peer: String,
        /// The sending node's hostname.
        node: String,
    },
    /// `sbcHealthTrap`: the health score changed.
    Health {
        /// The score now.
        score: u8,
        /// The score before.
        previous: u8,
        /// Why, in words.
        reason: String,
        /// The sending node's hostname.
        node: String,
    },
    /// `sbcSourceDeniedTrap`: a source denied at the SIP edge (or, with 0 seconds, let in
    /// again).
    SourceDenied {
        /// The source address.
        source: String,
        /// For how long, in seconds; 0 when the deny ended.
        seconds: u32,
        /// The sending node's hostname.
        node: String,
    },
    /// `sbcMediaPortsLowTrap`: a realm's steering pool fell below a tenth of its port pairs.
    MediaPortsLow {
        /// The pool's realm.
        realm: String,
        /// Pairs free.
        free: u32,
        /// Pairs in the pool.
        total: u32,
        /// The sending node's hostname.
        node: String,
    },
    /// `sbcTlsCertExpiringTrap`: a loaded TLS certificate expires within its profile's
    /// `expiry-warning-days` (or has expired).
    TlsCertExpiring {
        /// The `tls-profile`.
        profile: String,
        /// Whole days left (negative once expired).
        days_left: i32,
        /// Its notAfter, `YYYY-MM-DD`.
        expires: String,
        /// The sending node's hostname.
        node: String,
    },
    /// `sbcSessionAgentStatusTrap` (Oracle's `apSysMgmtSAStatusChangeTrap`): a session-agent
    /// went in or out of service.
    SessionAgentStatus {
        /// The `session-agent`'s name.
        agent: String,
        /// In service now (else out of service).
        in_service: bool,
        /// Why (a ping timeout, a ping's or a request's answer code, transaction timeouts, a
        /// transport failure; or what brought it back).
        reason: String,
        /// The sending node's hostname.
        node: String,
    },
    /// `sbcRegCacheFullTrap`: the registration cache holds `reg-cache-limit` bindings and
    /// refused a REGISTER that would add one.
    RegCacheFull {
        /// Bindings held.
        bindings: u32,
        /// `reg-cache-limit`.
        limit: u32,
        /// The sending node's hostname.
        node: String,
    },
    /// `sbcAccountingSpoolTrap`: the accounting spool filled (new records are refused) or
    /// has room again.
    AccountingSpool {
        /// Full now (else it has room again).
        full: bool,
        /// Bytes the spool holds.
        spool_bytes: u64,
        /// The spool's bound (`account-config spool-max-size`), bytes.
        spool_max_bytes: u64,
        /// Records refused since the node started.
        records_refused: u64,
        /// The sending node's hostname.
        node: String,
    },
}

impl Trap {
    /// The trap an evaluator event calls for, if any (`CriticalMemoryAbort` has none of its
    /// own: its consequence, the health drop, has).
    #[must_use]
    pub fn from_event(event: &AlarmEvent, node: &str) -> Option<Self> {
        match event {
            AlarmEvent::Raised(row)
            | AlarmEvent::SeverityChanged { row, .. }
            | AlarmEvent::StillCritical(row) => Some(Self::Alarm(AlarmInfo::from_row(row, node))),
            AlarmEvent::Cleared { row, by } => Some(Self::AlarmClear {
                alarm: AlarmInfo::from_row(row, node),
                cleared_by: *by,
            }),
            AlarmEvent::HealthChanged {
                score,
                previous,
                reason,
            } => Some(Self::Health {
                score: *score,
                previous: *previous,
                reason: reason.clone(),
                node: node.to_owned(),
            }),
            AlarmEvent::CriticalMemoryAbort { .. } => None,
        }
    }

    /// The notification's name in the MIB, e.g. `sbcAlarmTrap`.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        NOTIFICATIONS[self.number() as usize - 1]
    }

    const fn number(&self) -> u32 {
        match self {
            Self::Alarm(_) => 1,
            Self::AlarmClear { .. } => 2,
            Self::Redundancy { .. } => 3,
            Self::Health { .. } => 4,
            Self::SourceDenied { .. } => 5,
            Self::MediaPortsLow { .. } => 6,
            Self::TlsCertExpiring { .. } => 7,
            Self::SessionAgentStatus { .. } => 8,
            Self::RegCacheFull { .. } => 9,
            Self::AccountingSpool { .. } => 10,
        }
    }

    /// The notification's OID, e.g. `1.3.6.1.3.3261.0.1`.
    #[must_use]
    pub fn oid(&self) -> Vec<u32> {
        let mut oid = ENTERPRISE_ARC.to_vec();
        oid.extend([0, self.number()]);
        oid
    }

    /// The alarm severity, for alarm and clear traps.
    #[must_use]
    pub const fn severity(&self) -> Option<Severity> {
        match self {
            Self::Alarm(a) | Self::AlarmClear { alarm: a, .. } => Some(a.severity),
            _ => None,
        }
    }

    fn objects(&self) -> Vec<(u32, Value)> {
        let alarm = |a: &AlarmInfo| {
            vec![
                (1, Value::Int(i64::from(a.kind.code()))),
                (2, Value::Int(i64::from(a.value))),
                (3, Value::Int(i64::from(a.severity.code()))),
                (4, Value::Int(i64::from(a.threshold))),
                (5, Value::Unsigned(a.alarm_id)),
                (6, Value::Str(a.task.clone())),
                (7, Value::Str(a.node.clone())),
            ]
        };
        match self {
            Self::Alarm(a) => alarm(a),
            Self::AlarmClear {
                alarm: a,
                cleared_by,
            } => {
                let mut v = alarm(a);
                v.push((8, Value::Int(i64::from(cleared_by.code()))));
                v
            }
            Self::Redundancy {
                role,
                state,
                reason,
                peer,
                node,
            } => vec![
                (9, Value::Int(role.code())),
                (10, Value::Int(state.code())),
                (11, Value::Str(reason.clone())),
                (12, Value::Str(peer.clone())),
                (7, Value::Str(node.clone())),
            ],
            Self::Health {
                score,
                previous,
                reason,
                node,
            } => vec![
                (13, Value::Int(i64::from(*score))),
                (14, Value::Int(i64::from(*previous))),
                (15, Value::Str(reason.clone())),
                (7, Value::Str(node.clone())),
            ],
            Self::SourceDenied {
                source,
                seconds,
                node,
            } => vec![
                (16, Value::Str(source.clone())),
                (17, Value::Int(i64::from(*seconds))),
                (7, Value::Str(node.clone())),
            ],
            Self::MediaPortsLow {
                realm,
                free,
                total,
                node,
            } => vec![
                (18, Value::Str(realm.clone())),
                (19, Value::Int(i64::from(*free))),
                (20, Value::Int(i64::from(*total))),
                (7, Value::Str(node.clone())),
            ],
            Self::TlsCertExpiring {
                profile,
                days_left,
                expires,
                node,
            } => vec![
                (21, Value::Str(profile.clone())),
                (22, Value::Int(i64::from(*days_left))),
                (23, Value::Str(expires.clone())),
                (7, Value::Str(node.clone())),
            ],
            Self::SessionAgentStatus {
                agent,
                in_service,
                reason,
                node,
            } => vec![
                (24, Value::Str(agent.clone())),
                (25, Value::Int(if *in_service { 1 } else { 2 })),
                (26, Value::Str(reason.clone())),
                (7, Value::Str(node.clone())),
            ],
            Self::RegCacheFull {
                bindings,
                limit,
                node,
            } => vec![
                (27, Value::Unsigned(*bindings)),
                (28, Value::Unsigned(*limit)),
                (7, Value::Str(node.clone())),
            ],
            Self::AccountingSpool {
                full,
                spool_bytes,
                spool_max_bytes,
                records_refused,
                node,
            } => vec![
                (29, Value::Int(if *full { 1 } else { 2 })),
                (30, Value::Unsigned(kibibytes(*spool_bytes))),
                (31, Value::Unsigned(kibibytes(*spool_max_bytes))),
                (32, Value::Counter64(*records_refused)),
                (7, Value::Str(node.clone())),
            ],
        }
    }
}

const NOTIFICATIONS: [&str; 10] = [
    "sbcAlarmTrap",
    "sbcAlarmClearTrap",
    "sbcRedundancyTrap",
    "sbcHealthTrap",
    "sbcSourceDeniedTrap",
    "sbcMediaPortsLowTrap",
    "sbcTlsCertExpiringTrap",
    "sbcSessionAgentStatusTrap",
    "sbcRegCacheFullTrap",
    "sbcAccountingSpoolTrap",
];

enum Value {
    Int(i64),
    Unsigned(u32),
    Counter64(u64),
    Str(String),
}

const SEVERITY_NAMES: EnumNames = &[(2, "minor"), (3, "major"), (4, "critical")];
const TYPE_NAMES: EnumNames = &[
    (1, "memoryUtilization"),
    (2, "heapUtilization"),
    (3, "cpuUtilization"),
    (4, "sessionUtilization"),
    (5, "spaceUtilization"),
    (6, "accountingSpoolFull"),
];
const CLEARED_NAMES: EnumNames = &[(1, "operator"), (2, "restart"), (3, "auto")];
const AGENT_STATE_NAMES: EnumNames = &[(1, "inService"), (2, "outOfService")];
const SPOOL_STATE_NAMES: EnumNames = &[(1, "full"), (2, "hasRoom")];

/// The objects of `sbcTrapObjects` (`1.3.6.1.3.3261.1.1.n`): name and enumeration, if any.
const OBJECTS: [(&str, Option<EnumNames>); 32] = [
    ("sbcAlarmType", Some(TYPE_NAMES)),
    ("sbcAlarmValue", None),
    ("sbcAlarmSeverity", Some(SEVERITY_NAMES)),
    ("sbcAlarmThreshold", None),
    ("sbcAlarmId", None),
    ("sbcAlarmTask", None),
    ("sbcNodeName", None),
    ("sbcAlarmClearedBy", Some(CLEARED_NAMES)),
    ("sbcRedundancyRole", Some(RedundancyRole::NAMES)),
    ("sbcRedundancyState", Some(TransitionState::NAMES)),
    ("sbcRedundancyReason", None),
    ("sbcRedundancyPeer", None),
    ("sbcHealthScore", None),
    ("sbcHealthPreviousScore", None),
    ("sbcHealthReason", None),
    ("sbcDeniedSource", None),
    ("sbcDeniedSeconds", None),
    ("sbcMediaRealm", None),
    ("sbcMediaPairsFree", None),
    ("sbcMediaPairsTotal", None),
    ("sbcTlsProfile", None),
    ("sbcTlsCertDaysLeft", None),
    ("sbcTlsCertNotAfter", None),
    ("sbcSessionAgentName", None),
    ("sbcSessionAgentState", Some(AGENT_STATE_NAMES)),
    ("sbcSessionAgentReason", None),
    ("sbcRegCacheBindings", None),
    ("sbcRegCacheLimit", None),
    ("sbcAccountingSpoolState", Some(SPOOL_STATE_NAMES)),
    ("sbcAccountingSpoolKiB", None),
    ("sbcAccountingSpoolMaxKiB", None),
    ("sbcAccountingRecordsRefused", None),
];

fn object_oid(n: u32) -> ObjectIdentifier {
    let mut oid = ENTERPRISE_ARC.to_vec();
    oid.extend([1, 1, n, 0]);
    ObjectIdentifier::new_unchecked(Cow::Owned(oid))
}

/// A trap that could not be encoded or decoded.
#[derive(Debug, Error)]
pub enum TrapError {
    /// BER encoding failed.
    #[error("encoding the trap: {0}")]
    Encode(String),
    /// The bytes are not an SNMPv2c message.
    #[error("not an SNMPv2c message: {0}")]
    Decode(String),
    /// An SNMPv2c message, but not a Trap-PDU.
    #[error("not a Trap-PDU (got {0})")]
    NotATrap(&'static str),
    /// A Trap-PDU without `snmpTrapOID.0` as its second varbind.
    #[error("Trap-PDU without snmpTrapOID.0")]
    NoTrapOid,
}

fn ticks(uptime: Duration) -> u32 {
    // TimeTicks are hundredths of a second, modulo 2^32 (RFC 2578).
    (uptime.as_millis() / 10 % (1u128 << 32)) as u32
}

/// Encodes `trap` as an SNMPv2c message (BER) for `community`, with `uptime` as
/// `sysUpTime.0` and `request_id` as the PDU's request id.
///
/// # Errors
/// The BER encoder's.
pub fn encode_trap(
    trap: &Trap,
    community: &str,
    uptime: Duration,
    request_id: i32,
) -> Result<Vec<u8>, TrapError> {
    let message = Message {
        version: Integer::from(1),
        community: OctetString::from(community.as_bytes().to_vec()),
        data: trap_pdu(trap, uptime, request_id),
    };
    rasn::ber::encode(&message).map_err(|e| TrapError::Encode(e.to_string()))
}

/// The security of a v3 trap receiver: our engine (we are authoritative for the traps we
/// originate) and the user whose localized keys secure them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrapSecurity {
    /// This engine (ID and boots).
    pub engine: Engine,
    /// The user, keys localized to `engine`.
    pub user: UsmUser,
}

/// Encodes `trap` as an SNMPv3 authPriv message (the same SNMPv2-Trap-PDU as
/// [`encode_trap`]): `msgID` and request id `request_id`, our engine ID and boots, engine time
/// from `engine_elapsed`, encrypted under `salt` with the user's keys.
///
/// # Errors
/// The BER encoder's.
pub fn encode_trap_v3(
    trap: &Trap,
    security: &TrapSecurity,
    uptime: Duration,
    engine_elapsed: Duration,
    request_id: i32,
    salt: u64,
) -> Result<Vec<u8>, TrapError> {
    crate::usm::encode_auth_priv(
        &security.engine,
        Engine::time(engine_elapsed),
        &security.user,
        request_id,
        i32::try_from(MAX_REQUEST).unwrap_or(i32::MAX),
        salt,
        trap_pdu(trap, uptime, request_id),
        false,
    )
    .map_err(TrapError::Encode)
}

fn trap_pdu(trap: &Trap, uptime: Duration, request_id: i32) -> Pdus {
    let mut varbinds = vec![
        VarBind {
            name: ObjectIdentifier::new_unchecked(Cow::Borrowed(&SYS_UPTIME_0)),
            value: VarBindValue::Value(ObjectSyntax::ApplicationWide(ApplicationSyntax::Ticks(
                TimeTicks(ticks(uptime)),
            ))),
        },
        VarBind {
            name: ObjectIdentifier::new_unchecked(Cow::Borrowed(&SNMP_TRAP_OID_0)),
            value: VarBindValue::Value(ObjectSyntax::Simple(SimpleSyntax::ObjectId(
                ObjectIdentifier::new_unchecked(Cow::Owned(trap.oid())),
            ))),
        },
    ];
    for (n, value) in trap.objects() {
        let syntax = match value {
            Value::Int(i) => ObjectSyntax::Simple(SimpleSyntax::Integer(Integer::from(i))),
            Value::Unsigned(u) => {
                ObjectSyntax::ApplicationWide(ApplicationSyntax::Unsigned(Gauge(u)))
            }
            Value::Counter64(u) => {
                ObjectSyntax::ApplicationWide(ApplicationSyntax::BigCounter(Counter64(u)))
            }
            Value::Str(s) => {
                ObjectSyntax::Simple(SimpleSyntax::String(OctetString::from(s.into_bytes())))
            }
        };
        varbinds.push(VarBind {
            name: object_oid(n),
            value: VarBindValue::Value(syntax),
        });
    }
    Pdus::Trap(TrapPdu(Pdu {
        request_id,
        error_status: Pdu::ERROR_STATUS_NO_ERROR,
        error_index: 0,
        variable_bindings: varbinds,
    }))
}

/// One varbind of a decoded trap, in readable form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecodedVarBind {
    /// Dotted OID, e.g. `1.3.6.1.3.3261.1.1.1.0`.
    pub oid: String,
    /// Name as snmptrapd prints it, e.g. `SBC-PAIR-MIB::sbcAlarmType.0`, or the dotted OID
    /// when unknown.
    pub name: String,
    /// Value, e.g. `memoryUtilization(1)`, `85`, `sbc-a`.
    pub value: String,
}

/// A decoded SNMPv2c trap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecodedTrap {
    /// The community string.
    pub community: String,
    /// The PDU's request id.
    pub request_id: i32,
    /// `sysUpTime.0`, in hundredths of a second.
    pub uptime_ticks: u32,
    /// The notification, e.g. `SBC-PAIR-MIB::sbcAlarmTrap`, or its dotted OID when unknown.
    pub trap: String,
    /// The varbinds after `sysUpTime.0` and `snmpTrapOID.0`.
    pub varbinds: Vec<DecodedVarBind>,
}

impl DecodedTrap {
    /// The value of the varbind whose name, without module and instance, is `object`
    /// (e.g. `sbcAlarmSeverity`).
    #[must_use]
    pub fn get(&self, object: &str) -> Option<&str> {
        self.varbinds
            .iter()
            .find(|v| {
                let short = v.name.rsplit("::").next().unwrap_or(&v.name);
                short.strip_suffix(".0").unwrap_or(short) == object
            })
            .map(|v| v.value.as_str())
    }
}

impl fmt::Display for DecodedTrap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (community {})", self.trap, self.community)?;
        for v in &self.varbinds {
            write!(f, "\n  {} = {}", v.name, v.value)?;
        }
        Ok(())
    }
}

fn dotted(oid: &[u32]) -> String {
    oid.iter().map(u32::to_string).collect::<Vec<_>>().join(".")
}

fn name_of(oid: &[u32]) -> (String, Option<EnumNames>) {
    if let Some(rest) = oid.strip_prefix(&ENTERPRISE_ARC[..]) {
        match rest {
            [0, n] if (1..=NOTIFICATIONS.len() as u32).contains(n) => {
                return (
                    format!("{MODULE}::{}", NOTIFICATIONS[*n as usize - 1]),
                    None,
                );
            }
            [1, 1, n, tail @ ..] if (1..=OBJECTS.len() as u32).contains(n) => {
                let (name, names) = OBJECTS[*n as usize - 1];
                let instance: String = tail.iter().map(|t| format!(".{t}")).collect();
                return (format!("{MODULE}::{name}{instance}"), names);
            }
            _ => {}
        }
    }
    (dotted(oid), None)
}

fn value_text(value: &VarBindValue, names: Option<&[(i64, &str)]>) -> String {
    let syntax = match value {
        VarBindValue::Value(s) => s,
        VarBindValue::Unspecified => return "NULL".to_owned(),
        VarBindValue::NoSuchObject => return "noSuchObject".to_owned(),
        VarBindValue::NoSuchInstance => return "noSuchInstance".to_owned(),
        VarBindValue::EndOfMibView => return "endOfMibView".to_owned(),
    };
    match syntax {
        ObjectSyntax::Simple(SimpleSyntax::Integer(i)) => {
            let n = i64::try_from(i).ok();
            match (n, names) {
                (Some(n), Some(names)) => names
                    .iter()
                    .find(|(code, _)| *code == n)
                    .map_or_else(|| n.to_string(), |(_, name)| format!("{name}({n})")),
                _ => i.to_string(),
            }
        }
        ObjectSyntax::Simple(SimpleSyntax::String(s)) => String::from_utf8_lossy(s).into_owned(),
        ObjectSyntax::Simple(SimpleSyntax::ObjectId(o)) => name_of(o).0,
        ObjectSyntax::ApplicationWide(a) => match a {
            ApplicationSyntax::Address(ip) => {
                let b = &ip.0;
                format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
            }
            ApplicationSyntax::Counter(c) => c.0.to_string(),
            ApplicationSyntax::Ticks(t) => t.0.to_string(),
            ApplicationSyntax::Arbitrary(_) => "Opaque".to_owned(),
            ApplicationSyntax::BigCounter(c) => c.0.to_string(),
            ApplicationSyntax::Unsigned(u) => u.0.to_string(),
        },
    }
}

/// Decodes an SNMPv2c Trap-PDU (ours or anyone's) into names and readable values, using
/// `SBC-PAIR-MIB`'s names where they apply. Used by the lab's trap listener.
pub fn decode_trap(bytes: &[u8]) -> Result<DecodedTrap, TrapError> {
    let message: Message<Pdus> =
        rasn::ber::decode(bytes).map_err(|e| TrapError::Decode(e.to_string()))?;
    let pdu = match message.data {
        Pdus::Trap(TrapPdu(pdu)) => pdu,
        Pdus::GetRequest(_) => return Err(TrapError::NotATrap("GetRequest")),
        Pdus::GetNextRequest(_) => return Err(TrapError::NotATrap("GetNextRequest")),
        Pdus::Response(_) => return Err(TrapError::NotATrap("Response")),
        Pdus::SetRequest(_) => return Err(TrapError::NotATrap("SetRequest")),
        Pdus::GetBulkRequest(_) => return Err(TrapError::NotATrap("GetBulkRequest")),
        Pdus::InformRequest(_) => return Err(TrapError::NotATrap("InformRequest")),
        Pdus::Report(_) => return Err(TrapError::NotATrap("Report")),
    };
    let mut binds = pdu.variable_bindings.into_iter();
    let mut uptime_ticks = 0;
    let mut first = binds.next();
    if let Some(VarBind {
        name,
        value: VarBindValue::Value(ObjectSyntax::ApplicationWide(ApplicationSyntax::Ticks(t))),
    }) = &first
    {
        if **name == SYS_UPTIME_0 {
            uptime_ticks = t.0;
            first = binds.next();
        }
    }
    let trap = match first {
        Some(VarBind {
            name,
            value: VarBindValue::Value(ObjectSyntax::Simple(SimpleSyntax::ObjectId(oid))),
        }) if *name == SNMP_TRAP_OID_0 => name_of(&oid).0,
        _ => return Err(TrapError::NoTrapOid),
    };
    let varbinds = binds
        .map(|vb| {
            let (name, names) = name_of(&vb.name);
            DecodedVarBind {
                oid: dotted(&vb.name),
                name,
                value: value_text(&vb.value, names),
            }
        })
        .collect();
    Ok(DecodedTrap {
        community: String::from_utf8_lossy(&message.community).into_owned(),
        request_id: pdu.request_id,
        uptime_ticks,
        trap,
        varbinds,
    })
}

/// Which traps a receiver gets (`trap-receiver` `filter-level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FilterLevel {
    /// Nothing at all.
    None,
    /// Critical alarm and clear traps, plus redundancy and health traps.
    Critical,
    /// Major and critical alarm and clear traps, plus redundancy and health traps.
    Major,
    /// Every alarm and clear trap (minor is the lowest severity), plus the rest.
    Minor,
    /// Every trap. Default.
    #[default]
    All,
}

impl FilterLevel {
    /// True when a receiver with this level gets `trap`.
    #[must_use]
    pub fn passes(self, trap: &Trap) -> bool {
        let floor = match self {
            Self::None => return false,
            Self::All | Self::Minor => return true,
            Self::Major => Severity::Major,
            Self::Critical => Severity::Critical,
        };
        trap.severity().is_none_or(|s| s >= floor)
    }
}

/// A `trap-receiver`: where traps go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct TrapReceiver {
    /// Address and UDP port (162 is the standard trap port).
    pub address: SocketAddr,
    /// Community string. Default `public`.
    #[serde(default = "default_community")]
    pub community: String,
    /// Which traps it gets. Default `all`.
    #[serde(default)]
    pub filter_level: FilterLevel,
    /// SNMPv3 (authPriv) instead of v2c, with this engine and user (the community is then
    /// unused). Not serialized: the keys are derived from the configuration.
    #[serde(skip)]
    pub v3: Option<Arc<TrapSecurity>>,
}

fn default_community() -> String {
    "public".to_owned()
}

/// The sending side's encoding state: the request id of each datagram (a counter, one per
/// trap and receiver) and the AES salt of each v3 trap (a counter from a random seed, RFC 3826
/// §3.1.2.1). Sans IO: the shell's sink sends what it returns.
#[derive(Debug, Clone)]
pub struct TrapEncoder {
    request_id: i32,
    salt: u64,
}

impl TrapEncoder {
    /// An encoder whose first v3 salt follows `salt_seed`.
    #[must_use]
    pub const fn new(salt_seed: u64) -> Self {
        Self {
            request_id: 0,
            salt: salt_seed,
        }
    }

    /// Encodes `trap` for `receiver`: SNMPv2c with its community, or SNMPv3 authPriv when it
    /// has a [`TrapSecurity`]; `uptime` (time since the node started) is `sysUpTime.0` and the
    /// v3 engine time. Every call takes the next request id (and, for v3, the next salt),
    /// encoded or not.
    ///
    /// # Errors
    /// The BER encoder's.
    pub fn encode(
        &mut self,
        trap: &Trap,
        receiver: &TrapReceiver,
        uptime: Duration,
    ) -> Result<Vec<u8>, TrapError> {
        self.request_id = self.request_id.wrapping_add(1) & i32::MAX;
        match &receiver.v3 {
            None => encode_trap(trap, &receiver.community, uptime, self.request_id),
            Some(security) => {
                self.salt = self.salt.wrapping_add(1);
                encode_trap_v3(trap, security, uptime, uptime, self.request_id, self.salt)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alarm() -> AlarmInfo {
        AlarmInfo {
            kind: AlarmKind::Memory,
            value: 87,
            severity: Severity::Critical,
            threshold: 80,
            alarm_id: 131_073,
            task: "sbcd".into(),
            node: "sbc-a".into(),
        }
    }

    #[test]
    fn alarm_trap_round_trip() {
        let trap = Trap::Alarm(alarm());
        let bytes = encode_trap(&trap, "public", Duration::from_millis(12_340), 7).expect("enc");
        let d = decode_trap(&bytes).expect("dec");
        assert_eq!(d.community, "public");
        assert_eq!(d.request_id, 7);
        assert_eq!(d.uptime_ticks, 1234);
        assert_eq!(d.trap, "SBC-PAIR-MIB::sbcAlarmTrap");
        assert_eq!(d.varbinds[0].oid, "1.3.6.1.3.3261.1.1.1.0");
        assert_eq!(d.varbinds[0].name, "SBC-PAIR-MIB::sbcAlarmType.0");
        assert_eq!(d.get("sbcAlarmType"), Some("memoryUtilization(1)"));
        assert_eq!(d.get("sbcAlarmValue"), Some("87"));
        assert_eq!(d.get("sbcAlarmSeverity"), Some("critical(4)"));
        assert_eq!(d.get("sbcAlarmThreshold"), Some("80"));
        assert_eq!(d.get("sbcAlarmId"), Some("131073"));
        assert_eq!(d.get("sbcAlarmTask"), Some("sbcd"));
        assert_eq!(d.get("sbcNodeName"), Some("sbc-a"));
        assert_eq!(d.varbinds.len(), 7);
    }

    #[test]
    fn other_traps_round_trip() {
        let clear = Trap::AlarmClear {
            alarm: alarm(),
            cleared_by: ClearedBy::Operator,
        };
        let d =
            decode_trap(&encode_trap(&clear, "c", Duration::ZERO, 1).expect("enc")).expect("dec");
        assert_eq!(d.trap, "SBC-PAIR-MIB::sbcAlarmClearTrap");
        assert_eq!(d.get("sbcAlarmClearedBy"), Some("operator(1)"));

        let ha = Trap::Redundancy {
            role: RedundancyRole::Active,
            state: TransitionState::BecomingActive,
            reason: "peer health 0 below 75".into(),
            peer: "sbc-a".into(),
            node: "sbc-b".into(),
        };
        let d = decode_trap(&encode_trap(&ha, "c", Duration::ZERO, 1).expect("enc")).expect("dec");
        assert_eq!(d.trap, "SBC-PAIR-MIB::sbcRedundancyTrap");
        assert_eq!(d.get("sbcRedundancyRole"), Some("active(1)"));
        assert_eq!(d.get("sbcRedundancyState"), Some("becomingActive(2)"));
        assert_eq!(d.get("sbcRedundancyPeer"), Some("sbc-a"));

        let health = Trap::Health {
            score: 0,
            previous: 100,
            reason: "critical memory".into(),
            node: "sbc-a".into(),
        };
        let d =
            decode_trap(&encode_trap(&health, "c", Duration::ZERO, 1).expect("enc")).expect("dec");
        assert_eq!(d.trap, "SBC-PAIR-MIB::sbcHealthTrap");
        let denied = Trap::SourceDenied {
            source: "127.0.0.3".into(),
            seconds: 120,
            node: "sbc-a".into(),
        };
        let dd =
            decode_trap(&encode_trap(&denied, "c", Duration::ZERO, 1).expect("enc")).expect("dec");
        assert_eq!(dd.trap, "SBC-PAIR-MIB::sbcSourceDeniedTrap");
        assert_eq!(dd.get("sbcDeniedSource"), Some("127.0.0.3"));
        assert_eq!(dd.get("sbcDeniedSeconds"), Some("120"));
        let low = Trap::MediaPortsLow {
            realm: "access".into(),
            free: 49,
            total: 500,
            node: "sbc-a".into(),
        };
        let dl =
            decode_trap(&encode_trap(&low, "c", Duration::ZERO, 1).expect("enc")).expect("dec");
        assert_eq!(dl.trap, "SBC-PAIR-MIB::sbcMediaPortsLowTrap");
        assert_eq!(dl.get("sbcMediaRealm"), Some("access"));
        assert_eq!(dl.get("sbcMediaPairsFree"), Some("49"));
        assert_eq!(dl.get("sbcMediaPairsTotal"), Some("500"));
        let cert = Trap::TlsCertExpiring {
            profile: "edge".into(),
            days_left: 4,
            expires: "2026-12-05".into(),
            node: "sbc-a".into(),
        };
        let dc =
            decode_trap(&encode_trap(&cert, "c", Duration::ZERO, 1).expect("enc")).expect("dec");
        assert_eq!(dc.trap, "SBC-PAIR-MIB::sbcTlsCertExpiringTrap");
        assert_eq!(dc.get("sbcTlsProfile"), Some("edge"));
        assert_eq!(dc.get("sbcTlsCertDaysLeft"), Some("4"));
        assert_eq!(dc.get("sbcTlsCertNotAfter"), Some("2026-12-05"));
        let agent = Trap::SessionAgentStatus {
            agent: "pbx-a".into(),
            in_service: false,
            reason: "PingTimeout".into(),
            node: "sbc-a".into(),
        };
        let da =
            decode_trap(&encode_trap(&agent, "c", Duration::ZERO, 1).expect("enc")).expect("dec");
        let full = Trap::RegCacheFull {
            bindings: 10_000,
            limit: 10_000,
            node: "sbc-a".into(),
        };
        let df =
            decode_trap(&encode_trap(&full, "c", Duration::ZERO, 1).expect("enc")).expect("dec");
        assert_eq!(df.trap, "SBC-PAIR-MIB::sbcRegCacheFullTrap");
        assert_eq!(df.get("sbcRegCacheBindings"), Some("10000"));
        assert_eq!(df.get("sbcRegCacheLimit"), Some("10000"));
        let spool = Trap::AccountingSpool {
            full: true,
            spool_bytes: 1_048_400,
            spool_max_bytes: 8 << 30,
            records_refused: 5_000_000_000,
            node: "sbc-a".into(),
        };
        let ds =
            decode_trap(&encode_trap(&spool, "c", Duration::ZERO, 1).expect("enc")).expect("dec");
        assert_eq!(ds.trap, "SBC-PAIR-MIB::sbcAccountingSpoolTrap");
        assert_eq!(spool.oid(), [1, 3, 6, 1, 3, 3261, 0, 10]);
        assert_eq!(ds.get("sbcAccountingSpoolState"), Some("full(1)"));
        assert_eq!(ds.get("sbcAccountingSpoolKiB"), Some("1024"));
        assert_eq!(ds.get("sbcAccountingSpoolMaxKiB"), Some("8388608"));
        assert_eq!(ds.get("sbcAccountingRecordsRefused"), Some("5000000000"));
        assert_eq!(ds.get("sbcNodeName"), Some("sbc-a"));
        assert_eq!(
            ds.varbinds
                .iter()
                .map(|v| v.oid.as_str())
                .collect::<Vec<_>>(),
            [
                "1.3.6.1.3.3261.1.1.29.0",
                "1.3.6.1.3.3261.1.1.30.0",
                "1.3.6.1.3.3261.1.1.31.0",
                "1.3.6.1.3.3261.1.1.32.0",
                "1.3.6.1.3.3261.1.1.7.0"
            ]
        );
        assert!(FilterLevel::Critical.passes(&spool));
        let room = Trap::AccountingSpool {
            full: false,
            spool_bytes: 0,
            spool_max_bytes: 1 << 20,
            records_refused: 3,
            node: "sbc-a".into(),
        };
        let dr =
            decode_trap(&encode_trap(&room, "c", Duration::ZERO, 1).expect("enc")).expect("dec");
        assert_eq!(dr.get("sbcAccountingSpoolState"), Some("hasRoom(2)"));
        assert_eq!(dr.get("sbcAccountingSpoolKiB"), Some("0"));
        assert_eq!(kibibytes(1), 1);
        assert_eq!(kibibytes(u64::MAX), u32::MAX);
        assert_eq!(da.trap, "SBC-PAIR-MIB::sbcSessionAgentStatusTrap");
        assert_eq!(da.get("sbcSessionAgentName"), Some("pbx-a"));
        assert_eq!(da.get("sbcSessionAgentState"), Some("outOfService(2)"));
        assert_eq!(da.get("sbcSessionAgentReason"), Some("PingTimeout"));
        assert_eq!(d.get("sbcHealthScore"), Some("0"));
        assert_eq!(d.get("sbcHealthPreviousScore"), Some("100"));
        assert!(d
            .to_string()
            .contains("SBC-PAIR-MIB::sbcHealthReason.0 = critical memory"));
    }

    #[test]
    fn garbage_is_refused() {
        assert!(matches!(
            decode_trap(b"\x30\x03\x02\x01"),
            Err(TrapError::Decode(_))
        ));
    }

    #[test]
    fn filter_levels() {
        let minor = Trap::Alarm(AlarmInfo {
            severity: Severity::Minor,
            ..alarm()
        });
        let major = Trap::AlarmClear {
            alarm: AlarmInfo {
                severity: Severity::Major,
                ..alarm()
            },
            cleared_by: ClearedBy::Auto,
        };
        let critical = Trap::Alarm(alarm());
        let health = Trap::Health {
            score: 50,
            previous: 100,
            reason: String::new(),
            node: String::new(),
        };
        let passes = |level: FilterLevel| {
            [&minor, &major, &critical, &health]
                .map(|t| level.passes(t))
                .to_vec()
        };
        assert_eq!(passes(FilterLevel::All), [true, true, true, true]);
        assert_eq!(passes(FilterLevel::Minor), [true, true, true, true]);
        assert_eq!(passes(FilterLevel::Major), [false, true, true, true]);
        assert_eq!(passes(FilterLevel::Critical), [false, false, true, true]);
        assert_eq!(passes(FilterLevel::None), [false, false, false, false]);
    }

    /// A v3 trap carries, encrypted, the same Trap-PDU as the v2c one; it authenticates with
    /// the user's key and decrypts with the salt it carries.
    #[test]
    fn v3_traps_carry_the_v2c_pdu_encrypted() {
        use crate::usm::{auth_params_range, decrypt, verify};
        use rasn_snmp::v3::{Message as V3, ScopedPdu, ScopedPduData, USMSecurityParameters};
        let engine = Engine {
            id: b"\x80\x00\x0c\xbd\x04sbc-a".to_vec(),
            boots: 2,
        };
        let user =
            UsmUser::new("nms", b"authpass1", b"privpass1", &engine.id, Vec::new()).expect("user");
        let security = TrapSecurity { engine, user };
        let trap = Trap::Alarm(alarm());
        let uptime = Duration::from_secs(7);
        let bytes = encode_trap_v3(&trap, &security, uptime, Duration::from_secs(65), 11, 5)
            .expect("encode");
        let m: V3 = rasn::ber::decode(&bytes).expect("v3");
        assert_eq!(
            m.global_data.flags.as_ref(),
            [0x03],
            "authPriv, not reportable"
        );
        let p: USMSecurityParameters = m
            .decode_security_parameters(rasn::Codec::Ber)
            .unwrap_or_else(|e| panic!("usm: {e}"));
        assert_eq!(p.authoritative_engine_time, Integer::from(65));
        assert_eq!(p.authoritative_engine_boots, Integer::from(2));
        let range = auth_params_range(&bytes).expect("auth");
        let mut zeroed = bytes.clone();
        zeroed[range].fill(0);
        assert!(verify(
            security.user.auth_key(),
            &zeroed,
            &p.authentication_parameters
        ));
        let ScopedPduData::EncryptedPdu(cipher) = m.scoped_data else {
            panic!("not encrypted")
        };
        let plain = decrypt(
            security.user.priv_key(),
            2,
            65,
            &p.privacy_parameters,
            &cipher,
        )
        .expect("salt");
        let scoped: ScopedPdu = rasn::ber::decode(&plain).expect("scoped");
        assert_eq!(scoped.data, trap_pdu(&trap, uptime, 11));
        assert_eq!(scoped.engine_id.as_ref(), security.engine.id.as_slice());
    }

    /// Request ids count up per datagram; the v3 salt only per v3 datagram.
    #[test]
    fn the_encoder_counts_request_ids_and_salts() {
        let engine = Engine {
            id: b"\x80\x00\x0c\xbd\x04sbc-a".to_vec(),
            boots: 1,
        };
        let user =
            UsmUser::new("nms", b"authpass1", b"privpass1", &engine.id, Vec::new()).expect("user");
        let v2c = TrapReceiver {
            address: "127.0.0.1:162".parse().expect("addr"),
            community: "secret".into(),
            filter_level: FilterLevel::All,
            v3: None,
        };
        let v3 = TrapReceiver {
            v3: Some(Arc::new(TrapSecurity { engine, user })),
            ..v2c.clone()
        };
        let trap = Trap::Alarm(alarm());
        let mut encoder = TrapEncoder::new(41);
        let first = encoder.encode(&trap, &v2c, Duration::ZERO).expect("v2c");
        assert_eq!(decode_trap(&first).expect("dec").request_id, 1);
        let _ = encoder.encode(&trap, &v3, Duration::ZERO).expect("v3");
        assert_eq!((encoder.request_id, encoder.salt), (2, 42));
        let third = encoder.encode(&trap, &v2c, Duration::ZERO).expect("v2c");
        let d = decode_trap(&third).expect("dec");
        assert_eq!((d.request_id, d.community.as_str()), (3, "secret"));
        assert_eq!(encoder.salt, 42);
    }
}
