//! The per-server fencing-token counter and the rules that keep tokens
//! strictly increasing, also across a restart that lost every byte of data.
//!
//! Tokens follow the wall clock: a grant gets `max(last + 1, now in µs)`,
//! so every node's tokens sit near the (shared, NTP-synced) clock.
//!
//! The rule that keeps them increasing across a restart that lost every
//! byte of data, in one line: **no token handed out or accepted exceeds the
//! server's clock + `FENCE_SKEW_US` (60 s), and a server starts counting at
//! its clock + 60 s** (`start_seed`). Before a crash at time t every token
//! was at most t + 60 s; after the restart at t' > t the first token is
//! above t' + 60 s. Assumes the clock does not go back across the restart.
//! Right after a start a node's tokens run up to 60 s ahead of its clock;
//! other nodes accept them in `LOCK.FENCE` once their clocks have moved
//! past the skew between them, which the restart guard's wait covers.
//!
//! - `LOCK.FENCE` (the quorum client's second round) raises a node to the
//!   largest token of the majority, i.e. to another node's clock: the 60 s
//!   allowance is for clock skew between a quorum's nodes.
//! - Persisted counters (RDB aux data, every replicated/AOF grant) are
//!   observed on top of that.
//! - Tokens never exceed `MAX_TOKEN` = 2^53 − 1 (the year 2255 in µs), so
//!   they stay exact in JavaScript and Lua numbers; at that bound the
//!   counter stops (grants are refused) rather than wrapping.

use std::sync::atomic::{AtomicU64, Ordering};

/// Largest token ever handed out or accepted: exact in an IEEE double.
pub const MAX_TOKEN: u64 = (1 << 53) - 1;

/// How far above its own wall clock (µs) a server accepts a token: far more
/// than the clock skew between a quorum's NTP-synced nodes.
pub const FENCE_SKEW_US: u64 = 60_000_000;

/// The server's counter. Lives here, below the command handlers, because
/// commands, the data type (RDB), blocking hand-offs and INFO all use it.
pub static TOKENS: TokenCounter = TokenCounter::new();

pub struct TokenCounter(AtomicU64);

impl TokenCounter {
    pub const fn new() -> TokenCounter {
        TokenCounter(AtomicU64::new(0))
    }

    /// Hand out the next token at wall-clock `unix_micros`: above every token
    /// handed out or observed, and at least the clock. None once `MAX_TOKEN`
    /// has been reached: never wrap.
    pub fn next(&self, unix_micros: u64) -> Option<u64> {
        let token = |last: u64| (last + 1).max(unix_micros.min(MAX_TOKEN));
        self.0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
                (last < MAX_TOKEN).then(|| token(last))
            })
            .ok()
            .map(token)
    }

    /// Never hand out `token` or anything below it again.
    pub fn observe(&self, token: u64) {
        self.0.fetch_max(token.min(MAX_TOKEN), Ordering::Relaxed);
    }

    pub fn last(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Default for TokenCounter {
    fn default() -> Self {
        TokenCounter::new()
    }
}

/// The highest token `LOCK.FENCE` accepts at wall-clock `unix_micros`.
pub fn fence_ceiling(unix_micros: u64) -> u64 {
    unix_micros.saturating_add(FENCE_SKEW_US).min(MAX_TOKEN)
}

/// How far above a server's clock a token may be when it applies what a
/// primary decided (a replicated or replayed `LOCK.APPLY`, a `RESTORE` on a
/// replica): a primary's tokens are at most 60 s above its own clock, but
/// the two clocks may differ and an AOF replays later.
pub const REPLAY_SLACK_US: u64 = 3_600_000_000;

/// The highest token a replica or a replay accepts at wall-clock
/// `unix_micros`, so that no single line or payload can exhaust the counter.
pub fn replay_ceiling(unix_micros: u64) -> u64 {
    fence_ceiling(unix_micros)
        .saturating_add(REPLAY_SLACK_US)
        .min(MAX_TOKEN)
}

/// The least token a new grant may get at wall-clock `unix_micros` when the
/// client asked for at least `requested` (`MINTOKEN`, 0 = nothing): the
/// clock, or the request capped at the fence ceiling. A quorum client asks
/// every node for the same floor a little above the clocks, so nodes whose
/// counters are below it all grant exactly that token: the quorum token is
/// then already on a majority and the fencing round is skipped.
pub fn floor(unix_micros: u64, requested: u64) -> u64 {
    unix_micros.max(requested.min(fence_ceiling(unix_micros)))
}

/// Where a server starts counting at wall-clock `unix_micros` (see above).
pub fn start_seed(unix_micros: u64) -> u64 {
    fence_ceiling(unix_micros)
}

/// The error a grant gets once the counter is exhausted (never in practice:
/// seeded from the clock it lasts until about the year 2255).
pub const EXHAUSTED: &str =
    "ERR fencing tokens exhausted on this server (counter reached 2^53-1); no new locks";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_strictly_increase_and_never_go_below_observed() {
        let c = TokenCounter::new();
        assert_eq!(c.next(0), Some(1));
        assert_eq!(c.next(0), Some(2));
        c.observe(100);
        assert_eq!(c.next(0), Some(101));
        c.observe(50); // an older token seen later must not lower the counter
        assert_eq!(c.next(0), Some(102));
        assert_eq!(c.last(), 102);
    }

    #[test]
    fn a_requested_floor_is_granted_exactly_within_the_ceiling() {
        let now = 1_000_000_000u64;
        let c = TokenCounter::new();
        assert_eq!(c.next(floor(now, now + 500)), Some(now + 500));
        assert_eq!(
            c.next(floor(now, now + 500)),
            Some(now + 501),
            "never twice"
        );
        assert_eq!(floor(now, 0), now);
        assert_eq!(floor(now, now - 5), now);
        assert_eq!(floor(now, u64::MAX), fence_ceiling(now));
    }

    #[test]
    fn tokens_follow_the_clock_and_survive_it_going_back() {
        let c = TokenCounter::new();
        assert_eq!(c.next(5_000), Some(5_000));
        assert_eq!(c.next(5_000), Some(5_001));
        assert_eq!(c.next(9_000), Some(9_000));
        assert_eq!(
            c.next(1_000),
            Some(9_001),
            "a clock jump back changes nothing"
        );
    }

    #[test]
    fn the_counter_stops_at_the_bound_instead_of_wrapping() {
        let c = TokenCounter::new();
        c.observe(u64::MAX); // a hostile persisted value is clamped
        assert_eq!(c.last(), MAX_TOKEN);
        assert_eq!(c.next(0), None);
        assert_eq!(c.next(u64::MAX), None);
        assert_eq!(c.last(), MAX_TOKEN);
        let c = TokenCounter::new();
        c.observe(MAX_TOKEN - 1);
        assert_eq!(c.next(0), Some(MAX_TOKEN));
        assert_eq!(c.next(0), None);
        let c = TokenCounter::new();
        assert_eq!(c.next(u64::MAX), Some(MAX_TOKEN), "a clock past 2255");
    }

    #[test]
    fn a_restarted_server_is_above_every_earlier_token() {
        let crash = 1_800_000_000_000_000u64; // µs, year 2027
        let before = TokenCounter::new();
        before.observe(start_seed(crash - 5_000_000));
        before.next(crash).unwrap();
        before.observe(fence_ceiling(crash)); // fenced as high as allowed
                                              // Restarted a millisecond later with nothing persisted.
        let after = TokenCounter::new();
        let restart = crash + 1_000;
        after.observe(start_seed(restart));
        assert!(after.next(restart).unwrap() > before.last());
        assert!(fence_ceiling(u64::MAX) <= MAX_TOKEN);
        assert!(replay_ceiling(u64::MAX) <= MAX_TOKEN);
        let now = 1_800_000_000_000_000;
        assert_eq!(replay_ceiling(now), now + FENCE_SKEW_US + REPLAY_SLACK_US);
    }
}
