import { beforeAll, describe, expect, it } from 'vitest';
import { authorWithPost, listeningAtrium } from './support.js';
import { type Answer, type Credentials, runOver } from './transports.js';

/**
 * An id holding NUL, sent as a GraphQL variable. Until 2026-11-28 the answer depended on the engine:
 * SQLite read it and found nothing, PostgreSQL's NUL guard refused the statement (an error beside
 * `user: null`, payload errors instead of NOT_FOUND). The core now treats a string that is not an id
 * of its kind (ids.ts `isId`) as unknown before asking the store, so both engines answer exactly as
 * for a well-formed id that names nothing. Run on SQLite and on PostgreSQL (TEST_DATABASE_URL).
 */
describe('a NUL character in an id, over GraphQL', () => {
  const s = listeningAtrium();
  let member: Credentials;
  let admin: Credentials;
  let authorId: string;
  let postId: string;
  beforeAll(async () => {
    const author = await authorWithPost(s.atrium, 'nulauthor', 'A post about nothing');
    authorId = author.userId;
    postId = author.postId;
    member = { 'x-api-key': author.key };
    admin = { 'x-api-key': (await s.atrium.caller({ role: 'admin' })).key };
  });

  // An unknown id of the right shape, for comparison: whatever it answers, NUL answers too.
  const UNKNOWN = { usr: 'usr_00000000000000000000000000', pst: 'pst_00000000000000000000000000' };
  const NUL_IDS = ['a\u0000b', 'usr_\u0000', 'pst_\u0000', 'cmt_\u0000', 'org_\u0000', '\u0000'];

  /** The answer without messages that echo the id (a well-formed one is named, NUL is not). */
  const shape = (a: Answer) => ({
    data: a.data,
    codes: (a.errors ?? []).map((e) => e.extensions?.code),
  });

  for (const transport of ['POST', 'WS'] as const) {
    it(`user, post and node answer null, with no error, over ${transport}`, async () => {
      const q = `query($id: ID!) { user(id: $id) { id } post(id: $id) { id } node(id: $id) { id } }`;
      for (const id of NUL_IDS) {
        const res = await runOver(transport, s.base, { query: q, variables: { id } }, member);
        expect(res, JSON.stringify(id)).toEqual({
          status: transport === 'POST' ? 200 : 101,
          data: { user: null, post: null, node: null },
        });
      }
    });

    it(`addComment, updatePost and deletePost answer NOT_FOUND as for an unknown post over ${transport}`, async () => {
      const add = `mutation($p: ID!, $a: ID!) { addComment(input: { body: "hi", authorId: $a, postId: $p }) {
        comment { id } errors { field message } } }`;
      const update = `mutation($p: ID!) { updatePost(id: $p, input: { title: "T" }) { post { id } errors { field } } }`;
      const del = `mutation($p: ID!) { deletePost(id: $p) { deletedPostId errors { field } } }`;
      for (const [query, field] of [
        [add, 'addComment'],
        [update, 'updatePost'],
        [del, 'deletePost'],
      ] as const) {
        const unknown = await runOver(
          transport,
          s.base,
          { query, variables: { p: UNKNOWN.pst, a: authorId } },
          member,
        );
        expect(shape(unknown), field).toEqual({ data: null, codes: ['NOT_FOUND'] });
        for (const p of NUL_IDS) {
          const res = await runOver(transport, s.base, { query, variables: { p, a: authorId } }, member);
          expect(shape(res), `${field} ${JSON.stringify(p)}`).toEqual(shape(unknown));
          expect(res.errors![0]!.message).toBe('Post not found.');
        }
      }
      // Nothing was written, and the real post is untouched.
      const after = await runOver(
        transport,
        s.base,
        {
          query: 'query($id: ID!) { post(id: $id) { title comments { totalCount } } }',
          variables: { id: postId },
        },
        member,
      );
      expect(after.data).toEqual({ post: { title: 'A post about nothing', comments: { totalCount: 0 } } });
    });

    it(`an author id with NUL is an unknown author, as a well-formed unknown one is, over ${transport}`, async () => {
      const create = `mutation($a: ID!) { createPost(input: { title: "T", body: "B", authorId: $a }) {
        post { id } errors { field message } } }`;
      const unknown = await runOver(
        transport,
        s.base,
        { query: create, variables: { a: UNKNOWN.usr } },
        admin,
      );
      expect(unknown.data).toEqual({
        createPost: { post: null, errors: [{ field: 'authorId', message: 'authorId names no user' }] },
      });
      for (const a of NUL_IDS) {
        const res = await runOver(transport, s.base, { query: create, variables: { a } }, admin);
        expect(res, JSON.stringify(a)).toMatchObject({ data: unknown.data });
        expect(res.errors).toBeUndefined();
      }
    });

    it(`search text with NUL is BAD_USER_INPUT naming query on every engine, over ${transport}`, async () => {
      const q = `query($q: String!) { search(query: $q) { __typename } }`;
      for (const text of ['a\u0000b', 'nothing\u0000', '\u0000']) {
        const res = await runOver(transport, s.base, { query: q, variables: { q: text } }, member);
        expect(res.data ?? null, JSON.stringify(text)).toBeNull();
        expect(res.errors).toHaveLength(1);
        expect(res.errors![0]!.extensions).toMatchObject({
          code: 'BAD_USER_INPUT',
          details: [{ field: 'query', message: 'query must not contain control characters' }],
        });
      }
      // Tabs and newlines are whitespace, as in every text the core takes.
      const tab = await runOver(transport, s.base, { query: q, variables: { q: 'post\tnothing' } }, member);
      expect(tab.errors).toBeUndefined();
      expect(tab.data).toEqual({ search: [{ __typename: 'Post' }] });
    });
  }
});
