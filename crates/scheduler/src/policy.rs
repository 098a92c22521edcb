//! The allocation rule. For stage i with q_i queued entries of n_i
//! elements each, costing w_i per element:
//!
//! ```text
//! W_total = Σ q_i · n_i · w_i                    (1)
//! t_i     = C · q_i · n_i · w_i / W_total        (2)
//! ```
//!
//! `t_i` is rounded so the counts add up to the budget C, and every stage
//! with pending work gets at least one worker when the budget allows.

/// The pending work of one stage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StageLoad {
    /// Entries waiting (q_i).
    pub queued: f64,
    /// Elements per entry (n_i): inodes per chunk, blocks per batch.
    pub per_entry: f64,
    /// Cost per element (w_i), in any unit shared by all stages.
    pub weight: f64,
}

impl StageLoad {
    /// The stage's weighted work, q_i · n_i · w_i.
    pub fn work(&self) -> f64 {
        let w = self.queued * self.per_entry * self.weight;
        if w.is_finite() && w > 0.0 {
            w
        } else {
            0.0
        }
    }
}

/// Splits `budget` workers between stages by equation 2.
pub fn allocate(budget: usize, loads: &[StageLoad]) -> Vec<usize> {
    let n = loads.len();
    let mut out = vec![0usize; n];
    if n == 0 || budget == 0 {
        return out;
    }
    let work: Vec<f64> = loads.iter().map(StageLoad::work).collect();
    let total: f64 = work.iter().sum();
    if total <= 0.0 {
        // Nothing pending anywhere: spread evenly so whoever gets work
        // first has workers.
        for (i, o) in out.iter_mut().enumerate() {
            *o = budget / n + usize::from(i < budget % n);
        }
        return out;
    }
    let busy: Vec<usize> = (0..n).filter(|&i| work[i] > 0.0).collect();
    // Every busy stage gets one worker first when there are enough.
    let mut left = budget;
    if budget >= busy.len() {
        for &i in &busy {
            out[i] = 1;
        }
        left -= busy.len();
    }
    // The rest by largest remainder of the exact shares.
    let exact: Vec<f64> = work.iter().map(|w| w / total * budget as f64).collect();
    let mut rem: Vec<(f64, usize)> = Vec::new();
    for &i in &busy {
        let extra = (exact[i] - out[i] as f64).max(0.0);
        let whole = (extra.floor() as usize).min(left);
        out[i] += whole;
        left -= whole;
        rem.push((extra - extra.floor(), i));
    }
    rem.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut k = 0;
    while left > 0 && !rem.is_empty() {
        out[rem[k % rem.len()].1] += 1;
        left -= 1;
        k += 1;
    }
    out
}

/// Which stage a worker should work on next.
///
/// `assigned[i]` counts the workers on stage i now, this worker included
/// in `current`; `targets` comes from [`allocate`]; `has_work[i]` says
/// whether stage i has an entry ready. A worker stays while its stage has
/// work and is not over its target; otherwise it moves to the stage with
/// work that is furthest below its target. With no work anywhere it idles
/// (`None`).
pub fn next_stage(
    current: Option<usize>,
    assigned: &[usize],
    targets: &[usize],
    has_work: &[bool],
) -> Option<usize> {
    let n = assigned.len();
    if let Some(c) = current {
        if has_work[c] && assigned[c] <= targets[c] {
            return Some(c);
        }
    }
    let mut best: Option<(i64, usize)> = None;
    for i in 0..n {
        if !has_work[i] {
            continue;
        }
        let others = assigned[i] as i64 - i64::from(current == Some(i));
        let deficit = targets[i] as i64 - others;
        if best.is_none_or(|(d, _)| deficit > d) {
            best = Some((deficit, i));
        }
    }
    best.map(|(_, i)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn load(q: f64, w: f64) -> StageLoad {
        StageLoad {
            queued: q,
            per_entry: 1.0,
            weight: w,
        }
    }

    #[test]
    fn follows_weighted_work() {
        assert_eq!(
            allocate(8, &[load(100.0, 1.0), load(100.0, 1.0)]),
            vec![4, 4]
        );
        assert_eq!(
            allocate(8, &[load(300.0, 1.0), load(50.0, 2.0)]),
            vec![6, 2]
        );
        assert_eq!(allocate(8, &[load(0.0, 1.0), load(5.0, 2.0)]), vec![0, 8]);
        assert_eq!(
            allocate(2, &[load(1000.0, 1.0), load(1.0, 1.0)]),
            vec![1, 1]
        );
        assert_eq!(
            allocate(1, &[load(1000.0, 1.0), load(1.0, 1.0)]),
            vec![1, 0]
        );
    }

    proptest! {
        #[test]
        fn counts_add_up(budget in 1usize..64, q in proptest::collection::vec(0.0f64..1e6, 1..5), w in 0.1f64..10.0) {
            let loads: Vec<StageLoad> = q.iter().map(|&q| load(q, w)).collect();
            let a = allocate(budget, &loads);
            prop_assert_eq!(a.iter().sum::<usize>(), budget);
            let busy = loads.iter().filter(|l| l.work() > 0.0).count();
            if busy > 0 && budget >= busy {
                for (i, l) in loads.iter().enumerate() {
                    if l.work() > 0.0 {
                        prop_assert!(a[i] >= 1);
                    } else {
                        prop_assert_eq!(a[i], 0);
                    }
                }
            }
        }
    }
}
