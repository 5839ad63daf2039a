//! Whether a new grant's `LOCK.APPLY` effect can reach anyone: a replica,
//! the replication backlog a replica may resync from, or the AOF.
//!
//! A grant replicates as `LOCK.APPLY key owner token ttl 1`, built with
//! `RedisModule_Replicate`, which looks the command up by name (splitting
//! the name into a fresh string array first) and builds an argument vector
//! before the server decides there is nobody to send it to. On one server
//! with no replica and no AOF that was a quarter of `LOCK.ACQUIRE`'s time
//! (`bench/where-time-goes.md`, 2026-11-29). The server keeps an effect
//! only while it has an AOF, or is a primary with a backlog or replicas;
//! the module cannot read the backlog, so it tracks what can create one:
//!
//! - a replica's `SYNC` or `PSYNC`, seen by a command filter before it
//!   runs: the server makes its backlog there, before any fork, and keeps
//!   it if the sync is abandoned; a replica seeded later with an RDB from
//!   `SAVE` (no fork) resynced partially from that backlog and got every
//!   grant in it as a verbatim `LOCK.ACQUIRE` (an attack run on fe1f63f);
//! - a fork (`FORK_CHILD` born, in the parent): a `BGSAVE` or AOF rewrite
//!   (a full sync's fork comes after its `SYNC`);
//! - a load (RDB, AOF, or from a primary): a loaded replication ID lets a
//!   replica of the server's earlier life resync partially;
//! - a role change: a replica keeps its backlog when promoted;
//! - at module load, a backlog or replica already there (`MODULE LOAD` on
//!   a running server), or being a replica.
//!
//! Once any of these is seen, every grant replicates as before, until the
//! server restarts. The AOF is read from the context on each grant. Until
//! then a grant goes through `RedisModule_ReplicateVerbatim`: the server
//! finds no target and propagates nothing, but still counts the change for
//! the `save` points, as `RedisModule_Replicate` does.

use crate::glue::ffi::{api, bytes, Ctx, RawString};
use redis_module::{raw, Context};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

static MAY_REACH: AtomicBool = AtomicBool::new(true);

/// At module load: whether an effect can already reach anyone.
pub fn init(ctx: &Context) {
    let info = ctx.server_info("replication");
    // A field missing from INFO counts as not quiet.
    let not_quiet =
        |field: &str, quiet: &[u8]| info.field(field).is_none_or(|v| v.as_slice() != quiet);
    let reach = not_quiet("role", b"master")
        || not_quiet("connected_slaves", b"0")
        || not_quiet("repl_backlog_active", b"0");
    MAY_REACH.store(reach, Relaxed);
}

/// A replica's `SYNC`/`PSYNC`, a fork, a load or a role change: from now
/// on every effect may reach a replica or a backlog.
pub fn may_reach_from_now() {
    MAY_REACH.store(true, Relaxed);
}

/// The command filter (registered at load, lib.rs): every command from a
/// client passes here before it runs. Once effects are on it does nothing
/// but read the flag.
pub extern "C" fn watch_for_sync(filter: *mut raw::RedisModuleCommandFilterCtx) {
    if MAY_REACH.load(Relaxed) {
        return;
    }
    // SAFETY: the server passes a live filter context; position 0 is the
    // command name, present in every command (NULL is checked anyway).
    let name = unsafe { api!(RedisModule_CommandFilterArgGet)(filter, 0) };
    if name.is_null() {
        return;
    }
    let name = bytes(name);
    if name.eq_ignore_ascii_case(b"sync") || name.eq_ignore_ascii_case(b"psync") {
        may_reach_from_now();
    }
}

/// Replicate a grant (`Ctx::replicate_grant`) where it can reach anyone.
pub fn grant(ctx: Ctx, argv: &[RawString], token: u64) {
    if MAY_REACH.load(Relaxed) || ctx.flags() & raw::REDISMODULE_CTX_FLAGS_AOF != 0 {
        ctx.replicate_grant(argv, token);
    } else {
        ctx.replicate_verbatim();
    }
}

/// For `INFO lock`: 1 while grants replicate as `LOCK.APPLY`.
pub fn reaching() -> u64 {
    u64::from(MAY_REACH.load(Relaxed))
}
