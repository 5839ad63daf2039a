//! Section 4b of `make bench` alone, for quick side-by-side runs while
//! working on quorum waiting: 16 tasks looping lock -> empty section ->
//! unlock on one key over N fresh servers, redis-lock's `lock(name, 30 s)`
//! and rslock's polling in interleaved rounds.
//!
//! usage: redis-lock-hot N SECONDS ROUNDS

use redis_lock_bench::contention::{self, Row};
use redis_lock_testkit::{align_token_counters, urls, Server};

/// As in `make bench` section 4b.
const CLIENTS: usize = 16;

fn show(client: &str, r: &Row) {
    println!(
        "{client:10} {:7.0} sections/s, hand-off p50 {:5.0} µs p99 {:6.0} µs, longest wait {:6.1} ms, fewest sections {}",
        r.sections_per_s, r.handoff_p50_us, r.handoff_p99_us, r.max_wait_ms, r.min_sections
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: redis-lock-hot N SECONDS ROUNDS";
    let [_, n, secs, rounds] = &args[..] else {
        panic!("{usage}")
    };
    let n: usize = n.parse().expect(usage);
    let secs: f64 = secs.parse().expect(usage);
    let rounds: usize = rounds.parse().expect(usage);
    let nodes: Vec<Server> = Server::start_n(n);
    align_token_counters(&nodes);
    let urls = urls(&nodes);
    for round in 0..rounds {
        let key = format!("hot:{round}");
        let ours = contention::native(&urls, &key, CLIENTS, secs).await;
        show("redis-lock", &ours);
        let rslock = contention::rslock_polling(&urls, &format!("{key}:rs"), CLIENTS, secs).await;
        show("rslock", &rslock);
    }
}
