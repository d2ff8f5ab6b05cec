import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // graphql 16 ships an ESM build that Vite would pick while Node (and every GraphQL library loaded
    // from node_modules) loads the CommonJS one: two copies break `instanceof GraphQLError`. One copy.
    alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // @apollo/gateway (the federation test's independent client) otherwise probes the cloud metadata
    // addresses (169.254.169.254, 100.100.100.200) and reports usage to Apollo: no test may leave the
    // machine, and on a network that answers those probes it warned mid-run.
    env: { APOLLO_TELEMETRY_DISABLED: 'true' },
    // CI asks for a JSON report to count passes and failures across the SQLite and PostgreSQL runs.
    reporters: process.env.VITEST_JSON ? ['default', ['json', { outputFile: process.env.VITEST_JSON }]] : ['default'],
  },
});
