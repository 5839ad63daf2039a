//! Section 7: shared locks and semaphores. (a) a shared acquire on a key
//! with 100 holders against an exclusive one, memory per extra holder;
//! (b) a hot read-write key against Redisson's RReadWriteLock scripts;
//! (c) `redis-lock run --limit 4` with 16 contenders on 3 servers; beside
//! section 1's exclusive ratios of the same run.
//!
//! `BENCH_SECTIONS=shared` runs section 1 and this section only and puts
//! this section into the existing bench/RESULTS.md in place.

use crate::redisson_rwlock::Scripts;
use crate::{limit_run, rw_contention, server_side, shared_cost};
use redis_lock_testkit::Server;
use std::fmt::Write as _;
use std::path::Path;

pub const HEADING: &str = "## 7. Shared locks and semaphores";

/// Targets of issue 28.
const MAX_COST_RATIO: f64 = 1.5;
const MAX_BYTES_PER_HOLDER: f64 = 100.0;
const MAX_WRITER_WAIT_MS: f64 = 50.0;

pub struct Section {
    pub md: String,
    pub summary: String,
}

fn verdict(pass: bool) -> &'static str {
    if pass {
        "PASS"
    } else {
        "MISS"
    }
}

/// Section 1's exclusive ratio lines (`| LOCK.ACQUIRE / SET NX PX | ...`),
/// as main writes them into its summary.
fn exclusive_lines(summary: &str) -> Vec<&str> {
    summary
        .lines()
        .filter(|l| l.starts_with("| LOCK."))
        .collect()
}

/// The section, on `server` (section 1's, flushed here) and servers of its
/// own; `section1_summary` holds section 1's ratio lines of this run.
pub async fn run(server: &Server, quick: bool, section1_summary: &str) -> Section {
    let (rounds, secs, hot_secs, mem_keys) = if quick {
        (3, 0.5, 2.0, 100)
    } else {
        (5, 1.0, 6.0, 1_000)
    };
    let mut md = String::new();
    let mut summary = String::new();
    writeln!(md, "{HEADING}\n").unwrap();

    eprintln!("[7] shared locks: acquire cost and memory per holder...");
    let cost = shared_cost::acquire_cost(server, rounds, secs);
    writeln!(md, "### 7a. A shared hold's cost\n\nOne server, {} connections each pipelining {} acquire + release pairs, {} interleaved rounds of {} s per side (medians): `LOCK.ACQUIRE sh owner ttl SHARED` + `LOCK.RELEASE sh owner` on a key that already has {} shared holders, against `LOCK.ACQUIRE key owner ttl` + `LOCK.RELEASE` on a free key each time, and the shared pair on a free key (what the shared path costs before any other holder); 32-byte owners. Server time from `INFO commandstats`.\n", 4, 32, cost.rounds, cost.secs, shared_cost::HOLDERS).unwrap();
    writeln!(
        md,
        "| pair | pairs/s | ACQUIRE usec/call | RELEASE usec/call |\n|---|---:|---:|---:|"
    )
    .unwrap();
    for (name, side) in [
        ("exclusive, free key", cost.exclusive),
        ("shared, beside 100 holders", cost.shared),
        ("shared, free key (the first holder)", cost.shared_alone),
    ] {
        writeln!(
            md,
            "| {name} | {:.0} | {:.2} | {:.2} |",
            side.pairs_per_s, side.acquire_usec, side.release_usec
        )
        .unwrap();
    }
    let line = format!(
        "| shared acquire + release beside {} holders / exclusive on a free key | {:.2}x server time, {:.2}x client time (target <= {MAX_COST_RATIO}x) {} |",
        shared_cost::HOLDERS,
        cost.server_ratio(),
        cost.throughput_ratio(),
        verdict(cost.server_ratio() <= MAX_COST_RATIO && cost.throughput_ratio() <= MAX_COST_RATIO)
    );
    writeln!(
        md,
        "\n{}\n",
        line.trim_matches('|').trim().replace(" | ", ": ")
    )
    .unwrap();
    summary += &format!("{line}\n");

    let memory = [
        shared_cost::holder_memory(server, 1, if quick { 1_000 } else { 10_000 }),
        shared_cost::holder_memory(server, mem_keys, 99),
    ];
    writeln!(md, "`used_memory` per shared holder added to keys that have one already (32-byte owners, long TTL):\n\n| keys | holders per key | bytes per extra holder |\n|---:|---:|---:|").unwrap();
    for m in &memory {
        writeln!(
            md,
            "| {} | {} | {:.1} |",
            m.keys, m.holders_per_key, m.bytes_per_holder
        )
        .unwrap();
    }
    let worst = memory
        .iter()
        .map(|m| m.bytes_per_holder)
        .fold(0.0, f64::max);
    let line = format!(
        "| memory per extra shared holder: {worst:.0} B at most (target <= {MAX_BYTES_PER_HOLDER:.0} B) {} |",
        verdict(worst <= MAX_BYTES_PER_HOLDER)
    );
    writeln!(md, "\n{}\n", line.trim_matches('|').trim()).unwrap();
    summary += &format!("{line}\n");

    eprintln!("[7] shared locks: hot read-write key...");
    let url = server.url();
    redis::cmd("FLUSHALL")
        .query::<()>(&mut server.conn())
        .unwrap();
    let ours = rw_contention::native(&url, hot_secs).await;
    let theirs = rw_contention::redisson(&url, Scripts::new(), hot_secs).await;
    writeln!(md, "### 7b. Hot read-write key, {} clients, one server\n\nEach client loops lock -> empty critical section -> unlock for {hot_secs} s, each section a read (shared) with probability {} and a write (exclusive) otherwise; a wait is acquisition minus request; the section asked for at the deadline still completes, so a writer starved until the readers stop shows its whole wait.\n\n- **redis-lock**: the Rust client, `acquire(name, LockOptions::shared() or new(), wait 30 s)` + `unlock`: waits in the server's one queue per key.\n- **Redisson RReadWriteLock**: Lua written in bench/src/redisson_rwlock.rs on the protocol of redisson 4.7.0's `RedissonReadLock` / `RedissonWriteLock` (tag redisson-4.7.0, commit 0c286e8; `tryLockInnerAsync`, `unlockInnerAsync` then the latch's `DEL`): the same keys, hash layout, pttl / pexpire rules, unlock publish and replies, so the server does the same work; keys and arguments as those classes build them, lease 30 s, a connection per client. Its clients wake on a pub/sub message, not available here: a refused try is retried after a random {}-{} ms.\n", rw_contention::CLIENTS, 1.0 - rw_contention::WRITE_SHARE, rw_contention::POLL_MS.0, rw_contention::POLL_MS.1).unwrap();
    writeln!(md, "| client | reads/s | writes/s | writers' longest wait ms | writers' p99 wait ms | readers' longest wait ms | fewest sections |\n|---|---:|---:|---:|---:|---:|---:|").unwrap();
    let row = |name: &str, r: &rw_contention::Row| {
        format!(
            "| {name} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {} |",
            r.reads_per_s,
            r.writes_per_s,
            r.writer_max_wait_ms,
            r.writer_p99_wait_ms,
            r.reader_max_wait_ms,
            r.min_sections
        )
    };
    writeln!(md, "{}", row("redis-lock (server-side queue)", &ours)).unwrap();
    writeln!(
        md,
        "{}",
        row("Redisson 4.7.0 RReadWriteLock scripts (polling)", &theirs)
    )
    .unwrap();
    let line = format!(
        "| hot read-write key: writers' longest wait {:.1} ms (target <= {MAX_WRITER_WAIT_MS:.0} ms) {}; {:.0} reads/s vs Redisson's scripts {:.1} ms, {:.0} reads/s |",
        ours.writer_max_wait_ms,
        verdict(ours.writer_max_wait_ms <= MAX_WRITER_WAIT_MS),
        ours.reads_per_s,
        theirs.writer_max_wait_ms,
        theirs.reads_per_s
    );
    writeln!(md, "\n{}\n", line.trim_matches('|').trim()).unwrap();
    summary += &format!("{line}\n");

    eprintln!("[7] shared locks: redis-lock run --limit 4, 16 contenders...");
    let limit = limit_run::run();
    writeln!(md, "### 7c. `redis-lock run --limit {}`: {} contenders, 3 servers\n\n{} `redis-lock run --limit {} --wait 60s NAME -- sh -c '...'` processes started at once, each command writing its start and end time and sleeping {} ms in between.\n\n| contenders served | most running at once | total time | least possible ({} rounds of the command) |\n|---:|---:|---:|---:|", limit_run::LIMIT, limit_run::CONTENDERS, limit_run::CONTENDERS, limit_run::LIMIT, limit_run::COMMAND_MS, limit_run::CONTENDERS.div_ceil(limit_run::LIMIT as usize)).unwrap();
    writeln!(
        md,
        "| {} of {} | {} | {:.2} s | {:.2} s |",
        limit.served,
        limit_run::CONTENDERS,
        limit.max_running,
        limit.total.as_secs_f64(),
        limit.floor.as_secs_f64()
    )
    .unwrap();
    let line = format!(
        "| run --limit {}: {} of {} served, at most {} at once, {:.2} s in all {} |",
        limit_run::LIMIT,
        limit.served,
        limit_run::CONTENDERS,
        limit.max_running,
        limit.total.as_secs_f64(),
        verdict(
            limit.served == limit_run::CONTENDERS && limit.max_running <= limit_run::LIMIT as usize
        )
    );
    writeln!(md, "\n{}\n", line.trim_matches('|').trim()).unwrap();
    summary += &format!("{line}\n");

    writeln!(md, "### 7d. Exclusive ratios in the same run (section 1)\n\nShared holds leave the exclusive path as it was: section 1's ratios, measured in this run.\n\n| ratio | pipelined | unpipelined | server time (usec/call) | target (pipelined) |\n|---|---:|---:|---:|---:|").unwrap();
    for line in exclusive_lines(section1_summary) {
        writeln!(md, "{line}").unwrap();
    }
    writeln!(md).unwrap();
    redis::cmd("FLUSHALL")
        .query::<()>(&mut server.conn())
        .unwrap();
    Section { md, summary }
}

/// `BENCH_SECTIONS=shared`: section 1 (its ratios only) and this section,
/// spliced into bench/RESULTS.md in place of an earlier section 7.
pub async fn only(quick: bool) {
    let (rounds, requests) = if quick { (1, 100_000) } else { (3, 500_000) };
    eprintln!("[1] server-side cost (redis-benchmark), for the exclusive ratios...");
    let server = Server::with(&["--maxclients", "20100"], &[]);
    let rows = server_side::run(&server, rounds, requests);
    let section1 = ratio_lines(&rows);
    let section = run(&server, quick, &section1).await;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("RESULTS.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    std::fs::write(&path, splice(&old, &section.md)).unwrap();
    println!("{}", section.md);
    eprintln!("\nSummary:\n{}", section.summary);
}

/// `BENCH_SECTIONS=shared-cost`: 7a alone (the shared pair's cost and
/// memory per holder), one line, nothing written; for comparing two builds
/// of the module run after run (REDIS_LOCK_MODULE picks the build).
pub fn cost_only(quick: bool) {
    let (rounds, secs, mem_keys) = if quick {
        (3, 0.5, 100)
    } else {
        (5, 1.0, 1_000)
    };
    let server = Server::with(&["--maxclients", "20100"], &[]);
    let cost = shared_cost::acquire_cost(&server, rounds, secs);
    let mem = shared_cost::holder_memory(&server, mem_keys, 9);
    let mem100 = shared_cost::holder_memory(&server, mem_keys, 99);
    let one_key = shared_cost::holder_memory(&server, 1, if quick { 1_000 } else { 10_000 });
    println!(
        "pair server ratio {:.2}x, acquire ratio {:.2}x | usec/call acquire+release: exclusive {:.2}+{:.2}, shared beside {} {:.2}+{:.2}, shared alone {:.2}+{:.2} | {:.1} B/holder at {}, {:.1} at {}, {:.1} at {} on one key",
        cost.server_ratio(),
        cost.shared.acquire_usec / cost.exclusive.acquire_usec.max(1e-9),
        cost.exclusive.acquire_usec,
        cost.exclusive.release_usec,
        shared_cost::HOLDERS,
        cost.shared.acquire_usec,
        cost.shared.release_usec,
        cost.shared_alone.acquire_usec,
        cost.shared_alone.release_usec,
        mem.bytes_per_holder,
        mem.holders_per_key,
        mem100.bytes_per_holder,
        mem100.holders_per_key,
        one_key.bytes_per_holder,
        one_key.holders_per_key,
    );
}

/// Section 1's ratio lines from its rows, as main writes them.
fn ratio_lines(rows: &[server_side::Row]) -> String {
    let find = |name: &str| rows.iter().find(|r| r.name == name).unwrap();
    let ratios = [
        (
            "LOCK.ACQUIRE / SET NX PX",
            "LOCK.ACQUIRE",
            "SET key v NX PX",
            0.95,
        ),
        (
            "LOCK.ACQUIRE / EVALSHA acquire",
            "LOCK.ACQUIRE",
            "EVALSHA acquire (Redisson)",
            2.5,
        ),
        (
            "LOCK.RELEASE / Lua release",
            "LOCK.RELEASE",
            "EVALSHA compare-and-delete",
            3.0,
        ),
        (
            "LOCK.EXTEND / Lua extend",
            "LOCK.EXTEND",
            "EVALSHA compare-and-pexpire",
            3.0,
        ),
    ];
    let mut out = String::new();
    for (name, a, b, target) in ratios {
        let (a, b) = (find(a), find(b));
        writeln!(
            out,
            "| {name} | {:.2}x | {:.2}x | {:.2}x | >= {target}x |",
            a.pipelined / b.pipelined,
            a.plain / b.plain,
            b.usec_per_call / a.usec_per_call.max(1e-9)
        )
        .unwrap();
    }
    out
}

/// `results` with its section 7 replaced by `section`, or `section` put
/// before the summary (or at the end) when it has none.
fn splice(results: &str, section: &str) -> String {
    if let Some(at) = results.find(HEADING) {
        let rest = &results[at + HEADING.len()..];
        let end = rest
            .find("\n## ")
            .map_or(results.len(), |e| at + HEADING.len() + e);
        return format!("{}{section}{}", &results[..at], &results[end..]);
    }
    match results.find("\n## Summary") {
        Some(at) => format!("{}\n{section}{}", &results[..at], &results[at..]),
        None => format!("{results}\n{section}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_is_put_in_place_once() {
        let base = "# r\n\n## 6. x\n\ntext\n\n## Summary\n\n- a\n";
        let once = splice(base, "## 7. Shared locks and semaphores\n\nv1\n");
        assert!(once.contains("text\n\n## 7. Shared locks and semaphores\n\nv1\n\n## Summary"));
        let twice = splice(&once, "## 7. Shared locks and semaphores\n\nv2\n");
        assert_eq!(twice, once.replace("v1", "v2"));
    }
}
