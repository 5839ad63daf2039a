// A holder whose servers stop answering (SIGSTOP) sees its signal abort
// and `lost` turn true while its function runs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { Locker, LockLostError, NoQuorumError } from '../index.mjs';
import { Server, killAll, inline, until, timeTerminate } from '../testing/servers.mjs';

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

test('an extend() called right after release() is refused', async () => {
  // 2026-11-29: the release was marked on the runtime, and an extend called
  // right after it from JavaScript sometimes ran first and succeeded.
  const locker = new Locker(servers.map((s) => s.url), { ttl: 10_000 });
  for (let i = 0; i < 100; i++) {
    const lock = await locker.lock(`lock:extend-after:${i}`, { autoRenew: false });
    const released = lock.release();
    await assert.rejects(lock.extend(), LockLostError, `round ${i}`);
    await released;
  }
});

test('after a release that failed, an idle process stays idle', async () => {
  // 2026-11-29: once the validity of a lock whose release failed ran out,
  // its loss watcher woke every millisecond (500 such locks: 760 ms of CPU
  // in 5 s of idling).
  const locker = new Locker(servers.map((s) => s.url), { ttl: 300, nodeTimeout: 100 });
  const locks = [];
  for (let i = 0; i < 300; i++) locks.push(await locker.lock(`lock:idle:${i}`, { autoRenew: false }));
  for (const lock of locks) assert.equal(lock.signal.aborted, false);
  servers.forEach((s) => s.signal('SIGSTOP'));
  try {
    const outcomes = await Promise.allSettled(locks.map((l) => l.release()));
    assert.ok(outcomes.every((o) => o.status === 'rejected' && o.reason instanceof NoQuorumError));
  } finally {
    servers.forEach((s) => s.signal('SIGCONT'));
  }
  await new Promise((r) => setTimeout(r, 500)); // every validity ran out
  const before = process.cpuUsage();
  await new Promise((r) => setTimeout(r, 1_000));
  const used = process.cpuUsage(before);
  const ms = (used.user + used.system) / 1000;
  assert.ok(ms < 100, `${ms} ms of CPU in 1 s of idling`);
  assert.ok(locks.every((l) => !l.lost));
});

test('a worker ends at once while another thread\'s clean-up waits on a stalled server', async () => {
  // 2026-11-29: every thread's end waited for the process's whole
  // background clean-up: 2 s whenever a wait's withdrawal waited on a
  // stalled server, even for a worker that had never locked.
  const locker = new Locker(servers.map((s) => s.url), { ttl: 10_000 });
  const holder = await locker.lock('lock:stalled-clean-up', { autoRenew: false });
  const pkg = fileURLToPath(new URL('../index.js', import.meta.url));
  servers[2].signal('SIGSTOP');
  try {
    await assert.rejects(locker.lock('lock:stalled-clean-up', { wait: 300 }));
    const worker = new Worker(
      `require(${JSON.stringify(pkg)});
       require('node:worker_threads').parentPort.postMessage('up');
       setInterval(() => {}, 1000);`,
      { eval: true },
    );
    const took = await timeTerminate(worker);
    assert.ok(took < 1_500, `terminate() took ${took} ms`);
  } finally {
    servers[2].signal('SIGCONT');
  }
  await holder.release();
});
