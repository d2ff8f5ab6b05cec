import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { SharedStateHealth } from '../../../src/shared/health.js';

describe('Redis outage logging', () => {
  let redis: Redis | undefined;
  afterEach(() => {
    redis?.disconnect();
  });

  it('logs one warning for an outage, not one per reconnect attempt', async () => {
    // Nothing listens on port 1: every connection attempt is refused, and ioredis retries.
    redis = new Redis('redis://127.0.0.1:1', {
      lazyConnect: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 20,
    });
    const warnings: string[] = [];
    new SharedStateHealth(redis).useLogger({
      warn: (_obj: object, msg: string) => void warnings.push(msg),
      info: () => undefined,
    });
    let attempts = 0;
    redis.on('error', () => void (attempts += 1));
    const deadline = Date.now() + 10_000;
    while (attempts < 5 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(attempts).toBeGreaterThanOrEqual(5);
    expect(warnings).toEqual(['redis error; reconnecting (not logged again until it is back)']);
  });
});
