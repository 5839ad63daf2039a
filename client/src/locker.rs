//! The quorum lock (Redlock over servers running the module). Every
//! operation is one helper, [`Locker::round`], fanning a command out to all
//! nodes in parallel and tallying the answers.

use crate::config::Config;
use crate::error::Error;
use crate::node::Node;
use crate::quorum::{self, Answer, Tally, Verdict};
use rand::Rng;
use redis::{Cmd, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// A lock held on a majority of nodes.
#[derive(Debug, Clone)]
pub struct Lock {
    name: String,
    owner: String,
    token: u64,
    ttl: Duration,
    valid_until: Instant,
}

impl Lock {
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The random owner value this lock was taken with.
    pub fn owner(&self) -> &str {
        &self.owner
    }
    /// Fencing token: larger than every token of an earlier holder of this
    /// name while a majority of nodes kept their state (see README).
    pub fn token(&self) -> u64 {
        self.token
    }
    /// How long the lock is still known to be valid (0 once it may have expired).
    pub fn validity(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
}

/// What one node says about a lock (LOCK.STATUS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    pub owner: Vec<u8>,
    pub token: i64,
    pub ttl_ms: i64,
    pub holds: i64,
    pub waiters: i64,
}

struct Inner {
    nodes: Vec<Arc<Node>>,
    names: Vec<String>,
    config: Config,
}

/// Quorum lock client. Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct Locker {
    inner: Arc<Inner>,
}

/// 128 bits from the OS random source, as hex.
pub fn random_owner() -> String {
    let bytes: [u8; 16] = rand::rngs::OsRng.gen();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn acquire_answer(reply: Result<Value, String>) -> Answer {
    match reply {
        Ok(Value::Int(token)) if token > 0 => Answer::Yes(token as u64),
        Ok(Value::Nil) => Answer::Busy,
        Ok(other) => Answer::Failed(format!("unexpected reply {other:?}")),
        Err(e) => Answer::Failed(e),
    }
}

/// Replies of RELEASE/EXTEND: 1 yes, 0 another owner, -1 not held.
fn code_answer(reply: Result<Value, String>) -> Answer {
    match reply {
        Ok(Value::Int(1)) => Answer::Yes(0),
        Ok(Value::Int(0)) => Answer::Busy,
        Ok(Value::Int(-1)) => Answer::Gone,
        Ok(other) => Answer::Failed(format!("unexpected reply {other:?}")),
        Err(e) => Answer::Failed(e),
    }
}

type Classify = fn(Result<Value, String>) -> Answer;

/// A round's answers so far and the requests still in flight.
struct Round {
    tally: Tally,
    pending: JoinSet<(usize, Result<Value, String>)>,
    classify: Classify,
}

impl Round {
    /// Wait for the stragglers too (each bounded by its node timeout).
    async fn finish(mut self) -> Tally {
        while let Some(joined) = self.pending.join_next().await {
            if let Ok((i, reply)) = joined {
                self.tally.add(i, (self.classify)(reply));
            }
        }
        self.tally
    }

    /// Let the stragglers complete in the background: a won lock should
    /// still land on every node that answers.
    fn detach(mut self) -> Tally {
        self.pending.detach_all();
        self.tally
    }

    fn verdict(&self) -> Verdict {
        self.tally
            .early()
            .unwrap_or_else(|| self.tally.final_verdict())
    }
}

fn ms(d: Duration) -> u64 {
    d.as_millis().max(1) as u64
}

impl Locker {
    pub fn new(config: Config) -> Locker {
        let nodes: Vec<Arc<Node>> = config.urls.iter().map(|u| Arc::new(Node::new(u))).collect();
        let names = nodes.iter().map(|n| n.name.clone()).collect();
        Locker {
            inner: Arc::new(Inner {
                nodes,
                names,
                config,
            }),
        }
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    pub fn node_names(&self) -> &[String] {
        &self.inner.names
    }

    /// Send `cmd` to the nodes in `targets` in parallel and tally the
    /// answers, returning as soon as the verdict is certain (fail-fast);
    /// the slower nodes' requests stay in flight in `Round::pending`.
    async fn round(
        &self,
        targets: &[usize],
        cmd: Cmd,
        timeout: Duration,
        classify: Classify,
    ) -> Round {
        let mut round = Round {
            tally: Tally::new(self.inner.nodes.len()),
            pending: JoinSet::new(),
            classify,
        };
        let cmd = Arc::new(cmd);
        for &i in targets {
            let (node, cmd) = (self.inner.nodes[i].clone(), cmd.clone());
            // A blocking WAIT must not hold up the node's shared connection.
            let dedicated = cmd
                .args_iter()
                .any(|a| matches!(a, redis::Arg::Simple(b) if b == b"WAIT"));
            round.pending.spawn(async move {
                let reply = if dedicated {
                    node.query_dedicated(&cmd, timeout).await
                } else {
                    node.query(&cmd, timeout).await
                };
                (i, reply)
            });
        }
        while let Some(joined) = round.pending.join_next().await {
            let Ok((i, reply)) = joined else { continue };
            round.tally.add(i, classify(reply));
            if self.inner.config.fail_fast && round.tally.early().is_some() {
                break;
            }
        }
        round
    }

    fn all(&self) -> Vec<usize> {
        (0..self.inner.nodes.len()).collect()
    }

    /// One acquisition round: acquire everywhere, check majority and
    /// validity, fence, and release everywhere on failure.
    async fn attempt(
        &self,
        name: &str,
        owner: &str,
        wait: Option<Duration>,
    ) -> Result<Lock, Error> {
        let cfg = &self.inner.config;
        let start = Instant::now();
        let mut cmd = redis::cmd("LOCK.ACQUIRE");
        cmd.arg(name).arg(owner).arg(ms(cfg.ttl));
        let mut timeout = cfg.node_timeout;
        if let Some(wait) = wait {
            cmd.arg("WAIT").arg(ms(wait));
            timeout += wait;
        }
        let round = self.round(&self.all(), cmd, timeout, acquire_answer).await;
        let verdict = round.verdict();
        if verdict == Verdict::Quorum {
            let tally = round.detach();
            let mut lock = Lock {
                name: name.to_string(),
                owner: owner.to_string(),
                token: tally.max_token(),
                ttl: cfg.ttl,
                valid_until: start,
            };
            match self.fence(&tally, &mut lock, start).await {
                Ok(()) => return Ok(lock),
                Err(e) => {
                    self.release_everywhere(name, owner).await;
                    return Err(e);
                }
            }
        }
        // A grant may have landed even where the reply was lost: release
        // everywhere, after every acquire request has been sent or timed out.
        let tally = round.finish().await;
        self.release_everywhere(name, owner).await;
        Err(match verdict {
            Verdict::Unreachable => self.no_quorum(&tally),
            _ => Error::Taken,
        })
    }

    /// Fencing round and validity: raise the granting nodes' tokens to the
    /// maximum seen, so that any later majority (which overlaps this one)
    /// hands out larger tokens. Skipped where a node already has the maximum.
    async fn fence(&self, grants: &Tally, lock: &mut Lock, start: Instant) -> Result<(), Error> {
        let cfg = &self.inner.config;
        let behind: Vec<usize> = grants
            .yes
            .iter()
            .filter(|&&(_, t)| t < lock.token)
            .map(|&(i, _)| i)
            .collect();
        let at_max = grants.yes.len() - behind.len();
        if cfg.fencing && !behind.is_empty() && at_max < quorum::majority(self.inner.nodes.len()) {
            let mut cmd = redis::cmd("LOCK.FENCE");
            cmd.arg(&lock.name).arg(&lock.owner).arg(lock.token);
            let token = lock.token;
            let raised = self
                .round(&behind, cmd, cfg.node_timeout, |r| match r {
                    Ok(Value::Int(t)) if t > 0 => Answer::Yes(t as u64),
                    other => code_answer(other),
                })
                .await
                .finish()
                .await;
            let fenced = at_max + raised.yes.iter().filter(|&&(_, t)| t >= token).count();
            if fenced < quorum::majority(self.inner.nodes.len()) {
                return Err(self.no_quorum(&raised));
            }
        }
        lock.valid_until = self.valid_until(start).ok_or(Error::Expired)?;
        // After a long server-side WAIT the grant time is unknown (validity
        // counts from the request): restart the clock with an extend.
        if lock.validity() < cfg.ttl / 2 {
            self.extend(lock).await?;
        }
        Ok(())
    }

    /// End of validity of grants requested at `start`: every node's deadline
    /// is at least start + ttl; minus the allowance for clock drift.
    fn valid_until(&self, start: Instant) -> Option<Instant> {
        let now = Instant::now();
        quorum::validity(
            self.inner.config.ttl,
            now - start,
            self.inner.config.drift_factor,
        )
        .map(|v| now + v)
    }

    fn no_quorum(&self, tally: &Tally) -> Error {
        Error::NoQuorum {
            granted: tally.yes.len(),
            needed: quorum::majority(self.inner.nodes.len()),
            failures: tally.failures(&self.inner.names),
        }
    }

    /// Release on every node, waiting for each answer (or its timeout).
    async fn release_everywhere(&self, name: &str, owner: &str) -> Tally {
        let mut cmd = redis::cmd("LOCK.RELEASE");
        cmd.arg(name).arg(owner);
        let round = self
            .round(
                &self.all(),
                cmd,
                self.inner.config.node_timeout,
                code_answer,
            )
            .await;
        round.finish().await
    }

    /// One attempt: no retries, no waiting.
    pub async fn try_lock(&self, name: &str) -> Result<Lock, Error> {
        self.attempt(name, &random_owner(), None).await
    }

    /// Acquire, retrying with random delays until `wait` has passed (or the
    /// retry count is used up). With a single server, waits in the server
    /// (`LOCK.ACQUIRE ... WAIT`), FIFO, instead of polling.
    pub async fn lock(&self, name: &str, wait: Duration) -> Result<Lock, Error> {
        let cfg = &self.inner.config;
        let owner = random_owner();
        let deadline = Instant::now() + wait;
        if self.inner.nodes.len() == 1 {
            return self.attempt(name, &owner, Some(wait)).await;
        }
        let mut tries = 0;
        loop {
            tries += 1;
            let err = match self.attempt(name, &owner, None).await {
                Ok(lock) => return Ok(lock),
                Err(e @ Error::Config(_)) => return Err(e),
                Err(e) => e,
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tries >= cfg.retry_count {
                return Err(err);
            }
            let (lo, hi) = cfg.retry_delay;
            let pause = rand::thread_rng().gen_range(lo..=hi);
            tokio::time::sleep(pause.min(left)).await;
        }
    }

    /// Reset the lock's TTL on a majority; updates its validity.
    pub async fn extend(&self, lock: &mut Lock) -> Result<(), Error> {
        let cfg = &self.inner.config;
        let start = Instant::now();
        let mut cmd = redis::cmd("LOCK.EXTEND");
        cmd.arg(&lock.name).arg(&lock.owner).arg(ms(lock.ttl));
        let round = self
            .round(&self.all(), cmd, cfg.node_timeout, code_answer)
            .await;
        let verdict = round.verdict();
        let tally = round.detach();
        match verdict {
            Verdict::Quorum => {
                lock.valid_until = self.valid_until(start).ok_or(Error::Expired)?;
                Ok(())
            }
            Verdict::Unreachable => Err(self.no_quorum(&tally)),
            Verdict::Contended => Err(Error::Expired),
        }
    }

    /// Release on every node. Ok when a majority released it; `Expired` when
    /// it was no longer held on a majority.
    pub async fn unlock(&self, lock: &Lock) -> Result<(), Error> {
        let tally = self.release_everywhere(&lock.name, &lock.owner).await;
        match tally.final_verdict() {
            Verdict::Quorum => Ok(()),
            Verdict::Unreachable => Err(self.no_quorum(&tally)),
            Verdict::Contended => Err(Error::Expired),
        }
    }

    /// LOCK.STATUS on every node (operators' view).
    pub async fn status(&self, name: &str) -> Vec<(String, Result<Option<NodeStatus>, String>)> {
        let mut out = Vec::new();
        for node in &self.inner.nodes {
            let mut cmd = redis::cmd("LOCK.STATUS");
            cmd.arg(name);
            let reply = node.query(&cmd, self.inner.config.node_timeout).await;
            out.push((node.name.clone(), reply.and_then(parse_status)));
        }
        out
    }

    /// Release a lock for a given owner on every node (operators).
    pub async fn force_release(
        &self,
        name: &str,
        owner: &str,
    ) -> Vec<(String, Result<i64, String>)> {
        let mut out = Vec::new();
        for node in &self.inner.nodes {
            let mut cmd = redis::cmd("LOCK.RELEASE");
            cmd.arg(name).arg(owner);
            let reply = node.query(&cmd, self.inner.config.node_timeout).await;
            out.push((
                node.name.clone(),
                reply.and_then(|v| match v {
                    Value::Int(i) => Ok(i),
                    other => Err(format!("unexpected reply {other:?}")),
                }),
            ));
        }
        out
    }
}

fn parse_status(v: Value) -> Result<Option<NodeStatus>, String> {
    let pairs: Vec<(Value, Value)> = match v {
        Value::Nil => return Ok(None),
        Value::Map(m) => m,
        Value::Array(items) => {
            let mut it = items.into_iter();
            std::iter::from_fn(|| Some((it.next()?, it.next()?))).collect()
        }
        other => return Err(format!("unexpected reply {other:?}")),
    };
    let mut s = NodeStatus {
        owner: Vec::new(),
        token: 0,
        ttl_ms: 0,
        holds: 0,
        waiters: 0,
    };
    for (k, v) in pairs {
        match (k, v) {
            (Value::BulkString(k), Value::BulkString(owner)) if k == b"owner" => s.owner = owner,
            (Value::BulkString(k), Value::Int(i)) => match k.as_slice() {
                b"token" => s.token = i,
                b"ttl" => s.ttl_ms = i,
                b"holds" => s.holds = i,
                b"waiters" => s.waiters = i,
                _ => {}
            },
            _ => {}
        }
    }
    Ok(Some(s))
}
