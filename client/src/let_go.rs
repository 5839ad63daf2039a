//! Letting go of a queued acquisition (waiting.rs) without leaving
//! anything behind on the servers: the caller's cancellation, servers whose
//! RELEASE may still be on its way, and WAITs that reach a server after the
//! RELEASE that should have withdrawn them.

use crate::locker::{acquire_answer, Locker, Pending, Request};
use crate::node::is_timeout;
use crate::quorum::{Answer, Tally};
use futures_util::stream::StreamExt;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Why a server is left out of the rest of an acquisition.
pub(crate) const UNSURE: &str =
    "a RELEASE sent to it got no reply (it may still arrive): left out of this wait";

/// Servers whose RELEASE timed out become unsure (a refused or broken
/// connection will not deliver it later).
pub(crate) fn mark_unsure(unsure: &mut [bool], released: &Tally) {
    for (i, cause) in &released.failures {
        if is_timeout(cause) {
            unsure[*i] = true;
        }
    }
}

/// The caller's side of a queued acquisition: its future was dropped once
/// the channel closes (nothing is ever sent on it).
pub(crate) struct Cancel {
    rx: oneshot::Receiver<()>,
    pub(crate) fired: bool,
}

impl Cancel {
    pub(crate) fn new(rx: oneshot::Receiver<()>) -> Cancel {
        Cancel { rx, fired: false }
    }

    /// Resolves when the caller has gone; never, once it has been seen.
    pub(crate) async fn wait(&mut self) {
        if self.fired {
            return std::future::pending().await;
        }
        let _ = (&mut self.rx).await;
        self.fired = true;
    }
}

/// After a queued acquisition was let go (its wait ran out, it failed, or
/// its caller gave up) and a RELEASE went everywhere: a WAIT still
/// unanswered (`queued[i]`) may have reached its server after that RELEASE
/// (it travels on a connection of its own) and sit in the queue, to be
/// granted later and kept for a whole TTL. RELEASE again on those servers,
/// at growing intervals, until each WAIT has answered; a grant that
/// arrives is given back. Bounded by the WAITs' own deadlines and by
/// `WITHDRAW_FOR` (a server stalled that long may still queue one: it then
/// holds that server for one TTL, not the lock). Only for an owner made for
/// this call: a caller's own owner may be in a newer call by the time the
/// RELEASE lands, and it would take that call's grant.
pub(crate) fn withdraw_late(
    locker: Locker,
    req: &Request<'_>,
    mut acquires: Pending,
    mut queued: Vec<bool>,
    returns: Pending,
) {
    if !req.unique {
        return;
    }
    let (name, owner) = (req.name.to_string(), req.owner.to_string());
    let mut interval = locker.inner.config.node_timeout;
    let give_up = tokio::time::Instant::now() + WITHDRAW_FOR;
    tokio::spawn(tokio::time::timeout_at(give_up, async move {
        let mut releases = returns;
        let mut next = Instant::now() + interval;
        let open =
            |queued: &[bool], acquires: &Pending| !acquires.is_empty() && queued.iter().any(|&q| q);
        while open(&queued, &acquires) || !releases.is_empty() {
            tokio::select! {
                Some((i, reply)) = acquires.next(), if !acquires.is_empty() => {
                    queued[i] = false;
                    if matches!(acquire_answer(reply), Answer::Yes(_)) {
                        releases.push(locker.release_on(i, &name, &owner));
                    }
                }
                Some(_) = releases.next(), if !releases.is_empty() => {}
                _ = tokio::time::sleep_until(next.into()), if open(&queued, &acquires) => {
                    for (i, _) in queued.iter().enumerate().filter(|(_, &q)| q) {
                        releases.push(locker.release_on(i, &name, &owner));
                    }
                    interval = (interval * 2).min(Duration::from_secs(1));
                    next = Instant::now() + interval;
                }
            }
        }
    }));
}

/// How long `withdraw_late` keeps withdrawing WAITs of a wait that ended.
const WITHDRAW_FOR: Duration = Duration::from_secs(30);
