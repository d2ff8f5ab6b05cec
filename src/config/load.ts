import { config as loadDotenv } from 'dotenv';
import { parseConfig, type Config } from './schema.js';

/** Reads `.env` (without overriding the real environment) and validates the result. */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  overrides: Record<string, string> = {},
): Config {
  if (env === process.env) loadDotenv({ quiet: true });
  return parseConfig({ ...env, ...overrides });
}
