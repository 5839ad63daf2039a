//! Section 5: does cost stay flat as held locks (1k -> 1M) and waiters
//! (1 -> 10k, on one key and on as many keys) grow?

use crate::stats::{percentile, us};
use redis_lock_testkit::Server;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub struct Row {
    pub label: String,
    pub acquire_rps: f64,
    pub ping_p50_us: f64,
    pub ping_p99_us: f64,
}

fn ping_latency(c: &mut redis::Connection) -> (f64, f64) {
    let mut samples: Vec<Duration> = (0..2000)
        .map(|_| {
            let t = Instant::now();
            redis::cmd("PING").query::<String>(c).unwrap();
            t.elapsed()
        })
        .collect();
    (
        us(percentile(&mut samples, 50.0)),
        us(percentile(&mut samples, 99.0)),
    )
}

/// Pipelined `LOCK.ACQUIRE` on new keys (20 clients, 32 deep).
fn acquire_rps(port: u16) -> f64 {
    let args = ["LOCK.ACQUIRE", "new:__rand_int__", "owner", "60000"].map(String::from);
    crate::server_side::benchmark(port, 32, 300_000, 100_000_000, &args)
}

fn measure(server: &Server, c: &mut redis::Connection, label: String) -> Row {
    let (p50, p99) = ping_latency(c);
    Row {
        label,
        acquire_rps: acquire_rps(server.port),
        ping_p50_us: p50,
        ping_p99_us: p99,
    }
}

fn fill(c: &mut redis::Connection, n: usize) {
    // The module's default lock.max-ttl-ms: held for the whole measurement.
    fill_locks(c, n, "held", 600_000);
}

/// `n` locks `prefix:0..n`, pipelined in batches.
fn fill_locks(c: &mut redis::Connection, n: usize, prefix: &str, ttl_ms: u64) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let mut p = redis::pipe();
        for i in chunk {
            p.cmd("LOCK.ACQUIRE")
                .arg(format!("{prefix}:{i}"))
                .arg("holder")
                .arg(ttl_ms)
                .ignore();
        }
        p.query::<()>(c).unwrap();
    }
}

/// `n` clients blocked in LOCK.ACQUIRE ... WAIT 0, on one key or on n keys.
fn waiters(port: u16, n: usize, one_key: bool) -> Vec<TcpStream> {
    (0..n)
        .map(|i| {
            let key = if one_key { "held:0".to_string() } else { format!("held:{i}") };
            let owner = format!("w{i}");
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let cmd = format!(
                "*6\r\n$12\r\nLOCK.ACQUIRE\r\n${}\r\n{key}\r\n${}\r\n{owner}\r\n$5\r\n60000\r\n$4\r\nWAIT\r\n$1\r\n0\r\n",
                key.len(),
                owner.len()
            );
            s.write_all(cmd.as_bytes()).unwrap();
            s
        })
        .collect()
}

pub fn run(server: &Server, held_sizes: &[usize], waiter_counts: &[usize]) -> Vec<Row> {
    let mut c = server.conn();
    let mut rows = Vec::new();
    for &n in held_sizes {
        redis::cmd("FLUSHALL").query::<()>(&mut c).unwrap();
        fill(&mut c, n);
        rows.push(measure(server, &mut c, format!("{n} locks held")));
    }
    for &w in waiter_counts {
        for one_key in [true, false] {
            redis::cmd("FLUSHALL").query::<()>(&mut c).unwrap();
            fill(&mut c, if one_key { 1 } else { w });
            let conns = waiters(server.port, w, one_key);
            let info = |c: &mut redis::Connection| -> usize {
                let text: String = redis::cmd("INFO").arg("lock").query(c).unwrap();
                text.lines()
                    .find_map(|l| l.strip_prefix("lock_waiters:"))
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap()
            };
            let start = Instant::now();
            while info(&mut c) < w && start.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let label = if one_key {
                format!("{w} waiters on one key")
            } else {
                format!("{w} keys with a waiter")
            };
            rows.push(measure(server, &mut c, label));
            drop(conns);
        }
    }
    redis::cmd("FLUSHALL").query::<()>(&mut c).unwrap();
    rows
}

/// Active expiry: how long until `n` locks that all expired at once are
/// gone from memory (no command touches them), at the server's default hz.
pub fn expiry_sweep(n: usize) -> Duration {
    let server = Server::start();
    let mut c = server.conn();
    fill_locks(&mut c, n, "short", 1);
    let started = Instant::now();
    while redis::cmd("DBSIZE").query::<usize>(&mut c).unwrap() > 0 {
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "sweep stalled"
        );
    }
    started.elapsed()
}
