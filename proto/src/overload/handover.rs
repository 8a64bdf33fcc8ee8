//! Which shards move when a worker group scales, as plans the shell carries out.
//!
//! Scaling moves shards, never state (the calls live in the shards' engines). A new worker
//! receives a fair share, `SHARDS / workers`, taken one at a time from whichever worker holds
//! the most; a retired worker gives all of its shards to the others, round robin. The shell
//! then runs each hand-over on the giving worker's own thread, between two messages.

/// The hand-overs that give a new worker its share: `(donor, shards)` for every donor, in
/// the order the shards were chosen.
///
/// `holdings` lists, for every worker of the group except the new one, its id and the shards
/// it holds; `workers` counts the group with the new worker; `shards` is the number of shards.
#[must_use]
pub fn plan_new_worker(
    holdings: &[(usize, Vec<usize>)],
    workers: usize,
    shards: usize,
) -> Vec<(usize, Vec<usize>)> {
    let share = shards / workers.max(1);
    let mut held: Vec<(usize, Vec<usize>)> = holdings.to_vec();
    let mut plan: Vec<(usize, Vec<usize>)> = Vec::new();
    for _ in 0..share {
        // The largest holder (of equals, the last listed).
        let Some(donor) = held
            .iter_mut()
            .max_by_key(|(_, s)| s.len())
            .filter(|(_, s)| !s.is_empty())
        else {
            break;
        };
        let Some(shard) = donor.1.pop() else { break };
        match plan.iter_mut().find(|(id, _)| *id == donor.0) {
            Some((_, list)) => list.push(shard),
            None => plan.push((donor.0, vec![shard])),
        }
    }
    plan
}

/// How a retiring worker's shards are shared among `heirs` workers: heir `i` gets every
/// `heirs`-th shard starting at the `i`-th.
#[must_use]
pub fn plan_retirement(mine: &[usize], heirs: usize) -> Vec<Vec<usize>> {
    (0..heirs)
        .map(|i| mine.iter().copied().skip(i).step_by(heirs).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holding(id: usize, shards: std::ops::Range<usize>) -> (usize, Vec<usize>) {
        (id, shards.collect())
    }

    #[test]
    fn a_new_worker_gets_its_share_from_the_largest_holders() {
        // 64 shards on 2 workers; a third arrives: its share is 21.
        let holdings = [holding(0, 0..32), holding(1, 32..64)];
        let plan = plan_new_worker(&holdings, 3, 64);
        let total: usize = plan.iter().map(|(_, s)| s.len()).sum();
        assert_eq!(total, 21);
        // Taken alternately from the two, so they end even (22 and 21).
        let from = |id| {
            plan.iter()
                .find(|(d, _)| *d == id)
                .map_or(0, |(_, s)| s.len())
        };
        assert_eq!((from(0), from(1)), (10, 11));
        // Every shard moves once and belonged to its donor.
        for (donor, shards) in &plan {
            for s in shards {
                assert!(holdings[*donor].1.contains(s));
            }
        }
    }

    #[test]
    fn an_uneven_group_is_evened_out_first() {
        let holdings = [holding(0, 0..40), holding(1, 40..56), holding(2, 56..64)];
        let plan = plan_new_worker(&holdings, 4, 64);
        assert_eq!(plan.len(), 1, "the 16 all come from the largest holder");
        assert_eq!(plan[0].0, 0);
        assert_eq!(plan[0].1.len(), 16);
    }

    #[test]
    fn nothing_to_give_plans_nothing() {
        assert!(plan_new_worker(&[], 1, 64).is_empty());
        assert!(plan_new_worker(&[holding(0, 0..0)], 2, 64).is_empty());
        // More workers than shards: a share of zero.
        assert!(plan_new_worker(&[holding(0, 0..4)], 8, 4).is_empty());
    }

    #[test]
    fn a_retiring_worker_shares_round_robin_and_loses_nothing() {
        let mine: Vec<usize> = (10..17).collect();
        let parts = plan_retirement(&mine, 3);
        assert_eq!(parts, vec![vec![10, 13, 16], vec![11, 14], vec![12, 15]]);
        let mut all: Vec<usize> = parts.concat();
        all.sort_unstable();
        assert_eq!(all, mine);
        assert_eq!(plan_retirement(&mine, 1), vec![mine.clone()]);
    }
}
