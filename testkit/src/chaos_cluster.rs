//! The chaos checker's Redis Cluster: 3 primaries with one replica each,
//! the module on every node with the promotion guard on, one vote
//! (`redis+cluster://`), and the faults it is put through, each on the
//! primary serving a contended lock name's slot:
//! - a slot migration: the slot moved to another primary with its keys,
//!   held locks and all (`SETSLOT IMPORTING/MIGRATING`, `MIGRATE`,
//!   `SETSLOT NODE`, as `redis-cli --cluster reshard` does);
//! - `CLUSTER FAILOVER` (the replica and the primary agree first) and
//!   `CLUSTER FAILOVER TAKEOVER` (no agreement: the old primary grants
//!   until it hears of the new epoch);
//! - kill -9 of the primary: the cluster promotes its replica after the
//!   node timeout, and the killed node is started again with no data (its
//!   `nodes.conf` kept), rejoining as the new primary's replica.
//!
//! - the same with the replica lagging: stopped for a while first (it
//!   misses every grant made meanwhile, as asynchronous replication can:
//!   its link is cut with the unread stream in it), then the primary
//!   killed, the replica continued and promoted at once
//!   (`CLUSTER FAILOVER TAKEOVER`). The grants it missed are lost: only
//!   the promotion guard keeps their names from a second holder.
//!
//! Every fault ends with the cluster whole again (3 primaries serving
//! every slot, each with a replica whose link is up, every node agreeing)
//! or an error saying what did not happen.

use crate::cluster::{
    close_slot_move_at, cluster_nodes, cluster_of, migrate_keys_at, open_slot_move_at, redis_cli,
    slot_owner, ClusterNode,
};
use crate::server::{cut_connections_to, eventually, Server};
use std::time::Duration;

/// `eventually`, asking every 100 ms: each look runs `redis-cli` a few
/// times, and the workers share the machine.
fn settle(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    eventually(limit, || {
        let ok = f();
        if !ok {
            std::thread::sleep(Duration::from_millis(100));
        }
        ok
    })
}

/// How long the cluster may take to be whole again after a fault: a
/// killed primary's replica is promoted after the node timeout (2 s) and
/// an election, and the restarted node syncs in full.
const HEAL: Duration = Duration::from_secs(60);

pub struct ChaosCluster {
    pub nodes: Vec<Server>,
}

impl ChaosCluster {
    /// 3 primaries, a replica each, the module with `module_args`.
    pub fn start(module_args: &[&str]) -> ChaosCluster {
        ChaosCluster {
            nodes: cluster_of(3, 1, &[], module_args),
        }
    }

    /// The cluster as one node: seeded at its first node (killed in turn
    /// like any other: the client then reads the map from the others).
    pub fn url(&self) -> String {
        format!("redis+cluster://127.0.0.1:{}/", self.nodes[0].port)
    }

    /// The map as the first node that answers sees it.
    fn view(&self) -> Vec<ClusterNode> {
        self.nodes
            .iter()
            .map(|n| cluster_nodes(n.port))
            .find(|v| v.len() == self.nodes.len())
            .unwrap_or_default()
    }

    /// Why the cluster is not whole now, if it is not.
    fn not_whole(&self) -> Option<String> {
        let views: Vec<Vec<ClusterNode>> =
            self.nodes.iter().map(|n| cluster_nodes(n.port)).collect();
        let serving = |v: &[ClusterNode]| {
            let mut p: Vec<(String, Vec<(u16, u16)>)> = v
                .iter()
                .filter(|n| n.primary && !n.slots.is_empty())
                .map(|n| (n.id.clone(), n.slots.clone()))
                .collect();
            p.sort();
            p
        };
        let first = serving(&views[0]);
        if first.len() != 3 {
            return Some(format!("{} primaries serve slots", first.len()));
        }
        for (n, v) in self.nodes.iter().zip(&views) {
            if v.len() != self.nodes.len() || v.iter().any(|c| c.failing) {
                return Some(format!("127.0.0.1:{} sees {v:?}", n.port));
            }
            if serving(v) != first {
                return Some(format!("127.0.0.1:{} sees another map", n.port));
            }
            if !redis_cli(n.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok") {
                return Some(format!("127.0.0.1:{} says the cluster is not ok", n.port));
            }
        }
        for primary in views[0].iter().filter(|n| n.primary) {
            let linked = views[0]
                .iter()
                .filter(|r| r.primary_id.as_deref() == Some(primary.id.as_str()))
                .any(|r| {
                    let info = redis_cli(r.port, &["INFO", "replication"]);
                    info.contains("role:slave")
                        && info.contains(&format!("master_port:{}", primary.port))
                        && info.contains("master_link_status:up")
                });
            if !linked {
                return Some(format!(
                    "primary 127.0.0.1:{} has no synced replica",
                    primary.port
                ));
            }
        }
        None
    }

    /// Until the cluster is whole (up to a minute).
    pub fn await_whole(&self) -> Result<(), String> {
        let mut why = None;
        let whole = settle(HEAL, || {
            why = self.not_whole();
            why.is_none()
        });
        match whole {
            true => Ok(()),
            false => Err(format!(
                "not whole after {HEAL:?}: {}",
                why.unwrap_or_default()
            )),
        }
    }

    /// The primary serving `name`'s slot (its port), and the slot.
    fn primary_of(&self, name: &str) -> Result<(u16, u16), String> {
        let slot: u16 = redis_cli(self.nodes[0].port, &["CLUSTER", "KEYSLOT", name])
            .parse()
            .map_err(|_| format!("no slot for {name}"))?;
        let owner = slot_owner(&self.view(), slot).ok_or(format!("no owner of slot {slot}"))?;
        Ok((owner, slot))
    }

    /// The replica of the primary at `port`.
    fn replica_of(&self, port: u16) -> Result<u16, String> {
        let view = self.view();
        let id = view
            .iter()
            .find(|n| n.port == port)
            .map(|n| n.id.clone())
            .ok_or(format!("127.0.0.1:{port} is not in the map"))?;
        view.iter()
            .find(|n| n.primary_id.as_deref() == Some(id.as_str()) && !n.failing)
            .map(|n| n.port)
            .ok_or(format!("127.0.0.1:{port} has no replica"))
    }

    fn role(port: u16) -> String {
        let role = redis_cli(port, &["ROLE"]);
        role.lines().next().unwrap_or("").to_string()
    }

    /// Move `name`'s slot, keys and held locks, to the primary `pick`
    /// chooses among the other two (given their count).
    pub fn migrate_slot_of(
        &self,
        name: &str,
        pick: impl FnOnce(usize) -> usize,
    ) -> Result<String, String> {
        let (from, slot) = self.primary_of(name)?;
        let view = self.view();
        let others: Vec<u16> = view
            .iter()
            .filter(|n| n.primary && !n.slots.is_empty() && n.port != from)
            .map(|n| n.port)
            .collect();
        if others.is_empty() {
            return Err("no other primary".into());
        }
        let to = others[pick(others.len())];
        let slot = slot.to_string();
        let keys = redis_cli(from, &["CLUSTER", "COUNTKEYSINSLOT", &slot]);
        open_slot_move_at(&slot, from, to)?;
        migrate_keys_at(&slot, from, to)?;
        let rest: Vec<u16> = others.iter().copied().filter(|&p| p != to).collect();
        close_slot_move_at(&slot, from, to, &rest)?;
        self.await_whole()?;
        Ok(format!(
            "slot {slot} ({name}, {keys} key(s)) 127.0.0.1:{from} -> 127.0.0.1:{to}"
        ))
    }

    /// `CLUSTER FAILOVER [how]` of `name`'s primary to its replica, until
    /// the replica is the primary and the old one its replica.
    pub fn failover(&self, name: &str, how: Option<&str>) -> Result<String, String> {
        let (primary, _) = self.primary_of(name)?;
        let replica = self.replica_of(primary)?;
        let mut args = vec!["CLUSTER", "FAILOVER"];
        args.extend(how);
        let asked = redis_cli(replica, &args);
        if asked != "OK" {
            return Err(format!("{args:?} on 127.0.0.1:{replica}: {asked}"));
        }
        let swapped = settle(Duration::from_secs(30), || {
            Self::role(replica) == "master" && Self::role(primary) == "slave"
        });
        if !swapped {
            return Err(format!(
                "{args:?}: 127.0.0.1:{replica} is {}, 127.0.0.1:{primary} is {} after 30 s",
                Self::role(replica),
                Self::role(primary)
            ));
        }
        self.await_whole()?;
        Ok(format!("127.0.0.1:{primary} -> 127.0.0.1:{replica}"))
    }

    /// Which of `nodes` listens on `port`.
    fn index_of(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.port == port)
    }

    /// kill -9 of `name`'s primary after its replica was stopped for
    /// `lag`; the replica is then continued and promoted by `CLUSTER
    /// FAILOVER TAKEOVER` (no majority needed, no node timeout waited), and
    /// the killed node started again as in [`ChaosCluster::kill_primary`].
    pub fn kill_primary_lagging(&mut self, name: &str, lag: Duration) -> Result<String, String> {
        let (primary, _) = self.primary_of(name)?;
        let replica = self.replica_of(primary)?;
        let (i, j) = self
            .index_of(primary)
            .zip(self.index_of(replica))
            .ok_or("the primary or its replica is not one of ours")?;
        self.nodes[j].signal("STOP");
        std::thread::sleep(lag);
        self.nodes[i].kill();
        // What the replica had received but not read goes with its link.
        let cut = cut_connections_to(primary);
        self.nodes[j].signal("CONT");
        let asked = redis_cli(replica, &["CLUSTER", "FAILOVER", "TAKEOVER"]);
        let promoted =
            asked == "OK" && settle(Duration::from_secs(30), || Self::role(replica) == "master");
        self.nodes[i].restart();
        if !promoted {
            return Err(format!(
                "127.0.0.1:{replica} not promoted after its primary 127.0.0.1:{primary} was killed: TAKEOVER said {asked}"
            ));
        }
        self.await_whole()?;
        Ok(format!(
            "127.0.0.1:{replica} stopped {} ms, 127.0.0.1:{primary} killed, link {}, 127.0.0.1:{replica} promoted",
            lag.as_millis(),
            if cut { "cut" } else { "NOT cut (ss -K failed)" }
        ))
    }

    /// kill -9 of `name`'s primary; once the cluster has promoted its
    /// replica, the killed node is started again (no data, `nodes.conf`
    /// kept) and rejoins as a replica.
    pub fn kill_primary(&mut self, name: &str) -> Result<String, String> {
        let (primary, _) = self.primary_of(name)?;
        let replica = self.replica_of(primary)?;
        let i = self
            .index_of(primary)
            .ok_or("the primary is not one of ours")?;
        self.nodes[i].kill();
        let promoted = settle(Duration::from_secs(30), || Self::role(replica) == "master");
        // Started again either way: a cluster left without it would fail
        // every later fault.
        self.nodes[i].restart();
        if !promoted {
            return Err(format!(
                "127.0.0.1:{replica} not promoted 30 s after its primary 127.0.0.1:{primary} was killed"
            ));
        }
        self.await_whole()?;
        Ok(format!(
            "killed 127.0.0.1:{primary}, 127.0.0.1:{replica} promoted"
        ))
    }
}
