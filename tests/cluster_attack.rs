//! A Redis Cluster as a node (`redis+cluster://`) under what clusters do to
//! their clients: redirections that loop, a slot that is down and comes
//! back, a seed that is a replica, a failover under a held lock and a
//! queued wait, one of the cluster's primaries listed again as a server.

use crate::common;
use common::*;
use redis_lock_client::{Builder, Error, Locker};
use std::time::Duration;

fn locker(urls: &[String]) -> Locker {
    Builder::new(urls)
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

/// A name whose slot is served by `nodes[n]`.
fn name_on(nodes: &[Server], n: usize, prefix: &str) -> String {
    (0..1000)
        .map(|i| format!("{prefix}:{i}"))
        .find(|name| owner_of(nodes, name).0 == n)
        .expect("a name on that node")
}

/// Bounds a call: a hang is a failure, not a stuck test.
async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("the call hung past its deadline")
}

/// One of the cluster's primaries also listed as a plain `redis://` URL is
/// one server reached twice: its yes counts once, so a third server that
/// says no leaves no majority.
#[tokio::test(flavor = "multi_thread")]
async fn a_primary_of_the_cluster_listed_again_as_a_server_votes_once() {
    let nodes = cluster(3);
    let single = Server::start();
    let name = name_on(&nodes, 1, "twice");
    let taken = redis_cli(single.port, &["LOCK.ACQUIRE", &name, "op1", "30000"]);
    assert!(taken.parse::<i64>().is_ok(), "{taken}");
    let urls = [
        cluster_url(&nodes),
        format!("redis://127.0.0.1:{}/", nodes[1].port),
        single.url(),
    ];
    let locker = locker(&urls);
    let got = bounded(locker.try_lock(&name)).await;
    assert!(
        got.is_err(),
        "the primary voted twice: {:?}",
        got.map(|l| l.token())
    );
    let got = bounded(locker.lock(&name, Duration::from_secs(1))).await;
    assert!(
        got.is_err(),
        "the primary voted twice: {:?}",
        got.map(|l| l.token())
    );
    let status = redis_cli(nodes[1].port, &["LOCK.STATUS", &name]);
    assert!(!status.contains("owner"), "left held: {status}");
}

/// Two primaries each saying the other serves a slot (a resharding left
/// half done): the redirections are followed a bounded number of times,
/// and the call fails as an outage, not a hang.
#[tokio::test(flavor = "multi_thread")]
async fn two_primaries_pointing_at_each_other_fail_the_call_without_a_hang() {
    let nodes = cluster(3);
    let locker = locker(&[cluster_url(&nodes)]);
    let name = name_on(&nodes, 1, "loop");
    let (_, slot) = owner_of(&nodes, &name);
    let id2 = redis_cli(nodes[2].port, &["CLUSTER", "MYID"]);
    // nodes[1] gives the (empty) slot to nodes[2]; nodes[2] still believes
    // nodes[1] serves it.
    let set = redis_cli(nodes[1].port, &["CLUSTER", "SETSLOT", &slot, "NODE", &id2]);
    assert_eq!(set, "OK");
    let moved = redis_cli(nodes[2].port, &["LOCK.STATUS", &name]);
    let back = redis_cli(nodes[1].port, &["LOCK.STATUS", &name]);
    if !(moved.contains("MOVED") && back.contains("MOVED")) {
        return; // gossip settled it first: nothing to test
    }
    match bounded(locker.try_lock(&name)).await {
        Err(Error::NoQuorum { .. }) => {}
        other => panic!("{:?}", other.map(|l| l.token())),
    }
    match bounded(locker.lock(&name, Duration::from_secs(1))).await {
        Err(Error::NoQuorum { .. }) | Err(Error::Taken) => {}
        other => panic!("{:?}", other.map(|l| l.token())),
    }
}

/// A source that answers ASK for a slot whose target was never told it is
/// importing it: the target answers MOVED back. Bounded, an outage.
#[tokio::test(flavor = "multi_thread")]
async fn an_ask_to_a_node_that_sends_it_back_fails_without_a_hang() {
    let nodes = cluster(3);
    let locker = locker(&[cluster_url(&nodes)]);
    let name = name_on(&nodes, 0, "ask");
    let (_, slot) = owner_of(&nodes, &name);
    let id2 = redis_cli(nodes[2].port, &["CLUSTER", "MYID"]);
    let set = redis_cli(
        nodes[0].port,
        &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &id2],
    );
    assert_eq!(set, "OK");
    match bounded(locker.try_lock(&name)).await {
        Err(Error::NoQuorum { .. }) => {}
        other => panic!("{:?}", other.map(|l| l.token())),
    }
    // The move called off: served again.
    assert_eq!(
        redis_cli(nodes[0].port, &["CLUSTER", "SETSLOT", &slot, "STABLE"]),
        "OK"
    );
    let lock = bounded(locker.try_lock(&name)).await.unwrap();
    bounded(locker.unlock(&lock)).await.unwrap();
}

/// A slot no primary serves (CLUSTERDOWN) is an outage for its locks;
/// served again, they are taken again.
#[tokio::test(flavor = "multi_thread")]
async fn a_slot_that_is_down_then_served_again() {
    let nodes = cluster(3);
    let locker = locker(&[cluster_url(&nodes)]);
    let name = name_on(&nodes, 1, "down");
    let (_, slot) = owner_of(&nodes, &name);
    let lock = bounded(locker.try_lock(&name)).await.unwrap();
    bounded(locker.unlock(&lock)).await.unwrap();
    assert_eq!(
        redis_cli(nodes[1].port, &["CLUSTER", "DELSLOTS", &slot]),
        "OK"
    );
    match bounded(locker.try_lock(&name)).await {
        Err(Error::NoQuorum { .. }) => {}
        other => panic!("{:?}", other.map(|l| l.token())),
    }
    assert_eq!(
        redis_cli(nodes[1].port, &["CLUSTER", "ADDSLOTS", &slot]),
        "OK"
    );
    let back = eventually(Duration::from_secs(10), || {
        redis_cli(nodes[1].port, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
    });
    assert!(back);
    let mut got = None;
    for _ in 0..50 {
        if let Ok(lock) = bounded(locker.try_lock(&name)).await {
            got = Some(lock);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let lock = got.expect("served again, taken again");
    bounded(locker.unlock(&lock)).await.unwrap();
}

/// A seed that is a replica: its map names the primaries, and the locks
/// go there.
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_as_the_seed() {
    let nodes = cluster(3);
    let replica = add_replica(&nodes, 0);
    let url = format!("redis+cluster://127.0.0.1:{}/", replica.port);
    let locker = locker(&[url]);
    for n in 0..3 {
        let name = name_on(&nodes, n, "seed");
        let mut lock = bounded(locker.try_lock(&name)).await.unwrap();
        let status = redis_cli(nodes[n].port, &["LOCK.STATUS", &name]);
        assert!(status.contains(lock.owner()), "{status}");
        bounded(locker.extend(&mut lock)).await.unwrap();
        bounded(locker.unlock(&lock)).await.unwrap();
    }
}

/// A failover under a held lock and a queued wait: the old primary, a
/// replica now, answers MOVED; the lock is extended and released on the
/// new primary, and the wait ends with the lock or cleanly, never with
/// two holders.
#[tokio::test(flavor = "multi_thread")]
async fn a_failover_under_a_held_lock_and_a_queued_wait() {
    let nodes = cluster(3);
    let replica = add_replica(&nodes, 1);
    let url = cluster_url(&nodes);
    let locker = locker(std::slice::from_ref(&url));
    let name = name_on(&nodes, 1, "fo");
    let mut lock = bounded(locker.try_lock(&name)).await.unwrap();
    let waiter = tokio::spawn({
        let locker = locker.clone();
        let name = name.clone();
        async move { locker.lock(&name, Duration::from_secs(6)).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        redis_cli(replica.port, &["CLUSTER", "FAILOVER", "TAKEOVER"]),
        "OK"
    );
    let promoted = eventually(Duration::from_secs(20), || {
        redis_cli(replica.port, &["INFO", "replication"]).contains("role:master")
            && redis_cli(nodes[1].port, &["INFO", "replication"]).contains("role:slave")
    });
    assert!(promoted);
    // The held lock: still ours, where it went.
    let extended = bounded(locker.extend(&mut lock)).await;
    let status = redis_cli(replica.port, &["LOCK.STATUS", &name]);
    let unlocked = bounded(locker.unlock(&lock)).await;
    let waited = bounded(waiter).await.unwrap();
    match &waited {
        Ok(got) => {
            assert!(got.token() > lock.token());
            bounded(locker.unlock(got)).await.unwrap();
        }
        Err(e) => eprintln!("the wait ended with {e}"),
    }
    assert!(extended.is_ok(), "extend: {extended:?}; {status}");
    assert!(unlocked.is_ok(), "unlock: {unlocked:?}");
}

/// Between MIGRATE and the slot's hand-over (the key on the target, the
/// source answering ASK): a new owner is refused, the holder extends and
/// releases through ASK, and waiters queued before the move (told
/// TRYAGAIN by the module) and during it (through ASK) get the lock in
/// turn, one at a time.
#[tokio::test(flavor = "multi_thread")]
async fn a_held_lock_and_its_waiters_between_migrate_and_the_hand_over() {
    let nodes = cluster(3);
    let locker = locker(&[cluster_url(&nodes)]);
    let name = "{m}x";
    let mut lock = bounded(locker.try_lock(name)).await.unwrap();
    let (from, slot) = owner_of(&nodes, name);
    let to = (from + 1) % 3;
    let wait = |locker: &Locker| {
        let locker = locker.clone();
        tokio::spawn(async move {
            let got = locker.lock(name, Duration::from_secs(8)).await?;
            let token = got.token();
            tokio::time::sleep(Duration::from_millis(50)).await;
            locker.unlock(&got).await?;
            Ok::<u64, Error>(token)
        })
    };
    let before = wait(&locker);
    tokio::time::sleep(Duration::from_millis(300)).await;
    open_slot_move(&nodes, &slot, from, to);
    migrate_keys(&nodes, &slot, from, to);
    let during = wait(&locker);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(matches!(
        bounded(locker.try_lock(name)).await,
        Err(Error::Taken)
    ));
    bounded(locker.extend(&mut lock)).await.unwrap();
    let status = bounded(locker.status(name)).await;
    let owner = lock.owner().as_bytes();
    assert!(
        matches!(&status[0].1, Ok(Some(s)) if s.owner == owner),
        "{status:?}"
    );
    bounded(locker.unlock(&lock)).await.unwrap();
    let first = bounded(before).await.unwrap();
    let second = bounded(during).await.unwrap();
    close_slot_move(&nodes, &slot, from, to);
    let (first, second) = (first.unwrap(), second.unwrap());
    assert!(first > lock.token() && second > lock.token() && first != second);
    let (owner, _) = owner_of(&nodes, name);
    assert_eq!(owner, to);
    let status = redis_cli(nodes[to].port, &["LOCK.STATUS", name]);
    assert!(!status.contains("owner"), "left held: {status}");
}

/// A cluster seed and the same address as a plain URL, or two spellings
/// of one seed: one server listed twice, refused when built.
#[test]
fn a_seed_listed_again_by_another_spelling_is_refused_when_built() {
    for pair in [
        ["redis+cluster://127.0.0.1:7001/", "redis://127.0.0.1:7001/"],
        [
            "redis+cluster://127.0.0.1:7001/",
            "redis+cluster://localhost:7001",
        ],
        [
            "redis+cluster://localhost:7001/",
            "redis://127.0.0.1:7001/0",
        ],
    ] {
        let built = Builder::new(&pair).build();
        assert!(matches!(built, Err(Error::Config(_))), "{pair:?}");
    }
}

/// A cluster one of whose primaries lacks the module: its slots' locks are
/// refused for good (bad settings: `Rejected`, CLI exit 78), the others'
/// are served.
#[tokio::test(flavor = "multi_thread")]
async fn a_primary_without_the_module_refuses_its_slots_locks_for_good() {
    let mut nodes: Vec<Server> = (0..2).map(|_| Server::with(&CLUSTER_ARGS, &[])).collect();
    nodes.push(Server::configured(&CLUSTER_ARGS));
    let addrs: Vec<String> = (nodes.iter())
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let out = std::process::Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for n in &nodes {
        let ok = eventually(Duration::from_secs(20), || {
            redis_cli(n.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
        });
        assert!(ok);
    }
    let slot_of = |name: &str| redis_cli(nodes[0].port, &["CLUSTER", "KEYSLOT", name]);
    let bare_id = redis_cli(nodes[2].port, &["CLUSTER", "MYID"]);
    let shards = redis_cli(nodes[2].port, &["CLUSTER", "NODES"]);
    let bare_ranges: Vec<(u16, u16)> = shards
        .lines()
        .filter(|l| l.starts_with(&bare_id))
        .flat_map(|l| {
            l.split_whitespace()
                .skip(8)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter_map(|r| {
            let (a, b) = r.split_once('-')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect();
    let on_bare = |name: &String| {
        let s: u16 = slot_of(name).parse().unwrap();
        bare_ranges.iter().any(|&(a, b)| a <= s && s <= b)
    };
    let names: Vec<String> = (0..200).map(|i| format!("m:{i}")).collect();
    let bare = names.iter().find(|n| on_bare(n)).unwrap().clone();
    let served = names.iter().find(|n| !on_bare(n)).unwrap().clone();
    let url = cluster_url(&nodes);
    let locker = locker(std::slice::from_ref(&url));
    let lock = bounded(locker.try_lock(&served)).await.unwrap();
    bounded(locker.unlock(&lock)).await.unwrap();
    match bounded(locker.try_lock(&bare)).await {
        Err(Error::Rejected { .. }) => {}
        other => panic!("{:?}", other.map(|l| l.token())),
    }
    let out = std::process::Command::new(workspace_binary("redis-lock"))
        .env("REDIS_LOCK_SERVERS", &url)
        .args(["run", &bare, "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78), "{out:?}");
}

/// Every primary of the map the client read replaced (each failed over to
/// its replica, the old ones gone for good, the seed among them): the
/// client finds the cluster again through the nodes its last map named
/// as replicas, and the held lock is extended and released there, the
/// first extension included (a refused connection sent nothing).
#[tokio::test(flavor = "multi_thread")]
async fn every_primary_replaced_and_gone_the_cluster_is_found_through_its_replicas() {
    let mut nodes = cluster(3);
    let replicas: Vec<Server> = (0..3).map(|n| add_replica(&nodes, n)).collect();
    let locker = locker(&[cluster_url(&nodes)]);
    let name = name_on(&nodes, 1, "all");
    // The map read now names the replicas.
    let mut lock = bounded(locker.try_lock(&name)).await.unwrap();
    for r in &replicas {
        assert_eq!(
            redis_cli(r.port, &["CLUSTER", "FAILOVER", "TAKEOVER"]),
            "OK"
        );
    }
    let promoted = eventually(Duration::from_secs(20), || {
        (replicas.iter()).all(|r| redis_cli(r.port, &["ROLE"]).starts_with("master"))
    });
    assert!(promoted);
    for n in &mut nodes {
        n.kill();
    }
    let ok = eventually(Duration::from_secs(20), || {
        (replicas.iter())
            .all(|r| redis_cli(r.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok"))
    });
    assert!(ok);
    // The old primary's address refuses connections: nothing was sent,
    // so the map is read again and the extension sent where it says.
    let extended = bounded(locker.extend(&mut lock)).await;
    assert!(extended.is_ok(), "{extended:?}");
    bounded(locker.unlock(&lock)).await.unwrap();
    let other = bounded(locker.try_lock("all:other")).await.unwrap();
    bounded(locker.unlock(&other)).await.unwrap();
}

/// Two seeds of one cluster while a lock's slot is being migrated (the
/// source answering ASK): a queued wait refuses the list as it does when
/// no slot moves, rather than two WAITs reaching the target on two
/// connections.
#[tokio::test(flavor = "multi_thread")]
async fn two_seeds_of_one_cluster_wait_through_ask_refuse_the_list() {
    let nodes = cluster(3);
    let seeds = [
        cluster_url(&nodes),
        format!("redis+cluster://localhost:{}/", nodes[1].port),
    ];
    let locker = locker(&seeds);
    let name = name_on(&nodes, 2, "ask2");
    let (_, slot) = owner_of(&nodes, &name);
    // Both seeds met (the map read, each primary's server known).
    assert!(bounded(locker.try_lock("warm")).await.is_err());
    open_slot_move(&nodes, &slot, 2, 0);
    match bounded(locker.lock(&name, Duration::from_secs(1))).await {
        Err(Error::Config(why)) => assert!(why.contains("same server"), "{why}"),
        other => panic!("{:?}", other.map(|l| l.token())),
    }
    let status = redis_cli(nodes[0].port, &["LOCK.STATUS", &name]);
    assert!(!status.contains("owner"), "{status}");
}

/// The CLI while the slot map cannot be read (the seed stopped): without
/// a wait it gives up as unreachable (69); waiting, a SIGTERM ends it as
/// a signal while waiting (143), not a hang.
#[test]
fn the_cli_while_the_map_cannot_be_read() {
    let nodes = cluster(3);
    let url = cluster_url(&nodes);
    let run = |args: &[&str]| {
        std::process::Command::new(workspace_binary("redis-lock"))
            .env("REDIS_LOCK_SERVERS", &url)
            .args(args)
            .spawn()
            .unwrap()
    };
    nodes[0].signal("STOP");
    let mut child = run(&["run", "job", "--", "true"]);
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut waiting = run(&["run", "--wait", "30s", "job", "--", "true"]);
    std::thread::sleep(Duration::from_millis(500));
    let pid = waiting.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let started = std::time::Instant::now();
    let waited = loop {
        if let Some(s) = waiting.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > Duration::from_secs(20) {
            waiting.kill().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    nodes[0].signal("CONT");
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(69),
        "no wait: {status:?}"
    );
    assert_eq!(
        waited.and_then(|s| s.code()),
        Some(143),
        "SIGTERM: {waited:?}"
    );
}

/// A cluster whose nodes announce no endpoint
/// (`cluster-preferred-endpoint-type unknown-endpoint`): `CLUSTER SLOTS`
/// names the primaries with no host and the redirections `MOVED 3999 :7001`, both
/// reached at the seed's host. A held lock whose slot moved, and a new one
/// in a slot being migrated (ASK), are served where the cluster says.
#[tokio::test(flavor = "multi_thread")]
async fn redirections_to_nodes_without_an_endpoint_go_to_the_seeds_host() {
    let nodes = cluster_with(
        3,
        &["--cluster-preferred-endpoint-type", "unknown-endpoint"],
    );
    let locker = locker(&[cluster_url(&nodes)]);
    let mut lock = bounded(locker.try_lock("{e}old")).await.unwrap();
    let (from, slot) = owner_of(&nodes, "{e}old");
    let to = (from + 1) % 3;
    let moved = redis_cli(nodes[to].port, &["LOCK.STATUS", "{e}old"]);
    assert!(moved.contains(" :"), "{moved}");
    open_slot_move(&nodes, &slot, from, to);
    let new = bounded(locker.try_lock("{e}new")).await; // ASK
    migrate_keys(&nodes, &slot, from, to);
    close_slot_move(&nodes, &slot, from, to);
    let extended = bounded(locker.extend(&mut lock)).await; // MOVED
    assert!(new.is_ok(), "ASK: {:?}", new.as_ref().map(|l| l.token()));
    assert!(extended.is_ok(), "MOVED: {extended:?}");
    bounded(locker.unlock(&new.unwrap())).await.unwrap();
    bounded(locker.unlock(&lock)).await.unwrap();
}
