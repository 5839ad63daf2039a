//! The quorum client: `cargo run --release -p redis-lock-client --example quorum -- URL URL URL`
//! (defaults to one server on port 7379, as started by `make run`).

use redis_lock_client::{Builder, Error};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut urls: Vec<String> = std::env::args().skip(1).collect();
    if urls.is_empty() {
        urls.push("redis://127.0.0.1:7379/".into());
    }
    let locker = Builder::new(&urls).ttl(Duration::from_secs(5)).build()?;

    // One lock, released explicitly.
    let lock = locker.lock("example:job", Duration::from_secs(2)).await?;
    println!("token {} valid for {:?}", lock.token(), lock.validity());
    locker.unlock(&lock).await?;

    // An auto-renewing lock: work until done or until the lock is lost.
    let mut guard = locker
        .lock_auto("example:long-job", Duration::from_secs(2))
        .await?;
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_secs(12)) => println!("work done, still held: {}", !guard.is_lost()),
        _ = guard.lost() => println!("lock lost: stop writing"),
    }
    guard.unlock().await
}
