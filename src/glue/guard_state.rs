//! Arming the restart guard, and the part of it that must outlive a
//! restart: a marker file `redis-lock.guard` in the server's working
//! directory (its `dir`, where the RDB and AOF live). It holds until when
//! new locks stay refused and whether persistence was incomplete since the
//! last load (`rules::guard::Marker`). Without it, a node restarted during
//! its guard (a fresh start or a promotion) that then loads a complete AOF
//! would come back unguarded, and an AOF left stale by `CONFIG SET
//! appendonly no` would be trusted.

use super::registration::server_config;
use crate::rules::config;
use crate::rules::guard::{self, Marker};
use redis_module::Context;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

const MARKER_FILE: &str = "redis-lock.guard";

/// Whether the data just loaded came from an AOF (set by the loading
/// event; a server that started without files loaded nothing).
pub static AOF_LOADED: AtomicBool = AtomicBool::new(false);

/// Why the guard is armed: only data loaded from an always-fsync'd AOF
/// (with the RDB preamble, which carries the token counter through
/// rewrites) holds every grant. A start without files cannot tell a new
/// disk from a wiped one, and a promoted replica may have missed the latest
/// grants (replication is asynchronous).
#[derive(Clone, Copy, PartialEq)]
pub enum Armed {
    Started,
    Loaded,
    Promoted,
}

fn wall_ms() -> u64 {
    super::ffi::wall_micros() / 1000
}

fn read_marker() -> Marker {
    std::fs::read_to_string(MARKER_FILE)
        .ok()
        .and_then(|text| Marker::parse(&text))
        .unwrap_or_default()
}

/// Write the marker and fsync it: it must be on disk before any grant it
/// is meant to cover. A failure is logged, never fatal.
fn write_marker(ctx: &Context, marker: Marker) {
    let written = std::fs::File::create(MARKER_FILE).and_then(|mut f| {
        f.write_all(marker.format().as_bytes())?;
        f.sync_all()
    });
    if let Err(e) = written {
        ctx.log_warning(&format!("lock: could not write {MARKER_FILE}: {e}"));
    }
}

fn persistence_is_complete(ctx: &Context) -> bool {
    guard::persistence_is_complete(
        &server_config(ctx, "appendonly"),
        &server_config(ctx, "appendfsync"),
        &server_config(ctx, "aof-use-rdb-preamble"),
    )
}

/// The marker as the previous run left it, read at module load (before the
/// start-up guard of this run overwrites it), for the load that follows.
static PREVIOUS: std::sync::Mutex<Option<Marker>> = std::sync::Mutex::new(None);

/// Arm the restart guard, remember it on disk, and say so in the log.
pub fn arm(ctx: &Context, armed: Armed) {
    let aof_loaded = AOF_LOADED.load(Relaxed);
    let complete = armed == Armed::Loaded && aof_loaded && persistence_is_complete(ctx);
    let mut previous = PREVIOUS.lock().unwrap_or_else(|p| p.into_inner());
    let marker = match armed {
        Armed::Started => *previous.insert(read_marker()),
        Armed::Loaded => previous.take().unwrap_or_else(read_marker),
        Armed::Promoted => read_marker(),
    };
    drop(previous);
    let full = config::restart_delay_ms(false);
    let now = wall_ms();
    let delay = match armed {
        Armed::Loaded => guard::delay_after_load(complete, full, marker, now),
        Armed::Started | Armed::Promoted => full,
    };
    guard::arm(delay);
    let until = now.saturating_add(delay);
    // A taint is spent by the full guard it forces: once that has passed,
    // every grant the stale data lacks has expired.
    let tainted = marker.tainted && armed != Armed::Loaded;
    // So is "written as a replica", by a load or promotion as a primary;
    // a replica's own load keeps it.
    let replica = is_replica(ctx) || (marker.replica && armed == Armed::Started);
    if until > marker.until_unix_ms || tainted != marker.tainted || replica != marker.replica {
        write_marker(
            ctx,
            Marker {
                until_unix_ms: until.max(marker.until_unix_ms),
                tainted,
                replica,
            },
        );
    }
    let why = match armed {
        Armed::Started => "module loaded",
        Armed::Loaded if aof_loaded => "AOF loaded",
        Armed::Loaded => "data loaded",
        Armed::Promoted => "promoted to primary",
    };
    let from_a_replica = armed == Armed::Promoted || (armed == Armed::Loaded && marker.replica);
    ctx.log_notice(&guard::describe(why, delay, complete, from_a_replica));
}

fn is_replica(ctx: &Context) -> bool {
    super::ffi::Ctx(ctx.ctx).is_replica()
}

/// Now a replica (`REPLICAOF`, a demotion): what its AOF gets from here on
/// is what reaches it, so a restart from it as a primary is guarded.
pub fn became_replica(ctx: &Context) {
    let marker = read_marker();
    if !marker.replica {
        let replica = true;
        write_marker(ctx, Marker { replica, ..marker });
    }
}

/// A config change: if persistence is now incomplete, the AOF stops holding
/// every grant, so the next load must be guarded whatever the config then.
pub fn on_config_change(ctx: &Context) {
    if !persistence_is_complete(ctx) {
        let marker = read_marker();
        if !marker.tainted {
            write_marker(
                ctx,
                Marker {
                    tainted: true,
                    ..marker
                },
            );
        }
    }
}
