import { TIERS, KEY_MODES } from '../auth/api-keys.js';
import type { Services } from '../compose.js';
import { restUser } from '../http/rest/shapes.js';
import { SYSTEM_ACTOR } from '../domain/actor.js';
import { ROLES } from '../domain/users.js';
import { OAUTH_COMMANDS } from '../oauth/cli.js';
import { integer, oneOf, parse, required, withId } from './args.js';
import { WEBHOOK_COMMANDS } from '../webhooks/cli.js';

/** An admin command's work once its arguments are checked: returns the one JSON object to print. */
export type AdminJob = (services: Services) => Promise<unknown>;

/**
 * An admin command: its synopsis (decisions §2; printed by `atrium --help` and `atrium CMD --help`)
 * and `prepare`, which parses and checks every argument (a UsageError when they are wrong) and
 * returns the work. The command line prepares before it reads the configuration or opens the
 * database, so bad usage exits 2 having touched nothing: no file made, no migration run, no
 * connection tried. A check that needs the database is the work's, and a failure there exits 1.
 */
export interface AdminCommand {
  synopsis: string;
  prepare: (argv: string[]) => AdminJob;
}

export const ADMIN_COMMANDS: Record<string, AdminCommand> = {
  'orgs create': {
    synopsis: 'orgs create --name N',
    prepare: (argv) => {
      const { values } = parse(argv, { name: { type: 'string' } });
      const name = required(values, 'name');
      return async (s) => {
        const org = await s.core.organizations.create({ name });
        return { id: org.id, name: org.name, created_at: org.createdAt };
      };
    },
  },

  'users create': {
    synopsis:
      'users create --handle H --email E [--name "First Last"] [--role admin|member|viewer] [--org ID] [--password P]',
    prepare: (argv) => {
      const { values } = parse(argv, {
        handle: { type: 'string' },
        email: { type: 'string' },
        name: { type: 'string' },
        role: { type: 'string' },
        org: { type: 'string' },
        password: { type: 'string' },
      });
      const input = {
        handle: required(values, 'handle'),
        email: required(values, 'email'),
        name: values.name,
        role: oneOf(values.role, ROLES, 'role'),
        organizationId: values.org,
        password: values.password,
      };
      return async (s) => restUser(await s.core.users.create(input));
    },
  },

  'products create': {
    synopsis: 'products create --name N --price-cents P',
    prepare: (argv) => {
      const { values } = parse(argv, { name: { type: 'string' }, 'price-cents': { type: 'string' } });
      // The range is the core's (products.create): out of it is exit 1 naming price_cents.
      const priceCents = integer(required(values, 'price-cents'), 'price-cents')!;
      const name = required(values, 'name');
      return async (s) => {
        const p = await s.core.products.create({ name, priceCents });
        return {
          id: p.id,
          name: p.name,
          price_cents: p.priceCents,
          active: p.active,
          created_at: p.createdAt,
        };
      };
    },
  },

  'api-keys create': {
    synopsis: 'api-keys create --user ID [--tier free|starter|growth|enterprise] [--mode test|live]',
    prepare: (argv) => {
      const { values } = parse(argv, {
        user: { type: 'string' },
        tier: { type: 'string' },
        mode: { type: 'string' },
      });
      const input = {
        userId: required(values, 'user'),
        tier: oneOf(values.tier, TIERS, 'tier') ?? null,
        mode: oneOf(values.mode, KEY_MODES, 'mode') ?? 'test',
      };
      return (s) => s.apiKeys.create(input);
    },
  },

  'api-keys revoke': {
    synopsis: 'api-keys revoke ID',
    prepare: (argv) => {
      const { id } = withId(argv);
      return (s) => s.apiKeys.revoke(id);
    },
  },

  // clients create, tokens issue, signing-keys rotate
  ...OAUTH_COMMANDS,

  'users delete': {
    synopsis: 'users delete ID',
    prepare: (argv) => {
      const { id } = withId(argv);
      return async (s) => {
        const deleted = await s.core.users.delete(SYSTEM_ACTOR, id);
        return { id: deleted.id, deleted_at: deleted.deletedAt };
      };
    },
  },

  // webhooks create, list, delete, send-test, resend
  ...WEBHOOK_COMMANDS,
};
