import { createHash } from 'node:crypto';
import { ApolloGateway, IntrospectAndCompose, RemoteGraphQLDataSource } from '@apollo/gateway';
import {
  buildClientSchema,
  getIntrospectionQuery,
  type IntrospectionQuery,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  Kind,
  parse,
} from 'graphql';
import { beforeAll, describe, expect, it } from 'vitest';
import { codes, type GraphQLServer, graphQLServerForSuite } from './support.js';

type Caller = Awaited<ReturnType<GraphQLServer['atrium']['caller']>>;

describe('GraphQL federation: Atrium as a subgraph', () => {
  const s = graphQLServerForSuite();
  let alice: Caller;
  let postId: string;
  let commentId: string;
  let orderId: string;
  beforeAll(async () => {
    alice = await s.atrium.caller({ handle: 'fedalice' });
    const actor = { id: alice.userId, kind: 'user' as const, role: 'member' as const };
    const core = s.atrium.services.core;
    postId = (await core.posts.create(actor, { title: 'Federated', body: 'B', authorId: alice.userId })).id;
    commentId = (await core.comments.add(actor, { body: 'Hi', authorId: alice.userId, postId })).id;
    const product = await core.products.create({ name: 'Widget', priceCents: 1250 });
    const order = await core.orders.create(actor, {
      items: [{ productId: product.id, quantity: 2 }],
      currency: 'USD',
      shippingAddress: { name: 'A', street: 'S 1', city: 'C', postalCode: '12345', country: 'US' },
    });
    orderId = order.id;
  });

  it('_service { sdl } carries @key(fields: "id") on User, Post, Comment and Order', async () => {
    const res = await s.gql('{ _service { sdl } }');
    const sdl = (res.data!._service as { sdl: string }).sdl;
    for (const type of ['User', 'Post', 'Comment', 'Order']) {
      expect(sdl).toMatch(new RegExp(`type ${type} implements [^{]*@key\\(fields: "id"\\)`));
    }
    expect(sdl).toContain('@deprecated(reason: "Use handle.")');
  });

  it('every description in _service { sdl } is the one introspection gives (codegen and GraphiQL read the latter)', async () => {
    const sdl = ((await s.gql('{ _service { sdl } }')).data!._service as { sdl: string }).sdl;
    const introspected = await s.gql(getIntrospectionQuery());
    const schema = buildClientSchema(introspected.data as unknown as IntrospectionQuery);
    const seen: string[] = [];
    const differing: string[] = [];
    const compare = (where: string, inSdl: string | undefined, live: string | null | undefined) => {
      if (inSdl === undefined) return;
      seen.push(where);
      if (inSdl !== live)
        differing.push(`${where}: sdl ${JSON.stringify(inSdl)} / introspection ${JSON.stringify(live)}`);
    };
    for (const def of parse(sdl).definitions) {
      if (!('name' in def) || def.name === undefined) continue;
      const type = schema.getType(def.name.value);
      if (!type) continue; // federation's own definitions that introspection does not list
      if ('description' in def) compare(type.name, def.description?.value, type.description);
      if (
        'fields' in def &&
        def.fields &&
        (isObjectType(type) || isInterfaceType(type) || isInputObjectType(type))
      ) {
        const fields = type.getFields();
        for (const field of def.fields) {
          const live = fields[field.name.value];
          compare(`${type.name}.${field.name.value}`, field.description?.value, live?.description);
          if (field.kind === Kind.FIELD_DEFINITION && live && 'args' in live)
            for (const arg of field.arguments ?? [])
              compare(
                `${type.name}.${field.name.value}(${arg.name.value})`,
                arg.description?.value,
                live.args.find((a) => a.name === arg.name.value)?.description,
              );
        }
      }
      if ('values' in def && def.values && isEnumType(type))
        for (const value of def.values)
          compare(
            `${type.name}.${value.name.value}`,
            value.description?.value,
            type.getValue(value.name.value)?.description,
          );
    }
    expect(seen).toContain('DateTime');
    expect(seen.length).toBeGreaterThan(100);
    expect(differing).toEqual([]);
  });

  it('_entities resolves each entity through the loaders; unknown or not-owned ones are null', async () => {
    const res = await s.gql(
      `query($r: [_Any!]!) { _entities(representations: $r) {
        __typename ... on User { handle } ... on Post { title } ... on Comment { body } ... on Order { totalAmount status userId } } }`,
      {
        r: [
          { __typename: 'User', id: alice.userId },
          { __typename: 'Post', id: postId },
          { __typename: 'Comment', id: commentId },
          { __typename: 'Order', id: orderId },
          { __typename: 'Post', id: 'pst_unknown' },
        ],
      },
      alice.headers,
    );
    expect(res.errors).toBeUndefined();
    expect(res.data!._entities).toEqual([
      { __typename: 'User', handle: 'fedalice' },
      { __typename: 'Post', title: 'Federated' },
      { __typename: 'Comment', body: 'Hi' },
      { __typename: 'Order', totalAmount: 25, status: 'PENDING', userId: alice.userId },
      null,
    ]);
    const bob = await s.atrium.caller({ handle: 'fedbob' });
    const foreign = await s.gql(
      'query($r: [_Any!]!) { _entities(representations: $r) { ... on Order { id } } }',
      { r: [{ __typename: 'Order', id: orderId }] },
      bob.headers,
    );
    expect(foreign.data).toEqual({ _entities: [null] });
    expect(codes(foreign)).toEqual([]);
  });

  it('composes under @apollo/gateway over HTTP and answers a query through the gateway', async () => {
    const gateway = new ApolloGateway({
      supergraphSdl: new IntrospectAndCompose({ subgraphs: [{ name: 'atrium', url: s.url }] }),
      buildService: ({ url }) =>
        new RemoteGraphQLDataSource({
          url,
          willSendRequest: ({ request }) => request.http?.headers.set('x-api-key', alice.key),
        }),
    });
    const { schema, executor } = await gateway.load();
    try {
      expect(schema.getType('Post')).toBeDefined();
      expect(schema.getType('_Service')).toBeUndefined();
      const query = `{ me { handle email orders { totalCount edges { node { totalAmount user { handle } } } } }
        posts(first: 1) { totalCount edges { node { title author { handle } comments { totalCount } } } } }`;
      const result = await executor({
        request: { query, variables: {} },
        document: parse(query),
        queryHash: createHash('sha256').update(query).digest('hex'),
        operationName: null,
        source: query,
        schema,
        context: {},
        logger: console,
        metrics: {},
        cache: undefined,
        overallCachePolicy: undefined,
      } as unknown as Parameters<typeof executor>[0]);
      expect(result.errors).toBeUndefined();
      expect(result.data).toEqual({
        me: {
          handle: 'fedalice',
          email: 'fedalice@example.com',
          orders: { totalCount: 1, edges: [{ node: { totalAmount: 25, user: { handle: 'fedalice' } } }] },
        },
        posts: {
          totalCount: 1,
          edges: [
            { node: { title: 'Federated', author: { handle: 'fedalice' }, comments: { totalCount: 1 } } },
          ],
        },
      });
    } finally {
      await gateway.stop();
    }
  });
});
