//! The whole-check fuzz target's parts: the compact image form its inputs
//! take, the structure-aware mutations, and the check-repair-check run.
//! The test suite includes these files too, for its stable mutation test
//! and the regression inputs.

pub mod harness;
pub mod image;
pub mod mutate;
