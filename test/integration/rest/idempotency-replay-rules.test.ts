import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAtrium, type Atrium } from '../../../src/compose.js';
import { parseConfig } from '../../../src/config/schema.js';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';
import { call } from '../../helpers/rest-client.js';

/**
 * A replay answers what the first request was answered (docs/rest.md, Idempotency), even when the
 * rules that request passed have changed since. Here the operator turns WEBHOOK_ALLOW_PRIVATE off
 * (a restart) between a webhook endpoint's registration and its client's retry: the retry replays
 * the stored 201, and only a request that is processed meets the new rule. Until 2026-11-28 the
 * URL was checked (and resolved) before the key was looked at, so the retry answered 422
 * private_address for an endpoint that exists, and could answer whatever DNS said by then.
 */
describe('POST /api/v2/webhook_endpoints replayed after the address rule changed', () => {
  let database: TestDatabase;
  let dir: string;
  let url: string;
  beforeAll(async () => {
    database = await freshDatabase();
    dir = mkdtempSync(join(tmpdir(), 'atrium-replay-'));
    // Two servers in turn on one database: SQLite in a file, not in memory.
    url = database.dialect === 'sqlite' ? `sqlite:${join(dir, 'atrium.db')}` : database.url;
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await database?.drop();
  });

  async function started(env: Record<string, string>): Promise<{ atrium: Atrium; base: string }> {
    const config = parseConfig({
      NODE_ENV: 'test',
      LOG_LEVEL: 'silent',
      DATABASE_URL: url,
      PORT: '0',
      ...env,
    });
    const atrium = await createAtrium(config, ['api'], { migrate: true });
    try {
      return { atrium, base: (await atrium.listen()).httpUrl! };
    } catch (err) {
      await atrium.close();
      throw err;
    }
  }

  it('replays the stored 201 and registers nothing; a new key meets the new rule', async () => {
    const body = { url: 'http://127.0.0.1:9/hook', events: ['order.created'] };
    const endpoints = async (atrium: Atrium) =>
      (await atrium.services.store.db.selectFrom('webhook_endpoints').select('id').execute()).length;

    const before = await started({ WEBHOOK_ALLOW_PRIVATE: 'true' });
    let headers: Record<string, string>;
    let first: Awaited<ReturnType<typeof call>>;
    try {
      const user = await before.atrium.services.core.users.create({
        handle: 'replayer',
        email: 'replayer@example.com',
      });
      const key = await before.atrium.services.apiKeys.create({ userId: user.id, tier: 'enterprise' });
      headers = { 'x-api-key': key.key, 'idempotency-key': 'register-once' };
      first = await call(before.base, 'POST', '/api/v2/webhook_endpoints', { headers, json: body });
      expect(first.status, JSON.stringify(first.body)).toBe(201);
    } finally {
      await before.atrium.close();
    }

    const after = await started({ WEBHOOK_ALLOW_PRIVATE: 'false' });
    try {
      const again = await call(after.base, 'POST', '/api/v2/webhook_endpoints', { headers, json: body });
      expect(again.status, JSON.stringify(again.body)).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.body).toEqual(first.body);
      expect(again.headers.get('location')).toBe(first.headers.get('location'));
      expect(await endpoints(after.atrium)).toBe(1);

      // The rule is in force for a request that is processed: another key is refused, and that
      // failure leaves its key free (a retry is processed afresh, and refused again).
      const fresh = { ...headers, 'idempotency-key': 'register-twice' };
      for (let i = 0; i < 2; i++) {
        const refused = await call(after.base, 'POST', '/api/v2/webhook_endpoints', {
          headers: fresh,
          json: body,
        });
        expect(refused.status).toBe(400);
        expect(refused.headers.get('idempotent-replayed')).toBeNull();
        expect(refused.body).toMatchObject({ details: [{ field: 'url', code: 'private_address' }] });
      }
      expect(await endpoints(after.atrium)).toBe(1);
    } finally {
      await after.atrium.close();
    }
  }, 60_000);
});
