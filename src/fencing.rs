//! The per-server fencing-token counter and the rules that keep tokens
//! strictly increasing, also across a restart that lost every byte of data.
//!
//! Tokens follow the wall clock: a grant gets `max(last + 1, now in µs)`,
//! so every node's tokens sit near the (shared, NTP-synced) clock and a
//! server that lost its counter starts near where it left off.
//!
//! The rule that makes that safe, in one line: **no token handed out or
//! accepted exceeds the server's clock + `FENCE_SKEW_US` (60 s), and after a
//! load that may lack recent grants the server grants nothing for at least
//! that long** (the restart guard: `lock.restart-delay-ms`, whose automatic
//! value is never shorter). Before a crash at time t, every token was at most
//! t + 60 s; the first grant after the restart comes at t' ≥ t + 60 s and
//! gets a token ≥ t'. Assumes the clock does not go back across the restart.
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

/// The shortest restart guard that keeps tokens increasing across a load
/// that may lack recent grants (see the rule above), in ms.
pub const MIN_RESTART_GUARD_MS: u64 = FENCE_SKEW_US / 1000;

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
    fn after_the_guard_a_restarted_server_is_above_every_earlier_token() {
        let crash = 1_800_000_000_000_000u64; // µs, year 2027
        let before = TokenCounter::new();
        before.next(crash - 10);
        assert!(before.next(crash).unwrap() <= fence_ceiling(crash));
        before.observe(fence_ceiling(crash)); // fenced as high as allowed
                                              // Restarted with nothing persisted; first grant after the guard.
        let after = TokenCounter::new();
        let first_grant = crash + MIN_RESTART_GUARD_MS * 1000;
        assert!(after.next(first_grant).unwrap() >= before.last());
        assert!(fence_ceiling(u64::MAX) <= MAX_TOKEN);
    }
}
