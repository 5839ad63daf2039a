//! redis-lock: native distributed-lock commands for Redis.
//!
//! This file only registers things with Redis: the data type, configs,
//! commands, events and the INFO section. The rules live in `lock.rs`.

pub mod args;
pub mod clock;
mod commands;
pub mod config;
mod datatype;
pub mod expiry;
pub mod fencing;
mod ffi;
pub mod lock;
mod reaper;
mod stats;

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

/// name, handler, flags. Every command has its key at argv[1].
const COMMANDS: [(&CStr, Handler, &CStr); 5] = [
    (c"lock.acquire", commands::acquire_command, c"write deny-oom fast"),
    (c"lock.release", commands::release_command, c"write fast"),
    (c"lock.extend", commands::extend_command, c"write deny-oom fast"),
    (c"lock.status", commands::status_command, c"readonly fast"),
    (c"lock.apply", commands::apply_command, c"write"),
];

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    // Tokens start above the wall clock in microseconds; RDB/AOF loading
    // then raises the counter to whatever was persisted (see fencing.rs).
    commands::TOKENS.observe(clock::unix_micros());
    let ctx = ctx.ctx;
    // SAFETY: called once from RedisModule_OnLoad with a valid ctx; all
    // names and flag strings are NUL-terminated statics.
    unsafe {
        for (name, handler, flags) in COMMANDS {
            let created = api!(RedisModule_CreateCommand)(ctx, name.as_ptr(), Some(handler), flags.as_ptr(), 1, 1, 1);
            if created != raw::REDISMODULE_OK as c_int {
                return Status::Err;
            }
        }
        api!(RedisModule_RegisterInfoFunc)(ctx, Some(stats::info));
        let moved_in = raw::NotifyEvent::GENERIC.bits();
        api!(RedisModule_SubscribeToKeyspaceEvents)(ctx, moved_in, Some(reaper::on_keyspace_event));
        let cron = raw::RedisModuleEvent {
            id: raw::REDISMODULE_EVENT_CRON_LOOP as u64,
            dataver: 1,
        };
        api!(RedisModule_SubscribeToServerEvent)(ctx, cron, Some(reaper::on_cron));
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
        ],
        string: [],
        bool: [],
        enum: [],
        module_args_as_configuration: true,
    ]
}
