//! The lock rules. Pure Rust, no FFI: every decision about what happens to a
//! lock is made here and unit-tested without a server. The command layer
//! (`commands.rs`) only translates argv to these calls and the outcome to
//! replies, key writes and replication.
//!
//! Time is a monotonic millisecond count passed in by the caller, so tests
//! drive the clock by hand. A lock whose deadline has been reached
//! (`now >= deadline`) is treated exactly as if the key were empty.

pub use crate::rules::clock::Millis;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    /// Inline when short (`owner.rs`): one allocation per held lock.
    pub owner: crate::rules::owner::Owner,
    /// Fencing token handed out when this holder took the lock.
    pub token: u64,
    /// Monotonic deadline; the lock is gone from this instant on.
    pub deadline: Millis,
    /// Reentrant hold count; always >= 1 while the lock exists.
    pub holds: u32,
}

impl Lock {
    pub fn new(owner: &[u8], token: u64, ttl: Millis, now: Millis) -> Lock {
        Lock {
            owner: owner.into(),
            token,
            deadline: now.saturating_add(ttl),
            holds: 1,
        }
    }

    pub fn is_expired(&self, now: Millis) -> bool {
        now >= self.deadline
    }

    /// Milliseconds left before the lock expires (0 once expired).
    pub fn remaining(&self, now: Millis) -> Millis {
        self.deadline.saturating_sub(now)
    }

    fn held_by(&self, owner: &[u8]) -> bool {
        &*self.owner == owner
    }
}

/// A lock's stored form (RDB, RESTORE payload, LOCK.APPLY): checked against
/// the same bounds a grant obeys before it becomes a lock, so that no
/// payload can create one that never expires, cannot be released, or
/// carries a token the counter cannot stay above.
pub fn from_stored(
    owner: &[u8],
    token: u64,
    remaining: Millis,
    holds: u64,
    limits: &crate::rules::args::Limits,
    now: Millis,
) -> Result<Lock, &'static str> {
    if owner.is_empty() || owner.len() > limits.max_owner_len {
        return Err("owner length out of bounds");
    }
    if token == 0 || token > crate::rules::fencing::MAX_TOKEN {
        return Err("token out of bounds");
    }
    if remaining > limits.max_ttl {
        return Err("ttl out of bounds");
    }
    let holds = u32::try_from(holds)
        .ok()
        .filter(|&h| h >= 1)
        .ok_or("holds out of bounds")?;
    let mut lock = Lock::new(owner, token, remaining, now);
    lock.holds = holds;
    Ok(lock)
}

/// What `acquire` decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquire {
    /// No live lock: the caller creates a new one with a fresh token.
    Free,
    /// Same owner again: TTL refreshed (and hold count raised if REENTRANT);
    /// the existing token is the reply.
    Renewed { token: u64, holds: u32 },
    /// Held by another owner.
    Busy,
}

/// Decide an acquire on `current` (the key's lock, if any). Mutates a lock
/// held by the same owner in place.
pub fn acquire(
    current: Option<&mut Lock>,
    owner: &[u8],
    ttl: Millis,
    reentrant: bool,
    now: Millis,
) -> Acquire {
    match current {
        Some(lock) if !lock.is_expired(now) => {
            if !lock.held_by(owner) {
                return Acquire::Busy;
            }
            let renewed = now.saturating_add(ttl);
            if reentrant {
                lock.holds = lock.holds.saturating_add(1);
                // A re-entry never shortens the lock: the other holds count
                // on its deadline (bcb62a7: a re-entry with a shorter TTL,
                // then released, let the lock expire under the first
                // handle's feet: two holders).
                lock.deadline = lock.deadline.max(renewed);
            } else {
                lock.deadline = renewed; // a retry: what the request set
            }
            Acquire::Renewed {
                token: lock.token,
                holds: lock.holds,
            }
        }
        _ => Acquire::Free,
    }
}

/// What `release` decided. Replies: Deleted/HoldDropped -> 1,
/// WrongOwner -> 0, NotHeld -> -1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Last hold dropped: the caller deletes the key.
    Deleted,
    /// One reentrant hold dropped; the lock stays with its deadline.
    HoldDropped {
        holds: u32,
    },
    WrongOwner,
    NotHeld,
}

pub fn release(current: Option<&mut Lock>, owner: &[u8], now: Millis) -> Release {
    match current {
        Some(lock) if !lock.is_expired(now) => {
            if !lock.held_by(owner) {
                Release::WrongOwner
            } else if lock.holds > 1 {
                lock.holds -= 1;
                Release::HoldDropped { holds: lock.holds }
            } else {
                Release::Deleted
            }
        }
        _ => Release::NotHeld,
    }
}

/// What `extend` decided. Replies: Extended -> 1, WrongOwner -> 0, NotHeld -> -1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extend {
    Extended,
    WrongOwner,
    NotHeld,
}

/// Set the deadline to `now + ttl` (it may shorten the lock: the owner asked).
pub fn extend(current: Option<&mut Lock>, owner: &[u8], ttl: Millis, now: Millis) -> Extend {
    match current {
        Some(lock) if !lock.is_expired(now) => {
            if !lock.held_by(owner) {
                return Extend::WrongOwner;
            }
            lock.deadline = now.saturating_add(ttl);
            Extend::Extended
        }
        _ => Extend::NotHeld,
    }
}

/// What `fence` decided. Replies: Raised -> the lock's token (> 0),
/// WrongOwner -> 0, NotHeld -> -1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    Raised { token: u64 },
    WrongOwner,
    NotHeld,
}

/// Raise a held lock's token to at least `token` (the quorum client's second
/// round: the token of a quorum lock is the maximum its majority handed out,
/// and each granting node must remember it; see README "Quorum fencing").
pub fn fence(current: Option<&mut Lock>, owner: &[u8], token: u64, now: Millis) -> Fence {
    match current {
        Some(lock) if !lock.is_expired(now) => {
            if !lock.held_by(owner) {
                return Fence::WrongOwner;
            }
            lock.token = lock.token.max(token);
            Fence::Raised { token: lock.token }
        }
        _ => Fence::NotHeld,
    }
}

impl Fence {
    pub fn reply(self) -> i64 {
        match self {
            Fence::Raised { token } => token as i64,
            Fence::WrongOwner => 0,
            Fence::NotHeld => -1,
        }
    }
}

impl Release {
    pub fn reply(self) -> i64 {
        match self {
            Release::Deleted | Release::HoldDropped { .. } => 1,
            Release::WrongOwner => 0,
            Release::NotHeld => -1,
        }
    }
}

impl Extend {
    pub fn reply(self) -> i64 {
        match self {
            Extend::Extended => 1,
            Extend::WrongOwner => 0,
            Extend::NotHeld => -1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(owner: &str, token: u64, ttl: Millis, now: Millis) -> Lock {
        Lock::new(owner.as_bytes(), token, ttl, now)
    }

    #[test]
    fn free_key_is_free() {
        assert_eq!(acquire(None, b"a", 100, false, 0), Acquire::Free);
    }

    #[test]
    fn same_owner_refreshes_ttl_and_keeps_token() {
        let mut l = held("a", 7, 100, 0);
        let r = acquire(Some(&mut l), b"a", 500, false, 50);
        assert_eq!(r, Acquire::Renewed { token: 7, holds: 1 });
        assert_eq!(l.deadline, 550);
        assert_eq!(l.holds, 1, "non-reentrant retry must not add holds");
    }

    #[test]
    fn other_owner_is_busy_and_changes_nothing() {
        let mut l = held("a", 7, 100, 0);
        let before = l.clone();
        assert_eq!(acquire(Some(&mut l), b"b", 500, true, 99), Acquire::Busy);
        assert_eq!(l, before);
    }

    #[test]
    fn expiry_is_exactly_at_the_deadline() {
        let mut l = held("a", 7, 100, 0);
        assert!(!l.is_expired(99));
        assert!(l.is_expired(100));
        assert_eq!(l.remaining(99), 1);
        assert_eq!(l.remaining(100), 0);
        assert_eq!(acquire(Some(&mut l), b"b", 10, false, 99), Acquire::Busy);
        assert_eq!(acquire(Some(&mut l), b"b", 10, false, 100), Acquire::Free);
        assert_eq!(release(Some(&mut l), b"a", 100), Release::NotHeld);
        assert_eq!(extend(Some(&mut l), b"a", 10, 100), Extend::NotHeld);
    }

    #[test]
    fn a_re_entry_never_shortens_the_lock() {
        let mut l = held("a", 3, 1000, 0);
        acquire(Some(&mut l), b"a", 100, true, 10);
        assert_eq!(l.deadline, 1000, "a shorter re-entry keeps the deadline");
        acquire(Some(&mut l), b"a", 5000, true, 20);
        assert_eq!(l.deadline, 5020, "a longer one extends it");
        acquire(Some(&mut l), b"a", 100, false, 30);
        assert_eq!(l.deadline, 130, "a plain retry sets what it asks");
    }

    #[test]
    fn reentrant_holds_count_up_and_down() {
        let mut l = held("a", 3, 100, 0);
        assert_eq!(
            acquire(Some(&mut l), b"a", 100, true, 1),
            Acquire::Renewed { token: 3, holds: 2 }
        );
        assert_eq!(
            acquire(Some(&mut l), b"a", 100, true, 2),
            Acquire::Renewed { token: 3, holds: 3 }
        );
        assert_eq!(
            release(Some(&mut l), b"a", 3),
            Release::HoldDropped { holds: 2 }
        );
        assert_eq!(
            release(Some(&mut l), b"a", 3),
            Release::HoldDropped { holds: 1 }
        );
        assert_eq!(release(Some(&mut l), b"a", 3), Release::Deleted);
    }

    #[test]
    fn release_by_wrong_owner_changes_nothing() {
        let mut l = held("a", 3, 100, 0);
        let before = l.clone();
        assert_eq!(release(Some(&mut l), b"b", 5), Release::WrongOwner);
        assert_eq!(l, before);
        assert_eq!(release(None, b"a", 5), Release::NotHeld);
        assert_eq!(Release::WrongOwner.reply(), 0);
        assert_eq!(Release::NotHeld.reply(), -1);
        assert_eq!(Release::Deleted.reply(), 1);
    }

    #[test]
    fn extend_sets_new_deadline_only_for_owner() {
        let mut l = held("a", 3, 100, 0);
        assert_eq!(extend(Some(&mut l), b"b", 1000, 10), Extend::WrongOwner);
        assert_eq!(l.deadline, 100);
        assert_eq!(extend(Some(&mut l), b"a", 1000, 10), Extend::Extended);
        assert_eq!(l.deadline, 1010);
        assert_eq!(extend(Some(&mut l), b"a", 5, 20), Extend::Extended);
        assert_eq!(l.deadline, 25, "extend may shorten");
        assert_eq!(extend(None, b"a", 5, 20), Extend::NotHeld);
    }

    #[test]
    fn fence_only_raises_and_only_for_the_owner() {
        let mut l = held("a", 10, 100, 0);
        assert_eq!(
            fence(Some(&mut l), b"a", 50, 1),
            Fence::Raised { token: 50 }
        );
        assert_eq!(
            fence(Some(&mut l), b"a", 20, 1),
            Fence::Raised { token: 50 },
            "never lowers"
        );
        assert_eq!(fence(Some(&mut l), b"b", 90, 1), Fence::WrongOwner);
        assert_eq!(l.token, 50);
        assert_eq!(
            fence(Some(&mut l), b"a", 90, 100),
            Fence::NotHeld,
            "expired"
        );
        assert_eq!(fence(None, b"a", 90, 1).reply(), -1);
    }

    #[test]
    fn binary_owners_compare_by_bytes() {
        let mut l = Lock::new(b"a\0b", 1, 100, 0);
        assert_eq!(acquire(Some(&mut l), b"a\0c", 100, false, 1), Acquire::Busy);
        assert_eq!(acquire(Some(&mut l), b"a", 100, false, 1), Acquire::Busy);
        assert!(matches!(
            acquire(Some(&mut l), b"a\0b", 100, false, 1),
            Acquire::Renewed { .. }
        ));
    }

    #[test]
    fn deadlines_saturate() {
        let l = Lock::new(b"a", 1, u64::MAX, 5);
        assert_eq!(l.deadline, u64::MAX);
        assert!(!l.is_expired(u64::MAX - 1));
    }

    #[test]
    fn stored_locks_obey_the_bounds_of_granted_ones() {
        let l = crate::rules::args::Limits {
            max_ttl: 1000,
            max_owner_len: 4,
        };
        let ok = from_stored(b"ann", 7, 1000, 2, &l, 10).unwrap();
        assert_eq!((ok.token, ok.deadline, ok.holds), (7, 1010, 2));
        assert!(from_stored(b"", 7, 10, 1, &l, 0).is_err());
        assert!(from_stored(b"annie", 7, 10, 1, &l, 0).is_err());
        assert!(from_stored(b"ann", 0, 10, 1, &l, 0).is_err());
        assert!(from_stored(b"ann", u64::MAX, 10, 1, &l, 0).is_err());
        assert!(from_stored(b"ann", 1 << 53, 10, 1, &l, 0).is_err());
        assert!(from_stored(b"ann", 7, 1001, 1, &l, 0).is_err());
        assert!(from_stored(b"ann", 7, u64::MAX, 1, &l, 0).is_err());
        assert!(from_stored(b"ann", 7, 10, 0, &l, 0).is_err());
        assert!(from_stored(b"ann", 7, 10, 1 << 40, &l, 0).is_err());
    }
}
