//! A 3-primary Redis Cluster: `redis-cli -c` routes LOCK.* to the node that
//! owns the key's slot.

use crate::common;
use common::*;
use redis_lock_testkit::redis_cli as cli;
use std::time::Duration;

#[test]
fn cluster_routes_lock_commands_to_the_owning_node() {
    let nodes = cluster(3);
    let mut owners_seen = std::collections::HashSet::new();
    for i in 0..30 {
        let key = format!("job:{i}");
        let reply = cli(
            nodes[0].port,
            &["-c", "LOCK.ACQUIRE", &key, "alice", "30000"],
        );
        assert!(reply.parse::<i64>().is_ok_and(|t| t > 0), "{key}: {reply}");
        // Exactly one node holds it: the one that owns the slot.
        let holders: Vec<usize> = (0..3)
            .filter(|&n| cli(nodes[n].port, &["LOCK.STATUS", &key]).starts_with("owner"))
            .collect();
        assert_eq!(holders.len(), 1, "{key} held on {holders:?}");
        let slot = cli(nodes[0].port, &["CLUSTER", "KEYSLOT", &key]);
        let moved = cli(nodes[(holders[0] + 1) % 3].port, &["LOCK.STATUS", &key]);
        assert!(moved.contains(&format!("MOVED {slot}")), "{moved}");
        owners_seen.insert(holders[0]);
        assert_eq!(
            cli(nodes[1].port, &["-c", "LOCK.RELEASE", &key, "alice"]),
            "1"
        );
    }
    assert_eq!(owners_seen.len(), 3, "30 keys spread over all three nodes");
}

#[test]
fn a_waiter_never_gets_a_lock_whose_slot_migrated_away() {
    // MIGRATE deletes the key on the source; its waiter used to be handed a
    // fresh lock there while the target held the migrated one: two holders.
    let nodes = cluster(3);
    let (from, slot) = owner_of(&nodes, "job");
    let to = (from + 1) % nodes.len();
    let (src, dst) = (&nodes[from], &nodes[to]);
    assert!(cli(src.port, &["LOCK.ACQUIRE", "job", "A", "30000"])
        .parse::<i64>()
        .is_ok());
    // A plain hand-off works in a cluster.
    let waiter = std::thread::spawn({
        let port = src.port;
        move || {
            cli(
                port,
                &["LOCK.ACQUIRE", "job", "B", "30000", "WAIT", "10000"],
            )
        }
    });
    assert!(eventually(Duration::from_secs(5), || {
        cli(src.port, &["LOCK.STATUS", "job"]).contains("waiters\n1")
    }));
    // Released from a script: the hand-off's cluster check (a command call
    // of its own) works there too.
    let script = "return redis.call('LOCK.RELEASE', KEYS[1], ARGV[1])";
    assert_eq!(cli(src.port, &["EVAL", script, "1", "job", "A"]), "1");
    assert!(waiter.join().unwrap().parse::<i64>().is_ok(), "handed off");
    // B holds it; C waits; the slot moves to the other node with the key.
    let waiter = std::thread::spawn({
        let port = src.port;
        move || {
            cli(
                port,
                &["LOCK.ACQUIRE", "job", "C", "30000", "WAIT", "10000"],
            )
        }
    });
    assert!(eventually(Duration::from_secs(5), || {
        cli(src.port, &["LOCK.STATUS", "job"]).contains("waiters\n1")
    }));
    let src_id = cli(src.port, &["CLUSTER", "MYID"]);
    let dst_id = cli(dst.port, &["CLUSTER", "MYID"]);
    cli(
        dst.port,
        &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &src_id],
    );
    cli(
        src.port,
        &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &dst_id],
    );
    let port = dst.port.to_string();
    let migrated = cli(
        src.port,
        &["MIGRATE", "127.0.0.1", &port, "job", "0", "5000"],
    );
    assert_eq!(migrated, "OK");
    let told = waiter.join().unwrap();
    assert!(
        told.contains("TRYAGAIN") || told.contains("another cluster node"),
        "{told}"
    );
    assert_eq!(
        cli(src.port, &["CLUSTER", "COUNTKEYSINSLOT", &slot]),
        "0",
        "no second lock left on the source"
    );
    for n in [dst, src] {
        assert_eq!(
            cli(n.port, &["CLUSTER", "SETSLOT", &slot, "NODE", &dst_id]),
            "OK"
        );
    }
    let on_target = cli(dst.port, &["LOCK.STATUS", "job"]);
    assert!(
        on_target.contains("owner\nB"),
        "B still holds it: {on_target}"
    );
}

#[test]
fn a_lock_that_expired_but_was_not_reaped_migrates() {
    // The target refused it as a RESTORE with TTL 0: MIGRATE failed and a
    // reshard stopped with the slot half moved.
    let nodes = cluster(3);
    let (from, slot) = owner_of(&nodes, "job");
    let (src, dst) = (&nodes[from], &nodes[(from + 1) % nodes.len()]);
    let src_id = cli(src.port, &["CLUSTER", "MYID"]);
    let dst_id = cli(dst.port, &["CLUSTER", "MYID"]);
    cli(
        dst.port,
        &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &src_id],
    );
    let mut c = src.conn();
    let port = dst.port.to_string();
    // In one transaction, so that no reaper runs between expiry and MIGRATE.
    let migrated: Vec<redis::Value> = redis::pipe()
        .atomic()
        .cmd("LOCK.ACQUIRE")
        .arg("job")
        .arg("H")
        .arg(1)
        .cmd("DEBUG")
        .arg("SLEEP")
        .arg("0.05")
        .cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(&slot)
        .arg("MIGRATING")
        .arg(&dst_id)
        .cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(&port)
        .arg("job")
        .arg(0)
        .arg(5000)
        .query(&mut c)
        .unwrap();
    assert_eq!(
        migrated.last(),
        Some(&redis::Value::Okay),
        "MIGRATE of the expired lock: {migrated:?}"
    );
    assert_eq!(cli(src.port, &["CLUSTER", "COUNTKEYSINSLOT", &slot]), "0");
    for n in [dst, src] {
        assert_eq!(
            cli(n.port, &["CLUSTER", "SETSLOT", &slot, "NODE", &dst_id]),
            "OK"
        );
    }
    assert_eq!(cli(dst.port, &["LOCK.STATUS", "job"]), "", "expired: free");
    assert!(cli(dst.port, &["LOCK.ACQUIRE", "job", "B", "5000"])
        .parse::<i64>()
        .is_ok());
}

#[test]
fn no_hand_off_while_the_cluster_is_down() {
    // With reads allowed while the cluster is down, Valkey 8.1 kept the
    // waiter queued and the hand-off at expiry went through, though the
    // node refused the same lock to a plain ACQUIRE (a promoted replica on
    // the other side of a partition could grant it too: two holders).
    let mut nodes = cluster_with(3, &["--cluster-allow-reads-when-down", "yes"]);
    let (owner, _) = owner_of(&nodes, "job");
    let port = nodes[owner].port;
    assert!(cli(port, &["LOCK.ACQUIRE", "job", "H", "6000"])
        .parse::<i64>()
        .is_ok());
    let waiter = std::thread::spawn(move || {
        cli(
            port,
            &["LOCK.ACQUIRE", "job", "W", "30000", "WAIT", "20000"],
        )
    });
    assert!(eventually(Duration::from_secs(5), || {
        cli(port, &["LOCK.STATUS", "job"]).contains("waiters\n1")
    }));
    nodes[(owner + 1) % 3].kill(); // one of three primaries: the cluster fails
    assert!(
        eventually(Duration::from_secs(15), || cli(port, &["CLUSTER", "INFO"])
            .contains("cluster_state:fail")),
        "the cluster did not notice"
    );
    let told = waiter.join().unwrap();
    assert!(
        told.parse::<i64>().is_err(),
        "a lock was handed on while the cluster was down: {told}"
    );
    assert!(!cli(port, &["LOCK.STATUS", "job"]).contains("owner\nW"));
}

#[test]
fn a_reshard_into_a_node_added_during_its_guard_moves_held_locks() {
    // A new node starts with the restart guard (it cannot tell a new disk
    // from a wiped one). MIGRATE's RESTORE of a held lock was refused as a
    // new grant (`ERR Bad data format`), and the reshard stopped with the
    // slot open: scaling out meant waiting out the guard first.
    let nodes = cluster(3);
    // `--cluster reshard` moves the source's lowest slots first; job:8553
    // is in slot 0.
    let (from, slot) = owner_of(&nodes, "job:8553");
    assert_eq!(slot, "0");
    let token = cli(
        nodes[from].port,
        &["LOCK.ACQUIRE", "job:8553", "alice", "60000"],
    );
    assert!(token.parse::<i64>().is_ok(), "{token}");
    // The shipped defaults: the guard on, as long as the longest TTL.
    let added = Server::bare(
        &["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"],
        &[],
    );
    let at = |n: &Server| format!("127.0.0.1:{}", n.port);
    let added_to = std::process::Command::new("redis-cli")
        .args(["--cluster", "add-node", &at(&added), &at(&nodes[0])])
        .output()
        .unwrap();
    assert!(added_to.status.success(), "{added_to:?}");
    assert!(
        eventually(Duration::from_secs(20), || nodes
            .iter()
            .chain([&added])
            .all(|n| cli(n.port, &["CLUSTER", "NODES"]).lines().count() == 4
                && cli(n.port, &["CLUSTER", "INFO"])
                    .contains("cluster_state:ok"))),
        "the new node did not join"
    );
    let (from_id, to_id) = (
        cli(nodes[from].port, &["CLUSTER", "MYID"]),
        cli(added.port, &["CLUSTER", "MYID"]),
    );
    let resharded = std::process::Command::new("redis-cli")
        .args(["--cluster", "reshard", &at(&nodes[from])])
        .args(["--cluster-from", &from_id, "--cluster-to", &to_id])
        .args(["--cluster-slots", "1", "--cluster-yes"])
        .output()
        .unwrap();
    assert!(
        resharded.status.success(),
        "reshard: {}",
        String::from_utf8_lossy(&resharded.stdout)
    );
    // The move is complete: the slot is the new node's, nothing is left.
    assert_eq!(
        cli(nodes[from].port, &["CLUSTER", "COUNTKEYSINSLOT", "0"]),
        "0"
    );
    let moved = cli(nodes[from].port, &["LOCK.STATUS", "job:8553"]);
    assert!(
        moved.contains(&format!("MOVED 0 {}", at(&added))),
        "{moved}"
    );
    // The lock arrived with its owner, token and TTL.
    let (owner, got, ttl, _, _) = status(&mut added.conn(), "job:8553").expect("moved held");
    assert_eq!(owner, b"alice");
    assert_eq!(got.to_string(), token);
    assert!(ttl > 0 && ttl <= 60_000, "ttl {ttl}");
    // The guard still refuses new grants there: a free name in the same
    // slot, and a client's RESTORE of a live lock into a served slot.
    let new = cli(added.port, &["LOCK.ACQUIRE", "{job:8553}:b", "bob", "5000"]);
    assert!(new.starts_with("TRYAGAIN"), "{new}");
    let mut c = added.conn();
    let dump: Vec<u8> = redis::cmd("DUMP").arg("job:8553").query(&mut c).unwrap();
    let restored: redis::RedisResult<()> = redis::cmd("RESTORE")
        .arg("{job:8553}:copy")
        .arg(0)
        .arg(dump)
        .query(&mut c);
    assert!(restored.is_err(), "a RESTORE is a grant: refused");
    assert!(added.log().contains("the restart guard refuses new locks"));
    // The holder releases it on its new node.
    assert_eq!(cli(added.port, &["LOCK.RELEASE", "job:8553", "alice"]), "1");
}

#[test]
fn a_takeover_guard_outlasts_the_old_primary() {
    // With CLUSTER FAILOVER TAKEOVER the old primary grants until it hears
    // of the new epoch, while the guard counted from the promotion:
    // re-grants at its end overlapped the old primary's last by 0-1 ms. The
    // guard now adds twice the node timeout (2000 ms here) to its 1000 ms.
    let nodes = cluster(3);
    let (owner, _) = owner_of(&nodes, "job");
    let replica = Server::with(
        &["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"],
        &["restart-delay-ms", "1000"],
    );
    let at = |port: u16| format!("127.0.0.1:{port}");
    let primary_id = cli(nodes[owner].port, &["CLUSTER", "MYID"]);
    let added = std::process::Command::new("redis-cli")
        .args(["--cluster", "add-node", &at(replica.port)])
        .arg(at(nodes[owner].port))
        .args(["--cluster-slave", "--cluster-master-id", &primary_id])
        .output()
        .unwrap();
    assert!(added.status.success(), "{added:?}");
    let mut r = replica.conn();
    assert!(
        eventually(Duration::from_secs(20), || info_field(
            &mut r,
            "replication",
            "master_link_status"
        ) == "up"),
        "the replica did not sync"
    );
    assert_eq!(
        cli(replica.port, &["CLUSTER", "FAILOVER", "TAKEOVER"]),
        "OK"
    );
    assert!(
        eventually(Duration::from_secs(10), || info_field(
            &mut r,
            "replication",
            "role"
        ) == "master"),
        "not promoted"
    );
    assert!(
        eventually(Duration::from_secs(5), || replica.log().contains(
            "promoted to primary; restart guard on: new locks refused (TRYAGAIN) for 5000 ms"
        )),
        "{}",
        replica.log()
    );
    let refused = cli(replica.port, &["LOCK.ACQUIRE", "job", "bob", "5000"]);
    assert!(refused.starts_with("TRYAGAIN"), "{refused}");
}
