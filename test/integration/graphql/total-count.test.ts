import type { RootOperationNode } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { observeStatements } from '../../helpers/statement-observer.js';
import { type GraphQLServer, graphQLServerForSuite } from './support.js';

type Caller = Awaited<ReturnType<GraphQLServer['atrium']['caller']>>;

interface CountStatement {
  table: string;
  grouped: boolean;
}

/** Notes every SELECT that counts (count(*), grouped or not) and the table it counts. */
class CountStatements {
  readonly seen: CountStatement[] = [];
  readonly plugin = observeStatements({ onQuery: (node) => this.note(node) });
  private note(node: RootOperationNode): void {
    if (node.kind === 'SelectQueryNode' && JSON.stringify(node).includes('"func":"count"')) {
      const from = node.from?.froms[0] as { table?: { identifier?: { name?: string } } } | undefined;
      this.seen.push({ table: from?.table?.identifier?.name ?? '?', grouped: node.groupBy !== undefined });
    }
  }
}

interface Page<N> {
  edges: Array<{ cursor: string; node: N }>;
  totalCount?: number;
}
interface PostNode {
  id: string;
  comments: Page<{ id: string }>;
  author: { posts: Page<{ id: string }> };
}

/**
 * Until 2026-11-29 every connection counted its whole list beside the page, selected or not: on
 * PostgreSQL with 200k posts, `posts(first: 5) { ... comments(first: 5) ... }` spent 60 ms on
 * count(*) over posts and 364 ms on the grouped comment count, for a totalCount nobody asked for.
 */
describe('GraphQL totalCount: counted only when selected, one grouped count per batch', () => {
  const counts = new CountStatements();
  const s = graphQLServerForSuite({}, { storePlugins: [counts.plugin] });
  let alice: Caller;
  /** Post ids newest first, with how many comments each has, and their authors' post counts. */
  const comments = new Map<string, number>();
  const byAuthor = new Map<string, number>();
  let postCount = 0;

  beforeAll(async () => {
    alice = await s.atrium.caller({ handle: 'countalice' });
    const authors = [alice, await s.atrium.caller({ handle: 'countbob' })];
    for (let i = 0; i < 6; i++) {
      const author = authors[i % 2]!;
      const actor = { id: author.userId, kind: 'user' as const, role: 'member' as const };
      const post = await s.atrium.services.core.posts.create(actor, {
        title: `Post ${i}`,
        body: 'body',
        authorId: author.userId,
      });
      postCount += 1;
      byAuthor.set(author.userId, (byAuthor.get(author.userId) ?? 0) + 1);
      // 0, 1, 2, 3, 4, 5 comments: every post's count differs, so a mixed-up total shows.
      for (let c = 0; c < i; c++)
        await s.atrium.services.core.comments.add(actor, {
          body: 'c',
          authorId: author.userId,
          postId: post.id,
        });
      comments.set(post.id, i);
    }
  });

  const run = async (query: string, variables: Record<string, unknown> = {}) => {
    counts.seen.length = 0;
    const res = await s.gql(query, variables, alice.headers);
    expect(res.errors).toBeUndefined();
    return { data: res.data!, statements: [...counts.seen] };
  };

  it('runs no count for posts and nested comments when totalCount is not selected', async () => {
    const { data, statements } = await run(
      `{ posts(first: 5) { edges { node { id comments(first: 5) { edges { node { id } } } } } } }`,
    );
    expect((data.posts as Page<PostNode>).edges).toHaveLength(5);
    expect(statements).toEqual([]);
  });

  it('counts nested comments of several posts in one grouped statement, with the right totals', async () => {
    const { data, statements } = await run(
      `{ posts(first: 6) { totalCount edges { node { id comments(first: 2) { totalCount edges { node { id } } } } } } }`,
    );
    const posts = data.posts as Page<PostNode>;
    expect(posts.totalCount).toBe(postCount);
    expect(posts.edges).toHaveLength(6);
    for (const { node } of posts.edges) {
      expect(node.comments.totalCount, node.id).toBe(comments.get(node.id));
      expect(node.comments.edges).toHaveLength(Math.min(2, comments.get(node.id)!));
    }
    expect(statements).toHaveLength(2);
    expect(statements).toEqual(
      expect.arrayContaining([
        { table: 'posts', grouped: false },
        { table: 'comments', grouped: true },
      ]),
    );
  });

  it("counts authors' posts once for the batch, and only where asked", async () => {
    const query = (selection: string) =>
      `{ posts(first: 6) { edges { node { id author { posts(first: 1) { ${selection} edges { node { id } } } } } } } }`;
    const without = await run(query(''));
    expect(without.statements).toEqual([]);
    const { data, statements } = await run(query('totalCount'));
    const posts = data.posts as Page<PostNode>;
    const totals = posts.edges.map((e) => e.node.author.posts.totalCount);
    expect(new Set(totals)).toEqual(new Set(byAuthor.values()));
    expect(statements).toEqual([{ table: 'posts', grouped: true }]);
  });

  it('a page after a cursor counts only when totalCount is selected, and counts right', async () => {
    const post = [...comments].find(([, n]) => n === 5)![0];
    const query = (selection: string) => `query($id: ID!, $after: String) { post(id: $id) {
      comments(first: 2, after: $after) { ${selection} edges { cursor node { id } } } } }`;
    const first = await run(query(''), { id: post });
    const after = (first.data.post as PostNode).comments.edges[1]!.cursor;
    const next = await run(query(''), { id: post, after });
    expect((next.data.post as PostNode).comments.edges).toHaveLength(2);
    expect(next.statements).toEqual([]);
    const counted = await run(query('totalCount'), { id: post, after });
    expect((counted.data.post as PostNode).comments.totalCount).toBe(5);
    expect(counted.statements).toEqual([{ table: 'comments', grouped: true }]);
  });

  it("a user's orders count only when totalCount is selected, first page and after a cursor", async () => {
    const actor = { id: alice.userId, kind: 'user' as const, role: 'member' as const };
    const product = await s.atrium.services.core.products.create({ name: 'Thing', priceCents: 500 });
    for (let i = 0; i < 3; i++)
      await s.atrium.services.core.orders.create(actor, {
        items: [{ productId: product.id, quantity: 1 }],
        currency: 'USD',
        shippingAddress: { name: 'A', street: 'S 1', city: 'C', postalCode: '12345', country: 'US' },
      });
    const query = (selection: string) => `query($after: String) { me {
      orders(first: 1, after: $after) { ${selection} edges { cursor node { id } } } } }`;
    type Me = { me: { orders: Page<{ id: string }> } };
    const first = await run(query(''));
    expect(first.statements).toEqual([]);
    const after = (first.data as Me).me.orders.edges[0]!.cursor;
    expect((await run(query(''), { after })).statements).toEqual([]);
    for (const vars of [{}, { after }]) {
      const counted = await run(query('totalCount'), vars);
      expect((counted.data as Me).me.orders.totalCount).toBe(3);
      expect(counted.statements).toHaveLength(1);
      expect(counted.statements[0]!.table).toBe('orders');
    }
  });
});
