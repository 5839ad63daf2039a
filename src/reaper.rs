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

use crate::clock;
use crate::ffi::{api, bytes, Ctx, Key, Slot};
use crate::lock::Millis;
use crate::stats;
use redis_module::raw;
use std::ffi::c_void;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Keys looked at per tick even when nothing expires (with `hz 10`, a
/// million locks are swept in under two minutes).
const MIN_KEYS_PER_TICK: usize = 1000;
/// Most time one tick may take (2% of a core with `hz 10`).
const TICK_BUDGET: Duration = Duration::from_millis(2);

/// When to stop sweeping in this tick. Pure, so the policy is unit-tested.
#[derive(Debug, Default, Clone, Copy)]
pub struct Effort {
    pub scanned: usize,
    pub expired: usize,
}

impl Effort {
    /// Keep going while under budget and either below the minimum or still
    /// finding at least one expired lock in ten.
    pub fn keep_going(&self, elapsed: Duration) -> bool {
        elapsed < TICK_BUDGET
            && (self.scanned < MIN_KEYS_PER_TICK || self.expired * 10 >= self.scanned)
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
    _data: *mut c_void,
) {
    let _ = std::panic::catch_unwind(|| tick(Ctx(ctx)));
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
    if let Some(lock) = Key::peek(key) {
        if lock.is_expired(found.now) {
            found.expired.push(bytes(name).to_vec());
        }
    }
}

pub fn tick(ctx: Ctx) {
    // During CLIENT PAUSE WRITE / FAILOVER a DEL must not propagate.
    if ctx.is_loading() || ctx.is_replica() || crate::pause::writes_paused() {
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
        if !effort.keep_going(started.elapsed()) {
            break;
        }
    }
    ctx.select_db(home_db);
}

/// Delete the lock at `name` in the selected db if it is still expired.
fn expire(ctx: Ctx, name: &[u8], now: Millis) -> bool {
    let name = ctx.create_string(name);
    let mut key = Key::open(ctx, name.1, true);
    if !matches!(key.slot(), Slot::Lock(lock) if lock.is_expired(now)) {
        return false;
    }
    key.delete();
    drop(key);
    stats::expired();
    ctx.replicate_del(name.1);
    ctx.notify(c"lock.expire", name.1);
    crate::blocking::settle(ctx, name.1);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_the_minimum_then_only_while_finding_expired_locks() {
        let ms = Duration::from_micros(100);
        assert!(Effort {
            scanned: 0,
            expired: 0
        }
        .keep_going(ms));
        assert!(Effort {
            scanned: 999,
            expired: 0
        }
        .keep_going(ms));
        assert!(!Effort {
            scanned: 1000,
            expired: 0
        }
        .keep_going(ms));
        assert!(!Effort {
            scanned: 1000,
            expired: 99
        }
        .keep_going(ms));
        assert!(Effort {
            scanned: 1000,
            expired: 100
        }
        .keep_going(ms));
    }

    #[test]
    fn never_past_the_time_budget() {
        assert!(!Effort {
            scanned: 10,
            expired: 10
        }
        .keep_going(TICK_BUDGET));
    }
}
