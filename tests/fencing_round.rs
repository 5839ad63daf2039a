//! The quorum client's fencing round is needed only when the granting
//! nodes handed out different tokens. The client asks every node for the
//! same token floor (`MINTOKEN`, a little above the servers' clock + 60 s),
//! so nodes whose counters are below it all grant exactly that token and
//! the round is skipped, also right after the nodes' start; where a node's
//! counter was raised further it runs.

use crate::common;
use common::*;
use redis_lock_client::Builder;
use redis_lock_testkit::shim::ClockOffset;
use std::time::Duration;

fn fence_calls(node: &Server) -> u64 {
    command_calls(&mut node.conn(), "lock.fence")
}

fn tokens(nodes: &[Server], name: &str) -> Vec<i64> {
    nodes
        .iter()
        .filter_map(|n| status(&mut n.conn(), name).map(|s| s.1))
        .collect()
}

/// Three nodes started 61 s "ago": their clocks run 61 s behind while they
/// start (so their start seed is below the real clock), then catch up.
/// Remove the returned directory (the clock shim's) when done.
fn settled_nodes(tag: &str) -> (Vec<Server>, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("redis-lock-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let clock = ClockOffset::new(&dir);
    clock.set(-61);
    let env = clock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let nodes: Vec<Server> = (0..3).map(|_| Server::with_env(&[], &[], &env)).collect();
    clock.set(0);
    std::thread::sleep(Duration::from_millis(50)); // the shim re-reads every 10 ms
    (nodes, dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn settled_nodes_grant_one_token_and_skip_the_fencing_round() {
    let (nodes, dir) = settled_nodes("floor");
    let urls: Vec<String> = urls(&nodes);
    let locker = Builder::new(&urls).build().unwrap();
    for i in 0..20 {
        let name = format!("job:{i}");
        let lock = locker.try_lock(&name).await.unwrap();
        let on_nodes = tokens(&nodes, &name);
        assert!(on_nodes.len() >= 2, "held on a majority");
        assert!(
            on_nodes.iter().all(|&t| t as u64 == lock.token()),
            "one token everywhere: {on_nodes:?} vs {}",
            lock.token()
        );
        locker.unlock(&lock).await.unwrap();
    }
    let fenced: u64 = nodes.iter().map(fence_calls).sum();
    assert_eq!(fenced, 0, "no fencing round was needed");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slower_nodes_grant_at_the_token_spares_the_fencing_round() {
    // Before each lock, nodes 1 and 2 are raised to one counter well
    // ahead of node 0's, so they grant one token and node 0 a smaller one.
    // Whenever node 0 is among the first two replies the two disagree, and
    // the client used to fence node 0 at once; the third grant, already on
    // its way, is at the token, and with it a majority holds the token.
    let (nodes, dir) = settled_nodes("holders");
    let urls = urls(&nodes);
    let locker = Builder::new(&urls).build().unwrap();
    // Above the client's floor (the clock + 60.1 s), below what a node
    // accepts (its clock + 120 s).
    let base = redis_lock_client::quorum::unix_micros() + 80_000_000;
    let mut fenced = 0;
    for i in 0..30u64 {
        let ahead = base + i * 500_000;
        for node in &nodes[1..] {
            node.raise_token_counter(ahead);
        }
        let before: u64 = nodes.iter().map(fence_calls).sum();
        let name = format!("job:{i}");
        let lock = locker.try_lock(&name).await.unwrap();
        assert_eq!(lock.token(), ahead + 1, "the token of the two nodes ahead");
        assert_eq!(tokens(&nodes[1..], &name), vec![lock.token() as i64; 2]);
        locker.unlock(&lock).await.unwrap();
        fenced += nodes.iter().map(fence_calls).sum::<u64>() - before;
    }
    // 0 unless a reply came more than a millisecond (the least wait) after
    // the others, which a loaded machine does now and then; fencing each
    // disagreement made it about 20 of 30.
    assert!(fenced <= 10, "{fenced} of 30 locks ran a fencing round");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn nodes_that_just_started_grant_one_token_and_skip_the_fencing_round() {
    // Each node seeds its counter at its own start's clock + 60 s, and
    // every grant is at least the clock + 60 s: nodes started one after
    // another agree at once (before 2026-11-28 each counted from its own
    // start for a minute, and every lock ran a fencing round).
    let nodes: Vec<Server> = Server::start_n(3);
    let locker = Builder::new(&urls(&nodes)).build().unwrap();
    for i in 0..10 {
        let name = format!("fresh:{i}");
        let lock = locker.try_lock(&name).await.unwrap();
        let on_nodes = tokens(&nodes, &name);
        assert!(on_nodes.len() >= 2, "held on a majority");
        assert!(
            on_nodes.iter().all(|&t| t as u64 == lock.token()),
            "one token everywhere: {on_nodes:?} vs {}",
            lock.token()
        );
        locker.unlock(&lock).await.unwrap();
    }
    assert_eq!(nodes.iter().map(fence_calls).sum::<u64>(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_behind_the_others_is_fenced_up_to_the_quorum_token() {
    let nodes: Vec<Server> = Server::start_n(3);
    let urls: Vec<String> = urls(&nodes);
    let locker = Builder::new(&urls)
        .node_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    // Two grants only (the third node is stopped): node 1's counter was
    // raised above the client's floor, so the two tokens differ and the
    // client raises the lower one to the higher.
    nodes[1].raise_token_counter(redis_lock_client::quorum::unix_micros() + 90_000_000);
    nodes[2].signal("STOP");
    let lock = locker.try_lock("fresh").await.unwrap();
    let on_nodes = tokens(&nodes[..2], "fresh");
    assert_eq!(
        on_nodes,
        vec![lock.token() as i64; 2],
        "both running nodes hold the quorum token"
    );
    assert!(nodes[..2].iter().map(fence_calls).sum::<u64>() > 0);
    nodes[2].signal("CONT");
    locker.unlock(&lock).await.unwrap();
}
