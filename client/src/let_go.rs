//! Letting go without leaving anything behind on the servers: the late
//! replies of a won or failed acquisition (`settle_late`,
//! `release_when_answered`), and of a queued one (waiting.rs): the caller's
//! cancellation, servers whose RELEASE may still be on its way, and WAITs
//! that reach a server after the RELEASE that should have withdrawn them.

use crate::background::{Counted, BACKGROUND};
use crate::lock::{Lock, Shared, TakenBack};
use crate::node::is_timeout;
use crate::one_runtime;
use crate::quorum::{Answer, Tally};
use crate::request::Request;
use crate::round::{acquire_answer, untag, Pending, Reply};
use futures_util::future::BoxFuture;
use futures_util::stream::StreamExt;
use std::pin::Pin;
use std::sync::Weak;
use std::time::{Duration, Instant};
use tokio::runtime::Handle;
use tokio::time::Sleep;

/// What letting go asks of the Locker (`locker.rs` implements it): a
/// RELEASE to one server, an unlock, the node timeout. A trait, so that
/// this file, which the Locker calls, does not call back into it.
pub(crate) trait Releaser: Clone + Send + Sync + 'static {
    /// `LOCK.RELEASE` on server `i` alone, with the node timeout. `unique`:
    /// the owner was made for one call (its RELEASE may be sent again).
    fn release_on(
        &self,
        i: usize,
        name: &str,
        owner: &str,
        unique: bool,
    ) -> BoxFuture<'static, Reply>;
    /// Unlock `lock` everywhere; the outcome is not needed.
    fn unlock_owned(&self, lock: Lock) -> BoxFuture<'static, ()>;
    /// The deadline of one request to one server.
    fn node_timeout(&self) -> Duration;
}

/// Why a server is left out of the rest of an acquisition.
pub(crate) const UNSURE: &str =
    "a RELEASE sent to it got no reply (it may still arrive): left out of this wait";

/// The servers a RELEASE round timed out on: that RELEASE may still
/// arrive (a refused or broken connection will not deliver it later).
pub(crate) fn release_timed_out(released: &Tally) -> impl Iterator<Item = usize> + '_ {
    released
        .failures
        .iter()
        .filter(|(_, cause)| is_timeout(cause))
        .map(|&(i, _)| i)
}

/// Servers whose RELEASE timed out become unsure.
pub(crate) fn mark_unsure(unsure: &mut [bool], released: &Tally) {
    for i in release_timed_out(released) {
        unsure[i] = true;
    }
}

/// A lock won but not yet handed to the caller (its fencing round runs on
/// the caller's task). Dropped armed (the caller gave up), it unlocks an
/// owner made for this call in the background: left alone, the lock would
/// hold every server for its TTL. A caller's own owner is left alone (a
/// newer call of it may hold the lock by the time the RELEASE lands).
pub(crate) struct UnlockOnDrop<L: Releaser>(Option<(L, Lock, Option<Handle>)>);

impl<L: Releaser> UnlockOnDrop<L> {
    pub(crate) fn new(locker: &L, lock: &Lock) -> UnlockOnDrop<L> {
        let armed = lock
            .unique
            .then(|| (locker.clone(), lock.clone(), one_runtime::here()));
        UnlockOnDrop(armed)
    }

    /// The caller has it (or it was let go already).
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl<L: Releaser> Drop for UnlockOnDrop<L> {
    fn drop(&mut self) {
        if let Some((locker, lock, runtime)) = self.0.take() {
            one_runtime::clean_up_on(&runtime, move || {
                BACKGROUND.spawn(locker.unlock_owned(lock));
            });
        }
    }
}

/// The requests of a queued acquisition still out when it ended, for an
/// owner made for the call (the caller's own owner may be in a newer call
/// by the time a RELEASE from here lands, and it would take that call's
/// grant). While the lock is `held` they are only driven: a grant that
/// arrives is part of the lock. Once the lock is let go (unlocked, dropped;
/// at once for an acquisition that failed or whose caller gave up, which
/// pass `Weak::new()`), a WAIT still unanswered (`queued[i]`) may have
/// reached its server after the RELEASE that should have withdrawn it (it
/// travels on a connection of its own) and sit in the queue, to be granted
/// later and kept for a whole TTL: RELEASE again on those servers, at
/// growing intervals, until each WAIT has answered; a grant that arrives is
/// given back, unless the unlock's RELEASE there took it back already
/// (`TakenBack`; not where a WAIT of the acquisition failed, `gave_up[i]`:
/// its grant could be the one taken back). A WAIT that timed out (`lost`)
/// has not answered either: it may still be on its way (a slow path held
/// one 1.5 s, and it took the lock for a TTL after the call had given up:
/// 22529f6), so its server is released again too, until `WITHDRAW_FOR`
/// after the let-go (a server stalled that long may still queue one: it
/// then holds that server for one TTL, not the lock). Not one refused or
/// broken: that connection delivers nothing later, and a server down kept
/// every wait's clean-up (and a CLI's exit) waiting 30 s (f9619de).
pub(crate) fn withdraw_late<L: Releaser>(
    locker: L,
    req: &Request<'_>,
    mut acquires: Pending,
    outstanding: Outstanding,
    returns: Pending,
    held: Weak<Shared>,
) {
    debug_assert!(req.unique);
    let lost = outstanding.lost.iter().any(|&l| l);
    if acquires.is_empty() && returns.is_empty() && !lost {
        return; // nothing out: no task
    }
    let (name, owner) = (req.name.to_string(), req.owner.to_string());
    let count = Shared::count_from_let_go(&held);
    let mut taken_back = Shared::taken_back(&held);
    BACKGROUND.spawn_counted(count, async move {
        let mut out = Withdrawal {
            servers: outstanding,
            releases: returns,
            undecided: Vec::new(),
        };
        let mut interval = locker.node_timeout();
        let mut next = Instant::now() + interval;
        let mut give_up = None;
        let release = |i: usize| locker.release_on(i, &name, &owner, true);
        while out.open() || !out.releases.is_empty() || !out.undecided.is_empty() {
            tokio::select! {
                Some((i, reply)) = acquires.next(), if !acquires.is_empty() => {
                    out.servers.queued[i] = false;
                    match acquire_answer(untag(reply).0) {
                        // Given up on here: it may still land.
                        Answer::Failed(cause) if is_timeout(&cause) => out.servers.lost(i),
                        Answer::Yes(_) if Shared::is_let_go(&held) => {
                            out.undecided.push(i);
                            out.decide(&taken_back.borrow_and_update(), release);
                        }
                        _ => {}
                    }
                }
                Some(_) = out.releases.next(), if !out.releases.is_empty() => {}
                // Undecided only while the unlock's replies are out.
                changed = taken_back.changed(), if !out.undecided.is_empty() => {
                    let now = match changed {
                        Ok(()) => taken_back.borrow_and_update().clone(),
                        // Dropped while pending (cannot be: the unlock
                        // holds the lock), or never made.
                        Err(_) => TakenBack::Unknown,
                    };
                    out.decide(&now, release);
                }
                _ = tokio::time::sleep_until(next.into()), if out.open() => {
                    if Shared::is_let_go(&held) {
                        let now = Instant::now();
                        if *give_up.get_or_insert(now + WITHDRAW_FOR) <= now {
                            return;
                        }
                        for i in out.servers.unanswered() {
                            out.releases.push(release(i));
                        }
                        interval = (interval * 2).min(Duration::from_secs(1));
                    }
                    next = Instant::now() + interval;
                }
            }
        }
    });
}

/// Per server, what of an acquisition may still reach it or be granted
/// there once it is over (see `withdraw_late`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Outstanding {
    /// A WAIT still in flight.
    pub(crate) queued: Vec<bool>,
    /// A WAIT failed there (timed out, its connection broke): its grant
    /// could be the one an unlock took back (`TakenBack`).
    pub(crate) gave_up: Vec<bool>,
    /// A WAIT that timed out, so may still be on its way.
    pub(crate) lost: Vec<bool>,
}

impl Outstanding {
    /// Nothing out yet on `n` servers.
    pub(crate) fn new(n: usize) -> Outstanding {
        let none = vec![false; n];
        Outstanding {
            queued: none.clone(),
            gave_up: none.clone(),
            lost: none,
        }
    }

    /// A WAIT to server `i` failed with `cause`.
    pub(crate) fn failed(&mut self, i: usize, cause: &str) {
        match is_timeout(cause) {
            true => self.lost(i),
            false => self.gave_up[i] = true,
        }
    }

    /// A WAIT to server `i` timed out.
    pub(crate) fn lost(&mut self, i: usize) {
        self.gave_up[i] = true;
        self.lost[i] = true;
    }

    /// Servers a WAIT may still reach: in flight, or lost on the way.
    fn unanswered(&self) -> impl Iterator<Item = usize> + '_ {
        let either = self.queued.iter().zip(&self.lost).map(|(&q, &l)| q || l);
        either.enumerate().filter(|&(_, u)| u).map(|(i, _)| i)
    }
}

/// `withdraw_late`'s state.
struct Withdrawal {
    servers: Outstanding,
    releases: Pending,
    /// Nodes whose grant came after the let-go, while the unlock's
    /// RELEASEs were out: released unless those took the grant back.
    undecided: Vec<usize>,
}

impl Withdrawal {
    /// A WAIT of the acquisition may still be queued or on its way.
    fn open(&self) -> bool {
        self.servers.unanswered().next().is_some()
    }

    /// Release the undecided grants the unlock did not take back, once
    /// that is known.
    fn decide(
        &mut self,
        taken_back: &TakenBack,
        release: impl Fn(usize) -> BoxFuture<'static, Reply>,
    ) {
        let known: &[usize] = match taken_back {
            TakenBack::Pending => return,
            TakenBack::Unknown => &[],
            TakenBack::Known(nodes) => nodes,
        };
        for i in self.undecided.drain(..) {
            if self.servers.gave_up[i] || !known.contains(&i) {
                self.releases.push(release(i));
            }
        }
    }
}

/// How long `withdraw_late` keeps withdrawing WAITs after the lock was let go.
const WITHDRAW_FOR: Duration = Duration::from_secs(30);

/// Late replies of an acquisition, handled after it returned (until
/// `until`, if the requests have no deadline of their own): a grant that
/// lands after the lock was let go is released at once. Let go: its
/// acquisition failed, `unlock` ran first (a request still connecting can
/// reach a node after the release), or the Lock was dropped (no clone
/// left): a WAIT of a lock that was dropped while it was still queued
/// elsewhere must not hold that server for a fresh TTL. Only for an owner
/// made for this call: a caller's own owner may be in a newer call by the
/// time a late grant lands, and releasing would take that call's grant. A
/// REENTRANT lock's late grant is a hold of its own whoever shares the
/// owner: recorded for its unlock, or released at once if it was let go.
pub(crate) fn settle_late<L: Releaser>(
    locker: L,
    req: &Request<'_>,
    mut late: Pending,
    shared: Weak<Shared>,
    until: Option<tokio::time::Instant>,
) {
    if late.is_empty() {
        return;
    }
    let (name, owner, unique) = (req.name.to_string(), req.owner.to_string(), req.unique);
    let reentrant = req.reentrant;
    // Only what gives back is clean-up; a caller's own (not REENTRANT)
    // owner's late replies are only driven (1033558: background_done
    // waited for a WAIT nobody would withdraw).
    let count = match unique || reentrant {
        true => Shared::count_from_let_go(&shared),
        false => Counted::Never,
    };
    let settle = async move {
        while let Some((i, reply)) = late.next().await {
            let granted = matches!(acquire_answer(untag(reply).0), Answer::Yes(_));
            // A REENTRANT lock's late hold is its own, wherever it landed:
            // kept for its unlock, or given back at once once let go.
            let give_back = match reentrant {
                true => granted && Shared::late_hold(&shared, i),
                false => granted && unique && Shared::is_let_go(&shared),
            };
            if give_back {
                let _ = locker.release_on(i, &name, &owner, unique).await;
            }
        }
    };
    match until {
        Some(at) => BACKGROUND.spawn_counted(count, tokio::time::timeout_at(at, settle)),
        None => BACKGROUND.spawn_counted(count, settle),
    }
}

/// The background half of `Locker::give_back_pass`: `silent` nodes of a
/// failed pass, whose requests may still be in flight (`late`, until its
/// deadline); each that grants, or says nothing by then, is sent a RELEASE
/// (an owner made for one call: sent again on a new connection if need be).
pub(crate) fn release_when_answered<L: Releaser>(
    locker: L,
    req: &Request<'_>,
    late: Option<(Pending, Pin<Box<Sleep>>)>,
    mut silent: Vec<usize>,
) {
    let (name, owner) = (req.name.to_string(), req.owner.to_string());
    BACKGROUND.spawn(async move {
        let mut held = Vec::new();
        if let Some((mut late, deadline)) = late {
            let answers = async {
                while let Some((i, reply)) = late.next().await {
                    silent.retain(|&s| s != i);
                    if let Answer::Yes(_) | Answer::Failed(_) = acquire_answer(untag(reply).0) {
                        held.push(i);
                    }
                }
            };
            tokio::select! {
                () = answers => {}
                () = deadline => {}
            }
        }
        held.append(&mut silent);
        let releases = held
            .iter()
            .map(|&i| locker.release_on(i, &name, &owner, true));
        futures_util::future::join_all(releases).await;
    });
}
