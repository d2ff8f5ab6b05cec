import { serverAudits } from 'graphql-http';
import { describe, expect, it } from 'vitest';
import { listeningAtrium } from './support.js';

/**
 * The GraphQL-over-HTTP conformance audits of the `graphql-http` package, against the real server
 * over a socket: every audit, MUST and SHOULD alike, has to pass.
 */
const server = listeningAtrium();
const url = () => `${server.base}/graphql`;

describe('graphql-http server audits', () => {
  for (const audit of serverAudits({ url, fetchFn: fetch })) {
    it(audit.name, async () => {
      const result = await audit.fn();
      expect(result.status === 'ok' ? 'ok' : `${result.status}: ${result.reason}`).toBe('ok');
    });
  }
});

describe('bad bodies on POST /graphql', () => {
  it('answers malformed JSON with 400 and a GraphQL error, nothing executed', async () => {
    const res = await fetch(url(), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
      body: '{"query": "{ __typename }"',
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { data?: unknown; errors: Array<{ message: string }> };
    expect(body.data).toBeUndefined();
    expect(body.errors[0]!.message).toMatch(/JSON/);
  });

  // nginx answers a body over its own limit on /graphql in this shape too (src/cluster/nginx-errors.ts),
  // so a GraphQL client meets one shape whichever of the two limits a body crosses.
  it('answers a body over 1 MiB with 413 and a GraphQL error, as nginx does over its limit', async () => {
    const huge = JSON.stringify({ query: `{ __typename }${' '.repeat(1_100_000)}` });
    for (const path of ['', '/stream']) {
      const res = await fetch(`${url()}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream, application/json' },
        body: huge,
      });
      expect(res.status).toBe(413);
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(await res.json()).toEqual({
        errors: [
          {
            message: 'The request body is larger than the limit.',
            extensions: { code: 'PAYLOAD_TOO_LARGE' },
          },
        ],
      });
    }
  });
});
