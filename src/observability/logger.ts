import pino, { type DestinationStream, type Logger } from 'pino';

/**
 * Paths whose values never reach a log line: keys, tokens, passwords, secrets, authorization codes.
 *
 * An authorization code travels as `code` in two places only: the form body of `POST /oauth/token`
 * (grant_type=authorization_code) and the query of the redirect that carries it to the client
 * (`?code=...&state=...`, which may be this server's own `/docs/static/oauth2-redirect.html`). So it
 * is redacted under the names a logged request's body or query goes by, not as `*.code`: that
 * wildcard also blanked every error's `code` (`err.code`: `ECONNREFUSED`, PostgreSQL's `57P01`), the
 * first thing an operator reads in an outage. Access lines carry the route pattern, never the URL.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers.cookie',
  'headers.authorization',
  'headers["x-api-key"]',
  '*.password',
  '*.client_secret',
  '*.secret',
  '*.key',
  '*.token',
  '*.access_token',
  '*.refresh_token',
  'body.code',
  'query.code',
  'params.code',
  'form.code',
  'req.body.code',
  'req.query.code',
  '*.code_verifier',
];

const CENSOR = '[redacted]';

/**
 * Fields a driver attaches to an error that carry a row's values or a statement's parameters:
 * PostgreSQL's `detail` ("Failing row contains (...)", with a webhook's signing secrets or a user's
 * password hash; "Key (email)=(...) already exists"), `where` and `internalQuery` (the context and
 * statement text of a function that failed, with its values), and whatever parameter lists a
 * driver or query builder may add. An error keeps what an operator reads it for: `code`,
 * `constraint`, `table`, `column`, `schema`, `routine`, the message and the stack.
 */
export const ERROR_ROW_DATA_FIELDS = [
  'detail',
  'where',
  'internalQuery',
  'parameters',
  'params',
  'values',
  'bindings',
  'args',
] as const;

const ROW_DATA = new Set<string>(ERROR_ROW_DATA_FIELDS);

/**
 * PostgreSQL's own messages for a value it could not take quote the value
 * (`invalid input syntax for type uuid: "..."`); the quoted part goes, the rest stays.
 */
const QUOTED_INPUT =
  /^((?:invalid input (?:syntax|value)|date\/time field value out of range)[^"]*?: )".*"$/s;

function isPostgresError(err: Record<string, unknown>): boolean {
  return typeof err.severity === 'string' && typeof err.code === 'string' && /^[0-9A-Z]{5}$/.test(err.code);
}

function withoutQuotedInput(err: Record<string, unknown>): void {
  const message = err.message;
  if (typeof message !== 'string') return;
  // messageWithCauses joins causes with ': caused by: '; the first part is this error's own.
  const own = message.split(': caused by: ')[0]!;
  const match = QUOTED_INPUT.exec(own);
  if (!match) return;
  const shown = `${match[1]}${CENSOR}`;
  err.message = message.replace(own, shown);
  if (typeof err.stack === 'string') err.stack = err.stack.split(own).join(shown);
}

/** Objects that are data to walk: plain ones, and the serialized errors pino nests. */
function isRecord(value: unknown, errProto: object | null): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null || proto === errProto;
}

/**
 * A copy without row data, never a change to the logged error itself: pino's serializer copies
 * nested objects (an ioredis `command`) by reference.
 */
function scrubbed(value: unknown, depth: number, errProto: object | null): unknown {
  if (depth > 8) return value;
  if (Array.isArray(value)) return value.map((item) => scrubbed(item, depth + 1, errProto));
  if (!isRecord(value, errProto)) return value;
  const copy: Record<string, unknown> = {};
  scrubInto(copy, value, depth, errProto);
  return copy;
}

function scrubInto(
  target: Record<string, unknown>,
  source: Record<string, unknown>,
  depth: number,
  errProto: object | null,
): void {
  for (const key of Object.keys(source)) {
    const field = source[key];
    if (ROW_DATA.has(key) && field !== undefined && field !== null) target[key] = CENSOR;
    else if (key === 'command' && isRecord(field, errProto) && 'args' in field)
      target[key] = { ...field, args: CENSOR };
    else target[key] = scrubbed(field, depth + 1, errProto);
  }
  if (isPostgresError(target)) withoutQuotedInput(target);
}

/**
 * pino's error serializer, less the row data: it copies every enumerable field of an error, and of
 * the errors it carries (`aggregateErrors`, an `originalError`, ioredis's `previousErrors`), so the
 * fields above are censored at every depth. ioredis's `command` keeps its name, not its arguments.
 */
export function serializeError(err: unknown): unknown {
  const serialized: unknown = pino.stdSerializers.err(err as Error);
  if (serialized === null || typeof serialized !== 'object' || Array.isArray(serialized)) return serialized;
  const errProto = Object.getPrototypeOf(serialized) as object | null;
  const record = serialized as Record<string, unknown>;
  // The serialized error is pino's fresh copy (keeping its `raw` link): censored in place.
  scrubInto(record, record, 0, errProto);
  return record;
}

/** Headers whose values are credentials, whatever their case. */
const CREDENTIAL_HEADERS = '(?:proxy-)?authorization|x-api-key|cookie|set-cookie';
const QUOTED = `"(?:[^"\\\\]|\\\\.)*"|'(?:[^'\\\\]|\\\\.)*'`;
const HEADER_IN_TEXT = new RegExp(
  // a name, bare or quoted, then `:` and its value: a list, a quoted string, or the rest of the line
  `(^|[^\\w-])(["']?)(${CREDENTIAL_HEADERS})\\2(\\s*:\\s*)` +
    `(\\[(?:\\s*(?:${QUOTED})\\s*,?)*\\s*\\]|\\[[^\\]]*\\]|${QUOTED}|[^\\r\\n]*)`,
  'gi',
);

/**
 * Text that may quote request headers, with the credentials' values censored. grpc-js's traces
 * (GRPC_TRACE) print a call's metadata as text (`received headers {"authorization":["Bearer ..."]}`,
 * or one `name: value` a line), which pino's redaction, working on fields, cannot reach.
 */
export function redactHeaderText(text: string): string {
  return text.replace(
    HEADER_IN_TEXT,
    (_all, lead: string, quote: string, name: string, sep: string, value: string) => {
      const censored = value.startsWith('[')
        ? `["${CENSOR}"]`
        : value.startsWith('"') || value.startsWith("'")
          ? `${value[0]}${CENSOR}${value[0]}`
          : CENSOR;
      return `${lead}${quote}${name}${quote}${sep}${censored}`;
    },
  );
}

/** JSON logs on stderr, so stdout stays free for the CLI's one JSON object. */
export function createLogger(level: string, destination: DestinationStream = pino.destination(2)): Logger {
  return pino(
    {
      level,
      redact: { paths: REDACT_PATHS, censor: CENSOR },
      serializers: { err: serializeError },
      base: { service: 'atrium' },
    },
    destination,
  );
}
