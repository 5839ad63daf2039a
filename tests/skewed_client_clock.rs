//! A client's wall clock does not decide who is served (2026-11-28): a
//! queued wait's ticket was the client's clock when its call began, so a
//! client an hour behind went first in every queue (47 sections to the
//! skewed side's 456 in 10 s), one an hour ahead starved itself (23 to
//! 612), and one past 2^53 µs was refused on every contended wait. Now a
//! ticket is on the servers' clock (client/src/server_clock.rs).
//!
//! Two processes wait on one hot name through the same three servers:
//! this test binary run again (`worker`), one of them under the clock shim
//! (testkit/clockshim.c), which moves only its wall clock.

mod common;
use common::*;
use redis_lock_client::{Builder, Error};
use shim::ClockOffset;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// In a worker: "URLS|SECONDS|NAME" (comma-separated URLs, how long to
/// loop, the name to lock).
const WORKER: &str = "SKEWED_CLOCK_WORKER";
/// Waiting loops per process.
const LOOPS: usize = 4;

/// Not a test of its own: the body of a worker process, started by
/// `each_side_is_served_whatever_its_clock_says` with `WORKER` set. Prints
/// the sections it held.
#[test]
fn worker() {
    let Ok(spec) = std::env::var(WORKER) else {
        return;
    };
    let mut parts = spec.split('|');
    let (urls, seconds, name) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap().to_string(),
    );
    let urls: Vec<String> = urls.split(',').map(String::from).collect();
    let run_for = Duration::from_secs_f64(seconds.parse().unwrap());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sections = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        let stop = Instant::now() + run_for;
        let mut loops = Vec::new();
        for _ in 0..LOOPS {
            let locker = Builder::new(&urls)
                .ttl(Duration::from_secs(10))
                .node_timeout(Duration::from_millis(500))
                .build()
                .unwrap();
            let (sections, failures) = (sections.clone(), failures.clone());
            let name = name.clone();
            loops.push(tokio::spawn(async move {
                while Instant::now() < stop {
                    let left = stop.saturating_duration_since(Instant::now());
                    match locker.lock(&name, left).await {
                        Ok(lock) => {
                            sections.fetch_add(1, Ordering::Relaxed);
                            // A slow answer on a loaded machine is not
                            // what this is about.
                            if locker.unlock(&lock).await.is_err() {
                                failures.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        // Refused (a ticket past 2^53 − 1): never served.
                        Err(e @ (Error::Rejected { .. } | Error::Config(_))) => panic!("{e}"),
                        Err(Error::Taken) => {}
                        Err(_) => {
                            failures.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }));
        }
        for l in loops {
            l.await.unwrap();
        }
    });
    let failures = failures.load(Ordering::Relaxed);
    println!(
        "SECTIONS {} ({failures} failures)",
        sections.load(Ordering::Relaxed)
    );
}

/// Start a worker locking `name` for `run_for`, its wall clock moved by `offset`.
fn start_worker(
    urls: &[String],
    name: &str,
    run_for: Duration,
    offset: &ClockOffset,
) -> std::process::Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["worker", "--exact", "--nocapture", "--test-threads=1"])
        .env(
            WORKER,
            format!("{}|{}|{name}", urls.join(","), run_for.as_secs_f64()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.envs(offset.env()).spawn().unwrap()
}

fn sections_of(child: std::process::Child, who: &str) -> u64 {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{who} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.split("SECTIONS ").nth(1))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("{who} printed no count: {stdout}"));
    line.trim().parse().unwrap()
}

#[test]
fn each_side_is_served_whatever_its_clock_says() {
    let nodes = Server::start_n(3);
    let urls = urls(&nodes);
    let dir = std::env::temp_dir().join(format!("skewed-clock-{}", std::process::id()));
    let (skewed_dir, honest_dir) = (dir.join("skewed"), dir.join("honest"));
    std::fs::create_dir_all(&skewed_dir).unwrap();
    std::fs::create_dir_all(&honest_dir).unwrap();
    let offset = ClockOffset::new(&skewed_dir);
    // Both sides run under the shim (it costs each clock read a little),
    // the honest one moved by nothing.
    let right = ClockOffset::new(&honest_dir);
    let run_for = Duration::from_secs(3);
    let mut report = Vec::new();
    // An hour and five seconds either way, and past 2^53 µs (the year 2255).
    for seconds in [-3600, 3600, -5, 5, 7_300_000_000] {
        offset.set(seconds);
        // A name per run: a lock a run's last unlock could not release
        // (a timeout on a loaded machine) must not hold up the next run.
        let name = format!("hot{seconds}");
        let skewed = start_worker(&urls, &name, run_for, &offset);
        let honest = start_worker(&urls, &name, run_for, &right);
        let skewed = sections_of(skewed, &format!("the worker {seconds} s off"));
        let honest = sections_of(honest, "the worker with the right time");
        let share = skewed as f64 / (skewed + honest).max(1) as f64;
        println!("clock {seconds:+} s: skewed {skewed}, honest {honest} ({share:.2})");
        report.push((seconds, skewed, honest, share));
    }
    let _ = std::fs::remove_dir_all(&dir);
    for &(seconds, skewed, honest, share) in &report {
        assert!(
            skewed > 0 && honest > 0,
            "{seconds:+} s: a side starved: {report:?}"
        );
        // First come, first served on the servers' clock: the skewed side
        // gets about half (before: 0.91 an hour behind, 0.04 ahead).
        assert!(
            (0.2..=0.8).contains(&share),
            "{seconds:+} s: the skewed side's share {share:.2}: {report:?}"
        );
    }
}
