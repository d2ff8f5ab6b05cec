/**
 * The baseline: a bare Fastify route answering the same JSON from memory, with no store, no
 * authentication and no hooks. Atrium's figures are reported as ratios against this.
 */
import Fastify from 'fastify';

const body = JSON.parse(process.env.BASELINE_BODY ?? '{}') as unknown;
const list = JSON.parse(process.env.BASELINE_LIST ?? '{}') as unknown;
const app = Fastify({ logger: false });
app.get('/order', async () => body);
app.get('/orders', async () => list);
app.post('/orders', async (_req, reply) => reply.code(201).send(body));
const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`${JSON.stringify({ url: address })}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
