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

/// Now on the wall clock and, on Linux, the boot clock with this boot's id
/// (a carried guard is timed on it: `Marker::left`).
fn now() -> guard::Now {
    guard::Now {
        unix_ms: super::ffi::wall_micros() / 1000,
        boot: boot_clock(),
    }
}

fn boot_clock() -> Option<guard::Boot> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = u128::from_str_radix(&id.trim().replace('-', ""), 16).ok()?;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    let ms = u64::try_from(ts.tv_sec).ok()? * 1000 + u64::try_from(ts.tv_nsec).ok()? / 1_000_000;
    (rc == 0).then_some(guard::Boot { id, ms })
}

/// The marker, or None when it is missing, empty or unreadable: then
/// nothing is known of how the data was written (`Reason::NoMarker`).
fn read_marker() -> Option<Marker> {
    let text = std::fs::read_to_string(MARKER_FILE).ok()?;
    Marker::parse(&text)
}

/// Write the marker and fsync it: it must be on disk before any grant it
/// is meant to cover. Written aside and renamed over the old one, so a
/// crash mid-write leaves the old marker or the new, never an empty file
/// (62a27bb: a `kill -9` in the truncating write left an empty one). A
/// failure is logged, never fatal.
fn write_marker(ctx: &Context, marker: Marker) {
    let aside = format!("{MARKER_FILE}.tmp");
    let written = std::fs::File::create(&aside)
        .and_then(|mut f| {
            f.write_all(marker.format().as_bytes())?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&aside, MARKER_FILE))
        .and_then(|()| std::fs::File::open(".")?.sync_all()); // the rename
    if let Err(e) = written {
        ctx.log_warning(&format!(
            "lock: could not write {MARKER_FILE} in the server's dir ({e}): the restart guard \
             cannot carry over a restart; make it writable"
        ));
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
/// (Outer None: not read yet; inner None: there was none.)
static PREVIOUS: std::sync::Mutex<Option<Option<Marker>>> = std::sync::Mutex::new(None);

static START_UP_OVER: AtomicBool = AtomicBool::new(false);

/// The marker a start without one will write if it loads nothing (its data
/// is then empty: a known history); a load writes its own instead.
static DEFERRED: std::sync::Mutex<Option<Marker>> = std::sync::Mutex::new(None);

/// Start-up is over (the first cron tick): a later load (`DEBUG LOADAOF`,
/// a replica's full sync) reads the marker on disk. A start that loaded
/// nothing left the one from before it in `PREVIOUS`, and a load much
/// later went by it, blind to a taint written since (0daff04).
pub fn start_up_over(ctx: &Context) {
    if !START_UP_OVER.swap(true, Relaxed) {
        *PREVIOUS.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let deferred = DEFERRED.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(marker) = deferred {
            write_marker(ctx, marker);
        }
    }
}

/// Arm the restart guard, remember it on disk, and say so in the log.
pub fn arm(ctx: &Context, armed: Armed) {
    let aof_loaded = AOF_LOADED.load(Relaxed);
    let persistence_complete = persistence_is_complete(ctx);
    let complete = armed == Armed::Loaded && aof_loaded && persistence_complete;
    let mut previous = PREVIOUS.lock().unwrap_or_else(|p| p.into_inner());
    let found = match armed {
        Armed::Started => *previous.insert(read_marker()),
        Armed::Loaded => previous.take().unwrap_or_else(read_marker),
        Armed::Promoted => read_marker(),
    };
    drop(previous);
    let marker = found.unwrap_or_default();
    let full = config::restart_delay_ms(false);
    let now = now();
    let (delay, reason) = match armed {
        Armed::Loaded => guard::delay_after_load(complete, full, found, now),
        Armed::Started => (full, guard::Reason::Incomplete),
        Armed::Promoted => (
            guard::delay_after_promotion(full, cluster_node_timeout(ctx)),
            guard::Reason::FromReplica,
        ),
    };
    guard::arm(delay);
    // A taint is spent by the full guard it forces: once that has passed,
    // every grant the stale data lacks has expired. Running with
    // persistence incomplete taints what is written from now on, also when
    // the config file said so at start (62a27bb: an AOF left stale by a
    // run with `appendonly no` in the file was trusted by the next).
    // Not by a load while an AOF rewrite runs or waits to run, though: the
    // one `CONFIG SET appendonly yes` (or a replica's full sync) starts
    // leaves the stale AOF on disk until it is done, and what is granted
    // meanwhile reaches no file a restart reads (2026-11-28: `DEBUG
    // LOADAOF` during that rewrite, a grant after the guard, kill -9, and
    // the stale AOF was trusted: two holders). Kept, the next load is
    // guarded again; a rewrite of a sound AOF costs that guard needlessly.
    let spent = armed == Armed::Loaded && !aof_rewrite_pending(ctx);
    let tainted = (marker.tainted && !spent) || !persistence_complete;
    // So is "written as a replica", by a load as a primary; a replica's
    // own load keeps it, and so does a promotion: the AOF on disk may still
    // be the one from before the last full sync until the rewrite that
    // follows it is done (1605b38: a rewrite slower than the guard, a
    // grant after the guard, kill -9, and the stale AOF was trusted).
    let replica = is_replica(ctx) || (marker.replica && !spent);
    // What an earlier guard has left is kept (never more than a full one).
    let left = delay.max(marker.left(now).min(full));
    // An unknown history (no marker, or an unreadable one) stays unknown
    // until a load serves the full guard it calls for, or start-up ends
    // with nothing loaded. Replaced by a clean marker at module load, it
    // was gone after a start that died while loading (a kill -9 in a slow
    // AOF load), and the next start trusted its AOF (0daff04); so was,
    // after a promotion, the replica flag.
    let new = Marker::until(now, left, tainted, replica);
    let mut deferred = DEFERRED.lock().unwrap_or_else(|p| p.into_inner());
    match armed {
        _ if found.is_some() || armed == Armed::Loaded => {
            *deferred = None;
            write_marker(ctx, new);
        }
        Armed::Started => *deferred = Some(new),
        _ => {}
    }
    drop(deferred);
    let why = match armed {
        Armed::Started => "module loaded",
        Armed::Loaded if aof_loaded => "AOF loaded",
        Armed::Loaded => "data loaded",
        Armed::Promoted => "promoted to primary",
    };
    ctx.log_notice(&guard::describe(why, delay, reason));
}

/// Whether an AOF rewrite is running or scheduled (`INFO persistence`).
fn aof_rewrite_pending(ctx: &Context) -> bool {
    let info = ctx.server_info("persistence");
    ["aof_rewrite_in_progress", "aof_rewrite_scheduled"]
        .iter()
        .any(|field| info.field(field).is_some_and(|v| v.as_slice() != b"0"))
}

/// `cluster-node-timeout` in ms, in cluster mode (None outside one).
fn cluster_node_timeout(ctx: &Context) -> Option<crate::rules::lock::Millis> {
    if !super::ffi::Ctx(ctx.ctx).in_cluster() {
        return None;
    }
    server_config(ctx, "cluster-node-timeout").parse().ok()
}

fn is_replica(ctx: &Context) -> bool {
    super::ffi::Ctx(ctx.ctx).is_replica()
}

/// Now a replica (`REPLICAOF`, a demotion): what its AOF gets from here on
/// is what reaches it, so a restart from it as a primary is guarded.
pub fn became_replica(ctx: &Context) {
    update_marker(ctx, |m| m.replica = true);
}

/// Change the marker on disk as `update` says, if that changes it.
fn update_marker(ctx: &Context, update: impl FnOnce(&mut Marker)) {
    let marker = read_marker().unwrap_or_default();
    let mut updated = marker;
    update(&mut updated);
    if updated != marker {
        write_marker(ctx, updated);
    }
}

/// A config change: if persistence is now incomplete, the AOF stops holding
/// every grant, so the next load must be guarded whatever the config then.
pub fn on_config_change(ctx: &Context) {
    if !persistence_is_complete(ctx) {
        update_marker(ctx, |m| m.tainted = true);
    }
}
