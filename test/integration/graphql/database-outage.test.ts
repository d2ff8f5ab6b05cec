import { beforeAll, describe, expect, it } from 'vitest';
import { behindProxyForSuite, postgresMissing } from '../../helpers/database-outage.js';
import { codesOf, runOver, TRANSPORTS, type Credentials } from './transports.js';

const skip = await postgresMissing();

/**
 * docs/deployment.md, "PostgreSQL restarting": 503 with Retry-After, never storage text. Checking
 * an API key or a token reads the store, so with the store away the credentials cannot be judged:
 * that is SERVICE_UNAVAILABLE, not UNAUTHENTICATED (the client must retry, not re-authenticate).
 */
describe.skipIf(skip !== undefined)('GraphQL when the database cannot be reached', () => {
  const env = behindProxyForSuite({}, ['api', 'auth']);
  const credentials: Record<string, Credentials> = {};

  beforeAll(async () => {
    const { services } = env.atrium;
    const user = await services.core.users.create({
      handle: 'outagegraphql',
      email: 'outagegraphql@example.com',
      name: 'Outage',
      role: 'member',
    });
    const key = await services.apiKeys.create({ userId: user.id, tier: 'enterprise' });
    const { token } = await services.oauth.tokens.issue({
      subject: user.id,
      clientId: 'cli_outagegraphql',
      scope: ['profile:read', 'users:read'],
    });
    credentials['API key'] = { 'x-api-key': key.key };
    credentials.Bearer = { authorization: `Bearer ${token}` };
    // Both work before the outage.
    for (const c of Object.values(credentials)) {
      expect((await runOver('POST', env.httpUrl, { query: '{ me { id } }' }, c)).data).toEqual({
        me: { id: user.id },
      });
    }
    await env.cutDatabase();
  });

  const cases = TRANSPORTS.flatMap((t) => ['API key', 'Bearer'].map((c) => [t, c] as const));

  it.each(cases)('%s with an %s: SERVICE_UNAVAILABLE, no storage text', async (transport, kind) => {
    const answer = await runOver(transport, env.httpUrl, { query: '{ me { id } }' }, credentials[kind]);
    expect(JSON.stringify(answer)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|postgres|terminat/i);
    if (transport === 'WS') {
      // 1013 Try Again Later, which graphql-ws clients retry; 4403 would say the credentials are bad.
      expect(answer.closeCode).toBe(1013);
      return;
    }
    expect(answer.status).toBe(503);
    expect(codesOf(answer)).toEqual(['SERVICE_UNAVAILABLE']);
  });

  it.each(['POST', 'GET', 'SSE'] as const)('%s answers 503 with Retry-After: 1', async (transport) => {
    const query = encodeURIComponent('{ me { id } }');
    const headers = { ...credentials['API key'], accept: 'application/json' };
    const res =
      transport === 'POST'
        ? await fetch(`${env.httpUrl}/graphql`, {
            method: 'POST',
            headers: { ...headers, 'content-type': 'application/json' },
            body: JSON.stringify({ query: '{ me { id } }' }),
          })
        : await fetch(`${env.httpUrl}/graphql${transport === 'SSE' ? '/stream' : ''}?query=${query}`, {
            headers: transport === 'SSE' ? { ...headers, accept: 'text/event-stream' } : headers,
          });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.headers.get('www-authenticate')).toBeNull();
    await res.arrayBuffer();
  });
});
