//! Per-lock options: TTL, wait, reentrancy and owner for one acquisition
//! (the [`crate::Locker`]'s settings are only the defaults).

use crate::error::Error;
use crate::hold::Hold;
use std::time::Duration;

/// Options of one acquisition, for [`crate::Locker::acquire`]:
///
/// ```no_run
/// # async fn demo(locker: redis_lock_client::Locker) -> Result<(), redis_lock_client::Error> {
/// use redis_lock_client::LockOptions;
/// use std::time::Duration;
/// let opts = LockOptions::new()
///     .ttl(Duration::from_secs(30))
///     .wait(Duration::from_secs(5))
///     .reentrant(true);
/// let lock = locker.acquire("jobs:nightly", &opts).await?;
/// // The same owner may take it again (hold count 2) ...
/// let again = locker.acquire("jobs:nightly", &opts.clone().owner(lock.owner())).await?;
/// locker.unlock(&again).await?; // ... and each unlock drops one hold.
/// locker.unlock(&lock).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockOptions {
    pub(crate) ttl: Option<Duration>,
    pub(crate) wait: Duration,
    pub(crate) reentrant: bool,
    pub(crate) owner: Option<String>,
    pub(crate) hold: Hold,
}

impl LockOptions {
    /// The Locker's TTL, no wait, not reentrant, a fresh random owner.
    pub fn new() -> LockOptions {
        LockOptions::default()
    }
    /// TTL of this lock (instead of the Locker's); renewals keep it.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
    /// How long to keep trying while another owner holds the lock. This is a
    /// deadline: rounds go on until it passes (one round at least).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }
    /// `REENTRANT`: the same owner acquiring again adds a hold (released
    /// one per unlock) instead of only refreshing the TTL.
    pub fn reentrant(mut self, on: bool) -> Self {
        self.reentrant = on;
        self
    }
    /// Owner value (default: 128 random bits). Reuse a held lock's owner to
    /// re-enter it; choose one to be able to release it by hand
    /// (`redis-lock release NAME --owner OWNER`). Must be unique per holder.
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// A shared lock (`SHARED`): held by any number of shared holders at
    /// once (readers), never beside an exclusive holder (a writer). Needs a
    /// majority of grants, as an exclusive lock does.
    ///
    /// ```no_run
    /// # async fn demo(locker: redis_lock_client::Locker) -> Result<(), redis_lock_client::Error> {
    /// use redis_lock_client::LockOptions;
    /// use std::time::Duration;
    /// let read = locker.acquire("table:users", &LockOptions::shared().wait(Duration::from_secs(5))).await?;
    /// locker.unlock(&read).await?;
    /// // A semaphore: at most 4 holders at once, fleet-wide.
    /// let slot = locker.acquire("pool:exports", &LockOptions::shared().limit(4)).await?;
    /// locker.unlock(&slot).await?;
    /// # Ok(()) }
    /// ```
    pub fn shared() -> LockOptions {
        LockOptions::new().shared_hold(true)
    }
    /// Shared (`SHARED`) or exclusive (the default); exclusive drops a limit.
    pub fn shared_hold(mut self, on: bool) -> Self {
        self.hold.shared = on;
        if !on {
            self.hold.limit = None;
        }
        self
    }
    /// `SHARED LIMIT n`: at most `n` shared holders at once (a counting
    /// semaphore whose permits expire with their holder); implies shared.
    /// `n` from 1 to 2^31 - 1. A limited hold needs more grants than a
    /// majority (`quorum::shared_quorum`): with 3 servers every limit above
    /// 1 needs all 3. The key's limit is set by its first holder; asking
    /// another one while it is held is `Rejected`.
    pub fn limit(mut self, n: u32) -> Self {
        self.hold.shared = true;
        self.hold.limit = Some(n);
        self
    }
    /// Asks for a shared hold.
    pub fn is_shared(&self) -> bool {
        self.hold.shared
    }
    /// The limit asked for, if any.
    pub fn limit_of(&self) -> Option<u32> {
        self.hold.limit
    }

    /// The TTL to use with a Locker whose default is `default_ttl` and whose
    /// node timeout is `node_timeout`.
    pub(crate) fn checked_ttl(
        &self,
        default_ttl: Duration,
        node_timeout: Duration,
    ) -> Result<Duration, Error> {
        let ttl = self.ttl.unwrap_or(default_ttl);
        if ttl < crate::config::MIN_TTL || ttl <= node_timeout {
            return Err(Error::Config(format!(
                "lock ttl {ttl:?} must be at least {:?} and above the node timeout {node_timeout:?}",
                crate::config::MIN_TTL
            )));
        }
        if self.owner.as_deref() == Some("") {
            return Err(Error::Config("owner must not be empty".into()));
        }
        self.hold.check()?;
        Ok(ttl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_defaults_and_checks() {
        let (d, nt) = (Duration::from_secs(10), Duration::from_millis(500));
        assert_eq!(LockOptions::new().checked_ttl(d, nt).unwrap(), d);
        let short = LockOptions::new().ttl(Duration::from_millis(300));
        assert!(matches!(short.checked_ttl(d, nt), Err(Error::Config(_))));
        let empty = LockOptions::new().owner("");
        assert!(matches!(empty.checked_ttl(d, nt), Err(Error::Config(_))));
        let zero = LockOptions::new().limit(0);
        assert!(matches!(zero.checked_ttl(d, nt), Err(Error::Config(_))));
    }

    #[test]
    fn a_limit_makes_the_hold_shared_and_exclusive_drops_it() {
        let opts = LockOptions::new().limit(3);
        assert!(opts.is_shared());
        assert_eq!(opts.limit_of(), Some(3));
        let back = opts.shared_hold(false);
        assert!(!back.is_shared());
        assert_eq!(back.limit_of(), None);
        assert!(LockOptions::shared().is_shared());
        assert!(!LockOptions::new().is_shared());
    }
}
