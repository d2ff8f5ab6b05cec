import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/domain/actor.js';
import type { Comment } from '../../src/domain/comments.js';
import { rejection, startCore, type TestCore } from './support/core.js';

describe('CommentService', () => {
  let t: TestCore;
  let member: Actor;
  let other: Actor;
  let admin: Actor;
  let postId: string;
  let quietPostId: string;
  /** 15 comments on `postId`, oldest first. */
  const made: Comment[] = [];

  beforeAll(async () => {
    t = await startCore();
    member = (await t.user('member')).actor;
    other = (await t.user('member')).actor;
    admin = (await t.user('admin')).actor;
    postId = (await t.core.posts.create(member, { title: 'p', body: 'p', authorId: member.id })).id;
    quietPostId = (await t.core.posts.create(member, { title: 'q', body: 'q', authorId: member.id })).id;
    for (let i = 0; i < 15; i++) {
      t.clock.advance(10);
      made.push(
        await t.core.comments.add(i % 2 ? other : member, {
          body: `comment ${i}`,
          authorId: i % 2 ? other.id : member.id,
          postId,
        }),
      );
    }
  });
  afterAll(async () => {
    await t.stop();
  });

  const bodies = (c: { edges: { node: Comment }[] }) => c.edges.map((e) => e.node.body);
  const all = () => made.map((c) => c.body);

  describe('add', () => {
    it('stores the comment and signals comment.added only after commit, with no outbox event', async () => {
      const signalsBefore = t.signals.length;
      const eventsBefore = await t.store.db.selectFrom('events').select('id').execute();
      const comment = await t.core.comments.add(other, {
        body: 'hello',
        authorId: other.id,
        postId: quietPostId,
      });
      expect(comment).toMatchObject({ postId: quietPostId, authorId: other.id, body: 'hello' });
      expect(comment.id).toMatch(/^cmt_/);
      expect(t.signals.slice(signalsBefore)).toEqual([
        { kind: 'comment.added', commentId: comment.id, postId: quietPostId },
      ]);
      expect(await t.store.db.selectFrom('events').select('id').execute()).toEqual(eventsBefore);
      expect((await t.core.comments.get(null, comment.id)).body).toBe('hello');
    });

    it('refuses a comment on a missing post with not_found and sends no signal', async () => {
      const signalsBefore = t.signals.length;
      const err = await rejection(
        t.core.comments.add(member, { body: 'x', authorId: member.id, postId: 'pst_none' }),
      );
      expect(err.code).toBe('not_found');
      expect(t.signals.length).toBe(signalsBefore);
    });

    it('validates body length (1 to 10,000) and ids, every problem at once', async () => {
      const err = await rejection(
        t.core.comments.add(member, { body: 'x'.repeat(10_001), authorId: '', postId: '' }),
      );
      expect(err.code).toBe('validation_error');
      expect(err.details.map((d) => d.field)).toEqual(['body', 'authorId', 'postId']);
      expect(err.details[0]!.code).toBe('range_error');
      expect(
        (await rejection(t.core.comments.add(member, { body: ' ', authorId: member.id, postId }))).code,
      ).toBe('validation_error');
      const longest = await t.core.comments.add(member, {
        body: 'y'.repeat(10_000),
        authorId: member.id,
        postId: quietPostId,
      });
      expect(longest.body).toHaveLength(10_000);
    });

    it('forbids commenting as someone else unless admin; viewers may not comment', async () => {
      expect(
        (await rejection(t.core.comments.add(member, { body: 'x', authorId: other.id, postId: quietPostId })))
          .code,
      ).toBe('forbidden');
      const viewer = (await t.user('viewer')).actor;
      expect(
        (
          await rejection(
            t.core.comments.add(viewer, { body: 'x', authorId: viewer.id, postId: quietPostId }),
          )
        ).code,
      ).toBe('forbidden');
      const asOther = await t.core.comments.add(admin, {
        body: 'on behalf',
        authorId: other.id,
        postId: quietPostId,
      });
      expect(asOther.authorId).toBe(other.id);
      const unknown = await rejection(
        t.core.comments.add(admin, { body: 'x', authorId: 'usr_ghost', postId: quietPostId }),
      );
      expect(unknown.details[0]).toMatchObject({ field: 'authorId', code: 'unknown_author' });
    });
  });

  describe('Post.comments connection (oldest first)', () => {
    it('gives 10 by default, oldest first, with totalCount and flags', async () => {
      const page = await t.core.comments.listByPost(null, postId);
      expect(bodies(page)).toEqual(all().slice(0, 10));
      expect(await page.totalCount()).toBe(15);
      expect(page.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    });

    it('pages forward and backward over the whole list', async () => {
      const one = await t.core.comments.listByPost(null, postId, { first: 6 });
      const two = await t.core.comments.listByPost(null, postId, { first: 6, after: one.pageInfo.endCursor });
      const three = await t.core.comments.listByPost(null, postId, {
        first: 6,
        after: two.pageInfo.endCursor,
      });
      expect([...bodies(one), ...bodies(two), ...bodies(three)]).toEqual(all());
      expect(three.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });

      const last = await t.core.comments.listByPost(null, postId, { last: 4 });
      expect(bodies(last)).toEqual(all().slice(11));
      expect(last.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
      const before = await t.core.comments.listByPost(null, postId, {
        last: 20,
        before: last.pageInfo.startCursor,
      });
      expect(bodies(before)).toEqual(all().slice(0, 11));
      expect(before.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    });

    it('refuses sizes over 100 and cursors of another post', async () => {
      expect(
        (await rejection(t.core.comments.listByPost(null, postId, { first: 101 }))).details[0]!.code,
      ).toBe('range_error');
      const page = await t.core.comments.listByPost(null, postId, { first: 1 });
      const err = await rejection(
        t.core.comments.listByPost(null, quietPostId, { after: page.pageInfo.endCursor }),
      );
      expect(err.details[0]!.code).toBe('invalid_cursor');
    });

    it('answers an unknown post with an empty connection', async () => {
      const page = await t.core.comments.listByPost(null, 'pst_unknown');
      expect(page).toMatchObject({
        edges: [],
        pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: null, endCursor: null },
      });
      expect(await page.totalCount()).toBe(0);
    });
  });

  describe('batches', () => {
    it('counts comments of many posts, zero for posts without any', async () => {
      const counts = await t.core.comments.countByPosts(null, [postId, 'pst_unknown']);
      expect(counts.get(postId)).toBe(15);
      expect(counts.get('pst_unknown')).toBe(0);
    });

    it('reads many by id', async () => {
      const many = await t.core.comments.getMany(null, [made[0]!.id, made[1]!.id, 'cmt_none']);
      expect(many.size).toBe(2);
      expect(many.get(made[1]!.id)?.authorId).toBe(other.id);
    });

    it('gives first pages for many posts whose cursors continue with listByPost', async () => {
      const pages = await t.core.comments.firstPagesByPosts(null, [postId, 'pst_unknown'], 4);
      const page = pages.get(postId)!;
      expect(bodies(page)).toEqual(all().slice(0, 4));
      expect(await page.totalCount()).toBe(15);
      expect(page.pageInfo.hasNextPage).toBe(true);
      expect(pages.get('pst_unknown')!.edges).toEqual([]);
      const next = await t.core.comments.listByPost(null, postId, {
        first: 4,
        after: page.pageInfo.endCursor,
      });
      expect(bodies(next)).toEqual(all().slice(4, 8));
      const byDefault = await t.core.comments.firstPagesByPosts(null, [postId]);
      expect(byDefault.get(postId)!.edges).toHaveLength(10);
    });
  });

  describe('addedSince (what a comment feed that missed signals reads)', () => {
    it('lists the comments of the given posts from a moment on, oldest first; past the limit, the newest', async () => {
      const a = (await t.core.posts.create(member, { title: 'a', body: 'a', authorId: member.id })).id;
      const b = (await t.core.posts.create(member, { title: 'b', body: 'b', authorId: member.id })).id;
      const added: Comment[] = [];
      for (let i = 0; i < 6; i++) {
        t.clock.advance(1_000);
        added.push(
          await t.core.comments.add(member, { body: `c${i}`, authorId: member.id, postId: i % 2 ? b : a }),
        );
      }
      const from = Date.parse(added[2]!.createdAt);
      const ids = (refs: { commentId: string }[]) => refs.map((r) => r.commentId);
      expect(await t.core.comments.addedSince([a, b, 'pst_none'], from, 100)).toEqual(
        added.slice(2).map((c) => ({ commentId: c.id, postId: c.postId, createdAt: c.createdAt })),
      );
      expect(ids(await t.core.comments.addedSince([a], from, 100))).toEqual([added[2]!.id, added[4]!.id]);
      expect(ids(await t.core.comments.addedSince([a, b], from, 2))).toEqual([added[4]!.id, added[5]!.id]);
      expect(ids(await t.core.comments.addedSince([a, b], from + 1, 100))).toEqual(
        added.slice(3).map((c) => c.id),
      );
      expect(await t.core.comments.addedSince([], from, 100)).toEqual([]);
      // Strings that cannot be post ids name nothing and are not read: NUL, which PostgreSQL's
      // guard refuses, fails neither the read nor the other posts'.
      expect(ids(await t.core.comments.addedSince(['pst_\u0000x', '\u0000', a], from, 100))).toEqual([
        added[2]!.id,
        added[4]!.id,
      ]);
    });
  });
});
