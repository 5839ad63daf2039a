//! The per-server fencing-token counter and the rules that keep tokens
//! strictly increasing: on one server, across a restart, and per lock name
//! across the nodes of a cluster when the name's slot moves.
//!
//! Tokens follow the wall clock plus a fixed lead: a grant gets
//! `max(last + 1, now + TOKEN_LEAD_US)` in µs (`floor`), so every node's
//! tokens sit at its (shared, NTP-synced) clock + 60 s, whenever the node
//! started. A name whose slot moves from one cluster node to another
//! (`MIGRATE`, a reshard, a failover) therefore gets a larger token on the
//! new node than its last grant on the old one, as long as the two clocks
//! differ by less than the time between the two grants. Until 2026-11-28
//! the floor was the bare clock while a start seeded the counter at the
//! clock + 60 s: a node under a minute old granted up to 60 s above an
//! older one, and a slot moved from it went back by up to a minute.
//!
//! The counter alone keeps a server's own tokens increasing when its clock
//! steps back (`last + 1`), and persisted counters (RDB aux data, every
//! replicated/AOF grant) are observed on top of it.
//!
//! Across a restart that lost every byte of data: a server starts counting
//! at its clock + 60 s (`start_seed`, the floor of a grant at that moment).
//! Its tokens before a crash at t were at most t + 60 s, except for tokens
//! raised further by a peer or client whose clock ran ahead (`LOCK.FENCE`,
//! `MINTOKEN`, a `RESTORE`: accepted up to the clock + 60 s lead + 60 s of
//! skew, `fence_ceiling`); after the restart at t' the first grant is above
//! t' + 60 s. So tokens increase across it when the clocks differ by less
//! than the time the server was down plus its restart guard, and the clock
//! does not go back across the restart.
//!
//! Tokens never exceed `MAX_TOKEN` = 2^53 − 1 (the year 2255 in µs), so
//! they stay exact in JavaScript and Lua numbers; at that bound the counter
//! stops (grants are refused) rather than wrapping.

use std::sync::atomic::{AtomicU64, Ordering};

/// Largest token ever handed out or accepted: exact in an IEEE double.
pub const MAX_TOKEN: u64 = (1 << 53) - 1;

/// How far above its wall clock (µs) a server's tokens run: every grant is
/// at least the clock + this lead, the same on every node, so that a node
/// that started a moment ago grants what a node that started long ago does.
pub const TOKEN_LEAD_US: u64 = 60_000_000;

/// How far above its own tokens' floor (clock + `TOKEN_LEAD_US`) a server
/// accepts a token: far more than the clock skew between NTP-synced nodes.
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

/// The highest token `LOCK.FENCE`, `MINTOKEN` or a `RESTORE` reaches at
/// wall-clock `unix_micros`: a peer's tokens (its clock + 60 s) with its
/// clock up to `FENCE_SKEW_US` ahead of this one.
pub fn fence_ceiling(unix_micros: u64) -> u64 {
    unix_micros
        .saturating_add(TOKEN_LEAD_US + FENCE_SKEW_US)
        .min(MAX_TOKEN)
}

/// How far above a server's clock a token may be when it applies what a
/// primary decided (a replicated or replayed `LOCK.APPLY`, a `RESTORE` on a
/// replica): a primary's tokens are at most 120 s above its own clock, but
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
/// clock + `TOKEN_LEAD_US`, or the request capped at the fence ceiling. A
/// quorum client asks every node for the same floor a little above that,
/// so nodes whose counters are below it all grant exactly that token: the
/// quorum token is then already on a majority and the fencing round is
/// skipped.
pub fn floor(unix_micros: u64, requested: u64) -> u64 {
    start_seed(unix_micros).max(requested.min(fence_ceiling(unix_micros)))
}

/// Where a server starts counting at wall-clock `unix_micros`: the floor of
/// a grant at that moment, so that a fresh node is not ahead of the others.
pub fn start_seed(unix_micros: u64) -> u64 {
    unix_micros.saturating_add(TOKEN_LEAD_US).min(MAX_TOKEN)
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
        let lead = TOKEN_LEAD_US;
        let c = TokenCounter::new();
        assert_eq!(c.next(floor(now, now + lead + 500)), Some(now + lead + 500));
        assert_eq!(
            c.next(floor(now, now + lead + 500)),
            Some(now + lead + 501),
            "never twice"
        );
        assert_eq!(floor(now, 0), now + lead);
        assert_eq!(floor(now, now + 5), now + lead, "below the lead: the lead");
        assert_eq!(floor(now, u64::MAX), fence_ceiling(now));
        assert_eq!(fence_ceiling(now), now + lead + FENCE_SKEW_US);
        assert_eq!(start_seed(now), floor(now, 0), "a start is a grant's floor");
    }

    /// A node that started later (or a minute ago) and one that started long
    /// before grant from the same floor, so a name's slot moved between them
    /// (either way) gets a larger token than its last grant: before
    /// 2026-11-28 the young node was up to 60 s ahead and the move went back.
    #[test]
    fn a_slot_moved_between_nodes_started_at_different_times_gets_a_larger_token() {
        let t0 = 1_800_000_000_000_000u64; // µs, year 2027
        let old = TokenCounter::new();
        old.observe(start_seed(t0));
        for s in 0..600 {
            old.next(floor(t0 + s * 100_000, 0)).unwrap(); // a minute of grants
        }
        let young = TokenCounter::new();
        let started = t0 + 60_000_000;
        young.observe(start_seed(started));
        let on_young = young.next(floor(started + 1_000, 0)).unwrap();
        let on_old = old.next(floor(started + 2_000, 0)).unwrap();
        assert!(on_old > on_young, "{on_old} after {on_young}");
        let back = young.next(floor(started + 3_000, 0)).unwrap();
        assert!(back > on_old, "{back} after {on_old}");
        // A clock 500 µs behind still orders grants 1 ms apart.
        let behind = old.next(floor(started + 4_000 - 500, 0)).unwrap();
        assert!(behind > back, "{behind} after {back}");
    }

    #[test]
    fn tokens_increase_on_one_node_when_its_clock_steps_back() {
        let now = 1_800_000_000_000_000u64;
        let c = TokenCounter::new();
        c.observe(start_seed(now));
        let before = c.next(floor(now + 10_000_000, 0)).unwrap();
        let after = c.next(floor(now - 3_600_000_000, 0)).unwrap();
        assert_eq!(after, before + 1);
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
        before.next(floor(crash, 0)).unwrap();
        // Restarted a millisecond later with nothing persisted.
        let after = TokenCounter::new();
        let restart = crash + 1_000;
        after.observe(start_seed(restart));
        assert!(after.next(floor(restart, 0)).unwrap() > before.last());
        // Fenced to a peer's token whose clock ran 5 s ahead: above it once
        // the server was down (restart and guard) for longer than the skew.
        before.observe(start_seed(crash + 5_000_000));
        let after = TokenCounter::new();
        let restart = crash + 5_001_000;
        after.observe(start_seed(restart));
        assert!(after.next(floor(restart, 0)).unwrap() > before.last());
        assert!(fence_ceiling(u64::MAX) <= MAX_TOKEN);
        assert!(replay_ceiling(u64::MAX) <= MAX_TOKEN);
        assert!(start_seed(u64::MAX) <= MAX_TOKEN);
        let now = 1_800_000_000_000_000;
        assert_eq!(
            replay_ceiling(now),
            now + TOKEN_LEAD_US + FENCE_SKEW_US + REPLAY_SLACK_US
        );
    }
}
