// The node URLs beside redis://: a Sentinel group (redis+sentinel://) and a
// Redis Cluster (redis+cluster://) are one node each, through the crate.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Locker } from '../index.mjs';
import { Server, SERVER, MODULE, inline, killAll, freePort } from '../testing/servers.mjs';

const spawned = [];
const dirs = [];
after(() => {
  for (const p of spawned) p.kill('SIGKILL');
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  killAll();
});

async function until(what, check, ms = 15_000) {
  const deadline = Date.now() + ms;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Whether the server on `port` holds `name` (LOCK.STATUS is an array then). */
async function holdsAt(port, name) {
  const reply = await inline(port, `LOCK.STATUS ${name}`);
  return reply.startsWith('*') && reply !== '*-1';
}

function start(args) {
  const proc = spawn(SERVER, args, { stdio: 'ignore' });
  spawned.push(proc);
  return proc;
}

let primary;
let sentinelPort;
let clusterPort;

before(async () => {
  primary = await Server.start();
  // One sentinel watching the primary as service "locks".
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-lock-node-'));
  dirs.push(dir);
  sentinelPort = await freePort();
  const conf = path.join(dir, 'sentinel.conf');
  fs.writeFileSync(conf, `port ${sentinelPort}\nbind 127.0.0.1\nsentinel monitor locks 127.0.0.1 ${primary.port} 1\n`);
  start([conf, '--sentinel']);
  await until('the sentinel', async () =>
    (await inline(sentinelPort, 'SENTINEL GET-MASTER-ADDR-BY-NAME locks')).startsWith('*2'));
  // A cluster of one primary serving every slot.
  clusterPort = await freePort();
  start(['--port', String(clusterPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
    '--cluster-enabled', 'yes', '--cluster-config-file', path.join(dir, 'nodes.conf'),
    '--loadmodule', MODULE, 'restart-delay-ms', '0']);
  await until('the cluster node', async () => (await inline(clusterPort, 'PING')) === '+PONG');
  await inline(clusterPort, 'CLUSTER ADDSLOTSRANGE 0 16383');
  await until('the cluster', async () => {
    const s = new Promise((resolve) => {
      const out = spawn('redis-cli', ['-p', String(clusterPort), 'CLUSTER', 'INFO']);
      let got = '';
      out.stdout.on('data', (d) => (got += d));
      out.on('close', () => resolve(got));
    });
    return (await s).includes('cluster_state:ok');
  });
});

test('a lock through a sentinel URL is held on the group\'s primary', async () => {
  const locker = new Locker([`redis+sentinel://127.0.0.1:${sentinelPort}/locks`]);
  const lock = await locker.lock('node:sentinel', { wait: 5_000, autoRenew: false });
  assert.ok(await primary.holds('node:sentinel'));
  await lock.release();
  assert.equal(await primary.holds('node:sentinel'), false);
});

test('a lock through a cluster URL is held on the cluster\'s primary', async () => {
  const locker = new Locker([`redis+cluster://127.0.0.1:${clusterPort}/`]);
  const lock = await locker.lock('node:cluster', { wait: 5_000, autoRenew: false });
  assert.ok(await holdsAt(clusterPort, 'node:cluster'));
  await lock.release();
  assert.equal(await holdsAt(clusterPort, 'node:cluster'), false);
});

test('a sentinel URL without a service name and a cluster URL with a database are refused', async () => {
  for (const url of [`redis+sentinel://127.0.0.1:${sentinelPort}/`, `redis+cluster://127.0.0.1:${clusterPort}/3`]) {
    assert.throws(() => new Locker([url]), (e) => e instanceof TypeError && /urls/.test(e.message), url);
  }
});
