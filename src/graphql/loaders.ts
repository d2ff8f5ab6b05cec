import DataLoader from 'dataloader';
import type { Principal } from '../auth/principal.js';
import { toActor } from '../auth/principal.js';
import type { Services } from '../compose.js';
import type { Actor } from '../domain/actor.js';
import type { Comment } from '../domain/comments.js';
import { firstMemberPages } from '../domain/connection-reads.js';
import type { Connection } from '../domain/connection.js';
import { DomainError } from '../domain/errors.js';
import type { Order } from '../domain/order-model.js';
import type { Organization } from '../domain/organizations.js';
import type { Post } from '../domain/posts.js';
import type { Tag } from '../domain/tags.js';
import type { User } from '../domain/users.js';

/** A loader over a core batch read that answers a map keyed by id: absent ids load as null. */
function byId<T>(read: (ids: readonly string[]) => Promise<Map<string, T>>): DataLoader<string, T | null> {
  return new DataLoader<string, T | null>(async (ids) => {
    const found = await read(ids);
    return ids.map((id) => found.get(id) ?? null);
  });
}

/**
 * First pages of a child list (a post's comments, an author's posts, an organization's members, a
 * user's orders) for many parents at once. Each page size gets its own loader, since one batch query
 * serves one size. A parent the core leaves out of its answer (orders the caller may not see) loads
 * as null.
 */
class FirstPages<T> {
  private readonly bySize = new Map<number | null, DataLoader<string, Connection<T> | null>>();
  constructor(
    private readonly read: (
      ids: readonly string[],
      first: number | null,
    ) => Promise<Map<string, Connection<T>>>,
  ) {}
  load(parentId: string, first: number | null | undefined): Promise<Connection<T> | null> {
    const size = first ?? null;
    let loader = this.bySize.get(size);
    if (!loader) {
      loader = new DataLoader(async (ids) => {
        const pages = await this.read(ids, size);
        return ids.map((id) => pages.get(id) ?? null);
      });
      this.bySize.set(size, loader);
    }
    return loader.load(parentId);
  }
}

/**
 * Per-operation DataLoaders over the core's batched reads, so a page of posts with their authors and
 * comments costs a constant number of statements. Built for one caller: what they may see is the
 * core's decision, and nothing cached here outlives the operation.
 */
export function createLoaders(services: Services, principal: Principal | null) {
  const core = services.core;
  const actor: Actor | null = principal ? toActor(principal) : null;
  return {
    user: byId<User>((ids) => core.users.getMany(ids)),
    organization: byId<Organization>((ids) => core.organizations.getMany(ids)),
    post: byId<Post>((ids) => core.posts.getMany(actor, ids)),
    comment: byId<Comment>((ids) => core.comments.getMany(actor, ids)),
    tag: byId<Tag>((names) => core.tags.getMany(actor, names)),
    postTags: new DataLoader<string, string[]>(async (ids) => {
      const tags = await core.posts.tagsFor(ids);
      return ids.map((id) => tags.get(id) ?? []);
    }),
    /** Orders are read one by one through the order service, which checks the owner each time. */
    order: new DataLoader<string, Order | null>((ids) =>
      Promise.all(
        ids.map(async (id) => {
          if (!actor) return null;
          try {
            return await core.orders.get(actor, id);
          } catch (err) {
            // Someone else's order is as absent as an unknown one; anything else is a real failure.
            if (err instanceof DomainError && (err.code === 'not_found' || err.code === 'forbidden'))
              return null;
            throw err;
          }
        }),
      ),
    ),
    commentPages: new FirstPages<Comment>((ids, first) => core.comments.firstPagesByPosts(actor, ids, first)),
    authorPages: new FirstPages<Post>((ids, first) => core.posts.firstPagesByAuthors(actor, ids, first)),
    /** First pages of Organization.members (who may read the organization is asked where it is reached). */
    memberPages: new FirstPages<User>((ids, first) => firstMemberPages(core.deps, ids, first)),
    /** First pages of User.orders; users whose orders the caller may not see are absent (null). */
    orderPages: new FirstPages<Order>(async (ids, first) =>
      actor ? core.orders.firstPagesByUsers(actor, ids, first) : new Map(),
    ),
  };
}

export type Loaders = ReturnType<typeof createLoaders>;
