//! Section 6 of `make bench` on its own: memory per waiting client (idle
//! connection, BLPOP, LOCK.ACQUIRE WAIT) and how long it takes to come back.
//! The server is $REDIS_SERVER (default redis-server), as in the tests.
//!
//! usage: redis-lock-waiter-memory [CLIENTS]   (default 3000)

use redis_lock_bench::waiter_memory;

fn main() {
    let n = std::env::args()
        .nth(1)
        .map_or(3_000, |a| a.parse().expect("CLIENTS is a number"));
    println!("| client | clients | KB each, all blocked | KB each, settled | back within 1 MB after | left above baseline (KB) |");
    for r in waiter_memory::run(n) {
        println!(
            "| {} | {} | {:.1} | {:.1} | {} | {:.0} |",
            r.kind.label(),
            r.clients,
            r.blocked / 1024.0,
            r.settled / 1024.0,
            r.back_after.map_or("not in 120 s".into(), |d| format!(
                "{:.1} s",
                d.as_secs_f64()
            )),
            r.left_bytes as f64 / 1024.0
        );
    }
}
