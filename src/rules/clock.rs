//! Time sources. Lock deadlines use the monotonic clock so that a jump of the
//! server's wall clock neither frees nor extends a lock; the wall clock is
//! only used to seed fencing tokens.

use once_cell::sync::Lazy;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Monotonic milliseconds (`now_ms`): every deadline and TTL in `rules`.
pub type Millis = u64;

static START: Lazy<Instant> = Lazy::new(Instant::now);

/// Monotonic milliseconds since the module was loaded, starting at 1 so that
/// 0 can mean "never" in bookkeeping.
pub fn now_ms() -> u64 {
    START.elapsed().as_millis() as u64 + 1
}

/// Wall-clock microseconds since the Unix epoch from the system clock (0 if
/// the clock is before it). The module prefers the server's reading of it
/// (`ffi::wall_micros`); this is the fallback.
pub fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}
