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
    cluster_of(n, 0, extra, &[])
}

/// The server arguments of a cluster node: a node timeout of 2 s (a
/// failed primary is replaced within seconds), `DEBUG` allowed.
pub const CLUSTER_ARGS: [&str; 6] = [
    "--cluster-enabled",
    "yes",
    "--cluster-node-timeout",
    "2000",
    "--enable-debug-command",
    "yes",
];

/// `primaries` primaries with `replicas` replicas each, made into one
/// cluster by `redis-cli --cluster create` (the primaries first in the
/// returned list), with `extra` server arguments and `module_args`; waited
/// for until every node says the cluster is ok and every replica's link
/// is up.
pub fn cluster_of(
    primaries: usize,
    replicas: usize,
    extra: &[&str],
    module_args: &[&str],
) -> Vec<Server> {
    let mut cluster_args = CLUSTER_ARGS.to_vec();
    cluster_args.extend_from_slice(extra);
    let total = primaries * (1 + replicas);
    let nodes: Vec<Server> = (0..total)
        .map(|_| Server::with(&cluster_args, module_args))
        .collect();
    let addrs: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let out = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
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
    let linked = |n: &Server| {
        let info = redis_cli(n.port, &["INFO", "replication"]);
        info.contains("role:slave") && info.contains("master_link_status:up")
    };
    assert!(
        eventually(Duration::from_secs(30), || {
            nodes.iter().filter(|&n| linked(n)).count() == primaries * replicas
        }),
        "the replicas did not sync"
    );
    nodes
}

/// A replica added to the cluster, returned once it replicates `primary`.
pub fn add_replica(nodes: &[Server], primary: usize) -> Server {
    let replica = Server::with(&CLUSTER_ARGS, &[]);
    let port = nodes[0].port.to_string();
    assert_eq!(
        redis_cli(replica.port, &["CLUSTER", "MEET", "127.0.0.1", &port]),
        "OK"
    );
    let id = redis_cli(nodes[primary].port, &["CLUSTER", "MYID"]);
    let known = eventually(Duration::from_secs(20), || {
        redis_cli(replica.port, &["CLUSTER", "NODES"]).contains(&id)
    });
    assert!(known);
    assert_eq!(
        redis_cli(replica.port, &["CLUSTER", "REPLICATE", &id]),
        "OK"
    );
    let up = eventually(Duration::from_secs(20), || {
        redis_cli(replica.port, &["INFO", "replication"]).contains("master_link_status:up")
    });
    assert!(up);
    replica
}

/// One line of `CLUSTER NODES`: a node as the asked node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    pub id: String,
    pub port: u16,
    pub primary: bool,
    /// Flagged `fail`, `fail?`, `handshake` or `noaddr`.
    pub failing: bool,
    /// The primary's id, for a replica.
    pub primary_id: Option<String>,
    /// The slot ranges it serves (open moves, `[slot->-id]`, left out).
    pub slots: Vec<(u16, u16)>,
}

/// The cluster as the node at `port` sees it (empty if it does not answer).
pub fn cluster_nodes(port: u16) -> Vec<ClusterNode> {
    redis_cli(port, &["CLUSTER", "NODES"])
        .lines()
        .filter_map(parse_cluster_node)
        .collect()
}

fn parse_cluster_node(line: &str) -> Option<ClusterNode> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 8 {
        return None;
    }
    let addr = f[1].split(['@', ',']).next()?;
    let port = addr.rsplit(':').next()?.parse().ok()?;
    let flags: Vec<&str> = f[2].split(',').collect();
    let has = |flag: &str| flags.contains(&flag);
    let slots = f[8..]
        .iter()
        .filter(|s| !s.starts_with('['))
        .filter_map(|s| match s.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => s.parse().ok().map(|a| (a, a)),
        })
        .collect();
    Some(ClusterNode {
        id: f[0].to_string(),
        port,
        primary: has("master"),
        failing: has("fail") || has("fail?") || has("handshake") || has("noaddr"),
        primary_id: (f[3] != "-").then(|| f[3].to_string()),
        slots,
    })
}

/// The port of the primary serving `slot` in `view`.
pub fn slot_owner(view: &[ClusterNode], slot: u16) -> Option<u16> {
    view.iter()
        .find(|n| n.primary && n.slots.iter().any(|&(a, b)| a <= slot && slot <= b))
        .map(|n| n.port)
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
    open_slot_move_at(slot, nodes[from].port, nodes[to].port).unwrap();
}

/// MIGRATE every key of `slot` from `nodes[from]` to `nodes[to]`.
pub fn migrate_keys(nodes: &[Server], slot: &str, from: usize, to: usize) {
    migrate_keys_at(slot, nodes[from].port, nodes[to].port).unwrap();
}

/// End the move of `slot` to `nodes[to]`: every node told it is served
/// there (the target first, as `redis-cli --cluster reshard` does).
pub fn close_slot_move(nodes: &[Server], slot: &str, from: usize, to: usize) {
    let others: Vec<u16> = (0..nodes.len())
        .filter(|&n| n != to && n != from)
        .map(|n| nodes[n].port)
        .collect();
    close_slot_move_at(slot, nodes[from].port, nodes[to].port, &others).unwrap();
}

/// Move `slot` with its keys from `nodes[from]` to `nodes[to]`.
pub fn move_slot(nodes: &[Server], slot: &str, from: usize, to: usize) {
    open_slot_move(nodes, slot, from, to);
    migrate_keys(nodes, slot, from, to);
    close_slot_move(nodes, slot, from, to);
}

/// [`open_slot_move`] between the primaries on ports `from` and `to`.
pub fn open_slot_move_at(slot: &str, from: u16, to: u16) -> Result<(), String> {
    let src_id = redis_cli(from, &["CLUSTER", "MYID"]);
    let dst_id = redis_cli(to, &["CLUSTER", "MYID"]);
    let importing = redis_cli(to, &["CLUSTER", "SETSLOT", slot, "IMPORTING", &src_id]);
    if importing != "OK" {
        return Err(format!("SETSLOT {slot} IMPORTING on {to}: {importing}"));
    }
    let migrating = redis_cli(from, &["CLUSTER", "SETSLOT", slot, "MIGRATING", &dst_id]);
    if migrating != "OK" {
        return Err(format!("SETSLOT {slot} MIGRATING on {from}: {migrating}"));
    }
    Ok(())
}

/// [`migrate_keys`] between the primaries on ports `from` and `to`.
pub fn migrate_keys_at(slot: &str, from: u16, to: u16) -> Result<(), String> {
    let port = to.to_string();
    loop {
        let keys = redis_cli(from, &["CLUSTER", "GETKEYSINSLOT", slot, "100"]);
        let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
        if keys.is_empty() {
            return Ok(());
        }
        let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
        args.extend(keys.iter().copied());
        let migrated = redis_cli(from, &args);
        if migrated != "OK" && migrated != "NOKEY" {
            return Err(format!("MIGRATE {keys:?} from {from} to {to}: {migrated}"));
        }
    }
}

/// [`close_slot_move`] between the primaries on ports `from` and `to`,
/// then the `others`.
pub fn close_slot_move_at(slot: &str, from: u16, to: u16, others: &[u16]) -> Result<(), String> {
    let dst_id = redis_cli(to, &["CLUSTER", "MYID"]);
    for port in [to, from].into_iter().chain(others.iter().copied()) {
        let set = redis_cli(port, &["CLUSTER", "SETSLOT", slot, "NODE", &dst_id]);
        if set != "OK" {
            return Err(format!("SETSLOT {slot} NODE on {port}: {set}"));
        }
    }
    Ok(())
}
