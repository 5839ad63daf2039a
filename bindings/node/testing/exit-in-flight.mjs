// Starts COUNT acquisitions of distinct names at once and calls
// process.exit() as the first of them settles (argv: urls prefix count),
// the others still in flight. Whatever they win must not outlive the
// process on the servers.
import { Locker } from '../index.mjs';

const [urls, prefix, count] = process.argv.slice(2);
const locker = new Locker(urls.split(','), { ttl: 30_000 });
for (let i = 0; i < Number(count); i++) {
  locker.lock(`${prefix}:${i}`, { autoRenew: i % 2 === 0 }).then(
    () => process.exit(0),
    () => process.exit(3),
  );
}
