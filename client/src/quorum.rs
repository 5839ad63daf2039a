//! The Redlock arithmetic, pure: majorities, validity, and the tally of one
//! round of replies with its early verdict.

pub use crate::answer::Answer;
use crate::error::NodeFailure;
use crate::server_ids::{SameServers, ServerTag, Voters};
use std::sync::Arc;
use std::time::Duration;

/// How far above the client's clock the requested token floor is: more
/// than a round trip plus the clock skew between client and nodes, so that
/// a node's own clock is still below the floor when the request arrives.
pub const TOKEN_FLOOR_LEAD_US: u64 = 100_000;

/// How far above its clock a node's tokens run (the module's
/// `TOKEN_LEAD_US`): the same on every node, so that a lock name's tokens
/// keep increasing when its cluster slot moves to another node.
pub const SERVER_TOKEN_LEAD_US: u64 = 60_000_000;

/// The `MINTOKEN` a lock request asks every node for (µs since the epoch).
/// Nodes grant `max(counter + 1, their clock + 60 s, floor)`, the floor
/// capped at their clock + 120 s; where no node's counter is above it,
/// every granting node returns this very token. Monotonicity never depends
/// on it: the fencing round still raises nodes that returned less than the
/// maximum.
///
/// ```
/// use redis_lock_client::quorum::token_floor;
/// assert_eq!(token_floor(1_000_000), 61_100_000);
/// ```
pub fn token_floor(unix_micros: u64) -> u64 {
    unix_micros
        .saturating_add(SERVER_TOKEN_LEAD_US + TOKEN_FLOOR_LEAD_US)
        .min((1 << 53) - 1)
}

/// The client's wall clock in µs since the epoch (0 before it).
pub fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Nodes needed out of `nodes` (at least one, even for an empty list).
///
/// ```
/// use redis_lock_client::quorum::majority;
/// assert_eq!(majority(1), 1);
/// assert_eq!(majority(3), 2);
/// assert_eq!(majority(5), 3);
/// ```
pub fn majority(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// Nodes a shared hold needs out of `nodes` when the lock allows at most
/// `limit` shared holders (`SHARED LIMIT n`); None (an exclusive lock, or
/// shared without a limit) needs a majority, since every writer majority
/// meets every reader majority on some node. A limit needs more: with 3
/// nodes and a limit of 2, three holders could each hold 2 of the 3 nodes
/// while no node has more than 2. With `q` grants each, `h` holders take
/// `h·q` places of the `nodes·limit` there are, so requiring
/// `q·(limit+1) > nodes·limit` leaves no room for `limit + 1` holders.
///
/// | nodes | limit 1 | 2 | 3 | 4 | none |
/// |---|---|---|---|---|---|
/// | 1 | 1 | 1 | 1 | 1 | 1 |
/// | 3 | 2 | 3 | 3 | 3 | 2 |
/// | 5 | 3 | 4 | 4 | 5 | 3 |
/// | 7 | 4 | 5 | 6 | 6 | 4 |
///
/// With 3 nodes every limit above 1 needs all 3 grants, so one node down
/// stops every limited acquisition: one replicated server (`nodes` = 1) is a
/// semaphore's natural home.
///
/// ```
/// use redis_lock_client::quorum::shared_quorum;
/// assert_eq!(shared_quorum(3, None), 2);
/// assert_eq!(shared_quorum(3, Some(1)), 2);
/// assert_eq!(shared_quorum(3, Some(2)), 3);
/// assert_eq!(shared_quorum(5, Some(2)), 4);
/// ```
pub fn shared_quorum(nodes: usize, limit: Option<u32>) -> usize {
    match limit {
        None => majority(nodes),
        Some(limit) => {
            let (n, l) = (nodes as u128, u128::from(limit.max(1)));
            // The least q with q·(l+1) > n·l; never above n (n·l < n·(l+1)).
            ((n * l) / (l + 1) + 1).max(1) as usize
        }
    }
}

/// Time the lock is known to be valid after a round that took `elapsed`:
/// `ttl - elapsed - drift`, with drift = ttl * factor + 2 ms (clock rate
/// differences between nodes, as in the Redlock spec). None when <= 0.
///
/// ```
/// use redis_lock_client::quorum::validity;
/// use std::time::Duration;
/// let ttl = Duration::from_secs(10);
/// // 10 s - 30 ms elapsed - (100 ms + 2 ms) drift
/// assert_eq!(validity(ttl, Duration::from_millis(30), 0.01), Some(Duration::from_millis(9868)));
/// assert_eq!(validity(ttl, Duration::from_secs(10), 0.01), None);
/// ```
pub fn validity(ttl: Duration, elapsed: Duration, drift_factor: f64) -> Option<Duration> {
    let drift = ttl.mul_f64(drift_factor) + Duration::from_millis(2);
    ttl.checked_sub(elapsed + drift).filter(|v| !v.is_zero())
}

/// The answers of one round so far.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    nodes: usize,
    /// Nodes that said yes, with their token (acquire) or 0.
    pub yes: Vec<(usize, u64)>,
    /// Nodes held by another owner.
    pub busy: usize,
    /// Nodes where the lock is not held.
    pub gone: usize,
    /// Nodes that failed, with the cause.
    pub failures: Vec<(usize, String)>,
    /// Nodes that refused for good, with the server's message.
    pub rejected: Vec<(usize, String)>,
    /// The servers whose yes counted (one each, whatever the URLs).
    voters: Voters,
    /// Nodes that said yes through a server whose yes already counted: no
    /// vote, but a grant (a REENTRANT hold) all the same.
    pub(crate) aliased: Vec<usize>,
    /// Nodes the round did not ask (a REENTRANT handle releases only where
    /// it holds): they hold none of the caller's lock.
    left_out: usize,
    /// Grants the verdicts need, when not a majority (a limited shared
    /// hold: `shared_quorum`).
    need: Option<usize>,
}

/// How a round ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A majority said yes.
    Quorum,
    /// Enough nodes are held by someone else (or no longer hold it) that no
    /// majority is possible.
    Contended,
    /// Too many nodes failed to answer.
    Unreachable,
    /// So many nodes refused for good that no majority is possible.
    Rejected,
}

impl Tally {
    /// An empty tally for a round over `nodes` nodes.
    pub fn new(nodes: usize) -> Tally {
        Tally {
            nodes,
            ..Tally::default()
        }
    }

    /// An empty tally whose yeses count once per server, restart links
    /// (`same`) included.
    pub(crate) fn per_server(nodes: usize, same: Arc<SameServers>) -> Tally {
        Tally {
            nodes,
            voters: Voters::new(same),
            ..Tally::default()
        }
    }

    /// Verdicts need `need` grants instead of a majority (at least one, at
    /// most every node).
    pub(crate) fn needing(mut self, need: usize) -> Tally {
        self.need = Some(need.clamp(1, self.nodes.max(1)));
        self
    }

    /// Grants a Quorum verdict needs.
    pub(crate) fn need(&self) -> usize {
        self.need.unwrap_or_else(|| majority(self.nodes))
    }

    /// How many nodes the round is over.
    pub(crate) fn nodes(&self) -> usize {
        self.nodes
    }

    /// The round asks only `asked` of its nodes.
    pub(crate) fn asking(mut self, asked: usize) -> Tally {
        self.left_out = self.nodes.saturating_sub(asked);
        self
    }

    /// Count one node's answer.
    pub fn add(&mut self, node: usize, answer: Answer) {
        self.add_from(node, None, answer);
    }

    /// Count one node's answer, which came from `server`: a yes from a
    /// server whose yes already counted through another node (two URLs
    /// reaching one server) is no vote, and is counted as refused.
    pub(crate) fn add_from(&mut self, node: usize, server: Option<&ServerTag>, answer: Answer) {
        let granted = matches!(answer, Answer::Yes(_));
        let counted = self.voters.count(node, server, answer);
        if granted && !matches!(counted, Answer::Yes(_)) {
            self.aliased.push(node);
        }
        match counted {
            Answer::Yes(token) => self.yes.push((node, token)),
            Answer::Busy => self.busy += 1,
            Answer::Gone => self.gone += 1,
            Answer::Failed(cause) => self.failures.push((node, cause)),
            Answer::Rejected(message) => self.rejected.push((node, message)),
        }
    }

    /// Every node whose grant replied, counted as a vote or not.
    pub(crate) fn granted(&self) -> impl Iterator<Item = usize> + '_ {
        self.yes
            .iter()
            .map(|&(i, _)| i)
            .chain(self.aliased.iter().copied())
    }

    fn answered(&self) -> usize {
        self.yes.len() + self.busy + self.gone + self.failures.len() + self.rejected.len()
    }

    /// The verdict as soon as it is certain (before every node answered).
    pub fn early(&self) -> Option<Verdict> {
        let need = self.need();
        if self.yes.len() >= need {
            return Some(Verdict::Quorum);
        }
        let still_possible = self.yes.len() + (self.nodes - self.answered());
        (still_possible < need).then(|| self.final_verdict())
    }

    /// The verdict once every node answered (or the round was cut short).
    pub fn final_verdict(&self) -> Verdict {
        let need = self.need();
        let spare = self.nodes.saturating_sub(need);
        if self.nodes > 0 && self.yes.len() >= need {
            Verdict::Quorum
        } else if self.rejected.len() > spare {
            Verdict::Rejected // refusals alone make a majority impossible: don't retry
        } else if self.failures.len() + self.rejected.len() > spare || self.nodes == 0 {
            Verdict::Unreachable // errors alone make a majority impossible
        } else {
            Verdict::Contended
        }
    }

    /// The verdict of an EXTEND or RELEASE round, whose "no" says the lock
    /// is not the caller's there (`None` while nodes still to answer can
    /// change it). Lost (`Contended`: the caller's `Expired`) only once so
    /// many said so, or were left out, that no majority can hold it: unlike
    /// an acquisition's, a node that failed here may still hold the lock.
    /// One yes, one failure and one node left out (a REENTRANT handle held
    /// two of three) read as `Expired` when the lock was held (99ca348).
    pub fn owner_verdict(&self) -> Option<Verdict> {
        let need = self.need();
        let spare = self.nodes.saturating_sub(need);
        // A second path's yes to one server is no vote (3f191a0: it read
        // as a failure, and a lock lost on the other servers as NoQuorum).
        let not_ours = self.busy + self.gone + self.left_out + self.aliased.len();
        let still_out = self.nodes - self.answered() - self.left_out;
        if self.nodes > 0 && self.yes.len() >= need {
            Some(Verdict::Quorum)
        } else if not_ours > spare {
            Some(Verdict::Contended)
        } else if self.rejected.len() > spare {
            Some(Verdict::Rejected)
        } else if still_out == 0 {
            Some(Verdict::Unreachable) // failures stand in the way
        } else {
            None // the rest may still say "not ours"
        }
    }

    /// `owner_verdict` once the round is over: nodes that did not answer
    /// in time are failures.
    pub fn final_owner_verdict(&self) -> Verdict {
        self.owner_verdict().unwrap_or(Verdict::Unreachable)
    }

    /// The largest token among the grants.
    pub fn max_token(&self) -> u64 {
        self.yes.iter().map(|&(_, t)| t).max().unwrap_or(0)
    }

    /// The quorum lock's fencing token: the majority-th smallest grant
    /// (0 without a majority). At least a majority of grants are <= it, so
    /// it is >= a grant from a node of every earlier holder's fenced
    /// majority, hence larger than that holder's token; and the grants >=
    /// it already hold it. A node whose clock runs far ahead grants a token
    /// far above the others; taking the maximum would make every other node
    /// refuse to be fenced to it (a token may be at most a node's clock +
    /// 120 s). See "Fencing tokens" (docs/fencing.md in the repository).
    pub fn quorum_token(&self) -> u64 {
        if let Some(t) = self.common_token() {
            return t;
        }
        let mut tokens: Vec<u64> = self.yes.iter().map(|&(_, t)| t).collect();
        tokens.sort_unstable();
        tokens.get(majority(self.nodes) - 1).copied().unwrap_or(0)
    }

    /// How many grants are at least `token`: the nodes that already hold
    /// it (a lock is returned once a majority does).
    pub fn holding(&self, token: u64) -> usize {
        self.yes.iter().filter(|&&(_, t)| t >= token).count()
    }

    /// A majority of the nodes already holds `token`: nothing to fence.
    pub fn majority_holds(&self, token: u64) -> bool {
        self.holding(token) >= majority(self.nodes)
    }

    /// The token, when a majority granted and every grant is that one
    /// token (the usual case: see `token_floor`); spares sorting a copy.
    fn common_token(&self) -> Option<u64> {
        let &(_, first) = self.yes.first()?;
        let common =
            self.yes.len() >= majority(self.nodes) && self.yes.iter().all(|&(_, t)| t == first);
        common.then_some(first)
    }

    /// The failed and refusing nodes, by name.
    pub fn failures(&self, names: &[String]) -> Vec<NodeFailure> {
        self.failures
            .iter()
            .chain(&self.rejected)
            .map(|(i, cause)| NodeFailure {
                node: names[*i].clone(),
                cause: cause.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_limited_quorum_leaves_no_room_for_one_holder_more() {
        use super::shared_quorum;
        for nodes in 1..=9usize {
            assert_eq!(shared_quorum(nodes, None), nodes / 2 + 1);
            assert_eq!(
                shared_quorum(nodes, Some(1)),
                nodes / 2 + 1,
                "limit 1 is a mutex"
            );
            for limit in 1..=12u32 {
                let q = shared_quorum(nodes, Some(limit));
                let (n, l) = (nodes as u64, u64::from(limit));
                assert!(q <= nodes, "n={nodes} l={limit}: {q}");
                assert!(
                    q as u64 * (l + 1) > n * l,
                    "n={nodes} l={limit}: {q} too few"
                );
                assert!(
                    (q as u64 - 1) * (l + 1) <= n * l,
                    "n={nodes} l={limit}: {q} more than needed"
                );
            }
        }
        // The table in the doc comment.
        let table = [
            (1, [1, 1, 1, 1, 1]),
            (3, [2, 3, 3, 3, 2]),
            (5, [3, 4, 4, 5, 3]),
            (7, [4, 5, 6, 6, 4]),
        ];
        for (nodes, row) in table {
            let limits = [Some(1), Some(2), Some(3), Some(4), None];
            let got: Vec<usize> = limits.iter().map(|&l| shared_quorum(nodes, l)).collect();
            assert_eq!(got, row, "{nodes} nodes");
        }
        assert_eq!(shared_quorum(3, Some(u32::MAX)), 3);
        assert_eq!(shared_quorum(0, Some(2)), 1, "at least one, as majority()");
    }

    use super::*;

    #[test]
    fn majorities() {
        assert_eq!(
            (majority(1), majority(2), majority(3), majority(5)),
            (1, 2, 2, 3)
        );
    }

    #[test]
    fn validity_subtracts_elapsed_and_drift() {
        let ttl = Duration::from_millis(1000);
        assert_eq!(
            validity(ttl, Duration::from_millis(100), 0.01),
            Some(Duration::from_millis(888))
        );
        assert_eq!(validity(ttl, Duration::from_millis(988), 0.01), None);
        assert_eq!(validity(ttl, Duration::from_secs(5), 0.01), None);
    }

    #[test]
    fn the_quorum_token_and_the_nodes_holding_it() {
        let mut t = Tally::new(3);
        t.add(0, Answer::Yes(7));
        assert_eq!(t.quorum_token(), 0, "no majority yet");
        t.add(1, Answer::Yes(9));
        assert_eq!(t.quorum_token(), 9, "of two grants, the larger");
        assert_eq!(t.holding(9), 1, "the other needs fencing");
        assert!(!t.majority_holds(9));
        t.add(2, Answer::Yes(9));
        assert_eq!(t.holding(9), 2, "a later grant at 9 makes a majority");
        assert!(t.majority_holds(9));
        assert_eq!(t.quorum_token(), 9, "with all three, the 2nd smallest");

        let mut t = Tally::new(5);
        for (i, token) in [(0, 5), (1, 5), (2, 5)] {
            t.add(i, Answer::Yes(token));
        }
        assert_eq!((t.quorum_token(), t.holding(5)), (5, 3), "equal grants");
        t.add(3, Answer::Yes(8));
        t.add(4, Answer::Yes(4));
        assert_eq!(t.quorum_token(), 5, "3rd smallest of five");
        assert_eq!(t.holding(5), 4);
    }

    #[test]
    fn quorum_is_decided_early() {
        let mut t = Tally::new(5);
        t.add(0, Answer::Yes(5));
        t.add(1, Answer::Yes(9));
        assert_eq!(t.early(), None);
        t.add(2, Answer::Yes(7));
        assert_eq!(t.early(), Some(Verdict::Quorum));
        assert_eq!(t.max_token(), 9);
    }

    #[test]
    fn the_quorum_token_is_the_majority_th_smallest_grant() {
        let mut t = Tally::new(5);
        for (i, token) in [(0, 50), (1, 10), (2, 9_000), (3, 30)] {
            t.add(i, Answer::Yes(token));
        }
        // Three grants (a majority) are <= 50, and two already hold >= 50:
        // the outlier 9000 is not the lock's token.
        assert_eq!(t.quorum_token(), 50);
        t.add(4, Answer::Yes(20));
        // All five: three are <= 30 and three are >= 30, no fencing needed.
        assert_eq!(t.quorum_token(), 30);
        let mut t = Tally::new(3);
        t.add(0, Answer::Yes(7));
        assert_eq!(t.quorum_token(), 0, "no majority");
        t.add(2, Answer::Yes(5));
        assert_eq!(t.quorum_token(), 7);
    }

    #[test]
    fn contention_vs_unreachable() {
        let mut t = Tally::new(5);
        t.add(0, Answer::Busy);
        t.add(1, Answer::Busy);
        assert_eq!(t.early(), None);
        t.add(2, Answer::Failed("timeout".into()));
        assert_eq!(t.early(), Some(Verdict::Contended));

        let mut t = Tally::new(5);
        t.add(0, Answer::Yes(1));
        for i in 1..4 {
            t.add(i, Answer::Failed("refused".into()));
        }
        assert_eq!(t.early(), Some(Verdict::Unreachable));
        let names: Vec<String> = (0..5).map(|i| format!("n{i}")).collect();
        assert_eq!(t.failures(&names)[0].node, "n1");
    }

    #[test]
    fn refusals_that_make_a_majority_impossible_are_final() {
        let mut t = Tally::new(3);
        t.add(0, Answer::Rejected("ERR ttl".into()));
        assert_eq!(t.early(), None);
        t.add(1, Answer::Rejected("ERR ttl".into()));
        assert_eq!(t.early(), Some(Verdict::Rejected));
        // One refusal and one outage: the outage may pass, so it is no quorum.
        let mut t = Tally::new(3);
        t.add(0, Answer::Rejected("NOPERM".into()));
        t.add(1, Answer::Failed("timed out".into()));
        assert_eq!(t.early(), Some(Verdict::Unreachable));
        let names: Vec<String> = (0..3).map(|i| format!("n{i}")).collect();
        assert_eq!(t.failures(&names).len(), 2);
    }

    #[test]
    fn an_extend_or_release_is_lost_only_when_a_majority_says_so() {
        // One yes, one "not ours", one failure: the failed node may hold
        // it still, so it is not known lost (an acquisition's verdict says
        // Contended there: not granted either way).
        let mut t = Tally::new(3);
        t.add(0, Answer::Yes(0));
        t.add(1, Answer::Busy);
        assert_eq!(t.owner_verdict(), None);
        t.add(2, Answer::Failed("broken pipe".into()));
        assert_eq!(t.owner_verdict(), Some(Verdict::Unreachable));
        assert_eq!(t.final_verdict(), Verdict::Contended);
        // Two "not ours" of three: lost, whatever the third says.
        let mut t = Tally::new(3);
        t.add(0, Answer::Gone);
        t.add(1, Answer::Busy);
        assert_eq!(t.owner_verdict(), Some(Verdict::Contended));
        // A REENTRANT handle that held two of three: the node left out holds
        // none of it, a failure on one of its two is no verdict of loss.
        let mut t = Tally::new(3).asking(2);
        t.add(0, Answer::Yes(0));
        assert_eq!(t.owner_verdict(), None);
        t.add(2, Answer::Failed("broken pipe".into()));
        assert_eq!(t.final_owner_verdict(), Verdict::Unreachable);
        let mut t = Tally::new(3).asking(2);
        t.add(0, Answer::Yes(0));
        t.add(2, Answer::Gone);
        assert_eq!(t.final_owner_verdict(), Verdict::Contended);
        let mut t = Tally::new(3).asking(2);
        t.add(0, Answer::Yes(0));
        t.add(2, Answer::Yes(0));
        assert_eq!(t.final_owner_verdict(), Verdict::Quorum);
        // Refusals: as for an acquisition.
        let mut t = Tally::new(3);
        t.add(0, Answer::Rejected("NOPERM".into()));
        t.add(1, Answer::Rejected("NOPERM".into()));
        assert_eq!(t.owner_verdict(), Some(Verdict::Rejected));
        // Failures make a majority of yeses impossible, but the last two
        // may still make the "not ours" a majority: undecided.
        let mut t = Tally::new(5);
        t.add(0, Answer::Busy);
        t.add(1, Answer::Busy);
        t.add(2, Answer::Failed("timed out".into()));
        assert_eq!(t.early(), Some(Verdict::Contended));
        assert_eq!(t.owner_verdict(), None);
        t.add(3, Answer::Gone);
        assert_eq!(t.owner_verdict(), Some(Verdict::Contended));
        // A round cut short counts the silent as failed.
        let mut t = Tally::new(5);
        t.add(0, Answer::Yes(0));
        t.add(1, Answer::Yes(0));
        t.add(2, Answer::Busy);
        assert_eq!(t.final_owner_verdict(), Verdict::Unreachable);
        assert_eq!(Tally::new(0).final_owner_verdict(), Verdict::Unreachable);
        // Two URLs of one server both say yes; the third server: not ours.
        let same = Arc::new(SameServers::default());
        let mut t = Tally::per_server(3, same);
        let (x, y) = (
            crate::server_ids::tag("x", 0),
            crate::server_ids::tag("y", 0),
        );
        t.add_from(0, Some(&x), Answer::Yes(0));
        t.add_from(1, Some(&x), Answer::Yes(0));
        t.add_from(2, Some(&y), Answer::Busy);
        assert_eq!(t.final_owner_verdict(), Verdict::Contended);
    }

    #[test]
    fn a_limited_hold_counts_against_its_larger_quorum() {
        // N = 3, LIMIT 2: two grants are a majority but not enough.
        let mut t = Tally::new(3).needing(shared_quorum(3, Some(2)));
        t.add(0, Answer::Yes(5));
        t.add(1, Answer::Yes(5));
        assert_eq!(t.early(), None, "a majority is not enough");
        t.add(2, Answer::Busy);
        assert_eq!(t.early(), Some(Verdict::Contended));
        let mut t = Tally::new(3).needing(3);
        t.add(0, Answer::Busy);
        assert_eq!(t.early(), Some(Verdict::Contended), "one busy node decides");
        let mut t = Tally::new(3).needing(3);
        for i in 0..3 {
            t.add(i, Answer::Yes(7));
        }
        assert_eq!(t.early(), Some(Verdict::Quorum));
        assert_eq!(t.quorum_token(), 7);
        // One refusal (LIMIT differs) leaves no room: final at once.
        let mut t = Tally::new(3).needing(3);
        t.add(0, Answer::Rejected("ERR LIMIT differs".into()));
        assert_eq!(t.early(), Some(Verdict::Rejected));
        // Renewing: one node no longer holding it loses a hold that needs 3.
        let mut t = Tally::new(3).needing(3);
        t.add(0, Answer::Yes(0));
        t.add(1, Answer::Gone);
        assert_eq!(t.owner_verdict(), Some(Verdict::Contended));
        let mut t = Tally::new(3).needing(3);
        t.add(0, Answer::Yes(0));
        t.add(1, Answer::Yes(0));
        t.add(2, Answer::Failed("timed out".into()));
        assert_eq!(t.final_owner_verdict(), Verdict::Unreachable);
        assert_eq!(Tally::new(3).needing(9).need(), 3, "never above the nodes");
    }

    #[test]
    fn no_nodes_is_never_taken() {
        assert_eq!(Tally::new(0).final_verdict(), Verdict::Unreachable);
    }

    #[test]
    fn single_node() {
        let mut t = Tally::new(1);
        t.add(0, Answer::Busy);
        assert_eq!(t.early(), Some(Verdict::Contended));
        let mut t = Tally::new(1);
        t.add(0, Answer::Yes(3));
        assert_eq!(t.early(), Some(Verdict::Quorum));
    }
}
