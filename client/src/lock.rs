//! A lock held on a majority of nodes, and the state its clones share with
//! the requests of its acquisition that were still in flight.

use crate::background::{Counted, Running, BACKGROUND};
use crate::hold::Hold;
use crate::quorum::Tally;
use crate::request::Request;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

/// A lock held on a majority of nodes. Release it with
/// [`Locker::unlock`](crate::Locker::unlock); dropping it only lets it
/// expire after its TTL.
#[derive(Debug, Clone)]
#[must_use = "a lock that is dropped stays held until its TTL runs out"]
pub struct Lock {
    name: String,
    owner: String,
    token: u64,
    ttl: Duration,
    pub(crate) valid_until: Instant,
    pub(crate) shared: Arc<Shared>,
    /// Taken REENTRANT: released only where its own hold is confirmed
    /// (`Shared::holds`).
    pub(crate) reentrant: bool,
    /// The owner was generated for the call that took it and is not
    /// REENTRANT (see `Request::unique`): only then is it released in the
    /// background.
    pub(crate) unique: bool,
    /// Exclusive or shared: renewals and the unlock need the grants its
    /// acquisition needed.
    pub(crate) hold: Hold,
}

/// Shared by a Lock's clones; held weakly by the task settling the late
/// replies of its acquisition.
#[derive(Default)]
pub(crate) struct Shared {
    /// Set once the lock is let go (unlocked, or its acquisition failed):
    /// a grant still on its way to this owner is then released on arrival,
    /// as it is once every clone was dropped (see `settle_late`).
    gone: AtomicBool,
    /// Background work on this lock's late requests, to be counted as
    /// clean-up from the let-go on (`count_from_let_go`).
    on_let_go: Mutex<Vec<oneshot::Sender<Running>>>,
    /// A REENTRANT lock's nodes where its own hold is confirmed (a grant
    /// replied), each to be released exactly once: by the unlock, or on
    /// arrival once the lock is let go. A RELEASE where its hold did not
    /// land drops another handle's (1033558: two holders).
    holds: Mutex<Vec<usize>>,
    /// What the unlock's RELEASEs took back, for the WAITs of the lock's
    /// queued acquisition still out when it was won (`withdraw_late`, which
    /// makes it: no allocation for a lock that does not need it). A watch:
    /// the last word stays readable once every clone is dropped.
    taken_back: OnceLock<watch::Sender<TakenBack>>,
}

/// What an unlock's RELEASEs took back. Under contention the WAITs a won
/// lock did not need are usually granted right after it (its owner is at
/// the head of every queue) and their replies arrive after the unlock: a
/// node where the unlock's RELEASE replied 1 took that grant back already
/// (an owner made for one call has one grant request out per node), so it
/// needs no second RELEASE (2 of 12 server commands per critical section
/// on a hot key at N = 5).
#[derive(Debug, Clone, Default)]
pub(crate) enum TakenBack {
    /// No unlock (yet), or one cut off: a late grant is released.
    #[default]
    Unknown,
    /// The unlock's RELEASEs are out: decide on their replies.
    Pending,
    /// The nodes where the unlock's RELEASE took a hold back.
    Known(Arc<[usize]>),
}

/// Armed while an unlock's RELEASEs are out; dropped before `done` (the
/// unlock was cancelled), what they took back is `Unknown`.
pub(crate) struct TakingBack<'a>(&'a Shared);

impl TakingBack<'_> {
    /// The unlock's replies are in: the nodes that replied 1.
    pub(crate) fn done(self, released: &Tally) {
        if let Some(report) = self.0.taken_back.get() {
            report.send_replace(TakenBack::Known(released.granted().collect()));
        }
    }
}

impl Drop for TakingBack<'_> {
    fn drop(&mut self) {
        if let Some(report) = self.0.taken_back.get() {
            report.send_if_modified(|t| {
                let cut_off = matches!(t, TakenBack::Pending);
                if cut_off {
                    *t = TakenBack::Unknown;
                }
                cut_off
            });
        }
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gone = self.gone.load(Ordering::Acquire);
        f.debug_struct("Shared").field("gone", &gone).finish()
    }
}

impl Drop for Shared {
    /// Every clone dropped: a let-go too.
    fn drop(&mut self) {
        self.count_clean_up();
    }
}

impl Shared {
    /// The lock is let go: late grants are released from now on.
    pub(crate) fn let_go(&self) {
        self.gone.store(true, Ordering::Release);
        self.count_clean_up();
    }

    /// Let go by an unlock whose RELEASEs are about to go out: late
    /// grants wait for what they take back (`TakenBack`).
    pub(crate) fn let_go_taking_back(&self) -> TakingBack<'_> {
        if let Some(report) = self.taken_back.get() {
            report.send_replace(TakenBack::Pending);
        }
        self.let_go();
        TakingBack(self)
    }

    /// What the unlock of `shared`'s lock takes back, as it becomes known
    /// (also after every clone is dropped); `Unknown` for good if `shared`
    /// is gone already.
    pub(crate) fn taken_back(shared: &Weak<Shared>) -> watch::Receiver<TakenBack> {
        match shared.upgrade() {
            Some(held) => held.taken_back.get_or_init(Default::default).subscribe(),
            None => watch::channel(TakenBack::Unknown).1,
        }
    }

    /// A REENTRANT lock's holds confirmed by its acquisition.
    pub(crate) fn hold_on(&self, nodes: impl IntoIterator<Item = usize>) {
        self.holds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(nodes);
    }

    /// A REENTRANT lock's grant on `node` that came after its acquisition
    /// returned: kept for the unlock, or, the lock let go already (or every
    /// clone dropped), true: release it now.
    pub(crate) fn late_hold(shared: &Weak<Shared>, node: usize) -> bool {
        let Some(held) = shared.upgrade() else {
            return true;
        };
        let mut holds = held.holds.lock().unwrap_or_else(|p| p.into_inner());
        if held.gone.load(Ordering::Acquire) {
            return true;
        }
        holds.push(node);
        false
    }

    /// Let go a REENTRANT lock: the nodes where its holds are to be
    /// released (a late grant after this is released on arrival).
    pub(crate) fn let_go_holds(&self) -> Vec<usize> {
        let mut holds = self.holds.lock().unwrap_or_else(|p| p.into_inner());
        self.gone.store(true, Ordering::Release);
        let nodes = std::mem::take(&mut *holds);
        drop(holds);
        self.count_clean_up();
        nodes
    }

    fn count_clean_up(&self) {
        let waiting =
            std::mem::take(&mut *self.on_let_go.lock().unwrap_or_else(|p| p.into_inner()));
        for work in waiting {
            let _ = work.send(BACKGROUND.start()); // ended already: uncounted at once
        }
    }

    /// How background work on the late requests of `shared`'s lock is
    /// counted: as clean-up from its let-go on (now, if it is let go
    /// already). While the lock is held that work is part of the lock, and
    /// an exit must not wait for it (b0d086f: a held lock with a WAIT
    /// still queued on one server held `background_done` until that server
    /// answered, 7.7 s; every Python exit 2 s).
    pub(crate) fn count_from_let_go(shared: &Weak<Shared>) -> Counted {
        let Some(held) = shared.upgrade() else {
            return Counted::Now(BACKGROUND.start());
        };
        let mut waiting = held.on_let_go.lock().unwrap_or_else(|p| p.into_inner());
        if held.gone.load(Ordering::Acquire) {
            return Counted::Now(BACKGROUND.start());
        }
        let (count, counted) = oneshot::channel();
        waiting.push(count);
        Counted::Later(counted)
    }

    /// Let go, or every clone of the Lock dropped.
    pub(crate) fn is_let_go(shared: &Weak<Shared>) -> bool {
        shared
            .upgrade()
            .is_none_or(|s| s.gone.load(Ordering::Acquire))
    }
}

impl Lock {
    pub(crate) fn granted(
        req: &Request<'_>,
        token: u64,
        start: Instant,
        shared: Arc<Shared>,
    ) -> Lock {
        Lock {
            name: req.name.to_string(),
            owner: req.owner.to_string(),
            token,
            ttl: req.ttl,
            valid_until: start,
            shared,
            reentrant: req.reentrant,
            unique: req.unique,
            hold: req.hold,
        }
    }

    /// The lock's name (the key on every server).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The random owner value this lock was taken with.
    pub fn owner(&self) -> &str {
        &self.owner
    }
    /// Fencing token: larger than every token of an earlier holder of this
    /// name while a majority of nodes kept their state (see "Fencing
    /// tokens", docs/fencing.md in the repository).
    pub fn token(&self) -> u64 {
        self.token
    }
    /// How long the lock is still known to be valid (0 once it may have expired).
    pub fn validity(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }
    /// The owner was made for this lock alone: not given with
    /// `LockOptions::owner`, not REENTRANT (whose owner other handles
    /// re-enter). Only such a lock is released behind its holder's back (a
    /// dropped `AutoLock`, a binding's dropped lock); any other only stops
    /// renewing and expires with its TTL, since a RELEASE of a shared owner
    /// could take another handle's or a later call's grant.
    pub fn owner_is_private(&self) -> bool {
        self.unique
    }
    /// Taken shared (`LockOptions::shared`, or with a limit).
    pub fn is_shared(&self) -> bool {
        self.hold.shared
    }
    /// The limit it was taken under (`LockOptions::limit`), if any.
    pub fn limit(&self) -> Option<u32> {
        self.hold.limit
    }
    /// The TTL it was taken with (and is renewed to).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
    /// Change the TTL that the next [`Locker::extend`](crate::Locker::extend)
    /// resets the lock to (the Python binding's `extend(ttl)`). Checked by
    /// the servers: a TTL above `lock.max-ttl-ms` is `Rejected` there.
    pub fn set_ttl(&mut self, ttl: Duration) {
        self.ttl = ttl;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::background::background_done;

    async fn done_within(ms: u64) -> bool {
        let limit = Duration::from_millis(ms);
        tokio::time::timeout(limit, background_done()).await.is_ok()
    }

    #[test]
    fn an_unlock_reports_what_it_took_back_or_unknown_if_cut_off() {
        let held = Arc::new(Shared::default());
        let seen = Shared::taken_back(&Arc::downgrade(&held));
        let now = || seen.borrow().clone();
        assert!(matches!(now(), TakenBack::Unknown));
        let taking = held.let_go_taking_back();
        assert!(matches!(now(), TakenBack::Pending));
        let mut released = Tally::new(3);
        released.add(0, crate::quorum::Answer::Yes(0));
        released.add(1, crate::quorum::Answer::Gone);
        taking.done(&released);
        drop(held);
        assert!(
            matches!(now(), TakenBack::Known(n) if n[..] == [0]),
            "still readable once the lock is dropped"
        );
        // An unlock cut off midway took back nobody knows what.
        let cut = Arc::new(Shared::default());
        let seen = Shared::taken_back(&Arc::downgrade(&cut));
        drop(cut.let_go_taking_back());
        assert!(matches!(*seen.borrow(), TakenBack::Unknown));
        let gone = Shared::taken_back(&Weak::new());
        assert!(matches!(*gone.borrow(), TakenBack::Unknown));
    }

    #[tokio::test]
    async fn work_on_a_held_lock_counts_as_clean_up_from_its_let_go() {
        let held = Arc::new(Shared::default());
        let (stop, stopped) = oneshot::channel::<()>();
        let count = Shared::count_from_let_go(&Arc::downgrade(&held));
        BACKGROUND.spawn_counted(count, async move {
            let _ = stopped.await;
        });
        assert!(done_within(50).await, "held: not clean-up yet");
        held.let_go();
        assert!(!done_within(50).await, "let go: counted until it ends");
        stop.send(()).unwrap();
        assert!(done_within(1000).await);
        // Dropping every clone is a let-go too; work that ended first is
        // counted off at once.
        let dropped = Arc::new(Shared::default());
        let count = Shared::count_from_let_go(&Arc::downgrade(&dropped));
        BACKGROUND.spawn_counted(count, async {});
        tokio::task::yield_now().await;
        drop(dropped);
        assert!(done_within(1000).await);
    }
}
