import { Ajv, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance, FastifySchemaCompiler } from 'fastify';

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
  return ajv;
}

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const strict = makeAjv(false);
  const coercing = makeAjv(true);
  return ({ schema, httpPart }) => (httpPart === 'body' ? strict : coercing).compile(schema as object);
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
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    defaultParser(request, text, done);
  });
}
