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

/** JSON logs on stderr, so stdout stays free for the CLI's one JSON object. */
export function createLogger(level: string, destination: DestinationStream = pino.destination(2)): Logger {
  return pino(
    { level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { service: 'atrium' } },
    destination,
  );
}
