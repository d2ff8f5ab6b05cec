/**
 * Builds the persisted-query manifest production runs from (PERSISTED_QUERIES_FILE):
 *
 *   npm run -s graphql:manifest -- client/operations/ other.graphql > persisted-queries.json
 *
 * Reads every .graphql/.gql file given (or found under a given folder) as one set: an operation may
 * spread a fragment defined in any of them. Each operation, with every fragment it reaches, is run
 * through a real Apollo Client whose link only records the document it would send, as Apollo's
 * `@apollo/generate-persisted-query-manifest` does. So the client's own transforms apply exactly
 * (`__typename` added, `@connection`, `@client` fields, `@nonreactive` and `@unmask` removed) rather
 * than a copy of them that drifts with each Apollo release. Bodies listed per operation, the last
 * being Apollo's form:
 *
 * - as written (graphql's `print`, the file's order), for clients that send documents unchanged,
 *   unless it does not validate against Atrium's schema (a client-only directive kept);
 * - as Apollo Client sends the document in the file's order (a fragment-first file a loader hands
 *   over unchanged; fragments from other files after it), which a plain `PersistedQueryLink` hashes;
 * - as it sends the operation followed by its fragments in the order they are first spread (the usual
 *   `gql\`query … ${Fragment}\`` with each fragment interpolating those it spreads);
 * - as Apollo's generator writes it: the operation, then its fragments by name (its
 *   `sortTopLevelDefinitions`), which `@apollo/persisted-query-lists` hashes or looks up by name
 *   (there the last entry of a name wins, hence last).
 *
 * Identical bodies are listed once. An app that assembles a document in yet another order sends
 * another hash: docs/graphql.md says how to hash in Apollo's order instead.
 *
 * A fragment no file defines, an operation or fragment name defined twice, or an operation whose
 * Apollo form does not validate against Atrium's schema stops the script with one line naming it,
 * exit 1: the server would refuse such a manifest at start (src/graphql/pipeline/persisted.ts).
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ApolloClient, ApolloLink, InMemoryCache, Observable } from '@apollo/client';
import { LocalState } from '@apollo/client/local-state';
import {
  type DefinitionNode,
  type DocumentNode,
  type FragmentDefinitionNode,
  Kind,
  type OperationDefinitionNode,
  parse,
  print,
  validate,
  visit,
} from 'graphql';
import { buildAtriumSchema } from '../src/graphql/schema.js';

function fail(message: string): never {
  process.stderr.write(`graphql:manifest: ${message}\n`);
  process.exit(1);
}

function files(path: string): string[] {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(path).isDirectory();
  } catch (err) {
    // A path that is not there is the caller's mistake: one line naming it, not a stack.
    fail(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
  if (isDirectory) {
    // Sorted, so the manifest does not depend on the file system's listing order.
    return readdirSync(path)
      .sort()
      .flatMap((name) => files(join(path, name)));
  }
  return /\.(graphql|gql)$/.test(path) ? [path] : [];
}

interface Source {
  file: string;
  doc: DocumentNode;
}

const operationLabel = (op: OperationDefinitionNode, file: string) =>
  `${op.operation} ${op.name?.value ?? '(anonymous)'} (${file})`;

/** Apollo's `sortTopLevelDefinitions` (@apollo/persisted-query-lists): operations, then fragments, each by name. */
function sortTopLevelDefinitions(doc: DocumentNode): DocumentNode {
  const name = (d: DefinitionNode) =>
    d.kind === Kind.OPERATION_DEFINITION || d.kind === Kind.FRAGMENT_DEFINITION ? (d.name?.value ?? '') : '';
  const definitions = [...doc.definitions].sort((a, b) => {
    if (a.kind !== b.kind) return a.kind > b.kind ? -1 : 1;
    return name(a) < name(b) ? -1 : name(a) > name(b) ? 1 : 0;
  });
  return { ...doc, definitions };
}

const paths = process.argv.slice(2);
if (paths.length === 0) {
  process.stderr.write('usage: npm run -s graphql:manifest -- <file or folder>...\n');
  process.exit(2);
}

const sources: Source[] = [...new Set(paths.flatMap(files))].map((file) => {
  try {
    return { file, doc: parse(readFileSync(file, 'utf8')) };
  } catch (err) {
    fail(`${file}: ${(err as Error).message.split('\n')[0]}`);
  }
});

const fragments = new Map<string, { definition: FragmentDefinitionNode; file: string }>();
const operationFiles = new Map<string, string>();
for (const { file, doc } of sources) {
  for (const d of doc.definitions) {
    if (d.kind === Kind.FRAGMENT_DEFINITION) {
      const earlier = fragments.get(d.name.value);
      if (earlier) fail(`fragment ${d.name.value} is defined twice: in ${earlier.file} and in ${file}`);
      fragments.set(d.name.value, { definition: d, file });
    } else if (d.kind === Kind.OPERATION_DEFINITION && d.name) {
      const earlier = operationFiles.get(d.name.value);
      if (earlier) fail(`operation ${d.name.value} is defined twice: in ${earlier} and in ${file}`);
      operationFiles.set(d.name.value, file);
    }
  }
}

/** The names of the fragments `operation` reaches, in the order they are first spread. */
function reachedFragments(operation: OperationDefinitionNode, file: string): string[] {
  const reached: string[] = [];
  const walk = (node: DefinitionNode) =>
    visit(node, {
      FragmentSpread(spread) {
        const name = spread.name.value;
        if (reached.includes(name)) return;
        const fragment = fragments.get(name);
        if (!fragment) {
          fail(`${operationLabel(operation, file)} spreads fragment ${name}, which no file given defines`);
        }
        reached.push(name);
        walk(fragment.definition);
      },
    });
  walk(operation);
  return reached;
}

/**
 * The operation and its fragments in the file's order: the operation's own file as written, then
 * fragments from other files in the order they are first spread (as `gql` interpolation, a loader's
 * imports or a fragment registry append them).
 */
function fileOrderDocument(source: Source, operation: OperationDefinitionNode): DocumentNode {
  const reached = reachedFragments(operation, source.file);
  const own = source.doc.definitions.filter(
    (d) => d === operation || (d.kind === Kind.FRAGMENT_DEFINITION && reached.includes(d.name.value)),
  );
  const ownNames = new Set(own.flatMap((d) => (d.kind === Kind.FRAGMENT_DEFINITION ? [d.name.value] : [])));
  const others = reached.filter((name) => !ownNames.has(name)).map((name) => fragments.get(name)!.definition);
  return { kind: Kind.DOCUMENT, definitions: [...own, ...others] };
}

/**
 * The operation, then each fragment where it is first spread, depth first: the order of the usual
 * `gql\`query … ${Fragment}\`` where each fragment's own `gql` interpolates the fragments it spreads.
 */
function spreadOrderDocument(source: Source, operation: OperationDefinitionNode): DocumentNode {
  const reached = reachedFragments(operation, source.file).map((name) => fragments.get(name)!.definition);
  return { kind: Kind.DOCUMENT, definitions: [operation, ...reached] };
}

// What the recording link saw last: Apollo Client calls it once per operation, in order.
let sent: DocumentNode | undefined;
const client = new ApolloClient({
  cache: new InMemoryCache(),
  // Without it Apollo Client 4 refuses a document with @client fields; with it, it strips them.
  localState: new LocalState(),
  link: new ApolloLink((operation) => {
    sent = operation.query;
    return new Observable((observer) => {
      observer.next({ data: null });
      observer.complete();
    });
  }),
});

/** The document Apollo Client sends for `doc`, after its transforms. */
async function asApolloSends(doc: DocumentNode, operation: OperationDefinitionNode, file: string) {
  sent = undefined;
  try {
    if (operation.operation === 'mutation') {
      await client.mutate({ mutation: doc, fetchPolicy: 'no-cache' });
    } else if (operation.operation === 'subscription') {
      await new Promise<void>((resolve, reject) => {
        const sub = client.subscribe({ query: doc, fetchPolicy: 'no-cache' }).subscribe({
          next() {
            sub.unsubscribe();
            resolve();
          },
          error: reject,
          complete: resolve,
        });
      });
    } else {
      await client.query({ query: doc, fetchPolicy: 'no-cache' });
    }
  } catch (err) {
    fail(`${operationLabel(operation, file)}: Apollo Client refuses it: ${(err as Error).message}`);
  }
  if (!sent) fail(`${operationLabel(operation, file)}: Apollo Client sent nothing for it`);
  return sent;
}

const schema = buildAtriumSchema();
const operations: Array<{ id: string; body: string; name: string; type: string }> = [];
for (const source of sources) {
  for (const d of source.doc.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION) continue;
    const written = fileOrderDocument(source, d);
    const apollo = await asApolloSends(written, d, source.file);
    const spreadOrder = await asApolloSends(spreadOrderDocument(source, d), d, source.file);
    const problem = validate(schema, apollo)[0];
    if (problem) {
      fail(`${operationLabel(d, source.file)} does not validate against Atrium's schema: ${problem.message}`);
    }
    // As written, only where the server can run it: a client-only directive (`@connection`, `@client`)
    // makes it a body no client sends, which the server would refuse at start.
    const asWritten = validate(schema, written).length === 0 ? [print(written)] : [];
    // A Set keeps the first place of a repeated body; Apollo's form must come last, so it goes in last.
    const bodies = new Set([...asWritten, print(apollo), print(spreadOrder)]);
    const canonical = print(sortTopLevelDefinitions(apollo));
    bodies.delete(canonical);
    bodies.add(canonical);
    for (const body of bodies) {
      const id = createHash('sha256').update(body).digest('hex');
      operations.push({ id, body, name: d.name?.value ?? '', type: d.operation });
    }
  }
}
process.stdout.write(
  `${JSON.stringify({ format: 'apollo-persisted-query-manifest', version: 1, operations }, null, 2)}\n`,
);
