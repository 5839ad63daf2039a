//! An acquisition stays on the runtime it began on. Its requests' timers
//! and connections belong to that runtime, and tokio panics when a timer
//! of a runtime that shut down is polled: a call begun on one runtime and
//! finished on another after the first shut down must end with an error
//! instead (`tests/client_errors.rs`). What a call leaves to clean up when
//! it is dropped runs on that runtime too (`clean_up_on`), wherever the
//! drop happens: outside any runtime, or on another one.

use crate::background::BACKGROUND;
use std::future::Future;
use std::task::Poll;
use tokio::runtime::{Handle, Id};

/// The runtime a call runs on, for its clean-up when it is dropped.
pub(crate) fn here() -> Option<Handle> {
    Handle::try_current().ok()
}

/// Run `clean_up` (which spawns the clean-up on the current runtime) on
/// `runtime`, where the call's requests belong: dropped outside a runtime,
/// the clean-up had nowhere to go and was lost, and on another runtime the
/// requests could not be driven (446f4f4). Spawned through the handle,
/// which needs no thread-local context: entering the runtime instead
/// panicked in a thread-local destructor, and a panic there aborts
/// (f9619de). A runtime that shut down takes the work down with it, as it
/// did the call.
pub(crate) fn clean_up_on(runtime: &Option<Handle>, clean_up: impl FnOnce() + Send + 'static) {
    match runtime {
        Some(runtime) if current() != Some(runtime.id()) => {
            BACKGROUND.spawn_on(runtime, async move { clean_up() })
        }
        _ => clean_up(),
    }
}

/// The runtime polling the caller now (None outside any).
pub(crate) fn current() -> Option<Id> {
    Handle::try_current().ok().map(|h| h.id())
}

/// The future `work()` makes, unless it is polled on another runtime than
/// the one it began on (or outside any): then `moved()`, without polling
/// it again.
///
/// Made in here, not passed in: an async fn keeps its arguments in its
/// state beside its locals, so a future passed in and pinned was stored
/// twice. An acquisition's future was 4.7 KB, two copies of the call's
/// 2.3 KB, allocated and copied on every call (2026-11-29).
pub(crate) async fn on_one_runtime<T, F: Future<Output = T>>(
    work: impl FnOnce() -> F,
    moved: impl FnOnce() -> T,
) -> T {
    let began = current();
    let mut work = std::pin::pin!(work());
    let mut moved = Some(moved);
    std::future::poll_fn(|cx| match moved.take_if(|_| current() != began) {
        Some(moved) => Poll::Ready(moved()),
        None => work.as_mut().poll(cx),
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_future_moved_to_another_runtime_is_not_polled_there() {
        let first = tokio::runtime::Runtime::new().unwrap();
        let mut work = Box::pin(on_one_runtime(
            || async {
                tokio::time::sleep(std::time::Duration::from_secs(60)).await;
                "slept"
            },
            || "moved",
        ));
        let begun = first.block_on(async {
            let short = std::time::Duration::from_millis(10);
            tokio::time::timeout(short, &mut work).await.is_err()
        });
        assert!(begun);
        drop(first); // its timer now panics if polled
        let second = tokio::runtime::Runtime::new().unwrap();
        assert_eq!(second.block_on(work), "moved");
    }

    #[test]
    fn on_its_own_runtime_it_runs_to_the_end() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let got = rt.block_on(on_one_runtime(
            || async {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                "slept"
            },
            || "moved",
        ));
        assert_eq!(got, "slept");
    }
}
