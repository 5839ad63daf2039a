// Peer driver for the benchmark: node-redlock (redlock 5.0.0-beta.2 on ioredis).
// usage: node peers.mjs quorum URLS ITERATIONS SECONDS     one round, uncontended
//        node peers.mjs contention URLS CLIENTS SECONDS    CLIENTS tasks, one hot key
import Redis from "ioredis";
import Redlock from "redlock";

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
const name = "redlock 5.0.0-beta.2 (node)";

async function quorum() {
  const redlock = new Redlock(clients, { retryCount: 0 });
  const cycle = async (key) => (await redlock.acquire([key], TTL)).release();
  for (let i = 0; i < 50; i++) await cycle(`nwarm:${i}`);
  const lat = [];
  for (let i = 0; i < iterations; i++) {
    const t = now();
    await cycle(`nlat:${i % 64}`);
    lat.push((now() - t) / 1000);
  }
  const row = { client: name, role: "peer", lang: "node", p50_us: pct(lat, 50), p99_us: pct(lat, 99) };
  for (const tasks of [1, 16, 64]) {
    let done = 0;
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
  }
  console.log(JSON.stringify(row));
}

async function contention() {
  const redlock = new Redlock(clients, { retryCount: 1e9, retryDelay: 200, retryJitter: 200 });
  const events = [];
  const start = now();
  const deadline = Date.now() + secs * 1000;
  await Promise.all(
    Array.from({ length: iterations }, async (_, cid) => {
      while (Date.now() < deadline) {
        const req = now();
        const lock = await redlock.acquire(["nhot"], TTL);
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
    client: `${name} (polling, 200+0-200 ms)`,
    role: "peer",
    lang: "node",
    sections_per_s: events.length / elapsed,
    handoff_p50_us: pct(handoffs, 50),
    handoff_p99_us: pct(handoffs, 99),
    max_wait_ms: Math.max(0, ...waits),
    wait_stddev_ms: sd,
    min_sections: Math.min(...perClient),
  }));
}

await (mode === "quorum" ? quorum() : contention());
clients.forEach((c) => c.disconnect());
