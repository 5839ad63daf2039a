//! redis-lock: native distributed-lock commands for Redis.
//!
//! This file only registers things with Redis: the data type, configs,
//! commands, events and the INFO section. The rules live in `lock.rs`.

/// The lock rules: plain Rust, no Redis API, unit-tested without a server.
/// Nothing here reaches into `glue`.
pub mod rules {
    pub mod args;
    pub mod clock;
    pub mod config;
    pub mod fencing;
    pub mod guard;
    pub mod lock;
    pub mod owner;
    pub mod shared;
    pub mod stats;
    pub mod value;
    pub mod version;
    pub mod waiters;

    #[cfg(test)]
    mod model_tests;
}

/// The Redis glue, bottom up: `ffi` (the only raw API calls besides the
/// data type's callbacks), then the data type, commands, waiting, expiry,
/// INFO and registration. It calls into `rules` for every decision.
mod glue {
    pub mod blocking;
    pub mod commands;
    pub mod datatype;
    pub mod expiry;
    pub mod ffi;
    pub mod guard_state;
    pub mod info;
    pub mod propagation;
    pub mod reaper;
    pub mod registration;
}

use glue::datatype::LOCK_TYPE;
use glue::ffi::{self, api, RawCtx};
use glue::guard_state::{self, Armed};
use glue::{blocking, commands, datatype, info, propagation, reaper, registration};
use redis_module::{raw, redis_module, Context, RedisString, Status};
use rules::fencing;
use std::ffi::{c_int, CStr};
use std::sync::atomic::Ordering::Relaxed;

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
    /// What the command does to its key (argv[1]), for key specs and ACLs;
    /// 0 for a command without a key.
    key_flags: u32,
    summary: &'static CStr,
    /// ACL categories where the server supports them (see set_acl_categories).
    acl_categories: &'static str,
}

const RW: u32 = raw::REDISMODULE_CMD_KEY_RW;
const COMMANDS: [CommandSpec; 8] = [
    CommandSpec {
        name: c"lock.acquire",
        handler: commands::acquire_command,
        flags: c"write deny-oom fast",
        arity: -4,
        key_flags: RW | raw::REDISMODULE_CMD_KEY_INSERT,
        summary: c"Take a lock (exclusive, or SHARED with an optional LIMIT) for an owner with a TTL; replies a fencing token, or nil when not granted",
        acl_categories: "write fast",
    },
    CommandSpec {
        name: c"lock.release",
        handler: commands::release_command,
        flags: c"write fast",
        arity: 3,
        key_flags: RW | raw::REDISMODULE_CMD_KEY_DELETE,
        summary: c"Release a lock held by owner (and withdraw owner's queued WAITs on it): 1 released, 0 held by another owner, -1 not held",
        acl_categories: "write fast",
    },
    CommandSpec {
        name: c"lock.extend",
        handler: commands::extend_command,
        flags: c"write deny-oom fast",
        arity: 4,
        key_flags: RW | raw::REDISMODULE_CMD_KEY_UPDATE,
        summary: c"Set a held lock's TTL: 1 extended, 0 held by another owner, -1 not held",
        acl_categories: "write fast",
    },
    CommandSpec {
        name: c"lock.status",
        handler: commands::status_command,
        flags: c"readonly fast",
        arity: 2,
        key_flags: raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
        summary: c"Owner, token, ttl, holds and waiters of a lock (mode, limit, holders and waiters of a shared one); nil when not held",
        acl_categories: "read fast",
    },
    CommandSpec {
        name: c"lock.fence",
        handler: commands::fence_command,
        flags: c"write deny-oom fast",
        arity: 4,
        key_flags: RW | raw::REDISMODULE_CMD_KEY_UPDATE,
        summary: c"Raise a held lock's fencing token (and the server's counter) to at least token",
        acl_categories: "write fast",
    },
    CommandSpec {
        name: c"lock.apply",
        handler: commands::apply_command,
        flags: c"write",
        arity: 6,
        key_flags: raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE,
        summary: c"Internal: the replicated state of a lock (accepted from a primary or the AOF only)",
        acl_categories: "write",
    },
    CommandSpec {
        name: c"lock.applyshared",
        handler: commands::apply_shared_command,
        flags: c"write",
        arity: 7,
        key_flags: raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE,
        summary: c"Internal: the replicated state of one shared hold (accepted from a primary or the AOF only)",
        acl_categories: "write",
    },
    CommandSpec {
        name: c"lock.serverid",
        handler: commands::server_id_command,
        flags: c"readonly fast allow-loading allow-stale",
        arity: 1,
        key_flags: 0,
        summary: c"This server's run_id: tells a quorum client that two of its URLs reach one server",
        acl_categories: "read fast",
    },
];

/// Replica promoted to primary: it may have missed the latest grants.
unsafe extern "C" fn on_role_change(
    ctx: RawCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut std::ffi::c_void,
) {
    propagation::may_reach_from_now();
    if subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_MASTER {
        // The old primary may have handed out (and fenced) tokens this
        // replica never saw: count on from clock + 60 s, as after a start.
        fencing::TOKENS.observe(fencing::start_seed(ffi::wall_micros()));
        let _ = std::panic::catch_unwind(|| guard_state::arm(&Context::new(ctx), Armed::Promoted));
    } else {
        let _ = std::panic::catch_unwind(|| guard_state::became_replica(&Context::new(ctx)));
    }
}

/// `CONFIG SET`: persistence made incomplete taints the AOF (guard_state.rs).
unsafe extern "C" fn on_config(
    ctx: RawCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut std::ffi::c_void,
) {
    let _ = std::panic::catch_unwind(|| {
        let ctx = Context::new(ctx);
        guard_state::on_config_change(&ctx);
        registration::warn_if_locks_can_be_evicted(&ctx);
    });
}

/// Loading an RDB/AOF can take seconds: the guard counts from its end, not
/// from module load, or a slow load would eat the delay.
unsafe extern "C" fn on_loading(
    ctx: RawCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut std::ffi::c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_LOADING_ENDED {
        propagation::may_reach_from_now();
    }
    match subevent {
        raw::REDISMODULE_SUBEVENT_LOADING_AOF_START => guard_state::AOF_LOADED.store(true, Relaxed),
        raw::REDISMODULE_SUBEVENT_LOADING_RDB_START
        | raw::REDISMODULE_SUBEVENT_LOADING_REPL_START => {
            guard_state::AOF_LOADED.store(false, Relaxed)
        }
        raw::REDISMODULE_SUBEVENT_LOADING_ENDED => {
            let _ =
                std::panic::catch_unwind(|| guard_state::arm(&Context::new(ctx), Armed::Loaded));
        }
        _ => {}
    }
}

/// A fork (a snapshot for a replica, a save, an AOF rewrite): grants
/// replicate as effects from now on (propagation.rs).
unsafe extern "C" fn on_fork(
    _ctx: RawCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut std::ffi::c_void,
) {
    propagation::may_reach_from_now();
}

/// ACL categories for the commands, where the server can take them (Redis
/// 7.2+, Valkey): Redis 7.0 has no module API for it, so there the commands
/// carry only their key specs (documented limit).
fn set_acl_categories(ctx: &Context, raw_ctx: RawCtx) {
    // SAFETY: the API table is filled once by RedisModule_Init, before OnLoad
    // code runs, and never written again; reading it on the main thread is safe.
    let (add_category, set_categories) = unsafe {
        (
            raw::RedisModule_AddACLCategory,
            raw::RedisModule_SetCommandACLCategories,
        )
    };
    let Some(set_categories) = set_categories else {
        ctx.log_notice(
            "lock: this server has no module ACL-category API (Redis < 7.2): \
             LOCK.* commands are in no ACL category; grant them by name (+lock.acquire ...)",
        );
        return;
    };
    // SAFETY: valid ctx during OnLoad; the name is a NUL-terminated static.
    let own_category = add_category.is_some_and(
        |add| unsafe { add(raw_ctx, c"lock".as_ptr()) } == raw::REDISMODULE_OK as c_int,
    );
    for c in COMMANDS {
        let categories = if own_category {
            format!("{} lock", c.acl_categories)
        } else {
            c.acl_categories.to_string()
        };
        let Ok(categories) = std::ffi::CString::new(categories) else {
            continue;
        };
        // SAFETY: valid ctx during OnLoad; every command was created in init.
        let set = unsafe {
            let command = api!(RedisModule_GetCommand)(raw_ctx, c.name.as_ptr());
            !command.is_null()
                && set_categories(command, categories.as_ptr()) == raw::REDISMODULE_OK as c_int
        };
        if !set {
            ctx.log_warning("lock: could not set a command's ACL categories");
        }
    }
}

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    if let Some(function) = registration::missing_api() {
        ctx.log_warning(&format!(
            "lock: this server lacks the module API RedisModule_{function}; the lock module needs {}",
            registration::NEEDS
        ));
        return Status::Err;
    }
    if registration::register_configs(ctx) == Status::Err
        || registration::apply_module_args(ctx, args) == Status::Err
    {
        return Status::Err;
    }
    // Tokens follow the wall clock + 60 s; a start is seeded there so
    // that no token from before a crash can be handed out again, and loading
    // raises the counter to whatever was persisted (see fencing.rs).
    fencing::TOKENS.observe(fencing::start_seed(ffi::wall_micros()));
    guard_state::arm(ctx, Armed::Started);
    propagation::init(ctx);
    ffi::set_lock_type(datatype::raw_type());
    let raw_ctx = ctx.ctx;
    // SAFETY: called once from RedisModule_OnLoad with a valid ctx; all
    // names and flag strings are NUL-terminated statics.
    unsafe {
        // Corrupt or hostile RDB/RESTORE payloads become load errors, not a
        // server panic: datatype.rs checks every read.
        api!(RedisModule_SetModuleOptions)(
            raw_ctx,
            raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS as c_int,
        );
        for c in COMMANDS {
            let key = c_int::from(c.key_flags != 0); // argv[1], or no key
            let created = api!(RedisModule_CreateCommand)(
                raw_ctx,
                c.name.as_ptr(),
                Some(c.handler),
                c.flags.as_ptr(),
                key,
                key,
                key,
            );
            if created != raw::REDISMODULE_OK as c_int
                || !ffi::describe_command(raw_ctx, c.name, c.arity, c.key_flags, c.summary)
            {
                return Status::Err;
            }
        }
        api!(RedisModule_RegisterInfoFunc)(raw_ctx, Some(info::info));
        api!(RedisModule_RegisterCommandFilter)(raw_ctx, Some(propagation::watch_for_sync), 0);
        let events: [(u64, ServerEventHandler); 7] = [
            (raw::REDISMODULE_EVENT_CRON_LOOP, reaper::on_cron),
            (raw::REDISMODULE_EVENT_FLUSHDB, blocking::on_flush),
            (raw::REDISMODULE_EVENT_SWAPDB, blocking::on_swapdb),
            (
                raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
                on_role_change,
            ),
            (raw::REDISMODULE_EVENT_LOADING, on_loading),
            (raw::REDISMODULE_EVENT_CONFIG, on_config),
            (raw::REDISMODULE_EVENT_FORK_CHILD, on_fork),
        ];
        for (id, handler) in events {
            let event = raw::RedisModuleEvent { id, dataver: 1 };
            api!(RedisModule_SubscribeToServerEvent)(raw_ctx, event, Some(handler));
        }
    }
    blocking::init_timer_context(raw_ctx);
    set_acl_categories(ctx, raw_ctx);
    registration::warn_if_locks_can_be_evicted(ctx);
    Status::Ok
}

type ServerEventHandler =
    unsafe extern "C" fn(RawCtx, raw::RedisModuleEvent, u64, *mut std::ffi::c_void);

redis_module! {
    name: "lock",
    version: rules::version::MODULE_VERSION,
    allocator: (Allocator, ALLOCATOR),
    data_types: [LOCK_TYPE],
    init: init,
}
