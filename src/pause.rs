//! Is the server pausing writes right now (`CLIENT PAUSE ms WRITE|ALL`,
//! `FAILOVER`)? While it is, nothing may be written or propagated: Redis
//! 7.0 asserts `!(areClientsPaused() && !client_pause_in_transaction)` in
//! `propagateNow` and dies. Commands are held back by Redis itself during a
//! pause, but module timers still run, so timer-driven writes (hand-offs,
//! take-backs, expiry) must ask here first and put themselves off.
//!
//! Redis 7.0 offers modules no pause flag (no `REDISMODULE_CTX_FLAGS_*` bit,
//! no server event, no INFO field). redis-server is linked with `-rdynamic`
//! (for its crash-log stack traces), so its `int areClientsPaused(void)` —
//! the very predicate of that assertion — is in the dynamic symbol table
//! (Debian's 7.0.15: `nm -D /usr/bin/redis-server`). We look it up once with
//! `dlsym`. Without it (a build that does not export it) we cannot tell and
//! report "not paused", as before this module existed: the module logs a
//! warning at load (see `probe_found`).

use once_cell::sync::Lazy;
use std::ffi::{c_int, c_void};

type Probe = unsafe extern "C" fn() -> c_int;

static PROBE: Lazy<Option<Probe>> = Lazy::new(|| {
    // SAFETY: RTLD_DEFAULT searches the process's global symbols; the name
    // is NUL-terminated. A null result means "not exported".
    let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"areClientsPaused".as_ptr()) };
    // SAFETY: a non-null areClientsPaused is `int areClientsPaused(void)`
    // in every Redis release that has it (6.2 and later).
    (!sym.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, Probe>(sym) })
});

/// True while the server pauses writes (or all clients). Main thread only,
/// like every caller of Redis internals.
pub fn writes_paused() -> bool {
    // SAFETY: areClientsPaused only reads server state; we are on the main
    // thread (module commands, timers and events all run there).
    decide(PROBE.map(|probe| unsafe { probe() }))
}

/// Whether the server exports the probe (false: pauses go undetected).
pub fn probe_found() -> bool {
    PROBE.is_some()
}

/// The pure decision: a probe answer of non-zero means paused; no probe
/// means we cannot tell, and behave as when not paused.
fn decide(probe_answer: Option<c_int>) -> bool {
    probe_answer.is_some_and(|paused| paused != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_answer_decides() {
        assert!(decide(Some(1)));
        assert!(decide(Some(2)), "any CLIENT_PAUSE_* type but OFF (0)");
        assert!(!decide(Some(0)));
        assert!(!decide(None), "no probe: never defer forever");
    }

    #[test]
    fn without_a_redis_server_nothing_is_paused() {
        // The unit-test binary does not export areClientsPaused.
        assert!(!probe_found());
        assert!(!writes_paused());
    }
}
