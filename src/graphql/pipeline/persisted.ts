import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { GraphQLError, type GraphQLSchema, Kind, parse, validate } from 'graphql';
import { LRUCache } from 'lru-cache';
import { ConfigError } from '../../config/schema.js';
import { iso, type Clock } from '../../domain/clock.js';
import type { Store } from '../../store/store.js';

export const sha256Hex = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

const HASH = /^[0-9a-f]{64}$/;

/** What every transport hands in: the GraphQL-over-HTTP request parameters. */
export interface OperationParams {
  query?: string | null | undefined;
  operationName?: string | null | undefined;
  variables?: unknown;
  extensions?: unknown;
}

function failure(code: string, message: string, status: number): GraphQLError {
  return new GraphQLError(message, { extensions: { code, http: { status } } });
}

export const persistedQueryNotFound = (): GraphQLError =>
  // 200, as Apollo's servers answer it: the client reads the body and retries with the query.
  failure('PERSISTED_QUERY_NOT_FOUND', 'PersistedQueryNotFound', 200);

/**
 * Reads PERSISTED_QUERIES_FILE: a plain `{ "<sha256>": "<query>" }` map, or Apollo's persisted
 * query manifest `{ format: "apollo-persisted-query-manifest", operations: [{ id, body }] }`. Every
 * hash is checked against its document, so a manifest cannot map a hash to another query.
 */
export function parseManifest(json: unknown, source = 'the manifest'): Map<string, string> {
  const entries = new Map<string, string>();
  const add = (hash: unknown, query: unknown) => {
    if (typeof hash !== 'string' || typeof query !== 'string') {
      throw new Error(`${source}: every entry needs a string hash and a string query`);
    }
    const normal = hash.toLowerCase();
    if (sha256Hex(query) !== normal) {
      throw new Error(`${source}: ${hash} is not the SHA-256 of its query`);
    }
    entries.set(normal, query);
  };
  if (json && typeof json === 'object' && !Array.isArray(json)) {
    const record = json as Record<string, unknown>;
    if (record.format === 'apollo-persisted-query-manifest') {
      if (!Array.isArray(record.operations)) throw new Error(`${source}: operations must be a list`);
      for (const op of record.operations as Array<Record<string, unknown>>) add(op?.id, op?.body);
      return entries;
    }
    for (const [hash, query] of Object.entries(record)) add(hash, query);
    return entries;
  }
  throw new Error(`${source}: expected a JSON object`);
}

/**
 * Why a manifest entry could never run against `schema`, or undefined when it can. Only the schema's
 * own rules (graphql's specifiedRules) apply here: the limits (depth, cost, selections) and the
 * production refusal of introspection stay per request, as they depend on the caller and the mode.
 */
function unusable(hash: string, query: string, schema: GraphQLSchema): string | undefined {
  let doc;
  try {
    doc = parse(query);
  } catch (err) {
    return `${hash} does not parse: ${(err as Error).message}`;
  }
  const errors = validate(schema, doc);
  if (errors.length === 0) return undefined;
  const names = doc.definitions.flatMap((d) =>
    d.kind === Kind.OPERATION_DEFINITION ? [d.name?.value ?? '(anonymous)'] : [],
  );
  const label = names.length ? `operation ${names.join(', ')} (${hash})` : hash;
  return `${label} does not validate against the schema: ${errors[0]!.message}`;
}

/**
 * The manifest `PERSISTED_QUERIES_FILE` names; one that cannot be used stops the start as bad
 * configuration, and so does an entry that could never run against it (a fragment left
 * out, a client-only directive such as `@connection` kept): production would otherwise start and
 * answer that operation with a validation error on every request.
 */
export async function readManifestFile(path: string, schema: GraphQLSchema): Promise<Map<string, string>> {
  const refuse = (problem: string) =>
    new ConfigError(
      'PERSISTED_QUERIES_FILE',
      `a readable JSON manifest of persisted queries (${problem})`,
      path,
    );
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw refuse(`cannot read it: ${(err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw refuse('it is not JSON');
  }
  let entries: Map<string, string>;
  try {
    entries = parseManifest(json);
  } catch (err) {
    throw refuse((err as Error).message);
  }
  for (const [hash, query] of entries) {
    const problem = unusable(hash, query, schema);
    // One line: graphql's messages may span several (a syntax error quotes the source).
    if (problem) throw refuse(problem.replace(/\s+/g, ' '));
  }
  return entries;
}

function readExtensions(raw: unknown): Record<string, unknown> | undefined {
  if (raw == null || raw === '') return undefined;
  if (typeof raw === 'string') {
    try {
      raw = JSON.parse(raw);
    } catch {
      throw failure('BAD_REQUEST', 'extensions must be a JSON object.', 400);
    }
  }
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    throw failure('BAD_REQUEST', 'extensions must be a JSON object.', 400);
  }
  return raw as Record<string, unknown>;
}

/**
 * Automatic persisted queries (Apollo's `extensions.persistedQuery = { version: 1, sha256Hash }`).
 * Known hashes come from the manifest and from the `persisted_queries` table, so a hash one
 * instance registered runs on every instance. With registration off (production) only known hashes
 * run and a request without one is refused.
 */
export class PersistedQueries {
  private readonly cache = new LRUCache<string, string>({ max: 5_000 });

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly manifest: ReadonlyMap<string, string>,
    readonly registration: boolean,
  ) {}

  async lookup(hash: string): Promise<string | undefined> {
    const known = this.manifest.get(hash) ?? this.cache.get(hash);
    if (known !== undefined) return known;
    const row = await this.store.db
      .selectFrom('persisted_queries')
      .select('query')
      .where('hash', '=', hash)
      .executeTakeFirst();
    if (row) this.cache.set(hash, row.query);
    return row?.query;
  }

  async register(hash: string, query: string): Promise<void> {
    await this.store.db
      .insertInto('persisted_queries')
      .values({ hash, query, created_at: iso(this.clock.now()) })
      .onConflict((oc) => oc.column('hash').doNothing())
      .execute();
    this.cache.set(hash, query);
  }

  /** The document text a request runs, or a GraphQLError saying why none does. */
  async resolve(params: OperationParams): Promise<string> {
    const extensions = readExtensions(params.extensions);
    const persisted = extensions?.persistedQuery;
    const query = typeof params.query === 'string' && params.query !== '' ? params.query : undefined;
    if (persisted === undefined) {
      if (!this.registration) {
        throw failure(
          'PERSISTED_QUERY_REQUIRED',
          'Only persisted queries run here: send extensions.persistedQuery with a known sha256Hash.',
          400,
        );
      }
      if (query === undefined) throw failure('BAD_REQUEST', 'Send a query (or a persisted query hash).', 400);
      return query;
    }
    const { version, sha256Hash } = (persisted ?? {}) as { version?: unknown; sha256Hash?: unknown };
    if (version !== 1) throw failure('BAD_REQUEST', 'persistedQuery.version must be 1.', 400);
    if (typeof sha256Hash !== 'string' || !HASH.test(sha256Hash.toLowerCase())) {
      throw failure('BAD_REQUEST', 'persistedQuery.sha256Hash must be 64 hexadecimal digits.', 400);
    }
    const hash = sha256Hash.toLowerCase();
    if (query !== undefined && sha256Hex(query) !== hash) {
      throw failure('BAD_REQUEST', 'persistedQuery.sha256Hash is not the SHA-256 of the query.', 400);
    }
    const known = await this.lookup(hash);
    if (known !== undefined) return known;
    if (query === undefined || !this.registration) throw persistedQueryNotFound();
    await this.register(hash, query);
    return query;
  }
}

/** The store of persisted queries for this process: the manifest file (if any) plus the table. */
export async function createPersistedQueries(
  store: Store,
  clock: Clock,
  options: { file: string | undefined; registration: boolean; schema: GraphQLSchema },
): Promise<PersistedQueries> {
  const manifest = options.file
    ? await readManifestFile(options.file, options.schema)
    : new Map<string, string>();
  return new PersistedQueries(store, clock, manifest, options.registration);
}
