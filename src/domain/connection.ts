import type { CursorCodec, CursorPosition } from './cursor.js';
import { Problems } from './errors.js';

/**
 * Cursor connections (Relay style) over lists keyed by time-ordered ids, shared by posts and
 * comments. Paging is keyset on `id` only: ids sort by creation time, so no offset scans and no
 * duplicates or gaps when rows are added between pages.
 */
export interface PageArgs {
  first?: number | null | undefined;
  after?: string | null | undefined;
  last?: number | null | undefined;
  before?: string | null | undefined;
}

export interface Edge<T> {
  node: T;
  cursor: string;
}

export interface PageInfo {
  hasNextPage: boolean;
  hasPreviousPage: boolean;
  startCursor: string | null;
  endCursor: string | null;
}

export interface Connection<T> {
  edges: Edge<T>[];
  pageInfo: PageInfo;
  /**
   * Items in the whole list, whatever the cursors (the spec's `totalCount`). Counted when first
   * asked, and once: a count is a statement of its own that can cost more than the page (a grouped
   * count of every comment under 20 posts), and most queries never select it.
   */
  totalCount(): Promise<number>;
}

/** A count run on the first call only; later calls share its answer. */
export function lazyCount<C>(count: () => Promise<C>): () => Promise<C> {
  let counted: Promise<C> | undefined;
  return () => (counted ??= count());
}

export const MAX_PAGE_SIZE = 100;

/**
 * An edge whose cursor is signed when first read. Signing is an HMAC per edge, and most queries
 * never ask for edge cursors (a page of 20 posts with 5 comments each is 120 edges), so a cursor
 * nobody reads costs nothing. An own enumerable getter: JSON.stringify and spreads still see it.
 */
export function lazyEdge<T>(node: T, cursors: CursorCodec, scope: string, position: CursorPosition): Edge<T> {
  let cursor: string | undefined;
  return {
    node,
    get cursor() {
      return (cursor ??= cursors.encode(scope, position));
    },
  };
}

/** Page info whose start and end cursors are the first and last edges' (signed only when read). */
export function pageInfoOf<T>(
  edges: readonly Edge<T>[],
  hasNextPage: boolean,
  hasPreviousPage: boolean,
): PageInfo {
  return {
    hasNextPage,
    hasPreviousPage,
    get startCursor() {
      return edges[0]?.cursor ?? null;
    },
    get endCursor() {
      return edges.at(-1)?.cursor ?? null;
    },
  };
}

export type Order = 'asc' | 'desc';
export type KeyOp = '<' | '<=' | '>' | '>=';
export interface KeyBound {
  op: KeyOp;
  id: string;
}

interface KeyedRow {
  id: string;
  created_at: string;
}

/** One list as the pager needs it; services supply the queries, the pager the rules. */
export interface KeysetList<Row extends KeyedRow> {
  /** Cursors of one list are refused by every other (a post cursor is no comment cursor). */
  scope: string;
  order: Order;
  defaultSize: number;
  /** Rows of the list within every bound, in `order`, at most `limit`. */
  fetch(bounds: KeyBound[], order: Order, limit: number): Promise<Row[]>;
  count(): Promise<number>;
}

interface PageRequest {
  backward: boolean;
  size: number;
  after: CursorPosition | undefined;
  before: CursorPosition | undefined;
}

/**
 * Reads connection arguments: `first`/`after` page forward, `last`/`before` backward; `before`
 * alone pages backward by the default size. Sizes are 0 to 100; more is a `range_error`, which the
 * GraphQL surface reports as BAD_USER_INPUT.
 */
export function readPageArgs(
  cursors: CursorCodec,
  scope: string,
  args: PageArgs,
  defaultSize: number,
): PageRequest {
  const problems = new Problems();
  const first = args.first ?? undefined;
  const last = args.last ?? undefined;
  for (const [field, value] of [
    ['first', first],
    ['last', last],
  ] as const) {
    if (value === undefined) continue;
    if (!Number.isInteger(value) || value < 0 || value > MAX_PAGE_SIZE) {
      problems.add(field, `${field} must be an integer from 0 to ${MAX_PAGE_SIZE}`, 'range_error');
    }
  }
  if (first !== undefined && last !== undefined) {
    problems.add('last', 'first and last cannot be used together', 'invalid_combination');
  }
  problems.throwIfAny();
  const after = args.after ? cursors.decode(scope, args.after, 'after') : undefined;
  const before = args.before ? cursors.decode(scope, args.before, 'before') : undefined;
  const backward = last !== undefined || (first === undefined && before !== undefined);
  return { backward, size: (backward ? last : first) ?? defaultSize, after, before };
}

const flip = (order: Order): Order => (order === 'asc' ? 'desc' : 'asc');

/** The bound that keeps rows strictly past a cursor in list order, and its inclusive opposite. */
function past(order: Order, id: string): KeyBound {
  return { op: order === 'desc' ? '<' : '>', id };
}
function notPast(order: Order, id: string): KeyBound {
  return { op: order === 'desc' ? '>=' : '<=', id };
}

export async function paginate<Row extends KeyedRow, T>(
  cursors: CursorCodec,
  list: KeysetList<Row>,
  args: PageArgs,
  toNode: (row: Row) => T,
): Promise<Connection<T>> {
  const req = readPageArgs(cursors, list.scope, args, list.defaultSize);
  const bounds: KeyBound[] = [];
  if (req.after) bounds.push(past(list.order, req.after.id));
  if (req.before) bounds.push(past(flip(list.order), req.before.id));

  // One row more than asked tells whether the page is the last in its direction; the other
  // direction is "anything at or beyond the cursor we started from".
  const anchor = req.backward
    ? req.before && notPast(flip(list.order), req.before.id)
    : req.after && notPast(list.order, req.after.id);
  const [fetched, beyond] = await Promise.all([
    list.fetch(bounds, req.backward ? flip(list.order) : list.order, req.size + 1),
    anchor ? list.fetch([anchor], list.order, 1) : Promise.resolve([]),
  ]);
  const more = fetched.length > req.size;
  const rows = fetched.slice(0, req.size);
  if (req.backward) rows.reverse();
  const beyondAnchor = beyond.length > 0;

  const edges = rows.map((row) =>
    lazyEdge(toNode(row), cursors, list.scope, { id: row.id, createdAt: row.created_at }),
  );
  return {
    edges,
    pageInfo: pageInfoOf(edges, req.backward ? beyondAnchor : more, req.backward ? more : beyondAnchor),
    totalCount: lazyCount(() => list.count()),
  };
}

/**
 * First pages of many lists at once (Post.comments, User.posts through a data loader): `rows` holds
 * up to `first + 1` rows per parent in list order; `counts` reads every parent's total, in one
 * statement for the whole batch, when the first of them is asked for its totalCount (so memoize it).
 */
export function firstPages<Row extends KeyedRow, T>(
  cursors: CursorCodec,
  parentIds: readonly string[],
  rows: readonly Row[],
  parentOf: (row: Row) => string,
  counts: () => Promise<ReadonlyMap<string, number>>,
  first: number,
  scopeOf: (parentId: string) => string,
  toNode: (row: Row) => T,
): Map<string, Connection<T>> {
  const grouped = new Map<string, Row[]>();
  for (const row of rows) {
    const key = parentOf(row);
    const list = grouped.get(key);
    if (list) list.push(row);
    else grouped.set(key, [row]);
  }
  const out = new Map<string, Connection<T>>();
  for (const parentId of parentIds) {
    const all = grouped.get(parentId) ?? [];
    const scope = scopeOf(parentId);
    const edges = all
      .slice(0, first)
      .map((row) => lazyEdge(toNode(row), cursors, scope, { id: row.id, createdAt: row.created_at }));
    out.set(parentId, {
      edges,
      pageInfo: pageInfoOf(edges, all.length > first, false),
      totalCount: async () => (await counts()).get(parentId) ?? 0,
    });
  }
  return out;
}

/** Validates the page size of a batched first page (no cursors: a loader key is parent + size). */
export function checkFirst(first: number | null | undefined, defaultSize: number): number {
  const size = first ?? defaultSize;
  if (!Number.isInteger(size) || size < 0 || size > MAX_PAGE_SIZE) {
    new Problems()
      .add('first', `first must be an integer from 0 to ${MAX_PAGE_SIZE}`, 'range_error')
      .throwIfAny();
  }
  return size;
}
