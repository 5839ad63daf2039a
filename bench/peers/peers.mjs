// Peer drivers for the benchmark in Node: node-redlock 5.0.0-beta.2 and
// 4.2.0 and redis-semaphore 5.8.0 (all on ioredis 5.4.1, pinned in
// package.json), and this repository's Node package (redis-lock-client,
// built by `make node`; its rows are skipped with a note when it is not).
// usage: node peers.mjs quorum URLS ITERATIONS SECONDS     one round, uncontended
//        node peers.mjs contention URLS CLIENTS SECONDS    CLIENTS tasks, one hot key
// Prints one JSON object per client. "role" is "ours" for the package.
// env: BENCH_NODE_PACKAGE  the package's index.mjs (default: the built
//                          bindings/node), to measure two builds side by side
//      BENCH_NODE_ROWS=ours  the package's rows only, no peers
import Redis from "ioredis";
import Redlock from "redlock";
import Redlock4 from "redlock4";
import { RedlockMutex } from "redis-semaphore";

const [mode, urlList, iterArg, secArg] = process.argv.slice(2);
const urls = urlList.split(",");
const iterations = Number(iterArg); // quorum: cycles; contention: clients
const secs = Number(secArg);
const TTL = 10000;
const now = () => Number(process.hrtime.bigint()); // ns, monotonic
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.round((p / 100) * (s.length - 1))] : 0;
};
const clients = urls.map((u) => new Redis(u));
const REDLOCK5 = "redlock 5.0.0-beta.2 (node)";
const REDLOCK4 = "redlock 4.2.0 (node)";
const SEMAPHORE = "redis-semaphore 5.8.0 RedlockMutex (node)";
const PACKAGE = "redis-lock-client 0.1.0 (Node)";

let pkg = null;
try {
  const at = process.env.BENCH_NODE_PACKAGE;
  pkg = await import(at ? new URL(`file://${at}`).href : "../../bindings/node/index.mjs");
} catch (e) {
  console.error(`redis-lock-client (Node) not built (make node): its rows are skipped (${e.message})`);
}

/** Sequential latency of `cycle(name)`, then throughput with 1, 16, 64 tasks. */
async function quorumRow(client, role, cycle) {
  for (let i = 0; i < 50; i++) await cycle(`nwarm:${i}`);
  const lat = [];
  for (let i = 0; i < iterations; i++) {
    const t = now();
    await cycle(`nlat:${i % 64}`);
    lat.push((now() - t) / 1000);
  }
  const row = { client, role, lang: "node", p50_us: pct(lat, 50), p99_us: pct(lat, 99) };
  for (const tasks of [1, 16, 64]) {
    let done = 0;
    // The process's CPU per cycle (all its threads): steadier than
    // cycles/s on a loaded machine.
    const cpu = process.cpuUsage();
    const deadline = Date.now() + secs * 1000;
    await Promise.all(
      Array.from({ length: tasks }, async (_, k) => {
        while (Date.now() < deadline) {
          await cycle(`ntput:${k}`);
          done++;
        }
      }),
    );
    row[`tput${tasks}`] = done / secs;
    const used = process.cpuUsage(cpu);
    row[`cpu_us${tasks}`] = (used.user + used.system) / Math.max(done, 1);
  }
  console.log(JSON.stringify(row));
}

const peersToo = process.env.BENCH_NODE_ROWS !== "ours";

async function quorum() {
  if (peersToo) await quorumPeers();
  if (pkg) {
    const locker = new pkg.Locker(urls, { ttl: TTL });
    await quorumRow(PACKAGE, "ours", async (key) => (await locker.lock(`${key}:ours`, { autoRenew: false })).release());
  }
}

async function quorumPeers() {
  const redlock = new Redlock(clients, { retryCount: 0 });
  await quorumRow(REDLOCK5, "peer", async (key) => (await redlock.acquire([key], TTL)).release());
  const redlock4 = new Redlock4(clients, { retryCount: 0 });
  await quorumRow(REDLOCK4, "peer", async (key) => (await redlock4.lock(`${key}:4`, TTL)).unlock());
  await quorumRow(SEMAPHORE, "peer", async (key) => {
    const mutex = new RedlockMutex(clients, `${key}:sem`, { lockTimeout: TTL, acquireAttemptsLimit: 1 });
    await mutex.acquire();
    await mutex.release();
  });
}

/** CLIENTS tasks looping on one key: `make()` gives each its
 * { acquire, release }. */
async function contentionRow(client, role, make) {
  const events = [];
  const start = now();
  const deadline = Date.now() + secs * 1000;
  await Promise.all(
    Array.from({ length: iterations }, async (_, cid) => {
      const lock = make();
      while (Date.now() < deadline) {
        const req = now();
        await lock.acquire();
        const acq = now();
        const rel = now();
        await lock.release();
        events.push([cid, req, acq, rel]);
      }
    }),
  );
  // Over the whole run: every client finishes the section it asked for.
  const elapsed = (now() - start) / 1e9;
  events.sort((a, b) => a[2] - b[2]);
  const handoffs = [];
  for (let i = 1; i < events.length; i++) {
    if (events[i][0] !== events[i - 1][0]) handoffs.push((events[i][2] - events[i - 1][3]) / 1000);
  }
  const waits = events.map((e) => (e[2] - e[1]) / 1e6);
  const mean = waits.reduce((a, b) => a + b, 0) / (waits.length || 1);
  const sd = Math.sqrt(waits.reduce((a, w) => a + (w - mean) ** 2, 0) / (waits.length || 1));
  const perClient = new Array(iterations).fill(0);
  for (const e of events) perClient[e[0]]++;
  console.log(JSON.stringify({
    client,
    role,
    lang: "node",
    sections_per_s: events.length / elapsed,
    handoff_p50_us: pct(handoffs, 50),
    handoff_p99_us: pct(handoffs, 99),
    max_wait_ms: Math.max(0, ...waits),
    wait_stddev_ms: sd,
    min_sections: Math.min(...perClient),
  }));
}

async function contention() {
  if (peersToo) await contentionPeers();
  if (pkg) {
    const locker = new pkg.Locker(urls, { ttl: TTL });
    await contentionRow(`${PACKAGE} lock(wait)`, "ours", () => {
      let held;
      return {
        acquire: async () => { held = await locker.lock("nhot:ours", { wait: 30_000, autoRenew: false }); },
        release: () => held.release(),
      };
    });
  }
}

async function contentionPeers() {
  const redlock = new Redlock(clients, { retryCount: 1e9, retryDelay: 200, retryJitter: 200 });
  await contentionRow(`${REDLOCK5} (polling, 200+0-200 ms)`, "peer", () => {
    let held;
    return {
      acquire: async () => { held = await redlock.acquire(["nhot"], TTL); },
      release: () => held.release(),
    };
  });
  // 4.2.0's defaults: 200 ms +- 100 ms (its jitter is +-), 10 tries; more tries.
  const redlock4 = new Redlock4(clients, { retryCount: 1e9, retryDelay: 200, retryJitter: 100 });
  await contentionRow(`${REDLOCK4} (polling, 200+-100 ms)`, "peer", () => {
    let held;
    return {
      acquire: async () => { held = await redlock4.lock("nhot:4", TTL); },
      release: () => held.unlock(),
    };
  });
  // redis-semaphore's defaults: a try every 10 ms, give up after 10 s; here
  // it waits as long as the run lasts.
  await contentionRow(`${SEMAPHORE} (polling, 10 ms)`, "peer", () => {
    const mutex = new RedlockMutex(clients, "nhot:sem", { lockTimeout: TTL, acquireTimeout: 600_000 });
    return { acquire: () => mutex.acquire(), release: () => mutex.release() };
  });
}

await (mode === "quorum" ? quorum() : contention());
clients.forEach((c) => c.disconnect());
