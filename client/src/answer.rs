//! One node's answer in a round: what the tally (`quorum.rs`) counts and
//! the per-server vote (`server_ids.rs`) passes on, apart from both.

/// One node's answer in a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Granted / extended / released; for acquire, the node's token.
    Yes(u64),
    /// Held by another owner (acquire: nil; extend/release: 0).
    Busy,
    /// Not held at all (extend/release: -1).
    Gone,
    /// Error, timeout or retry-later: counts as not granted.
    Failed(String),
    /// The server refused the request for good (see [`crate::Error::Rejected`]).
    Rejected(String),
}
