//! FIFO queues of clients waiting for a lock (LOCK.ACQUIRE ... WAIT).
//! Pure Rust: the handle type `H` is whatever the glue uses to identify a
//! blocked client (`blocking.rs` uses the blocked-client pointer).
//!
//! Every waiter costs O(1) memory; pushing, popping the head, and removing
//! any waiter (timeout, disconnect) are O(log n) in its key's queue.

use crate::lock::Millis;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// A key in a given database.
pub type KeyId = (i32, Box<[u8]>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter<H> {
    pub handle: H,
    pub owner: Box<[u8]>,
    pub ttl: Millis,
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
    last_seq: u64,
}

impl<H: Copy + Eq + Hash> Default for Queues<H> {
    fn default() -> Self {
        Queues {
            by_key: HashMap::new(),
            by_handle: HashMap::new(),
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
        let (_, waiter) = queue.waiters.pop_first()?;
        self.by_handle.remove(&waiter.handle);
        self.drop_if_idle(key);
        Some(waiter)
    }

    /// Take a waiter out wherever it is (timeout, disconnect).
    pub fn remove(&mut self, handle: H) -> Option<(KeyId, Waiter<H>)> {
        let (key, seq) = self.by_handle.remove(&handle)?;
        let waiter = self.by_key.get_mut(&key)?.waiters.remove(&seq)?;
        self.drop_if_idle(&key);
        Some((key, waiter))
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
            handle: h,
            owner: format!("o{h}").into_bytes().into(),
            ttl: 100,
        }
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
