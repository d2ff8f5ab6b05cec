/**
 * Builds the persisted-query manifest production runs from (PERSISTED_QUERIES_FILE):
 *
 *   npm run -s graphql:manifest -- client/operations/ other.graphql > persisted-queries.json
 *
 * Reads every .graphql/.gql file given (or found under a given folder), and writes Apollo's
 * persisted-query manifest to stdout: one entry per operation, its body printed the way Apollo
 * Client prints a document before hashing it (graphql's `print`), with the fragments it uses.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type DefinitionNode, type DocumentNode, Kind, parse, print, visit } from 'graphql';

function files(path: string): string[] {
  if (statSync(path).isDirectory()) return readdirSync(path).flatMap((name) => files(join(path, name)));
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
    const body = print(operationDocument(doc, d));
    const id = createHash('sha256').update(body).digest('hex');
    operations.push({ id, body, name: d.name?.value ?? '', type: d.operation });
  }
}
process.stdout.write(`${JSON.stringify({ format: 'apollo-persisted-query-manifest', version: 1, operations }, null, 2)}\n`);
