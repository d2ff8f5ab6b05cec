import { createQueryId, type RootOperationNode } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';
import { testDialect } from '../helpers/database.js';
import { StatementGate } from '../helpers/statement-gate.js';
import { membersOf } from '../../src/domain/connection-reads.js';
import type { Connection, PageArgs } from '../../src/domain/connection.js';
import { childPagesSeed, SEED_TIME } from '../../bench/child-pages-seed.js';

/**
 * Pages under a parent (a post's comments, an author's posts, an organization's members) read
 * after or before a cursor: `ChildList.fetch` in `src/domain/child-lists.ts`.
 */

const T = SEED_TIME;
const pad = (prefix: string, n: number) => prefix + String(n).padStart(26, '0');

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  Plans?: PlanNode[];
}
const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];
const blocks = (plan: PlanNode) => plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];

/** The three lists as the services page them, with the cursor scope each one's cursors carry. */
function lists(atrium: TestAtrium) {
  const core = atrium.services.core;
  return {
    comments: {
      scope: (post: string) => `comments:${post}`,
      page: (post: string, args: PageArgs): Promise<Connection<{ id: string }>> =>
        core.comments.listByPost(null, post, args),
    },
    posts: {
      scope: (author: string) => `posts:author:${author}`,
      page: (author: string, args: PageArgs): Promise<Connection<{ id: string }>> =>
        core.posts.listByAuthor(null, author, args),
    },
    users: {
      scope: (org: string) => `members:${org}`,
      page: (org: string, args: PageArgs): Promise<Connection<{ id: string }>> =>
        membersOf(core.deps, org, args),
    },
  };
}
type Table = keyof ReturnType<typeof lists>;

/** The seed of bench/child-pages.ts (bench/README.md, "Pages under a parent") at a fifth of its size. */
const SEED = childPagesSeed(1);

describe.skipIf(testDialect() !== 'postgres')('pages under a parent range its (parent, id) index', () => {
  const gate = new StatementGate();
  let atrium: TestAtrium;
  let client: pg.Client;

  beforeAll(async () => {
    atrium = await startTestAtrium({}, undefined, { storePlugins: [gate] });
    client = new pg.Client({ connectionString: atrium.database.url });
    await client.connect();
    for (const statement of SEED) await client.query(statement);
  }, 120_000);
  afterAll(async () => {
    await client?.end();
    await atrium?.stop();
  });

  async function explain(node: RootOperationNode): Promise<PlanNode> {
    const compiled = atrium.services.store.db.getExecutor().compileQuery(node, createQueryId());
    const res = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${compiled.sql}`, [
      ...compiled.parameters,
    ]);
    return (res.rows[0]['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan;
  }

  /** A page as the service reads it, with the plan of every statement it ran on `table`. */
  async function page(table: Table, parent: string, args: PageArgs) {
    const recording = gate.record('SelectQueryNode', table);
    const connection = await lists(atrium)[table].page(parent, args);
    recording.stop();
    const plans: PlanNode[] = [];
    for (const node of recording.nodes) plans.push(await explain(node));
    return { ids: connection.edges.map((e) => e.node.id), plans };
  }

  const cursor = (table: Table, parent: string, id: string) =>
    atrium.services.deps.cursors.encode(lists(atrium)[table].scope(parent), { id, createdAt: T });

  // Each case is a page the primary key walk made expensive: the parent's rows end (or start)
  // near the cursor, or the newest of them are far from the table's newest, so walking the
  // primary key in id order past them read on through other parents' rows to the end of the table.
  const cases: {
    name: string;
    table: Table;
    index: string;
    parent: string;
    args: (c: (id: string) => string) => PageArgs;
    ids: string[];
    statements?: number;
  }[] = [
    {
      name: "a popular post's last comments, after a cursor",
      table: 'comments',
      index: 'comments_post_idx',
      parent: pad('pst_', 1),
      args: (c) => ({ first: 10, after: c(pad('cmt_', 9990)) }),
      ids: [9992, 9994, 9996, 9998].map((i) => pad('cmt_', i)),
    },
    {
      name: "a popular post's first comments, backward before a cursor",
      table: 'comments',
      index: 'comments_post_idx',
      parent: pad('pst_', 10),
      args: (c) => ({ last: 10, before: c(pad('cmt_', 90010)) }),
      ids: [90000, 90002, 90004, 90006, 90008].map((i) => pad('cmt_', i)),
    },
    {
      name: "a prolific author's newest posts (newest first), a first page through the pager",
      table: 'posts',
      index: 'posts_author_idx',
      parent: pad('usr_', 1),
      args: () => ({ first: 3 }),
      ids: [4000, 3995, 3990].map((i) => pad('pst_', i)),
      statements: 1,
    },
    {
      name: "a prolific author's newest posts, backward before a cursor",
      table: 'posts',
      index: 'posts_author_idx',
      parent: pad('usr_', 1),
      args: (c) => ({ last: 10, before: c(pad('pst_', 3990)) }),
      ids: [4000, 3995].map((i) => pad('pst_', i)),
    },
    {
      name: "a large organization's last members, after a cursor",
      table: 'users',
      index: 'users_org_idx',
      parent: 'org_mid',
      args: (c) => ({ first: 10, after: c(pad('usr_', 3995)) }),
      ids: [3996, 3997, 3998, 3999, 4000].map((i) => pad('usr_', i)),
    },
  ];

  for (const c of cases) {
    it(`${c.name}: ${c.index}, not the primary key`, async () => {
      const { ids, plans } = await page(
        c.table,
        c.parent,
        c.args((id) => cursor(c.table, c.parent, id)),
      );
      expect(ids).toEqual(c.ids);
      // The page and, after a cursor, the probe for rows on the cursor's other side.
      expect(plans).toHaveLength(c.statements ?? 2);
      for (const plan of plans) {
        const used = nodes(plan).flatMap((n) => n['Index Name'] ?? []);
        expect(used, JSON.stringify(plan)).toContain(c.index);
        expect(used, JSON.stringify(plan)).not.toContain(`${c.table}_pkey`);
        expect(blocks(plan), JSON.stringify(plan)).toBeLessThan(60);
      }
    });
  }
});

/**
 * The same pages on both engines, forward after cursors and backward before them, both list
 * orders (comments and members oldest first, posts newest first), against lists worked out here
 * from the seed: hidden posts, deleted authors and deleted members stay out.
 */
describe('pages under a parent after and before cursors', () => {
  let atrium: TestAtrium;
  const expected: Record<Table, Map<string, string[]>> = {
    comments: new Map(),
    posts: new Map(),
    users: new Map(),
  };

  beforeAll(async () => {
    atrium = await startTestAtrium();
    const db = atrium.services.store.db;
    await db
      .insertInto('organizations')
      .values(['org_a', 'org_b'].map((id) => ({ id, name: id, created_at: T, updated_at: T })))
      .execute();
    // Ids are not inserted in id order: users 1..40, every 7th deleted; odd ones in org_a.
    const userIds = Array.from({ length: 40 }, (_, i) => 40 - i);
    const deleted = (u: number) => u % 7 === 0;
    await db
      .insertInto('users')
      .values(
        userIds.map((u) => ({
          id: pad('usr_', u),
          organization_id: u % 2 ? 'org_a' : 'org_b',
          handle: `h${u}`,
          email: `h${u}@x.test`,
          role: 'member' as const,
          created_at: T,
          updated_at: T,
          deleted_at: deleted(u) ? T : null,
        })),
      )
      .execute();
    for (const org of ['org_a', 'org_b'])
      expected.users.set(
        org,
        userIds
          .filter((u) => (u % 2 ? 'org_a' : 'org_b') === org && !deleted(u))
          .sort((a, b) => a - b)
          .map((u) => pad('usr_', u)),
      );
    // Posts 1..120: author 1 wrote every 3rd (some by deleted author 7); every 10th is a draft,
    // every 11th scheduled for later.
    const authorOf = (p: number) => (p % 3 === 0 ? 1 : p % 5 === 0 ? 7 : 2 + (p % 5));
    const published = (p: number) => (p % 10 === 0 ? null : p % 11 === 0 ? '2999-01-01T00:00:00.000Z' : T);
    const postIds = Array.from({ length: 120 }, (_, i) => ((i * 37) % 120) + 1);
    await db
      .insertInto('posts')
      .values(
        postIds.map((p) => ({
          id: pad('pst_', p),
          author_id: pad('usr_', authorOf(p)),
          title: `t${p}`,
          body: `b${p}`,
          published_at: published(p),
          created_at: T,
          updated_at: T,
        })),
      )
      .execute();
    const visible = (p: number) => published(p) === T && !deleted(authorOf(p));
    for (const author of [1, 2, 7])
      expected.posts.set(
        pad('usr_', author),
        postIds
          .filter((p) => authorOf(p) === author && visible(p))
          .sort((a, b) => b - a)
          .map((p) => pad('pst_', p)),
      );
    // Comments 1..600: half on post 1, the others spread; every 13th by deleted user 14.
    const postOf = (c: number) => (c % 2 ? 1 : 2 + (c % 60));
    const authorOfComment = (c: number) => (c % 13 === 0 ? 14 : 1 + (c % 5));
    const commentIds = Array.from({ length: 600 }, (_, i) => ((i * 173) % 600) + 1);
    await db
      .insertInto('comments')
      .values(
        commentIds.map((c) => ({
          id: pad('cmt_', c),
          post_id: pad('pst_', postOf(c)),
          author_id: pad('usr_', authorOfComment(c)),
          body: `c${c}`,
          created_at: T,
          updated_at: T,
        })),
      )
      .execute();
    for (const post of [1, 3, 10, 12])
      expected.comments.set(
        pad('pst_', post),
        commentIds
          .filter((c) => postOf(c) === post && visible(post) && !deleted(authorOfComment(c)))
          .sort((a, b) => a - b)
          .map((c) => pad('cmt_', c)),
      );
  }, 60_000);
  afterAll(async () => {
    await atrium?.stop();
  });

  const all = (table: Table) => [...expected[table]].map(([parent, ids]) => ({ table, parent, ids }));

  it('the seed has long lists and empty ones', () => {
    expect(expected.comments.get(pad('pst_', 1))!.length).toBeGreaterThan(250);
    expect(expected.comments.get(pad('pst_', 10))).toEqual([]); // a draft
    expect(expected.posts.get(pad('usr_', 7))).toEqual([]); // a deleted author
    expect(expected.posts.get(pad('usr_', 1))!.length).toBeGreaterThan(25);
  });

  for (const table of ['comments', 'posts', 'users'] as const) {
    it(`${table}: forward pages after each cursor, backward pages before it, and windows between two`, async () => {
      const list = lists(atrium)[table];
      for (const { parent, ids } of all(table)) {
        const at = (id: string) =>
          atrium.services.deps.cursors.encode(list.scope(parent), { id, createdAt: T });
        const read = async (args: PageArgs) => {
          const connection = await list.page(parent, args);
          return {
            ids: connection.edges.map((e) => e.node.id),
            next: connection.pageInfo.hasNextPage,
            previous: connection.pageInfo.hasPreviousPage,
          };
        };
        // Walking forward by 7 from the start, and backward by 7 from the end, finds every row.
        const forward: string[] = [];
        let after: string | undefined;
        for (;;) {
          const p = await read({ first: 7, ...(after ? { after: at(after) } : {}) });
          forward.push(...p.ids);
          if (!p.next) break;
          after = p.ids.at(-1);
        }
        expect(forward).toEqual(ids);
        const backward: string[] = [];
        let before: string | undefined;
        for (;;) {
          const p = await read({ last: 7, ...(before ? { before: at(before) } : {}) });
          backward.unshift(...p.ids);
          if (!p.previous) break;
          before = p.ids[0];
        }
        expect(backward).toEqual(ids);
        // Every cursor in the list: the rows after it, before it, and between it and a later one.
        for (let i = 0; i < ids.length; i += 3) {
          const id = ids[i]!;
          const afterPage = await read({ first: 5, after: at(id) });
          expect(afterPage.ids).toEqual(ids.slice(i + 1, i + 6));
          expect(afterPage.next).toBe(i + 6 < ids.length);
          expect(afterPage.previous).toBe(true);
          const beforePage = await read({ last: 5, before: at(id) });
          expect(beforePage.ids).toEqual(ids.slice(Math.max(0, i - 5), i));
          expect(beforePage.previous).toBe(i - 5 > 0);
          expect(beforePage.next).toBe(true);
          const end = Math.min(ids.length - 1, i + 9);
          const window = await read({ first: 100, after: at(id), before: at(ids[end]!) });
          expect(window.ids).toEqual(ids.slice(i + 1, end));
        }
      }
    });
  }
});
