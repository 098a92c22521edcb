//! Deciding how many workers each pipeline stage gets.
//!
//! * [`policy`]: pFSCK's allocation, threads in proportion to each stage's
//!   weighted pending work (the paper's equations 1 and 2).
//! * [`cost`]: the weights, measured as time per work element.
//! * [`budget`]: how many threads may run at all; with `--threads auto`
//!   the budget shrinks when other programs need the CPUs.
//! * [`sim`]: a deterministic simulator of the stages, used by tests to
//!   compare the policy with static splits.
//!
//! ```
//! use scheduler::{allocate, StageLoad};
//!
//! // Pass 1 has 40 chunks of 2048 inodes waiting, pass 2 has 10 batches
//! // of 64 blocks, each block costing 20 times an inode.
//! let loads = [
//!     StageLoad { queued: 40.0, per_entry: 2048.0, weight: 1.0 },
//!     StageLoad { queued: 10.0, per_entry: 64.0, weight: 20.0 },
//! ];
//! let workers = allocate(8, &loads);
//! assert_eq!(workers.iter().sum::<usize>(), 8);
//! assert!(workers[0] > workers[1]);
//! ```

pub mod budget;
pub mod cost;
pub mod policy;
pub mod sim;

pub use budget::{Budget, CpuSampler};
pub use cost::CostMeter;
pub use policy::{allocate, StageLoad};
