import { DomainError } from '../domain/errors.js';
import { ILL_FORMED } from '../domain/validate.js';

/**
 * Request bodies as text. Node's `toString('utf8')` (and Fastify's `parseAs: 'string'`) replace
 * bytes that are not UTF-8 with U+FFFD without a word, so a name sent as Latin-1 (`Mar\xeda`) was
 * stored as `Mar\ufffda`. Every body that is read as text is decoded here instead, and bytes that
 * are not UTF-8 are refused before anything reads them.
 */
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The body's text, or a validation_error (`invalid_characters`) when its bytes are not UTF-8. */
export function decodeUtf8(body: Buffer | string): string {
  if (typeof body === 'string') return body;
  try {
    return STRICT_UTF8.decode(body);
  } catch {
    throw invalidUtf8();
  }
}

export function invalidUtf8(): DomainError {
  // The bytes come before any parsing, so no field can be named.
  return new DomainError(
    'validation_error',
    'The request body is not valid UTF-8 text.',
    [{ field: null, message: ILL_FORMED, code: 'invalid_characters' }],
    { wireNamed: true },
  );
}

/**
 * JSON is UTF-8 (RFC 8259 §8.1): a JSON body whose Content-Type names any other charset is refused
 * with 415 naming it, rather than decoded as UTF-8 regardless of what the client said it sent.
 * Undefined when there is no charset parameter or it is UTF-8 (any case, quoted or not).
 */
export function foreignCharset(contentType: string | undefined): DomainError | undefined {
  const charset = charsetOf(contentType);
  if (charset === undefined || charset.toLowerCase() === 'utf-8') return undefined;
  return new DomainError(
    'unsupported_media_type',
    `The request body's charset ${JSON.stringify(charset)} is not supported: JSON is sent as UTF-8 (charset=utf-8, or no charset).`,
  );
}

function charsetOf(contentType: string | undefined): string | undefined {
  if (!contentType) return undefined;
  for (const param of contentType.split(';').slice(1)) {
    const eq = param.indexOf('=');
    if (eq < 0) continue;
    if (param.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    return param
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1');
  }
  return undefined;
}

/** Whether a media type is JSON: application/json or any `+json` type. */
export function isJsonMediaType(contentType: string | undefined): boolean {
  const type = contentType?.split(';')[0]?.trim().toLowerCase() ?? '';
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}
