import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';
import { call } from '../helpers/rest-client.js';
import { runOver } from './graphql/transports.js';
import { makeCatalogue, orderBody } from './orders/fixtures.js';

/**
 * Half a character: a `\ud800` escape with no partner. Stored, it broke every strict JSON reader of
 * the lists that hold it (RFC 7493), and PostgreSQL silently kept U+FFFD instead. Sent over a real
 * socket as raw JSON text, since JSON.stringify of such a string is what a careless client sends.
 */
describe('unpaired UTF-16 surrogate escapes in a REST body', () => {
  let atrium: TestAtrium;
  let base: string;
  let admin: Record<string, string>;
  beforeAll(async () => {
    atrium = await startTestAtrium({}, ['api']);
    base = (await atrium.listen()).httpUrl!;
    admin = (await atrium.caller({ role: 'admin' })).headers;
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  const json = { 'content-type': 'application/json' };

  it('refuses them in a user name and in an order, naming the field; nothing is stored', async () => {
    const user = await atrium.caller();
    const before = await call(base, 'GET', `/v1/users/${user.userId}`, { headers: admin });
    for (const name of ['a\\ud800b', '\\udc00', 'x\\uD83D']) {
      const res = await call(base, 'PATCH', `/v1/users/${user.userId}`, {
        headers: { ...admin, ...json },
        raw: `{"name":"${name}"}`,
      });
      expect(res.status, name).toBe(400);
      expect(res.body).toMatchObject({
        error: expect.stringMatching(/^validation_error$/i),
        details: [{ field: 'name', code: 'invalid_characters' }],
      });
    }
    const after = await call(base, 'GET', `/v1/users/${user.userId}`, { headers: admin });
    expect(after.body!.name).toBe(before.body!.name);

    const cat = await makeCatalogue(atrium);
    const body = JSON.stringify(orderBody(cat)).replace('"Ada Lovelace"', '"\\ud800"');
    const order = await call(base, 'POST', '/api/v2/orders', { headers: { ...admin, ...json }, raw: body });
    expect(order.status, order.text).toBe(400);
    expect(order.body).toMatchObject({ details: [{ field: 'shipping_address.name' }] });
    const list = await call(base, 'GET', '/api/v2/orders', { headers: admin });
    expect((list.body!.data as unknown[]).length).toBe(0);
  });

  it('takes a surrogate pair escape (an emoji) as the character it is', async () => {
    const user = await atrium.caller();
    const res = await call(base, 'PATCH', `/v1/users/${user.userId}`, {
      headers: { ...admin, ...json },
      raw: '{"name":"Ada \\ud83d\\ude00"}',
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body!.name).toBe('Ada 😀');
  });
});

/**
 * GraphQL variables arrive as JSON too, over POST, graphql-ws and graphql-sse; the clients write a
 * lone surrogate as the escape it is. The core's text rule refuses it, so every surface does.
 */
describe('unpaired UTF-16 surrogates in GraphQL variables', () => {
  let atrium: TestAtrium;
  let base: string;
  beforeAll(async () => {
    atrium = await startTestAtrium({}, ['api']);
    base = (await atrium.listen()).httpUrl!;
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  const UPDATE =
    'mutation($id: ID!, $name: String!) { updateUser(id: $id, input: { name: $name }) { firstName } }';

  for (const transport of ['POST', 'WS', 'SSE'] as const) {
    it(`refuses them in updateUser over ${transport}, naming the field; nothing is stored`, async () => {
      const user = await atrium.caller();
      const credentials = { 'x-api-key': user.key };
      const read = {
        query: 'query($id: ID!) { user(id: $id) { firstName lastName } }',
        variables: { id: user.userId },
      };
      const before = await runOver(transport, base, read, credentials);
      const res = await runOver(
        transport,
        base,
        { query: UPDATE, variables: { id: user.userId, name: 'Ada \ud800' } },
        credentials,
      );
      expect(res.errors, JSON.stringify(res)).toHaveLength(1);
      expect(res.errors![0]!.extensions).toMatchObject({
        code: 'BAD_USER_INPUT',
        details: [{ field: 'name', message: expect.stringContaining('well-formed Unicode') }],
      });
      const after = await runOver(transport, base, read, credentials);
      expect(after.data).toEqual(before.data);
      expect(JSON.stringify(before.data)).not.toContain('\ufffd');
    });
  }
});
