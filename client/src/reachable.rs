//! A wait is for a busy lock, not for an outage. With a majority of the
//! servers refusing connections, `lock(wait=20 s)` retried for the whole
//! 20 s and then said `NoQuorum` (issue 25; redis-py fails at once). So a
//! call with a wait checks, as it begins, that a majority can be reached,
//! and says `NoQuorum` at once (within a node timeout) when not. A server
//! that goes away while the wait runs is retried as before: a majority
//! restarting under a waiter is a pause, and the waiter gets the lock once
//! they are back.

use crate::error::Error;
use crate::locker::Locker;
use crate::node::Failure;
use crate::quorum::{self, Answer, Tally};
use crate::round::Round;
use redis::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Any reply, an error reply too, is a server that can be reached ("busy":
/// counted below, never as a grant, so two URLs of one server are not
/// refused here but where a wait would use them); only a request that got
/// none (refused, timed out, a broken connection) or a server that cannot
/// serve now (`LOADING`, `TRYAGAIN`) counts as not. A server in the restart
/// guard is reached: the guard refuses new locks only, so it answers this
/// probe and a wait waits the guard out (tests/wait_outage.rs).
/// (`LOCK.SERVERID` is also `allow-loading`.)
fn reached(reply: Result<Value, Failure>) -> Answer {
    match reply {
        Ok(_) | Err(Failure::Rejected(_)) => Answer::Busy,
        Err(Failure::Transient(cause)) => Answer::Failed(cause),
    }
}

/// The probe is decided once `needed` servers answered, or so many failed
/// that `needed` cannot answer. A round's own early verdict, which needs
/// grants, decided it as soon as one refusal made them impossible, before
/// the second refusal or a stopped server's timeout was in: one failure of
/// a majority of two read as reachable, and the wait ran to its deadline
/// (2026-11-28).
fn decided(tally: &Tally, needed: usize) -> bool {
    let spare = tally.nodes().saturating_sub(needed);
    tally.busy >= needed || tally.failures.len() > spare
}

impl Locker {
    /// Whether `err` says that more servers failed than the grants it
    /// needed can spare (a majority; all 3 of 3 for a limited shared hold):
    /// no grants could have been enough, busy lock or not.
    pub(crate) fn majority_failed(&self, err: &Error) -> bool {
        let n = self.inner.nodes.len();
        matches!(err, Error::NoQuorum { failures, needed, .. }
            if failures.len() > n.saturating_sub(*needed))
    }

    /// The error a wait gives up with at once: `err` (a first round's) says
    /// a majority failed, and a probe agrees. A round's failures include
    /// connections found dead that the next request reopens: two of three
    /// servers restarted since the Locker last used them (or closing idle
    /// connections, `timeout`) made the first wait after it say `NoQuorum`
    /// with every server up (2026-11-28); so did a majority in the restart
    /// guard (`TRYAGAIN` to the try, an answer to the probe). The probe
    /// ends by `end` (the call's deadline plus one node timeout): a
    /// REENTRANT wait whose first round timed out on a stopped majority
    /// probed for another node timeout and returned 2.3 s after a 0.3 s
    /// wait began (2026-11-28); with no time left the round's failures are
    /// the answer.
    pub(crate) async fn outage(&self, err: Error, end: Option<Instant>) -> Result<Error, Error> {
        let needed = match &err {
            Error::NoQuorum { needed, .. } if self.majority_failed(&err) => *needed,
            _ => return Ok(err),
        };
        let mut timeout = self.inner.config.node_timeout;
        if let Some(end) = end {
            timeout = timeout.min(end.saturating_duration_since(Instant::now()));
        }
        if timeout.is_zero() {
            return Err(err);
        }
        self.reachable_for(needed, timeout).await?;
        Ok(err)
    }

    /// `NoQuorum` (no grants, each unreachable server's cause) unless a
    /// majority of the servers answers a `LOCK.SERVERID` within the node
    /// timeout. One round trip, on the shared connections (opened if
    /// needed); for a wait that starts without a plain try to tell. It
    /// returns once a majority answered (or failed): a stalled server must
    /// not hold up the wait by the node timeout; its request is driven to
    /// its end in the background, as a decided round's are.
    pub(crate) async fn majority_reachable(&self) -> Result<(), Error> {
        let needed = quorum::majority(self.inner.nodes.len());
        self.reachable_for(needed, self.inner.config.node_timeout)
            .await
    }

    /// `majority_reachable` for an acquisition that needs `needed` grants
    /// (a limited shared hold may need every server).
    async fn reachable_for(&self, needed: usize, timeout: Duration) -> Result<(), Error> {
        let nodes = &self.inner.nodes;
        let on_open = nodes.iter().all(|n| n.is_connected());
        let mut round = Round::new(Tally::new(nodes.len()), timeout, reached, on_open);
        // Sent again on a new connection where the cached one is found
        // broken (a server restarted, or closed it idle): harmless, and
        // that server is up.
        let probe = Arc::new(redis::cmd("LOCK.SERVERID"));
        for i in 0..nodes.len() {
            round.push(i, self.send(i, probe.clone(), None, false, true));
        }
        while !decided(&round.tally, needed) && round.next().await {}
        round.take_ready();
        let tally = round.detach(&self.inner.stragglers);
        let err = Error::NoQuorum {
            granted: 0,
            needed,
            failures: tally.failures(&self.inner.names),
        };
        if self.majority_failed(&err) {
            return Err(err);
        }
        Ok(())
    }
}
