//! Large tables of atomics that start at zero, taken from zeroed memory.
//!
//! A table built by storing zeros touches every page; one taken with
//! `alloc_zeroed` leaves big tables to the kernel's zero pages, so the
//! stretches that stay zero (the inodes a file system never used, the
//! maps of rare problems) take no memory at all.

use std::alloc::{alloc_zeroed, handle_alloc_error, Layout};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8};

/// Atomics for which all-zero bytes are a valid value (zero).
pub(crate) trait ZeroValid: Sized {}

impl ZeroValid for AtomicU8 {}
impl ZeroValid for AtomicU32 {}
impl ZeroValid for AtomicU64 {}

/// `len` atomics of value zero.
pub(crate) fn table<T: ZeroValid>(len: usize) -> Box<[T]> {
    if len == 0 {
        return Vec::new().into_boxed_slice();
    }
    let Ok(layout) = Layout::array::<T>(len) else {
        // More than the address space: the same end as any allocation
        // the allocator cannot serve.
        handle_alloc_error(Layout::new::<T>())
    };
    // SAFETY: `layout` has a non-zero size (len > 0, and every `T` here
    // is at least a byte).
    let ptr = unsafe { alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        handle_alloc_error(layout)
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout
    // of `[T; len]`, which is what a `Box<[T]>` of `len` frees with; `T`
    // is one of the integer atomics above, which have the in-memory
    // representation of their integer, so zeroed memory holds `len`
    // valid values (zero).
    unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn tables_start_at_zero() {
        let t: Box<[AtomicU64]> = table(100_000);
        assert_eq!(t.len(), 100_000);
        assert!(t.iter().all(|w| w.load(Ordering::Relaxed) == 0));
        let b: Box<[AtomicU8]> = table(3);
        b[2].store(7, Ordering::Relaxed);
        assert_eq!(b[2].load(Ordering::Relaxed), 7);
        let e: Box<[AtomicU32]> = table(0);
        assert!(e.is_empty());
    }
}
