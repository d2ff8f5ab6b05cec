import { execFileSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../src/graphql/pipeline/persisted.js';
import { codesOf, runOver, TRANSPORTS } from './transports.js';
import { listeningAtrium, productionAtrium } from './support.js';

/**
 * Federation in production (docs/graphql.md, "Federation in production"): `_service { sdl }` is
 * introspection under another name and is refused like `__schema`, even through a known hash;
 * `_entities` is data and runs like any other operation, through a known hash only, with the same
 * visibility rules. The SDL a router composes from is printed at build time by `graphql:sdl`.
 */

const SERVICE = '{ _service { sdl } }';
const ALIASED_SERVICE = 'query Sneaky { schema: _service { text: sdl } }';
const ENTITIES =
  'query Entities($r: [_Any!]!) { _entities(representations: $r) { __typename ... on Post { title } } }';
const persisted = (query: string) => ({ persistedQuery: { version: 1, sha256Hash: sha256Hex(query) } });

describe('federation fields in production', () => {
  const server = productionAtrium([SERVICE, ALIASED_SERVICE, ENTITIES]);
  let key: string;
  let published: string;
  let draft: string;

  beforeAll(async () => {
    const author = await server.atrium.caller({ handle: 'fedprodauthor' });
    key = (await server.atrium.caller({ handle: 'fedprodreader' })).key;
    const actor = { id: author.userId, kind: 'user' as const, role: 'member' as const };
    const posts = server.atrium.services.core.posts;
    published = (await posts.create(actor, { title: 'Out', body: 'b', authorId: author.userId })).id;
    draft = (
      await posts.create(actor, { title: 'Hidden', body: 'b', authorId: author.userId, publishAt: null })
    ).id;
  });

  describe.each(TRANSPORTS)('%s', (transport) => {
    it('refuses _service { sdl } at validation, even through a known hash and under an alias', async () => {
      for (const query of [SERVICE, ALIASED_SERVICE]) {
        const a = await runOver(
          transport,
          server.base,
          { extensions: persisted(query) },
          { 'x-api-key': key },
        );
        expect(a.data, query).toBeUndefined();
        expect(a.errors, query).toHaveLength(1);
        expect(a.errors![0]!.message).toBe(
          'GraphQL introspection has been disabled, but the requested query contained the field "_service".',
        );
        expect(JSON.stringify(a)).not.toContain('@key');
      }
    });

    it('runs _entities through a known hash, with the usual visibility', async () => {
      const a = await runOver(
        transport,
        server.base,
        {
          extensions: persisted(ENTITIES),
          variables: {
            r: [
              { __typename: 'Post', id: published },
              { __typename: 'Post', id: draft },
            ],
          },
        },
        { 'x-api-key': key },
      );
      expect(a.errors).toBeUndefined();
      expect(a.data).toEqual({ _entities: [{ __typename: 'Post', title: 'Out' }, null] });
    });

    it('refuses an _entities document that is not persisted', async () => {
      const a = await runOver(
        transport,
        server.base,
        {
          query: 'query($r: [_Any!]!) { _entities(representations: $r) { ... on Post { body } } }',
          variables: { r: [{ __typename: 'Post', id: published }] },
        },
        { 'x-api-key': key },
      );
      expect(a.data).toBeUndefined();
      expect(codesOf(a)).toEqual(['PERSISTED_QUERY_REQUIRED']);
    });
  });
});

describe('the subgraph SDL for build-time composition', () => {
  const server = listeningAtrium();

  it('npm run graphql:sdl prints what _service { sdl } answers outside production', async () => {
    const a = await runOver('POST', server.base, { query: SERVICE });
    const served = (a.data as { _service: { sdl: string } })._service.sdl;
    const printed = execFileSync(process.execPath, ['--import', 'tsx', 'scripts/graphql-sdl.ts'], {
      encoding: 'utf8',
    });
    expect(printed.trimEnd()).toBe(served.trimEnd());
    expect(printed).toMatch(/type Post implements [^{]*@key\(fields: "id"\)/);
  });
});
