//! On-disk field definitions, apart from the views that read and write
//! them.
//!
//! Every structure's field table (see [`on_disk!`](crate::on_disk)) gives
//! one [`Field`] per field, named as the kernel names it, in a `field`
//! module beside the structure: `inode::field::i_dtime`,
//! `superblock::field::s_state`. The same table generates the read view's
//! getters and the write view's setters, so a field's offset and width
//! are written down once.
//!
//! ```
//! use ext4_layout::inode::{field, Inode, InodeMut};
//!
//! let mut raw = [0u8; 256];
//! let mut w = InodeMut::new(&mut raw);
//! w.set(field::i_links_count, 1);
//! w.set_size(5 << 32 | 7);
//! let r = Inode::new(&raw).unwrap();
//! assert_eq!(r.i_links_count(), 1);
//! assert_eq!(r.size(), 5 << 32 | 7);
//! assert_eq!(field::i_dtime.offset(), 0x14);
//! ```

use std::marker::PhantomData;

use crate::bytes;

/// A fixed-width unsigned integer as it is stored on disk.
pub trait Value: Copy {
    /// Reads it at `off`; 0 past the end of `b`.
    fn read(b: &[u8], off: usize, big_endian: bool) -> Self;
    /// Writes it at `off`; nothing past the end of `b`.
    fn write(b: &mut [u8], off: usize, big_endian: bool, v: Self);
}

impl Value for u8 {
    fn read(b: &[u8], off: usize, _: bool) -> Self {
        bytes::le_u8(b, off)
    }

    fn write(b: &mut [u8], off: usize, _: bool, v: Self) {
        if let Some(x) = b.get_mut(off) {
            *x = v;
        }
    }
}

impl Value for u16 {
    fn read(b: &[u8], off: usize, big_endian: bool) -> Self {
        if big_endian {
            bytes::be_u16(b, off)
        } else {
            bytes::le_u16(b, off)
        }
    }

    fn write(b: &mut [u8], off: usize, big_endian: bool, v: Self) {
        if big_endian {
            if let Some(s) = b.get_mut(off..off.wrapping_add(2)) {
                s.copy_from_slice(&v.to_be_bytes());
            }
        } else {
            bytes::put_le_u16(b, off, v);
        }
    }
}

impl Value for u32 {
    fn read(b: &[u8], off: usize, big_endian: bool) -> Self {
        if big_endian {
            bytes::be_u32(b, off)
        } else {
            bytes::le_u32(b, off)
        }
    }

    fn write(b: &mut [u8], off: usize, big_endian: bool, v: Self) {
        if big_endian {
            bytes::put_be_u32(b, off, v);
        } else {
            bytes::put_le_u32(b, off, v);
        }
    }
}

impl Value for u64 {
    fn read(b: &[u8], off: usize, big_endian: bool) -> Self {
        if big_endian {
            bytes::be_u64(b, off)
        } else {
            bytes::le_u64(b, off)
        }
    }

    fn write(b: &mut [u8], off: usize, big_endian: bool, v: Self) {
        if big_endian {
            bytes::put_be_u64(b, off, v);
        } else {
            bytes::put_le_u64(b, off, v);
        }
    }
}

/// One field of an on-disk structure: where it is, how wide, which byte
/// order. Reads past the end of a buffer give 0 and writes past it do
/// nothing, as everywhere in this crate.
#[derive(Debug)]
pub struct Field<T> {
    offset: usize,
    big_endian: bool,
    _value: PhantomData<fn() -> T>,
}

impl<T> Clone for Field<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Field<T> {}

impl<T: Value> Field<T> {
    /// A little-endian field at `offset`.
    pub const fn le(offset: usize) -> Self {
        Field {
            offset,
            big_endian: false,
            _value: PhantomData,
        }
    }

    /// A big-endian field at `offset` (jbd2).
    pub const fn be(offset: usize) -> Self {
        Field {
            offset,
            big_endian: true,
            _value: PhantomData,
        }
    }

    /// Its byte offset in the structure.
    pub const fn offset(self) -> usize {
        self.offset
    }

    /// The byte just past it: a structure of this many bytes holds it.
    pub const fn end(self) -> usize {
        self.offset + std::mem::size_of::<T>()
    }

    /// Its value in `b`.
    #[inline]
    pub fn get(self, b: &[u8]) -> T {
        T::read(b, self.offset, self.big_endian)
    }

    /// Writes `v` into `b`.
    #[inline]
    pub fn set(self, b: &mut [u8], v: T) {
        T::write(b, self.offset, self.big_endian, v)
    }
}

/// A number stored in two fields, its low bits in one and its high bits
/// in another (`s_blocks_count_lo`/`_hi`, `i_size_lo`/`i_size_high`, a
/// 64-byte group descriptor's `_lo`/`_hi` pairs). The high part is not
/// there in a short structure (a 32-byte descriptor): it reads as 0 and
/// is not written.
#[derive(Debug)]
pub struct Split<L, H> {
    lo: Field<L>,
    hi: Field<H>,
}

impl<L, H> Clone for Split<L, H> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<L, H> Copy for Split<L, H> {}

macro_rules! split_impl {
    ($lo:ty, $hi:ty) => {
        impl Split<$lo, $hi> {
            /// The two halves.
            pub const fn new(lo: Field<$lo>, hi: Field<$hi>) -> Self {
                Split { lo, hi }
            }

            /// The whole value.
            #[inline]
            pub fn get(self, b: &[u8]) -> u64 {
                u64::from(self.lo.get(b)) | u64::from(self.hi.get(b)) << <$lo>::BITS
            }

            /// Writes the low bits, and the high ones where the structure
            /// has room for them.
            #[inline]
            pub fn set(self, b: &mut [u8], v: u64) {
                self.lo.set(b, v as $lo);
                self.hi.set(b, (v >> <$lo>::BITS) as $hi);
            }
        }
    };
}

split_impl!(u32, u32);
split_impl!(u32, u16);
split_impl!(u16, u16);
split_impl!(u16, u8);

/// Generates, from one table of fields, a structure's field definitions
/// (a `field` module of [`Field`] constants), its read view's getters,
/// and its write view (a struct over `&mut [u8]` with `set`, `get` and
/// the same getters).
///
/// ```text
/// on_disk! {
///     read Superblock, write SuperblockMut, le;
///     /// 0x00: total number of inodes.
///     s_inodes_count: u32 @ 0x00;
/// }
/// ```
#[macro_export]
macro_rules! on_disk {
    (read $view:ident, write $mutview:ident, $endian:ident;
     $( $(#[$m:meta])* $name:ident : $ty:ident @ $off:expr; )*) => {
        /// The structure's fields, one [`Field`]($crate::field::Field) each,
        /// with the kernel's names.
        #[allow(non_upper_case_globals)]
        pub mod field {
            use $crate::field::Field;
            $(
                $(#[$m])*
                pub const $name: Field<$ty> = Field::$endian($off);
            )*
        }

        impl<'a> $view<'a> {
            $(
                $(#[$m])*
                #[inline]
                pub fn $name(&self) -> $ty {
                    field::$name.get(self.0)
                }
            )*
        }

        #[doc = concat!("A writable view of the same bytes as [`", stringify!($view), "`].")]
        #[derive(Debug)]
        pub struct $mutview<'a>(&'a mut [u8]);

        impl<'a> $mutview<'a> {
            /// Wraps a buffer; fields past its end read as 0 and are not
            /// written.
            pub fn new(bytes: &'a mut [u8]) -> Self {
                $mutview(bytes)
            }

            /// The bytes.
            pub fn bytes(&mut self) -> &mut [u8] {
                &mut *self.0
            }

            /// A read view of the bytes as they are now.
            pub fn view(&self) -> $view<'_> {
                $view(&*self.0)
            }

            /// Writes one field.
            #[inline]
            pub fn set<T: $crate::field::Value>(&mut self, f: $crate::field::Field<T>, v: T) {
                f.set(&mut *self.0, v)
            }

            /// Reads one field.
            #[inline]
            pub fn get<T: $crate::field::Value>(&self, f: $crate::field::Field<T>) -> T {
                f.get(&*self.0)
            }

            /// Sets the given bits of a field.
            pub fn set_bits(&mut self, f: $crate::field::Field<u32>, bits: u32) {
                let v = f.get(&*self.0) | bits;
                f.set(&mut *self.0, v)
            }

            /// Clears the given bits of a field.
            pub fn clear_bits(&mut self, f: $crate::field::Field<u32>, bits: u32) {
                let v = f.get(&*self.0) & !bits;
                f.set(&mut *self.0, v)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_and_write_in_their_byte_order() {
        let mut b = [0u8; 16];
        Field::<u32>::le(4).set(&mut b, 0x0102_0304);
        assert_eq!(b[4..8], [4, 3, 2, 1]);
        Field::<u32>::be(8).set(&mut b, 0x0102_0304);
        assert_eq!(b[8..12], [1, 2, 3, 4]);
        assert_eq!(Field::<u16>::be(8).get(&b), 0x0102);
        Field::<u64>::le(12).set(&mut b, u64::MAX);
        assert_eq!(b[12..16], [0, 0, 0, 0], "a write past the end does nothing");
        assert_eq!(Field::<u64>::le(12).get(&b), 0);
    }

    #[test]
    fn split_values_span_both_halves() {
        let s = Split::<u32, u16>::new(Field::le(0), Field::le(4));
        let mut b = [0u8; 6];
        s.set(&mut b, 0x1234_5678_9ABC);
        assert_eq!(s.get(&b), 0x1234_5678_9ABC);
        let mut short = [0u8; 4];
        s.set(&mut short, 0x1_0000_0002);
        assert_eq!(s.get(&short), 2, "no room for the high half");
    }
}
