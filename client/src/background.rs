//! Clean-up the Lockers of this process run after their callers have moved
//! on (a cancelled or failed acquisition's RELEASEs, grants that land late,
//! a dropped lock's unlock), counted so that a process about to exit can
//! wait for it (`Locker::background_done`): exiting first leaves whatever a
//! request still travelling takes held for its TTL (an attack run on the
//! CLI, helper-24). One count per process, not per Locker: what an exit
//! must wait for is all of it.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Notify;

pub(crate) struct Background {
    running: AtomicUsize,
    idle: Notify,
}

/// The process's clean-up.
pub(crate) static BACKGROUND: Background = Background::new();

/// One piece of clean-up running; counted until dropped.
pub(crate) struct Running(&'static Background);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Background {
    pub(crate) const fn new() -> Background {
        Background {
            running: AtomicUsize::new(0),
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
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let running = self.start();
        drop(runtime.spawn(async move {
            let _running = running;
            work.await
        }));
    }

    /// Count work started elsewhere until the returned guard is dropped.
    pub(crate) fn start(&'static self) -> Running {
        self.running.fetch_add(1, Ordering::AcqRel);
        Running(self)
    }

    /// Resolves once nothing is running.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            // Registered before the count is read: a last piece ending in
            // between still wakes us.
            notified.as_mut().enable();
            if self.running.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// Resolves once the clean-up every Locker of this process runs in the
/// background is done (see `Locker::background_done`).
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
}
