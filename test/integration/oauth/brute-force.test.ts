import { afterEach, describe, expect, it } from 'vitest';
import { CLIENT_AUTH_FAILURES, LOGIN_FAILURES } from '../../../src/oauth/brute-force.js';
import {
  authorizeQuery,
  authorizeThroughForm,
  basic,
  form,
  pkce,
  REDIRECT,
  startOAuthServer,
  userWithPassword,
  type OAuthTestServer,
} from './support.js';

describe('brute-force limits on client authentication and login', () => {
  let server: OAuthTestServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  async function start() {
    server = await startOAuthServer();
    return server;
  }
  const token = (s: OAuthTestServer, authorization: string, address = '127.0.0.1') =>
    s.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token',
      remoteAddress: address,
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization },
      payload: form({ grant_type: 'client_credentials' }),
    });

  it('locks a client after 10 failed authentications, even for the right secret, and not its neighbours', async () => {
    const s = await start();
    const victim = await s.atrium.services.oauth.clients.create({ name: 'Victim' });
    const neighbour = await s.atrium.services.oauth.clients.create({ name: 'Neighbour' });
    for (let i = 0; i < CLIENT_AUTH_FAILURES.perIdentifier.limit; i++) {
      expect((await token(s, basic(victim.client_id, `guess-${i}`), `10.0.0.${i}`)).statusCode).toBe(401);
    }
    const locked = await token(s, basic(victim.client_id, victim.client_secret!), '10.0.1.1');
    expect(locked.statusCode).toBe(429);
    expect(locked.json().error).toBe('rate_limit_exceeded');
    expect(Number(locked.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(locked.headers['retry-after'])).toBeLessThanOrEqual(
      CLIENT_AUTH_FAILURES.perIdentifier.windowSeconds,
    );
    expect(
      (await token(s, basic(neighbour.client_id, neighbour.client_secret!), '10.0.1.1')).statusCode,
    ).toBe(200);
  });

  it('locks an address after 30 failures across clients, unknown ones included', async () => {
    const s = await start();
    const honest = await s.atrium.services.oauth.clients.create({ name: 'Honest' });
    for (let i = 0; i < CLIENT_AUTH_FAILURES.perAddress.limit; i++) {
      expect((await token(s, basic(`cli_unknown${i}`, 'x'), '192.0.2.7')).statusCode).toBe(401);
    }
    expect((await token(s, basic(honest.client_id, honest.client_secret!), '192.0.2.7')).statusCode).toBe(
      429,
    );
    expect((await token(s, basic(honest.client_id, honest.client_secret!), '192.0.2.8')).statusCode).toBe(
      200,
    );
  });

  it('answers an unknown client and a wrong secret in similar time', async () => {
    const s = await start();
    const known = await s.atrium.services.oauth.clients.create({ name: 'Known' });
    const timed = async (authorization: string) => {
      const t0 = process.hrtime.bigint();
      const res = await token(s, authorization);
      expect(res.statusCode).toBe(401);
      return Number(process.hrtime.bigint() - t0) / 1e6;
    };
    const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const wrong: number[] = [];
    const unknown: number[] = [];
    for (let i = 0; i < 7; i++) {
      wrong.push(await timed(basic(known.client_id, `acs_${'x'.repeat(43)}`)));
      unknown.push(await timed(basic(`cli_01nobody${i}`, `acs_${'x'.repeat(43)}`)));
    }
    const [w, u] = [median(wrong), median(unknown)];
    expect(Math.abs(w - u)).toBeLessThan(Math.max(w, u) * 2 + 5);
  });

  describe('logins', () => {
    const { challenge } = pkce();
    const login = async (s: OAuthTestServer, clientId: string, username: string, password: string) =>
      authorizeThroughForm(s.atrium, authorizeQuery(clientId, challenge), { username, password });

    it('locks an account after 10 wrong passwords, showing the login page with 429', async () => {
      const s = await start();
      const app = await s.atrium.services.oauth.clients.create({
        name: 'App',
        redirectUris: [REDIRECT],
        firstParty: true,
      });
      const victim = await userWithPassword(s.atrium);
      const bystander = await userWithPassword(s.atrium);
      for (let i = 0; i < LOGIN_FAILURES.perIdentifier.limit; i++) {
        const res = await login(s, app.client_id, victim.handle, `wrong-${i}`);
        expect(res.statusCode).toBe(400);
      }
      const locked = await login(s, app.client_id, victim.handle, victim.password);
      expect(locked.statusCode).toBe(429);
      expect(locked.headers.location).toBeUndefined();
      expect(locked.headers['retry-after']).toBeDefined();
      expect(locked.body).toContain('Too many failed sign-in attempts');
      // The same account by its email counts as the same account.
      expect(
        (await login(s, app.client_id, `${victim.handle}@example.com`, victim.password)).statusCode,
      ).toBe(429);
      expect((await login(s, app.client_id, bystander.handle, bystander.password)).statusCode).toBe(302);
    });

    it('forgets an account’s own failures after a successful login', async () => {
      const s = await start();
      const app = await s.atrium.services.oauth.clients.create({
        name: 'App',
        redirectUris: [REDIRECT],
        firstParty: true,
      });
      const typo = await userWithPassword(s.atrium);
      for (let round = 0; round < 2; round++) {
        for (let i = 0; i < LOGIN_FAILURES.perIdentifier.limit - 1; i++) {
          expect((await login(s, app.client_id, typo.handle, 'typo')).statusCode).toBe(400);
        }
        expect((await login(s, app.client_id, typo.handle, typo.password)).statusCode).toBe(302);
      }
    });
  });
});
