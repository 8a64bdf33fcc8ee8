//! Oracle's `local-policy` as a sans-IO table (issue 28's groundwork: not wired into the engine
//! or the configuration yet): which next hops a new request may go to, in the order they are
//! tried.
//!
//! A policy matches a request by its `from-address` (the From user), its `to-address` (the
//! Request-URI user), both digit or user prefixes read left to right or `*`, and its
//! `source-realm` (`*` for any). Each matching policy's enabled attributes whose day and time
//! window hold now are candidates, ordered by Oracle's route preference: lowest `cost` first,
//! then the longest To match, the shortest To, the longest From match, the shortest From, the
//! narrowest set of days, the narrowest time window; `*` (a match of length 0) comes after any
//! prefix by the same rules. Ties keep the table's order. Time is passed in (minutes since
//! midnight and the weekday, local to the node as the operator configured it); nothing here
//! reads a clock.

/// A `from-address` or `to-address`: `*`, or a prefix the user must start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressPattern {
    /// `*`: any user.
    Any,
    /// A prefix, compared after [`normalize_user`] of both sides.
    Prefix(String),
}

impl AddressPattern {
    /// The pattern a configuration word means (`*` or a prefix).
    #[must_use]
    pub fn parse(word: &str) -> Self {
        if word == "*" {
            Self::Any
        } else {
            Self::Prefix(normalize_user(word))
        }
    }

    /// How many characters of `user` it matched, if it matches (0 for `*`).
    pub(crate) fn matched(&self, user: &str) -> Option<usize> {
        match self {
            Self::Any => Some(0),
            Self::Prefix(p) => user.starts_with(p.as_str()).then_some(p.len()),
        }
    }

    /// The pattern's own length (0 for `*`).
    fn len(&self) -> usize {
        match self {
            Self::Any => 0,
            Self::Prefix(p) => p.len(),
        }
    }
}

/// A user as routing compares it: a telephone number without its leading `+` and visual
/// separators (RFC 3966: `-`, `.`, `(`, `)`), any other user as it is.
#[must_use]
pub fn normalize_user(user: &str) -> String {
    let body = user.strip_prefix('+').unwrap_or(user);
    let digits: String = body
        .chars()
        .filter(|c| !matches!(c, '-' | '.' | '(' | ')'))
        .collect();
    if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
        digits
    } else {
        user.to_owned()
    }
}

/// Days of the week a `policy-attribute` applies on (`days-of-week`, Oracle's letters
/// `U M T W R F S`, Sunday first), as a bit set: bit 0 Sunday .. bit 6 Saturday.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Days(u8);

impl Days {
    /// Every day.
    pub const ALL: Self = Self(0x7f);

    /// The days of Oracle's letters (`"MTWRF"`, `"US"`); `None` for another letter or none.
    #[must_use]
    pub fn parse(letters: &str) -> Option<Self> {
        let mut bits = 0u8;
        for c in letters.chars() {
            let day = "UMTWRFS".find(c.to_ascii_uppercase())?;
            bits |= 1 << day;
        }
        (bits != 0).then_some(Self(bits))
    }

    /// The days of a bit set (bit 0 Sunday .. bit 6 Saturday); `None` for no day.
    #[must_use]
    pub fn from_bits(bits: u8) -> Option<Self> {
        let bits = bits & 0x7f;
        (bits != 0).then_some(Self(bits))
    }

    /// Whether `weekday` (0 = Sunday .. 6 = Saturday) is one of them.
    #[must_use]
    pub fn contains(self, weekday: u8) -> bool {
        weekday < 7 && self.0 & (1 << weekday) != 0
    }

    fn count(self) -> u32 {
        self.0.count_ones()
    }
}

/// One `policy-attribute`: a next hop and when it may be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyAttribute {
    /// `next-hop`: a session-agent name, or `SAG:<group>`.
    pub next_hop: String,
    /// `realm`: the realm the request leaves by (`None`: the next hop's own).
    pub realm: Option<String>,
    /// `cost`: lower is preferred.
    pub cost: u32,
    /// `start-time`, `hhmm` (0000..=2400).
    pub start: u16,
    /// `end-time`, `hhmm` (0000..=2400); before `start`, the window spans midnight.
    pub end: u16,
    /// `days-of-week`.
    pub days: Days,
    /// `terminate-recursion`: a failure on this hop ends the hunt.
    pub terminate_recursion: bool,
    /// `state`.
    pub enabled: bool,
}

impl PolicyAttribute {
    /// Whether it applies at `minute` of the day (0..1440) on `weekday` (0 = Sunday).
    #[must_use]
    pub fn applies(&self, minute: u16, weekday: u8) -> bool {
        let to_min = |hhmm: u16| (hhmm / 100) * 60 + hhmm % 100;
        let (start, end) = (to_min(self.start), to_min(self.end));
        let in_window = if start <= end {
            (start..end).contains(&minute)
        } else {
            minute >= start || minute < end
        };
        self.enabled && self.days.contains(weekday) && in_window
    }

    /// The window's length in minutes (for "narrowest time" first).
    fn window_minutes(&self) -> u16 {
        let to_min = |hhmm: u16| (hhmm / 100) * 60 + hhmm % 100;
        let (start, end) = (to_min(self.start), to_min(self.end));
        if start <= end {
            end - start
        } else {
            24 * 60 - start + end
        }
    }
}

/// One `local-policy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPolicy {
    /// `from-address`.
    pub from: AddressPattern,
    /// `to-address`.
    pub to: AddressPattern,
    /// `source-realm` (`None`: `*`).
    pub source_realm: Option<String>,
    /// `state`.
    pub enabled: bool,
    /// `policy-attribute`s.
    pub attributes: Vec<PolicyAttribute>,
}

/// What a new request offers the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteQuery<'a> {
    /// The From user.
    pub from_user: &'a str,
    /// The Request-URI user.
    pub to_user: &'a str,
    /// The realm it arrived from.
    pub source_realm: &'a str,
    /// Minutes since midnight, 0..1440.
    pub minute: u16,
    /// Day of the week, 0 = Sunday.
    pub weekday: u8,
}

/// A next hop the request may go to, in the order of [`select`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// The attribute it comes from.
    pub attribute: &'a PolicyAttribute,
    /// The index of its policy in the table.
    pub policy: usize,
}

/// Every candidate next hop for `query`, most preferred first (see the module docs).
#[must_use]
pub fn select<'a>(table: &'a [LocalPolicy], query: &RouteQuery<'_>) -> Vec<Candidate<'a>> {
    let from = normalize_user(query.from_user);
    let to = normalize_user(query.to_user);
    let mut found: Vec<(SortKey, Candidate<'a>)> = Vec::new();
    for (i, p) in table.iter().enumerate() {
        if !p.enabled
            || p.source_realm
                .as_deref()
                .is_some_and(|r| r != "*" && r != query.source_realm)
        {
            continue;
        }
        let (Some(to_len), Some(from_len)) = (p.to.matched(&to), p.from.matched(&from)) else {
            continue;
        };
        for a in p
            .attributes
            .iter()
            .filter(|a| a.applies(query.minute, query.weekday))
        {
            let key = SortKey::of(p, a, to_len, from_len);
            found.push((
                key,
                Candidate {
                    attribute: a,
                    policy: i,
                },
            ));
        }
    }
    // Stable: ties keep the table's order.
    found.sort_by_key(|(key, _)| *key);
    found.into_iter().map(|(_, c)| c).collect()
}

/// Oracle's route preference, field by field (shared with [`super::table::RouteTable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SortKey {
    cost: u32,
    to_match: std::cmp::Reverse<usize>,
    to_len: usize,
    from_match: std::cmp::Reverse<usize>,
    from_len: usize,
    days: u32,
    window: u16,
}

impl SortKey {
    /// The key of attribute `a` of policy `p`, whose patterns matched `to_match` characters of
    /// the To user and `from_match` of the From user.
    pub(crate) fn of(
        p: &LocalPolicy,
        a: &PolicyAttribute,
        to_match: usize,
        from_match: usize,
    ) -> Self {
        Self {
            cost: a.cost,
            to_match: std::cmp::Reverse(to_match),
            to_len: p.to.len(),
            from_match: std::cmp::Reverse(from_match),
            from_len: p.from.len(),
            days: a.days.count(),
            window: a.window_minutes(),
        }
    }

    /// The key of a route-file row: a policy from `*` to a prefix of `to_len` characters (which
    /// matched all of them) with one attribute of `cost`, every day, all day.
    pub(crate) fn of_row(cost: u32, to_len: usize) -> Self {
        Self {
            cost,
            to_match: std::cmp::Reverse(to_len),
            to_len,
            from_match: std::cmp::Reverse(0),
            from_len: 0,
            days: Days::ALL.count(),
            window: 24 * 60,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(next_hop: &str, cost: u32) -> PolicyAttribute {
        PolicyAttribute {
            next_hop: next_hop.into(),
            realm: None,
            cost,
            start: 0,
            end: 2400,
            days: Days::ALL,
            terminate_recursion: false,
            enabled: true,
        }
    }

    fn policy(from: &str, to: &str, attributes: Vec<PolicyAttribute>) -> LocalPolicy {
        LocalPolicy {
            from: AddressPattern::parse(from),
            to: AddressPattern::parse(to),
            source_realm: None,
            enabled: true,
            attributes,
        }
    }

    fn query(to_user: &str) -> RouteQuery<'_> {
        RouteQuery {
            from_user: "alice",
            to_user,
            source_realm: "access",
            minute: 12 * 60,
            weekday: 3,
        }
    }

    fn hops(c: &[Candidate<'_>]) -> Vec<String> {
        c.iter().map(|c| c.attribute.next_hop.clone()).collect()
    }

    #[test]
    fn cost_first_then_the_longest_to_match_then_wildcards() {
        let table = vec![
            policy("*", "*", vec![attr("default", 10)]),
            policy("*", "1555", vec![attr("long", 10)]),
            policy("*", "1", vec![attr("short", 10)]),
            policy("*", "1", vec![attr("cheap", 5)]),
        ];
        assert_eq!(
            hops(&select(&table, &query("+1(555)123-4567"))),
            ["cheap", "long", "short", "default"]
        );
        assert_eq!(hops(&select(&table, &query("44207"))), ["default"]);
    }

    #[test]
    fn the_longest_from_match_breaks_a_to_tie() {
        let table = vec![
            policy("*", "1", vec![attr("any-caller", 1)]),
            policy("al", "1", vec![attr("al-callers", 1)]),
        ];
        assert_eq!(
            hops(&select(&table, &query("123"))),
            ["al-callers", "any-caller"]
        );
    }

    #[test]
    fn days_and_time_windows_narrowest_first_and_across_midnight() {
        let mut night = attr("night", 1);
        night.start = 2200;
        night.end = 600;
        let mut weekdays = attr("weekdays", 1);
        weekdays.days = Days::parse("MTWRF").expect("days");
        let table = vec![policy("*", "*", vec![attr("always", 1), weekdays, night])];
        // Wednesday noon: the weekday one first (5 days before 7), the night one not at all.
        assert_eq!(hops(&select(&table, &query("1"))), ["weekdays", "always"]);
        let late_sunday = RouteQuery {
            minute: 23 * 60,
            weekday: 0,
            ..query("1")
        };
        assert_eq!(hops(&select(&table, &late_sunday)), ["night", "always"]);
        let early = RouteQuery {
            minute: 5 * 60 + 59,
            weekday: 0,
            ..query("1")
        };
        assert_eq!(hops(&select(&table, &early)), ["night", "always"]);
        assert_eq!(Days::parse("UX"), None);
        assert_eq!(Days::parse(""), None);
    }

    #[test]
    fn disabled_policies_attributes_and_other_realms_are_skipped() {
        let mut off = attr("off", 0);
        off.enabled = false;
        let mut core_only = policy("*", "*", vec![attr("core-only", 0)]);
        core_only.source_realm = Some("core".into());
        let mut disabled = policy("*", "*", vec![attr("disabled-policy", 0)]);
        disabled.enabled = false;
        let table = vec![
            policy("*", "*", vec![off, attr("on", 9)]),
            core_only,
            disabled,
        ];
        assert_eq!(hops(&select(&table, &query("1"))), ["on"]);
    }

    #[test]
    fn numbers_are_normalised_and_other_users_compared_as_they_are() {
        assert_eq!(normalize_user("+1-555.123(4)"), "15551234");
        assert_eq!(normalize_user("alice"), "alice");
        assert_eq!(normalize_user("+alice"), "+alice");
        let table = vec![policy("*", "bo", vec![attr("b-users", 1)])];
        assert_eq!(hops(&select(&table, &query("bob"))), ["b-users"]);
    }
}
