//! Section 7c: a fleet-wide concurrency limit from the CLI. 16
//! `redis-lock run --limit 4` processes started at once on 3 servers, each
//! running a command that records when it starts and ends: at most 4 may
//! run at once, and every one must be served.

use redis_lock_testkit::{align_token_counters, urls, workspace_binary, Server};
use std::process::Command;
use std::time::{Duration, Instant};

pub const CONTENDERS: usize = 16;
pub const LIMIT: u32 = 4;
/// How long each command runs.
pub const COMMAND_MS: u64 = 200;

pub struct Run {
    /// Contenders whose command ran and whose `run` exited 0.
    pub served: usize,
    /// Most commands running at once (by their own start and end times).
    pub max_running: usize,
    pub total: Duration,
    /// The least the run could take: ceil(16 / 4) rounds of the command.
    pub floor: Duration,
}

/// Nanoseconds since the epoch written by `date +%s%N` into `path`.
fn stamp(path: &std::path::Path) -> Option<u128> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

pub fn run() -> Run {
    let nodes = Server::start_n(3);
    align_token_counters(&nodes);
    let servers = urls(&nodes).join(",");
    let dir = std::env::temp_dir().join(format!("redis-lock-bench-limit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cli = workspace_binary("redis-lock");
    let start = Instant::now();
    let children: Vec<_> = (0..CONTENDERS)
        .map(|i| {
            let script = format!(
                "date +%s%N > {d}/{i}.start; sleep {s}; date +%s%N > {d}/{i}.end",
                d = dir.display(),
                s = COMMAND_MS as f64 / 1000.0
            );
            Command::new(&cli)
                .args(["run", "--servers", &servers, "--limit"])
                .arg(LIMIT.to_string())
                .args(["--wait", "60s", "bench:limit", "--", "sh", "-c", &script])
                // Each run says what it acquired; the counts below say more.
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("redis-lock (cargo build --release)")
        })
        .collect();
    let ok = children
        .into_iter()
        .map(|mut c| c.wait().map(|s| s.success()).unwrap_or(false))
        .collect::<Vec<bool>>();
    let total = start.elapsed();
    let windows: Vec<(u128, u128)> = (0..CONTENDERS)
        .filter(|&i| ok[i])
        .filter_map(|i| {
            let s = stamp(&dir.join(format!("{i}.start")))?;
            let e = stamp(&dir.join(format!("{i}.end")))?;
            Some((s, e))
        })
        .collect();
    // Most windows open at once: +1 at each start, -1 at each end (an end
    // before a start at the same instant).
    let mut edges: Vec<(u128, i32)> = windows
        .iter()
        .flat_map(|&(s, e)| [(s, 1), (e, -1)])
        .collect();
    edges.sort();
    let (mut now, mut max_running) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        max_running = max_running.max(now);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let rounds = CONTENDERS.div_ceil(LIMIT as usize) as u32;
    Run {
        served: windows.len(),
        max_running: max_running as usize,
        total,
        floor: Duration::from_millis(COMMAND_MS) * rounds,
    }
}
