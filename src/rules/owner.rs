//! A lock's owner value, stored inside the lock itself when it is short.
//!
//! Owners are nearly always short (the client's are 32 hex digits, a UUID
//! is 36): kept inline, a held lock is one allocation instead of two, which
//! saves the owner's own allocation (32 B for a 32-byte owner) and, on
//! every command, the cache miss of following a second pointer. Longer
//! owners (up to `lock.max-owner-len`) go to the heap as before.

use std::fmt;
use std::ops::Deref;

/// Longest owner kept inline: as many bytes as make `Owner` 40 bytes
/// (tag and length included), so that a `Lock` is 64 bytes, one jemalloc
/// size class.
pub const INLINE: usize = 38;

#[derive(Clone)]
pub enum Owner {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl Owner {
    /// Bytes held on the heap beside the lock (0 for an inline owner).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Owner::Inline { .. } => 0,
            Owner::Heap(b) => b.len(),
        }
    }
}

impl From<&[u8]> for Owner {
    fn from(b: &[u8]) -> Owner {
        if b.len() <= INLINE {
            let mut bytes = [0u8; INLINE];
            bytes[..b.len()].copy_from_slice(b);
            Owner::Inline {
                len: b.len() as u8,
                bytes,
            }
        } else {
            Owner::Heap(b.into())
        }
    }
}

impl Deref for Owner {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Owner::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Owner::Heap(b) => b,
        }
    }
}

impl PartialEq for Owner {
    fn eq(&self, other: &Owner) -> bool {
        **self == **other
    }
}

impl Eq for Owner {}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::lock::Lock;
    use crate::rules::value::Value;

    #[test]
    fn short_owners_are_inline_and_long_ones_on_the_heap() {
        for len in [1, 32, 36, INLINE, INLINE + 1, 1000] {
            let raw: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let owner = Owner::from(&raw[..]);
            assert_eq!(&*owner, &raw[..]);
            assert_eq!(owner.heap_bytes(), if len <= INLINE { 0 } else { len });
            assert_eq!(owner, Owner::from(&raw[..]));
        }
        assert_ne!(Owner::from(&b"ab"[..]), Owner::from(&b"abc"[..]));
        // An inline and a heap owner with the same bytes cannot occur (the
        // length decides), but they compare by bytes all the same.
        assert_eq!(Owner::Heap(b"ab"[..].into()), Owner::from(&b"ab"[..]));
    }

    #[test]
    fn a_held_lock_is_one_64_byte_allocation() {
        assert_eq!(std::mem::size_of::<Owner>(), 40);
        assert_eq!(std::mem::size_of::<Lock>(), 64);
        assert_eq!(std::mem::size_of::<Value>(), 64);
    }
}
