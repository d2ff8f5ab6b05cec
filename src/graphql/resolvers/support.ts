import { toActor } from '../../auth/principal.js';
import type { Actor } from '../../domain/actor.js';
import { DomainError } from '../../domain/errors.js';
import type { Organization } from '../../domain/organizations.js';
import { mayReadOrganization } from '../../domain/user-policies.js';
import type { GraphQLContext } from '../context.js';
import { toGraphQLError, unauthenticated } from '../errors.js';

/** The caller as the core knows them; a protected field without credentials is UNAUTHENTICATED. */
export function actorOf(ctx: GraphQLContext): Actor {
  if (!ctx.principal) throw unauthenticated();
  return toActor(ctx.principal);
}

/** The caller for reads that anonymous callers may make too. */
export function viewerOf(ctx: GraphQLContext): Actor | null {
  return ctx.principal ? toActor(ctx.principal) : null;
}

/**
 * An organization fetched by its id (`node(id)`, a router's `_entities`): null when unknown or when
 * the caller may not read it (the core's `mayReadOrganization`: its members and admins).
 */
export async function readableOrganization(ctx: GraphQLContext, id: string): Promise<Organization | null> {
  const viewer = viewerOf(ctx);
  const own =
    viewer?.kind === 'user' ? ((await ctx.loaders.user.load(viewer.id))?.organizationId ?? null) : null;
  return mayReadOrganization(viewer, own, id) ? ctx.loaders.organization.load(id) : null;
}

export interface FieldProblem {
  field: string | null;
  message: string;
}

/**
 * Runs a mutation through the core: validation problems become the payload's `errors` list (the
 * spec keeps them apart from GraphQL errors); every other core error is a GraphQL error.
 */
export async function payload<K extends string, T>(
  key: K,
  run: () => Promise<T>,
): Promise<Record<K, T | null> & { errors: FieldProblem[] }> {
  try {
    const value = await run();
    return { [key]: value, errors: [] } as Record<K, T | null> & { errors: FieldProblem[] };
  } catch (err) {
    if (err instanceof DomainError && (err.code === 'validation_error' || err.code === 'unprocessable')) {
      const errors =
        err.details.length > 0
          ? err.details.map((d) => ({ field: d.field, message: d.message }))
          : [{ field: null, message: err.message }];
      return { [key]: null, errors } as Record<K, T | null> & { errors: FieldProblem[] };
    }
    throw toGraphQLError(err);
  }
}

/** The GraphQL type of an object by its id prefix (decisions §5: ids are prefixed and unique). */
const PREFIX_TYPES: Record<string, string> = {
  usr: 'User',
  org: 'Organization',
  pst: 'Post',
  cmt: 'Comment',
  ord: 'Order',
};

export function typeOfId(id: string): string | undefined {
  return PREFIX_TYPES[id.slice(0, id.indexOf('_'))];
}

/** Resolves the concrete type of a Node or a search hit; a tag has a name and no id. */
export function resolveType(value: { id?: string; name?: string }): string | undefined {
  if (typeof value.id === 'string') return typeOfId(value.id);
  return typeof value.name === 'string' ? 'Tag' : undefined;
}
