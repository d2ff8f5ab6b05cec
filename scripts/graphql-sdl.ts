/**
 * Prints Atrium's subgraph SDL, exactly what `{ _service { sdl } }` answers outside production:
 *
 *   npm run -s graphql:sdl > atrium.graphql
 *   rover supergraph compose --config supergraph.yaml   # atrium: { schema: { file: atrium.graphql } }
 *
 * Production refuses `_service` like any introspection, so a router in front of it is given a
 * supergraph composed from this file at build time rather than introspecting at run time.
 */
import { execute, parse } from 'graphql';
import { buildAtriumSchema } from '../src/graphql/schema.js';

const result = await execute({ schema: buildAtriumSchema(), document: parse('{ _service { sdl } }') });
const sdl = (result.data as { _service?: { sdl?: string } } | null | undefined)?._service?.sdl;
if (result.errors?.length || typeof sdl !== 'string') {
  process.stderr.write(`cannot print the subgraph SDL: ${JSON.stringify(result.errors)}\n`);
  process.exit(1);
}
process.stdout.write(sdl.endsWith('\n') ? sdl : `${sdl}\n`);
