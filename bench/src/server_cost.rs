//! Each LOCK.* command against the server's own command of the same kind
//! (`LOCK.ACQUIRE` / `SET k v NX PX`, `LOCK.RELEASE` / `DEL`, `LOCK.EXTEND`
//! / `PEXPIRE`) on one server: server time per call (`INFO commandstats`
//! usec_per_call), pipelined throughput (`redis-benchmark -P 32 -c 20`,
//! random keys over 1M) and memory per held key (a lock against a string
//! with PX), in interleaved rounds, each ratio paired within its round.
//! `make bench` section 1 runs it; `redis-lock-server-cost` runs it alone.

use crate::stats::Spread;
use redis_lock_testkit::Server;
use std::process::Command;

/// 32 bytes, the length the quorum client's owners have.
pub const OWNER: &str = "0123456789abcdef0123456789abcdef";
/// Keys `lk:%012d` (locks) and `sk:%012d` (strings), 0 ..< KEYSPACE, as
/// `redis-benchmark -r` makes them.
pub const KEYSPACE: usize = 1_000_000;
const TTL_MS: u64 = 600_000;

/// One measured command: its figures per round.
#[derive(Default, Clone)]
pub struct Samples {
    pub ops_per_s: Vec<f64>,
    pub usec_per_call: Vec<f64>,
}

/// A LOCK.* command and the built-in of the same kind, round by round.
pub struct Pair {
    pub kind: &'static str,
    pub ours: &'static str,
    pub theirs: &'static str,
    pub lock: Samples,
    pub builtin: Samples,
}

impl Pair {
    fn new(kind: &'static str, ours: &'static str, theirs: &'static str) -> Pair {
        Pair {
            kind,
            ours,
            theirs,
            lock: Samples::default(),
            builtin: Samples::default(),
        }
    }

    /// Server time ratio (ours / built-in), paired round by round.
    pub fn time_ratio(&self) -> Spread {
        ratio(&self.lock.usec_per_call, &self.builtin.usec_per_call)
    }

    /// Throughput ratio (ours / built-in), paired round by round.
    pub fn throughput_ratio(&self) -> Spread {
        ratio(&self.lock.ops_per_s, &self.builtin.ops_per_s)
    }
}

fn ratio(a: &[f64], b: &[f64]) -> Spread {
    let r: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b.max(1e-9)).collect();
    Spread::of(&r)
}

/// Bytes per held key at each size, per round.
pub struct Memory {
    pub keys: usize,
    pub string: Vec<f64>,
    pub lock: Vec<f64>,
}

impl Memory {
    pub fn ratio(&self) -> Spread {
        ratio(&self.lock, &self.string)
    }
}

pub struct Report {
    pub pairs: Vec<Pair>,
    pub memory: Vec<Memory>,
    pub requests: usize,
    pub rounds: usize,
}

fn used_memory(c: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

fn flush(c: &mut redis::Connection) {
    redis::cmd("FLUSHALL").arg("SYNC").query::<()>(c).unwrap();
}

/// Keys of the built-in's runs (`sk:`) and of the lock's (`lk:`), so that
/// both can be held in one keyspace and each pair runs back to back.
fn prefix(lock: bool) -> &'static str {
    if lock {
        "lk"
    } else {
        "sk"
    }
}

/// Fill keys 0 ..< KEYSPACE, as strings with PX or as locks, all held by
/// OWNER; returns the bytes per key after each size in `marks`, counted
/// from what was used before the fill.
fn fill(c: &mut redis::Connection, lock: bool, marks: &[usize]) -> Vec<f64> {
    let before = used_memory(c);
    let mut per_key = Vec::new();
    let mut done = 0;
    while done < KEYSPACE {
        let end = (done + 10_000).min(KEYSPACE);
        let mut p = redis::pipe();
        for i in done..end {
            let key = format!("{}:{i:012}", prefix(lock));
            if lock {
                p.cmd("LOCK.ACQUIRE").arg(key).arg(OWNER).arg(TTL_MS);
            } else {
                p.cmd("SET").arg(key).arg(OWNER).arg("PX").arg(TTL_MS);
            }
            p.ignore();
        }
        p.query::<()>(c).unwrap();
        done = end;
        if marks.contains(&done) {
            per_key.push((used_memory(c) - before) / done as f64);
        }
    }
    per_key
}

/// The server runs on CPU 0 and `redis-benchmark` on CPU 1 (where the
/// machine has two): left to the scheduler, the two trade places and the
/// server's caches with them, and one run's median moved by 0.3x.
const SERVER_CPU: usize = 0;
const BENCHMARK_CPU: usize = 1;

fn two_cpus() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
}

/// `program` to run on `cpu` (through util-linux's `taskset`) when there
/// are two CPUs to keep apart.
fn pinned(cpu: usize, program: &str) -> Command {
    if !two_cpus() {
        return Command::new(program);
    }
    let mut c = Command::new("taskset");
    c.args(["-c", &cpu.to_string(), program]);
    c
}

/// Keep the server (every thread of it) on SERVER_CPU.
fn pin_server(pid: u32) {
    if two_cpus() {
        let _ = Command::new("taskset")
            .args(["-a", "-p", "-c", &SERVER_CPU.to_string(), &pid.to_string()])
            .output();
    }
}

/// requests per second reported by `redis-benchmark --csv`.
fn benchmark(port: u16, requests: usize, command: &str) -> f64 {
    let mut benchmark = pinned(BENCHMARK_CPU, "redis-benchmark");
    let out = benchmark
        .args(["-p", &port.to_string(), "-c", "20", "-P", "32"])
        .args(["-n", &requests.to_string(), "-r", &KEYSPACE.to_string()])
        .arg("--csv")
        .args(command.split_whitespace())
        .output()
        .expect("redis-benchmark (apt: redis-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .nth(1)
        .and_then(|l| l.split(',').nth(1))
        .and_then(|f| f.trim_matches('"').parse().ok())
        .unwrap_or(0.0)
}

fn usec_per_call(c: &mut redis::Connection, stat: &str) -> f64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    info.lines()
        .find(|l| l.starts_with(&format!("cmdstat_{stat}:")))
        .and_then(|l| l.split("usec_per_call=").nth(1))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// One pipelined run of `command`, with the server's time per call.
fn measure(c: &mut redis::Connection, port: u16, requests: usize, command: &str) -> (f64, f64) {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(c)
        .unwrap();
    let ops = benchmark(port, requests, command);
    let stat = command
        .split_whitespace()
        .next()
        .unwrap()
        .to_ascii_lowercase();
    (ops, usec_per_call(c, &stat))
}

/// `rounds` interleaved rounds of `requests` pipelined calls per command;
/// memory per key at each of `memory_sizes` (at most KEYSPACE) from the
/// fills that set up the release and extend runs.
pub fn run(server: &Server, rounds: usize, requests: usize, memory_sizes: &[usize]) -> Report {
    let mut c = server.conn();
    let port = server.port;
    pin_server(server.pid());
    let mut pairs = vec![
        Pair::new("acquire", "LOCK.ACQUIRE", "SET k v NX PX"),
        Pair::new("release", "LOCK.RELEASE", "DEL"),
        Pair::new("extend", "LOCK.EXTEND", "PEXPIRE"),
    ];
    let mut memory: Vec<Memory> = memory_sizes
        .iter()
        .map(|&keys| Memory {
            keys,
            string: Vec::new(),
            lock: Vec::new(),
        })
        .collect();
    let commands = |lock: bool| -> [String; 3] {
        let k = prefix(lock);
        if lock {
            [
                format!("LOCK.ACQUIRE {k}:__rand_int__ {OWNER} 30000"),
                format!("LOCK.RELEASE {k}:__rand_int__ {OWNER}"),
                format!("LOCK.EXTEND {k}:__rand_int__ {OWNER} 30000"),
            ]
        } else {
            [
                format!("SET {k}:__rand_int__ {OWNER} NX PX 30000"),
                format!("DEL {k}:__rand_int__"),
                format!("PEXPIRE {k}:__rand_int__ 30000"),
            ]
        }
    };
    let (builtin, lock) = (commands(false), commands(true));
    // Memory once, each kind alone in the keyspace (it does not vary
    // between rounds: a byte count, not a timing).
    for lock in [false, true] {
        flush(&mut c);
        for (m, bytes) in memory.iter_mut().zip(fill(&mut c, lock, memory_sizes)) {
            if lock { &mut m.lock } else { &mut m.string }.push(bytes);
        }
    }
    for round in 0..rounds {
        // Each pair back to back (the machine's noise comes in bursts),
        // the side that goes first alternating round by round.
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        let mut pair = |c: &mut redis::Connection, i: usize| {
            for side in order {
                let command = if side { &lock[i] } else { &builtin[i] };
                let (ops, usec) = measure(c, port, requests, command);
                let p = &mut pairs[i];
                let s = if side { &mut p.lock } else { &mut p.builtin };
                s.ops_per_s.push(ops);
                s.usec_per_call.push(usec);
            }
        };
        flush(&mut c);
        pair(&mut c, 0);
        // Both kinds held at once, so both runs see one keyspace.
        flush(&mut c);
        fill(&mut c, false, &[]);
        fill(&mut c, true, &[]);
        // Extend first: it leaves every key held for the release.
        pair(&mut c, 2);
        pair(&mut c, 1);
    }
    flush(&mut c);
    Report {
        pairs,
        memory,
        requests,
        rounds,
    }
}

impl Report {
    /// The markdown tables and the targets, PASS/MISS on the medians.
    pub fn markdown(&self) -> String {
        let mut md = format!(
            "Each LOCK.* command against the built-in of the same kind: `redis-benchmark -P 32 -c 20 -n {}` with random keys over {KEYSPACE} (acquire on an empty keyspace; extend, then release, on {KEYSPACE} held keys: strings and locks held at once under two prefixes), server time per call from `INFO commandstats` (usec_per_call) of the same run; {} rounds, in each the lock's run and the built-in's back to back (which goes first alternates), each ratio paired within its round, median (min–max). Memory: `used_memory` per key after filling 32-byte values, each kind alone.\n\n",
            self.requests, self.rounds
        );
        md += "| command | built-in | server µs/call, ours | built-in | ratio (target) | pipelined ops/s, ours | built-in | ratio (target) |\n|---|---|---:|---:|---|---:|---:|---|\n";
        let targets = [1.0, 0.95, 0.95];
        for (p, min_tput) in self.pairs.iter().zip(targets) {
            let (t, r) = (p.time_ratio(), p.throughput_ratio());
            md += &format!(
                "| `{}` | `{}` | {:.2} ({:.2}–{:.2}) | {:.2} ({:.2}–{:.2}) | {} (≤ 1.2x {}) | {} | {} | {} (≥ {min_tput}x {}) |\n",
                p.ours,
                p.theirs,
                Spread::of(&p.lock.usec_per_call).median,
                Spread::of(&p.lock.usec_per_call).min,
                Spread::of(&p.lock.usec_per_call).max,
                Spread::of(&p.builtin.usec_per_call).median,
                Spread::of(&p.builtin.usec_per_call).min,
                Spread::of(&p.builtin.usec_per_call).max,
                t.ratio(),
                pass(t.median <= 1.2),
                Spread::of(&p.lock.ops_per_s).whole(),
                Spread::of(&p.builtin.ops_per_s).whole(),
                r.ratio(),
                pass(r.median >= min_tput),
            );
        }
        md += "\n| held keys | string with PX, bytes/key | lock, bytes/key | ratio (target ≤ 1.0x) |\n|---:|---:|---:|---|\n";
        for m in &self.memory {
            let r = m.ratio();
            md += &format!(
                "| {} | {} | {} | {} {} |\n",
                m.keys,
                Spread::of(&m.string).whole(),
                Spread::of(&m.lock).whole(),
                r.ratio(),
                pass(r.median <= 1.0)
            );
        }
        md
    }
}

fn pass(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}
