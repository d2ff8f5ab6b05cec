import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { RateDecision, SlidingWindowLimiter } from './rate-limiter.js';
import { checkCost, toDecision, windowMs } from './window.js';

/**
 * One atomic step per decision, timed by the Redis server's clock so instances with skewed clocks
 * still agree. A sorted set per key holds one member per counted request, scored by its time in
 * ms; refused requests are never added. Returns {allowed, counted, oldest ms, now ms}.
 */
const SCRIPT = `
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local counting = ARGV[3] == '1'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
local allowed = 0
local counted = count
if count < limit then
  allowed = 1
  counted = count + 1
  if counting then
    redis.call('ZADD', key, now, ARGV[4])
    redis.call('PEXPIRE', key, window)
  end
end
local oldest = now
local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
if #first > 0 then oldest = tonumber(first[2]) end
return {allowed, counted, oldest, now}
`;
const SCRIPT_SHA = createHash('sha1').update(SCRIPT).digest('hex');

/**
 * The same decision for a request worth several points: its member is named `<unique>#<points>`
 * and the window's count is the sum of its members' points (a member without `#` is one point).
 */
const WEIGHTED_SCRIPT = `
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = 0
for _, m in ipairs(redis.call('ZRANGE', key, 0, -1)) do
  count = count + (tonumber(string.match(m, '#(%d+)$')) or 1)
end
local allowed = 0
local counted = count
if count + cost <= limit then
  allowed = 1
  counted = count + cost
  redis.call('ZADD', key, now, ARGV[4] .. '#' .. ARGV[3])
  redis.call('PEXPIRE', key, window)
end
local oldest = now
local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
if #first > 0 then oldest = tonumber(first[2]) end
return {allowed, counted, oldest, now}
`;
const WEIGHTED_SCRIPT_SHA = createHash('sha1').update(WEIGHTED_SCRIPT).digest('hex');

/** The sliding log shared by every instance that talks to one Redis. */
export class RedisSlidingWindowLimiter implements SlidingWindowLimiter {
  private sequence = 0;
  private readonly instance = randomBytes(6).toString('hex');

  constructor(
    private readonly redis: Redis,
    private readonly keyPrefix = 'atrium:rl:',
  ) {}

  async hit(key: string, limit: number, windowSeconds: number, cost?: number): Promise<RateDecision> {
    // A plain hit counts members (cheap for REST's large windows); a costed one sums points.
    if (cost === undefined) return this.decide(key, limit, windowSeconds, true);
    return this.decideWeighted(key, limit, windowSeconds, checkCost(cost));
  }

  peek(key: string, limit: number, windowSeconds: number): Promise<RateDecision> {
    return this.decide(key, limit, windowSeconds, false);
  }

  async reset(key: string): Promise<void> {
    await this.redis.del(this.keyPrefix + key);
  }

  private async decide(
    key: string,
    limit: number,
    windowSeconds: number,
    count: boolean,
  ): Promise<RateDecision> {
    const span = windowMs(limit, windowSeconds);
    // Two requests in the same millisecond must stay two members, so each gets a unique name.
    const member = `${this.instance}:${(this.sequence = (this.sequence + 1) % Number.MAX_SAFE_INTEGER)}`;
    const args = [this.keyPrefix + key, String(limit), String(span), count ? '1' : '0', member];
    const reply = (await this.run(args)) as [number, number, number, number];
    const [allowed, counted, oldestMs, nowMs] = reply.map(Number) as [number, number, number, number];
    return toDecision({ allowed: allowed === 1, limit, counted, oldestMs, nowMs, windowMs: span });
  }

  private async decideWeighted(
    key: string,
    limit: number,
    windowSeconds: number,
    cost: number,
  ): Promise<RateDecision> {
    const span = windowMs(limit, windowSeconds);
    const member = `${this.instance}:${(this.sequence = (this.sequence + 1) % Number.MAX_SAFE_INTEGER)}`;
    const args = [this.keyPrefix + key, String(limit), String(span), String(cost), member];
    const reply = (await this.run(args, WEIGHTED_SCRIPT, WEIGHTED_SCRIPT_SHA)) as number[];
    const [allowed, counted, oldestMs, nowMs] = reply.map(Number) as [number, number, number, number];
    return toDecision({ allowed: allowed === 1, limit, counted, oldestMs, nowMs, windowMs: span });
  }

  /** EVALSHA first; the script body is sent only when the server has not seen it yet. */
  private async run(args: string[], script = SCRIPT, sha = SCRIPT_SHA): Promise<unknown> {
    try {
      return await this.redis.evalsha(sha, 1, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.includes('NOSCRIPT')) throw err;
      return this.redis.eval(script, 1, ...args);
    }
  }
}
