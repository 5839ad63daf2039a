//! Section 3: quorum lock+unlock latency and throughput with N servers,
//! beside the floor (two rounds of parallel PING to the same N nodes: a
//! lock+unlock needs at least two round trips) and rslock (SET NX PX + Lua).

use crate::stats::{percentile, us};
use redis::aio::MultiplexedConnection;
use redis_lock_client::{Builder, Locker};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub enum Client {
    Floor(Vec<MultiplexedConnection>),
    Ours(Locker),
    Rslock(rslock::LockManager),
}

const TTL: Duration = Duration::from_secs(10);

impl Client {
    pub async fn floor(urls: &[String]) -> Client {
        let mut conns = Vec::new();
        for u in urls {
            conns.push(
                redis::Client::open(u.as_str())
                    .unwrap()
                    .get_multiplexed_async_connection()
                    .await
                    .unwrap(),
            );
        }
        Client::Floor(conns)
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
            Client::Floor(conns) => {
                // Fanned out the same way the quorum client fans out.
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

pub struct Latency {
    pub p50_us: f64,
    pub p99_us: f64,
}

pub async fn latency(client: &Client, iterations: usize) -> Latency {
    for i in 0..50 {
        client.cycle(&format!("warm:{i}")).await;
    }
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let t = Instant::now();
        client.cycle(&format!("lat:{}", i % 64)).await;
        samples.push(t.elapsed());
    }
    Latency {
        p50_us: us(percentile(&mut samples, 50.0)),
        p99_us: us(percentile(&mut samples, 99.0)),
    }
}

/// Lock+unlock cycles per second with `tasks` concurrent tasks, each on
/// its own lock name.
pub async fn throughput(client: Arc<Client>, tasks: usize, secs: f64) -> f64 {
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
