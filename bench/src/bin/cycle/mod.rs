//! The load both measuring tools run (redis-lock-profile, redis-lock-allocs):
//! N fresh servers and one lock + unlock cycle in one of three modes.
//! `floor` = two rounds of N PINGs joined on one task; `raw` = the
//! LOCK.ACQUIRE + LOCK.RELEASE pair the client sends, joined the same way,
//! with no client logic; `ours` = the client's `try_lock` + `unlock`.

use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;
use redis_lock_client::{Builder, Locker};
use redis_lock_testkit::Server;
use std::time::Duration;

pub struct Load {
    _nodes: Vec<Server>,
    locker: Locker,
    conns: Vec<MultiplexedConnection>,
}

impl Load {
    /// `n` servers with the module, a Locker and one multiplexed connection
    /// per server; the servers stop when the Load is dropped.
    pub async fn start(n: usize) -> Load {
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
        Load {
            _nodes: nodes,
            locker,
            conns,
        }
    }

    /// One lock + unlock of `name` in `mode` (floor, raw or ours).
    pub async fn cycle(&self, mode: &str, name: &str) {
        if mode == "ours" {
            let lock = self.locker.try_lock(name).await.unwrap();
            self.locker.unlock(&lock).await.unwrap();
            return;
        }
        let owner = redis_lock_client::random_owner();
        for step in 0..2 {
            let cmd = match (mode, step) {
                ("floor", _) => redis::cmd("PING"),
                (_, 0) => redis::cmd("LOCK.ACQUIRE")
                    .arg(name)
                    .arg(&owner)
                    .arg(10_000)
                    .to_owned(),
                _ => redis::cmd("LOCK.RELEASE").arg(name).arg(&owner).to_owned(),
            };
            join_all(self.conns.iter().map(|c| {
                let (mut c, cmd) = (c.clone(), &cmd);
                async move { cmd.query_async::<redis::Value>(&mut c).await }
            }))
            .await;
        }
    }
}
