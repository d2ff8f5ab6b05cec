import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/domain/actor.js';
import type { Post } from '../../src/domain/posts.js';
import { rejection, startCore, type TestCore } from './support/core.js';

describe('PostService', () => {
  let t: TestCore;
  let author: Actor;
  let other: Actor;
  let admin: Actor;
  let viewer: Actor;
  /** 25 posts by `author`, oldest first. */
  const made: Post[] = [];

  beforeAll(async () => {
    t = await startCore();
    author = (await t.user('member')).actor;
    other = (await t.user('member')).actor;
    admin = (await t.user('admin')).actor;
    viewer = (await t.user('viewer')).actor;
    for (let i = 0; i < 25; i++) {
      t.clock.advance(1000);
      made.push(
        await t.core.posts.create(author, {
          title: `Post ${i}`,
          body: `Body of post ${i}`,
          authorId: author.id,
        }),
      );
    }
  });
  afterAll(async () => {
    await t.stop();
  });

  const titles = (c: { edges: { node: Post }[] }) => c.edges.map((e) => e.node.title);

  describe('create', () => {
    it('stores the post with normalised tags and signals post.changed after commit', async () => {
      const before = t.signals.length;
      const post = await t.core.posts.create(author, {
        title: '  Hello world  ',
        body: 'First words',
        authorId: author.id,
        tags: ['TypeScript', ' node  js ', 'typescript'],
      });
      expect(post.id).toMatch(/^pst_/);
      expect(post.title).toBe('Hello world');
      expect(post.tags).toEqual(['node js', 'typescript']);
      expect(post.publishedAt).toBe(post.createdAt);
      expect(t.signals.slice(before)).toEqual([{ kind: 'post.changed', postId: post.id }]);
      const tags = await t.core.posts.tagsFor([post.id, made[0]!.id]);
      expect(tags.get(post.id)).toEqual(['node js', 'typescript']);
      expect(tags.get(made[0]!.id)).toEqual([]);
      await t.core.posts.delete(author, post.id);
    });

    it('reports every invalid field at once with field details', async () => {
      const err = await rejection(
        t.core.posts.create(author, {
          title: '',
          body: 'x'.repeat(50_001),
          authorId: author.id,
          publishAt: 'tomorrow',
          tags: Array.from({ length: 21 }, (_, i) => `tag${i}`),
        }),
      );
      expect(err.code).toBe('validation_error');
      const fields = err.details.map((d) => d.field).sort();
      expect(fields).toEqual(['body', 'publishAt', 'tags', 'title']);
      expect(err.details.find((d) => d.field === 'body')?.code).toBe('range_error');
    });

    it('refuses a date that does not exist (Feb 30) instead of rolling it into March', async () => {
      for (const publishAt of ['2026-02-30T00:00:00Z', '2026-04-31T12:00:00Z', '2026-02-29T00:00:00Z']) {
        const err = await rejection(
          t.core.posts.create(author, { title: 't', body: 'b', authorId: author.id, publishAt }),
        );
        expect(err.details, publishAt).toEqual([
          { field: 'publishAt', message: 'publishAt is not a real date', code: 'invalid_datetime' },
        ]);
      }
    });

    it('accepts the limits exactly: title of 200, body of 50,000, 20 tags of 50 characters', async () => {
      const post = await t.core.posts.create(author, {
        title: 't'.repeat(200),
        body: 'b'.repeat(50_000),
        authorId: author.id,
        tags: Array.from({ length: 20 }, (_, i) => `${i}`.padEnd(50, 'x')),
      });
      expect(post.tags).toHaveLength(20);
      await t.core.posts.delete(author, post.id);
    });

    it('refuses a blank title, a tag over 50 characters and an empty tag', async () => {
      const err = await rejection(
        t.core.posts.create(author, {
          title: '   ',
          body: 'ok',
          authorId: author.id,
          tags: ['x'.repeat(51), '  '],
        }),
      );
      expect(err.details.map((d) => d.field)).toEqual(['title', 'tags', 'tags']);
    });

    it('keeps a draft (publishAt null) and a scheduled date as given', async () => {
      const draft = await t.core.posts.create(author, {
        title: 'd',
        body: 'd',
        authorId: author.id,
        publishAt: null,
      });
      expect(draft.publishedAt).toBeNull();
      const later = await t.core.posts.create(author, {
        title: 's',
        body: 's',
        authorId: author.id,
        publishAt: '2030-05-01T10:00:00+02:00',
      });
      expect(later.publishedAt).toBe('2030-05-01T08:00:00.000Z');
      await t.core.posts.delete(author, draft.id);
      await t.core.posts.delete(author, later.id);
    });

    it('forbids posting as someone else unless admin, and forbids viewers', async () => {
      expect(
        (await rejection(t.core.posts.create(other, { title: 'x', body: 'x', authorId: author.id }))).code,
      ).toBe('forbidden');
      expect(
        (await rejection(t.core.posts.create(viewer, { title: 'x', body: 'x', authorId: viewer.id }))).code,
      ).toBe('forbidden');
      const byAdmin = await t.core.posts.create(admin, { title: 'for you', body: 'x', authorId: other.id });
      expect(byAdmin.authorId).toBe(other.id);
      await t.core.posts.delete(admin, byAdmin.id);
    });

    it('reports an unknown author as a field problem and writes nothing', async () => {
      const before = await (await t.core.posts.list(null)).totalCount();
      const err = await rejection(
        t.core.posts.create(admin, { title: 'x', body: 'x', authorId: 'usr_nobody', tags: ['orphan'] }),
      );
      expect(err.code).toBe('validation_error');
      expect(err.details[0]).toMatchObject({ field: 'authorId', code: 'unknown_author' });
      expect(await (await t.core.posts.list(null)).totalCount()).toBe(before);
      expect((await t.core.tags.getMany(null, ['orphan'])).size).toBe(0);
    });
  });

  describe('update and delete', () => {
    it('lets the author change fields and replace tags', async () => {
      const post = await t.core.posts.create(author, {
        title: 'a',
        body: 'b',
        authorId: author.id,
        tags: ['one'],
      });
      t.clock.advance(5);
      const updated = await t.core.posts.update(author, post.id, { title: 'A2', tags: ['Two', 'three'] });
      expect(updated).toMatchObject({ title: 'A2', body: 'b', tags: ['three', 'two'] });
      expect(updated.updatedAt > post.updatedAt).toBe(true);
      const kept = await t.core.posts.update(author, post.id, { body: 'new body' });
      expect(kept.tags).toEqual(['three', 'two']);
      expect((await t.core.posts.get(null, post.id)).body).toBe('new body');
      await t.core.posts.delete(author, post.id);
    });

    it('forbids another member, allows an admin, and 404s a missing post', async () => {
      const post = await t.core.posts.create(author, { title: 'a', body: 'b', authorId: author.id });
      expect((await rejection(t.core.posts.update(other, post.id, { title: 'mine' }))).code).toBe(
        'forbidden',
      );
      expect((await rejection(t.core.posts.delete(other, post.id))).code).toBe('forbidden');
      expect((await t.core.posts.update(admin, post.id, { title: 'moderated' })).title).toBe('moderated');
      expect((await rejection(t.core.posts.update(author, 'pst_missing', { title: 'x' }))).code).toBe(
        'not_found',
      );
      expect((await rejection(t.core.posts.update(author, post.id, { title: '' }))).code).toBe(
        'validation_error',
      );
      expect(await t.core.posts.delete(admin, post.id)).toEqual({ deletedPostId: post.id });
      expect((await rejection(t.core.posts.get(null, post.id))).code).toBe('not_found');
      expect((await rejection(t.core.posts.delete(admin, post.id))).code).toBe('not_found');
    });

    it('deletes the comments and tag links with the post', async () => {
      const post = await t.core.posts.create(author, {
        title: 'a',
        body: 'b',
        authorId: author.id,
        tags: ['gone'],
      });
      const comment = await t.core.comments.add(other, { body: 'hi', authorId: other.id, postId: post.id });
      await t.core.posts.delete(author, post.id);
      expect((await t.core.comments.getMany(null, [comment.id])).size).toBe(0);
      // A tag no visible post carries is not found (D20): gone with its only post.
      expect((await t.core.tags.getMany(null, ['gone'])).get('gone')).toBeUndefined();
    });
  });

  describe('reading', () => {
    it('gets one and many; missing ids are absent', async () => {
      expect((await t.core.posts.get(null, made[3]!.id)).title).toBe('Post 3');
      const many = await t.core.posts.getMany(null, [made[0]!.id, made[1]!.id, 'pst_missing', made[0]!.id]);
      expect([...many.keys()].sort()).toEqual([made[0]!.id, made[1]!.id].sort());
    });

    it('counts tags per name and lists popular tags', async () => {
      const a = await t.core.posts.create(author, {
        title: 'a',
        body: 'a',
        authorId: author.id,
        tags: ['hot', 'cold'],
      });
      const b = await t.core.posts.create(other, {
        title: 'b',
        body: 'b',
        authorId: other.id,
        tags: ['Hot'],
      });
      const stats = await t.core.tags.getMany(null, ['hot', 'COLD', 'none']);
      expect(stats.get('hot')).toEqual({ name: 'hot', postCount: 2 });
      expect(stats.get('cold')).toEqual({ name: 'cold', postCount: 1 });
      expect(stats.has('none')).toBe(false);
      const popular = await t.core.tags.popular(null, 2);
      expect(popular[0]).toEqual({ name: 'hot', postCount: 2 });
      await t.core.posts.delete(author, a.id);
      await t.core.posts.delete(other, b.id);
    });
  });

  it('spells a tag one way: composed and decomposed accents, case and inner spaces are one tag', async () => {
    const post = await t.core.posts.create(author, {
      title: 't',
      body: 't',
      authorId: author.id,
      tags: ['Café', 'cafe\u0301', 'Machine  Learning'],
    });
    expect(post.tags).toEqual(['café', 'machine learning']);
    const stats = await t.core.tags.getMany(null, ['CAFE\u0301', ' machine   learning ']);
    expect(stats.get('café')).toEqual({ name: 'café', postCount: 1 });
    expect(stats.get('machine learning')).toEqual({ name: 'machine learning', postCount: 1 });
    await t.core.posts.delete(author, post.id);
  });

  describe('Query.posts connection', () => {
    const newestFirst = () => [...made].reverse().map((p) => p.title);

    it('gives 20 newest first by default with totalCount and page flags', async () => {
      const page = await t.core.posts.list(null);
      expect(titles(page)).toEqual(newestFirst().slice(0, 20));
      expect(await page.totalCount()).toBe(25);
      expect(page.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
      expect(page.pageInfo.startCursor).toBe(page.edges[0]!.cursor);
      expect(page.pageInfo.endCursor).toBe(page.edges[19]!.cursor);
    });

    it('pages forward with first/after to the end', async () => {
      const one = await t.core.posts.list(null, { first: 10 });
      const two = await t.core.posts.list(null, { first: 10, after: one.pageInfo.endCursor });
      const three = await t.core.posts.list(null, { first: 10, after: two.pageInfo.endCursor });
      expect([...titles(one), ...titles(two), ...titles(three)]).toEqual(newestFirst());
      expect(two.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: true });
      expect(three.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
      expect(three.edges).toHaveLength(5);
    });

    it('says hasNextPage false when the page ends exactly at the last item', async () => {
      const page = await t.core.posts.list(null, { first: 25 });
      expect(page.edges).toHaveLength(25);
      expect(page.pageInfo.hasNextPage).toBe(false);
    });

    it('pages backward with last/before, keeping list order inside a page', async () => {
      const tail = await t.core.posts.list(null, { last: 10 });
      expect(titles(tail)).toEqual(newestFirst().slice(15));
      expect(tail.pageInfo).toMatchObject({ hasPreviousPage: true, hasNextPage: false });
      const prev = await t.core.posts.list(null, { last: 10, before: tail.pageInfo.startCursor });
      expect(titles(prev)).toEqual(newestFirst().slice(5, 15));
      expect(prev.pageInfo).toMatchObject({ hasPreviousPage: true, hasNextPage: true });
      const head = await t.core.posts.list(null, { last: 10, before: prev.pageInfo.startCursor });
      expect(titles(head)).toEqual(newestFirst().slice(0, 5));
      expect(head.pageInfo).toMatchObject({ hasPreviousPage: false, hasNextPage: true });
    });

    it('pages backward by the default size when only before is given', async () => {
      const all = await t.core.posts.list(null, { first: 25 });
      const page = await t.core.posts.list(null, { before: all.edges[24]!.cursor });
      expect(titles(page)).toEqual(newestFirst().slice(4, 24));
    });

    it('answers first: 0 with no edges but the right flags', async () => {
      const page = await t.core.posts.list(null, { first: 0 });
      expect(page.edges).toEqual([]);
      expect(page.pageInfo).toEqual({
        hasNextPage: true,
        hasPreviousPage: false,
        startCursor: null,
        endCursor: null,
      });
      expect(await page.totalCount()).toBe(25);
    });

    it('accepts 100 and refuses more than 100, negatives, fractions and first with last', async () => {
      expect((await t.core.posts.list(null, { first: 100 })).edges).toHaveLength(25);
      for (const args of [{ first: 101 }, { last: 101 }, { first: -1 }, { first: 1.5 }]) {
        const err = await rejection(t.core.posts.list(null, args));
        expect(err.code).toBe('validation_error');
        expect(err.details[0]!.code).toBe('range_error');
      }
      const both = await rejection(t.core.posts.list(null, { first: 1, last: 1 }));
      expect(both.details[0]!.code).toBe('invalid_combination');
    });

    it('refuses garbled, tampered and foreign cursors as invalid_cursor', async () => {
      const page = await t.core.posts.list(null, { first: 1 });
      const cursor = page.pageInfo.endCursor!;
      const tampered = cursor.slice(0, -2) + (cursor.endsWith('AA') ? 'BB' : 'AA');
      const byAuthor = await t.core.posts.listByAuthor(null, author.id, { first: 1 });
      for (const bad of ['%%%', 'abc', tampered, byAuthor.pageInfo.endCursor!]) {
        const err = await rejection(t.core.posts.list(null, { after: bad }));
        expect(err.details[0]).toMatchObject({ field: 'after', code: 'invalid_cursor' });
      }
      const err = await rejection(t.core.posts.list(null, { last: 1, before: 'garbage' }));
      expect(err.details[0]).toMatchObject({ field: 'before', code: 'invalid_cursor' });
    });

    it('does not skip or repeat when a post is added between pages', async () => {
      const one = await t.core.posts.list(null, { first: 5 });
      const extra = await t.core.posts.create(author, { title: 'late', body: 'late', authorId: author.id });
      const two = await t.core.posts.list(null, { first: 5, after: one.pageInfo.endCursor });
      expect(titles(two)).toEqual(newestFirst().slice(5, 10));
      await t.core.posts.delete(author, extra.id);
    });
  });

  describe('User.posts', () => {
    it('lists one author only, with its own totalCount and cursors', async () => {
      const mine = await t.core.posts.create(other, { title: 'other 1', body: 'x', authorId: other.id });
      const first = await t.core.posts.listByAuthor(null, author.id, { first: 3 });
      expect(await first.totalCount()).toBe(25);
      expect(titles(first)).toEqual(['Post 24', 'Post 23', 'Post 22']);
      const next = await t.core.posts.listByAuthor(null, author.id, {
        first: 3,
        after: first.pageInfo.endCursor,
      });
      expect(titles(next)).toEqual(['Post 21', 'Post 20', 'Post 19']);
      const others = await t.core.posts.listByAuthor(null, other.id);
      expect(titles(others)).toEqual(['other 1']);
      expect(others.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: false });
      await t.core.posts.delete(other, mine.id);
    });

    it('batches first pages for many authors, and their cursors continue with listByAuthor', async () => {
      const pages = await t.core.posts.firstPagesByAuthors(null, [author.id, other.id, admin.id], 2);
      const a = pages.get(author.id)!;
      expect(titles(a)).toEqual(['Post 24', 'Post 23']);
      expect(await a.totalCount()).toBe(25);
      expect(a.pageInfo.hasNextPage).toBe(true);
      expect(pages.get(other.id)).toMatchObject({ edges: [] });
      expect(await pages.get(other.id)!.totalCount()).toBe(0);
      const next = await t.core.posts.listByAuthor(null, author.id, {
        first: 2,
        after: a.pageInfo.endCursor,
      });
      expect(titles(next)).toEqual(['Post 22', 'Post 21']);
      await expect(t.core.posts.firstPagesByAuthors(null, [author.id], 101)).rejects.toMatchObject({
        code: 'validation_error',
      });
      const counts = await t.core.posts.countByAuthors(null, [author.id, other.id]);
      expect(Object.fromEntries(counts)).toEqual({ [author.id]: 25, [other.id]: 0 });
    });
  });
});
