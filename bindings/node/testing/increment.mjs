// One contender of the counter test, as a worker thread (workerData) or a
// child process (argv: urls-json file name rounds): `rounds` times, read
// the counter file, write it + 1, under the lock.
import fs from 'node:fs';
import { isMainThread, workerData, parentPort } from 'node:worker_threads';
import { Locker } from '../index.mjs';

const { urls, file, name, rounds } = isMainThread
  ? { urls: JSON.parse(process.argv[2]), file: process.argv[3], name: process.argv[4], rounds: Number(process.argv[5]) }
  : workerData;

const locker = new Locker(urls, { ttl: 10_000 });
for (let i = 0; i < rounds; i++) {
  await locker.using(name, { wait: 60_000 }, async () => {
    const n = Number(fs.readFileSync(file, 'utf8'));
    // Give another contender every chance to interleave if the lock failed.
    await new Promise((r) => setImmediate(r));
    fs.writeFileSync(file, String(n + 1));
  });
}
if (parentPort) parentPort.postMessage('done');
