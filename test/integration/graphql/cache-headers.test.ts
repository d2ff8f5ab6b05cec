import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../src/graphql/pipeline/persisted.js';
import { listeningAtrium } from './support.js';

/**
 * Cache-Control and Vary on /graphql's JSON answers. Until 2026-11-28 a GET (a persisted hash
 * included) of per-user data answered with only `Vary: Origin`, so a shared cache could keep one
 * caller's answer and hand it to another.
 */
const ME = '{ me { id handle } }';
const POSTS = '{ posts(first: 1) { totalCount } }';
const hashOf = (query: string) => ({ persistedQuery: { version: 1, sha256Hash: sha256Hex(query) } });

const varyOf = (res: Response) =>
  (res.headers.get('vary') ?? '')
    .split(',')
    .map((v) => v.trim().toLowerCase())
    .filter(Boolean);

describe('/graphql: Cache-Control and Vary', () => {
  const server = listeningAtrium();

  const get = (params: Record<string, unknown>, headers: Record<string, string> = {}) => {
    const url = new URL(`${server.base}/graphql`);
    for (const [name, value] of Object.entries(params))
      url.searchParams.set(name, typeof value === 'string' ? value : JSON.stringify(value));
    return fetch(url, { headers: { accept: 'application/json', ...headers } });
  };
  const post = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    fetch(`${server.base}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  it('a persisted-hash GET with an API key is private, no-store, and varies on the credentials', async () => {
    const { key } = await server.atrium.caller({ handle: 'cacheme' });
    // Registered by the first request (development rules), then sent by its hash alone.
    expect((await post({ query: ME, extensions: hashOf(ME) }, { 'x-api-key': key })).status).toBe(200);
    const res = await get({ extensions: hashOf(ME) }, { 'x-api-key': key });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: { me: { handle: string } } }).data.me.handle).toBe('cacheme');
    expect(res.headers.get('cache-control')).toBe('private, no-store');
    expect(varyOf(res)).toEqual(expect.arrayContaining(['origin', 'authorization', 'x-api-key', 'accept']));
  });

  it('a GET with a bearer header is private, no-store too (refused or not)', async () => {
    const res = await get({ query: POSTS }, { authorization: 'Bearer not-a-token' });
    expect(res.status).toBe(401);
    expect(res.headers.get('cache-control')).toBe('private, no-store');
  });

  it('an anonymous GET answered without errors may be stored but is revalidated every time', async () => {
    const res = await get({ query: POSTS });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { errors?: unknown }).errors).toBeUndefined();
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(varyOf(res)).toEqual(expect.arrayContaining(['authorization', 'x-api-key', 'accept']));
  });

  it.each([
    ['an unknown hash (200 with errors)', { extensions: hashOf('{ __typename unknown: __typename }') }, 200],
    ['a field error (200 with errors)', { query: ME }, 200],
    ['variables that are not JSON (400)', { query: POSTS, variables: '{' }, 400],
    ['a syntax error (200 under Accept: application/json)', { query: '{' }, 200],
  ])('an anonymous GET answering %s is never cacheable', async (_name, params, status) => {
    const res = await get(params);
    expect(res.status).toBe(status);
    expect(((await res.json()) as { errors?: unknown[] }).errors?.length).toBeGreaterThan(0);
    expect(res.headers.get('cache-control')).toBe('private, no-store');
  });

  it('POST answers are never cacheable, with or without credentials (direct path and Yoga)', async () => {
    const { key } = await server.atrium.caller({ handle: 'cachepost' });
    for (const [headers, name] of [
      [{ 'x-api-key': key }, 'direct'],
      [{ 'x-api-key': key, origin: 'http://elsewhere.example' }, 'Yoga'],
      [{}, 'anonymous'],
    ] as const) {
      const res = await post({ query: POSTS }, headers);
      expect(res.status, name).toBe(200);
      expect(res.headers.get('cache-control'), name).toBe('private, no-store');
      expect(varyOf(res), name).toEqual(expect.arrayContaining(['authorization', 'x-api-key']));
    }
  });
});
