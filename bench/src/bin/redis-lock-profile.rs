//! A steady load of quorum lock+unlock cycles (or of the
//! joined-PING floor) to run under `perf record`, so bench/RESULTS.md can
//! say where a lock's client time goes.
//!
//! usage: redis-lock-profile ours|ours-wait|ours-hot|raw|floor N TASKS SECONDS
//!
//! `raw` sends the same LOCK.ACQUIRE / LOCK.RELEASE pair as `ours`, joined
//! like the floor, with no client logic: ours vs raw is the client's cost,
//! raw vs floor the cost of the commands themselves. `ours-wait` is
//! `lock(name, 5 s)` on the same free names: the usual call, which must
//! cost what `try_lock` does when nothing is held. `ours-hot` is
//! `lock(name, 30 s)` with every task on one name: the hot key of
//! `make bench` section 4b, cycles/s = critical sections/s.

mod cycle;

use cycle::Load;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: redis-lock-profile ours|ours-wait|ours-hot|raw|floor N TASKS SECONDS";
    let [_, mode, n, tasks, secs] = &args[..] else {
        panic!("{usage}")
    };
    let (n, tasks, secs): (usize, usize, f64) = (
        n.parse().expect(usage),
        tasks.parse().expect(usage),
        secs.parse().expect(usage),
    );
    let load = Arc::new(Load::start(n).await);
    let cpu_before = process_cpu_seconds();
    let done = Arc::new(AtomicU64::new(0));
    let stop = Instant::now() + Duration::from_secs_f64(secs);
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (load, done, mode) = (load.clone(), done.clone(), mode.clone());
        handles.push(tokio::spawn(async move {
            let name = match mode.as_str() {
                "ours-hot" => "profile:hot".to_string(),
                _ => format!("profile:{t}"),
            };
            while Instant::now() < stop {
                load.cycle(&mode, &name).await;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    // Client CPU per cycle (this process only; the servers are others):
    // steadier than cycles/s on a shared, noisy machine.
    let cycles = done.load(Ordering::Relaxed) as f64;
    let cpu = process_cpu_seconds() - cpu_before;
    // Server commands per cycle (all servers): 2N for a lock + unlock in one
    // round each; a fencing round adds `lock.fence` calls.
    let calls: Vec<String> = load
        .server_calls()
        .into_iter()
        .map(|(cmd, c)| format!("{cmd} {:.2}", c as f64 / cycles))
        .collect();
    println!(
        "{mode} N={n} tasks={tasks}: {:.0} cycles/s, client CPU {:.1} µs/cycle; per cycle: {}",
        cycles / secs,
        cpu * 1e6 / cycles,
        calls.join(", ")
    );
}

/// User + system CPU time of this process so far (/proc, clock ticks).
fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name (which is in parentheses).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}
