import { createQueryId, type RootOperationNode } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';
import { testDialect } from '../helpers/database.js';
import { StatementGate } from '../helpers/statement-gate.js';
import { SYSTEM_ACTOR } from '../../src/domain/actor.js';

const ROWS = 12_000; // page 500 of 20 starts after row 9,980
const PAGE = 20;
const DEEP = 500;

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Index Cond'?: string;
  Filter?: string;
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  Plans?: PlanNode[];
}

const blocks = (plan: PlanNode) => plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

/**
 * Issue 10 item 8: order and post cursors seek. EXPLAIN (ANALYZE, BUFFERS) of the very statements
 * the services run, on a seed large enough that a scan-and-filter would show: page 500 reads about
 * the blocks page 1 reads. PostgreSQL only (the planner under test).
 */
describe.skipIf(testDialect() !== 'postgres')('deep pages seek on PostgreSQL', () => {
  const gate = new StatementGate();
  let atrium: TestAtrium;
  let client: pg.Client;
  let owner: { userId: string; headers: Record<string, string> };

  beforeAll(async () => {
    atrium = await startTestAtrium({}, undefined, { storePlugins: [gate] });
    owner = await atrium.caller();
    client = new pg.Client({ connectionString: atrium.database.url });
    await client.connect();
    // Two owners' orders (two per created_at, so ties are broken by id) and one author's posts.
    await client.query(
      `INSERT INTO orders (id, owner_id, currency, status, subtotal_cents, discount_cents, amount_cents,
         coupon_code, shipping_address, created_at, updated_at)
       SELECT 'ord_' || lpad(i::text, 26, '0'), CASE WHEN i % 2 = 0 THEN $1 ELSE 'usr_someone_else' END,
         'USD', CASE WHEN i % 4 < 2 THEN 'PENDING' ELSE 'SHIPPED' END, 1000, 0, 1000, NULL, $3,
         to_char(timestamp '2026-01-01' + (i / 4) * interval '1 second', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
         '2026-01-01T00:00:00.000Z'
       FROM generate_series(1, $2::int * 2) AS i`,
      [
        owner.userId,
        ROWS,
        JSON.stringify({
          name: 'Ada',
          street: '1 Main St',
          city: 'London',
          postal_code: 'N1',
          country: 'GB',
        }),
      ],
    );
    await client.query(
      `INSERT INTO posts (id, author_id, title, body, published_at, created_at, updated_at)
       SELECT 'pst_' || lpad(i::text, 26, '0'), $1, 'Post ' || i, 'Body of post ' || i, NULL,
         '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'
       FROM generate_series(1, $2::int) AS i`,
      [owner.userId, ROWS],
    );
    await client.query('ANALYZE orders');
    await client.query('ANALYZE posts');
  }, 120_000);
  afterAll(async () => {
    await client?.end();
    await atrium?.stop();
  });

  /** EXPLAIN of a statement a service ran, with the values it ran with. */
  async function explain(node: RootOperationNode): Promise<PlanNode> {
    const compiled = atrium.services.store.db.getExecutor().compileQuery(node, createQueryId());
    return explainSql(compiled.sql, [...compiled.parameters]);
  }
  async function explainSql(text: string, values: unknown[]): Promise<PlanNode> {
    const res = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, values);
    return (res.rows[0]['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan;
  }

  /** The newest-first position of the row page `n` starts after, as a cursor and as values. */
  async function orderCursor(
    n: number,
    status?: string,
  ): Promise<{ cursor: string; id: string; createdAt: string }> {
    const row = await atrium.services.store.db
      .selectFrom('orders')
      .select(['id', 'created_at'])
      .where('owner_id', '=', owner.userId)
      .$if(status !== undefined, (q) => q.where('status', '=', status as 'PENDING'))
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .offset((n - 1) * PAGE - 1)
      .limit(1)
      .executeTakeFirstOrThrow();
    const scope = `orders:${owner.userId}:-created_at:${status ?? '*'}`;
    const position = { id: row.id, createdAt: row.created_at };
    return { cursor: atrium.services.deps.cursors.encode(scope, position), ...position };
  }

  /** GET /api/v2/orders as a client sends it; returns the list statement the service ran. */
  async function orderPage(query: string): Promise<{ ids: string[]; plan: PlanNode }> {
    const recording = gate.record('SelectQueryNode', 'orders');
    const res = await atrium.http!.inject({
      method: 'GET',
      url: `/api/v2/orders?${query}`,
      headers: owner.headers,
    });
    recording.stop();
    expect(res.statusCode).toBe(200);
    expect(recording.nodes).toHaveLength(1);
    return {
      ids: (res.json().data as { id: string }[]).map((o) => o.id),
      plan: await explain(recording.nodes[0]!),
    };
  }

  it('orders: page 500 seeks the owner index with a row comparison and reads what page 1 reads', async () => {
    const first = await orderPage(`limit=${PAGE}`);
    const at = await orderCursor(DEEP);
    const deep = await orderPage(`limit=${PAGE}&cursor=${at.cursor}`);
    expect(first.ids).toHaveLength(PAGE);
    expect(deep.ids).toHaveLength(PAGE);
    // Newest first: the deep page is 9,980 rows older than the first.
    expect(deep.ids[0]! < first.ids.at(-1)!).toBe(true);

    const scan = nodes(deep.plan).find((n) => n['Index Name'] === 'orders_owner_created_idx');
    expect(scan, JSON.stringify(deep.plan)).toBeDefined();
    expect(scan!['Index Cond']).toMatch(/ROW\(created_at, id\) < ROW\(/);
    expect(scan!.Filter).toBeUndefined();
    expect(blocks(deep.plan)).toBeLessThanOrEqual(blocks(first.plan) * 2 + 4);

    // Control: the same page with the OR condition the cursor used to have walks ~10,000 rows.
    const orForm = await explainSql(
      `SELECT * FROM orders WHERE owner_id = $1 AND (created_at < $2 OR (created_at = $2 AND id < $3))
       ORDER BY created_at DESC, id DESC LIMIT ${PAGE + 1}`,
      [owner.userId, at.createdAt, at.id],
    );
    expect(blocks(orForm)).toBeGreaterThan(blocks(deep.plan) * 10);
  });

  it('orders filtered by status: a deep page (250 of 300) seeks the status index too', async () => {
    const first = await orderPage(`limit=${PAGE}&status=PENDING`);
    const deep = await orderPage(
      `limit=${PAGE}&status=PENDING&cursor=${(await orderCursor(DEEP / 2, 'PENDING')).cursor}`,
    );
    expect(deep.ids).toHaveLength(PAGE);
    const scan = nodes(deep.plan).find((n) => n['Index Name'] === 'orders_owner_status_created_idx');
    expect(scan, JSON.stringify(deep.plan)).toBeDefined();
    expect(scan!['Index Cond']).toMatch(/ROW\(created_at, id\) < ROW\(/);
    expect(blocks(deep.plan)).toBeLessThanOrEqual(blocks(first.plan) * 2 + 4);
  });

  it('posts: page 500 seeks the primary key by the time-ordered id and reads what page 1 reads', async () => {
    const page = async (after?: string) => {
      const recording = gate.record('SelectQueryNode', 'posts');
      const connection = await atrium.services.core.posts.list(SYSTEM_ACTOR, {
        first: PAGE,
        ...(after ? { after } : {}),
      });
      recording.stop();
      // The page itself is the statement that asks for one row more than the page.
      // One after another: a pg Client runs one query at a time (queuing them is deprecated in pg 8).
      const plans: PlanNode[] = [];
      for (const node of recording.nodes) plans.push(await explain(node));
      const compiled = recording.nodes.map((n) =>
        atrium.services.store.db.getExecutor().compileQuery(n, createQueryId()),
      );
      const index = compiled.findIndex((c) => c.parameters.includes(PAGE + 1));
      expect(index).toBeGreaterThanOrEqual(0);
      return { connection, plan: plans[index]! };
    };
    const first = await page();
    const startRow = await atrium.services.store.db
      .selectFrom('posts')
      .select(['id', 'created_at'])
      .orderBy('id', 'desc')
      .offset((DEEP - 1) * PAGE - 1)
      .limit(1)
      .executeTakeFirstOrThrow();
    const cursor = atrium.services.deps.cursors.encode('posts', {
      id: startRow.id,
      createdAt: startRow.created_at,
    });
    const deep = await page(cursor);
    expect(first.connection.edges).toHaveLength(PAGE);
    expect(deep.connection.edges).toHaveLength(PAGE);
    expect(deep.connection.pageInfo.hasPreviousPage).toBe(true);

    const scan = nodes(deep.plan).find((n) => n['Index Name'] === 'posts_pkey');
    expect(scan, JSON.stringify(deep.plan)).toBeDefined();
    expect(scan!['Index Cond']).toMatch(/id < /);
    expect(blocks(deep.plan)).toBeLessThanOrEqual(blocks(first.plan) * 2 + 4);
  });
});

if (testDialect() !== 'postgres') {
  console.error(
    'paging-explain: skipped on SQLite; the seek under test is a PostgreSQL planner property ' +
      '(set TEST_DATABASE_URL to run it).',
  );
}
