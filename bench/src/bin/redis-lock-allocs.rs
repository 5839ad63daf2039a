//! Heap allocations per quorum lock + unlock (one task, warm connections),
//! beside the raw LOCK.* pair joined the same way and the PING floor: the
//! count the client adds on top of the commands, measured by a counting
//! global allocator (so not in the timing runs).
//!
//! usage: redis-lock-allocs N CYCLES

use futures_util::future::join_all;
use redis_lock_client::Builder;
use redis_lock_testkit::Server;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

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
    let nodes: Vec<Server> = (0..n).map(|_| Server::start()).collect();
    let urls: Vec<String> = nodes.iter().map(Server::url).collect();
    let locker = Builder::new(&urls)
        .ttl(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut conns = Vec::new();
    for u in &urls {
        let client = redis::Client::open(u.as_str()).unwrap();
        conns.push(client.get_multiplexed_async_connection().await.unwrap());
    }
    for mode in ["floor", "raw", "ours"] {
        let mut count = 0;
        for i in 0..cycles + 10 {
            // The first cycles open connections: not counted.
            let before = ALLOCS.load(Ordering::Relaxed);
            if mode == "ours" {
                let lock = locker.try_lock("allocs").await.unwrap();
                locker.unlock(&lock).await.unwrap();
            } else {
                let owner = redis_lock_client::random_owner();
                for step in 0..2 {
                    let cmd = match (mode, step) {
                        ("floor", _) => redis::cmd("PING"),
                        (_, 0) => redis::cmd("LOCK.ACQUIRE")
                            .arg("allocs")
                            .arg(&owner)
                            .arg(10_000)
                            .to_owned(),
                        _ => redis::cmd("LOCK.RELEASE")
                            .arg("allocs")
                            .arg(&owner)
                            .to_owned(),
                    };
                    join_all(conns.iter().map(|c| {
                        let (mut c, cmd) = (c.clone(), &cmd);
                        async move { cmd.query_async::<redis::Value>(&mut c).await }
                    }))
                    .await;
                }
            }
            if i >= 10 {
                count += ALLOCS.load(Ordering::Relaxed) - before;
            }
        }
        println!(
            "{mode} N={n}: {:.1} allocations per lock + unlock",
            count as f64 / cycles as f64
        );
    }
}
