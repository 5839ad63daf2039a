//! Server-side waiting (LOCK.ACQUIRE ... WAIT): blocked clients queued per
//! key in order of (ticket, arrival) (`waiters.rs`), the hand-off of a freed
//! lock to the head of its queue, and LOCK.RELEASE withdrawing its owner's
//! queued WAITs.
//!
//! A key with waiters is "settled" whenever its lock may have gone away:
//! right after LOCK.RELEASE and lazy or active expiry, from a module timer
//! armed for the lock's deadline, and (deferred to a 0 ms timer, since the
//! data type's unlink callback must not write) after DEL, UNLINK, overwrite,
//! RENAME/MOVE away, and on FLUSHALL/SWAPDB events. Settling expires a lock past its deadline and grants
//! a free key to the head waiter with a fresh token, replicated as an effect.
//!
//! Blocked-client lifecycle (Redis 7.0 `module.c`): Redis frees a handle
//! from `RedisModule_BlockClient` (and its two temporary clients, ~35 KB)
//! only once `RedisModule_UnblockClient` was called for it, also when the
//! client timed out or went away. The rule here: whoever takes a waiter out
//! of its queue calls `unblock` for it, exactly once; being in the queue
//! means "not unblocked yet". WAIT timeouts are our own (one module timer
//! for the earliest deadline) and arrive through `on_reply` like grants, so
//! Redis's own timeout never races a pending grant and every client gets
//! exactly one reply.
//!
//! Nothing is written while the server pauses writes (`CLIENT PAUSE ...
//! WRITE`, `FAILOVER`): propagating then trips an assertion in Redis, so
//! settling and take-backs wait for the pause to end.

use crate::glue::ffi::{api, bytes, Ctx, Key, RawCtx, RawString, Slot};
use crate::rules::clock;
use crate::rules::fencing::TOKENS;
use crate::rules::lock::{Lock, Millis};
use crate::rules::shared::{admit, Admit, Current, Shared};
use crate::rules::stats;
use crate::rules::waiters::{Check, KeyId, Queues, Waiter};
use once_cell::sync::Lazy;
use redis_module::{raw, Context};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Blocked-client pointers, as integers. Main thread only.
static QUEUES: Lazy<Mutex<Queues<usize>>> = Lazy::new(Default::default);

/// The client id of every queued waiter, by blocked-client handle: at
/// hand-off its ACL user is asked whether it may still take the lock. Kept
/// beside the queues (they know handles, not clients); an entry goes when
/// its handle is unblocked (`unblock`, `release_handle`). Main thread only.
static CLIENT_IDS: Lazy<Mutex<HashMap<usize, u64>>> = Lazy::new(Default::default);

fn client_ids() -> MutexGuard<'static, HashMap<usize, u64>> {
    CLIENT_IDS.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a waiter whose ACL no longer lets it take the lock is told; the
/// lock goes on to the next waiter.
const NO_PERMISSION: &str =
    "NOPERM this user may no longer take this lock (its ACL changed while it waited): not granted";

/// The one timer for the earliest WAIT deadline: (timer id, due at).
static DEADLINE_TIMER: Mutex<Option<(u64, Millis)>> = Mutex::new(None);

/// The grants handed to a waiter whose reply has not gone out yet. A
/// grant whose client went away before the reply is taken back on the next
/// event-loop turn (`take_back`), unless its owner claimed it meanwhile
/// (`claimed`). Main thread only; holds only the hand-offs of this turn.
/// Keyed by (token, key): `LOCK.FENCE` can give two locks one token.
static IN_FLIGHT: Mutex<Vec<(u64, KeyId)>> = Mutex::new(Vec::new());

fn in_flight() -> MutexGuard<'static, Vec<(u64, KeyId)>> {
    IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where the grant of `token` on `key` of `db` is in the in-flight list.
fn in_flight_at(list: &[(u64, KeyId)], token: u64, db: i32, key: &[u8]) -> Option<usize> {
    list.iter()
        .position(|(t, k)| *t == token && k.0 == db && *k.1 == *key)
}

/// Take the grant of `token` on `key` of `db` off the in-flight list; false
/// if it was not there.
fn settled_in_flight(token: u64, db: i32, key: &[u8]) -> bool {
    let mut list = in_flight();
    let found = in_flight_at(&list, token, db, key);
    found.map(|at| list.swap_remove(at)).is_some()
}

/// The owner of the lock at `name` with `token` acted on it (renewed,
/// extended, re-entered, dropped a hold) and so knows it holds it: a
/// hand-off of it that never reached the owner's WAIT must not be taken
/// back from under it. Without this, an owner that lost its WAIT connection
/// and retried on another one was told "yours" and then lost the lock to
/// the next waiter: two holders (an attack run, f75f015).
pub fn claimed(ctx: Ctx, name: RawString, token: u64) {
    if !in_flight().is_empty() {
        settled_in_flight(token, ctx.selected_db(), bytes(name));
    }
}

/// The deadline of the lock at `name` (selected db) moved to `remaining` ms
/// from now (EXTEND, a renewal): if anyone waits for it and the key's check
/// is due later, bring the check forward. A lock shortened from 60 s to
/// 100 ms was handed on at its old deadline, or when the active-expiry
/// sweep reached it (an attack run, 6cfbd0b). A later deadline needs
/// nothing: the early check finds the lock live and re-arms.
pub fn deadline_moved(ctx: Ctx, name: RawString, remaining: Millis) {
    let id = {
        let q = queues();
        if q.is_empty() {
            return; // the hot path: nobody waits anywhere
        }
        let id = key_id(ctx, name);
        let due = clock::now_ms().saturating_add(remaining);
        if q.waiting(&id) == 0 || q.check(&id).is_some_and(|c| c.due <= due) {
            return;
        }
        id
    };
    arm(ctx, id, remaining);
}

/// How long a write that must wait for a write pause is put off.
const PAUSE_RETRY_MS: Millis = 20;

fn queues() -> MutexGuard<'static, Queues<usize>> {
    QUEUES.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn total_waiters() -> usize {
    queues().total()
}

fn key_id(ctx: Ctx, name: RawString) -> KeyId {
    (ctx.selected_db(), bytes(name).into())
}

/// Number of clients waiting for the lock at `name` (selected db).
pub fn waiting(ctx: Ctx, name: RawString) -> usize {
    let q = queues();
    if q.is_empty() {
        return 0; // the hot path: nobody waits anywhere
    }
    q.waiting(&key_id(ctx, name))
}

/// What a blocked client is finally told.
enum Outcome {
    Token(u64),
    Error(&'static str),
    TimedOut,
}

/// The private data handed to a blocked client on unblock. If the client
/// vanished before the reply was delivered, the grant is taken back.
struct Grant {
    outcome: Outcome,
    db: i32,
    key: Box<[u8]>,
    owner: Box<[u8]>,
    delivered: bool,
}

/// Block the calling client until the lock at `name` is handed to it, or
/// `timeout` ms pass (0 = no limit). `check_in` is when to look at the
/// lock next (its remaining TTL; 0 when it is already free).
pub fn block(
    ctx: Ctx,
    name: RawString,
    req: &crate::rules::args::AcquireArgs,
    timeout: Millis,
    check_in: Millis,
) {
    // Redis's own timeout stays off (0): it is checked only when the event
    // loop wakes (at `hz`), and when it fires in the same pass as a grant
    // Redis drops the reply. Our deadline timer unblocks instead;
    // `on_timeout` then only serves CLIENT UNBLOCK.
    // SAFETY: valid command ctx; callbacks are ours and never unwind.
    let bc = unsafe {
        api!(RedisModule_BlockClient)(ctx.0, Some(on_reply), Some(on_timeout), Some(free_grant), 0)
    };
    let deadline = (timeout > 0).then(|| clock::now_ms().saturating_add(timeout));
    // SAFETY: bc was just created and is not yet unblocked.
    unsafe { api!(RedisModule_SetDisconnectCallback)(bc, Some(on_disconnect)) };
    let id = key_id(ctx, name);
    client_ids().insert(bc as usize, ctx.client_id());
    let mut q = queues();
    // Without TICKET: the arrival time, on the scale clients use.
    let ticket = match req.ticket {
        Some(ticket) => ticket,
        None => q.arrival_ticket(crate::glue::ffi::wall_micros()),
    };
    q.push(
        id.clone(),
        Waiter {
            handle: bc as usize,
            owner: req.owner.into(),
            ttl: req.ttl,
            min_token: req.min_token,
            deadline,
            ticket,
            shared: req.shared,
            limit: req.limit,
        },
    );
    drop(q);
    stats::waited();
    arm(ctx, id, check_in);
    if let Some(at) = deadline {
        arm_deadline(ctx, at);
    }
}

fn deadline_timer() -> MutexGuard<'static, Option<(u64, Millis)>> {
    DEADLINE_TIMER.lock().unwrap_or_else(|p| p.into_inner())
}

/// Make sure the deadline timer fires as soon as the clock is past `at`.
fn arm_deadline(ctx: Ctx, at: Millis) {
    let context = Context::new(ctx.0);
    let mut slot = deadline_timer();
    match *slot {
        Some((_, due)) if due <= at => return,
        Some((old, _)) => {
            // The callback and its data are zero-sized, so the crate's
            // untyped stop_timer frees nothing of the wrong type.
            let _ = context.stop_timer::<()>(old);
        }
        None => {}
    }
    // Due once the clock is past `at` (see `Queues::expire_due`).
    let delay = (at + 1).saturating_sub(clock::now_ms());
    let timer = context.create_timer(Duration::from_millis(delay), on_deadline, ());
    *slot = Some((timer, at));
}

/// LOCK.RELEASE by `owner`: its WAITs still queued for `name` (selected db)
/// reply nil at once, as on a timeout (a quorum client that won elsewhere
/// takes back its request). Only replies: nothing is written or propagated,
/// so no write-pause check is needed (a client's RELEASE waits out a pause
/// anyway), and MULTI and scripts behave the same. Other owners' waiters,
/// and `owner`'s waiters on other keys, stay queued.
pub fn withdraw(ctx: Ctx, name: RawString, owner: &[u8]) {
    let (id, gone) = {
        let mut q = queues();
        if q.is_empty() {
            return; // the hot path: nobody waits anywhere
        }
        let id = key_id(ctx, name);
        let gone = q.withdraw(&id, owner);
        (id, gone)
    };
    for w in gone {
        stats::wait_withdrawn();
        unblock(w.handle, Outcome::TimedOut, &id, w.owner);
    }
}

/// Time out every waiter whose WAIT deadline has come, then re-arm for the
/// next one.
fn on_deadline(context: &Context, (): ()) {
    let ctx = Ctx(context.ctx);
    let _ = std::panic::catch_unwind(|| {
        *deadline_timer() = None;
        time_out_due(clock::now_ms());
        let next = queues().next_deadline();
        if let Some(at) = next {
            arm_deadline(ctx, at); // not yet passed, so at least 1 ms away
        }
    });
}

/// Reply nil to every waiter whose WAIT deadline has passed. Besides the
/// deadline timer, from the server cron (module timers run on the wall
/// clock in Redis 7.0, so a clock stepped back N s held them back N s; the
/// cron runs on the event loop's monotonic clock) and before every
/// hand-off (after a stall the key's timer can run before the deadline
/// timer, and the head of the queue was handed a lock its WAIT had given
/// up on). Both found by an attack run (f75f015).
pub fn time_out_due(now: Millis) {
    let due = queues().expire_due(now);
    for (id, w) in due {
        stats::wait_timed_out();
        unblock(w.handle, Outcome::TimedOut, &id, w.owner);
    }
}

/// (Re)arm the check timer of a key with waiters.
fn arm(ctx: Ctx, id: KeyId, delay: Millis) {
    let context = Context::new(ctx.0);
    let old = queues().check(&id);
    if let Some(old) = old {
        let _ = context.stop_timer::<KeyId>(old.timer); // may have fired already
    }
    let timer = context.create_timer(Duration::from_millis(delay), on_timer, id.clone());
    let due = clock::now_ms().saturating_add(delay);
    queues().set_check(&id, Some(Check { timer, due }));
}

fn on_timer(context: &Context, id: KeyId) {
    let ctx = Ctx(context.ctx);
    let _ = std::panic::catch_unwind(|| {
        queues().set_check(&id, None);
        settle_at(ctx, &id);
    });
}

/// From the server cron: settle every key whose check is overdue. Module
/// timers follow the wall clock in Redis 7.0, so after the clock was
/// stepped back N s a key's timer (a lock's expiry, a write-pause retry)
/// fired N s late and its waiters waited that long for a free lock (an
/// attack run, ce86406); the cron runs on the monotonic clock.
pub fn settle_overdue(ctx: Ctx) {
    let overdue = {
        let mut q = queues();
        if q.is_empty() {
            return; // nobody waits anywhere
        }
        q.take_overdue(clock::now_ms())
    };
    let context = Context::new(ctx.0);
    for (id, check) in overdue {
        let _ = context.stop_timer::<KeyId>(check.timer);
        settle_at(ctx, &id);
    }
}

/// Settle a key given by db + name (timers, events).
fn settle_at(ctx: Ctx, id: &KeyId) {
    let home = ctx.selected_db();
    if ctx.select_db(id.0) {
        let name = ctx.create_string(&id.1);
        settle(ctx, name.1);
    }
    ctx.select_db(home);
}

/// If anyone waits for `name`: expire its lock if due, then hand a free key
/// to the head waiter; a live lock re-arms the check for its deadline.
pub fn settle(ctx: Ctx, name: RawString) {
    if waiting(ctx, name) == 0 {
        return;
    }
    let id = key_id(ctx, name);
    if ctx.is_replicated_or_aof() {
        // A replayed AOF (DEBUG LOADAOF with clients waiting) or the
        // replication stream: the state is not final until the load ends,
        // and a later line may set the lock for its real holder; a grant
        // made here was overwritten under the waiter (two holders, an
        // attack run, eed57fd). Settle once the event loop runs again.
        return arm(ctx, id, 0);
    }
    let now = clock::now_ms();
    let mut key = Key::open(ctx, name, true);
    match key.slot() {
        Slot::Lock(held) if !held.is_expired(now) => {
            let remaining = held.remaining(now);
            drop(key);
            return arm(ctx, id, remaining);
        }
        _ if crate::glue::ffi::writes_paused() => {
            // Expiring or handing off would propagate during the pause.
            drop(key);
            return arm(ctx, id, PAUSE_RETRY_MS);
        }
        Slot::Lock(_) => {
            key.delete();
            stats::expired();
            ctx.replicate_del(name);
            ctx.notify(c"lock.expire", name);
        }
        // Holders past their deadline free their places (the whole key
        // when none is left); live ones stay, and the head may join them.
        Slot::Shared(_) => crate::glue::expiry::drop_expired_holders(ctx, &mut key, name, now),
        Slot::WrongType => {
            drop(key);
            return fail_all(&id, "WRONGTYPE the key no longer holds a lock");
        }
        Slot::Empty => {}
    }
    if let Slot::Shared(held) = key.slot() {
        // Live holders: nothing to do unless the head may join them.
        let head = queues().front(&id).map(|w| (w.shared, w.limit));
        let admitted = head.is_some_and(|(shared, limit)| {
            admit(Current::Shared(held), shared, limit, now) != Admit::Wait
        });
        if !admitted {
            let next = held.next_change(now);
            drop(key);
            return arm(ctx, id, next);
        }
    }
    if let Some(left) = crate::rules::guard::remaining(now) {
        drop(key);
        return arm(ctx, id, left); // no new grants while the guard is up
    }
    if ctx.in_cluster() {
        // Asked with the key closed (the check runs a command on it).
        drop(key);
        if let Err(refusal) = ctx.may_write_key(name) {
            // The slot moved (MIGRATE, SETSLOT): the key is another node's
            // now, maybe with its lock in it; or the cluster is down, and a
            // replica may be promoted in our place. The waiters retry
            // (TRYAGAIN, as for a multi-key command during resharding).
            return fail_all(&id, refusal.message());
        }
        key = Key::open(ctx, name, true);
    }
    time_out_due(now);
    // Hand the key to the head of the queue, again and again while the
    // head may have it: consecutive shared waiters come in together (up to
    // the limit); an exclusive one only on a free key, and it stops here.
    loop {
        let decided = {
            let q = queues();
            let Some(head) = q.front(&id) else { break };
            let current = match key.slot() {
                Slot::Lock(held) => Current::Exclusive(held),
                Slot::Shared(held) => Current::Shared(held),
                Slot::Empty | Slot::WrongType => Current::Free,
            };
            admit(current, head.shared, head.limit, now)
        };
        if decided == Admit::Wait {
            break;
        }
        let Some(next) = queues().pop_front(&id) else {
            break;
        };
        if decided == Admit::LimitDiffers {
            unblock(
                next.handle,
                Outcome::Error(crate::rules::shared::LIMIT_DIFFERS),
                &id,
                next.owner,
            );
            continue;
        }
        if !permitted(ctx, name, &next) {
            unblock(next.handle, Outcome::Error(NO_PERMISSION), &id, next.owner);
            continue;
        }
        if next.shared {
            // A second WAIT of an owner that holds already: a retry.
            if let Slot::Shared(held) = key.slot() {
                let limit = held.limit;
                if let Some(hold) = held.retry(&next.owner, next.ttl, now) {
                    let token = hold.token;
                    ctx.replicate_shared_hold(name, limit, hold, next.ttl);
                    unblock(next.handle, Outcome::Token(token), &id, next.owner);
                    continue;
                }
            }
        }
        let floor = crate::rules::fencing::floor(crate::glue::ffi::wall_micros(), next.min_token);
        let Some(token) = TOKENS.next(floor) else {
            drop(key);
            unblock(
                next.handle,
                Outcome::Error(crate::rules::fencing::EXHAUSTED),
                &id,
                next.owner,
            );
            return fail_all(&id, crate::rules::fencing::EXHAUSTED);
        };
        let hold = Lock::new(&next.owner, token, next.ttl, now);
        if next.shared {
            let limit = match key.slot() {
                Slot::Shared(held) => {
                    held.join(hold.clone(), now);
                    held.limit
                }
                _ => key.set_shared(Shared::new(hold.clone(), next.limit)).limit,
            };
            ctx.replicate_shared_hold(name, limit, &hold, next.ttl);
        } else {
            let granted = key.set(hold);
            ctx.replicate_apply(name, granted, next.ttl);
        }
        ctx.notify(c"lock.acquire", name);
        stats::acquired();
        stats::handed_off();
        unblock(next.handle, Outcome::Token(token), &id, next.owner);
        if !next.shared {
            break;
        }
    }
    let next_check = match key.slot() {
        Slot::Lock(held) => held.remaining(now),
        Slot::Shared(held) => held.next_change(now),
        Slot::Empty | Slot::WrongType => 0,
    };
    drop(key);
    if queues().waiting(&id) > 0 {
        arm(ctx, id, next_check);
    }
}

/// May the ACL user of `waiter` still take the lock at `name` (as a
/// `LOCK.ACQUIRE` of it now)? A waiter whose access was revoked while it
/// waited (`ACL SETUSER ... resetkeys`, `-lock.acquire`) is refused with
/// NOPERM. Granted anyway, such a waiter could neither release nor extend
/// the lock, and it sat out its whole TTL (Valkey 8.1, 2026-11-28); a
/// `BLPOP` waiter there gets a permission error too.
fn permitted(ctx: Ctx, name: RawString, waiter: &Waiter<usize>) -> bool {
    let client = client_ids().get(&waiter.handle).copied().unwrap_or(0);
    let ttl = waiter.ttl.to_string();
    let argv: [&[u8]; 4] = [b"lock.acquire", bytes(name), &waiter.owner, ttl.as_bytes()];
    client == 0 || ctx.client_may_run(client, &argv)
}

/// Forget the client id of a handle being unblocked.
fn forget_client(handle: usize) {
    let mut ids = client_ids();
    ids.remove(&handle);
    crate::rules::waiters::release_if_unused(&mut ids);
}

fn unblock(handle: usize, outcome: Outcome, id: &KeyId, owner: Box<[u8]>) {
    forget_client(handle);
    if let Outcome::Token(token) = outcome {
        in_flight().push((token, id.clone()));
    }
    let grant = Box::new(Grant {
        outcome,
        db: id.0,
        key: id.1.clone(),
        owner,
        delivered: false,
    });
    // SAFETY: handle is a blocked client we created and have not unblocked;
    // Redis passes the box back to on_reply/free_grant.
    unsafe {
        api!(RedisModule_UnblockClient)(
            handle as *mut raw::RedisModuleBlockedClient,
            Box::into_raw(grant).cast(),
        )
    };
}

/// Nobody can get this key's lock (it holds another type, or tokens ran out).
fn fail_all(id: &KeyId, error: &'static str) {
    while let Some(w) = queues().pop_front(id) {
        unblock(w.handle, Outcome::Error(error), id, w.owner);
    }
}

/// The grant reached the client: reply with its token.
extern "C" fn on_reply(ctx: RawCtx, _argv: *mut RawString, _argc: c_int) -> c_int {
    crate::glue::ffi::guard(ctx, || {
        // SAFETY: privdata is the Grant passed to UnblockClient.
        let grant = unsafe {
            api!(RedisModule_GetBlockedClientPrivateData)(ctx)
                .cast::<Grant>()
                .as_mut()
        };
        match grant {
            Some(grant) => {
                grant.delivered = true;
                if let Outcome::Token(token) = grant.outcome {
                    settled_in_flight(token, grant.db, &grant.key);
                }
                match grant.outcome {
                    Outcome::Token(token) => Ctx(ctx).reply_int(token as i64),
                    Outcome::Error(msg) => Ctx(ctx).error(msg),
                    Outcome::TimedOut => Ctx(ctx).reply_null(),
                }
            }
            None => Ctx(ctx).reply_null(),
        }
        raw::REDISMODULE_OK as c_int
    })
}

/// CLIENT UNBLOCK id [TIMEOUT] (our own deadlines unblock through
/// `on_reply`): leave the queue and reply nil. Redis skips this callback
/// for a client we already unblocked, so the handle is still queued here.
extern "C" fn on_timeout(ctx: RawCtx, _argv: *mut RawString, _argc: c_int) -> c_int {
    crate::glue::ffi::guard(ctx, || {
        // SAFETY: called for a blocked client of ours.
        let bc = unsafe { api!(RedisModule_GetBlockedClientHandle)(ctx) };
        if queues().remove(bc as usize).is_some() {
            stats::wait_timed_out();
            release_handle(bc);
        }
        Ctx(ctx).reply_null();
        raw::REDISMODULE_OK as c_int
    })
}

/// A waiting client went away (disconnect, CLIENT KILL, CLIENT UNBLOCK
/// ERROR): it leaves the queue, and its handle is given back to Redis. A
/// client no longer queued was unblocked by us already; if that was a
/// grant, `free_grant` sees it undelivered and takes the lock back.
/// Known gap (Redis 7.0 core): `CLIENT UNBLOCK id TIMEOUT` in the very
/// event-loop pass that hands the lock to `id` skips `on_timeout` for the
/// already-unblocked handle and lands here; the grant is taken back, but
/// that client gets no reply, and nothing here can tell it from ERROR.
unsafe extern "C" fn on_disconnect(_ctx: RawCtx, bc: *mut raw::RedisModuleBlockedClient) {
    let _ = std::panic::catch_unwind(|| {
        if queues().remove(bc as usize).is_some() {
            release_handle(bc);
        }
    });
}

/// Unblock a client that gets no reply from us (it timed out through Redis
/// or is gone): without this Redis never frees the handle.
fn release_handle(bc: *mut raw::RedisModuleBlockedClient) {
    forget_client(bc as usize);
    // SAFETY: bc is ours and was just taken out of the queue, so this is its
    // one and only UnblockClient; with no privdata nothing is replied.
    unsafe { api!(RedisModule_UnblockClient)(bc, std::ptr::null_mut()) };
}

/// Frees the Grant. A grant that was never delivered (the client went away
/// between hand-off and reply) is taken back on the next event-loop turn.
unsafe extern "C" fn free_grant(ctx: RawCtx, privdata: *mut c_void) {
    if privdata.is_null() {
        return;
    }
    // SAFETY: non-null privdata is always a Box<Grant> from `unblock`, and
    // Redis calls this exactly once per unblocked handle.
    let grant = Box::from_raw(privdata.cast::<Grant>());
    if let (false, Outcome::Token(token)) = (grant.delivered, &grant.outcome) {
        if in_flight_at(&in_flight(), *token, grant.db, &grant.key).is_none() {
            return; // claimed by its owner already
        }
        let entry = (grant.db, grant.key.clone(), grant.owner.clone(), *token);
        let _ = std::panic::catch_unwind(|| {
            Context::new(ctx).create_timer(Duration::ZERO, take_back, entry);
        });
    }
}

/// Release a lock granted to a client that never saw the grant, then hand
/// it on.
fn take_back(context: &Context, entry: (i32, Box<[u8]>, Box<[u8]>, u64)) {
    let ctx = Ctx(context.ctx);
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if crate::glue::ffi::writes_paused() {
            let retry = Duration::from_millis(PAUSE_RETRY_MS);
            context.create_timer(retry, take_back, entry);
            return;
        }
        let (db, key, owner, token) = entry;
        if !settled_in_flight(token, db, &key) {
            return; // its owner claimed it meanwhile
        }
        if ctx.is_replica() {
            return; // demoted since the hand-off: the new primary decides
        }
        let home = ctx.selected_db();
        if ctx.select_db(db) {
            let name = ctx.create_string(&key);
            let mut handle = Key::open(ctx, name.1, true);
            match handle.slot() {
                Slot::Lock(l) if l.token == token && *l.owner == *owner => {
                    handle.delete();
                    drop(handle);
                    stats::released();
                    ctx.replicate_del(name.1);
                    ctx.notify(c"lock.release", name.1);
                    settle(ctx, name.1);
                }
                Slot::Shared(held) if held.get(&owner).is_some_and(|h| h.token == token) => {
                    let limit = held.limit;
                    held.remove(&owner);
                    if held.holders().is_empty() {
                        handle.delete();
                    }
                    drop(handle);
                    stats::released();
                    ctx.replicate_shared_drop(name.1, limit, &owner);
                    ctx.notify(c"lock.release", name.1);
                    settle(ctx, name.1);
                }
                _ => {}
            }
        }
        ctx.select_db(home);
    }));
}

/// A context for timers armed outside any command or event (the data
/// type's unlink callback), and for the cluster check of a lock a RESTORE
/// loads (`served_elsewhere`); created once at load, never freed.
static TIMER_CTX: std::sync::atomic::AtomicPtr<raw::RedisModuleCtx> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// Called once from OnLoad.
pub fn init_timer_context(ctx: RawCtx) {
    // SAFETY: valid ctx during OnLoad; a detached context lives as long as
    // the module and only serves as the owner of timers.
    let detached = unsafe { api!(RedisModule_GetDetachedThreadSafeContext)(ctx) };
    TIMER_CTX.store(detached, std::sync::atomic::Ordering::Relaxed);
}

/// Whether a cluster node serves the slot of key `name` elsewhere (another
/// node, or one it is importing and does not own yet), as the server's
/// redirection rules say for a client without ASKING. Asked through the
/// detached context: the data type's load callbacks have no client to call
/// a command with. Outside cluster mode, or when the cluster is down: false.
pub fn served_elsewhere(name: RawString) -> bool {
    let ctx = TIMER_CTX.load(std::sync::atomic::Ordering::Relaxed);
    !ctx.is_null()
        && Ctx(ctx).may_write_key(name) == Err(crate::glue::ffi::ClusterRefusal::Elsewhere)
}

/// A lock value left the keyspace (DEL, UNLINK, overwritten, RENAME or MOVE
/// away, native expiry, RESTORE REPLACE...): if anyone waits for its key,
/// settle it on the next event-loop turn (an unlink callback must not
/// write). Called from the data type's `unlink2` callback, on the main
/// thread. Replaces a keyspace-event subscription, which cost a callback
/// for every write to any key and, on Valkey 8.1, changed the database a
/// client had selected after MOVE / COPY ... DB.
pub fn on_lock_unlinked(db: i32, name: &[u8]) {
    let ctx = TIMER_CTX.load(std::sync::atomic::Ordering::Relaxed);
    let id: KeyId = {
        let q = queues();
        // The hot path (every release unlinks its lock): nobody waits
        // anywhere, so no key copy and no second look at the queues.
        if ctx.is_null() || q.is_empty() {
            return;
        }
        let id = (db, name.into());
        if q.waiting(&id) == 0 {
            return;
        }
        id
    };
    arm(Ctx(ctx), id, 0);
}

/// FLUSHDB / FLUSHALL: settle every key with waiters in the flushed db(s).
pub unsafe extern "C" fn on_flush(
    ctx: RawCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_FLUSHDB_END {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: Redis passes a RedisModuleFlushInfo for this event.
        let dbnum = (*data.cast::<raw::RedisModuleFlushInfo>()).dbnum;
        let keys = queues().keys((dbnum >= 0).then_some(dbnum));
        for id in keys {
            arm(Ctx(ctx), id, 0);
        }
    });
}

/// SWAPDB a b: both databases changed wholesale, like a flush of each.
/// Waiters stay on the db index they asked on; every key with waiters in
/// either db is settled on the next event-loop turn.
pub unsafe extern "C" fn on_swapdb(
    ctx: RawCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    data: *mut c_void,
) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: Redis passes a RedisModuleSwapDbInfo for this event.
        let info = &*data.cast::<raw::RedisModuleSwapDbInfo>();
        for db in [info.dbnum_first, info.dbnum_second] {
            let keys = queues().keys(Some(db));
            for id in keys {
                arm(Ctx(ctx), id, 0);
            }
        }
    });
}
