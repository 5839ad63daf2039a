//! Shared holds: a read-write lock (`SHARED`) and a counting semaphore
//! (`SHARED LIMIT n`) on the same key type and queue as the exclusive lock.
//! Pure Rust, no FFI, unit-tested here and in `model_tests.rs`.
//!
//! Each shared holder is a `Lock` of its own (owner, token, deadline,
//! reentrant holds), so RELEASE, EXTEND and FENCE act on that owner's hold
//! alone, and a holder past its deadline frees only its own place. Like an
//! exclusive lock, a holder past its deadline counts as absent everywhere;
//! the glue removes such holders (and replicates their removal) before it
//! acts on a key, so a grant never lands beside a stale copy of itself.
//!
//! A key may have hundreds of holders, and every command on it asks "is
//! anyone past the deadline?" and "where is this owner's hold?". Both are
//! answered without walking the 64-byte holds: a lower bound on every
//! deadline says in O(1) that nobody expired, and a 4-byte tag per holder
//! (a hash of its owner) finds the hold by scanning tags, comparing owner
//! bytes only where a tag matches. A shared acquire + release beside 100
//! holders had cost 2–3× an exclusive pair in server time, mostly in those
//! walks (2026-11-28).

use crate::rules::args::MAX_LIMIT;
use crate::rules::clock::Millis;
use crate::rules::lock::{self, Lock};

/// A `LIMIT` other than the key's.
pub const LIMIT_DIFFERS: &str = "ERR LIMIT differs from the limit this lock was created with";

#[derive(Debug, Clone)]
pub struct Shared {
    /// In grant order (a downgraded exclusive holder first). At most one
    /// hold per owner.
    holders: Vec<Lock>,
    /// `tags[i]` is `tag(&holders[i].owner)`: the lookup scans these 4-byte
    /// values, not the 64-byte holds.
    tags: Vec<u32>,
    /// No holder's deadline is earlier (Millis::MAX without holders). A
    /// bound, not always the minimum: a deadline moved later leaves it
    /// behind, and the next pass that finds it due sets it again. While it
    /// is in the future, nobody has expired: the check every command makes.
    earliest: Millis,
    /// At most this many holders at once; None: unlimited (readers).
    pub limit: Option<u32>,
}

/// Two keys are equal when their holders (in order) and limit are; the
/// tags follow the holders, and the bound may lag behind them.
impl PartialEq for Shared {
    fn eq(&self, other: &Shared) -> bool {
        self.holders == other.holders && self.limit == other.limit
    }
}

impl Eq for Shared {}

/// A 32-bit hash of an owner (FxHash-style, 8 bytes a step): equal owners
/// have equal tags, so only the holds whose tag matches are compared byte
/// by byte. Not keyed: owners chosen to collide only make the lookup
/// compare more owners, never find a wrong one.
fn tag(owner: &[u8]) -> u32 {
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let mut h = owner.len() as u64;
    let mut chunks = owner.chunks_exact(8);
    for c in &mut chunks {
        let word = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
        h = (h.rotate_left(5) ^ word).wrapping_mul(K);
    }
    let mut last = [0u8; 8];
    last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h.rotate_left(5) ^ u64::from_le_bytes(last)).wrapping_mul(K);
    (h >> 32) as u32
}

impl Shared {
    /// A shared key with its first holder; the first grant sets the limit.
    pub fn new(first: Lock, limit: Option<u32>) -> Shared {
        Shared {
            tags: vec![tag(&first.owner)],
            earliest: first.deadline,
            holders: vec![first],
            limit,
        }
    }

    /// Every hold, live or not, in grant order.
    pub fn holders(&self) -> &[Lock] {
        &self.holders
    }

    /// Nobody can be past the deadline: the common case, in O(1).
    fn none_expired(&self, now: Millis) -> bool {
        now < self.earliest
    }

    pub fn live(&self, now: Millis) -> usize {
        if self.none_expired(now) {
            return self.holders.len();
        }
        self.holders.iter().filter(|h| !h.is_expired(now)).count()
    }

    /// No live holder left: the key reads as empty.
    pub fn is_expired(&self, now: Millis) -> bool {
        // Empty (every holder pruned) reads as expired, as before: the
        // bound is Millis::MAX then and must not say "live".
        self.holders.is_empty()
            || (!self.none_expired(now) && self.holders.iter().all(|h| h.is_expired(now)))
    }

    /// Some holder is past its deadline (the glue and the reaper take it out).
    pub fn has_expired(&self, now: Millis) -> bool {
        !self.none_expired(now) && self.holders.iter().any(|h| h.is_expired(now))
    }

    /// Milliseconds until the next live holder's deadline (when a place may
    /// free up for a waiter); 0 when none is live. A walk: only a request
    /// that waits asks this.
    pub fn next_change(&self, now: Millis) -> Millis {
        self.holders
            .iter()
            .filter(|h| !h.is_expired(now))
            .map(|h| h.remaining(now))
            .min()
            .unwrap_or(0)
    }

    pub fn has_room(&self, now: Millis) -> bool {
        self.limit
            .is_none_or(|limit| self.live(now) < limit as usize)
    }

    /// Where `owner`'s hold is, whatever its state.
    fn position(&self, owner: &[u8]) -> Option<usize> {
        let t = tag(owner);
        self.tags
            .iter()
            .enumerate()
            .filter(|&(_, &x)| x == t)
            .map(|(i, _)| i)
            .find(|&i| &*self.holders[i].owner == owner)
    }

    fn live_position(&self, owner: &[u8], now: Millis) -> Option<usize> {
        self.position(owner)
            .filter(|&i| !self.holders[i].is_expired(now))
    }

    /// `owner`'s hold, whatever its state.
    pub fn get(&self, owner: &[u8]) -> Option<&Lock> {
        self.position(owner).map(|i| &self.holders[i])
    }

    /// The live hold of `owner`.
    pub fn holder(&self, owner: &[u8], now: Millis) -> Option<&Lock> {
        self.live_position(owner, now).map(|i| &self.holders[i])
    }

    /// Change the live hold of `owner` with `f`, keeping the deadline bound
    /// (a deadline may move earlier: EXTEND with a shorter TTL).
    fn with_holder<R>(
        &mut self,
        owner: &[u8],
        now: Millis,
        f: impl FnOnce(&mut Lock) -> R,
    ) -> Option<R> {
        let at = self.live_position(owner, now)?;
        let hold = &mut self.holders[at];
        let r = f(hold);
        self.earliest = self.earliest.min(hold.deadline);
        Some(r)
    }

    /// A live holder's second request through the queue (a WAIT retry):
    /// its deadline becomes `now + ttl`, as a plain retry sets it.
    pub fn retry(&mut self, owner: &[u8], ttl: Millis, now: Millis) -> Option<&Lock> {
        let at = self.live_position(owner, now)?;
        let deadline = now.saturating_add(ttl);
        self.holders[at].deadline = deadline;
        self.earliest = self.earliest.min(deadline);
        Some(&self.holders[at])
    }

    /// Take out every holder past its deadline; the glue replicates each
    /// removal and deletes the key if none is left. One pass, and none at
    /// all while the bound says nobody is due.
    pub fn prune(&mut self, now: Millis) -> Vec<Lock> {
        if self.none_expired(now) {
            return Vec::new();
        }
        // Compact the live holds to the front in order, then cut the rest.
        let mut kept = 0;
        let mut earliest = Millis::MAX;
        for i in 0..self.holders.len() {
            if !self.holders[i].is_expired(now) {
                earliest = earliest.min(self.holders[i].deadline);
                self.holders.swap(kept, i);
                self.tags.swap(kept, i);
                kept += 1;
            }
        }
        self.earliest = earliest;
        self.tags.truncate(kept);
        let gone = self.holders.split_off(kept);
        self.give_back_places();
        gone
    }

    /// Free the places of holders that left once fewer than half are in
    /// use: a key that had thousands of holders and keeps one had kept
    /// every place (360 KB in MEMORY USAGE for one holder, 2026-11-28).
    /// Half, not a quarter, so that a key whose holders come and go around
    /// one size does not shrink and grow on every change.
    fn give_back_places(&mut self) {
        let len = self.holders.len();
        if self.holders.capacity() >= 2 * len + 4 {
            let keep = len + len / 4;
            self.holders.shrink_to(keep);
            self.tags.shrink_to(keep);
        }
    }

    /// Add a holder granted a fresh token (`Acquired::Join`, a hand-off).
    /// A stale (expired) hold of the same owner is replaced.
    pub fn join(&mut self, holder: Lock, now: Millis) {
        if let Some(at) = self.position(&holder.owner) {
            if self.holders[at].is_expired(now) {
                self.remove_at(at);
            }
        }
        self.push(holder);
    }

    /// Append a holder, growing the list by a quarter (at least one) when
    /// full rather than doubling it: a holder is 64 bytes (the owner is
    /// inside it), so a doubled list of ten holders kept six unused, more
    /// than the owners' separate allocations had cost (122 against 114 B per
    /// holder, 10 holders a key, 2026-11-28). Still geometric, so a key with
    /// thousands of holders is not copied on every join.
    pub fn push(&mut self, holder: Lock) {
        if self.holders.len() == self.holders.capacity() {
            let more = (self.holders.len() / 4).max(1);
            self.holders.reserve_exact(more);
            self.tags.reserve_exact(more);
        }
        self.earliest = self.earliest.min(holder.deadline);
        self.tags.push(tag(&holder.owner));
        self.holders.push(holder);
    }

    /// Set `holder` as its owner's hold whatever was there (a replicated
    /// hold, absolute), or add it.
    pub fn put(&mut self, holder: Lock) {
        match self.position(&holder.owner) {
            Some(at) => {
                self.earliest = self.earliest.min(holder.deadline);
                self.holders[at] = holder;
            }
            None => self.push(holder),
        }
    }

    fn remove_at(&mut self, at: usize) -> Lock {
        self.tags.remove(at);
        let gone = self.holders.remove(at);
        if self.holders.is_empty() {
            self.earliest = Millis::MAX;
        }
        self.give_back_places();
        gone
    }

    /// Take out `owner`'s hold whatever its state (a replicated removal).
    pub fn remove(&mut self, owner: &[u8]) -> Option<Lock> {
        let at = self.position(owner)?;
        Some(self.remove_at(at))
    }

    /// Heap bytes the key holds beyond its `Shared`: the holds, their
    /// tags, and owners too long to be kept inline.
    pub fn heap_bytes(&self) -> usize {
        self.holders.capacity() * std::mem::size_of::<Lock>()
            + self.tags.capacity() * std::mem::size_of::<u32>()
            + self
                .holders
                .iter()
                .map(|h| h.owner.heap_bytes())
                .sum::<usize>()
    }
}

/// Is `limit` (the request's `LIMIT`, if any) acceptable on a key whose
/// limit is `current`? A request without `LIMIT` joins under any limit; one
/// naming a limit must name the key's (a key created without one has none).
pub fn limit_fits(requested: Option<u32>, current: Option<u32>) -> bool {
    requested.is_none() || requested == current
}

/// What a `SHARED` request decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharedAcquire {
    /// No live holder: the caller creates a shared key with this holder and
    /// the request's limit, under a fresh token.
    Free,
    /// Room left and the caller saw no waiter queued: add a holder under a
    /// fresh token (the caller checks the queue first).
    Join,
    /// Already a shared holder: TTL refreshed (hold count raised if
    /// REENTRANT), its own token is the reply.
    Renewed { token: u64, holds: u32 },
    /// The exclusive holder asked `SHARED`: the caller turns its lock into
    /// the key's first shared hold, keeping its token (already applied to
    /// the lock: deadline and holds as a renewal sets them).
    Downgraded { token: u64 },
    /// Held exclusive by another owner, or no room under the limit.
    Busy,
    /// The request names a limit other than the key's: an error, nothing
    /// changed.
    LimitDiffers,
}

/// Renew a hold the way an exclusive renewal does: a re-entry adds a hold
/// and never shortens the deadline, a plain retry sets what it asks.
fn renew(hold: &mut Lock, ttl: Millis, reentrant: bool, now: Millis) {
    let renewed = now.saturating_add(ttl);
    if reentrant {
        hold.holds = hold.holds.saturating_add(1);
        hold.deadline = hold.deadline.max(renewed);
    } else {
        hold.deadline = renewed;
    }
}

/// A `SHARED` request on a key that holds an exclusive lock.
pub fn on_exclusive(
    lock: &mut Lock,
    owner: &[u8],
    ttl: Millis,
    reentrant: bool,
    now: Millis,
) -> SharedAcquire {
    if lock.is_expired(now) {
        SharedAcquire::Free
    } else if &*lock.owner != owner {
        SharedAcquire::Busy
    } else {
        renew(lock, ttl, reentrant, now);
        SharedAcquire::Downgraded { token: lock.token }
    }
}

/// A `SHARED` request on a shared key. Join means "room"; whether a queued
/// waiter is ahead is the caller's to check (it owns the queue).
pub fn on_shared(
    shared: &mut Shared,
    owner: &[u8],
    ttl: Millis,
    reentrant: bool,
    limit: Option<u32>,
    now: Millis,
) -> SharedAcquire {
    if shared.is_expired(now) {
        return SharedAcquire::Free;
    }
    if !limit_fits(limit, shared.limit) {
        return SharedAcquire::LimitDiffers;
    }
    let renewed = shared.with_holder(owner, now, |hold| {
        renew(hold, ttl, reentrant, now);
        SharedAcquire::Renewed {
            token: hold.token,
            holds: hold.holds,
        }
    });
    if let Some(renewed) = renewed {
        return renewed;
    }
    if shared.has_room(now) {
        SharedAcquire::Join
    } else {
        SharedAcquire::Busy
    }
}

/// What an exclusive request on a shared key decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExclusiveOnShared {
    /// No live holder: the caller replaces the key with an exclusive lock.
    Free,
    Busy,
    /// The owner holds it shared: no upgrade (two upgrading readers would
    /// wait for each other for good). An error, nothing changed.
    NoUpgrade,
}

pub fn exclusive_on_shared(shared: &Shared, owner: &[u8], now: Millis) -> ExclusiveOnShared {
    if shared.is_expired(now) {
        ExclusiveOnShared::Free
    } else if shared.holder(owner, now).is_some() {
        ExclusiveOnShared::NoUpgrade
    } else {
        ExclusiveOnShared::Busy
    }
}

/// `LOCK.RELEASE`, `LOCK.EXTEND` and `LOCK.FENCE` on a shared key act on
/// `owner`'s hold alone, with the exclusive rules; an owner holding nothing
/// is told "another owner" while anyone holds, "not held" otherwise.
/// `Release::Deleted` here means: this holder leaves (the glue removes it,
/// and deletes the key if no live holder is left).
pub fn release(shared: &mut Shared, owner: &[u8], now: Millis) -> lock::Release {
    let empty = shared.is_expired(now);
    match shared.with_holder(owner, now, |hold| lock::release(Some(hold), owner, now)) {
        Some(outcome) => outcome,
        None if empty => lock::Release::NotHeld,
        None => lock::Release::WrongOwner,
    }
}

pub fn extend(shared: &mut Shared, owner: &[u8], ttl: Millis, now: Millis) -> lock::Extend {
    let empty = shared.is_expired(now);
    match shared.with_holder(owner, now, |hold| lock::extend(Some(hold), owner, ttl, now)) {
        Some(outcome) => outcome,
        None if empty => lock::Extend::NotHeld,
        None => lock::Extend::WrongOwner,
    }
}

pub fn fence(shared: &mut Shared, owner: &[u8], token: u64, now: Millis) -> lock::Fence {
    let empty = shared.is_expired(now);
    match shared.with_holder(owner, now, |hold| {
        lock::fence(Some(hold), owner, token, now)
    }) {
        Some(outcome) => outcome,
        None if empty => lock::Fence::NotHeld,
        None => lock::Fence::WrongOwner,
    }
}

/// The key as the head of its queue sees it.
#[derive(Debug, Clone, Copy)]
pub enum Current<'a> {
    Free,
    Exclusive(&'a Lock),
    Shared(&'a Shared),
}

/// What the head of a key's queue gets now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Grant it (a fresh token): exclusive on a free key, shared on a free
    /// key or with room.
    Grant,
    /// It stays at the head, and everyone behind it waits too: an
    /// exclusive head holds back every shared request behind it, so a
    /// stream of readers never starves a writer.
    Wait,
    /// A shared waiter whose `LIMIT` is not the key's: it is told so and
    /// leaves the queue (nothing changed).
    LimitDiffers,
}

/// Decide for the head of the queue. The glue grants heads one after the
/// other while this says Grant: consecutive shared waiters are admitted
/// together up to the limit, an exclusive one only on a free key.
pub fn admit(current: Current, shared: bool, limit: Option<u32>, now: Millis) -> Admit {
    match current {
        Current::Free => Admit::Grant,
        Current::Exclusive(lock) if lock.is_expired(now) => Admit::Grant,
        Current::Exclusive(_) => Admit::Wait,
        Current::Shared(s) if s.is_expired(now) => Admit::Grant,
        Current::Shared(_) if !shared => Admit::Wait,
        Current::Shared(s) if !limit_fits(limit, s.limit) => Admit::LimitDiffers,
        Current::Shared(s) if s.has_room(now) => Admit::Grant,
        Current::Shared(_) => Admit::Wait,
    }
}

/// A shared key's stored form (RDB, RESTORE): each holder already passed
/// `lock::from_stored`; here the key as a whole is checked, so that no
/// payload creates more holders than its limit or one owner twice.
pub fn from_stored(holders: Vec<Lock>, limit: u64) -> Result<Shared, &'static str> {
    let limit = match limit {
        0 => None,
        n => Some(
            u32::try_from(n)
                .ok()
                .filter(|&n| n <= MAX_LIMIT)
                .ok_or("limit out of bounds")?,
        ),
    };
    if holders.is_empty() {
        return Err("a shared lock without holders");
    }
    if limit.is_some_and(|l| holders.len() > l as usize) {
        return Err("more holders than the limit");
    }
    let mut owners: Vec<&[u8]> = holders.iter().map(|h| &*h.owner).collect();
    owners.sort_unstable();
    if owners.windows(2).any(|w| w[0] == w[1]) {
        return Err("one owner holds twice");
    }
    // Loaded by pushes (the count is not trusted for a reservation): no
    // spare places kept for good.
    let mut holders = holders;
    holders.shrink_to_fit();
    Ok(Shared {
        tags: holders.iter().map(|h| tag(&h.owner)).collect(),
        earliest: holders
            .iter()
            .map(|h| h.deadline)
            .min()
            .unwrap_or(Millis::MAX),
        holders,
        limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::value::Value;

    fn hold(owner: &str, token: u64, ttl: Millis, now: Millis) -> Lock {
        Lock::new(owner.as_bytes(), token, ttl, now)
    }

    #[test]
    fn the_exclusive_value_costs_nothing_extra() {
        assert_eq!(
            std::mem::size_of::<Value>(),
            std::mem::size_of::<Lock>(),
            "Value must stay as small as the exclusive Lock it wraps"
        );
    }

    #[test]
    fn readers_join_without_a_limit() {
        let mut s = Shared::new(hold("a", 1, 100, 0), None);
        for (i, o) in ["b", "c", "d"].iter().enumerate() {
            assert_eq!(
                on_shared(&mut s, o.as_bytes(), 100, false, None, 1),
                SharedAcquire::Join
            );
            s.join(hold(o, 2 + i as u64, 100, 1), 1);
        }
        assert_eq!(s.live(1), 4);
    }

    #[test]
    fn the_limit_holds_and_an_expired_holder_frees_only_its_place() {
        let mut s = Shared::new(hold("a", 1, 10, 0), Some(2));
        assert_eq!(
            on_shared(&mut s, b"b", 100, false, None, 1),
            SharedAcquire::Join
        );
        s.join(hold("b", 2, 100, 1), 1);
        assert_eq!(
            on_shared(&mut s, b"c", 100, false, None, 2),
            SharedAcquire::Busy
        );
        assert_eq!(
            on_shared(&mut s, b"c", 100, false, Some(2), 9),
            SharedAcquire::Busy
        );
        // a's deadline (10) passes: one place, b keeps its own.
        assert_eq!(
            on_shared(&mut s, b"c", 100, false, Some(2), 10),
            SharedAcquire::Join
        );
        assert_eq!(s.next_change(10), 91);
        let gone = s.prune(10);
        assert_eq!(gone.len(), 1);
        assert_eq!(&*gone[0].owner, b"a");
        assert_eq!(s.live(10), 1);
    }

    #[test]
    fn another_limit_is_an_error_that_changes_nothing() {
        let mut s = Shared::new(hold("a", 1, 100, 0), Some(3));
        let before = s.clone();
        assert_eq!(
            on_shared(&mut s, b"b", 5, true, Some(4), 1),
            SharedAcquire::LimitDiffers
        );
        assert_eq!(
            on_shared(&mut s, b"a", 5, true, Some(4), 1),
            SharedAcquire::LimitDiffers
        );
        assert_eq!(s, before);
        let mut readers = Shared::new(hold("a", 1, 100, 0), None);
        assert_eq!(
            on_shared(&mut readers, b"b", 5, false, Some(1), 1),
            SharedAcquire::LimitDiffers,
            "a key created without LIMIT has none to join under"
        );
        // Once every holder is gone the key is free: a new limit is a new key.
        assert_eq!(
            on_shared(&mut s, b"b", 5, false, Some(4), 100),
            SharedAcquire::Free
        );
    }

    #[test]
    fn a_holder_renews_its_own_hold_and_keeps_its_token() {
        let mut s = Shared::new(hold("a", 7, 100, 0), Some(1));
        assert_eq!(
            on_shared(&mut s, b"a", 500, true, Some(1), 50),
            SharedAcquire::Renewed { token: 7, holds: 2 }
        );
        assert_eq!(s.holders()[0].deadline, 550);
        assert_eq!(
            on_shared(&mut s, b"a", 10, true, None, 60),
            SharedAcquire::Renewed { token: 7, holds: 3 }
        );
        assert_eq!(s.holders()[0].deadline, 550, "a re-entry never shortens");
    }

    #[test]
    fn the_exclusive_holder_downgrades_keeping_its_token() {
        let mut l = hold("a", 9, 100, 0);
        assert_eq!(
            on_exclusive(&mut l, b"b", 10, false, 5),
            SharedAcquire::Busy
        );
        assert_eq!(
            on_exclusive(&mut l, b"a", 300, false, 5),
            SharedAcquire::Downgraded { token: 9 }
        );
        assert_eq!(l.deadline, 305);
        assert_eq!(
            on_exclusive(&mut l, b"b", 10, false, 305),
            SharedAcquire::Free
        );
    }

    #[test]
    fn a_shared_holder_cannot_upgrade() {
        let mut s = Shared::new(hold("a", 1, 100, 0), None);
        s.join(hold("b", 2, 100, 0), 0);
        assert_eq!(
            exclusive_on_shared(&s, b"a", 1),
            ExclusiveOnShared::NoUpgrade
        );
        assert_eq!(exclusive_on_shared(&s, b"c", 1), ExclusiveOnShared::Busy);
        assert_eq!(exclusive_on_shared(&s, b"c", 100), ExclusiveOnShared::Free);
    }

    #[test]
    fn the_head_of_the_queue_is_admitted_by_kind() {
        let x = hold("x", 1, 100, 0);
        let s = Shared::new(hold("a", 1, 100, 0), Some(2));
        assert_eq!(admit(Current::Free, false, None, 0), Admit::Grant);
        assert_eq!(admit(Current::Free, true, Some(5), 0), Admit::Grant);
        assert_eq!(admit(Current::Exclusive(&x), true, None, 1), Admit::Wait);
        assert_eq!(
            admit(Current::Exclusive(&x), false, None, 100),
            Admit::Grant
        );
        assert_eq!(
            admit(Current::Shared(&s), false, None, 1),
            Admit::Wait,
            "writer waits for readers"
        );
        assert_eq!(admit(Current::Shared(&s), true, None, 1), Admit::Grant);
        assert_eq!(admit(Current::Shared(&s), true, Some(2), 1), Admit::Grant);
        assert_eq!(
            admit(Current::Shared(&s), true, Some(3), 1),
            Admit::LimitDiffers
        );
        assert_eq!(admit(Current::Shared(&s), false, None, 100), Admit::Grant);
        let mut full = s.clone();
        full.join(hold("b", 2, 100, 0), 0);
        assert_eq!(admit(Current::Shared(&full), true, None, 1), Admit::Wait);
    }

    #[test]
    fn stored_shared_keys_are_checked_as_a_whole() {
        let h = |o: &str| hold(o, 5, 10, 0);
        assert!(from_stored(vec![h("a"), h("b")], 2).is_ok());
        assert_eq!(from_stored(vec![h("a"), h("b")], 0).unwrap().limit, None);
        assert_eq!(
            from_stored(vec![h("a"), h("b"), h("c")], 2).unwrap_err(),
            "more holders than the limit"
        );
        assert!(from_stored(vec![], 2).is_err());
        assert!(from_stored(vec![h("a"), h("a")], 0).is_err());
        assert!(from_stored(vec![h("a")], 1 << 31).is_err());
        assert!(from_stored(vec![h("a")], u64::MAX).is_err());
    }

    #[test]
    fn release_extend_and_fence_act_on_that_owners_hold_alone() {
        let mut s = Shared::new(hold("a", 1, 100, 0), None);
        s.join(hold("b", 2, 100, 0), 0);
        assert_eq!(extend(&mut s, b"a", 500, 10), lock::Extend::Extended);
        assert_eq!(
            (s.holders()[0].deadline, s.holders()[1].deadline),
            (510, 100)
        );
        assert_eq!(extend(&mut s, b"c", 500, 10), lock::Extend::WrongOwner);
        assert_eq!(
            fence(&mut s, b"b", 40, 10),
            lock::Fence::Raised { token: 40 }
        );
        assert_eq!(s.holders()[0].token, 1);
        assert_eq!(release(&mut s, b"c", 10), lock::Release::WrongOwner);
        assert_eq!(release(&mut s, b"b", 10), lock::Release::Deleted);
        assert_eq!(release(&mut s, b"a", 600), lock::Release::NotHeld);
        assert_eq!(extend(&mut s, b"a", 5, 600), lock::Extend::NotHeld);
        assert_eq!(fence(&mut s, b"a", 5, 600), lock::Fence::NotHeld);
    }

    #[test]
    fn a_list_of_holders_grows_by_a_quarter_not_double() {
        let mut s = Shared::new(hold("h0", 1, 10, 0), None);
        for i in 1..10 {
            s.join(hold(&format!("h{i}"), i + 1, 10, 0), 0);
        }
        // Doubling had left 16 places for 10 holders.
        assert_eq!(s.holders().len(), 10);
        assert!(s.holders.capacity() <= 12, "{}", s.holders.capacity());
        for i in 10..1000 {
            s.join(hold(&format!("h{i}"), i + 1, 10, 0), 0);
        }
        assert!(s.holders.capacity() < 1000 * 5 / 4 + 2);
    }

    #[test]
    fn owners_with_the_same_tag_are_told_apart() {
        // A pair found by brute force over "own%07d" (2026-11-28).
        let (x, y) = (&b"own0002190"[..], &b"own0002920"[..]);
        assert_eq!(tag(x), tag(y));
        let mut s = Shared::new(Lock::new(x, 1, 1000, 0), Some(3));
        s.join(Lock::new(y, 2, 1000, 0), 0);
        s.join(hold("z", 3, 1000, 0), 0);
        assert_eq!(extend(&mut s, y, 10, 0), lock::Extend::Extended);
        assert_eq!(s.get(x).map(|h| h.deadline), Some(1000));
        assert_eq!(s.get(y).map(|h| h.deadline), Some(10));
        // y expires alone; x is still found after the pass moves holds.
        assert_eq!(s.prune(10).len(), 1);
        assert_eq!(s.holder(x, 10).map(|h| h.token), Some(1));
        assert!(s.get(y).is_none());
        assert_eq!(release(&mut s, y, 10), lock::Release::WrongOwner);
        assert_eq!(release(&mut s, x, 10), lock::Release::Deleted);
        assert_eq!(s.remove(x).map(|h| h.token), Some(1));
        assert_eq!(s.holders().len(), 1);
    }

    #[test]
    fn places_left_by_holders_are_given_back() {
        // 5,000 holders joined and 4,999 left one by one (RELEASE) or all
        // at once (expiry): the one left kept 5,000 places, 360 KB in
        // MEMORY USAGE for one holder (2026-11-28).
        for by_expiry in [false, true] {
            let mut s = Shared::new(hold("h0", 1, 1000, 0), None);
            for i in 1..5000 {
                s.join(hold(&format!("h{i}"), i + 1, 10, 0), 0);
            }
            if by_expiry {
                assert_eq!(s.prune(10).len(), 4999);
            } else {
                for i in 1..5000 {
                    assert!(s.remove(format!("h{i}").as_bytes()).is_some());
                }
            }
            assert_eq!(s.holders().len(), 1);
            assert!(s.heap_bytes() < 1024, "{} bytes", s.heap_bytes());
            assert!(s.holder(b"h0", 10).is_some());
            // Joining again after the shrink still finds every holder.
            for i in 1..100 {
                s.join(hold(&format!("n{i}"), i + 1, 1000, 10), 10);
            }
            assert_eq!(s.tags.len(), s.holders.len());
            assert!((1..100).all(|i| s.holder(format!("n{i}").as_bytes(), 10).is_some()));
        }
    }

    #[test]
    fn join_replaces_a_stale_hold_of_the_same_owner() {
        let mut s = Shared::new(hold("a", 1, 10, 0), None);
        s.join(hold("a", 2, 10, 20), 20);
        assert_eq!(s.holders().len(), 1);
        assert_eq!(s.holders()[0].token, 2);
        assert_eq!(s.remove(b"a").map(|h| h.token), Some(2));
        assert!(s.remove(b"a").is_none());
    }

    #[test]
    fn a_deadline_moved_earlier_is_seen_expiring() {
        // The bound on deadlines must follow every way a hold can shorten:
        // EXTEND, a plain SHARED retry, a WAIT retry, a replicated hold.
        let mut s = Shared::new(hold("a", 1, 1000, 0), None);
        s.join(hold("b", 2, 1000, 0), 0);
        s.join(hold("c", 3, 1000, 0), 0);
        s.join(hold("d", 4, 1000, 0), 0);
        assert!(!s.has_expired(999));
        assert_eq!(extend(&mut s, b"a", 10, 0), lock::Extend::Extended);
        assert_eq!(
            on_shared(&mut s, b"b", 20, false, None, 0),
            SharedAcquire::Renewed { token: 2, holds: 1 }
        );
        assert_eq!(s.retry(b"c", 30, 0).map(|h| h.token), Some(3));
        s.put(hold("d", 4, 40, 0));
        for (now, live) in [(9, 4), (10, 3), (20, 2), (30, 1), (40, 0)] {
            assert_eq!(s.live(now), live, "at {now}");
            assert_eq!(s.has_expired(now), live < 4, "at {now}");
        }
        assert_eq!(s.holder(b"a", 10), None);
        let gone: Vec<u64> = s.prune(25).iter().map(|h| h.token).collect();
        assert_eq!(gone.len(), 2);
        assert!(gone.contains(&1) && gone.contains(&2));
        assert_eq!(
            s.holders().iter().map(|h| h.token).collect::<Vec<_>>(),
            [3, 4],
            "kept holders keep their order"
        );
        assert!(!s.has_expired(29));
        assert!(s.has_expired(30));
        s.prune(40);
        assert!(s.holders().is_empty());
        assert!(s.is_expired(40), "an emptied key reads as expired");
    }

    #[test]
    fn every_holder_is_found_among_many_by_its_own_owner() {
        // 32-byte owners sharing a long prefix, as clients make them, and
        // owners of every length around the 8-byte steps of the tag.
        let mut owners: Vec<Vec<u8>> = (0..300)
            .map(|i| format!("c{i:031x}").into_bytes())
            .collect();
        owners.extend((0..20).map(|n| vec![b'x'; n + 1]));
        let mut s = Shared::new(Lock::new(&owners[0], 1, 100, 0), None);
        for (i, o) in owners.iter().enumerate().skip(1) {
            s.join(Lock::new(o, i as u64 + 1, 100, 0), 0);
        }
        for (i, o) in owners.iter().enumerate() {
            assert_eq!(s.holder(o, 1).map(|h| h.token), Some(i as u64 + 1));
        }
        assert!(s.holder(b"c000000000000000000000000000012c", 1).is_none());
        assert!(s.get(b"").is_none());
        let removed = s.remove(&owners[150]).map(|h| h.token);
        assert_eq!(removed, Some(151));
        assert!(s.get(&owners[150]).is_none());
        assert_eq!(s.get(&owners[151]).map(|h| h.token), Some(152));
        assert_eq!(s.live(1), owners.len() - 1);
    }
}
