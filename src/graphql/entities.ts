import { type GraphQLFieldResolver, type GraphQLSchema, isUnionType } from 'graphql';
import { graphQLError } from './errors.js';

/** Every entity type of this subgraph is keyed by `id` (`@key(fields: "id")`). */
const KEY = 'id';

/**
 * Why a representation cannot name an entity of this subgraph, or undefined when it can: an object
 * whose `__typename` is a member of `_Entity` and whose `id` is a non-empty string.
 */
export function representationProblem(
  representation: unknown,
  index: number,
  entityTypes: readonly string[],
): string | undefined {
  if (typeof representation !== 'object' || representation === null || Array.isArray(representation)) {
    return `Representation ${index} must be an object with __typename and ${KEY}.`;
  }
  const { __typename: typename, [KEY]: key } = representation as Record<string, unknown>;
  if (typeof typename !== 'string' || !entityTypes.includes(typename)) {
    const named = typeof typename === 'string' ? `names __typename "${typename}"` : 'has no __typename';
    return `Representation ${index} ${named}; the entity types of this subgraph are ${entityTypes.join(', ')}.`;
  }
  if (typeof key !== 'string' || key === '') {
    return `Representation ${index} (${typename}) needs its key: ${KEY}, a non-empty string.`;
  }
  return undefined;
}

/**
 * Federation's `_entities` answers each representation on its own. @apollo/subgraph's resolver
 * checks nothing a router is trusted to send: an unknown or missing `__typename` threw for the
 * whole list (every valid item lost, `_entities` null), a missing `id` reached DataLoader
 * ("loader.load() ... got: undefined"), and a type that is no entity failed in `_Entity`'s type
 * resolution, each answered INTERNAL_SERVER_ERROR and logged as a failure of ours (until
 * 2026-11-28). Now a malformed representation is a client's input error, BAD_USER_INPUT at its own
 * path (`["_entities", i]`), and the others still resolve through @apollo/subgraph's resolver, one
 * at a time, with the loaders batching them as before.
 */
export function guardEntities(schema: GraphQLSchema): GraphQLSchema {
  const field = schema.getQueryType()?.getFields()._entities;
  const entity = schema.getType('_Entity');
  if (!field?.resolve || !isUnionType(entity)) return schema;
  const entityTypes = entity
    .getTypes()
    .map((t) => t.name)
    .sort();
  const resolveOne = field.resolve as GraphQLFieldResolver<unknown, unknown>;
  const resolve: GraphQLFieldResolver<unknown, unknown, { representations: readonly unknown[] }> = (
    source,
    args,
    context,
    info,
  ) =>
    args.representations.map((representation, index) => {
      const problem = representationProblem(representation, index, entityTypes);
      if (problem) return Promise.reject(graphQLError('BAD_USER_INPUT', problem));
      return (resolveOne(source, { representations: [representation] }, context, info) as unknown[])[0];
    });
  field.resolve = resolve as GraphQLFieldResolver<unknown, unknown>;
  return schema;
}
