//! `make bench`: native LOCK.* against the SET NX PX + Lua recipes and the
//! peer libraries, measured side by side in one run on this machine.
//! Prints a summary of ratios and writes bench/RESULTS.md and bench/*.svg.
//!
//! BENCH_QUICK=1 runs a smoke version in about two minutes (every row, short
//! runs, two quorum rounds); the full run takes about 15 minutes.

mod growth;
mod limit_run;
mod memory;
mod peers;
mod quorum;
mod quorum_contention;
mod quorum_ratios;
mod quorum_rounds;
mod redisson_rwlock;
mod rw_contention;
mod server_side;
mod shared_cost;
mod shared_locks;
mod svg;
mod topologies;

use peers::Kind;
use redis_lock_bench::{contention, server_cost, stats, waiter_memory};
use redis_lock_testkit::{align_token_counters, urls, Server};
use std::fmt::Write as _;
use std::path::Path;

struct Plan {
    /// Server-side rounds (section 1).
    rounds: usize,
    requests: usize,
    memory_sizes: Vec<usize>,
    /// Section 3: interleaved rounds, sequential cycles per round, seconds
    /// per throughput figure.
    quorum_rounds: usize,
    iterations: usize,
    secs: f64,
    /// Section 4a (one server) and 4b (N servers): seconds per row.
    hot_secs: f64,
    quorum_hot_secs: f64,
    held_sizes: Vec<usize>,
    waiter_counts: Vec<usize>,
    /// Section 6: clients per kind (connected, BLPOP, LOCK WAIT).
    waiting_clients: usize,
}

/// One row of a hot-key table; `label` holds the leading cells.
fn contention_line(label: &str, r: &contention::Row) -> String {
    format!(
        "| {label} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} | {} |",
        r.sections_per_s,
        r.handoff_p50_us,
        r.handoff_p99_us,
        r.max_wait_ms,
        r.wait_stddev_ms,
        r.min_sections
    )
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
            quorum_rounds: 2,
            iterations: 200,
            secs: 0.3,
            hot_secs: 1.0,
            quorum_hot_secs: 1.0,
            held_sizes: vec![1_000],
            waiter_counts: vec![10],
            waiting_clients: 300,
        }
    } else {
        Plan {
            rounds: 3,
            requests: 500_000,
            memory_sizes: vec![1_000, 100_000, 1_000_000],
            quorum_rounds: 3,
            iterations: 3000,
            secs: 2.0,
            hot_secs: 6.0,
            quorum_hot_secs: 4.0,
            held_sizes: vec![1_000, 10_000, 100_000, 1_000_000],
            waiter_counts: vec![1, 100, 1_000, 10_000],
            waiting_clients: 3_000,
        }
    };
    if std::env::var("BENCH_SECTIONS").is_ok_and(|v| v == "shared") {
        return shared_locks::only(quick).await;
    }
    if std::env::var("BENCH_SECTIONS").is_ok_and(|v| v == "shared-cost") {
        return shared_locks::cost_only(quick);
    }
    if std::env::var("BENCH_SECTIONS").is_ok_and(|v| v == "topologies") {
        return topologies::only(quick).await;
    }
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
    eprintln!("[1/6] server-side cost (redis-benchmark)...");
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
    eprintln!("      ... and each LOCK.* against the built-in of its kind");
    let cost = server_cost::run(
        &server,
        plan.rounds.max(2),
        plan.requests,
        &[100_000, 1_000_000],
    );
    writeln!(
        md,
        "### 1b. Against the server's own commands\n\n{}",
        cost.markdown()
    )
    .unwrap();
    for p in &cost.pairs {
        summary += &format!(
            "| {} / {}: server time {}, pipelined {} |\n",
            p.ours,
            p.theirs,
            p.time_ratio().ratio(),
            p.throughput_ratio().ratio()
        );
    }
    for m in &cost.memory {
        summary += &format!(
            "| memory per lock / string with PX ({} keys): {} |\n",
            m.keys,
            m.ratio().ratio()
        );
    }

    // 2. memory
    eprintln!("[2/6] memory per lock...");
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
    eprintln!(
        "[3/6] quorum client vs floor and peers, {} interleaved rounds...",
        plan.quorum_rounds
    );
    let nodes: Vec<Server> = Server::start_n(5);
    // As on nodes up for over a minute (see align_token_counters).
    align_token_counters(&nodes);
    let all_urls: Vec<String> = urls(&nodes);
    let rounds =
        quorum_rounds::run(&all_urls, plan.quorum_rounds, plan.iterations, plan.secs).await;
    writeln!(md, "\n## 3. Quorum lock + unlock\n\nUncontended lock + unlock on N local servers with the module: the nodes' fencing-token counters aligned first, as on nodes up for over a minute (a fresh node counts from its own start + 60 s); sequential latency over {} cycles (p50, p99), then throughput with 1, 16 and 64 concurrent tasks ({} s each, a name per task). {} interleaved rounds: round r runs every client once (in an order rotated each round) before round r + 1; each figure is the median over rounds with the min–max in brackets.\n\n- **floor**: the cheapest fan-out a client can do. A lock + unlock needs two round trips to the N nodes, so two rounds of N `PING`s *joined on the calling task* (`futures::future::join_all`) over one persistent multiplexed connection per node. The spawned-task variant (a tokio task per node per round, as the floor was measured before) is shown for reference only.\n- **redis-lock**: the Rust client's `try_lock` + `unlock`, fencing on (the default) and off; the **Python package** `redis_lock_client` is the same client behind PyO3 (`lock(name, auto_renew=False).release()`), threads instead of tasks; the **Node package** `redis-lock-client` is the same client behind napi-rs (`(await locker.lock(name, {{ autoRenew: false }})).release()`), promises on one event loop.\n- **peers** use their own SET NX PX + Lua recipe on the same servers (redis-py's Lock only at N = 1: it is not a quorum lock).\n", plan.iterations, plan.secs, plan.quorum_rounds).unwrap();
    writeln!(md, "| client | N | p50 us | p99 us | ops/s x1 | ops/s x16 | ops/s x64 |\n|---|---:|---:|---:|---:|---:|---:|").unwrap();
    for r in &rounds.rows {
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.client,
            r.n,
            r.spread(|s| s.p50_us).whole(),
            r.spread(|s| s.p99_us).whole(),
            r.spread(|s| s.tput[0]).whole(),
            r.spread(|s| s.tput[1]).whole(),
            r.spread(|s| s.tput[2]).whole(),
        )
        .unwrap();
    }
    writeln!(md, "\nRatios, each paired within a round (this round's redis-lock over this round's floor) and then the median (min–max) over rounds; PASS/MISS judges the median. \"redis-lock\" is the Rust client with fencing on; \"fastest peer\" is the peer (rslock, node-redlock 5 and 4, redis-semaphore, pottery, redis-py) with the best median at that figure, named in the cell; the Python targets compare the package with the Rust client it wraps and with the fastest pure-Python peer, the Node targets the Node package with the Rust client and with the fastest Node peer.\n\n| measure | target | N = 1 | N = 3 | N = 5 |\n|---|---|---|---|---|").unwrap();
    for line in quorum_ratios::table(&rounds) {
        writeln!(md, "{line}").unwrap();
        summary += &format!("| quorum: {}\n", line.trim_start_matches("| "));
    }
    let chart: Vec<(String, f64)> = rounds
        .at(3)
        .map(|r| (r.client.clone(), r.spread(|s| s.p50_us).median))
        .collect();
    std::fs::write(
        out_dir.join("quorum-latency.svg"),
        svg::bars(
            "Lock + unlock p50 latency, N = 3, median of rounds (lower is better)",
            "us",
            &chart,
        ),
    )
    .unwrap();
    writeln!(md, "\n![quorum latency](quorum-latency.svg)\n").unwrap();

    // 4. contention
    eprintln!("[4/6] contention on one hot key...");
    let url = &all_urls[..1];
    writeln!(md, "## 4. Contention on one hot key\n\n### 4a. 32 clients, one server\n\nEach client loops lock -> empty critical section -> unlock for {} s. Hand-off = a different client's acquisition minus the previous holder's release request (a releaser re-acquiring at once is barging, not a hand-off); wait = acquisition minus request; sections/s counts over the whole run, including the waits in flight at the deadline; fewest sections = the least any one client completed (0 = starved).\n\n| client | critical sections/s | hand-off p50 us | hand-off p99 us | longest wait ms | wait stddev ms | fewest sections |\n|---|---:|---:|---:|---:|---:|---:|", plan.hot_secs).unwrap();
    let mut cont = vec![
        (
            "redis-lock WAIT (server-side FIFO)".to_string(),
            Kind::Ours,
            contention::native(url, "hot", 32, plan.hot_secs).await,
        ),
        (
            "rslock 0.10.0 (polling, 0-200 ms)".to_string(),
            Kind::Peer,
            contention::rslock_polling(url, "hot:rslock", 32, plan.hot_secs).await,
        ),
    ];
    cont.extend(peers::contention(url, 32, plan.hot_secs));
    for (name, _, r) in &cont {
        writeln!(md, "{}", contention_line(name, r)).unwrap();
    }
    summary += &format!("| contention: WAIT hand-off p99 {:.0} us (target <= 1000 us); {:.0} sections/s vs {:.0} (rslock polling) |\n", cont[0].2.handoff_p99_us, cont[0].2.sections_per_s, cont[1].2.sections_per_s);
    let python_line = match cont.iter().find(|c| c.1 == Kind::OursPython) {
        Some((_, _, r)) => format!(
            "| contention: Python package longest wait {:.0} ms (target <= 50 ms) {} |",
            r.max_wait_ms,
            if r.max_wait_ms <= 50.0 {
                "PASS"
            } else {
                "MISS"
            }
        ),
        None => "| contention: Python package not measured (make python) |".into(),
    };
    writeln!(md, "\n{}", python_line.trim_matches('|').trim()).unwrap();
    summary += &format!("{python_line}\n");
    let node_line = match cont.iter().find(|c| c.1 == Kind::OursNode) {
        Some((_, _, r)) => format!(
            "| contention: Node package longest wait {:.0} ms (target <= 50 ms) {} |",
            r.max_wait_ms,
            if r.max_wait_ms <= 50.0 {
                "PASS"
            } else {
                "MISS"
            }
        ),
        None => "| contention: Node package not measured (make node) |".into(),
    };
    writeln!(md, "\n{}", node_line.trim_matches('|').trim()).unwrap();
    summary += &format!("{node_line}\n");
    let chart: Vec<(String, f64)> = cont
        .iter()
        .map(|(n, _, r)| (n.clone(), r.sections_per_s))
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

    eprintln!("      ... and on N = 3 and 5 servers");
    let quorum_hot = quorum_contention::run(&all_urls, plan.quorum_hot_secs).await;
    writeln!(md, "### 4b. {} clients, one key, N = 3 and 5 servers\n\nThe same loop for {} s on a quorum. redis-lock: the public `Locker::lock(name, 30 s)` (Rust), `Locker.lock(name, wait=30.0)` (Python) and `locker.lock(name, {{ wait: 30000 }})` (Node), however the client waits; the others poll as their libraries do. Targets for the redis-lock rows: hand-off p99 <= {:.0} ms, longest wait <= {:.0} ms, every client completes sections.\n\n| client | N | critical sections/s | hand-off p50 us | hand-off p99 us | longest wait ms | wait stddev ms | fewest sections |\n|---|---:|---:|---:|---:|---:|---:|---:|", quorum_contention::CLIENTS, plan.quorum_hot_secs, quorum_contention::MAX_HANDOFF_P99_US / 1000.0, quorum_contention::MAX_WAIT_MS).unwrap();
    for m in &quorum_hot {
        let label = format!("{} | {}", m.client, m.n);
        writeln!(md, "{}", contention_line(&label, &m.row)).unwrap();
    }
    writeln!(md, "\n| redis-lock row | hand-off p99 (<= {:.0} ms) | longest wait (<= {:.0} ms) | every client completes sections |\n|---|---|---|---|", quorum_contention::MAX_HANDOFF_P99_US / 1000.0, quorum_contention::MAX_WAIT_MS).unwrap();
    for line in quorum_contention::targets(&quorum_hot) {
        writeln!(md, "{line}").unwrap();
        summary += &format!("{line}\n");
    }
    writeln!(md).unwrap();
    drop(nodes);

    // 5. growth
    eprintln!("[5/6] growth...");
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

    // 6. memory per waiting client
    eprintln!("[6/6] memory per waiting client...");
    let waiting = waiter_memory::run(plan.waiting_clients);
    writeln!(md, "\n## 6. Memory per waiting client\n\n{} clients of each kind, each on its own connection, on a fresh server: `used_memory` above the baseline per client once all are blocked, and again {} s later (the server's client cron has trimmed idle query and reply buffers by then). Then all disconnect at once: time until `used_memory` is back within 1 MB of the baseline (given up after 120 s), and what is left 3 s after that.\n\n| client | KB each, all blocked | KB each, {} s later | back within 1 MB after | left above baseline |\n|---|---:|---:|---:|---:|", plan.waiting_clients, 7, 7).unwrap();
    let kb = |bytes: f64| bytes / 1024.0;
    for r in &waiting {
        let back = r.back_after.map_or("not in 120 s".to_string(), |d| {
            format!("{:.1} s", d.as_secs_f64())
        });
        writeln!(
            md,
            "| {} | {:.1} | {:.1} | {back} | {:.2} MB |",
            r.kind.label(),
            kb(r.blocked),
            kb(r.settled),
            r.left_bytes as f64 / (1 << 20) as f64
        )
        .unwrap();
    }
    let of = |kind: waiter_memory::Kind| waiting.iter().find(|r| r.kind == kind).unwrap();
    let (idle, blpop, lock) = (
        of(waiter_memory::Kind::Idle),
        of(waiter_memory::Kind::Blpop),
        of(waiter_memory::Kind::LockWait),
    );
    writeln!(md, "\nBeyond the connection's own cost: a LOCK.ACQUIRE WAIT waiter {:.1} KB ({:.1} KB once settled), a BLPOP waiter {:.1} KB ({:.1} KB). The waiter's extra is the module API's blocked-client handle and its two temporary clients; the server pools those after the waiters leave and frees at most 50 every 100 ms (`modulesCron`), so about 250 waiters' worth a second.", kb(lock.blocked - idle.blocked), kb(lock.settled - idle.settled), kb(blpop.blocked - idle.blocked), kb(blpop.settled - idle.settled)).unwrap();
    summary += &format!(
        "| memory per LOCK WAIT waiter ({} clients): {:.0} KB with its connection, {:.0} KB beyond it (BLPOP waiter: {:.0} KB beyond); back within 1 MB {} after they left |\n",
        plan.waiting_clients,
        kb(lock.blocked),
        kb(lock.blocked - idle.blocked),
        kb(blpop.blocked - idle.blocked),
        lock.back_after
            .map_or("not in 120 s".to_string(), |d| format!("{:.0} s", d.as_secs_f64()))
    );

    // 7. shared locks and semaphores, beside section 1's ratios above
    let shared = shared_locks::run(&server, quick, &summary).await;
    md += &shared.md;
    summary += &shared.summary;

    // 8. the client through cluster and Sentinel nodes
    let (rounds, secs) = topologies::plan(quick);
    let topo = topologies::run(rounds, secs).await;
    md += &topo.md;
    summary += &topo.summary;

    writeln!(md, "\n## Summary\n").unwrap();
    for line in summary.lines() {
        writeln!(
            md,
            "- {}",
            line.trim_matches('|').trim().replace(" | ", "; ")
        )
        .unwrap();
    }
    // Measured by hand with redis-lock-profile under perf: appended as is.
    md += include_str!("../where-time-goes.md");
    std::fs::write(out_dir.join("RESULTS.md"), &md).unwrap();
    println!("{md}");
    eprintln!("\nSummary (also in bench/RESULTS.md):\n{summary}");
}
