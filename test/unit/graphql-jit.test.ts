import {
  buildSchema,
  type ExecutionArgs,
  type ExecutionResult,
  execute,
  GraphQLError,
  type GraphQLFieldResolver,
  GraphQLObjectType,
  GraphQLScalarType,
  type GraphQLSchema,
  Kind,
  parse,
} from 'graphql';
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import { executeCompiled } from '../../src/graphql/pipeline/jit.js';

/**
 * The pipeline runs queries compiled by graphql-jit and everything else through graphql-js; what a
 * client sees, and what the error masking reads (message, locations, path, extensions, the class
 * and message of `originalError`), must not depend on which one ran.
 */
type Resolvers = Record<string, GraphQLScalarType | Record<string, GraphQLFieldResolver<never, unknown>>>;

/** buildSchema's types with these resolvers and scalar functions attached. */
function executable({ typeDefs, resolvers }: { typeDefs: string; resolvers: Resolvers }): GraphQLSchema {
  const schema = buildSchema(typeDefs);
  for (const [typeName, value] of Object.entries(resolvers)) {
    const type = schema.getType(typeName);
    if (type instanceof GraphQLScalarType && value instanceof GraphQLScalarType) {
      Object.assign(type, {
        parseValue: value.parseValue,
        parseLiteral: value.parseLiteral,
        serialize: value.serialize,
      });
    } else if (type instanceof GraphQLObjectType) {
      const fields = type.getFields();
      for (const [field, resolve] of Object.entries(value)) fields[field]!.resolve = resolve;
    }
  }
  return schema;
}

const schema = executable({
  typeDefs: `
    scalar Day
    type Query {
      post(id: ID!): Post
      posts(first: Int!): [Post!]!
      strict: Post!
      day(d: Day!): String
      leak: String
      domain: String
      refused: String
      nonNullLeaf: String!
    }
    type Mutation { touch: Int }
    type Post { id: ID! title: String! author: User comments: [Comment!]! }
    type Comment { id: ID! body: String! }
    type User { handle: String! }
  `,
  resolvers: {
    Day: new GraphQLScalarType({
      name: 'Day',
      parseValue(value) {
        if (typeof value !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(value))
          throw new TypeError('Day is YYYY-MM-DD');
        return value;
      },
      parseLiteral(ast) {
        if (ast.kind !== Kind.STRING) throw new TypeError('Day is YYYY-MM-DD');
        return ast.value;
      },
      serialize: (v) => v,
    }),
    Query: {
      post: (_r, { id }: { id: string }) =>
        id === 'gone' ? null : { id, title: id === 'untitled' ? null : `Post ${id}` },
      posts: (_r, { first }: { first: number }) =>
        Array.from({ length: first }, (_, i) => ({ id: `p${i}`, title: `Post ${i}` })),
      strict: () => null,
      day: (_r, { d }: { d: string }) => `on ${d}`,
      leak: () => {
        throw new Error('connection refused at 10.0.0.7');
      },
      domain: () => {
        throw new DomainError('not_found', 'No such post.');
      },
      refused: () => {
        throw new GraphQLError('You may not.', { extensions: { code: 'FORBIDDEN' } });
      },
      nonNullLeaf: () => null,
    },
    Mutation: { touch: () => 1 },
    Post: {
      author: (post: { id: string }) =>
        post.id === 'p1' ? Promise.reject(new DomainError('forbidden', 'Hidden author.')) : { handle: 'ann' },
      comments: (post: { id: string }) =>
        post.id === 'p2'
          ? [
              { id: 'c1', body: 'ok' },
              { id: 'c2', body: null },
            ]
          : [{ id: 'c1', body: 'ok' }],
    },
  },
});

interface Seen {
  result: unknown;
  originals: Array<{ kind: string; message: string } | null>;
  nodes: Array<number | undefined>;
}

async function run(
  how: 'graphql-js' | 'jit',
  query: string,
  variableValues?: Record<string, unknown>,
): Promise<Seen> {
  const args: ExecutionArgs = { schema, document: parse(query), variableValues, contextValue: {} };
  const result = (await (how === 'jit' ? executeCompiled(args, execute) : execute(args))) as ExecutionResult;
  return {
    result: JSON.parse(JSON.stringify(result)),
    originals: (result.errors ?? []).map((e) =>
      e.originalError ? { kind: e.originalError.constructor.name, message: e.originalError.message } : null,
    ),
    nodes: (result.errors ?? []).map((e) => e.nodes?.length),
  };
}

const cases: Array<[string, string, Record<string, unknown>?]> = [
  ['a plain query', '{ posts(first: 2) { id title author { handle } comments { id body } } }'],
  ['a null for a nullable field', '{ post(id: "gone") { id } }'],
  [
    'a null in a non-null field, propagated to the nearest nullable parent',
    '{ post(id: "untitled") { id title } }',
  ],
  ['a null at a non-null root field', '{ strict { id } }'],
  ['a non-null leaf at the root', '{ nonNullLeaf }'],
  ['a null inside a list of non-null items', '{ posts(first: 3) { id comments { body } } }'],
  ['an unexpected error (masked later)', '{ leak posts(first: 1) { id } }'],
  ['a DomainError (mapped later)', '{ domain }'],
  ['a GraphQLError with a code', '{ refused }'],
  ['a rejected promise in a nested field', '{ posts(first: 2) { id author { handle } } }'],
  [
    'aliases and fragments',
    'query Q { a: post(id: "x") { ...F } b: domain } fragment F on Post { id t: title }',
  ],
  ['a good variable', 'query($d: Day!) { day(d: $d) }', { d: '2026-11-25' }],
  ['a bad custom scalar variable', 'query($d: Day!) { day(d: $d) }', { d: 'tomorrow' }],
  ['a variable of the wrong type', 'query($n: Int!) { posts(first: $n) { id } }', { n: 'three' }],
  ['a missing variable', 'query($n: Int!) { posts(first: $n) { id } }', {}],
  ['a mutation (graphql-js either way)', 'mutation { touch }'],
];

describe('graphql-jit answers exactly as graphql-js does', () => {
  it.each(cases)('%s', async (_name, query, variables) => {
    const expected = await run('graphql-js', query, variables);
    const actual = await run('jit', query, variables);
    expect(actual).toEqual(expected);
  });

  it('the one difference: a null that reaches the root while other fields are pending', async () => {
    // graphql-js answers as soon as the null has wiped out `data` and leaves out errors of fields
    // still running then; graphql-jit waits for them and lists them too. Same data, more errors.
    const query = '{ posts(first: 3) { id author { handle } comments { body } } }';
    const expected = await run('graphql-js', query);
    const actual = await run('jit', query);
    expect(actual.result).toMatchObject({ data: null });
    expect(expected.result).toMatchObject({ data: null });
    const messages = (seen: Seen) => (seen.result as ExecutionResult).errors!.map((e) => e.message);
    expect(messages(expected)).toEqual(['Cannot return null for non-nullable field Comment.body.']);
    expect(messages(actual)).toEqual(expect.arrayContaining(messages(expected)));
  });

  it('compiles a query once and reuses it for the same parsed document', async () => {
    const document = parse('{ posts(first: 1) { id } }');
    let fallbacks = 0;
    const fallback = (a: ExecutionArgs) => {
      fallbacks += 1;
      return execute(a);
    };
    await executeCompiled({ schema, document }, fallback);
    await executeCompiled({ schema, document }, fallback);
    expect(fallbacks).toBe(0);
    await executeCompiled({ schema, document: parse('mutation { touch }') }, fallback);
    await executeCompiled({ schema, document: parse('{ __schema { queryType { name } } }') }, fallback);
    expect(fallbacks).toBe(2);
  });

  it('compiles queries that ask for __typename (Apollo Client adds it everywhere); only __schema and __type stay on graphql-js', async () => {
    let fallbacks = 0;
    const fallback = (a: ExecutionArgs) => {
      fallbacks += 1;
      return execute(a);
    };
    const typed = (await executeCompiled(
      { schema, document: parse('{ posts(first: 1) { __typename id } }') },
      fallback,
    )) as ExecutionResult;
    expect(fallbacks).toBe(0);
    expect(typed.data).toEqual({ posts: [{ __typename: 'Post', id: expect.any(String) }] });
    await executeCompiled({ schema, document: parse('{ __type(name: "Post") { name } }') }, fallback);
    expect(fallbacks).toBe(1);
  });
});
