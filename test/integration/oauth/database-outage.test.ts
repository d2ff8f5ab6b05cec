import { beforeAll, describe, expect, it } from 'vitest';
import { behindProxyForSuite, postgresMissing } from '../../helpers/database-outage.js';
import { authorizeQuery, basic, form, pkce, REDIRECT } from './support.js';

const skip = await postgresMissing();

/**
 * docs/deployment.md, "PostgreSQL restarting": 503 with Retry-After, never a 500 and never storage
 * text. The sign-in pages are pages, so they say it as a page.
 */
describe.skipIf(skip !== undefined)('the sign-in pages when the database cannot be reached', () => {
  const env = behindProxyForSuite({}, ['auth']);
  let client: { client_id: string; client_secret: string | null };

  beforeAll(async () => {
    client = await env.atrium.services.oauth.clients.create({
      name: 'App',
      redirectUris: [REDIRECT],
      firstParty: true,
    });
    await env.cutDatabase();
  });

  const query = () => form(authorizeQuery(client.client_id, pkce().challenge));

  it('GET /authorize answers a 503 page saying the service is temporarily unavailable, with Retry-After', async () => {
    const res = await fetch(`${env.httpUrl}/authorize?${query()}`);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toContain('temporarily unavailable');
    expect(html).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|postgres|terminat|went wrong/i);
  });

  it('POST /authorize (the login form) answers the same 503 page', async () => {
    const res = await fetch(`${env.httpUrl}/authorize?${query()}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form({ username: 'someone', password: 'secret' }),
    });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await res.text()).toContain('temporarily unavailable');
  });

  it('as /oauth/token answers 503 temporarily_unavailable', async () => {
    const res = await fetch(`${env.httpUrl}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(client.client_id, client.client_secret!),
      },
      body: form({ grant_type: 'client_credentials' }),
    });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(((await res.json()) as { error: string }).error).toBe('temporarily_unavailable');
  });
});
