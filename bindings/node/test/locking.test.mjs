// Acquire and release on 1 and 3 servers, wait, tokens, using(), ESM and
// CommonJS, against real servers with the module.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { Locker, LockError, TakenError, LockLostError } from '../index.mjs';
import { Server, killAll } from '../testing/servers.mjs';

let one;
let three;
before(async () => {
  [one, ...three] = await Server.startN(4);
});
after(killAll);

const urls = (servers) => servers.map((s) => s.url);
const held = async (servers, name) => Promise.all(servers.map((s) => s.holds(name)));
// A lock is held once a majority granted it; the last server's grant may
// still be on its way when the call returns, and a release of a grant that
// lands late follows it. So: a majority inside, every server free soon after.
const heldOn = async (servers, name) => (await held(servers, name)).filter(Boolean).length;
const freeSoon = async (servers, name) => {
  for (let i = 0; i < 100 && (await heldOn(servers, name)) > 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return held(servers, name);
};

const heldSoon = async (servers, name) => {
  for (let i = 0; i < 100 && (await heldOn(servers, name)) < servers.length; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return held(servers, name);
};

for (const n of [1, 3]) {
  test(`acquire and release on ${n} server(s)`, async () => {
    const servers = n === 1 ? [one] : three;
    const locker = new Locker(urls(servers), { ttl: 10_000 });
    const lock = await locker.lock('lock:job');
    assert.equal(typeof lock.token, 'bigint');
    assert.ok(lock.token > 0n);
    assert.equal(lock.owner.length, 32, '128 random bits as hex');
    assert.equal(lock.name, 'lock:job');
    assert.ok(lock.validity > 0 && lock.validity <= 10_000);
    assert.equal(lock.lost, false);
    assert.equal(lock.signal.aborted, false);
    // The grant not needed for the majority can land just after the call.
    assert.deepEqual(await heldSoon(servers, 'lock:job'), servers.map(() => true));
    await assert.rejects(new Locker(urls(servers)).lock('lock:job'), TakenError);
    await lock.release();
    assert.equal(lock.released, true);
    assert.deepEqual(await freeSoon(servers, 'lock:job'), servers.map(() => false));
    await lock.release(); // again: nothing to do
    assert.equal(lock.signal.aborted, false, 'released, not lost');
  });
}

test('a failure is a LockError with a code and per-node causes', async () => {
  const locker = new Locker(urls(three));
  const lock = await locker.lock('lock:coded');
  const err = await locker.lock('lock:coded').catch((e) => e);
  assert.ok(err instanceof TakenError && err instanceof LockError && err instanceof Error);
  assert.equal(err.code, 'LOCK_TAKEN');
  assert.deepEqual(err.causes, []);
  await lock.release();
  // Two of three servers refuse connections: no quorum, each cause named.
  const dead = new Locker([three[0].url, 'redis://127.0.0.1:1', 'redis://127.0.0.1:2']);
  const outage = await dead.lock('lock:coded').catch((e) => e);
  assert.equal(outage.code, 'LOCK_NO_QUORUM');
  assert.equal(outage.needed, 2);
  assert.deepEqual(outage.causes.map((c) => c.node).sort(), ['127.0.0.1:1', '127.0.0.1:2']);
});

test('wait is honoured: a waiter gets the lock when it comes free within wait', async () => {
  const locker = new Locker(urls(three));
  const holder = await locker.lock('lock:wait');
  await assert.rejects(locker.lock('lock:wait', { wait: 0 }), TakenError);
  const waiter = locker.lock('lock:wait', { wait: 5_000 });
  setTimeout(() => holder.release(), 300);
  const got = await waiter;
  assert.ok(got.token > holder.token);
  await got.release();
});

test('64 calls at once each get their own outcome (settled together, in batches)', async () => {
  const locker = new Locker(urls(three), { ttl: 10_000 });
  const other = new Locker(urls(three), { ttl: 10_000 });
  // Every even name is held by another Locker: those calls are refused.
  const taken = await Promise.all(
    Array.from({ length: 32 }, (_, i) => other.lock(`lock:batch:${2 * i}`, { autoRenew: false })),
  );
  const outcomes = await Promise.allSettled(
    Array.from({ length: 64 }, (_, i) => locker.lock(`lock:batch:${i}`, { autoRenew: false })),
  );
  outcomes.forEach((o, i) => {
    if (i % 2 === 0) {
      assert.equal(o.status, 'rejected', `lock:batch:${i}`);
      assert.ok(o.reason instanceof TakenError);
      assert.match(o.reason.message, new RegExp(`"lock:batch:${i}"`));
    } else {
      assert.equal(o.status, 'fulfilled', `lock:batch:${i}`);
      assert.equal(o.value.name, `lock:batch:${i}`);
    }
  });
  const mine = outcomes.filter((o) => o.status === 'fulfilled').map((o) => o.value);
  await Promise.all([...mine, ...taken].map((l) => l.release()));
  assert.ok(mine.every((l) => l.released));
  assert.deepEqual(await freeSoon(three, 'lock:batch:1'), [false, false, false]);
});

test('tokens increase across holders and Lockers', async () => {
  const a = new Locker(urls(three));
  const b = new Locker(urls(three));
  let last = 0n;
  for (let i = 0; i < 6; i++) {
    const lock = await (i % 2 ? a : b).lock('lock:tokens', { wait: 2_000 });
    assert.ok(lock.token > last, `${lock.token} after ${last}`);
    last = lock.token;
    await lock.release();
  }
});

test('using releases when the function settles, also on throw', async () => {
  const locker = new Locker(urls(three));
  const value = await locker.using('lock:using', { wait: 1_000 }, async (signal, lock) => {
    assert.equal(signal.aborted, false);
    assert.ok((await heldOn(three, 'lock:using')) >= 2, 'held on a majority inside');
    return lock.token;
  });
  assert.equal(typeof value, 'bigint');
  assert.deepEqual(await freeSoon(three, 'lock:using'), [false, false, false]);
  await assert.rejects(
    locker.using('lock:using', async () => {
      throw new Error('the work failed');
    }),
    /the work failed/,
  );
  assert.deepEqual(await freeSoon(three, 'lock:using'), [false, false, false]);
});

test('a plain lock extends to a new TTL, and is lost once it runs out', async () => {
  const locker = new Locker(urls(three), { ttl: 500 });
  const lock = await locker.lock('lock:plain', { autoRenew: false });
  assert.equal(lock.autoRenew, false);
  await lock.extend(20_000);
  assert.equal(lock.ttl, 20_000);
  assert.ok(lock.validity > 10_000);
  await lock.release();
  const short = await locker.lock('lock:plain', { autoRenew: false, ttl: 200 });
  const aborted = new Promise((resolve) => short.signal.addEventListener('abort', resolve));
  await aborted;
  assert.equal(short.lost, true);
  assert.ok(short.signal.reason instanceof LockLostError);
  // Validity ends a little before the servers' TTL (drift): once they have
  // let it go, an extend says lost too.
  while ((await held(three, 'lock:plain')).some((h) => h)) await new Promise((r) => setTimeout(r, 20));
  await assert.rejects(short.extend(), LockLostError);
  assert.equal(short.lost, true);
});

test('a signal first read after the loss aborts too', async () => {
  const locker = new Locker(urls(three), { ttl: 500 }); // node timeout 25 ms
  const lock = await locker.lock('lock:late-signal', { autoRenew: false, ttl: 100 });
  while (!lock.lost) await new Promise((r) => setTimeout(r, 20));
  const { signal } = lock;
  if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve));
  assert.ok(signal.reason instanceof LockLostError);
  // Released first, never lost: its signal, read later, stays quiet.
  const kept = await locker.lock('lock:late-signal-2', { autoRenew: false });
  await kept.release();
  const quiet = kept.signal;
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(quiet.aborted, false);
});

test('a renewed lock outlives its TTL and extends through the watchdog', async () => {
  const locker = new Locker(urls(three), { ttl: 300 });
  const lock = await locker.lock('lock:renewed');
  await new Promise((r) => setTimeout(r, 1_000));
  assert.equal(lock.lost, false);
  assert.deepEqual(await held(three, 'lock:renewed'), [true, true, true]);
  await lock.extend(30_000);
  assert.ok(lock.validity > 20_000);
  await lock.release();
  assert.equal(lock.signal.aborted, false);
});

test('Symbol.asyncDispose releases', async () => {
  const locker = new Locker(urls(three));
  const lock = await locker.lock('lock:dispose');
  await lock[Symbol.asyncDispose]();
  assert.equal(lock.released, true);
  assert.deepEqual(await held(three, 'lock:dispose'), [false, false, false]);
});

test('CommonJS and ESM load the same classes', () => {
  const require = createRequire(import.meta.url);
  const cjs = require('..');
  assert.equal(cjs.Locker, Locker);
  assert.equal(cjs.TakenError, TakenError);
});
