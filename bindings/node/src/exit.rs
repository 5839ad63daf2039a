//! An env's end (its thread's last JavaScript ran, or `process.exit()`):
//! what its locks and the core's clean-up need before the thread goes.

use crate::{lock, runtime};

/// The longest an env's teardown waits for clean-up.
const CLEAN_UP_AT_EXIT: std::time::Duration = std::time::Duration::from_secs(2);

/// At an env's teardown (its thread's last JavaScript ran): release the
/// locks it left held and stop its acquisitions in flight
/// (`lock::release_left_behind`), then wait, at most CLEAN_UP_AT_EXIT in
/// all, until this thread's calls in flight have ended, and then until the
/// background clean-up of every Locker is done: those releases, and what
/// stopped or given-up waits left in flight. Exiting first would leave
/// those locks held for their TTL. Other threads' calls in flight are
/// theirs to wait for, at their own teardown.
pub fn wait_for_clean_up() {
    let Some(rt) = runtime::started() else { return };
    lock::release_left_behind(rt);
    if tokio::runtime::Handle::try_current().is_ok() {
        return; // inside a runtime block_on would panic; never the case on a JS thread
    }
    let calls_done = runtime::this_threads_calls_done();
    rt.block_on(async {
        let _ = tokio::time::timeout(CLEAN_UP_AT_EXIT, async {
            calls_done.await;
            redis_lock_client::background_done().await;
        })
        .await;
    });
}
