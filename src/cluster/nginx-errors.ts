/**
 * What nginx answers when it answers itself: a role down or not yet up (502, 504), a `return 503`
 * for a role the layout has none of, a body over client_max_body_size (413), a request nginx cannot
 * parse (400, 414, 494). Not 408: nginx never sends one, whatever error_page says; a client that
 * stalls past client_header_timeout or client_body_timeout gets the connection closed without a
 * byte (nginx-config.ts, CLIENT_TIMEOUT_S; a cluster test checks). Without these pages a client
 * gets nginx's HTML page where Atrium's surfaces promise a JSON error, a GraphQL error or a gRPC
 * status. Every body is built from the tables Atrium itself answers with (REST's errorBody and
 * user-API dialect, GraphQL's and gRPC's code tables, the token server's OAuth errors), so nginx
 * says what an instance would have said.
 *
 * The pages are internal locations reached by `error_page <status> = <uri>`, not named locations:
 * nginx cannot redirect a request whose request line it could not parse to a named location
 * ("empty URI in redirect to named location", and a 500 with the HTML page), but it can to a URI.
 */
import { status as grpcStatus } from '@grpc/grpc-js';
import { DomainError } from '../domain/errors.js';
import { graphQLErrorBody } from '../graphql/errors.js';
import { GRPC_STATUS } from '../grpc/errors.js';
import { errorBody, toDomainError } from '../http/errors.js';
import { CLIENT_REQUEST_ID } from '../http/plugins/request-context.js';
import { USER_API_DIALECT } from '../http/rest/users/errors.js';

/** The variable holding the request's id (see REQUEST_ID_MAP); nginx fills it into every body. */
export const REQUEST_ID_VAR = '$atrium_request_id';

/**
 * The id Atrium would use for the request: the client's X-Request-Id when Atrium would keep it
 * (request-context.ts), otherwise one nginx makes. nginx forwards it as X-Request-Id, so an answer
 * nginx gives and the instance's log lines for the same request carry one id.
 */
export const REQUEST_ID_MAP = `# The request id, as Atrium would choose it: the client's X-Request-Id when well formed, else a new
# one. Forwarded to every instance and quoted in the answers nginx gives itself.
map $http_x_request_id $atrium_request_id {
    "~${CLIENT_REQUEST_ID.source}" $http_x_request_id;
    default req_$request_id;
}
`;

/** An error nginx gives itself, as the core error an instance would have answered it with. */
interface NginxError {
  /** The status nginx raises (494 is nginx's own "request header too large"). */
  raised: number[];
  /** The status the client gets. */
  status: number;
  error: DomainError;
}

/** What a Node parser error answers in Atrium (client-errors.ts): the same status, the same body. */
const asAtrium = (status: number) =>
  toDomainError(Object.assign(new Error(statusText(status)), { statusCode: status }));

const unavailable = (status: number, message: string) =>
  new DomainError('unavailable', message, [], { status });

const ERRORS: NginxError[] = [
  { raised: [400], status: 400, error: asAtrium(400) },
  { raised: [404], status: 404, error: new DomainError('not_found', 'No such route or resource.') },
  { raised: [413], status: 413, error: asAtrium(413) },
  // A request line or header over nginx's buffers: what Atrium's own HTTP parser answers for a head
  // over its limit (431), rather than nginx's non-standard 494 or a 414 naming only the line.
  // nginx has no reason phrase for 431: its status line is `HTTP/1.1 431 `, which HTTP/1.1 allows
  // and stock nginx cannot change (docs/deployment.md); the body says what went wrong.
  { raised: [414, 494], status: 431, error: asAtrium(431) },
  { raised: [500], status: 500, error: asAtrium(500) },
  // 502: no instance of the role could be reached, or one closed the connection before answering
  // (a POST may then have been applied: a client retries it with its Idempotency-Key). 503: the
  // layout has no instance of the role. 504: no answer within the proxy timeout.
  {
    raised: [502],
    status: 502,
    error: unavailable(502, 'The service is unavailable right now; retry shortly.'),
  },
  {
    raised: [503],
    status: 503,
    error: unavailable(503, 'This part of the service is not running here.'),
  },
  {
    raised: [504],
    status: 504,
    error: unavailable(504, 'The service did not answer in time; retry shortly.'),
  },
];

function statusText(status: number): string {
  return (
    {
      400: 'Bad Request',
      413: 'Payload Too Large',
      431: 'Request Header Fields Too Large',
      500: 'Internal Server Error',
    }[status] ?? 'Error'
  );
}

/**
 * nginx's failed instance stays out of rotation for its fail_timeout (2 s, nginx-config.ts); asking
 * again sooner meets the same answer when it was the only one.
 */
const RETRY_AFTER_S = 2;

export type Surface = 'rest' | 'graphql' | 'oauth' | 'page' | 'grpc';

/** The placeholder for the REST error name where the user API names it in upper case. */
const errorNameVar = (status: number) => `$atrium_rest_error_${status}`;

/** `~^(/v1/users|/v1/organizations)([/?]|$)`: the user API's paths, as errors.ts's dialectOf matches them. */
const USER_API_PATHS = `"~^(${USER_API_DIALECT.prefixes.join('|')})([/?]|$)"`;

/**
 * Maps for the REST error names the user API writes in upper case (PAYLOAD_TOO_LARGE on
 * /v1/users, payload_too_large elsewhere). On the raw request URI, as Atrium decides by the raw URL.
 */
function errorNameMaps(): string {
  return ERRORS.filter(({ error }) => USER_API_DIALECT.upperCase(error.code))
    .map(({ status, error }) => {
      const name = errorBody(error, '').body.error;
      return `map $request_uri ${errorNameVar(status)} {\n    ${USER_API_PATHS} ${name.toUpperCase()};\n    default ${name};\n}\n`;
    })
    .join('');
}

/** The maps every page needs, at http level (before the server blocks). */
export function errorMaps(): string {
  return `${REQUEST_ID_MAP}
# REST error names the user API writes in upper case, chosen by path (src/http/rest/users/errors.ts).
${errorNameMaps()}`;
}

const pageUri = (surface: Surface, status: number) => `/_atrium/error/${surface}/${status}`;

/** `error_page` lines sending each status nginx raises to the surface's page. */
export function errorPages(surface: Surface, indent: string): string {
  return ERRORS.flatMap(({ raised, status }) =>
    raised.map((r) => `${indent}error_page ${r} = ${pageUri(surface, status)};\n`),
  ).join('');
}

interface Page {
  contentType: string;
  body: string;
  headers: Record<string, string>;
}

function restPage({ status, error }: NginxError): Page {
  const { body } = errorBody(error, REQUEST_ID_VAR);
  if (USER_API_DIALECT.upperCase(error.code)) body.error = errorNameVar(status);
  return { contentType: 'application/json; charset=utf-8', body: JSON.stringify(body), headers: {} };
}

/** As GraphQL answers an error that stops a request before it runs (graphql/errors.ts). */
function graphqlPage({ error }: NginxError): Page {
  return {
    contentType: 'application/json; charset=utf-8',
    body: JSON.stringify(graphQLErrorBody(error, { message: error.message })),
    headers: {},
  };
}

/** The token server's answers (oauth/http.ts): `{ error, error_description }`, RFC 6749 codes. */
function oauthPage({ error }: NginxError): Page {
  const [name, description] =
    error.code === 'unavailable'
      ? ['temporarily_unavailable', 'The authorization server is temporarily unavailable.']
      : error.code === 'internal_error'
        ? ['server_error', 'The authorization server met an unexpected condition.']
        : error.code === 'payload_too_large'
          ? ['invalid_request', 'The request body is too large.']
          : ['invalid_request', 'The request is malformed.'];
  return {
    contentType: 'application/json; charset=utf-8',
    body: JSON.stringify({ error: name, error_description: description }),
    headers: { Pragma: 'no-cache' },
  };
}

/** /authorize is a page a person reads: a failure there is a page too, never JSON (oauth/pages). */
function htmlPage({ error }: NginxError): Page {
  const [title, text] =
    error.code === 'unavailable'
      ? ['The service is temporarily unavailable', 'Reload this page in a moment to try again.']
      : ['This sign-in request cannot continue', 'Return to the application you came from and try again.'];
  return {
    contentType: 'text/html; charset=utf-8',
    body: `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title></head><body><h1>${title}</h1><p>${text}</p></body></html>`,
    headers: {},
  };
}

/**
 * A gRPC status as a trailers-only response: HTTP 200, `content-type: application/grpc` and the
 * status in the only HEADERS frame (nginx ends the stream with it: an empty `return 200`). Not 204,
 * which nginx sends without a content type; gRPC clients read a non-200 status as an HTTP failure.
 */
function grpcPage({ error }: NginxError): Page {
  const code = GRPC_STATUS[error.code];
  return {
    contentType: 'application/grpc',
    body: '',
    headers: {
      'grpc-status': String(code),
      // Printable ASCII without `%` needs no percent-encoding (gRPC's grpc-message rule).
      'grpc-message':
        code === grpcStatus.INTERNAL ? 'Internal error; quote the x-request-id.' : error.message,
    },
  };
}

const PAGES: Record<Surface, (e: NginxError) => Page> = {
  rest: restPage,
  graphql: graphqlPage,
  oauth: oauthPage,
  page: htmlPage,
  grpc: grpcPage,
};

/** The internal locations answering a surface's errors. */
export function errorLocations(surface: Surface, indent: string): string {
  return ERRORS.map((e) => {
    const page = PAGES[surface](e);
    // Inside nginx's quotes these would end the string, escape, or start a variable of nobody's.
    const unquotable = (text: string, quote: string) =>
      text.includes(quote) || text.includes('\\') || /\$(?!atrium_)/.test(text);
    if (unquotable(page.body, "'") || Object.values(page.headers).some((v) => unquotable(v, '"')))
      throw new Error(`an nginx error page cannot be quoted: ${page.body}`);
    // As an instance answers: the request id (gRPC: in the metadata), and for HTTP its security
    // and caching headers, and when to retry.
    const http =
      surface === 'grpc'
        ? {}
        : {
            'Cache-Control': 'no-store',
            'X-Content-Type-Options': 'nosniff',
            ...(e.error.code === 'unavailable' ? { 'Retry-After': String(RETRY_AFTER_S) } : {}),
          };
    const headers: Record<string, string> = {
      'X-Request-Id': REQUEST_ID_VAR,
      ...http,
      ...page.headers,
    };
    const lines = [
      `location = ${pageUri(surface, e.status)} {`,
      '    internal;',
      // HTTP/2 (gRPC): answering discards the request body, and over HTTP/2 that reads it against
      // this location's limit; a body refused for its size (413) would be refused again, and nginx
      // would send its HTML 413 instead of this page. The body is discarded, never stored. (The
      // gRPC server sets no limit today, nginx-config.ts; this keeps the pages right if it ever
      // does, for a refusal before the instance answers: after, nginx can only reset the stream.)
      ...(surface === 'grpc' ? ['    client_max_body_size 0;'] : []),
      `    default_type "${page.contentType}";`,
      ...Object.entries(headers).map(([k, v]) => `    add_header ${k} "${v}" always;`),
      surface === 'grpc' ? '    return 200;' : `    return ${e.status} '${page.body}';`,
      '}',
    ];
    return lines.map((l) => `${indent}${l}\n`).join('');
  }).join('');
}
