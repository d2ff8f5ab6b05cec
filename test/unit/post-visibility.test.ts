import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/domain/actor.js';
import { mayViewPost } from '../../src/domain/post-visibility.js';
import type { Viewer } from '../../src/domain/user-policies.js';
import { rejection, startCore, type TestCore } from './support/core.js';

/**
 * Drafts (publishedAt null) and scheduled posts (publishedAt in the future), and their comments, are
 * seen only by their author and admins, in every read the core offers.
 */
describe('post visibility', () => {
  let t: TestCore;
  let author: Actor;
  let other: Actor;
  let admin: Actor;
  const client: Actor = { id: 'cli_machine', kind: 'client', role: null };
  let published: string;
  let draft: string;
  let scheduled: string;
  let publishedComment: string;
  let draftComment: string;
  let scheduledComment: string;

  beforeAll(async () => {
    t = await startCore();
    author = (await t.user('member', 'zeppelin_author')).actor;
    other = (await t.user('member')).actor;
    admin = (await t.user('admin')).actor;
    const write = (title: string, publishAt?: string | null) =>
      t.core.posts.create(author, { title, body: `${title} zeppelin`, authorId: author.id, publishAt });
    published = (await write('Published')).id;
    t.clock.advance(10);
    draft = (await write('Draft', null)).id;
    t.clock.advance(10);
    scheduled = (await write('Scheduled', new Date(t.clock.now().getTime() + 3_600_000).toISOString())).id;
    const comment = (postId: string) =>
      t.core.comments.add(author, { body: 'zeppelin remark', authorId: author.id, postId });
    publishedComment = (await comment(published)).id;
    draftComment = (await comment(draft)).id;
    scheduledComment = (await comment(scheduled)).id;
  });
  afterAll(async () => {
    await t.stop();
  });

  const hidden = () => [draft, scheduled];
  const outsiders = (): [string, Viewer][] => [
    ['anonymous', null],
    ['another member', other],
    ['a client', client],
  ];
  const insiders = (): [string, Viewer][] => [
    ['the author', author],
    ['an admin', admin],
  ];

  it('decides by publishedAt, author and role (the pure rule)', () => {
    const now = new Date('2026-06-01T00:00:00.000Z');
    const post = (publishedAt: string | null, authorDeleted = false) => ({
      authorId: 'usr_a',
      publishedAt,
      authorDeleted,
    });
    const a: Actor = { id: 'usr_a', kind: 'user', role: 'viewer' };
    expect(mayViewPost(null, post('2026-06-01T00:00:00.000Z'), now)).toBe(true);
    expect(mayViewPost(null, post('2026-06-01T00:00:00.001Z'), now)).toBe(false);
    expect(mayViewPost(null, post(null), now)).toBe(false);
    expect(mayViewPost(a, post(null), now)).toBe(true);
    expect(mayViewPost({ id: 'usr_a', kind: 'client', role: null }, post(null), now)).toBe(false);
    expect(mayViewPost({ id: 'usr_b', kind: 'user', role: 'admin' }, post(null), now)).toBe(true);
    // A deleted author's posts are missing for everyone, the author's own id and admins included.
    const admin: Actor = { id: 'usr_b', kind: 'user', role: 'admin' };
    for (const viewer of [null, a, admin]) {
      expect(mayViewPost(viewer, post('2026-05-01T00:00:00.000Z', true), now)).toBe(false);
      expect(mayViewPost(viewer, post(null, true), now)).toBe(false);
    }
  });

  it('single reads: hidden posts and their comments are not_found for outsiders', async () => {
    for (const [who, viewer] of outsiders()) {
      expect((await t.core.posts.get(viewer, published)).id, who).toBe(published);
      for (const id of hidden())
        expect((await rejection(t.core.posts.get(viewer, id))).code, who).toBe('not_found');
      expect((await t.core.comments.get(viewer, publishedComment)).id).toBe(publishedComment);
      for (const id of [draftComment, scheduledComment]) {
        expect((await rejection(t.core.comments.get(viewer, id))).code, who).toBe('not_found');
      }
    }
    for (const [who, viewer] of insiders()) {
      for (const id of hidden()) expect((await t.core.posts.get(viewer, id)).id, who).toBe(id);
      expect((await t.core.comments.get(viewer, draftComment)).id, who).toBe(draftComment);
    }
  });

  it('batched reads leave hidden ids out for outsiders only', async () => {
    const postIds = [published, draft, scheduled];
    const commentIds = [publishedComment, draftComment, scheduledComment];
    for (const [who, viewer] of outsiders()) {
      expect([...(await t.core.posts.getMany(viewer, postIds)).keys()], who).toEqual([published]);
      expect([...(await t.core.comments.getMany(viewer, commentIds)).keys()], who).toEqual([
        publishedComment,
      ]);
    }
    for (const [who, viewer] of insiders()) {
      expect((await t.core.posts.getMany(viewer, postIds)).size, who).toBe(3);
      expect((await t.core.comments.getMany(viewer, commentIds)).size, who).toBe(3);
    }
  });

  it('lists, connections and totalCount count only what the viewer sees, in both directions', async () => {
    for (const [who, viewer] of outsiders()) {
      for (const args of [{}, { last: 5 }]) {
        const page = await t.core.posts.list(viewer, args);
        expect(
          page.edges.map((e) => e.node.id),
          who,
        ).toEqual([published]);
        expect(await page.totalCount(), who).toBe(1);
        expect(page.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: false });
      }
      const byAuthor = await t.core.posts.listByAuthor(viewer, author.id);
      expect(await byAuthor.totalCount(), who).toBe(1);
      const firstPages = await t.core.posts.firstPagesByAuthors(viewer, [author.id], 5);
      expect(
        firstPages.get(author.id)!.edges.map((e) => e.node.id),
        who,
      ).toEqual([published]);
      expect(await firstPages.get(author.id)!.totalCount()).toBe(1);
      expect((await t.core.posts.countByAuthors(viewer, [author.id])).get(author.id)).toBe(1);
    }
    for (const [who, viewer] of insiders()) {
      const page = await t.core.posts.list(viewer, { first: 2 });
      expect(
        page.edges.map((e) => e.node.id),
        who,
      ).toEqual([scheduled, draft]);
      expect(await page.totalCount()).toBe(3);
      expect(page.pageInfo.hasNextPage).toBe(true);
      const rest = await t.core.posts.list(viewer, { first: 2, after: page.pageInfo.endCursor });
      expect(rest.edges.map((e) => e.node.id)).toEqual([published]);
      expect(rest.pageInfo).toMatchObject({ hasPreviousPage: true, hasNextPage: false });
      const back = await t.core.posts.list(viewer, { last: 2, before: rest.pageInfo.endCursor });
      expect(back.edges.map((e) => e.node.id)).toEqual([scheduled, draft]);
      expect(back.pageInfo).toMatchObject({ hasPreviousPage: false, hasNextPage: true });
      expect((await t.core.posts.countByAuthors(viewer, [author.id])).get(author.id)).toBe(3);
    }
  });

  it('comments of hidden posts: empty connections and zero counts for outsiders', async () => {
    for (const [who, viewer] of outsiders()) {
      for (const id of hidden()) {
        const page = await t.core.comments.listByPost(viewer, id);
        expect(page.edges, who).toEqual([]);
        expect(await page.totalCount(), who).toBe(0);
      }
      const pages = await t.core.comments.firstPagesByPosts(viewer, [published, draft, scheduled], 5);
      expect(await pages.get(published)!.totalCount()).toBe(1);
      expect(pages.get(draft)!.edges).toEqual([]);
      expect(await pages.get(scheduled)!.totalCount()).toBe(0);
      const counts = await t.core.comments.countByPosts(viewer, [published, draft, scheduled]);
      expect(Object.fromEntries(counts)).toEqual({ [published]: 1, [draft]: 0, [scheduled]: 0 });
      expect(await t.core.comments.mayViewPostOf(viewer, draft)).toBe(false);
      expect(await t.core.comments.mayViewPostOf(viewer, published)).toBe(true);
    }
    for (const [who, viewer] of insiders()) {
      expect(await (await t.core.comments.listByPost(viewer, draft)).totalCount(), who).toBe(1);
      expect((await t.core.comments.countByPosts(viewer, [scheduled])).get(scheduled)).toBe(1);
      expect(await t.core.comments.mayViewPostOf(viewer, scheduled)).toBe(true);
    }
  });

  it('nobody comments on, changes or deletes a post they cannot see: not_found, as if missing', async () => {
    for (const id of hidden()) {
      const add = await rejection(
        t.core.comments.add(other, { body: 'sneaky', authorId: other.id, postId: id }),
      );
      expect(add.code).toBe('not_found');
      const unknownId = 'pst_00000000000000000000000000';
      const missing = await rejection(
        t.core.comments.add(other, { body: 'sneaky', authorId: other.id, postId: unknownId }),
      );
      expect(add.message.replace(id, 'X')).toBe(missing.message.replace(unknownId, 'X'));
      expect((await rejection(t.core.posts.update(other, id, { title: 'mine' }))).code).toBe('not_found');
      expect((await rejection(t.core.posts.delete(other, id))).code).toBe('not_found');
    }
    expect((await rejection(t.core.posts.update(other, published, { title: 'mine' }))).code).toBe(
      'forbidden',
    );
    const byAdmin = await t.core.comments.add(admin, {
      body: 'moderator',
      authorId: admin.id,
      postId: draft,
    });
    expect(byAdmin.postId).toBe(draft);
  });

  it('search shows hidden posts and their comments only to the author and admins', async () => {
    for (const [who, viewer] of outsiders()) {
      const ids = (await t.core.search.search(viewer, 'zeppelin', 100)).map((h) => h.id);
      expect(ids, who).toContain(published);
      expect(ids, who).toContain(publishedComment);
      for (const id of [draft, scheduled, draftComment, scheduledComment]) expect(ids, who).not.toContain(id);
    }
    for (const [who, viewer] of insiders()) {
      const ids = (await t.core.search.search(viewer, 'zeppelin', 100)).map((h) => h.id);
      for (const id of [draft, scheduled, draftComment, scheduledComment]) expect(ids, who).toContain(id);
    }
  });

  it('tag counts and popular tags count only posts the viewer sees', async () => {
    const open = await t.core.posts.create(author, {
      title: 't',
      body: 't',
      authorId: author.id,
      tags: ['airship'],
    });
    const secret = await t.core.posts.create(author, {
      title: 't',
      body: 't',
      authorId: author.id,
      tags: ['airship', 'secret'],
      publishAt: null,
    });
    const count = async (viewer: Viewer, name: string) =>
      (await t.core.tags.getMany(viewer, [name])).get(name)?.postCount;
    expect(await count(other, 'airship')).toBe(1);
    // A tag on hidden posts alone is an unknown name for that viewer, not one with a count of 0.
    expect(await count(other, 'secret')).toBeUndefined();
    expect(await count(author, 'airship')).toBe(2);
    expect(await count(admin, 'secret')).toBe(1);
    expect((await t.core.tags.popular(null)).map((tag) => tag.name)).not.toContain('secret');
    expect((await t.core.tags.popular(admin)).find((tag) => tag.name === 'airship')?.postCount).toBe(2);
    await t.core.posts.delete(author, open.id);
    await t.core.posts.delete(author, secret.id);
  });

  it('a scheduled post appears for everyone once its time comes', async () => {
    expect((await rejection(t.core.posts.get(other, scheduled))).code).toBe('not_found');
    t.clock.advance(3_600_000);
    expect((await t.core.posts.get(other, scheduled)).id).toBe(scheduled);
    expect(await (await t.core.posts.list(null)).totalCount()).toBe(2);
    expect(await (await t.core.comments.listByPost(null, scheduled)).totalCount()).toBe(1);
  });
});
