import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';
import { call } from '../helpers/rest-client.js';
import { type Catalogue, makeCatalogue, orderBody } from './orders/fixtures.js';

/**
 * Request bodies whose bytes are not UTF-8 (a name typed in Latin-1: `Mar\xeda`). They were decoded
 * with U+FFFD in place of each bad byte and stored so, changed without a word; a JSON body that said
 * `charset=iso-8859-1` was decoded as UTF-8 all the same. Sent as raw bytes over a real socket.
 */
/** A JSON answer read loosely: each test checks the members it names. */
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const latin1 = (text: string) => Buffer.from(text, 'latin1');

async function send(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
) {
  const res = await fetch(`${base}${path}`, { method, headers, body: new Uint8Array(body) });
  const text = await res.text();
  return { status: res.status, text, body: (text ? JSON.parse(text) : undefined) as Json };
}

describe('request bodies that are not UTF-8', () => {
  let atrium: TestAtrium;
  let base: string;
  let admin: Record<string, string>;
  let cat: Catalogue;
  beforeAll(async () => {
    atrium = await startTestAtrium({});
    base = (await atrium.listen()).httpUrl!;
    admin = (await atrium.caller({ role: 'admin' })).headers;
    cat = await makeCatalogue(atrium);
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  const json = { 'content-type': 'application/json' };
  const notUtf8 = {
    error: expect.stringMatching(/^validation_error$/i),
    details: [{ field: null, code: 'invalid_characters' }],
  };

  it('REST: refuses them in a user name and in an order (400 invalid_characters); nothing is stored', async () => {
    const user = await atrium.caller();
    const before = await call(base, 'GET', `/v1/users/${user.userId}`, { headers: admin });
    const patch = await send(
      base,
      'PATCH',
      `/v1/users/${user.userId}`,
      { ...admin, ...json },
      latin1('{"name":"Mar\xeda Member"}'),
    );
    expect(patch.status, patch.text).toBe(400);
    expect(patch.body).toMatchObject(notUtf8);
    expect(patch.text).not.toContain('\ufffd');
    const after = await call(base, 'GET', `/v1/users/${user.userId}`, { headers: admin });
    expect(after.body!.name).toBe(before.body!.name);

    const order = JSON.stringify(orderBody(cat)).replace('"Ada Lovelace"', '"Jos\xe9"');
    for (const type of ['application/json', 'application/json; charset=utf-8']) {
      const res = await send(
        base,
        'POST',
        '/api/v2/orders',
        { ...admin, 'content-type': type },
        latin1(order),
      );
      expect(res.status, res.text).toBe(400);
      expect(res.body).toMatchObject(notUtf8);
    }
    const list = await call(base, 'GET', '/api/v2/orders', { headers: admin });
    expect((list.body!.data as unknown[]).length).toBe(0);
  });

  it('REST: a JSON body in another charset is 415 naming it; nothing is stored', async () => {
    const user = await atrium.caller();
    const before = await call(base, 'GET', `/v1/users/${user.userId}`, { headers: admin });
    for (const charset of ['iso-8859-1', 'windows-1252', '"latin1"', 'utf-16']) {
      const res = await send(
        base,
        'PATCH',
        `/v1/users/${user.userId}`,
        { ...admin, 'content-type': `application/json; charset=${charset}` },
        latin1('{"name":"Mar\xeda Member"}'),
      );
      expect(res.status, res.text).toBe(415);
      expect(res.body).toMatchObject({ error: expect.stringMatching(/^unsupported_media_type$/i) });
      expect(res.body.message).toContain(charset.replace(/"/g, ''));
    }
    const order = JSON.stringify(orderBody(cat)).replace('"Ada Lovelace"', '"Jos\xe9"');
    const res = await send(
      base,
      'POST',
      '/api/v2/orders',
      { ...admin, 'content-type': 'application/json; charset=iso-8859-1' },
      latin1(order),
    );
    expect(res.status, res.text).toBe(415);
    const after = await call(base, 'GET', `/v1/users/${user.userId}`, { headers: admin });
    expect(after.body!.name).toBe(before.body!.name);
    const list = await call(base, 'GET', '/api/v2/orders', { headers: admin });
    expect((list.body!.data as unknown[]).length).toBe(0);
  });

  it('REST: UTF-8 is taken with or without charset=utf-8 (any case); an empty body is still no body', async () => {
    const user = await atrium.caller();
    for (const type of [
      'application/json',
      'application/json; charset=utf-8',
      'application/json; charset=UTF-8',
      'application/json;charset="utf-8"',
    ]) {
      const res = await send(
        base,
        'PATCH',
        `/v1/users/${user.userId}`,
        { ...admin, 'content-type': type },
        Buffer.from('{"name":"María Member"}', 'utf8'),
      );
      expect(res.status, `${type}: ${res.text}`).toBe(200);
      expect(res.body.name).toBe('María Member');
    }
    const empty = await send(
      base,
      'PATCH',
      `/v1/users/${user.userId}`,
      { ...admin, ...json },
      Buffer.alloc(0),
    );
    expect(empty.status, empty.text).not.toBe(500);
    expect(empty.body.error).not.toBe('unsupported_media_type');
    const proto = await send(
      base,
      'PATCH',
      `/v1/users/${user.userId}`,
      { ...admin, ...json },
      Buffer.from('{"__proto__":{"x":1}}'),
    );
    expect(proto.status).toBe(400);
    expect(proto.body).toMatchObject({ details: [{ code: 'forbidden_key' }] });
  });

  const UPDATE =
    'mutation($id: ID!, $name: String!) { updateUser(id: $id, input: { name: $name }) { firstName lastName } }';
  const READ = 'query($id: ID!) { user(id: $id) { firstName lastName } }';

  async function gql(path: string, headers: Record<string, string>, body: Buffer) {
    return send(base, 'POST', path, headers, body);
  }

  it('GraphQL POST and graphql-sse: BAD_USER_INPUT (400); nothing is stored', async () => {
    const user = await atrium.caller();
    const creds = { 'x-api-key': user.key };
    const read = () =>
      gql(
        '/graphql',
        { ...creds, ...json },
        Buffer.from(JSON.stringify({ query: READ, variables: { id: user.userId } })),
      );
    const before = await read();
    const bytes = latin1(
      JSON.stringify({ query: UPDATE, variables: { id: user.userId, name: 'Jos\xe9 Member' } }),
    );
    for (const accept of ['application/json', 'application/graphql-response+json', 'text/event-stream']) {
      const path = accept === 'text/event-stream' ? '/graphql/stream' : '/graphql';
      const res = await gql(path, { ...creds, ...json, accept }, bytes);
      expect(res.status, `${accept}: ${res.text}`).toBe(400);
      expect(res.body.errors).toHaveLength(1);
      expect(res.body.errors[0].extensions).toMatchObject({
        code: 'BAD_USER_INPUT',
        details: [{ field: null, message: expect.stringContaining('well-formed Unicode') }],
      });
    }
    const after = await read();
    expect(after.body.data).toEqual(before.body.data);
    expect(after.text).not.toContain('\ufffd');
  });

  it('graphql-ws: a text frame that is not UTF-8 closes the socket with 1007', async () => {
    const user = await atrium.caller();
    const socket = new WebSocket(`${base.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
    const closed = new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)));
    await new Promise((resolve) => socket.on('open', resolve));
    socket.send(JSON.stringify({ type: 'connection_init', payload: { 'x-api-key': user.key } }));
    const op = { query: UPDATE, variables: { id: user.userId, name: 'Jos\xe9 Member' } };
    socket.send(latin1(JSON.stringify({ id: '1', type: 'subscribe', payload: op })), { binary: false });
    expect(await closed).toBe(1007);
  });

  it('GraphQL: a JSON body in another charset is 415 naming it; charset=UTF-8 still works', async () => {
    const user = await atrium.caller();
    const creds = { 'x-api-key': user.key };
    const op = (name: string) => JSON.stringify({ query: UPDATE, variables: { id: user.userId, name } });
    for (const path of ['/graphql', '/graphql/stream']) {
      const accept = path === '/graphql' ? 'application/json' : 'text/event-stream';
      const res = await gql(
        path,
        { ...creds, accept, 'content-type': 'application/json; charset=iso-8859-1' },
        latin1(op('Jos\xe9 Member')),
      );
      expect(res.status, res.text).toBe(415);
      expect(res.body.errors[0].message).toContain('iso-8859-1');
      expect(res.body.errors[0].extensions).toEqual({ code: 'BAD_REQUEST' });
    }
    for (const type of ['application/json; charset=UTF-8', 'application/json;charset=utf-8']) {
      const res = await gql(
        '/graphql',
        { ...creds, 'content-type': type },
        Buffer.from(op('José Member'), 'utf8'),
      );
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.updateUser).toEqual({ firstName: 'José', lastName: 'Member' });
    }
  });

  it('OAuth forms: bytes or percent escapes that are not UTF-8 are invalid_request', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    for (const body of [
      Buffer.from('grant_type=client_credentials&client_id=%E9&client_secret=x'),
      latin1('grant_type=client_credentials&client_id=Jos\xe9&client_secret=x'),
      Buffer.from('grant_type=client_credentials&client_id=%ED%A0%80&client_secret=x'),
    ]) {
      const res = await send(base, 'POST', '/oauth/token', form, body);
      expect(res.status, res.text).toBe(400);
      expect(res.body).toMatchObject({
        error: 'invalid_request',
        error_description: expect.stringContaining('UTF-8'),
      });
    }
    // The JSON refresh endpoint: the same refusals as REST's, in RFC 6749's shape, never a 500.
    for (const [type, bytes] of [
      ['application/json', latin1('{"refresh_token":"art_Jos\xe9"}')],
      ['application/json; charset=iso-8859-1', latin1('{"refresh_token":"art_x"}')],
    ] as const) {
      const res = await send(base, 'POST', '/oauth/token/refresh', { 'content-type': type }, bytes);
      expect(res.status, res.text).toBe(400);
      expect(res.body.error).toBe('invalid_request');
    }
    // The sign-in form answers a person with a page saying so, not a 500 page.
    const page = await fetch(`${base}/authorize`, {
      method: 'POST',
      headers: form,
      body: new Uint8Array(Buffer.from('csrf=x&email=%E9&password=x')),
    });
    expect(page.status).toBe(400);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(await page.text()).toContain('not UTF-8');
    // A '%' that starts no escape is text, as before (the client is merely unknown).
    const plain = await send(
      base,
      'POST',
      '/oauth/token',
      form,
      Buffer.from('grant_type=client_credentials&client_id=100%&client_secret=x'),
    );
    expect(plain.body.error).toBe('invalid_client');
  });
});
