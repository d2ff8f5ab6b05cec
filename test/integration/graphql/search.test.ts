import { beforeAll, describe, expect, it } from 'vitest';
import { codes, type GraphQLServer, graphQLServerForSuite } from './support.js';

type Caller = Awaited<ReturnType<GraphQLServer['atrium']['caller']>>;

const SEARCH = `query($q: String!) { search(query: $q) { __typename
  ... on User { id handle } ... on Post { id title } ... on Comment { id body } } }`;

describe('GraphQL search and node', () => {
  const s = graphQLServerForSuite();
  let alice: Caller;
  let postId: string;
  let commentId: string;
  beforeAll(async () => {
    alice = await s.atrium.caller({ handle: 'zebracorn' });
    const actor = { id: alice.userId, kind: 'user' as const, role: 'member' as const };
    const core = s.atrium.services.core;
    postId = (
      await core.posts.create(actor, {
        title: 'Zebracorn sightings',
        body: 'Striped horns',
        authorId: alice.userId,
        tags: ['zebracorn'],
      })
    ).id;
    commentId = (
      await core.comments.add(actor, { body: 'A zebracorn ate my homework', authorId: alice.userId, postId })
    ).id;
    await core.posts.create(actor, { title: 'Unrelated', body: 'Nothing here', authorId: alice.userId });
  });

  it('search answers users, posts and comments of the full-text index with __typename', async () => {
    const res = await s.gql(SEARCH, { q: 'zebracorn' }, alice.headers);
    expect(res.errors).toBeUndefined();
    const hits = res.data!.search as Array<{ __typename: string; id: string }>;
    expect(hits.map((h) => `${h.__typename}:${h.id}`).sort()).toEqual(
      [`User:${alice.userId}`, `Post:${postId}`, `Comment:${commentId}`].sort(),
    );
    expect(hits).toContainEqual({ __typename: 'Post', id: postId, title: 'Zebracorn sightings' });
  });

  it('every word must match; words that match nothing and operator characters find nothing', async () => {
    const both = await s.gql(SEARCH, { q: 'zebracorn homework' }, alice.headers);
    expect(both.data).toEqual({
      search: [{ __typename: 'Comment', id: commentId, body: 'A zebracorn ate my homework' }],
    });
    for (const q of ['nothingmatches', '"*) OR (', '']) {
      const res = await s.gql(SEARCH, { q }, alice.headers);
      expect(res.data, q).toEqual({ search: [] });
    }
    const missing = await s.gql('query { search { __typename } }', {}, alice.headers);
    expect(missing.data).toBeUndefined();
    expect(missing.errors).toHaveLength(1);
  });

  it('searchAll finds a tag by its words and by its whole name, punctuation and spaces included', async () => {
    const actor = { id: alice.userId, kind: 'user' as const, role: 'member' as const };
    const post = await s.atrium.services.core.posts.create(actor, {
      title: 'Tagged',
      body: 'Tagged',
      authorId: alice.userId,
      tags: ['c++', 'node.js', 'machine learning'],
    });
    const tags = async (q: string) => {
      const res = await s.gql(
        'query($q: String!) { searchAll(query: $q) { __typename ... on Tag { name postCount } } }',
        { q },
        alice.headers,
      );
      expect(res.errors, q).toBeUndefined();
      return (res.data!.searchAll as Array<{ __typename: string; name?: string }>)
        .filter((h) => h.__typename === 'Tag')
        .map((h) => h.name);
    };
    expect(await tags('C++')).toEqual(['c++']);
    expect(await tags('node.js')).toEqual(['node.js']);
    expect(await tags('Machine  Learning')).toEqual(['machine learning']);
    expect(await tags('zebracorn')).toEqual(['zebracorn']);
    await s.atrium.services.core.posts.delete(actor, post.id);
  });

  it('finds words written with punctuation, decomposed text and İ as typed, on both engines', async () => {
    // Until migration 0011, PostgreSQL kept `alice@example.org`, `README.md`, `node.js` and
    // `john-2024` as single lexemes the query never matched, and missed NFD text and İ.
    const john = await s.atrium.caller({ handle: 'john-2024' });
    const actor = { id: john.userId, kind: 'user' as const, role: 'member' as const };
    const post = await s.atrium.services.core.posts.create(actor, {
      title: 'İstanbul cafe\u0301',
      body: 'Mail alice@example.org, read README.md; node.js v20.1 -42',
      authorId: john.userId,
    });
    const misses: string[] = [];
    for (const [q, id] of [
      ['alice@example.org', post.id],
      ['README.md', post.id],
      ['node.js', post.id],
      ['v20.1', post.id],
      ['-42', post.id],
      ['café', post.id],
      ['İstanbul', post.id],
      ['john-2024', john.userId],
    ] as const) {
      const res = await s.gql(SEARCH, { q }, john.headers);
      const ids = (res.data?.search as Array<{ id: string }> | undefined)?.map((h) => h.id) ?? [];
      if (!ids.includes(id)) misses.push(q);
    }
    expect(misses).toEqual([]);
  });

  it("another user's email in a hit is an error that nulls the whole non-null result", async () => {
    const bob = await s.atrium.caller({ handle: 'bobsearch' });
    const res = await s.gql(
      'query($q: String!) { search(query: $q) { ... on User { email } } }',
      { q: 'zebracorn' },
      bob.headers,
    );
    expect(res.data).toBeNull();
    expect(codes(res)).toEqual(['FORBIDDEN']);
    expect(res.errors![0]!.path).toEqual(['search', 0, 'email']);
  });

  it('searchAll adds tags named by a query word, first', async () => {
    const res = await s.gql(
      'query($q: String!) { searchAll(query: $q) { __typename ... on Tag { name postCount } ... on Post { id } } }',
      { q: 'Zebracorn' },
      alice.headers,
    );
    const hits = res.data!.searchAll as Array<Record<string, unknown>>;
    expect(hits[0]).toEqual({ __typename: 'Tag', name: 'zebracorn', postCount: 1 });
    expect(hits.map((h) => h.__typename).sort()).toEqual(['Comment', 'Post', 'Tag', 'User']);
  });

  it('node(id) answers each type by its id and null for unknown ids or prefixes', async () => {
    const q = `query($id: ID!) { node(id: $id) { __typename id ... on Auditable { createdAt } } }`;
    for (const [id, type] of [
      [alice.userId, 'User'],
      [postId, 'Post'],
      [commentId, 'Comment'],
    ] as const) {
      const res = await s.gql(q, { id }, alice.headers);
      expect(res.data!.node).toMatchObject({ __typename: type, id });
    }
    for (const id of ['pst_nothing', 'xyz_1', 'plain']) {
      const res = await s.gql(q, { id }, alice.headers);
      expect(res, id).toMatchObject({ data: { node: null } });
      expect(res.errors, id).toBeUndefined();
    }
  });
});
