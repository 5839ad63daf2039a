//! The quorum lock (Redlock over servers running the module). Every
//! operation is one helper, [`Locker::round`], fanning a command out to all
//! nodes in parallel and tallying the answers.

use crate::background::BACKGROUND;
use crate::busy::RecentlyBusy;
use crate::config::Config;
use crate::error::{Error, NodeFailure};
use crate::let_go::{
    release_timed_out, release_when_answered, settle_late, withdraw_late, Outstanding, Releaser,
};
use crate::lock::{Lock, Shared};
use crate::member::Member;
use crate::node::{is_timeout, within};
use crate::one_runtime::on_one_runtime;
use crate::options::LockOptions;
use crate::quorum::{self, Answer, Tally, Verdict};
use crate::request::{random_owner, Request};
use crate::round::{acquire_answer, code_answer, Classify, Late, Pending, Reply, Round};
use crate::server_clock;
use crate::server_ids::{SameServers, ServerTag};
use crate::stragglers::Stragglers;
use futures_util::future::BoxFuture;
use redis::{Cmd, Value};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

pub(crate) struct Inner {
    pub(crate) nodes: Vec<Arc<Member>>,
    pub(crate) names: Vec<String>,
    /// 0..nodes.len(): the targets of a round on every node.
    all: Vec<usize>,
    pub(crate) config: Config,
    pub(crate) stragglers: Stragglers<Reply>,
    /// Which server tags name one server (restarts, `server_ids.rs`).
    pub(crate) same: Arc<SameServers>,
    /// Names a try found held a moment ago (`busy.rs`).
    busy: RecentlyBusy,
}

/// Quorum lock client. Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct Locker {
    pub(crate) inner: Arc<Inner>,
}

/// Extra time a `WAIT` call gets beyond its wait and the node timeout: the
/// server checks blocked clients' timeouts on its event-loop tick (100 ms at
/// the default `hz 10`), so a "busy" answer can come that much late.
pub(crate) const WAIT_SLACK: Duration = Duration::from_millis(250);

/// The least time a won acquisition waits for its slower nodes' grants
/// before it runs a fencing round (`Round::await_holders`), and a failed
/// one for its slower nodes' answers before it leaves them to the
/// background (`Locker::give_back_pass`).
const HOLDERS_GRACE_MIN: Duration = Duration::from_millis(1);

/// Why an acquisition polled on another runtime than the one it began on
/// ended (see `one_runtime.rs`).
const MOVED: &str = "the runtime running the wait shut down (or another runtime polled it): \
                     retry on a live runtime";

/// The longest `WAIT` the module accepts (2^31 - 1 ms); longer waits loop.
pub(crate) const MAX_SERVER_WAIT: Duration = Duration::from_millis(i32::MAX as u64);

/// `command name owner`, with room for the options that follow: built at
/// its final size at once, not grown an argument at a time (every lock
/// builds two or three of these).
pub(crate) fn lock_cmd(command: &str, name: &str, owner: &str) -> Cmd {
    let mut cmd = Cmd::with_capacity(12, command.len() + name.len() + owner.len() + 96);
    cmd.arg(command).arg(name).arg(owner);
    cmd
}

/// `LOCK.RELEASE name owner`.
pub(crate) fn release_cmd(name: &str, owner: &str) -> Cmd {
    lock_cmd("LOCK.RELEASE", name, owner)
}

/// Whole milliseconds, at least 1; saturating, so that an absurd duration
/// reaches the servers as too large (and is refused there with their
/// limit in the message) instead of wrapping around to a small one.
pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// A server-side wait in whole milliseconds, rounded up: rounded down, a
/// wait of 199.7 ms left ended at 199 ms and `lock(name, 200 ms)` said
/// `Taken` before its 200 ms were up (quorum.rs
/// single_server_waits_in_the_server, seen failing under load).
pub(crate) fn wait_ms(d: Duration) -> u64 {
    let up = d.as_nanos().div_ceil(1_000_000);
    u64::try_from(up).unwrap_or(u64::MAX).max(1)
}

/// Armed while an acquisition round runs: dropped armed (the caller
/// cancelled the future), it releases the name everywhere in the
/// background, on the runtime the call runs on (see `one_runtime.rs`). A
/// round that waited in the server (a WAIT, on a connection of its own)
/// may still have one on its way: withdrawn again for a while, as a wait
/// given up on is (`withdraw_late`).
struct Abandoned<'a> {
    locker: Option<Locker>,
    req: Request<'a>,
    waited: bool,
    runtime: Option<tokio::runtime::Handle>,
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        let Some(locker) = self.locker.take() else {
            return;
        };
        let (req, waited) = (self.req.to_owned(), self.waited);
        crate::one_runtime::clean_up_on(&self.runtime, move || {
            let req = req.get();
            locker.release_everywhere_later(req.name, req.owner);
            if waited {
                // Its WAIT was dropped unanswered: it may still land.
                let n = locker.inner.nodes.len();
                let mut lost = Outstanding::new(n);
                (0..n).for_each(|i| lost.lost(i));
                let (acquires, returns) = (Pending::new(), Pending::new());
                withdraw_late(locker, &req, acquires, lost, returns, Weak::new());
            }
        });
    }
}

impl Locker {
    /// A Locker over the (validated) `config`'s servers. No connection is
    /// opened until the first operation.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), redis_lock_client::Error> {
    /// use redis_lock_client::{Builder, Locker};
    /// let config = Builder::new(&["redis://127.0.0.1:7001/", "redis://127.0.0.1:7002/", "redis://127.0.0.1:7003/"]).config()?;
    /// let locker = Locker::new(config);
    /// assert_eq!(locker.node_names().len(), 3);
    /// # Ok(()) }
    /// ```
    pub fn new(config: Config) -> Locker {
        let same = Arc::new(SameServers::default());
        let nodes: Vec<Arc<Member>> = (config.urls.iter())
            .map(|u| Arc::new(Member::new(u, same.clone())))
            .collect();
        let names = nodes.iter().map(|n| n.name().to_string()).collect();
        Locker {
            inner: Arc::new(Inner {
                all: (0..nodes.len()).collect(),
                nodes,
                names,
                config,
                stragglers: Stragglers::default(),
                same,
                busy: RecentlyBusy::default(),
            }),
        }
    }

    /// The settings this Locker was built with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// `host:port` of each node, in the order of the URLs.
    pub fn node_names(&self) -> &[String] {
        &self.inner.names
    }

    /// Two URLs of the list that reached one server, as the `Config` error
    /// naming them; known for the URLs connected so far (`status` connects
    /// every one). Calls count such a server once, so with one listed twice
    /// fewer servers vote than the list says: an answer without a majority
    /// may come from that, not from servers that are down.
    pub fn listed_twice(&self) -> Option<Error> {
        self.two_urls_of_one_server(&[])
    }

    /// Send `cmd` to the nodes in `targets` in parallel and tally the
    /// answers, returning as soon as the verdict is certain (fail-fast);
    /// the slower nodes' requests stay in flight in `Round::pending`.
    pub(crate) async fn round(
        &self,
        targets: &[usize],
        cmd: Cmd,
        timeout: Duration,
        classify: Classify,
        resend: bool,
    ) -> Round {
        let majority = quorum::majority(self.inner.nodes.len());
        self.round_needing(targets, cmd, timeout, classify, resend, majority)
            .await
    }

    /// `round`, its verdict needing `need` grants (a limited shared hold's
    /// quorum) instead of a majority.
    pub(crate) async fn round_needing(
        &self,
        targets: &[usize],
        cmd: Cmd,
        timeout: Duration,
        classify: Classify,
        resend: bool,
        need: usize,
    ) -> Round {
        // A blocking WAIT must not hold up the node's shared connection.
        let dedicated = cmd
            .args_iter()
            .any(|a| matches!(a, redis::Arg::Simple(b) if b == b"WAIT"));
        let on_open = !dedicated && targets.iter().all(|&i| self.inner.nodes[i].is_connected());
        let tally = Tally::per_server(self.inner.nodes.len(), self.inner.same.clone())
            .asking(targets.len())
            .needing(need);
        let mut round = Round::new(tally, timeout, classify, on_open);
        let cmd = Arc::new(cmd);
        for &i in targets {
            round.push(i, self.send(i, cmd.clone(), None, dedicated, resend));
        }
        while round.next().await {
            if self.inner.config.fail_fast && round.tally.early().is_some() {
                round.take_ready();
                break;
            }
        }
        round
    }

    /// `cmd` to node `i`, as a future that owns what it needs (so it can
    /// outlive the call that made it), with a deadline of its own unless
    /// `timeout` is None (a round's requests share the round's). `resend`:
    /// the request may be sent again on a new connection if it finds the
    /// shared one broken (see `Node::query_shared` for which may).
    pub(crate) fn send(
        &self,
        i: usize,
        cmd: Arc<Cmd>,
        timeout: Option<Duration>,
        dedicated: bool,
        resend: bool,
    ) -> BoxFuture<'static, Reply> {
        let node = self.inner.nodes[i].clone();
        // One future per kind, each boxed at its own size: the common one
        // (shared connection, the round's deadline) stays small, which
        // saves a copy and a large allocation per request.
        match (dedicated, timeout) {
            (false, None) => Box::pin(async move { (i, node.query_shared(&cmd, resend).await) }),
            (false, Some(t)) => {
                Box::pin(async move { (i, within(t, node.query_shared(&cmd, resend)).await) })
            }
            (true, None) => {
                let refuse = self.second_url_of(i);
                Box::pin(async move { (i, node.query_dedicated(&cmd, refuse).await) })
            }
            (true, Some(t)) => {
                let refuse = self.second_url_of(i);
                Box::pin(async move { (i, within(t, node.query_dedicated(&cmd, refuse)).await) })
            }
        }
    }

    /// For a blocking request through node `i`: why not to send it, if the
    /// server its connection reached is one another node already reached
    /// (restart links included). A WAIT travelling to one server on two
    /// connections cannot be ordered against the other's RELEASE, and one
    /// sent before the wait found the alias out could be granted after its
    /// clean-up, holding that server for a TTL (d992c16).
    fn second_url_of(&self, i: usize) -> impl Fn(Option<&ServerTag>) -> Option<String> {
        let inner = self.inner.clone();
        move |server| {
            let server = server?;
            let known = inner.nodes.iter().map(|n| n.known_server());
            let known: Vec<(usize, ServerTag)> = known
                .enumerate()
                .filter_map(|(j, k)| Some((j, k?)))
                .collect();
            let paths = known.iter().map(|(j, k)| (*j, k));
            let other = inner.same.other_path(i, server, paths)?;
            Some(crate::server_ids::same_server(other, server))
        }
    }

    /// Every node's index (kept, not collected per round).
    fn all(&self) -> &[usize] {
        &self.inner.all
    }

    /// One acquisition round: acquire everywhere (with `server_wait`, block
    /// in the server up to that long), check majority and validity, fence,
    /// and release everywhere on failure.
    /// `unsure`: set if a RELEASE of this attempt timed out (it may still
    /// reach its server; see `acquire_as`). `end`: every round of it ends
    /// by then (a wait's deadline plus one node timeout).
    async fn attempt(
        &self,
        req: &Request<'_>,
        server_wait: Option<Duration>,
        end: Option<Instant>,
        unsure: &mut bool,
    ) -> Result<Lock, Error> {
        let cfg = &self.inner.config;
        let start = Instant::now();
        let mut cmd = lock_cmd("LOCK.ACQUIRE", req.name, req.owner);
        cmd.arg(ms(req.ttl));
        req.hold.args(&mut cmd);
        let mut timeout = cfg.node_timeout;
        if let Some(wait) = server_wait {
            cmd.arg("WAIT").arg(wait_ms(wait));
            // A late "busy" is busy, not an outage.
            timeout += wait + WAIT_SLACK;
        }
        if let Some(end) = end {
            timeout = timeout.min(end.saturating_duration_since(start));
        }
        if req.reentrant {
            cmd.arg("REENTRANT");
        }
        // Ask every node for the same token floor: nodes whose counters are
        // below it all grant exactly it, so the quorum token is already on a
        // majority and the fencing round is skipped (see quorum::token_floor).
        cmd.arg("MINTOKEN")
            .arg(quorum::token_floor(self.servers_time(Instant::now())));
        let need = req.hold.need(self.inner.nodes.len());
        let mut round = self
            .round_needing(self.all(), cmd, timeout, acquire_answer, false, need)
            .await;
        let verdict = round.verdict();
        if verdict == Verdict::Quorum {
            let token = round.tally.quorum_token();
            if cfg.fencing {
                // As long again as the majority took: the stragglers' replies
                // are usually on their way; a stalled node costs that much.
                let grace = start.elapsed().max(HOLDERS_GRACE_MIN);
                Box::pin(round.await_holders(token, grace)).await;
            }
            // A won lock should still land on every node that answers, and
            // a grant that lands after the lock was let go is released.
            let (tally, late) = round.split();
            let shared = Arc::new(Shared::default());
            if req.reentrant {
                shared.hold_on(tally.granted());
            }
            match late {
                Late::None => {}
                // A REENTRANT lock's late grants are recorded, not only driven.
                Late::OnOpen(late, deadline) if !req.reentrant => {
                    self.inner.stragglers.drive(deadline, late)
                }
                // ... also after the round's deadline, up to a TTL more:
                // a REENTRANT lock's late hold is the handle's and is
                // recorded (3f191a0). Later than that (a server stalled a
                // TTL) it is left to expire: a task per acquisition kept for
                // a stopped server piled up without end (4dd471c). Any other
                // lock's, to the deadline: the unlock's RELEASE goes out
                // behind every ACQUIRE sent on the node's connection (on a
                // new one too: its first request, then those that waited for
                // it to open, go before later ones, `Node::connection`), and
                // one still connecting at the deadline is dropped unsent.
                // Kept a TTL for a generated owner (28688ae), a server that
                // never finished the connect kept a task per lock for that TTL,
                // counted as clean-up: `background_done()`, the CLI's and the
                // bindings' exit, waited for it (2026-11-28).
                Late::OnOpen(late, deadline) | Late::Drive(late, deadline) => {
                    let more = match req.reentrant {
                        true => req.ttl,
                        false => Duration::ZERO,
                    };
                    let until = deadline.deadline() + more;
                    settle_late(
                        self.clone(),
                        req,
                        late,
                        Arc::downgrade(&shared),
                        Some(until),
                    )
                }
            }
            let mut lock = Lock::granted(req, token, start, shared.clone());
            match self.fence(&tally, &mut lock, start, end).await {
                Ok(()) => return Ok(lock),
                Err(e) if lock.unique => {
                    // Nothing of this owner comes after it (a next round
                    // makes its own): given back in the background.
                    lock.shared.let_go();
                    self.release_everywhere_later(req.name, req.owner);
                    return Err(e);
                }
                Err(e) => {
                    let released = Box::pin(self.let_go_within(&lock, self.budget(end))).await;
                    *unsure |= release_timed_out(&released).next().is_some();
                    return Err(e);
                }
            }
        }
        let tally = if req.unique {
            let waited = server_wait.is_some();
            Box::pin(self.give_back_pass(req, round, start, waited, end, unsure)).await
        } else {
            // A grant may have landed even where the reply was lost: release
            // everywhere, after every acquire request has been sent or timed
            // out. Not when every node answered and none granted (held
            // elsewhere, refused): nothing can have landed, and a busy key
            // is the common failure of a try.
            let tally = round.finish().await;
            if req.reentrant {
                // Only where its own hold is confirmed: elsewhere a RELEASE
                // would drop the hold of the handle it re-enters (1033558:
                // a re-entry failing on dead connections freed the lock).
                let held: Vec<usize> = tally.granted().collect();
                if !held.is_empty() {
                    // Never resent: a repeat would drop another hold.
                    let timeout = self.budget(end);
                    let release = self.release_on_nodes(&held, req.name, req.owner, false, timeout);
                    let released = Box::pin(release).await;
                    *unsure |= release_timed_out(&released).next().is_some();
                }
            } else if !(tally.yes.is_empty() && tally.failures.is_empty()) {
                let timeout = self.budget(end);
                let release = self.release_within(req.name, req.owner, false, timeout);
                let released = Box::pin(release).await;
                *unsure |= release_timed_out(&released).next().is_some();
            }
            tally
        };
        Err(match verdict {
            Verdict::Unreachable => self.no_quorum(&tally),
            Verdict::Rejected => self.rejected(&tally),
            _ => Error::Taken,
        })
    }

    /// Let `lock` go and give back what it holds: everywhere, or for a
    /// REENTRANT lock where its own holds are confirmed.
    pub(crate) async fn let_go(&self, lock: &Lock) -> Tally {
        self.let_go_within(lock, self.inner.config.node_timeout)
            .await
    }

    /// `let_go` with a round that ends after `timeout`.
    async fn let_go_within(&self, lock: &Lock, timeout: Duration) -> Tally {
        if lock.reentrant {
            // Also past its validity: a Lock's own estimate is stale when a
            // clone was renewed (an AutoLock's watchdog, e95e3a9). Limit:
            // a handle that re-entered the owner after the lock expired
            // everywhere is not told apart from a live one (README). Never
            // resent: a repeat would drop another handle's hold.
            let held = lock.shared.let_go_holds();
            return self
                .release_on_nodes(&held, lock.name(), lock.owner(), false, timeout)
                .await;
        }
        let taking_back = lock.shared.let_go_taking_back();
        let released = self
            .release_within(lock.name(), lock.owner(), lock.unique, timeout)
            .await;
        taking_back.done(&released);
        released
    }

    /// Give back what a failed pass of an owner made for this call may
    /// hold, without waiting for the nodes still to answer: a try on a busy
    /// name with one server stalled took twice the node timeout (the round
    /// waited for the stalled server, then so did its RELEASE). The nodes
    /// that granted, or whose reply was lost, are released now; the silent
    /// ones in the background, once their reply comes (a grant) or the
    /// round's deadline passes (it may still land): their RELEASE follows
    /// their ACQUIRE on the connection. Only for such an owner: no later
    /// request of it exists for that RELEASE to overtake or take back (the
    /// next pass makes its own, `Request::next_pass`).
    async fn give_back_pass(
        &self,
        req: &Request<'_>,
        mut round: Round,
        start: Instant,
        waited: bool,
        end: Option<Instant>,
        unsure: &mut bool,
    ) -> Tally {
        // The last replies are usually on their way (a busy name under
        // contention): as long again as the verdict took for them, so that
        // a background task is only needed for a server that is slow.
        let grace = start.elapsed().max(HOLDERS_GRACE_MIN).min(self.budget(end));
        let _ = tokio::time::timeout(grace, async { while round.next().await {} }).await;
        let mut later = round.silent();
        let (tally, late) = round.split();
        let late = match late {
            Late::None => None,
            Late::OnOpen(late, deadline) | Late::Drive(late, deadline) => Some((late, deadline)),
        };
        // A node that timed out is as slow to take its RELEASE (5171401:
        // with the verdict at the deadline, a try still took 2 x the node
        // timeout).
        let mut held: Vec<usize> = tally.yes.iter().map(|&(i, _)| i).collect();
        // For a WAIT: the silent ones are in flight, the timed-out lost.
        let mut out = Outstanding::new(self.inner.nodes.len());
        for &i in &later {
            out.queued[i] = true;
        }
        for (i, cause) in &tally.failures {
            if is_timeout(cause) {
                later.push(*i);
                out.lost(*i);
            } else {
                held.push(*i);
            }
        }
        if !later.is_empty() {
            *unsure = true; // its RELEASEs are still to come
            if waited {
                // A WAIT travels on a connection of its own: no RELEASE
                // follows it there, and one that lands late takes the lock
                // for a TTL (22529f6, one server): withdrawn until it
                // answers, as a queued wait's are.
                let late = late.map_or_else(Pending::new, |(late, _)| late);
                let (returns, let_go) = (Pending::new(), Weak::new());
                withdraw_late(self.clone(), req, late, out, returns, let_go);
            } else {
                release_when_answered(self.clone(), req, late, later);
            }
        }
        let timeout = self.inner.config.node_timeout;
        if held.is_empty() {
        } else if self.budget(end) < timeout {
            // Too close to the call's end to wait for: in the background.
            *unsure = true;
            let (locker, name, owner) = (self.clone(), req.name.to_string(), req.owner.to_string());
            BACKGROUND.spawn(async move {
                locker
                    .release_on_nodes(&held, &name, &owner, true, timeout)
                    .await
            });
        } else {
            let released = self
                .release_on_nodes(&held, req.name, req.owner, true, timeout)
                .await;
            *unsure |= release_timed_out(&released).next().is_some();
        }
        tally
    }

    /// Fencing round and validity: raise the granting nodes below the lock's
    /// token (`Tally::quorum_token`) to it until a majority holds at least
    /// it, so that any later majority (which overlaps this one) hands out
    /// larger tokens. Skipped when a majority of grants is already >= it.
    /// `end`: its rounds (fencing, then an extend round) end by then, each
    /// within the node timeout (see `Locker::budget`).
    pub(crate) async fn fence(
        &self,
        grants: &Tally,
        lock: &mut Lock,
        start: Instant,
        end: Option<Instant>,
    ) -> Result<(), Error> {
        let cfg = &self.inner.config;
        if cfg.fencing && !grants.majority_holds(lock.token()) {
            let behind: Vec<usize> = grants
                .yes
                .iter()
                .filter(|&&(_, t)| t < lock.token())
                .map(|&(i, _)| i)
                .collect();
            let at_max = grants.holding(lock.token());
            let mut cmd = lock_cmd("LOCK.FENCE", lock.name(), lock.owner());
            cmd.arg(lock.token());
            let token = lock.token();
            let raised = Box::pin(async {
                let fence_answer = |r| match r {
                    Ok(Value::Int(t)) if t > 0 => Answer::Yes(t as u64),
                    other => code_answer(other),
                };
                let timeout = self.budget(end);
                let round = self.round(&behind, cmd, timeout, fence_answer, true);
                round.await.finish().await
            })
            .await;
            let fenced = at_max + raised.yes.iter().filter(|&&(_, t)| t >= token).count();
            if fenced < quorum::majority(self.inner.nodes.len()) {
                // A refusal (NOPERM on LOCK.FENCE) will not change by
                // retrying: say so. (A token above a lagging node's clock +
                // 120 s is a failure of that node, not a refusal: it passes.)
                if !raised.rejected.is_empty() {
                    return Err(self.rejected(&raised));
                }
                // Only answers, no failures: the grants were gone (expired,
                // released) or taken by the time the FENCE came.
                if raised.failures.is_empty() {
                    return Err(Error::Expired);
                }
                return Err(self.no_quorum(&raised));
            }
        }
        // Every grant came after `start`, so each node's deadline is at least
        // start + ttl. After a server-side WAIT (a hand-off) the grant may
        // have come much later than `start`, and counting from `start` would
        // read a fresh lock as expired: then an extend round restarts the
        // clock from a moment the client knows, its own request.
        match self.valid_until(start, lock.ttl()) {
            Some(until) if until.saturating_duration_since(Instant::now()) >= lock.ttl() / 2 => {
                lock.valid_until = until;
                Ok(())
            }
            _ => Box::pin(self.extend_within(lock, self.budget(end))).await,
        }
    }

    /// The servers' clock at `at` (µs since the epoch), as the nodes read
    /// it when they connected; the client's own clock if none could be
    /// read (`server_clock.rs`).
    pub(crate) fn servers_time(&self, at: Instant) -> u64 {
        let offsets = self.inner.nodes.iter().filter_map(|n| n.clock_offset());
        server_clock::servers_time(offsets, at, quorum::unix_micros())
    }

    /// The time a round may take: the node timeout, cut to what is left
    /// until `end` (a call's deadline plus one node timeout).
    pub(crate) fn budget(&self, end: Option<Instant>) -> Duration {
        let timeout = self.inner.config.node_timeout;
        end.map_or(timeout, |end| {
            timeout.min(end.saturating_duration_since(Instant::now()))
        })
    }

    /// End of validity of grants (or extensions) requested at `start`:
    /// every node's deadline is at least start + ttl; minus the allowance
    /// for clock drift.
    fn valid_until(&self, start: Instant, ttl: Duration) -> Option<Instant> {
        let now = Instant::now();
        quorum::validity(ttl, now - start, self.inner.config.drift_factor).map(|v| now + v)
    }

    pub(crate) fn no_quorum(&self, tally: &Tally) -> Error {
        Error::NoQuorum {
            granted: tally.yes.len(),
            needed: tally.need(),
            failures: tally.failures(&self.inner.names),
        }
    }

    /// `NoQuorum` with one cause for every node: nothing was granted.
    pub(crate) fn every_node_failed(&self, cause: &str) -> Error {
        let failures = self.inner.names.iter().map(|node| NodeFailure {
            node: node.clone(),
            cause: cause.to_string(),
        });
        Error::NoQuorum {
            granted: 0,
            needed: quorum::majority(self.inner.nodes.len()),
            failures: failures.collect(),
        }
    }

    pub(crate) fn rejected(&self, tally: &Tally) -> Error {
        let (node, message) = tally
            .rejected
            .first()
            .map(|(i, m)| (self.inner.names[*i].clone(), m.clone()))
            .unwrap_or_default();
        Error::Rejected { node, message }
    }

    /// Release on every node, waiting for each answer (or its timeout).
    /// `unique`: the owner was made for one call (see `release_on`).
    pub(crate) async fn release_everywhere(&self, name: &str, owner: &str, unique: bool) -> Tally {
        let timeout = self.inner.config.node_timeout;
        self.release_on_nodes(self.all(), name, owner, unique, timeout)
            .await
    }

    /// `release_everywhere` with a round that ends after `timeout`: a
    /// RELEASE still unanswered then leaves its node in doubt (see
    /// `Node::in_doubt`), so that the owner's next call does not overtake it.
    pub(crate) async fn release_within(
        &self,
        name: &str,
        owner: &str,
        unique: bool,
        timeout: Duration,
    ) -> Tally {
        self.release_on_nodes(self.all(), name, owner, unique, timeout)
            .await
    }

    /// `release_everywhere` in the background, counted as clean-up: for an
    /// owner made for one call (its RELEASE may be sent again).
    pub(crate) fn release_everywhere_later(&self, name: &str, owner: &str) {
        let (locker, name, owner) = (self.clone(), name.to_string(), owner.to_string());
        BACKGROUND.spawn(async move { locker.release_everywhere(&name, &owner, true).await });
    }

    /// `LOCK.RELEASE name owner` on `nodes`, every reply waited for (until
    /// `timeout`); `resend`: see `Node::query_shared`.
    async fn release_on_nodes(
        &self,
        nodes: &[usize],
        name: &str,
        owner: &str,
        resend: bool,
        timeout: Duration,
    ) -> Tally {
        let cmd = release_cmd(name, owner);
        let round = self.round(nodes, cmd, timeout, code_answer, resend).await;
        round.finish().await
    }

    /// Resolves once the clean-up the Lockers of this process run in the
    /// background is done: a cancelled or failed acquisition's RELEASEs and
    /// the grants of its requests that land late (given back on arrival),
    /// the unlock of a dropped `AutoLock`. A process about to exit should await it, with a
    /// timeout of its choosing: exiting first can leave what a request
    /// still travelling takes held for its TTL. Usually immediate; it waits
    /// as long as a slow or stalled server keeps a request unanswered.
    ///
    /// ```no_run
    /// # async fn demo(locker: redis_lock_client::Locker) -> Result<(), redis_lock_client::Error> {
    /// use std::time::Duration;
    /// // ... the program's work with `locker` ...
    /// // Before the process exits: let the clean-up finish, for at most 2 s.
    /// let _ = tokio::time::timeout(Duration::from_secs(2), locker.background_done()).await;
    /// # Ok(()) }
    /// ```
    pub async fn background_done(&self) {
        crate::background::background_done().await;
    }

    /// One attempt: no retries, no waiting.
    ///
    /// ```no_run
    /// # async fn demo(locker: redis_lock_client::Locker) -> Result<(), redis_lock_client::Error> {
    /// use redis_lock_client::Error;
    /// match locker.try_lock("lock:job").await {
    ///     Ok(lock) => {
    ///         println!("holding it, fencing token {}", lock.token());
    ///         locker.unlock(&lock).await?;
    ///     }
    ///     Err(Error::Taken) => println!("someone else holds it"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self, name: &str) -> Result<Lock, Error> {
        self.acquire(name, &LockOptions::new()).await
    }

    /// Acquire, retrying until `wait` has passed. See [`Locker::acquire`].
    ///
    /// ```no_run
    /// # async fn demo(locker: redis_lock_client::Locker) -> Result<(), redis_lock_client::Error> {
    /// use std::time::Duration;
    /// // Queued in the servers until the lock is free, for at most 5 s.
    /// let lock = locker.lock("lock:job", Duration::from_secs(5)).await?;
    /// println!("valid for {:?} more", lock.validity());
    /// locker.unlock(&lock).await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self, name: &str, wait: Duration) -> Result<Lock, Error> {
        self.acquire(name, &LockOptions::new().wait(wait)).await
    }

    /// Acquire with per-lock options. The wait is a deadline: rounds go on
    /// (with a random pause between them) until one succeeds or the wait
    /// has passed — at least one round, and at most `retry_count` if one was
    /// set. With a wait the client waits in the servers instead of polling:
    /// `LOCK.ACQUIRE ... WAIT` (FIFO) on a single server, the servers' WAIT
    /// queues under one ticket on several (see `waiting.rs`), unless
    /// `retry_count` was set.
    ///
    /// `Taken`: held by another owner until the wait ran out. `NoQuorum`:
    /// not enough servers answered, even on the last round. `Rejected` and
    /// `Config` come at once: retrying cannot help.
    ///
    /// ```no_run
    /// # async fn demo(locker: redis_lock_client::Locker) -> Result<(), redis_lock_client::Error> {
    /// use redis_lock_client::LockOptions;
    /// use std::time::Duration;
    /// let opts = LockOptions::new().ttl(Duration::from_secs(60)).wait(Duration::from_secs(5));
    /// let lock = locker.acquire("lock:report", &opts).await?;
    /// locker.unlock(&lock).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self, name: &str, opts: &LockOptions) -> Result<Lock, Error> {
        let cfg = &self.inner.config;
        let ttl = opts.checked_ttl(cfg.ttl, cfg.node_timeout)?;
        let generated;
        let owner = match &opts.owner {
            Some(o) => o.as_str(),
            None => {
                generated = random_owner();
                generated.as_str()
            }
        };
        let req = Request {
            name,
            owner,
            ttl,
            reentrant: opts.reentrant,
            hold: opts.hold,
            // A REENTRANT lock's owner is meant to be shared: another handle
            // re-enters it (`owner(held.owner())`), and a background or resent
            // RELEASE of this one would drop that handle's hold (b0d086f:
            // two holders). Only a generated owner nobody re-enters is ours.
            unique: opts.owner.is_none() && !opts.reentrant,
        };
        // Not a setting that cannot work: the call itself was cut off, like
        // an outage, and a retry on a live runtime works.
        let moved = || Err(self.every_node_failed(MOVED));
        on_one_runtime(|| self.acquire_as(&req, opts.wait), moved).await
    }

    async fn acquire_as(&self, req: &Request<'_>, wait: Duration) -> Result<Lock, Error> {
        let cfg = &self.inner.config;
        // A wait too long for the clock (`Duration::MAX`: "forever") is a
        // century: no panic on the addition.
        let now = Instant::now();
        let deadline = now
            .checked_add(wait)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600));
        // A REENTRANT grant through each URL of one server is a hold each,
        // one of them not a vote: refuse such a list, as a queued wait does.
        // Inside the wait: meeting a stopped server takes the node timeout,
        // and a deadline counted from after it let a REENTRANT wait return
        // that long past its bound.
        if req.reentrant && self.inner.nodes.len() > 1 {
            self.meet_every_node().await;
            if let Some(two) = self.two_urls_of_one_server(&[]) {
                return Err(two);
            }
        }
        // With a wait, every round of the call ends by its deadline plus
        // one node timeout (an answer on its way, a fencing or extend
        // round, a failed round's RELEASE; a generated owner's clean-up
        // goes on in the background). Not a single try (no wait): its
        // round may take the node timeout and still need a fencing round
        // and its clean-up, each given the node timeout as before.
        let end = if wait.is_zero() {
            None
        } else {
            deadline.checked_add(cfg.node_timeout)
        };
        // A wait: queue in the servers' WAIT queues (fair, a hand-off per
        // round trip) unless rounds were capped explicitly. One server too:
        // the queued path owns its requests, so a WAIT still travelling when
        // the wait ends or the caller leaves is withdrawn, not granted later.
        // (A wait under a millisecond is a single round: the deadline would
        // pass before the queued requests went out.)
        // Not REENTRANT: a queued wait gives back where its hold is not
        // confirmed too (to withdraw its WAITs), which would drop the hold
        // of the handle it re-enters; a REENTRANT wait polls instead.
        let mut fell_back = false;
        if wait >= Duration::from_millis(1) && cfg.retry_count.is_none() && !req.reentrant {
            let mut fresh = String::new();
            // A free key first, with one plain round as `try_lock` does: a
            // fraction of the cost of queueing (a task, pooled dedicated
            // connections), and the common case; but not on a name a try
            // found held a moment ago (`busy.rs`). It cannot jump the queue:
            // a server answers a plain request for a free key that has
            // waiters with nil, as for a held one. Only for a generated
            // owner, which then queues under a new one: a RELEASE of this
            // round still on its way cannot touch what the queue grants. (A
            // caller's own owner would have to leave such a server out for
            // the whole call, so it queues at once, as before.)
            if req.unique && !self.inner.busy.is_busy(req.name, Instant::now()) {
                let (got, _) = self.try_once(req, None, end).await;
                if matches!(got, Err(Error::Taken)) {
                    self.inner.busy.mark(req.name, Instant::now());
                }
                match got {
                    Ok(lock) => return Ok(lock),
                    Err(e @ (Error::Config(_) | Error::Rejected { .. })) => return Err(e),
                    Err(e) if Instant::now() >= deadline => return Err(e),
                    // A wait is for a busy lock, not an outage (`reachable.rs`).
                    Err(e) => {
                        self.outage(e, end).await?;
                    }
                }
            } else {
                self.majority_reachable().await?;
            }
            // A generated owner queues under a new one, tried or not, and
            // so does every polling round after it (a module from before
            // TICKET): each pass's clean-up, still on its way in the
            // background, must find nothing of a later pass to release
            // (82b79fb: the polling round reused the skipped try's owner,
            // and the refused queue's background RELEASE freed its grant:
            // two holders).
            let queued = req.next_pass(&mut fresh);
            // Boxed: a rare path's large future would size every try_lock's.
            match Box::pin(self.acquire_queued(&queued, deadline)).await {
                // A module from before TICKET (a rolling upgrade): poll.
                Err(Error::Rejected { message, .. })
                    if message.contains("unknown option 'TICKET'") => {}
                other => return other,
            }
            fell_back = true;
        }
        let single = self.inner.nodes.len() == 1;
        let mut rounds = 0u32;
        let mut fresh = String::new();
        loop {
            rounds += 1;
            let pass = match rounds {
                1 if !fell_back => *req,
                _ => req.next_pass(&mut fresh),
            };
            let left = deadline.saturating_duration_since(Instant::now());
            // A WAIT travels on a connection of its own, past a RELEASE of
            // this owner that an earlier call left on the shared one: only
            // for an owner made for this call (1033558: with retry_count,
            // a caller's own owner got two holders that way).
            let server_wait =
                (single && req.unique && !left.is_zero()).then(|| left.min(MAX_SERVER_WAIT));
            let open_before = self.open_connections();
            let (got, unsure) = self.try_once(&pass, server_wait, end).await;
            let err = match got {
                Ok(lock) => return Ok(lock),
                Err(e @ (Error::Config(_) | Error::Rejected { .. })) => return Err(e),
                Err(e) => e,
            };
            // The next request would be a WAIT on a connection of its own,
            // which can overtake a RELEASE still on its way on the shared
            // one; a grant it got could then be freed by that RELEASE.
            // (Without WAIT the next ACQUIRE follows the RELEASE on the
            // shared connection.)
            if unsure && server_wait.is_some() {
                return Err(err);
            }
            // A wait is for a busy lock, not an outage (`reachable.rs`).
            let err = if rounds == 1 && !fell_back && !wait.is_zero() {
                self.outage(err, end).await?
            } else {
                err
            };
            // A first round that found open connections dead (their
            // servers closed them idle, `timeout`, or restarted): a second
            // pass on new ones, also for a try without a wait. A try after
            // an idle spell said NoQuorum ("broken pipe" on every node,
            // 2026-11-28) with every server up. Not a resend of the same
            // ACQUIRE (`Node::query_shared`): a new generated owner, as
            // every polling pass has, and only for such an owner.
            if rounds == 1 && !fell_back && req.unique && self.found_dead(&open_before, &err) {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || cfg.retry_count.is_some_and(|n| rounds >= n) {
                return Err(err);
            }
            // After a server-side wait that ended "busy" there is nothing to
            // pause for; otherwise (contention polled, an outage) pause.
            if !(server_wait.is_some() && matches!(err, Error::Taken)) {
                tokio::time::sleep(self.pause().min(left)).await;
            }
        }
    }

    /// The id of each node's shared connection, if open.
    fn open_connections(&self) -> Vec<Option<usize>> {
        self.inner.nodes.iter().map(|n| n.shared_id()).collect()
    }

    /// Whether `err` is a NoQuorum with a failure on a node whose shared
    /// connection, open before the round (`open_before`), is no longer the
    /// one open: the round found it broken (a clean-up after it may have
    /// opened another).
    fn found_dead(&self, open_before: &[Option<usize>], err: &Error) -> bool {
        let Error::NoQuorum { failures, .. } = err else {
            return false;
        };
        let names = &self.inner.names;
        (self.inner.nodes.iter().enumerate()).any(|(i, node)| {
            open_before[i].is_some()
                && node.shared_id() != open_before[i]
                && failures.iter().any(|f| names.get(i) == Some(&f.node))
        })
    }

    /// One acquisition round (`attempt`), and whether a RELEASE of it timed
    /// out. If the caller drops this future midway, grants may be held on
    /// some servers: they are released in the background, for an owner
    /// made for this call only.
    async fn try_once(
        &self,
        req: &Request<'_>,
        server_wait: Option<Duration>,
        end: Option<Instant>,
    ) -> (Result<Lock, Error>, bool) {
        let mut unsure = false;
        let mut abandoned = Abandoned {
            locker: req.unique.then(|| self.clone()),
            req: *req,
            waited: server_wait.is_some(),
            runtime: crate::one_runtime::here(),
        };
        let got = self.attempt(req, server_wait, end, &mut unsure).await;
        abandoned.locker = None;
        (got, unsure)
    }

    /// Reset the lock's TTL on a majority; updates its validity. `Expired`
    /// once a majority said it is not this owner's; `NoQuorum` when
    /// failures leave that open.
    ///
    /// ```no_run
    /// # async fn demo(locker: redis_lock_client::Locker) -> Result<(), redis_lock_client::Error> {
    /// use redis_lock_client::Error;
    /// let mut lock = locker.try_lock("lock:job").await?;
    /// // ... part of the work ...
    /// match locker.extend(&mut lock).await {
    ///     Ok(()) => println!("valid for {:?} more", lock.validity()),
    ///     Err(Error::Expired) => return Ok(()), // lost: stop touching the resource
    ///     Err(e) => return Err(e),
    /// }
    /// locker.unlock(&lock).await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend(&self, lock: &mut Lock) -> Result<(), Error> {
        self.extend_within(lock, self.inner.config.node_timeout)
            .await
    }

    /// `extend` with a round that ends after `timeout`.
    async fn extend_within(&self, lock: &mut Lock, timeout: Duration) -> Result<(), Error> {
        let start = Instant::now();
        let mut cmd = lock_cmd("LOCK.EXTEND", lock.name(), lock.owner());
        cmd.arg(ms(lock.ttl()));
        let need = lock.hold.need(self.inner.nodes.len());
        let mut round = self
            .round_needing(self.all(), cmd, timeout, code_answer, true, need)
            .await;
        // Fail-fast stops at an acquisition's verdict: an owner's may need
        // more answers (a failure is no "not ours").
        while round.tally.owner_verdict().is_none() && round.next().await {}
        let verdict = round.tally.final_owner_verdict();
        let tally = round.detach(&self.inner.stragglers);
        match verdict {
            Verdict::Quorum => {
                lock.valid_until = self.valid_until(start, lock.ttl()).ok_or(Error::Expired)?;
                Ok(())
            }
            Verdict::Unreachable => Err(self.no_quorum(&tally)),
            Verdict::Rejected => Err(self.rejected(&tally)),
            Verdict::Contended => Err(Error::Expired),
        }
    }

    /// Release on every node. Ok when a majority released it; `Expired` when
    /// it was no longer held on a majority (`NoQuorum` when failures leave
    /// that open).
    ///
    /// ```no_run
    /// # async fn demo(locker: redis_lock_client::Locker) -> Result<(), redis_lock_client::Error> {
    /// let lock = locker.try_lock("lock:job").await?;
    /// // ... the work, passing lock.token() to the resource ...
    /// locker.unlock(&lock).await?;
    /// # Ok(()) }
    /// ```
    pub async fn unlock(&self, lock: &Lock) -> Result<(), Error> {
        let need = lock.hold.need(self.inner.nodes.len());
        let tally = self.let_go(lock).await.needing(need);
        match tally.final_owner_verdict() {
            Verdict::Quorum => Ok(()),
            Verdict::Unreachable => Err(self.no_quorum(&tally)),
            Verdict::Rejected => Err(self.rejected(&tally)),
            Verdict::Contended => Err(Error::Expired),
        }
    }
}

impl Releaser for Locker {
    fn release_on(
        &self,
        i: usize,
        name: &str,
        owner: &str,
        unique: bool,
    ) -> BoxFuture<'static, Reply> {
        let timeout = self.inner.config.node_timeout;
        let cmd = Arc::new(release_cmd(name, owner));
        self.send(i, cmd, Some(timeout), false, unique)
    }

    fn unlock_owned(&self, lock: Lock) -> BoxFuture<'static, ()> {
        let locker = self.clone();
        Box::pin(async move {
            let _ = locker.unlock(&lock).await;
        })
    }

    fn node_timeout(&self) -> Duration {
        self.inner.config.node_timeout
    }
}

#[cfg(test)]
mod tests {
    use super::{ms, wait_ms};
    use std::time::Duration;

    #[test]
    fn a_server_wait_is_rounded_up_to_whole_milliseconds() {
        assert_eq!(wait_ms(Duration::from_micros(199_700)), 200);
        assert_eq!(wait_ms(Duration::from_millis(200)), 200);
        assert_eq!(wait_ms(Duration::from_nanos(1)), 1);
        assert_eq!(wait_ms(Duration::ZERO), 1);
        assert_eq!(wait_ms(Duration::MAX), u64::MAX);
        // A TTL stays rounded down: the client never counts on more than
        // the servers hold.
        assert_eq!(ms(Duration::from_micros(199_700)), 199);
    }
}
