//! The servers' clocks as this process sees them, for a queued wait's
//! ticket (`waiting.rs`). A ticket orders every server's queue, so it must
//! be one number on every server and mean the same for every client. It
//! was the client's own wall clock when its `lock()` call began: a client
//! an hour behind then went first in every queue, one an hour ahead
//! starved itself, and one past 2^53 µs (above the largest ticket a server
//! takes) was refused on every contended wait (2026-11-28: with 4 waiting
//! loops a side, 47 sections to the skewed side's 456 in 10 s).
//!
//! Now a ticket is the call's start on the servers' clock: each shared
//! connection reads its server's `TIME` once when it opens, against this
//! process's monotonic clock (the offset is off by at most half that round
//! trip), and a call's ticket is the median of the nodes' readings of its
//! start. So is a lock request's token floor (`MINTOKEN`, see
//! `servers_time`). The client's wall clock plays no part, and the servers' clocks
//! are what plain waiters (without `TICKET`) are queued by anyway. Only
//! when no node has been read (every `TIME` refused: an ACL without
//! `+time`) is the client's own clock used, kept within the range a server
//! takes.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// The largest ticket a server takes (2^53 − 1).
pub(crate) const MAX_TICKET: u64 = (1 << 53) - 1;

/// No reading yet.
const UNKNOWN: i64 = i64::MIN;

/// The process's origin for monotonic microseconds.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// `at` in µs since `epoch()`, negative before it.
fn mono_micros(at: Instant) -> i64 {
    let origin = epoch();
    match at.checked_duration_since(origin) {
        Some(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
        None => -i64::try_from((origin - at).as_micros()).unwrap_or(i64::MAX),
    }
}

/// A reading older than this is taken again before a queued wait uses it.
const MAX_AGE_US: i64 = 600_000_000;

/// How far the client's own wall clock may have moved against its
/// monotonic clock since a reading before it is taken again: the monotonic
/// clock stands still while the machine sleeps (a laptop's suspend, a
/// paused VM), and a reading from before would then put every ticket that
/// long in the past, first in every queue.
const MAX_MOVE_US: i64 = 1_000_000;

/// One server's clock: its µs since the Unix epoch minus ours (monotonic),
/// and when that was read.
#[derive(Debug)]
pub(crate) struct ServerClock {
    offset: AtomicI64,
    /// The monotonic µs of the reading.
    read_at: AtomicI64,
    /// The client's own wall clock minus its monotonic one then.
    own_offset: AtomicI64,
}

impl Default for ServerClock {
    fn default() -> Self {
        ServerClock {
            offset: AtomicI64::new(UNKNOWN),
            read_at: AtomicI64::new(0),
            own_offset: AtomicI64::new(0),
        }
    }
}

/// Wall-clock µs minus monotonic µs at `at`.
fn own_offset(own_wall_micros: u64, at: Instant) -> i64 {
    i64::try_from(own_wall_micros)
        .unwrap_or(i64::MAX)
        .saturating_sub(mono_micros(at))
}

impl ServerClock {
    /// Record a `TIME` reply (`server_micros`) to a request sent at `sent`
    /// and answered at `received`, when the client's own wall clock read
    /// `own_wall_micros`: the server read its clock in between, taken as
    /// the midpoint.
    pub(crate) fn read(
        &self,
        sent: Instant,
        received: Instant,
        server_micros: u64,
        own_wall_micros: u64,
    ) {
        let mid = sent + received.saturating_duration_since(sent) / 2;
        let server = i64::try_from(server_micros).unwrap_or(i64::MAX);
        let offset = server.saturating_sub(mono_micros(mid));
        let own = own_offset(own_wall_micros, received);
        self.read_at.store(mono_micros(received), Ordering::Relaxed);
        self.own_offset.store(own, Ordering::Relaxed);
        // Never the sentinel, even for an absurd reading.
        self.offset
            .store(offset.max(UNKNOWN + 1), Ordering::Relaxed);
    }

    /// The offset read last, if any.
    pub(crate) fn offset(&self) -> Option<i64> {
        let offset = self.offset.load(Ordering::Relaxed);
        (offset != UNKNOWN).then_some(offset)
    }

    /// Whether the reading should be taken again at `now` (the client's
    /// wall clock then: `own_wall_micros`): older than `MAX_AGE_US`, or the
    /// client's wall clock moved against its monotonic one by more than
    /// `MAX_MOVE_US` since (a sleep, or a step of the wall clock). Never
    /// without a reading (the server refused `TIME`, or none came yet).
    pub(crate) fn stale(&self, now: Instant, own_wall_micros: u64) -> bool {
        if self.offset().is_none() {
            return false;
        }
        let age = mono_micros(now).saturating_sub(self.read_at.load(Ordering::Relaxed));
        let moved = own_offset(own_wall_micros, now)
            .saturating_sub(self.own_offset.load(Ordering::Relaxed));
        age > MAX_AGE_US || moved.saturating_abs() > MAX_MOVE_US
    }
}

/// The servers' time at `at`, in µs since the Unix epoch: the median of
/// what the nodes' clocks (`offsets`) read then (the lower one of the two
/// middle readings for an even count), so that a minority of servers with
/// clocks off cannot move it; without any reading, `own_wall_micros` (the
/// client's wall clock then). Always within what a server takes as a
/// ticket or token: 1 to 2^53 − 1. A queued wait's ticket is this at the
/// call's start. A lock request's token floor (`MINTOKEN`) is taken from
/// it too: from a clock an hour ahead, the floor raised every server to
/// its cap (its own clock + 60 s then), each to another token, and every lock
/// of that client then needed a fencing round, which often failed on a
/// server whose clock was a little behind (the client got 0.2 to 0.3 of
/// the sections, not half, with its tickets already on the servers' clock).
pub(crate) fn servers_time(
    offsets: impl Iterator<Item = i64>,
    at: Instant,
    own_wall_micros: u64,
) -> u64 {
    let at = mono_micros(at);
    let mut readings: Vec<i64> = offsets.map(|o| o.saturating_add(at)).collect();
    readings.sort_unstable();
    let chosen = match readings.len() {
        0 => own_wall_micros,
        n => u64::try_from(readings[(n - 1) / 2]).unwrap_or(0),
    };
    chosen.clamp(1, MAX_TICKET)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn read_at(server_micros: u64, sent: Instant, rtt: Duration) -> i64 {
        let clock = ServerClock::default();
        assert_eq!(clock.offset(), None);
        clock.read(sent, sent + rtt, server_micros, 0);
        clock.offset().unwrap()
    }

    #[test]
    fn a_reading_is_taken_again_when_old_or_when_the_machine_slept() {
        let t0 = Instant::now();
        let wall = 1_800_000_000_000_000u64;
        let clock = ServerClock::default();
        assert!(
            !clock.stale(t0, wall),
            "nothing read: nothing to take again"
        );
        clock.read(t0, t0, wall, wall);
        let later = t0 + Duration::from_secs(60);
        assert!(!clock.stale(later, wall + 60_000_000), "a minute on");
        assert!(
            !clock.stale(later, wall + 60_900_000),
            "the wall clock slewed"
        );
        // The wall clock moved an hour more than the monotonic one: the
        // machine slept (or the clock was stepped).
        assert!(clock.stale(later, wall + 3_660_000_000));
        assert!(clock.stale(later, wall - 3_540_000_000), "stepped back");
        let old = t0 + Duration::from_secs(601);
        assert!(clock.stale(old, wall + 601_000_000), "ten minutes old");
        clock.read(old, old, wall, wall + 601_000_000);
        assert!(!clock.stale(old, wall + 601_000_000), "read again");
    }

    #[test]
    fn a_ticket_is_the_calls_start_on_the_servers_clock() {
        let t0 = Instant::now();
        let offset = read_at(1_800_000_000_000_000, t0, Duration::from_micros(200));
        // Read 100 µs after t0 (the midpoint): t0 is 100 µs earlier (to
        // the µs: the instants are truncated to whole µs).
        let at_t0 = servers_time([offset].into_iter(), t0, 5);
        assert!(at_t0.abs_diff(1_799_999_999_999_900) <= 1, "{at_t0}");
        // A call 3 s later gets a ticket 3 s later, whatever the wall clock.
        let later = t0 + Duration::from_secs(3);
        let at_later = servers_time([offset].into_iter(), later, u64::MAX);
        assert!(at_later.abs_diff(at_t0 + 3_000_000) <= 1, "{at_later}");
    }

    #[test]
    fn the_median_server_sets_it() {
        let t0 = Instant::now();
        let rtt = Duration::ZERO;
        let honest = read_at(1_800_000_000_000_000, t0, rtt);
        let near = read_at(1_800_000_000_000_700, t0, rtt);
        let hour_ahead = read_at(1_800_003_600_000_000, t0, rtt);
        let three = [hour_ahead, honest, near].into_iter();
        assert_eq!(servers_time(three, t0, 0), 1_800_000_000_000_700);
        let two = [near, honest].into_iter();
        assert_eq!(
            servers_time(two, t0, 0),
            1_800_000_000_000_000,
            "the lower one"
        );
    }

    #[test]
    fn without_a_reading_the_own_clock_stays_in_the_servers_range() {
        let t0 = Instant::now();
        assert_eq!(servers_time([].into_iter(), t0, 1_234), 1_234);
        // A clock past 2^53 µs (the year 2255), or before 1970.
        assert_eq!(servers_time([].into_iter(), t0, u64::MAX), MAX_TICKET);
        assert_eq!(servers_time([].into_iter(), t0, 0), 1);
        // A server whose clock reads past it.
        let far = read_at(u64::MAX, t0, Duration::ZERO);
        assert_eq!(servers_time([far].into_iter(), t0, 7), MAX_TICKET);
    }

    #[test]
    fn instants_before_the_epoch_count_back() {
        let before = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        let _ = epoch();
        let after = Instant::now();
        let gap = mono_micros(after) - mono_micros(before);
        assert!(gap >= 2_000, "{gap}");
    }
}
