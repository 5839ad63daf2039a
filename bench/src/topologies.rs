//! Section 8: the quorum client's lock + unlock throughput through each kind
//! of node it accepts: a plain server (`redis://`), a Redis Cluster of 1
//! and of 3 primaries (`redis+cluster://`), and a Sentinel group
//! (`redis+sentinel://`) beside a plain URL to that group's primary (so
//! both pay the same replication). Interleaved rounds, as in section 3;
//! besides cycles/s, cycles per CPU-second of this process, since on a
//! 2-core machine the servers and the client share the cores and the
//! throughput shows the client's overhead more than any topology's scale.
//! `BENCH_SECTIONS=topologies` runs this section alone and splices it into
//! the existing bench/RESULTS.md in place.

use crate::stats::Spread;
use redis_lock_client::{Builder, Locker};
use redis_lock_testkit::sentinel_group::SentinelGroup;
use redis_lock_testkit::{cluster, cluster_url, redis_cli, Server};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const HEADING: &str = "## 8. Clusters and Sentinel";

/// Concurrent tasks, each on its own lock name.
const TASKS: usize = 64;
/// The Sentinel target: the primary lookup is not on the hot path.
const MIN_SENTINEL_RATIO: f64 = 0.95;

pub struct Section {
    pub md: String,
    pub summary: String,
}

/// One row's figures in one round.
#[derive(Clone, Copy)]
struct Sample {
    cycles_per_s: f64,
    cycles_per_cpu_s: f64,
}

struct Row {
    label: &'static str,
    url: String,
    locker: Locker,
    samples: Vec<Sample>,
}

impl Row {
    fn spread(&self, f: impl Fn(&Sample) -> f64) -> Spread {
        Spread::of(&self.samples.iter().map(f).collect::<Vec<_>>())
    }
}

/// a's figure over b's, paired round by round.
fn paired(a: &Row, b: &Row, f: impl Fn(&Sample) -> f64) -> Spread {
    let ratios: Vec<f64> = a
        .samples
        .iter()
        .zip(&b.samples)
        .map(|(x, y)| f(x) / f(y).max(1e-9))
        .collect();
    Spread::of(&ratios)
}

/// User + system CPU time of this process so far (utime and stime of
/// /proc/self/stat, in clock ticks of 1/100 s on Linux).
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces: count fields after its ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let tick = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
    match (tick(11), tick(12)) {
        (Some(user), Some(system)) => Duration::from_millis((user + system) * 10),
        _ => Duration::ZERO,
    }
}

/// A cluster of one primary holding all 16384 slots (`redis-cli --cluster
/// create` wants at least three).
fn one_primary_cluster() -> Vec<Server> {
    let node = Server::with(
        &["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"],
        &[],
    );
    let added = redis_cli(node.port, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    assert_eq!(added, "OK", "CLUSTER ADDSLOTSRANGE");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !redis_cli(node.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok") {
        assert!(
            Instant::now() < deadline,
            "one-node cluster did not converge"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    vec![node]
}

fn locker(url: &str) -> Locker {
    Builder::new(&[url.to_string()])
        .ttl(Duration::from_secs(10))
        .build()
        .unwrap_or_else(|e| panic!("a locker over {url}: {e}"))
}

/// `TASKS` tasks looping try_lock + unlock for `secs`.
async fn measure(locker: &Locker, secs: f64) -> Sample {
    // Connections (and the cluster's slot map, the Sentinel's primary) are
    // found before the clock starts.
    for t in 0..TASKS {
        let lock = locker.try_lock(&format!("topo:{t}")).await.expect("lock");
        locker.unlock(&lock).await.expect("unlock");
    }
    let done = Arc::new(AtomicU64::new(0));
    let cpu = process_cpu();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..TASKS {
        let (locker, done) = (locker.clone(), done.clone());
        tasks.spawn(async move {
            let name = format!("topo:{t}");
            while Instant::now() < deadline {
                let lock = locker.try_lock(&name).await.expect("uncontended lock");
                locker.unlock(&lock).await.expect("unlock");
                done.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let (wall, cpu) = (start.elapsed(), process_cpu().saturating_sub(cpu));
    let n = done.load(Ordering::Relaxed) as f64;
    Sample {
        cycles_per_s: n / wall.as_secs_f64(),
        cycles_per_cpu_s: n / cpu.as_secs_f64().max(1e-3),
    }
}

/// The section's markdown and summary lines: `rounds` interleaved rounds
/// of `secs` per row.
pub async fn run(rounds: usize, secs: f64) -> Section {
    eprintln!("[8] clusters and Sentinel: starting the servers...");
    let plain = Server::with(&[], &[]);
    let one = one_primary_cluster();
    let three = cluster(3);
    let group = SentinelGroup::start(&[]);
    let primary = &group.data[group.primary()];
    let mut rows: Vec<Row> = [
        ("plain server", plain.url()),
        ("cluster, 1 primary", cluster_url(&one)),
        ("cluster, 3 primaries", cluster_url(&three)),
        ("Sentinel group, through a sentinel", group.url(0)),
        ("Sentinel group, plain URL to its primary", primary.url()),
    ]
    .into_iter()
    .map(|(label, url)| Row {
        label,
        locker: locker(&url),
        url,
        samples: Vec::new(),
    })
    .collect();
    for round in 0..rounds {
        eprintln!("  round {}/{rounds}", round + 1);
        // Rotated each round so no row always runs first.
        for i in 0..rows.len() {
            let at = (i + round) % rows.len();
            let s = measure(&rows[at].locker, secs).await;
            rows[at].samples.push(s);
        }
    }

    let mut md = String::new();
    let mut summary = String::new();
    writeln!(md, "{HEADING}\n\nThe Rust client's `try_lock` + `unlock` (fencing on) with {TASKS} concurrent tasks, a name per task, for {secs} s per row, through one node of each kind: a plain server; a Redis Cluster of 1 primary (all 16384 slots) and of 3 (`redis+cluster://`, slot map fetched once and followed); a Sentinel group (a primary, a replica, three sentinels) through `redis+sentinel://`, beside a plain `redis://` URL to the same primary (both pay its replication). {rounds} interleaved rounds (order rotated each round); median (min–max) over rounds. CPU = user + system time of the bench process over the run (`/proc/self/stat`), the servers not included. On this {}-core machine the servers and the client share the cores, so these figures show the client's overhead per topology more than any topology's scale: 3 primaries cannot run 3 times the work of one here.\n", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)).unwrap();
    writeln!(
        md,
        "| node | URL | lock+unlock/s | lock+unlock per client CPU-second |\n|---|---|---:|---:|"
    )
    .unwrap();
    for r in &rows {
        let scheme = r.url.split("://").next().unwrap_or("");
        writeln!(
            md,
            "| {} | `{scheme}://` | {} | {} |",
            r.label,
            r.spread(|s| s.cycles_per_s).whole(),
            r.spread(|s| s.cycles_per_cpu_s).whole()
        )
        .unwrap();
    }
    let ratios = [
        (
            "Sentinel / plain URL to the same primary",
            &rows[3],
            &rows[4],
            Some(MIN_SENTINEL_RATIO),
        ),
        ("cluster 3 / cluster 1", &rows[2], &rows[1], None),
        ("cluster 1 / plain server", &rows[1], &rows[0], None),
    ];
    writeln!(md, "\nRatios paired within each round, median (min–max) over rounds.\n\n| ratio | lock+unlock/s | per client CPU-second | target (lock+unlock/s) |\n|---|---|---|---|").unwrap();
    for (name, a, b, target) in ratios {
        let tput = paired(a, b, |s| s.cycles_per_s);
        let cpu = paired(a, b, |s| s.cycles_per_cpu_s);
        let target = target.map_or("—".to_string(), |t| {
            format!(">= {t}x {}", if tput.median >= t { "PASS" } else { "MISS" })
        });
        let line = format!("| {name} | {} | {} | {target} |", tput.ratio(), cpu.ratio());
        writeln!(md, "{line}").unwrap();
        summary += &format!("| topologies: {}\n", line.trim_start_matches("| "));
    }
    writeln!(md).unwrap();
    Section { md, summary }
}

/// `BENCH_SECTIONS=topologies`: this section alone, spliced into
/// bench/RESULTS.md in place of an earlier section 8.
pub async fn only(quick: bool) {
    let (rounds, secs) = plan(quick);
    let section = run(rounds, secs).await;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("RESULTS.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    std::fs::write(&path, splice(&old, &section.md)).unwrap();
    println!("{}", section.md);
    eprintln!("\nSummary:\n{}", section.summary);
}

/// Rounds and seconds per row: 5 x 5 x 2.5 s (about 70 s with the servers'
/// start) in a full run.
pub fn plan(quick: bool) -> (usize, f64) {
    if quick {
        (3, 0.5)
    } else {
        (5, 2.5)
    }
}

/// `results` with `section` in place of its old section 8, or before the
/// summary when it has none.
fn splice(results: &str, section: &str) -> String {
    if let Some(at) = results.find(HEADING) {
        let rest = &results[at + HEADING.len()..];
        let end = rest
            .find("\n## ")
            .map_or(results.len(), |e| at + HEADING.len() + e + 1);
        return format!("{}{section}{}", &results[..at], &results[end..]);
    }
    match results.find("\n## Summary") {
        Some(at) => format!("{}\n{section}{}", &results[..at], &results[at + 1..]),
        None => format!("{results}\n{section}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_is_put_in_place_once() {
        let base = "# r\n\n## 7. x\n\ntext\n\n## Summary\n\n- a\n";
        let once = splice(base, "## 8. Clusters and Sentinel\n\nv1\n\n");
        assert_eq!(
            once,
            "# r\n\n## 7. x\n\ntext\n\n## 8. Clusters and Sentinel\n\nv1\n\n## Summary\n\n- a\n"
        );
        let twice = splice(&once, "## 8. Clusters and Sentinel\n\nv2\n\n");
        assert_eq!(twice, once.replace("v1", "v2"));
    }
}
