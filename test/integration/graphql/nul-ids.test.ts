import { beforeAll, describe, expect, it } from 'vitest';
import { CommentService } from '../../../src/domain/comments.js';
import { DomainBus } from '../../../src/events/bus.js';
import { authorWithPost, listeningAtrium } from './support.js';
import { type Answer, type Credentials, runOver, wsClient } from './transports.js';

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

  /**
   * `commentAdded` opens a stream for any postId (no read: a post published later starts
   * delivering). The only read of the postId itself is the catch-up after a broadcast gap, which
   * asks for the comments of every post subscribed on the instance at once. Until 2026-11-28 one
   * subscription to an id with NUL made that read fail on PostgreSQL (the NUL guard), retried every
   * 2 s for ever: no subscriber of that instance caught up again. SQLite read it and found nothing.
   */
  it('a commentAdded subscription to an id with NUL leaves the catch-up of the other posts whole', async () => {
    const { atrium } = s;
    const received = { nul: [] as string[], real: [] as string[] };
    const client = wsClient(s.base, member);
    const watch = (postId: string, into: string[]) =>
      client.subscribe<{ commentAdded: { id: string } }>(
        { query: 'subscription($p: ID!) { commentAdded(postId: $p) { id } }', variables: { p: postId } },
        {
          next: (v) => into.push(v.errors ? `error ${JSON.stringify(v.errors)}` : v.data!.commentAdded.id),
          error: (err) => into.push(`error ${JSON.stringify(err)}`),
          complete: () => into.push('complete'),
        },
      );
    const until = async (what: string, done: () => boolean) => {
      for (let i = 0; i < 250 && !done(); i++) await new Promise((r) => setTimeout(r, 20));
      expect(done(), what).toBe(true);
    };
    const actor = { id: authorId, kind: 'user' as const, role: 'member' as const };
    // A post of its own: the other tests expect theirs without comments.
    const watched = (
      await atrium.services.core.posts.create(actor, { title: 'Watched', body: 'b', authorId })
    ).id;
    const add = (core: Pick<typeof atrium.services.core, 'comments'>, body: string) =>
      core.comments.add(actor, { body, authorId, postId: watched });
    const stops = [watch('pst_\u0000x', received.nul), watch(watched, received.real)];
    try {
      // Both streams listening: a live comment reaches the real post's; a signal naming the NUL id
      // (as a late copy would) reaches the other, which reads the comment it names as any event.
      // Until one arrives, a subscription may not be listening yet.
      let warm = await add(atrium.services.core, 'warm');
      for (let i = 0; i < 50 && !received.real.includes(warm.id); i++) {
        await new Promise((r) => setTimeout(r, 100));
        if (!received.real.includes(warm.id)) warm = await add(atrium.services.core, `warm ${i}`);
      }
      await until('the real subscription listens', () => received.real.includes(warm.id));
      received.real.length = 0;
      const seen = () => received.nul.includes(warm.id);
      for (let i = 0; i < 50 && !seen(); i++) {
        atrium.services.bus.emit({ kind: 'comment.added', commentId: warm.id, postId: 'pst_\u0000x' });
        await new Promise((r) => setTimeout(r, 20));
      }
      await until('the NUL subscription listens', seen);

      // A comment stored by another instance whose signal was lost (its own bus reaches no feed
      // here), then that instance's announcement: every feed catches up from the store.
      const elsewhere = new CommentService({ ...atrium.services.deps, bus: new DomainBus() });
      const missed = await add({ comments: elsewhere }, 'missed');
      await atrium.services.broadcast.publish('comment.added', {
        missedSince: Date.parse(missed.createdAt) - 1_000,
        from: 'another-instance',
      });
      await until('the missed comment caught up', () => received.real.includes(missed.id));
      expect(received.real).toEqual([missed.id]);
      // The NUL subscription stays open, hears nothing of another post, and met no error.
      expect(received.nul.every((id) => id === warm.id)).toBe(true);
    } finally {
      for (const stop of stops) stop();
      await client.dispose();
    }
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
