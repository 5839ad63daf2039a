//! The LOCK.* command handlers. Each reads as parse -> decide (lock.rs) ->
//! write the key -> reply -> replicate the effect.

use crate::glue::blocking;
use crate::glue::expiry::{drop_expired_holders, expire_now, tally};
use crate::glue::ffi::{bytes, guard, Ctx, Key, RawCtx, RawString, Slot};
use crate::glue::propagation;
use crate::rules::args;
use crate::rules::clock;
use crate::rules::config;
use crate::rules::fencing::{self, TOKENS};
use crate::rules::lock::{self, Acquire, Lock, Millis, Release};
use crate::rules::shared::{self, ExclusiveOnShared, Shared, SharedAcquire, LIMIT_DIFFERS};
use crate::rules::{guard, stats};
use std::ffi::c_int;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const OK: c_int = redis_module::raw::REDISMODULE_OK as c_int;

/// Declares the `extern "C"` entry point Redis calls for a command: builds
/// the argv slice and runs the handler behind the panic guard. A command
/// that writes is refused to clients of a replica before its handler runs.
macro_rules! entry_point {
    ($extern_name:ident => $handler:ident, writes: $writes:literal) => {
        pub extern "C" fn $extern_name(ctx: RawCtx, argv: *mut RawString, argc: c_int) -> c_int {
            guard(ctx, || {
                // SAFETY: Redis passes argc valid strings in argv.
                let argv = unsafe { std::slice::from_raw_parts(argv, argc.max(0) as usize) };
                let ctx = Ctx(ctx);
                let (replayed, on_replica) = ctx.replayed_and_replica();
                if replayed {
                    stats::applied();
                }
                if $writes && on_replica && !replayed {
                    ctx.error(REPLICA);
                } else {
                    $handler(ctx, argv);
                }
                OK
            })
        }
    };
}

entry_point!(acquire_command => acquire, writes: true);
entry_point!(release_command => release, writes: true);
entry_point!(extend_command => extend, writes: true);
entry_point!(status_command => status, writes: false);
// LOCK.APPLY is accepted only from a primary or the AOF (checked inside).
entry_point!(apply_command => apply, writes: false);
entry_point!(apply_shared_command => apply_shared, writes: false);
entry_point!(fence_command => fence, writes: true);
entry_point!(server_id_command => server_id, writes: false);

/// Most arguments after the key any LOCK.* command accepts (`owner ttl-ms
/// SHARED LIMIT n WAIT timeout-ms REENTRANT MINTOKEN token TICKET ticket`),
/// plus one so a surplus is seen.
const MAX_REST: usize = 13;

/// A shared holder asking for the exclusive lock.
const NO_UPGRADE: &str =
    "ERR this owner holds the lock SHARED: release it first (no upgrade from shared to exclusive)";

/// argv after the key, as byte slices, without a heap allocation (this is
/// the hot path). Longer argv is cut at MAX_REST, which every parser
/// rejects as a wrong number of arguments or an unknown option.
fn rest(argv: &[RawString]) -> ([&[u8]; MAX_REST], usize) {
    let mut out: [&[u8]; MAX_REST] = [&[]; MAX_REST];
    let n = argv.len().saturating_sub(2).min(MAX_REST);
    for (slot, &s) in out.iter_mut().zip(&argv[2..2 + n]) {
        *slot = bytes(s);
    }
    (out, n)
}

/// `LOCK.ACQUIRE key owner ttl-ms [WAIT timeout-ms] [REENTRANT] [MINTOKEN token]
/// [TICKET ticket]`
fn acquire(ctx: Ctx, argv: &[RawString]) {
    if argv.len() < 4 {
        return ctx.error(&args::wrong_arity("lock.acquire"));
    }
    let name = argv[1];
    let (rest, n) = rest(argv);
    // Parsed with the holder's limits, so that a holder whose owner is
    // longer than a since-lowered lock.max-owner-len can still renew its own
    // lock; a new grant or a wait must fit the limit (`new_owner`).
    let req = match args::acquire(&rest[..n], &holder_limits(ctx)) {
        Ok(req) => req,
        Err(e) => return ctx.error(&e),
    };
    let new_owner = || args::owner(req.owner, &limits(ctx)).err();
    // Inside MULTI, Lua or on a replica, WAIT degrades to a plain try.
    let wait = req.wait.filter(|_| ctx.can_block());
    let now = clock::now_ms();
    let mut key = Key::open(ctx, name, true);
    if req.shared {
        return acquire_shared(ctx, name, &req, wait, now, key);
    }
    // An expired lock found here is counted only where it is replaced below:
    // a request refused first (guard, queue) leaves it to the reaper or the
    // hand-off, which count it then.
    let mut replaces_expired = false;
    match key.slot() {
        Slot::WrongType => return ctx.error(WRONGTYPE),
        Slot::Empty => {
            if let Some(e) = new_owner() {
                return ctx.error(&e);
            }
        }
        Slot::Lock(held) => match lock::acquire(
            as_primary_saw_it(ctx, held, now),
            req.owner,
            req.ttl,
            req.reentrant,
            now,
        ) {
            Acquire::Busy => {
                if let Some(e) = new_owner() {
                    return ctx.error(&e);
                }
                tally(ctx, stats::contended);
                return match wait {
                    Some(timeout) => blocking::block(ctx, name, &req, timeout, held.remaining(now)),
                    None => ctx.reply_null(),
                };
            }
            Acquire::Renewed { token, .. } => {
                blocking::claimed(ctx, name, token);
                blocking::deadline_moved(ctx, name, held.remaining(now));
                ctx.replicate_verbatim(); // deterministic on a replica: same owner, same token
                return ctx.reply_int(token as i64);
            }
            Acquire::Free => {
                if let Some(e) = new_owner() {
                    return ctx.error(&e);
                }
                replaces_expired = true;
            }
        },
        Slot::Shared(held) => match shared::exclusive_on_shared(held, req.owner, now) {
            ExclusiveOnShared::NoUpgrade => return ctx.error(NO_UPGRADE),
            ExclusiveOnShared::Busy => {
                if let Some(e) = new_owner() {
                    return ctx.error(&e);
                }
                tally(ctx, stats::contended);
                return match wait {
                    Some(timeout) => {
                        blocking::block(ctx, name, &req, timeout, held.next_change(now))
                    }
                    None => ctx.reply_null(),
                };
            }
            ExclusiveOnShared::Free => {
                if let Some(e) = new_owner() {
                    return ctx.error(&e);
                }
                replaces_expired = true;
            }
        },
    }
    if let Some(left) = guard::remaining(now) {
        return ctx.error(&guard::refusal(left));
    }
    // A free key with a queue belongs to the queue's head: no barging.
    if blocking::waiting(ctx, name) > 0 {
        tally(ctx, stats::contended);
        return match wait {
            Some(timeout) => blocking::block(ctx, name, &req, timeout, 0),
            None => ctx.reply_null(),
        };
    }
    let floor = fencing::floor(crate::glue::ffi::wall_micros(), req.min_token);
    let Some(token) = TOKENS.next(floor) else {
        return ctx.error(fencing::EXHAUSTED);
    };
    if replaces_expired {
        tally(ctx, stats::expired);
    }
    let granted = key.set(Lock::new(req.owner, token, req.ttl, now));
    tally(ctx, stats::acquired);
    propagation::grant(ctx, argv, granted.token);
    ctx.notify(c"lock.acquire", name);
    ctx.reply_int(granted.token as i64);
}

/// `LOCK.ACQUIRE key owner ttl-ms SHARED [LIMIT n] ...`: a shared hold
/// (shared.rs). Every effect replicates as `LOCK.APPLYSHARED`, the state
/// of one hold, absolute.
fn acquire_shared(
    ctx: Ctx,
    name: RawString,
    req: &args::AcquireArgs,
    wait: Option<Millis>,
    now: Millis,
    mut key: Key,
) {
    let new_owner = || args::owner(req.owner, &limits(ctx)).err();
    // Holders past their deadline leave first, so that what is decided
    // and replicated below sees only live ones.
    drop_expired_holders(ctx, &mut key, name, now);
    let mut replaces_expired = false;
    let decided = match key.slot() {
        Slot::WrongType => return ctx.error(WRONGTYPE),
        Slot::Empty => SharedAcquire::Free,
        Slot::Lock(held) => {
            let decided = shared::on_exclusive(held, req.owner, req.ttl, req.reentrant, now);
            replaces_expired = decided == SharedAcquire::Free;
            decided
        }
        Slot::Shared(held) => {
            shared::on_shared(held, req.owner, req.ttl, req.reentrant, req.limit, now)
        }
    };
    match decided {
        SharedAcquire::LimitDiffers => return ctx.error(LIMIT_DIFFERS),
        SharedAcquire::Renewed { token, .. } => {
            let Slot::Shared(held) = key.slot() else {
                return ctx.error("ERR lock changed under a renewal");
            };
            let limit = held.limit;
            if let Some(hold) = held.holder(req.owner, now) {
                let remaining = hold.remaining(now);
                ctx.replicate_shared_hold(name, limit, hold, remaining);
                blocking::claimed(ctx, name, token);
                blocking::deadline_moved(ctx, name, remaining);
            }
            return ctx.reply_int(token as i64);
        }
        SharedAcquire::Downgraded { token } => {
            let Slot::Lock(held) = key.slot() else {
                return ctx.error("ERR lock changed under a downgrade");
            };
            let hold = held.clone();
            let remaining = hold.remaining(now);
            blocking::claimed(ctx, name, token);
            let shared = key.set_shared(Shared::new(hold, req.limit));
            ctx.replicate_shared_hold(name, shared.limit, &shared.holders()[0], remaining);
            drop(key);
            tally(ctx, stats::downgraded);
            ctx.notify(c"lock.downgrade", name);
            ctx.reply_int(token as i64);
            // The shared waiters behind it may come in now.
            return blocking::settle(ctx, name);
        }
        SharedAcquire::Busy => {
            if let Some(e) = new_owner() {
                return ctx.error(&e);
            }
            tally(ctx, stats::contended);
            let check_in = match key.slot() {
                Slot::Lock(held) => held.remaining(now),
                Slot::Shared(held) => held.next_change(now),
                _ => 0,
            };
            drop(key);
            return match wait {
                Some(timeout) => blocking::block(ctx, name, req, timeout, check_in),
                None => ctx.reply_null(),
            };
        }
        SharedAcquire::Free | SharedAcquire::Join => {
            if let Some(e) = new_owner() {
                return ctx.error(&e);
            }
        }
    }
    if let Some(left) = guard::remaining(now) {
        return ctx.error(&guard::refusal(left));
    }
    // A queue means someone is ahead: a try never overtakes a waiter.
    if blocking::waiting(ctx, name) > 0 {
        tally(ctx, stats::contended);
        drop(key);
        return match wait {
            Some(timeout) => blocking::block(ctx, name, req, timeout, 0),
            None => ctx.reply_null(),
        };
    }
    let floor = fencing::floor(crate::glue::ffi::wall_micros(), req.min_token);
    let Some(token) = TOKENS.next(floor) else {
        return ctx.error(fencing::EXHAUSTED);
    };
    if replaces_expired {
        tally(ctx, stats::expired);
    }
    let hold = Lock::new(req.owner, token, req.ttl, now);
    let limit = match key.slot() {
        Slot::Shared(held) if decided == SharedAcquire::Join => {
            held.join(hold.clone(), now);
            held.limit
        }
        _ => key.set_shared(Shared::new(hold.clone(), req.limit)).limit,
    };
    drop(key);
    tally(ctx, stats::acquired);
    ctx.replicate_shared_hold(name, limit, &hold, req.ttl);
    ctx.notify(c"lock.acquire", name);
    ctx.reply_int(token as i64);
}

/// `LOCK.RELEASE key owner` -> 1 released (or one hold dropped), 0 other
/// owner, -1 not held. Then `owner`'s WAITs queued for the key reply nil
/// (withdrawn), and a freed lock goes to the head of the queue.
fn release(ctx: Ctx, argv: &[RawString]) {
    if argv.len() != 3 {
        return ctx.error(&args::wrong_arity("lock.release"));
    }
    let name = argv[1];
    let (rest, n) = rest(argv);
    let owner = match args::release(&rest[..n], &holder_limits(ctx)) {
        Ok(owner) => owner,
        Err(e) => return ctx.error(&e),
    };
    let now = clock::now_ms();
    let mut key = Key::open(ctx, name, true);
    drop_expired_holders(ctx, &mut key, name, now);
    let outcome = match key.slot() {
        Slot::WrongType => return ctx.error(WRONGTYPE),
        Slot::Empty => Release::NotHeld,
        Slot::Shared(held) => {
            let outcome = shared::release(held, owner, now);
            let limit = held.limit;
            match outcome {
                Release::HoldDropped { .. } => {
                    if let Some(hold) = held.holder(owner, now) {
                        let remaining = hold.remaining(now);
                        blocking::claimed(ctx, name, hold.token);
                        ctx.replicate_shared_hold(name, limit, hold, remaining);
                    }
                    tally(ctx, stats::released);
                }
                Release::WrongOwner => tally(ctx, stats::wrong_owner),
                Release::NotHeld => {}
                Release::Deleted => {
                    held.remove(owner);
                    if held.holders().is_empty() {
                        key.delete();
                    }
                    tally(ctx, stats::released);
                    ctx.replicate_shared_drop(name, limit, owner);
                    ctx.notify(c"lock.release", name);
                }
            }
            outcome
        }
        Slot::Lock(held) => {
            let outcome = lock::release(as_primary_saw_it(ctx, held, now), owner, now);
            match outcome {
                Release::HoldDropped { .. } => {
                    blocking::claimed(ctx, name, held.token);
                    ctx.replicate_verbatim();
                    tally(ctx, stats::released);
                }
                Release::WrongOwner => tally(ctx, stats::wrong_owner),
                Release::NotHeld => expire_now(ctx, &mut key, name),
                Release::Deleted => {
                    key.delete();
                    tally(ctx, stats::released);
                    ctx.replicate_verbatim();
                    ctx.notify(c"lock.release", name);
                }
            }
            outcome
        }
    };
    drop(key);
    ctx.reply_int(outcome.reply());
    // Before the hand-off, so that a lock just released is not handed
    // straight back to the same owner's queued request. Not for a RELEASE
    // replayed from the AOF (DEBUG LOADAOF): it is history, and the live
    // waiters of that owner asked after it (db86243).
    if !ctx.is_replicated_or_aof() {
        blocking::withdraw(ctx, name, owner);
    }
    blocking::settle(ctx, name);
}

/// What a client's write on a replica gets, also one that accepts writes
/// (`replica-read-only no`): a lock granted there would be invisible to the
/// primary.
const REPLICA: &str =
    "READONLY lock commands are not accepted on a replica (even with replica-read-only no)";

/// The limits a new grant is checked against: the configured ones for a
/// client, the widest possible ones for what a primary (or the AOF) already
/// decided, which is applied as decided even where limits are smaller.
fn limits(ctx: Ctx) -> args::Limits {
    if ctx.is_replicated_or_aof() {
        args::Limits::CEILING
    } else {
        config::limits()
    }
}

/// Release, extend and fence act on a lock that exists: its owner passed the
/// limits when it was granted, so a smaller `lock.max-owner-len` set since
/// must not lock the holder out of its own lock. The TTL limit still holds.
fn holder_limits(ctx: Ctx) -> args::Limits {
    args::Limits {
        max_owner_len: args::OWNER_LEN_CEILING,
        ..limits(ctx)
    }
}

/// Renewals, releases and extensions replicate verbatim (cheaper than an
/// absolute LOCK.APPLY), which is exact because a replica (or the AOF on
/// load) applies them to the lock as the primary saw it: live. A replica's
/// clock may read it as just expired, since a replica never expires locks
/// itself and the primary's DEL may still be on its way.
fn as_primary_saw_it(ctx: Ctx, held: &mut Lock, now: Millis) -> Option<&mut Lock> {
    if held.is_expired(now) && ctx.is_replicated_or_aof() {
        held.deadline = now + 1;
    }
    Some(held)
}

/// `LOCK.EXTEND key owner ttl-ms` -> 1 extended, 0 other owner, -1 not held.
fn extend(ctx: Ctx, argv: &[RawString]) {
    if argv.len() != 4 {
        return ctx.error(&args::wrong_arity("lock.extend"));
    }
    let name = argv[1];
    let (rest, n) = rest(argv);
    let (owner, ttl) = match args::extend(&rest[..n], &holder_limits(ctx)) {
        Ok(parsed) => parsed,
        Err(e) => return ctx.error(&e),
    };
    let now = clock::now_ms();
    let mut key = Key::open(ctx, name, true);
    drop_expired_holders(ctx, &mut key, name, now);
    let outcome = match key.slot() {
        Slot::WrongType => return ctx.error(WRONGTYPE),
        Slot::Empty => lock::Extend::NotHeld,
        Slot::Shared(held) => {
            let outcome = shared::extend(held, owner, ttl, now);
            let limit = held.limit;
            match outcome {
                lock::Extend::Extended => {
                    if let Some(hold) = held.holder(owner, now) {
                        blocking::claimed(ctx, name, hold.token);
                        blocking::deadline_moved(ctx, name, ttl);
                        ctx.replicate_shared_hold(name, limit, hold, ttl);
                    }
                    tally(ctx, stats::extended);
                }
                lock::Extend::WrongOwner => tally(ctx, stats::wrong_owner),
                lock::Extend::NotHeld => {}
            }
            outcome
        }
        Slot::Lock(held) => {
            let outcome = lock::extend(as_primary_saw_it(ctx, held, now), owner, ttl, now);
            match outcome {
                lock::Extend::Extended => {
                    blocking::claimed(ctx, name, held.token);
                    blocking::deadline_moved(ctx, name, held.remaining(now));
                    ctx.replicate_verbatim();
                    tally(ctx, stats::extended);
                }
                lock::Extend::WrongOwner => tally(ctx, stats::wrong_owner),
                lock::Extend::NotHeld => expire_now(ctx, &mut key, name),
            }
            outcome
        }
    };
    drop(key);
    ctx.reply_int(outcome.reply());
    if outcome == lock::Extend::NotHeld {
        blocking::settle(ctx, name);
    }
}

/// `LOCK.FENCE key owner token` -> the lock's token after raising it to at
/// least `token` (and the server's counter with it), 0 other owner, -1 not held.
fn fence(ctx: Ctx, argv: &[RawString]) {
    if argv.len() != 4 {
        return ctx.error(&args::wrong_arity("lock.fence"));
    }
    let name = argv[1];
    let (rest, n) = rest(argv);
    let (owner, token) = match args::fence(&rest[..n], &holder_limits(ctx)) {
        Ok(parsed) => parsed,
        Err(e) => return ctx.error(&e),
    };
    let wall = crate::glue::ffi::wall_micros();
    if ctx.is_replicated_or_aof() {
        // A primary sends its fences as LOCK.APPLY; a FENCE here comes from
        // an old or forged stream, held to the bound APPLY gets: one line
        // must not exhaust the counter for good (ed160dd).
        if token > fencing::replay_ceiling(wall) {
            return ctx.error("ERR token is more than an hour above this server's clock");
        }
    } else if token > fencing::fence_ceiling(wall) {
        let ceiling = fencing::fence_ceiling(wall);
        return ctx.error(&format!(
            "ERR token is more than 120 s above this server's clock in microseconds (at most {ceiling}); check clock sync"
        ));
    }
    let now = clock::now_ms();
    let mut key = Key::open(ctx, name, true);
    let outcome = match key.slot() {
        Slot::WrongType => return ctx.error(WRONGTYPE),
        Slot::Empty => lock::Fence::NotHeld,
        Slot::Shared(held) => {
            let outcome = shared::fence(held, owner, token, now);
            let limit = held.limit;
            match outcome {
                lock::Fence::Raised { token } => {
                    TOKENS.observe(token);
                    if let Some(hold) = held.holder(owner, now) {
                        ctx.replicate_shared_hold(name, limit, hold, hold.remaining(now));
                    }
                }
                lock::Fence::WrongOwner => tally(ctx, stats::wrong_owner),
                lock::Fence::NotHeld => {}
            }
            outcome
        }
        Slot::Lock(held) => {
            let outcome = lock::fence(Some(held), owner, token, now);
            match outcome {
                lock::Fence::Raised { token } => {
                    TOKENS.observe(token);
                    ctx.replicate_apply(name, held, held.remaining(now));
                }
                lock::Fence::WrongOwner => tally(ctx, stats::wrong_owner),
                lock::Fence::NotHeld => {}
            }
            outcome
        }
    };
    ctx.reply_int(outcome.reply());
}

/// `LOCK.STATUS key` -> map of owner, token, ttl (ms left), holds, waiters;
/// for a shared key a map of mode ("shared"), limit (0: none), holders
/// (each a map of owner, token, ttl, holds, in grant order) and waiters;
/// nil when not held. Read-only: an expired lock reads as nil and is left
/// to the reaper.
fn status(ctx: Ctx, argv: &[RawString]) {
    if argv.len() != 2 {
        return ctx.error(&args::wrong_arity("lock.status"));
    }
    let now = clock::now_ms();
    let mut key = Key::open(ctx, argv[1], false);
    match key.slot() {
        Slot::WrongType => ctx.error(WRONGTYPE),
        Slot::Lock(held) if !held.is_expired(now) => {
            ctx.reply_map(5);
            reply_hold(
                ctx,
                &held.owner,
                held.token,
                held.remaining(now),
                held.holds,
            );
            ctx.reply_bytes(b"waiters");
            ctx.reply_int(blocking::waiting(ctx, argv[1]) as i64);
        }
        Slot::Shared(held) if !held.is_expired(now) => {
            ctx.reply_map(4);
            ctx.reply_bytes(b"mode");
            ctx.reply_bytes(b"shared");
            ctx.reply_bytes(b"limit");
            ctx.reply_int(i64::from(held.limit.unwrap_or(0)));
            ctx.reply_bytes(b"holders");
            ctx.reply_array(held.live(now));
            for hold in held.holders().iter().filter(|h| !h.is_expired(now)) {
                ctx.reply_map(4);
                reply_hold(
                    ctx,
                    &hold.owner,
                    hold.token,
                    hold.remaining(now),
                    hold.holds,
                );
            }
            ctx.reply_bytes(b"waiters");
            ctx.reply_int(blocking::waiting(ctx, argv[1]) as i64);
        }
        _ => ctx.reply_null(),
    }
}

/// `LOCK.SERVERID` -> this server process's `run_id` (as in `INFO server`).
/// A quorum client asks each node once per connection, so that two URLs
/// reaching one server (a LAN address next to 127.0.0.1, a unix socket, a
/// proxy) cannot both vote.
/// The four fields one hold shows in `LOCK.STATUS`, the same for the
/// exclusive holder and for each shared holder.
fn reply_hold(ctx: Ctx, owner: &[u8], token: u64, ttl: Millis, holds: u32) {
    ctx.reply_bytes(b"owner");
    ctx.reply_bytes(owner);
    ctx.reply_bytes(b"token");
    ctx.reply_int(token as i64);
    ctx.reply_bytes(b"ttl");
    ctx.reply_int(ttl as i64);
    ctx.reply_bytes(b"holds");
    ctx.reply_int(i64::from(holds));
}

fn server_id(ctx: Ctx, argv: &[RawString]) {
    static RUN_ID: once_cell::sync::OnceCell<Vec<u8>> = once_cell::sync::OnceCell::new();
    if argv.len() != 1 {
        return ctx.error(&args::wrong_arity("lock.serverid"));
    }
    // Read once: INFO is built per call, and the run_id is fixed at start.
    let run_id = RUN_ID.get_or_try_init(|| {
        let info = redis_module::Context::new(ctx.0).server_info("server");
        let field = info.field("run_id").ok_or(())?;
        Ok::<_, ()>(field.as_slice().to_vec())
    });
    match run_id {
        Ok(id) => ctx.reply_bytes(id),
        Err(()) => ctx.error("ERR this server reports no run_id"),
    }
}

/// `LOCK.APPLY key owner token ttl-ms holds`: the replicated effect of a
/// grant, renewal or extension, setting a lock's state absolutely. Only
/// accepted from the primary and the AOF; a client cannot forge a lock.
fn apply(ctx: Ctx, argv: &[RawString]) {
    if !ctx.is_replicated_or_aof() {
        return ctx.error("ERR LOCK.APPLY is internal: only accepted from a primary or the AOF");
    }
    let [_, name, owner, token, ttl, holds] = argv else {
        return ctx.error(&args::wrong_arity("lock.apply"));
    };
    let numbers =
        [token, ttl, holds].map(|&s| std::str::from_utf8(bytes(s)).ok()?.parse::<u64>().ok());
    let [Some(token), Some(ttl), Some(holds)] = numbers else {
        return ctx.error("ERR LOCK.APPLY token, ttl-ms and holds must be non-negative integers");
    };
    // What the primary decided, checked only against the widest bounds: a
    // corrupt or forged AOF line must not create a lock that never expires
    // or cannot be released. Its token may be at most an hour above this
    // server's clock (a primary's tokens are at most 120 s above its own, and
    // an AOF replays later), so one line cannot exhaust the counter either.
    let (owner, now) = (bytes(*owner), clock::now_ms());
    let applied = match lock::from_stored(owner, token, ttl, holds, &args::Limits::CEILING, now) {
        Ok(applied) => applied,
        Err(why) => return ctx.error(&format!("ERR LOCK.APPLY refused: {why}")),
    };
    if applied.token > fencing::replay_ceiling(crate::glue::ffi::wall_micros()) {
        return ctx
            .error("ERR LOCK.APPLY refused: token more than an hour above this server's clock");
    }
    TOKENS.observe(applied.token);
    let mut key = Key::open(ctx, *name, true);
    match key.slot() {
        Slot::Lock(held) if held.owner == applied.owner => *held = applied,
        _ => {
            key.set(applied);
        }
    }
    // Into this replica's own AOF (Redis passes a module command on only
    // when it asks): without it a replica restarted from its AOF had lost
    // every grant it was sent, and a second owner got them (ed160dd).
    // On a replica this feeds the AOF alone; sub-replicas get the
    // primary's stream as it is, and nothing propagates while loading.
    ctx.replicate_verbatim();
    ctx.reply_simple(c"OK");
}

/// `LOCK.APPLYSHARED key limit owner token ttl-ms holds`: the replicated
/// state of one shared hold, absolute (limit 0: none). `holds` 0 removes
/// `owner`'s hold (the key goes with its last one); otherwise the hold is
/// set, turning an exclusive lock of that owner (a downgrade) or anything
/// else at the key into shared holds. Only accepted from the primary and
/// the AOF; checked like `LOCK.APPLY`, and never past the limit.
fn apply_shared(ctx: Ctx, argv: &[RawString]) {
    if !ctx.is_replicated_or_aof() {
        return ctx
            .error("ERR LOCK.APPLYSHARED is internal: only accepted from a primary or the AOF");
    }
    let [_, name, limit, owner, token, ttl, holds] = argv else {
        return ctx.error(&args::wrong_arity("lock.applyshared"));
    };
    let numbers = [limit, token, ttl, holds]
        .map(|&s| std::str::from_utf8(bytes(s)).ok()?.parse::<u64>().ok());
    let [Some(limit), Some(token), Some(ttl), Some(holds)] = numbers else {
        return ctx.error(
            "ERR LOCK.APPLYSHARED limit, token, ttl-ms and holds must be non-negative integers",
        );
    };
    let limit = match limit {
        0 => None,
        n if n <= u64::from(crate::rules::args::MAX_LIMIT) => Some(n as u32),
        _ => return ctx.error("ERR LOCK.APPLYSHARED refused: limit out of bounds"),
    };
    let (owner, now) = (bytes(*owner), clock::now_ms());
    let mut key = Key::open(ctx, *name, true);
    if holds == 0 {
        if let Slot::Shared(held) = key.slot() {
            held.remove(owner);
            if held.holders().is_empty() {
                key.delete();
            }
        }
        ctx.replicate_verbatim();
        return ctx.reply_simple(c"OK");
    }
    let hold = match lock::from_stored(owner, token, ttl, holds, &args::Limits::CEILING, now) {
        Ok(hold) => hold,
        Err(why) => return ctx.error(&format!("ERR LOCK.APPLYSHARED refused: {why}")),
    };
    if hold.token > fencing::replay_ceiling(crate::glue::ffi::wall_micros()) {
        return ctx.error(
            "ERR LOCK.APPLYSHARED refused: token more than an hour above this server's clock",
        );
    }
    match key.slot() {
        Slot::Shared(held) => {
            let others = held
                .holders()
                .iter()
                .filter(|h| h.owner != hold.owner)
                .count();
            if limit.is_some_and(|l| others >= l as usize) {
                return ctx.error("ERR LOCK.APPLYSHARED refused: more holders than the limit");
            }
            TOKENS.observe(hold.token);
            held.limit = limit;
            held.put(hold);
        }
        _ => {
            TOKENS.observe(hold.token);
            key.set_shared(Shared::new(hold, limit));
        }
    }
    // Into this replica's own AOF, as LOCK.APPLY does.
    ctx.replicate_verbatim();
    ctx.reply_simple(c"OK");
}
