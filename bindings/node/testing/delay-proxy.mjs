// A TCP proxy in front of a server that delays every chunk by `delayMs`
// each way: a slow network, for what must wait for replies.
import net from 'node:net';

export async function delayProxy(port, delayMs) {
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    const pipe = (from, to) => {
      from.on('data', (d) => setTimeout(() => to.writable && to.write(d), delayMs));
      from.on('close', () => setTimeout(() => to.destroy(), delayMs));
      from.on('error', () => to.destroy());
    };
    pipe(client, upstream);
    pipe(upstream, client);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `redis://127.0.0.1:${server.address().port}`, close: () => server.close() };
}
