//! The `INFO lock` section: the counters of `stats.rs` plus live state
//! (waiters, the restart guard). Redis prefixes each field with `lock_`.

use crate::glue::ffi::api;
use redis_module::raw;
use std::ffi::{c_int, CString};

/// Fills `INFO lock` (registered in lib.rs).
pub extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    let now = crate::rules::clock::now_ms();
    let live = [
        ("waiters", crate::glue::blocking::total_waiters() as u64),
        (
            "restart_guard_ms_left",
            crate::rules::guard::remaining(now).unwrap_or(0),
        ),
        ("grant_effects", crate::glue::propagation::reaching()),
    ];
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: valid info ctx during the callback; names are NUL-terminated.
        unsafe {
            api!(RedisModule_InfoAddSection)(ctx, c"".as_ptr());
            for (name, value) in crate::rules::stats::counters().into_iter().chain(live) {
                if let Ok(name) = CString::new(name) {
                    api!(RedisModule_InfoAddFieldULongLong)(ctx, name.as_ptr(), value);
                }
            }
        }
    });
}
