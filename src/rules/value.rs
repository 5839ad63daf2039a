//! What a lock key holds: an exclusive lock (`lock.rs`) or shared holders
//! (`shared.rs`). Its own file so that those two, which the shared holders
//! build on, do not import each other.

use crate::rules::clock::Millis;
use crate::rules::lock::Lock;
use crate::rules::shared::Shared;

/// What a lock key holds: one exclusive holder (the mutex, unchanged and as
/// small as before: the shared variant is a pointer that fits beside the
/// owner's non-null niche, so `Value` is exactly as large as `Lock`), or
/// shared holders (read-write lock, semaphore; see `shared.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Exclusive(Lock),
    Shared(Box<Shared>),
}

impl Value {
    /// No live holder left: the key reads as empty.
    pub fn is_expired(&self, now: Millis) -> bool {
        match self {
            Value::Exclusive(lock) => lock.is_expired(now),
            Value::Shared(shared) => shared.is_expired(now),
        }
    }

    /// Some holder is past its deadline (the reaper removes it).
    pub fn has_expired_holder(&self, now: Millis) -> bool {
        match self {
            Value::Exclusive(lock) => lock.is_expired(now),
            Value::Shared(shared) => shared.has_expired(now),
        }
    }
}
