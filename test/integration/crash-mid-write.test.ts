import { once } from 'node:events';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as oauth from 'oauth4webapi';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, createServices, type Services } from '../../src/compose.js';
import { parseConfig } from '../../src/config/schema.js';
import { SYSTEM_ACTOR } from '../../src/domain/actor.js';
import { iso } from '../../src/domain/clock.js';
import { IN_FLIGHT_LEASE_MS } from '../../src/domain/idempotency.js';
import { issueOperatorTokens } from '../../src/oauth/cli.js';
import { webhooksOf } from '../../src/webhooks/index.js';
import { root, runCli } from '../helpers/cli.js';
import { sharedDatabase, type TestDatabase } from '../helpers/database.js';
import { serve, type Served } from '../helpers/serve.js';
import { unary, userServiceClient, type UserMessage } from './grpc/support.js';
import { freePort, insecure } from './oauth/support.js';
import { ADDRESS } from './orders/fixtures.js';

/**
 * A crash in the middle of a write leaves no half record. Each case runs a real `atrium` process
 * (the server, or the admin command line) that kills itself with SIGKILL right after a chosen
 * statement of a multi-statement write has run, its transaction still open
 * (test/helpers/crash-after-statement.mjs); then it looks at the database, and at what a client
 * gets from a server started afresh on it.
 */
const PRELOAD = pathToFileURL(join(root, 'test/helpers/crash-after-statement.mjs')).href;
const crashingAfter = (sql: string) => ({
  NODE_OPTIONS: `--import ${PRELOAD}`,
  ATRIUM_TEST_CRASH_AFTER: sql,
});
const CRASH_LINE = '"crash after statement"';

let database: TestDatabase;
let services: Services;
const running: Served[] = [];

beforeAll(async () => {
  database = await sharedDatabase();
  services = await createServices(parseConfig({ NODE_ENV: 'test', DATABASE_URL: database.url }), {
    migrate: true,
  });
});

afterEach(async () => {
  for (const s of running.splice(0)) await s.stop().catch(() => undefined);
});

afterAll(async () => {
  await closeServices(services);
  await database?.drop();
});

/** A server started normally on the same database (a restart after the crash). */
async function restarted(env: Record<string, string> = {}): Promise<Served> {
  const server = await serve({ DATABASE_URL: database.url, GRPC_PORT: '0', ...env });
  running.push(server);
  return server;
}

/** A server that dies right after the first statement matching `sql`; `crashed()` waits for it. */
async function crashing(sql: string, env: Record<string, string> = {}) {
  const server = await serve({ DATABASE_URL: database.url, GRPC_PORT: '0', ...env, ...crashingAfter(sql) });
  const closed = once(server.child, 'close');
  return {
    server,
    /** Resolves with the statement it died after; fails unless it died by SIGKILL from the preload. */
    async crashed(): Promise<string> {
      await closed;
      expect(server.child.signalCode, server.stderr()).toBe('SIGKILL');
      return statementOf(server.stderr());
    },
  };
}

function statementOf(stderr: string): string {
  const line = stderr.split('\n').find((l) => l.includes(CRASH_LINE));
  expect(line, `no crash line in:\n${stderr}`).toBeDefined();
  return (JSON.parse(line!) as { sql: string }).sql;
}

async function member(handle: string) {
  const user = await services.core.users.create({
    handle,
    email: `${handle}@example.com`,
    name: 'Before Crash',
    role: 'member',
  });
  const key = await services.apiKeys.create({ userId: user.id, tier: 'enterprise' });
  return { user, key: key.key };
}

const count = async (table: 'orders' | 'order_items' | 'events', where: Record<string, string> = {}) => {
  let query = services.store.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n'));
  for (const [column, value] of Object.entries(where))
    query = query.where(column as never, '=', value as never);
  return Number((await query.executeTakeFirstOrThrow()).n);
};

describe('a crash in the middle of a write (SIGKILL with the transaction open)', () => {
  it('POST /api/v2/orders dying after its items are written: no order, no items, no event; the key is taken over once its lease ends', async () => {
    const { user, key } = await member('crash_order');
    const product = await services.core.products.create({ name: 'Crash widget', priceCents: 1500 });
    const request = {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json', 'idempotency-key': 'crash-1' },
      body: JSON.stringify({
        items: [{ product_id: product.id, quantity: 2 }],
        currency: 'USD',
        shipping_address: ADDRESS,
      }),
    };
    const itemsBefore = await count('order_items');

    const dying = await crashing('^insert into "order_items"');
    const lost = await fetch(`${dying.server.url}/api/v2/orders`, request).then(
      (r) => `answered ${r.status}`,
      (e: Error) => e.name,
    );
    expect(lost).toBe('TypeError'); // no answer: the connection died with the process
    expect(await dying.crashed()).toMatch(/^insert into "order_items"/i);

    expect(await count('orders', { owner_id: user.id })).toBe(0);
    expect(await count('order_items')).toBe(itemsBefore);
    expect(await count('events', { owner_id: user.id, type: 'order.created' })).toBe(0);

    // The claim on the key was committed on its own before the work began, and outlives the
    // process: a retry meanwhile is told the first request is still in progress, as docs/rest.md
    // says, until the claim's lease ends.
    const server = await restarted();
    const retry = await fetch(`${server.url}/api/v2/orders`, request);
    expect(retry.status).toBe(409);
    expect(((await retry.json()) as { error: string }).error).toBe('idempotency_in_progress');
    expect(await count('orders', { owner_id: user.id })).toBe(0);

    // The lease ends (the claim is made older than it, as the clock would): the retry is processed.
    await services.store.db
      .updateTable('idempotency_records')
      .set({ created_at: iso(new Date(Date.now() - IN_FLIGHT_LEASE_MS - 1_000)) })
      .where('owner_id', '=', user.id)
      .where('idem_key', '=', 'crash-1')
      .execute();
    const taken = await fetch(`${server.url}/api/v2/orders`, request);
    expect(taken.status).toBe(201);
    const order = (await taken.json()) as { id: string; items: unknown[] };
    expect(order.items).toHaveLength(1);
    expect(await count('orders', { owner_id: user.id })).toBe(1);
    expect(await count('order_items', { order_id: order.id })).toBe(1);
    expect(await count('order_items')).toBe(itemsBefore + 1);
    expect(await count('events', { owner_id: user.id, type: 'order.created' })).toBe(1);
    const replayed = await fetch(`${server.url}/api/v2/orders`, request);
    expect(replayed.status).toBe(201);
    expect(((await replayed.json()) as { id: string }).id).toBe(order.id);
  });

  it('gRPC UpdateUser dying after the user row is written: the old name everywhere, no user.updated event', async () => {
    const { user, key } = await member('crash_grpc');
    const update = (address: string, name: string) => {
      const client = userServiceClient(address);
      return unary<UserMessage>(
        client,
        'UpdateUser',
        { user_id: user.id, name, update_mask: { paths: ['name'] } },
        { 'x-api-key': key },
      ).finally(() => client.close());
    };

    const dying = await crashing('^update "users"');
    const lost = await update(dying.server.grpc!, 'After Crash');
    expect(lost.value).toBeUndefined();
    expect(lost.error).not.toBeNull();
    expect(await dying.crashed()).toMatch(/^update "users" set/i);
    expect(await count('events', { owner_id: user.id, type: 'user.updated' })).toBe(0);

    const server = await restarted();
    const rest = await fetch(`${server.url}/v1/users/${user.id}`, { headers: { 'x-api-key': key } });
    expect(rest.status).toBe(200);
    expect(((await rest.json()) as { name: string }).name).toBe('Before Crash');

    const again = await update(server.grpc!, 'After Crash');
    expect(again.error).toBeNull();
    expect(again.value?.name).toBe('After Crash');
    expect(await count('events', { owner_id: user.id, type: 'user.updated' })).toBe(1);
  });

  it('a refresh grant dying after the old token is marked used: the token still rotates, once, and the sign-in stays', async () => {
    const { user } = await member('crash_refresh');
    const app = await services.oauth.clients.create({
      name: 'Crash app',
      redirectUris: ['https://app.example.com/cb'],
      firstParty: true,
    });
    const issued = await issueOperatorTokens(services, {
      userId: user.id,
      scopes: 'profile:read',
      clientId: app.client_id,
    });
    const client = { client_id: app.client_id };
    const auth = oauth.ClientSecretBasic(app.client_secret!);
    const port = String(await freePort());
    const metadata = async (url: string) => {
      const issuer = new URL(url);
      return oauth.processDiscoveryResponse(
        issuer,
        await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }),
      );
    };
    const family = () =>
      services.store.db
        .selectFrom('refresh_token_families as f')
        .innerJoin('refresh_tokens as t', 't.family_id', 'f.id')
        .select(['f.revoked_at', 't.status'])
        .where('f.subject', '=', user.id)
        .orderBy('t.id')
        .execute();

    const dying = await crashing('^update "refresh_tokens"', { PORT: port });
    const as = await metadata(dying.server.url!);
    const lost = await oauth.refreshTokenGrantRequest(as, client, auth, issued.refresh_token, insecure).then(
      (r) => `answered ${r.status}`,
      (e: Error) => e.name,
    );
    expect(lost).toBe('TypeError');
    expect(await dying.crashed()).toMatch(/^update "refresh_tokens" set "status"/i);
    expect(await family()).toEqual([{ revoked_at: null, status: 'current' }]);

    // A retry of the lost request is the same token presented again: it rotates, as the first
    // presentation never happened, and the sign-in is not taken for a replay and revoked.
    const server = await restarted({ PORT: port });
    const rotated = await oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(as, client, auth, issued.refresh_token, insecure),
    );
    expect(rotated.refresh_token).not.toBe(issued.refresh_token);
    const profile = await fetch(`${server.url}/api/user/profile`, {
      headers: { authorization: `Bearer ${rotated.access_token}` },
    });
    expect(profile.status).toBe(200);
    expect(await family()).toEqual([
      { revoked_at: null, status: 'used' },
      { revoked_at: null, status: 'current' },
    ]);
  });

  it('`atrium users delete` dying after the user is marked deleted: the user and their webhook endpoint stay', async () => {
    const { user, key } = await member('crash_delete');
    const endpoint = await webhooksOf(services).endpoints.create(SYSTEM_ACTOR, {
      url: 'http://127.0.0.1:9/hook',
      userId: user.id,
    });
    const endpoints = () =>
      services.store.db.selectFrom('webhook_endpoints').select('id').where('user_id', '=', user.id).execute();

    const lost = await runCli(['users', 'delete', user.id], {
      DATABASE_URL: database.url,
      ...crashingAfter('^update "users"'),
    });
    expect(lost.code).toBeNull(); // killed by a signal
    expect(lost.stdout).toBe('');
    expect(statementOf(lost.stderr)).toMatch(/^update "users" set "deleted_at"/i);

    expect((await services.core.users.get(user.id)).id).toBe(user.id);
    expect(await endpoints()).toEqual([{ id: endpoint.id }]);
    const server = await restarted();
    const me = await fetch(`${server.url}/v1/users/${user.id}`, { headers: { 'x-api-key': key } });
    expect(me.status).toBe(200);

    const done = await runCli(['users', 'delete', user.id], { DATABASE_URL: database.url });
    expect(done.code, done.stderr).toBe(0);
    expect(await endpoints()).toEqual([]);
    const gone = await fetch(`${server.url}/v1/users/${user.id}`, { headers: { 'x-api-key': key } });
    expect(gone.status).toBe(401);
  });
});
