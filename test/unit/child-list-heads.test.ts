import { randomBytes } from 'node:crypto';
import { createQueryId, type KyselyPlugin, type RootOperationNode, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/domain/actor.js';
import { type Core, createCore } from '../../src/domain/core.js';
import { CursorCodec } from '../../src/domain/cursor.js';
import { DomainBus } from '../../src/events/bus.js';
import { openStore, type Store } from '../../src/store/store.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

const USERS = 30_000; // every 50th deleted
const POSTS = 4; // post 4's author (user 50) is deleted
const COMMENTS = 6000; // comment i is on post (i % 4) + 1, by user ((i * 7) % 1500) + 1
const FIRST = 3;

const pad = (n: number) => String(n).padStart(26, '0');
const userId = (n: number) => `usr_${pad(n)}`;
const postId = (n: number) => `pst_${pad(n)}`;
const commentId = (n: number) => `cmt_${pad(n)}`;
const postAuthor = (p: number) => (p === POSTS ? 50 : p);
const commentAuthor = (i: number) => ((i * 7) % USERS) + 1;
const deleted = (u: number) => u % 50 === 0;

/** The oracle: the ids of post `p`'s comments anyone sees, oldest first, from the seed's formulas. */
function visibleComments(p: number): string[] {
  if (deleted(postAuthor(p))) return [];
  const out: string[] = [];
  for (let i = 1; i <= COMMENTS; i++)
    if ((i % POSTS) + 1 === p && !deleted(commentAuthor(i))) out.push(commentId(i));
  return out;
}

/**
 * First pages of many parents' child lists (one statement for all parents) against per-parent
 * paging, on a seed where posts have thousands of comments, some by deleted users, and one post's
 * author is deleted. The plans are held to reading about `first + 1` comments per post and to
 * probing users by primary key instead of scanning them.
 */
describe('first pages of many posts', () => {
  let database: TestDatabase;
  let store: Store;
  let core: Core;
  const recorded: RootOperationNode[] = [];
  const recorder: KyselyPlugin = {
    transformQuery: (args) => (recorded.push(args.node), args.node),
    transformResult: async (args) => args.result,
  };
  const admin: Actor = { id: userId(1), kind: 'user', role: 'admin' };

  beforeAll(async () => {
    database = await freshDatabase();
    store = openStore(database.url, { poolSize: 2, plugins: [recorder] });
    await store.migrate();
    const pg = store.dialect === 'postgres';
    const id = (prefix: string, e: string) =>
      pg ? `'${prefix}_' || lpad((${e})::text, 26, '0')` : `'${prefix}_' || printf('%026d', ${e})`;
    const series = (n: number) =>
      pg
        ? `generate_series(1, ${n}) as g(i)`
        : `(with recursive s(i) as (select 1 union all select i + 1 from s where i < ${n}) select i from s) as g`;
    const at = `'2026-01-01T00:00:00.000Z'`;
    const run = (text: string) => sql.raw(text).execute(store.db);
    await run(
      `insert into organizations (id, name, created_at, updated_at) values ('org_${pad(1)}', 'o', ${at}, ${at})`,
    );
    await run(`insert into users (id, organization_id, handle, email, role, created_at, updated_at, deleted_at)
      select ${id('usr', 'i')}, 'org_${pad(1)}', 'h' || i, 'e' || i || '@example.com', 'member', ${at}, ${at},
        case when i % 50 = 0 then ${at} else null end
      from ${series(USERS)}`);
    await run(`insert into posts (id, author_id, title, body, published_at, created_at, updated_at)
      select ${id('pst', 'i')}, ${id('usr', `case when i = ${POSTS} then 50 else i end`)}, 't', 'b', ${at}, ${at}, ${at}
      from ${series(POSTS)}`);
    await run(`insert into comments (id, post_id, author_id, body, created_at, updated_at)
      select ${id('cmt', 'i')}, ${id('pst', `(i % ${POSTS}) + 1`)}, ${id('usr', `((i * 7) % ${USERS}) + 1`)}, 'c', ${at}, ${at}
      from ${series(COMMENTS)}`);
    await run('analyze');
    const deps = {
      store,
      clock: { now: () => new Date('2026-06-01T00:00:00.000Z') },
      bus: new DomainBus(),
      cursors: new CursorCodec(randomBytes(32)),
    };
    core = createCore(deps);
  }, 120_000);
  afterAll(async () => {
    await store?.close();
    await database?.drop();
  });

  const posts = [1, 2, 3, 4].map(postId);

  it('gives each post the page per-post paging gives, in order, hiding deleted authors', async () => {
    for (const viewer of [null, admin]) {
      const pages = await core.comments.firstPagesByPosts(viewer, [...posts, posts[0]!], FIRST);
      expect([...pages.keys()].sort()).toEqual(posts);
      for (let p = 1; p <= POSTS; p++) {
        const expected = visibleComments(p);
        const page = pages.get(postId(p))!;
        expect(page.edges.map((e) => e.node.id)).toEqual(expected.slice(0, FIRST));
        expect(page.pageInfo.hasNextPage).toBe(expected.length > FIRST);
        const single = await core.comments.listByPost(viewer, postId(p), { first: FIRST });
        expect(page.edges.map((e) => e.node.id)).toEqual(single.edges.map((e) => e.node.id));
        if (expected.length === 0) continue;
        // The batch's cursors continue with per-post paging.
        const next = await core.comments.listByPost(viewer, postId(p), {
          first: FIRST,
          after: page.pageInfo.endCursor!,
        });
        expect(next.edges.map((e) => e.node.id)).toEqual(expected.slice(FIRST, 2 * FIRST));
      }
    }
  });

  type Statement = { sql: string; parameters: readonly unknown[]; query: RootOperationNode };

  /** EXPLAIN `how` of a statement a service sent, with the values it sent. */
  function explain<R>(how: string, statement: Statement) {
    return store.db.executeQuery<R>({
      ...statement,
      sql: `explain ${how} ${statement.sql}`,
      queryId: createQueryId(),
    });
  }

  it('pages more parents than one SQLite compound statement may hold', async () => {
    const many = Array.from({ length: 600 }, (_, i) => postId(i + 1));
    const pages = await core.comments.firstPagesByPosts(null, many, FIRST);
    expect(pages.size).toBe(600);
    expect(pages.get(postId(1))!.edges.map((e) => e.node.id)).toEqual(visibleComments(1).slice(0, FIRST));
    expect(pages.get(postId(600))!.edges).toEqual([]);
  });

  /** The page statement `firstPagesByPosts` sends (not the count), as SQL with its values. */
  async function pageStatement(): Promise<Statement> {
    recorded.length = 0;
    await core.comments.firstPagesByPosts(null, posts.slice(0, 3), FIRST);
    const compiled = recorded
      .map((node) => store.db.getExecutor().compileQuery(node, createQueryId()))
      .filter((c) => !/count\(/i.test(c.sql));
    // Parts of a composed statement are seen too: the whole is the longest.
    return compiled.reduce((a, b) => (b.sql.length > a.sql.length ? b : a));
  }

  it('reads about first + 1 comments per post and probes users by key (PostgreSQL)', async (ctx) => {
    if (store.dialect !== 'postgres') ctx.skip();
    interface PlanNode {
      'Node Type': string;
      'Relation Name'?: string;
      'Actual Rows': number;
      'Actual Loops': number;
      Plans?: PlanNode[];
    }
    const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];
    const statement = await pageStatement();
    const res = await explain<{ 'QUERY PLAN': { Plan: PlanNode }[] }>('(analyze, format json)', statement);
    const plan = nodes(res.rows[0]!['QUERY PLAN'][0]!.Plan);
    const read = (table: string) =>
      plan
        .filter((n) => n['Relation Name'] === table)
        .reduce((s, n) => s + n['Actual Rows'] * n['Actual Loops'], 0);
    // 1,500 comments per post; the page needs FIRST + 1 visible ones (2% are by deleted users).
    expect(read('comments'), JSON.stringify(plan[0])).toBeLessThanOrEqual(3 * (FIRST + 1) * 2);
    // Neither comments nor users is read in full; posts (4 rows here) may be, as the planner sees fit.
    const scanned = plan.filter((n) => n['Node Type'] === 'Seq Scan').map((n) => n['Relation Name']);
    expect(scanned.filter((table) => table !== 'posts')).toEqual([]);
  });

  it('probes users and posts by key instead of scanning them (SQLite)', async (ctx) => {
    if (store.dialect !== 'sqlite') ctx.skip();
    const planOf = async (statement: Statement) =>
      (await explain<{ detail: string }>('query plan', statement)).rows.map((r) => r.detail);
    const comments = await planOf(await pageStatement());
    expect(
      comments.filter((d) => /^SCAN (du|users|vp|posts|comments)\b/.test(d)),
      comments.join('\n'),
    ).toEqual([]);

    recorded.length = 0;
    await core.posts.list(null, { first: FIRST });
    const list = recorded
      .map((node) => store.db.getExecutor().compileQuery(node, createQueryId()))
      .find((c) => !/count\(/i.test(c.sql))!;
    const posts = await planOf(list);
    expect(
      posts.filter((d) => /^SCAN (du|users)\b/.test(d)),
      posts.join('\n'),
    ).toEqual([]);
  });
});
