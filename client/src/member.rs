//! One URL of a Locker, one vote in its quorum: a server (`node.rs`, a
//! Sentinel group's primary included) or a Redis Cluster (`cluster.rs`),
//! each of whose requests goes to the primary of its key's slot. A round
//! asks the same of either; this file only says which one answers. (Its
//! own file so that a cluster, made of servers, and a server do not import
//! each other.)

use crate::cluster::{self, Cluster};
use crate::node::{Failure, Node, Tagged};
use crate::server_ids::{SameServers, ServerTag};
use redis::{Cmd, IntoConnectionInfo};
use std::sync::Arc;

pub(crate) enum Member {
    Server(Node),
    Cluster {
        /// The seed's address and "(cluster)", for messages.
        name: String,
        cluster: Cluster,
    },
}

impl Member {
    /// The member at `url` (validated by the builder), of a Locker whose
    /// members share `same`.
    pub(crate) fn new(url: &str, same: Arc<SameServers>) -> Member {
        let Ok(Some(seed)) = cluster::seed_url(url) else {
            return Member::Server(Node::new(url, same));
        };
        let info = seed
            .into_connection_info()
            .expect("URL validated by the builder");
        Member::Cluster {
            name: format!("{} (cluster)", crate::endpoint::node_name(&info)),
            cluster: Cluster::new(info, same),
        }
    }

    /// `host:port` (a Sentinel group's service, a cluster's seed), for
    /// messages.
    pub(crate) fn name(&self) -> &str {
        match self {
            Member::Server(n) => &n.name,
            Member::Cluster { name, .. } => name,
        }
    }

    /// Dedicated connections being opened now (`Node::opening`).
    pub(crate) fn opening(&self) -> usize {
        match self {
            Member::Server(n) => n.opening(),
            Member::Cluster { cluster, .. } => cluster.opening(),
        }
    }

    /// A request given up on may still be on its way.
    pub(crate) fn in_doubt(&self) -> bool {
        match self {
            Member::Server(n) => n.in_doubt(),
            Member::Cluster { cluster, .. } => cluster.in_doubt(),
        }
    }

    /// The server (or cluster) the URL reached last.
    pub(crate) fn known_server(&self) -> Option<ServerTag> {
        match self {
            Member::Server(n) => n.known_server(),
            Member::Cluster { cluster, .. } => cluster.known_server(),
        }
    }

    /// Changes when the shared connection (a cluster: any primary's) does.
    pub(crate) fn shared_id(&self) -> Option<usize> {
        match self {
            Member::Server(n) => n.shared_id(),
            Member::Cluster { cluster, .. } => cluster.shared_id(),
        }
    }

    pub(crate) fn is_connected(&self) -> bool {
        match self {
            Member::Server(n) => n.is_connected(),
            Member::Cluster { cluster, .. } => cluster.is_connected(),
        }
    }

    /// Connect (a cluster: read its map and connect to every primary).
    pub(crate) async fn meet(&self) {
        match self {
            Member::Server(n) => n.meet().await,
            Member::Cluster { cluster, .. } => cluster.meet().await,
        }
    }

    pub(crate) fn is_met(&self) -> bool {
        match self {
            Member::Server(n) => n.is_met(),
            Member::Cluster { cluster, .. } => cluster.is_met(),
        }
    }

    pub(crate) fn clock_stale(&self) -> bool {
        match self {
            Member::Server(n) => n.clock_stale(),
            Member::Cluster { cluster, .. } => cluster.clock_stale(),
        }
    }

    pub(crate) async fn read_clock_again(&self) {
        match self {
            Member::Server(n) => n.read_clock_again().await,
            Member::Cluster { cluster, .. } => cluster.read_clock_again().await,
        }
    }

    pub(crate) fn clock_offset(&self) -> Option<i64> {
        match self {
            Member::Server(n) => n.clock_offset(),
            Member::Cluster { cluster, .. } => cluster.clock_offset(),
        }
    }

    /// See `Node::query_dedicated`.
    pub(crate) async fn query_dedicated(
        &self,
        cmd: &Cmd,
        refuse: impl Fn(Option<&ServerTag>) -> Option<String> + Send + Sync,
    ) -> Result<Tagged, Failure> {
        match self {
            Member::Server(n) => n.query_dedicated(cmd, refuse).await,
            Member::Cluster { cluster, .. } => cluster.query(cmd, false, Some(&refuse)).await,
        }
    }

    /// See `Node::query_shared`.
    pub(crate) async fn query_shared(&self, cmd: &Cmd, resend: bool) -> Result<Tagged, Failure> {
        match self {
            Member::Server(n) => n.query_shared(cmd, resend).await,
            Member::Cluster { cluster, .. } => cluster.query(cmd, resend, None).await,
        }
    }
}
