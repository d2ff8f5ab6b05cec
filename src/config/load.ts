import pino from 'pino';
import { createLogger } from '../observability/logger.js';
import { readEnvFile } from './env-file.js';
import { parseConfig, VARIABLES, type Config } from './schema.js';

/** Reads `.env` (without overriding the real environment) and validates the result. */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  overrides: Record<string, string> = {},
): Config {
  const names = VARIABLES.map((v) => v.name);
  const typos = env === process.env ? readEnvFile('.env', env, names) : [];
  const config = parseConfig({ ...env, ...overrides });
  if (typos.length > 0) {
    // Synchronous, so a command that ends at once still shows the warning.
    const log = createLogger(config.logLevel, pino.destination({ fd: 2, sync: true }));
    for (const { key, line, meant } of typos) {
      log.warn(
        { file: '.env', line, key },
        `.env line ${line} sets ${key}, which Atrium does not read; did you mean ${meant}?`,
      );
    }
  }
  return config;
}
