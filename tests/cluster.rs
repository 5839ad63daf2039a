//! A 3-primary Redis Cluster: `redis-cli -c` routes LOCK.* to the node that
//! owns the key's slot.

mod common;
use common::*;
use std::process::Command;
use std::time::Duration;

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn cluster_routes_lock_commands_to_the_owning_node() {
    let cluster_args = ["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"];
    let nodes: Vec<Server> = (0..3).map(|_| Server::with(&cluster_args, &[])).collect();
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
                && cli(n.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok")),
            "cluster did not converge"
        );
    }
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
