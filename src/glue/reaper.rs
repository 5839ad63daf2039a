//! Active expiry: expired locks disappear without being touched.
//!
//! On every server cron tick (`CronLoop` event, `hz` times a second, driven
//! by the event loop's monotonic clock, so a wall-clock jump neither speeds
//! nor stalls it) the reaper sweeps the keyspace with a SCAN cursor that
//! survives between ticks, and deletes the locks it finds past their
//! deadline. Like Redis's own active expiry it works harder while it keeps
//! finding expired locks, within a small time budget per tick.
//!
//! There is no per-lock deadline index: it would cost more memory than the
//! lock itself. Correctness never waits for the reaper: every command treats
//! a lock past its deadline as absent (lazy expiry). Replicas and loading
//! servers never expire anything themselves; they follow the primary's `DEL`.

use crate::glue::ffi::{api, bytes, Ctx, Key, Slot};
use crate::rules::clock;
use crate::rules::lock::Millis;
use crate::rules::stats;
use redis_module::raw;
use std::ffi::c_void;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Keys looked at per tick even when nothing expires (with `hz 10`, a
/// million live locks are looked at every two minutes).
const MIN_KEYS_PER_TICK: usize = 1000;
/// Share of each tick's period the sweep may use while it keeps finding
/// expired locks: 25%, like Redis's own slow active-expire cycle.
const BUSY_SHARE_PERCENT: u64 = 25;

/// Most time one tick may take at `hz` ticks a second.
pub fn tick_budget(hz: i32) -> Duration {
    let period_us = 1_000_000 / u64::try_from(hz.clamp(1, 500)).unwrap_or(10);
    Duration::from_micros(period_us * BUSY_SHARE_PERCENT / 100)
}

/// When to stop sweeping in this tick. Pure, so the policy is unit-tested.
#[derive(Debug, Default, Clone, Copy)]
pub struct Effort {
    pub scanned: usize,
    pub expired: usize,
}

impl Effort {
    /// Keep going while under budget and either below the minimum or still
    /// finding at least one expired lock in ten: a keyspace full of expired
    /// locks gets the whole budget, a healthy one only the minimum.
    pub fn keep_going(&self, elapsed: Duration, budget: Duration) -> bool {
        elapsed < budget && (self.scanned < MIN_KEYS_PER_TICK || self.expired * 10 >= self.scanned)
    }
}

/// The sweep position: a db and a SCAN cursor in it (main thread only).
struct Sweep {
    db: i32,
    cursor: *mut raw::RedisModuleScanCursor,
}

// SAFETY: only the main thread (cron callback) ever touches the cursor.
unsafe impl Send for Sweep {}

static SWEEP: Mutex<Option<Sweep>> = Mutex::new(None);

/// `CronLoop` server event.
pub unsafe extern "C" fn on_cron(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    data: *mut c_void,
) {
    // SAFETY: Redis passes a RedisModuleCronLoopInfo for this event.
    let hz = data
        .cast::<raw::RedisModuleCronLoopInfo>()
        .as_ref()
        .map_or(10, |info| info.hz);
    let _ = std::panic::catch_unwind(|| {
        crate::glue::guard_state::start_up_over(&redis_module::Context::new(ctx));
        crate::glue::blocking::time_out_due(clock::now_ms());
        crate::glue::blocking::settle_overdue(Ctx(ctx));
        tick(Ctx(ctx), tick_budget(hz))
    });
}

/// What one SCAN step found.
struct Found {
    now: Millis,
    scanned: usize,
    expired: Vec<Vec<u8>>,
}

unsafe extern "C" fn collect(
    _ctx: *mut raw::RedisModuleCtx,
    name: *mut raw::RedisModuleString,
    key: *mut raw::RedisModuleKey,
    found: *mut c_void,
) {
    // SAFETY: `found` is the &mut Found passed to RedisModule_Scan below;
    // `key` is a read handle Redis opened for this callback.
    let found = &mut *found.cast::<Found>();
    found.scanned += 1;
    if let Some(value) = Key::peek(key) {
        if value.has_expired_holder(found.now) {
            found.expired.push(bytes(name).to_vec());
        }
    }
}

pub fn tick(ctx: Ctx, budget: Duration) {
    // A write pause (CLIENT PAUSE WRITE, FAILOVER) forbids writing and
    // propagating: expiry waits for its end. Commands still see an expired
    // lock as absent, so nobody gets a second owner meanwhile.
    if ctx.is_loading() || ctx.is_replica() || crate::glue::ffi::writes_paused() {
        return;
    }
    let started = Instant::now();
    let home_db = ctx.selected_db();
    let mut guard = SWEEP.lock().unwrap_or_else(|p| p.into_inner());
    let sweep = guard.get_or_insert_with(|| Sweep {
        db: 0,
        // SAFETY: plain allocation; kept for the life of the module.
        cursor: unsafe { api!(RedisModule_ScanCursorCreate)() },
    });
    if !ctx.select_db(sweep.db) {
        sweep.db = 0;
        ctx.select_db(0);
    }
    let first_db = sweep.db;
    let mut effort = Effort::default();
    loop {
        let mut found = Found {
            now: clock::now_ms(),
            scanned: 0,
            expired: Vec::new(),
        };
        // SAFETY: valid ctx and cursor; `found` outlives the call.
        let more = unsafe {
            api!(RedisModule_Scan)(
                ctx.0,
                sweep.cursor,
                Some(collect),
                (&mut found as *mut Found).cast(),
            )
        };
        effort.scanned += found.scanned;
        for name in &found.expired {
            effort.expired += usize::from(expire(ctx, name, found.now));
        }
        if more == 0 {
            // This db is done: move on to the next one (wrapping to db 0).
            // SAFETY: valid cursor.
            unsafe { api!(RedisModule_ScanCursorRestart)(sweep.cursor) };
            sweep.db += 1;
            if !ctx.select_db(sweep.db) {
                sweep.db = 0;
                ctx.select_db(0);
            }
            if sweep.db == first_db {
                break; // every db visited in this tick
            }
        }
        if !effort.keep_going(started.elapsed(), budget) {
            break;
        }
    }
    ctx.select_db(home_db);
}

/// Delete the lock at `name` in the selected db if it is still expired;
/// take out a shared key's expired holders (the key with the last one).
fn expire(ctx: Ctx, name: &[u8], now: Millis) -> bool {
    let name = ctx.create_string(name);
    let mut key = Key::open(ctx, name.1, true);
    match key.slot() {
        Slot::Lock(lock) if lock.is_expired(now) => {}
        Slot::Shared(held) if held.has_expired(now) => {
            crate::glue::expiry::drop_expired_holders(ctx, &mut key, name.1, now);
            drop(key);
            crate::glue::blocking::settle(ctx, name.1);
            return true;
        }
        _ => return false,
    }
    key.delete();
    drop(key);
    stats::expired();
    ctx.replicate_del(name.1);
    ctx.notify(c"lock.expire", name.1);
    crate::glue::blocking::settle(ctx, name.1);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Duration = Duration::from_millis(25);

    fn effort(scanned: usize, expired: usize) -> Effort {
        Effort { scanned, expired }
    }

    #[test]
    fn sweeps_the_minimum_then_only_while_finding_expired_locks() {
        let t = Duration::from_micros(100);
        assert!(effort(0, 0).keep_going(t, B));
        assert!(effort(999, 0).keep_going(t, B));
        assert!(!effort(1000, 0).keep_going(t, B));
        assert!(!effort(1000, 99).keep_going(t, B));
        assert!(effort(1000, 100).keep_going(t, B));
        assert!(effort(100_000, 100_000).keep_going(Duration::from_millis(24), B));
    }

    #[test]
    fn never_past_the_time_budget() {
        assert!(!effort(10, 10).keep_going(B, B));
    }

    #[test]
    fn the_budget_is_a_quarter_of_the_tick_period() {
        assert_eq!(tick_budget(10), Duration::from_millis(25));
        assert_eq!(tick_budget(100), Duration::from_micros(2500));
        assert_eq!(tick_budget(0), Duration::from_millis(250)); // clamped to 1 Hz
    }
}
