/**
 * EXPLAIN (ANALYZE, BUFFERS) of the pages read under a parent (a post's comments, an author's
 * posts, an organization's members) after and before a cursor, on a seeded PostgreSQL database:
 *
 *   node --import tsx bench/child-pages.ts [postgres://postgres@127.0.0.1:5432/postgres] [database]
 *
 * Creates (or recreates) the database (default `atrium_bench_child_pages`) on that server,
 * migrates it, seeds it with `generate_series` (about 10 s) and ANALYZEs it, then reads each page
 * through the services and prints, per page, the plan of the statement that reads the page: its
 * execution time, shared buffers and the indexes it scans. bench/README.md, "Pages under a parent".
 */
import { randomBytes } from 'node:crypto';
import { createQueryId, type KyselyPlugin, type RootOperationNode } from 'kysely';
import pg from 'pg';
import { systemClock } from '../src/domain/clock.js';
import { membersOf } from '../src/domain/connection-reads.js';
import type { Connection, PageArgs } from '../src/domain/connection.js';
import { createCore } from '../src/domain/core.js';
import { CursorCodec } from '../src/domain/cursor.js';
import { DomainBus } from '../src/events/bus.js';
import { openStore } from '../src/store/store.js';
import { childPagesSeed, SEED_TIME } from './child-pages-seed.js';

const admin = process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const name = process.argv[3] ?? 'atrium_bench_child_pages';
const T = SEED_TIME;

const SEED = childPagesSeed(5);

const pad = (prefix: string, n: number) => prefix + String(n).padStart(26, '0');

const adminClient = new pg.Client({ connectionString: admin });
await adminClient.connect();
await adminClient.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
await adminClient.query(`CREATE DATABASE ${name}`);
await adminClient.end();
const url = new URL(admin);
url.pathname = `/${name}`;

const recorded: RootOperationNode[] = [];
const recorder: KyselyPlugin = {
  transformQuery: ({ node }) => {
    recorded.push(node);
    return node;
  },
  transformResult: ({ result }) => Promise.resolve(result),
};
const store = openStore(url.toString(), { plugins: [recorder] });
await store.migrate();
const client = new pg.Client({ connectionString: url.toString() });
await client.connect();
const seeding = performance.now();
for (const statement of SEED) await client.query(statement);
console.log(`seeded and analyzed in ${((performance.now() - seeding) / 1000).toFixed(1)} s`);

const cursors = new CursorCodec(randomBytes(32));
const deps = { store, clock: systemClock, bus: new DomainBus(), cursors };
const core = createCore(deps);
type Page = (parent: string, args: PageArgs) => Promise<Connection<{ id: string }>>;
const lists: Record<string, { scope: (p: string) => string; page: Page }> = {
  comments: {
    scope: (post) => `comments:${post}`,
    page: (post, args) => core.comments.listByPost(null, post, args),
  },
  posts: {
    scope: (author) => `posts:author:${author}`,
    page: (author, args) => core.posts.listByAuthor(null, author, args),
  },
  users: { scope: (org) => `members:${org}`, page: (org, args) => membersOf(deps, org, args) },
};

// [list, parent, what, cursor id]: each cursor is read forward (`first: 10, after`) and
// backward (`last: 10, before`), so each list is read in both orders; no cursor ('') reads
// `first: 10` and `last: 10` through the same pager (GraphQL reads first pages in batches instead).
const cases: [string, string, string, string][] = [
  ['comments', pad('pst_', 1), 'post of 25,000, at its end', pad('cmt_', 49990)],
  ['comments', pad('pst_', 10), 'post of 25,000, at its start', pad('cmt_', 450010)],
  ['comments', pad('pst_', 5), 'post of 25,000, mid', pad('cmt_', 225000)],
  ['comments', pad('pst_', 30002), 'post of 10', pad('cmt_', 250001)],
  ['comments', pad('pst_', 10), 'post 10 of 25,000, no cursor', ''],
  ['comments', pad('pst_', 1), 'post 1 of 25,000, no cursor', ''],
  ['posts', pad('usr_', 1), 'author of 4,000, newest', pad('pst_', 19995)],
  ['posts', pad('usr_', 1), 'author of 4,000, mid', pad('pst_', 10000)],
  ['posts', pad('usr_', 500), 'author of 50', pad('pst_', 25000)],
  ['users', 'org_mid', 'org of 19,995, end', pad('usr_', 19990)],
  ['users', 'org_mid', 'org of 19,995, start', pad('usr_', 10)],
  ['users', 'org_small', 'org of 5', pad('usr_', 2)],
];

console.log('list     | page                          | read     | rows |       ms | buffers | indexes');
for (const [table, parent, what, id] of cases) {
  const list = lists[table]!;
  const cursor = id && cursors.encode(list.scope(parent), { id, createdAt: T });
  for (const [read, args] of [
    ['forward', cursor ? { first: 10, after: cursor } : { first: 10 }],
    ['backward', cursor ? { last: 10, before: cursor } : { last: 10 }],
  ] as const) {
    recorded.length = 0;
    const connection = await list.page(parent, args);
    // The pager's statements: the page, then (with a cursor) the probe for rows on its other side.
    if (recorded.length !== (cursor ? 2 : 1)) throw new Error(`ran ${recorded.length} statements`);
    const compiled = store.db.getExecutor().compileQuery(recorded[0]!, createQueryId());
    const res = await client.query(`EXPLAIN (ANALYZE, BUFFERS) ${compiled.sql}`, [...compiled.parameters]);
    const text = res.rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
    const ms = /Execution Time: ([\d.]+) ms/.exec(text)![1]!;
    const buffers = /Buffers: shared hit=(\d+)(?: read=(\d+))?/.exec(text)!;
    const indexes = [...text.matchAll(/Index (?:Only )?Scan(?: Backward)? using (\w+) on (\w+)/g)]
      .filter((m) => m[2] === table)
      .map((m) => m[1]);
    const bitmap = [...text.matchAll(/Bitmap Index Scan on (\w+)/g)].map((m) => `${m[1]} (bitmap)`);
    console.log(
      [
        table.padEnd(8),
        what.padEnd(29),
        read.padEnd(8),
        String(connection.edges.length).padStart(4),
        ms.padStart(8),
        String(Number(buffers[1]) + Number(buffers[2] ?? 0)).padStart(7),
        [...indexes, ...bitmap].join(', '),
      ].join(' | '),
    );
  }
}
await client.end();
await store.close();
