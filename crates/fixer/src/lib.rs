//! The one place that writes to a device.
//!
//! * [`Fixer`]: an actor. One thread owns the writable device handle and
//!   takes commits (ordered lists of block writes) over a channel; each
//!   commit is saved to the undo file, made durable, written in order and
//!   flushed before the answer comes back. Checker workers also send it
//!   single requests they do not wait for; a barrier waits for those.
//! * [`undo`]: the undo file, in the format e2fsprogs' `e2undo` replays.
//! * [`safety`]: whether a device is mounted, opening it exclusively, and
//!   the SIGINT/SIGTERM flag that stops a repair at a safe point.
//!
//! ```
//! use std::sync::Arc;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let path = std::env::temp_dir().join(format!("fixer-doc-{}", std::process::id()));
//! std::fs::write(&path, vec![0u8; 8192])?;
//! let file = std::fs::File::options().read(true).write(true).open(&path)?;
//! let fx = fixer::Fixer::start(Arc::new(file), 0, 8192, None);
//! fx.commit(vec![fixer::Write { offset: 4096, data: vec![7; 4096] }])?;
//! fx.finish()?;
//! assert_eq!(std::fs::read(&path)?[4096], 7);
//! std::fs::remove_file(&path)?;
//! # Ok(())
//! # }
//! ```

pub mod safety;
pub mod undo;

mod actor;

pub use actor::{CommitError, Fixer, FixerStats, Held, Staged, Write};
