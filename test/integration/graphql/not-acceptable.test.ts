import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NOT_ACCEPTABLE_MESSAGE } from '../../../src/graphql/pipeline/not-acceptable.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';

/**
 * An Accept naming nothing GET or POST /graphql answers with is refused with 406 before the
 * operation runs. Yoga picks the media type after executing: a mutation so sent was carried out
 * and answered 406 with the body `null`, a refusal of a change that stood.
 */
describe('GraphQL with an Accept it cannot answer', () => {
  let atrium: TestAtrium;
  let url: string;
  let key: Record<string, string>;
  let authorId: string;

  async function gql(accept: string, query: string, variables: Record<string, unknown> = {}) {
    const res = await fetch(`${url}/graphql`, {
      method: 'POST',
      headers: { ...key, accept, 'content-type': 'application/json' },
      body: JSON.stringify({ query, variables }),
    });
    return { status: res.status, type: res.headers.get('content-type'), body: (await res.json()) as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
  }

  beforeAll(async () => {
    atrium = await startTestAtrium({ HOST: '127.0.0.1' });
    url = (await atrium.listen()).httpUrl!;
    key = (await atrium.caller({ role: 'admin' })).headers;
    authorId = (await gql('application/json', '{ me { id } }')).body.data.me.id as string;
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  const CREATE = `mutation($a: ID!) { createPost(input: { title: "Refused", body: "b", authorId: $a }) { post { id } } }`;
  const refusal = { errors: [{ message: NOT_ACCEPTABLE_MESSAGE, extensions: { code: 'BAD_REQUEST' } }] };

  it.each(['text/plain', 'text/html', 'application/xml', 'application/json; charset=iso-8859-1'])(
    'Accept %s: a mutation is refused with 406 in JSON, and nothing is written',
    async (accept) => {
      const res = await gql(accept, CREATE, { a: authorId });
      expect(res.status).toBe(406);
      expect(res.type).toMatch(/^application\/json/);
      expect(res.body).toEqual(refusal);
      const posts = await gql('application/json', '{ posts(first: 50) { edges { node { title } } } }');
      expect(posts.body.data.posts.edges).toEqual([]);
    },
  );

  it.each([
    'application/json',
    'application/graphql-response+json',
    '*/*',
    'application/*',
    'text/plain, application/json',
  ])('Accept %s: the mutation runs', async (accept) => {
    const res = await gql(accept, CREATE, { a: authorId });
    expect(res.status).toBe(200);
    expect(res.body.data.createPost.post.id).toMatch(/^pst_/);
  });
});
