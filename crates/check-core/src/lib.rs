//! What is right and what is wrong in an ext2/3/4 file system: e2fsck's
//! checks as functions over parsed structures.

pub mod bitmap;
pub mod blockiter;
pub mod ctx;
pub mod due;
pub mod engine;
pub mod fs;
pub(crate) mod inode_checks;
pub mod io;
pub mod journal;
pub mod pass1;
pub mod pass1b;
pub mod pass2;
pub(crate) mod pass3;
pub(crate) mod pass4;
pub mod pass5;
pub(crate) mod postpass;
pub mod problem;
pub mod progress;
pub mod quota_file;
pub mod report;
pub mod sink;
pub(crate) mod super_check;
pub(crate) mod xattr_read;

pub use ctx::{CheckOptions, Choices, Maps};
pub use problem::{Code, Finding, Pass, Severity};
pub use report::{Report, Summary};

pub use engine::check;
