// Worker threads and child processes each with a Locker of their own.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Server, killAll } from '../testing/servers.mjs';

const run = promisify(execFile);
const testing = path.join(path.dirname(fileURLToPath(import.meta.url)), '../testing');
let urls;
before(async () => {
  urls = (await Server.startN(3)).map((s) => s.url);
});
after(killAll);

test('two processes racing: exactly one wins', async () => {
  for (let round = 0; round < 3; round++) {
    const name = `lock:race:${round}`;
    const startAt = Date.now() + 1_500; // both loaded and connected by then
    const racers = [0, 1].map(() =>
      run(process.execPath, [path.join(testing, 'race.mjs'), JSON.stringify(urls), name, String(startAt)]),
    );
    const outcomes = (await Promise.all(racers)).map((r) => r.stdout.trim()).sort();
    assert.deepEqual(outcomes, ['taken', 'won']);
  }
});

test('8 worker threads and 8 child processes incrementing a counter under the lock end exact', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-lock-node-'));
  const file = path.join(dir, 'counter');
  fs.writeFileSync(file, '0');
  const rounds = 10;
  const name = 'lock:counter';
  const script = path.join(testing, 'increment.mjs');
  try {
    const workers = Array.from({ length: 8 }, () => new Promise((resolve, reject) => {
      const w = new Worker(script, { workerData: { urls, file, name, rounds } });
      w.once('message', resolve);
      w.once('error', reject);
      w.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`worker exited ${code}`))));
    }));
    const children = Array.from({ length: 8 }, () =>
      run(process.execPath, [script, JSON.stringify(urls), file, name, String(rounds)]),
    );
    await Promise.all([...workers, ...children]);
    assert.equal(Number(fs.readFileSync(file, 'utf8')), 16 * rounds);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
