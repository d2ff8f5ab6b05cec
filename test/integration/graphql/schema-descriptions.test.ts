import { describe, expect, it } from 'vitest';
import { COMMENTS_PAGE_SIZE, MAX_COMMENT_LENGTH } from '../../../src/domain/comments.js';
import { MAX_PAGE_SIZE } from '../../../src/domain/connection.js';
import { MEMBERS_PAGE_SIZE, ORDERS_PAGE_SIZE } from '../../../src/domain/connection-reads.js';
import { USER_ORDERS_PAGE_SIZE } from '../../../src/domain/orders.js';
import { MAX_BODY_LENGTH, MAX_TITLE_LENGTH, POSTS_PAGE_SIZE } from '../../../src/domain/posts.js';
import { SEARCH_DEFAULT_LIMIT } from '../../../src/domain/search.js';
import { MAX_TAG_LENGTH, MAX_TAGS_PER_POST } from '../../../src/domain/tags.js';
import { MAX_USERS_PAGE, USERS_PAGE_SIZE } from '../../../src/domain/users.js';
import { graphQLServerForSuite } from './support.js';

/**
 * What introspection tells a client about sizes and lengths is what the core enforces. Until
 * 2026-11-28 `Query.users(limit)` read "1 to 100" while the core took 1 to 1,000 (found by an
 * outside walk); the rest were right but written out by hand beside the core's constants.
 */

interface IntrospectedField {
  name: string;
  description: string | null;
  args: Array<{ name: string; description: string | null }>;
}
interface IntrospectedType {
  name: string;
  fields: IntrospectedField[] | null;
  inputFields: Array<{ name: string; description: string | null }> | null;
}

const INTROSPECTION = `{
  __schema {
    types {
      name
      fields { name description args { name description } }
      inputFields { name description }
    }
  }
}`;

const n = (value: number) => value.toLocaleString('en-US');

describe('the schema describes the core limits', () => {
  const server = graphQLServerForSuite();

  it('every size and length a description states is the core constant behind it', async () => {
    const answer = await server.gql(INTROSPECTION);
    expect(answer.errors).toBeUndefined();
    const types = new Map(
      (answer.data as { __schema: { types: IntrospectedType[] } }).__schema.types.map((t) => [t.name, t]),
    );
    /** A field's (`Type.field`), argument's (`Type.field(arg)`) or input field's description. */
    const described = (path: string): string | null | undefined => {
      const [, typeName, fieldName, argName] = /^(\w+)\.(\w+)(?:\((\w+)\))?$/.exec(path)!;
      const type = types.get(typeName!);
      const field = type?.fields?.find((f) => f.name === fieldName);
      if (argName) return field?.args.find((a) => a.name === argName)?.description;
      return (field ?? type?.inputFields?.find((f) => f.name === fieldName))?.description;
    };
    // The two paths behind User.orders (one batched, one after a cursor) share the default.
    expect(USER_ORDERS_PAGE_SIZE).toBe(ORDERS_PAGE_SIZE);
    const expected: Record<string, string> = {
      'Query.users(limit)': `How many, 1 to ${n(MAX_USERS_PAGE)}; default ${USERS_PAGE_SIZE}.`,
      'Query.posts': `Posts newest first (id descending): first/after forward, last/before backward; ${POSTS_PAGE_SIZE} by default, at most ${MAX_PAGE_SIZE}.`,
      'Query.posts(first)': `Page size forward, 0 to ${MAX_PAGE_SIZE}.`,
      'Query.posts(last)': `Page size backward, 0 to ${MAX_PAGE_SIZE}.`,
      'Query.search': `Full-text search over users, posts and comments, most relevant first (at most ${SEARCH_DEFAULT_LIMIT}).`,
      'User.posts': `The user's posts, newest first (${POSTS_PAGE_SIZE} by default, at most ${MAX_PAGE_SIZE}).`,
      'User.posts(first)': `Page size, 0 to ${MAX_PAGE_SIZE}; default ${POSTS_PAGE_SIZE}.`,
      'User.orders(first)': `Page size, 0 to ${MAX_PAGE_SIZE}; default ${ORDERS_PAGE_SIZE}.`,
      'Organization.members': `Members by id ascending (${MEMBERS_PAGE_SIZE} by default, at most ${MAX_PAGE_SIZE}).`,
      'Organization.members(first)': `Page size, 0 to ${MAX_PAGE_SIZE}; default ${MEMBERS_PAGE_SIZE}.`,
      'Post.title': `Title, 1 to ${MAX_TITLE_LENGTH} characters.`,
      'Post.comments': `Comments, oldest first (${COMMENTS_PAGE_SIZE} by default, at most ${MAX_PAGE_SIZE}).`,
      'Post.comments(first)': `Page size, 0 to ${MAX_PAGE_SIZE}; default ${COMMENTS_PAGE_SIZE}.`,
      'CreatePostInput.title': `Title, 1 to ${MAX_TITLE_LENGTH} characters, not blank.`,
      'CreatePostInput.body': `Body, 1 to ${n(MAX_BODY_LENGTH)} characters, not blank.`,
      'CreatePostInput.tags': `Up to ${MAX_TAGS_PER_POST} tags, each 1 to ${MAX_TAG_LENGTH} characters.`,
      'AddCommentInput.body': `Comment text, 1 to ${n(MAX_COMMENT_LENGTH)} characters, not blank.`,
    };
    expect(Object.fromEntries(Object.keys(expected).map((path) => [path, described(path)]))).toEqual(
      expected,
    );

    // And no other description states a number (but cents / 100): a new one belongs above.
    const withNumbers: string[] = [];
    for (const type of types.values()) {
      if (type.name.startsWith('__')) continue;
      for (const field of type.inputFields ?? []) {
        if (/\d/.test(field.description ?? '')) withNumbers.push(`${type.name}.${field.name}`);
      }
      for (const field of type.fields ?? []) {
        if (/\d/.test(field.description ?? '')) withNumbers.push(`${type.name}.${field.name}`);
        for (const arg of field.args) {
          if (/\d/.test(arg.description ?? '')) withNumbers.push(`${type.name}.${field.name}(${arg.name})`);
        }
      }
    }
    expect(withNumbers.sort()).toEqual([...Object.keys(expected), 'Order.totalAmount'].sort());
  });

  it('Query.users takes what its description says, and refuses one more', async () => {
    const admin = await server.atrium.caller({ role: 'admin' });
    const most = await server.gql(`{ users(limit: ${MAX_USERS_PAGE}) { id } }`, {}, admin.headers);
    expect(most.errors).toBeUndefined();
    const over = await server.gql(`{ users(limit: ${MAX_USERS_PAGE + 1}) { id } }`, {}, admin.headers);
    expect(over.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(JSON.stringify(over.errors)).toContain(`limit must be an integer from 1 to ${MAX_USERS_PAGE}`);
  });
});
