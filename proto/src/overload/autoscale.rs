//! The autoscaler of one worker group: how many worker threads the group should run.
//!
//! A sans-IO state machine in the shape of the other cores: the shell measures each worker's busy
//! fraction over one `auto-scaling-cycle` (default [`DEFAULT_CYCLE`], as OpenSIPS), calls
//! [`Autoscaler::handle_cycle`] with those loads and the number of messages waiting in the
//! group's queues, then drains [`Autoscaler::poll`] and starts or drains workers accordingly.
//! No clock and no threads here: time is passed in, so every rule is tested on a virtual clock.
//!
//! # The profile (OpenSIPS 3 grammar)
//! ```text
//! scale up to MAX on UP% for N cycles [within M] [scale down to MIN on DOWN% for D cycles]
//! ```
//! Validated as OpenSIPS validates it, but for the most workers: `1 ≤ MAX ≤ 64` (OpenSIPS:
//! 999; a group here has at most [`MAX_WORKERS`]), `1 ≤ UP ≤ 100`, `1 ≤ N ≤ M ≤ 1000` (`M`
//! defaults to `N`); with a scale-down part, `1 ≤ MIN < MAX`, `DOWN < UP`,
//! `1 ≤ D ≤ 1000`. OpenSIPS reads `scale down to 0` as "no scale-down"; here that is spelled by
//! omitting the part, so a group can never be scaled to zero workers.
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
use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

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

/// The most workers a group may have: `sip-config.workers` and a profile's `MAX`/`MIN`
/// (`sbc_config::MAX_WORKERS`, checked to agree by the `sbc` crate's tests).
pub const MAX_WORKERS: u32 = 64;

/// The largest number of cycles in `for` / `within` (`sbc_config`'s bound too).
pub const MAX_CYCLES: u32 = 1000;

/// The scale-up part of a profile: `scale up to MAX on UP% for N cycles within M`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleUp {
    /// `MAX`: the most workers the group may run.
    pub max: u32,
    /// `UP`: the load percent above which a cycle counts for scaling up.
    pub threshold: u8,
    /// `N`: how many cycles of the window must be above `UP`.
    pub cycles: u32,
    /// `M`: the window, in cycles (`N` when not written).
    pub within: u32,
}

/// The optional scale-down part of a profile: `scale down to MIN on DOWN% for D cycles`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleDown {
    /// `MIN`: the fewest workers the group may run.
    pub min: u32,
    /// `DOWN`: the load percent below which a cycle counts for scaling down.
    pub threshold: u8,
    /// `D`: how many consecutive cycles must be below `DOWN`.
    pub cycles: u32,
}

/// A validated auto-scaling profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScalingProfile {
    up: ScaleUp,
    down: Option<ScaleDown>,
}

/// Why a profile is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// A word is not what the grammar allows at its place.
    #[error("word {position} `{found}`: expected {expected}")]
    UnexpectedWord {
        /// 1-based position of the word in the profile.
        position: usize,
        /// The word found.
        found: String,
        /// What is valid there.
        expected: &'static str,
    },
    /// The profile ends where the grammar needs more.
    #[error("the profile ends early: expected {expected}")]
    MissingWord {
        /// What is valid there.
        expected: &'static str,
    },
    /// A number is outside its valid range.
    #[error("{field} is {value}: valid is {valid}")]
    OutOfRange {
        /// The number, named as in the grammar.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The valid range.
        valid: &'static str,
    },
    /// `scale up to MAX` is not above `scale down to MIN`.
    #[error("scale up to {max} must be above scale down to {min}")]
    MaxNotAboveMin {
        /// `MAX`.
        max: u32,
        /// `MIN`.
        min: u32,
    },
    /// The up threshold is not above the down threshold.
    #[error("scale up on {up}% must be above scale down on {down}%")]
    UpNotAboveDown {
        /// `UP`.
        up: u8,
        /// `DOWN`.
        down: u8,
    },
    /// `within M` is smaller than `for N`.
    #[error("within {within} must be at least for {cycles} cycles")]
    WithinBelowFor {
        /// `N`.
        cycles: u32,
        /// `M`.
        within: u32,
    },
    /// Some but not all of `scale-down-to`, `scale-down-on`, `scale-down-for` are set.
    #[error("scale-down-to, scale-down-on and scale-down-for must be all set or all absent")]
    IncompleteScaleDown,
}

fn check_range(
    field: &'static str,
    value: u64,
    lo: u64,
    hi: u64,
    valid: &'static str,
) -> Result<(), ProfileError> {
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(ProfileError::OutOfRange {
            field,
            value,
            valid,
        })
    }
}

impl ScalingProfile {
    /// A profile from its parts, validated as OpenSIPS validates it.
    pub fn new(up: ScaleUp, down: Option<ScaleDown>) -> Result<Self, ProfileError> {
        check_range(
            "scale up to MAX",
            up.max.into(),
            1,
            MAX_WORKERS.into(),
            "1..=64",
        )?;
        check_range("on UP%", up.threshold.into(), 1, 100, "1..=100")?;
        check_range(
            "for N cycles",
            up.cycles.into(),
            1,
            MAX_CYCLES.into(),
            "1..=1000",
        )?;
        check_range(
            "within M",
            up.within.into(),
            1,
            MAX_CYCLES.into(),
            "1..=1000",
        )?;
        if up.within < up.cycles {
            return Err(ProfileError::WithinBelowFor {
                cycles: up.cycles,
                within: up.within,
            });
        }
        if let Some(down) = down {
            check_range(
                "scale down to MIN",
                down.min.into(),
                1,
                MAX_WORKERS.into(),
                "1..=64 (omit the scale-down part to never scale down)",
            )?;
            check_range("on DOWN%", down.threshold.into(), 0, 100, "0..=100")?;
            check_range(
                "for D cycles",
                down.cycles.into(),
                1,
                MAX_CYCLES.into(),
                "1..=1000",
            )?;
            if up.max <= down.min {
                return Err(ProfileError::MaxNotAboveMin {
                    max: up.max,
                    min: down.min,
                });
            }
            if up.threshold <= down.threshold {
                return Err(ProfileError::UpNotAboveDown {
                    up: up.threshold,
                    down: down.threshold,
                });
            }
        }
        Ok(Self { up, down })
    }

    /// A profile from the plain numbers of the configuration's `auto-scaling-profile`
    /// (`scale-up-to`, `scale-up-on`, `scale-up-for`, `scale-up-within`, `scale-down-to`,
    /// `scale-down-on`, `scale-down-for`); the three scale-down numbers are all set or all
    /// absent.
    pub fn from_settings(
        scale_up_to: u32,
        scale_up_on: u8,
        scale_up_for: u32,
        scale_up_within: Option<u32>,
        scale_down_to: Option<u32>,
        scale_down_on: Option<u8>,
        scale_down_for: Option<u32>,
    ) -> Result<Self, ProfileError> {
        let up = ScaleUp {
            max: scale_up_to,
            threshold: scale_up_on,
            cycles: scale_up_for,
            within: scale_up_within.unwrap_or(scale_up_for),
        };
        let down = match (scale_down_to, scale_down_on, scale_down_for) {
            (None, None, None) => None,
            (Some(min), Some(threshold), Some(cycles)) => Some(ScaleDown {
                min,
                threshold,
                cycles,
            }),
            _ => return Err(ProfileError::IncompleteScaleDown),
        };
        Self::new(up, down)
    }

    /// Parses the one-line grammar
    /// `scale up to MAX on UP% for N cycles [within M] [scale down to MIN on DOWN% for D cycles]`
    /// (keywords case-insensitive, any whitespace between words, `70%` or `70 %`).
    pub fn parse(s: &str) -> Result<Self, ProfileError> {
        let mut p = Parser {
            words: s.split_whitespace().enumerate().peekable(),
        };
        p.keyword("scale", "`scale`")?;
        p.keyword("up", "`up`")?;
        p.keyword("to", "`to`")?;
        let max = p.number("MAX, the most workers (1..=64)")?;
        p.keyword("on", "`on`")?;
        let up_threshold = p.percent("UP, a percentage like `70%`")?;
        p.keyword("for", "`for`")?;
        let cycles = p.number("N, a number of cycles (1..=1000)")?;
        p.cycles_keyword()?;
        let within = if p.next_is("within") {
            p.keyword("within", "`within`")?;
            p.number("M, a number of cycles (N..=1000)")?
        } else {
            cycles
        };
        let down = if p.at_end() {
            None
        } else {
            p.keyword("scale", "`within M`, `scale down to …` or the end")?;
            p.keyword("down", "`down`")?;
            p.keyword("to", "`to`")?;
            let min = p.number("MIN, the fewest workers (1..=64)")?;
            p.keyword("on", "`on`")?;
            let threshold = p.percent("DOWN, a percentage like `18%`")?;
            p.keyword("for", "`for`")?;
            let down_cycles = p.number("D, a number of cycles (1..=1000)")?;
            p.cycles_keyword()?;
            Some(ScaleDown {
                min,
                threshold,
                cycles: down_cycles,
            })
        };
        if let Some((i, w)) = p.words.next() {
            return Err(ProfileError::UnexpectedWord {
                position: i + 1,
                found: w.to_owned(),
                expected: "the end of the profile",
            });
        }
        Self::new(
            ScaleUp {
                max,
                threshold: up_threshold,
                cycles,
                within,
            },
            down,
        )
    }

    /// The scale-up part.
    pub fn up(&self) -> &ScaleUp {
        &self.up
    }

    /// The scale-down part, if any (none: the group never scales down).
    pub fn down(&self) -> Option<&ScaleDown> {
        self.down.as_ref()
    }

    /// The guard window in cycles: `10 × D` (0 without a scale-down part).
    pub fn guard_cycles(&self) -> u64 {
        self.down.map_or(0, |d| GUARD_FACTOR * u64::from(d.cycles))
    }

    /// The load percent from which the proportional step applies: `1.5 × UP`, capped halfway
    /// between `UP` and 100.
    pub fn far_above(&self) -> f64 {
        let up = f64::from(self.up.threshold);
        (up * FAR_ABOVE_FACTOR).min((up + 100.0) / 2.0)
    }

    /// How many cycles of history the rules look at: `max(M, D)`.
    fn window(&self) -> usize {
        let d = self.down.map_or(0, |d| d.cycles);
        self.up.within.max(d) as usize
    }
}

impl FromStr for ScalingProfile {
    type Err = ProfileError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for ScalingProfile {
    /// The profile in its own grammar (`within` only when it differs from `for`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let u = &self.up;
        write!(
            f,
            "scale up to {} on {}% for {} cycles",
            u.max, u.threshold, u.cycles
        )?;
        if u.within != u.cycles {
            write!(f, " within {}", u.within)?;
        }
        if let Some(d) = &self.down {
            write!(
                f,
                " scale down to {} on {}% for {} cycles",
                d.min, d.threshold, d.cycles
            )?;
        }
        Ok(())
    }
}

/// Reads the profile grammar word by word, naming the word and what was expected on error.
struct Parser<'a> {
    words: std::iter::Peekable<std::iter::Enumerate<std::str::SplitWhitespace<'a>>>,
}

impl<'a> Parser<'a> {
    fn next(&mut self, expected: &'static str) -> Result<(usize, &'a str), ProfileError> {
        self.words
            .next()
            .map(|(i, w)| (i + 1, w))
            .ok_or(ProfileError::MissingWord { expected })
    }

    fn at_end(&mut self) -> bool {
        self.words.peek().is_none()
    }

    fn next_is(&mut self, keyword: &str) -> bool {
        self.words
            .peek()
            .is_some_and(|(_, w)| w.eq_ignore_ascii_case(keyword))
    }

    fn unexpected(position: usize, found: &str, expected: &'static str) -> ProfileError {
        ProfileError::UnexpectedWord {
            position,
            found: found.to_owned(),
            expected,
        }
    }

    fn keyword(&mut self, keyword: &str, expected: &'static str) -> Result<(), ProfileError> {
        let (i, w) = self.next(expected)?;
        if w.eq_ignore_ascii_case(keyword) {
            Ok(())
        } else {
            Err(Self::unexpected(i, w, expected))
        }
    }

    fn cycles_keyword(&mut self) -> Result<(), ProfileError> {
        const EXPECTED: &str = "`cycles`";
        let (i, w) = self.next(EXPECTED)?;
        if w.eq_ignore_ascii_case("cycles") || w.eq_ignore_ascii_case("cycle") {
            Ok(())
        } else {
            Err(Self::unexpected(i, w, EXPECTED))
        }
    }

    fn number(&mut self, expected: &'static str) -> Result<u32, ProfileError> {
        let (i, w) = self.next(expected)?;
        w.parse().map_err(|_| Self::unexpected(i, w, expected))
    }

    fn percent(&mut self, expected: &'static str) -> Result<u8, ProfileError> {
        let (i, w) = self.next(expected)?;
        let digits = match w.strip_suffix('%') {
            Some(d) => d,
            None => {
                // `70 %`: the sign as a word of its own.
                match self.words.peek() {
                    Some((_, "%")) => {
                        self.words.next();
                        w
                    }
                    _ => return Err(Self::unexpected(i, w, expected)),
                }
            }
        };
        let value: u32 = digits
            .parse()
            .map_err(|_| Self::unexpected(i, w, expected))?;
        u8::try_from(value).map_err(|_| Self::unexpected(i, w, expected))
    }
}

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
mod tests {
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
        let q =
            profile("SCALE UP TO 6 on 70 % for 4 cycles\n  scale down to 2 on 18% for 10 cycles");
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
            err("scale up to 6 on 18% for 4 cycles scale down to 2 on 18% for 10 cycles")
                .to_string(),
            "scale up on 18% must be above scale down on 18%"
        );
        assert_eq!(
            err("scale up to 6 on 70% for 4 cycles scale down to 0 on 18% for 10 cycles")
                .to_string(),
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
}
