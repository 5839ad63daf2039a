//! Wait queues of clients waiting for a lock (LOCK.ACQUIRE ... WAIT), one
//! per key, served in order of (ticket, arrival). Pure Rust: the handle
//! type `H` is whatever the glue uses to identify a blocked client
//! (`blocking.rs` uses the blocked-client pointer).
//!
//! A waiter's ticket is its `TICKET` or, without one, the server's clock in
//! µs at its arrival (the glue passes it in): the scale clients use for
//! their tickets (their clock in µs when their lock() call began), so that
//! both kinds interleave by time. A quorum client sends one ticket to all
//! its nodes, and every node's queue then puts its waiters in one order.
//!
//! Every waiter costs O(1) memory; pushing, popping the head, removing any
//! waiter (timeout, disconnect) and withdrawing an owner's waiters (per
//! waiter withdrawn) are O(log n) in its key's queue.
//!
//! WAIT deadlines are kept here too, ordered across all keys, so that the
//! glue needs only one timer (for the earliest deadline) to time waiters
//! out promptly instead of on the server's `hz` tick.
//!
//! Each key's pending check (the glue's timer) is kept with its due time on
//! the monotonic clock, ordered across keys: module timers follow the wall
//! clock in Redis 7.0, so the glue also settles overdue keys from the
//! server cron (`take_overdue`), and a wall clock stepped back cannot hold a
//! hand-off back.

use crate::rules::clock::Millis;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;

/// A key in a given database.
pub type KeyId = (i32, Box<[u8]>);

/// A waiter's place in its queue: (ticket, arrival sequence). The sequence
/// is unique across all queues, so equal tickets are served by arrival.
type Place = (u64, u64);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter<H> {
    pub handle: H,
    pub owner: Box<[u8]>,
    pub ttl: Millis,
    /// The waiter's `MINTOKEN` (0: none).
    pub min_token: u64,
    /// When the WAIT gives up (`clock::now_ms` scale); None waits forever.
    pub deadline: Option<Millis>,
    /// Orders the queue (lowest first): `TICKET`, or the arrival time in µs.
    pub ticket: u64,
    /// A `SHARED` request, and its `LIMIT` (see `shared::admit`).
    pub shared: bool,
    pub limit: Option<u32>,
}

#[derive(Debug)]
struct Queue<H> {
    /// Place -> waiter: the first entry is the head.
    waiters: BTreeMap<Place, Waiter<H>>,
    /// Owner -> the places of its waiters (LOCK.RELEASE withdraws them).
    by_owner: HashMap<Box<[u8]>, BTreeSet<Place>>,
    /// Pending check of this key, if any.
    check: Option<Check>,
}

/// A key's pending check: the glue's timer id and when it is due
/// (`clock::now_ms` scale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    pub timer: u64,
    pub due: Millis,
}

impl<H> Queue<H> {
    /// Take the waiter at `place` out of this queue's maps.
    fn take(&mut self, place: &Place) -> Option<Waiter<H>> {
        let waiter = self.waiters.remove(place)?;
        if let Some(places) = self.by_owner.get_mut(&waiter.owner) {
            places.remove(place);
            if places.is_empty() {
                self.by_owner.remove(&waiter.owner);
                release_if_unused(&mut self.by_owner);
            }
        }
        Some(waiter)
    }
}

#[derive(Debug)]
pub struct Queues<H> {
    by_key: HashMap<KeyId, Queue<H>>,
    by_handle: HashMap<H, (KeyId, Place)>,
    /// (deadline, arrival sequence) -> waiter, for every waiter with a deadline.
    deadlines: BTreeMap<(Millis, u64), H>,
    /// (due, key) for every key with a pending check.
    checks: BTreeSet<(Millis, KeyId)>,
    last_seq: u64,
    /// The latest ticket given for an arrival time (see `arrival_ticket`).
    last_arrival: u64,
}

impl<H: Copy + Eq + Hash> Default for Queues<H> {
    fn default() -> Self {
        Queues {
            by_key: HashMap::new(),
            by_handle: HashMap::new(),
            deadlines: BTreeMap::new(),
            checks: BTreeSet::new(),
            last_seq: 0,
            last_arrival: 0,
        }
    }
}

impl<H: Copy + Eq + Hash> Queues<H> {
    /// The ticket of a waiter without `TICKET` arriving at wall-clock
    /// `now_micros`: that time, but never below an earlier arrival's, so a
    /// wall clock stepped back cannot put a later plain waiter ahead of an
    /// earlier one.
    pub fn arrival_ticket(&mut self, now_micros: u64) -> u64 {
        self.last_arrival = self.last_arrival.max(now_micros);
        self.last_arrival
    }

    /// Queue a waiter in `key`'s queue, after every waiter with a lower or
    /// equal ticket and before every waiter with a higher one.
    pub fn push(&mut self, key: KeyId, waiter: Waiter<H>) {
        self.last_seq += 1;
        let place = (waiter.ticket, self.last_seq);
        self.by_handle.insert(waiter.handle, (key.clone(), place));
        if let Some(at) = waiter.deadline {
            self.deadlines.insert((at, self.last_seq), waiter.handle);
        }
        let queue = self.by_key.entry(key).or_insert_with(|| Queue {
            waiters: BTreeMap::new(),
            by_owner: HashMap::new(),
            check: None,
        });
        queue
            .by_owner
            .entry(waiter.owner.clone())
            .or_default()
            .insert(place);
        queue.waiters.insert(place, waiter);
    }

    /// The head of `key`'s queue, left in place.
    pub fn front(&self, key: &KeyId) -> Option<&Waiter<H>> {
        self.by_key
            .get(key)?
            .waiters
            .first_key_value()
            .map(|(_, w)| w)
    }

    /// Take the head of `key`'s queue.
    pub fn pop_front(&mut self, key: &KeyId) -> Option<Waiter<H>> {
        let queue = self.by_key.get_mut(key)?;
        let place = *queue.waiters.first_key_value()?.0;
        let waiter = queue.take(&place)?;
        self.forget(&waiter, place);
        self.drop_if_idle(key);
        Some(waiter)
    }

    /// Take a waiter out wherever it is (timeout, disconnect).
    pub fn remove(&mut self, handle: H) -> Option<(KeyId, Waiter<H>)> {
        let (key, place) = self.by_handle.remove(&handle)?;
        let waiter = self.by_key.get_mut(&key)?.take(&place)?;
        self.forget(&waiter, place);
        self.drop_if_idle(&key);
        Some((key, waiter))
    }

    /// Take out every waiter of `owner` in `key`'s queue (LOCK.RELEASE by
    /// that owner withdraws them), in queue order. Other owners' waiters on
    /// the key and `owner`'s waiters on other keys stay.
    pub fn withdraw(&mut self, key: &KeyId, owner: &[u8]) -> Vec<Waiter<H>> {
        let Some(places) = self
            .by_key
            .get_mut(key)
            .and_then(|q| q.by_owner.remove(owner))
        else {
            return Vec::new();
        };
        let mut gone = Vec::with_capacity(places.len());
        for place in places {
            let taken = self
                .by_key
                .get_mut(key)
                .and_then(|q| q.waiters.remove(&place));
            if let Some(waiter) = taken {
                self.forget(&waiter, place);
                gone.push(waiter);
            }
        }
        self.drop_if_idle(key);
        gone
    }

    /// Drop the handle and deadline entries of a waiter taken out of its queue.
    fn forget(&mut self, waiter: &Waiter<H>, (_, seq): Place) {
        self.by_handle.remove(&waiter.handle);
        if let Some(at) = waiter.deadline {
            self.deadlines.remove(&(at, seq));
        }
        release_if_unused(&mut self.by_handle);
    }

    /// The earliest WAIT deadline of any waiter.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.deadlines.first_key_value().map(|(&(at, _), _)| at)
    }

    /// Take out every waiter whose deadline has passed (is before `now`:
    /// with millisecond clocks, a WAIT of `t` ms then never ends before `t`
    /// ms have passed), earliest first.
    pub fn expire_due(&mut self, now: Millis) -> Vec<(KeyId, Waiter<H>)> {
        let mut due = Vec::new();
        while let Some((&(at, _), &handle)) = self.deadlines.first_key_value() {
            if at >= now {
                break;
            }
            match self.remove(handle) {
                Some(gone) => due.push(gone),
                // Unreachable while the maps agree; never loop on a stale entry.
                None => {
                    self.deadlines.pop_first();
                }
            }
        }
        due
    }

    /// Forget a queue with no waiters and no pending check.
    fn drop_if_idle(&mut self, key: &KeyId) {
        if self
            .by_key
            .get(key)
            .is_some_and(|q| q.waiters.is_empty() && q.check.is_none())
        {
            self.by_key.remove(key);
            release_if_unused(&mut self.by_key);
        }
    }

    pub fn waiting(&self, key: &KeyId) -> usize {
        self.by_key.get(key).map_or(0, |q| q.waiters.len())
    }

    pub fn total(&self) -> usize {
        self.by_handle.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Keys that have a queue in `db` (every db when `db` is None).
    pub fn keys(&self, db: Option<i32>) -> Vec<KeyId> {
        self.by_key
            .keys()
            .filter(|(d, _)| db.is_none_or(|want| *d == want))
            .cloned()
            .collect()
    }

    pub fn check(&self, key: &KeyId) -> Option<Check> {
        self.by_key.get(key).and_then(|q| q.check)
    }

    /// Record (or clear) the pending check of a key that has waiters.
    pub fn set_check(&mut self, key: &KeyId, check: Option<Check>) {
        let Some(q) = self.by_key.get_mut(key) else {
            return;
        };
        if let Some(old) = std::mem::replace(&mut q.check, check) {
            self.checks.remove(&(old.due, key.clone()));
        }
        if let Some(new) = check {
            self.checks.insert((new.due, key.clone()));
        }
        self.drop_if_idle(key);
    }

    /// Take out the pending check of every key whose check is due (at or
    /// before `now`), earliest first: the glue stops their timers and
    /// settles the keys itself.
    pub fn take_overdue(&mut self, now: Millis) -> Vec<(KeyId, Check)> {
        let mut due = Vec::new();
        while let Some((at, _)) = self.checks.first() {
            if *at > now {
                break;
            }
            let Some((_, key)) = self.checks.pop_first() else {
                break;
            };
            if let Some(check) = self.by_key.get_mut(&key).and_then(|q| q.check.take()) {
                self.drop_if_idle(&key);
                due.push((key, check));
            }
        }
        due
    }
}

/// A map grown large for a crowd of waiters that has left gives its table
/// back (a hash map never shrinks by itself: 3,000 waiters left about
/// 200 KB behind for good, measured on 2026-11-28). Also when some stay:
/// once under a quarter full it shrinks to twice what it holds, so one
/// waiter left behind (on any key) no longer keeps the crowd's table (about
/// 300 KB for 3,000, 2026-11-28). Each shrink follows at least as many
/// removals as it copies entries. Small ones keep theirs, so one waiter
/// coming and going does not reallocate each time.
pub fn release_if_unused<K: Eq + Hash, V>(map: &mut HashMap<K, V>) {
    const KEEP: usize = 64;
    if map.capacity() <= KEEP {
        return;
    }
    if map.is_empty() {
        *map = HashMap::new();
    } else if map.len() * 4 < map.capacity() {
        map.shrink_to((map.len() * 2).max(KEEP));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> KeyId {
        (0, k.as_bytes().into())
    }

    fn waiter(h: u32) -> Waiter<u32> {
        Waiter {
            min_token: 0,
            handle: h,
            owner: format!("o{h}").into_bytes().into(),
            ttl: 100,
            deadline: None,
            ticket: 1_000,
            shared: false,
            limit: None,
        }
    }

    fn ticketed(h: u32, ticket: u64) -> Waiter<u32> {
        Waiter {
            ticket,
            ..waiter(h)
        }
    }

    fn owned_by(h: u32, owner: &str) -> Waiter<u32> {
        Waiter {
            owner: owner.as_bytes().into(),
            ..waiter(h)
        }
    }

    fn drain(q: &mut Queues<u32>, k: &str) -> Vec<u32> {
        std::iter::from_fn(|| q.pop_front(&key(k)).map(|w| w.handle)).collect()
    }

    fn waiter_until(h: u32, deadline: Millis) -> Waiter<u32> {
        Waiter {
            min_token: 0,
            deadline: Some(deadline),
            ..waiter(h)
        }
    }

    #[test]
    fn deadlines_expire_earliest_first_across_keys() {
        let mut q = Queues::default();
        q.push(key("a"), waiter_until(1, 50));
        q.push(key("b"), waiter_until(2, 20));
        q.push(key("a"), waiter(3)); // waits forever
        q.push(key("a"), waiter_until(4, 20));
        assert_eq!(q.next_deadline(), Some(20));
        assert!(q.expire_due(20).is_empty(), "due only once passed");
        let due: Vec<u32> = q.expire_due(21).iter().map(|(_, w)| w.handle).collect();
        assert_eq!(due, vec![2, 4], "same deadline: arrival order");
        assert_eq!(q.next_deadline(), Some(50));
        assert_eq!(q.waiting(&key("b")), 0);
        let due = q.expire_due(1000);
        assert_eq!((due[0].0.clone(), due[0].1.handle), (key("a"), 1));
        assert_eq!(q.next_deadline(), None);
        assert_eq!(q.pop_front(&key("a")).unwrap().handle, 3);
        assert!(q.is_empty());
    }

    #[test]
    fn a_waiter_that_leaves_takes_its_deadline_along() {
        let mut q = Queues::default();
        q.push(key("a"), waiter_until(1, 10));
        q.push(key("a"), waiter_until(2, 30));
        q.push(key("a"), waiter_until(3, 20));
        q.pop_front(&key("a")); // handed the lock
        q.remove(3); // disconnected
        assert_eq!(q.next_deadline(), Some(30));
        let due: Vec<u32> = q.expire_due(100).iter().map(|(_, w)| w.handle).collect();
        assert_eq!(due, vec![2], "never a waiter that already left");
        assert_eq!(q.total(), 0);
    }

    #[test]
    fn first_in_first_out_per_key() {
        let mut q = Queues::default();
        for h in 1..=3 {
            q.push(key("a"), waiter(h));
        }
        q.push(key("b"), waiter(9));
        assert_eq!(q.waiting(&key("a")), 3);
        assert_eq!(q.total(), 4);
        assert_eq!(q.front(&key("a")).unwrap().handle, 1, "front leaves it");
        assert_eq!(q.pop_front(&key("a")).unwrap().handle, 1);
        assert_eq!(q.pop_front(&key("a")).unwrap().handle, 2);
        assert_eq!(q.pop_front(&key("b")).unwrap().handle, 9);
        assert_eq!(q.pop_front(&key("a")).unwrap().handle, 3);
        assert_eq!(q.pop_front(&key("a")), None);
        assert!(q.is_empty());
    }

    #[test]
    fn removing_from_the_middle_keeps_order() {
        let mut q = Queues::default();
        for h in 1..=4 {
            q.push(key("a"), waiter(h));
        }
        let (k, w) = q.remove(3).unwrap();
        assert_eq!((k, w.handle), (key("a"), 3));
        assert_eq!(q.remove(3), None, "gone once");
        assert_eq!(drain(&mut q, "a"), vec![1, 2, 4]);
    }

    #[test]
    fn tickets_order_the_queue_then_arrival() {
        let mut q = Queues::default();
        q.push(key("a"), ticketed(1, 30));
        q.push(key("a"), ticketed(2, 10));
        q.push(key("a"), ticketed(3, 20));
        q.push(key("a"), ticketed(4, 10)); // same ticket as 2: after it
        q.push(key("b"), ticketed(5, 1)); // other keys do not mix in
        assert_eq!(drain(&mut q, "a"), vec![2, 4, 3, 1]);
        assert_eq!(drain(&mut q, "b"), vec![5]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_lower_ticket_goes_ahead_of_a_waiting_head() {
        // Arrival-time tickets (µs) of waiters without TICKET, and a
        // client's tickets from before and after them.
        let mut q = Queues::default();
        q.push(key("a"), ticketed(1, 1_700_000_000_000_000));
        q.push(key("a"), ticketed(2, 1_700_000_000_000_500));
        q.push(key("a"), ticketed(3, 1_800_000_000_000_000)); // far future
        q.push(key("a"), ticketed(4, 1_600_000_000_000_000)); // far past
        q.push(key("a"), ticketed(5, 1_700_000_000_000_100)); // in between
        assert_eq!(q.pop_front(&key("a")).unwrap().handle, 4);
        // A waiter given the lock that gives it back and queues again with
        // its ticket keeps its place.
        q.push(key("a"), ticketed(6, 1_600_000_000_000_000));
        assert_eq!(drain(&mut q, "a"), vec![6, 1, 5, 2, 3]);
    }

    #[test]
    fn arrival_tickets_follow_the_clock_but_never_go_back() {
        let mut q: Queues<u32> = Queues::default();
        assert_eq!(q.arrival_ticket(1_000), 1_000);
        assert_eq!(q.arrival_ticket(5_000), 5_000);
        assert_eq!(q.arrival_ticket(4_000), 5_000, "clock stepped back");
        q.push(key("a"), ticketed(1, 5_000));
        let t = q.arrival_ticket(4_500);
        q.push(key("a"), ticketed(2, t));
        assert_eq!(
            drain(&mut q, "a"),
            vec![1, 2],
            "still first come, first served"
        );
        assert_eq!(q.arrival_ticket(9_000), 9_000);
    }

    #[test]
    fn deadlines_and_removal_follow_the_waiter_wherever_its_ticket_put_it() {
        let mut q = Queues::default();
        q.push(
            key("a"),
            Waiter {
                ticket: 50,
                ..waiter_until(1, 10)
            },
        );
        q.push(
            key("a"),
            Waiter {
                ticket: 5,
                ..waiter_until(2, 20)
            },
        );
        q.push(key("a"), ticketed(3, 7));
        let due: Vec<u32> = q.expire_due(15).iter().map(|(_, w)| w.handle).collect();
        assert_eq!(due, vec![1]);
        assert_eq!(q.remove(3).map(|(_, w)| w.handle), Some(3));
        assert_eq!(q.pop_front(&key("a")).unwrap().handle, 2);
        assert_eq!(q.next_deadline(), None);
        assert_eq!(q.total(), 0);
        assert!(q.is_empty());
    }

    #[test]
    fn withdraw_takes_only_that_owners_waiters_on_that_key() {
        let mut q = Queues::default();
        q.push(
            key("a"),
            Waiter {
                deadline: Some(40),
                ..owned_by(1, "x")
            },
        );
        q.push(key("a"), owned_by(2, "y"));
        q.push(
            key("a"),
            Waiter {
                ticket: 1,
                ..owned_by(3, "x")
            },
        );
        q.push(key("b"), owned_by(4, "x"));
        q.push(key("a"), owned_by(5, "xx"));
        assert!(q.withdraw(&key("a"), b"nobody").is_empty());
        assert!(q.withdraw(&key("c"), b"x").is_empty());
        let gone: Vec<u32> = q
            .withdraw(&key("a"), b"x")
            .iter()
            .map(|w| w.handle)
            .collect();
        assert_eq!(gone, vec![3, 1], "queue order");
        assert!(q.withdraw(&key("a"), b"x").is_empty(), "once");
        assert_eq!(q.remove(1), None, "no handle left behind");
        assert_eq!(q.next_deadline(), None, "nor its deadline");
        assert_eq!((q.waiting(&key("a")), q.total()), (2, 3));
        assert_eq!(drain(&mut q, "a"), vec![2, 5]);
        assert_eq!(q.pop_front(&key("b")).unwrap().handle, 4);
        assert!(q.is_empty());
    }

    #[test]
    fn withdrawing_the_last_waiters_drops_the_queue_but_not_a_pending_timer() {
        let mut q = Queues::default();
        q.push(key("a"), owned_by(1, "x"));
        q.push(key("a"), owned_by(2, "x"));
        assert_eq!(q.withdraw(&key("a"), b"x").len(), 2);
        assert!(q.is_empty());
        q.push(key("a"), owned_by(3, "x"));
        q.set_check(&key("a"), Some(check(9, 100)));
        q.withdraw(&key("a"), b"x");
        assert_eq!(q.check(&key("a")), Some(check(9, 100)));
        q.push(key("a"), owned_by(4, "x"));
        assert_eq!(drain(&mut q, "a"), vec![4], "owner index rebuilt");
        q.set_check(&key("a"), None);
        assert!(q.is_empty());
    }

    #[test]
    fn a_queue_with_a_timer_outlives_its_last_waiter() {
        let mut q = Queues::default();
        q.push(key("a"), waiter(1));
        q.set_check(&key("a"), Some(check(77, 5)));
        q.pop_front(&key("a"));
        assert_eq!(q.check(&key("a")), Some(check(77, 5)));
        assert_eq!(q.keys(None), vec![key("a")]);
        q.set_check(&key("a"), None);
        assert!(q.is_empty());
    }

    fn check(timer: u64, due: Millis) -> Check {
        Check { timer, due }
    }

    #[test]
    fn overdue_checks_come_out_earliest_first_across_keys() {
        let mut q = Queues::default();
        for (k, h) in [("a", 1), ("b", 2), ("c", 3)] {
            q.push(key(k), waiter(h));
        }
        q.set_check(&key("a"), Some(check(10, 300)));
        q.set_check(&key("b"), Some(check(11, 100)));
        q.set_check(&key("c"), Some(check(12, 200)));
        assert!(q.take_overdue(99).is_empty());
        assert_eq!(
            q.take_overdue(200),
            vec![(key("b"), check(11, 100)), (key("c"), check(12, 200))]
        );
        assert_eq!(q.check(&key("b")), None, "taken out");
        assert_eq!(q.check(&key("a")), Some(check(10, 300)), "not yet due");
        assert_eq!(q.waiting(&key("b")), 1, "waiters stay queued");
    }

    #[test]
    fn a_rearmed_check_replaces_the_old_due_time() {
        let mut q = Queues::default();
        q.push(key("a"), waiter(1));
        q.set_check(&key("a"), Some(check(1, 50)));
        q.set_check(&key("a"), Some(check(2, 500)));
        assert!(q.take_overdue(100).is_empty(), "the old due time is gone");
        assert_eq!(q.take_overdue(500), vec![(key("a"), check(2, 500))]);
        assert!(q.take_overdue(10_000).is_empty(), "taken once");
    }

    #[test]
    fn an_overdue_check_of_a_key_nobody_waits_for_drops_its_queue() {
        let mut q = Queues::default();
        q.push(key("a"), waiter(1));
        q.set_check(&key("a"), Some(check(1, 50)));
        q.pop_front(&key("a"));
        assert_eq!(q.take_overdue(60).len(), 1);
        assert!(q.is_empty());
    }

    #[test]
    fn keys_by_db() {
        let mut q = Queues::default();
        q.push((0, b"x"[..].into()), waiter(1));
        q.push((3, b"y"[..].into()), waiter(2));
        assert_eq!(q.keys(Some(3)), vec![(3, b"y"[..].into())]);
        assert_eq!(q.keys(None).len(), 2);
    }

    #[test]
    fn a_crowd_that_left_gives_its_tables_back() {
        let mut q = Queues::default();
        for h in 0..3_000 {
            q.push(key(&format!("k{}", h % 1_000)), waiter(h));
        }
        for h in 0..3_000 {
            assert!(q.remove(h).is_some());
        }
        assert!(q.is_empty());
        assert_eq!((q.by_handle.capacity(), q.by_key.capacity()), (0, 0));
        // One waiter coming and going keeps its small table.
        q.push(key("k"), waiter(1));
        assert!(q.pop_front(&key("k")).is_some());
        assert!(q.by_handle.capacity() > 0);
    }

    /// One waiter that stays (a wait without a deadline, on its own key or
    /// in the crowd's) no longer keeps the crowd's tables.
    #[test]
    fn a_crowd_that_left_gives_its_tables_back_while_one_waiter_stays() {
        for stays_on in ["elsewhere", "hot"] {
            let mut q = Queues::default();
            q.push(key(stays_on), waiter(0));
            for h in 1..=3_000 {
                q.push(key("hot"), waiter(h));
            }
            for h in 1..=3_000 {
                assert!(q.remove(h).is_some());
            }
            assert!(
                q.by_handle.capacity() <= 128,
                "{stays_on}: {}",
                q.by_handle.capacity()
            );
            let owners = q.by_key.get(&key(stays_on)).map(|q| q.by_owner.capacity());
            assert!(owners <= Some(128), "{stays_on}: {owners:?}");
            assert_eq!(q.pop_front(&key(stays_on)).map(|w| w.handle), Some(0));
        }
    }
}
