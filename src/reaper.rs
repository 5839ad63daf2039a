//! Active expiry: expired locks disappear without being touched.
//!
//! Driven by a module timer armed for the earliest deadline in the index,
//! with the server cron (`CronLoop` event, monotonic in the event loop) as a
//! backstop: module timers follow the wall clock on Redis 7.0, so a clock
//! jumped backwards would otherwise delay them. Replicas and loading servers
//! never expire anything themselves; they follow the primary's `DEL`.

use crate::clock;
use crate::expiry::{ExpiryIndex, Place};
use crate::ffi::{bytes, Ctx, Key, RawString, Slot};
use crate::lock::{IndexSlot, Lock, Millis};
use crate::stats;
use redis_module::{raw, Context, RedisModuleTimerID};
use std::ffi::{c_char, c_int, CStr};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Locked briefly and never across a Redis call that may free a value
/// (freeing a lock takes this mutex too, possibly on a lazy-free thread).
static INDEX: Mutex<ExpiryIndex> = Mutex::new(ExpiryIndex::new());
/// The pending timer and the deadline it was armed for (main thread only).
static ARMED: Mutex<Option<(RedisModuleTimerID, Millis)>> = Mutex::new(None);

/// Expirations per tick at most, so a mass expiry cannot stall the server.
const BUDGET: usize = 1000;
/// How soon a replica looks again at a lock the primary has not deleted yet.
const REPLICA_RECHECK_MS: Millis = 100;

fn index() -> MutexGuard<'static, ExpiryIndex> {
    INDEX
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn indexed() -> usize {
    index().len()
}

/// File a lock for expiry at its deadline (new lock, loaded, renamed, copied).
pub fn file(lock: &mut Lock, place: Place) {
    index().file(&mut lock.slot, lock.deadline, place);
}

/// File a lock that lives at `key` in the selected db, and arm the timer.
pub fn track(ctx: Ctx, key: RawString, lock: &mut Lock) {
    let place = Place {
        db: ctx.selected_db(),
        key: bytes(key).into(),
    };
    file(lock, place);
    arm(ctx);
}

/// The lock's deadline changed (renewed, extended, replicated).
pub fn deadline_changed(ctx: Ctx, lock: &mut Lock) {
    if index().move_earlier(&mut lock.slot, lock.deadline) {
        arm(ctx);
    }
}

/// The lock value is being freed.
pub fn forget(slot: &IndexSlot) {
    index().forget(slot);
}

/// (Re)arm the timer if the earliest deadline is sooner than it is set for.
fn arm(ctx: Ctx) {
    let Some(next) = index().next_deadline() else {
        return;
    };
    let mut armed = ARMED.lock().unwrap_or_else(|p| p.into_inner());
    if matches!(*armed, Some((_, at)) if at <= next) {
        return;
    }
    let context = Context::new(ctx.0);
    if let Some((old, _)) = armed.take() {
        let _ = context.stop_timer::<()>(old); // may have fired already
    }
    let delay = next.saturating_sub(clock::now_ms());
    let id = context.create_timer(Duration::from_millis(delay), on_timer, ());
    *armed = Some((id, next));
}

fn on_timer(context: &Context, _: ()) {
    *ARMED.lock().unwrap_or_else(|p| p.into_inner()) = None;
    tick(Ctx(context.ctx));
}

/// `CronLoop` server event: the backstop tick.
pub unsafe extern "C" fn on_cron(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut std::ffi::c_void,
) {
    let _ = std::panic::catch_unwind(|| tick(Ctx(ctx)));
}

/// Expire what is due, refile what was extended, re-arm.
pub fn tick(ctx: Ctx) {
    if ctx.is_loading() {
        return;
    }
    let now = clock::now_ms();
    let replica = ctx.is_replica();
    let home_db = ctx.selected_db();
    for _ in 0..BUDGET {
        let Some((id, place)) = index().pop_due(now) else {
            break;
        };
        if ctx.select_db(place.db) {
            reap(ctx, id, place, now, replica);
        }
    }
    ctx.select_db(home_db);
    arm(ctx);
}

fn reap(ctx: Ctx, id: u64, place: Place, now: Millis, replica: bool) {
    let name = ctx.create_string(&place.key);
    let mut key = Key::open(ctx, name.1, true);
    let expired = match key.slot() {
        // Anything else at this name means the entry is stale: the lock was
        // renamed or moved (filed again under its new name) or replaced.
        Slot::Lock(lock) if lock.slot.id == id => {
            if !lock.is_expired(now) {
                index().refile(&mut lock.slot, lock.deadline, place);
                false
            } else if replica {
                index().refile(&mut lock.slot, now + REPLICA_RECHECK_MS, place);
                false
            } else {
                true
            }
        }
        _ => false,
    };
    if expired {
        key.delete();
        drop(key);
        stats::expired();
        ctx.replicate_del(name.1);
        ctx.notify(c"lock.expire", name.1);
    }
}

/// Keyspace events that move a lock to a new name or db: file it there.
pub unsafe extern "C" fn on_keyspace_event(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    let moved_in = matches!(
        CStr::from_ptr(event).to_bytes(),
        b"rename_to" | b"move_to" | b"copy_to" | b"restore"
    );
    if moved_in {
        let _ = std::panic::catch_unwind(|| {
            let ctx = Ctx(ctx);
            let mut handle = Key::open(ctx, key, false);
            if let Slot::Lock(lock) = handle.slot() {
                track(ctx, key, lock);
            }
        });
    }
    raw::REDISMODULE_OK as c_int
}
