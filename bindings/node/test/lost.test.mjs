// A holder whose servers stop answering (SIGSTOP) sees its signal abort
// and `lost` turn true while its function runs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Locker, LockLostError, NoQuorumError } from '../index.mjs';
import { Server, killAll, inline } from '../testing/servers.mjs';

let servers;
before(async () => {
  servers = await Server.startN(3);
});
after(killAll);

test('stopping a majority aborts the signal and the function sees lost', async () => {
  const locker = new Locker(servers.map((s) => s.url), { ttl: 1_000 });
  let seen;
  const outcome = locker.using('lock:stopped', { wait: 1_000 }, async (signal, lock) => {
    assert.equal(lock.lost, false);
    servers[0].signal('SIGSTOP');
    servers[1].signal('SIGSTOP');
    // The work: it waits for the signal (a 10 s cap so a missed abort fails
    // the test instead of hanging it).
    await new Promise((resolve, reject) => {
      const cap = setTimeout(() => reject(new Error('signal not aborted within 10 s')), 10_000);
      signal.addEventListener('abort', () => {
        clearTimeout(cap);
        resolve();
      });
    });
    seen = { aborted: signal.aborted, reason: signal.reason, lost: lock.lost };
    return 'finished';
  });
  try {
    await assert.rejects(outcome, LockLostError, 'using reports the loss');
  } finally {
    servers[0].signal('SIGCONT');
    servers[1].signal('SIGCONT');
  }
  assert.equal(seen.aborted, true);
  assert.equal(seen.lost, true);
  assert.ok(seen.reason instanceof LockLostError);
  assert.equal(seen.reason.code, 'LOCK_LOST');
});

const held = async (name) => (await Promise.all(servers.map((s) => s.holds(name)))).filter(Boolean).length;
const until = async (what, check, ms = 5_000) => {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};
// A collection on demand, without starting node with --expose-gc.
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');
const collect = async () => {
  for (let i = 0; i < 5; i++) {
    gc();
    await new Promise((r) => setImmediate(r));
  }
};

test('keeping only the signal keeps the lock; dropping it too releases it', async () => {
  // 2026-11-29: with only `signal` kept, the Lock was collected and
  // released by its finalizer, its signal never aborted, and a rival took
  // the lock while the holder still worked under that signal.
  const locker = new Locker(servers.map((s) => s.url), { ttl: 10_000 });
  let { signal } = await locker.lock('lock:only-signal');
  await collect();
  await new Promise((r) => setTimeout(r, 300)); // a release in the background would have landed
  assert.equal(await held('lock:only-signal'), 3, 'held on every server while the signal is kept');
  assert.equal(signal.aborted, false);
  signal = null;
  await collect();
  await until('released once nothing holds the lock or its signal', async () => (await held('lock:only-signal')) === 0);
});

test('a signal first read after the loss is already aborted', async () => {
  const locker = new Locker(servers.map((s) => s.url), { ttl: 200 });
  const lock = await locker.lock('lock:late-signal', { autoRenew: false });
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(lock.lost, true);
  const { signal } = lock;
  assert.equal(signal.aborted, true);
  assert.throws(() => signal.throwIfAborted(), LockLostError);
});

test('a renewed lock whose release failed is not released: release() tries again', async () => {
  const locker = new Locker(servers.map((s) => s.url), { ttl: 5_000, nodeTimeout: 200 });
  const lock = await locker.lock('lock:release-again');
  servers[0].signal('SIGSTOP');
  servers[1].signal('SIGSTOP');
  try {
    await assert.rejects(lock.release(), NoQuorumError);
    assert.equal(lock.released, false);
    // Before 2026-11-29 this resolved, doing nothing, with the servers still stopped.
    await assert.rejects(lock.release(), NoQuorumError);
  } finally {
    servers[0].signal('SIGCONT');
    servers[1].signal('SIGCONT');
  }
  await until('free on every server', async () => (await held('lock:release-again')) === 0);
});

test('validity is 0 once released', async () => {
  const locker = new Locker(servers.map((s) => s.url), { ttl: 10_000 });
  const lock = await locker.lock('lock:validity');
  assert.ok(lock.validity > 0);
  await lock.release();
  assert.equal(lock.validity, 0);
});

test('using() rejects with LockLostError, its cause the function\'s own error, when the lock was lost first', async () => {
  const locker = new Locker(servers.map((s) => s.url), { ttl: 1_000 });
  const mine = new Error('the work failed');
  const outcome = locker.using('lock:lost-then-threw', async (signal) => {
    servers[0].signal('SIGSTOP');
    servers[1].signal('SIGSTOP');
    await new Promise((resolve) => signal.addEventListener('abort', resolve));
    throw mine;
  });
  try {
    await assert.rejects(outcome, (e) => e instanceof LockLostError && e.cause === mine);
  } finally {
    servers[0].signal('SIGCONT');
    servers[1].signal('SIGCONT');
  }
});

test('an extend after its own release is refused, and the lock does not read as lost', async () => {
  // 2026-11-29: `lost` turned true (a loss) while the signal, rightly, did not abort.
  const locker = new Locker(servers.map((s) => s.url), { ttl: 10_000 });
  for (const autoRenew of [true, false]) {
    const lock = await locker.lock(`lock:extend-released:${autoRenew}`, { autoRenew });
    const { signal } = lock;
    await lock.release();
    await assert.rejects(lock.extend(), LockLostError);
    assert.equal(lock.lost, false, `autoRenew ${autoRenew}`);
    assert.equal(signal.aborted, false);
  }
});

test('an extend racing the release of a renewed lock is no loss', async () => {
  // 2026-11-29: the release stops the watchdog first, the extend then found
  // it stopped and marked the lock lost, aborting the signal (19 in 20).
  const locker = new Locker(servers.map((s) => s.url), { ttl: 10_000 });
  for (let i = 0; i < 40; i++) {
    const lock = await locker.lock(`lock:release-extend:${i}`);
    const { signal } = lock;
    await Promise.allSettled(i % 2 ? [lock.extend(), lock.release()] : [lock.release(), lock.extend()]);
    assert.equal(lock.released, true);
    assert.equal(lock.lost, false, `round ${i}`);
    assert.equal(signal.aborted, false, `round ${i}`);
  }
});

test('a release retried after one that timed out but landed late resolves', async () => {
  // 2026-11-29: the retry found the key gone (the first RELEASEs ran once
  // the servers went on) and said LockLostError, marking the lock lost.
  const locker = new Locker(servers.map((s) => s.url), { ttl: 10_000, nodeTimeout: 200 });
  for (const autoRenew of [true, false]) {
    const name = `lock:late-release:${autoRenew}`;
    const lock = await locker.lock(name, { autoRenew });
    const { signal } = lock;
    await Promise.all(servers.map((s) => inline(s.port, 'CLIENT PAUSE 1000 ALL')));
    await assert.rejects(lock.release(), NoQuorumError);
    await until('the paused RELEASEs ran', async () => (await held(name)) === 0);
    await lock.release();
    assert.equal(lock.released, true);
    assert.equal(lock.lost, false);
    assert.equal(signal.aborted, false);
  }
});
