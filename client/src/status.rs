//! The operators' view: `LOCK.STATUS` on every node and the quorum verdict
//! drawn from it, and release by owner.

use crate::locker::Locker;
use crate::node::{within, Failure, Tagged};
use crate::quorum::majority;
use crate::round::untag;
use crate::server_ids::{same_server, ServerTag};
use redis::Value;
use tokio::task::JoinSet;

/// What one node says about a lock (LOCK.STATUS). A shared key (`shared`)
/// has no single holder: `owner` is empty, `token`, `ttl_ms` and `holds`
/// are 0, and `holders` lists its holders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeStatus {
    /// The holder's owner value.
    pub owner: Vec<u8>,
    /// The node's fencing token for this hold.
    pub token: i64,
    /// Milliseconds left.
    pub ttl_ms: i64,
    /// Reentrant hold count.
    pub holds: i64,
    /// Clients waiting in the server.
    pub waiters: i64,
    /// Held shared (`SHARED`): by `holders`.
    pub shared: bool,
    /// A shared key's `LIMIT` (0: none).
    pub limit: i64,
    /// A shared key's holders, in the order they were granted.
    pub holders: Vec<Holder>,
}

/// One holder of a shared key on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holder {
    /// The holder's owner value.
    pub owner: Vec<u8>,
    /// The node's fencing token for this hold.
    pub token: i64,
    /// Milliseconds left.
    pub ttl_ms: i64,
    /// Reentrant hold count.
    pub holds: i64,
}

/// One node's answer to `LOCK.STATUS`: `Ok(None)` when free.
pub type NodeReport = (String, Result<Option<NodeStatus>, String>);

/// What a quorum of the nodes says about a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuorumState {
    /// `owner` holds it on `nodes` of `of` nodes, a majority.
    Held {
        /// The holder's owner value.
        owner: Vec<u8>,
        /// Nodes where it holds the lock.
        nodes: usize,
        /// All nodes.
        of: usize,
    },
    /// Free on a majority of the nodes.
    Free {
        /// Nodes where it is free.
        nodes: usize,
        /// All nodes.
        of: usize,
    },
    /// Held shared on a majority of the nodes.
    Shared {
        /// Each owner holding it somewhere, with the number of nodes where
        /// it does, in the order the nodes list them.
        holders: Vec<(Vec<u8>, usize)>,
        /// The key's `LIMIT` (0: none).
        limit: i64,
        /// All nodes.
        of: usize,
    },
    /// A majority answered but agrees on nothing (e.g. mid-acquisition).
    Unknown,
    /// Only `answered` of `of` nodes answered: less than a majority.
    Unreachable {
        /// Nodes that answered.
        answered: usize,
        /// All nodes.
        of: usize,
    },
}

impl std::fmt::Display for QuorumState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QuorumState::Held { owner, nodes, of } => {
                write!(f, "held by {} on {nodes} of {of}", escape_owner(owner))
            }
            QuorumState::Free { nodes, of } => write!(f, "free on {nodes} of {of}"),
            QuorumState::Shared { holders, limit, of } => {
                write!(f, "shared")?;
                if *limit > 0 {
                    write!(f, " (limit {limit})")?;
                }
                write!(f, " by ")?;
                for (k, (owner, nodes)) in holders.iter().enumerate() {
                    let sep = if k == 0 { "" } else { ", " };
                    write!(f, "{sep}{} on {nodes} of {of}", escape_owner(owner))?;
                }
                Ok(())
            }
            QuorumState::Unknown => write!(f, "unknown (no majority agrees)"),
            QuorumState::Unreachable { answered, of } => {
                write!(f, "unknown: only {answered} of {of} servers answered")
            }
        }
    }
}

/// An owner as one line of printable text. Owners are binary-safe: a raw
/// tab or newline would break tab-separated output and an escape sequence
/// would drive the terminal. Printable characters stay as they are
/// (non-ASCII ones too) except `\`, written `\\`; other characters as
/// Rust's `escape_debug` writes them (`\t`, `\n`, `\r`, `\0`, `\u{1b}`);
/// bytes that are not UTF-8 as `\xNN`. Quotes stay as they are: nothing in
/// the output delimits them.
///
/// ```
/// use redis_lock_client::escape_owner;
/// assert_eq!(escape_owner(b"worker-1"), "worker-1");
/// assert_eq!(escape_owner(b"a\tb\\c"), "a\\tb\\\\c");
/// assert_eq!(escape_owner(b"\xff\x1b[2J"), "\\xff\\u{1b}[2J");
/// ```
pub fn escape_owner(owner: &[u8]) -> String {
    let mut out = String::new();
    for chunk in owner.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' | '\'' => out.push(c),
                _ => out.extend(c.escape_debug()),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// The verdict of the nodes' reports: an owner or "free" counts only with
/// a majority of all nodes behind it.
///
/// ```no_run
/// # async fn demo(locker: redis_lock_client::Locker) -> Result<(), redis_lock_client::Error> {
/// use redis_lock_client::{quorum_state, QuorumState};
/// let reports = locker.status("lock:job").await;
/// for (node, report) in &reports {
///     println!("{node}: {report:?}");
/// }
/// match quorum_state(&reports) {
///     QuorumState::Held { owner, nodes, of } => {
///         println!("held by {} on {nodes} of {of}", redis_lock_client::escape_owner(&owner))
///     }
///     other => println!("{other:?}"),
/// }
/// # Ok(()) }
/// ```
pub fn quorum_state(reports: &[NodeReport]) -> QuorumState {
    let of = reports.len();
    let need = majority(of);
    let answers: Vec<&Option<NodeStatus>> = reports
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok())
        .collect();
    if answers.len() < need {
        return QuorumState::Unreachable {
            answered: answers.len(),
            of,
        };
    }
    let free = answers.iter().filter(|a| a.is_none()).count();
    if free >= need {
        return QuorumState::Free { nodes: free, of };
    }
    let shared: Vec<&NodeStatus> = answers
        .iter()
        .filter_map(|a| a.as_ref().filter(|s| s.shared))
        .collect();
    if shared.len() >= need {
        return shared_state(&shared, of);
    }
    for s in answers.iter().filter_map(|a| a.as_ref()) {
        let nodes = answers
            .iter()
            .filter(|a| a.as_ref().is_some_and(|t| t.owner == s.owner))
            .count();
        if nodes >= need {
            return QuorumState::Held {
                owner: s.owner.clone(),
                nodes,
                of,
            };
        }
    }
    QuorumState::Unknown
}

/// A key held shared on `nodes` of `of`: its holders and on how many
/// nodes each holds.
fn shared_state(nodes: &[&NodeStatus], of: usize) -> QuorumState {
    let mut holders: Vec<(Vec<u8>, usize)> = Vec::new();
    for h in nodes.iter().flat_map(|s| &s.holders) {
        match holders.iter_mut().find(|(o, _)| *o == h.owner) {
            Some((_, n)) => *n += 1,
            None => holders.push((h.owner.clone(), 1)),
        }
    }
    let limit = nodes.iter().map(|s| s.limit).max().unwrap_or(0);
    QuorumState::Shared { holders, limit, of }
}

impl Locker {
    /// `LOCK.STATUS` on every node in parallel (operators' view), in the
    /// order of the URLs. See [`quorum_state`] for the verdict and an
    /// example.
    pub async fn status(&self, name: &str) -> Vec<NodeReport> {
        let mut cmd = redis::cmd("LOCK.STATUS");
        cmd.arg(name);
        self.on_each(cmd, first_answer)
            .await
            .into_iter()
            .map(|(node, r)| (node, r.map_err(|e| e.to_string()).and_then(parse_status)))
            .collect()
    }

    /// Release a lock for a given owner on every node (operators): per node
    /// 1 released, 0 held by another owner, -1 not held, or why there is no
    /// answer ([`Failure::Rejected`] when the server refused for good).
    ///
    /// ```no_run
    /// # async fn demo(locker: redis_lock_client::Locker) -> Result<(), redis_lock_client::Error> {
    /// // An operator frees a lock whose holder (owner op1) is gone.
    /// for (node, answer) in locker.force_release("lock:stuck", "op1").await {
    ///     println!("{node}: {answer:?}"); // Ok(1) released, Ok(0) other owner, Ok(-1) not held
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn force_release(
        &self,
        name: &str,
        owner: &str,
    ) -> Vec<(String, Result<i64, Failure>)> {
        let release = crate::locker::release_cmd(name, owner);
        let replies = self.on_each(release, released_first).await;
        let int = |r: Result<Value, Failure>| match r? {
            Value::Int(i) => Ok(i),
            other => Err(Failure::Transient(format!("unexpected reply {other:?}"))),
        };
        replies.into_iter().map(|(n, r)| (n, int(r))).collect()
    }

    /// Send `cmd` to every node in parallel. A URL that reached a server an
    /// earlier URL of the list reached too (`LOCK.SERVERID`) reports that,
    /// not the server's answer a second time: operators count servers. The
    /// server's answer shows at its first URL, and is the one `rank` puts
    /// highest among those its URLs brought (the first on a tie): replies
    /// through two URLs race, and the one that did something (a RELEASE's
    /// 1) may have come through the alias.
    async fn on_each(
        &self,
        cmd: redis::Cmd,
        rank: fn(&Value) -> u8,
    ) -> Vec<(String, Result<Value, Failure>)> {
        let timeout = self.inner.config.node_timeout;
        let cmd = std::sync::Arc::new(cmd);
        let mut set = JoinSet::new();
        for (i, node) in self.inner.nodes.iter().enumerate() {
            let (node, cmd) = (node.clone(), cmd.clone());
            set.spawn(async move { (i, within(timeout, node.query_shared(&cmd, false)).await) });
        }
        let mut tagged: Vec<Result<Tagged, Failure>> = (self.inner.nodes.iter())
            .map(|_| Err(Failure::Transient("no answer".into())))
            .collect();
        while let Some(Ok((i, r))) = set.join_next().await {
            tagged[i] = r;
        }
        let same = |a: &ServerTag, b: &ServerTag| self.inner.same.same(a, b);
        let out = once_per_server(tagged, same, rank);
        self.inner.names.iter().cloned().zip(out).collect()
    }
}

/// Each node's reply, a server's answer shown once: at the first node whose
/// reply came from it, the answer `rank` puts highest among its nodes'
/// replies; its other nodes say which node that is.
fn once_per_server(
    replies: Vec<Result<Tagged, Failure>>,
    same: impl Fn(&ServerTag, &ServerTag) -> bool,
    rank: fn(&Value) -> u8,
) -> Vec<Result<Value, Failure>> {
    let (mut out, servers): (Vec<_>, Vec<_>) = replies.into_iter().map(untag).unzip();
    for i in 0..out.len() {
        let Some(server) = &servers[i] else { continue };
        let first = (0..i).find(|&k| servers[k].as_ref().is_some_and(|s| same(s, server)));
        let Some(first) = first else { continue };
        let alias = Err(Failure::Transient(same_server(first, server)));
        let answer = std::mem::replace(&mut out[i], alias);
        let ahead = |a: &Result<Value, Failure>, b: &Result<Value, Failure>| match (a, b) {
            (Ok(a), Ok(b)) => rank(a) > rank(b),
            _ => false,
        };
        if ahead(&answer, &out[first]) {
            out[first] = answer;
        }
    }
    out
}

/// Every answer alike (a read: any of the server's answers will do).
fn first_answer(_: &Value) -> u8 {
    0
}

/// A RELEASE's 1 (it released) above its -1 or 0: a server reached twice
/// released once, through whichever URL got there first.
fn released_first(v: &Value) -> u8 {
    u8::from(*v == Value::Int(1))
}

/// A map reply (RESP3) or its flat array (RESP2) as pairs.
fn pairs(v: Value) -> Result<Vec<(Value, Value)>, String> {
    match v {
        Value::Map(m) => Ok(m),
        Value::Array(items) => {
            let mut it = items.into_iter();
            Ok(std::iter::from_fn(|| Some((it.next()?, it.next()?))).collect())
        }
        other => Err(format!("unexpected reply {other:?}")),
    }
}

/// An exclusive lock's reply, or one holder of a shared key's: the fields
/// both have.
fn parse_holder(fields: Vec<(Value, Value)>, s: &mut NodeStatus) {
    for (k, v) in fields {
        match (k, v) {
            (Value::BulkString(k), Value::BulkString(owner)) if k == b"owner" => s.owner = owner,
            (Value::BulkString(k), Value::BulkString(mode)) if k == b"mode" => {
                s.shared = mode == b"shared"
            }
            (Value::BulkString(k), Value::Array(holders)) if k == b"holders" => {
                for h in holders.into_iter().filter_map(|h| pairs(h).ok()) {
                    let mut one = NodeStatus::default();
                    parse_holder(h, &mut one);
                    s.holders.push(Holder {
                        owner: one.owner,
                        token: one.token,
                        ttl_ms: one.ttl_ms,
                        holds: one.holds,
                    });
                }
            }
            (Value::BulkString(k), Value::Int(i)) => match k.as_slice() {
                b"token" => s.token = i,
                b"ttl" => s.ttl_ms = i,
                b"holds" => s.holds = i,
                b"waiters" => s.waiters = i,
                b"limit" => s.limit = i,
                _ => {}
            },
            _ => {}
        }
    }
}

fn parse_status(v: Value) -> Result<Option<NodeStatus>, String> {
    if v == Value::Nil {
        return Ok(None);
    }
    let mut s = NodeStatus::default();
    parse_holder(pairs(v)?, &mut s);
    Ok(Some(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(owner: &str) -> Result<Option<NodeStatus>, String> {
        Ok(Some(NodeStatus {
            owner: owner.as_bytes().to_vec(),
            token: 1,
            ttl_ms: 1,
            holds: 1,
            ..NodeStatus::default()
        }))
    }

    fn reports(r: Vec<Result<Option<NodeStatus>, String>>) -> Vec<NodeReport> {
        r.into_iter()
            .enumerate()
            .map(|(i, r)| (format!("n{i}"), r))
            .collect()
    }

    #[test]
    fn owners_are_escaped() {
        assert_eq!(escape_owner(b"plain-owner_1 \"x'"), "plain-owner_1 \"x'");
        assert_eq!(escape_owner("jürgen".as_bytes()), "jürgen");
        assert_eq!(
            escape_owner(b"a\tb\nc\r\0\x1b[m\\\xff\xc3"),
            r"a\tb\nc\r\0\u{1b}[m\\\xff\xc3"
        );
        assert_eq!(escape_owner("\u{202e}".as_bytes()), r"\u{202e}");
    }

    fn from(server: &str, v: i64) -> Result<Tagged, Failure> {
        Ok((Value::Int(v), Some(crate::server_ids::tag(server, 0))))
    }

    fn shown(out: &[Result<Value, Failure>]) -> Vec<String> {
        let show = |r: &Result<Value, Failure>| match r {
            Ok(Value::Int(i)) => i.to_string(),
            Ok(other) => format!("{other:?}"),
            Err(e) if e.to_string().contains("same server as server 1 ") => "alias of 1".into(),
            Err(e) => e.to_string(),
        };
        out.iter().map(show).collect()
    }

    #[test]
    fn a_server_reached_twice_shows_its_release_once_at_its_first_url() {
        // The stop-23 flake: the alias URL's RELEASE got there first (1)
        // and the first URL's came second (-1); the 1 was hidden behind
        // the alias label and the report read "not held" everywhere.
        let eq = |a: &ServerTag, b: &ServerTag| a == b;
        let alias_first = vec![from("s", -1), from("s", 1), from("o", -1)];
        let out = once_per_server(alias_first, eq, released_first);
        assert_eq!(shown(&out), ["1", "alias of 1", "-1"]);
        let first_first = vec![from("s", 1), from("s", -1), from("o", 0)];
        let out = once_per_server(first_first, eq, released_first);
        assert_eq!(shown(&out), ["1", "alias of 1", "0"]);
        let read = vec![from("s", 5), from("s", 6)];
        let out = once_per_server(read, eq, first_answer);
        assert_eq!(shown(&out), ["5", "alias of 1"], "a read keeps the first");
    }

    #[test]
    fn a_url_that_failed_leaves_the_server_to_the_next_that_reached_it() {
        let eq = |a: &ServerTag, b: &ServerTag| a == b;
        let down = Err(Failure::Transient("refused".into()));
        let out = once_per_server(vec![down, from("s", 1), from("s", -1)], eq, released_first);
        let out = shown(&out);
        assert_eq!(out[0], "refused");
        assert_eq!(out[1], "1");
        assert!(out[2].contains("same server as server 2 "), "{}", out[2]);
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn shared_reply(limit: i64, owners: &[&str]) -> Value {
        let holders = owners.iter().enumerate().map(|(i, o)| {
            let h = [
                (bulk("owner"), bulk(o)),
                (bulk("token"), Value::Int(10 + i as i64)),
                (bulk("ttl"), Value::Int(5000)),
                (bulk("holds"), Value::Int(1)),
            ];
            Value::Map(h.to_vec())
        });
        Value::Array(vec![
            bulk("mode"),
            bulk("shared"),
            bulk("limit"),
            Value::Int(limit),
            bulk("holders"),
            Value::Array(holders.collect()),
            bulk("waiters"),
            Value::Int(2),
        ])
    }

    #[test]
    fn a_shared_reply_lists_its_holders() {
        let s = parse_status(shared_reply(2, &["r1", "r2"]))
            .unwrap()
            .unwrap();
        assert!(s.shared);
        assert_eq!((s.limit, s.waiters, s.owner.len()), (2, 2, 0));
        let owners: Vec<&[u8]> = s.holders.iter().map(|h| h.owner.as_slice()).collect();
        assert_eq!(owners, [b"r1", b"r2"]);
        assert_eq!((s.holders[1].token, s.holders[1].ttl_ms), (11, 5000));
        // An exclusive reply (RESP2) is as before: no mode, no holders.
        let x = Value::Array(vec![
            bulk("owner"),
            bulk("w"),
            bulk("token"),
            Value::Int(4),
            bulk("ttl"),
            Value::Int(9),
            bulk("holds"),
            Value::Int(1),
            bulk("waiters"),
            Value::Int(0),
        ]);
        let x = parse_status(x).unwrap().unwrap();
        assert!(!x.shared && x.holders.is_empty());
        assert_eq!((x.owner.as_slice(), x.token), (&b"w"[..], 4));
    }

    #[test]
    fn a_key_held_shared_on_a_majority_shows_its_holders() {
        let sh = |owners: &[&str]| Ok(parse_status(shared_reply(0, owners)).unwrap());
        let st = quorum_state(&reports(vec![sh(&["a", "b"]), sh(&["a"]), Ok(None)]));
        assert_eq!(st.to_string(), "shared by a on 2 of 3, b on 1 of 3");
        let limited = Ok(parse_status(shared_reply(2, &["x"])).unwrap());
        let st = quorum_state(&reports(vec![limited.clone(), limited, Ok(None)]));
        assert_eq!(st.to_string(), "shared (limit 2) by x on 2 of 3");
        // Shared on one node of three: no verdict.
        let st = quorum_state(&reports(vec![sh(&["a"]), held("w"), Ok(None)]));
        assert_eq!(st, QuorumState::Unknown);
    }

    #[test]
    fn verdicts() {
        let down = || Err("refused".to_string());
        let st = quorum_state(&reports(vec![held("a"), held("a"), Ok(None)]));
        assert_eq!(st.to_string(), "held by a on 2 of 3");
        let st = quorum_state(&reports(vec![Ok(None), Ok(None), held("a")]));
        assert_eq!(st, QuorumState::Free { nodes: 2, of: 3 });
        let st = quorum_state(&reports(vec![held("a"), held("b"), Ok(None)]));
        assert_eq!(st, QuorumState::Unknown);
        let st = quorum_state(&reports(vec![held("a"), down(), down()]));
        assert_eq!(st, QuorumState::Unreachable { answered: 1, of: 3 });
    }
}
