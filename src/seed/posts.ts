import type { Kysely } from 'kysely';
import { idAt } from '../domain/ids.js';
import type { CommentsTable, Database, PostsTable, PostTagsTable, TagsTable } from '../store/types.js';
import { insertRows } from './bulk.js';
import { commentText, postText } from './content.js';
import type { Random } from './random.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const COMMENTS_PER_TRANSACTION = 5_000;

export interface ContentPlan {
  posts: number;
  comments: number;
  /** Content is written between these instants; authors exist before `fromMs`. */
  fromMs: number;
  now: number;
  authorIds: readonly string[];
}

/**
 * Posts with tags, then comments on published posts. Most posts are published when written, some
 * are drafts and a few are scheduled; comments come after their post, mostly soon after, and a few
 * posts draw most of the discussion, as on a real site.
 */
export async function seedContent(
  db: Kysely<Database>,
  r: Random,
  plan: ContentPlan,
  progress: (line: string) => void,
): Promise<{ posts: number; comments: number; tags: number }> {
  const posts: PostsTable[] = [];
  const postTags: PostTagsTable[] = [];
  const tags = new Map<string, TagsTable>();
  for (let i = 0; i < plan.posts; i++) {
    const ms = plan.fromMs + Math.floor(r.next() * (plan.now - HOUR - plan.fromMs));
    const createdAt = new Date(ms).toISOString();
    const text = postText(r);
    const kind = r.weighted([
      ['published', 85],
      ['draft', 10],
      ['scheduled', 5],
    ] as const);
    const id = idAt('pst', ms);
    posts.push({
      id,
      author_id: r.pick(plan.authorIds),
      title: text.title,
      body: text.body,
      published_at:
        kind === 'published'
          ? createdAt
          : kind === 'scheduled'
            ? new Date(plan.now + r.int(1, 30) * DAY).toISOString()
            : null,
      created_at: createdAt,
      updated_at: createdAt,
    });
    for (const name of text.tags) {
      postTags.push({ post_id: id, tag_name: name });
      const known = tags.get(name);
      if (!known || known.created_at > createdAt) tags.set(name, { name, created_at: createdAt });
    }
  }
  posts.sort((a, b) => (a.id < b.id ? -1 : 1));
  await db.transaction().execute(async (trx) => {
    await insertRows(trx, 'posts', posts);
    await insertRows(trx, 'tags', [...tags.values()]);
    await insertRows(trx, 'post_tags', postTags);
  });
  progress(`posts ${posts.length}/${plan.posts}`);

  const open = posts.filter((p) => p.published_at !== null && p.published_at === p.created_at);
  let written = 0;
  while (written < plan.comments) {
    const batch: CommentsTable[] = [];
    const size = Math.min(COMMENTS_PER_TRANSACTION, plan.comments - written);
    for (let i = 0; i < size; i++) {
      // Squaring the roll favours the front of the list: a few posts collect most comments.
      const post = open[Math.floor(r.next() ** 2 * open.length)]!;
      const postMs = Date.parse(post.created_at);
      const ms = postMs + 1 + Math.floor(r.next() ** 3 * (plan.now - postMs - 1));
      const createdAt = new Date(ms).toISOString();
      batch.push({
        id: idAt('cmt', ms),
        post_id: post.id,
        author_id: r.pick(plan.authorIds),
        body: commentText(r),
        created_at: createdAt,
        updated_at: createdAt,
      });
    }
    batch.sort((a, b) => (a.id < b.id ? -1 : 1));
    await db.transaction().execute((trx) => insertRows(trx, 'comments', batch));
    written += batch.length;
    progress(`comments ${written}/${plan.comments}`);
  }
  return { posts: posts.length, comments: written, tags: tags.size };
}
