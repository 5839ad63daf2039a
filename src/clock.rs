//! Time sources. Lock deadlines use the monotonic clock so that a jump of the
//! server's wall clock neither frees nor extends a lock; the wall clock is
//! only used to seed fencing tokens.

use once_cell::sync::Lazy;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

static START: Lazy<Instant> = Lazy::new(Instant::now);

/// Monotonic milliseconds since the module was loaded, starting at 1 so that
/// 0 can mean "never" in bookkeeping.
pub fn now_ms() -> u64 {
    START.elapsed().as_millis() as u64 + 1
}

/// Wall-clock microseconds since the Unix epoch, as the server reads its
/// clock (`RedisModule_Microseconds`, or milliseconds on Redis 7.0): one
/// clock for the server and its module, even where the module's own libc
/// calls are bound apart from the server's (Valkey loads modules with
/// RTLD_DEEPBIND). Without a server (unit tests), the system clock.
pub fn unix_micros() -> u64 {
    #[cfg(not(test))]
    if let Some(us) = crate::ffi::server_unix_micros() {
        return us;
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}
