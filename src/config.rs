//! Module configuration: `CONFIG SET/GET lock.<name>` and
//! `loadmodule <path> <name> <value> ...`. Registered in `lib.rs`.

use crate::args::Limits;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

pub static MAX_TTL_MS: AtomicI64 = AtomicI64::new(DEFAULT_MAX_TTL_MS);
pub static MAX_OWNER_LEN: AtomicI64 = AtomicI64::new(DEFAULT_MAX_OWNER_LEN);
pub static RESTART_DELAY_MS: AtomicI64 = AtomicI64::new(0);

/// One day: longer leases belong in a database, not a lock service.
pub const DEFAULT_MAX_TTL_MS: i64 = 86_400_000;
/// Room for a UUID plus host/thread ids, as Redisson-style owners use.
pub const DEFAULT_MAX_OWNER_LEN: i64 = 256;

pub fn restart_delay_ms() -> u64 {
    RESTART_DELAY_MS.load(Relaxed).max(0) as u64
}

pub fn limits() -> Limits {
    Limits {
        max_ttl: MAX_TTL_MS.load(Relaxed) as u64,
        max_owner_len: MAX_OWNER_LEN.load(Relaxed) as usize,
    }
}
