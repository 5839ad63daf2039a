//! Section 7b: a hot read-write key. 32 clients on one server loop lock ->
//! empty critical section -> unlock, each section a read (shared) with
//! probability 0.95 and a write (exclusive) otherwise; redis-lock's shared
//! and exclusive holds waiting in the server's one queue, against
//! Redisson's RReadWriteLock scripts retried by polling.

use crate::redisson_rwlock::{Client, Scripts};
use rand::RngExt;
use redis_lock_client::{Builder, LockOptions};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const CLIENTS: usize = 32;
pub const WRITE_SHARE: f64 = 0.05;
/// Redisson's retry without its pub/sub wake-up: a random pause in this
/// range (ms) after a refused try.
pub const POLL_MS: (u64, u64) = (1, 10);

pub struct Row {
    pub reads_per_s: f64,
    pub writes_per_s: f64,
    pub writer_max_wait_ms: f64,
    pub writer_p99_wait_ms: f64,
    pub reader_max_wait_ms: f64,
    /// Fewest sections any one client completed: starvation shows as 0.
    pub min_sections: usize,
}

/// (client, write, requested, acquired) of every section.
type Event = (usize, bool, Instant, Instant);

fn summarize(events: &[Event], secs: f64) -> Row {
    let ms = |e: &Event| (e.3 - e.2).as_secs_f64() * 1e3;
    let mut writer_waits: Vec<f64> = events.iter().filter(|e| e.1).map(ms).collect();
    writer_waits.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p99 = writer_waits
        .get(((writer_waits.len().max(1) - 1) as f64 * 0.99).round() as usize)
        .copied()
        .unwrap_or(0.0);
    let mut per_client = [0usize; CLIENTS];
    for e in events {
        per_client[e.0] += 1;
    }
    let writes = events.iter().filter(|e| e.1).count();
    Row {
        reads_per_s: (events.len() - writes) as f64 / secs,
        writes_per_s: writes as f64 / secs,
        writer_max_wait_ms: writer_waits.last().copied().unwrap_or(0.0),
        writer_p99_wait_ms: p99,
        reader_max_wait_ms: events.iter().filter(|e| !e.1).map(ms).fold(0.0, f64::max),
        min_sections: per_client.into_iter().min().unwrap_or(0),
    }
}

/// `CLIENTS` tasks, each running `section(client, write)` until `secs` have
/// passed; the section asked for at the deadline still completes (a writer
/// starved by readers gets the lock once they stop: its wait counts).
async fn contend<F, Fut>(secs: f64, section: F) -> Row
where
    F: Fn(usize, bool) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Instant> + Send,
{
    let section = Arc::new(section);
    let events: Arc<Mutex<Vec<Event>>> = Default::default();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let (section, events) = (section.clone(), events.clone());
            tokio::spawn(async move {
                while Instant::now() < deadline {
                    let write = rand::rng().random_bool(WRITE_SHARE);
                    let requested = Instant::now();
                    let acquired = section(id, write).await;
                    events
                        .lock()
                        .unwrap()
                        .push((id, write, requested, acquired));
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let events = std::mem::take(&mut *events.lock().unwrap());
    summarize(&events, start.elapsed().as_secs_f64())
}

/// redis-lock through the public client: `acquire(name, shared() or new(),
/// wait 30 s)` + `unlock`, one Locker for the 32 tasks (as in section 4a).
pub async fn native(url: &str, secs: f64) -> Row {
    let locker = Builder::new(&[url.to_string()])
        .ttl(Duration::from_secs(10))
        .build()
        .unwrap();
    let locker = Arc::new(locker);
    contend(secs, move |_, write| {
        let locker = locker.clone();
        async move {
            let opts = if write {
                LockOptions::new()
            } else {
                LockOptions::shared()
            };
            let lock = locker
                .acquire("rw:hot", &opts.wait(Duration::from_secs(30)))
                .await
                .unwrap();
            let at = Instant::now();
            locker.unlock(&lock).await.unwrap();
            at
        }
    })
    .await
}

/// Redisson's scripts, a connection per client (as one JVM per client
/// would have), retried after a random `POLL_MS` pause when refused.
pub async fn redisson(url: &str, scripts: Scripts, secs: f64) -> Row {
    let scripts = Arc::new(scripts);
    let redis_client = redis::Client::open(url).unwrap();
    let mut cons = Vec::new();
    for _ in 0..CLIENTS {
        let con = redis_client
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        cons.push(Arc::new(tokio::sync::Mutex::new(con)));
    }
    let cons = Arc::new(cons);
    contend(secs, move |id, write| {
        let (scripts, cons) = (scripts.clone(), cons.clone());
        async move {
            // A UUID per client (Redisson's per-JVM id), thread 1.
            let uuid = format!("{id:08x}-0000-4000-8000-000000000000");
            let client = Client::new("rw:redisson", &uuid, 1);
            let mut con = cons[id].lock().await;
            while !client.try_lock(&scripts, &mut con, write).await {
                let pause = rand::rng().random_range(POLL_MS.0..=POLL_MS.1);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            let at = Instant::now();
            let request = format!("{:032x}", rand::rng().random::<u128>());
            client.unlock(&scripts, &mut con, write, &request).await;
            at
        }
    })
    .await
}
