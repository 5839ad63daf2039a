//! redis-lock: native distributed-lock commands for Redis.
//!
//! This file only registers things with Redis: the data type, configs,
//! commands, events and the INFO section. The rules live in `lock.rs`.

pub mod args;
mod blocking;
pub mod clock;
mod commands;
pub mod config;
mod datatype;
pub mod fencing;
mod ffi;
mod guard;
pub mod lock;
mod pause;
mod reaper;
mod stats;
pub mod waiters;

#[cfg(test)]
mod model_tests;

use crate::ffi::{api, RawCtx};
use datatype::LOCK_TYPE;
use redis_module::configuration::ConfigurationFlags;
use redis_module::{raw, redis_module, Context, RedisString, Status};
use std::ffi::{c_int, CStr};

// The Redis allocator makes lock memory visible to INFO/MEMORY; unit tests
// run without a server, so they use the system allocator.
#[cfg(not(test))]
type Allocator = redis_module::alloc::RedisAlloc;
#[cfg(not(test))]
const ALLOCATOR: Allocator = redis_module::alloc::RedisAlloc;
#[cfg(test)]
type Allocator = std::alloc::System;
#[cfg(test)]
const ALLOCATOR: Allocator = std::alloc::System;

type Handler = extern "C" fn(RawCtx, *mut ffi::RawString, c_int) -> c_int;

struct CommandSpec {
    name: &'static CStr,
    handler: Handler,
    flags: &'static CStr,
    /// Redis arity: N exactly, -N at least N (command name included).
    arity: c_int,
    /// What the command does to its key (argv[1]), for key specs and ACLs.
    key_flags: u32,
    summary: &'static CStr,
}

const RW: u32 = raw::REDISMODULE_CMD_KEY_RW;
const COMMANDS: [CommandSpec; 6] = [
    CommandSpec {
        name: c"lock.acquire",
        handler: commands::acquire_command,
        flags: c"write deny-oom fast",
        arity: -4,
        key_flags: RW | raw::REDISMODULE_CMD_KEY_INSERT,
        summary: c"Take a lock for an owner with a TTL; replies a fencing token, or nil when held by another owner",
    },
    CommandSpec {
        name: c"lock.release",
        handler: commands::release_command,
        flags: c"write fast",
        arity: 3,
        key_flags: RW | raw::REDISMODULE_CMD_KEY_DELETE,
        summary: c"Release a lock held by owner: 1 released, 0 held by another owner, -1 not held",
    },
    CommandSpec {
        name: c"lock.extend",
        handler: commands::extend_command,
        flags: c"write deny-oom fast",
        arity: 4,
        key_flags: RW | raw::REDISMODULE_CMD_KEY_UPDATE,
        summary: c"Set a held lock's TTL: 1 extended, 0 held by another owner, -1 not held",
    },
    CommandSpec {
        name: c"lock.status",
        handler: commands::status_command,
        flags: c"readonly fast",
        arity: 2,
        key_flags: raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
        summary: c"Owner, token, ttl, holds and waiters of a lock; nil when not held",
    },
    CommandSpec {
        name: c"lock.fence",
        handler: commands::fence_command,
        flags: c"write deny-oom fast",
        arity: 4,
        key_flags: RW | raw::REDISMODULE_CMD_KEY_UPDATE,
        summary: c"Raise a held lock's fencing token (and the server's counter) to at least token",
    },
    CommandSpec {
        name: c"lock.apply",
        handler: commands::apply_command,
        flags: c"write",
        arity: 6,
        key_flags: raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE,
        summary: c"Internal: the replicated state of a lock (accepted from a primary or the AOF only)",
    },
];

/// `CONFIG GET name` as a string ("" if unavailable).
fn server_config(ctx: &Context, name: &str) -> String {
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

/// Replica promoted to primary: it may have missed the latest grants.
unsafe extern "C" fn on_role_change(
    _ctx: RawCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut std::ffi::c_void,
) {
    if subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_MASTER {
        guard::arm(config::restart_delay_ms());
    }
}

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    // Tokens start above the wall clock in microseconds; RDB/AOF loading
    // then raises the counter to whatever was persisted (see fencing.rs).
    commands::TOKENS.observe(clock::unix_micros());
    if !guard::persistence_is_complete(
        &server_config(ctx, "appendonly"),
        &server_config(ctx, "appendfsync"),
    ) {
        guard::arm(config::restart_delay_ms());
    }
    if !pause::probe_found() {
        ctx.log_warning("redis-lock: this redis-server does not export areClientsPaused; hand-offs cannot wait out CLIENT PAUSE WRITE / FAILOVER");
    }
    let ctx = ctx.ctx;
    // SAFETY: called once from RedisModule_OnLoad with a valid ctx; all
    // names and flag strings are NUL-terminated statics.
    unsafe {
        for c in COMMANDS {
            let created = api!(RedisModule_CreateCommand)(
                ctx,
                c.name.as_ptr(),
                Some(c.handler),
                c.flags.as_ptr(),
                1,
                1,
                1,
            );
            if created != raw::REDISMODULE_OK as c_int
                || !ffi::describe_command(ctx, c.name, c.arity, c.key_flags, c.summary)
            {
                return Status::Err;
            }
        }
        api!(RedisModule_RegisterInfoFunc)(ctx, Some(stats::info));
        let cron = raw::RedisModuleEvent {
            id: raw::REDISMODULE_EVENT_CRON_LOOP,
            dataver: 1,
        };
        api!(RedisModule_SubscribeToServerEvent)(ctx, cron, Some(reaper::on_cron));
        let flush = raw::RedisModuleEvent {
            id: raw::REDISMODULE_EVENT_FLUSHDB,
            dataver: 1,
        };
        api!(RedisModule_SubscribeToServerEvent)(ctx, flush, Some(blocking::on_flush));
        let swapdb = raw::RedisModuleEvent {
            id: raw::REDISMODULE_EVENT_SWAPDB,
            dataver: 1,
        };
        api!(RedisModule_SubscribeToServerEvent)(ctx, swapdb, Some(blocking::on_swapdb));
        let role = raw::RedisModuleEvent {
            id: raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
            dataver: 1,
        };
        api!(RedisModule_SubscribeToServerEvent)(ctx, role, Some(on_role_change));
        // Any change to a key with waiters may free its lock (DEL, SET...).
        api!(RedisModule_SubscribeToKeyspaceEvents)(
            ctx,
            raw::REDISMODULE_NOTIFY_ALL,
            Some(blocking::on_keyspace_event),
        );
    }
    Status::Ok
}

redis_module! {
    name: "lock",
    version: 1,
    allocator: (Allocator, ALLOCATOR),
    data_types: [LOCK_TYPE],
    init: init,
    configurations: [
        i64: [
            ["max-ttl-ms", &config::MAX_TTL_MS, config::DEFAULT_MAX_TTL_MS, 1, 1 << 40, ConfigurationFlags::DEFAULT, None],
            ["max-owner-len", &config::MAX_OWNER_LEN, config::DEFAULT_MAX_OWNER_LEN, 1, 1 << 20, ConfigurationFlags::DEFAULT, None],
            ["restart-delay-ms", &config::RESTART_DELAY_MS, 0, 0, 1 << 40, ConfigurationFlags::DEFAULT, None],
        ],
        string: [],
        bool: [],
        enum: [],
        module_args_as_configuration: true,
    ]
}
