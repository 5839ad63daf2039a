//! Fair waiting on a quorum. `lock()` with a wait on two or more servers
//! queues in every server's WAIT queue at once, under one *ticket* (the
//! client's clock when the call began). Each server serves its queue in
//! ticket order, so when a holder releases, every server hands the lock to
//! the same waiter: a hand-off costs one round trip, not a polling sleep.
//!
//! Grants can still split: requests racing to the servers, or a waiter
//! whose request reached one server late. A waiter that holds grants but no
//! majority gives them back after a hold-out and queues again under the same
//! ticket, so it keeps its place. The hold-out grows with the time already
//! waited: younger waiters give back first, and what they give goes to the
//! head of each queue, the oldest waiter, which reaches a majority. It is
//! also drawn at random between one and two times that: two waiters that
//! split the grants and have waited as long would otherwise give back at
//! the same instant, each handing its grant to the other, and swap them in
//! lockstep until their waits end. With the random factor, one of them
//! gives back a round trip before the other with a probability that only
//! grows round after round, and the other then holds a majority.
//!
//! Safety does not depend on any of this: a waiter holds the lock only with
//! grants from a majority, exactly as in a polling round.

use crate::error::Error;
use crate::let_go::{
    mark_unsure, settle_late, withdraw_late, Outstanding, Releaser, UnlockOnDrop, UNSURE,
};
use crate::lock::{Lock, Shared};
use crate::locker::{lock_cmd, ms, wait_ms, Locker, MAX_SERVER_WAIT, WAIT_SLACK};
use crate::node::{is_timeout, Failure};
use crate::one_runtime;
use crate::quorum::{self, Answer, Tally};
use crate::request::Request;
use crate::round::{acquire_answer, untag, Pending, Reply};
use crate::server_ids::ServerTag;
use futures_util::future::BoxFuture;
use futures_util::stream::StreamExt;
use rand::RngExt;
use redis::Cmd;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::runtime::Handle;

/// Shortest hold-out of a minority of grants before giving them back: well
/// above a local round trip, so that the grants of one hand-off (which leave
/// the servers together) have all arrived.
const HOLDOUT_BASE: Duration = Duration::from_millis(2);
/// Least time the nodes not yet met get once a majority is (see
/// `meet_every_node`): well above a local connect and round trip, also on
/// a loaded machine (at 5 ms a connection through a local proxy missed it
/// there now and then, and the WAIT went out before the alias was known);
/// only a new Locker's first wait with a stalled server pays it.
const MEET_GRACE_MIN: Duration = Duration::from_millis(50);
/// Longest a queued wait waits for servers' clocks read again (see
/// `Locker::fresh_clocks`).
const CLOCK_READ_FOR: Duration = Duration::from_millis(100);
/// Longest hold-out before the random factor: a waiter that waited long
/// still gives back within twice this.
const HOLDOUT_MAX: Duration = Duration::from_millis(250);

/// How long a waiter that has waited `waited` keeps a minority of grants,
/// with `rtt` the quickest round trip it saw to a server and `spread` a
/// random number in [0, 1): at least twice the round trip (the grants of a
/// hand-off all arrive) plus a quarter of the wait, capped, then stretched
/// by 1 + `spread` so that two waiters on the same schedule fall out of it.
pub(crate) fn holdout(waited: Duration, rtt: Duration, spread: f64) -> Duration {
    let base = HOLDOUT_BASE.max(rtt * 2);
    let plain = (base + waited / 4).min(HOLDOUT_MAX.max(base));
    plain.mul_f64(1.0 + spread.clamp(0.0, 1.0))
}

/// One server's part in a queued acquisition.
#[derive(Debug, Clone)]
enum Slot {
    /// A WAIT request is in flight since then.
    Queued(Instant),
    /// Granted this token to a request sent then (its deadline is at least
    /// that instant + ttl).
    Granted(u64, Instant),
    /// A grant being given back; queued again once the server confirms.
    Returning,
    /// Asked again at that instant (after a failure or an early nil).
    Retry(Instant),
    /// Not asked yet: something this owner gave up on may still be on its
    /// way on the node's shared connection (see `Locker::drain`).
    Draining,
    /// Done without a grant: the wait ran out (`None`) or the server failed
    /// or refused (the answer).
    Out(Option<Answer>),
}

/// Which servers still have a WAIT of this acquisition out.
fn still_queued(slots: &[Slot]) -> Vec<bool> {
    slots.iter().map(|s| matches!(s, Slot::Queued(_))).collect()
}

/// What a queued pass has out on the servers, while it runs on the
/// caller's task. Dropped armed (the caller gave up, or the pass failed),
/// it leaves nothing behind for an owner made for this call: a RELEASE
/// everywhere, and the requests still out go to `withdraw_late`, all in the
/// background. A caller's own owner is left alone (see `acquire_queued`).
struct InFlight<'a> {
    locker: &'a Locker,
    req: Request<'a>,
    slots: Vec<Slot>,
    /// Servers where a WAIT of this pass failed (timed out, its
    /// connection broke): it may still be granted there, as well as the
    /// WAIT sent after it (see `withdraw_late`); `queued` is filled from
    /// `slots` when the pass hands over.
    failed: Outstanding,
    acquires: Pending,
    /// Give-backs (RELEASEs) of a minority of grants.
    returns: Pending,
    armed: bool,
    /// The runtime its requests' timers and connections belong to.
    runtime: Option<Handle>,
}

impl<'a> InFlight<'a> {
    fn new(locker: &'a Locker, req: &Request<'a>, slots: Vec<Slot>) -> InFlight<'a> {
        InFlight {
            locker,
            req: *req,
            failed: Outstanding::new(slots.len()),
            slots,
            acquires: Pending::new(),
            returns: Pending::new(),
            armed: true,
            runtime: one_runtime::here(),
        }
    }

    /// The pass won: its state, for the lock to carry on with.
    fn disarm(mut self) -> (Vec<Slot>, Outstanding, Pending, Pending) {
        self.armed = false;
        let (outstanding, acquires, returns) = self.hand_over();
        (
            std::mem::take(&mut self.slots),
            outstanding,
            acquires,
            returns,
        )
    }

    /// What may still reach the servers (the WAITs still out, and those
    /// that failed) and the requests in flight, for `withdraw_late`.
    fn hand_over(&mut self) -> (Outstanding, Pending, Pending) {
        let mut outstanding = std::mem::take(&mut self.failed);
        outstanding.queued = still_queued(&self.slots);
        let acquires = std::mem::replace(&mut self.acquires, Pending::new());
        let returns = std::mem::replace(&mut self.returns, Pending::new());
        (outstanding, acquires, returns)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.armed || !self.req.unique {
            return;
        }
        let locker = self.locker.clone();
        let req = self.req.to_owned();
        let (outstanding, acquires, returns) = self.hand_over();
        one_runtime::clean_up_on(&self.runtime, move || {
            let req = req.get();
            locker.release_everywhere_later(req.name, req.owner);
            let let_go = Weak::new();
            withdraw_late(locker, &req, acquires, outstanding, returns, let_go);
        });
    }
}

impl Locker {
    fn queue_request(&self, req: &Request<'_>, ticket: u64, deadline: Instant) -> (Cmd, Duration) {
        // A longer wait than the server takes is cut to its maximum; at its
        // end the server says "busy" early and the request is sent again.
        let left = deadline
            .saturating_duration_since(Instant::now())
            .min(MAX_SERVER_WAIT);
        let mut cmd = lock_cmd("LOCK.ACQUIRE", req.name, req.owner);
        cmd.arg(ms(req.ttl));
        req.hold.args(&mut cmd);
        cmd.arg("WAIT").arg(wait_ms(left)).arg("TICKET").arg(ticket);
        if req.reentrant {
            cmd.arg("REENTRANT");
        }
        cmd.arg("MINTOKEN")
            .arg(quorum::token_floor(self.servers_time(Instant::now())));
        // A late "busy" is busy, not an outage.
        (cmd, left + self.inner.config.node_timeout + WAIT_SLACK)
    }

    /// Acquire on two or more servers by queuing in their WAIT queues (see
    /// the module comment). Ends with the lock, `Taken` at the deadline,
    /// `NoQuorum` when too many servers failed, `Rejected` at once.
    ///
    /// Runs on the caller's task (a task of its own cost a spawn and a hop
    /// per hand-off). If the caller drops this future, what it has out on
    /// the servers goes to the background on the runtime the call runs on
    /// (`InFlight`, `UnlockOnDrop`): for an owner
    /// made for this call, a RELEASE everywhere, then any grant still on
    /// its way is released on arrival, as when the wait runs out. Dropping
    /// the requests instead would leave a WAIT that was still travelling to
    /// a server to be queued, and later granted, after the release. A
    /// caller's own owner is left alone once its call is over (a newer call
    /// of that owner may be holding the lock by then): what it was granted
    /// expires with its TTL.
    pub(crate) async fn acquire_queued(
        &self,
        req: &Request<'_>,
        deadline: Instant,
    ) -> Result<Lock, Error> {
        let called = Instant::now();
        // Past the wait's deadline only for replies already on their way:
        // the call ends by its deadline plus one node timeout, whatever
        // rounds a won lock still needs (fencing, an extend round) or a
        // failed one (its RELEASE).
        let end = deadline.checked_add(self.inner.config.node_timeout);
        // Servers a RELEASE of this call got no definite reply from: that
        // RELEASE may still be on its way, on the shared connection, while
        // a new WAIT travels on a dedicated one and can overtake it. A grant
        // counted there could be freed by the late RELEASE, so they are left
        // out for the rest of this call.
        let mut unsure = vec![false; self.inner.nodes.len()];
        self.meet_every_node().await;
        if let Some(two) = self.two_urls_of_one_server(&[]) {
            return Err(two);
        }
        // The same ticket on every server gives every queue the same order;
        // kept across attempts, so a retry keeps its place. On the servers'
        // clock, read as the nodes connected, so that the client's own
        // clock does not decide who is served (`server_clock.rs`).
        self.fresh_clocks().await;
        let ticket = self.servers_time(called);
        // For a caller's own owner: the nodes to drain before their first
        // WAIT, drained in the first pass while the others are asked.
        let mut doubtful: Vec<bool> = (self.inner.nodes.iter())
            .map(|n| !req.unique && n.in_doubt())
            .collect();
        let mut fresh = String::new();
        let mut pass = 0u32;
        loop {
            pass += 1;
            // A generated owner is new for every pass (see next_pass).
            let req = match pass {
                1 => *req,
                _ => req.next_pass(&mut fresh),
            };
            let drain = std::mem::take(&mut doubtful);
            match self
                .queue_once(&req, ticket, called, (deadline, end), &drain, &mut unsure)
                .await
            {
                // A majority granted but could not be fenced or kept valid
                // (an outage, a node's clock far off): pause, then queue
                // again while the wait lasts.
                Err(e @ (Error::NoQuorum { .. } | Error::Expired)) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    // Without the unsure servers no majority is possible
                    // for the rest of this call: say so now.
                    let usable = unsure.iter().filter(|&&u| !u).count();
                    if left.is_zero() || usable < req.hold.need(unsure.len()) {
                        return Err(e);
                    }
                    tokio::time::sleep(self.pause().min(left)).await;
                }
                other => return other,
            }
        }
    }

    /// One pass of a queued acquisition, until `deadline` (its replies
    /// until `end` at the latest). `drain`: nodes to drain first (empty: none).
    async fn queue_once(
        &self,
        req: &Request<'_>,
        ticket: u64,
        called: Instant,
        (deadline, end): (Instant, Option<Instant>),
        drain: &[bool],
        unsure: &mut [bool],
    ) -> Result<Lock, Error> {
        let cfg = &self.inner.config;
        let n = self.inner.nodes.len();
        let need = req.hold.need(n);
        let began = Instant::now();
        let draining = |i: usize| drain.get(i).copied().unwrap_or(false);
        let slots: Vec<Slot> = (unsure.iter().enumerate())
            .map(|(i, &unsure)| {
                if unsure {
                    Slot::Out(Some(Answer::Failed(UNSURE.into())))
                } else if draining(i) {
                    Slot::Draining
                } else {
                    Slot::Retry(began)
                }
            })
            .collect();
        // On each node in doubt, a `LOCK.SERVERID` on the shared connection
        // before the first WAIT (see `Locker::drain`). The other nodes are
        // asked meanwhile: a drain waited for first took up to the node
        // timeout out of the wait (a 100 ms wait after an unlock that
        // stalled on one server of three said `NoQuorum` after 1 s for a
        // free name, 2026-11-28).
        let mut drains = Pending::new();
        for (i, slot) in slots.iter().enumerate() {
            if matches!(slot, Slot::Draining) {
                drains.push(self.drain(i, end));
            }
        }
        // Each server's last failure, for the error if the wait runs out.
        let mut causes: Vec<Option<String>> = vec![None; n];
        // Servers sent a request of this pass.
        let mut asked = vec![false; n];
        // The server each URL answered from; two URLs of one server end
        // the wait (see `two_urls_of_one_server`).
        let mut servers: Vec<Option<ServerTag>> = vec![None; n];
        let mut two_urls = None;
        let mut out = InFlight::new(self, req, slots);
        let mut holdout_at: Option<Instant> = None;
        // The quickest reply to a request of this acquisition: a bound on
        // the round trip to the nearest server (zero until one came).
        let mut rtt: Option<Duration> = None;
        // Waiting past the deadline only for replies already on their way;
        // a pass that began after the deadline (a short wait, a busy
        // runtime) still waits as long for the replies to its first
        // requests, within the call's end.
        let hard_stop = deadline.max(began) + cfg.node_timeout.min(WAIT_SLACK);
        let hard_stop = end.map_or(hard_stop, |end| hard_stop.min(end));

        let outcome = loop {
            let now = Instant::now();
            // (Re)send the requests that are due. Each server gets a first
            // request even if the deadline passed before it could go (as a
            // 1 ms WAIT): a short wait whose pass started late (a busy
            // runtime) must still see a free name as free (b10a186: 1 ms
            // waits skipped the try on a name busy a moment before, sent
            // nothing and said `Taken`).
            for (i, slot) in out.slots.iter_mut().enumerate() {
                if let Slot::Retry(at) = *slot {
                    if now >= deadline && asked[i] {
                        // Out: failed if its last reply was a failure.
                        *slot = Slot::Out(causes[i].take().map(Answer::Failed));
                    } else if now >= at || !asked[i] {
                        asked[i] = true;
                        let (cmd, timeout) = self.queue_request(req, ticket, deadline);
                        out.acquires
                            .push(self.send(i, Arc::new(cmd), Some(timeout), true, false));
                        *slot = Slot::Queued(now);
                    }
                }
            }
            let granted = out
                .slots
                .iter()
                .filter(|s| matches!(s, Slot::Granted(..)))
                .count();
            if granted >= need {
                break Ok(());
            }
            let refused = out
                .slots
                .iter()
                .filter(|s| matches!(s, Slot::Out(Some(Answer::Rejected(_)))))
                .count();
            let open = out
                .slots
                .iter()
                .filter(|s| !matches!(s, Slot::Out(_)))
                .count();
            if refused > n - need || open < need || now >= hard_stop {
                break Err(());
            }
            if granted == 0 {
                holdout_at = None;
            } else if holdout_at.is_none() {
                let spread = rand::rng().random::<f64>();
                holdout_at = Some(now + holdout(now - called, rtt.unwrap_or_default(), spread));
            }
            let next_retry = out
                .slots
                .iter()
                .filter_map(|s| match s {
                    Slot::Retry(at) => Some((*at).min(deadline)),
                    _ => None,
                })
                .min();
            let wake = [Some(hard_stop), holdout_at, next_retry]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(hard_stop);
            tokio::select! {
                Some((i, reply)) = out.acquires.next(), if !out.acquires.is_empty() => {
                    let sent = match out.slots[i] { Slot::Queued(at) => at, _ => now };
                    let now = Instant::now();
                    rtt = Some(rtt.map_or(now - sent, |r| r.min(now - sent)));
                    let (reply, server) = untag(reply);
                    servers[i] = server;
                    if let Some(two) = self.two_urls_of_one_server(&servers) {
                        two_urls = Some(two);
                        break Err(());
                    }
                    let answer = acquire_answer(reply);
                    if !matches!(answer, Answer::Failed(_)) {
                        causes[i] = None;
                    }
                    out.slots[i] = match answer {
                        Answer::Yes(token) => Slot::Granted(token, sent),
                        // Nil before the deadline: the wait was cut short
                        // (CLIENT UNBLOCK, an operator): queue again.
                        Answer::Busy if now + Duration::from_millis(5) < deadline => {
                            Slot::Retry(now + self.pause())
                        }
                        Answer::Busy => Slot::Out(None),
                        Answer::Failed(cause) if now < deadline => {
                            out.failed.failed(i, &cause);
                            causes[i] = Some(cause);
                            Slot::Retry(now + self.pause())
                        }
                        other => Slot::Out(Some(other)),
                    };
                }
                Some((i, reply)) = drains.next(), if !drains.is_empty() => {
                    // Answered: everything sent before it on that
                    // connection has been served. Timed out: it may still
                    // arrive, as a RELEASE of this call's may.
                    out.slots[i] = match reply {
                        Err(Failure::Transient(cause)) if is_timeout(&cause) => {
                            unsure[i] = true;
                            Slot::Out(Some(Answer::Failed(UNSURE.into())))
                        }
                        _ => Slot::Retry(Instant::now()),
                    };
                }
                Some((i, reply)) = out.returns.next(), if !out.returns.is_empty() => {
                    // Queue again only after the server confirmed the give
                    // back. A RELEASE that timed out may still arrive later
                    // and free a grant we would count again: leave that
                    // server out of this acquisition.
                    out.slots[i] = match reply.map_err(crate::round::failed) {
                        Ok(_) => Slot::Retry(Instant::now()),
                        Err(Answer::Failed(cause)) if is_timeout(&cause) => {
                            unsure[i] = true;
                            Slot::Out(Some(Answer::Failed(UNSURE.into())))
                        }
                        Err(other) => Slot::Out(Some(other)),
                    };
                }
                _ = tokio::time::sleep_until(wake.into()) => {
                    if holdout_at.is_some_and(|at| Instant::now() >= at) {
                        holdout_at = None;
                        for (i, slot) in out.slots.iter_mut().enumerate() {
                            if matches!(slot, Slot::Granted(..)) {
                                *slot = Slot::Returning;
                                out.returns.push(self.release_on(i, req.name, req.owner, req.unique));
                            }
                        }
                    }
                }
            }
        };

        if outcome.is_err() {
            let failure = match two_urls {
                Some(two) => two,
                None => {
                    let ran_out = Instant::now() >= hard_stop;
                    self.queued_failure(&out.slots, causes, ran_out, need)
                }
            };
            if req.unique {
                // RELEASE everywhere gives back grants and withdraws our
                // requests still queued; the rest is withdrawn later. All
                // in the background (the guard's drop): no later request
                // of this owner exists for it to overtake (a pass after
                // this makes its own), and a stalled server held the
                // caller past its deadline by the node timeout (5171401:
                // --wait 300ms returned after 800 ms).
                drop(out);
            } else {
                let timeout = self.budget(end);
                let released = self
                    .release_within(req.name, req.owner, req.unique, timeout)
                    .await;
                mark_unsure(unsure, &released);
            }
            return Err(failure);
        }
        let (slots, outstanding, acquires, returns) = out.disarm();
        let shared = Arc::new(Shared::default());

        let mut tally = Tally::new(n);
        let mut start = Instant::now();
        for (i, slot) in slots.iter().enumerate() {
            if let Slot::Granted(token, sent) = *slot {
                tally.add(i, Answer::Yes(token));
                start = start.min(sent);
            }
        }
        let mut lock = Lock::granted(req, tally.quorum_token(), start, shared.clone());
        // Requests still out: a WAIT queued where the lock was not granted
        // is withdrawn once the lock is let go (see withdraw_late).
        if req.unique {
            let held = Arc::downgrade(&shared);
            withdraw_late(self.clone(), req, acquires, outstanding, returns, held);
        } else {
            let mut late = acquires;
            late.append(returns);
            settle_late(self.clone(), req, late, Arc::downgrade(&shared), None);
        }
        let won = UnlockOnDrop::new(self, &lock);
        let fenced = self.fence(&tally, &mut lock, start, end).await;
        if let Err(e) = fenced {
            shared.let_go();
            if req.unique {
                // Nothing of this owner comes after it (a next pass makes
                // its own): given back in the background, past the end.
                self.release_everywhere_later(req.name, req.owner);
            } else {
                let timeout = self.budget(end);
                let released = self
                    .release_within(req.name, req.owner, req.unique, timeout)
                    .await;
                mark_unsure(unsure, &released);
            }
            won.disarm();
            return Err(e);
        }
        won.disarm();
        Ok(lock)
    }

    /// Two URLs that reached one server, as a `Config` error: by the
    /// server each URL answered from in this wait (`answered`), or by the
    /// one its connections reached last. A queued wait refuses them: it
    /// cannot order requests that travel to one server on two connections,
    /// and a give-back (RELEASE) still on its way through one URL freed the
    /// grant just made through the other, which the server then handed on
    /// while the wait counted it (two holders; attack runs, 890e3bc and
    /// 341824d). Polling rounds count such a server once instead.
    pub(crate) fn two_urls_of_one_server(&self, answered: &[Option<ServerTag>]) -> Option<Error> {
        let servers: Vec<Option<ServerTag>> = (0..self.inner.nodes.len())
            .map(|i| {
                let seen = answered.get(i).cloned().flatten();
                seen.or_else(|| self.inner.nodes[i].known_server())
            })
            .collect();
        let reached = || {
            servers
                .iter()
                .enumerate()
                .filter_map(|(i, s)| Some((i, s.as_ref()?)))
        };
        // Compared now, through the restart links known now (not when each
        // reply came: a link made since joins them, bb86c59).
        for (j, a) in reached() {
            if let Some(i) = self.inner.same.other_path(j, a, reached()) {
                let names = &self.inner.names;
                return Some(Error::Config(format!(
                    "servers {} and {} reach the same server (run_id/db {a}): \
                     list each server once (a wait through the servers' queues \
                     and a REENTRANT lock refuse it; other calls count it once)",
                    names[j], names[i]
                )));
            }
        }
        None
    }

    /// Before the first WAIT of a caller's own owner: an earlier call of
    /// that owner may have left a RELEASE on its way on a node's shared
    /// connection (it timed out there, so the call could not wait for it).
    /// Our WAITs travel on connections of their own and could overtake it;
    /// landing after our grant, it would free it (b0d086f: two holders).
    /// So on each node where something given up may still be on its way
    /// (`Node::in_doubt`; usually none), a `LOCK.SERVERID` on the shared
    /// connection, answered only after everything sent before it there,
    /// goes before the first WAIT; a node that does not answer in time is
    /// left out of this call, like one whose RELEASE of this call timed
    /// out. (A generated owner is new for every call.)
    fn drain(&self, i: usize, end: Option<Instant>) -> BoxFuture<'static, Reply> {
        let cmd = Arc::new(redis::cmd("LOCK.SERVERID"));
        self.send(i, cmd, Some(self.budget(end)), false, false)
    }

    /// Connect to every node not yet connected, so that two URLs of one
    /// server are refused before any WAIT is sent: a WAIT of the caller's
    /// own owner still travelling when the wait is refused would be granted
    /// after the clean-up and hold that server for its TTL (269c0e3).
    /// Once a majority of the nodes is met (or failed), the rest get as long
    /// again (at least `MEET_GRACE_MIN`): a stalled server must not hold up
    /// every wait of a new Locker by the node timeout. A node not met by
    /// then is checked by its first reply.
    pub(crate) async fn meet_every_node(&self) {
        let nodes = &self.inner.nodes;
        if nodes.iter().all(|n| n.is_met()) {
            return;
        }
        let started = Instant::now();
        let mut cutoff = started + self.inner.config.node_timeout;
        let mut meets: futures_util::stream::FuturesUnordered<_> =
            nodes.iter().map(|n| n.meet()).collect();
        let mut met = 0;
        loop {
            tokio::select! {
                done = meets.next() => {
                    if done.is_none() {
                        return;
                    }
                    met += 1;
                    if met == quorum::majority(nodes.len()) {
                        let grace = started.elapsed().max(MEET_GRACE_MIN);
                        cutoff = cutoff.min(Instant::now() + grace);
                    }
                }
                _ = tokio::time::sleep_until(cutoff.into()) => return,
            }
        }
    }

    /// Read again the clocks of the nodes whose reading is old or from
    /// before the machine slept (`ServerClock::stale`; usually none), for
    /// at most `CLOCK_READ_FOR`: a node that does not answer by then keeps
    /// its reading.
    async fn fresh_clocks(&self) {
        let stale = self.inner.nodes.iter().filter(|n| n.clock_stale());
        let reads: Vec<_> = stale.map(|n| n.read_clock_again()).collect();
        if reads.is_empty() {
            return;
        }
        let limit = CLOCK_READ_FOR.min(self.inner.config.node_timeout);
        let _ = tokio::time::timeout(limit, futures_util::future::join_all(reads)).await;
    }

    pub(crate) fn pause(&self) -> Duration {
        let (lo, hi) = self.inner.config.retry_delay;
        rand::rng().random_range(lo..=hi)
    }

    /// The error of a queued acquisition that ended without a majority.
    /// `ran_out`: it ended at its hard stop, past the time every server
    /// still waiting had to answer (else it ended as soon as a majority was
    /// out of reach).
    fn queued_failure(
        &self,
        slots: &[Slot],
        causes: Vec<Option<String>>,
        ran_out: bool,
        need: usize,
    ) -> Error {
        let mut tally = Tally::new(slots.len()).needing(need);
        for ((i, slot), cause) in slots.iter().enumerate().zip(causes) {
            let answer = match (slot, cause) {
                (Slot::Out(Some(answer)), _) => answer.clone(),
                (Slot::Granted(..), _) => Answer::Yes(0),
                // The server answered "busy" last time, even if it failed before.
                (Slot::Out(None), _) => Answer::Busy,
                (_, Some(cause)) => Answer::Failed(cause),
                // Still waiting in that server's queue when the wait ended
                // early: another owner holds it there. Counted as no reply,
                // one server down and the lock held elsewhere read as
                // `NoQuorum` (the CLI's 69, not 75: fc4d3a1).
                (Slot::Queued(_), None) if !ran_out => Answer::Busy,
                _ => Answer::Failed(no_reply(self.inner.nodes[i].opening())),
            };
            tally.add(i, answer);
        }
        match tally.final_verdict() {
            quorum::Verdict::Rejected => self.rejected(&tally),
            quorum::Verdict::Unreachable => self.no_quorum(&tally),
            _ => Error::Taken,
        }
    }
}

/// Why a server in a wait that ran out counts as not answering, and
/// whether a connection to it was still opening then: the request on it
/// never left. 800 waits at once with `wait` 50 ms on 3 local servers
/// opened a connection each to every server and ended so, the servers
/// idle (2026-11-29); a stalled server ends so too. Still no quorum
/// (nothing was learnt from that server), but the cause tells a client
/// that could not connect in time from a server that did not reply.
fn no_reply(opening: usize) -> String {
    match opening {
        0 => "no reply before the wait ran out".into(),
        1 => "no reply before the wait ran out (a connection to it still opening)".into(),
        n => format!("no reply before the wait ran out ({n} connections to it still opening)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_that_ran_out_while_connecting_says_so() {
        assert_eq!(no_reply(0), "no reply before the wait ran out");
        assert!(no_reply(1).ends_with("(a connection to it still opening)"));
        assert!(no_reply(800).ends_with("(800 connections to it still opening)"));
    }

    #[test]
    fn holdout_grows_with_the_wait_and_is_capped() {
        let local = Duration::from_micros(100);
        let h = |waited_ms| holdout(Duration::from_millis(waited_ms), local, 0.0);
        assert_eq!(h(0), HOLDOUT_BASE);
        assert!(h(40) > h(4));
        assert_eq!(h(60_000), HOLDOUT_MAX);
        assert_eq!(
            holdout(Duration::from_secs(60), local, 0.999),
            HOLDOUT_MAX.mul_f64(1.999)
        );
    }

    #[test]
    fn holdout_covers_the_round_trip() {
        // Far servers: a hand-off's grants arrive a round trip apart.
        let rtt = Duration::from_millis(30);
        assert_eq!(holdout(Duration::ZERO, rtt, 0.0), rtt * 2);
        // A round trip beyond the cap still gets it.
        let slow = Duration::from_millis(400);
        assert_eq!(holdout(Duration::from_secs(9), slow, 0.0), slow * 2);
    }

    #[test]
    fn waiters_on_the_same_schedule_fall_out_of_it() {
        // Two waiters at the cap, as in the lockstep the attack run found:
        // their give-backs must usually be more than a round trip apart.
        let mut rng = rand::rng();
        let waited = Duration::from_secs(5);
        let rtt = Duration::from_millis(1);
        let apart = (0..1000)
            .filter(|_| {
                let a = holdout(waited, rtt, rng.random());
                let b = holdout(waited, rtt, rng.random());
                a.abs_diff(b) > rtt * 2
            })
            .count();
        assert!(apart > 950, "{apart} of 1000 pairs apart");
    }
}
