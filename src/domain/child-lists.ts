import {
  type Expression,
  type Kysely,
  PostgresAdapter,
  type SelectQueryBuilder,
  type SqlBool,
  sql,
} from 'kysely';
import type { Db } from '../store/store.js';
import type { CommentRow, PostRow, UserRow } from '../store/types.js';
import { COMMENT_COLUMNS, POST_COLUMNS } from '../store/columns.js';
import type { CursorCodec } from './cursor.js';
import {
  checkFirst,
  type Connection,
  firstPages,
  type KeyBound,
  lazyCount,
  type Order,
  type PageArgs,
  paginate,
} from './connection.js';

/** The lists paged under a parent row: a post's comments, an author's posts, an organization's members. */
interface Children {
  comments: { parent: 'post_id'; row: CommentRow };
  posts: { parent: 'author_id'; row: PostRow };
  users: { parent: 'organization_id'; row: UserRow };
}

/**
 * The queries only name `id`, `created_at` and the parent column, so one untyped view of the
 * table serves both lists; the rows are handed back as the table's own.
 */
type Loose = Kysely<Record<string, Record<string, unknown>>>;
type Seek = SelectQueryBuilder<Record<string, Record<string, unknown>>, string, Record<string, unknown>>;

/** The columns read of each listed table (`columns.ts`): users have no column a read must skip. */
const COLUMNS: Record<keyof Children, readonly string[] | undefined> = {
  comments: COMMENT_COLUMNS,
  posts: POST_COLUMNS,
  users: undefined,
};

/** The rows of `table`, its columns as `COLUMNS` names them. */
function rowsOf(db: Loose, table: keyof Children): Seek {
  const q = db.selectFrom(table);
  const columns = COLUMNS[table];
  return (columns ? q.select(columns.map((c) => `${table}.${c}`)) : q.selectAll()) as Seek;
}

/** Parents per statement on SQLite, whose compound selects allow at most 500 terms by default. */
const SQLITE_TERMS = 250;

/** An extra condition on the listed table (visibility), from `post-visibility.ts`. */
export type Restriction = Expression<SqlBool>;

export interface ChildListSpec<T extends keyof Children> {
  table: T;
  parent: Children[T]['parent'];
  order: Order;
  defaultSize: number;
  scope: (parentId: string) => string;
}

/** Whether `db` (a connection or a transaction) talks to PostgreSQL: the two engines' plans differ. */
const onPostgres = (db: Db): boolean => db.getExecutor().adapter instanceof PostgresAdapter;

/**
 * One list under a parent, paged by `paginate` one parent at a time and in batches of first pages
 * (data loaders), so posts and comments follow the same paging rules and the same two queries.
 */
export class ChildList<T extends keyof Children> {
  constructor(readonly spec: ChildListSpec<T>) {}

  /**
   * Rows within every bound in `order`; `parentId` undefined reads the whole table (by primary key).
   *
   * On PostgreSQL the parent is bounded on both sides (`parent >= $p and parent <= $p`) rather than
   * equated, and the rows are ordered by parent, then id: the (parent, id) index's order, which the
   * primary key cannot give, so the page is a range of that index starting at the cursor. Written
   * as `parent = $p and id > $cursor order by id`, the planner may instead walk the primary key in
   * id order and filter by parent; for a parent with many rows (a popular post) it costs that walk,
   * under the LIMIT, as if the parent's rows were spread evenly over the ids, but ids are
   * time-ordered and a post's comments sit together, so the last page of a popular post walked
   * every later comment of the table (`bench/README.md`, "Pages under a parent"). The plain bounds
   * keep the estimates right (row comparisons `(parent, id) > ($p, $cursor)` are estimated from
   * the parent alone, which sent a 20,000-member organization through a bitmap scan and a sort).
   * SQLite keeps the equality: its planner seeks (parent = ? and id > ?) on the index, but with
   * two bounds on the parent it would no longer seek the id.
   */
  async fetch(
    db: Db,
    parentId: string | undefined,
    bounds: KeyBound[],
    order: Order,
    limit: number,
    restrict?: Restriction,
  ): Promise<Children[T]['row'][]> {
    const { table, parent }: { table: string; parent: string } = this.spec;
    const id = `${table}.id`;
    const column = `${table}.${parent}`;
    let q = rowsOf(db as unknown as Loose, this.spec.table);
    if (restrict) q = q.where(restrict);
    for (const b of bounds) q = q.where(id, b.op, b.id);
    if (parentId !== undefined) {
      if (onPostgres(db)) {
        q = q.where(column, '>=', parentId).where(column, '<=', parentId).orderBy(column, order);
      } else {
        q = q.where(column, '=', parentId);
      }
    }
    return (await q.orderBy(id, order).limit(limit).execute()) as unknown as Children[T]['row'][];
  }

  /** Counts per parent; every asked id is in the map (none: 0). */
  async countBy(db: Db, parentIds: readonly string[], restrict?: Restriction): Promise<Map<string, number>> {
    const out = new Map<string, number>(parentIds.map((id) => [id, 0]));
    if (parentIds.length === 0) return out;
    const { table, parent }: { table: string; parent: string } = this.spec;
    let q = (db as unknown as Loose)
      .selectFrom(table)
      .select((eb) => [parent, eb.fn.countAll<number>().as('n')])
      .where(parent, 'in', [...new Set(parentIds)]);
    if (restrict) q = q.where(restrict);
    const rows = await q.groupBy(parent).execute();
    for (const r of rows) out.set(String(r[parent]), Number(r.n));
    return out;
  }

  page<N>(
    cursors: CursorCodec,
    db: Db,
    parentId: string,
    args: PageArgs,
    toNode: (row: Children[T]['row']) => N,
    restrict?: Restriction,
  ): Promise<Connection<N>> {
    return paginate(
      cursors,
      {
        scope: this.spec.scope(parentId),
        order: this.spec.order,
        defaultSize: this.spec.defaultSize,
        fetch: (bounds, order, limit) => this.fetch(db, parentId, bounds, order, limit, restrict),
        count: async () => (await this.countBy(db, [parentId], restrict)).get(parentId) ?? 0,
      },
      args,
      toNode,
    );
  }

  /**
   * First pages for many parents in one query (a data loader's batch), and one grouped count for all
   * of them if any totalCount is read; the cursors continue with `page`.
   */
  async firstPages<N>(
    cursors: CursorCodec,
    db: Db,
    parentIds: readonly string[],
    first: number | null | undefined,
    toNode: (row: Children[T]['row']) => N,
    restrict?: Restriction,
  ): Promise<Map<string, Connection<N>>> {
    const { defaultSize, scope } = this.spec;
    const { parent }: { parent: string } = this.spec;
    const size = checkFirst(first, defaultSize);
    const ids = [...new Set(parentIds)];
    if (ids.length === 0) return new Map();
    const rows = await this.headsOf(db, ids, size + 1, restrict);
    // Counted only if a totalCount is read, then for every parent of the batch at once.
    const counts = lazyCount(() => this.countBy(db, ids, restrict));
    const parentOf = (row: Children[T]['row']) => String((row as Record<string, unknown>)[parent]);
    return firstPages(cursors, ids, rows, parentOf, counts, size, scope, toNode);
  }

  /**
   * The first `limit` rows (in the spec's order) under each parent, grouped by parent. Each parent
   * is read as its own limited seek on the (parent, id) index, so a parent with many rows costs
   * `limit` rows, not all of them (a window over `parent in (...)` read and sorted every row).
   * PostgreSQL does this with a lateral join; SQLite has none, so it gets one limited subquery per
   * parent, glued with `union all`.
   */
  private headsOf(
    db: Db,
    ids: readonly string[],
    limit: number,
    restrict?: Restriction,
  ): Promise<Children[T]['row'][]> {
    const { table, parent, order }: { table: string; parent: string; order: Order } = this.spec;
    const postgres = onPostgres(db);
    if (!postgres && ids.length > SQLITE_TERMS) {
      const parts = [];
      for (let i = 0; i < ids.length; i += SQLITE_TERMS)
        parts.push(this.headsOf(db, ids.slice(i, i + SQLITE_TERMS), limit, restrict));
      return Promise.all(parts).then((all) => all.flat());
    }
    const loose = db as unknown as Loose;
    // The rows of one parent, as a seek: `parentIs` names the parent (a value or, lateral, a column).
    const seek = (eb: Loose, parentIs: (q: Seek) => Seek) =>
      parentIs(rowsOf(eb, this.spec.table))
        .where((e) => restrict ?? e.lit(true))
        .orderBy('id', order)
        .limit(limit);
    let heads;
    if (postgres) {
      heads = loose
        .selectFrom(sql<{ parent_id: string }>`unnest(${[...ids]}::text[])`.as<'p'>(sql`p(parent_id)`))
        .innerJoinLateral(
          (eb) =>
            seek(eb as unknown as Loose, (q) =>
              q.whereRef(`${table}.${parent}`, '=', sql.ref('p.parent_id')),
            ).as('h'),
          (join) => join.onTrue(),
        )
        .selectAll('h');
    } else {
      const one = (id: string) =>
        loose.selectFrom(seek(loose, (q) => q.where(`${table}.${parent}`, '=', id)).as('h')).selectAll('h');
      heads = ids.slice(1).reduce((q, id) => q.unionAll(one(id)), one(ids[0] as string));
    }
    return loose
      .selectFrom(heads.as('heads'))
      .selectAll()
      .orderBy(parent)
      .orderBy('id', order)
      .execute() as unknown as Promise<Children[T]['row'][]>;
  }
}
