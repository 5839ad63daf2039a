//! Section 3: quorum lock+unlock latency and throughput with N servers, one
//! round of one client, beside the floor and rslock (SET NX PX + Lua).
//!
//! The floor is the cheapest fan-out a client can do: a lock+unlock needs at
//! least two round trips to the N nodes, so two rounds of N `PING`s joined on
//! the calling task over persistent multiplexed connections. A client that
//! spawns a task per node per round pays for the spawns on top; that variant
//! is kept as a labelled reference row so the difference stays visible.

use crate::stats::{percentile, us};
use redis::aio::MultiplexedConnection;
use redis_lock_bench::fanout::{self, connect};
use redis_lock_client::{Builder, Locker};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub enum Client {
    /// N PINGs joined on the calling task, twice.
    Floor(Vec<MultiplexedConnection>),
    /// The same with a task spawned per node per round (reference only).
    FloorSpawned(Vec<MultiplexedConnection>),
    /// The LOCK.ACQUIRE + LOCK.RELEASE pair the client sends, joined like
    /// the floor, with no client logic: ours / raw is the client's cost,
    /// raw / floor the cost of the commands in the servers.
    Raw(Vec<MultiplexedConnection>),
    Ours(Locker),
    Rslock(rslock::LockManager),
}

const TTL: Duration = Duration::from_secs(10);

impl Client {
    pub async fn floor(urls: &[String]) -> Client {
        Client::Floor(connect(urls).await)
    }

    pub async fn floor_spawned(urls: &[String]) -> Client {
        Client::FloorSpawned(connect(urls).await)
    }

    pub async fn raw(urls: &[String]) -> Client {
        Client::Raw(connect(urls).await)
    }

    pub fn ours(urls: &[String], fencing: bool) -> Client {
        Client::Ours(
            Builder::new(urls)
                .ttl(TTL)
                .fencing(fencing)
                .build()
                .unwrap(),
        )
    }

    pub fn rslock(urls: &[String]) -> Client {
        Client::Rslock(rslock::LockManager::new(urls.to_vec()))
    }

    /// One lock + unlock of `name` (uncontended).
    pub async fn cycle(&self, name: &str) {
        match self {
            Client::Floor(conns) => fanout::floor_cycle(conns).await,
            Client::FloorSpawned(conns) => {
                for _ in 0..2 {
                    let mut pings = tokio::task::JoinSet::new();
                    for c in conns {
                        let mut c = c.clone();
                        pings.spawn(async move {
                            redis::cmd("PING")
                                .query_async::<String>(&mut c)
                                .await
                                .unwrap()
                        });
                    }
                    while pings.join_next().await.is_some() {}
                }
            }
            Client::Raw(conns) => fanout::raw_cycle(conns, name, TTL.as_millis() as u64).await,
            Client::Ours(l) => {
                let lock = l.try_lock(name).await.expect("uncontended lock");
                l.unlock(&lock).await.expect("unlock");
            }
            Client::Rslock(rl) => {
                let lock = rl
                    .lock(name.as_bytes(), TTL)
                    .await
                    .expect("uncontended lock");
                rl.unlock(&lock).await;
            }
        }
    }
}

/// One client's figures in one round.
#[derive(Clone, Copy, Default)]
pub struct Sample {
    pub p50_us: f64,
    pub p99_us: f64,
    /// Cycles per second with 1, 16 and 64 concurrent tasks.
    pub tput: [f64; 3],
}

pub const TASKS: [usize; 3] = [1, 16, 64];

/// Sequential latency, then throughput at each of `TASKS`.
pub async fn measure(client: Arc<Client>, iterations: usize, secs: f64) -> Sample {
    let (p50_us, p99_us) = latency(&client, iterations).await;
    let mut tput = [0.0; 3];
    for (t, tasks) in tput.iter_mut().zip(TASKS) {
        *t = throughput(client.clone(), tasks, secs).await;
    }
    Sample {
        p50_us,
        p99_us,
        tput,
    }
}

/// (p50, p99) in microseconds of `iterations` sequential cycles.
async fn latency(client: &Client, iterations: usize) -> (f64, f64) {
    for i in 0..50 {
        client.cycle(&format!("warm:{i}")).await;
    }
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let t = Instant::now();
        client.cycle(&format!("lat:{}", i % 64)).await;
        samples.push(t.elapsed());
    }
    (
        us(percentile(&mut samples, 50.0)),
        us(percentile(&mut samples, 99.0)),
    )
}

/// Lock+unlock cycles per second with `tasks` concurrent tasks, each on
/// its own lock name.
async fn throughput(client: Arc<Client>, tasks: usize, secs: f64) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (client, done) = (client.clone(), done.clone());
        handles.push(tokio::spawn(async move {
            let name = format!("tput:{t}");
            while Instant::now() < deadline {
                client.cycle(&name).await;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / secs
}
