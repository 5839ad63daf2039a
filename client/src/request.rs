//! What one acquisition asks for (name, owner, TTL, hold kind), as the
//! rounds, the clean-up in the background (`let_go.rs`) and the held
//! `Lock` see it, and the owners generated for it.

use crate::hold::Hold;
use rand::RngExt;
use std::time::Duration;

/// 128 random bits as 32 hex digits. From the thread's CSPRNG (ChaCha,
/// seeded and periodically reseeded from the OS): unguessable like the OS
/// source, without a system call per lock.
///
/// ```
/// let owner = redis_lock_client::random_owner();
/// assert_eq!(owner.len(), 32);
/// assert!(owner.chars().all(|c| c.is_ascii_hexdigit()));
/// assert_ne!(owner, redis_lock_client::random_owner());
/// ```
pub fn random_owner() -> String {
    let bits: u128 = rand::rng().random();
    format!("{bits:032x}")
}

/// What one acquisition asks for, options resolved.
#[derive(Clone, Copy)]
pub(crate) struct Request<'a> {
    pub(crate) name: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) ttl: Duration,
    pub(crate) reentrant: bool,
    /// The owner was made for this call (no other call can hold it: not
    /// given by the caller, not REENTRANT), so what it was granted may be
    /// released after the call returned.
    pub(crate) unique: bool,
    /// Exclusive or shared (`SHARED`, `LIMIT`).
    pub(crate) hold: Hold,
}

impl<'a> Request<'a> {
    /// The request for the next pass (a polling round, a pass of a queued
    /// wait) after the first: a generated owner is made anew (into `fresh`),
    /// so that nothing an earlier pass left behind (a late grant it
    /// releases, a RELEASE still on its way) can touch this pass's grants.
    /// A caller's own owner stays: to the servers it is one holder.
    pub(crate) fn next_pass<'b>(&self, fresh: &'b mut String) -> Request<'b>
    where
        'a: 'b,
    {
        if !self.unique {
            return *self;
        }
        *fresh = random_owner();
        Request {
            owner: fresh.as_str(),
            ..*self
        }
    }

    /// The request with its strings owned, for clean-up spawned elsewhere.
    pub(crate) fn to_owned(self) -> OwnedRequest {
        OwnedRequest {
            name: self.name.to_string(),
            owner: self.owner.to_string(),
            ttl: self.ttl,
            reentrant: self.reentrant,
            unique: self.unique,
            hold: self.hold,
        }
    }
}

/// A `Request` that owns its strings.
pub(crate) struct OwnedRequest {
    name: String,
    owner: String,
    ttl: Duration,
    reentrant: bool,
    unique: bool,
    hold: Hold,
}

impl OwnedRequest {
    pub(crate) fn get(&self) -> Request<'_> {
        Request {
            name: &self.name,
            owner: &self.owner,
            ttl: self.ttl,
            reentrant: self.reentrant,
            unique: self.unique,
            hold: self.hold,
        }
    }
}
