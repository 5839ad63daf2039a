//! Property test of the lock rules against a deliberately naive model:
//! random operation sequences on a few keys and owners, with a hand-driven
//! clock. Checks replies as documented, never two live owners of a key, and
//! strictly increasing tokens for new holders. A second model covers shared
//! holds, limits, downgrade and the mixed wait queue of one key: every reply
//! and every waiter's outcome as the model says, never an exclusive holder
//! beside another, never more holders than the limit, waiters granted in
//! the order they queued, and every new grant's token above all before.

use crate::rules::clock::Millis;
use crate::rules::fencing::TokenCounter;
use crate::rules::lock::{self, Acquire, Lock};
use crate::rules::shared::{self, Admit, Current, ExclusiveOnShared, Shared, SharedAcquire};
use crate::rules::value::Value;
use crate::rules::waiters::{KeyId, Queues, Waiter};
use std::collections::HashMap;

/// xorshift64*: deterministic, no extra dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    Token(u64),
    Nil,
    Int(i64),
}

/// The spec, written plainly: a key is held by (owner, token, deadline, holds)
/// while now < deadline.
#[derive(Default)]
struct Model {
    held: HashMap<u8, (u8, u64, Millis, u32)>,
    last_token: u64,
}

impl Model {
    fn live(&mut self, key: u8, now: Millis) -> Option<&mut (u8, u64, Millis, u32)> {
        self.held.get_mut(&key).filter(|s| now < s.2)
    }

    fn acquire(&mut self, key: u8, owner: u8, ttl: Millis, reentrant: bool, now: Millis) -> Reply {
        if let Some(s) = self.live(key, now) {
            if s.0 != owner {
                return Reply::Nil;
            }
            // A re-entry keeps the later deadline; a plain retry sets it.
            s.2 = if reentrant {
                s.2.max(now + ttl)
            } else {
                now + ttl
            };
            s.3 += u32::from(reentrant);
            return Reply::Token(s.1);
        }
        self.last_token += 1;
        self.held
            .insert(key, (owner, self.last_token, now + ttl, 1));
        Reply::Token(self.last_token)
    }

    fn release(&mut self, key: u8, owner: u8, now: Millis) -> Reply {
        let Some(s) = self.live(key, now) else {
            return Reply::Int(-1);
        };
        if s.0 != owner {
            return Reply::Int(0);
        }
        s.3 -= 1;
        if s.3 == 0 {
            self.held.remove(&key);
        }
        Reply::Int(1)
    }

    fn extend(&mut self, key: u8, owner: u8, ttl: Millis, now: Millis) -> Reply {
        let Some(s) = self.live(key, now) else {
            return Reply::Int(-1);
        };
        if s.0 != owner {
            return Reply::Int(0);
        }
        s.2 = now + ttl;
        Reply::Int(1)
    }
}

/// The real rules, driven the way commands.rs drives them.
#[derive(Default)]
struct Sim {
    locks: HashMap<u8, Lock>,
    tokens: TokenCounter,
}

impl Sim {
    fn acquire(&mut self, key: u8, owner: u8, ttl: Millis, reentrant: bool, now: Millis) -> Reply {
        match lock::acquire(self.locks.get_mut(&key), &[owner], ttl, reentrant, now) {
            Acquire::Busy => Reply::Nil,
            Acquire::Renewed { token, .. } => Reply::Token(token),
            Acquire::Free => {
                let l = Lock::new(
                    &[owner],
                    self.tokens.next(0).expect("far below MAX_TOKEN"),
                    ttl,
                    now,
                );
                let token = l.token;
                self.locks.insert(key, l);
                Reply::Token(token)
            }
        }
    }

    fn release(&mut self, key: u8, owner: u8, now: Millis) -> Reply {
        let r = lock::release(self.locks.get_mut(&key), &[owner], now);
        if r == lock::Release::Deleted {
            self.locks.remove(&key);
        }
        Reply::Int(r.reply())
    }

    fn extend(&mut self, key: u8, owner: u8, ttl: Millis, now: Millis) -> Reply {
        Reply::Int(lock::extend(self.locks.get_mut(&key), &[owner], ttl, now).reply())
    }
}

#[test]
fn rules_match_the_model_on_random_sequences() {
    for seed in 1..=200u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let (mut model, mut sim) = (Model::default(), Sim::default());
        let mut now: Millis = 1;
        let mut last_new_token = 0;
        for step in 0..500 {
            let (key, owner) = (rng.below(3) as u8, rng.below(3) as u8);
            let ttl = 1 + rng.below(50);
            let (expect, got) = match rng.below(5) {
                0 | 1 => {
                    let reentrant = rng.below(2) == 0;
                    let e = model.acquire(key, owner, ttl, reentrant, now);
                    (e, sim.acquire(key, owner, ttl, reentrant, now))
                }
                2 => (model.release(key, owner, now), sim.release(key, owner, now)),
                3 => (
                    model.extend(key, owner, ttl, now),
                    sim.extend(key, owner, ttl, now),
                ),
                _ => {
                    now += rng.below(40); // time passes, sometimes past deadlines
                    continue;
                }
            };
            assert_eq!(got, expect, "seed {seed} step {step}");
            if let Reply::Token(t) = got {
                if t > last_new_token {
                    last_new_token = t; // a new holder: strictly above all before
                } else {
                    let holder = sim.locks.get(&key).expect("held");
                    assert_eq!(holder.token, t, "a renewal returns the holder's own token");
                }
            }
            // Never two live owners: the one live lock per key is the model's.
            for (k, l) in &sim.locks {
                match model.held.get(k).filter(|s| now < s.2) {
                    Some(s) if !l.is_expired(now) => {
                        assert_eq!((&*l.owner, l.token), (&[s.0][..], s.1))
                    }
                    None => assert!(
                        l.is_expired(now),
                        "seed {seed}: sim holds a lock the model freed"
                    ),
                    Some(_) => panic!("seed {seed}: model holds a lock the sim lost"),
                }
            }
        }
    }
}

/// What a request or a queued waiter was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Told {
    Token(u64),
    Nil,
    Queued,
    Error,
    Int(i64),
}

/// One key's holders in the naive model: (owner, token, deadline, holds).
type Hold = (u8, u64, Millis, u32);

/// The shared/limit spec of issue 28, written plainly for one key: holders
/// are a list (one exclusive, or shared ones with an optional limit), the
/// queue a list in arrival order.
#[derive(Default)]
struct SharedModel {
    exclusive: bool,
    limit: Option<u32>,
    holders: Vec<Hold>,
    /// (waiter id, owner, shared, limit, ttl)
    queue: Vec<(u32, u8, bool, Option<u32>, Millis)>,
    last_token: u64,
}

impl SharedModel {
    fn prune(&mut self, now: Millis) {
        self.holders.retain(|h| now < h.2);
    }

    fn grant(
        &mut self,
        owner: u8,
        shared: bool,
        limit: Option<u32>,
        ttl: Millis,
        now: Millis,
    ) -> u64 {
        if self.holders.is_empty() {
            self.exclusive = !shared;
            self.limit = limit;
        }
        self.last_token += 1;
        self.holders.push((owner, self.last_token, now + ttl, 1));
        self.last_token
    }

    #[allow(clippy::too_many_arguments)]
    fn acquire(
        &mut self,
        id: u32,
        owner: u8,
        shared: bool,
        limit: Option<u32>,
        reentrant: bool,
        ttl: Millis,
        wait: bool,
        now: Millis,
    ) -> Told {
        self.prune(now);
        let renew = |h: &mut Hold| {
            if reentrant {
                h.3 += 1;
                h.2 = h.2.max(now + ttl);
            } else {
                h.2 = now + ttl;
            }
            h.1
        };
        let mine = self.holders.iter().position(|h| h.0 == owner);
        let busy = if self.holders.is_empty() {
            !self.queue.is_empty()
        } else if self.exclusive {
            match mine {
                Some(at) if shared => {
                    // Downgrade: the holder's lock becomes the first shared hold.
                    let token = renew(&mut self.holders[at]);
                    self.exclusive = false;
                    self.limit = limit;
                    return Told::Token(token);
                }
                Some(at) => return Told::Token(renew(&mut self.holders[at])),
                None => true,
            }
        } else if !shared {
            if mine.is_some() {
                return Told::Error; // no upgrade
            }
            true
        } else if limit.is_some() && limit != self.limit {
            return Told::Error;
        } else if let Some(at) = mine {
            return Told::Token(renew(&mut self.holders[at]));
        } else {
            let full = self.limit.is_some_and(|l| self.holders.len() >= l as usize);
            full || !self.queue.is_empty()
        };
        if !busy {
            return Told::Token(self.grant(owner, shared, limit, ttl, now));
        }
        if wait {
            self.queue.push((id, owner, shared, limit, ttl));
            Told::Queued
        } else {
            Told::Nil
        }
    }

    fn release(&mut self, owner: u8, now: Millis) -> (Told, Vec<(u32, Told)>) {
        self.prune(now);
        let reply = match self.holders.iter().position(|h| h.0 == owner) {
            Some(at) => {
                self.holders[at].3 -= 1;
                if self.holders[at].3 == 0 {
                    self.holders.remove(at);
                }
                Told::Int(1)
            }
            None if self.holders.is_empty() => Told::Int(-1),
            None => Told::Int(0),
        };
        // The releasing owner's queued requests are withdrawn.
        let mut told = Vec::new();
        self.queue.retain(|w| {
            if w.1 == owner {
                told.push((w.0, Told::Nil));
            }
            w.1 != owner
        });
        (reply, told)
    }

    fn extend(&mut self, owner: u8, ttl: Millis, now: Millis) -> Told {
        self.prune(now);
        let empty = self.holders.is_empty();
        match self.holders.iter_mut().find(|h| h.0 == owner) {
            Some(h) => {
                h.2 = now + ttl;
                Told::Int(1)
            }
            None if empty => Told::Int(-1),
            None => Told::Int(0),
        }
    }

    /// Hand the key to the head of the queue for as long as it may have it.
    fn settle(&mut self, now: Millis) -> Vec<(u32, Told)> {
        self.prune(now);
        let mut told = Vec::new();
        while let Some(&(id, owner, shared, limit, ttl)) = self.queue.first() {
            let free = self.holders.is_empty();
            if !shared {
                if !free {
                    break;
                }
                self.queue.remove(0);
                told.push((id, Told::Token(self.grant(owner, false, None, ttl, now))));
                break;
            }
            if !free && self.exclusive {
                break;
            }
            if !free && limit.is_some() && limit != self.limit {
                self.queue.remove(0);
                told.push((id, Told::Error));
                continue;
            }
            if !free && self.limit.is_some_and(|l| self.holders.len() >= l as usize) {
                break;
            }
            self.queue.remove(0);
            let token = match self.holders.iter_mut().find(|h| h.0 == owner) {
                Some(h) => {
                    h.2 = now + ttl; // already a holder: a retry
                    h.1
                }
                None => self.grant(owner, true, limit, ttl, now),
            };
            told.push((id, Told::Token(token)));
        }
        told
    }
}

/// The real rules for one key, driven the way the glue drives them
/// (commands.rs for requests, blocking.rs for the hand-off).
#[derive(Default)]
struct SharedSim {
    value: Option<Value>,
    queue: Queues<u32>,
    tokens: TokenCounter,
}

const K: (i32, &[u8]) = (0, b"k");

impl SharedSim {
    fn key() -> KeyId {
        (K.0, K.1.into())
    }

    /// What the glue does first on every write: drop expired holders, and
    /// the whole value once nothing in it is live.
    fn prune(&mut self, now: Millis) {
        if let Some(Value::Shared(s)) = &mut self.value {
            s.prune(now);
        }
        if self.value.as_ref().is_some_and(|v| v.is_expired(now)) {
            self.value = None;
        }
    }

    fn fresh(&mut self) -> u64 {
        self.tokens.next(0).expect("far below MAX_TOKEN")
    }

    #[allow(clippy::too_many_arguments)]
    fn acquire(
        &mut self,
        id: u32,
        owner: u8,
        shared_req: bool,
        limit: Option<u32>,
        reentrant: bool,
        ttl: Millis,
        wait: bool,
        now: Millis,
    ) -> Told {
        self.prune(now);
        let queued = self.queue.waiting(&Self::key()) > 0;
        let busy = if !shared_req {
            match &mut self.value {
                Some(Value::Exclusive(l)) => {
                    match lock::acquire(Some(l), &[owner], ttl, reentrant, now) {
                        Acquire::Renewed { token, .. } => return Told::Token(token),
                        Acquire::Busy => true,
                        Acquire::Free => queued,
                    }
                }
                Some(Value::Shared(s)) => match shared::exclusive_on_shared(s, &[owner], now) {
                    ExclusiveOnShared::NoUpgrade => return Told::Error,
                    ExclusiveOnShared::Busy => true,
                    ExclusiveOnShared::Free => queued,
                },
                None => queued,
            }
        } else {
            let decided = match &mut self.value {
                Some(Value::Exclusive(l)) => shared::on_exclusive(l, &[owner], ttl, reentrant, now),
                Some(Value::Shared(s)) => {
                    shared::on_shared(s, &[owner], ttl, reentrant, limit, now)
                }
                None => SharedAcquire::Free,
            };
            match decided {
                SharedAcquire::Renewed { token, .. } => return Told::Token(token),
                SharedAcquire::LimitDiffers => return Told::Error,
                SharedAcquire::Downgraded { token } => {
                    let Some(Value::Exclusive(l)) = self.value.take() else {
                        unreachable!()
                    };
                    self.value = Some(Value::Shared(Box::new(Shared::new(l, limit))));
                    return Told::Token(token);
                }
                SharedAcquire::Busy => true,
                SharedAcquire::Free | SharedAcquire::Join => queued,
            }
        };
        if !busy {
            let token = self.fresh();
            let hold = Lock::new(&[owner], token, ttl, now);
            match (&mut self.value, shared_req) {
                (Some(Value::Shared(s)), true) => s.join(hold, now),
                (_, true) => self.value = Some(Value::Shared(Box::new(Shared::new(hold, limit)))),
                (_, false) => self.value = Some(Value::Exclusive(hold)),
            }
            return Told::Token(token);
        }
        if !wait {
            return Told::Nil;
        }
        self.queue.push(
            Self::key(),
            Waiter {
                handle: id,
                owner: Box::new([owner]),
                ttl,
                min_token: 0,
                deadline: None,
                ticket: 0,
                shared: shared_req,
                limit,
            },
        );
        Told::Queued
    }

    fn release(&mut self, owner: u8, now: Millis) -> (Told, Vec<(u32, Told)>) {
        self.prune(now);
        let reply = match &mut self.value {
            None => lock::Release::NotHeld,
            Some(Value::Exclusive(l)) => {
                let r = lock::release(Some(l), &[owner], now);
                if r == lock::Release::Deleted {
                    self.value = None;
                }
                r
            }
            Some(Value::Shared(s)) => {
                let r = shared::release(s, &[owner], now);
                if r == lock::Release::Deleted {
                    s.remove(&[owner]);
                    if s.holders().is_empty() {
                        self.value = None;
                    }
                }
                r
            }
        };
        let withdrawn = self.queue.withdraw(&Self::key(), &[owner]);
        let told = withdrawn.iter().map(|w| (w.handle, Told::Nil)).collect();
        (Told::Int(reply.reply()), told)
    }

    fn extend(&mut self, owner: u8, ttl: Millis, now: Millis) -> Told {
        self.prune(now);
        let r = match &mut self.value {
            None => lock::Extend::NotHeld,
            Some(Value::Exclusive(l)) => lock::extend(Some(l), &[owner], ttl, now),
            Some(Value::Shared(s)) => shared::extend(s, &[owner], ttl, now),
        };
        Told::Int(r.reply())
    }

    /// blocking.rs's hand-off loop.
    fn settle(&mut self, now: Millis) -> Vec<(u32, Told)> {
        self.prune(now);
        let key = Self::key();
        let mut told = Vec::new();
        while let Some(head) = self.queue.front(&key) {
            let current = match &self.value {
                None => Current::Free,
                Some(Value::Exclusive(l)) => Current::Exclusive(l),
                Some(Value::Shared(s)) => Current::Shared(s),
            };
            let decided = shared::admit(current, head.shared, head.limit, now);
            if decided == Admit::Wait {
                break;
            }
            let w = self.queue.pop_front(&key).expect("the head");
            if decided == Admit::LimitDiffers {
                told.push((w.handle, Told::Error));
                continue;
            }
            if !w.shared {
                let token = self.fresh();
                self.value = Some(Value::Exclusive(Lock::new(&w.owner, token, w.ttl, now)));
                told.push((w.handle, Told::Token(token)));
                break;
            }
            if let Some(Value::Shared(s)) = &mut self.value {
                if let Some(h) = s.retry(&w.owner, w.ttl, now) {
                    told.push((w.handle, Told::Token(h.token)));
                    continue;
                }
            }
            let token = self.fresh();
            let hold = Lock::new(&w.owner, token, w.ttl, now);
            match &mut self.value {
                Some(Value::Shared(s)) => s.join(hold, now),
                _ => self.value = Some(Value::Shared(Box::new(Shared::new(hold, w.limit)))),
            }
            told.push((w.handle, Told::Token(token)));
        }
        told
    }
}

#[test]
fn shared_rules_match_the_model_on_random_sequences() {
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let (mut model, mut sim) = (SharedModel::default(), SharedSim::default());
        let mut now: Millis = 1;
        let mut last_new_token = 0;
        let mut next_id = 0u32;
        // The order waiters were queued in, and the order they were granted.
        let mut queued: Vec<u32> = Vec::new();
        for step in 0..400 {
            let owner = rng.below(5) as u8;
            let ttl = 1 + rng.below(60);
            let (expect, got, mut expect_told, mut got_told) = match rng.below(8) {
                0..=3 => {
                    next_id += 1;
                    let shared_req = rng.below(3) != 0;
                    let limit = (shared_req && rng.below(2) == 0).then(|| 1 + rng.below(3) as u32);
                    let reentrant = rng.below(4) == 0;
                    let wait = rng.below(2) == 0;
                    let args = (next_id, owner, shared_req, limit, reentrant, ttl, wait, now);
                    let e = model.acquire(
                        args.0, args.1, args.2, args.3, args.4, args.5, args.6, args.7,
                    );
                    let g = sim.acquire(
                        args.0, args.1, args.2, args.3, args.4, args.5, args.6, args.7,
                    );
                    if g == Told::Queued {
                        queued.push(next_id);
                    }
                    (e, g, Vec::new(), Vec::new())
                }
                4 => {
                    let (e, et) = model.release(owner, now);
                    let (g, gt) = sim.release(owner, now);
                    (e, g, et, gt)
                }
                5 => (
                    model.extend(owner, ttl, now),
                    sim.extend(owner, ttl, now),
                    Vec::new(),
                    Vec::new(),
                ),
                _ => {
                    now += rng.below(30); // time passes, sometimes past deadlines
                    (Told::Nil, Told::Nil, Vec::new(), Vec::new())
                }
            };
            assert_eq!(got, expect, "seed {seed} step {step}");
            expect_told.extend(model.settle(now));
            got_told.extend(sim.settle(now));
            assert_eq!(
                got_told, expect_told,
                "seed {seed} step {step}: waiters told"
            );
            // Tokens: every fresh grant above every token before it.
            let fresh = std::iter::once(got).chain(got_told.iter().map(|t| t.1));
            for t in fresh {
                let Told::Token(t) = t else { continue };
                if t > last_new_token {
                    last_new_token = t; // a new holder: above every token before
                } else {
                    let held = match &sim.value {
                        Some(Value::Exclusive(l)) => l.token == t,
                        Some(Value::Shared(s)) => s.holders().iter().any(|h| h.token == t),
                        None => false,
                    };
                    assert!(
                        held,
                        "seed {seed} step {step}: token {t} neither new nor a holder's"
                    );
                }
            }
            // FIFO: waiters leave the queue granted in the order they came.
            for (id, t) in &got_told {
                if let Told::Token(_) = t {
                    let at = queued.iter().position(|q| q == id).expect("was queued");
                    assert!(
                        queued[..at]
                            .iter()
                            .all(|earlier| got_told.iter().any(|(i, _)| i == earlier)),
                        "seed {seed} step {step}: waiter {id} granted before an earlier one"
                    );
                }
            }
            queued.retain(|q| !got_told.iter().any(|(i, _)| i == q));
            // Never an exclusive holder beside another, never above the limit.
            match &sim.value {
                Some(Value::Shared(s)) => {
                    let live = s.live(now);
                    assert!(
                        s.limit.is_none_or(|l| live <= l as usize),
                        "seed {seed}: {live} holders"
                    );
                    assert!(!model.exclusive || model.holders.is_empty());
                    assert_eq!(live, model.holders.len(), "seed {seed} step {step}");
                }
                Some(Value::Exclusive(l)) if !l.is_expired(now) => {
                    assert!(
                        model.exclusive && model.holders.len() == 1,
                        "seed {seed} step {step}"
                    );
                    assert_eq!(
                        (&*l.owner, l.token),
                        (&[model.holders[0].0][..], model.holders[0].1)
                    );
                }
                _ => assert!(model.holders.is_empty(), "seed {seed} step {step}"),
            }
        }
    }
}
