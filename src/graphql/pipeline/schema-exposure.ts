import { type ASTVisitor, GraphQLError, type ValidationContext } from 'graphql';

/**
 * Production refuses federation's `_service { sdl }` as it refuses `__schema` and `__type`: it hands
 * out the whole schema as SDL, so it is introspection under another name, and the spec rejects
 * introspection in production. A router composes from SDL published at build time instead
 * (`npm run -s graphql:sdl`, docs/graphql.md). `_entities` is data, not schema, and is left alone.
 */
export function noServiceSdlRule(context: ValidationContext): ASTVisitor {
  return {
    Field(node) {
      if (node.name.value !== '_service') return;
      if (context.getParentType() !== context.getSchema().getQueryType()) return;
      context.reportError(
        new GraphQLError(
          'GraphQL introspection has been disabled, but the requested query contained the field "_service".',
          { nodes: [node], extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } },
        ),
      );
    },
  };
}
