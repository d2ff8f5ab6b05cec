import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { codeFlowSuite, codeFlowTokens } from './support.js';

const sha256Hex = (s: string) => createHash('sha256').update(s).digest('hex');

/**
 * The spec's token rule 7 and decisions §3: refresh tokens, API keys, client secrets and passwords
 * are kept only as hashes. Every column of every table is read back after each secret has been
 * issued and used once, and none of them holds a secret's text; the lookup columns hold SHA-256.
 */
describe('secrets at rest', () => {
  const { server, flow } = codeFlowSuite();

  async function everyStoredValue(): Promise<string> {
    const db = server.atrium.services.store.db;
    const tables = await db.introspection.getTables();
    expect(tables.map((t) => t.name)).toEqual(
      expect.arrayContaining(['api_keys', 'refresh_tokens', 'users']),
    );
    const dumps: string[] = [];
    for (const table of tables) {
      const rows = await db
        .selectFrom(table.name as never)
        .selectAll()
        .execute();
      dumps.push(JSON.stringify(rows));
    }
    return dumps.join('\n');
  }

  it('keeps refresh tokens, API keys, client secrets and passwords only as hashes', async () => {
    const tokens = await codeFlowTokens(server.atrium, flow.app, flow.user);
    const { userId, key, keyId } = await server.atrium.caller();
    // Used once each, so any cache or audit row that would copy them has been written.
    const used = await server.atrium.http!.inject({
      method: 'GET',
      url: '/api/v2/orders',
      headers: { 'x-api-key': key },
    });
    expect(used.statusCode).toBe(200);

    const stored = await everyStoredValue();
    const secrets = {
      refresh_token: tokens.refresh_token,
      api_key: key,
      client_secret: flow.app.client_secret!,
      password: flow.user.password,
    };
    for (const [name, secret] of Object.entries(secrets)) {
      expect(secret.length, name).toBeGreaterThan(8);
      expect(stored.includes(secret), `${name} stored as text`).toBe(false);
    }

    const db = server.atrium.services.store.db;
    const keyRow = await db
      .selectFrom('api_keys')
      .selectAll()
      .where('id', '=', keyId)
      .executeTakeFirstOrThrow();
    expect(keyRow.user_id).toBe(userId);
    expect(keyRow.key_hash).toBe(sha256Hex(key));
    const refreshRow = await db
      .selectFrom('refresh_tokens')
      .selectAll()
      .where('token_hash', '=', sha256Hex(tokens.refresh_token))
      .executeTakeFirst();
    expect(refreshRow).toBeDefined();
  });
});
