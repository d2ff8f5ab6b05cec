import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';

const REDOC_SCRIPT_PATH = '/redoc/redoc.standalone.js';
const REDOC_BADGE_PATH = '/redoc/logo-mini.svg';
const REDOC_ICON_PATH = '/redoc/favicon.svg';

/**
 * The one address the ReDoc bundle reaches outside its page: the image of its "API docs by Redocly"
 * badge in the sidebar, which no option turns off (redoc 2.5). Offline it fails and logs a console
 * error; online it tells another host who reads our docs. The bundle is served with it pointed here.
 */
const REDOC_CDN_BADGE = 'https://cdn.redoc.ly/redoc/logo-mini.svg';

/** A small neutral mark for the badge (the image is decoration beside the badge's text). */
const BADGE_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16" width="16" height="16"><rect x="1" y="1" width="14" height="14" rx="3" fill="#7f8896"/><path d="M5 4h4.2a2.3 2.3 0 0 1 0 4.6H7L10.5 12M5 4v8" fill="none" stroke="#fff" stroke-width="1.6" stroke-linecap="round" stroke-linejoin="round"/></svg>
`;

/** The page's icon: declared, so the browser does not ask for a /favicon.ico that is not there. */
const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32" width="32" height="32"><rect width="32" height="32" rx="6" fill="#2f3b52"/><path d="M9 24 16 8l7 16M11.6 18h8.8" fill="none" stroke="#fff" stroke-width="2.6" stroke-linecap="round" stroke-linejoin="round"/></svg>
`;

/**
 * The installed bundle, served by this process so the page needs no CDN and works offline, with
 * the badge's image taken from this server. A bundle without that address (another redoc version)
 * stops the start rather than silently sending readers' browsers elsewhere again.
 */
export function loadRedocBundle(): string {
  const require = createRequire(import.meta.url);
  const source = readFileSync(require.resolve('redoc/bundles/redoc.standalone.js'), 'utf8');
  const quoted = JSON.stringify(REDOC_CDN_BADGE);
  if (!source.includes(quoted))
    throw new Error(
      `redoc/bundles/redoc.standalone.js no longer contains ${quoted}: check which hosts this redoc version contacts and update src/http/docs/redoc.ts`,
    );
  return source.split(quoted).join(JSON.stringify(REDOC_BADGE_PATH));
}

export function redocPage(specUrl: string, title: string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<link rel="icon" type="image/svg+xml" href="${REDOC_ICON_PATH}">
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
  const bundle = loadRedocBundle();
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
  for (const [path, svg] of [
    [REDOC_BADGE_PATH, BADGE_SVG],
    [REDOC_ICON_PATH, ICON_SVG],
  ] as const)
    app.get(path, { schema: { hide: true } }, async (_request, reply) =>
      reply.type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(svg),
    );
}
