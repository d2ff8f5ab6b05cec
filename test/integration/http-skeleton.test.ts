import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';

describe('HTTP skeleton', () => {
  let atrium: TestAtrium;
  beforeAll(async () => {
    atrium = await startTestAtrium();
  });
  afterAll(async () => {
    await atrium.stop();
  });

  it('answers /healthz and /readyz when the database answers', async () => {
    const health = await atrium.http!.inject({ method: 'GET', url: '/healthz' });
    expect(health.statusCode).toBe(200);
    const ready = await atrium.http!.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toMatchObject({ status: 'ready', checks: { database: 'ok' } });
  });

  it('gives unknown routes the spec error body with a request id', async () => {
    const res = await atrium.http!.inject({ method: 'GET', url: '/no/such/route' });
    expect(res.statusCode).toBe(404);
    const body = res.json();
    expect(body.error).toBe('not_found');
    expect(typeof body.message).toBe('string');
    expect(body.request_id).toBe(res.headers['x-request-id']);
    expect(body.request_id).toMatch(/^req_[0-9a-f]{24}$/);
  });

  it('keeps a well-formed client request id and replaces a malformed one', async () => {
    const kept = await atrium.http!.inject({
      method: 'GET',
      url: '/healthz',
      headers: { 'x-request-id': 'client-abc.123' },
    });
    expect(kept.headers['x-request-id']).toBe('client-abc.123');
    const replaced = await atrium.http!.inject({
      method: 'GET',
      url: '/healthz',
      headers: { 'x-request-id': 'bad id with spaces' },
    });
    expect(replaced.headers['x-request-id']).toMatch(/^req_/);
  });

  it('puts the three security headers on every response, errors included', async () => {
    for (const url of ['/healthz', '/missing']) {
      const res = await atrium.http!.inject({ method: 'GET', url });
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['x-frame-options']).toBe('DENY');
      expect(res.headers['referrer-policy']).toBe('strict-origin-when-cross-origin');
    }
  });

  it('serves Prometheus metrics with request counts by route pattern', async () => {
    await atrium.http!.inject({ method: 'GET', url: '/healthz' });
    const res = await atrium.http!.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain');
    expect(res.body).toMatch(/atrium_http_requests_total\{method="GET",route="\/healthz",status="200"\} \d+/);
    expect(res.body).toContain('atrium_http_request_duration_seconds_bucket');
    expect(res.body).toContain('atrium_nodejs_eventloop_lag_seconds');
  });

  it('leaves atrium_redis_up out of /metrics when no REDIS_URL is set, as its help text says', async () => {
    const res = await atrium.http!.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('atrium_shared_state_degraded_total');
    expect(res.body).not.toMatch(/^atrium_redis_up/m);
  });
});
