//! Is the server pausing writes right now (`CLIENT PAUSE ms WRITE|ALL`,
//! `FAILOVER`)? While it is, nothing may be written or propagated: Redis
//! asserts in `propagateNow` (7.0: `!(areClientsPaused() &&
//! !server.client_pause_in_transaction)`) and dies. Commands are held back
//! by Redis itself during a pause, but module timers and events still run,
//! so timer- and cron-driven writes (hand-offs, take-backs, active expiry)
//! must ask here first and put themselves off.
//!
//! Redis 7.0 offers modules no pause flag (no `REDISMODULE_CTX_FLAGS_*` bit,
//! no server event, no INFO field). redis-server is linked with `-rdynamic`
//! on Linux (src/Makefile, for its crash-log stack traces), so the very
//! predicate of that assertion is in its dynamic symbol table (Debian's
//! 7.0.15: `nm -D /usr/bin/redis-server | grep areClientsPaused`). We look
//! it up once with `dlsym`: `int areClientsPaused(void)` on 6.2/7.0, or
//! `uint32_t isPausedActions(uint32_t)` asked for PAUSE_ACTION_REPLICA on
//! 7.2+ (the bit its assertion checks). Without either we cannot tell and
//! report "not paused", as before; the module logs a warning at load
//! (`probe_found`).

use once_cell::sync::Lazy;
use std::ffi::{c_int, c_void, CStr};

/// `PAUSE_ACTION_REPLICA` in Redis 7.2 and 7.4 `server.h`: propagation to
/// replicas (and the AOF) is paused.
const PAUSE_ACTION_REPLICA: u32 = 1 << 4;

#[derive(Clone, Copy)]
enum Probe {
    /// Redis 6.2 / 7.0.
    AreClientsPaused(unsafe extern "C" fn() -> c_int),
    /// Redis 7.2 and later.
    IsPausedActions(unsafe extern "C" fn(u32) -> u32),
}

fn symbol(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: RTLD_DEFAULT searches the process's global symbols; the name
    // is NUL-terminated. A null result means "not exported".
    let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!sym.is_null()).then_some(sym)
}

static PROBE: Lazy<Option<Probe>> = Lazy::new(|| {
    if let Some(sym) = symbol(c"areClientsPaused") {
        // SAFETY: the exported areClientsPaused is `int (void)` wherever it exists.
        let f = unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(sym) };
        return Some(Probe::AreClientsPaused(f));
    }
    let sym = symbol(c"isPausedActions")?;
    // SAFETY: the exported isPausedActions is `uint32_t (uint32_t)` (7.2+).
    let f = unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn(u32) -> u32>(sym) };
    Some(Probe::IsPausedActions(f))
});

/// True while the server pauses writes (or all clients). Main thread only.
pub fn writes_paused() -> bool {
    // SAFETY: both functions only read server state; we are on the main
    // thread (module commands, timers and events all run there).
    decide(PROBE.map(|probe| unsafe {
        match probe {
            Probe::AreClientsPaused(f) => f() != 0,
            Probe::IsPausedActions(f) => f(PAUSE_ACTION_REPLICA) != 0,
        }
    }))
}

/// Whether the server exports a probe (false: pauses go undetected).
pub fn probe_found() -> bool {
    PROBE.is_some()
}

/// The pure decision: the probe's answer, or "not paused" without a probe
/// (we must never put writes off forever on a guess).
fn decide(probe_answer: Option<bool>) -> bool {
    probe_answer.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_answer_decides() {
        assert!(decide(Some(true)));
        assert!(!decide(Some(false)));
        assert!(!decide(None), "no probe: never defer forever");
    }

    #[test]
    fn without_a_redis_server_nothing_is_paused() {
        // The unit-test binary exports neither probe.
        assert!(!probe_found());
        assert!(!writes_paused());
    }
}
