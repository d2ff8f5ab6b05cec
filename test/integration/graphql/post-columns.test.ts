import { beforeAll, describe, expect, it } from 'vitest';
import { observeStatements } from '../../helpers/statement-observer.js';
import { type GraphQLServer, graphQLServerForSuite } from './support.js';

type Caller = Awaited<ReturnType<GraphQLServer['atrium']['caller']>>;

/**
 * On PostgreSQL posts and comments carry `search_vector` (migration 0009), a parsed copy of their
 * text only search reads. Reads of posts and comments name their columns (src/store/columns.ts)
 * rather than fetching it with every row. (On SQLite there is no such column: this passes there
 * by construction and guards the column lists' typing only.)
 */
describe('post and comment reads leave search_vector in the database', () => {
  // Every column name any statement's rows came back with.
  const columns = { seen: new Set<string>() };
  const watch = observeStatements({
    onResult: (result) => {
      for (const row of result.rows) for (const column of Object.keys(row)) columns.seen.add(column);
    },
  });
  const s = graphQLServerForSuite({}, { storePlugins: [watch] });
  let alice: Caller;
  let postId: string;
  let commentIds: string[];

  beforeAll(async () => {
    alice = await s.atrium.caller({ handle: 'columnsalice' });
    const actor = { id: alice.userId, kind: 'user' as const, role: 'member' as const };
    const post = await s.atrium.services.core.posts.create(actor, {
      title: 'Columns',
      body: 'A post whose vector stays put',
      authorId: alice.userId,
    });
    postId = post.id;
    commentIds = [];
    for (let i = 0; i < 3; i++) {
      const comment = await s.atrium.services.core.comments.add(actor, {
        body: `comment ${i}`,
        authorId: alice.userId,
        postId,
      });
      commentIds.push(comment.id);
    }
  });

  it('lists, first pages, pages after a cursor, and reads by id', async () => {
    columns.seen.clear();
    const listed = await s.gql(
      `{ posts(first: 5) { edges { node { id comments(first: 2) { edges { cursor node { id } } } author { posts(first: 2) { edges { node { id } } } } } } } }`,
      {},
      alice.headers,
    );
    expect(listed.errors).toBeUndefined();
    const after = (
      listed.data as { posts: { edges: Array<{ node: { comments: { edges: Array<{ cursor: string }> } } }> } }
    ).posts.edges[0]!.node.comments.edges[1]!.cursor;
    const paged = await s.gql(
      `query($id: ID!, $after: String) { post(id: $id) { id title comments(first: 2, after: $after) { edges { node { id body } } } } }`,
      { id: postId, after },
      alice.headers,
    );
    expect(paged.errors).toBeUndefined();
    expect((paged.data as { post: { comments: { edges: unknown[] } } }).post.comments.edges).toHaveLength(1);
    for (const id of [postId, ...commentIds]) {
      const node = await s.gql(`query($id: ID!) { node(id: $id) { id } }`, { id }, alice.headers);
      expect(node.errors).toBeUndefined();
      expect((node.data as { node: { id: string } }).node.id).toBe(id);
    }
    // The reads happened (their own columns came back), and the vector never did.
    expect([...columns.seen]).toEqual(expect.arrayContaining(['title', 'post_id', 'body']));
    expect([...columns.seen]).not.toContain('search_vector');
  });
});
