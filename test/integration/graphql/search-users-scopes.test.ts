import { beforeAll, describe, expect, it } from 'vitest';
import type { TestAtrium } from '../../helpers/atrium.js';
import { listeningAtrium } from './support.js';
import { type Credentials, runOver, type TransportName } from './transports.js';

type Caller = Awaited<ReturnType<TestAtrium['caller']>>;

/**
 * `search` and `searchAll` name users only to a caller who could list them: not anonymously (as
 * `users` refuses, D19) and not with credentials lacking `users:read` (the scope of `user(id)` and
 * `users`). Until 2026-11-28 both answered users, admins and their roles included, to anyone.
 */
describe('GraphQL search: users only for callers who may list them', () => {
  const server = listeningAtrium();
  let member: Caller;
  let admin: Caller;

  beforeAll(async () => {
    member = await server.atrium.caller({ handle: 'zqxfind_user' });
    admin = await server.atrium.caller({ handle: 'zqxfind_admin', role: 'admin' });
    const actor = { id: member.userId, kind: 'user' as const, role: 'member' as const };
    await server.atrium.services.core.posts.create(actor, {
      title: 'A zqxfind post',
      body: 'b',
      authorId: member.userId,
    });
  });

  const bearer = async (scope: string[]): Promise<Credentials> => ({
    authorization: `Bearer ${
      (
        await server.atrium.services.oauth!.tokens.issue({
          subject: member.userId,
          clientId: 'cli_search_scopes',
          scope,
        })
      ).token
    }`,
  });

  const kinds = async (transport: TransportName, credentials: Credentials, field: 'search' | 'searchAll') => {
    const res = await runOver(
      transport,
      server.base,
      {
        query: `{ ${field}(query: "zqxfind") { __typename ... on User { id handle role } ... on Post { id } } }`,
      },
      credentials,
    );
    expect(res.errors).toBeUndefined();
    const hits = (res.data as Record<string, { __typename: string; handle?: string }[]>)[field]!;
    return {
      users: hits
        .filter((h) => h.__typename === 'User')
        .map((h) => h.handle)
        .sort(),
      posts: hits.filter((h) => h.__typename === 'Post').length,
    };
  };

  describe.each(['POST', 'WS'] as TransportName[])('%s', (transport) => {
    it.each(['search', 'searchAll'] as const)(
      '%s: no users for an anonymous caller, posts still',
      async (field) => {
        expect(await kinds(transport, {}, field)).toEqual({ users: [], posts: 1 });
      },
    );

    it.each(['search', 'searchAll'] as const)(
      '%s: no users for a token without users:read',
      async (field) => {
        expect(await kinds(transport, await bearer(['content:read']), field)).toEqual({
          users: [],
          posts: 1,
        });
      },
    );

    it.each(['search', 'searchAll'] as const)(
      '%s: users for an API key and a token with users:read',
      async (field) => {
        const both = { users: ['zqxfind_admin', 'zqxfind_user'], posts: 1 };
        expect(await kinds(transport, member.headers, field)).toEqual(both);
        expect(await kinds(transport, admin.headers, field)).toEqual(both);
        expect(await kinds(transport, await bearer(['content:read', 'users:read']), field)).toEqual(both);
      },
    );
  });
});
