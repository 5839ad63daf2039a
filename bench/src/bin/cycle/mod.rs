//! The load both measuring tools run (redis-lock-profile, redis-lock-allocs):
//! N fresh servers (token counters aligned) and one lock + unlock cycle in one of three modes.
//! `floor` = two rounds of N PINGs joined on one task; `raw` = the
//! LOCK.ACQUIRE + LOCK.RELEASE pair the client sends, joined the same way,
//! with no client logic; `ours` = the client's `try_lock` + `unlock`.

use redis::aio::MultiplexedConnection;
use redis_lock_bench::fanout;
use redis_lock_client::{Builder, Locker};
use redis_lock_testkit::{align_token_counters, command_calls, info_field, urls, Server};
use std::time::Duration;

pub struct Load {
    nodes: Vec<Server>,
    locker: Locker,
    conns: Vec<MultiplexedConnection>,
}

impl Load {
    /// `n` servers with the module, a Locker and one multiplexed connection
    /// per server; the servers stop when the Load is dropped.
    pub async fn start(n: usize) -> Load {
        let nodes: Vec<Server> = Server::start_n(n);
        align_token_counters(&nodes);
        let urls = urls(&nodes);
        let locker = Builder::new(&urls)
            .ttl(Duration::from_secs(10))
            .build()
            .unwrap();
        let conns = fanout::connect(&urls).await;
        Load {
            nodes,
            locker,
            conns,
        }
    }

    /// How many times each `LOCK.*` command ran, summed over the servers:
    /// a fencing round shows as `lock.fence` calls.
    #[allow(dead_code)] // redis-lock-allocs counts allocations only
    pub fn server_calls(&self) -> Vec<(&'static str, u64)> {
        ["lock.acquire", "lock.release", "lock.fence"]
            .into_iter()
            .map(|cmd| {
                let calls = self.nodes.iter().map(|s| command_calls(&mut s.conn(), cmd));
                (cmd, calls.sum())
            })
            .chain([("connections", self.connections())])
            .collect()
    }

    /// Connections the servers accepted so far (a waiting lock's dedicated
    /// connections come from a pool: this should not grow per cycle).
    #[allow(dead_code)]
    fn connections(&self) -> u64 {
        let accepted = self.nodes.iter().map(|s| {
            let n = info_field(&mut s.conn(), "stats", "total_connections_received");
            n.parse::<u64>().unwrap()
        });
        accepted.sum()
    }

    /// One lock + unlock of `name` in `mode` (floor, raw, ours, ours-wait, ours-hot).
    pub async fn cycle(&self, mode: &str, name: &str) {
        match mode {
            "ours" => {
                let lock = self.locker.try_lock(name).await.unwrap();
                self.locker.unlock(&lock).await.unwrap();
            }
            "ours-wait" | "ours-hot" => {
                let lock = self
                    .locker
                    .lock(name, Duration::from_secs(30))
                    .await
                    .unwrap();
                self.locker.unlock(&lock).await.unwrap();
            }
            "floor" => fanout::floor_cycle(&self.conns).await,
            _ => fanout::raw_cycle(&self.conns, name, 10_000).await,
        }
    }
}
