//! `alarm-threshold` elements as Oracle has them: a type, a severity and a value in percent,
//! one to three per type; and the alarm ids derived from them.
//!
//! # Alarm ids
//!
//! An alarm is one row per measured thing (per type, and per volume for `space`), whatever
//! its severity: escalating from minor to critical changes the row's severity, not its id, so
//! `clear-alarm <id> <task>` keeps working while an alarm escalates. The ids live in the
//! 131072 (`0x20000`) range, where Oracle keeps its system alarms, with the type code in the
//! low byte; they are Oracle-like, not Oracle's own numbers:
//!
//! | type     | id                      |
//! |----------|-------------------------|
//! | memory   | 131073                  |
//! | heap     | 131074                  |
//! | cpu      | 131075                  |
//! | sessions | 131076                  |
//! | space    | 131077 + 256 × n        |
//! | accounting-spool | 131078          |
//!
//! where n is the index of the volume in the order the thresholds first name it (0 for the
//! first volume, or for `space` thresholds without a volume).
//!
//! `accounting-spool` is not measured against thresholds: it is a condition alarm (the
//! accounting spool is full) that the node raises and clears itself through
//! [`Evaluator::raise_condition`](crate::Evaluator::raise_condition); no `alarm-threshold`
//! may name it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// First id of the system-alarm range (`0x20000`); an alarm's id is this plus its type code.
pub const ALARM_ID_BASE: u32 = 131_072;

/// An alarm id, as `display-alarms` lists it and `clear-alarm` takes it.
pub type AlarmId = u32;

/// What an alarm measures: the `type` of an `alarm-threshold`, or a condition the node
/// watches itself ([`AlarmKind::AccountingSpool`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlarmKind {
    /// Memory utilisation, from the configured [`MemorySource`](crate::MemorySource).
    Memory,
    /// Heap utilisation: the allocator's allocated bytes against the heap limit.
    Heap,
    /// CPU utilisation.
    Cpu,
    /// Session (call) utilisation against the licensed or configured capacity.
    Sessions,
    /// Disk space utilisation of a volume.
    Space,
    /// The accounting spool is full (records are refused): a condition alarm, raised and
    /// cleared by the node, not by a threshold. Its value is the spool's fill in percent.
    #[serde(rename = "accounting-spool")]
    AccountingSpool,
}

impl AlarmKind {
    /// Every kind, in code order.
    pub const ALL: [Self; 6] = [
        Self::Memory,
        Self::Heap,
        Self::Cpu,
        Self::Sessions,
        Self::Space,
        Self::AccountingSpool,
    ];

    /// The kinds an `alarm-threshold` may name: those measured in percent by a sampler.
    pub const MEASURED: [Self; 5] = [
        Self::Memory,
        Self::Heap,
        Self::Cpu,
        Self::Sessions,
        Self::Space,
    ];

    /// True for a kind sampled against thresholds; false for a condition alarm the node
    /// raises and clears itself.
    #[must_use]
    pub const fn is_measured(self) -> bool {
        !matches!(self, Self::AccountingSpool)
    }

    /// The ACLI word: `memory`, `heap`, `cpu`, `sessions`, `space`, `accounting-spool`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Heap => "heap",
            Self::Cpu => "cpu",
            Self::Sessions => "sessions",
            Self::Space => "space",
            Self::AccountingSpool => "accounting-spool",
        }
    }

    /// The type code: 1..=6, the value of `sbcAlarmType` in traps and the low byte of the id.
    #[must_use]
    pub const fn code(self) -> u32 {
        match self {
            Self::Memory => 1,
            Self::Heap => 2,
            Self::Cpu => 3,
            Self::Sessions => 4,
            Self::Space => 5,
            Self::AccountingSpool => 6,
        }
    }

    /// The kind with this type code, if any.
    #[must_use]
    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The trap type name of the MIB (`SbcTrapType`), e.g. `memoryUtilization`.
    #[must_use]
    pub const fn trap_type(self) -> &'static str {
        match self {
            Self::Memory => "memoryUtilization",
            Self::Heap => "heapUtilization",
            Self::Cpu => "cpuUtilization",
            Self::Sessions => "sessionUtilization",
            Self::Space => "spaceUtilization",
            Self::AccountingSpool => "accountingSpoolFull",
        }
    }
}

impl fmt::Display for AlarmKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses the `type` of an `alarm-threshold`: a measured kind only.
impl FromStr for AlarmKind {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::MEASURED
            .into_iter()
            .find(|k| k.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParseError {
                what: "type",
                got: s.to_owned(),
                valid: "memory, heap, cpu, sessions, space",
            })
    }
}

/// Severity of an alarm: that of the highest threshold its reading exceeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The lowest severity.
    Minor,
    /// Between minor and critical.
    Major,
    /// The highest severity; for memory it arms the critical-memory-abort rule.
    Critical,
}

impl Severity {
    /// Every severity, lowest first.
    pub const ALL: [Self; 3] = [Self::Minor, Self::Major, Self::Critical];

    /// The ACLI word: `minor`, `major`, `critical`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Minor => "minor",
            Self::Major => "major",
            Self::Critical => "critical",
        }
    }

    /// The value of `sbcAlarmSeverity` in traps: minor 2, major 3, critical 4.
    #[must_use]
    pub const fn code(self) -> u32 {
        match self {
            Self::Minor => 2,
            Self::Major => 3,
            Self::Critical => 4,
        }
    }

    /// The severity with this trap code, if any.
    #[must_use]
    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.code() == code)
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Severity {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParseError {
                what: "severity",
                got: s.to_owned(),
                valid: "minor, major, critical",
            })
    }
}

/// A word that is not one of the valid ones.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid {what} {got:?} (valid: {valid})")]
pub struct ParseError {
    what: &'static str,
    got: String,
    valid: &'static str,
}

/// One `alarm-threshold` element.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Threshold {
    /// `type`: what is measured.
    #[serde(rename = "type")]
    pub kind: AlarmKind,
    /// `volume`: the disk volume, for `space` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    /// `severity`: the severity of the alarm when the reading exceeds `value`.
    pub severity: Severity,
    /// `value`: percent, 1..=100; the threshold is crossed when the reading is above it.
    pub value: u8,
    /// Health points the alarm takes off the health score while it has this severity, given
    /// back when it clears (or changes severity). Default 0.
    #[serde(default)]
    pub health_penalty: u8,
}

impl Threshold {
    /// A threshold without volume and without health penalty.
    #[must_use]
    pub const fn new(kind: AlarmKind, severity: Severity, value: u8) -> Self {
        Self {
            kind,
            volume: None,
            severity,
            value,
            health_penalty: 0,
        }
    }

    /// This threshold with a health penalty.
    #[must_use]
    pub const fn with_health_penalty(mut self, points: u8) -> Self {
        self.health_penalty = points;
        self
    }

    /// The key of the alarm this threshold belongs to.
    #[must_use]
    pub fn key(&self) -> AlarmKey {
        AlarmKey {
            kind: self.kind,
            volume: self.volume.clone(),
        }
    }
}

/// What one alarm row measures: a kind, and for `space` a volume.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AlarmKey {
    /// The measured kind.
    pub kind: AlarmKind,
    /// The volume, for `space` only.
    pub volume: Option<String>,
}

impl AlarmKey {
    /// The key of a kind without volume.
    #[must_use]
    pub const fn kind(kind: AlarmKind) -> Self {
        Self { kind, volume: None }
    }
}

impl fmt::Display for AlarmKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.volume {
            Some(v) => write!(f, "{} {v}", self.kind),
            None => write!(f, "{}", self.kind),
        }
    }
}

/// Why a set of thresholds is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ThresholdError {
    /// A value outside 1..=100.
    #[error("alarm-threshold {key} {severity}: value {value} out of range (valid: 1..=100)")]
    OutOfRange {
        /// The alarm.
        key: AlarmKey,
        /// The severity of the bad threshold.
        severity: Severity,
        /// The bad value.
        value: u8,
    },
    /// Two thresholds of one type (and volume) with the same severity.
    #[error("alarm-threshold {key} {severity}: defined twice (one threshold per severity)")]
    Duplicate {
        /// The alarm.
        key: AlarmKey,
        /// The repeated severity.
        severity: Severity,
    },
    /// A higher severity with a value not above a lower one's.
    #[error(
        "alarm-threshold {key}: {higher} value {higher_value} must be above {lower} value {lower_value}"
    )]
    NotIncreasing {
        /// The alarm.
        key: AlarmKey,
        /// The lower severity.
        lower: Severity,
        /// Its value.
        lower_value: u8,
        /// The higher severity.
        higher: Severity,
        /// Its value.
        higher_value: u8,
    },
    /// A threshold on a condition alarm ([`AlarmKind::AccountingSpool`]), which no reading
    /// measures.
    #[error(
        "alarm-threshold {0}: not a measured type (valid: memory, heap, cpu, sessions, space)"
    )]
    NotMeasured(AlarmKind),
    /// A `volume` on a type other than `space`.
    #[error("alarm-threshold {kind}: volume {volume:?} is valid for type space only")]
    VolumeNotSpace {
        /// The type that has a volume.
        kind: AlarmKind,
        /// The volume given.
        volume: String,
    },
}

/// A validated set of thresholds, grouped by alarm, each group sorted by severity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Thresholds {
    groups: Vec<(AlarmKey, AlarmId, Vec<Threshold>)>,
}

impl Thresholds {
    /// Validates and groups thresholds: values 1..=100, one per severity and alarm, values
    /// strictly increasing with severity, `volume` only for `space`.
    pub fn new(list: impl IntoIterator<Item = Threshold>) -> Result<Self, ThresholdError> {
        let mut groups: Vec<(AlarmKey, AlarmId, Vec<Threshold>)> = Vec::new();
        let mut space_volumes = 0u32;
        for t in list {
            if !t.kind.is_measured() {
                return Err(ThresholdError::NotMeasured(t.kind));
            }
            if let (Some(volume), false) = (&t.volume, t.kind == AlarmKind::Space) {
                return Err(ThresholdError::VolumeNotSpace {
                    kind: t.kind,
                    volume: volume.clone(),
                });
            }
            if !(1..=100).contains(&t.value) {
                return Err(ThresholdError::OutOfRange {
                    key: t.key(),
                    severity: t.severity,
                    value: t.value,
                });
            }
            let key = t.key();
            if let Some((_, _, list)) = groups.iter_mut().find(|(k, _, _)| *k == key) {
                if list.iter().any(|x| x.severity == t.severity) {
                    return Err(ThresholdError::Duplicate {
                        key,
                        severity: t.severity,
                    });
                }
                list.push(t);
            } else {
                let id = if key.kind == AlarmKind::Space {
                    space_volumes += 1;
                    ALARM_ID_BASE + key.kind.code() + 256 * (space_volumes - 1)
                } else {
                    ALARM_ID_BASE + key.kind.code()
                };
                groups.push((key, id, vec![t]));
            }
        }
        for (key, _, list) in &mut groups {
            list.sort_by_key(|t| t.severity);
            for pair in list.windows(2) {
                if pair[1].value <= pair[0].value {
                    return Err(ThresholdError::NotIncreasing {
                        key: key.clone(),
                        lower: pair[0].severity,
                        lower_value: pair[0].value,
                        higher: pair[1].severity,
                        higher_value: pair[1].value,
                    });
                }
            }
        }
        Ok(Self { groups })
    }

    /// The alarms that have thresholds, each with its id and its thresholds (lowest severity
    /// first).
    pub fn iter(&self) -> impl Iterator<Item = (&AlarmKey, AlarmId, &[Threshold])> {
        self.groups.iter().map(|(k, id, l)| (k, *id, l.as_slice()))
    }

    /// The kinds that have at least one threshold: what the shell must sample.
    #[must_use]
    pub fn kinds(&self) -> Vec<AlarmKind> {
        let mut kinds: Vec<AlarmKind> = self.groups.iter().map(|(k, _, _)| k.kind).collect();
        kinds.dedup();
        kinds
    }

    /// The thresholds of one alarm, lowest severity first (empty when none is configured).
    #[must_use]
    pub fn for_key(&self, key: &AlarmKey) -> &[Threshold] {
        self.groups
            .iter()
            .find(|(k, _, _)| k == key)
            .map_or(&[], |(_, _, l)| l.as_slice())
    }

    /// The id of one alarm, if it has thresholds.
    #[must_use]
    pub fn alarm_id(&self, key: &AlarmKey) -> Option<AlarmId> {
        self.groups
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, id, _)| *id)
    }

    /// The highest threshold that `percent` exceeds, if any.
    #[must_use]
    pub fn crossed(&self, key: &AlarmKey, percent: f64) -> Option<&Threshold> {
        self.for_key(key)
            .iter()
            .rev()
            .find(|t| percent > f64::from(t.value))
    }

    /// The critical memory threshold, which the critical-memory-abort rule refers to.
    #[must_use]
    pub fn critical_memory(&self) -> Option<&Threshold> {
        self.for_key(&AlarmKey::kind(AlarmKind::Memory))
            .iter()
            .find(|t| t.severity == Severity::Critical)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_kind_takes_no_threshold() {
        assert_eq!(
            Thresholds::new([Threshold::new(
                AlarmKind::AccountingSpool,
                Severity::Critical,
                100
            )]),
            Err(ThresholdError::NotMeasured(AlarmKind::AccountingSpool))
        );
        assert!("accounting-spool".parse::<AlarmKind>().is_err());
        assert_eq!(AlarmKind::from_code(6), Some(AlarmKind::AccountingSpool));
        assert!(!AlarmKind::AccountingSpool.is_measured());
        assert_eq!(
            serde_json::to_string(&AlarmKind::AccountingSpool)
                .ok()
                .as_deref(),
            Some("\"accounting-spool\"")
        );
        assert!(AlarmKind::MEASURED.iter().all(|k| k.is_measured()));
    }

    #[test]
    fn ids_follow_the_scheme() {
        let mut space = Threshold::new(AlarmKind::Space, Severity::Major, 90);
        space.volume = Some("/var".into());
        let mut space2 = space.clone();
        space2.volume = Some("/opt".into());
        let th = Thresholds::new([
            Threshold::new(AlarmKind::Memory, Severity::Critical, 80),
            Threshold::new(AlarmKind::Cpu, Severity::Minor, 50),
            space,
            space2,
        ])
        .expect("valid");
        let ids: Vec<_> = th.iter().map(|(_, id, _)| id).collect();
        assert_eq!(ids, [131_073, 131_075, 131_077, 131_333]);
    }

    #[test]
    fn refuses_bad_sets() {
        let e = Thresholds::new([
            Threshold::new(AlarmKind::Memory, Severity::Major, 80),
            Threshold::new(AlarmKind::Memory, Severity::Critical, 80),
        ])
        .expect_err("not increasing");
        assert!(e
            .to_string()
            .contains("critical value 80 must be above major value 80"));
        assert!(matches!(
            Thresholds::new([
                Threshold::new(AlarmKind::Cpu, Severity::Major, 80),
                Threshold::new(AlarmKind::Cpu, Severity::Major, 90),
            ]),
            Err(ThresholdError::Duplicate { .. })
        ));
        assert!(matches!(
            Thresholds::new([Threshold::new(AlarmKind::Cpu, Severity::Major, 0)]),
            Err(ThresholdError::OutOfRange { .. })
        ));
        assert_eq!(
            "bogus".parse::<Severity>().expect_err("bad").to_string(),
            "invalid severity \"bogus\" (valid: minor, major, critical)"
        );
    }

    #[test]
    fn crossed_picks_the_highest() {
        let th = Thresholds::new([
            Threshold::new(AlarmKind::Memory, Severity::Critical, 90),
            Threshold::new(AlarmKind::Memory, Severity::Minor, 60),
            Threshold::new(AlarmKind::Memory, Severity::Major, 75),
        ])
        .expect("valid");
        let key = AlarmKey::kind(AlarmKind::Memory);
        assert_eq!(th.crossed(&key, 60.0), None);
        assert_eq!(
            th.crossed(&key, 76.0).map(|t| t.severity),
            Some(Severity::Major)
        );
        assert_eq!(
            th.crossed(&key, 95.0).map(|t| t.severity),
            Some(Severity::Critical)
        );
    }
}
