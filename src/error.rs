//! What the command line names but cannot be used, each with the one-line
//! message the user sees.

use std::io;
use std::path::PathBuf;

/// Why the file system's place (path, offset, partition) cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The device argument does not parse.
    #[error("{device}: {source}")]
    Spec {
        /// As given.
        device: String,
        /// What is wrong with it.
        source: pipeline::SpecError,
    },
    /// The path cannot be opened.
    #[error("{}: cannot open it: {source}", path.display())]
    Open {
        /// The path.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The path is a directory.
    #[error("{}: is a directory, not an image file or block device", .0.display())]
    Directory(PathBuf),
    /// The partition asked for is not there.
    #[error("{}: {source}", path.display())]
    Partition {
        /// The disk.
        path: PathBuf,
        /// What the partition table says.
        source: pipeline::partition::PartitionError,
    },
    /// The external journal's device cannot be opened.
    #[error("{source} (checking the journal of {device})")]
    Journal {
        /// The file system's device.
        device: String,
        /// Why.
        source: pipeline::OpenError,
    },
}

/// One `-E` option that is not valid.
#[derive(Debug, thiserror::Error)]
pub enum ExtendedError {
    /// `ea_ver` other than 1 or 2.
    #[error("invalid EA version in '{0}' (1 or 2)")]
    EaVersion(String),
    /// `readahead_kb` that is not a number.
    #[error("invalid readahead buffer size in '{0}'")]
    Readahead(String),
    /// An option e2fsck does not know.
    #[error("unknown extended option '{0}'")]
    Unknown(String),
}

/// Every invalid option of one `-E` list.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct BadExtended(pub Vec<ExtendedError>);

/// A `--threads` value that is neither a positive number nor `auto`.
#[derive(Debug, thiserror::Error)]
#[error("'{0}': expected a positive number or 'auto'")]
pub struct BadThreads(pub String);
