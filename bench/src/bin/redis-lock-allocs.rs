//! Heap allocations per quorum lock + unlock (one task, warm connections),
//! beside the raw LOCK.* pair joined the same way and the PING floor: the
//! count the client adds on top of the commands, measured by a counting
//! global allocator (so not in the timing runs).
//!
//! usage: redis-lock-allocs N CYCLES

mod cycle;

use cycle::Load;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

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
    let load = Load::start(n).await;
    for mode in ["floor", "raw", "ours"] {
        let mut count = 0;
        for i in 0..cycles + 10 {
            // The first cycles open connections: not counted.
            let before = ALLOCS.load(Ordering::Relaxed);
            load.cycle(mode, "allocs").await;
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
