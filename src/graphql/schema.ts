import { buildSubgraphSchema } from '@apollo/subgraph';
import type { GraphQLResolverMap } from '@apollo/subgraph/dist/schema-helper/resolverMap.js';
import { GraphQLScalarType, type GraphQLSchema, parse } from 'graphql';
import { guardEntities } from './entities.js';
import { resolverMaps } from './resolvers/index.js';
import { withScopeChecks } from './resolvers/scopes.js';
import { typeDefs } from './schema/index.js';

function mergeResolvers(maps: typeof resolverMaps): GraphQLResolverMap<unknown> {
  const merged: Record<string, unknown> = {};
  for (const map of maps) {
    for (const [type, fields] of Object.entries(map)) {
      // A scalar is one object, not a map of fields.
      merged[type] =
        fields instanceof GraphQLScalarType
          ? fields
          : { ...(merged[type] as Record<string, unknown> | undefined), ...fields };
    }
  }
  return merged as GraphQLResolverMap<unknown>;
}

/**
 * The executable schema, built once per process. It is also a valid federation subgraph
 * (`_service`, `_entities`), so the same build serves standalone clients and a router; `_entities`
 * answers a malformed representation BAD_USER_INPUT at its own item (./entities.ts).
 */
export function buildAtriumSchema(): GraphQLSchema {
  return guardEntities(
    buildSubgraphSchema([
      {
        typeDefs: parse(typeDefs.join('\n')),
        resolvers: withScopeChecks(mergeResolvers(resolverMaps)) as GraphQLResolverMap<unknown>,
      },
    ]),
  );
}
