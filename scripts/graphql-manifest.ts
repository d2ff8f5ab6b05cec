/**
 * Builds the persisted-query manifest production runs from (PERSISTED_QUERIES_FILE):
 *
 *   npm run -s graphql:manifest -- client/operations/ other.graphql > persisted-queries.json
 *
 * Reads every .graphql/.gql file given (or found under a given folder), and writes Apollo's
 * persisted-query manifest to stdout. Each operation (with the fragments it uses) is listed in the
 * form Apollo Client sends and hashes: its cache adds `__typename` to every selection set first
 * (Apollo's own `addTypenameToDocument`, as Apollo's generate-persisted-query-manifest does), then
 * graphql's `print`. Where that differs from the operation as written, the operation as written
 * (printed) is listed too, for clients that send documents unchanged. Until 2026-11-28 only the
 * second form was listed, so production refused every operation Apollo Client sent by hash.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { addTypenameToDocument } from '@apollo/client/utilities';
import { type DefinitionNode, type DocumentNode, Kind, parse, print, visit } from 'graphql';

function files(path: string): string[] {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(path).isDirectory();
  } catch (err) {
    // A path that is not there is the caller's mistake: one line naming it, not a stack.
    process.stderr.write(
      `graphql:manifest: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? err}\n`,
    );
    process.exit(1);
  }
  if (isDirectory) return readdirSync(path).flatMap((name) => files(join(path, name)));
  return /\.(graphql|gql)$/.test(path) ? [path] : [];
}

/** The operation plus every fragment it reaches, in the file's order. */
function operationDocument(doc: DocumentNode, operation: DefinitionNode): DocumentNode {
  const fragments = new Map(
    doc.definitions.flatMap((d) => (d.kind === Kind.FRAGMENT_DEFINITION ? [[d.name.value, d] as const] : [])),
  );
  const used = new Set<string>();
  const walk = (node: DefinitionNode) =>
    visit(node, {
      FragmentSpread(spread) {
        if (used.has(spread.name.value)) return;
        used.add(spread.name.value);
        const fragment = fragments.get(spread.name.value);
        if (fragment) walk(fragment);
      },
    });
  walk(operation);
  const definitions = doc.definitions.filter(
    (d) => d === operation || (d.kind === Kind.FRAGMENT_DEFINITION && used.has(d.name.value)),
  );
  return { kind: Kind.DOCUMENT, definitions };
}

const operations: Array<{ id: string; body: string; name: string; type: string }> = [];
const paths = process.argv.slice(2);
if (paths.length === 0) {
  process.stderr.write('usage: npm run -s graphql:manifest -- <file or folder>...\n');
  process.exit(2);
}
for (const file of paths.flatMap(files)) {
  const doc = parse(readFileSync(file, 'utf8'));
  for (const d of doc.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION) continue;
    const operation = operationDocument(doc, d);
    const bodies = new Set([print(addTypenameToDocument(operation)), print(operation)]);
    for (const body of bodies) {
      const id = createHash('sha256').update(body).digest('hex');
      operations.push({ id, body, name: d.name?.value ?? '', type: d.operation });
    }
  }
}
process.stdout.write(
  `${JSON.stringify({ format: 'apollo-persisted-query-manifest', version: 1, operations }, null, 2)}\n`,
);
