//! The autoscaler's rules and the profile grammar, on a virtual clock.

use super::*;

const PROFILE_A: &str = "scale up to 6 on 70% for 4 cycles within 5 \
                         scale down to 2 on 18% for 10 cycles";

fn profile(s: &str) -> ScalingProfile {
    ScalingProfile::parse(s).expect("valid profile")
}

/// A group on a virtual clock: `demand` is the total busy time per cycle, in workers,
/// spread evenly over the running workers; decisions are carried out at once.
struct Group {
    scaler: Autoscaler,
    t0: Instant,
    n: usize,
    log: Vec<(u64, ScaleDecision)>,
}

impl Group {
    fn new(p: Option<ScalingProfile>, n: usize) -> Self {
        let t0 = Instant::now();
        Self {
            scaler: Autoscaler::with_profile(p, n, t0),
            t0,
            n,
            log: Vec::new(),
        }
    }

    fn cycle_loads(&mut self, loads: &[f64], queued: usize) -> Option<ScaleDecision> {
        let c = self.scaler.cycles() + 1;
        let now = self.t0 + DEFAULT_CYCLE * c as u32;
        self.scaler.handle_cycle(now, loads, queued);
        let d = self.scaler.poll();
        assert_eq!(self.scaler.poll(), None, "one decision per cycle");
        match d {
            Some(ScaleDecision::Up { add, .. }) => self.n += add,
            Some(ScaleDecision::Down { retire, .. }) => {
                assert!(retire < self.n);
                self.n -= 1;
            }
            None => {}
        }
        assert_eq!(self.scaler.workers(), self.n);
        if let Some(d) = d {
            self.log.push((c, d));
        }
        d
    }

    fn cycle(&mut self, demand: f64, queued: usize) -> Option<ScaleDecision> {
        let per = (demand / self.n as f64).min(1.0);
        let loads = vec![per; self.n];
        self.cycle_loads(&loads, queued)
    }

    /// Runs `cycles` cycles at `demand`; returns the worker count after each.
    fn run(&mut self, cycles: usize, demand: f64) -> Vec<usize> {
        (0..cycles)
            .map(|_| {
                self.cycle(demand, 0);
                self.n
            })
            .collect()
    }
}

fn is_up(d: Option<ScaleDecision>) -> bool {
    matches!(d, Some(ScaleDecision::Up { .. }))
}

/// The OpenSIPS blog's narrative, PROFILE_A, one cycle per second.
#[test]
fn opensips_narrative() {
    let mut g = Group::new(Some(profile(PROFILE_A)), 4);
    // ~10 CPS on 4 workers: ~7 %. Between seconds 20 and 60 the traffic rises, but not
    // above 25 % of load: nothing happens.
    assert!(g.run(20, 0.28).iter().all(|&n| n == 4));
    assert!(g.run(40, 1.0).iter().all(|&n| n == 4));
    // Back to 7 %: no removal inside the guard window (100 cycles after start-up)...
    assert!(g.run(40, 0.28).iter().all(|&n| n == 4));
    assert_eq!(g.scaler.cycles(), 100);
    assert_eq!(g.scaler.guard_remaining(), 0);
    assert!(g.log.is_empty());
    // ...then a cascade down to the minimum, one worker per cycle, the load rising a bit.
    assert_eq!(g.run(5, 0.28), vec![3, 2, 2, 2, 2]);
    assert_eq!(g.log.len(), 2);
    assert_eq!(
        g.log[0].0, 101,
        "first removal right after the guard window"
    );
    assert!((g.scaler.last_load().expect("load") - 14.0).abs() < 1e-9);

    // From second ~120 the traffic rises above 70 %: one worker per 4 hot cycles of 5.
    let mut counts = Vec::new();
    for demand in [1.5, 2.25, 3.0, 3.75] {
        // 75 % with the current count.
        let before = g.n;
        let steps = g.run(4, demand);
        assert_eq!(steps[..3], [before; 3], "4 of 5 cycles are needed");
        counts.push(steps[3]);
    }
    assert_eq!(counts, vec![3, 4, 5, 6]);
    // Still hot at 6: never above MAX.
    assert!(g.run(20, 5.0).iter().all(|&n| n == 6));
    assert!(g.run(20, 50.0).iter().all(|&n| n == 6));

    // The load falls below 18 %: nothing for 100 cycles after the last scale-up, then the
    // cascade stops where the predicted load would reach 18 %.
    let last_up = g.log.last().expect("an up").0;
    let steps = g.run(110, 0.6);
    let first_down = g
        .log
        .iter()
        .find(|(c, d)| *c > last_up && matches!(d, ScaleDecision::Down { .. }))
        .expect("a removal")
        .0;
    assert_eq!(first_down, last_up + 101);
    assert_eq!(*steps.last().expect("steps"), 3, "6 → 5 → 4 → 3 at 20 %");
    // Every removal was pre-evaluated below 70 %.
    for (_, d) in &g.log {
        if let ScaleDecision::Down {
            reason: ScaleReason::LoadBelow { estimated, .. },
            ..
        } = d
        {
            assert!(*estimated < 70.0);
        }
    }

    // A small spike adds a worker; back to 10 CPS, removal down to 2 after the guard.
    assert_eq!(*g.run(4, 2.4).last().expect("steps"), 4);
    let steps = g.run(150, 0.2);
    assert!(steps[..100].iter().all(|&n| n == 4), "guard after the fork");
    assert_eq!(*steps.last().expect("steps"), 2, "never below MIN");
    assert!(steps.iter().all(|&n| n >= 2));
}

#[test]
fn proportional_step_when_far_above() {
    let p = profile(PROFILE_A);
    assert!((p.far_above() - 85.0).abs() < 1e-9);
    let mut g = Group::new(Some(p), 3);
    // 3 workers saturated: ceil(3 × 100 / 70) = 5 → add 2 at once.
    let steps = g.run(4, 3.0);
    assert_eq!(steps, vec![3, 3, 3, 5]);
    assert!(matches!(
        g.log[0].1,
        ScaleDecision::Up {
            add: 2,
            reason: ScaleReason::LoadFarAbove { desired: 5, .. }
        }
    ));
    // 5 workers saturated: ceil(5 × 100 / 70) = 8, capped at MAX 6.
    let steps = g.run(4, 10.0);
    assert_eq!(steps, vec![5, 5, 5, 6]);
    assert!(matches!(
        g.log[1].1,
        ScaleDecision::Up {
            add: 1,
            reason: ScaleReason::LoadFarAbove { desired: 8, .. }
        }
    ));
    // Just above the threshold (80 % < 85 %): one at a time.
    let mut g = Group::new(Some(p), 2);
    g.run(4, 1.6);
    assert!(matches!(
        g.log[0].1,
        ScaleDecision::Up {
            add: 1,
            reason: ScaleReason::LoadAbove {
                cycles_over: 4,
                window: 5,
                ..
            }
        }
    ));
}

#[test]
fn four_of_five_cycles_not_three() {
    let mut g = Group::new(Some(profile(PROFILE_A)), 2);
    // Hot, cold, hot, hot: 3 of 5.
    for demand in [1.8, 0.4, 1.8, 1.8] {
        assert_eq!(g.cycle(demand, 0), None);
    }
    // The 4th hot cycle within 5.
    assert!(is_up(g.cycle(1.8, 0)));
    // Exactly at the threshold does not count (strictly above).
    let mut g = Group::new(Some(profile(PROFILE_A)), 2);
    assert!(g.run(10, 1.4).iter().all(|&n| n == 2));
}

#[test]
fn pre_evaluated_load_refuses_a_removal() {
    let p = profile("scale up to 4 on 40% for 2 cycles scale down to 1 on 30% for 2 cycles");
    let mut g = Group::new(Some(p), 2);
    // 25 % on 2 workers would be 50 % on 1: above the 40 % up threshold, so never removed.
    assert!(g.run(100, 0.5).iter().all(|&n| n == 2));
    // 15 % → 30 % on 1 worker: allowed, once the guard window (20 cycles) has passed.
    let steps = g.run(30, 0.3);
    assert_eq!(*steps.last().expect("steps"), 1);
    assert!(matches!(
        g.log[0].1,
        ScaleDecision::Down {
            reason: ScaleReason::LoadBelow { estimated, .. },
            ..
        } if (estimated - 30.0).abs() < 1e-9
    ));
}

#[test]
fn guard_window_prevents_flip_flop() {
    let p = profile("scale up to 6 on 70% for 2 cycles scale down to 1 on 20% for 3 cycles");
    assert_eq!(p.guard_cycles(), 30);
    let mut g = Group::new(Some(p), 1);
    g.run(31, 0.1);
    assert_eq!(g.n, 1, "at MIN");
    assert_eq!(g.run(2, 0.9), vec![1, 2]);
    let up_cycle = g.scaler.cycles();
    assert_eq!(g.scaler.guard_remaining(), 30);
    // The load collapses at once: no removal for 30 cycles after the scale-up.
    let steps = g.run(31, 0.1);
    assert!(steps[..30].iter().all(|&n| n == 2));
    assert_eq!(steps[30], 1);
    assert_eq!(g.log.last().expect("down").0, up_cycle + 31);
}

#[test]
fn retires_the_least_loaded_worker() {
    let p = profile("scale up to 6 on 70% for 2 cycles scale down to 1 on 20% for 1 cycles");
    let mut g = Group::new(Some(p), 4);
    let loads = [0.10, 0.02, 0.05, 0.02];
    for _ in 0..10 {
        assert_eq!(g.cycle_loads(&loads, 0), None);
    }
    match g.cycle_loads(&loads, 0) {
        Some(ScaleDecision::Down { retire, .. }) => assert_eq!(retire, 3, "last of equals"),
        d => panic!("expected a removal, got {d:?}"),
    }
    match g.cycle_loads(&[0.01, 0.2, 0.03], 0) {
        Some(ScaleDecision::Down { retire, .. }) => assert_eq!(retire, 0),
        d => panic!("expected a removal, got {d:?}"),
    }
}

#[test]
fn queue_trigger_adds_and_vetoes_removal() {
    let mut g = Group::new(Some(profile(PROFILE_A)), 2);
    assert_eq!(g.cycle(0.2, 7), None, "7 queued is not more than 7");
    assert!(matches!(
        g.cycle(0.2, 8),
        Some(ScaleDecision::Up {
            add: 1,
            reason: ScaleReason::QueueDepth { queued: 8 }
        })
    ));
    assert_eq!(g.n, 3);
    // A queue scale-up starts the guard window too.
    assert_eq!(g.scaler.guard_remaining(), 100);
    // Idle but with messages waiting: no removal, however long.
    g.run(5, 0.1);
    for _ in 0..200 {
        assert_eq!(g.cycle(0.1, 1), None);
    }
    // Nothing queued: the load rule may remove.
    assert!(matches!(g.cycle(0.1, 0), Some(ScaleDecision::Down { .. })));
    // Saturated with a demand of 157 % (busy plus refused work): the queue trigger takes
    // the proportional step at once, ceil(2 x 157 / 70) = 5 workers.
    let mut g = Group::new(Some(profile(PROFILE_A)), 2);
    assert!(matches!(
        g.cycle_loads(&[1.57, 1.57], 40),
        Some(ScaleDecision::Up {
            add: 3,
            reason: ScaleReason::QueueDepth { queued: 40 }
        })
    ));
    assert_eq!(g.n, 5);
    // At MAX the queue adds nothing.
    let mut g = Group::new(Some(profile(PROFILE_A)), 6);
    assert_eq!(g.cycle(0.5, 1000), None);
}

#[test]
fn bounds_and_fixed_groups() {
    // No scale-down part: never removes.
    let mut g = Group::new(Some(profile("scale up to 3 on 50% for 1 cycles")), 2);
    assert!(g.run(500, 0.0).iter().all(|&n| n == 2));
    assert_eq!(g.run(3, 10.0), vec![3, 3, 3], "never above MAX");
    // A fixed group records loads and never decides.
    let mut g = Group::new(None, 3);
    for _ in 0..300 {
        assert_eq!(g.cycle(3.0, 1000), None);
    }
    for _ in 0..300 {
        assert_eq!(g.cycle(0.0, 0), None);
    }
    assert_eq!(g.scaler.workers(), 3);
    assert_eq!(g.scaler.last_load(), Some(0.0));
    assert_eq!(g.scaler.history().len(), 0);
    // An empty cycle is ignored.
    let t = g.t0;
    g.scaler.handle_cycle(t, &[], 0);
    assert_eq!(g.scaler.cycles(), 600);
}

#[test]
fn history_is_bounded_and_timestamped() {
    let p = profile("scale up to 64 on 50% for 1 cycles scale down to 1 on 10% for 1 cycles");
    let mut g = Group::new(Some(p), 1);
    let t0 = g.t0;
    for _ in 0..40 {
        // 60 %: one worker per cycle.
        let loads = vec![0.6; g.n];
        assert!(is_up(g.cycle_loads(&loads, 0)));
    }
    assert_eq!(g.n, 41);
    assert_eq!(g.scaler.history().len(), HISTORY_LEN);
    let last = *g.scaler.last_decision().expect("a decision");
    assert_eq!(last.cycle, 40);
    assert_eq!(last.at, t0 + Duration::from_secs(40));
    assert_eq!((last.from, last.to), (40, 41));
    assert_eq!(g.scaler.poll_timeout(), Some(t0 + Duration::from_secs(41)));
    let cycles: Vec<u64> = g.scaler.history().map(|r| r.cycle).collect();
    assert_eq!(
        cycles,
        (25..=40).collect::<Vec<_>>(),
        "the last 16, oldest first"
    );
}

#[test]
fn parse_and_display_round_trip() {
    let p = profile(PROFILE_A);
    assert_eq!(
        *p.up(),
        ScaleUp {
            max: 6,
            threshold: 70,
            cycles: 4,
            within: 5
        }
    );
    assert_eq!(
        p.down(),
        Some(&ScaleDown {
            min: 2,
            threshold: 18,
            cycles: 10
        })
    );
    assert_eq!(p.guard_cycles(), 100);
    assert_eq!(
        p.to_string(),
        PROFILE_A.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    assert_eq!(profile(&p.to_string()), p);
    // Two lines, `within` omitted (defaults to `for`), `70 %`, any case.
    let q = profile("SCALE UP TO 6 on 70 % for 4 cycles\n  scale down to 2 on 18% for 10 cycles");
    assert_eq!(q.up().within, 4);
    assert_eq!(
        q.to_string(),
        "scale up to 6 on 70% for 4 cycles scale down to 2 on 18% for 10 cycles"
    );
    assert_eq!(
        "scale up to 2 on 90% for 1 cycles"
            .parse::<ScalingProfile>()
            .map(|p| p.down().is_none()),
        Ok(true)
    );
    // The configuration's numbers.
    assert_eq!(
        ScalingProfile::from_settings(6, 70, 4, Some(5), Some(2), Some(18), Some(10)),
        Ok(p)
    );
    assert_eq!(
        ScalingProfile::from_settings(6, 70, 4, None, Some(2), None, Some(10)),
        Err(ProfileError::IncompleteScaleDown)
    );
}

#[test]
fn parse_errors_name_the_word_and_what_is_valid() {
    let err = |s: &str| ScalingProfile::parse(s).expect_err("invalid profile");
    assert_eq!(
        err("scale up to six on 70% for 4 cycles"),
        ProfileError::UnexpectedWord {
            position: 4,
            found: "six".into(),
            expected: "MAX, the most workers (1..=64)"
        }
    );
    assert_eq!(
        err("scale up to 6 on 70 for 4 cycles").to_string(),
        "word 6 `70`: expected UP, a percentage like `70%`"
    );
    assert_eq!(
        err("scale up to 6 on 70% for 4").to_string(),
        "the profile ends early: expected `cycles`"
    );
    assert_eq!(
        err("scale up to 6 on 70% for 4 cycles during 5").to_string(),
        "word 10 `during`: expected `within M`, `scale down to …` or the end"
    );
    assert_eq!(
        err("scale up to 6 on 70% for 4 cycles scale down to 2 on 18% for 10 cycles now")
            .to_string(),
        "word 19 `now`: expected the end of the profile"
    );
    assert_eq!(
        err("scale up to 6 on 170% for 4 cycles").to_string(),
        "on UP% is 170: valid is 1..=100"
    );
    assert_eq!(
        err("scale up to 6 on 70% for 0 cycles").to_string(),
        "for N cycles is 0: valid is 1..=1000"
    );
    assert_eq!(
        err("scale up to 6 on 70% for 4 cycles within 3"),
        ProfileError::WithinBelowFor {
            cycles: 4,
            within: 3
        }
    );
    assert_eq!(
        err("scale up to 2 on 70% for 4 cycles scale down to 2 on 18% for 10 cycles"),
        ProfileError::MaxNotAboveMin { max: 2, min: 2 }
    );
    assert_eq!(
        err("scale up to 6 on 18% for 4 cycles scale down to 2 on 18% for 10 cycles").to_string(),
        "scale up on 18% must be above scale down on 18%"
    );
    assert_eq!(
        err("scale up to 6 on 70% for 4 cycles scale down to 0 on 18% for 10 cycles").to_string(),
        "scale down to MIN is 0: valid is 1..=64 (omit the scale-down part to never scale \
         down)"
    );
    assert_eq!(
        err("scale up to 1000 on 70% for 4 cycles").to_string(),
        "scale up to MAX is 1000: valid is 1..=64"
    );
    assert_eq!(
        err(""),
        ProfileError::MissingWord {
            expected: "`scale`"
        }
    );
}
