//! A deterministic simulator of a two-stage check: stage 1 checks chunks
//! of inodes and discovers directory blocks, stage 2 checks those blocks.
//! Workers follow either a static split or the dynamic policy, and the
//! simulator reports when all work is done.

use crate::policy::{allocate, next_stage, StageLoad};

/// A run of inodes with a given share of directories.
#[derive(Clone, Copy, Debug)]
pub struct Phase {
    /// Inodes in this phase.
    pub inodes: u64,
    /// Fraction of them that are directories.
    pub dir_fraction: f64,
}

/// What is being checked, and what each piece of work costs.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Phases of inodes, in inode order.
    pub phases: Vec<Phase>,
    /// Directory blocks per directory.
    pub blocks_per_dir: u64,
    /// Inodes per stage-1 entry.
    pub chunk: u64,
    /// Cost of checking one inode.
    pub inode_cost: f64,
    /// Cost of checking one directory block.
    pub block_cost: f64,
}

/// How workers are placed.
#[derive(Clone, Copy, Debug)]
pub enum Placement {
    /// `n` workers on stage 1 for the whole run, the rest on stage 2.
    Static(usize),
    /// The weighted-pending-work policy, re-evaluated at each decision.
    Dynamic,
}

struct Worker {
    stage: Option<usize>,
    busy_until: f64,
    /// Blocks the stage-1 entry in progress will produce.
    produces: u64,
    /// Elements and time of the entry in progress (for the cost meter).
    elements: u64,
    cost: f64,
}

/// Simulates a run and returns its makespan (the time all work is done).
pub fn simulate(w: &Workload, workers: usize, placement: Placement) -> f64 {
    // Stage-1 entries: (inodes, directories in them).
    let mut chunks: Vec<(u64, u64)> = Vec::new();
    for ph in &w.phases {
        let mut done = 0;
        let mut acc = 0.0;
        while done < ph.inodes {
            let n = w.chunk.min(ph.inodes - done);
            acc += n as f64 * ph.dir_fraction;
            let dirs = acc.floor() as u64;
            acc -= dirs as f64;
            chunks.push((n, dirs));
            done += n;
        }
    }
    chunks.reverse();
    let mut queued_blocks: u64 = 0;
    // Cost estimates start from a prior that says nothing about the mix.
    let mut meter = [1.0f64, 1.0f64];
    let mut seen = [false, false];
    let mut ws: Vec<Worker> = (0..workers)
        .map(|i| Worker {
            stage: match placement {
                Placement::Static(s) => Some(if i < s { 0 } else { 1 }),
                Placement::Dynamic => None,
            },
            busy_until: 0.0,
            produces: 0,
            elements: 0,
            cost: 0.0,
        })
        .collect();
    let mut busy = vec![false; workers];
    let mut now = 0.0f64;
    loop {
        // Hand out work to every idle worker.
        for i in 0..workers {
            if busy[i] {
                continue;
            }
            let has = [!chunks.is_empty(), queued_blocks > 0];
            let stage = match placement {
                Placement::Static(_) => ws[i].stage.filter(|&s| has[s]),
                Placement::Dynamic => {
                    let loads = [
                        StageLoad {
                            queued: chunks.len() as f64,
                            per_entry: w.chunk as f64,
                            weight: meter[0],
                        },
                        StageLoad {
                            queued: queued_blocks as f64,
                            per_entry: 1.0,
                            weight: meter[1],
                        },
                    ];
                    let targets = allocate(workers, &loads);
                    let mut assigned = [0usize; 2];
                    for (j, o) in ws.iter().enumerate() {
                        if busy[j] || j == i {
                            if let Some(s) = o.stage {
                                assigned[s] += 1;
                            }
                        }
                    }
                    next_stage(ws[i].stage, &assigned, &targets, &has)
                }
            };
            let Some(s) = stage else {
                if matches!(placement, Placement::Dynamic) {
                    ws[i].stage = None;
                }
                continue;
            };
            ws[i].stage = Some(s);
            busy[i] = true;
            if s == 0 {
                let (n, dirs) = chunks.pop().unwrap_or((0, 0));
                let cost = n as f64 * w.inode_cost;
                ws[i].busy_until = now + cost;
                ws[i].produces = dirs * w.blocks_per_dir;
                ws[i].elements = n;
                ws[i].cost = cost;
            } else {
                queued_blocks -= 1;
                ws[i].busy_until = now + w.block_cost;
                ws[i].produces = 0;
                ws[i].elements = 1;
                ws[i].cost = w.block_cost;
            }
        }
        // Advance to the next completion.
        let next = (0..workers)
            .filter(|&i| busy[i])
            .map(|i| ws[i].busy_until)
            .fold(f64::INFINITY, f64::min);
        if !next.is_finite() {
            break;
        }
        now = next;
        for i in 0..workers {
            if busy[i] && ws[i].busy_until <= now {
                busy[i] = false;
                queued_blocks += ws[i].produces;
                if let Some(s) = ws[i].stage {
                    let sample = ws[i].cost / ws[i].elements.max(1) as f64;
                    meter[s] = if seen[s] {
                        meter[s] + 0.2 * (sample - meter[s])
                    } else {
                        sample
                    };
                    seen[s] = true;
                }
            }
        }
        if chunks.is_empty() && queued_blocks == 0 && !busy.iter().any(|&b| b) {
            break;
        }
    }
    now
}

/// The best makespan over every static split, and the split giving it.
pub fn best_static(w: &Workload, workers: usize) -> (f64, usize) {
    (1..workers)
        .map(|s| (simulate(w, workers, Placement::Static(s)), s))
        .fold((f64::INFINITY, 0), |a, b| if b.0 < a.0 { b } else { a })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(phases: Vec<Phase>, blocks_per_dir: u64) -> Workload {
        Workload {
            phases,
            blocks_per_dir,
            chunk: 2048,
            inode_cost: 1.0,
            // pFSCK measured a directory at 1.8-2.3 times an inode.
            block_cost: 2.0,
        }
    }

    fn check(name: &str, w: &Workload) {
        let c = 8;
        let dynamic = simulate(w, c, Placement::Dynamic);
        let (best, split) = best_static(w, c);
        let equal = simulate(w, c, Placement::Static(c / 2));
        eprintln!(
            "{name}: dynamic {dynamic:.0}, best static {best:.0} ({split}/{}), equal {equal:.0}",
            c - split
        );
        assert!(
            dynamic <= best * 1.10,
            "{name}: dynamic {dynamic} is more than 10% over the best static split {best}"
        );
        assert!(
            dynamic < equal,
            "{name}: dynamic {dynamic} should beat the equal split {equal}"
        );
    }

    #[test]
    fn file_intensive() {
        check(
            "99% files",
            &workload(
                vec![Phase {
                    inodes: 1_000_000,
                    dir_fraction: 0.01,
                }],
                3,
            ),
        );
    }

    #[test]
    fn directory_intensive() {
        check(
            "50% directories",
            &workload(
                vec![Phase {
                    inodes: 1_000_000,
                    dir_fraction: 0.5,
                }],
                1,
            ),
        );
    }

    #[test]
    fn mix_changes_halfway() {
        let w = workload(
            vec![
                Phase {
                    inodes: 500_000,
                    dir_fraction: 0.01,
                },
                Phase {
                    inodes: 500_000,
                    dir_fraction: 0.5,
                },
            ],
            1,
        );
        check("files then directories", &w);
        let w = workload(
            vec![
                Phase {
                    inodes: 500_000,
                    dir_fraction: 0.5,
                },
                Phase {
                    inodes: 500_000,
                    dir_fraction: 0.01,
                },
            ],
            1,
        );
        check("directories then files", &w);
    }

    #[test]
    fn deterministic() {
        let w = workload(
            vec![Phase {
                inodes: 100_000,
                dir_fraction: 0.3,
            }],
            2,
        );
        assert_eq!(
            simulate(&w, 4, Placement::Dynamic),
            simulate(&w, 4, Placement::Dynamic)
        );
    }

    #[test]
    fn one_worker_does_everything() {
        let w = workload(
            vec![Phase {
                inodes: 10_000,
                dir_fraction: 0.5,
            }],
            1,
        );
        let t = simulate(&w, 1, Placement::Dynamic);
        assert_eq!(t, 10_000.0 * 1.0 + 5_000.0 * 2.0);
    }
}
