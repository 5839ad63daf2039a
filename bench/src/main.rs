//! `make bench`: native LOCK.* against the SET NX PX + Lua recipes and the
//! peer libraries, measured side by side in one run on this machine.
//! Prints a summary of ratios and writes bench/RESULTS.md and bench/*.svg.
//!
//! BENCH_QUICK=1 runs a smoke version in well under a minute.

mod contention;
mod growth;
mod memory;
mod peers;
mod quorum;
mod server_side;
mod stats;
mod svg;

use quorum::Client;
use redis_lock_testkit::Server;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

struct Plan {
    rounds: usize,
    requests: usize,
    memory_sizes: Vec<usize>,
    iterations: usize,
    secs: f64,
    held_sizes: Vec<usize>,
    waiter_counts: Vec<usize>,
}

fn version(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .unwrap_or_else(|_| "not found".into())
}

#[tokio::main]
async fn main() {
    let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1");
    let plan = if quick {
        Plan {
            rounds: 1,
            requests: 100_000,
            memory_sizes: vec![1_000, 10_000],
            iterations: 300,
            secs: 1.0,
            held_sizes: vec![1_000],
            waiter_counts: vec![10],
        }
    } else {
        Plan {
            rounds: 3,
            requests: 500_000,
            memory_sizes: vec![1_000, 100_000, 1_000_000],
            iterations: 3000,
            secs: 3.0,
            held_sizes: vec![1_000, 10_000, 100_000, 1_000_000],
            waiter_counts: vec![1, 100, 1_000, 10_000],
        }
    };
    let out_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut md = String::new();
    let mut summary = String::new();
    writeln!(md, "# redis-lock benchmark results\n").unwrap();
    writeln!(md, "Produced by `make bench` (`cargo run --release --manifest-path bench/Cargo.toml`{}) on one machine ({} cores), all servers on 127.0.0.1. Ratios compare runs made side by side in this one run; absolute numbers vary between machines and runs.\n",
        if quick { ", BENCH_QUICK=1" } else { "" }, std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)).unwrap();
    writeln!(
        md,
        "- {}\n- {}\n- redis-lock module and client 0.1.0 (this commit), rslock 0.10.0\n- {}\n",
        version(
            &redis_lock_testkit::server_binary().display().to_string(),
            &["--version"]
        ),
        version("redis-benchmark", &["--version"]),
        version("rustc", &["--version"])
    )
    .unwrap();

    // 1. server-side cost
    eprintln!("[1/5] server-side cost (redis-benchmark)...");
    let server = Server::with(&["--maxclients", "20100"], &[]);
    let rows = server_side::run(&server, plan.rounds, plan.requests);
    writeln!(md, "## 1. Server-side cost, one server\n\n`redis-benchmark -c 20 -P 32 -n {}` (pipelined) and `-P 1 -n {}` (unpipelined), random keys, median of {} interleaved rounds; usec/call from `INFO commandstats` (pipelined run). Release and extend run against {} held keys.\n", plan.requests, plan.requests / 5, plan.rounds, plan.requests).unwrap();
    writeln!(md, "| operation | command | pipelined ops/s | unpipelined ops/s | usec/call |\n|---|---|---:|---:|---:|").unwrap();
    for r in &rows {
        writeln!(
            md,
            "| {} | `{}` | {:.0} | {:.0} | {:.2} |",
            r.case, r.name, r.pipelined, r.plain, r.usec_per_call
        )
        .unwrap();
    }
    let find = |name: &str| rows.iter().find(|r| r.name == name).unwrap();
    let ratios = [
        (
            "LOCK.ACQUIRE / SET NX PX",
            find("LOCK.ACQUIRE"),
            find("SET key v NX PX"),
            0.95,
        ),
        (
            "LOCK.ACQUIRE / EVALSHA acquire",
            find("LOCK.ACQUIRE"),
            find("EVALSHA acquire (Redisson)"),
            2.5,
        ),
        (
            "LOCK.RELEASE / Lua release",
            find("LOCK.RELEASE"),
            find("EVALSHA compare-and-delete"),
            3.0,
        ),
        (
            "LOCK.EXTEND / Lua extend",
            find("LOCK.EXTEND"),
            find("EVALSHA compare-and-pexpire"),
            3.0,
        ),
    ];
    writeln!(md, "\n| ratio | pipelined | unpipelined | server time (usec/call) | target (pipelined) |\n|---|---:|---:|---:|---:|").unwrap();
    for (name, a, b, target) in &ratios {
        let line = format!(
            "| {name} | {:.2}x | {:.2}x | {:.2}x | >= {target}x |",
            a.pipelined / b.pipelined,
            a.plain / b.plain,
            b.usec_per_call / a.usec_per_call.max(1e-9)
        );
        writeln!(md, "{line}").unwrap();
        summary += &format!("{line}\n");
    }
    let chart: Vec<(String, f64)> = rows
        .iter()
        .map(|r| (format!("{}: {}", r.case, r.name), r.pipelined / 1000.0))
        .collect();
    std::fs::write(
        out_dir.join("server-side.svg"),
        svg::bars("Pipelined throughput, one server", "k ops/s", &chart),
    )
    .unwrap();
    writeln!(md, "\n![server-side](server-side.svg)\n").unwrap();

    // 2. memory
    eprintln!("[2/5] memory per lock...");
    let mem = memory::run(&server, &plan.memory_sizes);
    writeln!(md, "## 2. Memory per held lock\n\n`used_memory` delta per key after filling n keys, 32-byte owner/value, long TTL. Target: lock <= 1.2x string.\n\n| keys | SET key v PX (bytes/key) | LOCK.ACQUIRE (bytes/key) | ratio |\n|---:|---:|---:|---:|").unwrap();
    for r in &mem {
        let line = format!(
            "| {} | {:.1} | {:.1} | {:.2}x |",
            r.keys,
            r.string_bytes,
            r.lock_bytes,
            r.lock_bytes / r.string_bytes
        );
        writeln!(md, "{line}").unwrap();
    }
    if let Some(r) = mem.last() {
        summary += &format!(
            "| memory per lock / string with PX ({} keys) | {:.2}x | | | <= 1.2x |\n",
            r.keys,
            r.lock_bytes / r.string_bytes
        );
    }

    // 3. quorum latency and throughput
    eprintln!("[3/5] quorum client vs floor and peers...");
    let nodes: Vec<Server> = (0..5).map(|_| Server::start()).collect();
    let all_urls: Vec<String> = nodes.iter().map(Server::url).collect();
    writeln!(md, "\n## 3. Quorum lock + unlock\n\nSequential latency over {} cycles (uncontended, one name per cycle slot) and throughput with 1/16/64 concurrent tasks ({} s each, a name per task), N local servers with the module. Floor: two rounds of parallel `PING` to the same N nodes (a lock + unlock needs two round trips). Peers use their own SET NX PX + Lua recipe on the same servers.\n", plan.iterations, plan.secs).unwrap();
    writeln!(md, "| client | N | p50 us | p99 us | ops/s x1 | ops/s x16 | ops/s x64 |\n|---|---:|---:|---:|---:|---:|---:|").unwrap();
    let mut quorum_rows: Vec<(String, usize, f64, f64)> = Vec::new();
    for n in [1usize, 3, 5] {
        let urls = &all_urls[..n];
        let clients: Vec<(&str, Client)> = vec![
            ("floor: 2x parallel PING", Client::floor(urls).await),
            ("redis-lock (fencing on)", Client::ours(urls, true)),
            ("redis-lock (fencing off)", Client::ours(urls, false)),
            ("rslock 0.10.0", Client::rslock(urls)),
        ];
        for (name, client) in clients {
            let lat = quorum::latency(&client, plan.iterations).await;
            let client = Arc::new(client);
            let mut tput = Vec::new();
            for tasks in [1, 16, 64] {
                tput.push(quorum::throughput(client.clone(), tasks, plan.secs).await);
            }
            writeln!(
                md,
                "| {name} | {n} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
                lat.p50_us, lat.p99_us, tput[0], tput[1], tput[2]
            )
            .unwrap();
            quorum_rows.push((name.to_string(), n, lat.p50_us, tput[2]));
        }
        for p in peers::quorum(urls, plan.iterations, plan.secs) {
            writeln!(
                md,
                "| {} | {n} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
                p.client, p.p50_us, p.p99_us, p.tput[0], p.tput[1], p.tput[2]
            )
            .unwrap();
            quorum_rows.push((p.client.clone(), n, p.p50_us, p.tput[2]));
        }
    }
    let p50 = |client: &str, n: usize| {
        quorum_rows
            .iter()
            .find(|r| r.0 == client && r.1 == n)
            .map(|r| r.2)
    };
    writeln!(md, "\n| N | redis-lock p50 / floor p50 (target <= 1.5x) | fastest peer p50 / redis-lock p50 (target >= 2x) |\n|---:|---:|---:|").unwrap();
    for n in [1usize, 3, 5] {
        let ours = p50("redis-lock (fencing on)", n).unwrap();
        let floor = p50("floor: 2x parallel PING", n).unwrap();
        let fastest_peer = quorum_rows
            .iter()
            .filter(|r| r.1 == n && !r.0.starts_with("redis-lock") && !r.0.starts_with("floor"))
            .map(|r| (r.2, r.0.clone()))
            .min_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        let peer = fastest_peer.map_or("n/a".to_string(), |(p, name)| {
            format!("{:.2}x ({name})", p / ours)
        });
        let line = format!("| {n} | {:.2}x | {peer} |", ours / floor);
        writeln!(md, "{line}").unwrap();
        summary += &format!(
            "| quorum N={n}: ours/floor p50 {:.2}x (<= 1.5x), fastest peer/ours {peer} (>= 2x) |\n",
            ours / floor
        );
    }
    let chart: Vec<(String, f64)> = quorum_rows
        .iter()
        .filter(|r| r.1 == 3)
        .map(|r| (r.0.clone(), r.2))
        .collect();
    std::fs::write(
        out_dir.join("quorum-latency.svg"),
        svg::bars(
            "Lock + unlock p50 latency, N = 3 (lower is better)",
            "us",
            &chart,
        ),
    )
    .unwrap();
    writeln!(md, "\n![quorum latency](quorum-latency.svg)\n").unwrap();

    // 4. contention
    eprintln!("[4/5] contention on one hot key...");
    let url = &all_urls[0];
    writeln!(md, "## 4. Contention: 32 clients, one hot key, one server\n\nEach client loops lock -> empty critical section -> unlock for {} s. Hand-off = a different client's acquisition minus the previous holder's release request (a releaser re-acquiring at once is barging, not a hand-off); wait = acquisition minus request.\n\n| client | critical sections/s | hand-off p50 us | hand-off p99 us | longest wait ms | wait stddev ms |\n|---|---:|---:|---:|---:|---:|", plan.secs * 2.0).unwrap();
    let mut cont = vec![
        (
            "redis-lock WAIT (server-side FIFO)".to_string(),
            contention::native(url, 32, plan.secs * 2.0).await,
        ),
        (
            "rslock 0.10.0 (polling, 0-200 ms)".to_string(),
            contention::rslock_polling(url, 32, plan.secs * 2.0).await,
        ),
    ];
    cont.extend(peers::contention(url, plan.secs * 2.0));
    for (name, r) in &cont {
        writeln!(
            md,
            "| {name} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} |",
            r.sections_per_s, r.handoff_p50_us, r.handoff_p99_us, r.max_wait_ms, r.wait_stddev_ms
        )
        .unwrap();
    }
    summary += &format!("| contention: WAIT hand-off p99 {:.0} us (target <= 1000 us); {:.0} sections/s vs {:.0} (rslock polling) |\n", cont[0].1.handoff_p99_us, cont[0].1.sections_per_s, cont[1].1.sections_per_s);
    let chart: Vec<(String, f64)> = cont
        .iter()
        .map(|(n, r)| (n.clone(), r.sections_per_s))
        .collect();
    std::fs::write(
        out_dir.join("contention.svg"),
        svg::bars(
            "Critical sections per second, 32 clients, one key",
            "/s",
            &chart,
        ),
    )
    .unwrap();
    writeln!(md, "\n![contention](contention.svg)\n").unwrap();
    drop(nodes);

    // 5. growth
    eprintln!("[5/5] growth...");
    let growth = growth::run(&server, &plan.held_sizes, &plan.waiter_counts);
    writeln!(md, "## 5. Growth\n\n`LOCK.ACQUIRE` throughput on new keys (`redis-benchmark -P 32 -c 20 -n 300000`) and sequential `PING` latency (2000 pings) while the server holds many locks or many blocked waiters.\n\n| state | LOCK.ACQUIRE ops/s | PING p50 us | PING p99 us |\n|---|---:|---:|---:|").unwrap();
    for r in &growth {
        writeln!(
            md,
            "| {} | {:.0} | {:.0} | {:.0} |",
            r.label, r.acquire_rps, r.ping_p50_us, r.ping_p99_us
        )
        .unwrap();
    }
    let expired = plan.held_sizes.iter().copied().max().unwrap_or(1_000);
    let swept = growth::expiry_sweep(expired);
    writeln!(
        md,
        "\nActive expiry: {expired} locks that expired together were all gone {:.1} s after the last was granted (hz 10; nothing touched them).",
        swept.as_secs_f64()
    )
    .unwrap();

    writeln!(md, "\n## Summary\n").unwrap();
    for line in summary.lines() {
        writeln!(
            md,
            "- {}",
            line.trim_matches('|').trim().replace(" | ", "; ")
        )
        .unwrap();
    }
    std::fs::write(out_dir.join("RESULTS.md"), &md).unwrap();
    println!("{md}");
    eprintln!("\nSummary (also in bench/RESULTS.md):\n{summary}");
}
