//! One vote per server, whatever the URLs. The builder refuses the aliases
//! it can see in the URLs (`localhost` and `127.0.0.1`); the rest (a
//! machine's LAN address next to `127.0.0.1`, a unix socket next to its
//! server's TCP port, a proxy) is caught by the server itself: every new
//! connection asks `LOCK.SERVERID` (the server's `run_id`), and a yes is
//! counted once per server in a round, whichever node it came through. A
//! wait through the servers' queues refuses two URLs of one server
//! instead (`waiting.rs`, `two_urls_of_one_server`): it cannot order
//! requests travelling to one server on two connections.
//!
//! Counting per reply, not refusing an alias node up front: the identity
//! travels with the connection that carried the reply, so there is no
//! per-node state to go stale (a restarted server, a path that went away,
//! a pooled connection opened before a claim moved: an attack run broke
//! each of those in the claim-based first version, 82fe3cf).

use crate::answer::Answer;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// The server (and db: two dbs of one server are allowed, as two lock
/// spaces) a connection reached: `run_id/db`.
pub(crate) type ServerTag = Arc<str>;

/// The tag of a server that reported `run_id`, reached with `db`.
pub(crate) fn tag(run_id: &str, db: i64) -> ServerTag {
    format!("{run_id}/{db}").into()
}

/// Tags known to name one server, per Locker. A `run_id` is new at every
/// start while the locks may survive it (AOF): a path (a URL) that reported
/// X and later Y reached one server that restarted, and a vote under Y must
/// count as one under X. Without this, a server listed twice that restarted
/// with its locks in the middle of a wait was counted once under each
/// (an attack run, 2f4670f). A URL whose name moved to another server
/// merges two servers: one vote fewer, never one more.
///
/// Tags are compared through it when votes are counted, never resolved
/// when a reply comes in: a link made in the middle of a round (a path
/// reconnecting after the restart) must also join a vote counted before
/// it (bb86c59: [S by proxy, S by socket, T], the socket first met after
/// a restart, the proxy reconnecting in the round: S voted twice). The
/// links form sets (union-find), so the order in which paths report does
/// not matter.
#[derive(Debug, Default)]
pub(crate) struct SameServers {
    /// Any tag moved yet: comparisons skip the map until one did.
    moved: AtomicBool,
    /// A tag -> another tag of its server, nearer the root of its set.
    parent: RwLock<HashMap<ServerTag, ServerTag>>,
}

/// The root of `tag`'s set (sets are tiny: one per restart seen).
fn root(parent: &HashMap<ServerTag, ServerTag>, tag: &ServerTag) -> ServerTag {
    let mut at = tag;
    while let Some(up) = parent.get(at) {
        at = up;
    }
    at.clone()
}

impl SameServers {
    /// One path reported `before`, now `now`.
    pub(crate) fn moved(&self, before: &ServerTag, now: &ServerTag) {
        if before == now {
            return;
        }
        let mut parent = self.parent.write().unwrap_or_else(|p| p.into_inner());
        let (first, later) = (root(&parent, before), root(&parent, now));
        if first != later {
            parent.insert(later, first);
        }
        self.moved.store(true, Ordering::Release);
    }

    /// Which of `paths` (a node, the server its connection reached), other
    /// than `node` itself, reached `server` too: the one question behind
    /// counting a yes once per server (`Voters::admit`) and refusing a
    /// queued wait's second URL of a server (`waiting.rs`, `Locker::send`).
    pub(crate) fn other_path<'a>(
        &self,
        node: usize,
        server: &ServerTag,
        paths: impl IntoIterator<Item = (usize, &'a ServerTag)>,
    ) -> Option<usize> {
        other_path(node, server, paths, |a, b| self.same(a, b))
    }

    /// `a` and `b` name one server.
    pub(crate) fn same(&self, a: &ServerTag, b: &ServerTag) -> bool {
        if a == b {
            return true;
        }
        if !self.moved.load(Ordering::Acquire) {
            return false; // the usual case: no server restarted under us
        }
        let parent = self.parent.read().unwrap_or_else(|p| p.into_inner());
        root(&parent, a) == root(&parent, b)
    }
}

/// See `SameServers::other_path`; `same` compares two tags.
fn other_path<'a>(
    node: usize,
    server: &ServerTag,
    paths: impl IntoIterator<Item = (usize, &'a ServerTag)>,
    same: impl Fn(&ServerTag, &ServerTag) -> bool,
) -> Option<usize> {
    let mut others = paths.into_iter().filter(|&(other, _)| other != node);
    others
        .find(|&(_, reached)| same(reached, server))
        .map(|(other, _)| other)
}

/// The servers that said yes so far in one round or acquisition.
#[derive(Debug, Default, Clone)]
pub(crate) struct Voters {
    /// (server, the node whose yes counted for it).
    seen: Vec<(ServerTag, usize)>,
    /// The Locker's restart links (none: tags compared as they are).
    same: Option<Arc<SameServers>>,
}

impl Voters {
    /// Voters whose tags are compared through `same`.
    pub(crate) fn new(same: Arc<SameServers>) -> Voters {
        Voters {
            seen: Vec::new(),
            same: Some(same),
        }
    }

    fn same(&self, a: &ServerTag, b: &ServerTag) -> bool {
        match &self.same {
            Some(same) => same.same(a, b),
            None => a == b,
        }
    }

    /// `node` said yes over a connection to `server` (None: a server that
    /// cannot say, counted as its own). Err with the node whose yes already
    /// counted for that server.
    pub(crate) fn admit(&mut self, node: usize, server: Option<&ServerTag>) -> Result<(), usize> {
        let Some(server) = server else {
            return Ok(());
        };
        let counted = self.seen.iter().map(|(s, n)| (*n, s));
        if let Some(first) = other_path(node, server, counted, |a, b| self.same(a, b)) {
            return Err(first);
        }
        if !self.seen.iter().any(|(s, _)| self.same(s, server)) {
            self.seen.push((server.clone(), node));
        }
        Ok(())
    }

    /// `node`'s `answer`, which came from `server`, as it counts: a yes from
    /// a server whose yes already counted through another node is no vote,
    /// and is a failure naming that node (a failure, not a refusal for
    /// good: the next round may find the other path gone).
    pub(crate) fn count(
        &mut self,
        node: usize,
        server: Option<&ServerTag>,
        answer: Answer,
    ) -> Answer {
        match (answer, server) {
            (Answer::Yes(token), Some(server)) => match self.admit(node, Some(server)) {
                Ok(()) => Answer::Yes(token),
                Err(other) => Answer::Failed(same_server(other, server)),
            },
            (answer, _) => answer,
        }
    }
}

/// The refusal of a second yes (or answer) from one server.
pub(crate) fn same_server(other: usize, server: &ServerTag) -> String {
    format!(
        "reaches the same server as server {} of the list (run_id/db {server}): \
         list each server once",
        other + 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_yes_from_one_server_is_refused_naming_the_first() {
        let (s, o) = (tag("s", 0), tag("o", 0));
        let mut v = Voters::default();
        assert_eq!(v.admit(1, Some(&s)), Ok(()));
        assert_eq!(v.admit(2, Some(&o)), Ok(()));
        assert_eq!(v.admit(0, Some(&s)), Err(1));
        assert_eq!(
            v.admit(1, Some(&s)),
            Ok(()),
            "the same node again is not a second vote"
        );
    }

    #[test]
    fn a_server_restarted_under_a_path_is_one_server() {
        let (x, y, z) = (tag("x", 0), tag("y", 0), tag("z", 0));
        let same = SameServers::default();
        assert!(!same.same(&x, &y), "nothing moved yet");
        same.moved(&x, &y);
        same.moved(&x, &y); // another path saw the same restart
        same.moved(&y, &z); // and a second one
        assert!(same.same(&y, &x) && same.same(&z, &x) && same.same(&z, &y));
        assert!(!same.same(&x, &tag("other", 0)));
        same.moved(&z, &x); // back to the first: no cycle
        assert!(same.same(&x, &z));
    }

    #[test]
    fn restart_links_join_whatever_order_the_paths_report_in() {
        // Path 2 first met the server after a restart (y) and saw another
        // (z); path 1 knew it from before (x) and reports z only now.
        let (x, y, z) = (tag("x", 0), tag("y", 0), tag("z", 0));
        let same = SameServers::default();
        same.moved(&y, &z);
        same.moved(&x, &z);
        assert!(same.same(&x, &y), "x, y and z are one server");
    }

    #[test]
    fn a_link_made_after_a_vote_still_joins_it() {
        // bb86c59: a vote under y (a path first met after the restart)
        // counted, then another path reconnected and linked x to y: its
        // vote, under either tag, is the same server's second.
        let (x, y) = (tag("x", 0), tag("y", 0));
        let same = Arc::new(SameServers::default());
        let mut v = Voters::new(same.clone());
        assert_eq!(v.admit(1, Some(&y)), Ok(()));
        same.moved(&x, &y);
        assert_eq!(v.admit(0, Some(&x)), Err(1));
        assert_eq!(v.admit(0, Some(&y)), Err(1));
    }

    #[test]
    fn another_path_to_a_server_is_found_through_restart_links_never_itself() {
        let (x, y, z) = (tag("x", 0), tag("y", 0), tag("z", 0));
        let same = SameServers::default();
        let paths = [(0, &x), (1, &z), (2, &y)];
        assert_eq!(same.other_path(0, &x, paths), None, "only itself");
        same.moved(&x, &y); // the server path 0 reached restarted as y
        assert_eq!(same.other_path(0, &x, paths), Some(2));
        assert_eq!(same.other_path(2, &y, paths), Some(0));
        assert_eq!(same.other_path(1, &z, paths), None);
    }

    #[test]
    fn two_dbs_of_one_server_are_two_voters() {
        let mut v = Voters::default();
        assert_eq!(v.admit(0, Some(&tag("s", 0))), Ok(()));
        assert_eq!(v.admit(1, Some(&tag("s", 1))), Ok(()));
    }

    #[test]
    fn servers_that_cannot_say_are_each_their_own() {
        let mut v = Voters::default();
        assert_eq!(v.admit(0, None), Ok(()));
        assert_eq!(v.admit(1, None), Ok(()));
    }

    #[test]
    fn a_second_yes_counts_as_a_failure_naming_the_first_by_its_place() {
        let s = tag("abc", 2);
        let mut v = Voters::default();
        assert_eq!(v.count(0, Some(&s), Answer::Yes(7)), Answer::Yes(7));
        assert_eq!(
            v.count(1, Some(&s), Answer::Busy),
            Answer::Busy,
            "only a yes is a vote"
        );
        let Answer::Failed(msg) = v.count(1, Some(&s), Answer::Yes(7)) else {
            panic!("counted twice")
        };
        assert!(
            msg.contains("server 1 of the list") && msg.contains("abc/2"),
            "{msg}"
        );
    }
}
