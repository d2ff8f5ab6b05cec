import { beforeAll, describe, expect, it } from 'vitest';
import { type GraphQLServer, graphQLServerForSuite } from './support.js';

interface Members {
  totalCount: number;
  edges: Array<{ cursor: string; node: { handle: string } }>;
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}
type UsersAnswer = { users: Array<{ handle: string; organization: { id: string; members: Members } }> };

/**
 * `Organization.members` used to be read per user: `users(limit: N) { organization { members } }`
 * ran about two statements per user (6, 14, 24, 43, 83 for 1, 5, 10, 20, 40 users on PostgreSQL)
 * although twenty users share four organizations. Its first pages are now loaded for every
 * organization of the operation at once, as `Post.comments` and `User.posts` are.
 */
describe('GraphQL Organization.members: first pages batched', () => {
  const s = graphQLServerForSuite();
  let admin: Awaited<ReturnType<GraphQLServer['atrium']['caller']>>;
  const orgIds: string[] = [];

  beforeAll(async () => {
    admin = await s.atrium.caller({ role: 'admin', handle: 'membersadmin' });
    const { core } = s.atrium.services;
    for (let o = 0; o < 4; o++) orgIds.push((await core.organizations.create({ name: `Org ${o}` })).id);
    for (let i = 0; i < 20; i++) {
      const handle = `member${String(i).padStart(2, '0')}`;
      await core.users.create({
        handle,
        email: `${handle}@example.com`,
        name: `Member ${i}`,
        role: 'member',
        organizationId: orgIds[i % 4]!,
      });
    }
  });

  const query = `query($n: Int) { users(limit: $n) { handle organization { id
    members(first: 2) { totalCount edges { cursor node { handle } } pageInfo { hasNextPage endCursor } } } } }`;

  const run = async (n: number) => {
    const before = s.atrium.services.store.statementCount();
    const res = await s.gql(query, { n }, admin.headers);
    const statements = s.atrium.services.store.statementCount() - before;
    expect(res.errors).toBeUndefined();
    return { statements, data: res.data as unknown as UsersAnswer };
  };

  it('costs the same number of statements for 1 and 20 users', async () => {
    await run(1);
    const one = await run(1);
    const twenty = await run(20);
    expect(twenty.data.users).toHaveLength(20);
    expect(twenty.statements).toBe(one.statements);
  });

  it('answers the same pages as before: 2 members by id, the total, and a cursor that continues', async () => {
    const { data } = await run(21);
    const byOrg = new Map(data.users.map((u) => [u.organization.id, u.organization.members]));
    for (const [o, orgId] of orgIds.entries()) {
      const members = byOrg.get(orgId)!;
      expect(members.totalCount).toBe(5);
      expect(members.edges.map((e) => e.node.handle)).toEqual([`member0${o}`, `member0${o + 4}`]);
      expect(members.pageInfo.hasNextPage).toBe(true);
      // The batched page's cursor continues through the per-organization pager.
      const next = await s.gql(
        `query($id: ID!, $after: String) { node(id: $id) { ... on Organization {
          members(first: 2, after: $after) { edges { node { handle } } pageInfo { hasNextPage hasPreviousPage } } } } }`,
        { id: orgId, after: members.pageInfo.endCursor },
        admin.headers,
      );
      expect(next.errors).toBeUndefined();
      const page = (next.data!.node as { members: Members & { pageInfo: { hasPreviousPage: boolean } } })
        .members;
      expect(page.edges.map((e) => e.node.handle)).toEqual([
        `member${String(o + 8).padStart(2, '0')}`,
        `member${String(o + 12).padStart(2, '0')}`,
      ]);
      expect(page.pageInfo).toEqual({ hasNextPage: true, hasPreviousPage: true });
    }
  });

  it('refuses a page size over 100 as BAD_USER_INPUT at the members path', async () => {
    const res = await s.gql(
      '{ users(limit: 2) { organization { members(first: 101) { totalCount } } } }',
      {},
      admin.headers,
    );
    // `members`, `organization` and `users` are non-null, so the first error nulls the answer.
    expect(res.data).toBeNull();
    expect(res.errors!.length).toBeGreaterThan(0);
    for (const e of res.errors!) {
      expect(e.extensions?.code).toBe('BAD_USER_INPUT');
      expect(e.path).toEqual(['users', expect.any(Number), 'organization', 'members']);
    }
  });
});
