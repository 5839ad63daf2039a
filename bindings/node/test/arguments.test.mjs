// Bad arguments reject (or throw, in the constructor) with TypeError or
// RangeError naming the argument, and never crash the process.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Locker } from '../index.mjs';
import { Server, killAll } from '../testing/servers.mjs';

let server;
before(async () => {
  server = await Server.start();
});
after(killAll);

/** `fn()` throws or rejects with `Kind`, its message naming `argument`. */
async function refused(fn, Kind, argument) {
  const err = await (async () => fn())().then(
    () => assert.fail(`accepted; expected a ${Kind.name} about ${argument}`),
    (e) => e,
  );
  assert.ok(err instanceof Kind, `${err?.constructor?.name}: ${err?.message} (expected ${Kind.name})`);
  assert.match(err.message, new RegExp(argument.replace(/[[\]]/g, '\\$&')), err.message);
}

test('ttl: negative, zero, NaN, a string, a huge number', async () => {
  const urls = [server.url];
  await refused(() => new Locker(urls, { ttl: -1 }), RangeError, 'ttl');
  await refused(() => new Locker(urls, { ttl: 0 }), RangeError, 'ttl');
  await refused(() => new Locker(urls, { ttl: NaN }), RangeError, 'ttl');
  await refused(() => new Locker(urls, { ttl: Infinity }), RangeError, 'ttl');
  await refused(() => new Locker(urls, { ttl: '10000' }), TypeError, 'ttl');
  await refused(() => new Locker(urls, { ttl: 1e300 }), RangeError, 'ttl');
  await refused(() => new Locker(urls, { ttl: 10n }), TypeError, 'ttl');
  const locker = new Locker(urls);
  for (const ttl of [-1, 0, NaN, 1e300]) {
    await refused(() => locker.lock('lock:args', { ttl }), RangeError, 'ttl');
  }
  await refused(() => locker.lock('lock:args', { ttl: 'x' }), TypeError, 'ttl');
  const lock = await locker.lock('lock:args');
  await refused(() => lock.extend(-5), RangeError, 'ttl');
  await refused(() => lock.extend('5'), TypeError, 'ttl');
  await lock.release();
});

test('wait and the other options', async () => {
  const locker = new Locker([server.url]);
  await refused(() => locker.lock('lock:args', { wait: -1 }), RangeError, 'wait');
  await refused(() => locker.lock('lock:args', { wait: NaN }), RangeError, 'wait');
  await refused(() => locker.lock('lock:args', { wait: '1' }), TypeError, 'wait');
  await refused(() => locker.lock('lock:args', { wait: 2 ** 60 }), RangeError, 'wait');
  await refused(() => locker.lock('lock:args', { autoRenew: 'yes' }), TypeError, 'autoRenew');
  await refused(() => locker.lock('lock:args', { owner: 7 }), TypeError, 'owner');
  await refused(() => locker.lock('lock:args', { owner: '' }), RangeError, 'owner');
  await refused(() => locker.lock('lock:args', 'fast'), TypeError, 'options');
  await refused(() => locker.using('lock:args', {}, 'not a function'), TypeError, 'fn');
  await refused(() => new Locker([server.url], { driftFactor: 0.7 }), RangeError, 'driftFactor');
  await refused(() => new Locker([server.url], { retryCount: 1.5 }), TypeError, 'retryCount');
  await refused(() => new Locker([server.url], { nodeTimeout: 20_000, ttl: 1_000 }), RangeError, 'node timeout');
});

test('a name that is not a string or Buffer', async () => {
  const locker = new Locker([server.url]);
  for (const name of [undefined, null, 42, {}, ['a'], Symbol('s'), () => 'f', 1n]) {
    await refused(() => locker.lock(name), TypeError, 'name');
  }
  await refused(() => locker.lock(''), RangeError, 'name');
  await refused(() => locker.lock(Buffer.from([0xff, 0xfe])), TypeError, 'name');
  const lock = await locker.lock(Buffer.from('lock:buffer'));
  assert.equal(lock.name, 'lock:buffer');
  await lock.release();
});

test('bad URLs', async () => {
  await refused(() => new Locker('definitely not a url'), TypeError, 'urls');
  await refused(() => new Locker(['nope://127.0.0.1:1']), TypeError, 'urls');
  await refused(() => new Locker([server.url, 42]), TypeError, 'urls[1]');
  await refused(() => new Locker([]), RangeError, 'urls');
  await refused(() => new Locker(), TypeError, 'urls');
  await refused(() => new Locker({ url: server.url }), TypeError, 'urls');
  // One server named twice must not vote twice.
  await refused(() => new Locker([server.url, server.url.replace('127.0.0.1', 'localhost')]), RangeError, 'same server');
});

test('a string with a lone surrogate, as a name or an owner', async () => {
  // napi makes each lone surrogate U+FFFD: "job\uD800" and "job\uDBFF" were
  // one lock, and so were two such owners (2026-11-29).
  const locker = new Locker([server.url]);
  await refused(() => locker.lock('job\uD800', { autoRenew: false }), TypeError, 'name');
  await refused(() => locker.lock('job\uDC00x', { autoRenew: false }), TypeError, 'name');
  await refused(() => locker.lock('job', { owner: '\uDFFF', autoRenew: false }), TypeError, 'owner');
  const pair = await locker.lock('job\uD83D\uDE00', { owner: 'me\uD83D\uDE00', autoRenew: false });
  assert.equal(pair.name, 'job\uD83D\uDE00');
  await pair.release();
});

test('holes, proxies and getters are read once and checked as read', async () => {
  // 2026-11-29: holes in urls and an owner getter that changed after the
  // checks reached the native layer and came back as a plain Error.
  await refused(() => new Locker([, server.url]), TypeError, 'urls[0]');
  await refused(() => new Locker(new Array(2)), TypeError, 'urls[0]');
  let reads = 0;
  const shifting = new Proxy([server.url], {
    get(target, key) {
      if (key === 'length') return reads++ === 0 ? 1 : 2;
      return Reflect.get(target, key);
    },
  });
  // Copied once, its second element read as undefined: refused as such, not
  // passed on to fail in the native layer.
  await refused(() => new Locker(shifting), TypeError, 'urls[1]');
  let asked = 0;
  const opts = { autoRenew: false, get owner() { return asked++ < 1 ? 'abc' : 5; } };
  const locker = new Locker([server.url]);
  const lock = await locker.lock('lock:getter', opts);
  assert.equal(lock.owner, 'abc');
  assert.equal(asked, 1);
  await lock.release();
});

test('after all that the process still locks', async () => {
  const lock = await new Locker([server.url]).lock('lock:still');
  await lock.release();
});
