//! A scaling profile: what the operator writes for a worker group, parsed and validated.
//!
//! # The grammar (OpenSIPS 3)
//! ```text
//! scale up to MAX on UP% for N cycles [within M] [scale down to MIN on DOWN% for D cycles]
//! ```
//! Validated as OpenSIPS validates it, but for the most workers: `1 ≤ MAX ≤ 64` (OpenSIPS:
//! 999; a group here has at most [`MAX_WORKERS`]), `1 ≤ UP ≤ 100`, `1 ≤ N ≤ M ≤ 1000` (`M`
//! defaults to `N`); with a scale-down part, `1 ≤ MIN < MAX`, `DOWN < UP`,
//! `1 ≤ D ≤ 1000`. OpenSIPS reads `scale down to 0` as "no scale-down"; here that is spelled by
//! omitting the part, so a group can never be scaled to zero workers.

use std::fmt;
use std::str::FromStr;

use super::{FAR_ABOVE_FACTOR, GUARD_FACTOR};

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
    pub(super) fn window(&self) -> usize {
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
