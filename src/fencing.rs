//! The per-server fencing-token counter.
//!
//! Tokens must strictly increase across restarts. The counter is persisted
//! (RDB aux data, and every replicated/AOF grant carries its token, which is
//! observed on replay), and at load it is also raised to the wall clock in
//! microseconds. A server that lost all state still starts above every token
//! it handed out before, unless it granted more than a million locks per
//! second on average (impossible for one Redis) or its clock went backwards
//! across the restart.

use std::sync::atomic::{AtomicU64, Ordering};

pub struct TokenCounter(AtomicU64);

impl TokenCounter {
    pub const fn new() -> TokenCounter {
        TokenCounter(AtomicU64::new(0))
    }

    /// Hand out the next token (> every token handed out or observed).
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Never hand out `token` or anything below it again.
    pub fn observe(&self, token: u64) {
        self.0.fetch_max(token, Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_strictly_increase_and_never_go_below_observed() {
        let c = TokenCounter::new();
        assert_eq!(c.next(), 1);
        assert_eq!(c.next(), 2);
        c.observe(100);
        assert_eq!(c.next(), 101);
        c.observe(50); // an older token seen later must not lower the counter
        assert_eq!(c.next(), 102);
        assert_eq!(c.last(), 102);
    }
}
