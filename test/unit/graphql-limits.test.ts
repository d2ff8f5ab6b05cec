import { buildSchema, parse, specifiedRules, validate } from 'graphql';
import { describe, expect, it } from 'vitest';
import { costOf } from '../../src/graphql/pipeline/budget.js';
import { complexityLimitRule, depthLimitRule } from '../../src/graphql/pipeline/limits.js';

const schema = buildSchema(`
  type Query { me: User!  users: [User!]!  search: [Hit!]!  node: Node  echo(n: Int): Int }
  interface Node { id: ID! }
  type User implements Node { id: ID! name: String! friends: [User!]! posts: [Post!]! best: User }
  type Post implements Node { id: ID! title: String! comments: [Comment!]! }
  type Comment implements Node { id: ID! body: String! }
  union Hit = User | Post | Comment
`);

const cost = (query: string, operationName?: string) => costOf(schema, parse(query), operationName);
const errorsOf = (query: string, rules = [depthLimitRule(), complexityLimitRule()]) =>
  validate(schema, parse(query), [...specifiedRules, ...rules]).map((e) => e.message);

describe('complexity: 1 per field, list fields 10 × their children', () => {
  it('counts scalar and object fields one point each', () => {
    expect(cost('{ me { id name } }')).toBe(3);
    expect(cost('{ me { best { id } } }')).toBe(3);
  });

  it('multiplies the children of a list field by 10, at every level', () => {
    expect(cost('{ users { id } }')).toBe(11);
    expect(cost('{ users { id posts { id comments { body } } } }')).toBe(
      1 + 10 * (1 + 1 + 10 * (1 + 1 + 10 * 1)),
    );
  });

  it('costs a union as its most expensive member, not the sum of members', () => {
    const q =
      '{ search { ... on User { id name } ... on Post { id title comments { id } } ... on Comment { id } } }';
    // Post: id + title + comments(1 + 10 × 1) = 13; User 2, Comment 1 -> 13, times 10 for the list.
    expect(cost(q)).toBe(1 + 10 * 13);
  });

  it('costs interface fragments on each implementation and takes the largest', () => {
    expect(cost('{ node { id ... on User { friends { id } } } }')).toBe(1 + (1 + 1 + 10));
  });

  it('counts fields reached through named fragments, and __typename as free', () => {
    expect(cost('query { me { ...F __typename } } fragment F on User { id name }')).toBe(3);
  });

  it('costs __typename under another alias 1 point, like any field (one key per object each)', () => {
    expect(cost('{ a: __typename b: __typename __typename }')).toBe(2);
    expect(cost('{ users { x: __typename y: __typename } }')).toBe(1 + 10 * 2);
    expect(cost('{ users { __typename: __typename } }')).toBe(1);
  });

  it('adds the cost of aliases: each alias is a field of its own', () => {
    expect(cost('{ a: users { id } b: users { id } c: users { id } }')).toBe(33);
  });

  it('costs the operation that is run, by name', () => {
    const doc = 'query Small { me { id } } query Big { users { id } }';
    expect(cost(doc, 'Small')).toBe(2);
    expect(cost(doc, 'Big')).toBe(11);
  });

  it('refuses more than 1,000 points at validation, naming the cost', () => {
    const aliases = Array.from({ length: 10 }, (_, i) => `a${i}: users { id name }`).join(' ');
    expect(cost(`{ ${aliases} }`)).toBe(210);
    expect(errorsOf(`{ ${aliases} }`)).toEqual([]);
    const heavy = Array.from({ length: 5 }, (_, i) => `a${i}: users { posts { comments { id } } }`).join(' ');
    expect(cost(`{ ${heavy} }`)).toBe(5 * (1 + 10 * (1 + 10 * (1 + 10))));
    expect(errorsOf(`{ ${heavy} }`)).toEqual(['The query costs 5555 points; at most 1000 are allowed.']);
  });

  it('accepts exactly 1,000 points', () => {
    // 90 × users { id } (11 each) + me {…} (9) + echo (1) = 1000.
    const parts = Array.from({ length: 90 }, (_, i) => `u${i}: users { id }`);
    parts.push('m1: me { id name best { id name best { id name } } }', 'e1: echo');
    expect(cost(`{ ${parts.join(' ')} }`)).toBe(990 + 9 + 1);
    expect(errorsOf(`{ ${parts.join(' ')} }`)).toEqual([]);
    parts.push('e2: echo');
    expect(errorsOf(`{ ${parts.join(' ')} }`)).toEqual([
      'The query costs 1001 points; at most 1000 are allowed.',
    ]);
  });
});

describe('depth: at most 7 levels', () => {
  const nested = (levels: number) => {
    let body = 'id';
    for (let i = 1; i < levels; i++) body = `best { ${body} }`;
    return `{ ${body.replace(/^best/, 'me')} }`;
  };

  it('accepts 7 levels below the root field and refuses 8', () => {
    expect(errorsOf(nested(8))).toEqual([]);
    expect(errorsOf(nested(9))).toEqual(['The query nests 8 levels deep; at most 7 are allowed.']);
  });

  it('follows fragments and inline fragments', () => {
    const q =
      'query { me { ...A } } fragment A on User { best { ... on User { best { best { best { best { best { best { id } } } } } } } } }';
    expect(errorsOf(q)).toEqual(['The query nests 8 levels deep; at most 7 are allowed.']);
  });

  it('does not count introspection (GraphiQL nests its own query deeper than 7)', () => {
    const q =
      '{ __schema { types { fields { type { ofType { ofType { ofType { ofType { name } } } } } } } } }';
    expect(errorsOf(q)).toEqual([]);
  });
});
