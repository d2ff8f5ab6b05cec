/** The time every seeded row carries (ids, not times, order the rows). */
export const SEED_TIME = '2026-01-01T00:00:00.000Z';

/**
 * The `generate_series` seed of the pages-under-a-parent measurements, at `scale` times its
 * smallest size (bench/child-pages.ts runs it at 5, test/integration/child-pages.test.ts at 1).
 * Ids are time-ordered, so a parent's rows sit together in id order, and a few parents hold a
 * large share of their table (5 % of the comments, 8 % of the posts, 20 % of the users), enough for
 * PostgreSQL's statistics to name them. At scale s: 3 organizations (5 members; usr_6 to
 * usr_{4,000 s}; the rest of 20,000 s users); 10,000 s posts, user 1 wrote every 5th of the first
 * 4,000 s; 100,000 s comments in 10 blocks of 10,000 s: in block b every other comment is on post
 * b+1, the rest on posts 11 to 10,000 s (about 5 each).
 */
export function childPagesSeed(scale: number): string[] {
  const T = SEED_TIME;
  const users = 20_000 * scale;
  const inMidOrg = 4_000 * scale;
  const posts = 10_000 * scale;
  const firstByUser1 = 4_000 * scale;
  const block = 10_000 * scale;
  return [
    `INSERT INTO organizations VALUES ('org_small', 'Small', '${T}', '${T}'), ('org_mid', 'Mid', '${T}', '${T}'),
     ('org_big', 'Big', '${T}', '${T}')`,
    `INSERT INTO users (id, organization_id, handle, email, role, created_at, updated_at)
   SELECT 'usr_' || lpad(i::text, 26, '0'),
     CASE WHEN i <= 5 THEN 'org_small' WHEN i <= ${inMidOrg} THEN 'org_mid' ELSE 'org_big' END,
     'u' || i, 'u' || i || '@x.test', 'member', '${T}', '${T}'
   FROM generate_series(1, ${users}) i`,
    `INSERT INTO posts (id, author_id, title, body, published_at, created_at, updated_at)
   SELECT 'pst_' || lpad(i::text, 26, '0'),
     'usr_' || lpad((CASE WHEN i % 5 = 0 AND i <= ${firstByUser1} THEN 1 ELSE 2 + i % 999 END)::text, 26, '0'),
     'Post ' || i, 'Body ' || i, '${T}', '${T}', '${T}'
   FROM generate_series(1, ${posts}) i`,
    `INSERT INTO comments (id, post_id, author_id, body, created_at, updated_at)
   SELECT 'cmt_' || lpad(i::text, 26, '0'),
     'pst_' || lpad((CASE WHEN i % 2 = 0 THEN 1 + i / ${block} ELSE 11 + (i::bigint * 7919) % ${posts - 10} END)::text, 26, '0'),
     'usr_' || lpad((1 + i % 1000)::text, 26, '0'), 'c', '${T}', '${T}'
   FROM generate_series(0, ${10 * block - 1}) i`,
    'ANALYZE',
  ];
}
