import { Ajv, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

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
