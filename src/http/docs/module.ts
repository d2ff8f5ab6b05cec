import { readFileSync } from 'node:fs';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import type { Services } from '../../compose.js';
import type { RouteModule } from '../routes.js';
import { finishDocument, makeTransform, openapiBase } from './openapi.js';
import { SWAGGER_UI_PREFIX } from './paths.js';
import { registerRedoc } from './redoc.js';

export const OPENAPI_PATH = '/openapi.json';

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
    version?: string;
  };
  return pkg.version ?? '0.0.0';
}

/**
 * OpenAPI 3.1 at /openapi.json, generated from the TypeBox schemas the routes validate with, plus
 * Swagger UI at /docs and ReDoc at /redoc, both served from installed packages (no CDN). Must be
 * the first route module: the generator only sees routes registered after it.
 */
export async function registerDocs(app: FastifyInstance, services: Services): Promise<void> {
  const { config } = services;
  const base = openapiBase(config, packageVersion());
  await app.register(swagger, {
    openapi: base as never,
    transform: makeTransform(config) as never,
    transformObject: (document) =>
      ('openapiObject' in document
        ? finishDocument(document.openapiObject as never)
        : document.swaggerObject) as never,
  });

  app.get(OPENAPI_PATH, { schema: { hide: true } }, async (_request, reply) =>
    reply.header('cache-control', 'no-cache').send(app.swagger()),
  );

  await app.register(swaggerUi, {
    routePrefix: SWAGGER_UI_PREFIX,
    // BaseLayout: Swagger UI without its top bar, whose "Explore" URL field (no label), logo (no
    // alt text) and theme toggle (no name) failed axe's critical rules, and which only offers to
    // load another document: this page documents this server's own.
    uiConfig: { deepLinking: true, persistAuthorization: false, layout: 'BaseLayout' },
    initOAuth: { usePkceWithAuthorizationCodeGrant: true, scopes: [] },
    theme: { title: 'Atrium API' },
  });

  registerRedoc(app, OPENAPI_PATH, 'Atrium API reference');
}

export const docsModule: RouteModule = {
  name: 'docs',
  roles: ['api', 'auth'],
  register: registerDocs,
};
