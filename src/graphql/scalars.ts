import { GraphQLError, GraphQLScalarType, Kind, print } from 'graphql';
import { parseIsoDateTime } from '../domain/validate.js';
import { badUserInput } from './errors.js';

/** Reads a DateTime input through the core's one date-time reader (Feb 30 is no date anywhere). */
function readIso(value: unknown): Date {
  const ms = typeof value === 'string' ? parseIsoDateTime(value) : 'not_iso';
  if (ms === 'not_iso') {
    throw badUserInput('DateTime must be an ISO 8601 string with a zone, such as 2026-11-01T09:30:00.000Z.');
  }
  if (ms === 'not_real') throw badUserInput(`DateTime ${String(value)} is not a real date.`);
  return new Date(ms);
}

/**
 * The scalar's one description: the SDL (`_service { sdl }`, schema/base.ts) prints it and this
 * scalar, which replaces the SDL's in the executable schema, gives it to introspection.
 */
export const DATE_TIME_DESCRIPTION =
  'A point in time: an ISO 8601 string in UTC with milliseconds, such as "2026-11-01T09:30:00.000Z". Inputs must carry a zone (Z or an offset) and are converted to UTC.';

/**
 * Decisions §5: an ISO 8601 UTC string with milliseconds on output. Inputs must name their zone;
 * they reach resolvers as a Date, which the core reads as it reads any date-time.
 */
export const DateTimeScalar = new GraphQLScalarType<Date, string>({
  name: 'DateTime',
  description: DATE_TIME_DESCRIPTION,
  serialize(value) {
    const date = value instanceof Date ? value : typeof value === 'string' ? new Date(value) : null;
    if (!date || Number.isNaN(date.getTime())) throw new TypeError('DateTime cannot represent this value.');
    return date.toISOString();
  },
  parseValue: readIso,
  // In the query text the refusal points at the literal and names it, as graphql-js words a
  // literal of the wrong type, instead of a bare message with no location.
  parseLiteral(ast) {
    try {
      if (ast.kind !== Kind.STRING) throw badUserInput('DateTime must be a string.');
      return readIso(ast.value);
    } catch (err) {
      const { message, extensions } = err as GraphQLError;
      throw new GraphQLError(`Expected value of type "DateTime", found ${print(ast)}; ${message}`, {
        nodes: ast,
        extensions,
      });
    }
  },
});
