import { beforeAll, describe, expect, it } from 'vitest';
import type { DomainSignal } from '../../../src/events/bus.js';
import { codes, type GraphQLServer, graphQLServerForSuite } from './support.js';

type Caller = Awaited<ReturnType<GraphQLServer['atrium']['caller']>>;

const CREATE = `mutation($in: CreatePostInput!) { createPost(input: $in) {
  post { id title body tags publishedAt author { handle } } errors { field message } } }`;
const UPDATE = `mutation($id: ID!, $in: UpdatePostInput!) { updatePost(id: $id, input: $in) {
  post { id title tags publishedAt } errors { field message } } }`;
const DELETE = `mutation($id: ID!) { deletePost(id: $id) { deletedPostId errors { field message } } }`;
const COMMENT = `mutation($in: AddCommentInput!) { addComment(input: $in) {
  comment { id body author { handle } post { id } } errors { field message } } }`;

describe('GraphQL mutations: payload errors for validation, GraphQL errors for access', () => {
  const s = graphQLServerForSuite();
  let admin: Caller;
  let alice: Caller;
  let bob: Caller;
  let viewer: Caller;
  beforeAll(async () => {
    admin = await s.atrium.caller({ role: 'admin', handle: 'mutadmin' });
    alice = await s.atrium.caller({ handle: 'mutalice' });
    bob = await s.atrium.caller({ handle: 'mutbob' });
    viewer = await s.atrium.caller({ role: 'viewer', handle: 'mutviewer' });
  });

  const create = (input: Record<string, unknown>, who: Caller | null = alice) =>
    s.gql(CREATE, { in: input }, who?.headers ?? {});

  it('createPost creates as the caller, with tags and a DateTime in UTC with milliseconds', async () => {
    const res = await create({
      title: ' Hello ',
      body: 'World',
      authorId: alice.userId,
      tags: ['GraphQL', 'graphql', 'news'],
      publishAt: '2026-01-02T03:04:05+02:00',
    });
    expect(res.errors).toBeUndefined();
    expect(res.data!.createPost).toMatchObject({
      post: {
        title: 'Hello',
        body: 'World',
        tags: ['graphql', 'news'],
        publishedAt: '2026-01-02T01:04:05.000Z',
        author: { handle: 'mutalice' },
      },
      errors: [],
    });
  });

  it('validation problems come back in errors with input field names, never as GraphQL errors', async () => {
    const res = await create({ title: '   ', body: '', authorId: alice.userId, tags: ['x'.repeat(51)] });
    expect(res.errors).toBeUndefined();
    const payload = res.data!.createPost as { post: null; errors: Array<{ field: string }> };
    expect(payload.post).toBeNull();
    expect(payload.errors.map((e) => e.field).sort()).toEqual(['body', 'tags', 'title']);
    const unknownAuthor = await create({ title: 'T', body: 'B', authorId: 'usr_ghost' }, admin);
    expect(unknownAuthor.data!.createPost).toEqual({
      post: null,
      errors: [{ field: 'authorId', message: expect.any(String) }],
    });
  });

  it('a malformed DateTime or a wrong variable type is refused before anything runs', async () => {
    for (const publishAt of ['yesterday', '2026-01-02T03:04:05', '2026-13-45T00:00:00Z']) {
      const res = await create({ title: 'T', body: 'B', authorId: alice.userId, publishAt });
      expect(res.data, publishAt).toBeUndefined();
      expect(res.errors![0]!.message, publishAt).toMatch(/DateTime|\$in/);
    }
    const wrongType = await create({ title: 5, body: 'B', authorId: alice.userId });
    expect(wrongType.data).toBeUndefined();
    expect(wrongType.errors).toHaveLength(1);
    const missing = await create({ body: 'B', authorId: alice.userId });
    expect(missing.data).toBeUndefined();
  });

  it('an impossible date (Feb 30, Apr 31, Feb 29 of 2026, 24:00) is refused, in variables and in the text', async () => {
    for (const publishAt of [
      '2026-02-30T00:00:00Z',
      '2026-04-31T00:00:00Z',
      '2026-02-29T00:00:00Z',
      '2026-01-01T24:00:00Z',
    ]) {
      const res = await create({ title: 'T', body: 'B', authorId: alice.userId, publishAt });
      expect(res.data, publishAt).toBeUndefined();
      expect(res.errors![0]!.message, publishAt).toContain(`DateTime ${publishAt} is not a real date.`);
      expect(codes(res), publishAt).toEqual(['BAD_USER_INPUT']);
      const inline = await s.gql(
        `mutation { createPost(input: { title: "T", body: "B", authorId: "${alice.userId}", publishAt: "${publishAt}" }) { post { id } } }`,
        {},
        alice.headers,
      );
      expect(inline.data, publishAt).toBeUndefined();
      expect(inline.errors![0]!.message, publishAt).toContain('is not a real date');
    }
  });

  it('a DateTime literal in the query text is refused naming it, with its location and BAD_USER_INPUT', async () => {
    const res = await s.gql(
      `mutation {\n  createPost(input: { title: "T", body: "B", authorId: "${alice.userId}", publishAt: "yesterday" }) { post { id } }\n}`,
      {},
      alice.headers,
    );
    expect(res.data).toBeUndefined();
    expect(codes(res)).toEqual(['BAD_USER_INPUT']);
    const error = res.errors![0]! as { message: string; locations?: Array<{ line: number; column: number }> };
    expect(error.message).toMatch(/^Expected value of type "DateTime", found "yesterday"; DateTime must be/);
    expect(error.locations).toEqual([{ line: 2, column: expect.any(Number) }]);
  });

  it('createPost: no credentials is UNAUTHENTICATED; as someone else or as a viewer is FORBIDDEN', async () => {
    const anon = await create({ title: 'T', body: 'B', authorId: alice.userId }, null);
    expect(anon.data).toBeNull();
    expect(codes(anon)).toEqual(['UNAUTHENTICATED']);
    const other = await create({ title: 'T', body: 'B', authorId: alice.userId }, bob);
    expect(codes(other)).toEqual(['FORBIDDEN']);
    const byViewer = await create({ title: 'T', body: 'B', authorId: viewer.userId }, viewer);
    expect(codes(byViewer)).toEqual(['FORBIDDEN']);
    const asAdmin = await create({ title: 'By admin', body: 'B', authorId: bob.userId }, admin);
    expect(asAdmin.data!.createPost).toMatchObject({ post: { author: { handle: 'mutbob' } }, errors: [] });
  });

  it('updatePost changes what is sent; others are FORBIDDEN, unknown ids NOT_FOUND, bad fields in errors', async () => {
    const id = (
      (await create({ title: 'Old', body: 'B', authorId: alice.userId, tags: ['a'] })).data!.createPost as {
        post: { id: string };
      }
    ).post.id;
    const ok = await s.gql(UPDATE, { id, in: { title: 'New', tags: ['b', 'c'] } }, alice.headers);
    expect(ok.data!.updatePost).toMatchObject({ post: { id, title: 'New', tags: ['b', 'c'] }, errors: [] });
    const bad = await s.gql(UPDATE, { id, in: { title: '' } }, alice.headers);
    expect(bad.data!.updatePost).toEqual({
      post: null,
      errors: [{ field: 'title', message: expect.any(String) }],
    });
    const other = await s.gql(UPDATE, { id, in: { title: 'Mine' } }, bob.headers);
    expect(other.data).toBeNull();
    expect(codes(other)).toEqual(['FORBIDDEN']);
    const draft = await s.gql(UPDATE, { id, in: { publishAt: null } }, alice.headers);
    expect(draft.data!.updatePost).toMatchObject({ post: { publishedAt: null }, errors: [] });
    const unknown = await s.gql(UPDATE, { id: 'pst_unknown', in: { title: 'X' } }, alice.headers);
    expect(codes(unknown)).toEqual(['NOT_FOUND']);
    expect(unknown.errors![0]!.path).toEqual(['updatePost']);
  });

  it('deletePost answers the deleted id; a second delete is NOT_FOUND; others FORBIDDEN', async () => {
    const id = (
      (await create({ title: 'Doomed', body: 'B', authorId: alice.userId })).data!.createPost as {
        post: { id: string };
      }
    ).post.id;
    const other = await s.gql(DELETE, { id }, bob.headers);
    expect(codes(other)).toEqual(['FORBIDDEN']);
    const ok = await s.gql(DELETE, { id }, alice.headers);
    expect(ok.data).toEqual({ deletePost: { deletedPostId: id, errors: [] } });
    const again = await s.gql(DELETE, { id }, alice.headers);
    expect(codes(again)).toEqual(['NOT_FOUND']);
    const gone = await s.gql('query($id: ID!) { post(id: $id) { id } }', { id }, alice.headers);
    expect(gone.data).toEqual({ post: null });
  });

  it('addComment stores the comment and sends comment.added after commit; bad input goes to errors', async () => {
    const postId = (
      (await create({ title: 'Talk', body: 'B', authorId: alice.userId })).data!.createPost as {
        post: { id: string };
      }
    ).post.id;
    const signals: DomainSignal[] = [];
    const off = s.atrium.services.bus.on('comment.added', (sig) => signals.push(sig));
    try {
      const res = await s.gql(COMMENT, { in: { body: 'First!', authorId: bob.userId, postId } }, bob.headers);
      expect(res.errors).toBeUndefined();
      const comment = (res.data!.addComment as { comment: { id: string } }).comment;
      expect(res.data!.addComment).toEqual({
        comment: { id: comment.id, body: 'First!', author: { handle: 'mutbob' }, post: { id: postId } },
        errors: [],
      });
      expect(signals).toEqual([{ kind: 'comment.added', commentId: comment.id, postId }]);
      const blank = await s.gql(COMMENT, { in: { body: ' ', authorId: bob.userId, postId } }, bob.headers);
      expect(blank.data!.addComment).toEqual({
        comment: null,
        errors: [{ field: 'body', message: expect.any(String) }],
      });
      const noPost = await s.gql(
        COMMENT,
        { in: { body: 'x', authorId: bob.userId, postId: 'pst_none' } },
        bob.headers,
      );
      expect(codes(noPost)).toEqual(['NOT_FOUND']);
      const asOther = await s.gql(
        COMMENT,
        { in: { body: 'x', authorId: alice.userId, postId } },
        bob.headers,
      );
      expect(codes(asOther)).toEqual(['FORBIDDEN']);
      const anon = await s.gql(COMMENT, { in: { body: 'x', authorId: bob.userId, postId } });
      expect(codes(anon)).toEqual(['UNAUTHENTICATED']);
      expect(signals).toHaveLength(1);
    } finally {
      off();
    }
  });
});
