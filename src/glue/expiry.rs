//! Expiry found by a command: a lock past its deadline deleted, a shared
//! key's expired holders dropped, each replicated and announced as an
//! expiry and counted in `INFO lock` (`tally`). Used by the commands, the
//! hand-off of blocked waiters and the reaper alike.

use crate::glue::ffi::{Ctx, Key, RawString, Slot};
use crate::rules::lock::Millis;
use crate::rules::stats;

/// Count an outcome in `INFO lock`, where it was decided: a client's
/// command on a primary. The same change arriving from a primary's stream
/// or replayed from the AOF counts only as `applied` (the entry point), so
/// a replica's counters are not a copy of its primary's (it counted
/// replicated releases, not the grants that came as LOCK.APPLY: acquired 0,
/// released 100 after 50 cycles, 2026-11-28), and a restart's AOF replay
/// does not count its history a second time.
pub fn tally(ctx: Ctx, count: fn()) {
    if !ctx.is_replicated_or_aof() {
        count();
    }
}

/// Lazy expiry of a lock found past its deadline by a write command.
pub fn expire_now(ctx: Ctx, key: &mut Key, name: RawString) {
    key.delete();
    tally(ctx, stats::expired);
    ctx.replicate_del(name);
    ctx.notify(c"lock.expire", name);
}

/// Take out a shared key's holders that are past their deadline, each
/// replicated as its own removal, counted and announced as an expiry; a
/// key with no live holder left is deleted (as an expired lock is). Not on
/// a replica or while replaying: they follow the primary's removals.
pub fn drop_expired_holders(ctx: Ctx, key: &mut Key, name: RawString, now: Millis) {
    if ctx.is_replicated_or_aof() {
        return;
    }
    let Slot::Shared(held) = key.slot() else {
        return;
    };
    if held.is_expired(now) {
        return expire_now(ctx, key, name);
    }
    let limit = held.limit;
    for gone in held.prune(now) {
        tally(ctx, stats::expired);
        ctx.replicate_shared_drop(name, limit, &gone.owner);
        ctx.notify(c"lock.expire", name);
    }
}
