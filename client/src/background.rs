//! Clean-up the Lockers of this process run after their callers have moved
//! on (a cancelled or failed acquisition's RELEASEs, grants that land late,
//! a dropped lock's unlock), counted so that a process about to exit can
//! wait for it (`Locker::background_done`): exiting first leaves whatever a
//! request still travelling takes held for its TTL (an attack run on the
//! CLI, d992c16). One count per process, not per Locker: what an exit
//! must wait for is all of it.
//!
//! The count carries the pid it belongs to: a forked child inherits the
//! parent's count of tasks it does not have, and its exit waited for them
//! until the caller's timeout (7818b9e); in the child that count is 0.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{oneshot, Notify};

pub(crate) struct Background {
    /// pid << 32 | pieces running in that process.
    running: AtomicU64,
    idle: Notify,
}

/// (pid, pieces) of a `running` value.
fn split(v: u64) -> (u32, u64) {
    ((v >> 32) as u32, v & 0xffff_ffff)
}

fn join(pid: u32, n: u64) -> u64 {
    (u64::from(pid) << 32) | n
}

/// How a piece of background work is counted: from now, or from a moment
/// to come (a held lock's let-go: the work before it is not clean-up, and
/// an exit must not wait for it, b0d086f), when its count is sent here.
#[allow(dead_code, reason = "held only for its drop, which ends the count")]
pub(crate) enum Counted {
    Now(Running),
    Later(oneshot::Receiver<Running>),
    /// Not clean-up at all (work that gives nothing back).
    Never,
}

/// The process's clean-up.
pub(crate) static BACKGROUND: Background = Background::new();

/// One piece of clean-up running; counted until dropped.
pub(crate) struct Running(&'static Background);

impl Drop for Running {
    fn drop(&mut self) {
        let me = std::process::id();
        let update = |v| match split(v) {
            (pid, n) if pid == me && n > 0 => Some(join(me, n - 1)),
            _ => None, // counted in another process: not ours to take back
        };
        let before = self
            .0
            .running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, update);
        if before.is_ok_and(|v| split(v).1 == 1) {
            self.0.idle.notify_waiters();
        }
    }
}

impl Background {
    pub(crate) const fn new() -> Background {
        Background {
            running: AtomicU64::new(0),
            idle: Notify::const_new(),
        }
    }

    /// Spawn `work` on the current runtime, counted while it runs; outside
    /// a runtime (a value dropped after its runtime) there is nothing to
    /// run it on, and it is dropped.
    pub(crate) fn spawn<F>(&'static self, work: F)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // Outside a runtime the count is taken back at once with the work.
        self.spawn_counted(Counted::Now(self.start()), work);
    }

    /// Spawn `work`, counted as `count` says, on the current runtime (if
    /// any; else it is dropped).
    pub(crate) fn spawn_counted<F>(&'static self, count: Counted, work: F)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        drop(runtime.spawn(async move {
            // Held to the end: a count sent later lives in the channel.
            let _count = count;
            work.await
        }));
    }

    /// `spawn` on `runtime` rather than the current one (a drop that may
    /// happen off it: `one_runtime::clean_up_on`). Spawning through a
    /// handle needs no thread-local runtime context.
    pub(crate) fn spawn_on<F>(&'static self, runtime: &tokio::runtime::Handle, work: F)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let count = self.start();
        drop(runtime.spawn(async move {
            let _count = count;
            work.await
        }));
    }

    /// Count work started elsewhere until the returned guard is dropped.
    pub(crate) fn start(&'static self) -> Running {
        let me = std::process::id();
        let add = |v| match split(v) {
            (pid, n) if pid == me => Some(join(me, n + 1)),
            _ => Some(join(me, 1)), // a forked child: the parent's are not here
        };
        let _ = self
            .running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, add);
        Running(self)
    }

    /// Pieces running in this process.
    fn count(&self) -> u64 {
        match split(self.running.load(Ordering::Acquire)) {
            (pid, n) if pid == std::process::id() => n,
            _ => 0,
        }
    }

    /// Resolves once nothing is running.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            // Registered before the count is read: a last piece ending in
            // between still wakes us.
            notified.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// `work` counted as this process's background clean-up from now until it
/// ends or is dropped (see `background_done`): for work a binding spawns on
/// its own, e.g. the release of a lock dropped by the binding's caller
/// (Python's exit waits for it; a plain spawn could be cut off by the exit).
///
/// ```no_run
/// # async fn demo(locker: redis_lock_client::Locker, lock: redis_lock_client::Lock) -> Result<(), redis_lock_client::Error> {
/// // A binding releases a lock its caller dropped, counted so that
/// // background_done() waits for it before the process exits.
/// tokio::spawn(redis_lock_client::counted(async move {
///     let _ = locker.unlock(&lock).await;
/// }));
/// # Ok(()) }
/// ```
pub fn counted<F: Future>(work: F) -> impl Future<Output = F::Output> {
    let running = BACKGROUND.start();
    async move {
        let _running = running;
        work.await
    }
}

/// Resolves once the clean-up every Locker of this process runs in the
/// background is done (see [`Locker::background_done`](crate::Locker::background_done)).
///
/// ```no_run
/// # async fn demo() -> Result<(), redis_lock_client::Error> {
/// use std::time::Duration;
/// // Last thing before exit: at most 2 s for every Locker's clean-up.
/// let _ = tokio::time::timeout(Duration::from_secs(2), redis_lock_client::background_done()).await;
/// # Ok(()) }
/// ```
pub async fn background_done() {
    BACKGROUND.idle().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn idle_waits_for_every_piece() {
        static BG: Background = Background::new();
        let bg = &BG;
        bg.idle().await; // nothing running
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        bg.spawn(async move {
            let _ = rx.await;
        });
        bg.spawn(tokio::time::sleep(Duration::from_millis(20)));
        let idle = tokio::time::timeout(Duration::from_millis(100), bg.idle()).await;
        assert!(idle.is_err(), "one piece still waits");
        tx.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(1), bg.idle())
            .await
            .expect("idle once both ended");
    }

    #[tokio::test]
    async fn a_count_of_another_process_is_not_waited_for() {
        // What a forked child sees: the parent's pieces, under its pid.
        static BG: Background = Background::new();
        let parent = std::process::id().wrapping_add(1);
        BG.running.store(join(parent, 3), Ordering::Release);
        tokio::time::timeout(Duration::from_millis(100), BG.idle())
            .await
            .expect("none of them runs here");
        let mine = BG.start();
        assert_eq!(BG.count(), 1, "counted afresh for this process");
        drop(mine);
        assert_eq!(BG.count(), 0);
    }
}
