//! `make bench` section 1's LOCK.* against built-in comparison alone, for
//! iterating on the module's server-side cost:
//! `redis-lock-server-cost [rounds] [requests] [memory sizes, comma-separated]`
//! (defaults 3, 500000, 100000,1000000). Needs REDIS_LOCK_MODULE.

use redis_lock_bench::server_cost;
use redis_lock_testkit::Server;

fn main() {
    let arg = |i: usize| std::env::args().nth(i);
    let rounds = arg(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let requests = arg(2).and_then(|a| a.parse().ok()).unwrap_or(500_000);
    let sizes: Vec<usize> = arg(3)
        .unwrap_or_else(|| "100000,1000000".into())
        .split(',')
        .filter_map(|s| s.parse().ok())
        .collect();
    let server = Server::with(&["--maxclients", "20100"], &[]);
    let report = server_cost::run(&server, rounds, requests, &sizes);
    println!("{}", report.markdown());
}
