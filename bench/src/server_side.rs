//! Section 1: server-side cost on one server, with redis-benchmark, native
//! LOCK.* against the SET NX PX + Lua recipes, interleaved round by round.

use crate::stats::median;
use redis_lock_testkit::Server;
use std::process::Command;

/// Compare-and-delete, as in the Redlock spec and every peer library.
pub const LUA_RELEASE: &str =
    "if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end";
/// Compare-and-pexpire (redsync / node-redlock extend).
pub const LUA_EXTEND: &str =
    "if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('pexpire',KEYS[1],ARGV[2]) else return 0 end";
/// Redisson's reentrant acquire (RedissonLock.tryLockInnerAsync).
pub const LUA_ACQUIRE: &str = "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";

const OWNER: &str = "0123456789abcdef0123456789abcdef";

/// How the keyspace is prepared before a run.
#[derive(Clone, Copy)]
enum Setup {
    Empty,
    /// `n` keys `lk:%012d` held by OWNER, as strings (recipes) or locks.
    HeldStrings(usize),
    HeldLocks(usize),
}

struct Variant {
    name: &'static str,
    setup: Setup,
    args: Vec<String>,
    stat: &'static str,
}

pub struct Row {
    pub case: &'static str,
    pub name: &'static str,
    pub pipelined: f64,
    pub plain: f64,
    pub usec_per_call: f64,
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn script_load(c: &mut redis::Connection, body: &str) -> String {
    redis::cmd("SCRIPT").arg("LOAD").arg(body).query(c).unwrap()
}

fn prepare(c: &mut redis::Connection, setup: Setup) {
    redis::cmd("FLUSHALL").query::<()>(c).unwrap();
    let (n, lock) = match setup {
        Setup::Empty => return,
        Setup::HeldStrings(n) => (n, false),
        Setup::HeldLocks(n) => (n, true),
    };
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let mut p = redis::pipe();
        for i in chunk {
            let key = format!("lk:{i:012}");
            if lock {
                p.cmd("LOCK.ACQUIRE")
                    .arg(key)
                    .arg(OWNER)
                    .arg(600_000)
                    .ignore();
            } else {
                p.cmd("SET")
                    .arg(key)
                    .arg(OWNER)
                    .arg("PX")
                    .arg(600_000)
                    .ignore();
            }
        }
        p.query::<()>(c).unwrap();
    }
}

/// requests per second reported by redis-benchmark --csv.
pub fn benchmark(
    port: u16,
    pipeline: u32,
    requests: usize,
    keyspace: usize,
    args: &[String],
) -> f64 {
    let out = Command::new("redis-benchmark")
        .args([
            "-p",
            &port.to_string(),
            "-c",
            "20",
            "-P",
            &pipeline.to_string(),
        ])
        .args([
            "-n",
            &requests.to_string(),
            "-r",
            &keyspace.to_string(),
            "--csv",
        ])
        .args(args)
        .output()
        .expect("redis-benchmark (apt: redis-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().nth(1).unwrap_or_default();
    line.split(',')
        .nth(1)
        .and_then(|f| f.trim_matches('"').parse().ok())
        .unwrap_or(0.0)
}

pub fn usec_per_call(c: &mut redis::Connection, stat: &str) -> f64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    info.lines()
        .find(|l| l.starts_with(&format!("cmdstat_{stat}:")))
        .and_then(|l| l.split("usec_per_call=").nth(1))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

pub fn run(server: &Server, rounds: usize, requests: usize) -> Vec<Row> {
    let mut c = server.conn();
    let (acq, rel, ext) = (
        script_load(&mut c, LUA_ACQUIRE),
        script_load(&mut c, LUA_RELEASE),
        script_load(&mut c, LUA_EXTEND),
    );
    let held = requests;
    let cases: Vec<(&'static str, usize, Vec<Variant>)> = vec![
        (
            "acquire",
            100_000_000,
            vec![
                Variant {
                    name: "SET key v NX PX",
                    setup: Setup::Empty,
                    args: words(&format!("SET lk:__rand_int__ {OWNER} NX PX 30000")),
                    stat: "set",
                },
                Variant {
                    name: "EVALSHA acquire (Redisson)",
                    setup: Setup::Empty,
                    args: words(&format!("EVALSHA {acq} 1 lk:__rand_int__ 30000 {OWNER}")),
                    stat: "evalsha",
                },
                Variant {
                    name: "LOCK.ACQUIRE",
                    setup: Setup::Empty,
                    args: words(&format!("LOCK.ACQUIRE lk:__rand_int__ {OWNER} 30000")),
                    stat: "lock.acquire",
                },
            ],
        ),
        (
            "release",
            held,
            vec![
                Variant {
                    name: "EVALSHA compare-and-delete",
                    setup: Setup::HeldStrings(held),
                    args: words(&format!("EVALSHA {rel} 1 lk:__rand_int__ {OWNER}")),
                    stat: "evalsha",
                },
                Variant {
                    name: "LOCK.RELEASE",
                    setup: Setup::HeldLocks(held),
                    args: words(&format!("LOCK.RELEASE lk:__rand_int__ {OWNER}")),
                    stat: "lock.release",
                },
            ],
        ),
        (
            "extend",
            held,
            vec![
                Variant {
                    name: "EVALSHA compare-and-pexpire",
                    setup: Setup::HeldStrings(held),
                    args: words(&format!("EVALSHA {ext} 1 lk:__rand_int__ {OWNER} 30000")),
                    stat: "evalsha",
                },
                Variant {
                    name: "LOCK.EXTEND",
                    setup: Setup::HeldLocks(held),
                    args: words(&format!("LOCK.EXTEND lk:__rand_int__ {OWNER} 30000")),
                    stat: "lock.extend",
                },
            ],
        ),
    ];
    let mut rows = Vec::new();
    for (case, keyspace, variants) in &cases {
        let mut samples: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> =
            variants.iter().map(|_| Default::default()).collect();
        for _ in 0..rounds {
            for (v, s) in variants.iter().zip(samples.iter_mut()) {
                prepare(&mut c, v.setup);
                redis::cmd("CONFIG")
                    .arg("RESETSTAT")
                    .query::<()>(&mut c)
                    .unwrap();
                s.0.push(benchmark(server.port, 32, requests, *keyspace, &v.args));
                s.2.push(usec_per_call(&mut c, v.stat));
                prepare(&mut c, v.setup);
                s.1.push(benchmark(server.port, 1, requests / 5, *keyspace, &v.args));
            }
        }
        for (v, mut s) in variants.iter().zip(samples) {
            rows.push(Row {
                case,
                name: v.name,
                pipelined: median(&mut s.0),
                plain: median(&mut s.1),
                usec_per_call: median(&mut s.2),
            });
        }
    }
    redis::cmd("FLUSHALL").query::<()>(&mut c).unwrap();
    rows
}
