//! Section 4: 32 clients on one hot key doing lock -> tiny critical section
//! -> unlock. Native server-side WAIT against client-side polling.

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
}

/// (client, requested, acquired, released) of every critical section.
type Event = (usize, Instant, Instant, Instant);
type Events = Arc<Mutex<Vec<Event>>>;

/// Hand-off counts only passes to *another* client: a releaser that grabs
/// the lock again at once (barging, common with polling) is not a hand-off.
pub fn summarize(mut events: Vec<Event>, secs: f64) -> Row {
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
    Row {
        sections_per_s: events.len() as f64 / secs,
        handoff_p50_us: us(percentile(&mut handoffs, 50.0)),
        handoff_p99_us: us(percentile(&mut handoffs, 99.0)),
        max_wait_ms: waits.iter().cloned().fold(0.0, f64::max),
        wait_stddev_ms: var.sqrt(),
    }
}

/// The two Rust clients compared on the hot key.
enum Contender {
    /// redis-lock, one server: `lock()` waits in the server (FIFO hand-off).
    Native(Locker),
    /// rslock: SET NX PX, retrying after a random 0-200 ms (its default delay).
    Polling(rslock::LockManager),
}

impl Contender {
    /// One lock -> empty critical section -> unlock: (acquired, released).
    async fn section(&self) -> Option<(Instant, Instant)> {
        match self {
            Contender::Native(locker) => {
                let lock = locker.lock("hot", Duration::from_secs(30)).await.ok()?;
                let at = Instant::now();
                locker.unlock(&lock).await.unwrap();
                Some((at, at))
            }
            Contender::Polling(rl) => {
                let lock = rl
                    .lock("hot".as_bytes(), Duration::from_secs(10))
                    .await
                    .ok()?;
                let at = Instant::now();
                rl.unlock(&lock).await;
                Some((at, at))
            }
        }
    }
}

/// `clients` tasks looping sections on one key for `secs`.
async fn contend(contender: Contender, clients: usize, secs: f64) -> Row {
    let contender = Arc::new(contender);
    let events: Events = Default::default();
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for id in 0..clients {
        let (contender, events) = (contender.clone(), events.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let requested = Instant::now();
                if let Some((acquired, released)) = contender.section().await {
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
    summarize(events, secs)
}

pub async fn native(url: &str, clients: usize, secs: f64) -> Row {
    let locker = Builder::new(&[url])
        .ttl(Duration::from_secs(10))
        .build()
        .unwrap();
    contend(Contender::Native(locker), clients, secs).await
}

pub async fn rslock_polling(url: &str, clients: usize, secs: f64) -> Row {
    let mut rl = rslock::LockManager::new(vec![url.to_string()]);
    rl.set_retry(u32::MAX, Duration::from_millis(200));
    contend(Contender::Polling(rl), clients, secs).await
}
