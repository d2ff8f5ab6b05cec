import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../src/graphql/pipeline/persisted.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { listeningAtrium, productionAtrium } from './support.js';
import { runOver, TRANSPORTS, type Answer } from './transports.js';

/**
 * A resolver that really fails: the posts table is renamed under a running instance, so the
 * storage engine itself raises (no mock, no stub). In every mode the client learns only
 * INTERNAL_SERVER_ERROR, "Unexpected error.", with no stack and no storage text, on every transport;
 * the cause goes to the log. Until 2026-11-28 development (NODE_ENV's default) sent the original
 * message and stack as `extensions.originalError`; the spec has no mode exception.
 */

const QUERY = 'query Broken { posts(first: 1) { totalCount edges { node { id } } } }';
const persisted = { persistedQuery: { version: 1, sha256Hash: sha256Hex(QUERY) } };
/** What SQLite and PostgreSQL say about a missing table, and what a stack looks like. */
const LEAKS = /no such table|does not exist|relation|posts_gone|sqlite|postgres|\bat .+\.(js|ts):\d+|stack/i;

/** Runs `check` while the posts table is missing, and puts it back whatever happens. */
async function withoutPostsTable<T>(atrium: TestAtrium, check: () => Promise<T>): Promise<T> {
  await sql`ALTER TABLE posts RENAME TO posts_gone`.execute(atrium.services.store.db);
  try {
    return await check();
  } finally {
    await sql`ALTER TABLE posts_gone RENAME TO posts`.execute(atrium.services.store.db);
  }
}

describe('an unexpected resolver failure in production is masked on every transport', () => {
  const log = memoryLog('info');
  const server = productionAtrium([QUERY], { logger: log.logger });

  it('runs the query while storage works', async () => {
    const a = await runOver('POST', server.base, { extensions: persisted });
    expect(a.errors).toBeUndefined();
    expect(a.data).toEqual({ posts: { totalCount: 0, edges: [] } });
  });

  it.each(TRANSPORTS)('%s: INTERNAL_SERVER_ERROR, "Unexpected error.", nothing else', async (transport) => {
    const before = log.lines.length;
    const a: Answer = await withoutPostsTable(server.atrium, () =>
      runOver(transport, server.base, { extensions: persisted }),
    );
    expect(a.status).toBe(transport === 'WS' ? 101 : 200);
    // posts is non-null, so the error nulls the whole data.
    expect(a.data).toBeNull();
    expect(a.errors).toEqual([
      {
        message: 'Unexpected error.',
        locations: [{ line: 1, column: 16 }],
        path: ['posts'],
        extensions: { code: 'INTERNAL_SERVER_ERROR' },
      },
    ]);
    expect(JSON.stringify(a)).not.toMatch(LEAKS);
    // The operator still learns the cause.
    const logged = log.lines.slice(before).find((l) => l.msg === 'graphql operation failed');
    expect(JSON.stringify(logged?.err)).toMatch(/no such table|does not exist/);
  });
});

describe('a request error Yoga explains itself shows no cause in any mode', () => {
  // The parser's complaint quoted the body back ("Unexpected token … is not valid JSON").
  const post = (base: string, accept = 'application/graphql-response+json') =>
    fetch(`${base}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept },
      body: '{"query": secret-body-text',
    });

  it.each(['production', 'test', 'development'])(
    '%s: malformed JSON is BAD_REQUEST without extensions.originalError',
    async (env) => {
      const atrium = await startTestAtrium({ NODE_ENV: env, LOG_LEVEL: 'fatal' });
      try {
        // Under application/json too: Yoga's status for it read the extension that is now gone.
        const base = (await atrium.listen()).httpUrl!;
        for (const accept of ['application/graphql-response+json', 'application/json']) {
          const res = await post(base, accept);
          expect(res.status, accept).toBe(400);
          const text = await res.text();
          expect(text).not.toMatch(/secret-body-text|SyntaxError|originalError/);
          expect(JSON.parse(text)).toEqual({
            errors: [{ message: 'POST body sent invalid JSON.', extensions: { code: 'BAD_REQUEST' } }],
          });
        }
      } finally {
        await atrium.stop();
      }
    },
  );
});

describe('an unexpected resolver failure in development is masked like production', () => {
  const server = listeningAtrium({ NODE_ENV: 'development', LOG_LEVEL: 'fatal' });

  it.each(TRANSPORTS)(
    '%s: INTERNAL_SERVER_ERROR, "Unexpected error.", no cause or stack',
    async (transport) => {
      const a = await withoutPostsTable(server.atrium, () =>
        runOver(transport, server.base, { query: QUERY }),
      );
      expect(a.data).toBeNull();
      expect(a.errors).toEqual([
        {
          message: 'Unexpected error.',
          locations: [{ line: 1, column: 16 }],
          path: ['posts'],
          extensions: { code: 'INTERNAL_SERVER_ERROR' },
        },
      ]);
      expect(JSON.stringify(a)).not.toMatch(LEAKS);
    },
  );
});

describe('an unexpected resolver failure in test mode is masked like production', () => {
  const server = listeningAtrium({ LOG_LEVEL: 'fatal' });

  it('POST: no original message outside development', async () => {
    const a = await withoutPostsTable(server.atrium, () => runOver('POST', server.base, { query: QUERY }));
    expect(a.errors).toEqual([
      expect.objectContaining({
        message: 'Unexpected error.',
        extensions: { code: 'INTERNAL_SERVER_ERROR' },
      }),
    ]);
    expect(JSON.stringify(a)).not.toMatch(LEAKS);
  });
});
