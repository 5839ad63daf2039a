//! `Locker.status(name)`: who holds a lock, as a majority of the servers
//! says (the crate's `status` and `quorum_state`), for redis-py's
//! `locked()` / `owned()` habits.

use crate::hold::shown_name;
use pyo3::prelude::*;
use redis_lock_client::{
    escape_owner, quorum::majority, quorum_state, Locker as CoreLocker, NodeReport, QuorumState,
};

/// What a majority of the servers says about a lock now.
///
/// - `state`: "held" (by `owner` on a majority), "free" (on a majority),
///   "unknown" (a majority answered but agrees on no owner, e.g. while
///   an acquisition is under way) or "unreachable" (too few answered).
/// - `held`: state == "held". `owner` (str; an owner that is not UTF-8 is
///   shown escaped), `token` (the fencing token a majority holds),
///   `validity` (seconds the servers keep it on a majority if not renewed):
///   None unless held.
/// - `servers`: servers where it is held by `owner` (or free, if "free";
///   held shared, if "shared"), of `of`; `failures`: (node, cause) for each
///   server that did not answer.
/// - A key held shared (`lock(..., shared=True)` or `limit=`): state
///   "shared", `held` False, `owner` None; `holders`: (owner, servers) for
///   each shared holder, `limit`: the key's limit (None: no limit).
#[pyclass(module = "redis_lock_client", frozen, get_all)]
pub struct LockStatus {
    name: String,
    state: &'static str,
    held: bool,
    owner: Option<String>,
    token: Option<i64>,
    validity: Option<f64>,
    servers: usize,
    of: usize,
    failures: Vec<(String, String)>,
    holders: Vec<(String, usize)>,
    limit: Option<i64>,
}

/// An owner as text (escaped when it is not UTF-8).
fn shown(owner: Vec<u8>) -> String {
    match String::from_utf8(owner) {
        Ok(text) => text,
        Err(e) => escape_owner(e.as_bytes()),
    }
}

impl LockStatus {
    fn of_reports(name: String, reports: Vec<NodeReport>) -> LockStatus {
        let of = reports.len();
        let failures = (reports.iter())
            .filter_map(|(node, r)| Some((node.clone(), r.as_ref().err()?.clone())))
            .collect();
        let mut status = LockStatus {
            name,
            state: "unknown",
            held: false,
            owner: None,
            token: None,
            validity: None,
            servers: 0,
            of,
            failures,
            holders: Vec::new(),
            limit: None,
        };
        match quorum_state(&reports) {
            QuorumState::Held { owner, nodes, .. } => {
                let holds: Vec<_> = (reports.iter())
                    .filter_map(|(_, r)| r.as_ref().ok()?.as_ref())
                    .filter(|s| s.owner == owner)
                    .collect();
                let need = majority(of);
                // The majority's view: the lowest token among the highest
                // `need` (what a majority holds at least, as the client's
                // quorum token), and the TTL a majority still has.
                let mut tokens: Vec<i64> = holds.iter().map(|s| s.token).collect();
                tokens.sort_unstable();
                let mut ttls: Vec<i64> = holds.iter().map(|s| s.ttl_ms).collect();
                ttls.sort_unstable_by(|a, b| b.cmp(a));
                status.state = "held";
                status.held = true;
                status.owner = Some(shown(owner));
                status.token = tokens.get(tokens.len().saturating_sub(need)).copied();
                status.validity = ttls.get(need - 1).map(|&ms| ms.max(0) as f64 / 1000.0);
                status.servers = nodes;
            }
            QuorumState::Free { nodes, .. } => {
                status.state = "free";
                status.servers = nodes;
            }
            QuorumState::Shared { holders, limit, .. } => {
                status.state = "shared";
                status.servers = (reports.iter())
                    .filter(|(_, r)| matches!(r, Ok(Some(s)) if s.shared))
                    .count();
                status.holders = holders
                    .into_iter()
                    .map(|(owner, nodes)| (shown(owner), nodes))
                    .collect();
                status.limit = (limit > 0).then_some(limit);
            }
            QuorumState::Unknown => {}
            QuorumState::Unreachable { answered, .. } => {
                status.state = "unreachable";
                status.servers = answered;
            }
        }
        status
    }

    /// The status of `name` on `core`'s servers.
    pub async fn query(core: CoreLocker, name: String) -> LockStatus {
        let reports = core.status(&name).await;
        LockStatus::of_reports(name, reports)
    }
}

#[pymethods]
impl LockStatus {
    fn __repr__(&self) -> String {
        let who = match (&self.owner, self.token, self.validity) {
            (Some(owner), Some(token), Some(validity)) => format!(
                " owner={} token={token} validity={validity:.3}s",
                shown_name(owner)
            ),
            _ if !self.holders.is_empty() => {
                let owners: Vec<String> = (self.holders.iter())
                    .map(|(o, n)| format!("{}:{n}", shown_name(o)))
                    .collect();
                format!(" holders=[{}]", owners.join(", "))
            }
            _ => String::new(),
        };
        format!(
            "<redis_lock_client.LockStatus name={} {} on {} of {}{who}>",
            shown_name(&self.name),
            self.state,
            self.servers,
            self.of
        )
    }
}
