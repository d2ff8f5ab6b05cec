import { beforeAll, describe, expect, it } from 'vitest';
import { codes, type GraphQLServer, graphQLServerForSuite } from './support.js';

describe('GraphQL users: reads, email visibility, updateUser', () => {
  const s = graphQLServerForSuite();
  let admin: Awaited<ReturnType<GraphQLServer['atrium']['caller']>>;
  let alice: typeof admin;
  let bob: typeof admin;
  beforeAll(async () => {
    admin = await s.atrium.caller({ role: 'admin', handle: 'gqladmin' });
    alice = await s.atrium.caller({ handle: 'gqlalice' });
    bob = await s.atrium.caller({ handle: 'gqlbob' });
  });

  it('me answers the caller with every field, deprecated ones included', async () => {
    const res = await s.gql(
      '{ me { id handle email firstName lastName username fullName role createdAt updatedAt } }',
      {},
      alice.headers,
    );
    expect(res.errors).toBeUndefined();
    const me = res.data!.me as Record<string, unknown>;
    expect(me).toMatchObject({
      id: alice.userId,
      handle: 'gqlalice',
      email: 'gqlalice@example.com',
      firstName: 'Test',
      lastName: 'gqlalice',
      username: 'gqlalice',
      fullName: 'Test gqlalice',
      role: 'MEMBER',
    });
    expect(me.createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  });

  it('me without credentials is UNAUTHENTICATED with data null', async () => {
    const res = await s.gql('{ me { id } }');
    expect(res.data).toBeNull();
    expect(codes(res)).toEqual(['UNAUTHENTICATED']);
    expect(res.errors![0]!.path).toEqual(['me']);
  });

  it("another user's email is an error that nulls user(id), with the error at the email path", async () => {
    const res = await s.gql(
      'query($id: ID!) { user(id: $id) { handle email } }',
      { id: bob.userId },
      alice.headers,
    );
    expect(res.data).toEqual({ user: null });
    expect(res.errors).toHaveLength(1);
    expect(res.errors![0]!.path).toEqual(['user', 'email']);
    expect(res.errors![0]!.extensions!.code).toBe('FORBIDDEN');
  });

  it('without the email, another user reads fine; the user themself and an admin see the email', async () => {
    const other = await s.gql(
      'query($id: ID!) { user(id: $id) { handle } }',
      { id: bob.userId },
      alice.headers,
    );
    expect(other).toMatchObject({ data: { user: { handle: 'gqlbob' } } });
    expect(other.errors).toBeUndefined();
    const self = await s.gql('query($id: ID!) { user(id: $id) { email } }', { id: bob.userId }, bob.headers);
    expect(self.data).toEqual({ user: { email: 'gqlbob@example.com' } });
    const byAdmin = await s.gql(
      'query($id: ID!) { user(id: $id) { email } }',
      { id: bob.userId },
      admin.headers,
    );
    expect(byAdmin.data).toEqual({ user: { email: 'gqlbob@example.com' } });
  });

  it('user(id) of an unknown id is null without error; a wrong variable type is refused', async () => {
    const res = await s.gql('query($id: ID!) { user(id: $id) { id } }', { id: 'usr_nope' }, alice.headers);
    expect(res).toMatchObject({ data: { user: null } });
    expect(res.errors).toBeUndefined();
    const bad = await s.gql('query($id: ID!) { user(id: $id) { id } }', { id: { x: 1 } }, alice.headers);
    expect(bad.data).toBeUndefined();
    expect(bad.errors![0]!.message).toMatch(/\$id/);
  });

  it('users lists by role (case-insensitive) and refuses an unknown role', async () => {
    const res = await s.gql('{ users(role: "ADMIN") { handle role } }', {}, admin.headers);
    expect(res.data).toEqual({ users: [{ handle: 'gqladmin', role: 'ADMIN' }] });
    const bad = await s.gql('{ users(role: "king") { id } }', {}, admin.headers);
    expect(codes(bad)).toEqual(['BAD_USER_INPUT']);
    const anon = await s.gql('{ users { id } }');
    expect(codes(anon)).toEqual(['UNAUTHENTICATED']);
  });

  it('updateUser: self changes name and email; blank name and bad email are BAD_USER_INPUT', async () => {
    const ok = await s.gql(
      'mutation($id: ID!, $in: UpdateUserInput!) { updateUser(id: $id, input: $in) { firstName lastName email } }',
      { id: alice.userId, in: { name: 'Alice Liddell', email: 'alice@example.org' } },
      alice.headers,
    );
    expect(ok.data).toEqual({
      updateUser: { firstName: 'Alice', lastName: 'Liddell', email: 'alice@example.org' },
    });
    const blank = await s.gql(
      'mutation($id: ID!) { updateUser(id: $id, input: { name: "   " }) { id } }',
      { id: alice.userId },
      alice.headers,
    );
    expect(blank.data).toBeNull();
    expect(codes(blank)).toEqual(['BAD_USER_INPUT']);
    expect(blank.errors![0]!.extensions!.details).toEqual([
      { field: 'name', message: expect.stringMatching(/blank/) },
    ]);
    const badEmail = await s.gql(
      'mutation($id: ID!) { updateUser(id: $id, input: { email: "nope" }) { id } }',
      { id: alice.userId },
      alice.headers,
    );
    expect(codes(badEmail)).toEqual(['BAD_USER_INPUT']);
  });

  it('updateUser: a non-admin may not change another user or a role; an admin may', async () => {
    const other = await s.gql(
      'mutation($id: ID!) { updateUser(id: $id, input: { name: "Evil Eve" }) { id } }',
      { id: bob.userId },
      alice.headers,
    );
    expect(other.data).toBeNull();
    expect(codes(other)).toEqual(['FORBIDDEN']);
    const role = await s.gql(
      'mutation($id: ID!) { updateUser(id: $id, input: { role: ADMIN }) { role } }',
      { id: alice.userId },
      alice.headers,
    );
    expect(codes(role)).toEqual(['FORBIDDEN']);
    const badEnum = await s.gql(
      'mutation($id: ID!) { updateUser(id: $id, input: { role: KING }) { role } }',
      { id: alice.userId },
      alice.headers,
    );
    expect(badEnum.data).toBeUndefined();
    expect(badEnum.errors).toHaveLength(1);
    const byAdmin = await s.gql(
      'mutation($id: ID!) { updateUser(id: $id, input: { role: VIEWER }) { role } }',
      { id: bob.userId },
      admin.headers,
    );
    expect(byAdmin.data).toEqual({ updateUser: { role: 'VIEWER' } });
    const unknown = await s.gql(
      'mutation { updateUser(id: "usr_missing", input: { name: "X Y" }) { id } }',
      {},
      admin.headers,
    );
    expect(codes(unknown)).toEqual(['NOT_FOUND']);
    const anon = await s.gql('mutation($id: ID!) { updateUser(id: $id, input: { name: "A B" }) { id } }', {
      id: bob.userId,
    });
    expect(codes(anon)).toEqual(['UNAUTHENTICATED']);
  });

  it('organization: members and admins read it; others get FORBIDDEN; node(id) resolves users', async () => {
    const res = await s.gql(
      '{ me { organization { id name members(first: 2) { totalCount edges { node { handle } } pageInfo { hasNextPage } } } } }',
      {},
      alice.headers,
    );
    expect(res.errors).toBeUndefined();
    const org = (
      res.data!.me as {
        organization: { id: string; members: { totalCount: number; pageInfo: { hasNextPage: boolean } } };
      }
    ).organization;
    expect(org.members.totalCount).toBe(3);
    expect(org.members.pageInfo.hasNextPage).toBe(true);
    const other = await s.atrium.services.core.organizations.create({ name: 'Elsewhere' });
    const node = await s.gql(
      'query($id: ID!) { node(id: $id) { __typename id } }',
      { id: other.id },
      alice.headers,
    );
    expect(node.data).toEqual({ node: null });
    const byAdmin = await s.gql(
      'query($id: ID!) { node(id: $id) { __typename ... on Organization { name } } }',
      { id: other.id },
      admin.headers,
    );
    expect(byAdmin.data).toEqual({ node: { __typename: 'Organization', name: 'Elsewhere' } });
    const user = await s.gql(
      'query($id: ID!) { node(id: $id) { __typename ... on User { handle } } }',
      { id: bob.userId },
      alice.headers,
    );
    expect(user.data).toEqual({ node: { __typename: 'User', handle: 'gqlbob' } });
  });
  it('refuses an explicit null role as it refuses a null name, naming the field', async () => {
    for (const input of ['{ role: null }', '{ name: null }']) {
      const res = await s.gql(
        `mutation { updateUser(id: "${bob.userId}", input: ${input}) { role fullName } }`,
        {},
        admin.headers,
      );
      expect(codes(res), input).toEqual(['BAD_USER_INPUT']);
      const details = res.errors![0]!.extensions!.details as Array<{ field: string }>;
      expect(details.map((d) => d.field)).toEqual([input.includes('role') ? 'role' : 'name']);
    }
  });

  it('answers me for a client acting for itself with FORBIDDEN saying why, not a missing user', async () => {
    const oauth = s.atrium.services.oauth!;
    const client = await oauth.clients.create({ name: 'Machine', scopes: 'profile:read users:read' });
    const { token } = await oauth.tokens.issue({
      subject: client.client_id,
      clientId: client.client_id,
      scope: ['profile:read'],
    });
    const res = await s.gql('{ me { id } }', {}, { authorization: `Bearer ${token}` });
    expect(codes(res)).toEqual(['FORBIDDEN']);
    expect(res.errors![0]!.message).toMatch(/credentials of a user/);
  });
});
