//! A lock held on a majority of nodes, and the state its clones share with
//! the requests of its acquisition that were still in flight.

use crate::locker::Request;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// A lock held on a majority of nodes. Release it with
/// [`Locker::unlock`](crate::Locker::unlock); dropping it only lets it
/// expire after its TTL.
#[derive(Debug, Clone)]
#[must_use = "a lock that is dropped stays held until its TTL runs out"]
pub struct Lock {
    name: String,
    owner: String,
    token: u64,
    ttl: Duration,
    pub(crate) valid_until: Instant,
    pub(crate) shared: Arc<Shared>,
    /// The owner was generated for the call that took it and is not
    /// REENTRANT (see `Request::unique`): only then is it released in the
    /// background.
    pub(crate) unique: bool,
}

/// Shared by a Lock's clones; held weakly by the task settling the late
/// replies of its acquisition.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Set once the lock is let go (unlocked, or its acquisition failed):
    /// a grant still on its way to this owner is then released on arrival,
    /// as it is once every clone was dropped (see `settle_late`).
    gone: AtomicBool,
}

impl Shared {
    /// The lock is let go: late grants are released from now on.
    pub(crate) fn let_go(&self) {
        self.gone.store(true, Ordering::Release);
    }

    /// Let go, or every clone of the Lock dropped.
    pub(crate) fn is_let_go(shared: &Weak<Shared>) -> bool {
        shared
            .upgrade()
            .is_none_or(|s| s.gone.load(Ordering::Acquire))
    }
}

impl Lock {
    pub(crate) fn granted(
        req: &Request<'_>,
        token: u64,
        start: Instant,
        shared: Arc<Shared>,
    ) -> Lock {
        Lock {
            name: req.name.to_string(),
            owner: req.owner.to_string(),
            token,
            ttl: req.ttl,
            valid_until: start,
            shared,
            unique: req.unique,
        }
    }

    /// The lock's name (the key on every server).
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
    /// The owner was made for this lock alone: not given with
    /// `LockOptions::owner`, not REENTRANT (whose owner other handles
    /// re-enter). Only such a lock is released behind its holder's back (a
    /// dropped `AutoLock`, a binding's dropped lock); any other only stops
    /// renewing and expires with its TTL, since a RELEASE of a shared owner
    /// could take another handle's or a later call's grant.
    pub fn owner_is_private(&self) -> bool {
        self.unique
    }
    /// The TTL it was taken with (and is renewed to).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
    /// Change the TTL that the next [`Locker::extend`](crate::Locker::extend)
    /// resets the lock to (the Python binding's `extend(ttl)`). Checked by
    /// the servers: a TTL above `lock.max-ttl-ms` is `Rejected` there.
    pub fn set_ttl(&mut self, ttl: Duration) {
        self.ttl = ttl;
    }
}
