//! A Redis Cluster of module nodes for the tests: `n` primaries made into
//! one cluster with `redis-cli --cluster create`, and the moves of a slot
//! a resharding makes (`CLUSTER SETSLOT` + `MIGRATE`).

use crate::server::{eventually, info_field, Server};
use std::process::Command;
use std::time::Duration;

/// `redis-cli -p port args...`'s output, trimmed.
pub fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `n` primaries made into one cluster with `redis-cli --cluster create`,
/// waited for until every node says the cluster is ok.
pub fn cluster(n: usize) -> Vec<Server> {
    cluster_with(n, &[])
}

/// [`cluster`] with more server arguments.
pub fn cluster_with(n: usize, extra: &[&str]) -> Vec<Server> {
    let mut cluster_args = vec![
        "--cluster-enabled",
        "yes",
        "--cluster-node-timeout",
        "2000",
        "--enable-debug-command",
        "yes",
    ];
    cluster_args.extend_from_slice(extra);
    let nodes: Vec<Server> = (0..n).map(|_| Server::with(&cluster_args, &[])).collect();
    let addrs: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let out = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("redis-cli --cluster create");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    for n in &nodes {
        let mut c = n.conn();
        assert!(
            eventually(Duration::from_secs(20), || info_field(
                &mut c,
                "cluster",
                "cluster_enabled"
            ) == "1"
                && redis_cli(n.port, &["CLUSTER", "INFO"])
                    .contains("cluster_state:ok")),
            "cluster did not converge"
        );
    }
    nodes
}

/// The node (index) whose slot holds `key`, and that slot.
pub fn owner_of(nodes: &[Server], key: &str) -> (usize, String) {
    let slot = redis_cli(nodes[0].port, &["CLUSTER", "KEYSLOT", key]);
    let owner = (0..nodes.len())
        .find(|&n| !redis_cli(nodes[n].port, &["LOCK.STATUS", key]).contains("MOVED"))
        .expect("some node serves the slot");
    (owner, slot)
}

/// The cluster URL of a client reaching `nodes` through its first node.
pub fn cluster_url(nodes: &[Server]) -> String {
    format!("redis+cluster://127.0.0.1:{}/", nodes[0].port)
}

/// Open the move of `slot` from `nodes[from]` to `nodes[to]`, as a
/// resharding does first: the target importing, the source migrating.
pub fn open_slot_move(nodes: &[Server], slot: &str, from: usize, to: usize) {
    let src_id = redis_cli(nodes[from].port, &["CLUSTER", "MYID"]);
    let dst_id = redis_cli(nodes[to].port, &["CLUSTER", "MYID"]);
    let importing = redis_cli(
        nodes[to].port,
        &["CLUSTER", "SETSLOT", slot, "IMPORTING", &src_id],
    );
    assert_eq!(importing, "OK");
    let migrating = redis_cli(
        nodes[from].port,
        &["CLUSTER", "SETSLOT", slot, "MIGRATING", &dst_id],
    );
    assert_eq!(migrating, "OK");
}

/// MIGRATE every key of `slot` from `nodes[from]` to `nodes[to]`.
pub fn migrate_keys(nodes: &[Server], slot: &str, from: usize, to: usize) {
    let port = nodes[to].port.to_string();
    loop {
        let keys = redis_cli(nodes[from].port, &["CLUSTER", "GETKEYSINSLOT", slot, "100"]);
        let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
        if keys.is_empty() {
            return;
        }
        let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
        args.extend(keys.iter().copied());
        let migrated = redis_cli(nodes[from].port, &args);
        assert!(
            migrated == "OK" || migrated == "NOKEY",
            "MIGRATE: {migrated}"
        );
    }
}

/// End the move of `slot` to `nodes[to]`: every node told it is served
/// there (the target first, as `redis-cli --cluster reshard` does).
pub fn close_slot_move(nodes: &[Server], slot: &str, from: usize, to: usize) {
    let dst_id = redis_cli(nodes[to].port, &["CLUSTER", "MYID"]);
    let order = std::iter::once(to)
        .chain(std::iter::once(from))
        .chain((0..nodes.len()).filter(|&n| n != to && n != from));
    for n in order {
        let set = redis_cli(
            nodes[n].port,
            &["CLUSTER", "SETSLOT", slot, "NODE", &dst_id],
        );
        assert_eq!(set, "OK", "SETSLOT NODE on node {n}");
    }
}

/// Move `slot` with its keys from `nodes[from]` to `nodes[to]`.
pub fn move_slot(nodes: &[Server], slot: &str, from: usize, to: usize) {
    open_slot_move(nodes, slot, from, to);
    migrate_keys(nodes, slot, from, to);
    close_slot_move(nodes, slot, from, to);
}
