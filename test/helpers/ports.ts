import { createServer } from 'node:net';

const tryPort = (port: number): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as { port: number };
      server.close(() => resolve(bound));
    });
  });

/**
 * A free TCP port, so AUTH_URL (the token issuer) can name the real address before start. Any
 * port the system hands out, or, with TEST_PORTS=first-last (a machine shared with other work),
 * a free one in that range.
 */
export async function freePort(): Promise<number> {
  const range = /^(\d+)-(\d+)$/.exec(process.env.TEST_PORTS ?? '');
  if (!range) return tryPort(0);
  const [first, last] = [Number(range[1]), Number(range[2])];
  const size = last - first + 1;
  const start = Math.floor(Math.random() * size);
  for (let i = 0; i < size; i += 1) {
    const port = first + ((start + i) % size);
    try {
      return await tryPort(port);
    } catch {
      // taken: try the next one
    }
  }
  throw new Error(`no free port in TEST_PORTS=${process.env.TEST_PORTS}`);
}
