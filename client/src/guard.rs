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
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

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
    watchdog: Option<JoinHandle<()>>,
    /// `unlock` released it already: `Drop` has nothing left to do.
    released: bool,
}

impl AutoLock {
    pub(crate) fn start(locker: Locker, lock: Lock) -> AutoLock {
        let (tx, rx) = watch::channel(false);
        let watchdog = tokio::spawn(renew(locker.clone(), lock.clone(), tx));
        AutoLock {
            locker,
            lock,
            lost: rx,
            watchdog: Some(watchdog),
            released: false,
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

    /// True once the lock can no longer be trusted (renewal failed until its
    /// validity ran out, or a majority no longer holds it).
    pub fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    /// Resolves when the lock is lost. Never resolves while it is held.
    pub async fn lost(&mut self) {
        let _ = self.lost.wait_for(|lost| *lost).await;
    }

    /// Stop renewing and release on every node.
    pub async fn unlock(mut self) -> Result<(), Error> {
        if let Some(w) = self.watchdog.take() {
            w.abort();
        }
        let result = self.locker.unlock(&self.lock).await;
        // Dropped normally (not forgotten: that leaked the Locker clone, so
        // a dropped Locker kept its connections open, and the lock's
        // strings, ~2.4 kB per cycle; an attack run, helper-14).
        self.released = true;
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
        if self.released || !self.lock.unique {
            return;
        }
        let (locker, lock) = (self.locker.clone(), self.lock.clone());
        crate::background::BACKGROUND.spawn(async move {
            let _ = locker.unlock(&lock).await;
        });
    }
}

/// The watchdog: extend every ttl/3; on failure retry sooner while the lock
/// is still valid; signal lost the moment it is not. An extension still
/// under way when the validity ends does not hold the signal back: the
/// servers may already have freed the lock and granted it to another
/// client (an attack run saw a second holder for up to the node timeout,
/// ~400 ms by default, while `is_lost()` said false).
async fn renew(locker: Locker, mut lock: Lock, lost: watch::Sender<bool>) {
    let period = lock.ttl() / 3;
    // An extension may take up to the node timeout: it starts at least that
    // long before the validity ends, or a slow but successful renewal would
    // be cut off by the deadline below (a false "lost", then no renewal).
    let slowest = locker.config().node_timeout();
    let mut wait = period;
    loop {
        let start_in = wait.min(lock.validity().saturating_sub(slowest));
        tokio::time::sleep(start_in).await;
        let valid_until = lock.valid_until;
        let extended = tokio::select! {
            biased;
            () = tokio::time::sleep_until(valid_until.into()) => break,
            extended = locker.extend(&mut lock) => extended,
        };
        match extended {
            Ok(()) => wait = period,
            Err(Error::Expired) => break,
            Err(_) if lock.validity().is_zero() => break,
            Err(_) => wait = (period / 4).max(Duration::from_millis(5)),
        }
    }
    let _ = lost.send(true);
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
