import { Ajv, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import { DomainError } from '../domain/errors.js';
import { decodeUtf8, foreignCharset } from './body-text.js';
import { checkEmail, ILL_FORMED, illFormedTextPath } from '../domain/validate.js';
import type { FastifyInstance, FastifySchemaCompiler, FastifySchemaValidationError } from 'fastify';

/**
 * Two validators: bodies are checked strictly (a JSON "2" is not the integer 2), while query
 * strings, path parameters and headers, which arrive as text, are coerced to the schema's types.
 */
function makeAjv(coerce: boolean): Ajv {
  const options: Options = {
    allErrors: true,
    coerceTypes: coerce ? 'array' : false,
    useDefaults: true,
    removeAdditional: false,
    strict: false,
  };
  const ajv = new Ajv(options);
  (addFormats as unknown as (a: Ajv) => void)(ajv);
  // One email rule on every surface: the core's, not ajv-formats' own (which refused what gRPC and
  // GraphQL accepted, and the other way round).
  ajv.addFormat('email', (value: string) => checkEmail(value) === null);
  return ajv;
}

/** Numbers as query strings, paths and headers may write them: decimal digits, no hex, binary or exponent. */
const DECIMAL: Record<'integer' | 'number', RegExp> = {
  integer: /^-?\d+$/,
  number: /^-?\d+(?:\.\d+)?$/,
};

interface SchemaNode {
  type?: string | string[];
  properties?: Record<string, SchemaNode>;
  anyOf?: SchemaNode[];
  oneOf?: SchemaNode[];
}

/** The numeric type a property accepts, if any ('integer' wins over 'number'). */
function numericType(node: SchemaNode | undefined): 'integer' | 'number' | undefined {
  if (!node) return undefined;
  const types = [
    node.type ?? [],
    ...[...(node.anyOf ?? []), ...(node.oneOf ?? [])].map((n) => n.type ?? []),
  ].flat();
  if (types.includes('integer')) return 'integer';
  if (types.includes('number')) return 'number';
  return undefined;
}

type Check = ((data: unknown) => boolean) & { errors?: FastifySchemaValidationError[] | null };

/**
 * Ajv coerces text with JavaScript's Number(), which reads `0x10` as 16, `1e1` as 10 and `0b11` as
 * 3. Query strings, path parameters and headers are text, so each numeric one must be written in
 * decimal before it is coerced; anything else is the same type error as `abc` or `1.5`.
 */
function decimalsOnly(validate: Check, schema: SchemaNode): Check {
  const numeric = Object.entries(schema.properties ?? {}).flatMap(([key, node]) => {
    const type = numericType(node);
    return type ? [[key, type] as const] : [];
  });
  if (numeric.length === 0) return validate;
  const check: Check = (data) => {
    const issues: FastifySchemaValidationError[] = [];
    if (data !== null && typeof data === 'object') {
      for (const [key, type] of numeric) {
        const raw = (data as Record<string, unknown>)[key];
        const texts = Array.isArray(raw) ? raw : [raw];
        if (texts.some((t) => typeof t === 'string' && !DECIMAL[type].test(t))) {
          issues.push({
            instancePath: `/${key}`,
            schemaPath: `#/properties/${key}/type`,
            keyword: 'type',
            params: { type },
            message: `must be ${type} (in decimal digits)`,
          });
        }
      }
    }
    const valid = validate(data);
    const others = (validate.errors ?? []).filter(
      (e) => !issues.some((i) => i.instancePath === e.instancePath),
    );
    check.errors = issues.length === 0 ? validate.errors : [...issues, ...others];
    return valid && issues.length === 0;
  };
  return check;
}

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const strict = makeAjv(false);
  const coercing = makeAjv(true);
  return ({ schema, httpPart }) =>
    httpPart === 'body'
      ? strict.compile(schema as object)
      : decimalsOnly(coercing.compile(schema as object) as Check, schema as SchemaNode);
}

/**
 * Many clients send `Content-Type: application/json` with no body on action POSTs (cancel, refund,
 * verify). An empty body is read as "no body"; a route that needs one still fails validation. Any
 * other text must be JSON, and `__proto__`/`constructor.prototype` keys are refused as Fastify's own
 * parser does.
 */
export function acceptEmptyJsonBodies(app: FastifyInstance): void {
  const defaultParser = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  // Read as bytes: Fastify's 'string' decodes them with U+FFFD for whatever is not UTF-8.
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const charset = foreignCharset(request.headers['content-type']);
    if (charset) return done(charset, undefined);
    let text: string;
    try {
      text = decodeUtf8(body);
    } catch (err) {
      return done(err as Error, undefined);
    }
    if (text.trim() === '') return done(null, undefined);
    defaultParser(request, text, (err, parsed) => {
      if (err) return done(forbiddenKey(text) ?? err, undefined);
      done(loneSurrogate(text, parsed) ?? null, parsed);
    });
  });
}

/**
 * A `\ud800` escape with no partner decodes to half a character: strict JSON readers (RFC 7493)
 * refuse such a string, so one stored in an order would break every list that holds it, and
 * PostgreSQL would store a user's name with U+FFFD in its place, changed without a word. Refused
 * like a control character. UTF-8 bytes cannot spell one, so only text holding such an escape is
 * walked.
 */
function loneSurrogate(text: string, parsed: unknown): DomainError | undefined {
  if (!/\\u[dD][89a-fA-F]/.test(text)) return undefined;
  const path = illFormedTextPath(parsed);
  if (path === undefined) return undefined;
  const field = path === '' ? null : path;
  return new DomainError(
    'validation_error',
    'The request body has text with half a character (an unpaired UTF-16 surrogate escape).',
    [{ field, message: ILL_FORMED, code: 'invalid_characters' }],
    { wireNamed: true },
  );
}

/**
 * Valid JSON that the parser refused for a key JavaScript would read as a prototype (`__proto__`,
 * `constructor.prototype`): named as such, not called malformed.
 */
function forbiddenKey(text: string): DomainError | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const path = prototypeKeyPath(value, '');
  if (path === undefined) return undefined;
  const message = `${path} is not allowed: the key would set an object's prototype`;
  return new DomainError(
    'validation_error',
    `The request body has a key that is not allowed: ${path}.`,
    [{ field: path, message, code: 'forbidden_key' }],
    { wireNamed: true },
  );
}

function prototypeKeyPath(value: unknown, at: string): string | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = prototypeKeyPath(item, `${at}[${i}]`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  const join = (key: string) => (at === '' ? key : `${at}.${key}`);
  for (const [key, item] of Object.entries(value)) {
    if (key === '__proto__') return join(key);
    if (key === 'constructor' && item !== null && typeof item === 'object' && 'prototype' in item) {
      return join('constructor.prototype');
    }
    const found = prototypeKeyPath(item, join(key));
    if (found !== undefined) return found;
  }
  return undefined;
}
