//! Oracle's `session-agent-group` strategies, sans IO (issue 28's groundwork: not wired into the
//! engine or the configuration yet): the order in which a group's agents are tried for a new
//! session.
//!
//! [`order`] takes what the group knows of each `dest` agent ([`AgentLoad`], in configured
//! order) and returns the indexes to try, first the pick, then the failover order. Agents out of
//! service, at their session limit or over their burst rate are left out; none eligible gives
//! an empty order (the route fails over to the next policy, or 503).
//!
//! - **Hunt**: configured order. All traffic goes to the first eligible agent.
//! - **RoundRobin**: starting after the agent picked last time, wrapping; the rest follow in
//!   the same rotation. Over N calls each eligible agent is picked within ±1 of the others.
//! - **LeastBusy**: lowest `sessions / max-sessions` first (Oracle's "lowest percent busy";
//!   compared exactly by cross-multiplication, no floats). Agents without a limit
//!   (`max-sessions` 0) have no percentage: they come after every agent with a limit, among
//!   themselves by fewest sessions, so they take the overflow once the limited agents are full
//!   and the operator's limits stay the shares. Ties keep configured order.
//! - **PropDist**: proportional to `max-sessions` as weights, made deterministic with smooth
//!   weighted round-robin (nginx's: every eligible agent's current weight grows by its weight,
//!   the highest is picked and loses the sum of the weights), so over W calls (W the sum of
//!   the weights) each agent is picked exactly its weight times, interleaved rather than in
//!   runs. An agent without a limit weighs as much as the largest limit in the group (all
//!   unlimited: equal shares). The failover order after the pick is by current weight, highest
//!   first.
//!
//! The round-robin position and the smooth weights live in a [`GroupCursor`] the caller owns,
//! one per group, shared node-wide under the caller's lock. Oracle's `LowSusRate` is not
//! modelled.

/// A `session-agent-group`'s `strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// `hunt` (Oracle's default): configured order.
    #[default]
    Hunt,
    /// `roundrobin`: each agent in turn, one per session.
    RoundRobin,
    /// `leastbusy`: the lowest share of its session limit first.
    LeastBusy,
    /// `propdist`: shares proportional to the agents' session limits.
    PropDist,
}

/// What the group needs to know of one `dest` agent when a new session is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentLoad {
    /// The agent is in service.
    pub in_service: bool,
    /// Its current sessions (of the kind the limit below counts).
    pub sessions: u32,
    /// Its session limit (`max-sessions`, or `max-outbound-sessions` for an outbound session;
    /// 0 = unlimited).
    pub max_sessions: u32,
    /// Its other admission constraints hold (`max-burst-rate`, and any session limit not
    /// given in `max_sessions`).
    pub burst_ok: bool,
}

impl AgentLoad {
    /// Whether the agent may take a new session now.
    #[must_use]
    pub fn eligible(&self) -> bool {
        self.in_service
            && self.burst_ok
            && (self.max_sessions == 0 || self.sessions < self.max_sessions)
    }
}

/// A group's position for RoundRobin and PropDist, kept by the caller between calls.
///
/// If the group's `dest` list changes length, PropDist starts its weights afresh.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupCursor {
    /// RoundRobin: the index to start looking from (one after the last pick).
    next: usize,
    /// PropDist: each agent's current smooth weight.
    current: Vec<i64>,
}

impl GroupCursor {
    /// A cursor at the start of the list.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
}

/// The indexes of `dests` in the order they are tried for a new session (the first is the
/// pick; the rest the failover order), the ineligible left out; advances `cursor` when
/// something was picked.
#[must_use]
pub fn order(strategy: Strategy, dests: &[AgentLoad], cursor: &mut GroupCursor) -> Vec<usize> {
    let eligible = |i: &usize| dests[*i].eligible();
    match strategy {
        Strategy::Hunt => (0..dests.len()).filter(eligible).collect(),
        Strategy::RoundRobin => {
            let n = dests.len();
            if n == 0 {
                return Vec::new();
            }
            let start = cursor.next % n;
            let out: Vec<usize> = (0..n).map(|k| (start + k) % n).filter(eligible).collect();
            if let Some(&first) = out.first() {
                cursor.next = (first + 1) % n;
            }
            out
        }
        Strategy::LeastBusy => {
            let mut out: Vec<usize> = (0..dests.len()).filter(eligible).collect();
            out.sort_by(|&a, &b| busier(&dests[a], &dests[b]));
            out
        }
        Strategy::PropDist => prop_dist(dests, cursor),
    }
}

/// LeastBusy's preference: limited agents by share of their limit, then unlimited ones by
/// sessions.
fn busier(a: &AgentLoad, b: &AgentLoad) -> std::cmp::Ordering {
    match (a.max_sessions, b.max_sessions) {
        (0, 0) => a.sessions.cmp(&b.sessions),
        (0, _) => std::cmp::Ordering::Greater,
        (_, 0) => std::cmp::Ordering::Less,
        (ma, mb) => {
            (u64::from(a.sessions) * u64::from(mb)).cmp(&(u64::from(b.sessions) * u64::from(ma)))
        }
    }
}

/// PropDist by smooth weighted round-robin.
fn prop_dist(dests: &[AgentLoad], cursor: &mut GroupCursor) -> Vec<usize> {
    if cursor.current.len() != dests.len() {
        cursor.current = vec![0; dests.len()];
    }
    let unlimited = dests
        .iter()
        .map(|d| d.max_sessions)
        .max()
        .filter(|&m| m > 0)
        .unwrap_or(1);
    let weight = |d: &AgentLoad| {
        i64::from(if d.max_sessions == 0 {
            unlimited
        } else {
            d.max_sessions
        })
    };
    let mut out: Vec<usize> = (0..dests.len()).filter(|&i| dests[i].eligible()).collect();
    if out.is_empty() {
        return out;
    }
    let mut total = 0i64;
    for &i in &out {
        let w = weight(&dests[i]);
        cursor.current[i] += w;
        total += w;
    }
    // Highest current weight first, ties in configured order (the sort is stable).
    out.sort_by(|&a, &b| cursor.current[b].cmp(&cursor.current[a]));
    cursor.current[out[0]] -= total;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(max: u32) -> AgentLoad {
        AgentLoad {
            in_service: true,
            sessions: 0,
            max_sessions: max,
            burst_ok: true,
        }
    }

    /// How many of `calls` each agent gets as the first pick.
    fn spread(strategy: Strategy, dests: &[AgentLoad], calls: usize) -> Vec<usize> {
        let mut cursor = GroupCursor::new();
        let mut counts = vec![0; dests.len()];
        for _ in 0..calls {
            if let Some(&first) = order(strategy, dests, &mut cursor).first() {
                counts[first] += 1;
            }
        }
        counts
    }

    #[test]
    fn eligibility() {
        assert!(up(0).eligible());
        assert!(!AgentLoad {
            in_service: false,
            ..up(0)
        }
        .eligible());
        assert!(!AgentLoad {
            burst_ok: false,
            ..up(0)
        }
        .eligible());
        assert!(!AgentLoad {
            sessions: 5,
            ..up(5)
        }
        .eligible());
        assert!(AgentLoad {
            sessions: 4,
            ..up(5)
        }
        .eligible());
        assert!(AgentLoad {
            sessions: u32::MAX,
            ..up(0)
        }
        .eligible());
    }

    #[test]
    fn hunt_is_configured_order() {
        let mut dests = vec![up(0), up(0), up(0)];
        assert_eq!(spread(Strategy::Hunt, &dests, 1000), vec![1000, 0, 0]);
        dests[0].in_service = false;
        let mut cursor = GroupCursor::new();
        assert_eq!(order(Strategy::Hunt, &dests, &mut cursor), vec![1, 2]);
        dests[1].sessions = 10;
        dests[1].max_sessions = 10;
        assert_eq!(order(Strategy::Hunt, &dests, &mut cursor), vec![2]);
    }

    #[test]
    fn round_robin_spreads_within_one() {
        for n in 1..=7 {
            let dests = vec![up(0); n];
            let counts = spread(Strategy::RoundRobin, &dests, 1000);
            let (lo, hi) = (counts.iter().min(), counts.iter().max());
            assert!(
                hi.zip(lo).is_some_and(|(h, l)| h - l <= 1),
                "{n}: {counts:?}"
            );
            assert_eq!(counts.iter().sum::<usize>(), 1000);
        }
    }

    #[test]
    fn round_robin_failover_follows_the_rotation() {
        let dests = vec![up(0); 4];
        let mut cursor = GroupCursor::new();
        assert_eq!(
            order(Strategy::RoundRobin, &dests, &mut cursor),
            [0, 1, 2, 3]
        );
        assert_eq!(
            order(Strategy::RoundRobin, &dests, &mut cursor),
            [1, 2, 3, 0]
        );
        assert_eq!(
            order(Strategy::RoundRobin, &dests, &mut cursor),
            [2, 3, 0, 1]
        );
    }

    #[test]
    fn round_robin_with_agents_going_out_mid_way() {
        let mut dests = vec![up(0); 4];
        let mut cursor = GroupCursor::new();
        let mut counts = [0usize; 4];
        for call in 0..1000 {
            if call == 500 {
                dests[1].in_service = false;
                counts = [0; 4];
            }
            if let Some(&first) = order(Strategy::RoundRobin, &dests, &mut cursor).first() {
                counts[first] += 1;
            }
        }
        // The 500 calls after agent 1 went out spread over the other three within one.
        assert_eq!(counts[1], 0);
        let others = [counts[0], counts[2], counts[3]];
        let (lo, hi) = (others.iter().min(), others.iter().max());
        assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "{counts:?}");
    }

    #[test]
    fn least_busy_by_share_of_limit() {
        let dests = [
            AgentLoad {
                sessions: 50,
                ..up(100)
            }, // 50 %
            AgentLoad {
                sessions: 30,
                ..up(200)
            }, // 15 %
            AgentLoad {
                sessions: 0,
                ..up(0)
            }, // unlimited
            AgentLoad {
                sessions: 10,
                ..up(100)
            }, // 10 %
            AgentLoad {
                sessions: 3,
                ..up(20)
            }, // 15 %, after the tie in configured order
        ];
        let mut cursor = GroupCursor::new();
        assert_eq!(
            order(Strategy::LeastBusy, &dests, &mut cursor),
            [3, 1, 4, 0, 2]
        );
    }

    #[test]
    fn least_busy_unlimited_take_the_overflow_by_sessions() {
        let dests = [
            AgentLoad {
                sessions: 7,
                ..up(0)
            },
            AgentLoad {
                sessions: 2,
                ..up(0)
            },
            AgentLoad {
                sessions: 10,
                ..up(10)
            }, // full
        ];
        let mut cursor = GroupCursor::new();
        assert_eq!(order(Strategy::LeastBusy, &dests, &mut cursor), [1, 0]);
    }

    #[test]
    fn least_busy_keeps_shares_under_load() {
        // Calls of a fixed concurrency (the oldest ends as each new one starts): the agents'
        // sessions stay in proportion to their limits, within one session.
        let mut dests = vec![up(100), up(200), up(300)];
        let mut cursor = GroupCursor::new();
        let mut live = std::collections::VecDeque::new();
        let mut counts = [0usize; 3];
        for _ in 0..1000 {
            if live.len() == 120 {
                if let Some(i) = live.pop_front() {
                    let d: &mut AgentLoad = &mut dests[i];
                    d.sessions -= 1;
                }
            }
            let pick = order(Strategy::LeastBusy, &dests, &mut cursor)[0];
            dests[pick].sessions += 1;
            counts[pick] += 1;
            live.push_back(pick);
        }
        let s: Vec<u32> = dests.iter().map(|d| d.sessions).collect();
        assert_eq!(s.iter().sum::<u32>(), 120);
        // 120 sessions over limits 1:2:3 = 20, 40, 60, each within one.
        for (got, want) in s.iter().zip([20u32, 40, 60]) {
            assert!(got.abs_diff(want) <= 1, "{s:?}");
        }
        // And the 1000 calls were shared about 1:2:3 too (within 10 %).
        for (got, want) in counts
            .iter()
            .zip([1000.0 / 6.0, 2000.0 / 6.0, 3000.0 / 6.0])
        {
            assert!((*got as f64 - want).abs() <= want * 0.1, "{counts:?}");
        }
    }

    #[test]
    fn prop_dist_shares_by_max_sessions() {
        let dests = vec![up(100), up(200), up(300), up(400)];
        let counts = spread(Strategy::PropDist, &dests, 1000);
        for (got, w) in counts.iter().zip([100.0, 200.0, 300.0, 400.0]) {
            let want = 1000.0 * w / 1000.0;
            assert!((*got as f64 - want).abs() <= want * 0.1, "{counts:?}");
        }
        // Exact over one full cycle of the weights (here 1000 calls = one cycle).
        assert_eq!(counts, vec![100, 200, 300, 400]);
    }

    #[test]
    fn prop_dist_interleaves_and_orders_failover() {
        let dests = vec![up(1), up(2)];
        let mut cursor = GroupCursor::new();
        let firsts: Vec<usize> = (0..6)
            .map(|_| order(Strategy::PropDist, &dests, &mut cursor)[0])
            .collect();
        assert_eq!(firsts, [1, 0, 1, 1, 0, 1]);
        let dests = vec![up(1), up(1), up(5)];
        let mut cursor = GroupCursor::new();
        assert_eq!(order(Strategy::PropDist, &dests, &mut cursor), [2, 0, 1]);
    }

    #[test]
    fn prop_dist_unlimited_weigh_as_the_largest_limit() {
        let counts = spread(Strategy::PropDist, &[up(0), up(100), up(300)], 700);
        assert_eq!(counts, vec![300, 100, 300]);
        let counts = spread(Strategy::PropDist, &[up(0), up(0)], 1000);
        assert_eq!(counts, vec![500, 500]);
    }

    #[test]
    fn prop_dist_with_agents_going_out_mid_way() {
        let mut dests = vec![up(100), up(100), up(200)];
        let mut cursor = GroupCursor::new();
        let mut counts = [0usize; 3];
        for call in 0..1000 {
            if call == 500 {
                dests[2].in_service = false;
                counts = [0; 3];
            }
            if let Some(&first) = order(Strategy::PropDist, &dests, &mut cursor).first() {
                counts[first] += 1;
            }
        }
        assert_eq!(counts[2], 0);
        assert!(counts[0].abs_diff(counts[1]) <= 1, "{counts:?}");
    }

    #[test]
    fn all_out_gives_nothing() {
        let dests = vec![
            AgentLoad {
                in_service: false,
                ..up(0)
            },
            AgentLoad {
                burst_ok: false,
                ..up(0)
            },
            AgentLoad {
                sessions: 1,
                ..up(1)
            },
        ];
        for s in [
            Strategy::Hunt,
            Strategy::RoundRobin,
            Strategy::LeastBusy,
            Strategy::PropDist,
        ] {
            let mut cursor = GroupCursor::new();
            assert!(order(s, &dests, &mut cursor).is_empty(), "{s:?}");
            assert!(order(s, &[], &mut cursor).is_empty(), "{s:?}");
        }
    }

    #[test]
    fn cursor_survives_a_changed_dest_list() {
        let mut cursor = GroupCursor::new();
        let _ = order(Strategy::RoundRobin, &[up(0); 5], &mut cursor);
        let _ = order(Strategy::RoundRobin, &[up(0); 5], &mut cursor);
        let _ = order(Strategy::RoundRobin, &[up(0); 5], &mut cursor);
        // Now three agents: the position wraps, nothing panics.
        assert_eq!(
            order(Strategy::RoundRobin, &[up(0); 3], &mut cursor),
            [0, 1, 2]
        );
        let _ = order(Strategy::PropDist, &[up(1); 4], &mut cursor);
        assert_eq!(order(Strategy::PropDist, &[up(1); 2], &mut cursor), [0, 1]);
    }
}
