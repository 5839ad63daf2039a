// A process (or worker) that ends holding locks releases those whose owner
// is its own before it goes, also over a slow network; a lock taken with a
// given owner is left to expire with its TTL (its owner may be shared).
// Calls still in flight when a worker is terminated settle nowhere, and
// the other threads' calls go on.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { once } from 'node:events';
import { Locker } from '../index.mjs';
import { Server, killAll, inline, until, timeTerminate } from '../testing/servers.mjs';
import { delayProxy } from '../testing/delay-proxy.mjs';

const run = promisify(execFile);
const testing = path.join(path.dirname(fileURLToPath(import.meta.url)), '../testing');
const script = path.join(testing, 'exit-holding.mjs');
let server;
let slow;
before(async () => {
  server = await Server.start();
  slow = await delayProxy(server.port, 100); // a RELEASE takes >= 200 ms
});
after(() => {
  slow.close();
  killAll();
});

for (const how of ['end', 'exit']) {
  test(`a process that ends with a lock held (${how}) releases it first`, async () => {
    const name = `lock:left:${how}`;
    const { stdout } = await run(process.execPath, [script, slow.url, name, how]);
    assert.equal(stdout.trim(), 'holding');
    assert.equal(await server.holds(name), false, 'released before the process went');
  });
}

test('a worker thread that ends with a lock held releases it first', async () => {
  const name = 'lock:left:worker';
  const worker = new Worker(script, { argv: [slow.url, name, 'end'], stdout: true });
  const code = await new Promise((resolve, reject) => {
    worker.once('error', reject);
    worker.once('exit', resolve);
  });
  assert.equal(code, 0);
  assert.equal(await server.holds(name), false, 'released before the worker went');
});

// 2026-11-28: process.exit() as the first of 500 acquisitions settled left
// each lock the other 499 won held on every server for its TTL (they were
// not yet the process's locks when the exit released those).
test('a process that exits with acquisitions in flight leaves none of them held', async () => {
  const servers = await Server.startN(3);
  try {
    const urls = servers.map((s) => s.url).join(',');
    await run(process.execPath, [path.join(testing, 'exit-in-flight.mjs'), urls, 'lock:inflight-exit', '500']);
    for (const s of servers) {
      assert.equal(await inline(s.port, 'DBSIZE'), ':0', `server ${s.port} still holds locks`);
    }
  } finally {
    for (const s of servers) s.kill();
  }
});

test('a lock with a given owner is left to its TTL', async () => {
  const name = 'lock:left:shared';
  await run(process.execPath, [script, server.url, name, 'shared']);
  assert.equal(await server.holds(name), true);
});

// A worker's calls finish on the runtime after its env is gone: their
// settlements must be dropped (the promises went with the env), not queued
// on the worker's freed threadsafe function, and the main thread's calls
// must still settle.
test('a worker terminated with calls in flight goes; the main thread keeps locking', async () => {
  const pkg = fileURLToPath(new URL('../index.js', import.meta.url));
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     const { Locker } = require(workerData.pkg);
     const locker = new Locker([workerData.url], { nodeTimeout: 3_000 });
     for (let i = 0; i < 8; i++) locker.lock('lock:inflight:' + i, { autoRenew: false }).catch(() => {});
     parentPort.postMessage('calling');`,
    { eval: true, workerData: { pkg, url: slow.url } },
  );
  await once(worker, 'message');
  await worker.terminate();
  const locker = new Locker([server.url]);
  for (let i = 0; i < 3; i++) {
    const lock = await locker.lock('lock:after-terminate', { autoRenew: false });
    await lock.release();
  }
  assert.equal(await server.holds('lock:after-terminate'), false);
});

/** How many wait in the server's queue for `name` (LOCK.STATUS's waiters). */
async function waiters(name) {
  const { stdout } = await run('redis-cli', ['-p', String(server.port), 'LOCK.STATUS', name]);
  return Number(/waiters\n(\d+)/.exec(stdout)?.[1] ?? 0);
}


test('a worker terminated while its lock() waits leaves neither the wait nor a late grant', async () => {
  // 2026-11-29: the wait stayed queued until its own deadline (600 s), and
  // with a given owner its grant landed after the holder released and was
  // held for its TTL, nobody left to release it.
  const name = 'lock:worker-waits';
  const holder = await new Locker([server.url], { ttl: 60_000 }).lock(name, { autoRenew: false });
  const pkg = fileURLToPath(new URL('../index.js', import.meta.url));
  const worker = new Worker(
    `const { Locker } = require(${JSON.stringify(pkg)});
     new Locker([${JSON.stringify(server.url)}], { ttl: 60000 })
       .lock(${JSON.stringify(name)}, { wait: 600000, owner: 'worker-owner' })
       .catch(() => {});
     require('node:worker_threads').parentPort.postMessage('asked');
     setInterval(() => {}, 1000);`,
    { eval: true },
  );
  await once(worker, 'message');
  await until('the worker waits in the queue', async () => (await waiters(name)) === 1);
  await worker.terminate();
  await until('the wait left the queue', async () => (await waiters(name)) === 0, 3_000);
  await holder.release();
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(await server.holds(name), false, 'no grant for the terminated worker');
});

test('a worker ends without waiting for another thread\'s calls in flight', async () => {
  // 2026-11-29: every worker's teardown waited for the process's calls in
  // flight, 2 s whenever the main thread had a wait pending, one worker
  // after another at a process.exit().
  const name = 'lock:main-waits';
  const holder = await new Locker([server.url], { ttl: 60_000 }).lock(name, { autoRenew: false });
  const waiting = new Locker([server.url]).lock(name, { wait: 30_000 }).then((l) => l.release(), () => {});
  await until('the main thread waits in the queue', async () => (await waiters(name)) === 1);
  const pkg = fileURLToPath(new URL('../index.js', import.meta.url));
  const worker = new Worker(
    `const { Locker } = require(${JSON.stringify(pkg)});
     new Locker([${JSON.stringify(server.url)}]).lock('lock:worker-own', { autoRenew: false })
       .then(() => require('node:worker_threads').parentPort.postMessage('holding'));
     setInterval(() => {}, 1000);`,
    { eval: true },
  );
  const took = await timeTerminate(worker);
  assert.ok(took < 1_500, `terminate() took ${took} ms`);
  await until('the worker\'s lock released', async () => !(await server.holds('lock:worker-own')));
  await holder.release();
  await waiting;
});
