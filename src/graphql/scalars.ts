import { GraphQLScalarType, Kind } from 'graphql';
import { badUserInput } from './errors.js';

const ISO_WITH_ZONE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})$/i;

function readIso(value: unknown): Date {
  if (typeof value !== 'string' || !ISO_WITH_ZONE.test(value)) {
    throw badUserInput('DateTime must be an ISO 8601 string with a zone, such as 2026-11-01T09:30:00.000Z.');
  }
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) throw badUserInput(`DateTime ${value} is not a real date.`);
  return date;
}

/**
 * Decisions §5: an ISO 8601 UTC string with milliseconds on output. Inputs must name their zone;
 * they reach resolvers as a Date, which the core reads as it reads any date-time.
 */
export const DateTimeScalar = new GraphQLScalarType<Date, string>({
  name: 'DateTime',
  description: 'An ISO 8601 date-time in UTC with milliseconds, such as 2026-11-01T09:30:00.000Z.',
  serialize(value) {
    const date = value instanceof Date ? value : typeof value === 'string' ? new Date(value) : null;
    if (!date || Number.isNaN(date.getTime())) throw new TypeError('DateTime cannot represent this value.');
    return date.toISOString();
  },
  parseValue: readIso,
  parseLiteral(ast) {
    if (ast.kind !== Kind.STRING) throw badUserInput('DateTime must be a string.');
    return readIso(ast.value);
  },
});
