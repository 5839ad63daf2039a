// Real redis-server processes with the lock module for the tests, on free
// ports, killed at the end of the file's tests and, whatever happens, when
// the test process exits.
// REDIS_LOCK_MODULE: the built module (default: target/release/ of the repo).
// REDIS_SERVER: the server binary (default: redis-server on PATH).
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fs from 'node:fs';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const MODULE = process.env.REDIS_LOCK_MODULE ?? path.join(REPO, 'target/release/libredis_lock.so');
export const SERVER = process.env.REDIS_SERVER ?? 'redis-server';

const live = new Set();
process.on('exit', () => {
  for (const proc of live) {
    try {
      proc.kill('SIGKILL');
    } catch {}
  }
});

/** A free port below Linux's ephemeral range (32768 up), where the kernel
 * picks outgoing connections' local ports. */
export async function freePort() {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    const free = await new Promise((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

/** One inline command (no spaces inside arguments): the raw first reply line. */
export function inline(port, command) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let got = '';
    s.setTimeout(2000, () => {
      s.destroy();
      reject(new Error(`no reply from ${port} to ${command}`));
    });
    s.on('connect', () => s.write(`${command}\r\n`));
    s.on('data', (d) => {
      got += d.toString('latin1');
      if (got.includes('\r\n')) {
        s.destroy();
        resolve(got.split('\r\n')[0]);
      }
    });
    s.on('error', reject);
  });
}

export class Server {
  static async start() {
    if (!fs.existsSync(MODULE)) throw new Error(`module not built: ${MODULE} (cargo build --release)`);
    const port = await freePort();
    const proc = spawn(
      SERVER,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
        '--loadmodule', MODULE, 'restart-delay-ms', '0'],
      { stdio: 'ignore' },
    );
    live.add(proc);
    proc.once('exit', () => live.delete(proc));
    const server = new Server(port, proc);
    const deadline = Date.now() + 10_000;
    for (;;) {
      const pong = await inline(port, 'PING').catch(() => '');
      if (pong === '+PONG') return server;
      if (proc.exitCode !== null || Date.now() > deadline) {
        server.kill();
        throw new Error(`${SERVER} with ${MODULE} did not start on port ${port}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  static startN(n) {
    return Promise.all(Array.from({ length: n }, () => Server.start()));
  }

  constructor(port, proc) {
    this.port = port;
    this.proc = proc;
    this.url = `redis://127.0.0.1:${port}`;
  }

  signal(sig) {
    this.proc.kill(sig);
  }

  kill() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
  }

  /** Whether this server holds the lock `name` (LOCK.STATUS is an array then, nil if not). */
  async holds(name) {
    const reply = await inline(this.port, `LOCK.STATUS ${name}`);
    return reply.startsWith('*') && reply !== '*-1';
  }
}

/** Kill every server of this process (SIGKILL also ends a stopped one). */
export function killAll() {
  for (const proc of live) proc.kill('SIGKILL');
}

/** Resolves once `check()` resolves true, polling every 20 ms; rejects
 * naming `what` after `ms`. */
export async function until(what, check, ms = 5_000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** How long `worker.terminate()` takes, in ms, once the worker has sent
 * its first message (it is up and has done what it was started for). */
export async function timeTerminate(worker) {
  await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  const started = Date.now();
  await worker.terminate();
  return Date.now() - started;
}
