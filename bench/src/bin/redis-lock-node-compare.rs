//! Builds of the Node package side by side in one run, beside the Rust
//! client they wrap and the Node peers: the figures of the Node targets of
//! `make bench` (issue 29), for a change to the binding.
//!
//! usage: redis-lock-node-compare ROUNDS ITERATIONS SECS HOT_SECS LABEL=INDEX_MJS...
//!   e.g. redis-lock-node-compare 3 2000 2 4 before=/tmp/old/index.mjs after=$PWD/bindings/node/index.mjs
//!
//! Five servers with the module (token counters aligned). Each round, at
//! N = 1, 3, 5: the Rust client's sequential lock + unlock p50 and its
//! throughput with 64 tasks (as section 3 measures it), the Node peers
//! (bench/peers/peers.mjs, their rows once a round), then each build's row
//! (the builds' order rotated each round); then each build's hot key (32
//! clients on one server, `lock(name, { wait })`). Interleaved so that a slow
//! spell of a shared machine lands in one round of every client. Prints
//! each row as it comes (JSON), then per build and N the ratios paired
//! within a round: median (min-max) over rounds.

use redis_lock_bench::stats::{percentile, us, Spread};
use redis_lock_client::{Builder, Locker};
use redis_lock_testkit::{align_token_counters, urls, Server};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NS: [usize; 3] = [1, 3, 5];

/// This process's CPU time so far (user + system), from /proc.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are
    // the 12th and 13th of them, in clock ticks (100 a second on Linux).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let f: Vec<f64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

/// The Rust client's sequential p50 (us), cycles/s with 64 tasks, and the
/// process's CPU per cycle then (us).
async fn rust_row(urls: &[String], iterations: usize, secs: f64) -> (f64, f64, f64) {
    let locker = Builder::new(urls)
        .ttl(Duration::from_secs(10))
        .build()
        .unwrap();
    let cycle = |l: Locker, name: String| async move {
        let lock = l.try_lock(&name).await.expect("uncontended lock");
        l.unlock(&lock).await.expect("unlock");
    };
    for i in 0..50 {
        cycle(locker.clone(), format!("rwarm:{i}")).await;
    }
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let t = Instant::now();
        cycle(locker.clone(), format!("rlat:{}", i % 64)).await;
        samples.push(t.elapsed());
    }
    let p50 = us(percentile(&mut samples, 50.0));
    let done = Arc::new(AtomicU64::new(0));
    let cpu = cpu_seconds();
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for t in 0..64 {
        let (locker, done) = (locker.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let name = format!("rtput:{t}");
            while Instant::now() < deadline {
                cycle(locker.clone(), name.clone()).await;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let cycles = done.load(Ordering::Relaxed) as f64;
    let cpu_us = (cpu_seconds() - cpu) * 1e6 / cycles.max(1.0);
    (p50, cycles / secs, cpu_us)
}

/// peers.mjs's JSON rows for `args`, with `package` as the Node package
/// (None: the peers only).
fn node_rows(args: &[String], package: Option<&str>) -> Vec<serde_json::Value> {
    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/peers.mjs");
    let mut cmd = Command::new("node");
    cmd.arg(driver).args(args);
    match package {
        Some(p) => cmd
            .env("BENCH_NODE_PACKAGE", p)
            .env("BENCH_NODE_ROWS", "ours"),
        None => cmd.env("BENCH_NODE_PACKAGE", "/nonexistent/index.mjs"),
    };
    let out = cmd.output().expect("node runs");
    if !out.status.success() {
        eprintln!(
            "peers.mjs {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn f(v: &serde_json::Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or(f64::NAN)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: redis-lock-node-compare ROUNDS ITERATIONS SECS HOT_SECS LABEL=INDEX_MJS...";
    let [_, rounds, iterations, secs, hot_secs, builds @ ..] = &args[..] else {
        panic!("{usage}")
    };
    let (rounds, iterations, secs, hot_secs): (usize, usize, f64, f64) = (
        rounds.parse().expect(usage),
        iterations.parse().expect(usage),
        secs.parse().expect(usage),
        hot_secs.parse().expect(usage),
    );
    let builds: Vec<(String, String)> = builds
        .iter()
        .map(|b| {
            let (l, p) = b.split_once('=').expect(usage);
            (l.to_string(), p.to_string())
        })
        .collect();
    let nodes = Server::start_n(5);
    align_token_counters(&nodes);
    let all = urls(&nodes);
    // Per round, N and build: p50 over Rust's, tput x64 over the fastest
    // Node peer's, CPU per cycle at x64 over Rust's and over the peer's
    // with the least.
    let mut ratios: Vec<(usize, String, [f64; 4])> = Vec::new();
    let mut hot: Vec<(String, f64, f64)> = Vec::new();
    for round in 0..rounds {
        for n in NS {
            let u = &all[..n];
            let (rust_p50, rust_tput, rust_cpu) = rust_row(u, iterations, secs).await;
            println!(
                "{}",
                serde_json::json!({"round": round, "n": n, "client": "rust", "p50_us": rust_p50, "tput64": rust_tput, "cpu_us64": rust_cpu})
            );
            let q = [
                "quorum".to_string(),
                u.join(","),
                iterations.to_string(),
                secs.to_string(),
            ];
            let (mut best_peer, mut least_cpu) = (0.0f64, f64::INFINITY);
            for v in node_rows(&q, None) {
                best_peer = best_peer.max(f(&v, "tput64"));
                least_cpu = least_cpu.min(f(&v, "cpu_us64"));
                println!("{}", serde_json::json!({"round": round, "n": n, "row": v}));
            }
            for i in 0..builds.len() {
                let (label, path) = &builds[(i + round) % builds.len()];
                for v in node_rows(&q, Some(path)) {
                    println!(
                        "{}",
                        serde_json::json!({"round": round, "n": n, "build": label, "row": v})
                    );
                    ratios.push((
                        n,
                        label.clone(),
                        [
                            f(&v, "p50_us") / rust_p50,
                            f(&v, "tput64") / best_peer,
                            f(&v, "cpu_us64") / rust_cpu,
                            f(&v, "cpu_us64") / least_cpu,
                        ],
                    ));
                }
            }
        }
        let h = [
            "contention".to_string(),
            all[0].clone(),
            "32".to_string(),
            hot_secs.to_string(),
        ];
        for i in 0..builds.len() {
            let (label, path) = &builds[(i + round) % builds.len()];
            for v in node_rows(&h, Some(path)) {
                println!(
                    "{}",
                    serde_json::json!({"round": round, "hot": true, "build": label, "row": v})
                );
                hot.push((label.clone(), f(&v, "max_wait_ms"), f(&v, "sections_per_s")));
            }
        }
    }
    println!("\nbuild | N | p50 / Rust's | ops/s x64 / fastest Node peer's | CPU per cycle x64 / Rust's | CPU per cycle x64 / least Node peer's");
    for (label, _) in &builds {
        for n in NS {
            let pick = |k: usize| {
                let xs: Vec<f64> = ratios
                    .iter()
                    .filter(|r| &r.1 == label && r.0 == n)
                    .map(|r| r.2[k])
                    .collect();
                Spread::of(&xs).ratio()
            };
            println!(
                "{label} | {n} | {} | {} | {} | {}",
                pick(0),
                pick(1),
                pick(2),
                pick(3)
            );
        }
    }
    println!("\nbuild | hot key, 32 clients, one server: longest wait ms | sections/s");
    for (label, _) in &builds {
        let of = |g: fn(&(String, f64, f64)) -> f64| {
            let xs: Vec<f64> = hot.iter().filter(|h| &h.0 == label).map(g).collect();
            Spread::of(&xs).whole()
        };
        println!("{label} | {} | {}", of(|h| h.1), of(|h| h.2));
    }
}
