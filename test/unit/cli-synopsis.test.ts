import { describe, expect, it } from 'vitest';
import { ADMIN_COMMANDS } from '../../src/cli/commands.js';

/** The admin commands of decisions §2, with the options the table gives each. */
const DECIDED: Record<string, string[]> = {
  'orgs create': ['--name'],
  'users create': ['--handle', '--email', '--name', '--role', '--org', '--password'],
  'api-keys create': ['--user', '--tier', '--mode'],
  'api-keys revoke': ['ID'],
  'clients create': ['--name', '--redirect-uri', '--scopes', '--public', '--user'],
  'tokens issue': ['--user', '--scopes', '--client'],
  'webhooks create': ['--url', '--events', '--user'],
  'webhooks send-test': ['ID', '--type'],
  'signing-keys rotate': [],
  'products create': ['--name', '--price-cents'],
};

describe('admin command synopses', () => {
  it('has every command decisions §2 lists, each synopsis naming its options', () => {
    for (const [name, options] of Object.entries(DECIDED)) {
      const command = ADMIN_COMMANDS[name];
      expect(command, name).toBeDefined();
      for (const option of options) expect(command!.synopsis, name).toContain(option);
    }
  });

  it('starts each synopsis with the command it belongs to', () => {
    for (const [name, command] of Object.entries(ADMIN_COMMANDS)) {
      expect(command.synopsis === name || command.synopsis.startsWith(`${name} `), name).toBe(true);
    }
  });
});
