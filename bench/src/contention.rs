//! Clients on one hot key doing lock -> empty critical section -> unlock:
//! section 4's 32 clients on one server, and the N-server hot key of
//! quorum_contention.rs. Waiting in the servers against client-side polling.

use crate::stats::{percentile, us};
use redis_lock_client::{Builder, Locker};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Row {
    pub sections_per_s: f64,
    pub handoff_p50_us: f64,
    pub handoff_p99_us: f64,
    pub max_wait_ms: f64,
    pub wait_stddev_ms: f64,
    /// Fewest sections any one client completed: starvation shows as 0.
    pub min_sections: usize,
}

/// (client, requested, acquired, released) of every critical section.
type Event = (usize, Instant, Instant, Instant);
type Events = Arc<Mutex<Vec<Event>>>;

/// Hand-off counts only passes to *another* client: a releaser that grabs
/// the lock again at once (barging, common with polling) is not a hand-off.
/// `secs` is the whole run, including the waits in flight at the deadline
/// (every client finishes the section it asked for).
pub fn summarize(mut events: Vec<Event>, clients: usize, secs: f64) -> Row {
    events.sort_by_key(|e| e.2);
    let mut handoffs: Vec<Duration> = events
        .windows(2)
        .filter(|w| w[0].0 != w[1].0)
        .map(|w| w[1].2.saturating_duration_since(w[0].3))
        .collect();
    let waits: Vec<f64> = events
        .iter()
        .map(|e| (e.2 - e.1).as_secs_f64() * 1e3)
        .collect();
    let mean = waits.iter().sum::<f64>() / waits.len().max(1) as f64;
    let var = waits.iter().map(|w| (w - mean).powi(2)).sum::<f64>() / waits.len().max(1) as f64;
    let mut per_client = vec![0usize; clients];
    for e in &events {
        per_client[e.0] += 1;
    }
    Row {
        sections_per_s: events.len() as f64 / secs,
        handoff_p50_us: us(percentile(&mut handoffs, 50.0)),
        handoff_p99_us: us(percentile(&mut handoffs, 99.0)),
        max_wait_ms: waits.iter().cloned().fold(0.0, f64::max),
        wait_stddev_ms: var.sqrt(),
        min_sections: per_client.into_iter().min().unwrap_or(0),
    }
}

/// The two Rust clients compared on the hot key.
enum Contender {
    /// redis-lock: `lock(name, wait)`, the public API; with one server it
    /// waits in the server (FIFO hand-off), with N it waits as the client's
    /// quorum waiting does.
    Native(Locker),
    /// rslock: SET NX PX, retrying after a random 0-200 ms (its default delay).
    Polling(rslock::LockManager),
}

impl Contender {
    /// One lock -> empty critical section -> unlock: (acquired, released).
    async fn section(&self, key: &str) -> Option<(Instant, Instant)> {
        match self {
            Contender::Native(locker) => {
                let lock = locker.lock(key, Duration::from_secs(30)).await.ok()?;
                let at = Instant::now();
                locker.unlock(&lock).await.unwrap();
                Some((at, at))
            }
            Contender::Polling(rl) => {
                let lock = rl
                    .lock(key.as_bytes(), Duration::from_secs(10))
                    .await
                    .ok()?;
                let at = Instant::now();
                rl.unlock(&lock).await;
                Some((at, at))
            }
        }
    }
}

/// `clients` tasks looping sections on `key` for `secs`.
async fn contend(contender: Contender, key: &str, clients: usize, secs: f64) -> Row {
    let contender = Arc::new(contender);
    let events: Events = Default::default();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for id in 0..clients {
        let (contender, events, key) = (contender.clone(), events.clone(), key.to_string());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let requested = Instant::now();
                if let Some((acquired, released)) = contender.section(&key).await {
                    events
                        .lock()
                        .unwrap()
                        .push((id, requested, acquired, released));
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let events = std::mem::take(&mut *events.lock().unwrap());
    summarize(events, clients, start.elapsed().as_secs_f64())
}

pub async fn native(urls: &[String], key: &str, clients: usize, secs: f64) -> Row {
    let locker = Builder::new(urls)
        .ttl(Duration::from_secs(10))
        .build()
        .unwrap();
    contend(Contender::Native(locker), key, clients, secs).await
}

pub async fn rslock_polling(urls: &[String], key: &str, clients: usize, secs: f64) -> Row {
    let mut rl = rslock::LockManager::new(urls.to_vec());
    rl.set_retry(u32::MAX, Duration::from_millis(200));
    contend(Contender::Polling(rl), key, clients, secs).await
}
