import { GraphQLError } from 'graphql';
import { type Plugin, processRegularResult } from 'graphql-yoga';
import { GRAPHQL_PATH } from '../paths.js';

export const NOT_ACCEPTABLE_MESSAGE =
  'GET and POST /graphql answer application/graphql-response+json, application/json, text/event-stream or multipart/mixed: send an Accept naming one of them.';

/** What Yoga's result processors answer with, for a result that is not a stream. */
const SERVED = [
  'application/graphql-response+json',
  'application/json',
  'text/event-stream',
  'multipart/mixed',
];

/**
 * Whether Yoga has a result processor for the request's Accept, read as Yoga reads it (a range
 * with a charset other than UTF-8 is skipped; q is not read; no Accept is `*\/*`), so this refuses
 * exactly what Yoga would otherwise have answered 406.
 */
export function servable(accept: string | null): boolean {
  const ranges = (accept || '*/*').replace(/\s/g, '').toLowerCase().split(',');
  return ranges.some((range) => {
    const [type = '', ...params] = range.split(';');
    const charset = params.find((p) => p.includes('charset=')) ?? 'charset=utf-8';
    if (charset !== 'charset=utf-8') return false;
    const [pre, suf] = type.split('/');
    return SERVED.some((served) => {
      const [sPre, sSuf] = served.split('/');
      return (pre === '*' || pre === sPre) && (suf === '*' || suf === sSuf);
    });
  });
}

/**
 * An Accept naming nothing GET or POST /graphql can answer with (`text/plain`, `text/html` in
 * production, where there is no GraphiQL) is refused with 406 before the operation runs, in
 * GraphQL's error shape. Yoga decides the media type only after executing: a mutation sent so
 * was carried out and then answered 406 with the body `null`, so a client saw a refusal of a change
 * that stood (until 2026-11-29). A refusal before the operation is read (no query, say) keeps its
 * own status and is answered as JSON.
 */
export function notAcceptablePlugin(): Plugin {
  return {
    onParse() {
      return ({ result, context }) => {
        const { request } = context as { request?: Request };
        if (!request || result instanceof Error || !result) return;
        // The direct path's stand-in request has no URL, and takes only JSON Accepts.
        if (typeof request.url !== 'string') return;
        // The Accept first: it is servable on nearly every request, and parsing the URL is not free.
        if (servable(request.headers.get('accept'))) return;
        if (new URL(request.url).pathname !== GRAPHQL_PATH) return;
        throw new GraphQLError(NOT_ACCEPTABLE_MESSAGE, {
          extensions: { code: 'BAD_REQUEST', http: { status: 406 } },
        });
      };
    },
    onResultProcess({ request, setResultProcessor }) {
      if (servable(request.headers.get('accept'))) return;
      setResultProcessor(processRegularResult, 'application/json');
    },
  };
}
