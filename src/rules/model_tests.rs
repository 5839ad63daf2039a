//! Property test of the lock rules against a deliberately naive model:
//! random operation sequences on a few keys and owners, with a hand-driven
//! clock. Checks replies as documented, never two live owners of a key, and
//! strictly increasing tokens for new holders.

use crate::rules::fencing::TokenCounter;
use crate::rules::lock::{self, Acquire, Lock, Millis};
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
