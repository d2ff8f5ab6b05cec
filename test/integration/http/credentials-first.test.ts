import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpApp } from '../../../src/http/app.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';

interface Operation {
  method: string;
  path: string;
}

/**
 * Credentials are checked before the body, on every route that needs them: no credentials and a
 * bad body (malformed JSON, a wrong content type, an oversized one) is 401, never 400, 413 or 415.
 * The routes come from /openapi.json, so a new protected route is covered the day it is added.
 */
describe('credentials come before the body on every protected route', () => {
  let atrium: TestAtrium;
  let operations: Operation[];

  beforeAll(async () => {
    atrium = await startTestAtrium();
    const doc = (await atrium.http!.inject({ url: '/openapi.json' })).json() as {
      paths: Record<string, Record<string, { security?: Record<string, string[]>[] }>>;
    };
    operations = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        if (op.security?.some((s) => 'apiKey' in s)) operations.push({ method: method.toUpperCase(), path });
      }
    }
  });
  afterAll(async () => {
    await atrium.stop();
  });

  const concrete = (path: string) =>
    path.replace(
      /\{(\w+)\}/g,
      (_m, name: string) => `${name.split('_')[0]!.slice(0, 3)}_01abcdefghjkmnpqrstvwxyz01`,
    );

  const badBodies: [string, Record<string, string>, string][] = [
    ['malformed JSON', { 'content-type': 'application/json' }, '{"items": [1, 2'],
    ['a JSON body of the wrong shape', { 'content-type': 'application/json' }, '[{"unknown": true}]'],
    ['text/plain', { 'content-type': 'text/plain' }, 'hello'],
    ['an unknown content type', { 'content-type': 'application/x-evil' }, 'x=1'],
    ['an oversized body', { 'content-type': 'application/json' }, `{"a":"${'x'.repeat(1_100_000)}"}`],
  ];

  it('covers every protected route of the document', () => {
    // The order APIs (v1 and v2), the user API, and the two example routes.
    expect(operations.length).toBeGreaterThanOrEqual(30);
    expect(operations).toContainEqual({ method: 'POST', path: '/api/data/export' });
    expect(operations).toContainEqual({ method: 'GET', path: '/api/user/profile' });
    expect(operations).toContainEqual({ method: 'PATCH', path: '/v1/users/{user_id}' });
    expect(operations).toContainEqual({ method: 'POST', path: '/api/v2/orders' });
  });

  for (const [what, headers, payload] of badBodies) {
    it(`answers 401 to no credentials with ${what}`, async () => {
      for (const op of operations) {
        const res = await atrium.http!.inject({
          method: op.method as 'GET',
          url: concrete(op.path),
          headers,
          payload,
        });
        const where = `${op.method} ${op.path}`;
        expect(res.statusCode, where).toBe(401);
        expect(res.headers['www-authenticate'], where).toBe('Bearer');
        expect(res.json().error, where).toBe('invalid_token');
      }
    });
  }

  it('answers 401 to a forged API key with a bad body', async () => {
    for (const op of operations) {
      const res = await atrium.http!.inject({
        method: op.method as 'GET',
        url: concrete(op.path),
        headers: {
          'x-api-key': 'atr_live_00000000000000000000000000000000_000000',
          'content-type': 'text/plain',
        },
        payload: 'not json',
      });
      expect(res.statusCode, `${op.method} ${op.path}`).toBe(401);
      expect(res.json().error).toBe('invalid_api_key');
    }
  });

  it('refuses to boot a route that checks credentials after the body', async () => {
    const { services } = atrium;
    const app = createHttpApp({
      config: services.config,
      logger: services.logger,
      store: services.store,
      storeOutage: services.storeOutage,
      readiness: [],
      isDraining: () => false,
    });
    expect(() =>
      app.post('/late', { preHandler: services.httpAuth.required('data:export') as never }, async () => ({})),
    ).toThrow(/checks credentials in preHandler/);
    await app.close();
  });
});
