import pino, { type DestinationStream, type Logger } from 'pino';

/** Paths whose values never reach a log line: keys, tokens, passwords, secrets. */
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
  '*.code',
  '*.code_verifier',
];

/** JSON logs on stderr, so stdout stays free for the CLI's one JSON object. */
export function createLogger(level: string, destination: DestinationStream = pino.destination(2)): Logger {
  return pino(
    { level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { service: 'atrium' } },
    destination,
  );
}
