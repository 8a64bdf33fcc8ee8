//! The autoscaler of one worker group: how many worker threads the group should run.
//!
//! A sans-IO state machine in the shape of the other cores: the shell measures each worker's busy
//! fraction over one `auto-scaling-cycle` (default [`DEFAULT_CYCLE`], as OpenSIPS), calls
//! [`Autoscaler::handle_cycle`] with those loads and the number of messages waiting in the
//! group's queues, then drains [`Autoscaler::poll`] and starts or drains workers accordingly.
//! No clock and no threads here: time is passed in, so every rule is tested on a virtual clock.
//!
//! The profile (what the operator writes, in OpenSIPS 3 grammar) is [`ScalingProfile`], in
//! `profile.rs`.
//!
//! # The rules, evaluated once per cycle
//! The load of a worker is its busy fraction over the cycle; the load of the group is the mean
//! over its running (not draining) workers. A history keeps the group load of the last
//! `max(M, D)` cycles.
//! 1. **Up by load** (OpenSIPS): at least `N` of the last `M` cycles strictly above `UP%` → add
//!    one worker, never above `MAX`.
//! 2. **Proportional step** (beyond OpenSIPS, as Kubernetes' HPA): when rule 1 fires and the load
//!    of the current cycle is *far above* the threshold, add `ceil(n × load / UP) − n` workers at
//!    once (at least one, capped at `MAX`). "Far above" is [`FAR_ABOVE_FACTOR`] × `UP`, capped at
//!    halfway between `UP` and 100 %, since a busy fraction cannot exceed 100 %: for `UP = 70 %`
//!    it is 85 %, for `UP = 20 %` it is 30 %. Near the threshold one worker per decision is
//!    enough and avoids overshooting; far above it, one per `N` cycles is far too slow. Note that
//!    a saturated group (100 %) hides how much work is really waiting, which is what the queue
//!    trigger below is for.
//! 3. **Up by queue** (AppScale, seed 003): more than [`QUEUE_UP_THRESHOLD`] (7) messages queued
//!    at the end of the cycle → add one worker (never above `MAX`), even when the load rule does
//!    not fire. The queue reacts within one cycle to a burst that a cycle's mean load smooths
//!    out.
//! 4. **Down** (only with a scale-down part): remove one worker only when *all* of these hold:
//!    every one of the last `D` cycles was strictly below `DOWN%`; nothing is queued (AppScale's
//!    "zero requests enqueued"); the group has more than `MIN` workers; the **pre-evaluated**
//!    load after removal, `load × n / (n − 1)` with `load` the mean of the last `D` cycles (as
//!    OpenSIPS estimates it), stays below `UP%`, so removing a worker cannot itself trigger a
//!    scale-up; and the cycle is outside the **guard window**: the `10 × D` cycles following
//!    start-up or the last scale-up (OpenSIPS's protection against flip-flopping). The retired
//!    worker is the least loaded of the cycle (the last of equals), not the last-numbered one;
//!    the shell drains it so that nothing it holds is lost.
//!
//! The two trigger kinds combine asymmetrically: *either* may add a worker (rules 1–3; when both
//! fire the larger step wins), *both* must agree to remove one (rule 4). At most one decision is
//! made per cycle, and an up-decision excludes a down-decision.
//!
//! After a decision the load history is rescaled to the new worker count (`× n / n'`), as
//! OpenSIPS does after a fork: the cycles measured with fewer workers would otherwise count
//! again and add a worker every cycle. The same rescaling after a removal lets a cascade of
//! removals continue only while the predicted load stays below `DOWN%`: the "downscale in
//! cascade" of the OpenSIPS narrative, each step raising the load a little.
//!
//! A group without a profile ([`Autoscaler::fixed`]) keeps its count: it records loads for
//! `show workers` and never decides anything.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

mod profile;

pub use profile::{ProfileError, ScaleDown, ScaleUp, ScalingProfile, MAX_CYCLES, MAX_WORKERS};

/// The largest load a worker is credited with (1000 %): a saturated worker's demand (busy
/// time plus the work it refused or queued) may exceed one worker, not without bound.
pub const MAX_DEMAND: f64 = 10.0;

/// The default length of a cycle (`auto-scaling-cycle`), as OpenSIPS.
pub const DEFAULT_CYCLE: Duration = Duration::from_secs(1);

/// More messages than this waiting in the group's queues at the end of a cycle add a worker.
pub const QUEUE_UP_THRESHOLD: usize = 7;

/// The guard window after start-up or a scale-up is this many times `D` cycles.
pub const GUARD_FACTOR: u64 = 10;

/// "Far above" the up threshold starts at this multiple of it (capped halfway to 100 %).
pub const FAR_ABOVE_FACTOR: f64 = 1.5;

/// How many past decisions [`Autoscaler::history`] keeps.
pub const HISTORY_LEN: usize = 16;

/// Why the autoscaler decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScaleReason {
    /// Rule 1: `cycles_over` of the last `window` cycles were above the up threshold.
    LoadAbove {
        /// Group load of the deciding cycle, percent.
        load: f64,
        /// Cycles of the window above the threshold.
        cycles_over: u32,
        /// The window `M`.
        window: u32,
    },
    /// Rule 2: the load is far above the threshold; `desired` workers are what
    /// `ceil(n × load / UP)` asks for (before the `MAX` cap).
    LoadFarAbove {
        /// Group load of the deciding cycle, percent.
        load: f64,
        /// `ceil(n × load / UP)`.
        desired: usize,
    },
    /// Rule 3: more than [`QUEUE_UP_THRESHOLD`] messages were queued (one worker more, or the
    /// proportional step when the load is also far above the threshold).
    QueueDepth {
        /// Messages queued at the end of the cycle.
        queued: usize,
    },
    /// Rule 4: all of the last `D` cycles below the down threshold, nothing queued.
    LoadBelow {
        /// Mean group load of the last `D` cycles, percent.
        load: f64,
        /// The pre-evaluated load after removal, `load × n / (n − 1)`, percent.
        estimated: f64,
    },
}

/// What the shell must do to the group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScaleDecision {
    /// Start `add` workers.
    Up {
        /// How many workers to start (at least one).
        add: usize,
        /// Why.
        reason: ScaleReason,
    },
    /// Drain and stop one worker.
    Down {
        /// Index, in the `loads` of the deciding cycle, of the least-loaded worker: the one to
        /// retire.
        retire: usize,
        /// Why.
        reason: ScaleReason,
    },
}

/// One past decision, for `show workers`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleRecord {
    /// When the deciding cycle was handled.
    pub at: Instant,
    /// The number of the deciding cycle (the first cycle is 1).
    pub cycle: u64,
    /// Workers before the decision.
    pub from: usize,
    /// Workers after the decision.
    pub to: usize,
    /// The decision.
    pub decision: ScaleDecision,
}

/// The autoscaler of one worker group.
#[derive(Debug, Clone)]
pub struct Autoscaler {
    profile: Option<ScalingProfile>,
    cycle_len: Duration,
    workers: usize,
    cycles: u64,
    /// The cycle of start-up (0) or of the last scale-up: the guard window follows it.
    guard_from: u64,
    /// Group load per cycle, percent, oldest first, rescaled to the current worker count.
    loads: VecDeque<f64>,
    last_load: Option<f64>,
    last_queued: usize,
    last_cycle_at: Instant,
    pending: VecDeque<ScaleDecision>,
    history: VecDeque<ScaleRecord>,
}

impl Autoscaler {
    /// An autoscaler for a group started with `initial_workers` workers at `now`, following
    /// `profile`.
    pub fn new(profile: ScalingProfile, initial_workers: usize, now: Instant) -> Self {
        Self::with_profile(Some(profile), initial_workers, now)
    }

    /// A group with a fixed count (no profile): it records loads and never decides.
    pub fn fixed(workers: usize, now: Instant) -> Self {
        Self::with_profile(None, workers, now)
    }

    /// An autoscaler following `profile`, or a fixed group when `profile` is `None`.
    pub fn with_profile(profile: Option<ScalingProfile>, workers: usize, now: Instant) -> Self {
        Self {
            profile,
            cycle_len: DEFAULT_CYCLE,
            workers,
            cycles: 0,
            guard_from: 0,
            loads: VecDeque::new(),
            last_load: None,
            last_queued: 0,
            last_cycle_at: now,
            pending: VecDeque::new(),
            history: VecDeque::new(),
        }
    }

    /// Sets the cycle length (`auto-scaling-cycle`) used by [`Self::poll_timeout`].
    #[must_use]
    pub fn with_cycle(mut self, cycle: Duration) -> Self {
        self.cycle_len = cycle;
        self
    }

    /// The profile, or `None` for a fixed group.
    pub fn profile(&self) -> Option<&ScalingProfile> {
        self.profile.as_ref()
    }

    /// The number of workers, after the last decision.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// How many cycles have been handled.
    pub fn cycles(&self) -> u64 {
        self.cycles
    }

    /// The group load of the last cycle, percent.
    pub fn last_load(&self) -> Option<f64> {
        self.last_load
    }

    /// The messages queued at the end of the last cycle.
    pub fn last_queued(&self) -> usize {
        self.last_queued
    }

    /// How many more cycles the guard window forbids scaling down (0: not guarded).
    pub fn guard_remaining(&self) -> u64 {
        let guard = self.profile.map_or(0, |p| p.guard_cycles());
        (self.guard_from + guard).saturating_sub(self.cycles)
    }

    /// The last decisions, oldest first (at most [`HISTORY_LEN`]).
    pub fn history(&self) -> impl ExactSizeIterator<Item = &ScaleRecord> + '_ {
        self.history.iter()
    }

    /// The last decision, if any.
    pub fn last_decision(&self) -> Option<&ScaleRecord> {
        self.history.back()
    }

    /// When the next cycle is due: one cycle after the last one handled (or after creation).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        Some(self.last_cycle_at + self.cycle_len)
    }

    /// Feeds one cycle: `loads` holds the load of each running, not draining, worker over the
    /// cycle: its busy fraction (0..=1), or more when the shell also counts the work it was
    /// offered and could not do (requests it refused or left queued: the demand of a saturated
    /// worker, capped at [`MAX_DEMAND`]); `queued` the messages waiting in the group's queues
    /// at its end.
    /// An empty `loads` is ignored (a group always has a worker). A decision, if any, is then
    /// returned by [`Self::poll`]; the autoscaler counts it as carried out.
    pub fn handle_cycle(&mut self, now: Instant, loads: &[f64], queued: usize) {
        self.last_cycle_at = now;
        if loads.is_empty() {
            return;
        }
        let n = loads.len();
        self.workers = n;
        self.cycles += 1;
        let percent = |l: f64| {
            if l.is_nan() {
                0.0
            } else {
                l.clamp(0.0, MAX_DEMAND) * 100.0
            }
        };
        let load = loads.iter().map(|&l| percent(l)).sum::<f64>() / n as f64;
        self.last_load = Some(load);
        self.last_queued = queued;
        let Some(profile) = self.profile else {
            return;
        };
        self.loads.push_back(load);
        while self.loads.len() > profile.window() {
            self.loads.pop_front();
        }
        let Some(decision) = self.decide(&profile, n, loads, load, queued) else {
            return;
        };
        let to = match decision {
            ScaleDecision::Up { add, .. } => {
                self.guard_from = self.cycles;
                n + add
            }
            ScaleDecision::Down { .. } => n - 1,
        };
        let factor = n as f64 / to as f64;
        for l in &mut self.loads {
            *l = (*l * factor).min(100.0);
        }
        self.workers = to;
        if self.history.len() == HISTORY_LEN {
            self.history.pop_front();
        }
        self.history.push_back(ScaleRecord {
            at: now,
            cycle: self.cycles,
            from: n,
            to,
            decision,
        });
        self.pending.push_back(decision);
    }

    /// The next decision to carry out, if any.
    #[must_use]
    pub fn poll(&mut self) -> Option<ScaleDecision> {
        self.pending.pop_front()
    }

    fn decide(
        &self,
        profile: &ScalingProfile,
        n: usize,
        loads: &[f64],
        load: f64,
        queued: usize,
    ) -> Option<ScaleDecision> {
        let up = profile.up();
        let up_threshold = f64::from(up.threshold);
        let max = up.max as usize;

        // Rules 1 and 2: load.
        let cycles_over = self
            .loads
            .iter()
            .rev()
            .take(up.within as usize)
            .filter(|&&l| l > up_threshold)
            .count();
        let mut step: Option<(usize, ScaleReason)> = None;
        if cycles_over >= up.cycles as usize {
            step = Some(if load >= profile.far_above() {
                // Tolerance so that an exact ratio (5.000000001) does not round up.
                let desired = (n as f64 * load / up_threshold - 1e-9).ceil() as usize;
                (
                    desired.saturating_sub(n).max(1),
                    ScaleReason::LoadFarAbove { load, desired },
                )
            } else {
                (
                    1,
                    ScaleReason::LoadAbove {
                        load,
                        cycles_over: cycles_over as u32,
                        window: up.within,
                    },
                )
            });
        }
        // Rule 3: queue depth; as large a step as the load asks for when it is far above.
        if step.is_none() && queued > QUEUE_UP_THRESHOLD {
            let add = if load >= profile.far_above() {
                let desired = (n as f64 * load / up_threshold - 1e-9).ceil() as usize;
                desired.saturating_sub(n).max(1)
            } else {
                1
            };
            step = Some((add, ScaleReason::QueueDepth { queued }));
        }
        if let Some((add, reason)) = step {
            let room = max.saturating_sub(n);
            return (room > 0).then_some(ScaleDecision::Up {
                add: add.min(room),
                reason,
            });
        }

        // Rule 4: down, only when every condition holds.
        let down = profile.down()?;
        let d = down.cycles as usize;
        let guarded = self.cycles <= self.guard_from + profile.guard_cycles();
        if queued > 0 || n <= down.min as usize || guarded || self.loads.len() < d {
            return None;
        }
        let recent = self.loads.iter().rev().take(d);
        if !recent.clone().all(|&l| l < f64::from(down.threshold)) {
            return None;
        }
        let mean = recent.sum::<f64>() / d as f64;
        let estimated = mean * n as f64 / (n - 1) as f64;
        if estimated >= up_threshold {
            return None;
        }
        // The least-loaded worker; the last of equals.
        let retire = loads
            .iter()
            .enumerate()
            .fold((0, f64::INFINITY), |(bi, bl), (i, &l)| {
                let l = if l.is_nan() { 0.0 } else { l };
                if l <= bl {
                    (i, l)
                } else {
                    (bi, bl)
                }
            })
            .0;
        Some(ScaleDecision::Down {
            retire,
            reason: ScaleReason::LoadBelow {
                load: mean,
                estimated,
            },
        })
    }
}

#[cfg(test)]
mod tests;
