//! Names a `Locker` found held a moment ago. `lock()` with a wait first
//! tries a free name with one plain round, as `try_lock` does, because
//! queueing costs more when nothing is held (a task, pooled connections, a
//! withdrawal of the WAITs the lock did not need). On a name held a moment
//! ago that try is almost always "busy": a request to every server for
//! nothing (5 of 17 server commands per critical section on a hot key at
//! N = 5). So a try that finds the name held marks it, and for
//! `FRESH_FOR` after, waits on it queue at once.
//!
//! Only a hint: a queued wait is correct on a free name too (it is granted
//! at once), so a stale mark or two names sharing a slot cost speed, never
//! safety. A fixed table of atomics: no lock, no growth with the number of
//! names.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Slots in the table (names hash into one each).
const SLOTS: usize = 64;
/// How long a "busy" try keeps waits on that name from trying first: long
/// enough that a hot name pays one try per this interval per Locker, short
/// enough that a name no longer contended is back on the cheap path soon.
pub(crate) const FRESH_FOR: Duration = Duration::from_millis(200);

/// A slot holds the name's hash in the high 32 bits and the mark's time
/// (milliseconds since `epoch`, plus one so that 0 means empty) in the low.
pub(crate) struct RecentlyBusy {
    epoch: Instant,
    slots: [AtomicU64; SLOTS],
}

impl Default for RecentlyBusy {
    fn default() -> RecentlyBusy {
        RecentlyBusy {
            epoch: Instant::now(),
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

fn hash(name: &str) -> u64 {
    let mut h = DefaultHasher::new();
    name.hash(&mut h);
    h.finish()
}

impl RecentlyBusy {
    /// A try found `name` held at `now`.
    pub(crate) fn mark(&self, name: &str, now: Instant) {
        let h = hash(name);
        let stamp = (h & !0xFFFF_FFFF) | (self.millis(now) & 0xFFFF_FFFF);
        self.slots[h as usize % SLOTS].store(stamp, Ordering::Relaxed);
    }

    /// Whether a try found `name` held within `FRESH_FOR` before `now`.
    pub(crate) fn is_busy(&self, name: &str, now: Instant) -> bool {
        let h = hash(name);
        let stamp = self.slots[h as usize % SLOTS].load(Ordering::Relaxed);
        if stamp == 0 || (stamp ^ h) & !0xFFFF_FFFF != 0 {
            return false;
        }
        // Wrapping: a mark 2^32 ms (49 days) old reads as recent once.
        let age = (self.millis(now) & 0xFFFF_FFFF).wrapping_sub(stamp & 0xFFFF_FFFF) & 0xFFFF_FFFF;
        age < FRESH_FOR.as_millis() as u64
    }

    fn millis(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.epoch).as_millis() as u64 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_fresh_for_a_while_and_only_for_its_name() {
        let busy = RecentlyBusy::default();
        let t = Instant::now() + Duration::from_secs(5);
        assert!(!busy.is_busy("jobs", t), "nothing marked");
        busy.mark("jobs", t);
        assert!(busy.is_busy("jobs", t));
        assert!(busy.is_busy("jobs", t + FRESH_FOR - Duration::from_millis(1)));
        assert!(!busy.is_busy("jobs", t + FRESH_FOR), "stale");
        assert!(!busy.is_busy("other", t), "another name");
    }

    #[test]
    fn names_sharing_a_slot_do_not_read_each_other() {
        let busy = RecentlyBusy::default();
        let t = Instant::now();
        let slot = |n: &str| hash(n) as usize % SLOTS;
        let first = "name-0".to_string();
        let twin = (1..)
            .map(|i| format!("name-{i}"))
            .find(|n| slot(n) == slot(&first))
            .unwrap();
        busy.mark(&first, t);
        assert!(!busy.is_busy(&twin, t), "same slot, other hash");
        busy.mark(&twin, t);
        assert!(busy.is_busy(&twin, t));
        assert!(
            !busy.is_busy(&first, t),
            "overwritten: a hint, not a record"
        );
    }
}
