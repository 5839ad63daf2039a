//! The two yardsticks of a quorum lock + unlock, joined on the calling task
//! over one persistent multiplexed connection per node: the PING floor (the
//! cheapest fan-out any client can do) and the raw `LOCK.*` pair (the
//! commands the client sends, with no client logic).

use futures::future::join_all;
use redis::aio::MultiplexedConnection;
use redis::Cmd;

/// One persistent multiplexed connection per node.
pub async fn connect(urls: &[String]) -> Vec<MultiplexedConnection> {
    let mut conns = Vec::new();
    for u in urls {
        let client = redis::Client::open(u.as_str()).unwrap();
        // No redis-rs time limits (1.x has 500 ms per reply by default),
        // like the client's own connections.
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(None)
            .set_response_timeout(None);
        let conn = client.get_multiplexed_async_connection_with_config(&config);
        conns.push(conn.await.unwrap());
    }
    conns
}

/// `cmd` to every node, the requests joined; panics on an error reply.
async fn everywhere(conns: &[MultiplexedConnection], cmd: &Cmd) {
    // Cloning a multiplexed connection is a few reference counts; the
    // requests share each node's one socket.
    join_all(conns.iter().map(|c| {
        let mut c = c.clone();
        async move { cmd.query_async::<redis::Value>(&mut c).await.unwrap() }
    }))
    .await;
}

/// Two rounds of N `PING`s: the two round trips a lock + unlock needs.
pub async fn floor_cycle(conns: &[MultiplexedConnection]) {
    let ping = redis::cmd("PING");
    for _ in 0..2 {
        everywhere(conns, &ping).await;
    }
}

/// `LOCK.ACQUIRE name owner ttl` then `LOCK.RELEASE name owner` on every
/// node, with a fresh owner.
pub async fn raw_cycle(conns: &[MultiplexedConnection], name: &str, ttl_ms: u64) {
    let owner = redis_lock_client::random_owner();
    let acquire = redis::cmd("LOCK.ACQUIRE")
        .arg(name)
        .arg(&owner)
        .arg(ttl_ms)
        .to_owned();
    let release = redis::cmd("LOCK.RELEASE").arg(name).arg(&owner).to_owned();
    everywhere(conns, &acquire).await;
    everywhere(conns, &release).await;
}
