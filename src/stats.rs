//! Counters behind the `INFO lock` section. Atomics because a lock value can
//! be freed on a lazy-free background thread.

use crate::ffi::api;
use redis_module::raw;
use std::ffi::{c_int, CStr};
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

/// Fills `INFO lock`. Redis prefixes each field with the module name.
pub extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    let now = crate::clock::now_ms();
    let fields: [(&CStr, u64); 13] = [
        (c"held", HELD.load(Relaxed).max(0) as u64),
        (c"acquired", ACQUIRED.load(Relaxed)),
        (c"contended", CONTENDED.load(Relaxed)),
        (c"released", RELEASED.load(Relaxed)),
        (c"extended", EXTENDED.load(Relaxed)),
        (c"expired", EXPIRED.load(Relaxed)),
        (c"wrong_owner", WRONG_OWNER.load(Relaxed)),
        (c"last_token", crate::fencing::TOKENS.last()),
        (c"waits", WAITS.load(Relaxed)),
        (c"handoffs", HANDOFFS.load(Relaxed)),
        (c"wait_timeouts", WAIT_TIMEOUTS.load(Relaxed)),
        (c"waiters", crate::blocking::total_waiters() as u64),
        (
            c"restart_guard_ms_left",
            crate::guard::remaining(now).unwrap_or(0),
        ),
    ];
    // SAFETY: valid info ctx during the callback; names are NUL-terminated.
    unsafe {
        api!(RedisModule_InfoAddSection)(ctx, c"".as_ptr());
        for (name, value) in fields {
            api!(RedisModule_InfoAddFieldULongLong)(ctx, name.as_ptr(), value);
        }
    }
}
