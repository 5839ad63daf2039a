//! Counters behind the `INFO lock` section (written out by `info.rs`).
//! Atomics because a lock value can be freed on a lazy-free background
//! thread. No Redis API here: everything may count, nothing is reached.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

static HELD: AtomicI64 = AtomicI64::new(0);
static ACQUIRED: AtomicU64 = AtomicU64::new(0);
static CONTENDED: AtomicU64 = AtomicU64::new(0);
static RELEASED: AtomicU64 = AtomicU64::new(0);
static EXTENDED: AtomicU64 = AtomicU64::new(0);
static EXPIRED: AtomicU64 = AtomicU64::new(0);
static WRONG_OWNER: AtomicU64 = AtomicU64::new(0);
static WAITS: AtomicU64 = AtomicU64::new(0);
static HANDOFFS: AtomicU64 = AtomicU64::new(0);
static WAIT_TIMEOUTS: AtomicU64 = AtomicU64::new(0);
static WAITS_WITHDRAWN: AtomicU64 = AtomicU64::new(0);
static APPLIED: AtomicU64 = AtomicU64::new(0);
static DOWNGRADED: AtomicU64 = AtomicU64::new(0);

pub fn lock_created() {
    HELD.fetch_add(1, Relaxed);
}
pub fn lock_freed() {
    HELD.fetch_sub(1, Relaxed);
}
pub fn acquired() {
    ACQUIRED.fetch_add(1, Relaxed);
}
pub fn contended() {
    CONTENDED.fetch_add(1, Relaxed);
}
pub fn released() {
    RELEASED.fetch_add(1, Relaxed);
}
pub fn extended() {
    EXTENDED.fetch_add(1, Relaxed);
}
pub fn expired() {
    EXPIRED.fetch_add(1, Relaxed);
}
pub fn wrong_owner() {
    WRONG_OWNER.fetch_add(1, Relaxed);
}
pub fn waited() {
    WAITS.fetch_add(1, Relaxed);
}
pub fn handed_off() {
    HANDOFFS.fetch_add(1, Relaxed);
}
pub fn wait_timed_out() {
    WAIT_TIMEOUTS.fetch_add(1, Relaxed);
}
pub fn wait_withdrawn() {
    WAITS_WITHDRAWN.fetch_add(1, Relaxed);
}
/// An exclusive holder turned its lock into a shared hold.
pub fn downgraded() {
    DOWNGRADED.fetch_add(1, Relaxed);
}
/// A lock command from a primary's replication stream or the AOF: applied
/// as decided elsewhere (or before), counted here and in no other counter.
pub fn applied() {
    APPLIED.fetch_add(1, Relaxed);
}

/// A snapshot of every counter, named as INFO shows them.
pub fn counters() -> [(&'static str, u64); 14] {
    [
        ("held", HELD.load(Relaxed).max(0) as u64),
        ("acquired", ACQUIRED.load(Relaxed)),
        ("contended", CONTENDED.load(Relaxed)),
        ("released", RELEASED.load(Relaxed)),
        ("extended", EXTENDED.load(Relaxed)),
        ("expired", EXPIRED.load(Relaxed)),
        ("wrong_owner", WRONG_OWNER.load(Relaxed)),
        ("waits", WAITS.load(Relaxed)),
        ("handoffs", HANDOFFS.load(Relaxed)),
        ("wait_timeouts", WAIT_TIMEOUTS.load(Relaxed)),
        ("waits_withdrawn", WAITS_WITHDRAWN.load(Relaxed)),
        ("applied", APPLIED.load(Relaxed)),
        ("downgraded", DOWNGRADED.load(Relaxed)),
        ("last_token", crate::rules::fencing::TOKENS.last()),
    ]
}
