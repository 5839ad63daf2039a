//! Section 7a: what a shared hold costs the server. A shared acquire +
//! release on a key that already has 100 shared holders against an
//! exclusive acquire + release on a free key, interleaved round by round;
//! and `used_memory` per extra shared holder.

use crate::server_side::usec_per_call;
use crate::stats::median;
use redis_lock_testkit::Server;
use std::time::{Duration, Instant};

/// Holders already on the shared key.
pub const HOLDERS: usize = 100;
/// Connections sending at once, and acquire + release pairs per pipeline.
const CONNECTIONS: usize = 4;
const PIPELINE: usize = 32;
const TTL_MS: u64 = 600_000;

/// A 32-byte owner, as in sections 1 and 2.
fn owner(prefix: char, i: usize) -> String {
    format!("{prefix}{i:031x}")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `LOCK.ACQUIRE ex:<c>:<i> owner ttl` + `LOCK.RELEASE`: a free key each time.
    Exclusive,
    /// `LOCK.ACQUIRE sh owner ttl SHARED` + `LOCK.RELEASE` beside HOLDERS holders.
    Shared,
    /// The same on a free key (`sh:<c>`): the shared path's fixed cost,
    /// apart from what the holders already there add.
    SharedAlone,
}

/// One side's figures: pairs/s (client view) and server usec per call.
#[derive(Default, Clone, Copy)]
pub struct Side {
    pub pairs_per_s: f64,
    pub acquire_usec: f64,
    pub release_usec: f64,
}

impl Side {
    pub fn server_usec(&self) -> f64 {
        self.acquire_usec + self.release_usec
    }
}

pub struct Cost {
    pub rounds: usize,
    pub secs: f64,
    pub exclusive: Side,
    pub shared: Side,
    pub shared_alone: Side,
}

impl Cost {
    /// Shared over exclusive: in server time, and in client throughput.
    pub fn server_ratio(&self) -> f64 {
        self.shared.server_usec() / self.exclusive.server_usec().max(1e-9)
    }
    pub fn throughput_ratio(&self) -> f64 {
        self.exclusive.pairs_per_s / self.shared.pairs_per_s.max(1e-9)
    }
}

fn conn(url: &str) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

/// Pairs per second of `CONNECTIONS` connections pipelining for `secs`.
fn drive(url: &str, mode: Mode, secs: f64) -> f64 {
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let threads: Vec<_> = (0..CONNECTIONS)
        .map(|c| {
            let url = url.to_string();
            std::thread::spawn(move || {
                let mut con = conn(&url);
                let mut pairs = 0usize;
                while Instant::now() < deadline {
                    let mut p = redis::pipe();
                    for i in pairs..pairs + PIPELINE {
                        let o = owner('c', c * 1_000_000_000 + i);
                        let key = match mode {
                            Mode::Exclusive => format!("ex:{c}:{i}"),
                            Mode::Shared => "sh".to_string(),
                            Mode::SharedAlone => format!("sh:{c}"),
                        };
                        let acquire = p.cmd("LOCK.ACQUIRE").arg(&key).arg(&o).arg(TTL_MS);
                        if mode != Mode::Exclusive {
                            acquire.arg("SHARED");
                        }
                        acquire.ignore();
                        p.cmd("LOCK.RELEASE").arg(&key).arg(&o).ignore();
                    }
                    p.query::<()>(&mut con).unwrap();
                    pairs += PIPELINE;
                }
                pairs
            })
        })
        .collect();
    let pairs: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    pairs as f64 / start.elapsed().as_secs_f64()
}

/// `rounds` interleaved rounds of `secs` per side; medians.
pub fn acquire_cost(server: &Server, rounds: usize, secs: f64) -> Cost {
    let url = server.url();
    let mut c = server.conn();
    redis::cmd("FLUSHALL").query::<()>(&mut c).unwrap();
    let mut p = redis::pipe();
    for i in 0..HOLDERS {
        p.cmd("LOCK.ACQUIRE")
            .arg("sh")
            .arg(owner('h', i))
            .arg(TTL_MS)
            .arg("SHARED")
            .ignore();
    }
    p.query::<()>(&mut c).unwrap();
    let mut samples: [Vec<Side>; 3] = Default::default();
    for round in 0..rounds {
        // Rotate which side goes first, so none always meets a warmer (or
        // busier) machine.
        let mut order = [Mode::Exclusive, Mode::Shared, Mode::SharedAlone];
        order.rotate_left(round % 3);
        for mode in order {
            redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query::<()>(&mut c)
                .unwrap();
            let pairs_per_s = drive(&url, mode, secs);
            samples[mode as usize].push(Side {
                pairs_per_s,
                acquire_usec: usec_per_call(&mut c, "lock.acquire"),
                release_usec: usec_per_call(&mut c, "lock.release"),
            });
        }
    }
    let med = |s: &[Side]| Side {
        pairs_per_s: median(&mut s.iter().map(|x| x.pairs_per_s).collect::<Vec<_>>()),
        acquire_usec: median(&mut s.iter().map(|x| x.acquire_usec).collect::<Vec<_>>()),
        release_usec: median(&mut s.iter().map(|x| x.release_usec).collect::<Vec<_>>()),
    };
    Cost {
        rounds,
        secs,
        exclusive: med(&samples[0]),
        shared: med(&samples[1]),
        shared_alone: med(&samples[2]),
    }
}

fn used(c: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

pub struct HolderMemory {
    pub keys: usize,
    pub holders_per_key: usize,
    pub bytes_per_holder: f64,
}

/// `used_memory` per shared holder added to `keys` keys that each have one
/// shared holder already, `extra` more each, 32-byte owners.
pub fn holder_memory(server: &Server, keys: usize, extra: usize) -> HolderMemory {
    let mut c = server.conn();
    redis::cmd("FLUSHALL")
        .arg("SYNC")
        .query::<()>(&mut c)
        .unwrap();
    let fill = |c: &mut redis::Connection, from: usize, to: usize| {
        let all: Vec<(usize, usize)> = (0..keys)
            .flat_map(|k| (from..to).map(move |h| (k, h)))
            .collect();
        for chunk in all.chunks(10_000) {
            let mut p = redis::pipe();
            for &(k, h) in chunk {
                p.cmd("LOCK.ACQUIRE")
                    .arg(format!("mem:{k:08}"))
                    .arg(owner('m', h))
                    .arg(TTL_MS)
                    .arg("SHARED")
                    .ignore();
            }
            p.query::<()>(c).unwrap();
        }
    };
    fill(&mut c, 0, 1);
    std::thread::sleep(Duration::from_millis(200));
    let before = used(&mut c);
    fill(&mut c, 1, 1 + extra);
    let after = used(&mut c);
    redis::cmd("FLUSHALL").query::<()>(&mut c).unwrap();
    HolderMemory {
        keys,
        holders_per_key: 1 + extra,
        bytes_per_holder: (after - before) as f64 / (keys * extra) as f64,
    }
}
