//! One round: a command fanned out to the nodes, their replies tallied
//! as they come under one deadline, and what to do with the requests still
//! in flight once the verdict is in.

use crate::node::{timed_out, Failure, Tagged};
use crate::quorum::{Answer, Tally, Verdict};
use crate::server_ids::ServerTag;
use crate::stragglers::Stragglers;
use futures_util::future::{BoxFuture, FutureExt};
use futures_util::stream::StreamExt;
use redis::Value;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::Sleep;

/// A request that produced no reply: worth retrying, or refused for good.
pub(crate) fn failed(e: Failure) -> Answer {
    match e {
        Failure::Transient(cause) => Answer::Failed(cause),
        Failure::Rejected(message) => Answer::Rejected(message),
    }
}

/// Replies of ACQUIRE: the grant's token, or nil (held by another owner).
pub(crate) fn acquire_answer(reply: Result<Value, Failure>) -> Answer {
    match reply {
        Ok(Value::Int(token)) if token > 0 => Answer::Yes(token as u64),
        Ok(Value::Nil) => Answer::Busy,
        Ok(other) => Answer::Failed(format!("unexpected reply {other:?}")),
        Err(e) => failed(e),
    }
}

/// Replies of RELEASE/EXTEND: 1 yes, 0 another owner, -1 not held.
pub(crate) fn code_answer(reply: Result<Value, Failure>) -> Answer {
    match reply {
        Ok(Value::Int(1)) => Answer::Yes(0),
        Ok(Value::Int(0)) => Answer::Busy,
        Ok(Value::Int(-1)) => Answer::Gone,
        Ok(other) => Answer::Failed(format!("unexpected reply {other:?}")),
        Err(e) => failed(e),
    }
}

/// A reply apart from the server that sent it.
pub(crate) fn untag(reply: Result<Tagged, Failure>) -> (Result<Value, Failure>, Option<ServerTag>) {
    match reply {
        Ok((value, server)) => (Ok(value), server),
        Err(e) => (Err(e), None),
    }
}

/// How a round reads one node's reply.
pub(crate) type Classify = fn(Result<Value, Failure>) -> Answer;

/// One node's reply (and the server that sent it), tagged with the node's
/// index.
pub(crate) type Reply = (usize, Result<Tagged, Failure>);

/// Requests in flight, polled on the caller's task: joining the futures
/// costs far less than a spawned task per node per round.
pub(crate) type Pending = crate::pending::Pending<Reply>;

/// A round's answers so far and the requests still in flight, all under
/// one deadline (one timer per round, not one per request).
pub(crate) struct Round {
    pub(crate) tally: Tally,
    pending: Pending,
    classify: Classify,
    /// Which nodes are still to answer.
    waiting: Vec<bool>,
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
    /// The deadline passed: the nodes still silent are tallied as timed
    /// out, and their requests, still on their way, are only kept for
    /// `split` (a REENTRANT grant that lands later is a hold of its own:
    /// dropped here, it stayed a TTL after the unlock, 4dd471c).
    expired: bool,
    /// Every request went out on a shared connection that was already open
    /// when the round began: nothing reaches a node late except through
    /// that connection, ahead of any later request on it (an unlock's
    /// RELEASE), so a straggler needs only to be driven, not settled.
    on_open_connections: bool,
}

impl Round {
    /// A round counting into `tally` (none asked yet) whose requests all
    /// end by `timeout`; `on_open`: see `on_open_connections`.
    pub(crate) fn new(tally: Tally, timeout: Duration, classify: Classify, on_open: bool) -> Round {
        let nodes = tally.nodes();
        Round {
            tally,
            pending: Pending::new(),
            classify,
            waiting: vec![false; nodes],
            deadline: Box::pin(tokio::time::sleep(timeout)),
            timeout,
            expired: false,
            on_open_connections: on_open,
        }
    }

    /// Ask node `i` (its `request` is on its way).
    pub(crate) fn push(&mut self, i: usize, request: BoxFuture<'static, Reply>) {
        self.waiting[i] = true;
        self.pending.push(request);
    }

    /// Tally the next reply; false once every node answered or the deadline
    /// passed (the nodes still silent are then tallied as timed out).
    pub(crate) async fn next(&mut self) -> bool {
        if self.pending.is_empty() || self.expired {
            return false;
        }
        tokio::select! {
            // A reply that is in counts even if the deadline passed too (and
            // no random branch order to draw per poll).
            biased;
            Some((i, reply)) = self.pending.next() => {
                self.record(i, reply);
                true
            }
            _ = &mut self.deadline => {
                for (i, waiting) in self.waiting.iter_mut().enumerate() {
                    if std::mem::take(waiting) {
                        self.tally.add(i, failed(timed_out(self.timeout)));
                    }
                }
                self.expired = true;
                false
            }
        }
    }

    /// Tally the replies that are already in, without waiting: under load
    /// the last node's reply often came with the deciding one, and then
    /// nothing is left in flight to hand over.
    pub(crate) fn take_ready(&mut self) {
        if self.expired {
            return;
        }
        while let Some(Some((i, reply))) = self.pending.next().now_or_never() {
            self.record(i, reply);
        }
    }

    /// Node `i` answered.
    fn record(&mut self, i: usize, reply: Result<Tagged, Failure>) {
        self.waiting[i] = false;
        let (reply, server) = untag(reply);
        self.tally
            .add_from(i, server.as_ref(), (self.classify)(reply));
    }

    /// Wait for the stragglers too (until the round's deadline).
    pub(crate) async fn finish(mut self) -> Tally {
        while self.next().await {}
        self.tally
    }

    /// The verdict is in: let the stragglers complete in the background
    /// (until the round's deadline).
    pub(crate) fn detach(self, stragglers: &Stragglers<Reply>) -> Tally {
        let (tally, late) = self.split();
        if let Late::OnOpen(pending, deadline) | Late::Drive(pending, deadline) = late {
            stragglers.drive(deadline, pending);
        }
        tally
    }

    /// The nodes still to answer.
    pub(crate) fn silent(&self) -> Vec<usize> {
        let waiting = self.waiting.iter().enumerate();
        waiting.filter(|&(_, &w)| w).map(|(i, _)| i).collect()
    }

    /// The answers so far, and the requests still in flight.
    pub(crate) fn split(self) -> (Tally, Late) {
        let late = if self.pending.is_empty() {
            Late::None
        } else if self.on_open_connections {
            Late::OnOpen(self.pending, self.deadline)
        } else {
            Late::Drive(self.pending, self.deadline)
        };
        (self.tally, late)
    }

    /// A won acquisition's `token` must be held by a majority before the
    /// lock is returned; where the first grants disagree, a fencing round
    /// raises the others, a round trip more. But the requests still in
    /// flight were sent with the others, and under concurrency their grants
    /// often are at the token already (requests of different locks reach
    /// the nodes in different orders, and each node's counter is shared by
    /// all names, so one lock's grants differ by the other's). Wait for
    /// them at most `grace`, then let the fencing round do the rest. The
    /// token stays what the first grants made it: a later grant only counts
    /// toward the majority holding it (taking the majority-th smallest of
    /// all grants instead would favour exactly the nodes whose counters lag,
    /// e.g. one restarted with its clock set back).
    pub(crate) async fn await_holders(&mut self, token: u64, grace: Duration) {
        if self.tally.majority_holds(token) || self.pending.is_empty() {
            return;
        }
        let held = async { while !self.tally.majority_holds(token) && self.next().await {} };
        let _ = tokio::time::timeout(grace, held).await;
    }

    pub(crate) fn verdict(&self) -> Verdict {
        self.tally
            .early()
            .unwrap_or_else(|| self.tally.final_verdict())
    }
}

/// The requests of a decided round still in flight.
pub(crate) enum Late {
    None,
    /// Each went out on a connection that was open: nothing to settle, only
    /// to drive until sent and answered (the Locker's straggler task), at
    /// most until the round's deadline (its timer goes along: no new one).
    OnOpen(Pending, Pin<Box<Sleep>>),
    /// Some were still connecting: drive them until that deadline.
    Drive(Pending, Pin<Box<Sleep>>),
}
