//! A hold: the core's `Lock` as taken, an optional renewal watchdog, and
//! the `lost` signal; what a Python `Lock` (`lock.rs`) holds while it is
//! taken, and replaces when it is taken again.
//!
//! The watchdog follows the core's `AutoLock` (extend every ttl/3, retry
//! sooner on failure while the lock is still valid, lost when it is not)
//! but runs here, on the core's `Locker::extend`, because Python also needs
//! the lock's validity and `extend(ttl)` while it renews, which `AutoLock`
//! does not expose.

use crate::errors::Failure;
use redis_lock_client::{
    escape_owner, quorum_state, Error, Lock as CoreLock, Locker as CoreLocker, QuorumState,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::task::AbortHandle;

/// State shared by the Python object, its watchdog and its async calls.
pub struct Shared {
    pub(crate) core: CoreLocker,
    pub(crate) lock: Mutex<CoreLock>,
    /// Serialises extends and releases (watchdog, `extend()`, `release()`
    /// from several threads): no extend overwrites a newer validity with an
    /// older one, and a second concurrent release sees the first's outcome
    /// instead of reporting the lock as lost.
    pub(crate) ops: tokio::sync::Mutex<()>,
    pub(crate) lost: AtomicBool,
    pub(crate) released: AtomicBool,
    /// release() was called (it may still run, or have failed): the holder
    /// let go, and what becomes of the lock from then on is no loss. An
    /// extend that had passed its check while a release ran found the key
    /// gone and marked the lock lost; a retried release that found it gone
    /// (the first one's RELEASEs landed late) said LockLost (2026-11-29,
    /// as found in the Node package, which shares the pattern).
    pub(crate) releasing: AtomicBool,
    pub(crate) watchdog: Mutex<Option<AbortHandle>>,
    pub(crate) pid: u32,
}

impl Shared {
    pub(crate) fn snapshot(&self) -> MutexGuard<'_, CoreLock> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn context(&self) -> String {
        format!("lock {}", shown_name(self.snapshot().name()))
    }

    /// Whether the lock is lost: the flag, or (before its holder let go) its
    /// validity ran out, which sets the flag for good.
    pub(crate) fn note_lost(&self) -> bool {
        if self.lost.load(Ordering::SeqCst) {
            return true;
        }
        let ran_out =
            !self.releasing.load(Ordering::SeqCst) && self.snapshot().validity().is_zero();
        if ran_out {
            self.lost.store(true, Ordering::SeqCst);
        }
        ran_out
    }

    /// Wrap a freshly acquired lock; with `auto_renew`, start its watchdog
    /// (needs to run inside the runtime).
    pub fn start(core: CoreLocker, lock: CoreLock, auto_renew: bool) -> Arc<Shared> {
        let shared = Arc::new(Shared {
            core,
            lock: Mutex::new(lock),
            ops: tokio::sync::Mutex::new(()),
            lost: AtomicBool::new(false),
            released: AtomicBool::new(false),
            releasing: AtomicBool::new(false),
            watchdog: Mutex::new(None),
            pid: std::process::id(),
        });
        if auto_renew {
            let task = tokio::spawn(renew(shared.clone()));
            *shared.watchdog.lock().unwrap_or_else(|p| p.into_inner()) = Some(task.abort_handle());
        }
        shared
    }

    /// Held as far as this process knows: not released, not lost.
    pub(crate) fn held(&self) -> bool {
        !self.released.load(Ordering::SeqCst) && !self.note_lost()
    }

    pub(crate) fn stop_watchdog(&self) {
        let handle = self
            .watchdog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = handle {
            h.abort();
        }
    }
}

/// The name as messages show it: a 100 KB name printed whole drowned the
/// message (and `repr`), so long ones are cut, with their length.
pub fn shown_name(name: &str) -> String {
    const SHOWN: usize = 60;
    match name.char_indices().nth(SHOWN) {
        None => format!("{name:?}"),
        Some((cut, _)) => format!(
            "{:?}... ({} characters)",
            &name[..cut],
            name.chars().count()
        ),
    }
}

/// An owner as messages show it: printable, and cut like a name.
fn shown_owner(owner: &[u8]) -> String {
    shown_name(&escape_owner(owner))
}

/// Why a lock the core calls `Expired` (a majority said it is not this
/// owner's) is gone, from what the servers say now and whether it was
/// still valid here when the operation began: "expired", "taken by another
/// owner", or "released by someone else". One more round trip, on the
/// error path only.
async fn why_lost(shared: &Shared, was_valid: bool, what: &str) -> String {
    let (name, owner) = {
        let lock = shared.snapshot();
        (lock.name().to_string(), lock.owner().to_string())
    };
    match quorum_state(&shared.core.status(&name).await) {
        QuorumState::Held {
            owner: holder,
            nodes,
            of,
        } if holder != owner.as_bytes() => {
            let holder = shown_owner(&holder);
            if was_valid {
                format!(
                    "was taken by another owner ({holder}, on {nodes} of {of} servers) while still \
                     valid here, before {what}: its hold was ended on the servers (a force release?)"
                )
            } else {
                format!(
                    "expired before {what} (its validity ran out) and was taken by another owner \
                     since ({holder}, on {nodes} of {of} servers)"
                )
            }
        }
        QuorumState::Free { .. } | QuorumState::Held { .. } if was_valid => format!(
            "was released by someone else before {what}: the servers no longer hold it though \
             its validity had not run out (a force release, or another handle with the same \
             owner released it)"
        ),
        QuorumState::Free { .. } | QuorumState::Held { .. } => {
            format!("expired before {what}: its validity ran out and the servers no longer hold it")
        }
        QuorumState::Shared { .. } => format!(
            "is no longer held by this owner on enough servers (found before {what}: expired \
             or released; others hold the key shared)"
        ),
        _ => format!(
            "is no longer held by this owner on a majority of the servers (found before {what}; \
             expired or taken over: the servers' state could not be read)"
        ),
    }
}

/// `what`: the operation, for the message of a lost lock (None: no
/// message wanted, the watchdog's own extends).
pub async fn extend(
    shared: Arc<Shared>,
    ttl: Option<Duration>,
    what: Option<&'static str>,
) -> Result<(), Failure> {
    let _one_at_a_time = shared.ops.lock().await;
    if shared.releasing.load(Ordering::SeqCst) {
        return Err(Failure {
            err: Error::Expired,
            waited: None,
            lost_because: Some("its holder released it while this extend waited".into()),
        });
    }
    let mut lock = shared.snapshot().clone();
    if let Some(ttl) = ttl {
        lock.set_ttl(ttl);
    }
    let (started, left) = (std::time::Instant::now(), lock.validity());
    match shared.core.extend(&mut lock).await {
        Ok(()) => {
            // Validity that ran out before this extension landed was a
            // moment `lost` said True: it stays True (it used to go back to
            // False, after the holder may have stopped because of it).
            if started.elapsed() >= left {
                shared.lost.store(true, Ordering::SeqCst);
            }
            *shared.snapshot() = lock;
            Ok(())
        }
        Err(Error::Expired) => {
            shared.lost.store(true, Ordering::SeqCst);
            let lost_because = match what {
                Some(what) => Some(why_lost(&shared, !left.is_zero(), what).await),
                None => None,
            };
            Err(Failure {
                err: Error::Expired,
                waited: None,
                lost_because,
            })
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn release(shared: Arc<Shared>) -> Result<(), Failure> {
    // A validity that ran out is a loss even if the release still finds
    // the lock: note it before the release ends the validity (an explicit
    // release() inside a `with` block hid it, 82fe3cf).
    shared.note_lost();
    shared.stop_watchdog();
    let again = shared.releasing.swap(true, Ordering::SeqCst);
    let _one_at_a_time = shared.ops.lock().await;
    if shared.released.load(Ordering::SeqCst) {
        return Ok(());
    }
    let lock = shared.snapshot().clone();
    let was_valid = !lock.validity().is_zero();
    match shared.core.unlock(&lock).await {
        Ok(()) => {
            shared.released.store(true, Ordering::SeqCst);
            Ok(())
        }
        // Gone on a retry: the earlier release's RELEASEs landed late.
        Err(Error::Expired) if again => {
            shared.released.store(true, Ordering::SeqCst);
            Ok(())
        }
        Err(Error::Expired) => {
            shared.released.store(true, Ordering::SeqCst);
            shared.lost.store(true, Ordering::SeqCst);
            Err(Failure {
                err: Error::Expired,
                waited: None,
                lost_because: Some(why_lost(&shared, was_valid, "release()").await),
            })
        }
        // Maybe still held on some nodes: a retried release() may finish it.
        Err(e) => Err(e.into()),
    }
}

/// The watchdog (see the module comment).
async fn renew(shared: Arc<Shared>) {
    let mut failing = false;
    loop {
        let (ttl, validity) = {
            let lock = shared.snapshot();
            (lock.ttl(), lock.validity())
        };
        let period = ttl / 3;
        let wait = if failing {
            (period / 4).max(Duration::from_millis(5))
        } else {
            period
        };
        tokio::time::sleep(wait.min(validity)).await;
        match extend(shared.clone(), None, None).await {
            Ok(()) => failing = false,
            Err(Failure {
                err: Error::Expired,
                ..
            }) => break,
            Err(_) if shared.snapshot().validity().is_zero() => break,
            Err(_) => failing = true,
        }
    }
    shared.lost.store(true, Ordering::SeqCst);
}
