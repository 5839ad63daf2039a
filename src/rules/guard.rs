//! The restart / failover guard. A node that lost its memory (restarted
//! without fsync'd persistence) or a replica just promoted (it may have
//! missed the latest grants) could hand out a lock someone else still holds
//! on the other nodes. For `lock.restart-delay-ms` after load or promotion,
//! acquiring a lock that is not already held is refused with `-TRYAGAIN`;
//! holders can still release, extend and renew. A delay >= the longest TTL
//! in use lets every lock granted before the restart expire first.

use crate::rules::clock;
use crate::rules::clock::Millis;
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

/// A reading of the machine's boot clock (Linux `CLOCK_BOOTTIME`: never
/// stepped, counts while suspended), told apart from another boot's by the
/// kernel's boot id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Boot {
    pub id: u128,
    pub ms: u64,
}

/// Now, on the wall clock and (where Linux gives it) the boot clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub unix_ms: u64,
    pub boot: Option<Boot>,
}

/// What outlives a restart about the guard (kept in a small file next to
/// the data, see `glue/guard_state.rs`): until when new locks stay refused
/// (wall clock, ms; and on the boot clock, which a clock step does not
/// move), and whether persistence was incomplete at some point since (an
/// AOF written then lacks grants, whatever the config says now).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Marker {
    pub until_unix_ms: u64,
    /// The same deadline on the boot clock of the boot that wrote it.
    pub until_boot: Option<Boot>,
    pub tainted: bool,
    /// The data was last written while this server was a replica: its AOF
    /// holds what reached it, not every grant its primary made (after it
    /// stopped, say). Restarted from it as a primary, it needs the full
    /// guard, as a promotion gets (67937c7: a replica restarted as a
    /// primary granted a lock its old primary had given to another owner).
    pub replica: bool,
}

impl Marker {
    /// A marker whose guard ends `left` ms after `now`.
    pub fn until(now: Now, left: Millis, tainted: bool, replica: bool) -> Marker {
        let until_boot = now.boot.map(|b| Boot {
            ms: b.ms.saturating_add(left),
            ..b
        });
        Marker {
            until_unix_ms: now.unix_ms.saturating_add(left),
            until_boot,
            tainted,
            replica,
        }
    }

    /// How long the guard it records still has at `now`: on the boot clock
    /// when this is the boot that wrote it (a wall clock stepped ahead while
    /// the server was down ended a carried guard at once), else on the wall
    /// clock (a reboot, or a marker from before the boot clock was kept).
    pub fn left(&self, now: Now) -> Millis {
        match (self.until_boot, now.boot) {
            (Some(until), Some(at)) if until.id == at.id => until.ms.saturating_sub(at.ms),
            _ => self.until_unix_ms.saturating_sub(now.unix_ms),
        }
    }

    pub fn parse(text: &str) -> Option<Marker> {
        let mut words = text.split_whitespace();
        // A flag is 0 or 1; anything else is a damaged marker (0daff04:
        // "x" read as "not tainted").
        let flag = |word: &str| match word {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        };
        let until_unix_ms = words.next()?.parse().ok()?;
        let tainted = flag(words.next()?)?;
        // Absent in a marker written before the flag existed.
        let replica = words.next().map_or(Some(false), flag)?;
        // Absent before the boot clock was kept; both or neither.
        let until_boot = match (words.next(), words.next()) {
            (Some(id), Some(ms)) => Some(Boot {
                id: u128::from_str_radix(id, 16).ok()?,
                ms: ms.parse().ok()?,
            }),
            (None, None) => None,
            _ => return None,
        };
        Some(Marker {
            until_unix_ms,
            until_boot,
            tainted,
            replica,
        })
    }

    pub fn format(&self) -> String {
        let flag = |b: bool| u8::from(b);
        let (until, tainted, replica) = (self.until_unix_ms, self.tainted, self.replica);
        let boot = self
            .until_boot
            .map_or(String::new(), |b| format!(" {:032x} {}", b.id, b.ms));
        format!("{until} {} {}{boot}\n", flag(tainted), flag(replica))
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
/// history: the full guard (62a27bb: a missing or torn marker turned it
/// off for a replica's AOF).
pub fn delay_after_load(
    complete: bool,
    full_delay: Millis,
    marker: Option<Marker>,
    now: Now,
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
    // (1605b38).
    let left = marker.map_or(0, |m| m.left(now)).min(full_delay);
    match reason {
        Reason::Complete if left > 0 => (left, Reason::Earlier),
        _ => (base.max(left), reason),
    }
}

/// The guard of a replica promoted to primary: the full guard, and in a
/// cluster twice `cluster-node-timeout` on top. The full guard lets every
/// lock the old primary granted up to the promotion expire; but the old
/// primary goes on granting until it stops serving the slots, and with
/// `CLUSTER FAILOVER TAKEOVER` (no agreement with it first) that is later
/// than the promotion (2026-11-28: re-grants at the end of the guard
/// overlapped its last grants by 0-1 ms). It stops when it hears of the
/// new primary's higher epoch: from the new primary's broadcast at once, or
/// from any node it still talks to (an UPDATE). Cut off from them, it
/// stops when it sees the majority of primaries time out: it pings a node
/// it has not heard from within half a node timeout and marks it failing a
/// node timeout after that ping, so 1.5 timeouts after losing touch (plus
/// a cron tick); the cluster is then down for it and every write refused.
/// Two timeouts cover both with room. Outside a cluster nothing the
/// module sees bounds the old primary (with Sentinel, its
/// `min-replicas-to-write` / `min-replicas-max-lag` do). A guard turned
/// off (0) stays off.
pub fn delay_after_promotion(full: Millis, cluster_node_timeout: Option<Millis>) -> Millis {
    if full == 0 {
        return 0;
    }
    full.saturating_add(cluster_node_timeout.map_or(0, |t| t.saturating_mul(2)))
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
        // 67937c7/62a27bb: a promotion or a tainted AOF said "no AOF ... was
        // loaded" or "the AOF holds every grant".
        let promoted = describe("promoted to primary", 5000, Reason::FromReplica);
        assert!(promoted.contains(FROM_A_REPLICA) && !promoted.contains("no AOF"));
        let tainted = describe("AOF loaded", 5000, Reason::Tainted);
        assert!(tainted.contains("incomplete") && !tainted.contains("holds every grant"));
        let unknown = describe("AOF loaded", 5000, Reason::NoMarker);
        assert!(unknown.contains("missing or unreadable"), "{unknown}");
    }

    #[test]
    fn a_promotion_in_a_cluster_outlasts_the_old_primary() {
        assert_eq!(delay_after_promotion(600_000, None), 600_000);
        assert_eq!(delay_after_promotion(600_000, Some(15_000)), 630_000);
        assert_eq!(delay_after_promotion(0, Some(15_000)), 0, "off stays off");
        assert_eq!(delay_after_promotion(u64::MAX, Some(u64::MAX)), u64::MAX);
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
        // On the wall clock alone (a marker from before the boot clock).
        let wall = |unix_ms| Now {
            unix_ms,
            boot: None,
        };
        let m = Marker {
            until_unix_ms: 10_000,
            ..Marker::default()
        };
        assert_eq!(Marker::parse(&m.format()), Some(m));
        assert_eq!(Marker::parse("garbage"), None);
        // A complete AOF loaded after the old guard ran out: no guard.
        assert_eq!(
            delay_after_load(true, 600, Some(m), wall(20_000)),
            (0, Reason::Complete)
        );
        // Restarted while the old guard still had 4 s left: those 4 s stay.
        assert_eq!(
            delay_after_load(true, 6_000, Some(m), wall(6_000)),
            (4_000, Reason::Earlier)
        );
        // Persistence was incomplete at some point: the full guard.
        let tainted = Marker { tainted: true, ..m };
        assert_eq!(
            delay_after_load(true, 600, Some(tainted), wall(20_000)),
            (600, Reason::Tainted)
        );
        let none = Some(Marker::default());
        assert_eq!(
            delay_after_load(false, 600, none, wall(20_000)),
            (600, Reason::Incomplete)
        );
        // Written as a replica: the full guard, also after a complete AOF.
        let replica = Marker { replica: true, ..m };
        assert_eq!(Marker::parse(&replica.format()), Some(replica));
        let from_replica = delay_after_load(true, 600, Some(replica), wall(20_000));
        assert_eq!(from_replica, (600, Reason::FromReplica));
        // A marker from before the flag reads as a primary's.
        assert_eq!(Marker::parse("10000 0"), Some(m));
        // A deadline beyond a full guard (a clock that ran ahead) is cut.
        let far = Marker {
            until_unix_ms: 20_000 + 3_600_000,
            ..m
        };
        let carried = delay_after_load(true, 600, Some(far), wall(20_000));
        assert_eq!(carried, (600, Reason::Earlier));
        // No marker (deleted, torn, unreadable): nothing known, full guard.
        assert_eq!(Marker::parse(""), None);
        assert_eq!(
            delay_after_load(true, 600, None, wall(20_000)),
            (600, Reason::NoMarker)
        );
    }

    #[test]
    fn a_carried_guard_is_timed_on_the_boot_clock_of_its_boot() {
        let boot = |id, ms| Some(Boot { id, ms });
        let written = Now {
            unix_ms: 1_000_000,
            boot: boot(7, 50_000),
        };
        let m = Marker::until(written, 5_000, false, false);
        assert_eq!(Marker::parse(&m.format()), Some(m));
        // Down 1 s while the wall clock stepped an hour ahead: 4 s left.
        let stepped = Now {
            unix_ms: 1_000_000 + 3_600_000,
            boot: boot(7, 51_000),
        };
        assert_eq!(m.left(stepped), 4_000);
        let carried = delay_after_load(true, 5_000, Some(m), stepped);
        assert_eq!(carried, (4_000, Reason::Earlier));
        // A clock stepped back does not lengthen it either.
        let back = Now {
            unix_ms: 0,
            boot: boot(7, 54_000),
        };
        assert_eq!(m.left(back), 1_000);
        // Another boot: only the wall clock is left to go by.
        let rebooted = Now {
            unix_ms: 1_002_000,
            boot: boot(8, 10),
        };
        assert_eq!(m.left(rebooted), 3_000);
        assert_eq!(Marker::parse("1000 x 0"), None);
        assert_eq!(Marker::parse("1000 0 2"), None);
        // Damaged boot fields: no marker (the full guard).
        assert_eq!(Marker::parse("1000 0 0 7"), None);
        assert_eq!(Marker::parse("1000 0 0 zz 5"), None);
    }

    #[test]
    fn only_an_always_fsynced_aof_skips_the_guard() {
        assert!(persistence_is_complete("yes", "always", "yes"));
        assert!(!persistence_is_complete("yes", "everysec", "yes"));
        assert!(!persistence_is_complete("no", "always", "yes"));
        assert!(!persistence_is_complete("yes", "always", "no"));
    }
}
