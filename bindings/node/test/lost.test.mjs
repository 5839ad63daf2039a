// A holder whose servers stop answering (SIGSTOP) sees its signal abort
// and `lost` turn true while its function runs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Locker, LockLostError } from '../index.mjs';
import { Server, killAll } from '../testing/servers.mjs';

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
