// The event loop is never blocked: 64 acquisitions wait on the core's
// runtime while a 10 ms timer keeps firing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Locker, TakenError } from '../index.mjs';
import { Server, killAll } from '../testing/servers.mjs';

let urls;
before(async () => {
  urls = (await Server.startN(3)).map((s) => s.url);
});
after(killAll);

test('timer lag stays bounded while 64 acquisitions wait', async () => {
  const locker = new Locker(urls);
  const holder = await locker.lock('lock:busy');
  let worst = 0;
  let ticks = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last - 10);
    last = now;
    ticks++;
  }, 10);
  const waits = Array.from({ length: 64 }, () => locker.lock('lock:busy', { wait: 1_500 }).then(
    () => 'got',
    (e) => (e instanceof TakenError ? 'taken' : e),
  ));
  const outcomes = await Promise.all(waits);
  clearInterval(timer);
  await holder.release();
  assert.deepEqual(new Set(outcomes), new Set(['taken']));
  // A blocked loop would lag by the whole wait (1.5 s); a generous bound
  // for a loaded machine.
  console.log(`timer lag while 64 acquisitions waited: worst ${worst.toFixed(1)} ms over ${ticks} ticks`);
  assert.ok(worst < 500, `worst timer lag ${worst} ms`);
  assert.ok(ticks > 20, `${ticks} ticks in 1.5 s`);
});
