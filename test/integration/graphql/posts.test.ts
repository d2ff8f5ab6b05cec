import { beforeAll, describe, expect, it } from 'vitest';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { codes, type GraphQLServer, graphQLServerForSuite } from './support.js';

type Caller = Awaited<ReturnType<GraphQLServer['atrium']['caller']>>;
interface Page {
  edges: Array<{ cursor: string; node: { id: string } }>;
  pageInfo: {
    hasNextPage: boolean;
    hasPreviousPage: boolean;
    startCursor: string | null;
    endCursor: string | null;
  };
  totalCount: number;
}

const PAGE = `edges { cursor node { id } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } totalCount`;
const POSTS = `query($first: Int, $after: String, $last: Int, $before: String) {
  posts(first: $first, after: $after, last: $last, before: $before) { ${PAGE} } }`;

describe('GraphQL posts: connections, comments, batching', () => {
  const s = graphQLServerForSuite();
  let alice: Caller;
  let bob: Caller;
  /** Post ids newest first, as Query.posts orders them. */
  let ids: string[] = [];
  beforeAll(async () => {
    alice = await s.atrium.caller({ handle: 'postalice' });
    bob = await s.atrium.caller({ handle: 'postbob' });
    const actor = { id: alice.userId, kind: 'user' as const, role: 'member' as const };
    const created: string[] = [];
    for (let i = 0; i < 25; i++) {
      const post = await s.atrium.services.core.posts.create(actor, {
        title: `Post ${i}`,
        body: `Body of post ${i}`,
        authorId: alice.userId,
        tags: i % 2 === 0 ? ['even', 'Numbers'] : [],
      });
      created.push(post.id);
    }
    ids = created.reverse();
  });

  const posts = async (vars: Record<string, unknown>) => {
    const res = await s.gql(POSTS, vars, alice.headers);
    return { res, page: res.data?.posts as Page };
  };
  const idsOf = (page: Page) => page.edges.map((e) => e.node.id);

  it('defaults to 20 posts, id descending, with totalCount and hasNextPage', async () => {
    const { res, page } = await posts({});
    expect(res.errors).toBeUndefined();
    expect(idsOf(page)).toEqual(ids.slice(0, 20));
    expect(page.totalCount).toBe(25);
    expect(page.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    expect(page.pageInfo.startCursor).toBe(page.edges[0]!.cursor);
    expect(page.pageInfo.endCursor).toBe(page.edges[19]!.cursor);
  });

  it('pages forward with first/after to the end', async () => {
    const one = (await posts({ first: 10 })).page;
    const two = (await posts({ first: 10, after: one.pageInfo.endCursor })).page;
    expect(idsOf(two)).toEqual(ids.slice(10, 20));
    expect(two.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: true });
    const three = (await posts({ first: 10, after: two.pageInfo.endCursor })).page;
    expect(idsOf(three)).toEqual(ids.slice(20, 25));
    expect(three.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
    expect(three.totalCount).toBe(25);
    const exact = (await posts({ first: 25 })).page;
    expect(exact.pageInfo.hasNextPage).toBe(false);
  });

  it('pages backward with last/before', async () => {
    const tail = (await posts({ last: 5 })).page;
    expect(idsOf(tail)).toEqual(ids.slice(20, 25));
    expect(tail.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
    const before = (await posts({ last: 10, before: tail.pageInfo.startCursor })).page;
    expect(idsOf(before)).toEqual(ids.slice(10, 20));
    expect(before.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: true });
    const head = (await posts({ last: 20, before: before.pageInfo.startCursor })).page;
    expect(idsOf(head)).toEqual(ids.slice(0, 10));
    expect(head.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
  });

  it('first or last over 100, both together, negative and bad cursors are BAD_USER_INPUT', async () => {
    for (const vars of [
      { first: 101 },
      { last: 101 },
      { first: -1 },
      { first: 2, last: 2 },
      { after: 'garbage' },
      { before: 'AAAA' },
    ]) {
      const { res } = await posts(vars);
      expect(res.data, JSON.stringify(vars)).toBeNull();
      expect(codes(res), JSON.stringify(vars)).toEqual(['BAD_USER_INPUT']);
    }
    const wrongType = await s.gql(POSTS, { first: 'ten' }, alice.headers);
    expect(wrongType.data).toBeUndefined();
    expect(wrongType.errors![0]!.message).toMatch(/\$first/);
    // A comment cursor is no post cursor.
    const post = await s.gql('query($id: ID!) { post(id: $id) { id } }', { id: ids[0] }, alice.headers);
    expect(post.data).toEqual({ post: { id: ids[0] } });
  });

  it('post fields: author, tags, dates; an unknown id is null', async () => {
    const res = await s.gql(
      'query($id: ID!) { post(id: $id) { title body tags publishedAt createdAt author { handle } } }',
      { id: ids[0] },
      alice.headers,
    );
    expect(res.data!.post).toMatchObject({
      title: 'Post 24',
      tags: ['even', 'numbers'],
      author: { handle: 'postalice' },
    });
    expect((res.data!.post as { publishedAt: string }).publishedAt).toMatch(/\.\d{3}Z$/);
    const none = await s.gql('{ post(id: "pst_none") { id } }', {}, alice.headers);
    expect(none).toMatchObject({ data: { post: null } });
    expect(none.errors).toBeUndefined();
  });

  it('comments: default 10, oldest first, paged forward and backward, limits checked', async () => {
    const actor = { id: bob.userId, kind: 'user' as const, role: 'member' as const };
    const commentIds: string[] = [];
    for (let i = 0; i < 12; i++) {
      const c = await s.atrium.services.core.comments.add(actor, {
        body: `c${i}`,
        authorId: bob.userId,
        postId: ids[1]!,
      });
      commentIds.push(c.id);
    }
    const q = `query($id: ID!, $first: Int, $after: String, $last: Int, $before: String) { post(id: $id) {
      comments(first: $first, after: $after, last: $last, before: $before) { ${PAGE} } } }`;
    const page = async (vars: Record<string, unknown>) => {
      const res = await s.gql(q, { id: ids[1], ...vars }, alice.headers);
      return { res, page: (res.data?.post as { comments: Page } | null)?.comments };
    };
    const first = (await page({})).page!;
    expect(idsOf(first)).toEqual(commentIds.slice(0, 10));
    expect(first.totalCount).toBe(12);
    expect(first.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    const rest = (await page({ after: first.pageInfo.endCursor })).page!;
    expect(idsOf(rest)).toEqual(commentIds.slice(10));
    expect(rest.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
    const last = (await page({ last: 3 })).page!;
    expect(idsOf(last)).toEqual(commentIds.slice(9));
    expect(last.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
    const tooMany = await page({ first: 101 });
    expect(tooMany.res.data).toEqual({ post: null });
    expect(codes(tooMany.res)).toEqual(['BAD_USER_INPUT']);
    // A post cursor does not page comments.
    const foreign = await page({ after: (await posts({ first: 1 })).page.pageInfo.endCursor });
    expect(codes(foreign.res)).toEqual(['BAD_USER_INPUT']);
  });

  it('posts(first: 20) with authors and comments with authors costs the same statements for 5 and 20 posts', async () => {
    const actor = { id: bob.userId, kind: 'user' as const, role: 'member' as const };
    for (const postId of ids.slice(0, 20)) {
      await s.atrium.services.core.comments.add(actor, { body: 'nice', authorId: bob.userId, postId });
    }
    // Issue 7 item 3's query, with the page size as a variable.
    const query = `query($n: Int) { posts(first: $n) { edges { node { author { handle }
      comments(first: 5) { edges { node { author { handle } } } } } } } }`;
    const cost = async (n: number) => {
      const before = s.atrium.services.store.statementCount();
      const res = await s.gql(query, { n }, alice.headers);
      expect(res.errors).toBeUndefined();
      expect((res.data!.posts as { edges: unknown[] }).edges).toHaveLength(n);
      return s.atrium.services.store.statementCount() - before;
    };
    await cost(1);
    const five = await cost(5);
    const twenty = await cost(20);
    expect(twenty).toBe(five);
    // Authentication (key lookup) + posts page + authors + comment pages + comment authors (no
    // totalCount is selected, so nothing is counted).
    expect(twenty).toBeLessThanOrEqual(10);
  });

  it("issue 7 item 3's query as written runs within the spec's depth limit of 7", async () => {
    const query = `{ posts(first: 20) { edges { node { author { handle }
      comments(first: 5) { edges { node { author { handle } } } } } } } }`;
    const res = await s.gql(query, {}, alice.headers);
    expect(res.errors).toBeUndefined();
    expect((res.data!.posts as { edges: unknown[] }).edges).toHaveLength(20);
  });

  it('a post whose author was deleted is missing (D22): post(id) is null, without an error', async () => {
    const gone = await s.atrium.caller({ handle: 'postgone' });
    const actor = { id: gone.userId, kind: 'user' as const, role: 'member' as const };
    const post = await s.atrium.services.core.posts.create(actor, {
      title: 'Orphan',
      body: 'b',
      authorId: gone.userId,
    });
    await s.atrium.services.core.users.delete(SYSTEM_ACTOR, gone.userId);
    const res = await s.gql(
      'query($id: ID!) { post(id: $id) { title author { handle } } }',
      { id: post.id },
      alice.headers,
    );
    expect(res.data).toEqual({ post: null });
    expect(res.errors).toBeUndefined();
  });
});
