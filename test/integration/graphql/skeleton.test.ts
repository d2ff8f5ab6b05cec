import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';

describe('GraphQL mount', () => {
  let atrium: TestAtrium;
  beforeAll(async () => {
    atrium = await startTestAtrium();
  });
  afterAll(async () => atrium?.stop());

  it('answers `me` for a caller with an API key', async () => {
    const caller = await atrium.caller({ handle: 'gqlskeleton' });
    const res = await atrium.http!.inject({
      method: 'POST',
      url: '/graphql',
      headers: { ...caller.headers, 'content-type': 'application/json' },
      payload: { query: '{ me { id handle } }' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { me: { id: caller.userId, handle: 'gqlskeleton' } } });
  });

  it('raises UNAUTHENTICATED for `me` without credentials', async () => {
    const res = await atrium.http!.inject({
      method: 'POST',
      url: '/graphql',
      headers: { 'content-type': 'application/json' },
      payload: { query: '{ me { id } }' },
    });
    const body = res.json();
    expect(body.data).toBeNull();
    expect(body.errors[0].extensions.code).toBe('UNAUTHENTICATED');
  });
});
