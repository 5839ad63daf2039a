//! The deadline index behind active expiry. Pure Rust: it knows deadlines,
//! lock ids and where each lock lives (db + key name), nothing about Redis.
//!
//! Each lock is filed once, under `(deadline, id)`. Extending a lock does not
//! touch the index (the hot path stays cheap): when an entry comes due, the
//! reaper looks at the lock, and if its deadline has moved later it files the
//! entry again. Only a deadline moved *earlier* refiles at once. Entries are
//! removed when the lock value is freed, so the index never outgrows the set
//! of live locks.

use crate::lock::{IndexSlot, Millis};
use std::collections::BTreeMap;

/// Where a lock lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub db: i32,
    pub key: Box<[u8]>,
}

#[derive(Debug, Default)]
pub struct ExpiryIndex {
    entries: BTreeMap<(Millis, u64), Place>,
    last_id: u64,
}

impl ExpiryIndex {
    pub const fn new() -> ExpiryIndex {
        ExpiryIndex {
            entries: BTreeMap::new(),
            last_id: 0,
        }
    }

    /// File (or refile) a lock under `deadline` at `place`, giving it an id
    /// the first time. Replaces any entry the lock had.
    pub fn file(&mut self, slot: &mut IndexSlot, deadline: Millis, place: Place) {
        self.forget(slot);
        if slot.id == 0 {
            self.last_id += 1;
            slot.id = self.last_id;
        }
        slot.filed_at = deadline;
        self.entries.insert((deadline, slot.id), place);
    }

    /// Move a lock's entry to an earlier deadline, keeping its place.
    /// Returns false if the lock was not filed.
    pub fn move_earlier(&mut self, slot: &mut IndexSlot, deadline: Millis) -> bool {
        if deadline >= slot.filed_at {
            return slot.filed_at != 0;
        }
        match self.entries.remove(&(slot.filed_at, slot.id)) {
            Some(place) => {
                slot.filed_at = deadline;
                self.entries.insert((deadline, slot.id), place);
                true
            }
            None => false,
        }
    }

    /// Drop a lock's entry (its value is being freed).
    pub fn forget(&mut self, slot: &IndexSlot) {
        if slot.filed_at != 0 {
            self.entries.remove(&(slot.filed_at, slot.id));
        }
    }

    /// Take the earliest entry whose deadline is `<= now`.
    pub fn pop_due(&mut self, now: Millis) -> Option<(u64, Place)> {
        let entry = self.entries.first_entry()?;
        if entry.key().0 > now {
            return None;
        }
        let ((_, id), place) = entry.remove_entry();
        Some((id, place))
    }

    /// Put back a popped entry under a new deadline (the lock was extended,
    /// or this node may not expire it yet).
    pub fn refile(&mut self, slot: &mut IndexSlot, deadline: Millis, place: Place) {
        slot.filed_at = deadline;
        self.entries.insert((deadline, slot.id), place);
    }

    pub fn next_deadline(&self) -> Option<Millis> {
        self.entries.first_key_value().map(|((d, _), _)| *d)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(k: &str) -> Place {
        Place {
            db: 0,
            key: k.as_bytes().into(),
        }
    }

    #[test]
    fn pops_in_deadline_order_only_when_due() {
        let mut ix = ExpiryIndex::new();
        let (mut a, mut b) = (IndexSlot::default(), IndexSlot::default());
        ix.file(&mut a, 200, place("a"));
        ix.file(&mut b, 100, place("b"));
        assert_ne!(a.id, b.id);
        assert_eq!(ix.next_deadline(), Some(100));
        assert_eq!(ix.pop_due(99), None);
        assert_eq!(ix.pop_due(100), Some((b.id, place("b"))));
        assert_eq!(ix.pop_due(150), None);
        assert_eq!(ix.pop_due(1000), Some((a.id, place("a"))));
        assert!(ix.is_empty());
    }

    #[test]
    fn refiling_replaces_the_old_entry() {
        let mut ix = ExpiryIndex::new();
        let mut a = IndexSlot::default();
        ix.file(&mut a, 200, place("a"));
        let id = a.id;
        ix.file(&mut a, 300, place("renamed"));
        assert_eq!(a.id, id, "a lock keeps its id");
        assert_eq!(ix.len(), 1);
        assert_eq!(ix.pop_due(300), Some((id, place("renamed"))));
    }

    #[test]
    fn move_earlier_only_moves_forward_in_time() {
        let mut ix = ExpiryIndex::new();
        let mut a = IndexSlot::default();
        ix.file(&mut a, 200, place("a"));
        assert!(
            ix.move_earlier(&mut a, 500),
            "later deadline: lazily refiled when due"
        );
        assert_eq!(ix.next_deadline(), Some(200));
        assert!(ix.move_earlier(&mut a, 50));
        assert_eq!(ix.next_deadline(), Some(50));
        assert_eq!(ix.len(), 1);
        assert!(!ix.move_earlier(&mut IndexSlot::default(), 10));
    }

    #[test]
    fn forget_removes_and_is_idempotent() {
        let mut ix = ExpiryIndex::new();
        let mut a = IndexSlot::default();
        ix.file(&mut a, 200, place("a"));
        ix.forget(&a);
        ix.forget(&a);
        ix.forget(&IndexSlot::default());
        assert!(ix.is_empty());
    }

    #[test]
    fn popped_entries_can_be_refiled() {
        let mut ix = ExpiryIndex::new();
        let mut a = IndexSlot::default();
        ix.file(&mut a, 10, place("a"));
        let (id, p) = ix.pop_due(10).unwrap();
        assert_eq!(id, a.id);
        ix.refile(&mut a, 40, p);
        assert_eq!(a.filed_at, 40);
        assert_eq!(ix.pop_due(39), None);
        assert!(ix.pop_due(40).is_some());
    }
}
