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

/// What outlives a restart about the guard (kept in a small file next to
/// the data, see `glue/guard_state.rs`): until when new locks stay refused
/// (wall clock, ms), and whether persistence was incomplete at some point
/// since (an AOF written then lacks grants, whatever the config says now).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Marker {
    pub until_unix_ms: u64,
    pub tainted: bool,
    /// The data was last written while this server was a replica: its AOF
    /// holds what reached it, not every grant its primary made (after it
    /// stopped, say). Restarted from it as a primary, it needs the full
    /// guard, as a promotion gets (helper-40: a replica restarted as a
    /// primary granted a lock its old primary had given to another owner).
    pub replica: bool,
}

impl Marker {
    pub fn parse(text: &str) -> Option<Marker> {
        let mut words = text.split_whitespace();
        let until_unix_ms = words.next()?.parse().ok()?;
        let tainted = words.next()? == "1";
        // Absent in a marker written before the flag existed.
        let replica = words.next() == Some("1");
        Some(Marker {
            until_unix_ms,
            tainted,
            replica,
        })
    }

    pub fn format(&self) -> String {
        let flag = |b: bool| u8::from(b);
        let (until, tainted, replica) = (self.until_unix_ms, self.tainted, self.replica);
        format!("{until} {} {}\n", flag(tainted), flag(replica))
    }
}

/// Why the guard after a load is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A complete AOF, written by this server as a primary with persistence
    /// complete all along: no guard.
    Complete,
    /// A complete AOF, but an earlier guard had time left (kept).
    Earlier,
    /// Persistence was incomplete at some point since the AOF was written.
    Tainted,
    /// The data was written while this server was a replica, or it was just
    /// promoted.
    FromReplica,
    /// `redis-lock.guard` missing, empty or unreadable: the data's history
    /// is unknown (a torn write, a restored or moved data dir).
    NoMarker,
    /// No complete AOF was loaded (a start, an RDB, incomplete settings).
    Incomplete,
}

/// The guard after loading data: none if it came from a complete AOF
/// written by this server as a primary while persistence stayed complete,
/// else `full_delay`; and never shorter than what a guard armed before the
/// restart still had left. Without a marker, nothing is known of that
/// history: the full guard (helper-41: a missing or torn marker turned it
/// off for a replica's AOF).
pub fn delay_after_load(
    complete: bool,
    full_delay: Millis,
    marker: Option<Marker>,
    now_unix_ms: u64,
) -> (Millis, Reason) {
    let reason = match marker {
        _ if !complete => Reason::Incomplete,
        None => Reason::NoMarker,
        Some(m) if m.replica => Reason::FromReplica,
        Some(m) if m.tainted => Reason::Tainted,
        Some(_) => Reason::Complete,
    };
    let base = if reason == Reason::Complete {
        0
    } else {
        full_delay
    };
    // Never longer than a full guard: a deadline set while the clock ran
    // ahead (or edited by hand) kept a node refusing for an hour
    // (helper-43).
    let left = marker.map_or(0, |m| m.until_unix_ms.saturating_sub(now_unix_ms));
    let left = left.min(full_delay);
    match reason {
        Reason::Complete if left > 0 => (left, Reason::Earlier),
        _ => (base.max(left), reason),
    }
}

/// Why a guard is on when the data itself cannot tell: a promoted replica,
/// or an AOF written while this server was one.
pub const FROM_A_REPLICA: &str = "a replica's data may lack its primary's latest grants";

/// The log line that says what the guard does and why.
pub fn describe(why: &str, delay: Millis, reason: Reason) -> String {
    let because = match reason {
        Reason::Complete => {
            return format!(
                "lock: {why}; restart guard off: the AOF (appendfsync always, RDB preamble) holds every grant"
            )
        }
        _ if delay == 0 => {
            return format!(
                "lock: {why}; restart guard OFF (lock.restart-delay-ms 0): in a quorum this node may \
                 grant a lock another client still holds on the other nodes"
            )
        }
        Reason::Earlier => {
            "the rest of an earlier guard, kept in redis-lock.guard; the AOF holds every grant, \
             so later restarts are not guarded"
        }
        Reason::Tainted => {
            "persistence was incomplete at some point since this AOF was written \
             (appendonly, appendfsync or aof-use-rdb-preamble), so it may lack grants"
        }
        Reason::FromReplica => FROM_A_REPLICA,
        Reason::NoMarker => {
            "redis-lock.guard is missing or unreadable, so nothing is known of how the data was written"
        }
        Reason::Incomplete => {
            "the data may lack recent grants (no AOF with appendfsync always was loaded)"
        }
    };
    format!(
        "lock: {why}; restart guard on: new locks refused (TRYAGAIN) for {delay} ms, since {because}; \
         see lock.restart-delay-ms"
    )
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
    fn the_log_line_names_why_the_guard_is_on() {
        assert!(describe("AOF loaded", 0, Reason::Complete).contains("guard off"));
        let carried = describe("AOF loaded", 5000, Reason::Earlier);
        assert!(
            carried.contains("guard on") && carried.contains("redis-lock.guard"),
            "{carried}"
        );
        assert!(!carried.contains("no AOF"), "{carried}");
        let plain = describe("data loaded", 5000, Reason::Incomplete);
        assert!(plain.contains("no AOF with appendfsync always"), "{plain}");
        assert!(describe("data loaded", 0, Reason::Incomplete).contains("OFF"));
        // helper-40/41: a promotion or a tainted AOF said "no AOF ... was
        // loaded" or "the AOF holds every grant".
        let promoted = describe("promoted to primary", 5000, Reason::FromReplica);
        assert!(promoted.contains(FROM_A_REPLICA) && !promoted.contains("no AOF"));
        let tainted = describe("AOF loaded", 5000, Reason::Tainted);
        assert!(tainted.contains("incomplete") && !tainted.contains("holds every grant"));
        let unknown = describe("AOF loaded", 5000, Reason::NoMarker);
        assert!(unknown.contains("missing or unreadable"), "{unknown}");
    }

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
    fn a_guard_survives_a_restart_and_a_taint_forces_one() {
        let m = Marker {
            until_unix_ms: 10_000,
            tainted: false,
            replica: false,
        };
        assert_eq!(Marker::parse(&m.format()), Some(m));
        assert_eq!(Marker::parse("garbage"), None);
        // A complete AOF loaded after the old guard ran out: no guard.
        assert_eq!(
            delay_after_load(true, 600, Some(m), 20_000),
            (0, Reason::Complete)
        );
        // Restarted while the old guard still had 4 s left: those 4 s stay.
        assert_eq!(
            delay_after_load(true, 6_000, Some(m), 6_000),
            (4_000, Reason::Earlier)
        );
        // Persistence was incomplete at some point: the full guard.
        let tainted = Marker { tainted: true, ..m };
        assert_eq!(
            delay_after_load(true, 600, Some(tainted), 20_000),
            (600, Reason::Tainted)
        );
        let none = Some(Marker::default());
        assert_eq!(
            delay_after_load(false, 600, none, 20_000),
            (600, Reason::Incomplete)
        );
        // Written as a replica: the full guard, also after a complete AOF.
        let replica = Marker { replica: true, ..m };
        assert_eq!(Marker::parse(&replica.format()), Some(replica));
        let from_replica = delay_after_load(true, 600, Some(replica), 20_000);
        assert_eq!(from_replica, (600, Reason::FromReplica));
        // A marker from before the flag reads as a primary's.
        assert_eq!(Marker::parse("10000 0"), Some(m));
        // A deadline beyond a full guard (a clock that ran ahead) is cut.
        let far = Marker {
            until_unix_ms: 20_000 + 3_600_000,
            ..m
        };
        let carried = delay_after_load(true, 600, Some(far), 20_000);
        assert_eq!(carried, (600, Reason::Earlier));
        // No marker (deleted, torn, unreadable): nothing known, full guard.
        assert_eq!(Marker::parse(""), None);
        assert_eq!(
            delay_after_load(true, 600, None, 20_000),
            (600, Reason::NoMarker)
        );
    }

    #[test]
    fn only_an_always_fsynced_aof_skips_the_guard() {
        assert!(persistence_is_complete("yes", "always", "yes"));
        assert!(!persistence_is_complete("yes", "everysec", "yes"));
        assert!(!persistence_is_complete("no", "always", "yes"));
        assert!(!persistence_is_complete("yes", "always", "no"));
    }
}
