//! Shared by the integration tests and the chaos checker: real redis-server
//! processes with the module, the clock shim, and the chaos analysis.

pub mod chaos;
pub mod chaos_cluster;
pub mod chaos_sentinel;
pub mod cluster;
pub mod counting_alloc;
pub mod proxy;
pub mod resp_proxy;
pub mod sentinel_group;
pub mod server;
pub mod shim;

pub use cluster::*;
pub use proxy::{in_front_of, DelayProxy};
pub use resp_proxy::{encode, RespProxy};
pub use server::*;

use redis_lock_client::{Builder, Locker};
use std::time::Duration;

/// A Locker over `servers` (TTL 60 s, `node_timeout`) whose connections are
/// open already (a lock taken and let go): for tests about a server that
/// stops answering, where a first connection would time out differently.
pub async fn connected_locker(servers: &[Server], node_timeout: Duration) -> Locker {
    let locker = Builder::new(&urls(servers))
        .ttl(Duration::from_secs(60))
        .node_timeout(node_timeout)
        .build()
        .unwrap();
    let warm = locker.try_lock("warm").await.unwrap();
    locker.unlock(&warm).await.unwrap();
    locker
}
