import { requireScope, type Scope } from '../../auth/scopes.js';
import type { GraphQLContext } from '../context.js';
import { toGraphQLError } from '../errors.js';
import { typeOfId } from './support.js';

type ScopeRule = readonly [Scope, ...Scope[]];

/**
 * The scopes a caller with credentials needs, by field: REST names them per route and gRPC per
 * method; here they guard the fields where a caller first reaches an area (a root field, or a
 * link into another area such as `User.orders`). Any one scope of a rule is enough. An anonymous
 * caller has no scopes to check and reads only what the core shows everyone.
 */
export const FIELD_SCOPES: Record<string, ScopeRule> = {
  'Query.me': ['profile:read', 'users:read'],
  'Query.user': ['users:read'],
  'Query.users': ['users:read'],
  'Query.post': ['content:read'],
  'Query.posts': ['content:read'],
  'Query.search': ['content:read'],
  'Query.searchAll': ['content:read'],
  'User.posts': ['content:read'],
  'User.orders': ['orders:read'],
  'Organization.members': ['users:read'],
  'Mutation.createPost': ['content:write'],
  'Mutation.updatePost': ['content:write'],
  'Mutation.deletePost': ['content:write'],
  'Mutation.addComment': ['content:write'],
  'Mutation.updateUser': ['users:write'],
  'Subscription.commentAdded': ['content:read'],
};

/** The read scope of an object fetched by its id (`node`, and a federation router's `_entities`). */
export const TYPE_SCOPES: Record<string, ScopeRule> = {
  User: ['users:read'],
  Organization: ['users:read'],
  Post: ['content:read'],
  Comment: ['content:read'],
  Order: ['orders:read'],
};

/** Throws FORBIDDEN naming the (first) missing scope; anonymous callers pass. */
export function checkScopes(ctx: GraphQLContext, rule: ScopeRule): void {
  const principal = ctx.principal;
  if (principal === null || rule.some((scope) => principal.scopes.has(scope))) return;
  try {
    requireScope(principal, rule[0]);
  } catch (err) {
    throw toGraphQLError(err);
  }
}

type Resolver = (...args: unknown[]) => unknown;
type ResolverMap = Record<string, unknown>;

/** Resolver maps with the checks of FIELD_SCOPES and TYPE_SCOPES in front of the fields they name. */
export function withScopeChecks<M extends Record<string, unknown>>(merged: M): M {
  const out: Record<string, unknown> = { ...merged };
  const typeMap = (type: string): ResolverMap => {
    const fields = { ...((out[type] as ResolverMap | undefined) ?? {}) };
    out[type] = fields;
    return fields;
  };
  for (const [path, rule] of Object.entries(FIELD_SCOPES)) {
    const [type, field] = path.split('.') as [string, string];
    const fields = typeMap(type);
    const entry = fields[field];
    if (type === 'Subscription') {
      const sub = entry as { subscribe: Resolver; resolve?: Resolver };
      fields[field] = { ...sub, subscribe: guarded(sub.subscribe, 2, rule) };
    } else {
      if (typeof entry !== 'function') throw new Error(`FIELD_SCOPES names ${path}, which has no resolver`);
      fields[field] = guarded(entry as Resolver, 2, rule);
    }
  }
  for (const [type, rule] of Object.entries(TYPE_SCOPES)) {
    const fields = typeMap(type);
    const resolve = fields.__resolveReference;
    if (typeof resolve === 'function') fields.__resolveReference = guarded(resolve as Resolver, 1, rule);
  }
  const node = (out.Query as ResolverMap).node as Resolver;
  typeMap('Query').node = (parent: unknown, args: { id: string }, ctx: GraphQLContext, info: unknown) => {
    const type = typeOfId(args.id);
    const rule = type === undefined ? undefined : TYPE_SCOPES[type];
    if (rule) checkScopes(ctx, rule);
    return node(parent, args, ctx, info);
  };
  return out as M;
}

function guarded(resolve: Resolver, contextAt: number, rule: ScopeRule): Resolver {
  return (...args: unknown[]) => {
    checkScopes(args[contextAt] as GraphQLContext, rule);
    return resolve(...args);
  };
}
