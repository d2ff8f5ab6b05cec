import type { Transaction } from 'kysely';
import type { Db } from '../store/store.js';
import type { Database } from '../store/types.js';
import { visiblePostsSql } from './post-visibility.js';
import type { Viewer } from './user-policies.js';
import type { CoreDeps } from './context.js';
import type { Problems } from './errors.js';
import { searchTokens } from './search.js';
import { checkText } from './validate.js';

export const MAX_TAGS_PER_POST = 20;
export const MAX_TAG_LENGTH = 50;

/** The spec's `Tag { name, postCount }`. */
export interface Tag {
  name: string;
  postCount: number;
}

/**
 * Tags are compared case-insensitively, so they are stored as `tagName` spells them; duplicates
 * after normalising collapse into one. Problems go on `field`.
 */
/**
 * The one spelling of a tag name that is stored and looked up: trimmed, inner white space collapsed,
 * lower case and in Unicode NFC, so `Café` typed with a combining accent is the same tag as `café`.
 */
export function tagName(raw: string): string {
  return raw.trim().replace(/\s+/g, ' ').toLowerCase().normalize('NFC');
}

export function normaliseTags(input: unknown, problems: Problems, field = 'tags'): string[] {
  if (!Array.isArray(input)) {
    problems.add(field, `${field} must be a list of strings`);
    return [];
  }
  const out: string[] = [];
  input.forEach((raw: unknown, index) => {
    if (typeof raw !== 'string') {
      problems.add(field, `${field}[${index}] must be a string`);
      return;
    }
    const name = tagName(raw);
    const bad = checkText(name, 1, MAX_TAG_LENGTH);
    if (bad) problems.add(field, `${field}[${index}] ${bad}`, 'range_error');
    else if (!out.includes(name)) out.push(name);
  });
  if (out.length > MAX_TAGS_PER_POST) {
    problems.add(field, `a post has at most ${MAX_TAGS_PER_POST} tags`, 'range_error');
  }
  return out;
}

/** Makes the post's tag set exactly `tags`, creating tags that are new. */
export async function replacePostTags(
  db: Transaction<Database> | Db,
  postId: string,
  tags: readonly string[],
  now: string,
): Promise<void> {
  await db.deleteFrom('post_tags').where('post_id', '=', postId).execute();
  if (tags.length === 0) return;
  await db
    .insertInto('tags')
    .values(tags.map((name) => ({ name, created_at: now })))
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
  await db
    .insertInto('post_tags')
    .values(tags.map((tag_name) => ({ post_id: postId, tag_name })))
    .execute();
}

export class TagService {
  constructor(private readonly deps: CoreDeps) {}

  /** Tag names of many posts, alphabetical; every asked id is in the map (untagged: []). */
  async forPosts(postIds: readonly string[]): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>(postIds.map((id) => [id, []]));
    if (postIds.length === 0) return out;
    const rows = await this.deps.store.db
      .selectFrom('post_tags')
      .select(['post_id', 'tag_name'])
      .where('post_id', 'in', [...new Set(postIds)])
      .orderBy('post_id')
      .orderBy('tag_name')
      .execute();
    for (const row of rows) out.get(row.post_id)?.push(row.tag_name);
    return out;
  }

  /**
   * The tags a search for `query` names: each of its words, and the whole query as one tag name, so
   * that tags a word search cannot spell (`c++`, `node.js`, `machine learning`) are found as typed.
   */
  matching(viewer: Viewer, query: string): Promise<Map<string, Tag>> {
    return this.getMany(viewer, [...searchTokens(query), query]);
  }

  /**
   * Tags by name with the number of posts `viewer` may see (drafts and scheduled posts count for
   * their author and admins only, a deleted author's for nobody). A tag is there only when the viewer
   * sees at least one post carrying it: one on hidden posts alone is exactly an unknown name (D20),
   * which is absent. Names are matched normalised.
   */
  async getMany(viewer: Viewer, names: readonly string[]): Promise<Map<string, Tag>> {
    const wanted = [...new Set(names.map(tagName))];
    if (wanted.length === 0) return new Map();
    const db = this.deps.store.db;
    const visible = visiblePostsSql(viewer, this.deps.clock.now());
    const counts = await db
      .selectFrom('post_tags')
      .innerJoin('posts', 'posts.id', 'post_tags.post_id')
      .select((eb) => ['post_tags.tag_name', eb.fn.countAll<number>().as('postCount')])
      .where('post_tags.tag_name', 'in', wanted)
      .where(visible)
      .groupBy('post_tags.tag_name')
      .execute();
    const found = new Map(
      counts.map((c) => [c.tag_name, { name: c.tag_name, postCount: Number(c.postCount) }]),
    );
    // In the order asked, as the callers list them.
    return new Map(wanted.flatMap((name) => (found.has(name) ? [[name, found.get(name)!]] : [])));
  }

  /** Tags on posts `viewer` may see, most used first (ties by name). */
  async popular(viewer: Viewer, limit = 20): Promise<Tag[]> {
    const visible = visiblePostsSql(viewer, this.deps.clock.now());
    const rows = await this.deps.store.db
      .selectFrom('post_tags')
      .innerJoin('posts', 'posts.id', 'post_tags.post_id')
      .select((eb) => ['post_tags.tag_name', eb.fn.countAll<number>().as('postCount')])
      .where(visible)
      .groupBy('post_tags.tag_name')
      .orderBy('postCount', 'desc')
      .orderBy('post_tags.tag_name', 'asc')
      .limit(Math.max(0, Math.min(limit, 1000)))
      .execute();
    return rows.map((r) => ({ name: r.tag_name, postCount: Number(r.postCount) }));
  }
}
