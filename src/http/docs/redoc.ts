import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';

const REDOC_SCRIPT_PATH = '/redoc/redoc.standalone.js';

/** The installed bundle is served by this process, so the page needs no CDN and works offline. */
function loadBundle(): Buffer {
  const require = createRequire(import.meta.url);
  return readFileSync(require.resolve('redoc/bundles/redoc.standalone.js'));
}

export function redocPage(specUrl: string, title: string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>body { margin: 0; padding: 0; }</style>
</head>
<body>
<redoc spec-url="${specUrl}"></redoc>
<script src="${REDOC_SCRIPT_PATH}"></script>
</body>
</html>
`;
}

/** ReDoc at /redoc, reading the same document as Swagger UI. */
export function registerRedoc(app: FastifyInstance, specUrl: string, title: string): void {
  const bundle = loadBundle();
  const page = redocPage(specUrl, title);
  app.get('/redoc', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('text/html; charset=utf-8').header('cache-control', 'no-cache').send(page),
  );
  app.get(REDOC_SCRIPT_PATH, { schema: { hide: true } }, async (_request, reply) =>
    reply
      .type('application/javascript; charset=utf-8')
      .header('cache-control', 'public, max-age=86400')
      .send(bundle),
  );
}
