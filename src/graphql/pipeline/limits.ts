import {
  type ASTVisitor,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  getNamedType,
  getNullableType,
  type GraphQLCompositeType,
  GraphQLError,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLOutputType,
  type GraphQLSchema,
  isAbstractType,
  isCompositeType,
  isInterfaceType,
  isListType,
  isObjectType,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from 'graphql';

/** The spec's limits (Limits table). */
export const MAX_DEPTH = 7;
export const MAX_COMPLEXITY = 1_000;
/** A list field costs this many times its children. */
export const LIST_FACTOR = 10;
/**
 * At most this many field selections in a document (every field written, `__typename` and
 * introspection included; a fragment's fields count once), checked before graphql's validation
 * rules run. GraphiQL's introspection query selects 73; a large Apollo Client query, with
 * `__typename` in every selection set, a few hundred.
 */
export const MAX_FIELDS = 1_000;

/**
 * Introspection (`__schema`, `__type`) is neither deep nor costly to serve and GraphiQL's own query
 * nests 13 levels, so its subtrees are left out of depth and cost; production refuses it anyway.
 */
const isMetaField = (name: string): boolean => name.startsWith('__');

/**
 * `__typename` under its own name costs nothing: however often it is written in a selection set it
 * answers one key per object (Apollo Client adds it to every selection set). Under any other alias
 * each one is a key of its own in every object of the result, so it costs 1 like any field: until
 * 2026-11-28 it was free, and 2,000 aliases under `posts(first: 100)` cost 13 points for 2.9 MB.
 */
const typenameCost = (field: FieldNode): number =>
  field.alias && field.alias.value !== '__typename' ? 1 : 0;

type Fragments = ReadonlyMap<string, FragmentDefinitionNode>;

function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  const map = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) map.set(d.name.value, d);
  return map;
}

/** Fields on the longest path: `{ me { id } }` is 2. Fragments count where they are spread. */
export function selectionDepth(
  set: SelectionSetNode,
  fragments: Fragments,
  seen = new Set<string>(),
): number {
  let deepest = 0;
  for (const selection of set.selections) {
    if (selection.kind === Kind.FIELD) {
      if (isMetaField(selection.name.value)) continue;
      const below = selection.selectionSet ? selectionDepth(selection.selectionSet, fragments, seen) : 0;
      deepest = Math.max(deepest, 1 + below);
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      deepest = Math.max(deepest, selectionDepth(selection.selectionSet, fragments, seen));
    } else {
      const name = selection.name.value;
      const fragment = fragments.get(name);
      // A cycle or unknown fragment is reported by graphql's own rules; here it adds nothing.
      if (!fragment || seen.has(name)) continue;
      seen.add(name);
      deepest = Math.max(deepest, selectionDepth(fragment.selectionSet, fragments, seen));
      seen.delete(name);
    }
  }
  return deepest;
}

/**
 * The cost of a selection on `type`: 1 per field, a list field 1 + 10 × its children. On a union or
 * interface each possible object type is costed with the fragments that apply to it and the most
 * expensive one counts: a result is one member, never all of them at once.
 */
export function selectionCost(
  schema: GraphQLSchema,
  set: SelectionSetNode,
  type: GraphQLCompositeType,
  fragments: Fragments,
): number {
  if (!isAbstractType(type)) return costOn(schema, set, type, fragments, new Set());
  let most = 0;
  for (const member of schema.getPossibleTypes(type)) {
    most = Math.max(most, costOn(schema, set, member, fragments, new Set()));
  }
  return most;
}

function costOn(
  schema: GraphQLSchema,
  set: SelectionSetNode,
  object: GraphQLCompositeType,
  fragments: Fragments,
  seen: Set<string>,
): number {
  let total = 0;
  for (const selection of set.selections) {
    if (selection.kind === Kind.FIELD) {
      const name = selection.name.value;
      if (name === '__typename') total += typenameCost(selection);
      if (isMetaField(name)) continue;
      const field = fieldOf(object, name);
      if (!field) continue;
      total += fieldCost(schema, field.type, selection.selectionSet, fragments);
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      const condition = selection.typeCondition?.name.value;
      if (condition && !applies(schema, condition, object)) continue;
      total += costOn(schema, selection.selectionSet, object, fragments, seen);
    } else {
      const name = selection.name.value;
      const fragment = fragments.get(name);
      if (!fragment || seen.has(name) || !applies(schema, fragment.typeCondition.name.value, object))
        continue;
      seen.add(name);
      total += costOn(schema, fragment.selectionSet, object, fragments, seen);
      seen.delete(name);
    }
  }
  return total;
}

function fieldCost(
  schema: GraphQLSchema,
  type: GraphQLOutputType,
  set: SelectionSetNode | undefined,
  fragments: Fragments,
): number {
  const named = getNamedType(type);
  const children = set && isCompositeType(named) ? selectionCost(schema, set, named, fragments) : 0;
  return 1 + (isListType(getNullableType(type)) ? LIST_FACTOR * children : children);
}

function fieldOf(type: GraphQLCompositeType, name: string): GraphQLField<unknown, unknown> | undefined {
  return isObjectType(type) || isInterfaceType(type) ? type.getFields()[name] : undefined;
}

/** Does a fragment on `condition` apply to values of `object`? */
function applies(schema: GraphQLSchema, condition: string, object: GraphQLCompositeType): boolean {
  if (condition === object.name) return true;
  const target: GraphQLNamedType | undefined = schema.getType(condition);
  return !!target && isAbstractType(target) && isObjectType(object) && schema.isSubType(target, object);
}

function rootType(schema: GraphQLSchema, operation: OperationDefinitionNode) {
  return schema.getRootType(operation.operation) ?? undefined;
}

/** The cost of the operation a request runs (the one named, or the only one). */
export function operationCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
): number {
  const root = rootType(schema, operation);
  return root ? selectionCost(schema, operation.selectionSet, root, fragmentsOf(document)) : 0;
}

/** Validation rule: every operation of the document nests at most `max` levels below its root fields. */
export function depthLimitRule(max = MAX_DEPTH): ValidationRule {
  return (context: ValidationContext): ASTVisitor => {
    const fragments = fragmentsOf(context.getDocument());
    return {
      OperationDefinition(node) {
        // Root fields are level 0, as graphql-depth-limit counts: `{ me { id } }` is 1 deep, and the
        // issue's posts → comments → author query (8 fields on its longest path) is exactly 7.
        const depth = selectionDepth(node.selectionSet, fragments) - 1;
        if (depth > max) {
          context.reportError(
            new GraphQLError(`The query nests ${depth} levels deep; at most ${max} are allowed.`, {
              nodes: [node],
              extensions: { code: 'GRAPHQL_VALIDATION_FAILED', depth, maxDepth: max },
            }),
          );
        }
      },
    };
  };
}

/** Validation rule: every operation of the document costs at most `max` points. */
export function complexityLimitRule(max = MAX_COMPLEXITY): ValidationRule {
  return (context: ValidationContext): ASTVisitor => ({
    OperationDefinition(node) {
      const cost = operationCost(context.getSchema(), context.getDocument(), node);
      if (cost > max) {
        context.reportError(
          new GraphQLError(`The query costs ${cost} points; at most ${max} are allowed.`, {
            nodes: [node],
            extensions: { code: 'GRAPHQL_VALIDATION_FAILED', complexity: cost, maxComplexity: max },
          }),
        );
      }
    },
  });
}

/** Field selections written in the document: every field node, in operations and fragments alike. */
export function fieldSelections(document: DocumentNode): number {
  let count = 0;
  const walk = (set: SelectionSetNode): void => {
    for (const selection of set.selections) {
      if (selection.kind === Kind.FIELD) {
        count++;
        if (selection.selectionSet) walk(selection.selectionSet);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) walk(selection.selectionSet);
    }
  };
  for (const definition of document.definitions) {
    if (definition.kind === Kind.OPERATION_DEFINITION || definition.kind === Kind.FRAGMENT_DEFINITION) {
      walk(definition.selectionSet);
    }
  }
  return count;
}

/**
 * The document-level limit, checked before graphql's own validation rules (some of which grow
 * faster than the document: 6,600 `__typename` aliases took about 0.5 s to validate and as long
 * again to compile). The refusal is a validation error like the depth and complexity limits.
 */
export function documentSizeError(document: DocumentNode, max = MAX_FIELDS): GraphQLError | undefined {
  const fields = fieldSelections(document);
  if (fields <= max) return undefined;
  return new GraphQLError(`The document selects ${fields} fields; at most ${max} are allowed.`, {
    extensions: { code: 'GRAPHQL_VALIDATION_FAILED', fields, maxFields: max },
  });
}
