// Takes a lock and then ends with it held (argv: url name how), `how`
// being "end" (nothing left to run), "exit" (process.exit) or "shared" (a
// lock taken with its own owner value, then the end).
import { Locker } from '../index.mjs';

const [url, name, how] = process.argv.slice(2);
const locker = new Locker([url], { ttl: 30_000, nodeTimeout: 3_000 }); // slow network: 200 ms a round trip
globalThis.kept = await locker.lock(name, how === 'shared' ? { owner: `worker-${process.pid}` } : {});
console.log('holding');
if (how === 'exit') process.exit(0);
