import { parseConfig, type Config } from '../../src/config/schema.js';
import {
  createAtrium,
  type Atrium,
  type ServerRole,
  SERVER_ROLES,
  type ServicesOptions,
} from '../../src/compose.js';
import type { Role, Tier } from '../../src/store/types.js';
import { freshDatabase, type TestDatabase } from './database.js';
import { freePort } from './ports.js';

export interface TestAtrium extends Atrium {
  config: Config;
  database: TestDatabase;
  /** Makes a user and an API key for it in one line. */
  caller(options?: {
    role?: Role;
    tier?: Tier | null;
    handle?: string;
  }): Promise<{ userId: string; key: string; keyId: string; headers: Record<string, string> }>;
  stop(): Promise<void>;
}

let counter = 0;

/** An Atrium on a fresh database, for in-process tests through `http.inject`. */
export async function startTestAtrium(
  env: Record<string, string> = {},
  roles: readonly ServerRole[] = SERVER_ROLES.filter((r) => r !== 'grpc' && r !== 'worker'),
  options: ServicesOptions = {},
): Promise<TestAtrium> {
  const database = await freshDatabase();
  // Silent whatever NODE_ENV a test picks (production would log at info into the test output); a
  // test that reads log lines passes its own logger or LOG_LEVEL.
  const config = parseConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    DATABASE_URL: database.url,
    // Any free port when the test listens; inside TEST_PORTS when that names a range.
    PORT: process.env.TEST_PORTS ? String(await freePort()) : '0',
    ...env,
  });
  let atrium: Atrium;
  try {
    atrium = await createAtrium(config, roles, options);
  } catch (err) {
    await database.drop();
    throw err;
  }
  return {
    ...atrium,
    // As served: with PORT=0 the URLs derived from it name the port bound (src/compose.ts).
    config: atrium.services.config,
    database,
    async caller(opts = {}) {
      counter += 1;
      const handle = opts.handle ?? `user${process.pid}x${counter}${Math.random().toString(36).slice(2, 6)}`;
      const user = await atrium.services.core.users.create({
        handle,
        email: `${handle}@example.com`,
        name: `Test ${handle}`,
        role: opts.role ?? 'member',
      });
      const key = await atrium.services.apiKeys.create({
        userId: user.id,
        tier: opts.tier === undefined ? 'enterprise' : opts.tier,
      });
      return { userId: user.id, key: key.key, keyId: key.id, headers: { 'x-api-key': key.key } };
    },
    async stop() {
      await atrium.close();
      await database.drop();
    },
  };
}
