//! How blocks get from the device to the checkers: a block reader with an
//! io_uring path (batched, queued deep), a pread fallback and a direct
//! (O_DIRECT) path with its own read-ahead, plus the
//! bounded stages that connect passes.
//!
//! Nothing here knows what an inode is: callers hand over byte ranges and
//! get bytes back.
//!
//! ```no_run
//! use pipeline::{open_device, IoMode, ReadReq, Target};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dev = open_device(&Target::parse("/dev/sdb1")?, IoMode::Auto)?;
//! println!("{} bytes through {}", dev.size(), dev.io_path());
//! let mut r = dev.reader();
//! let (mut a, mut b) = (vec![0u8; 4096], vec![0u8; 4096]);
//! let mut batch = [ReadReq::new(0, &mut a), ReadReq::new(1 << 20, &mut b)];
//! r.read_batch(&mut batch);
//! for req in &batch {
//!     req.result.as_ref().map_err(|e| e.to_string())?;
//! }
//! # Ok(())
//! # }
//! ```

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
