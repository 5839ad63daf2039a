//! The quorum client's fencing round is needed only when the granting
//! nodes handed out different tokens. The client asks every node for the
//! same token floor (`MINTOKEN`, a little above its clock), so nodes whose
//! counters are below it all grant exactly that token and the round is
//! skipped; after a node's start (its counter runs 60 s ahead) it is not.

mod common;
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
    let urls: Vec<String> = nodes.iter().map(Server::url).collect();
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
async fn a_slower_nodes_grant_settles_the_token_without_a_fencing_round() {
    // Node 0's counter runs 30 s ahead (raised by a FENCE), so it grants
    // a larger token than the other two, which grant the client's floor.
    // Whenever node 0 is among the first two replies the two disagree, and
    // the client used to fence the other one; the third grant, already on
    // its way, settles it: with all three in, the token is the floor, held
    // by two nodes.
    let (nodes, dir) = settled_nodes("settle");
    let mut c = nodes[0].conn();
    let ahead = redis_lock_client::quorum::unix_micros() + 30_000_000;
    let _: i64 = redis::cmd("LOCK.ACQUIRE")
        .arg("push")
        .arg("o")
        .arg(10_000)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("LOCK.FENCE")
        .arg("push")
        .arg("o")
        .arg(ahead)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("LOCK.RELEASE")
        .arg("push")
        .arg("o")
        .query(&mut c)
        .unwrap();
    let urls: Vec<String> = nodes.iter().map(Server::url).collect();
    let locker = Builder::new(&urls).build().unwrap();
    let mut last = 0;
    for i in 0..30 {
        let name = format!("job:{i}");
        let lock = locker.try_lock(&name).await.unwrap();
        assert!(lock.token() > last, "tokens increase");
        assert!(lock.token() < ahead, "the floor, not node 0's token");
        assert_eq!(tokens(&nodes[1..], &name), vec![lock.token() as i64; 2]);
        last = lock.token();
        locker.unlock(&lock).await.unwrap();
    }
    let fenced: u64 = nodes.iter().map(fence_calls).sum();
    // 0 unless a reply came more than a millisecond (the least grace) after
    // the others; fencing each disagreement made it about 20 of 30.
    assert!(fenced <= 3, "{fenced} of 30 locks ran a fencing round");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_that_just_started_is_fenced_up_to_the_quorum_token() {
    let nodes: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = nodes.iter().map(Server::url).collect();
    let locker = Builder::new(&urls)
        .node_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    // Two grants only (the third node is stopped): fresh nodes count from
    // their clock + 60 s, each from its own start, so the two tokens
    // differ and the client raises the lower one to the higher.
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
