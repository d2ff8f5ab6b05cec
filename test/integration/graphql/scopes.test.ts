import { beforeAll, describe, expect, it } from 'vitest';
import { type GraphQLBody, type GraphQLServer, graphQLServerForSuite } from './support.js';
import { codesOf, runOver } from './transports.js';

/** FORBIDDEN errors with the scope each names, by path. */
const refusals = (body: GraphQLBody) =>
  (body.errors ?? []).map((e) => ({
    path: e.path?.join('.'),
    code: e.extensions?.code,
    scope: e.extensions?.scope,
  }));

// decisions §3: a token carries what was granted, and a missing scope is refused naming it, on
// GraphQL as on REST and gRPC.
describe('GraphQL checks the caller’s scopes', () => {
  const server = graphQLServerForSuite();
  let base: string;
  let member: Awaited<ReturnType<GraphQLServer['atrium']['caller']>>;
  let viewer: Awaited<ReturnType<GraphQLServer['atrium']['caller']>>;
  let postId: string;
  let orderId: string;
  const bearer = async (scope: string[]) => ({
    authorization: `Bearer ${
      (
        await server.atrium.services.oauth!.tokens.issue({
          subject: member.userId,
          clientId: 'cli_scopes',
          scope,
        })
      ).token
    }`,
  });

  beforeAll(async () => {
    base = server.url.replace(/\/graphql$/, '');
    member = await server.atrium.caller({ handle: 'scoped' });
    viewer = await server.atrium.caller({ handle: 'looker', role: 'viewer' });
    const actor = { id: member.userId, kind: 'user' as const, role: 'member' as const };
    postId = (
      await server.atrium.services.core.posts.create(actor, {
        title: 'Public',
        body: 'b',
        authorId: member.userId,
      })
    ).id;
    const product = await server.atrium.services.core.products.create({ name: 'Thing', priceCents: 500 });
    orderId = (
      await server.atrium.services.core.orders.create(actor, {
        items: [{ productId: product.id, quantity: 1 }],
        currency: 'USD',
        shippingAddress: { name: 'A', street: 'S 1', city: 'C', postalCode: '12345', country: 'US' },
      })
    ).id;
  });

  it('lets a profile:read token read the caller and nothing of the other areas', async () => {
    const headers = await bearer(['profile:read']);
    const me = await server.gql('{ me { handle } }', {}, headers);
    expect(me.errors).toBeUndefined();
    expect(me.data).toEqual({ me: { handle: 'scoped' } });

    const reads = await server.gql(
      `{ user(id: "${member.userId}") { id } post(id: "${postId}") { id } order: node(id: "${orderId}") { id } }`,
      {},
      headers,
    );
    expect(reads.data).toEqual({ user: null, post: null, order: null });
    expect(refusals(reads)).toEqual([
      { path: 'user', code: 'FORBIDDEN', scope: 'users:read' },
      { path: 'post', code: 'FORBIDDEN', scope: 'content:read' },
      { path: 'order', code: 'FORBIDDEN', scope: 'orders:read' },
    ]);

    // Both links are non-null, so a refusal nulls `me` too: one query each.
    const orders = await server.gql('{ me { handle orders { totalCount } } }', {}, headers);
    expect(orders.data).toBeNull();
    expect(refusals(orders)).toEqual([{ path: 'me.orders', code: 'FORBIDDEN', scope: 'orders:read' }]);
    const posts = await server.gql('{ me { handle posts { totalCount } } }', {}, headers);
    expect(refusals(posts)).toEqual([{ path: 'me.posts', code: 'FORBIDDEN', scope: 'content:read' }]);
  });

  it('refuses every mutation whose write scope was not granted, and changes nothing', async () => {
    const headers = await bearer(['profile:read', 'users:read', 'content:read', 'orders:read']);
    const update = await server.gql(
      `mutation { updateUser(id: "${member.userId}", input: { name: "Not Allowed" }) { id } }`,
      {},
      headers,
    );
    expect(refusals(update)).toEqual([{ path: 'updateUser', code: 'FORBIDDEN', scope: 'users:write' }]);
    const create = await server.gql(
      `mutation { createPost(input: { title: "x", body: "y", authorId: "${member.userId}" }) { post { id } } }`,
      {},
      headers,
    );
    expect(refusals(create)).toEqual([{ path: 'createPost', code: 'FORBIDDEN', scope: 'content:write' }]);
    const comment = await server.gql(
      `mutation { addComment(input: { body: "x", authorId: "${member.userId}", postId: "${postId}" }) { comment { id } } }`,
      {},
      headers,
    );
    expect(refusals(comment)).toEqual([{ path: 'addComment', code: 'FORBIDDEN', scope: 'content:write' }]);
    const edit = await server.gql(`mutation { deletePost(id: "${postId}") { deletedPostId } }`, {}, headers);
    expect(refusals(edit)).toEqual([{ path: 'deletePost', code: 'FORBIDDEN', scope: 'content:write' }]);

    const after = await server.atrium.services.core.users.get(member.userId);
    expect(after.name).toBe('Test scoped');
    expect(await server.atrium.services.core.posts.get(null, postId)).not.toBeNull();
  });

  it('refuses a viewer’s API key a write, as REST and gRPC do', async () => {
    const res = await server.gql(
      `mutation { updateUser(id: "${viewer.userId}", input: { name: "Vee Changed" }) { id } }`,
      {},
      viewer.headers,
    );
    expect(refusals(res)).toEqual([{ path: 'updateUser', code: 'FORBIDDEN', scope: 'users:write' }]);
    expect((await server.atrium.services.core.users.get(viewer.userId)).name).toBe(`Test looker`);
  });

  it('serves the same operations to a token that has the scopes', async () => {
    const headers = await bearer(['users:read', 'users:write', 'content:read', 'orders:read']);
    const reads = await server.gql(
      `{ me { orders { totalCount } posts { totalCount } } post(id: "${postId}") { id } node(id: "${orderId}") { id } }`,
      {},
      headers,
    );
    expect(reads.errors).toBeUndefined();
    expect(reads.data).toEqual({
      me: { orders: { totalCount: 1 }, posts: { totalCount: 1 } },
      post: { id: postId },
      node: { id: orderId },
    });
    const update = await server.gql(
      `mutation { updateUser(id: "${member.userId}", input: { name: "Scoped Enough" }) { fullName } }`,
      {},
      headers,
    );
    expect(update.errors).toBeUndefined();
    expect(update.data).toEqual({ updateUser: { fullName: 'Scoped Enough' } });
  });

  it('leaves anonymous reads of public content as they were', async () => {
    const res = await server.gql(`{ post(id: "${postId}") { id } }`);
    expect(res.errors).toBeUndefined();
    expect(res.data).toEqual({ post: { id: postId } });
  });

  it.each(['WS', 'SSE'] as const)(
    'refuses a subscription without content:read over %s',
    async (transport) => {
      const headers = await bearer(['profile:read']);
      const answer = await runOver(
        transport,
        base,
        { query: `subscription { commentAdded(postId: "${postId}") { id } }` },
        headers,
      );
      expect(codesOf(answer)).toEqual(['FORBIDDEN']);
      expect(answer.errors?.[0]?.extensions?.scope).toBe('content:read');
    },
  );
});
