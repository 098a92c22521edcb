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

pub mod safety;
pub mod undo;

mod actor;

pub use actor::{CommitError, Fixer, FixerStats, Held, Staged, Write};
