//! An env's end (its thread's last JavaScript ran, or `process.exit()`):
//! what its locks and the core's clean-up need before the thread goes.

use crate::{lock, runtime};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The longest an env's teardown waits for clean-up.
const CLEAN_UP_AT_EXIT: Duration = Duration::from_secs(2);

/// When the process's clean-up must be over: set when the main thread's
/// `exit` event fires (`process.exit()`, or its event loop ran dry), the
/// one deadline of every thread's teardown from then on.
static EXIT_BY: OnceLock<Instant> = OnceLock::new();

/// At an env's teardown (its thread's last JavaScript ran): release the
/// locks it left held and stop its acquisitions in flight
/// (`lock::release_left_behind`), then wait until this thread's calls in
/// flight and those releases are done. Exiting first would leave those
/// locks held for their TTL.
///
/// When the process ends (`process_ends`, or another thread's teardown
/// said so), also until every Locker's background clean-up is done (what
/// stopped or given-up waits left in flight), all of it by one deadline
/// CLEAN_UP_AT_EXIT after the process began to end. A worker ending while
/// the process lives on waits at most CLEAN_UP_AT_EXIT for its own only:
/// the background clean-up goes on without it. Waiting for the process's
/// whole clean-up there, a worker's `terminate()` took 2 s whenever any
/// thread's clean-up waited on a stalled server, and a `process.exit()` 2 s
/// more per worker (2026-11-29).
pub fn wait_for_clean_up(process_ends: bool) {
    let Some(rt) = runtime::started() else { return };
    if process_ends {
        EXIT_BY.get_or_init(|| Instant::now() + CLEAN_UP_AT_EXIT);
    }
    let releases = lock::release_left_behind(rt);
    if tokio::runtime::Handle::try_current().is_ok() {
        return; // inside a runtime block_on would panic; never the case on a JS thread
    }
    let calls_done = runtime::this_threads_calls_done();
    let own = async move {
        calls_done.await;
        for release in releases {
            let _ = release.await;
        }
    };
    rt.block_on(async {
        match EXIT_BY.get() {
            Some(by) => {
                let all = async {
                    own.await;
                    redis_lock_client::background_done().await;
                };
                let _ = tokio::time::timeout_at((*by).into(), all).await;
            }
            None => {
                let _ = tokio::time::timeout(CLEAN_UP_AT_EXIT, own).await;
            }
        }
    });
}
