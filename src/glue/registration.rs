//! What the module needs from the server, checked before anything is
//! registered, and the `lock.*` configs registered from `config::SETTINGS`.
//!
//! The configs are registered by hand rather than by `redis_module!`: the
//! macro registers them before any of our code runs and unwraps the API on
//! servers that lack it (Redis 6.2 aborts at load). Here a missing API is a
//! clear load error instead.

use crate::glue::ffi::api;
use crate::rules::config::{self, Setting};
use redis_module::{raw, Context, RedisString, Status};
use std::ffi::{c_char, c_int, c_longlong, c_void, CString};
use std::sync::atomic::Ordering::Relaxed;

/// Module API functions the module cannot work without, with the server
/// version that introduced the newest of them.
pub const NEEDS: &str = "Redis >= 7.0 or Valkey >= 7.2";

/// The first required API function this server lacks, if any.
pub fn missing_api() -> Option<&'static str> {
    // SAFETY (each read): the API table is written once by RedisModule_Init,
    // before any module code runs, and only read afterwards; the Option is
    // copied out by value.
    let present: [(&'static str, bool); 12] = [
        (
            "RegisterNumericConfig",
            unsafe { raw::RedisModule_RegisterNumericConfig }.is_some(),
        ),
        (
            "LoadConfigs",
            unsafe { raw::RedisModule_LoadConfigs }.is_some(),
        ),
        (
            "SetCommandInfo",
            unsafe { raw::RedisModule_SetCommandInfo }.is_some(),
        ),
        (
            "GetCommand",
            unsafe { raw::RedisModule_GetCommand }.is_some(),
        ),
        (
            "SetModuleOptions",
            unsafe { raw::RedisModule_SetModuleOptions }.is_some(),
        ),
        ("IsIOError", unsafe { raw::RedisModule_IsIOError }.is_some()),
        (
            "GetContextFromIO",
            unsafe { raw::RedisModule_GetContextFromIO }.is_some(),
        ),
        (
            "AvoidReplicaTraffic",
            unsafe { raw::RedisModule_AvoidReplicaTraffic }.is_some(),
        ),
        ("Scan", unsafe { raw::RedisModule_Scan }.is_some()),
        (
            "SubscribeToServerEvent",
            unsafe { raw::RedisModule_SubscribeToServerEvent }.is_some(),
        ),
        (
            "SetDisconnectCallback",
            unsafe { raw::RedisModule_SetDisconnectCallback }.is_some(),
        ),
        (
            "Milliseconds",
            unsafe { raw::RedisModule_Milliseconds }.is_some(),
        ),
    ];
    present.iter().find(|(_, ok)| !ok).map(|(name, _)| *name)
}

unsafe extern "C" fn get_setting(_name: *const c_char, privdata: *mut c_void) -> c_longlong {
    // SAFETY: privdata is a &'static Setting from config::SETTINGS.
    (*privdata.cast::<Setting>()).value.load(Relaxed)
}

unsafe extern "C" fn set_setting(
    _name: *const c_char,
    value: c_longlong,
    privdata: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // SAFETY: as above; Redis has already checked the range it was given.
    (*privdata.cast::<Setting>()).value.store(value, Relaxed);
    raw::REDISMODULE_OK as c_int
}

/// Register every `lock.*` config with its range, then let the server apply
/// `lock.*` lines from redis.conf.
pub fn register_configs(ctx: &Context) -> Status {
    for setting in &config::SETTINGS {
        let Ok(name) = CString::new(setting.name) else {
            return Status::Err;
        };
        // SAFETY: valid ctx during OnLoad; the Setting is 'static, so the
        // privdata pointer outlives the module.
        let registered = unsafe {
            api!(RedisModule_RegisterNumericConfig)(
                ctx.ctx,
                name.as_ptr(),
                setting.default,
                raw::REDISMODULE_CONFIG_DEFAULT,
                setting.min,
                setting.max,
                Some(get_setting),
                Some(set_setting),
                None,
                (setting as *const Setting).cast_mut().cast(),
            )
        };
        if registered != raw::REDISMODULE_OK as c_int {
            ctx.log_warning(&format!("lock: could not register config {}", setting.name));
            return Status::Err;
        }
    }
    // SAFETY: valid ctx during OnLoad, after every config is registered.
    let loaded = unsafe { api!(RedisModule_LoadConfigs)(ctx.ctx) };
    if loaded == raw::REDISMODULE_OK as c_int {
        Status::Ok
    } else {
        Status::Err
    }
}

/// Apply `loadmodule` arguments with the rules of `CONFIG SET`; a bad one
/// stops the server from starting, with a message naming it.
pub fn apply_module_args(ctx: &Context, args: &[RedisString]) -> Status {
    let args: Vec<String> = args.iter().map(|a| a.to_string_lossy()).collect();
    match config::parse_module_args(&args) {
        Ok(values) => {
            for (index, value) in values {
                config::SETTINGS[index].value.store(value, Relaxed);
            }
            Status::Ok
        }
        Err(e) => {
            ctx.log_warning(&format!("lock: {e}"));
            Status::Err
        }
    }
}

/// `CONFIG GET name` as a string ("" if unavailable).
pub fn server_config(ctx: &Context, name: &str) -> String {
    match ctx.call("CONFIG", &["GET", name]) {
        Ok(redis_module::RedisValue::Array(kv)) => match kv.get(1) {
            Some(redis_module::RedisValue::SimpleString(v)) => v.clone(),
            Some(redis_module::RedisValue::BulkString(v)) => v.clone(),
            Some(redis_module::RedisValue::BulkRedisString(v)) => v.to_string(),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

/// Log a warning when `maxmemory-policy` may evict locks (once per policy
/// set, not per unrelated config change): with `maxmemory` reached, an
/// evicted lock is free for a second holder while the first still works
/// under it.
pub fn warn_if_locks_can_be_evicted(ctx: &Context) {
    static LAST: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());
    let policy = server_config(ctx, "maxmemory-policy");
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    if *last == policy {
        return;
    }
    if crate::rules::config::policy_evicts_locks(&policy) {
        ctx.log_warning(&format!(
            "lock: maxmemory-policy {policy} can evict lock keys under memory pressure, \
             and an evicted lock is granted to a second holder: use noeviction"
        ));
    }
    *last = policy;
}
