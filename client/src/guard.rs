//! An auto-renewing lock: a watchdog task extends the lock every third of
//! its TTL (like Redisson's watchdog) and raises a lost-lock signal the
//! holder can await or poll.
//!
//! `Drop` stops the watchdog at once and, when a tokio runtime is still
//! running, releases the lock in the background (best effort; without a
//! runtime the lock simply expires after its TTL). Call [`AutoLock::unlock`]
//! to release and see the result.

use crate::error::Error;
use crate::lock::Lock;
use crate::locker::Locker;
use crate::options::LockOptions;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

/// An `AutoLock::extend` for the watchdog to run: the new TTL (if any) and
/// where its outcome goes.
type ExtendRequest = (Option<Duration>, oneshot::Sender<Result<(), Error>>);

/// A lock renewed in the background until it is unlocked or dropped.
/// Made by [`Locker::lock_auto`] and [`Locker::acquire_auto`].
///
/// ```no_run
/// # async fn demo(locker: redis_lock_client::Locker) -> Result<(), redis_lock_client::Error> {
/// use std::time::Duration;
/// let mut guard = locker.lock_auto("lock:long", Duration::from_secs(5)).await?;
/// tokio::select! {
///     _ = tokio::time::sleep(Duration::from_secs(60)) => guard.unlock().await?, // the work
///     _ = guard.lost() => eprintln!("lost the lock: stop"),
/// }
/// # Ok(()) }
/// ```
#[must_use = "dropping an AutoLock releases the lock at once"]
pub struct AutoLock {
    locker: Locker,
    lock: Lock,
    lost: watch::Receiver<bool>,
    /// The lock as the watchdog last extended it (its validity and TTL).
    current: watch::Receiver<Lock>,
    /// `extend` calls, run by the watchdog: one task extends the lock, so
    /// no extension overwrites a newer validity with an older one, and a
    /// new TTL is the one later renewals keep.
    requests: mpsc::UnboundedSender<ExtendRequest>,
    watchdog: Option<JoinHandle<()>>,
    /// `unlock` released it already: `Drop` has nothing left to do.
    released: AtomicBool,
}

impl AutoLock {
    pub(crate) fn start(locker: Locker, lock: Lock) -> AutoLock {
        let (tx, rx) = watch::channel(false);
        let (publish, current) = watch::channel(lock.clone());
        let (requests, asked) = mpsc::unbounded_channel();
        let watchdog = tokio::spawn(renew(
            locker.clone(),
            lock.clone(),
            Watchdog {
                lost: tx,
                publish,
                asked,
            },
        ));
        AutoLock {
            locker,
            lock,
            lost: rx,
            current,
            requests,
            watchdog: Some(watchdog),
            released: AtomicBool::new(false),
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.lock.name()
    }
    /// The owner value it was taken with.
    pub fn owner(&self) -> &str {
        self.lock.owner()
    }
    /// Its fencing token.
    pub fn token(&self) -> u64 {
        self.lock.token()
    }
    /// See [`Lock::owner_is_private`]: only such a lock is released when
    /// its guard is dropped.
    pub fn owner_is_private(&self) -> bool {
        self.lock.owner_is_private()
    }

    /// True once the lock can no longer be trusted (renewal failed until its
    /// validity ran out, or a majority no longer holds it).
    pub fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    /// Resolves when the lock is lost. Never resolves while it is held.
    pub async fn lost(&mut self) {
        let _ = self.lost.wait_for(|lost| *lost).await;
    }

    /// How long the lock is still known to be valid, as of its last
    /// renewal (0 once it may have expired).
    pub fn validity(&self) -> Duration {
        self.current.borrow().validity()
    }

    /// The TTL renewals reset the lock to.
    pub fn ttl(&self) -> Duration {
        self.current.borrow().ttl()
    }

    /// Extend now, through the watchdog (to `ttl` if given, which later
    /// renewals keep): what a binding's `extend(ttl)` on a renewed lock
    /// does. `Expired` once the lock is lost. A failure that leaves the
    /// lock valid (`NoQuorum`) is returned and renewal goes on.
    ///
    /// ```no_run
    /// # async fn demo(locker: redis_lock_client::Locker) -> Result<(), redis_lock_client::Error> {
    /// use std::time::Duration;
    /// let guard = locker.lock_auto("lock:long", Duration::ZERO).await?;
    /// guard.extend(Some(Duration::from_secs(60))).await?; // renewed to 60 s from now on
    /// assert!(guard.validity() > Duration::from_secs(30));
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend(&self, ttl: Option<Duration>) -> Result<(), Error> {
        let (reply, outcome) = oneshot::channel();
        if self.requests.send((ttl, reply)).is_err() {
            return Err(Error::Expired); // the watchdog ended: lost
        }
        outcome.await.unwrap_or(Err(Error::Expired))
    }

    /// A future (not tied to the guard's lifetime) that resolves when the
    /// watchdog stops: `true` if the lock was lost, `false` if it stopped
    /// because the guard was unlocked or dropped. For a binding that
    /// signals the loss from a task of its own.
    pub fn lost_signal(&self) -> impl Future<Output = bool> + Send + 'static {
        let mut lost = self.lost.clone();
        async move { lost.wait_for(|lost| *lost).await.is_ok() }
    }

    /// Stop renewing and release on every node.
    pub async fn unlock(self) -> Result<(), Error> {
        // Dropped normally after (not forgotten: that leaked the Locker
        // clone, so a dropped Locker kept its connections open, and the
        // lock's strings, ~2.4 kB per cycle; an attack run, 5d8fbc4).
        self.release().await
    }

    /// [`AutoLock::unlock`] through a shared reference, for a binding
    /// whose lock object is shared by its callers' calls (`extend` may run
    /// at the same time). The guard is done after it, whatever it returns.
    pub async fn release(&self) -> Result<(), Error> {
        if let Some(w) = &self.watchdog {
            w.abort();
        }
        let result = self.locker.unlock(&self.lock).await;
        self.released.store(true, Ordering::Release);
        result
    }
}

impl Drop for AutoLock {
    fn drop(&mut self) {
        if let Some(w) = self.watchdog.take() {
            w.abort();
        }
        // A caller's own owner may be taken again by a newer call before
        // this release lands, which would free that call's grants: such a
        // lock is left to expire with its TTL.
        if self.released.load(Ordering::Acquire) || !self.lock.unique {
            return;
        }
        let (locker, lock) = (self.locker.clone(), self.lock.clone());
        crate::background::BACKGROUND.spawn(async move {
            let _ = locker.unlock(&lock).await;
        });
    }
}

/// The watchdog's ends of the guard's channels.
struct Watchdog {
    lost: watch::Sender<bool>,
    publish: watch::Sender<Lock>,
    asked: mpsc::UnboundedReceiver<ExtendRequest>,
}

/// The watchdog: extend every ttl/3 (and when `AutoLock::extend` asks); on
/// failure retry sooner while the lock is still valid; signal lost the
/// moment it is not. An extension still under way when the validity ends
/// does not hold the signal back: the servers may already have freed the
/// lock and granted it to another client (an attack run saw a second holder
/// for up to the node timeout, ~400 ms by default, while `is_lost()` said
/// false).
async fn renew(locker: Locker, mut lock: Lock, mut io: Watchdog) {
    // An extension may take up to the node timeout: it starts at least that
    // long before the validity ends, or a slow but successful renewal would
    // be cut off by the deadline below (a false "lost", then no renewal).
    let slowest = locker.config().node_timeout();
    let mut wait = lock.ttl() / 3;
    loop {
        let start_in = wait.min(lock.validity().saturating_sub(slowest));
        let (ttl, reply) = tokio::select! {
            () = tokio::time::sleep(start_in) => (None, None),
            Some((ttl, reply)) = io.asked.recv() => (ttl, Some(reply)),
        };
        let mut next = lock.clone();
        if let Some(ttl) = ttl {
            next.set_ttl(ttl);
        }
        let valid_until = lock.valid_until;
        let extended = tokio::select! {
            biased;
            () = tokio::time::sleep_until(valid_until.into()) => Err(Error::Expired),
            extended = locker.extend(&mut next) => extended,
        };
        let period = next.ttl() / 3;
        let outcome = match extended {
            Ok(()) => {
                lock = next;
                drop(io.publish.send_replace(lock.clone()));
                wait = period;
                Ok(())
            }
            Err(e) => {
                wait = (period / 4).max(Duration::from_millis(5));
                Err(e)
            }
        };
        let over = match &outcome {
            Ok(()) => false,
            Err(Error::Expired) => true,
            Err(_) => lock.validity().is_zero(),
        };
        if let Some(reply) = reply {
            let _ = reply.send(match outcome {
                Err(_) if over => Err(Error::Expired),
                other => other,
            });
        }
        if over {
            break;
        }
    }
    let _ = io.lost.send(true);
}

impl Locker {
    /// Acquire (as [`Locker::lock`]) and keep the lock renewed until the
    /// returned guard is unlocked or dropped.
    ///
    /// ```no_run
    /// # async fn demo(locker: redis_lock_client::Locker) -> Result<(), redis_lock_client::Error> {
    /// use std::time::Duration;
    /// let guard = locker.lock_auto("lock:long", Duration::ZERO).await?;
    /// println!("renewed in the background, token {}", guard.token());
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock_auto(&self, name: &str, wait: Duration) -> Result<AutoLock, Error> {
        self.acquire_auto(name, &LockOptions::new().wait(wait))
            .await
    }

    /// Acquire with per-lock options (as [`Locker::acquire`]) and keep the
    /// lock renewed, to its own TTL, until the guard is unlocked or dropped.
    ///
    /// ```no_run
    /// # async fn demo(locker: redis_lock_client::Locker) -> Result<(), redis_lock_client::Error> {
    /// use redis_lock_client::LockOptions;
    /// use std::time::Duration;
    /// let opts = LockOptions::new().ttl(Duration::from_secs(3)).wait(Duration::from_secs(1));
    /// let guard = locker.acquire_auto("lock:long", &opts).await?; // renewed every second
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_auto(&self, name: &str, opts: &LockOptions) -> Result<AutoLock, Error> {
        let lock = self.acquire(name, opts).await?;
        Ok(AutoLock::start(self.clone(), lock))
    }
}
