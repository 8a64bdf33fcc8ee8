//! The alarm evaluator: a sans-IO state machine that turns sub-samples into alarm-iteration
//! readings, readings into alarms, and two consecutive critical memory readings into the
//! critical-memory-abort trigger.
//!
//! It never reads a clock, a file or a socket: the caller passes `now` in, feeds samples, and
//! carries out what [`Evaluator::poll`] returns (send a trap, take health points, close the
//! 503 gate). This is quinn-proto's shape:
//!
//! ```text
//! loop {
//!     sleep_until(ev.poll_timeout());
//!     let now = Instant::now();
//!     if ev.poll_sample(now) {                      // a sub-sample is due
//!         for kind in ev.kinds() { ev.handle_sample(now, kind, sampler(kind)?.percent) }
//!     }
//!     ev.handle_timeout(now);                       // closes the iteration when due
//!     while let Some(event) = ev.poll() { act(event) }
//! }
//! ```
//!
//! # Iterations and sub-samples
//!
//! An **alarm iteration** lasts [`EvaluatorConfig::iteration`] (15 s, as Oracle; 1 s in the
//! lab and tests). Within it, [`EvaluatorConfig::sub_samples`] sub-samples are due at even
//! intervals (15, i.e. every second by default), the last one at the iteration's end. A
//! sample handed in before the iteration is closed belongs to it, so the sample taken at the
//! boundary is the iteration's last.
//!
//! # The spike rule
//!
//! An iteration's **reading** is the level sustained at its end: the **minimum of its last K
//! sub-samples** (K = [`EvaluatorConfig::sustain`], default 3). A reading exceeds a threshold
//! only if K consecutive sub-samples did, so a spike shorter than K sub-samples (2 s at the
//! defaults) cannot make a minor, major or critical reading, wherever it falls in the
//! iteration. An iteration with fewer than K sub-samples (the sampler failed) makes no reading:
//! alarms stay as they are and the critical-memory-abort rule starts over.
//!
//! The price: a rise that starts within the last K−1 sub-samples of an iteration is seen one
//! iteration later. Taking the minimum (not the mean) makes the rule exact: no short spike,
//! however high, can lift the reading.
//!
//! # Alarms
//!
//! Per alarm (kind, and volume for `space`), the reading's severity is that of the highest
//! threshold it exceeds. The first such reading raises the alarm ([`AlarmEvent::Raised`]);
//! a reading of another severity changes it ([`AlarmEvent::SeverityChanged`]); a reading
//! below the lowest threshold clears it ([`AlarmEvent::Cleared`] with
//! [`ClearedBy::Auto`]), **except a critical memory alarm**: once critical, the memory alarm
//! stays raised and critical, with no automatic clear and no clear trap, until an operator's
//! `clear-alarm` ([`Evaluator::clear_alarm`]) or a restart clears it, as Oracle does. While
//! its readings stay critical it is re-announced each iteration ([`AlarmEvent::StillCritical`],
//! the trap Oracle re-sends). A threshold may carry a health penalty, taken while the alarm
//! has that severity and given back when it clears.
//!
//! # The critical-memory-abort trigger
//!
//! Oracle: "the system stores the exact memory usage whenever it hits the critical memory
//! threshold the first time" and triggers when "the stored memory value in 1st iteration is
//! less than the subsequent iteration value" and "the subsequent iteration value is greater
//! than the critical threshold". Here:
//!
//! 1. On a critical memory reading with nothing stored, store it as `first`.
//! 2. On the next iteration's reading `second`: if `second` exceeds the critical threshold and
//!    `second ≥ first − tolerance` ([`EvaluatorConfig::abort_tolerance`], default 2 percentage
//!    points), emit [`AlarmEvent::CriticalMemoryAbort`] `{ first, second }`. If `second` is
//!    still critical but fell by more than the tolerance, memory is receding from a spike:
//!    store `second` as the new `first` and test again next iteration.
//! 3. A reading that is not critical (or no reading) in between forgets `first`.
//! 4. The trigger fires once per raised alarm: it is re-armed only when the memory alarm is
//!    cleared (by an operator or a restart).
//!
//! Why a tolerance instead of Oracle's strict "less than": memory that has stopped growing at
//! a critical level (a flat plateau at 85% against 80%) is the very case to leave before the
//! node falls over, yet a strict comparison would never fire on it, and sampling noise would
//! make the outcome random. Two points of tolerance accept a plateau and noise, and still
//! reject a reading that is clearly falling back from a spike.
//!
//! # Condition alarms
//!
//! Beside the measured alarms, the node raises alarms for conditions it watches itself (the
//! accounting spool full: [`AlarmKind::AccountingSpool`]), with
//! [`Evaluator::raise_condition`] and [`Evaluator::clear_condition`]. Their rows share the
//! table, the events (so the same `sbcAlarmTrap` and `sbcAlarmClearTrap`), the health ledger
//! (their [`ConditionAlarm::health_penalty`]) and `clear-alarm`. An operator's `clear-alarm`
//! of a condition alarm acknowledges the condition: the alarm is not raised again until the
//! condition has ended ([`Evaluator::clear_condition`]) and comes back, so a watcher that
//! re-asserts a standing condition every second does not undo the operator's clear.
//!
//! Timing: with memory critical from before the last K sub-samples of iteration n, the
//! trigger fires at the end of iteration n+1: two iterations, at most 30 s at the default.
//! A rise within those last K−1 sub-samples shifts it by one iteration (see the spike rule).
//! What to do when it fires (nothing, the 503 gate, or [`Evaluator::deduct_critical_memory`]
//! for `critical-memory-abort=switchover`) is the caller's policy.

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant, SystemTime};

use thiserror::Error;
use tracing::{debug, info, warn};

use crate::health::Health;
use crate::table::{AlarmRow, AlarmTable, ClearError, ClearedBy};
use crate::threshold::{AlarmId, AlarmKey, AlarmKind, Severity, Thresholds};

/// Timing and identity of the evaluator.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluatorConfig {
    /// Length of an alarm iteration. Default 15 s; at least 1 ms.
    pub iteration: Duration,
    /// Sub-samples per iteration, evenly spaced, the last at the iteration's end. Default 15.
    pub sub_samples: u32,
    /// K of the spike rule: an iteration's reading is the minimum of its last K sub-samples.
    /// Default 3; 1..=`sub_samples`.
    pub sustain: u32,
    /// How far, in percentage points, the second critical memory reading may be below the
    /// first and still trigger the critical-memory abort. Default 2.0.
    pub abort_tolerance: f64,
    /// The task that owns the alarms (`clear-alarm <id> <task>`). Default `sbcd`.
    pub task: String,
}

impl Default for EvaluatorConfig {
    fn default() -> Self {
        Self {
            iteration: Duration::from_secs(15),
            sub_samples: 15,
            sustain: 3,
            abort_tolerance: 2.0,
            task: "sbcd".to_owned(),
        }
    }
}

/// A refused [`EvaluatorConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EvaluatorError {
    /// The iteration is shorter than 1 ms.
    #[error("alarm iteration {0:?} too short (valid: at least 1 ms)")]
    Iteration(Duration),
    /// Sub-samples outside 1..=1000.
    #[error("sub-samples {0} out of range (valid: 1..=1000)")]
    SubSamples(u32),
    /// Sustain outside 1..=sub-samples.
    #[error("sustain {sustain} out of range (valid: 1..={sub_samples})")]
    Sustain {
        /// The value given.
        sustain: u32,
        /// The sub-samples per iteration.
        sub_samples: u32,
    },
    /// A negative or non-finite tolerance.
    #[error("abort tolerance {0} invalid (valid: a finite number ≥ 0)")]
    Tolerance(String),
}

/// What the evaluator asks its caller to act on.
#[derive(Debug, Clone, PartialEq)]
pub enum AlarmEvent {
    /// A new alarm: send the group trap (`sbcAlarmTrap`).
    Raised(AlarmRow),
    /// A raised alarm's severity changed: send the group trap.
    SeverityChanged {
        /// The row with its new severity.
        row: AlarmRow,
        /// The severity it had.
        previous: Severity,
    },
    /// The memory alarm is still critical at this iteration: re-send the group trap.
    StillCritical(AlarmRow),
    /// An alarm was cleared: send the clear trap (`sbcAlarmClearTrap`).
    Cleared {
        /// The row as it was when cleared.
        row: AlarmRow,
        /// Who cleared it.
        by: ClearedBy,
    },
    /// Two consecutive critical memory readings, the second not lower than the first by more
    /// than the tolerance: apply the `critical-memory-abort` policy.
    CriticalMemoryAbort {
        /// The first critical reading, in percent.
        first: f64,
        /// The second, in percent.
        second: f64,
    },
    /// The health score changed: send the health trap (`sbcHealthTrap`).
    HealthChanged {
        /// The score now.
        score: u8,
        /// The score before.
        previous: u8,
        /// What changed it, in words.
        reason: String,
    },
}

/// An alarm for a condition the node watches itself (not a reading against thresholds): what
/// [`Evaluator::raise_condition`] puts in the table.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionAlarm {
    /// The alarm id (`clear-alarm <id> <task>`), outside the ids of the thresholds.
    pub id: AlarmId,
    /// The task that owns it (`clear-alarm <id> <task>`), e.g. `accounting`.
    pub task: String,
    /// What it is about: a kind that is not [measured](AlarmKind::is_measured).
    pub kind: AlarmKind,
    /// Its severity.
    pub severity: Severity,
    /// The figure the row shows, in percent (e.g. the spool's fill).
    pub value: f64,
    /// The level the condition refers to, in percent (e.g. 100 for a full spool).
    pub threshold: u8,
    /// What is wrong, in words.
    pub description: String,
    /// Health points taken while it is raised (0: none).
    pub health_penalty: u8,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Abort {
    Idle,
    Armed { first: f64 },
    Fired,
}

#[derive(Debug, Clone)]
struct Track {
    key: AlarmKey,
    id: AlarmId,
    window: VecDeque<f64>,
    samples: u32,
    reading: Option<f64>,
}

/// The alarm evaluator: thresholds, spike filter, alarm table, health score and the
/// critical-memory-abort trigger, driven by the caller's clock. See the module docs.
#[derive(Debug, Clone)]
pub struct Evaluator {
    config: EvaluatorConfig,
    thresholds: Thresholds,
    tracks: Vec<Track>,
    table: AlarmTable,
    health: Health,
    events: VecDeque<AlarmEvent>,
    anchor: (Instant, SystemTime),
    sub_period: Duration,
    next_sample: Instant,
    deadline: Instant,
    iterations: u64,
    abort: Abort,
    /// Condition alarms an operator cleared while their condition still held.
    acknowledged: BTreeSet<AlarmId>,
}

fn next_after(mut t: Instant, period: Duration, now: Instant) -> Instant {
    if t <= now {
        let behind = now.duration_since(t).as_nanos();
        let steps = behind / period.as_nanos().max(1) + 1;
        let steps = u32::try_from(steps).unwrap_or(u32::MAX);
        t += period.saturating_mul(steps);
    }
    t
}

impl Evaluator {
    /// An evaluator whose first iteration starts at `now`; `wall` is the wall-clock time at
    /// `now`, from which the rows' display times are derived.
    pub fn new(
        config: EvaluatorConfig,
        thresholds: Thresholds,
        now: Instant,
        wall: SystemTime,
    ) -> Result<Self, EvaluatorError> {
        if config.iteration < Duration::from_millis(1) {
            return Err(EvaluatorError::Iteration(config.iteration));
        }
        if !(1..=1000).contains(&config.sub_samples) {
            return Err(EvaluatorError::SubSamples(config.sub_samples));
        }
        if !(1..=config.sub_samples).contains(&config.sustain) {
            return Err(EvaluatorError::Sustain {
                sustain: config.sustain,
                sub_samples: config.sub_samples,
            });
        }
        if !(config.abort_tolerance.is_finite() && config.abort_tolerance >= 0.0) {
            return Err(EvaluatorError::Tolerance(
                config.abort_tolerance.to_string(),
            ));
        }
        let tracks = thresholds
            .iter()
            .map(|(key, id, _)| Track {
                key: key.clone(),
                id,
                window: VecDeque::with_capacity(config.sustain as usize),
                samples: 0,
                reading: None,
            })
            .collect();
        let sub_period = config.iteration / config.sub_samples;
        Ok(Self {
            sub_period,
            next_sample: now + sub_period,
            deadline: now + config.iteration,
            config,
            thresholds,
            tracks,
            table: AlarmTable::new(),
            health: Health::new(),
            events: VecDeque::new(),
            anchor: (now, wall),
            iterations: 0,
            abort: Abort::Idle,
            acknowledged: BTreeSet::new(),
        })
    }

    // ---- getters ----

    /// The configuration.
    #[must_use]
    pub const fn config(&self) -> &EvaluatorConfig {
        &self.config
    }

    /// The thresholds.
    #[must_use]
    pub const fn thresholds(&self) -> &Thresholds {
        &self.thresholds
    }

    /// The kinds that have thresholds: what the caller must sample when a sub-sample is due.
    #[must_use]
    pub fn kinds(&self) -> Vec<AlarmKind> {
        self.thresholds.kinds()
    }

    /// The alarm table (`display-alarms`).
    #[must_use]
    pub const fn table(&self) -> &AlarmTable {
        &self.table
    }

    /// The health score and its ledger (`show health`).
    #[must_use]
    pub const fn health(&self) -> &Health {
        &self.health
    }

    /// The reading of the last closed iteration for an alarm, if it had one.
    #[must_use]
    pub fn last_reading(&self, key: &AlarmKey) -> Option<f64> {
        self.tracks
            .iter()
            .find(|t| t.key == *key)
            .and_then(|t| t.reading)
    }

    /// Iterations closed so far.
    #[must_use]
    pub const fn iterations(&self) -> u64 {
        self.iterations
    }

    /// The stored first critical memory reading, while the trigger waits for the second.
    #[must_use]
    pub const fn critical_memory_armed(&self) -> Option<f64> {
        match self.abort {
            Abort::Armed { first } => Some(first),
            _ => None,
        }
    }

    /// True once the critical-memory-abort trigger has fired for the raised memory alarm.
    #[must_use]
    pub fn critical_memory_abort_fired(&self) -> bool {
        self.abort == Abort::Fired
    }

    fn wall(&self, now: Instant) -> SystemTime {
        self.anchor.1 + now.saturating_duration_since(self.anchor.0)
    }

    // ---- input ----

    /// A sub-sample of `kind` (any volume-less alarm; for `space` the volume-less one), in
    /// percent. Samples of kinds without thresholds and non-finite values are ignored.
    pub fn handle_sample(&mut self, now: Instant, kind: AlarmKind, percent: f64) {
        // A sample belongs to the iteration still open, whatever its time: `now` is part of
        // the signature for the shape of the API and for tracing.
        let _ = now;
        self.sample(&AlarmKey::kind(kind), percent);
    }

    /// A sub-sample of the `space` utilisation of `volume`, in percent.
    pub fn handle_volume_sample(&mut self, now: Instant, volume: &str, percent: f64) {
        let _ = now;
        let key = AlarmKey {
            kind: AlarmKind::Space,
            volume: Some(volume.to_owned()),
        };
        self.sample(&key, percent);
    }

    fn sample(&mut self, key: &AlarmKey, percent: f64) {
        if !percent.is_finite() {
            debug!(alarm = %key, "non-finite sample ignored");
            return;
        }
        let sustain = self.config.sustain as usize;
        if let Some(track) = self.tracks.iter_mut().find(|t| t.key == *key) {
            if track.window.len() == sustain {
                track.window.pop_front();
            }
            track.window.push_back(percent);
            track.samples += 1;
        }
    }

    /// Closes the alarm iteration if it is due at `now`, evaluating every alarm; the next one
    /// keeps the phase (iterations missed by a late caller are skipped, not replayed).
    pub fn handle_timeout(&mut self, now: Instant) {
        if now < self.deadline {
            return;
        }
        self.iterations += 1;
        for i in 0..self.tracks.len() {
            let track = &mut self.tracks[i];
            let reading = if track.samples >= self.config.sustain {
                track.window.iter().copied().reduce(f64::min)
            } else {
                None
            };
            track.window.clear();
            track.samples = 0;
            track.reading = reading;
            self.evaluate(i, reading, now);
        }
        self.deadline = next_after(self.deadline, self.config.iteration, now);
    }

    fn evaluate(&mut self, i: usize, reading: Option<f64>, now: Instant) {
        let (key, id) = (self.tracks[i].key.clone(), self.tracks[i].id);
        let is_memory = key.kind == AlarmKind::Memory && key.volume.is_none();
        if let Some(r) = reading {
            let wall = self.wall(now);
            let crossed = self.thresholds.crossed(&key, r).cloned();
            let existing = self.table.get(id).cloned();
            match (existing, crossed) {
                (None, Some(t)) => {
                    let row = AlarmRow {
                        id,
                        task: self.config.task.clone(),
                        kind: key.kind,
                        volume: key.volume.clone(),
                        severity: t.severity,
                        value: r,
                        threshold: t.value,
                        first_seen: wall,
                        last_seen: wall,
                        count: 1,
                        description: AlarmRow::describe(
                            key.kind,
                            key.volume.as_deref(),
                            r,
                            t.severity,
                            t.value,
                        ),
                    };
                    info!(alarm = id, severity = %t.severity, value = r, "alarm raised");
                    self.table.upsert(row.clone(), now);
                    self.events.push_back(AlarmEvent::Raised(row.clone()));
                    self.penalise(&row, t.health_penalty);
                }
                (Some(row), Some(t)) => {
                    let sticky = is_memory && row.severity == Severity::Critical;
                    if !(sticky && t.severity != Severity::Critical) {
                        let new = AlarmRow {
                            severity: t.severity,
                            value: r,
                            threshold: t.value,
                            last_seen: wall,
                            count: row.count.saturating_add(1),
                            description: AlarmRow::describe(
                                key.kind,
                                key.volume.as_deref(),
                                r,
                                t.severity,
                                t.value,
                            ),
                            ..row.clone()
                        };
                        self.table.upsert(new.clone(), now);
                        if t.severity != row.severity {
                            info!(alarm = id, from = %row.severity, to = %t.severity, value = r,
                                "alarm severity changed");
                            self.events.push_back(AlarmEvent::SeverityChanged {
                                row: new.clone(),
                                previous: row.severity,
                            });
                            self.penalise(&new, t.health_penalty);
                        } else if is_memory && t.severity == Severity::Critical {
                            self.events.push_back(AlarmEvent::StillCritical(new));
                        }
                    }
                }
                (Some(row), None) => {
                    let sticky = is_memory && row.severity == Severity::Critical;
                    if !sticky {
                        info!(alarm = id, value = r, "alarm cleared by itself");
                        self.table.remove(id);
                        self.forget(row, ClearedBy::Auto);
                    }
                }
                (None, None) => {}
            }
        }
        if is_memory {
            self.step_abort(reading);
        }
    }

    fn step_abort(&mut self, reading: Option<f64>) {
        let Some(critical) = self
            .thresholds
            .critical_memory()
            .map(|t| f64::from(t.value))
        else {
            return;
        };
        let critical_reading = reading.filter(|r| *r > critical);
        self.abort = match (self.abort, critical_reading) {
            (Abort::Fired, _) => Abort::Fired,
            (Abort::Idle, Some(r)) => {
                debug!(first = r, "critical memory reading stored");
                Abort::Armed { first: r }
            }
            (Abort::Armed { first }, Some(second)) => {
                if second >= first - self.config.abort_tolerance {
                    warn!(first, second, "two consecutive critical memory readings");
                    self.events
                        .push_back(AlarmEvent::CriticalMemoryAbort { first, second });
                    Abort::Fired
                } else {
                    debug!(first, second, "critical memory receding; stored again");
                    Abort::Armed { first: second }
                }
            }
            (_, None) => Abort::Idle,
        };
    }

    fn health_source(id: AlarmId) -> String {
        format!("alarm {id}")
    }

    fn penalise(&mut self, row: &AlarmRow, points: u8) {
        let before = self.health.deduct(
            &Self::health_source(row.id),
            row.description.clone(),
            points,
        );
        self.health_changed(before, format!("alarm {} {}", row.id, row.severity));
    }

    fn forget(&mut self, row: AlarmRow, by: ClearedBy) {
        if row.kind == AlarmKind::Memory && row.volume.is_none() {
            self.abort = Abort::Idle;
        }
        let before = self.health.score();
        self.health.give_back(&Self::health_source(row.id));
        let reason = format!("alarm {} cleared ({by})", row.id);
        self.events.push_back(AlarmEvent::Cleared { row, by });
        self.health_changed(before, reason);
    }

    fn health_changed(&mut self, previous: u8, reason: String) {
        let score = self.health.score();
        if score != previous {
            self.events.push_back(AlarmEvent::HealthChanged {
                score,
                previous,
                reason,
            });
        }
    }

    // ---- commands ----

    /// An operator's `clear-alarm <id> <task>`: clears any alarm, the critical memory one
    /// included, gives back its health penalty (never the critical-memory deduction) and
    /// emits [`AlarmEvent::Cleared`] with [`ClearedBy::Operator`]. The memory alarm is raised
    /// again at the next iteration whose reading still exceeds a threshold, and its
    /// critical-memory-abort trigger is re-armed.
    ///
    /// A condition alarm ([`raise_condition`](Self::raise_condition)) stays cleared until its
    /// condition has ended and comes back.
    pub fn clear_alarm(&mut self, id: AlarmId, task: &str) -> Result<AlarmRow, ClearError> {
        let row = self.table.clear(id, task)?;
        info!(alarm = id, task, "alarm cleared by operator");
        if !row.kind.is_measured() {
            self.acknowledged.insert(id);
        }
        self.forget(row.clone(), ClearedBy::Operator);
        Ok(row)
    }

    /// Clears every alarm with `by` (e.g. [`ClearedBy::Restart`] at an orderly shutdown, so
    /// the receivers see the clear traps).
    pub fn clear_all(&mut self, by: ClearedBy) {
        for row in self.table.rows() {
            self.table.remove(row.id);
            self.forget(row, by);
        }
    }

    /// Raises a condition alarm at `now`, or refreshes its row (value, description, last
    /// seen) when it is raised already. A new row emits [`AlarmEvent::Raised`] and takes its
    /// health penalty. Returns true when the alarm was raised by this call.
    ///
    /// Nothing happens (false) for a [measured](AlarmKind::is_measured) kind, whose rows the
    /// thresholds own, for an id a threshold alarm holds, and for an alarm an operator cleared
    /// while its condition still held: it is raised again only after
    /// [`clear_condition`](Self::clear_condition).
    pub fn raise_condition(&mut self, now: Instant, alarm: ConditionAlarm) -> bool {
        if alarm.kind.is_measured() || self.acknowledged.contains(&alarm.id) {
            return false;
        }
        let wall = self.wall(now);
        match self.table.get(alarm.id).cloned() {
            Some(row) if row.kind.is_measured() => false,
            Some(row) => {
                let refreshed = AlarmRow {
                    value: alarm.value,
                    description: alarm.description,
                    last_seen: wall,
                    ..row
                };
                self.table.upsert(refreshed, now);
                false
            }
            None => {
                let row = AlarmRow {
                    id: alarm.id,
                    task: alarm.task,
                    kind: alarm.kind,
                    volume: None,
                    severity: alarm.severity,
                    value: alarm.value,
                    threshold: alarm.threshold,
                    first_seen: wall,
                    last_seen: wall,
                    count: 1,
                    description: alarm.description,
                };
                info!(alarm = row.id, severity = %row.severity, "condition alarm raised");
                self.table.upsert(row.clone(), now);
                self.events.push_back(AlarmEvent::Raised(row.clone()));
                self.penalise(&row, alarm.health_penalty);
                true
            }
        }
    }

    /// The condition of alarm `id` has ended: clears its row, if raised, with
    /// [`AlarmEvent::Cleared`] by [`ClearedBy::Auto`] and gives back its health penalty, and
    /// forgets an operator's clear of it (the next [`raise_condition`](Self::raise_condition)
    /// raises it again). Threshold alarms are left alone. Returns the cleared row.
    pub fn clear_condition(&mut self, id: AlarmId) -> Option<AlarmRow> {
        self.acknowledged.remove(&id);
        let row = self
            .table
            .get(id)
            .filter(|r| !r.kind.is_measured())?
            .clone();
        info!(alarm = id, "condition alarm cleared by itself");
        self.table.remove(id);
        self.forget(row.clone(), ClearedBy::Auto);
        Some(row)
    }

    /// Takes over the condition alarms of `previous` (an evaluator this one replaces after a
    /// configuration change): their rows, health penalties and operators' clears, with no
    /// event, since nothing changed for them.
    pub fn carry_conditions(&mut self, previous: &Self) {
        for row in previous.table.rows() {
            if row.kind.is_measured() {
                continue;
            }
            let first_at = previous
                .table
                .instants(row.id)
                .map_or(self.anchor.0, |(first, _)| first);
            let source = Self::health_source(row.id);
            if let Some(d) = previous
                .health
                .deductions()
                .iter()
                .find(|d| d.source == source)
            {
                self.health.deduct(&source, d.reason.clone(), d.points);
            }
            self.table.upsert(row, first_at);
        }
        self.acknowledged
            .extend(previous.acknowledged.iter().copied());
    }

    /// Takes `points` off the health score for `source` (e.g. a lost heartbeat path),
    /// replacing what that source took before; emits [`AlarmEvent::HealthChanged`].
    pub fn deduct_health(&mut self, source: &str, reason: &str, points: u8) {
        let before = self.health.deduct(source, reason, points);
        self.health_changed(before, reason.to_owned());
    }

    /// Gives back what `source` took; emits [`AlarmEvent::HealthChanged`].
    pub fn give_back_health(&mut self, source: &str) {
        let before = self.health.score();
        if let Some(d) = self.health.give_back(source) {
            self.health_changed(before, format!("{} recovered", d.source));
        }
    }

    /// Takes 100 off the health score until restart (`critical-memory-abort=switchover`);
    /// emits [`AlarmEvent::HealthChanged`].
    pub fn deduct_critical_memory(&mut self) {
        let reason = "two consecutive critical memory readings (critical-memory-abort)";
        let before = self.health.deduct_critical_memory(reason);
        self.health_changed(before, reason.to_owned());
    }

    // ---- output ----

    /// True when a sub-sample is due at `now`; advances the sub-sample schedule, so it is
    /// true once per due sub-sample. Call it before [`handle_timeout`](Self::handle_timeout)
    /// so the sample at the iteration's end belongs to that iteration.
    #[must_use]
    pub fn poll_sample(&mut self, now: Instant) -> bool {
        if now < self.next_sample {
            return false;
        }
        self.next_sample = next_after(self.next_sample, self.sub_period, now);
        true
    }

    /// When the evaluator next wants to be woken: the next sub-sample or iteration end.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        Some(self.next_sample.min(self.deadline))
    }

    /// The next event to act on, oldest first.
    #[must_use]
    pub fn poll(&mut self) -> Option<AlarmEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests;
