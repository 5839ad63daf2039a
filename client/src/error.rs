//! Errors a caller can act on, each distinct.

use std::fmt;

/// Why one node did not grant, extend or release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFailure {
    /// `host:port` of the node.
    pub node: String,
    /// What went wrong there (timeout, refused, TRYAGAIN, the server's error).
    pub cause: String,
}

/// Everything an operation of this crate can fail with.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Another owner holds the lock (on enough nodes that no majority is
    /// possible) and it did not come free within the wait.
    Taken,
    /// Not enough nodes answered: infrastructure trouble, not contention.
    NoQuorum {
        /// Nodes that granted.
        granted: usize,
        /// Nodes needed (a majority).
        needed: usize,
        /// Each node that failed, and why.
        failures: Vec<NodeFailure>,
    },
    /// The lock expired (or was taken over) before this unlock/extend.
    Expired,
    /// The builder or the lock options were given settings that cannot work.
    Config(String),
    /// Servers refused the request for a reason that retrying cannot fix
    /// (TTL above `lock.max-ttl-ms`, `NOPERM`, `WRONGTYPE`, a wrong password,
    /// the module not loaded): not retried.
    Rejected {
        /// `host:port` of a node that refused.
        node: String,
        /// The server's error message.
        message: String,
    },
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
            Error::Rejected { node, message } => {
                write!(f, "server {node} rejected the request: {message}")
            }
            Error::Redis(e) => write!(f, "redis error: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Redis(e) => Some(e),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Error::Redis(e)
    }
}

/// An error as a user reads it: a server's reply as `CODE: detail` (e.g.
/// `NOPERM: this user has no permissions ...`), as the server spelled it.
/// redis-rs 1.x displays known codes by its own names (`NoPerm`,
/// `ResponseError`) and others quoted (`"WRONGTYPE"`); anything else
/// (I/O, a refused connection) keeps its own text.
pub(crate) fn describe(e: &redis::RedisError) -> String {
    let text = match (e.kind(), e.code()) {
        (redis::ErrorKind::Server(_) | redis::ErrorKind::Extension, Some(code)) => match e.detail()
        {
            Some(detail) => format!("{code}: {detail}"),
            None => e.to_string(),
        },
        _ => e.to_string(),
    };
    without_arguments(text)
}

/// What the server quotes of the arguments it did not run. A server
/// without the module answers `unknown command 'LOCK.ACQUIRE', with args
/// beginning with: 'k' 'owner' ...`: the owner, which is what lets anyone
/// release the lock, went into every message and log of the failure
/// (2026-11-29). The quote is cut, and the likely cause said instead.
const ARGS_QUOTED: &str = ", with args beginning with:";

fn without_arguments(text: String) -> String {
    match text.find(ARGS_QUOTED) {
        Some(at) if text[..at].contains("unknown command 'LOCK.") => {
            format!("{} (is the redis-lock module loaded there?)", &text[..at])
        }
        Some(at) => format!("{} (arguments not shown)", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn quoted_arguments_are_cut() {
        let quoted = |text: &'static str| {
            describe(&redis::RedisError::from((
                redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
                text,
            )))
        };
        let module =
            quoted("unknown command 'LOCK.ACQUIRE', with args beginning with: 'k' 'secret' ");
        assert!(!module.contains("secret"), "{module}");
        assert!(
            module.contains("unknown command 'LOCK.ACQUIRE'"),
            "{module}"
        );
        assert!(
            module.ends_with("(is the redis-lock module loaded there?)"),
            "{module}"
        );
        let other = quoted("unknown subcommand 'X', with args beginning with: 'secret' ");
        assert!(!other.contains("secret"), "{other}");
        assert!(quoted("plain refusal").contains("plain refusal"));
    }

    #[test]
    fn redis_errors_are_the_source() {
        let inner = redis::RedisError::from((redis::ErrorKind::Io, "boom"));
        let e = Error::from(inner);
        assert!(e.source().unwrap().to_string().contains("boom"));
        assert!(Error::Taken.source().is_none());
    }
}
