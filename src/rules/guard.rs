//! The restart / failover guard. A node that lost its memory (restarted
//! without fsync'd persistence) or a replica just promoted (it may have
//! missed the latest grants) could hand out a lock someone else still holds
//! on the other nodes. For `lock.restart-delay-ms` after load or promotion,
//! acquiring a lock that is not already held is refused with `-TRYAGAIN`;
//! holders can still release, extend and renew. A delay >= the longest TTL
//! in use lets every lock granted before the restart expire first.

use crate::rules::clock;
use crate::rules::lock::Millis;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Monotonic deadline of the guard; 0 = off.
static UNTIL: AtomicU64 = AtomicU64::new(0);

/// Refuse new locks for `delay` ms from now.
pub fn arm(delay: Millis) {
    UNTIL.store(
        if delay == 0 {
            0
        } else {
            clock::now_ms() + delay
        },
        Relaxed,
    );
}

/// Milliseconds the guard still refuses new locks (None when off).
pub fn remaining(now: Millis) -> Option<Millis> {
    let until = UNTIL.load(Relaxed);
    (until > now).then(|| until - now)
}

/// The error a refused acquire gets.
pub fn refusal(left: Millis) -> String {
    format!(
        "TRYAGAIN lock server restarted or was promoted: new locks refused for another {left} ms (lock.restart-delay-ms)"
    )
}

/// The log line that says what the guard does and why.
pub fn describe(why: &str, delay: Millis, complete_persistence: bool) -> String {
    if complete_persistence {
        format!("lock: {why}; restart guard off: the AOF (appendfsync always, RDB preamble) holds every grant")
    } else if delay == 0 {
        format!(
            "lock: {why}; restart guard OFF (lock.restart-delay-ms 0) without an always-fsync'd AOF: \
             in a quorum this node may grant a lock another client still holds on the other nodes"
        )
    } else {
        format!(
            "lock: {why}; restart guard on: new locks refused (TRYAGAIN) for {delay} ms, since the data \
             may lack recent grants (no AOF with appendfsync always was loaded); see lock.restart-delay-ms"
        )
    }
}

/// Whether an AOF this server loaded can be trusted to hold every grant and
/// the token counter: fsync'd on every write, and rewritten with the RDB
/// preamble (a plain rewrite keeps the locks but not the counter).
pub fn persistence_is_complete(appendonly: &str, appendfsync: &str, preamble: &str) -> bool {
    appendonly.eq_ignore_ascii_case("yes")
        && appendfsync.eq_ignore_ascii_case("always")
        && preamble.eq_ignore_ascii_case("yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_counts_down_and_can_be_off() {
        arm(0);
        assert_eq!(remaining(clock::now_ms()), None);
        arm(10_000);
        let left = remaining(clock::now_ms()).unwrap();
        assert!(left > 9_000 && left <= 10_000);
        assert_eq!(remaining(clock::now_ms() + 10_001), None);
        assert!(refusal(5).starts_with("TRYAGAIN "));
        arm(0);
    }

    #[test]
    fn only_an_always_fsynced_aof_skips_the_guard() {
        assert!(persistence_is_complete("yes", "always", "yes"));
        assert!(!persistence_is_complete("yes", "everysec", "yes"));
        assert!(!persistence_is_complete("no", "always", "yes"));
        assert!(!persistence_is_complete("yes", "always", "no"));
    }
}
