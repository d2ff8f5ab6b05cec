import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';

/** NUL and other control characters must never reach PostgreSQL as a 500, on any route. */
describe('control characters in input', () => {
  let atrium: TestAtrium;
  let headers: Record<string, string>;
  beforeAll(async () => {
    atrium = await startTestAtrium();
    headers = (await atrium.caller({ role: 'admin' })).headers;
  });
  afterAll(async () => {
    await atrium.stop();
  });

  it.each([
    ['GET', '/v1/users/%00'],
    ['GET', '/v1/users/usr_%01abc'],
    ['GET', '/v1/organizations/%00x'],
    ['POST', '/api/v2/users/%00/verify'],
    ['GET', '/api/v2/orders/ord_%00'],
    ['GET', '/api/v1/orders/%7F'],
  ])('%s %s is a 404 in the spec shape', async (method, url) => {
    const res = await atrium.http!.inject({ method: method as 'GET' | 'POST', url, headers });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.toLowerCase()).toBe('not_found');
  });

  it('refuses an email holding a NUL as a validation error', async () => {
    const user = await atrium.caller();
    const res = await atrium.http!.inject({
      method: 'PATCH',
      url: `/v1/users/${user.userId}`,
      headers,
      payload: { email: 'ada\u0000@example.com' },
    });
    expect(res.statusCode).toBe(400);
  });

  it('refuses NUL in any value sent to the store, whatever called it', async () => {
    const attempt = atrium.services.core.users.findForLogin('ghost\u0000');
    if (atrium.database.dialect === 'postgres') {
      await expect(attempt).rejects.toBeInstanceOf(DomainError);
      await expect(atrium.services.core.users.findForLogin('ghost\u0000')).rejects.toMatchObject({
        code: 'validation_error',
      });
    } else {
      await expect(attempt).resolves.toBeUndefined();
    }
  });
});
