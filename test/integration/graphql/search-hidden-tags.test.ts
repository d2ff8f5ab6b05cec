import { beforeAll, describe, expect, it } from 'vitest';
import type { TestAtrium } from '../../helpers/atrium.js';
import { listeningAtrium } from './support.js';
import { runOver, type TransportName } from './transports.js';

type Caller = Awaited<ReturnType<TestAtrium['caller']>>;

/**
 * D20: a hidden post is exactly a missing one in counts and search, so `searchAll` names a tag only
 * when the caller sees at least one post carrying it, with `postCount` the posts they see. Until
 * 2026-11-28 a tag on drafts or scheduled posts alone was a hit for everyone, with postCount 0.
 */
describe('GraphQL searchAll: tags on hidden posts only', () => {
  const server = listeningAtrium();
  let author: Caller;
  let other: Caller;
  let admin: Caller;

  beforeAll(async () => {
    author = await server.atrium.caller({ handle: 'zqxtagauthor' });
    other = await server.atrium.caller({ handle: 'zqxtagother' });
    admin = await server.atrium.caller({ handle: 'zqxtagadmin', role: 'admin' });
    const create = async (tags: string[], publishAt?: string | null) => {
      const res = await runOver(
        'POST',
        server.base,
        {
          query:
            'mutation($i: CreatePostInput!) { createPost(input: $i) { post { id } errors { message } } }',
          variables: { i: { title: 'Tagged', body: 'b', authorId: author.userId, tags, publishAt } },
        },
        author.headers,
      );
      expect(res.errors).toBeUndefined();
      expect((res.data as { createPost: { errors: unknown[] } }).createPost.errors).toEqual([]);
    };
    await create(['zqxdrafttag', 'zqxmixedtag'], null);
    await create(['zqxschedtag'], '2999-01-01T00:00:00Z');
    await create(['zqxmixedtag']);
  });

  const tagsFound = async (transport: TransportName, who: Caller | null, query: string) => {
    const res = await runOver(
      transport,
      server.base,
      {
        query: 'query($q: String!) { searchAll(query: $q) { __typename ... on Tag { name postCount } } }',
        variables: { q: query },
      },
      who?.headers ?? {},
    );
    expect(res.errors).toBeUndefined();
    return (res.data as { searchAll: { __typename: string }[] }).searchAll.filter(
      (hit) => hit.__typename === 'Tag',
    );
  };

  describe.each(['POST', 'WS'] as TransportName[])('%s', (transport) => {
    it('another member and an anonymous caller find no tag that only drafts or scheduled posts carry', async () => {
      for (const who of [other, null]) {
        expect(await tagsFound(transport, who, 'zqxdrafttag')).toEqual([]);
        expect(await tagsFound(transport, who, 'zqxschedtag')).toEqual([]);
        expect(await tagsFound(transport, who, 'zqxmixedtag')).toEqual([
          { __typename: 'Tag', name: 'zqxmixedtag', postCount: 1 },
        ]);
      }
    });

    it('the author and an admin find them, counting the hidden posts', async () => {
      for (const who of [author, admin]) {
        expect(await tagsFound(transport, who, 'zqxdrafttag zqxschedtag')).toEqual([
          { __typename: 'Tag', name: 'zqxdrafttag', postCount: 1 },
          { __typename: 'Tag', name: 'zqxschedtag', postCount: 1 },
        ]);
        expect(await tagsFound(transport, who, 'zqxmixedtag')).toEqual([
          { __typename: 'Tag', name: 'zqxmixedtag', postCount: 2 },
        ]);
      }
    });
  });
});
