//! The `redislock` data type: how a lock value is saved, loaded, rewritten
//! into the AOF, copied, measured and freed.
//!
//! RDB layout, encoding version 2: an exclusive lock is owner, token,
//! remaining ttl-ms, holds, byte for byte as in version 1 (which still
//! loads). Shared holds start with an empty owner, which no lock can have,
//! then the limit (0: none), the holder count, and each holder as an
//! exclusive lock is stored.
//! The remaining TTL (not a wall-clock deadline) is stored so a loaded lock
//! gets at least the time it had left and a clock jump changes nothing. The
//! token counter travels as aux data before the keyspace.

use crate::rules::args::Limits;
use crate::rules::clock;
use crate::rules::fencing::{self, TOKENS};
use crate::rules::lock::{self, Lock};
use crate::rules::shared::{self, Shared};
use crate::rules::stats;
use crate::rules::value::Value;
use redis_module::native_types::RedisType;
use redis_module::raw;
use std::ffi::{c_char, c_int, c_longlong, c_void};
use std::mem::size_of;

const ENCODING_VERSION: i32 = 2;
/// Exclusive locks only (RDBs written before shared holds).
const ENCODING_VERSION_EXCLUSIVE: i32 = 1;

pub static LOCK_TYPE: RedisType = RedisType::new(
    "redislock",
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: Some(aux_load),
        aux_save: Some(aux_save),
        aux_save2: None,
        aux_save_triggers: raw::REDISMODULE_AUX_BEFORE_RDB as i32,
        free_effort: None,
        unlink: None,
        copy: Some(copy),
        defrag: None,
        copy2: None,
        free_effort2: None,
        mem_usage2: None,
        unlink2: Some(unlink2),
    },
);

pub fn raw_type() -> *mut raw::RedisModuleType {
    *LOCK_TYPE.raw_type.borrow()
}

/// The lock behind a value pointer Redis hands to a type callback.
///
/// SAFETY: Redis only passes values it got from us, i.e. `Box<Value>`s.
unsafe fn value<'a>(ptr: *mut c_void) -> &'a mut Value {
    &mut *ptr.cast::<Value>()
}

fn boxed(value: Value) -> *mut c_void {
    stats::lock_created();
    Box::into_raw(Box::new(value)).cast()
}

/// Every holder of a value (one for an exclusive lock).
fn holders(value: &Value) -> &[Lock] {
    match value {
        Value::Exclusive(lock) => std::slice::from_ref(lock),
        Value::Shared(shared) => shared.holders(),
    }
}

unsafe fn save_hold(io: *mut raw::RedisModuleIO, lock: &Lock, now: lock::Millis) {
    raw::save_slice(io, &lock.owner);
    raw::save_unsigned(io, lock.token);
    raw::save_unsigned(io, lock.remaining(now));
    raw::save_unsigned(io, u64::from(lock.holds));
}

unsafe extern "C" fn rdb_save(io: *mut raw::RedisModuleIO, ptr: *mut c_void) {
    let now = clock::now_ms();
    match value(ptr) {
        Value::Exclusive(lock) => save_hold(io, lock, now),
        Value::Shared(shared) => {
            raw::save_slice(io, b"");
            raw::save_unsigned(io, u64::from(shared.limit.unwrap_or(0)));
            raw::save_unsigned(io, shared.holders().len() as u64);
            for hold in shared.holders() {
                save_hold(io, hold, now);
            }
        }
    }
}

/// Loads one lock. With `REDISMODULE_OPTIONS_HANDLE_IO_ERRORS` (set in
/// lib.rs) a short or corrupt payload makes every read report an error
/// instead of killing the server; returning NULL refuses the load (RESTORE
/// replies with an error, a corrupt RDB stops loading as Redis decides).
unsafe extern "C" fn rdb_load(io: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    if encver != ENCODING_VERSION && encver != ENCODING_VERSION_EXCLUSIVE {
        return std::ptr::null_mut();
    }
    let read = || -> Result<Value, &'static str> {
        let short = |_| "short read";
        let now = clock::now_ms();
        let source = Source::of(io);
        let limits = match source {
            Source::Primary => crate::rules::config::limits(),
            Source::Loading | Source::Replica => Limits::CEILING,
        };
        let read_hold = |owner: &[u8]| -> Result<Lock, &'static str> {
            let token = raw::load_unsigned(io).map_err(short)?;
            let remaining = raw::load_unsigned(io).map_err(short)?;
            let holds = raw::load_unsigned(io).map_err(short)?;
            let lock = lock::from_stored(owner, token, remaining, holds, &limits, now)?;
            match source {
                Source::Primary => restore_is_a_grant(io, &lock, now)?,
                Source::Replica
                    if lock.token > fencing::replay_ceiling(crate::glue::ffi::wall_micros()) =>
                {
                    return Err("token more than an hour above the server's clock");
                }
                Source::Replica | Source::Loading => {}
            }
            Ok(lock)
        };
        let owner = raw::load_string_buffer(io).map_err(short)?;
        if !owner.as_ref().is_empty() || encver == ENCODING_VERSION_EXCLUSIVE {
            return Ok(Value::Exclusive(read_hold(owner.as_ref())?));
        }
        let limit = raw::load_unsigned(io).map_err(short)?;
        let count = raw::load_unsigned(io).map_err(short)?;
        // The count is checked against the limit before anything is read,
        // and nothing is reserved for it: a forged count ends in a short
        // read, not a huge allocation.
        if count == 0 || (limit != 0 && count > limit) {
            return Err("more holders than the limit");
        }
        let mut holders = Vec::new();
        for _ in 0..count {
            let owner = raw::load_string_buffer(io).map_err(short)?;
            holders.push(read_hold(owner.as_ref())?);
        }
        Ok(Value::Shared(Box::new(shared::from_stored(
            holders, limit,
        )?)))
    };
    match std::panic::catch_unwind(read) {
        Ok(Ok(value)) => {
            for hold in holders(&value) {
                TOKENS.observe(hold.token);
            }
            boxed(value)
        }
        Ok(Err(why)) => {
            log_refusal(io, why);
            std::ptr::null_mut()
        }
        Err(_) => std::ptr::null_mut(),
    }
}

/// Where a stored lock comes from, which decides what it is checked against.
enum Source {
    /// An RDB being loaded (a restart, `DEBUG RELOAD`, a replica's full
    /// sync): what was already decided, within the widest limits only.
    Loading,
    /// A `RESTORE` on a replica: replicated from the primary, or a client's
    /// on a writable replica (the two look alike here: the load has no
    /// client). Widest limits, and a token at most an hour above this
    /// server's clock (as for a replayed `LOCK.APPLY`), so that no payload
    /// can push the counter out of reach.
    Replica,
    /// A client's `RESTORE` on a primary: obeys this server's limits, like
    /// a grant (`restore_is_a_grant`).
    Primary,
}

impl Source {
    fn of(io: *mut raw::RedisModuleIO) -> Source {
        // SAFETY: io is the live IO handle of this rdb_load call.
        let flags = unsafe {
            let ctx = crate::glue::ffi::api!(RedisModule_GetContextFromIO)(io);
            crate::glue::ffi::api!(RedisModule_GetContextFlags)(ctx) as u32
        };
        if flags & raw::REDISMODULE_CTX_FLAGS_LOADING != 0 {
            Source::Loading
        } else if flags & raw::REDISMODULE_CTX_FLAGS_SLAVE != 0 {
            Source::Replica
        } else {
            Source::Primary
        }
    }
}

/// A client's RESTORE creates a lock, so it follows what a grant follows:
/// a token within the fencing rule (at most 120 s above the clock), so that
/// no payload can push the counter out of reach of a restart (fencing.rs),
/// and, for a live lock, not while the restart guard refuses new locks,
/// unless a slot migration carries it in (`arrives_by_migration`). An
/// expired one (TTL 0) grants nothing and is taken as it is: MIGRATE moves
/// a lock that expired but was not reaped yet, and refusing it aborted a
/// cluster reshard with its slot half moved (an attack run, 55a45f8).
fn restore_is_a_grant(
    io: *mut raw::RedisModuleIO,
    lock: &Lock,
    now: lock::Millis,
) -> Result<(), &'static str> {
    if lock.token > fencing::fence_ceiling(crate::glue::ffi::wall_micros()) {
        return Err("token more than 120 s above the server's clock");
    }
    if !lock.is_expired(now)
        && crate::rules::guard::remaining(now).is_some()
        && !arrives_by_migration(io)
    {
        return Err("the restart guard refuses new locks");
    }
    Ok(())
}

/// Whether a RESTORE brings its lock in by a cluster slot migration: this
/// node does not serve the key's slot yet, so the RESTORE got here only
/// with ASKING into a slot it imports, which is what `MIGRATE` sends. The
/// lock then moves from the slot's owner, which deletes it as it arrives:
/// the same holder keeps the same grant, nobody gets a new one, and the
/// source alone could have granted that key until now. The guard is about
/// grants this node made and forgot (a restart) or never saw (a
/// promotion); a key of a slot it is only now taking over holds neither,
/// so refusing it only broke `redis-cli --cluster reshard` into a node
/// just added (2026-11-28: `ERR Bad data format`, the slot left open). A
/// RESTORE into a slot this node serves is still a grant and still
/// refused; so is one while the cluster is down (nothing to go by).
fn arrives_by_migration(io: *mut raw::RedisModuleIO) -> bool {
    // SAFETY: io is the live IO handle of this rdb_load call; the name (if
    // any) is the key being restored and lives as long as the call.
    let name = unsafe { crate::glue::ffi::api!(RedisModule_GetKeyNameFromIO)(io) };
    !name.is_null() && crate::glue::blocking::served_elsewhere(name.cast_mut())
}

fn log_refusal(io: *mut raw::RedisModuleIO, why: &str) {
    let msg =
        std::ffi::CString::new(format!("lock: refused a stored lock: {why}")).unwrap_or_default();
    // SAFETY: io is live; the format string is "%s" with one C string.
    unsafe {
        crate::glue::ffi::api!(RedisModule_LogIOError)(
            io,
            c"warning".as_ptr(),
            c"%s".as_ptr(),
            msg.as_ptr(),
        )
    };
}

/// DEBUG DIGEST / DEBUG DIGEST-VALUE: what a replica must agree on. The
/// deadline is left out: it is monotonic time, local to each server.
unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, ptr: *mut c_void) {
    let value = value(ptr);
    if let Value::Shared(shared) = value {
        crate::glue::ffi::api!(RedisModule_DigestAddLongLong)(
            md,
            c_longlong::from(shared.limit.unwrap_or(0)),
        );
    }
    for lock in holders(value) {
        crate::glue::ffi::api!(RedisModule_DigestAddStringBuffer)(
            md,
            lock.owner.as_ptr().cast::<c_char>().cast_mut(),
            lock.owner.len(),
        );
        crate::glue::ffi::api!(RedisModule_DigestAddLongLong)(md, lock.token as c_longlong);
        crate::glue::ffi::api!(RedisModule_DigestAddLongLong)(md, c_longlong::from(lock.holds));
    }
    crate::glue::ffi::api!(RedisModule_DigestEndSequence)(md);
}

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    ptr: *mut c_void,
) {
    let now = clock::now_ms();
    match value(ptr) {
        Value::Exclusive(lock) => {
            // "sblll" matches: key, owner buffer + length, token, remaining, holds.
            crate::glue::ffi::api!(RedisModule_EmitAOF)(
                aof,
                c"LOCK.APPLY".as_ptr(),
                c"sblll".as_ptr(),
                key,
                lock.owner.as_ptr().cast::<c_char>(),
                lock.owner.len(),
                lock.token as c_longlong,
                lock.remaining(now) as c_longlong,
                c_longlong::from(lock.holds),
            );
        }
        Value::Shared(shared) => {
            // One line per holder, each adding its hold (commands.rs).
            for lock in shared.holders() {
                // "slblll": key, limit, owner buffer + length, token, remaining, holds.
                crate::glue::ffi::api!(RedisModule_EmitAOF)(
                    aof,
                    c"LOCK.APPLYSHARED".as_ptr(),
                    c"slblll".as_ptr(),
                    key,
                    c_longlong::from(shared.limit.unwrap_or(0)),
                    lock.owner.as_ptr().cast::<c_char>(),
                    lock.owner.len(),
                    lock.token as c_longlong,
                    lock.remaining(now) as c_longlong,
                    c_longlong::from(lock.holds),
                );
            }
        }
    }
}

unsafe extern "C" fn mem_usage(ptr: *const c_void) -> usize {
    match &*ptr.cast::<Value>() {
        Value::Exclusive(lock) => size_of::<Value>() + lock.owner.heap_bytes(),
        Value::Shared(shared) => size_of::<Value>() + size_of::<Shared>() + shared.heap_bytes(),
    }
}

unsafe extern "C" fn free(ptr: *mut c_void) {
    drop(Box::from_raw(ptr.cast::<Value>()));
    stats::lock_freed();
}

/// A lock left the keyspace: wake whoever waits for its key (blocking.rs).
unsafe extern "C" fn unlink2(ctx: *mut raw::RedisModuleKeyOptCtx, _value: *const c_void) {
    // SAFETY: Redis passes a live option context for this key.
    let (name, db) = (
        crate::glue::ffi::api!(RedisModule_GetKeyNameFromOptCtx)(ctx),
        crate::glue::ffi::api!(RedisModule_GetDbIdFromOptCtx)(ctx),
    );
    let _ = std::panic::catch_unwind(|| {
        crate::glue::blocking::on_lock_unlinked(db, crate::glue::ffi::bytes(name))
    });
}

/// COPY: an independent lock with the same holders, tokens and deadlines.
unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    ptr: *const c_void,
) -> *mut c_void {
    boxed((*ptr.cast::<Value>()).clone())
}

unsafe extern "C" fn aux_save(io: *mut raw::RedisModuleIO, _when: c_int) {
    raw::save_unsigned(io, TOKENS.last());
}

unsafe extern "C" fn aux_load(io: *mut raw::RedisModuleIO, encver: c_int, _when: c_int) -> c_int {
    if encver != ENCODING_VERSION && encver != ENCODING_VERSION_EXCLUSIVE {
        return raw::REDISMODULE_ERR as c_int;
    }
    match raw::load_unsigned(io) {
        Ok(last) if last <= crate::rules::fencing::MAX_TOKEN => {
            TOKENS.observe(last);
            raw::REDISMODULE_OK as c_int
        }
        _ => raw::REDISMODULE_ERR as c_int,
    }
}
