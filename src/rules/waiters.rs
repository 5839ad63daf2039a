//! FIFO queues of clients waiting for a lock (LOCK.ACQUIRE ... WAIT).
//! Pure Rust: the handle type `H` is whatever the glue uses to identify a
//! blocked client (`blocking.rs` uses the blocked-client pointer).
//!
//! Every waiter costs O(1) memory; pushing, popping the head, and removing
//! any waiter (timeout, disconnect) are O(log n) in its key's queue.
//!
//! WAIT deadlines are kept here too, ordered across all keys, so that the
//! glue needs only one timer (for the earliest deadline) to time waiters
//! out promptly instead of on the server's `hz` tick.

use crate::rules::lock::Millis;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// A key in a given database.
pub type KeyId = (i32, Box<[u8]>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter<H> {
    pub handle: H,
    pub owner: Box<[u8]>,
    pub ttl: Millis,
    /// The waiter's `MINTOKEN` (0: none).
    pub min_token: u64,
    /// When the WAIT gives up (`clock::now_ms` scale); None waits forever.
    pub deadline: Option<Millis>,
}

#[derive(Debug)]
struct Queue<H> {
    /// Arrival sequence -> waiter: the first entry is the head.
    waiters: BTreeMap<u64, Waiter<H>>,
    /// Pending check timer for this key (the glue's timer id), if any.
    timer: Option<u64>,
}

#[derive(Debug)]
pub struct Queues<H> {
    by_key: HashMap<KeyId, Queue<H>>,
    by_handle: HashMap<H, (KeyId, u64)>,
    /// (deadline, arrival sequence) -> waiter, for every waiter with a deadline.
    deadlines: BTreeMap<(Millis, u64), H>,
    last_seq: u64,
}

impl<H: Copy + Eq + Hash> Default for Queues<H> {
    fn default() -> Self {
        Queues {
            by_key: HashMap::new(),
            by_handle: HashMap::new(),
            deadlines: BTreeMap::new(),
            last_seq: 0,
        }
    }
}

impl<H: Copy + Eq + Hash> Queues<H> {
    /// Queue a waiter at the tail of `key`'s queue.
    pub fn push(&mut self, key: KeyId, waiter: Waiter<H>) {
        self.last_seq += 1;
        self.by_handle
            .insert(waiter.handle, (key.clone(), self.last_seq));
        if let Some(at) = waiter.deadline {
            self.deadlines.insert((at, self.last_seq), waiter.handle);
        }
        self.by_key
            .entry(key)
            .or_insert_with(|| Queue {
                waiters: BTreeMap::new(),
                timer: None,
            })
            .waiters
            .insert(self.last_seq, waiter);
    }

    /// Take the head of `key`'s queue.
    pub fn pop_front(&mut self, key: &KeyId) -> Option<Waiter<H>> {
        let queue = self.by_key.get_mut(key)?;
        let (seq, waiter) = queue.waiters.pop_first()?;
        self.by_handle.remove(&waiter.handle);
        if let Some(at) = waiter.deadline {
            self.deadlines.remove(&(at, seq));
        }
        self.drop_if_idle(key);
        Some(waiter)
    }

    /// Take a waiter out wherever it is (timeout, disconnect).
    pub fn remove(&mut self, handle: H) -> Option<(KeyId, Waiter<H>)> {
        let (key, seq) = self.by_handle.remove(&handle)?;
        let waiter = self.by_key.get_mut(&key)?.waiters.remove(&seq)?;
        if let Some(at) = waiter.deadline {
            self.deadlines.remove(&(at, seq));
        }
        self.drop_if_idle(&key);
        Some((key, waiter))
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

    /// Forget a queue with no waiters and no pending timer.
    fn drop_if_idle(&mut self, key: &KeyId) {
        if self
            .by_key
            .get(key)
            .is_some_and(|q| q.waiters.is_empty() && q.timer.is_none())
        {
            self.by_key.remove(key);
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

    pub fn timer(&self, key: &KeyId) -> Option<u64> {
        self.by_key.get(key).and_then(|q| q.timer)
    }

    /// Record (or clear) the pending timer of a key that has waiters.
    pub fn set_timer(&mut self, key: &KeyId, timer: Option<u64>) {
        if let Some(q) = self.by_key.get_mut(key) {
            q.timer = timer;
        }
        self.drop_if_idle(key);
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
        }
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
        let order: Vec<u32> =
            std::iter::from_fn(|| q.pop_front(&key("a")).map(|w| w.handle)).collect();
        assert_eq!(order, vec![1, 2, 4]);
    }

    #[test]
    fn a_queue_with_a_timer_outlives_its_last_waiter() {
        let mut q = Queues::default();
        q.push(key("a"), waiter(1));
        q.set_timer(&key("a"), Some(77));
        q.pop_front(&key("a"));
        assert_eq!(q.timer(&key("a")), Some(77));
        assert_eq!(q.keys(None), vec![key("a")]);
        q.set_timer(&key("a"), None);
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
}
