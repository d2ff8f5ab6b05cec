import { describe, expect, it } from 'vitest';
import { codesOf, runOver, type Credentials } from './transports.js';
import { listeningAtrium } from './support.js';

/**
 * graphql-ws credentials of the wrong type. The `connection_init` payload is JSON, so a client may
 * send a number, an object or a list where a string belongs; until 2026-11-28 such a credential was
 * ignored and the connection acknowledged as anonymous, while a malformed string closed it with 4403.
 * A credential that is not a string is refused the same way; `null` stays "no credential".
 */
describe('WebSocket: a credential that is not a string', () => {
  const server = listeningAtrium();

  it.each([
    ['x-api-key', 123],
    ['X-API-Key', 123],
    ['x-api-key', { key: 'atr_x' }],
    ['x-api-key', ['atr_x']],
    ['x-api-key', true],
    ['authorization', 123],
    ['Authorization', ['Bearer abc']],
    ['authorization', { token: 'abc' }],
  ])('%s: %j closes with 4403', async (name, value) => {
    const answer = await runOver('WS', server.base, { query: '{ __typename }' }, {
      [name]: value,
    } as unknown as Credentials);
    expect(answer.closeCode).toBe(4403);
    expect(answer.data).toBeUndefined();
  });

  it('null is no credential: anonymous, as before', async () => {
    const credentials = { 'x-api-key': null, authorization: null } as unknown as Credentials;
    const answer = await runOver('WS', server.base, { query: '{ __typename }' }, credentials);
    expect(answer.closeCode).toBeUndefined();
    expect(answer.data).toEqual({ __typename: 'Query' });
  });

  it('a key in a string is still accepted', async () => {
    const { key } = await server.atrium.caller({ handle: 'wsstring' });
    const answer = await runOver('WS', server.base, { query: '{ me { handle } }' }, { 'x-api-key': key });
    expect(answer.data).toEqual({ me: { handle: 'wsstring' } });
  });

  it('credentials in a headers object (a common connectionParams form) count; the top level wins', async () => {
    const { key } = await server.atrium.caller({ handle: 'wsnested' });
    const { key: other } = await server.atrium.caller({ handle: 'wsflat' });
    const me = (credentials: unknown) =>
      runOver('WS', server.base, { query: '{ me { handle } }' }, credentials as Credentials);
    // Until 2026-11-29 these ran anonymous: me was UNAUTHENTICATED, with no sign why.
    expect((await me({ headers: { 'x-api-key': key } })).data).toEqual({ me: { handle: 'wsnested' } });
    expect((await me({ headers: { 'X-API-Key': key } })).data).toEqual({ me: { handle: 'wsnested' } });
    expect((await me({ 'x-api-key': other, headers: { 'x-api-key': key } })).data).toEqual({
      me: { handle: 'wsflat' },
    });
    // Nested credentials are checked as flat ones are.
    expect((await me({ headers: { 'x-api-key': 'atr_test_nope' } })).closeCode).toBe(4403);
    expect((await me({ headers: { 'x-api-key': 123 } })).closeCode).toBe(4403);
    expect((await me({ headers: 'x-api-key: atr_x' })).closeCode).toBe(4403);
    // An empty one is no credentials: anonymous, as the flat form without them.
    const anonymous = await me({ headers: {} });
    expect(anonymous.closeCode).toBeUndefined();
    expect(codesOf(anonymous)).toEqual(['UNAUTHENTICATED']);
  });
});
