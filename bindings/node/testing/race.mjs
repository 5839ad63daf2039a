// One of two racing processes (argv: urls-json name start-at-ms): one
// attempt at `start-at`, no wait; prints "won" (and holds 1 s) or "taken".
import { Locker, TakenError } from '../index.mjs';

const [urls, name, startAt] = [JSON.parse(process.argv[2]), process.argv[3], Number(process.argv[4])];
const locker = new Locker(urls);
await new Promise((r) => setTimeout(r, Math.max(0, startAt - Date.now())));
try {
  const lock = await locker.lock(name, { wait: 0 });
  console.log('won');
  await new Promise((r) => setTimeout(r, 1_000));
  await lock.release();
} catch (e) {
  if (!(e instanceof TakenError)) throw e;
  console.log('taken');
}
