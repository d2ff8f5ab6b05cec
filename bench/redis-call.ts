/**
 * What the silent-Redis guard costs a call: the rate limiter's `hit` on a real Redis, bare and
 * through `failFast` (SharedStateHealth.call: a 500 ms timer and two promise reactions per call),
 * alternated in slices so the machine's drift weighs on both alike. Calls are sequential, as one
 * request makes them. Not part of `npm run bench`. Alone:
 *   node --import tsx bench/redis-call.ts
 * BENCH_REDIS_URL names the server (redis://127.0.0.1:6379).
 */
import { failFast, SharedStateHealth } from '../src/shared/health.js';
import { connectRedis } from '../src/shared/redis-connection.js';
import { RedisSlidingWindowLimiter } from '../src/shared/redis-limiter.js';
import type { SlidingWindowLimiter } from '../src/shared/rate-limiter.js';

const CALLS = Number(process.env.BENCH_REDIS_CALLS ?? 20_000);
const ROUNDS = 4;

const redis = connectRedis(process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379');
const prefix = `atrium-bench-${process.pid}:`;
try {
  const bare = new RedisSlidingWindowLimiter(redis, prefix);
  const guarded = failFast(new SharedStateHealth(redis), new RedisSlidingWindowLimiter(redis, prefix));

  /** CPU and wall µs per call over `n` sequential hits, each on its own key's window. */
  const run = async (limiter: SlidingWindowLimiter, n: number) => {
    const cpu = process.cpuUsage();
    const started = performance.now();
    for (let i = 0; i < n; i++) await limiter.hit(`k${i % 100}`, 1_000_000, 3600);
    const used = process.cpuUsage(cpu);
    return { cpu: (used.user + used.system) / n, wall: ((performance.now() - started) * 1000) / n };
  };

  await run(bare, 2_000);
  await run(guarded, 2_000);
  const totals = { bare: { cpu: 0, wall: 0 }, guarded: { cpu: 0, wall: 0 } };
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, limiter] of [
      ['bare', bare],
      ['guarded', guarded],
    ] as const) {
      const { cpu, wall } = await run(limiter, CALLS / ROUNDS);
      totals[name].cpu += cpu / ROUNDS;
      totals[name].wall += wall / ROUNDS;
    }
  }
  console.table(
    (['bare', 'guarded'] as const).map((name) => ({
      limiter: name,
      'cpu µs/call': Number(totals[name].cpu.toFixed(1)),
      'wall µs/call': Number(totals[name].wall.toFixed(1)),
    })),
  );
  console.log(
    `guard: +${(totals.guarded.cpu - totals.bare.cpu).toFixed(1)} CPU µs and +${(totals.guarded.wall - totals.bare.wall).toFixed(1)} wall µs per call`,
  );
} finally {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
}
