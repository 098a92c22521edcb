//! Passes 1 and 2 one stage at a time, as the engine's pipeline runs
//! them, for measuring each stage on its own (`benches/micro.rs`): the
//! inode-table chunks, pass 1 over a chunk, and pass 2 over a batch of
//! directory blocks.

pub use crate::pass1::{chunks, mark_table_blocks, Chunk, DirWork, Pass1};
pub use crate::pass2::{check_batch, P2Acc, P2Ctx};
