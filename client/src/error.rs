//! Errors a caller can act on, each distinct.

use std::fmt;

/// Why one node did not grant, extend or release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFailure {
    pub node: String,
    pub cause: String,
}

#[derive(Debug)]
pub enum Error {
    /// Another owner holds the lock (on enough nodes that no majority is possible).
    Taken,
    /// Not enough nodes answered: infrastructure trouble, not contention.
    NoQuorum {
        granted: usize,
        needed: usize,
        failures: Vec<NodeFailure>,
    },
    /// The lock expired (or was taken over) before this unlock/extend.
    Expired,
    /// The builder was given settings that cannot work.
    Config(String),
    /// A single-node call failed (used by status/force-release).
    Redis(redis::RedisError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Taken => write!(f, "lock is held by another owner"),
            Error::NoQuorum {
                granted,
                needed,
                failures,
            } => {
                write!(f, "no quorum: {granted} of {needed} needed nodes")?;
                for fail in failures {
                    write!(f, "; {}: {}", fail.node, fail.cause)?;
                }
                Ok(())
            }
            Error::Expired => write!(f, "lock expired before the operation"),
            Error::Config(why) => write!(f, "invalid configuration: {why}"),
            Error::Redis(e) => write!(f, "redis error: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Error::Redis(e)
    }
}
