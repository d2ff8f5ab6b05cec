import { beforeAll, describe, expect, it } from 'vitest';
import { memoryLog } from '../../helpers/memory-log.js';
import { runOver, TRANSPORTS, type TransportName } from './transports.js';
import { authorWithPost, listeningAtrium } from './support.js';

/**
 * Federation's `_entities` with representations a router would never send, mixed with valid ones.
 * Until 2026-11-28 each bad one was an INTERNAL_SERVER_ERROR logged at error level, and an unknown
 * or missing `__typename` nulled the whole list (the valid items lost); an Organization, which
 * docs/graphql.md lists among `_entities`' types, was "not a possible type for _Entity".
 */
const QUERY = `query($r: [_Any!]!) { _entities(representations: $r) {
  __typename ... on Post { id title } ... on Organization { id name } } }`;

describe('GraphQL _entities with malformed representations', () => {
  const log = memoryLog('info');
  const server = listeningAtrium({ LOG_LEVEL: 'info' }, { logger: log.logger });
  let key: string;
  let postId: string;
  let orgId: string;

  beforeAll(async () => {
    let userId: string;
    ({ key, postId, userId } = await authorWithPost(server.atrium, 'entitiesauthor', 'Entities'));
    orgId = (await server.atrium.services.core.users.get(userId)).organizationId;
  });

  describe.each(TRANSPORTS)('%s', (transport: TransportName) => {
    it('answers BAD_USER_INPUT at each bad item, resolves the valid ones, and logs no error', async () => {
      const errorsBefore = log.lines.filter((l) => (l.level as number) >= 50).length;
      const representations = [
        { __typename: 'Post', id: postId },
        { __typename: 'Nope', id: 'x' },
        { id: 'x' },
        { __typename: 'Post' },
        { __typename: 'Organization', id: orgId },
        { __typename: 'PageInfo', id: 'x' },
        { __typename: 'Post', id: 42 },
        'just a string',
        { __typename: 'Post', id: postId },
      ];
      const a = await runOver(
        transport,
        server.base,
        { query: QUERY, variables: { r: representations } },
        { 'x-api-key': key },
      );
      const post = { __typename: 'Post', id: postId, title: 'Entities' };
      expect(a.data).toEqual({
        _entities: [
          post,
          null,
          null,
          null,
          { __typename: 'Organization', id: orgId, name: expect.any(String) },
          null,
          null,
          null,
          post,
        ],
      });
      const errors = (a.errors ?? []) as Array<{ path?: unknown; extensions?: { code?: unknown } }>;
      expect(errors.map((e) => [e.path, e.extensions?.code])).toEqual(
        [1, 2, 3, 5, 6, 7].map((i) => [['_entities', i], 'BAD_USER_INPUT']),
      );
      expect(log.lines.filter((l) => (l.level as number) >= 50).slice(errorsBefore)).toEqual([]);
    });
  });

  it('resolves an organization the caller may not read, or an unknown one, as null (as node(id))', async () => {
    const other = await server.atrium.services.core.organizations.create({ name: 'Elsewhere' });
    const a = await runOver(
      'POST',
      server.base,
      {
        query: QUERY,
        variables: {
          r: [
            { __typename: 'Organization', id: other.id },
            { __typename: 'Organization', id: 'org_unknown' },
          ],
        },
      },
      { 'x-api-key': key },
    );
    expect(a.errors).toBeUndefined();
    expect(a.data).toEqual({ _entities: [null, null] });
  });
});
