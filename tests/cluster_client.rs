//! The quorum client with a Redis Cluster as a node (`redis+cluster://`):
//! each lock's commands reach the primary of its key's slot, through
//! resharding (MOVED), a slot being migrated (ASK) and waiters told
//! TRYAGAIN; one cluster is one vote.

use crate::common;
use common::*;
use redis_lock_client::{Builder, Error, LockOptions, Locker};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn locker(urls: &[String]) -> Locker {
    Builder::new(urls)
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

/// Who holds `key` on the node serving its slot (`LOCK.STATUS`'s owner
/// line), "" when free.
fn holder(nodes: &[Server], key: &str) -> String {
    let (owner, _) = owner_of(nodes, key);
    let status = redis_cli(nodes[owner].port, &["LOCK.STATUS", key]);
    let mut lines = status.lines();
    while let Some(line) = lines.next() {
        if line == "owner" {
            return lines.next().unwrap_or("").to_string();
        }
    }
    String::new()
}

#[tokio::test(flavor = "multi_thread")]
async fn locks_in_every_slot_are_taken_extended_and_released_on_their_primary() {
    let nodes = cluster(3);
    let locker = locker(&[cluster_url(&nodes)]);
    let mut primaries = std::collections::HashSet::new();
    for i in 0..24 {
        let name = format!("job:{i}");
        let mut lock = locker.try_lock(&name).await.unwrap();
        let (owner, _) = owner_of(&nodes, &name);
        primaries.insert(owner);
        assert_eq!(holder(&nodes, &name), lock.owner(), "{name}");
        locker.extend(&mut lock).await.unwrap();
        let status = locker.status(&name).await;
        let owner = lock.owner().as_bytes();
        assert!(
            matches!(&status[0].1, Ok(Some(s)) if s.owner == owner),
            "{status:?}"
        );
        locker.unlock(&lock).await.unwrap();
        assert_eq!(holder(&nodes, &name), "", "{name} released");
    }
    assert_eq!(
        primaries.len(),
        3,
        "24 names spread over all three primaries"
    );
    // A wait queues on the key's primary (LOCK.ACQUIRE ... WAIT).
    let held = locker.try_lock("queued").await.unwrap();
    let waiter = tokio::spawn({
        let locker = locker.clone();
        async move { locker.lock("queued", Duration::from_secs(5)).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    locker.unlock(&held).await.unwrap();
    let got = waiter.await.unwrap().unwrap();
    assert!(got.token() > held.token());
    locker.unlock(&got).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_held_lock_whose_slot_moved_is_extended_and_released_where_it_went() {
    let nodes = cluster(3);
    let locker = locker(&[cluster_url(&nodes)]);
    let mut lock = locker.try_lock("job").await.unwrap();
    let (from, slot) = owner_of(&nodes, "job");
    let to = (from + 1) % 3;
    move_slot(&nodes, &slot, from, to);
    assert_eq!(owner_of(&nodes, "job").0, to);
    // The client still sends to the old primary first: MOVED, followed.
    locker.extend(&mut lock).await.unwrap();
    let status = redis_cli(nodes[to].port, &["LOCK.STATUS", "job"]);
    assert!(status.contains(lock.owner()), "{status}");
    assert!(
        status.contains(&format!("token\n{}", lock.token())),
        "the token moved with the lock: {status}"
    );
    assert!(matches!(locker.try_lock("job").await, Err(Error::Taken)));
    locker.unlock(&lock).await.unwrap();
    assert_eq!(holder(&nodes, "job"), "");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_lock_in_a_slot_being_migrated_is_granted_on_the_target() {
    let nodes = cluster(3);
    let locker = locker(&[cluster_url(&nodes)]);
    // Hash tags: both names in one slot.
    let mut old = locker.try_lock("{s}old").await.unwrap();
    let (from, slot) = owner_of(&nodes, "{s}old");
    let to = (from + 2) % 3;
    open_slot_move(&nodes, &slot, from, to);
    // Not on the source: the source answers ASK, the target grants it.
    let new = locker.try_lock("{s}new").await.unwrap();
    // Still on the source: served there.
    locker.extend(&mut old).await.unwrap();
    migrate_keys(&nodes, &slot, from, to);
    close_slot_move(&nodes, &slot, from, to);
    assert_eq!(holder(&nodes, "{s}new"), new.owner());
    assert_eq!(holder(&nodes, "{s}old"), old.owner());
    locker.unlock(&new).await.unwrap();
    locker.unlock(&old).await.unwrap();
}

/// Several clients loop acquire/release on one name while its slot moves
/// around the cluster: no two hold it at once. Waiters queued on the old
/// primary are told TRYAGAIN and queue again on the new one.
#[tokio::test(flavor = "multi_thread")]
async fn a_contended_lock_whose_slot_moves_never_has_two_holders() {
    let nodes = cluster(3);
    let url = cluster_url(&nodes);
    let windows: Arc<Mutex<Vec<(Instant, Instant, u64)>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut clients = Vec::new();
    for _ in 0..4 {
        let (locker, windows, stop) = (
            locker(std::slice::from_ref(&url)),
            windows.clone(),
            stop.clone(),
        );
        clients.push(tokio::spawn(async move {
            let opts = LockOptions::new().wait(Duration::from_secs(3));
            let mut failures = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match locker.acquire("hot", &opts).await {
                    Ok(lock) => {
                        let start = Instant::now();
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        let end = Instant::now();
                        windows.lock().unwrap().push((start, end, lock.token()));
                        if let Err(e) = locker.unlock(&lock).await {
                            failures.push(format!("unlock: {e}"));
                        }
                    }
                    Err(e) => failures.push(format!("acquire: {e}")),
                }
            }
            failures
        }));
    }
    let mover = tokio::task::spawn_blocking({
        move || {
            let (mut at, slot) = owner_of(&nodes, "hot");
            for _ in 0..3 {
                std::thread::sleep(Duration::from_millis(300));
                let to = (at + 1) % 3;
                move_slot(&nodes, &slot, at, to);
                at = to;
            }
            std::thread::sleep(Duration::from_millis(300));
            nodes
        }
    });
    let nodes = mover.await.unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut failures = Vec::new();
    for c in clients {
        failures.extend(c.await.unwrap());
    }
    let mut w = windows.lock().unwrap().clone();
    w.sort_by_key(|&(start, ..)| start);
    let overlaps = w.windows(2).filter(|p| p[1].0 < p[0].1).count();
    assert_eq!(overlaps, 0, "two holders at once");
    assert!(
        w.len() >= 20,
        "{} acquisitions; failures: {failures:?}",
        w.len()
    );
    // Redirections and TRYAGAIN are followed within each call's wait.
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(holder(&nodes, "hot"), "", "nothing left held");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_and_two_single_servers_are_three_votes() {
    let nodes = cluster(3);
    let singles = Server::start_n(2);
    let mut urls = vec![cluster_url(&nodes)];
    urls.extend(singles.iter().map(Server::url));
    let locker = locker(&urls);
    for i in 0..6 {
        let name = format!("mixed:{i}");
        let mut lock = locker.try_lock(&name).await.unwrap();
        assert_eq!(holder(&nodes, &name), lock.owner());
        for s in &singles {
            let status = redis_cli(s.port, &["LOCK.STATUS", &name]);
            assert!(status.contains(lock.owner()), "{status}");
        }
        locker.extend(&mut lock).await.unwrap();
        locker.unlock(&lock).await.unwrap();
    }
    // The cluster and one server are a majority.
    let mut singles = singles;
    singles[1].kill();
    let lock = locker
        .lock("mixed:x", Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(holder(&nodes, "mixed:x"), lock.owner());
    locker.unlock(&lock).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn one_cluster_through_two_seeds_is_one_vote() {
    let nodes = cluster(3);
    let seeds = [
        cluster_url(&nodes),
        format!("redis+cluster://127.0.0.1:{}/", nodes[1].port),
    ];
    let locker = locker(&seeds);
    // Two votes needed, one cluster: never a majority.
    match locker.try_lock("twice").await {
        Err(Error::NoQuorum { failures, .. }) => {
            let why = format!("{failures:?}");
            assert!(why.contains("same server"), "{why}");
        }
        other => panic!("one cluster voted twice: {:?}", other.map(|l| l.token())),
    }
    // A queued wait refuses the list, as it does two URLs of one server.
    match locker.lock("twice", Duration::from_secs(1)).await {
        Err(Error::Config(why)) => assert!(why.contains("same server"), "{why}"),
        other => panic!("{:?}", other.map(|l| l.token())),
    }
    assert_eq!(holder(&nodes, "twice"), "");
    // Listed twice by one address: refused when built.
    let same = [
        cluster_url(&nodes),
        cluster_url(&nodes).replace("127.0.0.1", "localhost"),
    ];
    assert!(matches!(Builder::new(&same).build(), Err(Error::Config(_))));
}

/// The CLI takes cluster URLs in `--servers` (`REDIS_LOCK_SERVERS`):
/// `run`, `status` and `release` reach the key's primary; a cluster URL
/// that cannot be one is bad settings (78), never a hang.
#[test]
fn the_cli_runs_reports_and_releases_through_a_cluster_url() {
    let nodes = cluster(3);
    let cli = |servers: &str, args: &[&str]| {
        std::process::Command::new(workspace_binary("redis-lock"))
            .env("REDIS_LOCK_SERVERS", servers)
            .args(args)
            .output()
            .unwrap()
    };
    let url = cluster_url(&nodes);
    for name in ["job:1", "job:2", "job:3"] {
        let (owner, _) = owner_of(&nodes, name);
        let port = nodes[owner].port;
        let check =
            format!("redis-cli -p {port} LOCK.STATUS {name} | grep -q \"$REDIS_LOCK_OWNER\"");
        let out = cli(&url, &["run", name, "--", "sh", "-c", &check]);
        assert_eq!(out.status.code(), Some(0), "held on its primary: {out:?}");
    }
    let (owner, _) = owner_of(&nodes, "stuck");
    let taken = redis_cli(
        nodes[owner].port,
        &["LOCK.ACQUIRE", "stuck", "op1", "30000"],
    );
    assert!(taken.parse::<i64>().is_ok(), "{taken}");
    let out = cli(&url, &["status", "stuck"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("owner=op1"),
        "{out:?}"
    );
    let out = cli(&url, &["release", "stuck", "--owner", "op1"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(holder(&nodes, "stuck"), "");
    let plain = Server::start();
    for bad in [
        format!("redis+cluster://127.0.0.1:{}/2", nodes[0].port),
        format!("redis+cluster+sentinel://127.0.0.1:{}/", nodes[0].port),
        // A seed that is not in cluster mode.
        format!("redis+cluster://127.0.0.1:{}/", plain.port),
    ] {
        let out = cli(&bad, &["run", "job", "--", "true"]);
        assert_eq!(out.status.code(), Some(78), "{bad}: {out:?}");
    }
}

/// The ACL of docs/production.md's "Redis Cluster" section: the lock
/// user's rule plus the slot map and ASKING.
#[tokio::test(flavor = "multi_thread")]
async fn a_lock_user_with_the_documented_acl_locks_through_a_cluster() {
    let nodes = cluster(3);
    let rule = "on >s3cret resetkeys ~lock:* resetchannels -@all +ping +lock.acquire \
                +lock.release +lock.extend +lock.status +lock.fence +lock.serverid +time \
                +cluster|slots +asking";
    for n in &nodes {
        let mut args = vec!["ACL", "SETUSER", "locker"];
        args.extend(rule.split_whitespace());
        assert_eq!(redis_cli(n.port, &args), "OK");
    }
    let url = format!("redis+cluster://locker:s3cret@127.0.0.1:{}/", nodes[0].port);
    let locker = locker(&[url]);
    let mut lock = locker.try_lock("lock:{s}old").await.unwrap();
    let (from, slot) = owner_of(&nodes, "lock:{s}old");
    let to = (from + 1) % 3;
    open_slot_move(&nodes, &slot, from, to);
    let new = locker.try_lock("lock:{s}new").await.unwrap(); // ASK
    migrate_keys(&nodes, &slot, from, to);
    close_slot_move(&nodes, &slot, from, to);
    locker.extend(&mut lock).await.unwrap(); // MOVED
    locker.unlock(&new).await.unwrap();
    locker.unlock(&lock).await.unwrap();
    assert!(matches!(
        locker.try_lock("job").await,
        Err(Error::Rejected { .. })
    ));
}

/// The slot map is read again after a slot moved; a seed that stopped
/// answering must not hold that reading up (it is asked with every
/// primary known, and the first map is taken).
#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_seed_does_not_stop_the_map_being_read_again() {
    // The other primaries keep serving their slots while the seed is out.
    let nodes = cluster_with(3, &["--cluster-require-full-coverage", "no"]);
    let locker = locker(&[cluster_url(&nodes)]);
    let on_second = |i: &usize| owner_of(&nodes, &format!("n:{i}")).0 == 1;
    let names: Vec<String> = (0..100)
        .filter(on_second)
        .take(2)
        .map(|i| format!("n:{i}"))
        .collect();
    let mut moving = locker.try_lock(&names[0]).await.unwrap();
    let (_, slot) = owner_of(&nodes, &names[0]);
    nodes[0].signal("STOP");
    open_slot_move(&nodes, &slot, 1, 2);
    migrate_keys(&nodes, &slot, 1, 2);
    let dst_id = redis_cli(nodes[2].port, &["CLUSTER", "MYID"]);
    for n in [2, 1] {
        let set = redis_cli(
            nodes[n].port,
            &["CLUSTER", "SETSLOT", &slot, "NODE", &dst_id],
        );
        assert_eq!(set, "OK");
    }
    locker.extend(&mut moving).await.unwrap(); // MOVED: the map is stale
    let other = locker.try_lock(&names[1]).await.unwrap(); // read again first
    locker.unlock(&other).await.unwrap();
    locker.unlock(&moving).await.unwrap();
    nodes[0].signal("CONT");
}
