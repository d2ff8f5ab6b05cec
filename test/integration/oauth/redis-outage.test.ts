import { beforeAll, describe, expect, it } from 'vitest';
import { memoryLog } from '../../helpers/memory-log.js';
import {
  authorizeQuery,
  authorizeThroughForm,
  basic,
  codeFlowTokens,
  firstPartyApp,
  form,
  oauthServerForSuite,
  pkce,
  REDIRECT,
  userWithPassword,
} from './support.js';

/**
 * docs/deployment.md: "Redis down: every request is still served". The token server's brute-force
 * guard counts failures in Redis; while Redis cannot be reached, counting is suspended (one warning
 * per outage, a metric per guard) and requests are judged on their credentials alone.
 */
describe('the token server when Redis cannot be reached', () => {
  const log = memoryLog('warn');
  // Nothing listens on port 1: every Redis command fails (as in test/integration/rest/rate-limit).
  const server = oauthServerForSuite({ REDIS_URL: 'redis://127.0.0.1:1', LOG_LEVEL: 'warn' });
  beforeAll(() => {
    server.atrium.services.sharedHealth.useLogger(log.logger);
  });

  const post = (path: string, authorization: string | undefined, body: Record<string, string>) =>
    fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        ...(authorization ? { authorization } : {}),
      },
      body: form(body),
    });

  it('issues, introspects and refreshes tokens, and still refuses a wrong secret with 401', async () => {
    const client = await server.atrium.services.oauth.clients.create({ name: 'Outage' });
    const auth = basic(client.client_id, client.client_secret!);
    const issued = await post('/oauth/token', auth, { grant_type: 'client_credentials' });
    expect(issued.status).toBe(200);
    const { access_token } = (await issued.json()) as { access_token: string };

    const introspected = await post('/oauth/introspect', auth, { token: access_token });
    expect(introspected.status).toBe(200);
    expect(((await introspected.json()) as { active: boolean }).active).toBe(true);

    const wrong = await post('/oauth/token', basic(client.client_id, 'not-the-secret'), {
      grant_type: 'client_credentials',
    });
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { error: string }).error).toBe('invalid_client');
  });

  it('refreshes a token (grant_type=refresh_token)', async () => {
    const app = await firstPartyApp(server, REDIRECT);
    const user = await userWithPassword(server.atrium);
    const tokens = await codeFlowTokens(server.atrium, app, user, 'profile:read');
    const refreshed = await post('/oauth/token', basic(app.client_id, app.client_secret), {
      grant_type: 'refresh_token',
      refresh_token: tokens.refresh_token,
    });
    expect(refreshed.status).toBe(200);
    expect(((await refreshed.json()) as { refresh_token: string }).refresh_token).not.toBe(
      tokens.refresh_token,
    );
  });

  it('signs a user in through the login form, and answers a wrong password with the form (400)', async () => {
    const app = await firstPartyApp(server, REDIRECT);
    const user = await userWithPassword(server.atrium);
    const { challenge } = pkce();
    const query = authorizeQuery(app.client_id, challenge);
    const wrong = await authorizeThroughForm(server.atrium, query, {
      username: user.handle,
      password: 'wrong',
    });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.body).toContain('The username or password is incorrect.');
    const right = await authorizeThroughForm(server.atrium, query, {
      username: user.handle,
      password: user.password,
    });
    expect(right.statusCode).toBe(302);
    expect(new URL(right.headers.location as string).searchParams.get('code')).toBeTruthy();
  });

  it('counts each attempt once in /metrics, wrong or right (not once for the check and again for the outcome)', async () => {
    const client = await server.atrium.services.oauth.clients.create({ name: 'Counted' });
    const counted = async () => {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      const line = /atrium_shared_state_degraded_total\{component="brute_force_client"\} (\d+)/.exec(text);
      return Number(line?.[1] ?? 0);
    };
    const before = await counted();
    for (let i = 0; i < 3; i += 1) {
      const wrong = await post('/oauth/token', basic(client.client_id, 'not-the-secret'), {
        grant_type: 'client_credentials',
      });
      expect(wrong.status).toBe(401);
    }
    const right = await post('/oauth/token', basic(client.client_id, client.client_secret!), {
      grant_type: 'client_credentials',
    });
    expect(right.status).toBe(200);
    expect((await counted()) - before).toBe(4);
  });

  it('says so once per guard in the log, and counts each suspended check in /metrics', async () => {
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/atrium_shared_state_degraded_total\{component="brute_force_client"\} [1-9]/);
    expect(metrics).toMatch(/atrium_shared_state_degraded_total\{component="brute_force_login"\} [1-9]/);
    const warnings = log.lines.map((l) => String(l.msg)).filter((m) => /failure counting suspended/.test(m));
    expect(warnings.sort()).toEqual([
      'Redis unavailable: client failure counting suspended (attempts are not limited)',
      'Redis unavailable: login failure counting suspended (attempts are not limited)',
    ]);
  });
});
