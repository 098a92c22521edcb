//! What is right and what is wrong in an ext2/3/4 file system: e2fsck's
//! checks as functions over parsed structures.
//!
//! [`check`] runs a whole read-only check on a device opened by
//! `pipeline`: the superblock, descriptors and journal, passes 1 and 2 as
//! a pipeline of parallel workers, then passes 3 to 5 and the post-pass
//! checks. The [`Report`] lists every [`Finding`] with its problem
//! [`Code`], whose table (in [`problem`]) also says how a repair treats it.
//! check-core writes nothing and knows no writer: a repair passes a
//! [`sink::FixSink`] to [`engine::check_fixing`] to receive the fixes
//! pass 1's workers can make on the spot.
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use check_core::CheckOptions;
//! use pipeline::{open_device, IoMode, Target};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dev = open_device(&Target::parse("fs.img")?, IoMode::Auto)?;
//! let report = check_core::check(Arc::new(dev), &CheckOptions::default());
//! for f in &report.findings {
//!     println!("{}: {}", f.code.name(), f.message());
//! }
//! std::process::exit(report.exit_code());
//! # }
//! ```

pub mod answers;
pub mod bitmap;
pub mod blockiter;
pub(crate) mod counts;
pub mod ctx;
pub mod due;
pub mod engine;
pub(crate) mod error;
pub mod fixes;
pub mod fs;
pub(crate) mod inode_checks;
pub mod io;
pub mod journal;
pub mod orphans;
pub mod overrides;
pub(crate) mod pass1;
pub(crate) mod pass1b;
pub(crate) mod pass2;
pub(crate) mod pass3;
pub(crate) mod pass4;
pub(crate) mod pass5;
pub mod paths;
pub(crate) mod postpass;
pub mod problem;
pub mod progress;
pub mod prompt;
pub mod report;
pub mod sink;
pub mod stages;
pub(crate) mod super_check;
pub mod walk;
pub(crate) mod xattr_read;
pub(crate) mod zeroed;

pub use ctx::{CheckOptions, Choices, Maps, TimeCheck};
pub use problem::{Code, Finding, Pass, Severity};
pub use report::{Report, Summary};
pub use super_check::{mmp_refusal, values_in_range};

pub use engine::check;
