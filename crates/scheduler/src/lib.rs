//! Deciding how many workers each pipeline stage gets.
//!
//! * [`policy`]: pFSCK's allocation, threads in proportion to each stage's
//!   weighted pending work (the paper's equations 1 and 2).
//! * [`cost`]: the weights, measured as time per work element.
//! * [`budget`]: how many threads may run at all; with `--threads auto`
//!   the budget shrinks when other programs need the CPUs.
//! * [`sim`]: a deterministic simulator of the stages, used by tests to
//!   compare the policy with static splits.

pub mod budget;
pub mod cost;
pub mod policy;
pub mod sim;

pub use budget::{Budget, CpuSampler};
pub use cost::CostMeter;
pub use policy::{allocate, StageLoad};
