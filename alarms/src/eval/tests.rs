//! Virtual-clock tests of the evaluator: the 15 s and 30 s rules in microseconds.

use std::time::{Duration, Instant, SystemTime};

use super::*;
use crate::threshold::Threshold;

const S: Duration = Duration::from_secs(1);
const MEMORY: AlarmKey = AlarmKey::kind(AlarmKind::Memory);

/// A virtual clock driving one evaluator with memory (and optionally cpu) levels that are
/// functions of the time since start.
struct Lab {
    ev: Evaluator,
    t0: Instant,
    samples: u32,
    events: Vec<(Duration, AlarmEvent)>,
}

impl Lab {
    fn new(config: EvaluatorConfig, thresholds: Vec<Threshold>) -> Self {
        let t0 = Instant::now();
        let th = Thresholds::new(thresholds).expect("thresholds");
        let ev = Evaluator::new(config, th, t0, SystemTime::UNIX_EPOCH).expect("config");
        Self {
            ev,
            t0,
            samples: 0,
            events: Vec::new(),
        }
    }

    /// Oracle's defaults: 15 s iterations, a sub-sample per second, K = 3; memory critical at
    /// 80, major at 70.
    fn oracle() -> Self {
        Self::new(
            EvaluatorConfig::default(),
            vec![
                Threshold::new(AlarmKind::Memory, Severity::Major, 70),
                Threshold::new(AlarmKind::Memory, Severity::Critical, 80),
            ],
        )
    }

    /// Runs the evaluator's own timers up to `until` (since start), sampling every kind with
    /// `level(kind, t)`.
    fn run(&mut self, until: Duration, mut level: impl FnMut(AlarmKind, Duration) -> f64) {
        loop {
            let next = self.ev.poll_timeout().expect("always a timer");
            if next > self.t0 + until {
                return;
            }
            let t = next - self.t0;
            if self.ev.poll_sample(next) {
                self.samples += 1;
                for kind in self.ev.kinds() {
                    self.ev.handle_sample(next, kind, level(kind, t));
                }
            }
            self.ev.handle_timeout(next);
            while let Some(e) = self.ev.poll() {
                self.events.push((t, e));
            }
        }
    }

    fn memory(&mut self, until: Duration, mut level: impl FnMut(Duration) -> f64) {
        self.run(until, |_, t| level(t));
    }

    fn aborts(&self) -> Vec<(Duration, f64, f64)> {
        self.events
            .iter()
            .filter_map(|(t, e)| match e {
                AlarmEvent::CriticalMemoryAbort { first, second } => Some((*t, *first, *second)),
                _ => None,
            })
            .collect()
    }

    fn raised(&self) -> Vec<(Duration, Severity)> {
        self.events
            .iter()
            .filter_map(|(t, e)| match e {
                AlarmEvent::Raised(r) => Some((*t, r.severity)),
                _ => None,
            })
            .collect()
    }

    fn take(&mut self) -> Vec<(Duration, AlarmEvent)> {
        std::mem::take(&mut self.events)
    }
}

#[test]
fn iteration_is_15_s_with_a_sub_sample_every_second() {
    let mut lab = Lab::oracle();
    lab.memory(15 * S - Duration::from_millis(1), |_| 90.0);
    assert_eq!(lab.samples, 14);
    assert_eq!(lab.ev.iterations(), 0);
    assert!(lab.events.is_empty());
    lab.memory(15 * S, |_| 90.0);
    assert_eq!(lab.samples, 15);
    assert_eq!(lab.ev.iterations(), 1);
    assert_eq!(lab.raised(), [(15 * S, Severity::Critical)]);
    assert_eq!(lab.ev.last_reading(&MEMORY), Some(90.0));
    lab.memory(60 * S, |_| 90.0);
    assert_eq!((lab.samples, lab.ev.iterations()), (60, 4));
}

#[test]
fn two_consecutive_critical_readings_trigger_within_30_s() {
    // Memory goes critical at 1 s: raised at the first iteration end (15 s), abort at the
    // second (30 s), exactly.
    let mut lab = Lab::oracle();
    lab.memory(120 * S, |t| if t >= S { 88.0 } else { 40.0 });
    assert_eq!(lab.raised(), [(15 * S, Severity::Critical)]);
    assert_eq!(lab.aborts(), [(30 * S, 88.0, 88.0)]);
    assert!(lab.ev.critical_memory_abort_fired());
}

#[test]
fn a_rise_in_the_last_sub_samples_is_seen_one_iteration_later() {
    // Critical from 13.5 s: only the 14 s and 15 s sub-samples of the first iteration are
    // critical (2 < K = 3), so the first critical reading is at 30 s and the abort at 45 s.
    let mut lab = Lab::oracle();
    lab.memory(60 * S, |t| if t >= 13 * S + S / 2 { 88.0 } else { 40.0 });
    assert_eq!(lab.raised(), [(30 * S, Severity::Critical)]);
    assert_eq!(lab.aborts(), [(45 * S, 88.0, 88.0)]);
}

#[test]
fn a_two_sub_sample_spike_makes_no_critical_reading() {
    // The worst place for a spike: the last two sub-samples of every iteration.
    let mut lab = Lab::oracle();
    lab.memory(120 * S, |t| {
        let in_iteration = t.as_secs() % 15;
        if in_iteration == 14 || in_iteration == 0 {
            99.0
        } else {
            50.0
        }
    });
    assert!(lab.events.is_empty(), "{:?}", lab.events);
    assert_eq!(lab.ev.last_reading(&MEMORY), Some(50.0));

    // Three sub-samples are no longer a spike: a critical reading.
    let mut lab = Lab::oracle();
    lab.memory(15 * S, |t| if t >= 13 * S { 99.0 } else { 50.0 });
    assert_eq!(lab.raised(), [(15 * S, Severity::Critical)]);
}

#[test]
fn a_dip_between_critical_readings_resets_the_trigger() {
    let mut lab = Lab::oracle();
    // Critical in the first iteration, below critical at the end of the second, critical
    // again from the third on.
    lab.memory(75 * S, |t| match t.as_secs() {
        0..=15 => 90.0,
        16..=30 => 75.0,
        _ => 90.0,
    });
    assert!(lab.raised().contains(&(15 * S, Severity::Critical)));
    // 15 s armed, 30 s dip (reset), 45 s armed again, 60 s fires.
    assert_eq!(lab.aborts(), [(60 * S, 90.0, 90.0)]);
    // The critical memory alarm did not de-escalate or clear during the dip.
    assert!(!lab.events.iter().any(|(_, e)| matches!(
        e,
        AlarmEvent::Cleared { .. } | AlarmEvent::SeverityChanged { .. }
    )));
}

#[test]
fn a_flat_plateau_triggers_and_a_receding_spike_does_not() {
    // Flat at 85 against 80: Oracle's strict "less than" would never fire; the tolerance does.
    let mut lab = Lab::oracle();
    lab.memory(30 * S, |_| 85.0);
    assert_eq!(lab.aborts(), [(30 * S, 85.0, 85.0)]);

    // Noise within the tolerance still triggers.
    let mut lab = Lab::oracle();
    lab.memory(30 * S, |t| if t <= 15 * S { 86.0 } else { 84.5 });
    assert_eq!(lab.aborts(), [(30 * S, 86.0, 84.5)]);

    // Falling by more than the tolerance (95 → 90) does not trigger; the second reading is
    // stored, and a plateau at it triggers one iteration later.
    let mut lab = Lab::oracle();
    lab.memory(45 * S, |t| if t <= 15 * S { 95.0 } else { 90.0 });
    assert_eq!(lab.aborts(), [(45 * S, 90.0, 90.0)]);

    // Falling out of critical: no trigger at all.
    let mut lab = Lab::oracle();
    lab.memory(90 * S, |t| if t <= 15 * S { 95.0 } else { 60.0 });
    assert!(lab.aborts().is_empty());
}

#[test]
fn the_trigger_fires_once_per_raised_alarm() {
    let mut lab = Lab::oracle();
    lab.memory(150 * S, |_| 95.0);
    assert_eq!(lab.aborts().len(), 1);
    // The alarm is re-announced (trap re-sent) every iteration while critical.
    let still = lab
        .events
        .iter()
        .filter(|(_, e)| matches!(e, AlarmEvent::StillCritical(_)))
        .count();
    assert_eq!(still, 9);
    let row = lab.ev.table().get(131_073).expect("raised").clone();
    assert_eq!(row.count, 10);

    // After an operator clear, a still-critical memory raises a new alarm, which can fire
    // again.
    lab.take();
    lab.ev.clear_alarm(131_073, "sbcd").expect("clear");
    assert!(!lab.ev.critical_memory_abort_fired());
    lab.memory(180 * S, |_| 95.0);
    assert_eq!(lab.raised(), [(165 * S, Severity::Critical)]);
    assert_eq!(lab.aborts(), [(180 * S, 95.0, 95.0)]);
}

#[test]
fn severity_escalates_minor_major_critical() {
    let thresholds = [AlarmKind::Memory, AlarmKind::Cpu]
        .into_iter()
        .flat_map(|k| {
            [
                Threshold::new(k, Severity::Minor, 50),
                Threshold::new(k, Severity::Major, 70),
                Threshold::new(k, Severity::Critical, 90),
            ]
        })
        .collect();
    let mut lab = Lab::new(EvaluatorConfig::default(), thresholds);
    let ramp = |t: Duration| match t.as_secs() {
        0..=15 => 55.0,
        16..=30 => 75.0,
        31..=45 => 95.0,
        46..=60 => 75.0,
        _ => 20.0,
    };
    lab.run(75 * S, |_, t| ramp(t));
    let changes: Vec<String> = lab
        .events
        .iter()
        .filter_map(|(t, e)| {
            let t = t.as_secs();
            match e {
                AlarmEvent::Raised(r) => Some(format!("{t} {} raised {}", r.kind, r.severity)),
                AlarmEvent::SeverityChanged { row, previous } => {
                    Some(format!("{t} {} {previous}->{}", row.kind, row.severity))
                }
                AlarmEvent::Cleared { row, by } => {
                    Some(format!("{t} {} cleared {by} at {}", row.kind, row.severity))
                }
                _ => None,
            }
        })
        .collect();
    assert_eq!(
        changes,
        [
            "15 memory raised minor",
            "15 cpu raised minor",
            "30 memory minor->major",
            "30 cpu minor->major",
            "45 memory major->critical",
            "45 cpu major->critical",
            // cpu de-escalates and clears by itself; critical memory stays critical.
            "60 cpu critical->major",
            "75 cpu cleared auto at major",
        ]
    );
    let rows = lab.ev.table().rows();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].id, rows[0].severity),
        (131_073, Severity::Critical)
    );
    assert_eq!(rows[0].threshold, 90);
}

#[test]
fn no_automatic_clear_of_the_critical_memory_alarm() {
    let mut lab = Lab::oracle();
    lab.memory(300 * S, |t| if t <= 15 * S { 90.0 } else { 10.0 });
    let events: Vec<_> = lab.events.iter().map(|(t, e)| (t.as_secs(), e)).collect();
    assert_eq!(events.len(), 1, "only the raise: {events:?}");
    let row = lab.ev.table().get(131_073).expect("still raised");
    assert_eq!(
        (row.severity, row.count, row.value),
        (Severity::Critical, 1, 90.0)
    );

    // A major memory alarm does clear by itself.
    let mut lab = Lab::oracle();
    lab.memory(30 * S, |t| if t <= 15 * S { 75.0 } else { 10.0 });
    assert!(matches!(
        lab.events.last(),
        Some((
            _,
            AlarmEvent::Cleared {
                by: ClearedBy::Auto,
                ..
            }
        ))
    ));
    assert!(lab.ev.table().is_empty());
}

#[test]
fn operator_clear() {
    let mut lab = Lab::new(
        EvaluatorConfig::default(),
        vec![Threshold::new(AlarmKind::Memory, Severity::Critical, 80).with_health_penalty(10)],
    );
    lab.memory(15 * S, |_| 90.0);
    assert_eq!(lab.ev.health().score(), 90);
    lab.take();

    let e = lab.ev.clear_alarm(131_075, "sbcd").expect_err("unknown id");
    assert_eq!(e.to_string(), "no raised alarm 131075 (valid: 131073 sbcd)");
    let e = lab
        .ev
        .clear_alarm(131_073, "berpd")
        .expect_err("wrong task");
    assert!(e.to_string().contains("belongs to task sbcd, not berpd"));

    let row = lab.ev.clear_alarm(131_073, "sbcd").expect("cleared");
    assert_eq!(row.severity, Severity::Critical);
    let events: Vec<_> = std::iter::from_fn(|| lab.ev.poll()).collect();
    assert!(matches!(
        &events[0],
        AlarmEvent::Cleared { row, by: ClearedBy::Operator } if row.id == 131_073
    ));
    assert!(matches!(
        &events[1],
        AlarmEvent::HealthChanged {
            score: 100,
            previous: 90,
            ..
        }
    ));
    assert!(lab.ev.table().is_empty());
    // The armed trigger was forgotten: the next critical reading is a new "first".
    assert_eq!(lab.ev.critical_memory_armed(), None);
}

#[test]
fn health_follows_alarms_and_the_critical_memory_rule() {
    let mut lab = Lab::new(
        EvaluatorConfig::default(),
        vec![
            Threshold::new(AlarmKind::Memory, Severity::Major, 70).with_health_penalty(5),
            Threshold::new(AlarmKind::Memory, Severity::Critical, 80).with_health_penalty(20),
        ],
    );
    lab.memory(15 * S, |_| 75.0);
    assert_eq!(lab.ev.health().score(), 95);
    lab.memory(30 * S, |_| 85.0);
    // The severity change swaps the penalty, it does not add.
    assert_eq!(lab.ev.health().score(), 80);
    let healths: Vec<_> = lab
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            AlarmEvent::HealthChanged {
                score, previous, ..
            } => Some((*previous, *score)),
            _ => None,
        })
        .collect();
    assert_eq!(healths, [(100, 95), (95, 80)]);

    lab.memory(45 * S, |_| 85.0);
    assert_eq!(lab.aborts().len(), 1);
    lab.take();
    lab.ev.deduct_critical_memory();
    assert_eq!(lab.ev.health().score(), 0);
    assert!(lab.ev.health().ineligible_until_restart());
    assert!(matches!(
        lab.ev.poll(),
        Some(AlarmEvent::HealthChanged {
            score: 0,
            previous: 80,
            ..
        })
    ));
    // Clearing the alarm gives back its 20 points but not the 100.
    lab.ev.clear_alarm(131_073, "sbcd").expect("clear");
    assert_eq!(lab.ev.health().score(), 0);
    assert_eq!(lab.ev.health().deductions().len(), 1);
    assert!(lab.ev.health().ineligible_until_restart());

    // Other sources (a heartbeat path) come and go.
    let mut lab = Lab::oracle();
    lab.ev
        .deduct_health("heartbeat-path rear", "rear path lost", 30);
    assert_eq!(lab.ev.health().score(), 70);
    lab.ev.give_back_health("heartbeat-path rear");
    assert_eq!(lab.ev.health().score(), 100);
    assert_eq!(std::iter::from_fn(|| lab.ev.poll()).count(), 2);
}

#[test]
fn too_few_sub_samples_make_no_reading() {
    let mut lab = Lab::oracle();
    let t0 = lab.t0;
    // Only two samples in the first iteration: no reading, nothing raised.
    lab.ev.handle_sample(t0 + 14 * S, AlarmKind::Memory, 99.0);
    lab.ev.handle_sample(t0 + 15 * S, AlarmKind::Memory, 99.0);
    lab.ev.handle_timeout(t0 + 15 * S);
    assert_eq!(lab.ev.iterations(), 1);
    assert_eq!(lab.ev.last_reading(&MEMORY), None);
    assert_eq!(lab.ev.poll(), None);
}

#[test]
fn a_late_caller_skips_missed_iterations_and_keeps_the_phase() {
    let mut lab = Lab::oracle();
    let t0 = lab.t0;
    for s in 13..=15 {
        lab.ev.handle_sample(t0 + s * S, AlarmKind::Memory, 50.0);
    }
    lab.ev.handle_timeout(t0 + 100 * S);
    assert_eq!(lab.ev.iterations(), 1);
    assert!(lab.ev.poll_sample(t0 + 100 * S));
    assert!(!lab.ev.poll_sample(t0 + 100 * S));
    assert_eq!(lab.ev.poll_timeout(), Some(t0 + 101 * S));
    lab.ev.handle_timeout(t0 + 101 * S);
    assert_eq!(lab.ev.iterations(), 1, "next iteration ends at 105 s");
    lab.ev.handle_timeout(t0 + 105 * S);
    assert_eq!(lab.ev.iterations(), 2);
}

#[test]
fn lab_timing_one_second_iterations() {
    let config = EvaluatorConfig {
        iteration: S,
        sub_samples: 10,
        ..EvaluatorConfig::default()
    };
    let mut lab = Lab::new(
        config,
        vec![Threshold::new(AlarmKind::Memory, Severity::Critical, 80)],
    );
    lab.memory(5 * S, |t| if t >= 2 * S { 90.0 } else { 30.0 });
    // Critical from 2 s: raised at the 3 s iteration end, abort at 4 s.
    assert_eq!(lab.raised(), [(3 * S, Severity::Critical)]);
    assert_eq!(lab.aborts(), [(4 * S, 90.0, 90.0)]);
}

#[test]
fn configs_are_checked() {
    let th = Thresholds::default;
    let now = Instant::now();
    let bad = |c: EvaluatorConfig| {
        Evaluator::new(c, th(), now, SystemTime::UNIX_EPOCH)
            .expect_err("refused")
            .to_string()
    };
    assert_eq!(
        bad(EvaluatorConfig {
            sustain: 16,
            ..EvaluatorConfig::default()
        }),
        "sustain 16 out of range (valid: 1..=15)"
    );
    assert!(bad(EvaluatorConfig {
        iteration: Duration::ZERO,
        ..EvaluatorConfig::default()
    })
    .contains("too short"));
    assert!(bad(EvaluatorConfig {
        abort_tolerance: f64::NAN,
        ..EvaluatorConfig::default()
    })
    .contains("tolerance"));
}

#[test]
fn clear_all_at_restart() {
    let mut lab = Lab::oracle();
    lab.memory(15 * S, |_| 90.0);
    lab.take();
    lab.ev.clear_all(ClearedBy::Restart);
    assert!(matches!(
        lab.ev.poll(),
        Some(AlarmEvent::Cleared {
            by: ClearedBy::Restart,
            ..
        })
    ));
    assert!(lab.ev.table().is_empty());
}

fn spool_full(value: f64, health_penalty: u8) -> ConditionAlarm {
    ConditionAlarm {
        id: 131_078,
        task: "accounting".into(),
        kind: AlarmKind::AccountingSpool,
        severity: Severity::Critical,
        value,
        threshold: 100,
        description: "accounting spool full".into(),
        health_penalty,
    }
}

fn drain(ev: &mut Evaluator) -> Vec<AlarmEvent> {
    std::iter::from_fn(|| ev.poll()).collect()
}

#[test]
fn a_condition_alarm_is_raised_refreshed_and_cleared_with_its_events() {
    let mut lab = Lab::oracle();
    let t0 = lab.t0;
    assert!(lab.ev.raise_condition(t0, spool_full(99.0, 10)));
    let events = drain(&mut lab.ev);
    assert!(
        matches!(&events[..], [AlarmEvent::Raised(row), AlarmEvent::HealthChanged { score: 90, previous: 100, .. }]
            if row.id == 131_078 && row.task == "accounting" && row.severity == Severity::Critical),
        "{events:?}"
    );
    // Re-asserted every second: the row is refreshed, nothing is sent again.
    assert!(!lab.ev.raise_condition(t0 + S, spool_full(99.5, 10)));
    assert!(drain(&mut lab.ev).is_empty());
    let row = lab.ev.table().get(131_078).cloned().expect("raised");
    assert!((row.value - 99.5).abs() < f64::EPSILON);
    assert_eq!(row.count, 1);
    assert_eq!(row.first_seen, SystemTime::UNIX_EPOCH);
    assert_eq!(row.last_seen, SystemTime::UNIX_EPOCH + S);
    // Memory iterations go on beside it.
    lab.run(30 * S, |_, _| 10.0);
    assert!(lab.ev.table().get(131_078).is_some());

    let cleared = lab.ev.clear_condition(131_078).expect("was raised");
    assert_eq!(cleared.id, 131_078);
    let events = drain(&mut lab.ev);
    assert!(
        matches!(
            &events[..],
            [
                AlarmEvent::Cleared {
                    by: ClearedBy::Auto,
                    ..
                },
                AlarmEvent::HealthChanged { score: 100, .. }
            ]
        ),
        "{events:?}"
    );
    assert!(lab.ev.table().is_empty());
    assert_eq!(lab.ev.clear_condition(131_078), None);
}

#[test]
fn an_operator_clear_holds_until_the_condition_ends() {
    let mut lab = Lab::oracle();
    let t0 = lab.t0;
    lab.ev.raise_condition(t0, spool_full(99.0, 0));
    let e = lab.ev.clear_alarm(131_078, "sbcd").expect_err("wrong task");
    assert!(e.to_string().contains("belongs to task accounting"), "{e}");
    lab.ev.clear_alarm(131_078, "accounting").expect("cleared");
    let events = drain(&mut lab.ev);
    assert!(
        matches!(
            &events[..],
            [
                AlarmEvent::Raised(_),
                AlarmEvent::Cleared {
                    by: ClearedBy::Operator,
                    ..
                }
            ]
        ),
        "{events:?}"
    );
    // Still full a second later: acknowledged, not raised again.
    assert!(!lab.ev.raise_condition(t0 + S, spool_full(99.0, 0)));
    assert!(lab.ev.table().is_empty());
    // The spool has room (no row, no event), then fills again: raised again.
    assert_eq!(lab.ev.clear_condition(131_078), None);
    assert!(drain(&mut lab.ev).is_empty());
    assert!(lab.ev.raise_condition(t0 + 2 * S, spool_full(99.0, 0)));
}

#[test]
fn a_condition_never_touches_a_threshold_alarm() {
    let mut lab = Lab::oracle();
    let t0 = lab.t0;
    let mut memory = spool_full(99.0, 0);
    memory.kind = AlarmKind::Memory;
    assert!(!lab.ev.raise_condition(t0, memory));
    lab.run(15 * S, |_, _| 75.0);
    assert!(lab.ev.table().get(131_073).is_some());
    let mut same_id = spool_full(99.0, 0);
    same_id.id = 131_073;
    assert!(!lab.ev.raise_condition(t0, same_id));
    assert_eq!(lab.ev.clear_condition(131_073), None);
    assert_eq!(
        lab.ev.table().get(131_073).map(|r| r.kind),
        Some(AlarmKind::Memory)
    );
}

#[test]
fn a_new_evaluator_carries_the_conditions_over() {
    let mut lab = Lab::oracle();
    let t0 = lab.t0;
    lab.ev.raise_condition(t0, spool_full(99.0, 30));
    lab.ev.raise_condition(t0, {
        let mut other = spool_full(50.0, 0);
        other.id = 131_334;
        other
    });
    lab.ev.clear_alarm(131_334, "accounting").expect("cleared");
    lab.run(15 * S, |_, _| 75.0);
    let mut next = Evaluator::new(
        EvaluatorConfig::default(),
        Thresholds::new([Threshold::new(AlarmKind::Cpu, Severity::Minor, 50)]).expect("th"),
        t0 + 16 * S,
        SystemTime::UNIX_EPOCH + 16 * S,
    )
    .expect("config");
    next.carry_conditions(&lab.ev);
    assert!(next.poll().is_none(), "no event: nothing changed");
    let ids: Vec<_> = next.table().rows().iter().map(|r| r.id).collect();
    assert_eq!(ids, [131_078], "the memory alarm is not carried");
    assert_eq!(next.health().score(), 70);
    assert_eq!(
        next.table().get(131_078).map(|r| r.first_seen),
        Some(SystemTime::UNIX_EPOCH)
    );
    // The operator's clear of 131334 is carried too.
    assert!(!next.raise_condition(t0 + 17 * S, {
        let mut other = spool_full(50.0, 0);
        other.id = 131_334;
        other
    }));
}
