import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/schema.js';
import { DomainError } from '../../src/domain/errors.js';
import { createHttpApp } from '../../src/http/app.js';
import { createLogger } from '../../src/observability/logger.js';
import { StoreOutageLog } from '../../src/store/outage-log.js';
import { openStore, type Store } from '../../src/store/store.js';

/** The skeleton's error rules, on an app with a few routes made to provoke each one. */
describe('HTTP error handling', () => {
  let app: FastifyInstance;
  let store: Store;

  beforeAll(async () => {
    const config = parseConfig({
      NODE_ENV: 'test',
      DATABASE_URL: 'sqlite::memory:',
      REQUEST_TIMEOUT_MS: '150',
      BODY_LIMIT_BYTES: '1024',
    });
    store = openStore(config.databaseUrl);
    const logger = createLogger('silent');
    app = createHttpApp({
      config,
      logger,
      store,
      storeOutage: new StoreOutageLog(logger, 'requests'),
      readiness: [],
      isDraining: () => false,
    });
    app.post(
      '/echo',
      {
        schema: {
          body: {
            type: 'object',
            required: ['n'],
            properties: { n: { type: 'integer', maximum: 10 }, c: { enum: ['USD', 'EUR'] } },
          },
        },
      },
      async (request) => request.body,
    );
    app.post('/action', async (_request, reply) => reply.code(204).send());
    app.get('/items/:id', async (request) => request.params);
    app.get('/slow', async () => {
      await new Promise((r) => setTimeout(r, 400));
      return { late: true };
    });
    app.get('/boom', async () => {
      throw new Error('SQLITE_ERROR: no such table: secret_table at /srv/app/store.ts:42');
    });
    app.get('/conflict', async () => {
      throw new DomainError('conflict', 'Order cannot move from CANCELLED.');
    });
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await store.close();
  });

  it('answers malformed JSON with 400 validation_error', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/echo',
      headers: { 'content-type': 'application/json' },
      payload: '{"n": 1,',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'validation_error', details: [{ code: 'invalid_json' }] });
  });

  it('reads an empty JSON body as no body: a route that needs one answers 400, an action 204', async () => {
    const json = { 'content-type': 'application/json' };
    const res = await app.inject({ method: 'POST', url: '/echo', headers: json, payload: '' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('validation_error');
    const action = await app.inject({ method: 'POST', url: '/action', headers: json, payload: '' });
    expect(action.statusCode).toBe(204);
  });

  it('refuses prototype-poisoning keys in JSON bodies', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/echo',
      headers: { 'content-type': 'application/json' },
      payload: '{"n": 1, "__proto__": {"admin": true}}',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('validation_error');
  });

  it('answers an over-long path segment with the spec body and headers, not a router 414', async () => {
    const res = await app.inject({ method: 'GET', url: `/items/${'x'.repeat(300)}` });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ error: 'not_found' });
    expect(res.json().request_id).toBe(res.headers['x-request-id']);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });

  it('answers a badly encoded URL with the spec body', async () => {
    const res = await app.inject({ method: 'GET', url: '/items/%E0%A4%A' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('validation_error');
    expect(res.headers['x-frame-options']).toBe('DENY');
  });

  it('names every invalid field with a detail code', async () => {
    const res = await app.inject({ method: 'POST', url: '/echo', payload: { n: 11, c: 'JPY' } });
    expect(res.statusCode).toBe(400);
    const details = res.json().details as Array<{ field: string; code: string }>;
    expect(details).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ field: 'n', code: 'range_error' }),
        expect.objectContaining({ field: 'c', code: 'invalid_enum' }),
      ]),
    );
  });

  it('does not coerce body types: a string is not an integer', async () => {
    const res = await app.inject({ method: 'POST', url: '/echo', payload: { n: '2' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().details[0]).toMatchObject({ field: 'n', code: 'invalid_type' });
  });

  it('reports a missing required field by name', async () => {
    const res = await app.inject({ method: 'POST', url: '/echo', payload: {} });
    expect(res.statusCode).toBe(400);
    expect(res.json().details[0]).toMatchObject({ field: 'n', code: 'required' });
  });

  it('answers bodies over the limit with 413', async () => {
    const res = await app.inject({ method: 'POST', url: '/echo', payload: { n: 1, pad: 'x'.repeat(2000) } });
    expect(res.statusCode).toBe(413);
    expect(res.json().error).toBe('payload_too_large');
  });

  it('answers 415 for a content type it cannot parse', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/echo',
      headers: { 'content-type': 'application/xml' },
      payload: '<n>1</n>',
    });
    expect(res.statusCode).toBe(415);
    expect(res.json().error).toBe('unsupported_media_type');
  });

  it('answers 503 when a request passes its deadline', async () => {
    const res = await app.inject({ method: 'GET', url: '/slow' });
    expect(res.statusCode).toBe(503);
    expect(res.json().error).toBe('service_unavailable');
  });

  it('masks unexpected errors: no stack, no storage text', async () => {
    const res = await app.inject({ method: 'GET', url: '/boom' });
    expect(res.statusCode).toBe(500);
    const body = res.json();
    expect(body.error).toBe('internal_error');
    expect(res.body).not.toMatch(/SQLITE|secret_table|store\.ts|at \//);
    expect(body.request_id).toBe(res.headers['x-request-id']);
  });

  it('maps core errors to their status', async () => {
    const res = await app.inject({ method: 'GET', url: '/conflict' });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({
      error: 'conflict',
      message: 'Order cannot move from CANCELLED.',
      details: [],
    });
  });
});
