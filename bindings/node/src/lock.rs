//! A held lock as seen from JavaScript: the core's `AutoLock` (renewed by
//! the crate's watchdog, `autoRenew: true`) or its plain `Lock`
//! (`autoRenew: false`), and the loss signal index.js turns into an
//! AbortSignal.
//!
//! Lost means the lock can no longer be trusted: the watchdog gave up (the
//! validity ran out, or a majority no longer holds it), a plain lock's
//! validity ran out, or an extend or release found it gone. It stays lost.

use crate::args;
use crate::errors::{self, Failure};
use crate::runtime::{self, promise};
use napi::bindgen_prelude::{BigInt, Function, Object};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, Error, Result, Status};
use napi_derive::napi;
use redis_lock_client::{AutoLock, Error as CoreError, Lock as CoreLock, Locker as CoreLocker};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::ThreadId;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What holds the lock.
pub enum Held {
    /// Renewed by the core's watchdog.
    Auto(AutoLock),
    /// Extended only when asked; the lock as last extended.
    Manual(Mutex<CoreLock>),
}

impl Held {
    pub fn manual(lock: CoreLock) -> Held {
        Held::Manual(Mutex::new(lock))
    }
}

/// State shared by the JavaScript object, its calls in flight and its loss
/// watcher (which holds it weakly: a lock nobody can reach any more is
/// released by `Drop`, not kept renewed by its watcher).
pub struct Shared {
    core: CoreLocker,
    held: Held,
    name: String,
    owner: String,
    token: u64,
    owner_private: bool,
    /// Serialises extends and releases of a plain lock (and releases of a
    /// renewed one): no extend overwrites a newer validity with an older
    /// one, and a second concurrent release sees the first's outcome
    /// instead of reporting the lock as lost.
    ops: tokio::sync::Mutex<()>,
    lost: AtomicBool,
    released: AtomicBool,
    /// release() was called (it may not have finished, or may have failed):
    /// the holder is done with the lock. From then on its end is no loss:
    /// an extend racing the release, or one after a failed release, found
    /// the watchdog stopped and marked the lock lost, aborting the signal
    /// (2026-11-29); a retried release found the key gone because the
    /// first one's RELEASEs landed late, and said lost.
    releasing: AtomicBool,
    /// Bumped after every extend and release: the loss watcher looks again.
    changed: watch::Sender<()>,
}

fn guard(m: &Mutex<CoreLock>) -> MutexGuard<'_, CoreLock> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn validity(&self) -> Duration {
        match &self.held {
            Held::Auto(a) => a.validity(),
            Held::Manual(m) => guard(m).validity(),
        }
    }

    fn ttl(&self) -> Duration {
        match &self.held {
            Held::Auto(a) => a.ttl(),
            Held::Manual(m) => guard(m).ttl(),
        }
    }

    /// Whether the lock is lost: the flag, the watchdog's verdict, or
    /// (before its holder let go) its validity ran out; each sets the flag
    /// for good.
    fn note_lost(&self) -> bool {
        if self.lost.load(Ordering::SeqCst) {
            return true;
        }
        let watchdog_gave_up = matches!(&self.held, Held::Auto(a) if a.is_lost());
        // Not once the holder let go (`releasing`): a release that failed
        // leaves the validity to run out, which is no loss to it.
        let ran_out = !self.releasing.load(Ordering::SeqCst) && self.validity().is_zero();
        if watchdog_gave_up || ran_out {
            self.lost.store(true, Ordering::SeqCst);
        }
        watchdog_gave_up || ran_out
    }
}

async fn extend(shared: Arc<Shared>, ttl: Option<Duration>) -> std::result::Result<(), CoreError> {
    if shared.releasing.load(Ordering::SeqCst) {
        return Err(CoreError::Expired); // let go by its holder: nothing to extend
    }
    let outcome = match &shared.held {
        Held::Auto(a) => a.extend(ttl).await,
        Held::Manual(m) => {
            let _one_at_a_time = shared.ops.lock().await;
            let mut lock = guard(m).clone();
            if let Some(ttl) = ttl {
                lock.set_ttl(ttl);
            }
            let (started, left) = (std::time::Instant::now(), lock.validity());
            let outcome = shared.core.extend(&mut lock).await;
            if outcome.is_ok() {
                // Validity that ran out before this extension landed was a
                // moment `lost` said true: it stays true.
                if started.elapsed() >= left {
                    shared.lost.store(true, Ordering::SeqCst);
                }
                *guard(m) = lock;
            }
            outcome
        }
    };
    // Gone because its holder let it go (a release that ran meanwhile)
    // is no loss (`releasing`).
    if matches!(outcome, Err(CoreError::Expired)) && !shared.releasing.load(Ordering::SeqCst) {
        shared.lost.store(true, Ordering::SeqCst);
    }
    shared.changed.send_replace(());
    outcome
}

/// Mark the lock let go, where the call is made (so an extend called after
/// it, from the same thread, is refused: marked on the runtime, one called
/// right after a release() sometimes went first and succeeded,
/// 2026-11-29); the release itself is `release`. Whether an earlier
/// release was asked for.
fn let_go(shared: &Shared) -> bool {
    // A validity that ran out is a loss even if the release still finds
    // the lock: note it before the release ends the validity.
    shared.note_lost();
    shared.releasing.swap(true, Ordering::SeqCst)
}

/// Let go and release in the background, counted (a process's exit waits
/// for it): a lock won after its thread's env tore down, one left behind
/// at the teardown, one whose JavaScript object was collected.
fn release_in_background(rt: &tokio::runtime::Handle, shared: Arc<Shared>) -> JoinHandle<()> {
    let again = let_go(&shared);
    let release = redis_lock_client::counted(release(shared, again));
    rt.spawn(async move {
        let _ = release.await;
    })
}

/// `again`: an earlier release was asked for (it may have failed).
async fn release(shared: Arc<Shared>, again: bool) -> std::result::Result<(), CoreError> {
    let _one_at_a_time = shared.ops.lock().await;
    if shared.released.load(Ordering::SeqCst) {
        return Ok(());
    }
    let outcome = match &shared.held {
        Held::Auto(a) => a.release().await,
        Held::Manual(m) => {
            let lock = guard(m).clone();
            shared.core.unlock(&lock).await
        }
    };
    let outcome = match outcome {
        Ok(()) => {
            shared.released.store(true, Ordering::SeqCst);
            Ok(())
        }
        // Gone on a retry: the earlier release's RELEASEs, sent and then
        // given up on, landed late. The holder let go at its first call;
        // what became of the lock after that is no loss to it.
        Err(CoreError::Expired) if again => {
            shared.released.store(true, Ordering::SeqCst);
            Ok(())
        }
        Err(CoreError::Expired) => {
            shared.released.store(true, Ordering::SeqCst);
            shared.lost.store(true, Ordering::SeqCst);
            Err(CoreError::Expired)
        }
        // Renewed or not, a release that failed (no quorum answered) may
        // have left the lock held on some nodes: a retried release() (or
        // the one `Drop` makes) may finish it. A renewed lock was marked
        // released here and a retry did nothing: with its servers stopped,
        // the first release failed and the second resolved (2026-11-29).
        // Its watchdog has stopped either way; the servers that kept it
        // let it expire with its TTL.
        Err(e) => Err(e),
    };
    shared.changed.send_replace(());
    outcome
}

/// Resolves true when the lock is lost, false once it is released (or
/// nobody holds the JavaScript object any more) without a loss.
async fn loss(shared: Weak<Shared>) -> bool {
    let (mut changed, mut watchdog) = {
        let Some(s) = shared.upgrade() else {
            return false;
        };
        let watchdog = match &s.held {
            Held::Auto(a) => Some(Box::pin(a.lost_signal())),
            Held::Manual(_) => None,
        };
        (s.changed.subscribe(), watchdog)
    };
    loop {
        let validity = {
            let Some(s) = shared.upgrade() else {
                return false;
            };
            if s.note_lost() {
                return true;
            }
            if s.released.load(Ordering::SeqCst) {
                return false;
            }
            // Let go: its validity running out is no loss any more, so
            // only a release's outcome (`changed`) can still matter. Timed
            // on the validity, a failed release left this loop waking
            // every millisecond once it ran out (2026-11-29).
            (!s.releasing.load(Ordering::SeqCst)).then(|| s.validity())
        };
        let ran_out = async {
            match validity {
                Some(v) => tokio::time::sleep(v + Duration::from_millis(1)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = changed.changed() => {}
            gave_up = async { watchdog.as_mut().expect("guarded").await }, if watchdog.is_some() => {
                if gave_up {
                    if let Some(s) = shared.upgrade() {
                        s.lost.store(true, Ordering::SeqCst);
                    }
                }
                watchdog = None;
            }
            () = ran_out => {}
        }
    }
}

/// The locks each JavaScript thread (the main one, each worker) took, for
/// its env's teardown: Node finalizes objects only after the env's cleanup
/// hooks ran, too late to wait for their releases.
static TAKEN: Mutex<Option<HashMap<ThreadId, Taken>>> = Mutex::new(None);

/// One thread's locks, pruned of those released or collected whenever the
/// list doubled since the last pruning: amortized constant time per lock
/// (pruning on every lock scanned every Lock object not yet collected, a
/// cost per call growing with the garbage between two GCs).
#[derive(Default)]
struct Taken {
    locks: Vec<Weak<Shared>>,
    prune_at: usize,
    /// The thread's env has torn down (`release_left_behind` ran): a lock
    /// its calls still in flight win is released at once.
    left: bool,
    /// Turns true with `left`: the thread's acquisitions still in flight
    /// stop (`env_gone`).
    gone: Option<watch::Sender<bool>>,
}

thread_local! {
    /// This JavaScript thread's `Taken::gone`, subscribed once.
    static GONE: std::cell::RefCell<Option<watch::Receiver<bool>>> = const { std::cell::RefCell::new(None) };
}

/// Resolves when the env of the JavaScript thread calling this (now) has
/// torn down; until then never. An acquisition races it: a worker thread
/// terminated while its `lock()` waited in the servers' queues left the
/// wait there until its own deadline (600 s in the case seen, 2026-11-29),
/// its connections open, and a grant with a given `owner` then landed
/// after the holder released and stayed held for its TTL. Dropped, the
/// acquisition withdraws its waits and gives back its grants (the core's
/// clean-up of a dropped call, counted: the teardown waits for it).
pub fn env_gone() -> impl std::future::Future<Output = ()> + Send + 'static {
    let mut gone = GONE.with(|g| {
        g.borrow_mut()
            .get_or_insert_with(|| {
                let mut all = taken();
                let me = std::thread::current().id();
                let mine = all.get_or_insert_with(HashMap::new).entry(me).or_default();
                let left = mine.left;
                mine.gone
                    .get_or_insert_with(|| watch::channel(left).0)
                    .subscribe()
            })
            .clone()
    });
    async move {
        // The sender lives in a static map: an error (it was dropped) is
        // not a teardown.
        if gone.wait_for(|gone| *gone).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

fn taken() -> MutexGuard<'static, Option<HashMap<ThreadId, Taken>>> {
    TAKEN.lock().unwrap_or_else(|p| p.into_inner())
}

/// Note a lock taken by the JavaScript thread `by`; if that thread's env
/// has torn down (nobody will see the lock), release it at once, counted.
/// Runs on the runtime, inside the call's (counted) task.
fn register(by: ThreadId, shared: &Arc<Shared>) {
    let mut all = taken();
    let mine = all.get_or_insert_with(HashMap::new).entry(by).or_default();
    if mine.left {
        drop(all);
        if let (true, Ok(rt)) = (shared.owner_private, tokio::runtime::Handle::try_current()) {
            release_in_background(&rt, shared.clone());
        }
        return;
    }
    if mine.locks.len() >= mine.prune_at {
        mine.locks.retain(|l| {
            l.upgrade()
                .is_some_and(|s| !s.released.load(Ordering::SeqCst))
        });
        mine.prune_at = (2 * mine.locks.len()).max(64);
    }
    mine.locks.push(Arc::downgrade(shared));
}

/// At the teardown of this thread's env: release, in the background and
/// counted (`exit::wait_for_clean_up` waits for the tasks returned), every lock it took
/// that is still held and whose owner is its own. No JavaScript of this env
/// runs any more, so nothing works under them; left alone they would stay
/// held for their TTL. Locks taken with `owner` or `reentrant` share their
/// owner with other handles or later calls: they expire with their TTL.
/// A call still in flight releases the lock it wins (`register`).
pub fn release_left_behind(rt: &tokio::runtime::Runtime) -> Vec<JoinHandle<()>> {
    let mine = {
        let mut all = taken();
        let entry = all
            .get_or_insert_with(HashMap::new)
            .entry(std::thread::current().id())
            .or_default();
        entry.left = true;
        if let Some(gone) = &entry.gone {
            gone.send_replace(true);
        }
        std::mem::take(&mut entry.locks)
    };
    mine.iter()
        .filter_map(Weak::upgrade)
        .filter(|shared| !shared.released.load(Ordering::SeqCst) && shared.owner_private)
        .map(|shared| release_in_background(rt.handle(), shared))
        .collect()
}

/// A lock held on a majority of the servers (index.js wraps it as `Lock`).
#[napi]
pub struct NativeLock {
    shared: Arc<Shared>,
    auto_renew: bool,
}

impl NativeLock {
    /// Wrap a freshly acquired lock (on the runtime: a renewed lock's
    /// watchdog was spawned there).
    pub fn start(core: CoreLocker, held: Held, by: ThreadId) -> NativeLock {
        let (name, owner, token, owner_private) = match &held {
            Held::Auto(a) => (
                a.name().to_string(),
                a.owner().to_string(),
                a.token(),
                a.owner_is_private(),
            ),
            Held::Manual(m) => {
                let l = guard(m);
                (
                    l.name().to_string(),
                    l.owner().to_string(),
                    l.token(),
                    l.owner_is_private(),
                )
            }
        };
        let auto_renew = matches!(held, Held::Auto(_));
        let shared = Arc::new(Shared {
            core,
            held,
            name,
            owner,
            token,
            owner_private,
            ops: tokio::sync::Mutex::new(()),
            lost: AtomicBool::new(false),
            released: AtomicBool::new(false),
            releasing: AtomicBool::new(false),
            changed: watch::Sender::new(()),
        });
        register(by, &shared);
        NativeLock { shared, auto_renew }
    }

    fn checked_ttl(&self, ttl: Option<f64>) -> Result<Option<Duration>> {
        let Some(ttl) = ttl else { return Ok(None) };
        let ttl = args::positive_millis("ttl", ttl)?;
        let node_timeout = self.shared.core.config().node_timeout();
        if ttl < redis_lock_client::MIN_TTL || ttl <= node_timeout {
            return Err(Error::new(
                Status::InvalidArg,
                format!(
                    "ttl must be at least {} ms and above the node timeout ({} ms), got {} ms",
                    args::to_millis(redis_lock_client::MIN_TTL),
                    args::to_millis(node_timeout),
                    args::to_millis(ttl)
                ),
            ));
        }
        Ok(Some(ttl))
    }
}

/// The failure's message names the lock: quoted only on a failure (quoting
/// on every call was a measurable part of a call's cost, 2026-11-28).
fn settled(
    shared: Arc<Shared>,
) -> impl FnOnce(Env, std::result::Result<(), CoreError>) -> Result<Option<Failure>> {
    move |_, outcome| {
        Ok(outcome
            .err()
            .map(|e| errors::failure(&format!("lock {:?}", shared.name), e)))
    }
}

#[napi]
impl NativeLock {
    /// The lock's name (the key on every server).
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.shared.name.clone()
    }
    /// The owner value the lock was taken with (random unless given).
    #[napi(getter)]
    pub fn owner(&self) -> String {
        self.shared.owner.clone()
    }
    /// Fencing token: larger than every earlier holder's token of this name.
    #[napi(getter)]
    pub fn token(&self) -> BigInt {
        BigInt::from(self.shared.token)
    }
    /// TTL in milliseconds that renewals and extend() reset the lock to.
    #[napi(getter)]
    pub fn ttl(&self) -> f64 {
        args::to_millis(self.shared.ttl())
    }
    /// Milliseconds the lock is still known to be valid (0 once it may
    /// have expired).
    #[napi(getter)]
    pub fn validity(&self) -> f64 {
        args::to_millis(self.shared.validity())
    }
    /// True once the lock can no longer be trusted.
    #[napi(getter)]
    pub fn lost(&self) -> bool {
        self.shared.note_lost()
    }
    /// True once release() succeeded (or found the lock already gone).
    #[napi(getter)]
    pub fn released(&self) -> bool {
        self.shared.released.load(Ordering::SeqCst)
    }
    /// Whether the core's watchdog renews the lock.
    #[napi(getter)]
    pub fn auto_renew(&self) -> bool {
        self.auto_renew
    }

    /// Reset the TTL on a majority (to `ttl` ms if given, which later
    /// renewals keep): resolves to null, or to the Failure.
    #[napi(ts_return_type = "Promise<Failure | null>")]
    pub fn extend<'env>(&self, env: &'env Env, ttl: Option<f64>) -> Result<Object<'env>> {
        let ttl = self.checked_ttl(ttl)?;
        let shared = self.shared.clone();
        let work = shared.clone();
        promise(
            env,
            move || extend(work, ttl),
            move |env, outcome| {
                if matches!(outcome, Err(CoreError::Expired))
                    && shared.releasing.load(Ordering::SeqCst)
                {
                    let mut refused =
                        errors::failure(&format!("lock {:?}", shared.name), CoreError::Expired);
                    refused.message = format!(
                        "lock {:?} was released: extend() needs a held lock",
                        shared.name
                    );
                    return Ok(Some(refused));
                }
                settled(shared)(env, outcome)
            },
        )
    }

    /// Stop renewing and release on every server: resolves to null (also
    /// when released already), or to the Failure.
    #[napi(ts_return_type = "Promise<Failure | null>")]
    pub fn release<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let shared = self.shared.clone();
        let work = shared.clone();
        let again = let_go(&work);
        promise(env, move || release(work, again), settled(shared))
    }

    /// Call `callback` once, when the lock is lost (never if it is
    /// released first). The call does not keep the event loop alive.
    #[napi(ts_args_type = "callback: () => void")]
    pub fn on_lost(&self, callback: Function<(), ()>) -> Result<()> {
        let tsfn = callback
            .build_threadsafe_function::<()>()
            .callee_handled::<false>()
            .weak::<true>()
            .build()?;
        let shared = Arc::downgrade(&self.shared);
        runtime::runtime()?.spawn(async move {
            if loss(shared).await {
                tsfn.call((), ThreadsafeFunctionCallMode::NonBlocking);
            }
        });
        Ok(())
    }
}

impl Drop for NativeLock {
    /// The JavaScript object was collected: like the core's AutoLock, stop
    /// renewing and release in the background, counted. Only a lock whose
    /// owner is its own: one taken with `owner` or `reentrant` shares its
    /// owner with other handles or later calls, and a RELEASE from here
    /// could take their grant; it expires with its TTL instead.
    fn drop(&mut self) {
        let shared = &self.shared;
        if shared.released.load(Ordering::SeqCst) || !shared.owner_private {
            return;
        }
        if let Ok(rt) = runtime::runtime() {
            release_in_background(rt.handle(), shared.clone());
        }
    }
}
