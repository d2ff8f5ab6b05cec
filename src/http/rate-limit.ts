import type { FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import type { Principal } from '../auth/principal.js';
import { DomainError } from '../domain/errors.js';
import type { SharedStateHealth } from '../shared/health.js';
import type { SlidingWindowLimiter } from '../shared/rate-limiter.js';
import type { RateDecision } from '../shared/rate-limiter.js';
import type { Tier } from '../store/types.js';
import type { AfterAuthentication } from './auth.js';

export const RATE_LIMIT_WINDOW_SECONDS = 3_600;

/** Requests per window by API-key tier (spec, Limits). */
export const TIER_LIMITS: Readonly<Record<Tier, number>> = {
  free: 100,
  starter: 1_000,
  growth: 10_000,
  enterprise: 100_000,
};

/** Keys without a tier and bearer-token callers. */
export const DEFAULT_RATE_LIMIT = 1_000;

export const limitFor = (principal: Principal): number =>
  principal.tier ? TIER_LIMITS[principal.tier] : DEFAULT_RATE_LIMIT;

/** REST counts live apart from other budgets (GraphQL complexity) that may use the same identity. */
const restKey = (principal: Principal) => `rest:${principal.rateLimitKey}`;

export function rateLimitHeaders(d: RateDecision): Record<string, string> {
  return {
    'x-ratelimit-limit': String(d.limit),
    'x-ratelimit-remaining': String(d.remaining),
    'x-ratelimit-reset': String(d.resetAt),
  };
}

/**
 * The afterAuth step: counts the request against the caller's sliding window, puts the three
 * X-RateLimit headers on the reply (so every authenticated response carries them, errors
 * included) and refuses with 429 once the window is full.
 *
 * When the limiter's store cannot answer (Redis down) the request is let through unlimited, without
 * X-RateLimit headers, counted in `atrium_shared_state_degraded_total{component="rate_limiter"}` and
 * logged once per outage: an outage of the shared counter should not take the whole API down with it.
 */
export function rateLimitStep(
  limiter: SlidingWindowLimiter,
  logger: Logger,
  health: SharedStateHealth,
): AfterAuthentication {
  return async (principal, request, reply: FastifyReply) => {
    const limit = limitFor(principal);
    let decision: RateDecision;
    try {
      decision = await limiter.hit(restKey(principal), limit, RATE_LIMIT_WINDOW_SECONDS);
    } catch (err) {
      health.degraded('rate_limiter', 'rate limits fail open (requests are not limited)', err, request.log);
      return;
    }
    health.served('rate_limiter');
    const headers = rateLimitHeaders(decision);
    reply.headers(headers);
    if (decision.allowed) return;
    throw new DomainError(
      'rate_limit_exceeded',
      `Rate limit of ${limit} requests per ${RATE_LIMIT_WINDOW_SECONDS} seconds exceeded; retry in ${decision.retryAfter} s.`,
      [],
      {
        limit,
        window_seconds: RATE_LIMIT_WINDOW_SECONDS,
        retry_after: decision.retryAfter,
        headers: { ...headers, 'retry-after': String(decision.retryAfter) },
      },
    );
  };
}
