//! Heap allocations per quorum lock + unlock (one task, warm connections),
//! beside the raw LOCK.* pair joined the same way and the PING floor: the
//! count the client adds on top of the commands, measured by a counting
//! global allocator (so not in the timing runs).
//!
//! usage: redis-lock-allocs N CYCLES

mod cycle;

use cycle::Load;
use redis_lock_testkit::counting_alloc::{allocations, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: redis-lock-allocs N CYCLES";
    let [_, n, cycles] = &args[..] else {
        panic!("{usage}")
    };
    let (n, cycles): (usize, u64) = (n.parse().expect(usage), cycles.parse().expect(usage));
    let load = Load::start(n).await;
    for mode in ["floor", "raw", "ours"] {
        let mut count = 0;
        for i in 0..cycles + 10 {
            // The first cycles open connections: not counted.
            let before = allocations();
            load.cycle(mode, "allocs").await;
            if i >= 10 {
                count += allocations() - before;
            }
        }
        println!(
            "{mode} N={n}: {:.1} allocations per lock + unlock",
            count as f64 / cycles as f64
        );
    }
}
