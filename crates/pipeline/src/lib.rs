//! How blocks get from the device to the checkers: a block reader with an
//! io_uring path (batched, queued deep), a pread fallback and a direct
//! (O_DIRECT) path with its own read-ahead, plus the
//! bounded stages that connect passes.
//!
//! Nothing here knows what an inode is: callers hand over byte ranges and
//! get bytes back.

mod aligned;
mod device;
mod direct;
pub mod partition;
mod pread;
mod read;
pub mod scan;
pub mod stages;
mod uring;

pub use device::{open_device, Device, DeviceKind, IoMode, OpenError, Overlay, SpecError, Target};
pub use read::{ReadReq, Reader};
