//! Which server each node turned out to be, by the `run_id` its module
//! reports (`LOCK.SERVERID`) on every new connection. The builder refuses
//! the aliases it can see in the URLs (`localhost` and `127.0.0.1`); this
//! catches the rest once connected: a machine's LAN address next to
//! `127.0.0.1`, a unix socket next to its server's TCP port, a proxy. Two
//! nodes that reach one server must not both vote: one crash would take
//! two votes, and a client listing the server once and another listing it
//! twice could both hold a majority.

use std::sync::Mutex;

/// A server process and the db a node uses on it: two dbs of one server are
/// allowed (README), so they are two identities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerId {
    pub run_id: String,
    pub db: i64,
}

/// The latest identity each node of one Locker reported.
#[derive(Debug)]
pub(crate) struct ServerIds {
    seen: Mutex<Vec<Option<ServerId>>>,
    /// Each node's `host:port`, for messages.
    names: Vec<String>,
}

impl ServerIds {
    pub(crate) fn new(names: Vec<String>) -> ServerIds {
        ServerIds {
            seen: Mutex::new(vec![None; names.len()]),
            names,
        }
    }

    pub(crate) fn name(&self, node: usize) -> &str {
        self.names.get(node).map_or("?", String::as_str)
    }

    /// Node `node` connected and found `id`. Refused (with the index of the
    /// other node) when another node already reported the same server: the
    /// first to connect keeps its vote, the alias gets none. A node that
    /// reconnects (its server restarted with a new run_id) reports again.
    pub(crate) fn claim(&self, node: usize, id: ServerId) -> Result<(), usize> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let other = seen
            .iter()
            .enumerate()
            .find(|(i, s)| *i != node && s.as_ref() == Some(&id));
        if let Some((other, _)) = other {
            return Err(other);
        }
        if let Some(slot) = seen.get_mut(node) {
            *slot = Some(id);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("node{i}")).collect()
    }

    fn id(run_id: &str, db: i64) -> ServerId {
        ServerId {
            run_id: run_id.into(),
            db,
        }
    }

    #[test]
    fn the_second_node_reaching_a_server_is_refused_naming_the_first() {
        let ids = ServerIds::new(names(3));
        assert_eq!(ids.claim(0, id("a", 0)), Ok(()));
        assert_eq!(ids.claim(2, id("b", 0)), Ok(()));
        assert_eq!(ids.claim(1, id("a", 0)), Err(0));
        assert_eq!(ids.claim(1, id("a", 0)), Err(0), "and on every reconnect");
    }

    #[test]
    fn two_dbs_of_one_server_are_two_identities() {
        let ids = ServerIds::new(names(2));
        assert_eq!(ids.claim(0, id("a", 0)), Ok(()));
        assert_eq!(ids.claim(1, id("a", 1)), Ok(()));
    }

    #[test]
    fn a_node_reconnecting_to_its_own_server_is_not_an_alias() {
        let ids = ServerIds::new(names(2));
        assert_eq!(ids.claim(0, id("a", 0)), Ok(()));
        assert_eq!(ids.claim(0, id("a", 0)), Ok(()));
    }

    #[test]
    fn a_restarted_server_is_claimed_by_whichever_node_reconnects_first() {
        // Nodes 0 and 1 are one server listed twice; node 1 was refused.
        let ids = ServerIds::new(names(2));
        assert_eq!(ids.claim(0, id("old", 0)), Ok(()));
        assert_eq!(ids.claim(1, id("old", 0)), Err(0));
        // It restarts with a new run_id; node 1 happens to reconnect first.
        assert_eq!(ids.claim(1, id("new", 0)), Ok(()));
        assert_eq!(ids.claim(0, id("new", 0)), Err(1), "still one vote");
    }
}
