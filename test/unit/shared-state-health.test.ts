import { Redis, ReplyError } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { SharedStateHealth } from '../../src/shared/health.js';

interface Line {
  fields: object;
  msg: string;
}

function recorder(): { lines: Line[]; log: { warn(o: object, m: string): void; info(): void } } {
  const lines: Line[] = [];
  return { lines, log: { warn: (fields, msg) => void lines.push({ fields, msg }), info: () => undefined } };
}

describe('SharedStateHealth.degraded decides how a degraded request is counted and logged', () => {
  let redis: Redis | undefined;
  afterEach(() => {
    redis?.disconnect();
    redis = undefined;
  });

  it('without Redis, a failing in-process part is a fault: counted and logged every time, on the given logger', () => {
    const health = new SharedStateHealth(undefined);
    const process = recorder();
    const request = recorder();
    health.useLogger(process.log);
    health.degraded('rate_limiter', 'rate limits fail open', new Error('boom 1'), request.log);
    health.degraded('rate_limiter', 'rate limits fail open', new Error('boom 2'), request.log);
    health.degraded('user_cache', 'user reads go to the database', 'not an Error');
    expect(request.lines).toEqual([
      {
        fields: { component: 'rate_limiter', err: 'boom 1' },
        msg: 'rate_limiter failed: rate limits fail open',
      },
      {
        fields: { component: 'rate_limiter', err: 'boom 2' },
        msg: 'rate_limiter failed: rate limits fail open',
      },
    ]);
    // No request logger given: the process's.
    expect(process.lines).toEqual([
      {
        fields: { component: 'user_cache', err: 'not an Error' },
        msg: 'user_cache failed: user reads go to the database',
      },
    ]);
    expect([...health.degradedCounts()]).toEqual([
      ['rate_limiter', 2],
      ['user_cache', 1],
    ]);
  });

  it('with Redis, an outage is counted every time but logged once per component, never on the request logger', () => {
    // Never connected: only whether Redis is configured matters here.
    redis = new Redis({ lazyConnect: true });
    const health = new SharedStateHealth(redis);
    const process = recorder();
    const request = recorder();
    health.useLogger(process.log);
    for (let i = 0; i < 3; i++) {
      health.degraded('rate_limiter', 'rate limits fail open', new Error('down'), request.log);
      health.degraded('complexity_budget', 'budgets fail open', new Error('down'), request.log);
    }
    expect(request.lines).toEqual([]);
    expect(process.lines.map((l) => l.msg)).toEqual([
      'Redis unavailable: rate limits fail open',
      'Redis unavailable: budgets fail open',
    ]);
    expect([...health.degradedCounts()]).toEqual([
      ['rate_limiter', 3],
      ['complexity_budget', 3],
    ]);
  });

  it("after a permission refusal, the component's own next success says so once; another component's does not", () => {
    redis = new Redis({ lazyConnect: true });
    const health = new SharedStateHealth(redis);
    const process = recorder();
    health.useLogger(process.log);
    health.served('rate_limiter'); // nothing refused: nothing to say
    const noperm = new ReplyError("NOPERM User atrium has no permissions to run the 'evalsha' command");
    health.degraded('rate_limiter', 'rate limits fail open', noperm);
    health.degraded('rate_limiter', 'rate limits fail open', noperm);
    health.served('user_cache');
    expect(process.lines.map((l) => l.msg)).toEqual([
      expect.stringMatching(/^Redis denied permission: .*rate limits fail open$/),
    ]);
    health.served('rate_limiter');
    health.served('rate_limiter');
    expect(process.lines.slice(1)).toEqual([
      {
        fields: { component: 'rate_limiter' },
        msg: 'Redis permits rate_limiter again: the user in REDIS_URL may run the commands it needs',
      },
    ]);
    // Watched again: a later refusal is a new line.
    health.degraded('rate_limiter', 'rate limits fail open', noperm);
    expect(process.lines).toHaveLength(3);
  });
});
